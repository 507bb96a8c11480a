"""The kernels that split large arrays between threads (kernels._common:
`in_chunks`, `by_rows`, `parallel_ranges`) and the executor's fused groups
evaluated chunk by chunk: equal to torch at the kernel tests' tolerances,
and bit for bit what one thread (or the op-by-op kernels) computes. Sizes
are just above the thresholds (CHUNK, PARALLEL_MIN) so every path runs."""

import numpy as np
import pytest
import torch
from xdsl.parser import Parser

from tilefx.backend.executor import CompiledFunction
from tilefx.backend.kernels import KERNELS, _common, tuning
from tilefx.backend.kernels._common import CHUNK, PARALLEL_MIN, set_kernel_threads
from tilefx.analysis.fusion import fusion_groups
from tilefx.passes.pipelines import graph_context
from tilefx.passes.training_step import find_func

from test_kernels import check, _inputs_seeded_per_test, reseed  # noqa: F401 (the fixture)

reseed(5)  # this module's cases: the same data whatever was imported before

pytestmark = pytest.mark.load_rule  # conftest.py leaves the kernel threads to the load

F32, F16 = np.dtype(np.float32), np.dtype(np.float16)


@pytest.fixture(autouse=True)
def numpy_kernels(monkeypatch):
    """These tests are about the numpy kernels and the executor's own threads:
    no op may be handed to ATen's kernels (lowering/aten_kernels.py)."""
    monkeypatch.setenv("TILEFX_KERNELS", "numpy")


@pytest.fixture(params=[1, 2], ids=["1-thread", "2-threads"])
def threads(request):
    old = set_kernel_threads(request.param)
    yield request.param
    set_kernel_threads(old)


