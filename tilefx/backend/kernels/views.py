"""Creation, copies, views and shape ops, indexing and gather/scatter."""

from __future__ import annotations


import numpy as np

from tilefx.backend.kernels._common import registrar
from tilefx.backend.kernels._common import (
    _BOOL,
    _F32,
    _F64,
    _I64,
    _cast,
    _dtype,
    _f32,
    _promote,
    _ret,
    _scalar_dtype,
    _ufunc_at,
    _wrap,
)

KERNELS: dict = {}
_kernel = registrar(KERNELS)


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
    # basic slicing: views, as np.split makes, without its Python layers
    # (~100 us a call on caches a product had just evicted: the QKV split)
    dim = _wrap(dim, self.ndim)
    lead = (slice(None),) * dim
    out, start = [], 0
    for n in split_sizes:
        out.append(self[lead + (slice(start, start + int(n)),)])
        start += int(n)
    return out


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
        _ufunc_at(np.add, out, idx, np.broadcast_to(_cast(values, out.dtype), target_shape))
        return _ret(out, self.dtype)
    out = self.copy()
    out[idx] = _cast(values, self.dtype)
    return out


@_kernel("embedding.default")
def embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    # numpy's take wraps a negative index around; torch refuses it, as any
    # index past the table
    if indices.size and (indices.min() < 0 or indices.max() >= weight.shape[0]):
        raise IndexError("index out of range in self")
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
    if index.size == 0:  # torch lets an empty index have any number of dimensions
        return np.empty(index.shape, self.dtype)
    if self.ndim == 0:
        return self.reshape(1)[index.reshape(1)].reshape(index.shape)
    dim = _wrap(dim, self.ndim)
    return _ret(self[_scatter_index(index, dim)])


def _scatter(self, dim, index, src, add):
    if index.size == 0:  # nothing written (an empty index may have any number of dimensions)
        return self.copy()
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
# more views and copies
# ---------------------------------------------------------------------------


@_kernel("lift_fresh_copy.default")
def lift_fresh_copy(self):
    return self.copy()


@_kernel("fill.Scalar")
def fill_Scalar(self, value):
    return np.full(self.shape, value, dtype=self.dtype)


@_kernel("empty.memory_format")
def empty_memory_format(size, *, dtype=None):
    """Uninitialised memory in ATen; zeros here, so runs are reproducible."""
    return np.zeros(tuple(size), dtype=_dtype(dtype, _F32))


@_kernel("empty_strided.default")
def empty_strided(size, stride, *, dtype=None):
    return np.zeros(tuple(size), dtype=_dtype(dtype, _F32))


@_kernel("empty_permuted.default")
def empty_permuted(size, physical_layout, *, dtype=None):
    return np.zeros(tuple(size), dtype=_dtype(dtype, _F32))


def _contiguous_strides(shape) -> list[int]:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return strides[::-1]


@_kernel("sym_size.int")
def sym_size_int(self, dim):
    return np.asarray(self.shape[_wrap(dim, self.ndim)], _I64)


@_kernel("sym_stride.int")
def sym_stride_int(self, dim):
    """Strides of the contiguous layout every tensor has in the executor."""
    return np.asarray(_contiguous_strides(self.shape)[_wrap(dim, self.ndim)], _I64)


@_kernel("sym_storage_offset.default")
def sym_storage_offset(self):
    return np.zeros((), _I64)


@_kernel("sym_numel.default")
def sym_numel(self):
    return np.asarray(self.size, _I64)


@_kernel("as_strided.default")
def as_strided(self, size, stride, storage_offset=None):
    """A strided view of `self`'s elements in row-major order (the frontend
    only keeps as_strided on contiguous tensors at storage offset 0, where
    this is ATen's view)."""
    flat = np.ascontiguousarray(self).reshape(-1)
    off = storage_offset or 0
    reach = off + sum((n - 1) * s for n, s in zip(size, stride) if n > 0)
    if any(n == 0 for n in size):
        return np.zeros(tuple(size), self.dtype)
    if reach >= flat.size or off < 0 or min(stride, default=0) < 0:
        raise ValueError(f"as_strided: size {list(size)}, stride {list(stride)}, offset {off} "
                         f"reach outside the {flat.size} elements of the tensor")
    item = flat.itemsize
    view = np.lib.stride_tricks.as_strided(flat[off:], shape=tuple(size),
                                           strides=tuple(s * item for s in stride), writeable=False)
    return view.copy()


