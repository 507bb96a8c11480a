"""float16 inputs (PopTorch user guide, 4.7 "16-bit float support"): an input
keeps its dtype; an op that takes float16 and float32 as they are runs as in
eager PyTorch, and an op that takes one dtype only promotes them to float32
("PopTorch complies with this convention") or, with
HalfFloatCastingBehavior.FloatDowncastToHalf, runs in float16."""

import copy

import pytest
import torch
from torch import nn

import tilefx
from models import WithLoss


class HalfThenFloat(nn.Module):
    """A float16 convolution, a cast, a float32 Linear."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3).half()
        self.fc = nn.Linear(4 * 4 * 4, 5)

    def forward(self, x):
        return self.fc(torch.flatten(torch.relu(self.conv(x)), 1).float())


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3)
        self.fc = nn.Linear(4 * 4 * 4, 5)

    def forward(self, x):
        return self.fc(torch.flatten(torch.relu(self.conv(x)), 1))


def _x():
    return torch.randn(3, 2, 6, 6).half()


def _downcast():
    opts = tilefx.Options()
    opts.Precision.halfFloatCasting(tilefx.HalfFloatCastingBehavior.FloatDowncastToHalf)
    return opts


def test_half_layer_then_float_layer_runs_as_eager():
    torch.manual_seed(0)
    model, x = HalfThenFloat(), _x()
    out = tilefx.inferenceModel(model)(x)
    ref = model(x)
    assert out.dtype == ref.dtype == torch.float32
    torch.testing.assert_close(out, ref.detach(), rtol=1e-5, atol=1e-6)
    # the convolution ran in float16: no cast of the input to float32 in the graph
    ir = tilefx.compile(model, x).ir("graph")
    conv = next(line for line in ir.splitlines() if "= aten.convolution " in line)
    assert "f32" not in conv


def test_half_layer_then_float_layer_with_float_downcast_to_half():
    """FloatDowncastToHalf (the older PopTorch): float16 inputs are float32
    while the model is traced and float16 again in the graph, so the model's
    own .float() of an already float32 value leaves no trace and the float32
    Linear meets float16 and runs in float16 (PopTorch user guide, earlier
    releases, "Half / float16 support": "Some operations may result in the
    model running in float32 where float16 would be expected, or vice versa")."""
    torch.manual_seed(0)
    model, x = HalfThenFloat(), _x()
    out = tilefx.inferenceModel(model, _downcast())(x)
    h = torch.flatten(torch.relu(model.conv(x)), 1)
    ref = nn.functional.linear(h, model.fc.weight.half(), model.fc.bias.half())
    assert out.dtype == torch.float16
    torch.testing.assert_close(out, ref.detach(), rtol=0, atol=0)


def test_float_model_fed_half_input_promotes_to_float():
    """The convolution takes one dtype: float16 input meeting float32 weights is
    promoted to float32 (PyTorch's convention, which eager PyTorch's kernel
    itself refuses): the model runs as on the input cast to float32."""
    torch.manual_seed(0)
    model, x = Net(), _x()
    with pytest.raises(RuntimeError):
        model(x)  # eager refuses the mix
    out = tilefx.inferenceModel(model)(x)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, model(x.float()).detach(), rtol=1e-5, atol=1e-6)


def test_input_keeps_its_dtype_until_an_op_meets_float32():
    """Ops before the first float32 weight run in float16, as in eager: x * 1000
    overflows to inf in float16, as eager's does."""
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            y = x * 1000
            return y, self.fc(torch.nan_to_num(y, posinf=7.0))

    torch.manual_seed(0)
    model = Scaled()
    x = torch.tensor([[1.0, 70.0, -2.0, 0.5], [3.0, -0.25, 66.0, 1.0]]).half()
    y, out = tilefx.inferenceModel(model)(x)
    ref_y = x * 1000
    assert y.dtype == torch.float16 and torch.isinf(y).any()
    torch.testing.assert_close(y, ref_y, rtol=0, atol=0)
    assert out.dtype == torch.float32
    ref = model.fc(torch.nan_to_num(ref_y, posinf=7.0).float())
    torch.testing.assert_close(out, ref.detach(), rtol=1e-5, atol=1e-6)


def test_layer_norm_takes_half_input_with_float_weights_as_eager():
    torch.manual_seed(0)
    model = nn.Sequential(nn.LayerNorm(8), nn.ReLU())
    x = torch.randn(4, 8).half()
    out = tilefx.inferenceModel(model)(x)
    ref = model(x)
    assert out.dtype == ref.dtype == torch.float16
    torch.testing.assert_close(out, ref.detach(), rtol=1e-3, atol=1e-3)


def test_half_model_fed_half_input_is_unchanged():
    torch.manual_seed(0)
    model, x = Net().half(), _x()
    for opts in (None, _downcast()):
        out = tilefx.inferenceModel(model, opts)(x)
        assert out.dtype == torch.float16
        torch.testing.assert_close(out, model(x).detach(), rtol=1e-3, atol=1e-3)
        assert "f32" not in tilefx.compile(model, x, options=opts).ir("graph")


def test_float_model_trains_on_half_inputs():
    torch.manual_seed(0)
    model = WithLoss(nn.Sequential(nn.Linear(3, 10), nn.ReLU(), nn.Linear(10, 2)), nn.MSELoss())
    ref = copy.deepcopy(model)
    t = tilefx.trainingModel(model, optimizer=tilefx.optim.SGD(model.parameters(), lr=0.1))
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for _ in range(3):
        x, y = torch.randn(4, 3).half(), torch.randn(4, 2)
        _, loss = t(x, y)
        ref_loss = ref(x.float(), y)[1]
        ref_opt.zero_grad()
        ref_loss.backward()
        ref_opt.step()
        torch.testing.assert_close(loss, ref_loss.detach(), rtol=1e-5, atol=1e-6)
    for p, q in zip(model.parameters(), ref.parameters()):
        assert p.dtype == torch.float32
        torch.testing.assert_close(p, q.detach(), rtol=1e-5, atol=1e-6)
