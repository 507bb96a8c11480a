"""The workloads of the machine-model validation (docs/machine-validation.md),
written in plain PyTorch at the published sizes: a BERT encoder stack with
its pre-training head, ViT-B/16, ResNet-50 v1.5 and ResNeXt, a
MobileNetV2-style network, the medical UNet, Swin, G16-EfficientNet,
DINO, the CLIP text encoder and SchNet (torchvision is not a dependency, so
the networks are spelled out here)."""

from __future__ import annotations

import math

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
    def __init__(self, cin, mid, cout, stride, groups=1, norm=nn.BatchNorm2d):
        super().__init__()
        self.c1 = nn.Conv2d(cin, mid, 1, bias=False)
        self.b1 = norm(mid)
        self.c2 = nn.Conv2d(mid, mid, 3, stride, 1, groups=groups, bias=False)  # v1.5: stride in the 3x3
        self.b2 = norm(mid)
        self.c3 = nn.Conv2d(mid, cout, 1, bias=False)
        self.b3 = norm(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), norm(cout))

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        y = torch.relu(self.b2(self.c2(y)))
        y = self.b3(self.c3(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class ResNet50(nn.Module):
    """ResNet-50 v1.5 (He et al. 2016, stride-2 in the 3x3 convolution); with
    `groups` and `mid_width`, ResNeXt (Xie et al. 2017: ResNeXt-101 32x4d is
    blocks (3, 4, 23, 3), groups 32, mid_width 128). `norm_groups`: group
    norm of that many groups instead of batch norm (Graphcore's TensorFlow 1
    ResNeXt default, 32); `split_before`: the block that starts IPU 1, with
    `stage_recomputation` a checkpoint on its input (each pipeline stage
    recomputed from its input, the TensorFlow 1 example's
    enable_recomputation)."""

    def __init__(self, classes=1000, width=64, blocks=(3, 4, 6, 3), groups=1, mid_width=None,
                 recompute_blocks=0, norm_groups=None, split_before=None, stage_recomputation=False):
        super().__init__()
        norm = (lambda c: nn.GroupNorm(norm_groups, c)) if norm_groups else nn.BatchNorm2d
        self.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False), norm(width),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        layers, cin = [], width
        for i, n in enumerate(blocks):
            mid, cout = (mid_width or width) * 2 ** i, width * 4 * 2 ** i
            for j in range(n):
                layers.append(Bottleneck(cin, mid, cout, 2 if (j == 0 and i > 0) else 1, groups, norm))
                cin = cout
        self.body = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)
        self.recompute_blocks = recompute_blocks  # a recomputation checkpoint after each of the first N blocks
        if split_before is not None:
            tilefx.BeginBlock(self.body[split_before], "ipu1", ipu_id=1)
            if stage_recomputation:
                self.body[split_before].register_forward_pre_hook(
                    lambda module, args: (tilefx.recomputationCheckpoint(args[0]),))

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
    Face's ViTLayer, which Graphcore's ViT builds on). Graphcore's pre-training
    block (vision/vit/pytorch models/modules.py `Block`) differs in what the
    options add: `separate_qkv` (three query, key and value projections instead
    of one), `dropout` after the attention projection, the GELU and the MLP
    output, `attention_dropout` on the attention probabilities, and
    `mid_checkpoint` (a recomputation checkpoint after the attention's residual
    add, the configuration's recompute_mid_layers)."""

    def __init__(self, d: int, heads: int, ffn: int, dropout: float = 0.0, attention_dropout: float = 0.0,
                 separate_qkv: bool = False, mid_checkpoint: bool = False):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d, eps=1e-6)
        self.qkv = nn.ModuleList([nn.Linear(d, d) for _ in range(3)]) if separate_qkv else nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d, eps=1e-6)
        self.fc1 = nn.Linear(d, ffn)
        self.fc2 = nn.Linear(ffn, d)
        # no dropout op at all where the probability is 0 (a traced nn.Dropout(0) is one)
        self.drop = nn.Dropout(dropout) if dropout else nn.Identity()
        self.attention_drop = nn.Dropout(attention_dropout) if attention_dropout else nn.Identity()
        self.mid_checkpoint = mid_checkpoint

    def forward(self, x):
        b, s, d = x.shape
        h = self.heads
        y = self.ln1(x)
        if isinstance(self.qkv, nn.ModuleList):
            q, k, v = (f(y).view(b, s, h, d // h).transpose(1, 2) for f in self.qkv)
        else:
            q, k, v = self.qkv(y).view(b, s, 3, h, d // h).permute(2, 0, 3, 1, 4).unbind(0)
        att = self.attention_drop(torch.softmax(q @ k.transpose(-1, -2) * (d // h) ** -0.5, dim=-1))
        x = x + self.drop(self.out((att @ v).transpose(1, 2).reshape(b, s, d)))
        if self.mid_checkpoint:
            x = tilefx.recomputationCheckpoint(x)
        return x + self.drop(self.fc2(self.drop(nn.functional.gelu(self.fc1(self.ln2(x))))))


class ViT(nn.Module):
    """ViT-B/16 for image classification at 224x224 (197 tokens: 196 patches
    and the class token), with its loss. `layers_per_ipu` pipelines the
    layers with BeginBlock (the patch embedding on the first IPU, the head on
    the last), `recompute` puts a recomputation checkpoint after every layer,
    `representation`: the pre-logits layer of pre-training (Linear + tanh);
    `byteio`: 8-bit images scaled to [0, 1] on the IPU (Graphcore's ViT
    `byteio` option); `block`: ViTLayer's options for Graphcore's block (its
    `mid_checkpoint` goes to the layers `mid_checkpoints` names)."""

    def __init__(self, d=768, heads=12, layers=12, ffn=3072, patch=16, image=224, classes=1000,
                 layers_per_ipu=None, recompute=False, representation=False, byteio=False, block=None,
                 mid_checkpoints=()):
        super().__init__()
        self.byteio = byteio
        self.patch = nn.Conv2d(3, d, patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(torch.zeros(1, (image // patch) ** 2 + 1, d))
        self.layers = nn.ModuleList([ViTLayer(d, heads, ffn, mid_checkpoint=i in mid_checkpoints, **(block or {}))
                                     for i in range(layers)])
        self.ln = nn.LayerNorm(d, eps=1e-6)
        self.pre_logits = nn.Linear(d, d) if representation else None
        self.head = nn.Linear(d, classes)
        self.recompute = recompute
        if layers_per_ipu:
            _place_layers(self.layers, layers_per_ipu)
            tilefx.BeginBlock(self.ln, "head", ipu_id=len(layers_per_ipu) - 1)

    def forward(self, x, y):
        if self.byteio:
            x = x.to(self.patch.weight.dtype) * (1 / 255)
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


class _DoubleConv(nn.Sequential):
    """Two unpadded 3x3 convolutions with ReLU (Ronneberger et al. 2015)."""

    def __init__(self, cin: int, cout: int):
        super().__init__(nn.Conv2d(cin, cout, 3), nn.ReLU(), nn.Conv2d(cout, cout, 3), nn.ReLU())


class _UNetDown(nn.Module):
    """An encoder block: its double convolution, the centre crop its skip
    connection passes on and the 2x2 max pool (one module, so that a
    pipeline stage that holds the block also crops its skip before it
    crosses to a later IPU, as Graphcore's UNet places its crops)."""

    def __init__(self, cin: int, cout: int, crop: int):
        super().__init__()
        self.conv = _DoubleConv(cin, cout)
        self.crop = crop

    def forward(self, x):
        x = self.conv(x)
        lo = (x.shape[-1] - self.crop) // 2
        return nn.functional.max_pool2d(x, 2), x[..., lo:lo + self.crop, lo:lo + self.crop]


class _UNetUp(nn.Module):
    """A decoder block: concatenation with the skip connection, the double
    convolution, and the next block's 2x2 stride-2 transposed convolution
    with ReLU (`up`: that convolution's output channels; 0 for the last)."""

    def __init__(self, cin: int, cout: int, up: int):
        super().__init__()
        self.conv = _DoubleConv(cin, cout)
        self.up = nn.ConvTranspose2d(cout, up, 2, stride=2) if up else None

    def forward(self, x, skip):
        x = self.conv(torch.cat([x, skip], dim=1))
        return torch.relu(self.up(x)) if self.up is not None else x


class UNet(nn.Module):
    """The medical-imaging UNet of Graphcore's TensorFlow 2 example
    (graphcore/examples vision/unet_medical/tensorflow2 model.py): a 572x572
    one-channel image, filters 64-1024, unpadded convolutions, skip
    connections cropped to 392/200/104/56, dropout on the bottom block, a
    1x1 convolution to 2 classes at 388x388, and a cross-entropy plus dice
    loss. `pipelined`: its four pipeline stages (model_utils.py): encoder
    blocks 0-1; blocks 2-4 and the first transposed convolution; decoder
    blocks 0-1 and the third transposed convolution; the rest."""

    def __init__(self, classes: int = 2, pipelined: bool = True, dropout: float = 0.5):
        super().__init__()
        f = (64, 128, 256, 512, 1024)
        self.down = nn.ModuleList([_UNetDown(1 if i == 0 else f[i - 1], f[i], c)
                                   for i, c in enumerate((392, 200, 104, 56))])
        self.bottom = _DoubleConv(f[3], f[4])
        self.drop = nn.Dropout(dropout)
        self.up0 = nn.ConvTranspose2d(f[4], f[3], 2, stride=2)
        self.up = nn.ModuleList([_UNetUp(2 * f[3 - i], f[3 - i], f[2 - i] if i < 3 else 0) for i in range(4)])
        self.head = nn.Conv2d(f[0], classes, 1)
        if pipelined:
            tilefx.BeginBlock(self.down[2], "stage1", ipu_id=1)
            tilefx.BeginBlock(self.up[0], "stage2", ipu_id=2)
            tilefx.BeginBlock(self.up[2], "stage3", ipu_id=3)

    def forward(self, x, y):
        skips = []
        for block in self.down:
            x, skip = block(x)
            skips.append(skip)
        x = torch.relu(self.up0(self.drop(self.bottom(x))))
        for block in self.up:
            x = block(x, skips.pop())
        logits = self.head(x).float()
        ce = nn.functional.cross_entropy(logits, y)
        p = torch.softmax(logits, dim=1)[:, 1]
        t = y.float()
        dice = 1 - (2 * (p * t).sum() + 1) / (p.sum() + t.sum() + 1)
        return logits, ce + dice


class _SwinBlock(nn.Module):
    """A Swin Transformer block (Liu et al. 2021, arXiv:2103.14030): multi-head
    self-attention within 7x7 windows, with a learnt relative position bias,
    the windows shifted by half a window on odd blocks (the cyclic shift
    written as slices and a concatenation, as Graphcore's IPU port writes
    it, with the shifted windows' attention mask), then a GELU MLP; pre-norm
    residuals."""

    def __init__(self, dim: int, resolution: int, heads: int, window: int = 7, shift: bool = False):
        super().__init__()
        self.dim, self.res, self.heads = dim, resolution, heads
        self.window = min(window, resolution)
        self.shift = self.window // 2 if shift and resolution > window else 0
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)
        w = self.window
        self.bias_table = nn.Parameter(torch.zeros((2 * w - 1) ** 2, heads))
        coords = torch.stack(torch.meshgrid(torch.arange(w), torch.arange(w), indexing="ij")).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (w - 1)
        self.register_buffer("bias_index", rel[..., 0] * (2 * w - 1) + rel[..., 1], persistent=False)
        mask = None
        if self.shift:
            region = torch.zeros(resolution, resolution)
            cuts = (slice(0, -w), slice(-w, -self.shift), slice(-self.shift, None))
            for i, (h, v) in enumerate((h, v) for h in cuts for v in cuts):
                region[h, v] = i
            r = self._windows(region[None, :, :, None]).flatten(1)
            mask = (r[:, None, :] != r[:, :, None]).float() * -100.0
        self.register_buffer("mask", mask, persistent=False)

    def _windows(self, x):
        b, h, w_, c = x.shape
        w = self.window
        return x.view(b, h // w, w, w_ // w, w, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, w * w, c)

    def _roll(self, x, s):
        x = torch.cat([x[:, s:], x[:, :s]], dim=1)
        return torch.cat([x[:, :, s:], x[:, :, :s]], dim=2)

    def forward(self, x):
        b, n, c = x.shape
        r, w, h = self.res, self.window, self.heads
        y = self.norm1(x).view(b, r, r, c)
        if self.shift:
            y = self._roll(y, self.shift)
        y = self._windows(y)
        q, k, v = self.qkv(y).view(-1, w * w, 3, h, c // h).permute(2, 0, 3, 1, 4).unbind(0)
        att = (q * (c // h) ** -0.5) @ k.transpose(-1, -2)
        att = att + self.bias_table[self.bias_index.reshape(-1)].view(w * w, w * w, h).permute(2, 0, 1)
        if self.mask is not None:
            windows = self.mask.shape[0]
            att = (att.view(-1, windows, h, w * w, w * w) + self.mask[None, :, None]).view(-1, h, w * w, w * w)
        y = (torch.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(-1, w, w, c)
        y = y.view(b, r // w, r // w, w, w, c).permute(0, 1, 3, 2, 4, 5).reshape(b, r, r, c)
        if self.shift:
            y = self._roll(y, r - self.shift)
        x = x + self.proj(y.reshape(b, n, c))
        return x + self.fc2(nn.functional.gelu(self.fc1(self.norm2(x))))


class _PatchMerging(nn.Module):
    """Swin's downsampling: each 2x2 group of tokens concatenated (4C), layer
    norm, and a linear map to 2C."""

    def __init__(self, dim: int, resolution: int):
        super().__init__()
        self.res = resolution
        self.norm = nn.LayerNorm(4 * dim)
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)

    def forward(self, x):
        b, n, c = x.shape
        x = x.view(b, self.res, self.res, c)
        x = torch.cat([x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]], dim=-1)
        return self.reduction(self.norm(x.reshape(b, -1, 4 * c)))


class Swin(nn.Module):
    """Swin Transformer for ImageNet classification (Liu et al. 2021; the
    model of graphcore/examples vision/swin/pytorch), with the soft-target
    cross-entropy of its mixup training. Defaults: Swin-T (embedding 96,
    depths 2-2-6-2, heads 3-6-12-24, window 7, 224x224 images, patches of
    4). `blocks_per_ipu` places the blocks with BeginBlock as Graphcore's
    LAYERS_PER_IPU does (the patch embedding on the first IPU; a stage's
    patch merging goes with the blocks before it). It places no
    recomputation checkpoint (Graphcore's configurations set none)."""

    def __init__(self, embed=96, depths=(2, 2, 6, 2), heads=(3, 6, 12, 24), window=7, image=224, patch=4,
                 classes=1000, blocks_per_ipu=None):
        super().__init__()
        self.patch = nn.Conv2d(3, embed, patch, stride=patch)
        self.patch_norm = nn.LayerNorm(embed)
        res = image // patch
        self.stages = nn.ModuleList()
        for i, (depth, h) in enumerate(zip(depths, heads)):
            dim = embed * 2 ** i
            blocks = [_SwinBlock(dim, res, h, window, shift=j % 2 == 1) for j in range(depth)]
            if i < len(depths) - 1:
                blocks.append(_PatchMerging(dim, res))
                res //= 2
            self.stages.append(nn.Sequential(*blocks))
        self.norm = nn.LayerNorm(embed * 2 ** (len(depths) - 1))
        self.head = nn.Linear(embed * 2 ** (len(depths) - 1), classes)
        blocks = [b for s in self.stages for b in s if isinstance(b, _SwinBlock)]
        if blocks_per_ipu:
            _place_layers(blocks, blocks_per_ipu)

    def logits(self, x):
        x = self.patch_norm(self.patch(x).flatten(2).transpose(1, 2))
        for stage in self.stages:
            x = stage(x)
        return self.head(self.norm(x).mean(1))

    def forward(self, x, target):
        out = self.logits(x)
        return out, (-target * torch.log_softmax(out.float(), dim=-1)).sum(-1).mean()


class Logits(nn.Module):
    """A classifier's inference graph: images in, its `logits` out (no loss)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model.logits(x)


class _ClipLayer(nn.Module):
    """One pre-LayerNorm CLIP text-transformer layer: causal self-attention
    (separate q, k, v projections) and a quick-GELU MLP (x * sigmoid(1.702 x))."""

    def __init__(self, d: int, heads: int, ffn: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.q, self.k, self.v, self.out = (nn.Linear(d, d) for _ in range(4))
        self.fc1, self.fc2 = nn.Linear(d, ffn), nn.Linear(ffn, d)

    def forward(self, x, mask):
        b, s, d = x.shape
        h = self.heads
        y = self.ln1(x)
        q, k, v = (p(y).view(b, s, h, d // h).transpose(1, 2) for p in (self.q, self.k, self.v))
        att = torch.softmax(q @ k.transpose(-1, -2) * (d // h) ** -0.5 + mask, dim=-1)
        x = x + self.out((att @ v).transpose(1, 2).reshape(b, s, d))
        y = self.fc1(self.ln2(x))
        return x + self.fc2(y * torch.sigmoid(1.702 * y))


class ClipTextEncoder(nn.Module):
    """The CLIP ViT-L/14 text encoder (Radford et al. 2021), the one Stable
    Diffusion v1 conditions on: 12 layers of width 768, 12 heads, MLP 3072,
    49,408 tokens, 77 positions, causal attention, a final layer norm; its
    outputs are the last hidden states and the pooled state of each
    sequence's end-of-text token (the largest token id, as Hugging Face's
    CLIPTextModel pools it)."""

    def __init__(self, d=768, heads=12, layers=12, ffn=3072, vocab=49408, seq=77):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(seq, d))
        self.layers = nn.ModuleList([_ClipLayer(d, heads, ffn) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.register_buffer("mask", torch.full((seq, seq), -1e4).triu(1), persistent=False)

    def forward(self, ids):
        x = self.tok(ids) + self.pos[: ids.shape[1]]
        mask = self.mask[: ids.shape[1], : ids.shape[1]].to(x.dtype)
        for layer in self.layers:
            x = layer(x, mask)
        x = self.ln(x)
        return x, x[torch.arange(ids.shape[0]), ids.argmax(-1)]


def _round_filters(filters: float, width: float, divisor: int = 8) -> int:
    """EfficientNet's channel rounding (Tan and Le 2019; round_filters in Graphcore's
    TensorFlow 1 EfficientNet): scale by the width coefficient, round to the
    divisor, never more than 10% down."""
    filters *= width
    rounded = max(divisor, int(filters + divisor / 2) // divisor * divisor)
    return int(rounded + divisor if rounded < 0.9 * filters else rounded)


class _GroupNorm(nn.GroupNorm):
    """Graphcore's EfficientNet normalisation: group norm over min(C, groups) groups."""

    def __init__(self, channels: int, groups: int = 4):
        super().__init__(min(channels, groups), channels, eps=1e-3)


class _MBConv(nn.Module):
    """EfficientNet's mobile inverted bottleneck with squeeze-and-excitation
    (Tan and Le 2019), as Graphcore's G16 variant builds it (Masters et al. 2021,
    arXiv:2106.03640): the depthwise convolution becomes a grouped one of
    `group_dim` channels per group, group norm replaces batch norm, swish
    activations, a residual where the shapes allow."""

    def __init__(self, cin: int, cout: int, kernel: int, stride: int, expand: int, group_dim: int,
                 se_ratio: float = 0.25):
        super().__init__()
        mid = cin * expand
        self.expand = nn.Sequential(nn.Conv2d(cin, mid, 1, bias=False), _GroupNorm(mid), nn.SiLU()) \
            if expand != 1 else None
        self.conv = nn.Sequential(nn.Conv2d(mid, mid, kernel, stride, kernel // 2, groups=max(mid // group_dim, 1),
                                            bias=False), _GroupNorm(mid), nn.SiLU())
        reduced = max(1, int(cin * se_ratio))
        self.se = nn.Sequential(nn.Conv2d(mid, reduced, 1), nn.SiLU(), nn.Conv2d(reduced, mid, 1), nn.Sigmoid())
        self.project = nn.Sequential(nn.Conv2d(mid, cout, 1, bias=False), _GroupNorm(cout))
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.conv(x if self.expand is None else self.expand(x))
        y = self.project(y * self.se(y.mean((2, 3), keepdim=True)))
        return x + y if self.residual else y


class EfficientNet(nn.Module):
    """EfficientNet (Tan and Le 2019) in the form of Graphcore's TensorFlow 1
    example (vision/cnns/tensorflow1/training/Models/efficientnet.py): the B0
    stages (kernel, repeats, input and output filters, stride) scaled by
    `width` and `depth`, expansion `expand` (Graphcore's G16 configurations:
    4), grouped convolutions of `group_dim` channels, group norm with 4
    groups, a 1280 x width head convolution, dropout and the classifier.
    Defaults: G16-EfficientNet-B4 (width 1.4, depth 1.8, 380x380 images).
    `split_before`: the index of the block that starts IPU 1 (Graphcore's
    pipeline_splits [block4a] is block 10 of B4); `stage_recomputation`: a
    recomputation checkpoint on IPU 1's input, so each pipeline stage's
    forward is recomputed from its input (the example's
    enable_recomputation). Stochastic depth is left out (a per-image mask).
    `stages`: the first of B0's stages only, for small test networks."""

    STAGES = ((3, 1, 32, 16, 1), (3, 2, 16, 24, 2), (5, 2, 24, 40, 2), (3, 3, 40, 80, 2), (5, 3, 80, 112, 1),
              (5, 4, 112, 192, 2), (3, 1, 192, 320, 1))

    def __init__(self, width: float = 1.4, depth: float = 1.8, expand: int = 4, group_dim: int = 16,
                 classes: int = 1000, dropout: float = 0.4, split_before: int | None = None,
                 stage_recomputation: bool = False, stages: tuple = STAGES):
        super().__init__()
        stem = _round_filters(32, width)
        self.stem = nn.Sequential(nn.Conv2d(3, stem, 3, 2, 1, bias=False), _GroupNorm(stem), nn.SiLU())
        blocks = []
        for i, (kernel, repeats, cin, cout, stride) in enumerate(stages):
            cin, cout = _round_filters(cin, width), _round_filters(cout, width)
            for j in range(math.ceil(depth * repeats)):
                blocks.append(_MBConv(cin if j == 0 else cout, cout, kernel, stride if j == 0 else 1,
                                      1 if i == 0 else expand, group_dim))
        self.blocks = nn.Sequential(*blocks)
        top = _round_filters(1280, width)
        self.top = nn.Sequential(nn.Conv2d(cout, top, 1, bias=False), _GroupNorm(top), nn.SiLU())
        self.drop = nn.Dropout(dropout) if dropout else nn.Identity()
        self.fc = nn.Linear(top, classes)
        if split_before is not None:
            tilefx.BeginBlock(self.blocks[split_before], "ipu1", ipu_id=1)
            if stage_recomputation:
                self.blocks[split_before].register_forward_pre_hook(
                    lambda module, args: (tilefx.recomputationCheckpoint(args[0]),))

    def forward(self, x):
        return self.fc(self.drop(self.top(self.blocks(self.stem(x))).mean((2, 3))))


def _as_buffers(module: nn.Module) -> nn.Module:
    """Make a module's parameters buffers: DINO's teacher is not trained by
    the optimizer but moved towards the student by an exponential moving
    average at every step, which a forward may write into a buffer."""
    for m in module.modules():
        for name, p in list(m.named_parameters(recurse=False)):
            delattr(m, name)
            m.register_buffer(name, p.detach().clone())
    return module


class _DinoViT(nn.Module):
    """DINO's backbone (Caron et al. 2021, arXiv:2104.14294; Graphcore's
    vision/dino/pytorch core/vision_transformer.py): ViT layers on 16x16
    patches, the class token of the final layer norm as the feature. A
    `local` image (96x96, 6x6 patches) takes the 14x14 position embeddings
    by nearest-neighbour interpolation, as interpolate_pos_encoding does
    (scale 0.4357: rows and columns 0, 2, 4, 6, 9, 11). `ipu_of_layer`
    places each layer (the embedding on IPU 0) with Block, which a second
    pass over the same layers may reuse; `recompute`: a recomputation
    checkpoint on the input of each IPU's first layer but IPU 0's."""

    def __init__(self, d: int, heads: int, layers: int, ffn: int, image: int = 224, patch: int = 16,
                 local: int = 96, ipu_of_layer: list[int] | None = None, recompute: bool = False):
        super().__init__()
        self.patch = nn.Conv2d(3, d, patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        grid = image // patch
        self.pos = nn.Parameter(torch.zeros(1, grid * grid + 1, d))
        keep = [int(i / 0.4357) for i in range(local // patch)]
        self.register_buffer("local_pos", torch.tensor([0] + [1 + r * grid + c for r in keep for c in keep]),
                             persistent=False)
        self.layers = nn.ModuleList([ViTLayer(d, heads, ffn) for _ in range(layers)])
        self.norm = nn.LayerNorm(d, eps=1e-6)
        self.ipu_of_layer = ipu_of_layer or [0] * layers
        self.recompute = recompute

    def forward(self, x):
        with tilefx.Block("ipu0", ipu_id=0):
            x = self.patch(x).flatten(2).transpose(1, 2)
            pos = self.pos if x.shape[1] + 1 == self.pos.shape[1] else self.pos[:, self.local_pos]
            x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + pos
        for i, (layer, ipu) in enumerate(zip(self.layers, self.ipu_of_layer)):
            with tilefx.Block(f"ipu{ipu}", ipu_id=ipu):
                if self.recompute and ipu != (self.ipu_of_layer[i - 1] if i else 0):
                    x = tilefx.recomputationCheckpoint(x)
                x = layer(x)
        with tilefx.Block(f"ipu{self.ipu_of_layer[-1]}", ipu_id=self.ipu_of_layer[-1]):
            return self.norm(x)[:, 0]


class _DinoHead(nn.Module):
    """DINO's projection head: a 3-layer GELU MLP to a 256-wide bottleneck,
    l2-normalised, and the weight-normalised last layer (its gains fixed at
    1, norm_last_layer) to `out` prototypes, in two halves as Graphcore's
    DINOHead splits it (`project`: what follows the MLP)."""

    def __init__(self, d: int, out: int, hidden: int = 2048, bottleneck: int = 256):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(d, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(),
                                 nn.Linear(hidden, bottleneck))
        self.last0 = nn.Parameter(torch.zeros(out // 2, bottleneck))
        self.last1 = nn.Parameter(torch.zeros(out // 2, bottleneck))

    def project(self, x):
        x = nn.functional.normalize(x, dim=-1)
        return torch.cat([x @ (v / v.norm(dim=1, keepdim=True)).t() for v in (self.last0, self.last1)], dim=-1)

    def forward(self, x):
        return self.project(self.mlp(x))


class Dino(nn.Module):
    """DINO self-distillation training as Graphcore's MultiCropWrapper runs
    it (vision/dino/pytorch core/dino.py): 8-bit global (224x224) and local
    (96x96) crops normalised on the IPU; the fp16 student ViT on every crop
    and its fp32 head; the teacher, an exponential moving average of the
    student updated at every step on the IPU of each weight (Graphcore's
    ExpMovAvg custom op), on the global crops; the cross-entropy of each
    student view against the other global views' centred, sharpened teacher
    softmax (`half`: the ViTs in fp16). `pipeline`: layers per IPU, teacher and student alike
    (Graphcore's [1, 2, 2, 2, 2, 2, 1, 0]: the heads' MLPs on the seventh IPU,
    their last layers and the loss on the eighth; AutoStage.SameAsIpu).
    `stage_recomputation`: PopTorch's default for a model pipelined over
    several IPUs without checkpoints (see Swin), a checkpoint on each later
    IPU's input: its first student layer's, and the heads' MLP outputs the
    last IPU receives (`last_inputs_checkpointed=False`: the first only, to
    show what tilefx's recomputation then does; docs/machine-validation.md). Its placement is written with
    Block, since the student runs its layers twice (global, then local
    crops), as PopTorch's BeginBlock allows."""

    def __init__(self, d=768, heads=12, layers=12, ffn=3072, out=65536, image=224, local=96,
                 pipeline=(1, 2, 2, 2, 2, 2, 1, 0), momentum=0.996, stage_recomputation=True, half=True,
                 last_inputs_checkpointed=True):
        super().__init__()
        self.ipu_of_layer = [ipu for ipu, n in enumerate(pipeline) for _ in range(n)]
        self.last_ipu = len(pipeline) - 1
        self.student = _DinoViT(d, heads, layers, ffn, image, local=local, ipu_of_layer=self.ipu_of_layer,
                                recompute=stage_recomputation)
        self.teacher = _DinoViT(d, heads, layers, ffn, image, local=local, ipu_of_layer=self.ipu_of_layer)
        self.student_head, self.teacher_head = _DinoHead(d, out), _DinoHead(d, out)
        _as_buffers(self.teacher)
        _as_buffers(self.teacher_head)
        if half:  # Graphcore's --half: the two ViTs in fp16, the heads and the loss in fp32
            self.student.half()
            self.teacher.half()
        self.register_buffer("center", torch.zeros(1, out), persistent=False)
        self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1), persistent=False)
        self.momentum = momentum
        self.last_inputs_checkpointed = last_inputs_checkpointed

    def _ipu_of(self, name: str) -> int:
        if name.startswith("layers."):
            return self.ipu_of_layer[int(name.split(".")[1])]
        return self.ipu_of_layer[-1] if name.startswith("norm.") else 0

    def _images(self, x):
        x = x.transpose(0, 1).reshape(-1, *x.shape[2:])  # crop-major, as torch.chunk and cat order them
        return ((x.float() / 255 - self.mean) / self.std).to(self.student.patch.weight.dtype)

    @torch.no_grad()
    def _ema(self):
        """teacher = momentum x teacher + (1 - momentum) x student, each weight on its IPU."""
        pairs = [(n, p, self.teacher.get_buffer(n), self._ipu_of(n)) for n, p in self.student.named_parameters()]
        pairs += [(n, p, self.teacher_head.get_buffer(n), self.last_ipu - (n.startswith("mlp.")))
                  for n, p in self.student_head.named_parameters()]
        for _, p, b, ipu in pairs:
            with tilefx.Block(f"ipu{ipu}", ipu_id=ipu):
                b.mul_(self.momentum).add_(p.detach(), alpha=1 - self.momentum)

    def forward(self, global_crops, local_crops):
        head = f"ipu{self.last_ipu - 1}"
        with tilefx.Block("ipu0", ipu_id=0):  # the layers' own blocks nest inside
            g, c = self._images(global_crops), self._images(local_crops)
            student = self.student(g), self.student(c)
            with tilefx.Block(head, ipu_id=self.last_ipu - 1):
                student = self.student_head.mlp(torch.cat(student).float())
            self._ema()
            with torch.no_grad():
                teacher = self.teacher(g)
                with tilefx.Block(head, ipu_id=self.last_ipu - 1):
                    teacher = self.teacher_head.mlp(teacher.float())
        with tilefx.Block(f"ipu{self.last_ipu}", ipu_id=self.last_ipu):
            if self.student.recompute and self.last_inputs_checkpointed:
                # the last IPU's inputs, stashed as PopART stashes a stage's input
                student, teacher = tilefx.recomputationCheckpoint(student, teacher)
            teacher = self.teacher_head.project(teacher).detach()
            s = (self.student_head.project(student) / 0.1).log_softmax(-1).chunk(
                global_crops.shape[1] + local_crops.shape[1])
            t = ((teacher - self.center) / 0.04).softmax(-1).chunk(global_crops.shape[1])
            terms = [-(q * s[v]).sum(-1).mean() for i, q in enumerate(t) for v in range(len(s)) if v != i]
            return teacher.mean(0, keepdim=True), sum(terms) / len(terms)


def _shifted_softplus(x):
    """SchNet's activation, log(0.5 e^x + 0.5), written as Graphcore's
    HydroNet benchmark writes it (FastShiftedSoftplus): log1p(e^-|x|) + max(x, 0) - log 2."""
    return torch.log1p(torch.exp(-x.abs())) + x.clamp_min(0.0) - math.log(2.0)


class SchNetInteraction(nn.Module):
    """One SchNet interaction block as PyTorch Geometric's InteractionBlock
    builds it: the continuous-filter convolution (a filter network of two
    linears on the edges' Gaussian-expanded distances, scaled by a cosine
    cutoff; the neighbours' features, projected, gathered along the edges,
    multiplied by the filters and summed into each atom), then a shifted
    softplus and a linear."""

    def __init__(self, features: int = 100, gaussians: int = 25, cutoff: float = 6.0):
        super().__init__()
        self.cutoff = cutoff
        self.filter1, self.filter2 = nn.Linear(gaussians, features), nn.Linear(features, features)
        self.project = nn.Linear(features, features, bias=False)
        self.conv_out, self.out = nn.Linear(features, features), nn.Linear(features, features)

    def forward(self, h, src, dst, dist, attr):
        scale = 0.5 * (torch.cos(dist * (math.pi / self.cutoff)) + 1.0)
        w = self.filter2(_shifted_softplus(self.filter1(attr))) * scale[:, None]
        messages = self.project(h).index_select(0, src) * w
        return self.out(_shifted_softplus(self.conv_out(torch.zeros_like(h).index_add(0, dst, messages))))


class SchNet(nn.Module):
    """SchNet (Schütt et al. 2017) as Graphcore's HydroNet benchmark trains it
    (graphcore-research/hydronet-gnn hydronet/model.py: PyTorch Geometric's
    SchNet at a fixed size, its interaction graph the k nearest neighbours
    within each molecule and the cutoff, from the full pairwise-distance
    matrix and a top-k): atom embeddings, `interactions` blocks on the
    Gaussian-expanded distances, a two-layer per-atom energy summed per
    molecule into `graphs` slots, and the mean square error over the slots
    with a non-zero target. Inputs: atomic numbers, positions and each
    atom's molecule for one micro-batch (a leading dimension of 1, as the
    benchmark's data loader gives them), and the molecules' energies."""

    def __init__(self, features=100, interactions=4, gaussians=25, cutoff=6.0, k=28, graphs=42):
        super().__init__()
        self.k, self.cutoff, self.graphs = k, cutoff, graphs
        self.embedding = nn.Embedding(100, features)
        self.register_buffer("offsets", torch.linspace(0.0, cutoff, gaussians), persistent=False)
        self.coeff = -0.5 / (cutoff / (gaussians - 1)) ** 2
        self.blocks = nn.ModuleList([SchNetInteraction(features, gaussians, cutoff) for _ in range(interactions)])
        self.energy1, self.energy2 = nn.Linear(features, features // 2), nn.Linear(features // 2, 1)

    def neighbours(self, pos, batch):
        """(source, target, distance) of each atom's k nearest neighbours: the
        same atom, other molecules' atoms and atoms beyond the cutoff are put
        at the cutoff, where the cosine cutoff zeroes their messages."""
        n = pos.shape[0]
        d = (pos[:, None, :] - pos[None, :, :]).pow(2).sum(-1).sqrt()
        idx = torch.arange(n, device=pos.device)
        mask = (idx[:, None] == idx[None, :]) | (batch[:, None] != batch[None, :]) | (d > self.cutoff)
        negd, nbr = torch.topk(-d.masked_fill(mask, self.cutoff), self.k)
        return nbr.flatten(), idx[:, None].expand(n, self.k).flatten(), -negd.flatten()

    def forward(self, z, pos, batch, target):
        z, pos, batch, target = z[0], pos[0], batch[0], target[0]
        src, dst, dist = self.neighbours(pos, batch)
        attr = torch.exp(self.coeff * (dist[:, None] - self.offsets) ** 2)
        h = self.embedding(z)
        for block in self.blocks:
            h = h + block(h, src, dst, dist, attr)
        e = self.energy2(_shifted_softplus(self.energy1(h))).squeeze(-1)
        energy = torch.zeros(self.graphs, dtype=e.dtype, device=e.device).index_add(0, batch, e)
        return energy, ((energy - target) ** 2).sum() / (target != 0).to(e.dtype).sum()
