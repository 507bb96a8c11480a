"""Dense linear algebra (torch.linalg's factorizations and solves), torch.mode.

torch runs these on the CPU through LAPACK (MKL's build); the kernels call
the same LAPACK drivers through scipy (OpenBLAS's reference LAPACK), one
matrix of a batch at a time and in the input's own precision (`sgetrf` for
float32, as torch), so results carry torch's conventions: LU pivots are
1-based int32 row swaps (getrf), QR's R has LAPACK's signs (geqrf + orgqr),
`info` is LAPACK's. Two LAPACKs may pick different signs for eigenvectors
(syevd) and singular vectors (gesdd): a vector is only defined up to its
sign, and MKL and the reference LAPACK differ in about a quarter of the
columns. Everything that does not depend on that sign (eigen- and singular
values, projections V diag(w) V^T, pinv, matrix norms and their gradients)
equals torch's.

Ops whose results depend on the matrices' values on the host (torch raising
for a singular matrix) keep torch's check as `_linalg_check_errors`, which
fails the call at run time with torch's message.
"""

from __future__ import annotations

import functools
import types

import numpy as np

from tilefx.backend.kernels._common import _I64, _wrap, registrar

KERNELS: dict = {}
_kernel = registrar(KERNELS)

_I32 = np.dtype(np.int32)


@functools.cache
def _scipy() -> types.SimpleNamespace:
    """scipy.linalg and its LAPACK and BLAS wrappers, imported on first use:
    the import is ~0.15 s of every cold start, for ops few programs have."""
    from scipy import linalg
    from scipy.linalg import blas, lapack

    return types.SimpleNamespace(sl=linalg, blas=blas, lapack=lapack)


def _mT(a: np.ndarray) -> np.ndarray:
    return np.swapaxes(a, -1, -2)


def _batched(*arrays: np.ndarray, cores: tuple[int, ...]):
    """The common batch shape of arrays whose last `cores[i]` dimensions are
    one matrix (or vector), and the arrays broadcast to it (torch broadcasts
    the batch dimensions of linalg operands)."""
    batch = np.broadcast_shapes(*[a.shape[:a.ndim - c] for a, c in zip(arrays, cores)])
    return batch, [np.broadcast_to(a, batch + a.shape[a.ndim - c:]) for a, c in zip(arrays, cores)]


def _each(batch: tuple[int, ...]):
    return np.ndindex(*batch) if batch else [()]


# ---------------------------------------------------------------------------
# torch's checks of LAPACK's `info`
# ---------------------------------------------------------------------------


def _info_message(info: int, api_name: str) -> str:
    """torch's words (`_linalg_check_errors`) for a positive LAPACK info."""
    if "inv" in api_name:
        return (f"The diagonal element {info} is zero, the inversion could not be completed because the "
                "input matrix is singular.")
    if "solve" in api_name:
        return "The solver failed because the input matrix is singular."
    if "cholesky" in api_name:
        return ("The factorization could not be completed because the input is not positive-definite "
                f"(the leading minor of order {info} is not positive-definite).")
    if "svd" in api_name:
        return ("The algorithm failed to converge because the input matrix is ill-conditioned or has "
                f"too many repeated singular values (error code: {info - 1}).")
    if "eig" in api_name or "syevd" in api_name:
        return ("The algorithm failed to converge because the input matrix is ill-conditioned or has "
                f"too many repeated eigenvalues (error code: {info}).")
    if "lu_factor" in api_name:
        return (f"U[{info},{info}] is zero and using it on lu_solve would result in a division by zero. "
                "If you still want to perform the factorization, consider calling linalg.lu(A, pivot) "
                "or linalg.lu_factor_ex(A, pivot)")
    return f"Unknown error code: {info}."


def _check(info: np.ndarray, api_name: str, is_matrix: bool) -> None:
    bad = np.flatnonzero(np.asarray(info).reshape(-1))
    if bad.size:
        b = int(bad[0])
        where = "" if is_matrix else f": (Batch element {b})"
        raise ValueError(f"{api_name}{where}: {_info_message(int(np.asarray(info).reshape(-1)[b]), api_name)}")


