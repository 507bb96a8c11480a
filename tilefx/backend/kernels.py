"""The numpy kernels of the tilefx backend: one table from ATen op name to kernel.

`KERNELS["add.Tensor"](*operands, **props)` runs the op of that name in
`tilefx.dialects.aten_schema.ATEN_SCHEMAS` on numpy arrays. There is exactly one
entry per schema, keyed by the same name, so the executor needs no per-op code:
it looks the name up and calls it. Operands come positionally in schema order
(np.ndarray, None for an absent `Tensor?`, a list for `Tensor[]`); properties
come as keywords. Every parameter has its schema name (operands may be passed
by name too), and every schema default is the Python default of the keyword,
so a property the IR did not record can simply be left out. Kernels return
np.ndarray (0-d for scalars), a tuple for multi-result ops (None for outputs
an output_mask leaves out) and a list for `split_with_sizes`; results may be
views of inputs, never written to afterwards.

The backend knows nothing of torch: this module must not import it. The
semantics (values, result dtypes, type promotion of tensors with Python
scalars) are ATen's, which `tests/test_kernels.py` checks against
`torch.ops.aten`. float16 inputs are computed in float32 and rounded once, the
way the IPU keeps fp32 partials.

The convolution and pooling kernels are the hot path of the CNN benchmark:
they work on whole batches with strided views and BLAS matmuls (im2col; see
the convolution section), never with Python loops over pixels or images
(only over kernel offsets). Big convolutions can split the batch over two
threads (CONV_THREADS).

Importing this module tunes two process-wide settings for these kernels (see
_tune_malloc and _single_threaded_blas): glibc keeps freed memory instead of
page-faulting it back on every call, and numpy's OpenBLAS runs on one thread.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import Callable

import numpy as np
from numpy.lib.stride_tricks import as_strided
from scipy.special import erf as _erf

__all__ = ["KERNELS"]


def _tune_malloc() -> None:
    """Keep freed memory in the heap instead of giving it back to the OS.

    The kernels allocate and free megabyte-sized temporaries on every call
    (im2col columns, outputs). glibc serves blocks above its mmap threshold
    with fresh mmaps and trims the heap top when more than twice that is
    free, so each call page-faults its temporaries in again: measured 2000
    faults (~4 ms) per conv backward on the CNN benchmark, more than the
    arithmetic. Raising both thresholds makes the heap reuse the memory.
    Process-wide and glibc-only; a no-op elsewhere."""
    try:
        import ctypes
        import sys

        if not sys.platform.startswith("linux"):
            return
        libc = ctypes.CDLL("libc.so.6")
        M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
        libc.mallopt(M_MMAP_THRESHOLD, 256 << 20)
        libc.mallopt(M_TRIM_THRESHOLD, 1 << 30)
    except (OSError, AttributeError):
        pass


def _single_threaded_blas() -> None:
    """Run numpy's OpenBLAS on one thread.

    The matmuls here are small (per-image im2col products, 40x320 linear
    layers): threading gains little (mm 40x320x256: 74 -> 50 us) and OpenBLAS's
    busy-waiting threads collapse when they share the 2 cores with torch's
    OpenMP pool or another job: the CNN training step measured 144 ms instead
    of 5 ms. Process-wide; a no-op when numpy's BLAS is not OpenBLAS."""
    try:
        import ctypes
        import glob

        libdir = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")
        for path in glob.glob(os.path.join(libdir, "*openblas*")):
            lib = ctypes.CDLL(path)
            for sym in (
                "scipy_openblas_set_num_threads64_",
                "openblas_set_num_threads64_",
                "openblas_set_num_threads",
            ):
                if hasattr(lib, sym):
                    getattr(lib, sym)(1)
                    break
    except OSError:
        pass


_tune_malloc()
_single_threaded_blas()

KERNELS: dict[str, Callable[..., np.ndarray | tuple[np.ndarray, ...] | list[np.ndarray]]] = {}


def _kernel(name: str):
    def register(fn):
        KERNELS[name] = fn
        return fn

    return register


# ---------------------------------------------------------------------------
# dtype helpers: torch's type promotion
# ---------------------------------------------------------------------------

_BOOL = np.dtype(np.bool_)
_I64 = np.dtype(np.int64)
_F16 = np.dtype(np.float16)
_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)


def _category(dt: np.dtype) -> int:
    k = dt.kind
    if k == "b":
        return 0
    if k in "iu":
        return 1
    if k == "f":
        return 2
    return 3  # complex


def _promote(a: np.dtype | None, b: np.dtype | None) -> np.dtype | None:
    """torch.promote_types: a float beats any integer (int64 + float16 is
    float16), within a category the wider type wins."""
    if a is None:
        return b
    if b is None or a == b:
        return a
    ca, cb = _category(a), _category(b)
    if ca != cb:
        return a if ca > cb else b
    return np.promote_types(a, b)


def _scalar_dtype(s) -> np.dtype:
    if isinstance(s, (bool, np.bool_)):
        return _BOOL
    if isinstance(s, (int, np.integer)):
        return _I64
    if isinstance(s, (float, np.floating)):
        return _F32  # torch's default dtype
    if isinstance(s, (complex, np.complexfloating)):
        return np.dtype(np.complex64)
    raise TypeError(f"not a scalar: {s!r}")


def _combine(higher: np.dtype | None, lower: np.dtype | None) -> np.dtype | None:
    """ATen's combine_categories: a lower-priority operand only matters when
    it is of a higher category (a float scalar with an int tensor)."""
    if higher is None:
        return lower
    if lower is None:
        return higher
    ch = _category(higher)
    if ch >= 2:
        return higher
    if ch == 0 or _category(lower) >= 2:
        return _promote(higher, lower)
    return higher


def _result_type(*args) -> np.dtype:
    """torch.result_type over arrays and Python scalars (None is skipped):
    dimensioned tensors > zero-dim tensors > Python scalars."""
    dim = zero = wrapped = None
    for a in args:
        if a is None:
            continue
        if isinstance(a, np.ndarray):
            if a.ndim:
                dim = _promote(dim, a.dtype)
            else:
                zero = _promote(zero, a.dtype)
        else:
            wrapped = _promote(wrapped, _scalar_dtype(a))
    return _combine(dim, _combine(zero, wrapped))


def _compute_dtype(dt: np.dtype) -> np.dtype:
    return _F32 if dt == _F16 else dt


def _cast(v, dt: np.dtype):
    if isinstance(v, np.ndarray):
        return v if v.dtype == dt else v.astype(dt)
    return dt.type(v)


def _f32(x: np.ndarray) -> np.ndarray:
    """float16 -> float32 for computing; everything else unchanged."""
    return x.astype(_F32) if x.dtype == _F16 else x


def _ret(r, dt: np.dtype | None = None) -> np.ndarray:
    r = np.asarray(r)
    if dt is not None and r.dtype != dt:
        r = r.astype(dt)
    return r


def _dtype(d, default: np.dtype | None = None) -> np.dtype | None:
    """A ScalarType property as np.dtype; `default` when absent."""
    return default if d is None else np.dtype(d)


def _binary(fn, a, b, float_result: bool = False) -> np.ndarray:
    if (
        isinstance(a, np.ndarray)
        and isinstance(b, np.ndarray)
        and a.dtype == b.dtype
        and (a.ndim or not b.ndim)
    ):
        rt = a.dtype
    else:
        rt = _result_type(a, b)
    if float_result and _category(rt) < 2:
        rt = _F32
    ct = _compute_dtype(rt)
    with np.errstate(all="ignore"):
        r = fn(_cast(a, ct), _cast(b, ct))
    return _ret(r, rt)


