"""The executor's per-op BLAS thread choice (no timing: which ops, how many threads)."""

import pytest
from xdsl.parser import Parser

from tilefx.backend.emitter import gemm_flops
from tilefx.backend.executor import CompiledFunction
from tilefx.backend.kernels import tuning
from tilefx.passes.pipelines import graph_context
from tilefx.passes.training_step import find_func

pytestmark = pytest.mark.load_rule  # conftest.py leaves the kernel threads to the load

IR = """
func.func @main(%a: tensor<64x1024xf32>, %w: tensor<1024x1024xf32>, %b: tensor<1024xf32>,
                %x: tensor<8x3x16x16xf32>, %k: tensor<4x3x3x3xf32>, %p: tensor<2x5x6xf32>,
                %q: tensor<2x6x7xf32>) -> (tensor<64x1024xf32>, tensor<8x4x14x14xf32>, tensor<2x5x7xf32>) {
  %y = aten.addmm %b, %a, %w : tensor<1024xf32>, tensor<64x1024xf32>, tensor<1024x1024xf32> -> tensor<64x1024xf32>
  %r = aten.relu %y : tensor<64x1024xf32> -> tensor<64x1024xf32>
  %c = aten.convolution %x, %k {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, transposed = false, output_padding = array<i64: 0, 0>, groups = 1 : i64} : tensor<8x3x16x16xf32>, tensor<4x3x3x3xf32> -> tensor<8x4x14x14xf32>
  %m = aten.bmm %p, %q : tensor<2x5x6xf32>, tensor<2x6x7xf32> -> tensor<2x5x7xf32>
  func.return %r, %c, %m : tensor<64x1024xf32>, tensor<8x4x14x14xf32>, tensor<2x5x7xf32>
}
"""


@pytest.fixture(autouse=True)
def _fresh_reading():
    """Each test reads the machine and the environment afresh, and leaves no
    reading of its own (a cap it set) to the tests after it."""
    tuning.forget_machine_reading()
    yield
    tuning.forget_machine_reading()


def _ops():
    fn = find_func(Parser(graph_context(), IR).parse_module(), "main")
    return fn, {op.name: op for op in fn.walk()}


def test_gemm_flops_of_each_blas_op():
    _, ops = _ops()
    assert gemm_flops(ops["aten.addmm"]) == 2 * 64 * 1024 * 1024
    assert gemm_flops(ops["aten.convolution"]) == 2 * (8 * 14 * 14) * (3 * 3 * 3) * 4
    assert gemm_flops(ops["aten.bmm"]) == 2 * 5 * 6 * 7  # one call per batch entry
    assert gemm_flops(ops["aten.relu"]) is None


def test_threads_by_size_and_cap(monkeypatch):
    monkeypatch.setenv(tuning.BLAS_THREADS_ENV, "1")
    assert tuning.blas_threads_for(1e12) == 1
    tuning.forget_machine_reading()
    monkeypatch.setenv(tuning.BLAS_THREADS_ENV, "64")
    monkeypatch.setattr(tuning.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    tuning.forget_machine_reading()
    assert tuning.blas_threads_for(tuning.BLAS_THREADS_MIN_FLOPS) == tuning.blas_cores() >= 1
    assert tuning.blas_threads_for(tuning.BLAS_THREADS_MIN_FLOPS - 1) == 1
    monkeypatch.delenv(tuning.BLAS_THREADS_ENV)
    monkeypatch.setattr(tuning.os, "getloadavg", lambda: (1e6, 0.0, 0.0))  # oversubscribed
    tuning.forget_machine_reading()
    assert tuning.blas_threads_for(1e12) == 1


def test_a_call_gives_the_blas_setting_back():
    import numpy as np

    fn, _ = _ops()
    f = CompiledFunction(fn)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(tuple(a.type.get_shape())).astype(np.float32)
            for a in fn.body.block.args]
    f(*args)
    pool = tuning._pool()
    assert pool.current == pool.initial


def test_the_machine_is_read_once_per_interval(monkeypatch):
    reads = []
    monkeypatch.setattr(tuning.os, "getloadavg", lambda: reads.append(1) or (0.0, 0.0, 0.0))
    tuning.forget_machine_reading()
    first = tuning.blas_cores()
    assert [tuning.blas_cores() for _ in range(5)] == [first] * 5
    assert len(reads) == 1
    monkeypatch.setattr(tuning, "LOAD_READING_SECONDS", 0.0)  # every call reads again
    tuning.blas_cores(), tuning.blas_cores()
    assert len(reads) == 3
    tuning.forget_machine_reading()
