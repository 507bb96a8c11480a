"""Matmul kernels (BLAS through numpy)."""

from __future__ import annotations


import numpy as np

from tilefx.backend.kernels._common import kernel_threads, parallel_ranges, registrar
from tilefx.backend.kernels._common import (
    _cast,
    _compute_dtype,
    _promote,
    _result_type,
    _ret,
)

KERNELS: dict = {}
_kernel = registrar(KERNELS)


# ---------------------------------------------------------------------------
# matmul
# ---------------------------------------------------------------------------


# A 2-d product of at least this many flops (2 M N K) is split by rows
# between the kernel threads, each row block one single-threaded BLAS call.
SPLIT_MIN_FLOPS = 1 << 25
# The ops whose kernels split so: the executor runs them on one BLAS thread
# when it has kernel threads (backend/emitter.py).
SPLIT_GEMM_OPS = frozenset({"aten.mm", "aten.addmm", "aten.bmm"})


def _product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b for 2-d a, b of one float dtype. With several kernel threads and
    a large product, the rows of a are cut into one block per thread and
    each block is one BLAS call (numpy releases the GIL inside it). Why not
    BLAS's own threads: OpenBLAS's workers busy-wait for ~0.1 s after each
    call and take the second core from the elementwise work that follows
    (the encoder's training step measured 294 against 361 ms with the
    workers put to sleep at once); the kernel threads' worker sleeps."""
    threads = kernel_threads()
    m = a.shape[0]
    if (threads < 2 or a.ndim != 2 or b.ndim != 2 or m < 2 * threads
            or 2 * m * a.shape[1] * b.shape[1] < SPLIT_MIN_FLOPS):
        return np.matmul(a, b)
    out = np.empty((m, b.shape[1]), np.result_type(a, b))
    per = -(-m // threads)
    parallel_ranges(lambda lo, hi: np.matmul(a[lo:hi], b, out=out[lo:hi]), m, per,
                    work=1 << 62)
    return out


def _matmul(a, b):
    rt = _promote(a.dtype, b.dtype)
    ct = _compute_dtype(rt)
    return _ret(_product(_cast(a, ct), _cast(b, ct)), rt)


@_kernel("mm.default")
def mm(self, mat2):
    return _matmul(self, mat2)


@_kernel("bmm.default")
def bmm(self, mat2):
    """One GEMM per batch entry (numpy's matmul loops over the batch); the
    entries are small (attention's 128 x 64 x 128), too small for BLAS's own
    threads, so a large batch is split between the kernel threads instead."""
    if (self.ndim != 3 or mat2.ndim != 3 or self.shape[0] < 2 or self.shape[0] != mat2.shape[0]
            or kernel_threads() < 2):
        return _matmul(self, mat2)
    rt = _promote(self.dtype, mat2.dtype)
    ct = _compute_dtype(rt)
    a, b = _cast(self, ct), _cast(mat2, ct)
    out = np.empty((a.shape[0], a.shape[1], b.shape[2]), ct)
    work = out.size * max(1, a.shape[2] // 8)  # ~ the elementwise passes a GEMM is worth
    per = -(-a.shape[0] // kernel_threads())  # one run of entries per thread: few GIL hand-offs
    parallel_ranges(lambda lo, hi: np.matmul(a[lo:hi], b[lo:hi], out=out[lo:hi]), a.shape[0], per,
                    work=work)
    return _ret(out, rt)


@_kernel("addmm.default")
def addmm(self, mat1, mat2, *, beta=1, alpha=1):
    rt = _result_type(self, mat1, mat2)
    ct = _compute_dtype(rt)
    r = _product(_cast(mat1, ct), _cast(mat2, ct))
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
# distances
# ---------------------------------------------------------------------------


def _pnorm(d, p, axis):
    a = np.abs(d)
    if p == 0:
        return np.sum(a != 0, axis=axis, dtype=d.dtype)
    if p == np.inf:
        return np.max(a, axis=axis) if a.shape[axis] else np.zeros(a.shape[:-1], d.dtype)
    if p == 1:
        return np.sum(a, axis=axis)
    if p == 2:
        return np.sqrt(np.sum(a * a, axis=axis))
    return np.sum(a ** d.dtype.type(p), axis=axis) ** d.dtype.type(1.0 / p)


@_kernel("_pdist_forward.default")
def _pdist_forward(self, p=2.0):
    """Distances between the rows i < j of a 2-d tensor, row-major."""
    x = self.astype(_compute_dtype(self.dtype))
    i, j = np.triu_indices(x.shape[0], k=1)
    return _ret(_pnorm(x[i] - x[j], p, -1), self.dtype)


@_kernel("_cdist_forward.default")
def _cdist_forward(x1, x2, p, compute_mode):
    rt = _promote(x1.dtype, x2.dtype)
    ct = _compute_dtype(rt)
    a, b = _cast(x1, ct), _cast(x2, ct)
    return _ret(_pnorm(a[..., :, None, :] - b[..., None, :, :], p, -1), rt)


def _pnorm_grad(d, dist, p):
    """d ||d||_p / d d, 0 where the distance is 0."""
    with np.errstate(all="ignore"):
        if p == 0:
            return np.zeros_like(d)
        if p == 1:
            return np.sign(d)
        if p == np.inf:
            a = np.abs(d)
            return np.where(a == dist[..., None], np.sign(d), 0).astype(d.dtype)
        if p == 2:
            r = d / dist[..., None]
        else:
            r = d * np.abs(d) ** d.dtype.type(p - 2) / dist[..., None] ** d.dtype.type(p - 1)
    return np.where(dist[..., None] == 0, 0, r).astype(d.dtype)


@_kernel("_pdist_backward.default")
def _pdist_backward(grad, self, pdist, p):
    x = self.astype(_compute_dtype(self.dtype))
    i, j = np.triu_indices(x.shape[0], k=1)
    contrib = _pnorm_grad(x[i] - x[j], pdist.astype(x.dtype), p) * grad.astype(x.dtype)[:, None]
    out = np.zeros_like(x)
    np.add.at(out, i, contrib)
    np.add.at(out, j, -contrib)
    return _ret(out, self.dtype)


@_kernel("_cdist_backward.default")
def _cdist_backward(grad, x1, x2, cdist, p):
    ct = _compute_dtype(x1.dtype)
    a, b = x1.astype(ct), x2.astype(ct)
    d = a[..., :, None, :] - b[..., None, :, :]
    contrib = _pnorm_grad(d, cdist.astype(ct), p) * grad.astype(ct)[..., None]
    return _ret(contrib.sum(axis=-2), x1.dtype)


@_kernel("_trilinear.default")
def _trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim=1):
    """nn.Bilinear's product: each input with size-1 axes inserted at its
    `expand` positions, multiplied (broadcast), summed over `sumdim`."""
    a, b, c = (np.expand_dims(x, tuple(e)) if len(e) else x
               for x, e in ((i1, expand1), (i2, expand2), (i3, expand3)))
    rt = np.result_type(a, b, c)
    ct = np.float32 if rt == np.float16 else rt
    prod = a.astype(ct) * b.astype(ct) * c.astype(ct)
    return (prod.sum(axis=tuple(sumdim), dtype=ct) if len(sumdim) else prod).astype(rt)