def _compare(fn, a, b) -> np.ndarray:
    ct = _result_type(a, b)
    with np.errstate(all="ignore"):
        return _ret(fn(_cast(a, ct), _cast(b, ct)))


def _float_unary(fn, x: np.ndarray) -> np.ndarray:
    """Unary math that makes integers float32 (exp, sin, ...)."""
    rt = x.dtype if x.dtype.kind == "f" else _F32
    ct = _compute_dtype(rt)
    with np.errstate(all="ignore"):
        r = fn(_cast(x, ct))
    return _ret(r, rt)


def _same_unary(fn, x: np.ndarray) -> np.ndarray:
    """Unary math keeping the dtype (abs, neg, ...)."""
    ct = _compute_dtype(x.dtype)
    with np.errstate(all="ignore"):
        r = fn(_cast(x, ct))
    return _ret(r, x.dtype)


def _axes(dim, ndim: int) -> tuple[int, ...]:
    """Reduction dims: None or [] mean all; negative dims wrap; a 0-d tensor
    accepts dim 0 / -1 and reduces nothing."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, (int, np.integer)):
        dim = [dim]
    if len(dim) == 0:
        return tuple(range(ndim))
    if ndim == 0:
        return ()
    return tuple(sorted({int(d) % ndim for d in dim}))


def _wrap(d: int, ndim: int) -> int:
    return d % ndim if ndim else 0


def _pair(v, default=None) -> tuple[int, int]:
    if v is None or (not isinstance(v, (int, np.integer)) and len(v) == 0):
        return default
    if isinstance(v, (int, np.integer)):
        return (int(v), int(v))
    if len(v) == 1:
        return (int(v[0]), int(v[0]))
    return (int(v[0]), int(v[1]))


# ---------------------------------------------------------------------------
# elementwise
# ---------------------------------------------------------------------------


@_kernel("abs.default")
def abs_(self):
    return _same_unary(np.abs, self)


@_kernel("neg.default")
def neg(self):
    return _same_unary(np.negative, self)


def _add(a, b, alpha, sub=False):
    def fn(x, y):  # x, y already in the compute dtype
        if alpha != 1:
            y = y * x.dtype.type(alpha)
        return np.subtract(x, y) if sub else np.add(x, y)

    return _binary(fn, a, b)


@_kernel("add.Tensor")
def add_Tensor(self, other, *, alpha=1):
    return _add(self, other, alpha)


@_kernel("add.Scalar")
def add_Scalar(self, other, alpha=1):
    return _add(self, other, alpha)


@_kernel("sub.Tensor")
def sub_Tensor(self, other, *, alpha=1):
    return _add(self, other, alpha, sub=True)


@_kernel("sub.Scalar")
def sub_Scalar(self, other, alpha=1):
    return _add(self, other, alpha, sub=True)


@_kernel("mul.Tensor")
def mul_Tensor(self, other):
    return _binary(np.multiply, self, other)


@_kernel("mul.Scalar")
def mul_Scalar(self, other):
    return _binary(np.multiply, self, other)


@_kernel("div.Tensor")
def div_Tensor(self, other):
    return _binary(np.true_divide, self, other, float_result=True)


@_kernel("div.Scalar")
def div_Scalar(self, other):
    return _binary(np.true_divide, self, other, float_result=True)


@_kernel("pow.Tensor_Scalar")
def pow_Tensor_Scalar(self, exponent):
    def fn(x, e):
        if x.dtype.kind == "f" and e == 2:
            return x * x
        return np.power(x, e)

    return _binary(fn, self, exponent)


@_kernel("pow.Tensor_Tensor")
def pow_Tensor_Tensor(self, exponent):
    return _binary(np.power, self, exponent)


@_kernel("maximum.default")
def maximum(self, other):
    return _binary(np.maximum, self, other)


@_kernel("minimum.default")
def minimum(self, other):
    return _binary(np.minimum, self, other)


@_kernel("bitwise_and.Tensor")
def bitwise_and_Tensor(self, other):
    return _binary(np.bitwise_and, self, other)


@_kernel("bitwise_or.Tensor")
def bitwise_or_Tensor(self, other):
    return _binary(np.bitwise_or, self, other)


@_kernel("bitwise_not.default")
def bitwise_not(self):
    return _ret(np.invert(self))


@_kernel("logical_and.default")
def logical_and(self, other):
    return _ret(np.logical_and(self, other))


@_kernel("logical_not.default")
def logical_not(self):
    return _ret(np.logical_not(self))


def _make_compare(name: str, fn) -> None:
    """name.Tensor and name.Scalar: compare in the promoted dtype, give bool."""

    def cmp_Tensor(self, other):
        return _compare(fn, self, other)

    def cmp_Scalar(self, other):
        return _compare(fn, self, other)

    cmp_Tensor.__name__, cmp_Scalar.__name__ = f"{name}_Tensor", f"{name}_Scalar"
    KERNELS[f"{name}.Tensor"] = cmp_Tensor
    KERNELS[f"{name}.Scalar"] = cmp_Scalar


for _name, _fn in {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}.items():
    _make_compare(_name, _fn)


@_kernel("where.self")
def where_self(condition, self, other):
    rt = _result_type(self, other)
    ct = _compute_dtype(rt)
    cond = condition if condition.dtype == _BOOL else condition.astype(_BOOL)
    return _ret(np.where(cond, _cast(self, ct), _cast(other, ct)), rt)


@_kernel("clamp.default")
def clamp(self, min=None, max=None):  # noqa: A002 - schema names
    rt = _result_type(self, min, max)
    ct = _compute_dtype(rt)
    r = _cast(self, ct)
    with np.errstate(invalid="ignore"):
        if min is not None:
            r = np.maximum(r, ct.type(min))
        if max is not None:
            r = np.minimum(r, ct.type(max))
    if r is self:
        r = r.copy()
    return _ret(r, rt)


def _make_float_unary(name, fn):
    def kernel(self):
        return _float_unary(fn, self)

    kernel.__name__ = name.split(".")[0]
    KERNELS[name] = kernel


def _sigmoid(x):
    return np.reciprocal(np.exp(-x) + x.dtype.type(1))


for _name, _fn in {
    "cos.default": np.cos,
    "sin.default": np.sin,
    "exp.default": np.exp,
    "log.default": np.log,
    "sqrt.default": np.sqrt,
    "tanh.default": np.tanh,
    "erf.default": _erf,
    "reciprocal.default": np.reciprocal,
    "rsqrt.default": lambda x: np.reciprocal(np.sqrt(x)),
    "sigmoid.default": _sigmoid,
}.items():
    _make_float_unary(_name, _fn)


@_kernel("relu.default")
def relu(self):
    if self.dtype == _BOOL:
        return self.copy()
    return _ret(np.maximum(self, self.dtype.type(0)))


@_kernel("leaky_relu.default")
def leaky_relu(self, negative_slope=0.01):
    x = _f32(self)
    return _ret(np.where(x > 0, x, x * x.dtype.type(negative_slope)), self.dtype)


_SQRT1_2 = 0.7071067811865476
_INV_SQRT_2PI = 0.3989422804014327
_GELU_BETA = math.sqrt(2.0) * (2.0 / math.sqrt(math.pi)) * 0.5
_GELU_KAPPA = 0.044715


@_kernel("gelu.default")
def gelu(self, *, approximate="none"):
    def fn(x):
        t = x.dtype.type
        if approximate == "tanh":
            inner = t(_GELU_BETA) * (x + t(_GELU_KAPPA) * (x * x * x))
            return t(0.5) * x * (t(1) + np.tanh(inner))
        return x * t(0.5) * (t(1) + _erf(x * t(_SQRT1_2)))

    return _float_unary(fn, self)


@_kernel("gelu_backward.default")
def gelu_backward(grad_output, self, *, approximate="none"):
    rt = _result_type(grad_output, self)
    ct = _compute_dtype(rt)
    g, x = _cast(grad_output, ct), _cast(self, ct)
    t = ct.type
    with np.errstate(all="ignore"):
        if approximate == "tanh":
            x_sq = x * x
            inner = t(_GELU_BETA) * (x + t(_GELU_KAPPA) * x_sq * x)
            th = np.tanh(inner)
            left = t(0.5) * x
            right = t(1) + th
            left_d = t(0.5) * right
            right_d = left * (t(1) - th * th) * t(_GELU_BETA) * (t(1) + t(3 * _GELU_KAPPA) * x_sq)
            r = g * (left_d + right_d)
        else:
            cdf = t(0.5) * (t(1) + _erf(x * t(_SQRT1_2)))
            pdf = np.exp(t(-0.5) * x * x) * t(_INV_SQRT_2PI)
            r = g * (cdf + x * pdf)
    return _ret(r, rt)


@_kernel("tanh_backward.default")
def tanh_backward(grad_output, output):
    return _binary(lambda g, y: g * (y.dtype.type(1) - y * y), grad_output, output)


@_kernel("sigmoid_backward.default")
def sigmoid_backward(grad_output, output):
    return _binary(lambda g, y: g * (y.dtype.type(1) - y) * y, grad_output, output)


@_kernel("threshold_backward.default")
def threshold_backward(grad_output, self, threshold):
    rt = _result_type(grad_output, self)
    return _ret(np.where(self <= threshold, rt.type(0), _cast(grad_output, rt)), rt)


# ---------------------------------------------------------------------------
# creation and copies
# ---------------------------------------------------------------------------


@_kernel("full.default")
def full(size, fill_value, *, dtype=None):
    dt = _dtype(dtype, _scalar_dtype(fill_value))
    return np.full(tuple(size), fill_value, dtype=dt)


@_kernel("full_like.default")
def full_like(self, fill_value, *, dtype=None):
    dt = _dtype(dtype, self.dtype)
    return np.full(self.shape, fill_value, dtype=dt)


@_kernel("scalar_tensor.default")
def scalar_tensor(s, *, dtype=None):
    return np.asarray(s, dtype=_dtype(dtype, _F32))  # float32 even for ints, as ATen


@_kernel("arange.start_step")
def arange_start_step(start, end, step=1, *, dtype=None):
    dt = _dtype(dtype)
    is_float = any(isinstance(v, (float, np.floating)) for v in (start, end, step))
    if dt is None:
        dt = _F32 if is_float else _I64
    if is_float or dt.kind == "f":
        return np.arange(float(start), float(end), float(step), dtype=_F64).astype(dt)
    return np.arange(int(start), int(end), int(step), dtype=_I64).astype(dt, copy=False)


@_kernel("clone.default")
def clone(self):
    return self.copy()


@_kernel("copy.default")
def copy(self, src, non_blocking=False):
    """`tensor.copy_(src)` after functionalisation: src broadcast to self's shape and dtype."""
    return np.broadcast_to(src, self.shape).astype(self.dtype, copy=True)