@_kernel("_linalg_check_errors.default")
def _linalg_check_errors(info, api_name, is_matrix):
    """torch.linalg's check that every factorization succeeded (a singular
    matrix for inv/solve, not positive-definite for cholesky): the call fails
    with torch's message, as torch raises."""
    _check(info, api_name, is_matrix)


# ---------------------------------------------------------------------------
# LU: getrf / getrs
# ---------------------------------------------------------------------------


def _lu_factor(a: np.ndarray):
    """(LU, pivots (1-based int32), info (int32)) of every matrix of a
    (..., m, n): LAPACK's getrf, as torch.linalg.lu_factor_ex on the CPU."""
    (getrf,) = _scipy().lapack.get_lapack_funcs(("getrf",), (a,))
    m, n = a.shape[-2:]
    batch = a.shape[:-2]
    lu = np.empty(a.shape, a.dtype)
    piv = np.empty(batch + (min(m, n),), _I32)
    info = np.zeros(batch, _I32)
    for i in _each(batch):
        lu[i], p, info[i] = getrf(a[i])
        piv[i] = p[:min(m, n)] + 1
    return lu, piv, info


def _lu_solve(lu: np.ndarray, piv: np.ndarray, b: np.ndarray, trans: int) -> np.ndarray:
    """op(A) X = B from A's LU (trans 0: A, 1: A^T), batches broadcast."""
    (getrs,) = _scipy().lapack.get_lapack_funcs(("getrs",), (lu,))
    batch, (lu_b, b_b) = _batched(lu, b, cores=(2, 2))
    piv_b = np.broadcast_to(piv, batch + piv.shape[-1:])
    out = np.empty(batch + b.shape[-2:], lu.dtype)
    for i in _each(batch):
        out[i], _ = getrs(lu_b[i], piv_b[i] - 1, b_b[i], trans=trans)
    return out


def _det_sign(piv: np.ndarray, dtype) -> np.ndarray:
    """The determinant of the row permutation: -1 per pivot that swapped."""
    swaps = np.sum(piv != np.arange(1, piv.shape[-1] + 1, dtype=piv.dtype), axis=-1)
    return np.where(swaps % 2 == 0, 1, -1).astype(dtype)


def _no_pivot(pivot: bool) -> None:
    if not pivot:
        raise ValueError("linalg.lu_factor: LU without pivoting is not implemented on the CPU")


@_kernel("linalg_lu_factor_ex.default")
def linalg_lu_factor_ex(A, pivot=True, check_errors=False):
    _no_pivot(pivot)
    lu, piv, info = _lu_factor(A)
    if check_errors:
        _check(info, "torch.linalg.lu_factor_ex", A.ndim == 2)
    return lu, piv, info


def _unpack(lu: np.ndarray, piv: np.ndarray, unpack_data: bool, unpack_pivots: bool):
    """P, L, U with A = P @ L @ U from getrf's packed LU and row swaps
    (torch.lu_unpack; an output not asked for is an empty tensor)."""
    m, n = lu.shape[-2:]
    k = min(m, n)
    empty = np.empty((0,), lu.dtype)
    L = U = P = empty
    if unpack_data:
        L = np.tril(lu[..., :, :k], -1) + np.eye(m, k, dtype=lu.dtype)
        U = np.triu(lu[..., :k, :])
    if unpack_pivots:
        batch = piv.shape[:-1]
        P = np.zeros(batch + (m, m), lu.dtype)
        for i in _each(batch):
            perm = np.arange(m)
            for r, p in enumerate(piv[i] - 1):  # getrf swapped row r with row p, in order
                perm[r], perm[p] = perm[p], perm[r]
            P[i][perm, np.arange(m)] = 1
    return P, L, U


@_kernel("lu_unpack.default")
def lu_unpack(LU_data, LU_pivots, unpack_data=True, unpack_pivots=True):
    return _unpack(LU_data, LU_pivots, unpack_data, unpack_pivots)


@_kernel("linalg_lu.default")
def linalg_lu(A, pivot=True):
    _no_pivot(pivot)
    lu, piv, _ = _lu_factor(A)
    return _unpack(lu, piv, True, True)


@_kernel("linalg_lu_solve.default")
def linalg_lu_solve(LU, pivots, B, left=True, adjoint=False):
    if left:
        return _lu_solve(LU, pivots, B, 1 if adjoint else 0)
    # X op(A) = B  <=>  op(A)^T X^T = B^T (real matrices)
    return _mT(_lu_solve(LU, pivots, _mT(B), 0 if adjoint else 1))


