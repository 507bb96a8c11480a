"""Dense linear algebra and torch.mode: kernels against torch.ops.aten, and
models using each torch function compiled, run and trained against PyTorch.

Matrices are well conditioned (A A^T + n I), so float32 results agree with
torch's to rtol 1e-5. Eigenvectors and singular vectors are only defined up
to sign and two LAPACKs (torch's MKL, scipy's reference LAPACK) choose
differently: those are compared through sign-free quantities (V diag(w) V^T,
|U|, U S Vh), which is also what the models compute.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import tilefx
from test_kernels import F32, F64, check, r, _inputs_seeded_per_test, reseed  # noqa: F401 (the fixture)
from tilefx.backend.kernels import KERNELS

reseed(2)  # this module's cases: the same data whatever was imported before

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
    case("cholesky.default", _A, True, id=f"cholesky-upper-{_tag}")
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
# two batch dimensions, broadcast against each other
case("_linalg_solve_ex.default", spd(2, 1, 3, 3), r(1, 2, 3, 2), id="solve_ex-batch-broadcast")
case("linalg_solve_triangular.default", lower(2, 1, 3, 3), r(3, 3, 2), upper=False,
     id="solve_triangular-batch-broadcast")
case("cholesky_solve.default", r(1, 2, 3, 2), lower(2, 1, 3, 3), id="cholesky_solve-batch-broadcast")
case("_linalg_slogdet.default", r(2, 2, 3, 3), id="slogdet-2-batch-dims")
case("linalg_qr.default", r(2, 2, 3, 2), id="qr-2-batch-dims")
case("linalg_inv_ex.default", spd(3, 2, 2, 2), id="inv_ex-2-batch-dims")
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


# ---------------------------------------------------------------------------
# models: each torch function traced, run and trained against PyTorch eager
# ---------------------------------------------------------------------------

N = 3


# name -> f(A, B, R): A (2, N, N) symmetric positive-definite, B (2, N, 2), R (2, 4, N)
# rectangular; every output is sign-free (see the module docstring)
FUNCTIONS = {
    "inv": lambda A, B, R: [torch.linalg.inv(A)],
    "inv_ex": lambda A, B, R: [torch.linalg.inv_ex(A)[0]],
    "solve": lambda A, B, R: [torch.linalg.solve(A, B)],
    "solve-vector": lambda A, B, R: [torch.linalg.solve(A, B[..., 0])],
    "solve-left-false": lambda A, B, R: [torch.linalg.solve(A, B.mT, left=False)],
    "solve_ex": lambda A, B, R: [torch.linalg.solve_ex(A, B)[0]],
    "det": lambda A, B, R: [torch.linalg.det(A) / 30, torch.det(A.mT) / 30],
    "slogdet": lambda A, B, R: list(torch.linalg.slogdet(A - 4 * torch.eye(N))),
    "logdet": lambda A, B, R: [torch.logdet(A)],
    "cholesky": lambda A, B, R: [torch.linalg.cholesky(A), torch.linalg.cholesky(A, upper=True)],
    "cholesky_ex": lambda A, B, R: [torch.linalg.cholesky_ex(A)[0]],
    "cholesky-deprecated": lambda A, B, R: [torch.cholesky(A)],
    "cholesky_solve": lambda A, B, R: [torch.cholesky_solve(B, torch.linalg.cholesky(A))],
    "cholesky_inverse": lambda A, B, R: [torch.cholesky_inverse(torch.linalg.cholesky(A))],
    "qr": lambda A, B, R: list(torch.linalg.qr(R)) + list(torch.linalg.qr(A, mode="complete")),
    "svd": lambda A, B, R: _svd_outs(*torch.linalg.svd(R, full_matrices=False)),
    "svdvals": lambda A, B, R: [torch.linalg.svdvals(R)],
    "eigh": lambda A, B, R: _eigh_outs(*torch.linalg.eigh(A)),
    "eigvalsh": lambda A, B, R: [torch.linalg.eigvalsh(A, UPLO="U")],
    "lu_factor": lambda A, B, R: [torch.linalg.lu_factor(A + R[:, :N])[0]],
    "lu": lambda A, B, R: list(torch.linalg.lu(A + R[:, :N])),
    "lu_solve": lambda A, B, R: [torch.linalg.lu_solve(*torch.linalg.lu_factor(A + R[:, :N]), B)],
    "triangular_solve": lambda A, B, R: [torch.triangular_solve(B, A.triu()).solution],
    "solve_triangular": lambda A, B, R: [torch.linalg.solve_triangular(A.tril(), B, upper=False)],
    "pinv": lambda A, B, R: [torch.linalg.pinv(R), torch.linalg.pinv(A, hermitian=True)],
    "matrix_norm": lambda A, B, R: [torch.linalg.matrix_norm(R), torch.linalg.matrix_norm(R, "nuc"),
                                    torch.linalg.matrix_norm(R, 2)],
    "matrix_exp": lambda A, B, R: [torch.linalg.matrix_exp(0.1 * A)],
    "composites": lambda A, B, R: [torch.linalg.cond(A), torch.linalg.matrix_power(A, -2),
                                   torch.linalg.tensorinv(A[0], ind=1)],
    "mode": lambda A, B, R: [torch.mode(torch.round(A * 2) * B[..., :1], dim=-1).values,
                             torch.mode(torch.round(R * 3), 0, keepdim=True)[0]],
    "cov": lambda A, B, R: [torch.cov(R[0].mT), R[1].cov(correction=0)],
    "corrcoef": lambda A, B, R: [torch.corrcoef(R[0].mT)],
    "cov-weights": lambda A, B, R: [torch.cov(R[0].mT, fweights=torch.tensor([1, 2, 1, 3]),
                                              aweights=torch.tensor([0.5, 1.0, 2.0, 1.0]))],
}


def _svd_outs(U, S, Vh):
    return [S, U @ Vh, (U * S.unsqueeze(-2)) @ Vh]


def _eigh_outs(w, V):
    return [w, (V * torch.exp(-w / 10).unsqueeze(-2)) @ V.mT]


class LinalgModel(torch.nn.Module):
    """Parameters feed every operand, so one SGD step moves them by the
    gradient of each op's backward."""

    def __init__(self, fn, dtype=torch.float32):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.fn = fn
        self.w = torch.nn.Parameter(0.3 * torch.randn(N, N, generator=g, dtype=dtype))
        self.b = torch.nn.Parameter(torch.randn(N, 2, generator=g, dtype=dtype))
        self.r = torch.nn.Parameter(torch.randn(4, N, generator=g, dtype=dtype))

    def forward(self, x):
        A = x + self.w @ self.w.mT
        outs = self.fn(A, self.b * x[..., :1, :1], self.r * x[..., :1, :1].sqrt())
        out = torch.cat([o.reshape(-1) for o in outs])
        return out, (out * out).mean()