@_kernel("alias.default")
def alias(self):
    return self


@_kernel("_to_copy.default")
def _to_copy(self, *, dtype=None):
    with np.errstate(invalid="ignore", over="ignore"):
        return np.array(self, dtype=_dtype(dtype, self.dtype), copy=True)


# ---------------------------------------------------------------------------
# views and shape ops
# ---------------------------------------------------------------------------


@_kernel("view.default")
def view(self, size):
    return self.reshape(tuple(size))


@_kernel("expand.default")
def expand(self, size, *, implicit=False):
    size = list(size)
    lead = len(size) - self.ndim
    shape = [
        self.shape[i - lead] if (s == -1 and i >= lead) else s for i, s in enumerate(size)
    ]
    return np.broadcast_to(self, tuple(shape))


@_kernel("permute.default")
def permute(self, dims):
    return np.transpose(self, tuple(dims))


@_kernel("squeeze.dims")
def squeeze_dims(self, dim):
    if self.ndim == 0:
        return self.view()
    axes = tuple(d for d in {int(d) % self.ndim for d in dim} if self.shape[d] == 1)
    return np.squeeze(self, axis=axes) if axes else self.view()


@_kernel("unsqueeze.default")
def unsqueeze(self, dim):
    return np.expand_dims(self, dim)


@_kernel("select.int")
def select_int(self, dim, index):
    dim = _wrap(dim, self.ndim)
    return self[(slice(None),) * dim + (index, Ellipsis)]


@_kernel("slice.Tensor")
def slice_Tensor(self, dim=0, start=None, end=None, step=1):
    dim = _wrap(dim, self.ndim)
    return self[(slice(None),) * dim + (slice(start, end, step),)]


@_kernel("slice_scatter.default")
def slice_scatter(self, src, dim=0, start=None, end=None, step=1):
    dim = _wrap(dim, self.ndim)
    out = self.copy()
    out[(slice(None),) * dim + (slice(start, end, step),)] = src
    return out


@_kernel("split_with_sizes.default")
def split_with_sizes(self, split_sizes, dim=0):
    dim = _wrap(dim, self.ndim)
    bounds = np.cumsum(split_sizes)[:-1]
    return list(np.split(self, bounds, axis=dim))


@_kernel("cat.default")
def cat(tensors, dim=0):
    ts = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)] or list(tensors[:1])
    dt = None
    for t in tensors:
        dt = _promote(dt, t.dtype)
    dim = _wrap(dim, ts[0].ndim)
    return np.concatenate([_cast(t, dt) for t in ts], axis=dim)


@_kernel("constant_pad_nd.default")
def constant_pad_nd(self, pad, value=0):
    x = self
    sl = [slice(None)] * x.ndim
    widths = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        d = x.ndim - 1 - i
        lo, hi = int(pad[2 * i]), int(pad[2 * i + 1])
        sl[d] = slice(-lo if lo < 0 else 0, x.shape[d] + hi if hi < 0 else x.shape[d])
        widths[d] = (max(lo, 0), max(hi, 0))
    x = x[tuple(sl)]
    shape = tuple(s + lo + hi for s, (lo, hi) in zip(x.shape, widths))
    out = np.full(shape, value, dtype=self.dtype)
    out[tuple(slice(lo, lo + s) for s, (lo, _) in zip(x.shape, widths))] = x
    return out


# ---------------------------------------------------------------------------
# indexing, gather / scatter
# ---------------------------------------------------------------------------


def _index_tuple(indices) -> tuple:
    out = []
    for i in indices:
        if i is None:
            out.append(slice(None))
        elif i.dtype == np.uint8:
            out.append(i.astype(_BOOL))
        else:
            out.append(i)
    return tuple(out)


@_kernel("index.Tensor")
def index_Tensor(self, indices):
    return _ret(self[_index_tuple(indices)])


@_kernel("index_put.default")
def index_put(self, indices, values, accumulate=False):
    idx = _index_tuple(indices)
    if accumulate:
        out = _f32(self).copy()
        target_shape = out[idx].shape
        np.add.at(out, idx, np.broadcast_to(_cast(values, out.dtype), target_shape))
        return _ret(out, self.dtype)
    out = self.copy()
    out[idx] = _cast(values, self.dtype)
    return out


@_kernel("embedding.default")
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return np.take(weight, indices, axis=0)


@_kernel("embedding_dense_backward.default")
def embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
    d = grad_output.shape[-1]
    g = _f32(grad_output).reshape(-1, d)
    idx = indices.reshape(-1).astype(np.intp, copy=False)
    if padding_idx is not None and padding_idx >= 0:
        keep = idx != padding_idx
        g, idx = g[keep], idx[keep]
    if scale_grad_by_freq:
        counts = np.bincount(idx, minlength=num_weights)
        g = g / counts[idx].astype(g.dtype)[:, None]
    out = np.zeros((num_weights, d), dtype=g.dtype)
    np.add.at(out, idx, g)
    return _ret(out, grad_output.dtype)


