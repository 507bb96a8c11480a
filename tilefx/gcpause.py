"""Python's cyclic garbage collector paused while tilefx compiles.

A compile creates a few hundred thousand objects (torch's tracing machinery,
xDSL's IR, the modules a first compile imports), nearly all either kept or
freed by reference counting. Each of them counts towards the collector's
thresholds, and once torch is loaded a full collection walks ~400,000
objects: a cold compile of the tutorial CNN ran ~240 collections, 22 of
them of the middle and 2 of the oldest generation, 0.16-0.18 s of its
~1.05 s (benchmarks/RESULTS.md, 2026-11-24). Pausing the collector for the
compile and re-enabling it after loses nothing: cyclic garbage made
meanwhile is collected at the next full collection after the compile. A
caller that disabled the collector itself keeps it disabled.

Resuming, the objects made meanwhile go to the oldest generation as they
are (`gc.freeze()` then `gc.unfreeze()`: two list splices), instead of
waiting in the youngest for the next young collection to walk all of them
once the collector is back on: that walk was 0.07-0.08 s, right at the end
of a cold compile. Nothing is lost: the oldest generation is walked by the
next full collection, which finds any cycle among them (a compile leaves
a few thousand: closures and fake tensors, no memory of size). So that a
process compiling many models does not wait long for one, a full
collection runs once FULL_COLLECTION_AFTER objects were moved so (every few
compiles, never on the first). A process that froze objects itself (before
forking) has its frozen set left as it is.

A command-line tool ends its process with `no_collection_at_exit()`: the
interpreter's shutdown runs full collections that walk every object still
alive (xDSL's classes, the dialects, the IR; torch's, once imported) only to
free what the end of the process frees anyway, ~0.09 s of `tilefx-opt`'s
~0.53 s on a one-op file. Frozen objects are left out of those collections.
What is not collected is only cyclic garbage alive at exit, whose `__del__`
Python does not promise to run (the Python Language Reference, 3.3.1,
`object.__del__`); `atexit` handlers, `weakref.finalize` callbacks and the
flush of the standard streams still run.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
from collections.abc import Iterator


FULL_COLLECTION_AFTER = 500_000  # objects moved to the oldest generation unexamined (~10,000 a warm compile)
_moved = [0]


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Run the block with the cyclic collector disabled, as it was after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if not gc.get_freeze_count():  # nobody's frozen objects to thaw with ours
                _moved[0] += gc.get_count()[0]
                gc.freeze()
                gc.unfreeze()
            gc.enable()
            if _moved[0] > FULL_COLLECTION_AFTER:
                _moved[0] = 0
                gc.collect()


@contextlib.contextmanager
def long_lived_frozen() -> Iterator[None]:
    """Run the block with every object alive at its start frozen (kept out
    of the collector's walks), for a block that makes and drops many large
    cyclic structures while a large set of objects stays alive throughout:
    the planner costs a hundred copies of a traced model's IR (each a few
    hundred thousand objects tied in cycles by their parent links, so only
    the collector frees them) while torch, the model and the trace (~400,000
    objects) live on. Every full collection would walk those again: 27 s of
    the 154 s of CPU planning a 24-layer BERT-Large took (benchmarks/
    RESULTS.md). Frozen, a collection walks only what the block made. A
    collection first frees what is already garbage, so nothing dead is kept
    frozen; the objects are thawed after. A process that froze objects itself
    keeps them frozen and is left as it is."""
    if gc.get_freeze_count() or not gc.isenabled():
        yield
        return
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def no_collection_at_exit() -> None:
    """Have the interpreter end this process without walking its objects:
    every object alive when the `atexit` handlers run is frozen (for a
    command whose process ends after it: see the module's doc)."""
    atexit.unregister(gc.freeze)  # once, however often a command runs in the process
    atexit.register(gc.freeze)
