"""Static and automatic loss scaling (PopTorch user guide, 4.5.1 "Loss scaling"; PopART's automatic loss
scaling)."""

import copy

import numpy as np
import pytest
import torch
from torch import nn

import tilefx
from models import MLP, WithLoss


def _data(n, steps, d=12, classes=5, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(n, d, generator=g), torch.randint(0, classes, (n,), generator=g))
            for _ in range(steps)]


@pytest.mark.parametrize("opt", ["sgd", "adam"])
def test_static_loss_scaling_gives_the_same_fp32_weights(opt):
    torch.manual_seed(0)
    base = WithLoss(MLP(), nn.CrossEntropyLoss())
    models = []
    for scale in (1.0, 1024.0):
        m = copy.deepcopy(base)
        o = (tilefx.optim.SGD(m.parameters(), lr=0.05, momentum=0.9, loss_scaling=scale) if opt == "sgd"
             else tilefx.optim.Adam(m.parameters(), lr=1e-2, eps=1e-3, loss_scaling=scale))
        opts = tilefx.Options()
        opts.Training.gradientAccumulation(2)
        t = tilefx.trainingModel(m, opts, optimizer=o)
        for x, y in _data(8, 10):
            t(x, y)
        models.append((m, t))
    (m1, _), (m2, t2) = models
    for p, q in zip(m1.parameters(), m2.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-6)
    ir = t2.ir("graph")
    assert 'tilefx.hyper = "loss_scaling"' in ir and "aten.reciprocal" in ir


def test_loss_scaling_pass_in_the_ir_from_tilefx_opt(tmp_path):
    torch.manual_seed(0)
    m = WithLoss(nn.Linear(4, 3), nn.MSELoss())
    t = tilefx.compile(m, torch.randn(2, 4), torch.randn(2, 3), training=True,
                       optimizer=tilefx.optim.SGD(m.parameters(), lr=0.1, loss_scaling=8.0))
    ir = t.ir("graph")
    # the seed is scaled and every accumulated gradient unscaled
    assert ir.count("ipu.accumulate") == 2
    assert ir.count("aten.mul.Tensor") >= 3


class HalfNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 1)

    def forward(self, x, y):
        out = self.fc2(torch.relu(self.fc1(x)))
        return out, ((out - y) ** 2).mean()


def test_automatic_loss_scaling_recovers_from_overflow_in_half_precision():
    torch.manual_seed(0)
    model = HalfNet().half()
    opts = tilefx.Options()
    opts.Training.setAutomaticLossScaling(True)
    # 2**18 overflows fp16 gradients at once (fp16 max is 65504)
    t = tilefx.trainingModel(model, opts,
                             optimizer=tilefx.optim.SGD(model.parameters(), lr=0.01, loss_scaling=2.0 ** 18))
    g = torch.Generator().manual_seed(0)
    history = []
    for _ in range(12):
        x = torch.randn(8, 8, generator=g).half()
        y = torch.randn(8, 1, generator=g).half()
        before = [p.detach().clone() for p in model.parameters()]
        factor = t.loss_scaling_factor
        t(x, y)
        after = [p.detach().clone() for p in model.parameters()]
        for p in after:
            assert torch.isfinite(p).all()
        updated = any(not torch.equal(a, b) for a, b in zip(after, before))
        history.append((factor, t.loss_scaling_factor, updated))
    # an overflowing step is skipped and halves the factor; a clean one doubles it
    assert history[0] == (1.0, 0.5, False)
    for before, after, updated in history:
        assert after in (before / 2, before * 2)
        if after == before * 2:
            assert updated
    assert any(u for _, _, u in history)
    assert t.loss_scale == 2.0 ** 18 * t.loss_scaling_factor
    assert all(p.dtype == torch.float16 for p in model.parameters())


def test_half_precision_inference_matches_pytorch():
    torch.manual_seed(0)
    model = nn.Linear(8, 4).half()
    x = torch.randn(3, 8).half()
    out = tilefx.inferenceModel(model)(x)
    assert out.dtype == torch.float16
    torch.testing.assert_close(out, model(x), rtol=1e-3, atol=1e-3)
    assert np.isfinite(out.float().numpy()).all()


def test_half_inputs_with_float_weights_are_promoted_like_pytorch():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 4), nn.ReLU())
    x = torch.randn(3, 8).half()
    c = tilefx.compile(model, x)
    out = c(x)
    expected = model(x.float())
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)
    ir = c.ir("graph")
    assert "tensor<3x8xf16> {tilefx.input = 0 : i64}" in ir and "aten._to_copy" in ir
    # FloatDowncastToHalf (the older PopTorch rule) is tested in test_autocast.py


def test_stochastic_rounding_is_unbiased_and_seeded():
    from tilefx.backend.precision_steps import stochastic_round

    x = np.full(20000, 1.0 + 2.0 ** -12, dtype=np.float32)  # a quarter of the way to the next fp16
    r = stochastic_round(x, np.random.default_rng(0)).astype(np.float32)
    assert set(np.unique(r)) == {1.0, 1.0 + 2.0 ** -10}
    assert abs(r.mean() - x[0]) < 2e-5
    assert np.array_equal(r, stochastic_round(x, np.random.default_rng(0)).astype(np.float32))

    class AddTiny(nn.Module):
        def forward(self, a):
            return a + 2.0 ** -12

    a = torch.ones(4096, dtype=torch.float16)
    nearest = tilefx.inferenceModel(AddTiny())(a)
    assert torch.equal(nearest, torch.ones_like(a))  # round to nearest loses the tiny addend
    opts = tilefx.Options().randomSeed(7)
    opts.Precision.enableStochasticRounding(True)
    sr = tilefx.inferenceModel(AddTiny(), opts)(a)
    assert sr.dtype == torch.float16
    assert abs(sr.float().mean().item() - (1 + 2.0 ** -12)) < 1e-4


def test_half_partials_accumulate_in_fp16():
    torch.manual_seed(0)

    class Dot(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.full((4096, 1), 0.1).half())

        def forward(self, x):
            return x @ self.w

    x = torch.ones(2, 4096).half()
    fp32_partials = tilefx.inferenceModel(Dot())(x)
    opts = tilefx.Options()
    opts.Precision.setPartialsType(torch.half)
    half_partials = tilefx.inferenceModel(Dot(), opts)(x)
    exact = 4096 * float(torch.tensor(0.1).half())
    # fp32 partials round once; fp16 partials lose precision on the way
    assert abs(fp32_partials[0, 0].item() - exact) <= 0.25
    expected = np.float16(0)
    for _ in range(4096 // 16):
        expected = np.float16(expected + np.float16(16 * np.float32(np.float16(0.1))))
    assert half_partials[0, 0].item() == float(expected)
    assert half_partials[0, 0].item() != fp32_partials[0, 0].item()


def test_half_partials_convolution_matches_fp32_closely():
    torch.manual_seed(0)
    conv = nn.Conv2d(32, 4, 3).half()
    x = torch.randn(2, 32, 6, 6).half()
    opts = tilefx.Options()
    opts.Precision.setPartialsType(torch.half)
    out = tilefx.inferenceModel(conv, opts)(x)
    ref = nn.functional.conv2d(x.float(), conv.weight.float(), conv.bias.float())
    torch.testing.assert_close(out.float(), ref, rtol=1e-2, atol=1e-2)
