"""How close two float32 implementations of one op must be.

Why a fixed `rtol`/`atol` is the wrong rule. A kernel that sums K float32
terms t_1..t_K (a product, a convolution, a reduction, a weight gradient)
rounds at every addition, and the error depends on the order of the
additions: recursive summation is within gamma_K * sum|t_i| of the exact
sum, gamma_K = K u / (1 - K u) with u = 2**-24 the unit roundoff of float32
(Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., §4.2);
blocked and pairwise summation (what BLAS, ATen and numpy do) are within
about log2(K) u sum|t_i|, and in practice the errors grow as sqrt(K) u
sum|t_i|. Two correct kernels summing in different orders (numpy's im2col
against ATen's direct convolution, one thread against two) therefore differ
by an amount set by K and by the magnitude of the *terms*, not of the result:
where terms of size 100 cancel to a result of 1.3, a 1e-4 difference is
float32 rounding, and a tolerance relative to the result calls it an error.
Neither K nor sum|t_i| is known to a generic test, and the worst-case bound
is far too loose to catch a wrong index.

The rule. Evaluate the op once more in float64 on the same (exactly
widened) inputs: that reference r64 has error about 2**-29 times PyTorch's,
so |t32 - r64| is PyTorch's own float32 rounding error, which has the
K and sum|t_i| of this very computation in it. A kernel is right when its
distance to r64 is of the same size as PyTorch's:

    |ours_i - r64_i| <= C * max_j |t32_j - r64_j| + ULPS * ulp32(r64_i)

with the maximum over the whole result (every element sums the same
number of terms of the same distribution, so PyTorch being exact at one
element by chance does not make that element stricter), and ULPS = 2 for the
final rounding of each side, so that a result PyTorch computes exactly (a
short sum, an elementwise op) may still differ by the one or two units in the
last place that rounding to float32 allows.

C = 8 is the contract: a kernel may lose at most three more of float32's 24
bits than ATen does. That is what a different summation order costs in
practice (numpy reduces a non-contiguous axis by recursive summation, error
growing as sqrt(K), where ATen sums in cascades; a mean over 512 rows comes
out 4-5 times ATen's error), and what a documented approximation costs (the
float32 erf's rational form is within 4.5e-7 relative, 6 times ATen's error
near 1). A wrong index, term or formula costs far more than three bits.

The rule needs an exact reference: where ATen's float64 kernel is itself an
approximation at float32's level (torch.special's Airy and Bessel functions
are cephes series in float64 too; scipy's and ATen's float64 results differ
by 3e-6 absolute), a case says so and keeps an explicit tolerance.

Where PyTorch's float32 result is NaN or infinite, ours must be the same.
"""

from __future__ import annotations

import numpy as np

C = 8.0
ULPS = 2.0


def float32_bound(torch32: np.ndarray, ref64: np.ndarray) -> np.ndarray:
    """The largest distance from `ref64` a correct float32 kernel may have,
    elementwise (see the module docstring)."""
    finite = np.isfinite(ref64) & np.isfinite(torch32)
    torch_err = np.abs(torch32.astype(np.float64)[finite] - ref64[finite])
    scale = float(torch_err.max()) if torch_err.size else 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        ulp = np.spacing(np.abs(ref64).astype(np.float32)).astype(np.float64)
    return C * scale + ULPS * ulp


def assert_float32_close(ours: np.ndarray, torch32: np.ndarray, ref64: np.ndarray, what: str = "out",
                         reference: str = "PyTorch"):
    """`ours` is as close to the float64 reference as the float32 result
    `torch32` of `reference` (PyTorch, or onnxruntime) is (the rule of this
    module)."""
    ours64 = ours.astype(np.float64)
    ref64 = np.asarray(ref64, dtype=np.float64)
    assert ours64.shape == ref64.shape, f"{what}: shape {ours.shape} != {ref64.shape}"
    # where PyTorch's float32 result is not finite (an overflow, 0/0), ours
    # must be the same non-finite value; elsewhere the bound applies
    special = ~np.isfinite(torch32)
    np.testing.assert_array_equal(ours64[special], torch32[special].astype(np.float64),
                                  err_msg=f"{what}: NaN or infinity where {reference} has one")
    check = ~special & np.isfinite(ref64)
    bound = float32_bound(torch32, ref64)
    with np.errstate(invalid="ignore"):
        err = np.abs(ours64 - ref64)
    bad = check & ~(err <= bound)
    if bad.any():
        i = np.unravel_index(np.argmax(np.where(bad, err - bound, -np.inf)), bad.shape)
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {bad.size} elements further from the float64 reference than "
            f"{reference}'s float32 error allows; worst at {tuple(int(k) for k in i)}: ours {ours64[i]!r}, "
            f"float64 {ref64[i]!r}, {reference} float32 {float(torch32[i])!r}, distance {err[i]:.3g} > "
            f"bound {bound[i]:.3g}"
        )