@_kernel("linalg_inv_ex.default")
def linalg_inv_ex(A, check_errors=False):
    """torch inverts by solving A X = I from A's LU (getrf + getrs)."""
    lu, piv, info = _lu_factor(A)
    inv = _lu_solve(lu, piv, np.broadcast_to(np.eye(A.shape[-1], dtype=A.dtype), A.shape), 0)
    if check_errors:
        _check(info, "torch.linalg.inv_ex", A.ndim == 2)
    return inv, info


@_kernel("_linalg_solve_ex.default")
def _linalg_solve_ex(A, B, left=True, check_errors=False):
    """torch.linalg.solve: LU of A, then getrs; B of shape A.shape[:-1] (or 1-d)
    is a vector right-hand side (torch's numpy-compatible rule). The LU and
    pivots are results the backward reuses."""
    lu, piv, info = _lu_factor(A)
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and B.shape == A.shape[:-1])
    b = B[..., None] if vector else B
    x = linalg_lu_solve(lu, piv, b, left=left)
    if vector:
        x = x[..., 0]
    if check_errors:
        _check(info, "torch.linalg.solve_ex", A.ndim == 2)
    return x, lu, piv, info


@_kernel("_linalg_det.default")
def _linalg_det(A):
    """torch factors A^T (det(A^T) = det(A)): the LU it returns, which the
    backward solves with, is A^T's. (The frontend passes A^T for a matrix torch
    saw non-contiguous, whose own LU torch factors.)"""
    lu, piv, _ = _lu_factor(_mT(A))
    diag = np.diagonal(lu, axis1=-2, axis2=-1)
    return np.asarray(np.prod(diag, axis=-1) * _det_sign(piv, A.dtype)), lu, piv


@_kernel("_linalg_slogdet.default")
def _linalg_slogdet(A):
    """sign and log|det| from the diagonal of A^T's LU (as `_linalg_det`)."""
    lu, piv, _ = _lu_factor(_mT(A))
    diag = np.diagonal(lu, axis1=-2, axis2=-1)
    sign = np.asarray(np.prod(np.sign(diag), axis=-1) * _det_sign(piv, A.dtype), A.dtype)
    with np.errstate(divide="ignore"):
        logabs = np.asarray(np.sum(np.log(np.abs(diag)), axis=-1), A.dtype)
    return sign, logabs, lu, piv


# ---------------------------------------------------------------------------
# Cholesky and triangular solves
# ---------------------------------------------------------------------------


@_kernel("linalg_cholesky_ex.default")
def linalg_cholesky_ex(self, upper=False, check_errors=False):
    """potrf on the lower (upper) triangle of each matrix; the other triangle
    of the result is zero."""
    (potrf,) = _scipy().lapack.get_lapack_funcs(("potrf",), (self,))
    batch = self.shape[:-2]
    out = np.empty(self.shape, self.dtype)
    info = np.zeros(batch, _I32)
    for i in _each(batch):
        out[i], info[i] = potrf(self[i], lower=not upper, clean=1)
    if check_errors:
        _check(info, "torch.linalg.cholesky_ex", self.ndim == 2)
    return out, info


@_kernel("cholesky.default")
def cholesky(self, upper=False):
    """The deprecated torch.cholesky: torch raises for a matrix that is not
    positive-definite (no `info` result to check later)."""
    out, info = linalg_cholesky_ex(self, upper)
    _check(info, "cholesky", self.ndim == 2)
    return out


@_kernel("cholesky_solve.default")
def cholesky_solve(self, input2, upper=False):
    """A X = B for A = L L^T given L (`input2`) and B (`self`): potrs."""
    (potrs,) = _scipy().lapack.get_lapack_funcs(("potrs",), (input2,))
    batch, (b, c) = _batched(self, input2, cores=(2, 2))
    out = np.empty(batch + self.shape[-2:], self.dtype)
    for i in _each(batch):
        out[i], _ = potrs(c[i], b[i], lower=not upper)
    return out


