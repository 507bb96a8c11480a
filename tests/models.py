"""The model zoo the tests compare against PyTorch: an MLP, the pipelining
tutorial's CNN, a CNN with AvgPool2d/BatchNorm2d and a small transformer
encoder. Each training wrapper returns (output, loss)."""

import torch
from torch import nn

import tilefx


class MLP(nn.Module):
    def __init__(self, d_in=12, d_hidden=16, d_out=5, dropout=0.0):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.bn = nn.BatchNorm1d(d_hidden)
        self.act1 = nn.ReLU()
        self.fc2 = nn.Linear(d_hidden, d_hidden)
        self.ln = nn.LayerNorm(d_hidden)
        self.act2 = nn.GELU()
        self.drop = nn.Dropout(dropout)
        self.fc3 = nn.Linear(d_hidden, d_hidden)
        self.fc4 = nn.Linear(d_hidden, d_out)

    def forward(self, x):
        x = self.act1(self.bn(self.fc1(x)))
        x = self.drop(self.act2(self.ln(self.fc2(x))))
        x = torch.tanh(self.fc3(x)) + torch.sigmoid(x)
        return self.fc4(x)


class ConvLayer(nn.Module):
    def __init__(self, in_channels, num_filters, kernel_size, pool_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, num_filters, kernel_size=kernel_size)
        self.pool = nn.MaxPool2d(kernel_size=pool_size)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.pool(self.conv(x)))


class TutorialCNN(nn.Module):
    """The network of Graphcore's tutorial "PopTorch Parallel Execution Using
    Pipelining"."""

    def __init__(self):
        super().__init__()
        self.layer1 = ConvLayer(1, 10, 5, 2)
        self.layer2 = ConvLayer(10, 20, 5, 2)
        self.layer3 = nn.Linear(320, 256)
        self.layer3_act = nn.ReLU()
        self.layer4 = nn.Linear(256, 10)

    def forward(self, x):
        x = self.layer1(x)
        x = self.layer2(x)
        x = x.view(-1, 320)
        x = self.layer3_act(self.layer3(x))
        return self.layer4(x)


