"""Process-wide settings the kernels run best under, applied explicitly.

`configure_process()` is called once when the first function is compiled
(backend/executor.py), not on import, so importing tilefx changes nothing
in the user's process until something runs on the simulated IPU.
"""

from __future__ import annotations

import os

import numpy as np

_DONE: list[bool] = []


def configure_process() -> None:
    """Apply the tunings once per process (idempotent)."""
    if _DONE:
        return
    _DONE.append(True)
    _tune_malloc()
    _single_threaded_blas()


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