@_kernel("cholesky_inverse.default")
def cholesky_inverse(self, upper=False):
    """(L L^T)^-1 from L: potri fills one triangle, mirrored to the other."""
    (potri,) = _scipy().lapack.get_lapack_funcs(("potri",), (self,))
    batch = self.shape[:-2]
    out = np.empty(self.shape, self.dtype)
    for i in _each(batch):
        r, _ = potri(self[i], lower=not upper)
        t = np.tril(r) if not upper else np.triu(r)
        out[i] = t + _mT(np.tril(r, -1) if not upper else np.triu(r, 1))
    return out


def _trsm(a: np.ndarray, b: np.ndarray, upper: bool, left: bool, trans: bool, unit: bool) -> np.ndarray:
    """op(A) X = B (left) or X op(A) = B with triangular A: BLAS trsm, which
    reads only A's `upper`/lower triangle, as torch on the CPU."""
    (trsm,) = _scipy().blas.get_blas_funcs(("trsm",), (a,))
    batch, (a_b, b_b) = _batched(a, b, cores=(2, 2))
    out = np.empty(batch + b.shape[-2:], a.dtype)
    for i in _each(batch):
        out[i] = trsm(1.0, a_b[i], b_b[i], side=0 if left else 1, lower=not upper,
                      trans_a=1 if trans else 0, diag=1 if unit else 0)
    return out


@_kernel("linalg_solve_triangular.default")
def linalg_solve_triangular(self, B, upper, left=True, unitriangular=False):
    return _trsm(self, B, upper, left, False, unitriangular)


@_kernel("triangular_solve.default")
def triangular_solve(self, A, upper=True, transpose=False, unitriangular=False):
    """The deprecated form: B (`self`) first, and a copy of A (at the batch
    shape) as the second result."""
    x = _trsm(A, self, upper, True, transpose, unitriangular)
    return x, np.broadcast_to(A, x.shape[:-2] + A.shape[-2:]).copy()


# ---------------------------------------------------------------------------
# QR, SVD, eigh, pinv, matrix_exp
# ---------------------------------------------------------------------------


@_kernel("linalg_qr.default")
def linalg_qr(A, mode="reduced"):
    """geqrf + orgqr (scipy.linalg.qr), as torch: R's diagonal keeps LAPACK's signs."""
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"qr received unrecognized mode '{mode}' but expected one of 'reduced' "
                         "(default), 'r', or 'complete'")
    m, n = A.shape[-2:]
    k = min(m, n)
    batch = A.shape[:-2]
    rows = m if mode == "complete" else k
    R = np.empty(batch + (rows, n), A.dtype)
    Q = np.empty((0,), A.dtype) if mode == "r" else np.empty(batch + (m, rows), A.dtype)
    how = {"reduced": "economic", "complete": "full", "r": "r"}[mode]
    for i in _each(batch):
        res = _scipy().sl.qr(A[i], mode=how, check_finite=False)
        if mode == "r":
            R[i] = res[0]
        else:
            Q[i], R[i] = res
    return Q, R


@_kernel("_linalg_svd.default")
def _linalg_svd(A, full_matrices=False, compute_uv=True, driver=None):
    """gesdd (torch's CPU driver; `driver` is a cuSOLVER choice, an error on
    the CPU in torch too). U and Vh are empty tensors without compute_uv."""
    if driver is not None:
        raise ValueError("torch.linalg.svd: keyword argument `driver=` is only supported on CUDA "
                         "inputs with cuSOLVER backend.")
    m, n = A.shape[-2:]
    k = min(m, n)
    batch = A.shape[:-2]
    S = np.empty(batch + (k,), A.dtype)
    if not compute_uv:
        for i in _each(batch):
            S[i] = _scipy().sl.svd(A[i], compute_uv=False, lapack_driver="gesdd", check_finite=False)
        return np.empty((0,), A.dtype), S, np.empty((0,), A.dtype)
    ku, kv = (m, n) if full_matrices else (k, k)
    U = np.empty(batch + (m, ku), A.dtype)
    Vh = np.empty(batch + (kv, n), A.dtype)
    for i in _each(batch):
        U[i], S[i], Vh[i] = _scipy().sl.svd(A[i], full_matrices=full_matrices, lapack_driver="gesdd",
                                   check_finite=False)
    return U, S, Vh


