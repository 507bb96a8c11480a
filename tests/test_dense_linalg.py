"""Dense linear algebra and torch.mode: kernels against torch.ops.aten, and
models using each torch function compiled, run and trained against PyTorch.

Matrices are well conditioned (A A^T + n I), so float32 results agree with
torch's to rtol 1e-5. Eigenvectors and singular vectors are only defined up
to sign and two LAPACKs (torch's MKL, scipy's reference LAPACK) choose
differently: those are compared through sign-free quantities (V diag(w) V^T,
|U|, U S Vh), which is also what the models compute.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import tilefx
from test_kernels import F32, F64, check, r
from tilefx.backend.kernels import KERNELS

CASES: list = []


def case(name, *args, tol=None, id=None, **kwargs):
    CASES.append(pytest.param(name, args, kwargs, tol or {}, id=id or name))


def spd(*shape, dtype=F32):
    """Symmetric positive-definite matrices (..., n, n)."""
    a = r(*shape, dtype=F64)
    n = shape[-1]
    return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n)).astype(dtype)


def lower(*shape, dtype=F32):
    """Lower-triangular matrices with a diagonal away from zero."""
    n = shape[-1]
    return (np.tril(r(*shape, dtype=F64)) + 3 * np.eye(n)).astype(dtype)


for _dt, _tag in ((F32, "f32"), (F64, "f64")):
    _A, _B = spd(2, 3, 3, dtype=_dt), r(2, 3, 2, dtype=_dt)
    case("linalg_inv_ex.default", _A, id=f"inv_ex-{_tag}")
    case("_linalg_solve_ex.default", _A, _B, id=f"solve_ex-{_tag}")
    case("_linalg_solve_ex.default", _A, r(2, 3, dtype=_dt), id=f"solve_ex-vector-{_tag}")
    case("_linalg_solve_ex.default", _A[0], _B, id=f"solve_ex-broadcast-{_tag}")
    case("_linalg_solve_ex.default", _A, r(2, 2, 3, dtype=_dt), left=False, id=f"solve_ex-right-{_tag}")
    case("_linalg_det.default", r(2, 3, 3, dtype=_dt), id=f"det-{_tag}")
    case("_linalg_slogdet.default", r(2, 4, 4, dtype=_dt), id=f"slogdet-{_tag}")
    case("linalg_lu_factor_ex.default", r(2, 4, 3, dtype=_dt), id=f"lu_factor_ex-{_tag}")
    case("linalg_lu.default", r(2, 3, 4, dtype=_dt), id=f"lu-{_tag}")
    case("linalg_cholesky_ex.default", _A, id=f"cholesky_ex-{_tag}")
    case("linalg_cholesky_ex.default", _A, upper=True, id=f"cholesky_ex-upper-{_tag}")
    case("cholesky_solve.default", _B, lower(2, 3, 3, dtype=_dt), id=f"cholesky_solve-{_tag}")
    case("cholesky_solve.default", _B, np.swapaxes(lower(3, 3, dtype=_dt), 0, 1).copy(), True,
         id=f"cholesky_solve-upper-{_tag}")
    case("cholesky_inverse.default", lower(2, 3, 3, dtype=_dt), id=f"cholesky_inverse-{_tag}")
    case("cholesky_inverse.default", np.swapaxes(lower(3, 3, dtype=_dt), 0, 1).copy(), True,
         id=f"cholesky_inverse-upper-{_tag}")
    case("linalg_solve_triangular.default", lower(2, 3, 3, dtype=_dt), _B, upper=False,
         id=f"solve_triangular-{_tag}")
    case("linalg_solve_triangular.default", np.swapaxes(lower(3, 3, dtype=_dt), 0, 1).copy(),
         r(2, 2, 3, dtype=_dt), upper=True, left=False, unitriangular=True,
         id=f"solve_triangular-right-unit-{_tag}")
    case("triangular_solve.default", _B, lower(3, 3, dtype=_dt), False, True,
         id=f"triangular_solve-{_tag}")
    case("linalg_qr.default", r(2, 4, 3, dtype=_dt), id=f"qr-{_tag}")
    case("linalg_qr.default", r(4, 3, dtype=_dt), "complete", id=f"qr-complete-{_tag}")
    case("linalg_qr.default", r(2, 3, 4, dtype=_dt), "r", id=f"qr-r-{_tag}")
    case("_linalg_svd.default", r(2, 4, 3, dtype=_dt), False, False, id=f"svdvals-{_tag}")
    case("_linalg_eigh.default", _A, "L", False, id=f"eigvalsh-{_tag}")
    case("linalg_pinv.atol_rtol_tensor", r(2, 4, 3, dtype=_dt), id=f"pinv-{_tag}")
    case("linalg_pinv.atol_rtol_tensor", _A, hermitian=True, id=f"pinv-hermitian-{_tag}")
    case("linalg_pinv.atol_rtol_tensor", r(3, 2, dtype=_dt), atol=np.asarray(0.1, _dt),
         id=f"pinv-atol-{_tag}")
    case("linalg_matrix_exp.default", 0.3 * r(2, 3, 3, dtype=_dt), id=f"matrix_exp-{_tag}")
_LU, _PIV = (t.numpy() for t in torch.linalg.lu_factor(torch.from_numpy(r(2, 3, 3))))
case("linalg_lu_solve.default", _LU, _PIV, r(2, 3, 2), id="lu_solve")
case("linalg_lu_solve.default", _LU, _PIV, r(3, 2), adjoint=True, id="lu_solve-adjoint")
case("linalg_lu_solve.default", _LU, _PIV, r(2, 2, 3), left=False, id="lu_solve-right")
case("linalg_lu_solve.default", _LU, _PIV, r(2, 2, 3), left=False, adjoint=True,
     id="lu_solve-right-adjoint")
_LU, _PIV = (t.numpy() for t in torch.linalg.lu_factor(torch.from_numpy(r(2, 4, 3))))
case("lu_unpack.default", _LU, _PIV, id="lu_unpack")
case("lu_unpack.default", _LU, _PIV, False, True, id="lu_unpack-pivots-only")
case("lu_unpack.default", _LU, _PIV, True, False, id="lu_unpack-data-only")
case("mode.default", np.round(r(3, 7) * 1.5).astype(F32), id="mode")
case("mode.default", np.round(r(4, 5, 3)).astype(F32), 1, True, id="mode-dim1-keepdim")
case("mode.default", np.array([3, 1, 3, 1, 2, 2], np.int64), id="mode-int-ties")
case("mode.default", np.asarray(2.0, F32), id="mode-0d")


@pytest.mark.parametrize("name,args,kwargs,tol", CASES)
def test_kernel_matches_aten(name, args, kwargs, tol):
    check(name, *args, **kwargs, **tol)


@pytest.mark.parametrize("dt", [F32, F64])
def test_sign_free_results_match(dt):
    """eigh and svd: values equal torch's, vectors up to their sign."""
    A = spd(2, 4, 4, dtype=dt)
    w, V = KERNELS["_linalg_eigh.default"](A)
    tw, tV = torch.ops.aten._linalg_eigh(torch.from_numpy(A))
    rtol = 1e-5 if dt == F32 else 1e-12
    np.testing.assert_allclose(w, tw.numpy(), rtol=rtol)
    np.testing.assert_allclose(np.abs(V), np.abs(tV.numpy()), rtol=rtol, atol=1e-5)
    np.testing.assert_allclose(V @ (w[..., None] * np.swapaxes(V, -1, -2)), A, rtol=rtol, atol=1e-5)
    X = r(2, 5, 3, dtype=dt)
    for full in (False, True):
        U, S, Vh = KERNELS["_linalg_svd.default"](X, full)
        tU, tS, tVh = torch.ops.aten._linalg_svd(torch.from_numpy(X), full)
        assert U.shape == tuple(tU.shape) and Vh.shape == tuple(tVh.shape)
        np.testing.assert_allclose(S, tS.numpy(), rtol=rtol)
        np.testing.assert_allclose(np.abs(U[..., :3]), np.abs(tU.numpy()[..., :3]), rtol=rtol, atol=1e-5)
        np.testing.assert_allclose((U[..., :3] * S[..., None, :]) @ Vh[..., :3, :], X, rtol=rtol, atol=1e-5)
    w, V = KERNELS["_linalg_eigh.default"](A, "U")
    np.testing.assert_allclose(w, torch.ops.aten._linalg_eigh(torch.from_numpy(A), "U")[0].numpy(),
                               rtol=rtol)


def test_check_errors_raise_torch_messages():
    """`_linalg_check_errors` (and check_errors=True) fail with torch's words."""
    singular = np.array([[[1.0, 2.0], [2.0, 4.0]], [[1.0, 0.0], [0.0, 1.0]]], F32)
    for name, api in (("linalg_inv_ex.default", "linalg.inv"),
                      ("linalg_cholesky_ex.default", "linalg.cholesky")):
        info = KERNELS[name](-singular if "chol" in name else singular)[-1]
        with pytest.raises(RuntimeError) as ref:
            torch.ops.aten._linalg_check_errors(torch.from_numpy(info), api, is_matrix=False)
        with pytest.raises(ValueError) as ours:
            KERNELS["_linalg_check_errors.default"](info, api, is_matrix=False)
        assert str(ours.value) == str(ref.value).splitlines()[0]
    with pytest.raises(ValueError, match="singular"):
        KERNELS["_linalg_solve_ex.default"](singular, r(2, 2, 1), check_errors=True)
    KERNELS["_linalg_check_errors.default"](np.zeros(2, np.int32), "linalg.inv", is_matrix=False)