def _r(*shape, dtype=F32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def test_parallel_ranges_cover_each_index_once(threads):
    seen = np.zeros(PARALLEL_MIN + 5 * CHUNK + 7, np.int64)

    def run(lo, hi):
        seen[lo:hi] += 1

    _common.parallel_ranges(run, seen.size)
    assert (seen == 1).all()


def test_a_worker_error_reaches_the_caller(threads):
    def run(lo, hi):
        if lo > 0:
            raise ValueError("in a worker")

    if threads == 1:
        _common.parallel_ranges(run, PARALLEL_MIN * 2)  # one range, from 0: no error
    else:
        with pytest.raises(ValueError, match="in a worker"):
            _common.parallel_ranges(run, PARALLEL_MIN * 2)


# --- row-wise kernels --------------------------------------------------------

@pytest.mark.parametrize("name", ["_softmax.default", "_log_softmax.default"])
@pytest.mark.parametrize("shape,dim", [((8, 4, 128, 128), -1), ((300, 1000), 1), ((700, 257), 0),
                                       ((3, 50000), -1)])
def test_softmax_by_rows(threads, name, shape, dim):
    # a 50000-long row: torch's float32 sum has its own error, which the
    # float64 rule of tests/kernel_tolerance.py takes into account
    check(name, _r(*shape) * 4, dim, False)


@pytest.mark.parametrize("name", ["_softmax.default", "_log_softmax.default"])
def test_softmax_by_rows_non_contiguous_and_half(threads, name):
    x = _r(128, 8, 160).transpose(1, 0, 2)  # not C-contiguous
    check(name, x, -1, False)
    check(name, _r(64, 4, 1000, dtype=F16), -1, False, rtol=1e-3, atol=1e-3)
    ours = KERNELS[name](_r(64, 4, 1000, dtype=F16), -1, True)  # half_to_float: f32 out
    assert ours.dtype == F32


def test_softmax_by_rows_is_the_whole_array_result(threads):
    x = _r(8, 4, 128, 128) * 4
    x[0, 0, 0, :3] = [np.inf, -np.inf, np.nan]
    one = KERNELS["_softmax.default"](x, -1, False)
    with np.errstate(all="ignore"):
        e = np.exp(x - np.max(x, axis=-1, keepdims=True))
        whole = e / np.sum(e, axis=-1, keepdims=True)
    np.testing.assert_array_equal(one, whole)


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape", [(8, 128, 256), (4, 128, 768), (70000, 3)])
def test_layer_norm_by_rows(threads, affine, shape):
    d = shape[-1]
    w, b = (_r(d, seed=1), _r(d, seed=2)) if affine else (None, None)
    check("native_layer_norm.default", _r(*shape) * 3 + 1, [d], w, b, 1e-5, rtol=1e-4, atol=1e-5)


def test_layer_norm_by_rows_non_contiguous_and_half(threads):
    x = _r(256, 8, 128).transpose(1, 0, 2)
    check("native_layer_norm.default", x, [128], _r(128, seed=1), _r(128, seed=2), 1e-5,
          rtol=1e-4, atol=1e-5)
    check("native_layer_norm.default", _r(8, 128, 256, dtype=F16), [256],
          _r(256, dtype=F16, seed=1), _r(256, dtype=F16, seed=2), 1e-5, rtol=1e-3, atol=2e-3)


def test_layer_norm_by_rows_equals_one_pass(threads):
    x, w, b = _r(8, 128, 256), _r(256, seed=1), _r(256, seed=2)
    out, mean, rstd = KERNELS["native_layer_norm.default"](x, w, b, [256], 1e-5)
    m = np.mean(x, axis=-1, keepdims=True, dtype=F32)
    d = x - m
    r = 1 / np.sqrt(np.mean(np.square(d), axis=-1, keepdims=True, dtype=F32) + np.float32(1e-5))
    np.testing.assert_array_equal(mean, m)
    np.testing.assert_array_equal(rstd, r)
    np.testing.assert_array_equal(out, d * r * w + b)


# --- bmm over the batch --------------------------------------------------------

@pytest.mark.parametrize("transposed", [False, True])
def test_bmm_split_over_the_batch(threads, transposed):
    a, b = _r(32, 128, 64), _r(32, 64, 128, seed=1)
    if transposed:  # attention's backward: both operands transposed views
        a, b = _r(32, 64, 128).transpose(0, 2, 1), _r(32, 128, 64, seed=1).transpose(0, 2, 1)
    ours = check("bmm.default", a, b, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(ours, np.matmul(a, b))


def test_bmm_half(threads):
    check("bmm.default", _r(16, 64, 64, dtype=F16), _r(16, 64, 64, dtype=F16, seed=1),
          rtol=2e-3, atol=2e-3)


# --- in_chunks: the optimizer updates and erf/GELU -------------------------------

def test_in_chunks_threads_change_nothing():
    x = _r(PARALLEL_MIN * 2 + 123) * 3
    outs = []
    for t in (1, 2):
        old = set_kernel_threads(t)
        try:
            outs.append((KERNELS["erf.default"](x), KERNELS["gelu.default"](x)))
        finally:
            set_kernel_threads(old)
    for a, b in zip(*outs):
        np.testing.assert_array_equal(a, b)
    # in GELU's tail (x near -3.5, values near -8e-4, a cancellation in
    # x (1 + erf)) ATen's own float32 kernel is ~1e-6 off on some CPUs (the
    # vectorized erf it picks), ours 3e-7: the float64 rule decides
    check("gelu.default", x.reshape(-1, 1))


def test_adam_in_place_threaded_is_bitwise_the_pure_update():
    from tilefx.backend.kernels.ipu import adam

    n = PARALLEL_MIN * 2 + 99
    w, g, m, v = (_r(n, seed=s) for s in range(4))
    v = np.abs(v)
    kw = dict(beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01, decoupled=True,
              bias_correction=True, grad_scale=1.0)
    pure = adam(w, g, m, v, 3, 1e-3, None, None, None, None, **kw)
    old = set_kernel_threads(2)
    try:
        own = adam(w.copy(), g, m.copy(), v.copy(), 3, 1e-3, None, None, None, None, inplace=True,
                   **kw)
    finally:
        set_kernel_threads(old)
    for a, b in zip(own, pure):
        np.testing.assert_array_equal(a, b)


# --- fused groups chunk by chunk --------------------------------------------------

def _group_ir(s: str) -> str:
    return f"""
func.func @main(%x: tensor<{s}xf32>, %b: tensor<700xf32>, %r: tensor<3x50x1xf32>, %n: tensor<i64>,
                %d: tensor<f64>, %p: tensor<50x700xf32>) -> (tensor<{s}xf32>) {{
  %a = aten.mul.Tensor %x, %n : tensor<{s}xf32>, tensor<i64> -> tensor<{s}xf32>
  %c = aten.sub.Tensor %a, %r : tensor<{s}xf32>, tensor<3x50x1xf32> -> tensor<{s}xf32>
  %r2 = aten.div.Tensor %r, %n : tensor<3x50x1xf32>, tensor<i64> -> tensor<3x50x1xf32>
  %e = aten.mul.Tensor %r2, %c : tensor<3x50x1xf32>, tensor<{s}xf32> -> tensor<{s}xf32>
  %f = aten.erf %e : tensor<{s}xf32> -> tensor<{s}xf32>
  %g = aten.add.Tensor %f, %b {{alpha = 2 : i64}} : tensor<{s}xf32>, tensor<700xf32> -> tensor<{s}xf32>
  %h = aten.mul.Tensor %g, %d : tensor<{s}xf32>, tensor<f64> -> tensor<{s}xf32>
  %i = aten.add.Tensor %p, %h : tensor<50x700xf32>, tensor<{s}xf32> -> tensor<{s}xf32>
  %j = aten.exp %i : tensor<{s}xf32> -> tensor<{s}xf32>
  %k = aten.sigmoid %j : tensor<{s}xf32> -> tensor<{s}xf32>
  func.return %k : tensor<{s}xf32>
}}
"""


def _group_inputs():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 50, 700)).astype(F32)
    x[0, 0, :3] = [np.nan, np.inf, -np.inf]
    return [x, rng.standard_normal(700).astype(F32), rng.standard_normal((3, 50, 1)).astype(F32),
            np.array(7), np.array(0.3),
            np.asfortranarray(rng.standard_normal((50, 700)).astype(F32))]  # not C-contiguous