@_kernel("_linalg_eigh.default")
def _linalg_eigh(A, UPLO="L", compute_v=True):
    """syevd on the lower (UPLO="L") or upper triangle; ascending eigenvalues."""
    if UPLO not in ("L", "U"):
        raise ValueError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    n = A.shape[-1]
    batch = A.shape[:-2]
    w = np.empty(batch + (n,), A.dtype)
    V = np.empty(batch + (n, n), A.dtype) if compute_v else np.empty((0,), A.dtype)
    for i in _each(batch):
        res = _scipy().sl.eigh(A[i], lower=UPLO == "L", eigvals_only=not compute_v, driver="evd",
                      check_finite=False)
        if compute_v:
            w[i], V[i] = res
        else:
            w[i] = res
    return w, V


@_kernel("linalg_pinv.atol_rtol_tensor")
def linalg_pinv_atol_rtol_tensor(self, atol=None, rtol=None, hermitian=False):
    """torch's formula: singular values (|eigenvalues| when hermitian) above
    max(atol, rtol * largest) are inverted; rtol defaults to eps * max(m, n)
    when atol is not given (0 where a given atol is positive)."""
    dt = self.dtype
    m, n = self.shape[-2:]
    default_rtol = np.asarray(np.finfo(dt).eps * max(m, n), dt)
    atol_v = np.zeros((), dt) if atol is None else atol.astype(dt, copy=False)
    if rtol is not None:
        rtol_v = rtol.astype(dt, copy=False)
    elif atol is not None:
        rtol_v = np.where(atol > 0, np.zeros((), dt), default_rtol)
    else:
        rtol_v = default_rtol
    if not hermitian:
        U, S, Vh = _linalg_svd(self)
        top = S[..., :1]
        tol = np.maximum(atol_v[..., None], rtol_v[..., None] * top)
        with np.errstate(divide="ignore"):
            S_inv = np.where(S > tol, 1 / S, 0).astype(dt)
        return np.asarray(np.matmul(_mT(Vh), S_inv[..., None] * _mT(U)), dt)
    w, V = _linalg_eigh(self)
    a = np.abs(w)
    tol = np.maximum(atol_v[..., None], rtol_v[..., None] * a.max(axis=-1, keepdims=True))
    with np.errstate(divide="ignore"):
        w_inv = np.where(a > tol, 1 / w, 0).astype(dt)
    return np.asarray(np.matmul(V * w_inv[..., None, :], _mT(V)), dt)


@_kernel("linalg_matrix_exp.default")
def linalg_matrix_exp(self):
    """scipy's scaling-and-squaring Pade approximant (torch uses a Taylor
    polynomial of the same accuracy: the two agree to rounding)."""
    if self.shape[-1] == 0:
        return self.copy()
    return np.asarray(_scipy().sl.expm(self), self.dtype)


# ---------------------------------------------------------------------------
# mode
# ---------------------------------------------------------------------------


@_kernel("mode.default")
def mode(self, dim=-1, keepdim=False):
    """The most frequent value along `dim` (the smallest among equally
    frequent ones) and the index of its last occurrence, as torch on the CPU."""
    if self.ndim == 0:
        return self.copy(), np.zeros((), _I64)
    axis = _wrap(dim, self.ndim)
    x = np.moveaxis(self, axis, -1)
    lead, n = x.shape[:-1], x.shape[-1]
    rows = x.reshape(-1, n)
    order = np.argsort(rows, axis=-1, kind="stable")
    s = np.take_along_axis(rows, order, axis=-1)
    r = rows.shape[0]
    new = np.ones(s.shape, bool)
    new[:, 1:] = s[:, 1:] != s[:, :-1]
    run = np.cumsum(new, axis=-1) - 1  # which run of equal values each sorted element is in
    counts = np.bincount((run + np.arange(r)[:, None] * n).ravel(), minlength=r * n).reshape(r, n)
    best = np.argmax(counts, axis=-1)  # the first longest run: the smallest value
    last = np.sum(run <= best[:, None], axis=-1) - 1
    values = s[np.arange(r), last].reshape(lead)
    indices = order[np.arange(r), last].astype(_I64).reshape(lead)
    if keepdim:
        values, indices = np.expand_dims(values, axis), np.expand_dims(indices, axis)
    return np.asarray(values), np.asarray(indices)
