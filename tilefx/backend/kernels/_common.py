"""What every kernel family shares: the registrar and torch's dtype rules.

Kernels see numpy arrays only; this package must not import torch. The
semantics (values, result dtypes, type promotion of tensors with Python
scalars) are ATen's, which `tests/backend/kernels/test_kernels.py` checks against
`torch.ops.aten`. float16 inputs are computed in float32 and rounded once,
the way the IPU keeps fp32 partials.
"""

from __future__ import annotations

import itertools
import threading
from typing import Callable

import numpy as np

Kernel = Callable[..., "np.ndarray | tuple[np.ndarray, ...] | list[np.ndarray]"]


def registrar(table: dict[str, Kernel]):
    """A decorator that enters a kernel in `table` under an op name."""

    def kernel(name: str):
        def register(fn):
            if name in table:
                raise ValueError(f"two kernels for {name}")
            table[name] = fn
            return fn

        return register

    return kernel


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


CHUNK = 32768  # elements: a chunk of a few arrays and temporaries stays in the L2 cache

# Threads the chunked kernels may spread their chunks over. 1 (the default)
# outside the executor, which sets it for the length of a call from the
# machine's free cores (backend/executor.py, kernels/tuning.py).
_THREADS = [1]
PARALLEL_MIN = 4 * CHUNK  # elements: below this a hand-off to a worker costs more than it saves
# Elements per piece when the kernel threads are several. Each numpy call
# takes the GIL back when its loop ends, so two threads making many short
# calls on cache-sized chunks wait for each other's GIL more than they gain
# (measured: GELU, layer norm 1.2-1.25x slower on 2 threads in 32768-element
# chunks; softmax, layer norm 0.4-0.6x the one-thread time in 262144).
THREADED_CHUNK = 8 * CHUNK