def _scatter_index(index: np.ndarray, dim: int) -> tuple:
    idx = list(np.indices(index.shape, sparse=True))
    idx[dim] = index
    return tuple(idx)


@_kernel("gather.default")
def gather(self, index, dim, sparse_grad=False):
    if self.ndim == 0:
        return self.reshape(1)[index.reshape(1)].reshape(index.shape)
    dim = _wrap(dim, self.ndim)
    return _ret(self[_scatter_index(index, dim)])


def _scatter(self, dim, index, src, add):
    if self.ndim == 0:
        out = self.reshape(1).copy()
        idx = (index.reshape(-1),)
        src = np.asarray(src).reshape(-1)[: idx[0].size] if isinstance(src, np.ndarray) else src
        shape = self.shape
    else:
        dim = _wrap(dim, self.ndim)
        out = self.copy()
        idx = _scatter_index(index, dim)
        if isinstance(src, np.ndarray):
            src = src[tuple(slice(0, s) for s in index.shape)]
        shape = None
    if add:
        compute = _f32(out)
        np.add.at(compute, idx, _cast(src, compute.dtype))
        out = _ret(compute, self.dtype)
    else:
        out[idx] = src
    return out.reshape(shape) if shape is not None else out


@_kernel("scatter.value")
def scatter_value(self, index, dim, value):
    return _scatter(self, dim, index, value, add=False)


@_kernel("scatter.src")
def scatter_src(self, index, src, dim):
    return _scatter(self, dim, index, src, add=False)


@_kernel("scatter_add.default")
def scatter_add(self, index, src, dim):
    return _scatter(self, dim, index, src, add=True)


# ---------------------------------------------------------------------------
# reductions
# ---------------------------------------------------------------------------


def _sum(x, axes, keepdim, dtype):
    dt = _dtype(dtype)
    if dt is None:
        dt = _I64 if x.dtype.kind in "biu" else x.dtype
    ct = _compute_dtype(dt)
    return _ret(np.sum(_cast(x, ct), axis=axes, keepdims=keepdim, dtype=ct), dt)


@_kernel("sum.dim_IntList")
def sum_dim_IntList(self, dim, keepdim=False, *, dtype=None):
    return _sum(self, _axes(dim, self.ndim), keepdim, dtype)


@_kernel("sum.default")
def sum_default(self, *, dtype=None):
    return _sum(self, None, False, dtype)


def _mean(x, axes, keepdim, dtype):
    dt = _dtype(dtype, x.dtype if x.dtype.kind == "f" else _F32)
    ct = _compute_dtype(dt)
    return _ret(np.mean(_cast(x, ct), axis=axes, keepdims=keepdim, dtype=ct), dt)


@_kernel("mean.default")
def mean_default(self, *, dtype=None):
    return _mean(self, None, False, dtype)


@_kernel("mean.dim")
def mean_dim(self, dim, keepdim=False, *, dtype=None):
    return _mean(self, _axes(dim, self.ndim), keepdim, dtype)


@_kernel("amax.default")
def amax(self, dim=(), keepdim=False):
    return _ret(np.max(self, axis=_axes(dim, self.ndim), keepdims=keepdim))


@_kernel("amin.default")
def amin(self, dim=(), keepdim=False):
    return _ret(np.min(self, axis=_axes(dim, self.ndim), keepdims=keepdim))


@_kernel("any.dim")
def any_dim(self, dim, keepdim=False):
    r = np.any(self, axis=_axes(dim, self.ndim), keepdims=keepdim)
    return _ret(r, np.dtype(np.uint8) if self.dtype == np.uint8 else _BOOL)


@_kernel("argmax.default")
def argmax(self, dim=None, keepdim=False):
    if self.ndim == 0:
        return np.zeros((), dtype=_I64)
    if dim is None:
        r = np.argmax(self.reshape(-1))
        return _ret(r, _I64).reshape((1,) * self.ndim if keepdim else ())
    return _ret(np.argmax(self, axis=_wrap(dim, self.ndim), keepdims=keepdim), _I64)


@_kernel("var_mean.correction")
def var_mean_correction(self, dim=None, *, correction=None, keepdim=False):
    axes = _axes(dim, self.ndim)
    x = _f32(self) if self.dtype.kind == "f" else self.astype(_F32)
    n = 1
    for a in axes:
        n *= self.shape[a]
    c = 1 if correction is None else correction
    m = np.mean(x, axis=axes, keepdims=True, dtype=x.dtype)
    d = x - m
    with np.errstate(all="ignore"):
        var = np.sum(d * d, axis=axes, keepdims=keepdim, dtype=x.dtype)
        var /= x.dtype.type(max(0, n - c))
    if not keepdim:
        m = m.reshape(var.shape)
    rt = self.dtype if self.dtype.kind == "f" else _F32
    return _ret(var, rt), _ret(m, rt)


# ---------------------------------------------------------------------------
# softmax
# ---------------------------------------------------------------------------


@_kernel("_softmax.default")
def _softmax(self, dim, half_to_float):
    rt = _F32 if half_to_float and self.dtype == _F16 else self.dtype
    x = _f32(self)
    if x.ndim == 0:
        return _ret(np.exp(x - x), rt)
    dim = _wrap(dim, x.ndim)
    e = np.exp(x - np.max(x, axis=dim, keepdims=True))
    e /= np.sum(e, axis=dim, keepdims=True)
    return _ret(e, rt)


@_kernel("_log_softmax.default")
def _log_softmax(self, dim, half_to_float):
    rt = _F32 if half_to_float and self.dtype == _F16 else self.dtype
    x = _f32(self)
    if x.ndim == 0:
        return _ret(x - x, rt)
    dim = _wrap(dim, x.ndim)
    s = x - np.max(x, axis=dim, keepdims=True)
    with np.errstate(divide="ignore"):
        s -= np.log(np.sum(np.exp(s), axis=dim, keepdims=True))
    return _ret(s, rt)


@_kernel("_softmax_backward_data.default")
def _softmax_backward_data(grad_output, output, dim, input_dtype):
    g, y = _f32(grad_output), _f32(output)
    dim = _wrap(dim, g.ndim)
    r = y * (g - np.sum(g * y, axis=dim, keepdims=True))
    return _ret(r, np.dtype(input_dtype))


@_kernel("_log_softmax_backward_data.default")
def _log_softmax_backward_data(grad_output, output, dim, input_dtype):
    g, y = _f32(grad_output), _f32(output)
    dim = _wrap(dim, g.ndim)
    r = g - np.exp(y) * np.sum(g, axis=dim, keepdims=True)
    return _ret(r, np.dtype(input_dtype))


# ---------------------------------------------------------------------------
# matmul
# ---------------------------------------------------------------------------


def _matmul(a, b):
    rt = _promote(a.dtype, b.dtype)
    ct = _compute_dtype(rt)
    return _ret(np.matmul(_cast(a, ct), _cast(b, ct)), rt)


@_kernel("mm.default")
def mm(self, mat2):
    return _matmul(self, mat2)


@_kernel("bmm.default")
def bmm(self, mat2):
    return _matmul(self, mat2)


@_kernel("addmm.default")
def addmm(self, mat1, mat2, *, beta=1, alpha=1):
    rt = _result_type(self, mat1, mat2)
    ct = _compute_dtype(rt)
    r = np.matmul(_cast(mat1, ct), _cast(mat2, ct))
    if alpha != 1:
        r *= ct.type(alpha)
    if beta != 0:
        s = _cast(self, ct)
        if beta != 1:
            s = s * ct.type(beta)
        if r.shape == np.broadcast_shapes(r.shape, s.shape):
            r += s
        else:
            r = r + s
    return _ret(r, rt)


