"""An executor's executable cache (PopTorch's `Options.enableExecutableCaching`,
`POPTORCH_CACHE_DIR`, PopTorch user guide, 4.10 "Precompilation and
caching"; PopART's engine cache): an executor's program as an entry in its
`executable_cache_dir`, found by `executable_cache_key` (runner/executable.py). The
store itself (entries bound to the user who made them) is the driver's
(driver/executable_cache.py)."""

from __future__ import annotations

import logging
import time

from tilefx.driver import executable_cache as store
from tilefx.errors import Error
from tilefx.runner.executable import read

log = logging.getLogger("tilefx.export")


def load_cached(ex, inputs, start: float) -> tuple[float | None, str | None]:
    """Install the cached executable of this call into `ex`: the seconds
    since `start` it took, or None on a miss (or an entry not used); and the
    call's key in the cache (None: `ex` has no cache)."""
    directory = ex.executable_cache_dir
    if not directory:
        return None, None
    key = ex.executable_cache_key(inputs)
    path = store.cached_entry(directory, key)
    if path is None:
        return None, key
    try:
        parts = read(path)
        ex.install_executable(parts, path, weights_from_file=False)
    except Error as e:
        store.ignore_entry(path, e.message)
        return None, key
    seconds = time.perf_counter() - start
    log.info("executable cache: loaded %s in %.3f s (no tracing, no passes)", path, seconds)
    return seconds, key


def store_cached(ex, key: str | None, traced) -> None:
    """Write `ex`'s executable (of the trace `traced`) to the cache under
    `key` (`load_cached`'s; None: no cache)."""
    directory = ex.executable_cache_dir
    if not directory or key is None:
        return
    if traced.meta_tensors:  # sized only: no weights to cache
        log.info("executable cache: not stored (the model's tensors are on the meta device)")
        return
    if traced.cache_states is not None:  # as compile_and_export says
        log.info("executable cache: not stored (the call passes or the model returns transformers caches, "
                 "whose Python objects the file does not keep; use_cache=False leaves them out)")
        return
    store.store_entry(directory, key, ex.write_executable)
