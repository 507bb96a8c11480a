"""Python's cyclic garbage collector paused while tilefx compiles.

A compile creates a few hundred thousand objects (torch's tracing machinery,
xDSL's IR, the modules a first compile imports), nearly all either kept or
freed by reference counting. Each of them counts towards the collector's
thresholds, and once torch is loaded a full collection walks ~400,000
objects: a cold compile of the tutorial CNN ran ~240 collections, 22 of
them of the middle and 2 of the oldest generation, 0.16-0.18 s of its
~1.05 s (benchmarks/RESULTS.md, session 6). Pausing the collector for the
compile and re-enabling it after loses nothing: cyclic garbage made
meanwhile is collected at the next collection after the compile. A caller
that disabled the collector itself keeps it disabled.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Run the block with the cyclic collector disabled, as it was after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
