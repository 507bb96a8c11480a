"""Edge cases of users' data where the numpy kernels (TILEFX_KERNELS=numpy,
float16/bfloat16 models) and ATen's must agree with eager torch: since
small ops run on ATen, so the two paths meet at every size
(the review of that change found these)."""

import pytest
import torch
from torch import nn

import tilefx
from tilefx.errors import Error


@pytest.fixture(params=["aten", "numpy"])
def kernels(request, monkeypatch):
    if request.param == "numpy":
        monkeypatch.setenv("TILEFX_KERNELS", "numpy")
    else:
        monkeypatch.delenv("TILEFX_KERNELS", raising=False)
    return request.param


class Lookup(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(4, 2)

    def forward(self, i):
        return self.emb(i)


@pytest.mark.parametrize("index", [-1, 4])
def test_an_embedding_index_out_of_the_table_is_an_error(kernels, index):
    """numpy's take wraps -1 around to the last row: a silent wrong result."""
    model = Lookup()
    with torch.no_grad():
        want = model(torch.tensor([0, 3]))
    m = tilefx.inferenceModel(model)
    torch.testing.assert_close(m(torch.tensor([0, 3])), want)
    with pytest.raises(Error, match="index out of range"):
        m(torch.tensor([0, index]))


class IntegerDivision(nn.Module):
    def forward(self, a, b):
        return a // b, torch.remainder(a, b), torch.fmod(a, b), torch.div(a, b, rounding_mode="trunc")


def test_integer_division_by_zero_is_an_error(kernels):
    m = tilefx.inferenceModel(IntegerDivision())
    a, b = torch.tensor([7, -7, 3]), torch.tensor([2, 3, -2])
    for got, want in zip(m(a, b), IntegerDivision()(a, b)):
        torch.testing.assert_close(got, want)
    with pytest.raises(Error, match="ZeroDivisionError"):
        m(a, torch.tensor([2, 0, 1]))


class Sign(nn.Module):
    def forward(self, x):
        return torch.sign(x)


def test_sign_of_nan_is_zero_as_in_torch(kernels):
    x = torch.tensor([float("nan"), -0.0, -2.0, 3.0, float("inf")])
    torch.testing.assert_close(tilefx.inferenceModel(Sign())(x), torch.sign(x))


class Constants(nn.Module):
    def forward(self, x):
        return x + torch.arange(4.0) * torch.linspace(0, 1, 4)


def test_a_small_constant_is_made_once_on_either_kernels(kernels):
    """An arange or a fill without operands is computed when the program is
    built, whichever kernel computes it, not on every call."""
    m = tilefx.inferenceModel(Constants())
    x = torch.randn(3, 4)
    torch.testing.assert_close(m(x), Constants()(x))
    main = m._program.main
    assert not any(s.__qualname__.startswith(("aten.arange", "aten.full", "aten.scalar_tensor"))
                   for s in main.steps)
    assert main.constants


class SoftmaxOverNothing(nn.Module):
    def forward(self, x):
        return torch.softmax(x, -1), torch.log_softmax(x, 1)


def test_softmax_over_an_empty_dimension_is_empty(kernels):
    x = torch.randn(3, 0)
    got = tilefx.inferenceModel(SoftmaxOverNothing())(x)
    for g, w in zip(got, SoftmaxOverNothing()(x)):
        assert g.shape == w.shape == (3, 0)


class Repeats(nn.Module):
    """The same ops twice: the executor computes each once (analysis/values.py's
    repeated_ops), and hands back outputs that do not share memory."""

    def forward(self, x, mask):
        m1 = torch.where(mask, 0.0, float("-inf"))
        m2 = torch.where(mask, 0.0, float("-inf"))
        return torch.exp(x) + m1, torch.exp(x) + m2, torch.sigmoid(x), torch.sigmoid(x)


def test_repeated_ops_are_computed_once_and_outputs_stay_distinct(kernels):
    x, mask = torch.randn(3, 4), torch.rand(3, 4) > 0.3
    m = tilefx.inferenceModel(Repeats())
    got = m(x, mask)
    for g, w in zip(got, Repeats()(x, mask)):
        torch.testing.assert_close(g, w)
    names = [s.__qualname__.split(" ")[0] for s in m._program.main.steps]
    assert names.count("aten.sigmoid") <= 1 and names.count("aten.where.self") <= 1, names
    got[0].zero_()
    got[2].zero_()
    torch.testing.assert_close(got[1], torch.exp(x) + torch.where(mask, 0.0, float("-inf")))
    torch.testing.assert_close(got[3], torch.sigmoid(x))
    torch.testing.assert_close(m(x, mask)[3], torch.sigmoid(x))  # and the next call's


class DropoutTwice(nn.Module):
    def forward(self, x):
        return nn.functional.dropout(x, 0.5, True), nn.functional.dropout(x, 0.5, True)


def test_random_ops_are_never_merged():
    a, b = tilefx.inferenceModel(DropoutTwice())(torch.ones(64, 64))
    assert not torch.equal(a, b)
