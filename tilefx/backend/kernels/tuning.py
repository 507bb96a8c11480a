"""Process settings the kernels run best under, applied explicitly.

`configure_process()` is called once when the first function is compiled
(backend/executor.py), not on import, so importing tilefx changes nothing
in the user's process until something runs on the simulated IPU.

BLAS threads are chosen per op instead of pinned process-wide: the executor
asks `blas_threads_for(flops)` at compile time for each matmul-like op and
switches numpy's BLAS pool with `set_blas_threads` before it runs (a no-op
when the count is already right), and `restore_blas_threads` gives the
user's setting back when a call ends.
"""

from __future__ import annotations

import os
import time


_DONE: list[bool] = []


def configure_process() -> None:
    """Apply the tunings once per process (idempotent)."""
    if _DONE:
        return
    _DONE.append(True)
    _tune_malloc()


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


# One GEMM below this many flops runs on one thread: waking OpenBLAS's pool
# costs ~10-20 us, and on small products (the tutorial CNN's 40x320x256:
# 74 -> 50 us) the gain is small while the busy-waiting pool collapses when it
# shares the cores with torch's OpenMP threads or another job (the CNN step
# measured 144 ms instead of 5 ms with every product threaded). 2^25 flops is
# ~1 ms of one core's work.
BLAS_THREADS_MIN_FLOPS = 1 << 25
BLAS_THREADS_ENV = "TILEFX_BLAS_THREADS"  # caps the threads of large products (1: never thread)


class _BlasPool:
    """numpy's BLAS library through threadpoolctl, found on first use."""

    def __init__(self):
        from threadpoolctl import ThreadpoolController

        found = ThreadpoolController().select(user_api="blas").lib_controllers
        # numpy's own BLAS: the one in numpy's wheel (scipy's may be loaded too)
        own = [c for c in found if "numpy" in c.filepath] or found
        self.controllers = own[:1]
        self.initial = self.controllers[0].num_threads if self.controllers else 1
        self.current = self.initial

    def set(self, n: int) -> None:
        if n != self.current:
            for c in self.controllers:
                c.set_num_threads(n)
            self.current = n


_POOL: list[_BlasPool] = []


def _pool() -> _BlasPool:
    if not _POOL:
        _POOL.append(_BlasPool())
    return _POOL[0]


# The machine reading behind blas_cores: (time, cores, 1-minute load, the
# TILEFX_BLAS_THREADS cap). The kernel refreshes the load average every 5 s,
# so reading it (and the affinity, and the environment) once per
# LOAD_READING_SECONDS instead of on every call loses nothing; it was ~20 us
# of every executor call.
LOAD_READING_SECONDS = 1.0
_reading: list = []  # [time read, (cores, load, cap)]


def _machine() -> tuple[int, float | None, int | None]:
    """This process's cores, the 1-minute load average (None: unknown) and
    the thread cap from the environment (None: none), read at most once per
    LOAD_READING_SECONDS."""
    now = time.monotonic()
    if _reading and now - _reading[0] < LOAD_READING_SECONDS:
        return _reading[1]
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    try:
        load: float | None = os.getloadavg()[0]
    except OSError:
        load = None
    cap = os.environ.get(BLAS_THREADS_ENV, "").strip()
    _reading[:] = [now, (cores, load, int(cap) if cap.isdigit() and int(cap) > 0 else None)]
    return _reading[1]


def forget_machine_reading() -> None:
    """Read the cores, the load and the environment afresh at the next call
    (tests; a program that changes TILEFX_BLAS_THREADS sees it within
    LOAD_READING_SECONDS)."""
    _reading.clear()


def blas_cores(own_threads: int = 0) -> int:
    """Threads a large product may use: the cores this process may run on,
    capped by TILEFX_BLAS_THREADS; one when the machine is oversubscribed
    (a 1-minute load average above the cores), where a threaded GEMM's
    workers wait for cores held by other processes: measured 64x1024x1024 in
    160 ms on two threads against 10 ms on one, at load 9 on 2 cores, and a
    whole MLP step in 226 ms against 18 ms at load 3.9 (the earlier bar,
    twice the cores, let that one through). `own_threads`: threads of this
    process that the load average counts while it asks (a running program's
    own workers are not other work)."""
    if _reading and time.monotonic() - _reading[0] < LOAD_READING_SECONDS:  # _machine's test, inline:
        cores, load, cap = _reading[1]  # this runs as every call starts, on cold caches
    else:
        cores, load, cap = _machine()
    if cap is not None:
        return max(1, min(cores, cap))
    if load is not None and load - own_threads > cores:
        return 1
    return max(1, cores)


def blas_threads_for(flops: float) -> int:
    """The BLAS threads for one GEMM of `flops` (2 M N K) floating-point ops."""
    return blas_cores() if flops >= BLAS_THREADS_MIN_FLOPS else 1


def set_blas_threads(n: int) -> None:
    """Switch numpy's BLAS to `n` threads (cheap when it already has them)."""
    _pool().set(n)


def restore_blas_threads() -> None:
    """Give the process its BLAS thread count from before tilefx switched it."""
    if _POOL and _POOL[0].current != _POOL[0].initial:
        _POOL[0].set(_POOL[0].initial)