def _spd_input(dtype):
    g = torch.Generator().manual_seed(1)
    a = torch.randn(2, N, N, generator=g, dtype=torch.float64)
    return (a @ a.mT + N * torch.eye(N, dtype=torch.float64)).to(dtype)


def max_rel_error(ours, ref) -> float:
    """max |ours - ref| / max |ref|: the normwise relative error (an entry
    computed with cancellation, 0.02 among entries of 10, carries float32's
    rounding of the large ones in torch's result as in ours)."""
    ours, ref = ours.detach().double(), ref.detach().double()
    return float((ours - ref).abs().max() / ref.abs().max().clamp(min=1e-30))


class Group(torch.nn.Module):
    """One model of several functions, each with its own parameters (so an
    error in one function's gradient is not hidden among the others): one
    compile per group keeps the test fast."""

    def __init__(self, names, dtype):
        super().__init__()
        self.parts = torch.nn.ModuleList(LinalgModel(FUNCTIONS[n], dtype) for n in names)

    def forward(self, x):
        outs, losses = zip(*(m(x) for m in self.parts))
        return tuple(outs), sum(losses)


def run_against_torch(names, dtype=torch.float32, steps=2, lr=0.0625) -> dict[str, float]:
    """Forward (inference) and `steps` SGD steps (training) of the functions
    `names` through tilefx and PyTorch eager: per function, the largest
    relative error of its outputs and its weights (and of the joint loss).
    (lr is a power of two: tilefx holds it as a float32 operand, which must
    not round a float64 model's steps.)"""
    x = _spd_input(dtype)
    model = Group(names, dtype)
    ref = copy.deepcopy(model)
    errors = {n: [] for n in names}

    def record(ours, want):
        for n, o, w in zip(names, ours, want):
            errors[n].append(max_rel_error(o, w))

    record(tilefx.inferenceModel(copy.deepcopy(model))(x)[0], ref(x)[0])
    opt = torch.optim.SGD(ref.parameters(), lr=lr)
    trainer = tilefx.trainingModel(model, optimizer=tilefx.optim.SGD(model.parameters(), lr=lr))
    for _ in range(steps):
        opt.zero_grad()
        out, loss = ref(x)
        loss.backward()
        opt.step()
        our_out, our_loss = trainer(x)
        record(our_out, out)
        for n in names:
            errors[n].append(max_rel_error(our_loss, loss))
    for n, ours, want in zip(names, model.parts, ref.parts):
        errors[n] += [max_rel_error(q, p) for p, q in zip(want.parameters(), ours.parameters())]
    return {n: max(e) for n, e in errors.items()}


