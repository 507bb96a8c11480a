"""The workloads of the machine-model validation (docs/machine-validation.md),
written in plain PyTorch at the published sizes: a BERT encoder stack with
its pre-training head, ViT-B/16, ResNet-50 v1.5 and a MobileNetV2-style network
(torchvision is not a dependency, so the networks are spelled out here)."""

from __future__ import annotations

import torch
from torch import nn

import tilefx



def _place_layers(layers, layers_per_ipu) -> None:
    """Pipeline `layers` as Graphcore's configs split them: IPU i starts at
    the first of its layers_per_ipu[i] layers (IPU 0 keeps what comes before)."""
    first = 0
    for ipu, n in enumerate(layers_per_ipu):
        if ipu and n:
            tilefx.BeginBlock(layers[first], f"ipu{ipu}", ipu_id=ipu)
        first += n

class BertLayer(nn.Module):
    """One post-LayerNorm BERT encoder layer (attention + GELU feed-forward)."""

    def __init__(self, d: int, heads: int, ffn: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.ln1 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, ffn)
        self.fc2 = nn.Linear(ffn, d)
        self.ln2 = nn.LayerNorm(d)

    def forward(self, x):
        b, s, d = x.shape
        h = self.heads
        q, k, v = self.qkv(x).view(b, s, 3, h, d // h).permute(2, 0, 3, 1, 4).unbind(0)
        att = torch.softmax(q @ k.transpose(-1, -2) * (d // h) ** -0.5, dim=-1)
        ctx = (att @ v).transpose(1, 2).reshape(b, s, d)
        x = self.ln1(x + self.out(ctx))
        return self.ln2(x + self.fc2(nn.functional.gelu(self.fc1(x))))


class Bert(nn.Module):
    """BERT for phase-1 pre-training: embeddings, `layers` encoder layers and
    the masked-LM head over `masked` positions per sequence (Graphcore's
    implementation gathers the masked tokens before the vocabulary projection).
    `layers_per_ipu` places the layers with BeginBlock as in the published
    pipelines: the embeddings share the first IPU, and the head, its weight
    tied to the word embedding, goes back to it (a later pipeline stage on IPU
    0, as optimum-graphcore places it; the options need AutoStage.AutoIncrement).
    `recompute`: a recomputation checkpoint after every layer."""

    def __init__(self, d=1024, heads=16, layers=24, ffn=4096, vocab=30528, seq=128, masked=20,
                 layers_per_ipu=None, head=True, recompute=False):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.ln = nn.LayerNorm(d)
        self.layers = nn.ModuleList([BertLayer(d, heads, ffn) for _ in range(layers)])
        self.masked = masked
        self.recompute = recompute
        self.head = nn.Linear(d, vocab, bias=False) if head else None
        if head:
            self.head.weight = self.tok.weight
        if layers_per_ipu:
            _place_layers(self.layers, layers_per_ipu)
            if head:
                tilefx.BeginBlock(self.head, "head", ipu_id=0)

    def forward(self, ids):
        x = self.ln(self.tok(ids) + self.pos.weight[: ids.shape[1]])
        for layer in self.layers:
            x = layer(x)
            if self.recompute:
                x = tilefx.recomputationCheckpoint(x)
        if self.head is None:
            return x
        return self.head(x[:, : self.masked])


class BertPretraining(nn.Module):
    def __init__(self, **kw):
        super().__init__()
        self.bert = Bert(**kw)

    def forward(self, ids, labels):
        logits = self.bert(ids)
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), labels.reshape(-1))
        return logits, loss


class BertSquad(nn.Module):
    """BERT for SQuAD fine-tuning: the encoder (no masked-LM head) and a span
    head (start and end logits per token) on the last IPU, with its loss."""

    def __init__(self, **kw):
        super().__init__()
        self.bert = Bert(head=False, **kw)
        self.span = nn.Linear(self.bert.tok.embedding_dim, 2)

    def forward(self, ids, positions):
        start, end = self.span(self.bert(ids)).float().unbind(-1)
        loss = nn.functional.cross_entropy(start, positions[:, 0]) + nn.functional.cross_entropy(end, positions[:, 1])
        return start, loss


class Bottleneck(nn.Module):
    def __init__(self, cin, mid, cout, stride, groups=1):
        super().__init__()
        self.c1 = nn.Conv2d(cin, mid, 1, bias=False)
        self.b1 = nn.BatchNorm2d(mid)
        self.c2 = nn.Conv2d(mid, mid, 3, stride, 1, groups=groups, bias=False)  # v1.5: stride in the 3x3
        self.b2 = nn.BatchNorm2d(mid)
        self.c3 = nn.Conv2d(mid, cout, 1, bias=False)
        self.b3 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        y = torch.relu(self.b2(self.c2(y)))
        y = self.b3(self.c3(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class ResNet50(nn.Module):
    """ResNet-50 v1.5 (He et al. 2016, stride-2 in the 3x3 convolution); with
    `groups` and `mid_width`, ResNeXt (Xie et al. 2017: ResNeXt-101 32x4d is
    blocks (3, 4, 23, 3), groups 32, mid_width 128)."""

    def __init__(self, classes=1000, width=64, blocks=(3, 4, 6, 3), groups=1, mid_width=None,
                 recompute_blocks=0):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        layers, cin = [], width
        for i, n in enumerate(blocks):
            mid, cout = (mid_width or width) * 2 ** i, width * 4 * 2 ** i
            for j in range(n):
                layers.append(Bottleneck(cin, mid, cout, 2 if (j == 0 and i > 0) else 1, groups))
                cin = cout
        self.body = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)
        self.recompute_blocks = recompute_blocks  # a recomputation checkpoint after each of the first N blocks

    def forward(self, x):
        x = self.stem(x)
        for i, block in enumerate(self.body):
            x = block(x)
            if i < self.recompute_blocks:
                x = tilefx.recomputationCheckpoint(x)
        return self.fc(x.mean((2, 3)))


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        mid = cin * expand
        self.use_res = stride == 1 and cin == cout
        layers = []
        if expand != 1:
            layers += [nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU()]
        layers += [nn.Conv2d(mid, mid, 3, stride, 1, groups=mid, bias=False), nn.BatchNorm2d(mid), nn.ReLU(),
                   nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.conv = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.conv(x) if self.use_res else self.conv(x)


class MobileNetV2(nn.Module):
    """MobileNetV2 (Sandler et al. 2018): 52 convolutions, each followed by batch norm
    (ReLU in place of ReLU6, which tilefx does not lower yet)."""

    SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                (6, 160, 3, 2), (6, 320, 1, 1))

    def __init__(self, classes=1000, settings=SETTINGS):
        super().__init__()
        layers = [nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU()]
        cin = 32
        for t, c, n, s in settings:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers += [nn.Conv2d(cin, 1280, 1, bias=False), nn.BatchNorm2d(1280), nn.ReLU()]
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(1280, classes)

    def forward(self, x):
        return self.fc(self.features(x).mean((2, 3)))


class WithCrossEntropy(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x, y):
        out = self.model(x)
        return out, nn.functional.cross_entropy(out.float(), y)


class EightBitInput(nn.Module):
    """A classifier fed 8-bit images, normalised on the IPU (Graphcore's CNN
    training streams uint8 images: eight_bit_io, normalization_location ipu),
    with its cross-entropy loss."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x, y):
        out = self.model((x.half() - 127.5) * (1 / 64))
        return out, nn.functional.cross_entropy(out.float(), y)


class BertStack(nn.Module):
    """`layers` BERT encoder layers on hidden states (no embeddings or head):
    the unit a pipeline stage holds. Its loss is the mean square of its output,
    enough to give every layer a backward pass."""

    def __init__(self, d=1024, heads=16, layers=1, ffn=4096, recompute=False):
        super().__init__()
        self.layers = nn.ModuleList([BertLayer(d, heads, ffn) for _ in range(layers)])
        self.recompute = recompute

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
            if self.recompute:  # Graphcore's recompute_checkpoint_every_layer
                x = tilefx.recomputationCheckpoint(x)
        return x, x.float().pow(2).mean()


class ViTLayer(nn.Module):
    """One pre-LayerNorm ViT encoder layer (Dosovitskiy et al. 2020; Hugging
    Face's ViTLayer, which Graphcore's ViT builds on)."""

    def __init__(self, d: int, heads: int, ffn: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d, eps=1e-6)
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d, eps=1e-6)
        self.fc1 = nn.Linear(d, ffn)
        self.fc2 = nn.Linear(ffn, d)

    def forward(self, x):
        b, s, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, h, d // h).permute(2, 0, 3, 1, 4).unbind(0)
        att = torch.softmax(q @ k.transpose(-1, -2) * (d // h) ** -0.5, dim=-1)
        x = x + self.out((att @ v).transpose(1, 2).reshape(b, s, d))
        return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))


class ViT(nn.Module):
    """ViT-B/16 for image classification at 224x224 (197 tokens: 196 patches
    and the class token), with its loss. `layers_per_ipu` pipelines the
    layers with BeginBlock (the patch embedding on the first IPU, the head on
    the last), `recompute` puts a recomputation checkpoint after every layer,
    `representation`: the pre-logits layer of pre-training (Linear + tanh)."""

    def __init__(self, d=768, heads=12, layers=12, ffn=3072, patch=16, image=224, classes=1000,
                 layers_per_ipu=None, recompute=False, representation=False):
        super().__init__()
        self.patch = nn.Conv2d(3, d, patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(torch.zeros(1, (image // patch) ** 2 + 1, d))
        self.layers = nn.ModuleList([ViTLayer(d, heads, ffn) for _ in range(layers)])
        self.ln = nn.LayerNorm(d, eps=1e-6)
        self.pre_logits = nn.Linear(d, d) if representation else None
        self.head = nn.Linear(d, classes)
        self.recompute = recompute
        if layers_per_ipu:
            _place_layers(self.layers, layers_per_ipu)
            tilefx.BeginBlock(self.ln, "head", ipu_id=len(layers_per_ipu) - 1)

    def forward(self, x, y):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        for layer in self.layers:
            x = layer(x)
            if self.recompute:
                x = tilefx.recomputationCheckpoint(x)
        x = self.ln(x[:, 0])
        if self.pre_logits is not None:
            x = torch.tanh(self.pre_logits(x))
        out = self.head(x)
        return out, nn.functional.cross_entropy(out.float(), y)


class ViTStack(nn.Module):
    """One ViT-B/16 encoder layer on token states, with BertStack's loss."""

    def __init__(self, d=768, heads=12, ffn=3072):
        super().__init__()
        self.layer = ViTLayer(d, heads, ffn)

    def forward(self, x):
        x = self.layer(x)
        return x, x.float().pow(2).mean()