def chunk_size(n: int, threads: int | None = None) -> int:
    """Elements per piece of a chunked kernel over n elements: cache-sized on
    one thread; on several, one piece per thread (at most THREADED_CHUNK,
    at least CHUNK), so that an array just above PARALLEL_MIN is split too."""
    t = _THREADS[0] if threads is None else threads
    if t <= 1 or n < PARALLEL_MIN:
        return CHUNK
    return min(THREADED_CHUNK, max(CHUNK, -(-n // t)))
_WORKERS: list = []


def set_kernel_threads(n: int) -> int:
    """Let the chunked kernels use `n` threads (the caller's included); the
    previous setting is returned so the caller can give it back."""
    old = _THREADS[0]
    _THREADS[0] = max(1, int(n))
    return old


def kernel_threads() -> int:
    return _THREADS[0]


def _workers(n: int):
    """A pool of n - 1 worker threads, made on first use (the caller's thread is the n-th)."""
    if not _WORKERS or _WORKERS[0]._max_workers < n - 1:
        from concurrent.futures import ThreadPoolExecutor

        if _WORKERS:
            _WORKERS.pop().shutdown(wait=False)
        _WORKERS.append(ThreadPoolExecutor(max_workers=n - 1, thread_name_prefix="tilefx-kernel"))
    return _WORKERS[0]


def parallel_ranges(run, n: int, step: int = CHUNK, work: int | None = None) -> None:
    """run(lo, hi) on every range [lo, lo + step) of [0, n), spread over the
    kernel threads: the caller's thread and the pool's take the next range
    in turn until none is left. numpy releases the GIL inside its loops, so
    ranges run at the same time on several cores. Taking ranges one by one
    (not half each) keeps a busy machine from costing more than one thread:
    a worker that gets no core takes no range, and the caller only waits
    for the ranges a worker has started. Workers see the caller's errstate;
    the first error is raised here. `work`: the elements the whole run
    touches (default n), for the PARALLEL_MIN threshold."""
    threads = _THREADS[0] if (n if work is None else work) >= PARALLEL_MIN else 1
    total = -(-n // step)
    if threads <= 1 or total <= 1:
        run(0, n)
        return
    claim = itertools.count()
    done, errors = [0], []
    lock, finished = threading.Lock(), threading.Event()

    def take():
        while True:
            i = next(claim)  # atomic under the GIL
            if i >= total:
                return
            try:
                run(i * step, min((i + 1) * step, n))
            except BaseException as e:  # noqa: BLE001 - raised in the caller's thread
                errors.append(e)
            with lock:
                done[0] += 1
                if done[0] == total:
                    finished.set()

    err = np.geterr()

    def in_worker():
        with np.errstate(**err):
            take()

    pool = _workers(threads)
    for _ in range(threads - 1):
        pool.submit(in_worker)
    take()
    finished.wait()
    if errors:
        raise errors[0]


def by_rows(body, rows: int, row_len: int) -> None:
    """body(lo, hi) on runs of whole rows [lo, hi) of about CHUNK elements
    each, the runs spread over the kernel threads: row-wise kernels
    (softmax, layer norm) whose reductions are per row compute the same in
    any split."""
    per = max(1, chunk_size(rows * row_len) // max(1, row_len))

    def run(lo, hi):
        for s in range(lo, hi, per):
            body(s, min(s + per, hi))

    parallel_ranges(run, rows, per, work=rows * row_len)


def in_chunks(body, arrays: list[np.ndarray], scratch: int, dtype=np.float32) -> None:
    """body(*chunks_of_arrays, *scratch_chunks) on the same flat chunk of every
    array in turn: a chain of passes over arrays larger than the cache runs
    on data in cache (elementwise chains: the same operations on every
    element). Large arrays are split between the kernel threads
    (`parallel_ranges`), each with scratch of its own. Arrays of one size;
    not all C-contiguous: one chunk, the whole."""
    n = arrays[0].size
    if not all(a.flags.c_contiguous for a in arrays):
        body(*arrays, *[np.empty(arrays[0].shape, dtype) for _ in range(scratch)])
        return
    flats = [a.reshape(-1) for a in arrays]
    size = chunk_size(n)

    def run(lo, hi):
        bufs = [np.empty(min(hi - lo, size), dtype) for _ in range(scratch)]
        for s in range(lo, hi, size):
            e = min(s + size, hi)
            body(*[f[s:e] for f in flats], *[b[: e - s] for b in bufs])

    parallel_ranges(run, n, size)


def _ufunc_at(ufunc, out: np.ndarray, idx: tuple, values) -> None:
    """ufunc.at(out, idx, values). When idx is integer arrays on the leading
    dimensions of a contiguous `out` (an embedding's or index_put's rows), it
    runs on flat element positions instead: numpy's ufunc.at is ~30x faster on
    one flat index than on rows, and visits the same elements in the same order."""
    k = len(idx)
    if not (out.flags.c_contiguous and 0 < k <= out.ndim and all(
            isinstance(i, np.ndarray) and i.dtype.kind in "iu" for i in idx)):
        ufunc.at(out, idx, values)
        return
    lead_shape = out.shape[:k]
    lead = np.broadcast_arrays(*[np.where(i < 0, i + n, i) if i.dtype.kind == "i" else i
                                 for i, n in zip(idx, lead_shape)])
    try:
        flat = np.ravel_multi_index(lead, lead_shape)
    except ValueError:  # an index out of range: ufunc.at's own error
        ufunc.at(out, idx, values)
        return
    inner = int(np.prod(out.shape[k:], dtype=np.int64))
    pos = flat.reshape(flat.shape + (1,)) * inner + np.arange(inner)
    vals = np.broadcast_to(values, flat.shape + out.shape[k:]).reshape(pos.shape)
    ufunc.at(out.reshape(-1), pos.reshape(-1), vals.reshape(-1))


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
# numpy's floating-point error state for one call
# ---------------------------------------------------------------------------
# Overflow to inf/nan is data in a program (loss scaling looks for it), so a
# call runs with numpy's floating-point errors ignored. `np.errstate` builds
# its state object in Python on every entry; a call of a small model came out
# ~20 us slower for it on caches a kernel had just evicted. numpy 2 keeps the
# state in a context variable: setting that variable to an ignoring state
# (made once per state the caller runs under) is what errstate does, minus
# the rebuilding. Older numpy: errstate itself.
try:
    from numpy._core._ufunc_config import _extobj_contextvar as _FP_STATE
    from numpy._core._ufunc_config import _make_extobj as _make_fp_state
except ImportError:  # numpy < 2
    _FP_STATE = None
_FP_IGNORING: list = [None, None]  # (the caller's state, that state with all errors ignored)


def ignore_fp_errors():
    """Ignore numpy's floating-point errors until `restore_fp_errors(token)`."""
    if _FP_STATE is None:
        state = np.errstate(all="ignore")
        state.__enter__()
        return state
    current = _FP_STATE.get()
    if _FP_IGNORING[0] is not current:
        _FP_IGNORING[:] = [current, _make_fp_state(all="ignore")]
    return _FP_STATE.set(_FP_IGNORING[1])


def restore_fp_errors(token) -> None:
    if _FP_STATE is None:
        token.__exit__(None, None, None)
    else:
        _FP_STATE.reset(token)
