"""Elementwise steps that overwrite an operand dying at them (analysis/in_place.py):
which steps may, on the rule's own terms and on compiled IR, and that the
numbers and everything the caller holds stay as they were without it."""

import copy

import numpy as np
import pytest
import torch
from torch import nn
from xdsl.parser import Parser

import tilefx
from tilefx.lowering import aten_kernels
from tilefx.backend.executor import CompiledFunction
from tilefx.analysis.in_place import overwritable
from tilefx.passes.pipelines import graph_context
from tilefx.passes.training_step import find_func

aten_kernels.install()  # ATen's kernels (and the attention one), as the API runs

RNG = np.random.default_rng(0)


# -- the rule ------------------------------------------------------------------

def test_an_operand_read_last_here_is_written():
    # slot 5 made by step 0 (fresh), read last by step 1
    assert overwritable([(1, [5], [True])], {}, {5}, {5: 1}, set()) == {1: 0}


@pytest.mark.parametrize("why", ["read later", "a view read later", "argument", "returned",
                                 "other operand shares it", "type differs", "not made here"])
def test_an_operand_someone_else_needs_is_not_written(why):
    view_of, fresh, last, keep = {}, {5}, {5: 1, 6: 1}, set()
    operands, writable = [5, 6], [True, False]
    if why == "read later":
        last[5] = 2
    elif why == "a view read later":
        view_of[7] = 5
        last[7] = 3
    elif why == "argument":
        keep.add(5)
    elif why == "returned":
        view_of[7] = 5
        keep.add(7)
    elif why == "other operand shares it":
        view_of[6] = 5
    elif why == "type differs":
        writable = [False, False]
    elif why == "not made here":
        fresh = set()
    assert overwritable([(1, operands, writable)], view_of, fresh, last, keep) == {}


def test_the_second_operand_when_the_first_lives_on():
    # add(x, y): x is read again later, y dies here
    assert overwritable([(1, [5, 6], [True, True])], {}, {5, 6}, {5: 4, 6: 1}, set()) == {1: 1}


def test_a_view_of_dying_memory_is_written():
    # relu(view(m)): m and its view both read last here
    assert overwritable([(2, [7], [True])], {7: 5}, {5}, {5: 1, 7: 2}, set()) == {2: 0}


# -- compiled IR ---------------------------------------------------------------

IR = """
func.func @main(%a: tensor<512x512xf32>, %b: tensor<512x512xf32>) -> (tensor<512x512xf32>, tensor<512x512xf32>) {
  %m = aten.mm %a, %b : tensor<512x512xf32>, tensor<512x512xf32> -> tensor<512x512xf32>
  %r = aten.relu %m : tensor<512x512xf32> -> tensor<512x512xf32>
  %s = aten.add.Tensor %a, %r {alpha = 1 : i64} : tensor<512x512xf32>, tensor<512x512xf32> -> tensor<512x512xf32>
  %t = aten.mul.Tensor %s, %s : tensor<512x512xf32>, tensor<512x512xf32> -> tensor<512x512xf32>
  %u = aten.sub.Tensor %t, %a {alpha = 2 : i64} : tensor<512x512xf32>, tensor<512x512xf32> -> tensor<512x512xf32>
  %v = aten.div.Tensor %u, %b : tensor<512x512xf32>, tensor<512x512xf32> -> tensor<512x512xf32>
  %w = aten.add.Tensor %v, %t {alpha = 3 : i64} : tensor<512x512xf32>, tensor<512x512xf32> -> tensor<512x512xf32>
  func.return %w, %s : tensor<512x512xf32>, tensor<512x512xf32>
}
"""


def _compiled(ir: str) -> CompiledFunction:
    # unfused: a chain of elementwise ops would otherwise run as one numpy
    # group over its own buffers (analysis/fusion.py); ATen's kernels
    # (the provider, lowering/aten_kernels.py) run the ops one by one
    return CompiledFunction(find_func(Parser(graph_context(), ir).parse_module(), "main"), fuse=False)