@_kernel("diagonal.default")
def diagonal(self, offset=0, dim1=0, dim2=1):
    d1, d2 = _wrap(dim1, self.ndim), _wrap(dim2, self.ndim)
    return np.diagonal(self, offset=offset, axis1=d1, axis2=d2)


@_kernel("select_scatter.default")
def select_scatter(self, src, dim, index):
    dim = _wrap(dim, self.ndim)
    out = self.copy()
    idx = [slice(None)] * self.ndim
    idx[dim] = index
    out[tuple(idx)] = src
    return out


@_kernel("squeeze.dim")
def squeeze_dim(self, dim):
    if self.ndim == 0:
        return self
    d = _wrap(dim, self.ndim)
    return np.squeeze(self, d) if self.shape[d] == 1 else self


@_kernel("flip.default")
def flip(self, dims):
    if self.ndim == 0:
        return self.copy()
    return np.flip(self, tuple(_wrap(d, self.ndim) for d in dims)).copy()


@_kernel("repeat.default")
def repeat(self, repeats):
    extra = len(repeats) - self.ndim
    if extra < 0:
        raise ValueError("repeat: fewer repeats than dimensions")
    x = self.reshape((1,) * extra + self.shape)
    return np.tile(x, tuple(repeats))


@_kernel("new_empty_strided.default")
def new_empty_strided(self, size, stride, *, dtype=None):
    """Uninitialised memory in ATen; zeros here, so runs are reproducible."""
    return np.zeros(tuple(size), dtype=_dtype(dtype, self.dtype))


@_kernel("unfold.default")
def unfold(self, dimension, size, step):
    """Windows of `size` every `step` along `dimension`, the window last."""
    if self.ndim == 0:
        return self.reshape(1).copy()
    d = _wrap(dimension, self.ndim)
    win = np.lib.stride_tricks.sliding_window_view(self, size, axis=d)
    idx = [slice(None)] * win.ndim
    idx[d] = slice(None, None, step)
    return win[tuple(idx)].copy()


@_kernel("diagonal_scatter.default")
def diagonal_scatter(self, src, offset=0, dim1=0, dim2=1):
    out = self.copy()
    d1, d2 = _wrap(dim1, self.ndim), _wrap(dim2, self.ndim)
    view = np.moveaxis(out, (d1, d2), (-2, -1))
    n = src.shape[-1]
    rows = np.arange(n) + max(-offset, 0)
    cols = np.arange(n) + max(offset, 0)
    view[..., rows, cols] = src
    return out


@_kernel("as_strided_scatter.default")
def as_strided_scatter(self, src, size, stride, storage_offset=None):
    """`self` with `src` written where as_strided(self, size, stride) reads."""
    flat = np.ascontiguousarray(self).reshape(-1).copy()
    pos = np.full(tuple(size), storage_offset or 0, dtype=_I64)
    for axis, (n, st) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[axis] = n
        pos = pos + (np.arange(n, dtype=_I64) * st).reshape(shape)
    flat[pos.reshape(-1)] = np.broadcast_to(src, tuple(size)).reshape(-1)
    return flat.reshape(self.shape)


@_kernel("sym_is_contiguous.default")
def sym_is_contiguous(self):
    """Every tensor the executor holds is contiguous."""
    return np.asarray(True)


@_kernel("resize_.default")
def resize_(self, size):
    """The functional form of resize_: the first elements of `self` in
    row-major order; elements beyond its size (uninitialised in ATen) are 0."""
    out = np.zeros(tuple(size), self.dtype)
    n = min(out.size, self.size)
    out.reshape(-1)[:n] = np.ascontiguousarray(self).reshape(-1)[:n]
    return out