class PoolNormCNN(nn.Module):
    """AvgPool2d and BatchNorm2d, with padding and stride."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.pool1 = nn.AvgPool2d(2)
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8 * 2 * 2, 4)

    def forward(self, x):
        x = self.pool1(torch.relu(self.bn1(self.conv1(x))))
        x = torch.relu(self.bn2(self.conv2(x)))
        return self.fc(torch.flatten(x, 1))


class Attention(nn.Module):
    """Hand-written multi-head self-attention with softmax."""

    def __init__(self, d, heads, dropout):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.reshape(b, s, self.heads, d // self.heads).transpose(1, 2)
        k = k.reshape(b, s, self.heads, d // self.heads).transpose(1, 2)
        v = v.reshape(b, s, self.heads, d // self.heads).transpose(1, 2)
        att = torch.softmax(q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5, dim=-1)
        y = (self.drop(att) @ v).transpose(1, 2).reshape(b, s, d)
        return self.proj(y)


class EncoderLayer(nn.Module):
    def __init__(self, d, heads, dropout, torch_mha=False):
        super().__init__()
        self.torch_mha = torch_mha
        if torch_mha:
            self.attn = nn.MultiheadAttention(d, heads, dropout=dropout, batch_first=True)
        else:
            self.attn = Attention(d, heads, dropout)
        self.ln1 = nn.LayerNorm(d)
        self.ff1 = nn.Linear(d, 2 * d)
        self.ff2 = nn.Linear(2 * d, d)
        self.ln2 = nn.LayerNorm(d)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        h = self.ln1(x)
        a = self.attn(h, h, h, need_weights=False)[0] if self.torch_mha else self.attn(h)
        x = x + self.drop(a)
        return x + self.drop(self.ff2(nn.functional.gelu(self.ff1(self.ln2(x)))))


class Transformer(nn.Module):
    def __init__(self, vocab=20, d=16, heads=2, layers=2, seq=6, dropout=0.0, torch_mha=False):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(seq, d) * 0.1)
        self.layers = nn.ModuleList(
            [EncoderLayer(d, heads, dropout, torch_mha) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, tokens):
        x = self.embed(tokens) + self.pos
        for layer in self.layers:
            x = layer(x)
        return self.head(self.ln(x))


class WithLoss(nn.Module):
    """Training wrapper: returns (output, loss)."""

    def __init__(self, model, loss):
        super().__init__()
        self.model = model
        self.loss = loss

    def forward(self, x, target):
        out = self.model(x)
        if out.dim() == 3 and isinstance(self.loss, nn.CrossEntropyLoss):
            return out, self.loss(out.flatten(0, 1), target.flatten())
        return out, self.loss(out, target)


class WithConstants(nn.Module):
    """A model holding plain tensor attributes (not parameters, not buffers):
    the trace lifts them as `tilefx.const` arguments, one of each IR form of
    their value (a list, a splat, MLIR's hex form, bit patterns for inf/NaN)
    and of each element type tilefx carries (f32, bf16, i64, i1)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.table = torch.randn(40, 3)  # 120 elements: printed as dense<"0x...">
        self.floor = torch.tensor([0.25, float("-inf"), -0.5])  # non-finite: its bits, as i32
        self.missing = torch.tensor([1.0, float("nan"), 2.0])
        self.state = torch.zeros(5, 3)  # a splat, as an RNN's zero initial state
        self.mask = torch.tensor([True, False, True])
        self.order = torch.tensor([2, 0, 1])
        self.scale = torch.tensor([1.5, 2.25, 0.1], dtype=torch.bfloat16)

    def forward(self, x, idx):
        y = self.fc(x) + self.table[idx] + self.state
        y = torch.maximum(y, self.floor)
        y = torch.where(self.mask & ~torch.isnan(self.missing), y, -y)
        return y[:, self.order] * self.scale.float() * torch.tensor([2.0, 3.0, 4.0])


class ShardablePair(nn.Module):
    """A 128 x 256 weight (32,768 elements: over the 8192 from which replicated
    tensor sharding applies) and a 4 x 128 head (whole), with its loss. The
    backward reads head.weight (the input gradient of the ReLU) but not
    fc.weight (x needs no gradient): the tensor-location tests' model."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(256, 128)
        self.head = nn.Linear(128, 4)

    def forward(self, x, y):
        out = self.head(torch.relu(self.fc(x)))
        return out, nn.functional.cross_entropy(out, y)


class BlockCNN(nn.Module):
    """The tutorial network with Block("B1".."B4"), optional IPU ids."""

    def __init__(self, ipus=(None, None, None, None)):
        super().__init__()
        self.ipus = ipus
        self.layer1 = ConvLayer(1, 4, 5, 2)
        self.layer2 = ConvLayer(4, 8, 5, 2)
        self.layer3 = nn.Linear(128, 32)
        self.layer4 = nn.Linear(32, 10)
        self.loss = nn.CrossEntropyLoss()

    def forward(self, x, labels):
        with tilefx.Block("B1", ipu_id=self.ipus[0]):
            x = self.layer1(x)
        with tilefx.Block("B2", ipu_id=self.ipus[1]):
            x = self.layer2(x)
        with tilefx.Block("B3", ipu_id=self.ipus[2]):
            x = torch.relu(self.layer3(x.view(-1, 128)))
        with tilefx.Block("B4", ipu_id=self.ipus[3]):
            x = self.layer4(x)
            loss = self.loss(x, labels)
        return x, loss


def mnist_batches(steps, n):
    """`steps` seeded batches of n MNIST-sized images and labels."""
    g = torch.Generator().manual_seed(3)
    return [(torch.randn(n, 1, 28, 28, generator=g), torch.randint(0, 10, (n,), generator=g))
            for _ in range(steps)]
