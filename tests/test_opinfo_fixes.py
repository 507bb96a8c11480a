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


def test_sparse_input_is_a_clear_error():
    """A sparse input failed inside the executor's batch slicing ('Sparse CSR
    tensors do not have strides'); it is now refused by name."""
    class MM(nn.Module):
        def forward(self, a, b):
            return a @ b

    a = torch.eye(3).to_sparse_csr()
    with pytest.raises(tilefx.Error, match=r"input a is a sparse_csr tensor: the IPU takes dense tensors"):
        tilefx.inferenceModel(MM())(a, torch.ones(3, 2))


@pytest.mark.parametrize("name, kwargs", [("cov", {}), ("cov", {"correction": 0}), ("corrcoef", {}),
                                          ("cov", {"fweights": torch.tensor([1, 2, 1, 3, 1])})])
def test_cov_bound_before_tracing(name, kwargs):
    """`torch.cov` / `torch.corrcoef` held before tracing (`from torch import
    cov`, PyTorch's OpInfo): tilefx swapped the module attribute only, so the
    held builtin reached ATen's composite and its host reads (aten::equal).
    The static formula is now the ops' own composite kernel while tracing."""
    torch.manual_seed(0)
    fn = getattr(torch, name)  # held, as an import at the top of a user's file holds it
    _check(lambda w: fn(w, **kwargs), torch.randn(3, 5))
