"""The executor's numbers, saved from one tree and compared bit for bit with another's.

    python benchmarks/executor_identity.py save OUT.npz
    python benchmarks/executor_identity.py compare OUT.npz

A set of models runs through the PopTorch surface (`tilefx.trainingModel`,
`tilefx.inferenceModel`): a small BERT-like encoder (its attention fused in
inference), a grouped-query attention model, a CNN with BatchNorm trained with
SGD and AdamW, the encoder trained with AdamW for three steps. Every output and every weight after training is saved; `compare` reruns them
and fails unless each array is equal bit for bit (`np.array_equal` on the raw
bytes, so NaNs and signed zeros count). Run it under `TILEFX_KERNELS=numpy`
as well to cover the fused elementwise groups the numpy kernels take.
The kernels run on one thread (TILEFX_BLAS_THREADS=1, unless set): the
thread count otherwise follows the machine's load, and a reduction split
over another number of threads rounds differently.
"""

from __future__ import annotations

import copy
import os
import sys

import numpy as np
import torch
from torch import nn

os.environ.setdefault("TILEFX_BLAS_THREADS", "1")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import tilefx  # noqa: E402
from models import PoolNormCNN, Transformer, WithLoss  # noqa: E402
from identity_file import save_or_compare  # noqa: E402


class GroupedAttention(nn.Module):
    """Llama's attention shape: 4 query heads over 2 key/value heads
    (`repeat_kv`), a causal mask, SiLU gate: attention grouping, repeated
    mask ops (computed once) and elementwise chains."""

    def __init__(self, d=32, heads=4, kv=2):
        super().__init__()
        self.h, self.kv, self.e = heads, kv, d // heads
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, kv * self.e)
        self.v = nn.Linear(d, kv * self.e)
        self.o = nn.Linear(d, d)
        self.gate = nn.Linear(d, d)

    def forward(self, x):
        b, s, d = x.shape
        q = self.q(x).view(b, s, self.h, self.e).transpose(1, 2)
        k = self.k(x).view(b, s, self.kv, self.e).transpose(1, 2)
        v = self.v(x).view(b, s, self.kv, self.e).transpose(1, 2)
        r = self.h // self.kv
        k = k[:, :, None].expand(b, self.kv, r, s, self.e).reshape(b, self.h, s, self.e)
        v = v[:, :, None].expand(b, self.kv, r, s, self.e).reshape(b, self.h, s, self.e)
        mask = torch.triu(torch.full((s, s), float("-inf")), 1)
        y = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        y = self.o(y.transpose(1, 2).reshape(b, s, d))
        return y * nn.functional.silu(self.gate(x)) + x


def _arrays(prefix: str, value, out: dict) -> None:
    if isinstance(value, torch.Tensor):
        out[prefix] = value.detach().numpy().copy()
    elif isinstance(value, (tuple, list)):
        for k, v in enumerate(value):
            _arrays(f"{prefix}.{k}", v, out)


def _train(name: str, model: nn.Module, optimizer, batches, out: dict) -> None:
    trainer = tilefx.trainingModel(model, optimizer=optimizer)
    for step, args in enumerate(batches):
        _arrays(f"{name}.step{step}", trainer(*args), out)
    trainer.copyWeightsToHost()
    for k, v in model.state_dict().items():
        out[f"{name}.weights.{k}"] = v.detach().numpy().copy()
    trainer.destroy()


def _infer(name: str, model: nn.Module, batches, out: dict) -> None:
    runner = tilefx.inferenceModel(model.eval())
    for step, args in enumerate(batches):
        _arrays(f"{name}.call{step}", runner(*args), out)
    runner.destroy()


def run() -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    bert = Transformer(vocab=50, d=64, heads=4, layers=2, seq=16)
    toks = [(torch.randint(0, 50, (4, 16), generator=g),) for _ in range(2)]
    tgts = [torch.randint(0, 50, (4, 16), generator=g) for _ in range(3)]
    _infer("bert.infer", copy.deepcopy(bert), toks, out)
    m = WithLoss(copy.deepcopy(bert), nn.CrossEntropyLoss())
    _train("bert.adamw", m, tilefx.optim.AdamW(m.parameters(), lr=1e-3),
           [(toks[0][0], tgts[0]), (toks[1][0], tgts[1]), (toks[0][0], tgts[2])], out)

    gqa = GroupedAttention()
    xs = [(torch.randn(2, 8, 32, generator=g),) for _ in range(2)]
    _infer("gqa.infer", copy.deepcopy(gqa), xs, out)
    m = WithLoss(copy.deepcopy(gqa), nn.MSELoss())
    _train("gqa.sgd", m, tilefx.optim.SGD(m.parameters(), lr=0.01, momentum=0.9),
           [(x, torch.randn(2, 8, 32, generator=g)) for (x,) in xs], out)

    cnn = PoolNormCNN()
    imgs = [torch.randn(6, 3, 8, 8, generator=g) for _ in range(3)]
    labels = [torch.randint(0, 4, (6,), generator=g) for _ in range(3)]
    m = WithLoss(copy.deepcopy(cnn), nn.CrossEntropyLoss())
    _train("cnn.sgd", m, tilefx.optim.SGD(m.parameters(), lr=0.05, momentum=0.9),
           list(zip(imgs, labels)), out)
    m = WithLoss(copy.deepcopy(cnn), nn.CrossEntropyLoss())
    _train("cnn.adamw", m, tilefx.optim.AdamW(m.parameters(), lr=1e-3, weight_decay=0.01),
           list(zip(imgs, labels)), out)
    _infer("cnn.infer", copy.deepcopy(cnn), [(x,) for x in imgs[:2]], out)
    return out


def main() -> int:
    return save_or_compare(run, __doc__)


if __name__ == "__main__":
    sys.exit(main())
