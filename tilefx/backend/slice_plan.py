"""Gathers and scatter-adds by index as PopLibs plans them: `popops::multiSlice`
(embedding lookups, index_select, advanced indexing) and `popops::multiUpdate`
/ `multiUpdateAdd` (their gradients, index_put, scatter_add).

PopLibs' embedding planner (`popops::embedding::plan`, lib/popops/DynamicSlice.cpp
of graphcore/poplibs) splits the table of `entries` rows of `width` elements
three ways over the tiles: the row (unsliced dimension) into `u` pieces, the
rows (sliced dimension) into `s` groups and the indices into `l` groups, with
u x s x l <= tiles. Every tile receives all the indices of its index group and
its vertex loops over all of them, checking each against the rows it holds:
the cost grows with indices x table partitions, not with the result's
elements spread over the tiles. With `s` > 1 a second stage picks each
index's row among the `s` candidates; with `l` > 1 a lookup broadcasts the
table block to the `l` groups and an update accumulates fp32 partials per
group and reduces them across the groups. The planner takes the fastest
split whose temporary memory fits the available memory proportion.

The vertices' cycles are PopLibs' own estimates (lib/popops/PerformanceEstimation.cpp,
`getMultiSliceCycleEstimate` and `getMultiUpdateOpCycleEstimate`), per worker,
times the tile's worker contexts; exchange is bytes received per tile over the
tile's exchange bandwidth, as for every other op.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from tilefx.backend.machine import Machine

# MultiSlice vertex, per worker (getMultiSliceCycleEstimate): a fixed prologue and
# epilogue, per index in the tile's rows a fixed cost plus 2 cycles per 64-bit
# vector of the row piece copied, per index outside them a check and skip
SLICE_FIXED_CYCLES = 30
SLICE_IN_RANGE_CYCLES = 19
SLICE_OUT_OF_RANGE_CYCLES = 8
SLICE_CYCLES_PER_VECTOR = 2
# MultiUpdateAdd vertex, per worker (getMultiUpdateOpCycleEstimate, scaled ADD):
# 3 to load and check the size, 29 (fp32) / 30 (fp16) before the loop and 6 / 4 to
# load the scale; per index in range 11 (fp32) / 13 (fp16) plus 3 per further
# atom (4-byte store) of the row piece; per index out of range 5. Its workers
# split the tile's rows, so each worker checks every index of the tile
UPDATE_FIXED_CYCLES = {4: 3 + 29 + 6, 2: 3 + 30 + 4}
UPDATE_IN_RANGE_CYCLES = {4: 11, 2: 13}
UPDATE_CYCLES_PER_ATOM = 3
UPDATE_OUT_OF_RANGE_CYCLES = 5
# the tile's atomic store granularity (Poplar's Target::getAtomicStoreGranularity: a 32-bit word)
ATOMIC_STORE_BYTES = 4
INDEX_BYTES = 4  # indices are unsigned int on the device
PARTIALS_BYTES = 4  # a split update accumulates fp32 partials


@dataclass(frozen=True)
class SlicePlan:
    """One split of a multiSlice / multiUpdate(Add) and its cost on the busiest tile."""

    u: int  # pieces of a row (unsliced dimension)
    s: int  # groups of rows (sliced dimension)
    l: int  # groups of indices (lookup split)
    compute_cycles: int
    exchange_bytes: int
    exchange_cycles: int
    sync_cycles: int
    temp_bytes: int
    fits: bool

    @property
    def cycles(self) -> int:
        return self.compute_cycles + self.exchange_cycles + self.sync_cycles

    def describe(self) -> str:
        return (f"rows in {self.s} group{'s' if self.s > 1 else ''} x row in {self.u} piece"
                f"{'s' if self.u > 1 else ''} x indices in {self.l} group{'s' if self.l > 1 else ''} over "
                f"{self.u * self.s * self.l} tiles" + ("" if self.fits else ", over the memory bound"))


def _splits(limit: int) -> np.ndarray:
    """Candidate split counts: 2^a and 3 * 2^a up to `limit` (and `limit` itself)."""
    vals = {v for a in range(16) for v in (2 ** a, 3 * 2 ** a) if v <= limit} | {max(1, limit)}
    return np.array(sorted(vals), dtype=np.int64)


def _cdiv(a, b):
    return -(-a // b)


def slice_vertex_cycles(itemsize: int, elems, offsets, in_range, workers: int):
    """PopLibs' MultiSlice estimate: `offsets` indices per worker of which
    `in_range` fall in the tile's rows, each copying `elems` elements."""
    vector = max(1, 8 // max(itemsize, 1)) if itemsize != 2 else 2  # 64-bit data path (fp16: 2 per vector)
    per_vector = 3 if itemsize == 1 else SLICE_CYCLES_PER_VECTOR
    per_in = SLICE_IN_RANGE_CYCLES + _cdiv(elems, vector) * per_vector
    return (SLICE_FIXED_CYCLES + in_range * per_in + (offsets - in_range) * SLICE_OUT_OF_RANGE_CYCLES) * workers


def update_add_vertex_cycles(itemsize: int, elems, offsets, in_range, workers: int):
    """PopLibs' MultiUpdateAdd estimate: each worker checks all `offsets`
    indices of the tile, `in_range` of them in its rows, adding `elems`."""
    size = 2 if itemsize <= 2 else 4
    per_atom = max(1, ATOMIC_STORE_BYTES // size)
    per_in = UPDATE_IN_RANGE_CYCLES[size] + (np.maximum(_cdiv(elems, per_atom), 1) - 1) * UPDATE_CYCLES_PER_ATOM
    return (UPDATE_FIXED_CYCLES[size] + in_range * per_in + (offsets - in_range) * UPDATE_OUT_OF_RANGE_CYCLES) \
        * workers


@functools.lru_cache(maxsize=4096)
def plan_slice(entries: int, width: int, indices: int, itemsize: int, machine: Machine, proportion: float,
               update: str | None = None) -> SlicePlan:
    """The fastest split of a lookup (`update` None), an update (`"set"`:
    multiUpdate, no index split) or an accumulating update (`"add"`:
    multiUpdateAdd) of `indices` rows of a table of `entries` rows of `width`
    elements whose temporaries fit `proportion` of a tile (else the plan
    with the least temporary memory)."""
    entries, width, indices = max(entries, 1), max(width, 1), max(indices, 1)
    workers = machine.worker_contexts
    # a row piece is a whole number of 64-bit grains (PopLibs' unslicedGrainSize)
    grain = min(width, _cdiv(math.lcm(8, itemsize), itemsize))
    grains = _cdiv(width, grain)
    u, s, l = np.meshgrid(_splits(grains), _splits(_cdiv(entries, 2)),
                          _splits(1 if update == "set" else indices), indexing="ij")
    u, s, l = u.ravel(), s.ravel(), l.ravel()
    keep = u * s * l <= machine.tiles
    u, s, l = u[keep], s[keep], l[keep]
    elems = _cdiv(grains, u) * grain  # of a row on one tile
    rows = _cdiv(entries, s)  # table rows on one tile
    offs = _cdiv(indices, l)  # indices one tile receives
    block = rows * elems * itemsize  # the tile's block of the table
    # the table spread evenly, as PopLibs' planner compares it with: a block
    # larger than that is rearranged onto the plan's tiles first (by the
    # difference; PopLibs' alwaysIncludeBaseRearrangementCost)
    even = _cdiv(entries * grains, machine.tiles) * grain * itemsize
    rearrange = np.maximum(block - even, 0)
    sync = machine.sync_cycles(1) + machine.compute_set_overhead_cycles
    if update is None:
        per_worker = _cdiv(offs, workers)
        in_range = np.ceil(per_worker * rows / entries).astype(np.int64)
        compute = slice_vertex_cycles(itemsize, elems, per_worker, in_range, workers)
        # the table block broadcast to every index group
        exch = np.where(l > 1, block, rearrange)
        # a second stage picks each index's row among the s groups' candidates
        second = _cdiv(offs, s)
        exch2 = np.where(s > 1, s * second * elems * itemsize, 0)
        w2 = _cdiv(second, workers)
        compute2 = np.where(s > 1, slice_vertex_cycles(itemsize, elems, w2, np.ceil(w2 * rows / entries)
                                                       .astype(np.int64), workers), 0)
        compute = compute + compute2
        exch_bytes = exch + exch2
        stages = 1 + (s > 1)
        temp = np.where(l > 1, block, 0) + np.where(s > 1, 2 * offs * elems * itemsize, 0) + offs * INDEX_BYTES
    else:
        rows_per_worker = _cdiv(rows, workers)
        in_range = np.minimum(np.ceil(offs * rows_per_worker / entries).astype(np.int64), offs)
        if update == "add":
            # a split update adds into its fp32 partials, an unsplit one into the table
            compute = np.where(l > 1, update_add_vertex_cycles(PARTIALS_BYTES, elems, offs, in_range, workers),
                               update_add_vertex_cycles(itemsize, elems, offs, in_range, workers))
        else:
            compute = slice_vertex_cycles(itemsize, elems, offs, in_range, workers)
        # the updates multicast to the s row groups; the table rearranged there and back
        exch_bytes = np.where(s > 1, offs * elems * np.where(l > 1, PARTIALS_BYTES, itemsize), 0) + 2 * rearrange
        # an index split accumulates zeroed fp32 partials per group, reduced
        # across the l groups and added to the table
        partial = rows * elems
        fp32 = machine.elems_per_cycle(PARTIALS_BYTES)
        split = l > 1
        compute = compute + np.where(split, _cdiv(partial, fp32)  # zero the partials
                                     + _cdiv(partial, fp32)  # reduce: each tile sums its share of l partials
                                     + _cdiv(_cdiv(partial, l), machine.elems_per_cycle(itemsize)), 0)  # add
        exch_bytes = exch_bytes + np.where(split, partial * PARTIALS_BYTES, 0)
        stages = 1 + np.where(split, 3, 0)
        temp = np.where(s > 1, offs * elems * PARTIALS_BYTES, 0) + \
            np.where(split, 2 * partial * PARTIALS_BYTES, 0) + offs * INDEX_BYTES
    exch_cycles = _cdiv(exch_bytes, machine.exchange_bytes_per_cycle)
    sync_cycles = stages * sync
    total = compute + exch_cycles + sync_cycles
    fits = temp <= machine.bytes_per_tile * proportion
    if fits.any():
        cand = np.flatnonzero(fits)
        i = cand[np.lexsort((temp[cand], total[cand]))[0]]
    else:
        i = int(np.lexsort((total, temp))[0])
    return SlicePlan(int(u[i]), int(s[i]), int(l[i]), int(compute[i]), int(exch_bytes[i]), int(exch_cycles[i]),
                     int(sync_cycles[i]), int(temp[i]), bool(fits[i]))