GROUPS = {
    "inverse-solve-lu": ["inv", "inv_ex", "solve", "solve-vector", "solve-left-false", "solve_ex",
                         "lu_factor", "lu", "lu_solve"],
    "determinants": ["det", "slogdet", "logdet", "composites"],
    "triangular": ["cholesky", "cholesky_ex", "cholesky-deprecated", "cholesky_solve",
                   "cholesky_inverse", "triangular_solve", "solve_triangular"],
    "spectral": ["qr", "svd", "svdvals", "eigh", "eigvalsh", "pinv", "matrix_norm", "matrix_exp"],
    "statistics": ["mode", "cov", "corrcoef", "cov-weights"],
}


def test_groups_cover_every_function():
    assert sorted(n for g in GROUPS.values() for n in g) == sorted(FUNCTIONS)


@pytest.mark.parametrize("group", sorted(GROUPS))
@pytest.mark.parametrize("dtype, bound", [(torch.float32, 1e-5), (torch.float64, 1e-12)],
                         ids=["f32", "f64"])
def test_models_forward_and_training_match_torch(group, dtype, bound):
    errors = run_against_torch(GROUPS[group], dtype)
    assert max(errors.values()) < bound, errors


class _Apply(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


@pytest.mark.parametrize("fn, words", [
    (torch.linalg.inv, "linalg.inv: (Batch element 1): The diagonal element 2 is zero"),
    (torch.linalg.cholesky, "linalg.cholesky: (Batch element 1): The factorization could not be completed"),
    (lambda a: torch.linalg.solve(a, a[..., :1]), "torch.linalg.solve: (Batch element 1): The solver failed"),
])
def test_singular_matrices_fail_the_call_as_in_torch(fn, words):
    """The check torch makes on the host after a factorization runs in the
    graph: the call fails with torch's message; a good matrix runs."""
    good = torch.eye(2).repeat(2, 1, 1)
    bad = good.clone()
    bad[1] = torch.tensor([[1.0, 2.0], [2.0, 4.0]]) if fn is not torch.linalg.cholesky else -torch.eye(2)
    with pytest.raises(RuntimeError, match=words.replace("(", r"\(").replace(")", r"\)")):
        fn(bad)
    model = tilefx.inferenceModel(_Apply(fn))
    torch.testing.assert_close(model(good), fn(good))
    with pytest.raises(tilefx.Error, match=words.replace("(", r"\(").replace(")", r"\)")):
        model(bad)


@pytest.mark.parametrize("fn, words", [
    (lambda a: torch.linalg.lstsq(a, a[..., :1]).solution, "data-dependent operation aten::linalg_lstsq"),
    (lambda a: torch.linalg.eigvals(a).real, "complex numbers are not supported"),
    (lambda a: torch.linalg.svd(a, driver="gesvd")[1], "only supported on CUDA"),
])
def test_what_stays_an_error(fn, words):
    """lstsq (its residuals' shape depends on the matrix's rank, on the host),
    eig/eigvals of a general matrix (complex results) and a cuSOLVER driver
    name are clear errors naming the op."""
    with pytest.raises(tilefx.Error, match=words):
        tilefx.inferenceModel(_Apply(fn))(_spd_input(torch.float32))