def test_which_steps_run_in_place_and_the_numbers():
    f = _compiled(IR)
    in_place = [s.__qualname__.split(" ")[0] for s in f.steps if "(in place)" in s.__qualname__]
    # relu over the product (dies there); add into relu's result (the second
    # operand: `a` is an argument); mul reads `s`, which is returned, twice;
    # sub over `t`? no: `t` is read again by the last add; div over `u`; the
    # last add over `v` (alpha 3: only its first operand may be written)
    assert in_place == ["aten.relu", "aten.add.Tensor", "aten.div.Tensor", "aten.add.Tensor"]
    a = RNG.standard_normal((512, 512)).astype(np.float32)
    b = RNG.standard_normal((512, 512)).astype(np.float32) + 4
    a0, b0 = a.copy(), b.copy()
    w, s = f(a, b)
    ta, tb = torch.from_numpy(a0), torch.from_numpy(b0)
    ts = ta + torch.relu(ta @ tb)
    tt = ts * ts
    tw = torch.add(torch.sub(tt, ta, alpha=2) / tb, tt, alpha=3)
    # bit for bit ATen's functional kernels (the in-place forms are the same loops)
    assert torch.equal(torch.from_numpy(s), ts) and torch.equal(torch.from_numpy(w), tw)
    np.testing.assert_array_equal(a, a0)  # the arguments are never written
    np.testing.assert_array_equal(b, b0)
    assert not np.shares_memory(w, s)


def test_a_read_only_operand_falls_back_to_the_functional_kernel():
    ir = """
func.func @main(%a: tensor<512x512xf32>, %b: tensor<512xf32>) -> (tensor<512x512xf32>) {
  %e = aten.expand %b {size = array<i64: 512, 512>} : tensor<512xf32> -> tensor<512x512xf32>
  %m = aten.mm %a, %a : tensor<512x512xf32>, tensor<512x512xf32> -> tensor<512x512xf32>
  %s = aten.add.Tensor %m, %e {alpha = 1 : i64} : tensor<512x512xf32>, tensor<512x512xf32> -> tensor<512x512xf32>
  func.return %s : tensor<512x512xf32>
}
"""
    f = _compiled(ir)
    # the add may write the product (it dies there); its other operand is a
    # read-only broadcast of an argument, which torch cannot view writably
    assert [s.__qualname__.split(" ")[0] for s in f.steps if "(in place)" in s.__qualname__] == \
        ["aten.add.Tensor"]
    a = RNG.standard_normal((512, 512)).astype(np.float32)
    b = RNG.standard_normal(512).astype(np.float32)
    a0, b0 = a.copy(), b.copy()
    (s,) = f(a, b)
    assert torch.equal(torch.from_numpy(s), torch.from_numpy(a0) @ torch.from_numpy(a0) + torch.from_numpy(b0))
    np.testing.assert_array_equal(a, a0)  # the arguments are untouched
    np.testing.assert_array_equal(b, b0)


# -- models --------------------------------------------------------------------

class Residual(nn.Module):
    """Returns an intermediate that later ops also read: it must come back whole."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(256, 512)
        self.fc2 = nn.Linear(512, 512)
        self.fc3 = nn.Linear(512, 512)
        self.fc4 = nn.Linear(512, 256)

    def forward(self, x):
        h = self.fc1(x)
        r = torch.relu(self.fc2(h))  # over fc2's result
        y = self.fc3(r) + r  # over fc3's result (r is read by both)
        return self.fc4(y), h


def test_a_model_in_inference_and_training_is_torch_bit_for_bit():
    torch.manual_seed(0)
    model = Residual()
    x = torch.randn(512, 256)
    ie = tilefx.inferenceModel(copy.deepcopy(model).eval())
    y, h = ie(x)
    assert any("(in place)" in s.__qualname__ for s in ie._program.main.steps)
    with torch.no_grad():
        ry, rh = model(x)
    assert torch.equal(y, ry) and torch.equal(h, rh)
    x0 = x.clone()
    y2, _ = ie(x)
    assert torch.equal(x, x0) and torch.equal(y2, ry) and torch.equal(y, ry)  # the first output kept

    class Loss(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            y, h = self.m(x)
            return y, (y * y).mean() + h.mean()

    ref = Loss(copy.deepcopy(model))
    opt = torch.optim.SGD(ref.parameters(), lr=0.01)
    mine = Loss(copy.deepcopy(model))
    tm = tilefx.trainingModel(mine, optimizer=tilefx.optim.SGD(mine.parameters(), lr=0.01))
    for _ in range(3):
        _, loss = tm(x)
        opt.zero_grad()
        _, rloss = ref(x)
        rloss.backward()
        opt.step()
        torch.testing.assert_close(loss, rloss.detach(), rtol=1e-6, atol=1e-6)
    for p, q in zip(mine.parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-5, atol=1e-6)
