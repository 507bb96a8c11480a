"""The CNN kernels' fast paths against torch.ops.aten: max pooling's 2x2
index formula and its values-only kernel (with the executor choosing it only
when nothing reads the indices), over shapes, strides, dilation, ties, NaN,
infinities, integer and float16 inputs and non-contiguous views."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import tilefx
from tilefx.backend import emitter
from tilefx.backend.kernels import FIRST_RESULT_KERNELS
from test_kernels import check, h, r, ri, to_torch, _inputs_seeded_per_test, reseed  # noqa: F401 (the fixture)

reseed(3)  # this module's cases: the same data whatever was imported before

A = torch.ops.aten
_rng = np.random.default_rng(7)


def _ties(*shape):
    """Few distinct values: most windows hold equal maxima."""
    return _rng.integers(-2, 3, shape).astype(np.float32)


def _with_nan(*shape):
    x = r(*shape)
    x[0, 0, 1, 1] = np.nan
    x[1, 1, 2, 3] = np.nan
    x[1, 1, 2, 2] = np.nan  # two NaN in one window: the later wins
    return x


def _with_inf(*shape):
    x = r(*shape)
    x[0, 0, :2, :2] = -np.inf  # a whole window of -inf
    x[0, 1, 0, 0] = np.inf
    x[1, 0] = -np.inf
    return x


# (input, kernel, stride, padding, dilation, ceil_mode)
MAXPOOL_2X2 = {
    "cnn1": (r(40, 10, 24, 24), [2, 2], [], 0, 1, False),
    "cnn2": (r(40, 20, 8, 8), [2, 2], [2, 2], 0, 1, False),
    "ties": (_ties(3, 4, 8, 10), [2, 2], [], 0, 1, False),
    "ties-overlap": (_ties(2, 3, 7, 9), [2, 2], [1, 1], 0, 1, False),
    "stride-asym": (r(2, 3, 9, 11), [2, 2], [1, 2], 0, 1, False),
    "dilation": (_ties(2, 3, 10, 9), [2, 2], [2, 2], 0, [2, 3], False),
    "odd-floor": (r(2, 3, 7, 9), [2, 2], [], 0, 1, False),
    "ceil-exact": (r(2, 3, 8, 8), [2, 2], [], 0, 1, True),
    "nan": (_with_nan(2, 2, 6, 6), [2, 2], [], 0, 1, False),
    "inf": (_with_inf(2, 2, 6, 6), [2, 2], [], 0, 1, False),
    "int": (ri(2, 3, 6, 8), [2, 2], [], 0, 1, False),
    "f16": (h(2, 3, 6, 6), [2, 2], [], 0, 1, False),
    "noncontiguous": (r(2, 3, 8, 6).transpose(0, 1, 3, 2), [2, 2], [], 0, 1, False),
    "3d-input": (r(3, 8, 8), [2, 2], [], 0, 1, False),
    "empty": (r(0, 3, 4, 4), [2, 2], [], 0, 1, False),
}


@pytest.mark.parametrize("cfg", list(MAXPOOL_2X2.values()), ids=list(MAXPOOL_2X2))
def test_max_pool_2x2_indices(cfg):
    check("max_pool2d_with_indices.default", *cfg)


# values only: windows that tile the input, and the cases handed to the general kernel
MAXPOOL_VALUES = {
    **MAXPOOL_2X2,
    "3x3": (r(2, 3, 9, 10), [3, 3], [], 0, 1, False),
    "3x2": (_ties(2, 3, 10, 7), [3, 2], [3, 2], 0, 1, False),
    "1x2": (r(2, 3, 5, 8), [1, 2], [], 0, 1, False),
    "2x1": (r(2, 3, 8, 5), [2, 1], [], 0, 1, False),
    "nan-3x3": (_with_nan(2, 2, 6, 6), [3, 3], [], 0, 1, False),
    "padded": (r(2, 3, 9, 9), [3, 3], [2, 2], [1, 1], 1, False),
    "ceil": (r(2, 3, 7, 7), [2, 2], [2, 2], 0, 1, True),
    "overlap": (r(2, 3, 6, 7), [3, 2], [1, 1], 0, 1, False),
    "int-3x3": (ri(2, 3, 6, 6), [3, 3], [], 0, 1, False),
}


@pytest.mark.parametrize("cfg", list(MAXPOOL_VALUES.values()), ids=list(MAXPOOL_VALUES))
def test_max_pool_values_only(cfg):
    x, k, st, pd, dl, ceil = cfg
    before = x.copy()
    ours, none = FIRST_RESULT_KERNELS["max_pool2d_with_indices.default"](x, k, st, pd, dl, ceil)
    np.testing.assert_array_equal(x, before)  # the input is not written
    assert none is None
    ref = A.max_pool2d_with_indices(to_torch(x), k, st, pd, dl, ceil)[0].numpy()
    assert ours.dtype == ref.dtype and ours.shape == ref.shape
    np.testing.assert_array_equal(ours, ref)


class _Pool(nn.Module):
    def __init__(self, return_indices=False):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3)
        self.pool = nn.MaxPool2d(2, return_indices=return_indices)

    def forward(self, x):
        return self.pool(self.conv(x))


def _count_first_result_calls(monkeypatch) -> list:
    calls = []
    name = "aten.max_pool2d_with_indices"
    inner = emitter.FIRST_RESULT_TABLE[name]

    def spy(*args, **kwargs):
        calls.append(1)
        return inner(*args, **kwargs)

    monkeypatch.setitem(emitter.FIRST_RESULT_TABLE, name, spy)
    return calls


def test_executor_computes_pool_values_alone_when_indices_are_unread(monkeypatch):
    calls = _count_first_result_calls(monkeypatch)
    torch.manual_seed(0)
    model = _Pool().eval()
    x = torch.randn(4, 2, 10, 10)
    out = tilefx.inferenceModel(model)(x)
    torch.testing.assert_close(out, model(x), rtol=1e-5, atol=1e-6)
    assert calls  # inference: nothing reads the indices


def test_executor_keeps_the_indices_when_they_are_read(monkeypatch):
    calls = _count_first_result_calls(monkeypatch)
    torch.manual_seed(0)
    x = torch.randn(4, 2, 10, 10)
    model = _Pool(return_indices=True).eval()
    values, idx = tilefx.inferenceModel(model)(x)
    ref_values, ref_idx = model(x)
    torch.testing.assert_close(values, ref_values, rtol=1e-5, atol=1e-6)
    assert torch.equal(idx, ref_idx)

    class Train(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = _Pool()

        def forward(self, x):
            out = self.net(x)
            return out, out.square().mean()

    train = Train()
    trainer = tilefx.trainingModel(train, optimizer=tilefx.optim.SGD(train.parameters(), lr=0.1))
    trainer(x)
    assert not calls  # the backward reads the indices