def _torch_group(x, b, r, n, d, p):
    x, b, r, p = (torch.from_numpy(np.ascontiguousarray(v)) for v in (x, b, r, p))
    n, d = torch.tensor(int(n)), torch.tensor(float(d), dtype=torch.float64)
    e = (r / n) * (x * n - r)
    return torch.sigmoid(torch.exp(p + (torch.erf(e) + 2 * b) * d)).numpy()


def test_a_group_with_scalars_of_other_dtypes_and_erf_is_one_step():
    fn = find_func(Parser(graph_context(), _group_ir("3x50x700")).parse_module(), "main")
    assert [len(g.ops) for g in fusion_groups(fn)] == [10]
    assert len(CompiledFunction(fn).steps) == 1


@pytest.mark.parametrize("shape", ["3x50x700", "50x700"])
def test_chunked_group_is_bitwise_op_by_op_and_equals_torch(shape):
    ir = _group_ir(shape)
    if shape == "50x700":  # no leading axis to cut: the rows of axis 0 are the chunks
        ir = ir.replace("tensor<3x50x1xf32>", "tensor<50x1xf32>")
    fn = find_func(Parser(graph_context(), ir).parse_module(), "main")
    xs = _group_inputs()
    if shape == "50x700":
        xs[0], xs[2] = xs[0][0], xs[2][0]
    plain = CompiledFunction(fn, fuse=False)(*xs)[0]
    with np.errstate(all="ignore"):
        ref = _torch_group(*xs)
    for t in (1, 2):
        f = CompiledFunction(fn)
        f.kernel_threads = t
        before = [x.copy() for x in xs]
        out = f(*xs)[0]
        np.testing.assert_array_equal(out, plain)
        for a, b0 in zip(xs, before):
            np.testing.assert_array_equal(a, b0)  # inputs never written
        again = f(*[x * 1 for x in xs])[0]  # the output buffer's next call
        np.testing.assert_array_equal(again, plain)
        assert not np.shares_memory(out, again)  # `out` was still held: a new buffer
    np.testing.assert_allclose(plain, ref, rtol=1e-5, atol=1e-6)



# --- 2-d products split by rows ---------------------------------------------------

@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_mm_split_by_rows(threads, ta, tb):
    """Above SPLIT_MIN_FLOPS the rows go to the kernel threads, one BLAS call
    each; transposed operands (a linear layer's backward) are views, not copies."""
    a = _r(384, 300).T if ta else _r(300, 384)
    b = _r(256, 384, seed=1).T if tb else _r(384, 256, seed=1)
    check("mm.default", a, b, rtol=1e-4, atol=1e-4)


def test_addmm_split_by_rows(threads):
    check("addmm.default", _r(256, seed=2), _r(300, 384), _r(384, 256, seed=1), rtol=1e-4, atol=1e-4)
    check("addmm.default", _r(300, 256, seed=2), _r(384, 300).T, _r(384, 256, seed=1), beta=0.5,
          alpha=2, rtol=1e-4, atol=1e-4)
    check("addmm.default", _r(256, seed=2, dtype=F16), _r(300, 384, dtype=F16),
          _r(384, 256, seed=1, dtype=F16), rtol=2e-3, atol=2e-3)


def test_the_executor_runs_split_products_on_one_blas_thread(monkeypatch):
    """With kernel threads the executor gives mm / addmm / bmm one BLAS thread
    (their kernels split the rows); without, BLAS's own threads by size."""
    from tilefx.backend import steps

    ir = """
func.func @main(%a: tensor<512x512xf32>, %b: tensor<512x512xf32>) -> (tensor<512x512xf32>) {
  %c = aten.mm %a, %b : tensor<512x512xf32>, tensor<512x512xf32> -> tensor<512x512xf32>
  func.return %c : tensor<512x512xf32>
}
"""
    seen = []
    monkeypatch.setattr(steps, "set_blas_threads", seen.append)  # the steps switch the pool
    a, b = _r(512, 512), _r(512, 512, seed=1)
    for cap, want in (("2", 1), ("1", 1)):
        monkeypatch.setenv("TILEFX_BLAS_THREADS", cap)
        tuning.forget_machine_reading()  # the cap is read with the machine, once a second
        f = CompiledFunction(find_func(Parser(graph_context(), ir).parse_module(), "main"))
        assert f.kernel_threads == int(cap)
        seen.clear()
        np.testing.assert_allclose(f(a, b)[0], a @ b, rtol=1e-4, atol=1e-3)
        assert seen == [want]
    tuning.forget_machine_reading()  # the tests after this one read the cap they run under