# ---------------------------------------------------------------------------
# normalization and dropout
# ---------------------------------------------------------------------------


@_kernel("native_layer_norm.default")
def native_layer_norm(input, weight, bias, normalized_shape, eps):
    k = len(normalized_shape)
    x = _f32(input)
    axes = tuple(range(x.ndim - k, x.ndim))
    mean = np.mean(x, axis=axes, keepdims=True, dtype=x.dtype)
    d = x - mean
    var = np.mean(d * d, axis=axes, keepdims=True, dtype=x.dtype)
    rstd = 1 / np.sqrt(var + x.dtype.type(eps))
    out = d * rstd
    if weight is not None:
        out *= _f32(weight)
    if bias is not None:
        out += _f32(bias)
    return _ret(out, input.dtype), _ret(mean, input.dtype), _ret(rstd, input.dtype)


@_kernel("native_layer_norm_backward.default")
def native_layer_norm_backward(
    grad_out, input, mean, rstd, weight, bias, normalized_shape, output_mask
):
    k = len(normalized_shape)
    x, g = _f32(input), _f32(grad_out)
    mu, rs = _f32(mean), _f32(rstd)
    axes = tuple(range(x.ndim - k, x.ndim))
    batch_axes = tuple(range(x.ndim - k))
    xhat = (x - mu) * rs
    gi = gw = gb = None
    if output_mask[0]:
        gg = g * _f32(weight) if weight is not None else g
        m1 = np.mean(gg, axis=axes, keepdims=True)
        m2 = np.mean(gg * xhat, axis=axes, keepdims=True)
        gi = _ret(rs * (gg - m1 - xhat * m2), input.dtype)
    if output_mask[1] and weight is not None:
        gw = _ret(np.sum(g * xhat, axis=batch_axes), weight.dtype)
    if output_mask[2] and bias is not None:
        gb = _ret(np.sum(g, axis=batch_axes), bias.dtype)
    return gi, gw, gb


def _bn_shape(x, v):
    return v.reshape((1, -1) + (1,) * (x.ndim - 2))


@_kernel("_native_batch_norm_legit_functional.default")
def _native_batch_norm_legit_functional(
    input, weight, bias, running_mean, running_var, training, momentum, eps
):
    x = _f32(input)
    t = x.dtype.type
    stat_dt = running_mean.dtype if input.dtype == _F16 else input.dtype
    if not training:
        out, _, _ = _native_batch_norm_legit_no_training(
            input, weight, bias, running_mean, running_var, momentum, eps
        )
        empty = np.empty((0,), dtype=stat_dt)
        return out, empty, empty.copy(), running_mean.copy(), running_var.copy()
    axes = (0,) + tuple(range(2, x.ndim))
    n = x.size // x.shape[1]
    mean = np.mean(x, axis=axes, dtype=x.dtype)
    d = x - _bn_shape(x, mean)
    var = np.mean(d * d, axis=axes, dtype=x.dtype)
    invstd = 1 / np.sqrt(var + t(eps))
    scale = invstd if weight is None else invstd * _f32(weight)
    d *= _bn_shape(x, scale)
    if bias is not None:
        d += _bn_shape(x, _f32(bias))
    rm, rv = _f32(running_mean), _f32(running_var)
    m = rm.dtype.type(momentum)
    unbiased = var * t(n / max(n - 1, 1))
    new_rm = (1 - m) * rm + m * mean
    new_rv = (1 - m) * rv + m * unbiased
    return (
        _ret(d, input.dtype),
        _ret(mean, stat_dt),
        _ret(invstd, stat_dt),
        _ret(new_rm, running_mean.dtype),
        _ret(new_rv, running_var.dtype),
    )


@_kernel("_native_batch_norm_legit_no_training.default")
def _native_batch_norm_legit_no_training(
    input, weight, bias, running_mean, running_var, momentum, eps
):
    x = _f32(input)
    t = x.dtype.type
    invstd = 1 / np.sqrt(_f32(running_var).astype(x.dtype) + t(eps))
    alpha = invstd if weight is None else invstd * _f32(weight)
    beta = -_f32(running_mean).astype(x.dtype) * alpha
    if bias is not None:
        beta = beta + _f32(bias)
    out = x * _bn_shape(x, alpha) + _bn_shape(x, beta)
    stat_dt = running_mean.dtype if input.dtype == _F16 else input.dtype
    empty = np.empty((0,), dtype=stat_dt)
    return _ret(out, input.dtype), empty, empty.copy()


@_kernel("native_dropout.default")
def native_dropout(input, p, train, *, rng=None):
    """train True or None: keep each element with probability 1 - p,
    mask = rng.random(shape) >= p, scaled by 1 / (1 - p); train False:
    identity and an all-True mask. `rng` (np.random.Generator) makes it
    reproducible; None means a fresh default_rng(0)."""
    if rng is None:
        rng = np.random.default_rng(0)
    if train is False:
        return input.copy(), np.ones(input.shape, dtype=_BOOL)
    if p >= 1:
        return np.zeros_like(input), np.zeros(input.shape, dtype=_BOOL)
    mask = rng.random(input.shape) >= p
    x = _f32(input)
    out = x * mask * x.dtype.type(1.0 / (1.0 - p))
    return _ret(out, input.dtype), _ret(mask)


@_kernel("native_dropout_backward.default")
def native_dropout_backward(grad_output, mask, scale):
    g = _f32(grad_output)
    return _ret(g * (mask.astype(g.dtype) * g.dtype.type(scale)), grad_output.dtype)


# ---------------------------------------------------------------------------
# convolution (im2col + BLAS)
# ---------------------------------------------------------------------------
#
# Column matrix: the input padded to (N, C, Hp, Wp), contiguous, unrolled to
# one row per (c, kh, kw) and one column per (n, oh, ow). When the width
# stride is 1, each (c, kh, kw, n, oh) piece is a contiguous run of OW input
# values, copied as one element of a void dtype (an order of magnitude faster
# than numpy's strided float copy with short rows).
# The matmuls are batched over images through strided views of the same
# buffers (no copies): OpenBLAS is markedly faster on these per-image
# products than on one very wide or very deep 2-D product.
# The input gradient of stride-1 convolutions goes through
# _conv_backward_rows instead, which works on flat padded planes.


class _Geom:
    __slots__ = (
        "N", "C", "H", "W", "Hp", "Wp", "KH", "KW", "sh", "sw", "ph", "pw",
        "dh", "dw", "OH", "OW", "R", "rows",
    )  # fmt: skip

    def __init__(self, xshape, wshape, stride, padding, dilation, grad_input):
        self.N, self.C, self.H, self.W = xshape
        self.KH, self.KW = wshape[2], wshape[3]
        self.sh, self.sw = stride
        self.ph, self.pw = padding
        self.dh, self.dw = dilation
        self.Hp, self.Wp = self.H + 2 * self.ph, self.W + 2 * self.pw
        self.OH = (self.Hp - self.dh * (self.KH - 1) - 1) // self.sh + 1
        self.OW = (self.Wp - self.dw * (self.KW - 1) - 1) // self.sw + 1
        self.R = self.OH * self.OW
        # The row-wise backward wastes (Wp - OW) / OW of its matmuls and
        # copies O*KW rows of grad_output, but replaces KH*KW strided col2im
        # adds over (N, C, OH, OW) by KH contiguous ones: measured better
        # when C*KH >= O (CNN conv2: 1.2 ms vs 2.2 ms), worse otherwise.
        self.rows = (
            grad_input
            and self.sh == 1
            and self.sw == 1
            and self.Wp <= 2 * self.OW
            and self.C * self.KH >= wshape[0]
        )


