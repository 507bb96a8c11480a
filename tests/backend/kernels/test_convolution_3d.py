"""Volumes: Conv3d / ConvTranspose3d (the general N-d convolution kernels)
trained and run through tilefx, equal to PyTorch."""

import copy

import numpy as np
import pytest
import torch
from torch import nn

import tilefx
from tilefx.backend.kernels.convolution import convolution, convolution_backward


@pytest.mark.parametrize("stride,padding,dilation,groups", [
    (1, 0, 1, 1), (2, 1, 1, 1), ((1, 2, 1), (1, 0, 2), (2, 1, 1), 2), (1, 2, 2, 4)])
def test_conv3d_kernels_equal_torch(stride, padding, dilation, groups):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 4, 7, 6, 8, generator=g, requires_grad=True)
    w = torch.randn(8, 4 // groups, 3, 2, 3, generator=g, requires_grad=True)
    b = torch.randn(8, generator=g, requires_grad=True)
    y = torch.nn.functional.conv3d(x, w, b, stride, padding, dilation, groups)
    gy = torch.randn(y.shape, generator=g)
    y.backward(gy)
    rep = lambda v: [v] * 3 if isinstance(v, int) else list(v)  # noqa: E731
    s, p, d = rep(stride), rep(padding), rep(dilation)
    got = convolution(x.detach().numpy(), w.detach().numpy(), b.detach().numpy(), s, p, d, False,
                      [0, 0, 0], groups)
    np.testing.assert_allclose(got, y.detach().numpy(), rtol=1e-5, atol=1e-5)
    gi, gw, gb = convolution_backward(gy.numpy(), x.detach().numpy(), w.detach().numpy(), [8], s, p, d,
                                      False, [0, 0, 0], groups, [True, True, True])
    np.testing.assert_allclose(gi, x.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gw, w.grad.numpy(), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(gb, b.grad.numpy(), rtol=1e-5, atol=1e-4)


def test_conv3d_fp16_computes_in_fp32_and_rounds():
    g = torch.Generator().manual_seed(1)
    x, w = torch.randn(1, 2, 5, 5, 5, generator=g).half(), torch.randn(3, 2, 3, 3, 3, generator=g).half()
    got = convolution(x.numpy(), w.numpy(), None, [1] * 3, [1] * 3, [1] * 3, False, [0] * 3, 1)
    want = torch.nn.functional.conv3d(x.float(), w.float(), padding=1).half()
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, want.numpy())


class Volume(nn.Module):
    def __init__(self):
        super().__init__()
        self.down = nn.Conv3d(2, 6, 3, stride=2, padding=1)
        self.norm = nn.BatchNorm3d(6)
        self.up = nn.ConvTranspose3d(6, 4, 2, stride=2)
        self.head = nn.Conv3d(4, 1, 1)

    def forward(self, x, y):
        out = self.head(torch.relu(self.up(torch.relu(self.norm(self.down(x))))))
        return out, nn.functional.mse_loss(out, y)


def test_volume_model_trains_like_pytorch():
    torch.manual_seed(0)
    m = Volume()
    ref = copy.deepcopy(m)
    x, y = torch.randn(2, 2, 6, 6, 6), torch.randn(2, 1, 6, 6, 6)
    ex = tilefx.trainingModel(m, optimizer=tilefx.optim.SGD(m.parameters(), lr=0.05, momentum=0.9))
    opt = torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9)
    for _ in range(3):
        _, loss = ex(x, y)
        opt.zero_grad()
        _, want = ref(x, y)
        want.backward()
        opt.step()
        np.testing.assert_allclose(float(loss), float(want.detach()), rtol=1e-5)
    ex.copyWeightsToHost()
    for (name, p), q in zip(m.named_parameters(), ref.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-4, atol=1e-6,
                                   err_msg=name)
    inf = tilefx.inferenceModel(copy.deepcopy(ref).eval())
    with torch.no_grad():
        want_out, _ = ref.eval()(x, y)
    got_out, _ = inf(x, y)
    np.testing.assert_allclose(got_out.numpy(), want_out.numpy(), rtol=1e-5, atol=1e-5)
