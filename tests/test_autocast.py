"""Automatic mixed precision: the forms of autocast, the default and custom
policies, and what the IR looks like after ipu-autocast."""

import copy
import re

import pytest
import torch
from torch import nn

import tilefx
from models import WithLoss


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3)
        self.act = nn.ReLU()
        self.fc = nn.Linear(4 * 4 * 4, 5)

    def forward(self, x):
        return self.fc(torch.flatten(self.act(self.conv(x)), 1))


def _ops(ir: str, name: str) -> list[str]:
    return [line for line in ir.splitlines() if re.search(rf"= {re.escape(name)} ", line)]


def _x():
    return torch.randn(3, 2, 6, 6)


def test_default_policy_runs_matmul_and_conv_in_half_and_the_rest_in_float():
    torch.manual_seed(0)
    model = Net().autocast()
    c = tilefx.compile(model, _x())
    ir = c.ir("graph")
    for name in ("aten.convolution", "aten.addmm"):
        (line,) = _ops(ir, name)
        assert "-> tensor<" in line and line.rstrip().endswith("f16>"), line
    (relu,) = _ops(ir, "aten.relu")
    assert relu.rstrip().endswith("f32>")
    assert "aten._to_copy" in ir and "dtype = f16" in ir
    # the numbers: fp16 matmuls with fp32 partials, close to fp32 PyTorch
    x = _x()
    torch.testing.assert_close(c(x), model(x), rtol=2e-2, atol=2e-2)
    out = c(x)
    assert out.dtype == torch.float32


def test_without_autocast_nothing_is_cast():
    ir = tilefx.compile(Net(), _x()).ir("graph")
    assert "f16" not in ir


def test_layer_setting_overrides_the_model_setting():
    model = Net().autocast()
    model.conv.autocast(False)
    ir = tilefx.compile(model, _x()).ir("graph")
    assert _ops(ir, "aten.convolution")[0].rstrip().endswith("f32>")
    assert _ops(ir, "aten.addmm")[0].rstrip().endswith("f16>")


def test_decorator_and_block_forms():
    class Dec(Net):
        @tilefx.autocast()
        def forward(self, x):
            return super().forward(x)

    class Blk(Net):
        def forward(self, x):
            with tilefx.autocast():
                x = self.act(self.conv(x))
            return self.fc(torch.flatten(x, 1))

    ir = tilefx.compile(Dec(), _x()).ir("graph")
    assert _ops(ir, "aten.addmm")[0].rstrip().endswith("f16>")
    ir = tilefx.compile(Blk(), _x()).ir("graph")
    assert _ops(ir, "aten.convolution")[0].rstrip().endswith("f16>")
    assert _ops(ir, "aten.addmm")[0].rstrip().endswith("f32>")


def test_autocast_enabled_false_turns_it_off():
    opts = tilefx.Options()
    opts.Precision.autocastEnabled(False)
    ir = tilefx.compile(Net().autocast(), _x(), options=opts).ir("graph")
    assert "f16" not in ir


def test_custom_policy():
    opts = tilefx.Options()
    opts.Precision.autocastPolicy(tilefx.Policy(fp16=[torch.relu, nn.Conv2d], fp32=[torch.nn.Linear]))
    ir = tilefx.compile(Net().autocast(), _x(), options=opts).ir("graph")
    assert _ops(ir, "aten.relu")[0].rstrip().endswith("f16>")
    assert _ops(ir, "aten.convolution")[0].rstrip().endswith("f16>")
    assert _ops(ir, "aten.addmm")[0].rstrip().endswith("f32>")
    # conv -> relu stay in fp16: the cast back and forth between them is folded
    conv = _ops(ir, "aten.convolution")[0].split("=")[0].strip()
    assert re.search(rf"aten\.relu {re.escape(conv)} ", ir)


def test_training_with_autocast_casts_the_backward_too():
    torch.manual_seed(0)
    model = WithLoss(Net(), nn.CrossEntropyLoss())
    model.model.autocast()
    ref = copy.deepcopy(model)
    t = tilefx.trainingModel(model, optimizer=tilefx.optim.SGD(model.parameters(), lr=0.05))
    x, y = _x(), torch.randint(0, 5, (3,))
    _, loss = t(x, y)
    ir = t.ir("graph")
    assert len([line for line in _ops(ir, "aten.mm") if "bwd" in line and line.rstrip().endswith("f16>")]) >= 1
    assert any("bwd" in line and line.rstrip().endswith("f16>") for line in _ops(ir, "aten.convolution_backward"))
    _, ref_loss = ref(x, y)
    torch.testing.assert_close(loss, ref_loss.detach(), rtol=2e-2, atol=2e-2)
    for p in model.parameters():
        assert p.dtype == torch.float32 and torch.isfinite(p).all()


def test_policy_rejects_what_it_cannot_name():
    opts = tilefx.Options()
    opts.Precision.autocastPolicy(tilefx.Policy(fp16=[object()]))
    with pytest.raises(tilefx.Error, match="cannot name"):
        tilefx.compile(Net().autocast(), _x(), options=opts)
