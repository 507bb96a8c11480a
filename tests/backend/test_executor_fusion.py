"""The executor's fused elementwise steps (analysis/fusion.py) compute
bit for bit what the op-by-op kernels compute, and reuse their buffers only
when nothing else holds them."""

import numpy as np
import pytest
from xdsl.parser import Parser

from tilefx.backend.executor import CompiledFunction
from tilefx.backend.fused_steps import FUSED_EVAL
from tilefx.analysis.fusion import FUSIBLE, fusion_groups
from tilefx.passes.pipelines import graph_context
from tilefx.passes.training_step import find_func

CHAIN = """
func.func @main(%x: tensor<4x8xf32>, %b: tensor<8xf32>, %s: tensor<f32>, %p: tensor<4x8xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<f32>) {
  %a = aten.mul.Tensor %x, %x : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %c = aten.add.Tensor %a, %b {alpha = 2 : i64} : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %c2 = aten.sub.Tensor %c, %x {alpha = 3 : i64} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %c3 = aten.add.Scalar %c2 {other = 0.25 : f64, alpha = 2 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
  %c4 = aten.sub.Scalar %c3 {other = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
  %d = aten.tanh %c4 : tensor<4x8xf32> -> tensor<4x8xf32>
  %e = aten.mul.Tensor %d, %s : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %e2 = aten.mul.Scalar %e {other = 3 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
  %e3 = aten.div.Scalar %e2 {other = 7.0 : f64} : tensor<4x8xf32> -> tensor<4x8xf32>
  %e4 = aten.div.Tensor %b, %e3 : tensor<8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %f = aten.relu %e4 : tensor<4x8xf32> -> tensor<4x8xf32>
  %g = aten.sigmoid %f : tensor<4x8xf32> -> tensor<4x8xf32>
  %h = aten.exp %g : tensor<4x8xf32> -> tensor<4x8xf32>
  %i = aten.sqrt %h : tensor<4x8xf32> -> tensor<4x8xf32>
  %j = aten.rsqrt %i : tensor<4x8xf32> -> tensor<4x8xf32>
  %k = aten.reciprocal %j : tensor<4x8xf32> -> tensor<4x8xf32>
  %l = aten.neg %k : tensor<4x8xf32> -> tensor<4x8xf32>
  %m = aten.add.Tensor %l, %p : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %n = aten.neg %m : tensor<4x8xf32> -> tensor<4x8xf32>
  %s2 = aten.mul.Tensor %s, %s : tensor<f32>, tensor<f32> -> tensor<f32>
  %s3 = aten.exp %s2 : tensor<f32> -> tensor<f32>
  func.return %m, %n, %s3 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<f32>
}
"""


@pytest.fixture(autouse=True)
def numpy_kernels(monkeypatch):
    """Fusion is the numpy kernels' (backend/emitter.py's runs_on_numpy): no
    op may be handed to ATen's kernels here, except where a test says so."""
    monkeypatch.setenv("TILEFX_KERNELS", "numpy")


def _fn():
    return find_func(Parser(graph_context(), CHAIN).parse_module(), "main")


def _inputs():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    x[0, :3] = [np.nan, np.inf, -np.inf]
    return [x, rng.standard_normal(8).astype(np.float32), np.array(0.75, np.float32),
            rng.standard_normal((4, 8)).astype(np.float32)]


def test_every_fusible_op_has_an_evaluation():
    assert set(FUSED_EVAL) == set(FUSIBLE)


def test_groups_of_the_chain():
    groups = fusion_groups(_fn())
    assert [len(g.ops) for g in groups] == [18, 2]
    assert groups[0].root.results[0].name_hint == "m"


def test_fused_equals_op_by_op_bitwise():
    fused, plain = CompiledFunction(_fn()), CompiledFunction(_fn(), fuse=False)
    assert len(fused.steps) == 3 and len(plain.steps) == 21
    xs = _inputs()
    for a, b in zip(fused(*xs), plain(*xs)):
        assert a.dtype == b.dtype == np.float32 and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


def test_buffers_reused_only_when_free():
    fused = CompiledFunction(_fn())
    xs = _inputs()
    first = fused(*xs)
    kept = first[0].copy()
    view = first[0][1:]  # a view keeps the buffer held too
    del first
    second = fused(*[x * 2 for x in xs])
    np.testing.assert_array_equal(view, kept[1:])
    assert not np.shares_memory(second[0], view)
    del view
    buf = second[0]
    del second, buf
    third = fused(*xs)
    np.testing.assert_array_equal(third[0], kept)


@pytest.mark.parametrize("fuse", [True, False])
def test_inputs_never_written(fuse):
    f = CompiledFunction(_fn(), fuse=fuse)
    xs = _inputs()
    before = [x.copy() for x in xs]
    f(*xs)
    for a, b in zip(xs, before):
        np.testing.assert_array_equal(a, b)


def test_a_chain_with_an_aten_member_runs_op_by_op(monkeypatch):
    """With ATen's kernels on, a chain fuses only where every member would
    run on numpy anyway: one-flop ops on small values. CHAIN's long group
    holds tanh, exp, ... (ATen's at any size): its ops run one by one; the
    0-d chain (mul, exp) too; nothing is fused."""
    from tilefx.lowering import aten_kernels

    aten_kernels.install()  # ATen's kernels as the provider

    monkeypatch.delenv("TILEFX_KERNELS")
    f = CompiledFunction(_fn())
    assert not any(s.__qualname__.startswith("fused") for s in f.steps)
    ir = """
func.func @main(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %a = aten.mul.Tensor %x, %x : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %c = aten.add.Tensor %a, %b : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %d = aten.neg %c : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %d : tensor<4x8xf32>
}
"""
    small = CompiledFunction(find_func(Parser(graph_context(), ir).parse_module(), "main"))
    assert [s.__qualname__ for s in small.steps] == ["fused mul.Tensor add.Tensor neg"]
    x, b = _inputs()[0], _inputs()[1]
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(small(x, b)[0], -(x * x + b))
    xs = _inputs()
    with np.errstate(all="ignore"):
        for got, want in zip(f(*xs), CompiledFunction(_fn(), fuse=False)(*xs)):
            np.testing.assert_array_equal(got, want)