@lru_cache(maxsize=256)
def _geom(xshape, wshape, stride, padding, dilation, grad_input) -> _Geom:
    return _Geom(xshape, wshape, stride, padding, dilation, grad_input)


def _conv_args(input, weight, stride, padding, dilation, transposed, grad_input=False):
    if transposed:
        raise NotImplementedError("transposed convolution")
    nd = input.ndim - 2
    if nd == 1:
        input, weight = input[:, :, None, :], weight[:, :, None, :]
        stride = (1, _pair(stride)[0])
        padding = (0, _pair(padding)[0])
        dilation = (1, _pair(dilation)[0])
    elif nd == 2:
        stride, padding, dilation = _pair(stride), _pair(padding), _pair(dilation)
    else:
        raise NotImplementedError(f"{nd}-d convolution")
    g = _geom(input.shape, weight.shape, stride, padding, dilation, grad_input)
    return input, weight, g, nd


def _pad_input(x: np.ndarray, g: _Geom) -> np.ndarray:
    """The zero-padded input, contiguous (x may hold any number of images)."""
    if g.ph or g.pw:
        xp = np.zeros((x.shape[0], g.C, g.Hp, g.Wp), dtype=x.dtype)
        xp[:, :, g.ph : g.ph + g.H, g.pw : g.pw + g.W] = x
        return xp
    return np.ascontiguousarray(x)


def _im2col(xp: np.ndarray, g: _Geom) -> np.ndarray:
    """(C*KH*KW, n*OH*OW) column matrix of the padded contiguous input."""
    isz = xp.itemsize
    sN, sC, sH, sW = xp.strides
    C, KH, KW, N = g.C, g.KH, g.KW, xp.shape[0]
    if g.sw == 1 and g.sh == 1 and g.OW * isz < 64:
        # short rows: unroll kw first, (c, kw, n, h) -> row of OW, then kh,
        # (c, kh, kw, n) -> OH consecutive rows: fewer, longer copy elements
        # (CNN conv2: 140 us instead of 227)
        rs = g.OW * isz
        s1 = np.ndarray(
            (C, KW, N, g.Hp), dtype=np.dtype((np.void, rs)), buffer=xp,
            strides=(sC, g.dw * sW, sN, sH),
        )  # fmt: skip
        s1 = np.ascontiguousarray(s1)
        s2 = np.ndarray(
            (C, KH, KW, N), dtype=np.dtype((np.void, g.OH * rs)), buffer=s1,
            strides=(KW * N * g.Hp * rs, g.dh * rs, N * g.Hp * rs, g.Hp * rs),
        )  # fmt: skip
        cols = np.ascontiguousarray(s2).view(xp.dtype)
    elif g.sw == 1:
        vt = np.dtype((np.void, g.OW * isz))
        shape = (C, KH, KW, N, g.OH)
        strides = (sC, g.dh * sH, g.dw * sW, sN, g.sh * sH)
        src = np.ndarray(shape, dtype=vt, buffer=xp, strides=strides)
        cols = np.ascontiguousarray(src).view(xp.dtype)
    else:
        src = as_strided(
            xp,
            (C, KH, KW, N, g.OH, g.OW),
            (sC, g.dh * sH, g.dw * sW, sN, g.sh * sH, g.sw * sW),
        )
        cols = np.ascontiguousarray(src)
    return cols.reshape(C * KH * KW, N * g.R)


def _per_image(m: np.ndarray, G: int, N: int) -> np.ndarray:
    """(G*rows, N*L) -> the (N, G, rows, L) view: one matrix per image."""
    rows, L = m.shape[0] // G, m.shape[1] // N
    return m.reshape(G, rows, N, L).transpose(2, 0, 1, 3)


# CONV_THREADS = 2 runs big convolutions as two halves of the batch on two
# threads (numpy and BLAS release the GIL in everything heavy here; with
# single-threaded BLAS this is how the conv kernels would use the second
# core, as PyTorch eager does). It pays only when the second core is idle:
# CNN training step 4.0 ms instead of 4.5 ms then, but 0.3 ms slower when a
# thread spins there, e.g. torch's OpenMP pool after the torch copy_ of the
# weight write-back each step. Off by default.
CONV_THREADS = 1
_POOL: list = [None, 0]  # executor, pid that created it
_NCPU = os.cpu_count() or 1
_PARALLEL_MIN_FLOPS = 20_000_000  # CNN conv1 (11.5 MFLOP) measured no faster split


def _batch_parallel(fn, N: int, flops: int) -> list:
    """[fn(0, N)], or [fn(0, h), fn(h, N)] run on two threads when the work is
    worth a thread hand-off (about 30 us)."""
    if min(CONV_THREADS, _NCPU) < 2 or N < 2 or flops < _PARALLEL_MIN_FLOPS:
        return [fn(0, N)]
    if _POOL[0] is None or _POOL[1] != os.getpid():  # none yet, or forked
        _POOL[0] = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tilefx-kernels")
        _POOL[1] = os.getpid()
    h = N // 2
    fut = _POOL[0].submit(fn, h, N)
    first = fn(0, h)
    return [first, fut.result()]


