"""What the OpInfo sweep (`make opinfo`, tests/fuzz/opinfo_sweep.py: PyTorch's
own operator database through tilefx) found, each against PyTorch on the
CPU: inference outputs equal, and for training the gradient of a fixed
weighting of the outputs (read back as the anchored `Gradient___w`)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import tilefx

TOL = {"rtol": 1e-5, "atol": 1e-6}


class _Op(nn.Module):
    """fn(w, *inputs) of one parameter w; training returns a fixed weighting
    of the output summed as the loss."""

    def __init__(self, fn, w, training=False):
        super().__init__()
        self.fn, self.training_loss = fn, training
        self.w = nn.Parameter(w.clone())

    def forward(self, *inputs):
        y = self.fn(self.w, *inputs)
        if not self.training_loss:
            return y
        probe = torch.sin(torch.arange(y.numel(), dtype=y.dtype) + 1).reshape(y.shape)
        return tilefx.identity_loss((y * probe).sum(), reduction="none")


def _check(fn, w, *inputs, tol=TOL, training=True):
    """Inference output and (training) loss and gradient equal eager's."""
    want = fn(w, *inputs)
    got = tilefx.inferenceModel(_Op(fn, w))(*inputs)
    torch.testing.assert_close(got, want, **tol)
    if not training:
        return
    ref = _Op(fn, w, training=True)
    loss = ref(*inputs)
    loss.backward()
    opts = tilefx.Options()
    opts.anchorTensor("grad", "Gradient___w")
    ours = _Op(fn, w, training=True)
    model = tilefx.trainingModel(ours, opts, optimizer=tilefx.optim.SGD(ours.parameters(), lr=0.0))
    torch.testing.assert_close(model(*inputs), loss.detach(), **tol)
    torch.testing.assert_close(model.getAnchoredTensor("grad"), ref.w.grad, **tol)


def test_repeated_multi_result_op_reads_a_result_the_first_left_unread():
    """torch.linalg.inv called twice: the first call's inverse is unread (only
    its error check reads the info result), so its step converted the info
    only; the executor took the second call for a repeat of the first and
    read an inverse that was never made (AttributeError inside the program).
    A repeat now reuses the first op's results only where the first read
    every result the repeat reads."""
    torch.manual_seed(0)
    w = torch.randn(4, 4) + 4 * torch.eye(4)

    def twice(w):
        torch.linalg.inv(w)  # checked for a singular matrix, the inverse dropped
        return torch.linalg.inv(w)

    _check(twice, w)
