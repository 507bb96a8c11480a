"""FFT kernels (numpy.fft). Their complex results exist for the kernel
table and hand-written IR; the torch frontend rejects complex tensors."""

from __future__ import annotations

import numpy as np

from tilefx.backend.kernels._common import registrar

KERNELS: dict = {}
_kernel = registrar(KERNELS)

# ATen's normalization: 0 none, 1 by 1/sqrt(n), 2 by 1/n
_FORWARD_NORM = {0: "backward", 1: "ortho", 2: "forward"}
_INVERSE_NORM = {0: "forward", 1: "ortho", 2: "backward"}
_COMPLEX_OF = {np.dtype(np.float32): np.dtype(np.complex64), np.dtype(np.float64): np.dtype(np.complex128),
               np.dtype(np.float16): np.dtype(np.complex64)}


@_kernel("_fft_r2c.default")
def _fft_r2c(self, dim, normalization, onesided):
    axes = [d % self.ndim for d in dim]
    ct = _COMPLEX_OF.get(self.dtype, np.dtype(np.complex64))
    norm = _FORWARD_NORM[normalization]
    if onesided:
        r = np.fft.rfftn(self.astype(np.float64), axes=axes, norm=norm)
    else:
        r = np.fft.fftn(self.astype(np.float64), axes=axes, norm=norm)
    return r.astype(ct)


@_kernel("_fft_c2r.default")
def _fft_c2r(self, dim, normalization, last_dim_size):
    axes = [d % self.ndim for d in dim]
    s = [self.shape[a] for a in axes[:-1]] + [last_dim_size]
    rt = np.dtype(np.float64) if self.dtype == np.complex128 else np.dtype(np.float32)
    r = np.fft.irfftn(self.astype(np.complex128), s=s, axes=axes, norm=_INVERSE_NORM[normalization])
    return r.astype(rt)