@_kernel("convolution.default")
def convolution(
    input, weight, bias, stride, padding, dilation, transposed, output_padding, groups
):
    rt = _promote(input.dtype, weight.dtype)
    ct = _compute_dtype(rt)
    x, w, g, nd = _conv_args(input, weight, stride, padding, dilation, transposed)
    x, w = _cast(x, ct), _cast(w, ct)
    O, G, N, R = w.shape[0], groups, g.N, g.R
    w3 = w.reshape(G, O // G, -1)
    b = None if bias is None else _cast(bias, ct)[:, None, None]
    out = np.empty((N, O, g.OH, g.OW), dtype=ct)

    def part(n0, n1):
        cols = _im2col(_pad_input(x[n0:n1], g), g)
        o = out[n0:n1]
        np.matmul(w3, _per_image(cols, G, n1 - n0), out=o.reshape(n1 - n0, G, O // G, R))
        if b is not None:
            o += b

    _batch_parallel(part, N, 2 * N * R * w.size)
    if nd == 1:
        out = out.reshape(N, O, g.OW)
    return _ret(out, rt)


@_kernel("convolution_backward.default")
def convolution_backward(
    grad_output,
    input,
    weight,
    bias_sizes,
    stride,
    padding,
    dilation,
    transposed,
    output_padding,
    groups,
    output_mask,
):
    x, w, g, nd = _conv_args(
        input, weight, stride, padding, dilation, transposed, bool(output_mask[0])
    )
    ct = _compute_dtype(_promote(_promote(input.dtype, weight.dtype), grad_output.dtype))
    O, G, N = w.shape[0], groups, g.N
    go = _cast(grad_output, ct).reshape(N, O, g.OH, g.OW)
    x = _cast(x, ct)
    wc = _cast(w, ct)
    gi = np.empty((N, g.C, g.H, g.W), dtype=ct) if output_mask[0] else None
    part_fn = _conv_backward_rows if g.rows else _conv_backward_cols

    def part(n0, n1):
        return part_fn(go[n0:n1], x[n0:n1], wc, g, G, output_mask, ct, gi, n0)

    parts = _batch_parallel(part, N, 2 * N * g.R * w.size * (bool(output_mask[0]) + 1))
    gw = gb = None
    if output_mask[1]:
        gw = parts[0][0] if len(parts) == 1 else parts[0][0] + parts[1][0]
    if output_mask[2]:
        gb = parts[0][1] if len(parts) == 1 else parts[0][1] + parts[1][1]
    return (
        None if gi is None else _ret(gi.reshape(input.shape), input.dtype),
        None if gw is None else _ret(gw.reshape(weight.shape), weight.dtype),
        None if gb is None else _ret(gb, grad_output.dtype),
    )


def _conv_backward_cols(go, x, w, g: _Geom, G: int, output_mask, ct, gi_out, n0):
    """Backward through the column matrix for the images of `go` / `x` (the
    batch [n0, n0 + len)): returns (grad_weight, grad_bias) partials and
    writes grad_input = col2im(W^T @ go) into gi_out."""
    O, N, R = w.shape[0], go.shape[0], g.R
    Og = O // G
    go4 = go.reshape(N, G, Og, R)  # per image and group: (Og, OH*OW) matrices
    gw = gb = None
    if output_mask[2]:
        gb = go.reshape(N, O, R).sum(axis=2, dtype=ct).sum(axis=0)
    if output_mask[1]:
        cols = _im2col(_pad_input(x, g), g)
        # sum over images of cols_n @ go_n^T: OpenBLAS is ~3x faster on these
        # per-image products than on one (CKK, N*OH*OW) x (N*OH*OW, O) product
        gw = np.matmul(_per_image(cols, G, N), go4.transpose(0, 1, 3, 2)).sum(axis=0)
        gw = gw.transpose(0, 2, 1)  # (G, Og, CgKK)
    if output_mask[0]:
        wt = w.reshape(G, Og, -1).transpose(0, 2, 1)  # (G, CgKK, Og)
        dcols = np.matmul(wt, go4)  # (N, G, CgKK, R)
        # col2im: one strided add per kernel position
        C, KH, KW = g.C, g.KH, g.KW
        dc = dcols.reshape(N, C, KH, KW, g.OH, g.OW)
        target = gi_out[n0 : n0 + N]
        padded = bool(g.ph or g.pw)
        if padded:
            gp = np.zeros((N, C, g.Hp, g.Wp), dtype=ct)
        else:
            gp = target
            gp.fill(0)
        eh, ew = g.sh * (g.OH - 1) + 1, g.sw * (g.OW - 1) + 1
        for i in range(KH):
            for j in range(KW):
                h0, w0 = i * g.dh, j * g.dw
                gp[:, :, h0 : h0 + eh : g.sh, w0 : w0 + ew : g.sw] += dc[:, :, i, j]
        if padded:
            target[...] = gp[:, :, g.ph : g.ph + g.H, g.pw : g.pw + g.W]
    return gw, gb


def _conv_backward_rows(go, x, w, g: _Geom, G: int, output_mask, ct, gi_out, n0):
    """Stride-1 backward in flat padded planes, with only the kernel rows (kh)
    unrolled on the input side and the kernel columns (kw) on the grad_output
    side (s < S = R + (KW-1)*dw, R = (OH-1)*Wp + OW):

        Xi[(c, i), n, s] = x[n, c, s + i*dh*Wp]
        Gj[(o, j), n, s] = go_flat[o, n, s - j*dw]     (0 outside the outputs)
        grad_weight[o, c, i, j] = sum_{n, s} Xi[(c, i), n, s] Gj[(o, j), n, s]
        P[n, (c, i)] = W[(c, i), (o, j)] @ Gj[n]
        grad_input[n, c, i*dh*Wp + s] += P[n, (c, i), s]

    so col2im is KH shifted contiguous adds instead of KH*KW strided ones,
    and neither operand is the KH*KW-times inflated column matrix. Same
    interface as _conv_backward_cols."""
    O, N, C, KH, KW = w.shape[0], go.shape[0], g.C, g.KH, g.KW
    Og, Cg = O // G, C // G
    isz = np.dtype(ct).itemsize
    R = (g.OH - 1) * g.Wp + g.OW
    pad = (KW - 1) * g.dw
    S = R + pad
    Lb = R + 2 * pad
    # grad_output in the flat padded plane, `pad` zeros on both sides
    gbuf = np.zeros((O, N, Lb), dtype=ct)
    np.copyto(
        as_strided(
            gbuf[:, :, pad:], (N, O, g.OH, g.OW), (Lb * isz, N * Lb * isz, g.Wp * isz, isz)
        ),
        go,
    )
    gb = np.sum(gbuf.reshape(O, -1), axis=1, dtype=ct) if output_mask[2] else None
    vt = np.dtype((np.void, S * isz))
    gj = np.ndarray(
        (O, KW, N), dtype=vt, buffer=gbuf, offset=pad * isz,
        strides=(N * Lb * isz, -g.dw * isz, Lb * isz),
    )  # fmt: skip
    gj = np.ascontiguousarray(gj).view(ct).reshape(O * KW, N * S)
    gw = None
    if output_mask[1]:
        xp = _pad_input(x, g)
        sN, sC, sH, _ = xp.strides
        xi = np.ndarray((C, KH, N), dtype=vt, buffer=xp, strides=(sC, g.dh * sH, sN))
        xi = np.ascontiguousarray(xi).view(ct).reshape(G, Cg * KH, N * S)
        gwm = np.matmul(xi, gj.reshape(G, Og * KW, N * S).transpose(0, 2, 1))
        gw = gwm.reshape(G, Cg, KH, Og, KW).transpose(0, 3, 1, 2, 4)
    if output_mask[0]:
        wr = w.reshape(G, Og, Cg, KH, KW).transpose(0, 2, 3, 1, 4)
        p = np.matmul(wr.reshape(G, Cg * KH, Og * KW), _per_image(gj, G, N))
        p = p.reshape(N, C, KH, S)
        target = gi_out[n0 : n0 + N]
        padded = bool(g.ph or g.pw)
        if padded:
            gp = np.zeros((N, C, g.Hp * g.Wp), dtype=ct)
        else:
            gp = target.reshape(N, C, g.Hp * g.Wp)
            gp.fill(0)
        for i in range(KH):
            off = i * g.dh * g.Wp
            gp[:, :, off : off + S] += p[:, :, i]
        if padded:
            gp = gp.reshape(N, C, g.Hp, g.Wp)
            target[...] = gp[:, :, g.ph : g.ph + g.H, g.pw : g.pw + g.W]
    return gw, gb


# ---------------------------------------------------------------------------
# pooling
# ---------------------------------------------------------------------------


def _pool_out(L: int, k: int, s: int, p: int, d: int, ceil: bool) -> int:
    num = L + 2 * p - d * (k - 1) - 1
    out = (num + (s - 1 if ceil else 0)) // s + 1
    if ceil and (out - 1) * s >= L + p:
        out -= 1
    return out


def _pool_params(kernel_size, stride, padding, dilation=1):
    kh, kw = _pair(kernel_size)
    sh, sw = _pair(stride, (kh, kw))
    ph, pw = _pair(padding)
    dh, dw = _pair(dilation)
    return kh, kw, sh, sw, ph, pw, dh, dw


@lru_cache(maxsize=256)
def _maxpool_plan(H, W, kh, kw, sh, sw, ph, pw, dh, dw, ceil):
    OH = _pool_out(H, kh, sh, ph, dh, ceil)
    OW = _pool_out(W, kw, sw, pw, dw, ceil)
    pad_b = max(0, (OH - 1) * sh + (kh - 1) * dh + 1 - H - ph)
    pad_r = max(0, (OW - 1) * sw + (kw - 1) * dw + 1 - W - pw)
    oh = np.arange(OH) * sh - ph
    ow = np.arange(OW) * sw - pw
    # flat index of each window's top-left corner (may be in the padding)
    base = (oh[:, None] * W + ow[None, :]).astype(np.int64)
    # flat offset of kernel position k = i * kw + j from the corner
    koff = np.array([i * dh * W + j * dw for i in range(kh) for j in range(kw)], np.int64)
    # first in-bounds kernel position of each window: torch's initial index
    i0 = (np.maximum(-oh, 0) + dh - 1) // dh
    j0 = (np.maximum(-ow, 0) + dw - 1) // dw
    kdt = np.int8 if kh * kw < 127 else np.int32
    kfirst = (i0[:, None] * kw + j0[None, :]).astype(kdt)
    return OH, OW, pad_b, pad_r, base, koff, kfirst


@_kernel("max_pool2d_with_indices.default")
def max_pool2d_with_indices(
    self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False
):
    x = self if self.ndim == 4 else self[None]
    N, C, H, W = x.shape
    kh, kw, sh, sw, ph, pw, dh, dw = _pool_params(kernel_size, stride, padding, dilation)
    OH, OW, pad_b, pad_r, base, koff, kfirst = _maxpool_plan(
        H, W, kh, kw, sh, sw, ph, pw, dh, dw, bool(ceil_mode)
    )
    is_float = x.dtype.kind == "f"
    lowest = -np.inf if is_float else np.iinfo(x.dtype).min
    padded = bool(ph or pw or pad_b or pad_r)
    if padded:
        xp = np.full((N, C, ph + H + pad_b, pw + W + pad_r), lowest, dtype=x.dtype)
        xp[:, :, ph : ph + H, pw : pw + W] = x
    else:
        xp = x
    nan_aware = False
    if is_float:
        with np.errstate(all="ignore"):
            nan_aware = bool(np.isnan(np.add.reduce(x, axis=None)))
    # all windows at once, kernel position first: (kh*kw, N, C, OH, OW)
    sN, sC, sH, sW = xp.strides
    win = np.ascontiguousarray(
        as_strided(xp, (kh, kw, N, C, OH, OW), (dh * sH, dw * sW, sN, sC, sh * sH, sw * sW))
    ).reshape(kh * kw, N, C, OH, OW)
    # running max and the kernel position that holds it; a later position
    # wins only when strictly greater (or NaN), as in ATen's loop
    shape = (N, C, OH, OW)
    kid = np.empty(shape, dtype=kfirst.dtype)
    if padded:
        best = np.full(shape, lowest, dtype=x.dtype)
        kid[...] = kfirst
        k0 = 0
    else:
        best = win[0].copy()
        kid[...] = 0
        k0 = 1
    m = np.empty(shape, dtype=_BOOL)
    tmp = np.empty(shape, dtype=kid.dtype)
    for k in range(k0, kh * kw):
        v = win[k]
        np.greater(v, best, out=m)
        if nan_aware:
            m |= np.isnan(v)
        np.maximum(best, v, out=best)
        # positions only grow, so "last k where m" is a running maximum
        np.multiply(m, kid.dtype.type(k), out=tmp)
        np.maximum(kid, tmp, out=kid)
    idx = np.take(koff, kid)
    idx += base
    if self.ndim == 3:
        best, idx = best[0], idx[0]
    return best, idx


@lru_cache(maxsize=64)
def _plane_offsets(planes: int, plane_size: int) -> np.ndarray:
    return (np.arange(planes, dtype=np.int64) * plane_size)[:, None]


@_kernel("max_pool2d_with_indices_backward.default")
def max_pool2d_with_indices_backward(
    grad_output, self, indices, kernel_size, stride, padding, dilation, ceil_mode
):
    kh, kw, sh, sw, ph, pw, dh, dw = _pool_params(kernel_size, stride, padding, dilation)
    H, W = self.shape[-2:]
    planes = self.size // (H * W) if self.size else 0
    go = _f32(grad_output).reshape(planes, -1)
    ind = indices.reshape(planes, -1)
    overlap = sh < (kh - 1) * dh + 1 or sw < (kw - 1) * dw + 1
    if not overlap:
        # every input position is in at most one window: a plain scatter
        gi = np.zeros((planes, H * W), dtype=go.dtype)
        flat = (ind + _plane_offsets(planes, H * W)).reshape(-1)
        gi.reshape(-1)[flat] = go.reshape(-1)
    else:
        flat = (ind + _plane_offsets(planes, H * W)).reshape(-1)
        gi = np.bincount(flat, weights=go.reshape(-1), minlength=planes * H * W)
    return _ret(gi.reshape(self.shape), grad_output.dtype)


def _avg_plan(H, W, kh, kw, sh, sw, ph, pw, ceil, count_include_pad, divisor_override):
    OH = _pool_out(H, kh, sh, ph, 1, ceil)
    OW = _pool_out(W, kw, sw, pw, 1, ceil)

    def sizes(L, O, k, s, p):
        start = np.arange(O) * s - p
        end = np.minimum(start + k, L + p)
        full = end - start
        clipped = np.minimum(end, L) - np.maximum(start, 0)
        return full, clipped

    fh, ch = sizes(H, OH, kh, sh, ph)
    fw, cw = sizes(W, OW, kw, sw, pw)
    if divisor_override:
        div = np.full((OH, OW), float(divisor_override))
    elif count_include_pad:
        div = (fh[:, None] * fw[None, :]).astype(np.float64)
    else:
        div = (ch[:, None] * cw[None, :]).astype(np.float64)
    pad_b = max(0, (OH - 1) * sh + kh - H - ph)
    pad_r = max(0, (OW - 1) * sw + kw - W - pw)
    return OH, OW, pad_b, pad_r, div


@_kernel("avg_pool2d.default")
def avg_pool2d(
    self,
    kernel_size,
    stride=(),
    padding=0,
    ceil_mode=False,
    count_include_pad=True,
    divisor_override=None,
):
    x = _f32(self if self.ndim == 4 else self[None])
    N, C, H, W = x.shape
    kh, kw, sh, sw, ph, pw, _, _ = _pool_params(kernel_size, stride, padding)
    OH, OW, pad_b, pad_r, div = _avg_plan(
        H, W, kh, kw, sh, sw, ph, pw, ceil_mode, count_include_pad, divisor_override
    )
    if ph or pw or pad_b or pad_r:
        xp = np.zeros((N, C, ph + H + pad_b, pw + W + pad_r), dtype=x.dtype)
        xp[:, :, ph : ph + H, pw : pw + W] = x
    else:
        xp = x
    eh, ew = sh * (OH - 1) + 1, sw * (OW - 1) + 1
    acc = np.zeros((N, C, OH, OW), dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            acc += xp[:, :, i : i + eh : sh, j : j + ew : sw]
    acc /= div.astype(x.dtype)
    if self.ndim == 3:
        acc = acc[0]
    return _ret(acc, self.dtype)


@_kernel("avg_pool2d_backward.default")
def avg_pool2d_backward(
    grad_output,
    self,
    kernel_size,
    stride,
    padding,
    ceil_mode,
    count_include_pad,
    divisor_override,
):
    g = _f32(grad_output if grad_output.ndim == 4 else grad_output[None])
    N, C, H, W = (self if self.ndim == 4 else self[None]).shape
    kh, kw, sh, sw, ph, pw, _, _ = _pool_params(kernel_size, stride, padding)
    OH, OW, pad_b, pad_r, div = _avg_plan(
        H, W, kh, kw, sh, sw, ph, pw, ceil_mode, count_include_pad, divisor_override
    )
    g = g / div.astype(g.dtype)
    gp = np.zeros((N, C, ph + H + pad_b, pw + W + pad_r), dtype=g.dtype)
    eh, ew = sh * (OH - 1) + 1, sw * (OW - 1) + 1
    for i in range(kh):
        for j in range(kw):
            gp[:, :, i : i + eh : sh, j : j + ew : sw] += g
    gi = gp[:, :, ph : ph + H, pw : pw + W]
    return _ret(gi.reshape(self.shape), self.dtype)
