"""A failed trace leaves torch's node metadata as it found it: the next
compile in the same process traces as if it were the first."""

import copy
import gc

import pytest
import torch
from torch import nn

import tilefx
from tilefx.dialects.names import AUTOCAST_META_KEY


class _Net(nn.Module):
    def __init__(self, blocks: bool = False):
        super().__init__()
        self.blocks = blocks
        self.conv = nn.Conv2d(2, 4, 3)
        self.fc = nn.Linear(4 * 4 * 4, 5)

    def forward(self, x):
        if self.blocks:
            with tilefx.Block("a", ipu_id=0):
                x = torch.relu(self.conv(x))
            with tilefx.Block("b", ipu_id=1):
                return self.fc(torch.flatten(x, 1))
        return self.fc(torch.flatten(torch.relu(self.conv(x)), 1))


class _Misfit(nn.Module):
    """float32 weights, then a matmul whose shapes do not fit."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(x) @ torch.ones(3, 2)


def _half_conv(blocks: bool = False) -> _Net:
    model = _Net(blocks)
    model.conv.half()
    return model


def _fails(make, x):
    """Compile the model `make()` builds (held only here) and expect a tilefx.Error."""
    with pytest.raises(tilefx.Error):
        tilefx.inferenceModel(make())(x)
    gc.collect()  # the model of the failed trace is freed now, not in the middle of the next trace


def test_failed_traces_leave_no_annotations_behind():
    torch.manual_seed(0)
    torch.fx.traceback.current_meta.setdefault("custom", {})  # as an earlier trace in the process leaves it
    held = torch.fx.traceback.current_meta["custom"]
    before = copy.deepcopy(dict(torch.fx.traceback.current_meta))
    x = torch.randn(3, 2, 6, 6)
    _fails(_half_conv, x)  # a float16 convolution fed a float32 input
    _fails(lambda: _half_conv(blocks=True).autocast(), x)  # raises inside the autocast scope, on 2 IPUs
    _fails(_Misfit, torch.randn(2, 8).half())  # a float16 input meeting float32 weights
    model = _Net().half()
    opts = tilefx.Options()
    opts.Precision.halfFloatCasting(tilefx.HalfFloatCastingBehavior.FloatDowncastToHalf)
    out = tilefx.inferenceModel(model, opts)(x.half())
    assert out.dtype == torch.float16
    torch.testing.assert_close(out, model(x.half()).detach(), rtol=1e-3, atol=1e-3)
    assert dict(torch.fx.traceback.current_meta) == before
    assert held == before["custom"]  # the dict a caller holds is put back too


def test_module_autocast_ends_with_a_forward_that_raised():
    class Raises(nn.Module):
        def forward(self, x):
            raise ValueError("stop")

    model = Raises().autocast()
    with pytest.raises(ValueError):
        model(torch.ones(1))
    assert AUTOCAST_META_KEY not in torch.fx.traceback.current_meta.get("custom", {})
