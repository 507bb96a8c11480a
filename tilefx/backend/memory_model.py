"""The memory model: what occupies each tile of each IPU, at the peak.

One model of tile memory for every reader: the profile reports it
(`Profile.memory`), the out-of-memory check (`check_fits`) reads it, and
`ipu-auto-stage` plans stages with its accounting of resident tensors
(`resident_share`, `optimizer_state_tensors`). Resident tensors (weights,
buffers, constants, gradient accumulators, optimizer state, where
TensorLocations keeps them: backend/locations.py, backend/offload.py) are
live throughout; activations are live from the op that makes them to their
last use in program order, stashed once per micro-batch in flight across
pipeline stages (the schedule's `in_flight`); the op running at the peak adds
its temporaries (backend/costs.py). Each tensor is spread over the tiles it
needs at Poplar's grain (`Machine.grain_bytes`), placed round-robin, and each
tile holds the codelet library and the code of the ops running on it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
from xdsl.dialects import func
from xdsl.ir import Operation, SSAValue

from tilefx.backend.costs import VIEW_OPS, _bytes
from tilefx.backend.locations import TensorLocation
from tilefx.backend.machine import Machine
from tilefx.backend.offload import OffloadPlan, program_order, value_root
from tilefx.backend.schedule import Schedule
from tilefx.dialects import irutil
from tilefx.dialects.ipu import StageOp
from tilefx.dialects.irutil import flat_ops, place, to_py, value_numel
from tilefx.errors import Error
from tilefx.backend.memory_advice import advice


# The optimizer state tensors per weight element before the update function
# exists (ipu-auto-stage plans from the traced forward and backward): the
# states passes/training_step.py gives each weight. SGD and RMSprop add a
# momentum buffer when any group has momentum (or it is a variable
# hyper-parameter); a centered RMSprop adds its gradient average.
_BASE_STATE_TENSORS = {"sgd": 0, "adam": 2, "adamw": 2, "lamb": 2, "rmsprop": 1}
# the width the estimate counts state in (float32 accumulation, the default)
STATE_ITEMSIZE = 4


def optimizer_state_tensors(optimizer: dict) -> int:
    """The state tensors each weight has under `optimizer` (the module's
    `ipu.optimizer` configuration as a dict: `type`, `groups`, `variable`)."""
    kind = optimizer.get("type", "sgd")
    groups, variable = optimizer.get("groups", []), optimizer.get("variable", [])
    n = _BASE_STATE_TENSORS.get(kind, 1)

    def used(hyper: str) -> bool:
        return hyper in variable or any(g.get(hyper) for g in groups)

    if kind in ("sgd", "rmsprop") and used("momentum"):
        n += 1
    if kind == "rmsprop" and used("centered"):
        n += 1
    return n


def resident_share(location: TensorLocation, nbytes: int, numel: int, replicas: int) -> int:
    """The bytes of a tensor of `numel` elements (`nbytes` in all) that stay
    on each IPU's tiles where `location` keeps it: none off chip, a
    1/shards share (rounded up) sharded over the replicas, else all."""
    if location.off_chip(numel):
        return 0
    return -(-nbytes // location.shards(numel, replicas))


@dataclass
class Tensor:
    """A tensor that occupies tile memory: what it is and who made it."""

    name: str
    nbytes: int
    made_by: str
    kind: str  # weight | buffer | accumulator | optimizer | activation | stash
    # the weight, buffer or constant it is or belongs to (accumulators and
    # optimizer state: their weight's); "" for activations
    owner: str = ""

    @property
    def held_whatever_the_plan(self) -> bool:
        """An always-live weight (or its shard), buffer, constant or gradient
        accumulator (ipu_memory's): on chip for every optimizer-state
        location and available memory proportion, on its weight's IPU."""
        return (self.made_by, self.kind) in _HELD


_HELD = {("parameter", "weight"), ("buffer", "buffer"), ("constant", "buffer"),
         ("ipu.accumulate", "accumulator")}


@dataclass
class IpuMemory:
    ipu: int
    always_live: np.ndarray  # bytes per tile
    peak: np.ndarray  # bytes per tile: always live + peak activations + largest temporary
    temp_bytes: int
    tensors: list[Tensor]
    tile_of_tensor: dict[int, tuple[int, int]]  # index -> (first tile, tiles used)

    def largest_on_tile(self, tile: int, n: int = 5) -> list[tuple[Tensor, int]]:
        """The n tensors with the most bytes on `tile`."""
        out = []
        T = len(self.peak)
        for i, t in enumerate(self.tensors):
            first, used = self.tile_of_tensor[i]
            if (tile - first) % T < used:
                out.append((t, math.ceil(t.nbytes / used)))
        return sorted(out, key=lambda x: -x[1])[:n]


def phase_residency(main: func.FuncOp, roles: list[dict], schedule: Schedule) -> dict[str, list[int]]:
    """Under serial phased execution with Liveness.OffChipAfterEachPhase
    (PopTorch user guide, 4.4 "Multi-IPU execution strategies": "a portion of the weights and activations are
    transferred to and from Streaming Memory, before and after each phase"):
    each weight, buffer, constant and gradient accumulator -> the stages that
    use it, which load it when their phase starts. Empty otherwise: the
    tensors stay on chip (AlwaysLive, the default)."""
    if schedule.strategy != "serial_phased" or schedule.liveness != "OffChipAfterEachPhase":
        return {}
    out: dict[str, list[int]] = {}
    for a, r in zip(main.body.block.args, roles):
        name = r.get("param") or r.get("buffer") or r.get("const") or r.get("accum")
        if name is None:
            continue
        stages = set()
        for use in a.uses:
            op = use.operation
            while op is not None and not isinstance(op, StageOp):
                op = op.parent_op()
            if op is not None:
                stages.add(op.stage.value.data)
        out.setdefault(name, [])
        out[name] = sorted(set(out[name]) | stages)
    return out


def _largest_phase(always: dict[int, list[Tensor]], phase_resident: dict[str, list[int]],
                   stage_phase: dict[int, int]) -> dict[int, list[Tensor]]:
    """Per IPU, the resident tensors of the phase that holds the most of them
    (a tensor belongs to the phases of the stages that use it; its optimizer
    state and accumulator to its weight's)."""
    out: dict[int, list[Tensor]] = {}
    for ipu, tensors in always.items():
        groups: dict[int, list[Tensor]] = defaultdict(list)
        for t in tensors:
            stages = phase_resident.get(t.owner) or [-1]
            for ph in {stage_phase.get(s, -1) for s in stages}:
                groups[ph].append(t)
        out[ipu] = max(groups.values(), key=lambda g: sum(t.nbytes for t in g)) if groups else []
    return out


def ipu_memory(main, update, arg_roles, param_ipu, stage_of, records, machine: Machine,
            schedule: Schedule, training: bool, location: TensorLocation, n_replicas: int,
            accumulate: bool,
            num_ipus: int, cost_of: dict | None = None,
            stash_out: dict[int, int] | None = None,
            phase_resident: dict[str, list[int]] | None = None,
            offload: OffloadPlan | None = None,
            decompose_grad_sum: bool = False) -> dict[int, IpuMemory]:
    T = machine.tiles
    offload = offload or OffloadPlan()
    always: dict[int, list[Tensor]] = defaultdict(list)
    for a, r in zip(main.body.block.args, arg_roles):
        if "param" in r and r["param"] in offload.resident:  # off chip (none) or sharded (its share)
            share, n = offload.resident[r["param"]], offload.weight_shards.get(r["param"], 1)
            if share:
                always[param_ipu.get(r["param"], 0)].append(
                    Tensor(r["param"] if n == 1 else f"{r['param']} (1/{n} shard)", share, "parameter", "weight",
                           r["param"]))
        elif "param" in r:
            always[param_ipu.get(r["param"], 0)].append(Tensor(r["param"], _bytes(a), "parameter", "weight",
                                                                     r["param"]))
        elif "buffer" in r:
            always[param_ipu.get(r["buffer"], 0)].append(Tensor(r["buffer"], _bytes(a), "buffer", "buffer",
                                                                      r["buffer"]))
        elif "const" in r:
            always[param_ipu.get(r["const"], 0)].append(Tensor(r["const"], _bytes(a), "constant", "buffer",
                                                                     r["const"]))
        elif "accum" in r and accumulate and r["accum"] not in offload.update_load:
            always[param_ipu.get(r["accum"], 0)].append(
                Tensor(f"{r['accum']} (gradient accumulator)", _bytes(a), "ipu.accumulate", "accumulator",
                       r["accum"]))
    if training and update is not None:
        for a, r in zip(update.body.block.args, irutil.arg_roles(update)):
            if "state" in r and not location.off_chip(value_numel(a)):
                pname = r["state"].rsplit("/", 1)[0]
                n = location.shards(value_numel(a), n_replicas)
                always[param_ipu.get(pname, 0)].append(
                    Tensor(r["state"] if n == 1 else f"{r['state']} (1/{n} shard)",
                           resident_share(location, _bytes(a), value_numel(a), n_replicas),
                           "optimizer state", "optimizer", pname))

    if phase_resident:  # only the phase with the most resident bytes at its peak
        stage_phase = {top.stage.value.data: top.phase.value.data for top in main.body.block.ops
                       if isinstance(top, StageOp)}
        always = _largest_phase(always, phase_resident, stage_phase)
    # activations: the peak of live values per IPU in program order, with the
    # pipeline's stash (forward values kept for the backward of later micro-batches)
    # and the temporary memory of the op running at that peak (the largest sum of
    # live activations and temporaries, not the largest of each at different times)
    peak_set, temp = activation_peaks(main, stage_of, schedule, training, cost_of or {}, T,
                                       stash_out, offload,
                                       partials_in_place=decompose_grad_sum and accumulate)
    # code and vertex state: each op's on the tiles it runs on, averaged over the tiles
    # (Poplar spreads vertices evenly), plus the codelet library every tile holds
    op_tiles: dict[int, float] = defaultdict(float)
    for r in records:
        if r.cost.cycles:  # views and aliases have no code
            op_tiles[r.ipu] += (r.cost.tiles or T) / T
    result = {}
    start_tile = 0
    for ipu in range(num_ipus):
        live = always.get(ipu, [])
        acts = peak_set.get(ipu, [])
        all_t = live + acts
        always_arr = np.zeros(T + 1, dtype=np.int64)
        peak_arr = np.zeros(T + 1, dtype=np.int64)
        placement = {}
        for i, t in enumerate(all_t):
            used = max(1, min(T, math.ceil(t.nbytes / machine.grain_bytes)))
            per = math.ceil(t.nbytes / used)
            first = start_tile % T
            placement[i] = (first, used)
            for arr in ((always_arr, peak_arr) if i < len(live) else (peak_arr,)):
                end = first + used
                if end <= T:
                    arr[first] += per
                    arr[end] -= per
                else:
                    arr[first] += per
                    arr[T] -= per
                    arr[0] += per
                    arr[end - T] -= per
            start_tile = (start_tile + used) % T
        code = machine.codelet_bytes_per_tile + math.ceil(machine.code_bytes_per_op_per_tile *
                                                          op_tiles.get(ipu, 0.0))
        always_tiles = np.cumsum(always_arr[:T]) + code
        peak_tiles = np.cumsum(peak_arr[:T]) + code + temp.get(ipu, 0)
        result[ipu] = IpuMemory(ipu, always_tiles, peak_tiles, temp.get(ipu, 0), all_t, placement)
    return result


def activation_peaks(main, stage_of, schedule: Schedule, training: bool, cost_of: dict,
                      tiles: int, stash_out: dict[int, int] | None = None,
                      offload: OffloadPlan | None = None,
                      partials_in_place: bool = False
                      ) -> tuple[dict[int, list[Tensor]], dict[int, int]]:
    """Per IPU, the activations live at its peak, stash copies included (as
    many copies as the schedule has micro-batches between the value's stage
    and its last use), and the temporary bytes per tile of the op running
    then: the peak is the program point with the most live bytes per tile
    plus that op's temporaries. `stash_out` receives each IPU's peak stashed
    bytes. `offload`'s intervals (tensors loaded from streaming memory or
    all-gathered for a stretch of ops) are live over their stretch; its
    off-chip activations only over theirs, never stashed on chip.
    `partials_in_place`: a weight's gradient partials go into its
    accumulator where they are made (into_accumulator)."""
    offload = offload or OffloadPlan()
    order = program_order(main)
    index = {op: i for i, (op, _) in enumerate(order)}
    stage_index = {op: s for top in main.body.block.ops if isinstance(top, StageOp)
                   for op in flat_ops(top.body.block) for s in [top.stage.value.data]}
    # a value's uses include those of its views and, across stages, of the
    # stage results it is yielded as (the later stages' ops, copies included)
    root = value_root(main, index)

    accumulated: dict[SSAValue, bool] = {}

    def into_accumulator(v: SSAValue) -> bool:
        """`v` is a gradient that only ever reaches a weight's gradient
        accumulator (`ipu.accumulate`), directly or through views (the
        transposed gradient of `x @ w.t()`): the plan counts it as made into
        the accumulator (as Poplar's matMulAcc computes C += A B in place),
        with no memory of its own. With `decompose_grad_sum` (PopART's `decomposeGradSum` session
        option, which Graphcore's BERT sets) and an accumulator, also through
        the sum of a weight's gradient partials (a weight used twice, as a
        tied embedding and projection) and across pipeline stages: PopART then
        adds each partial into the accumulator where it is made
        (DecomposeGradSum and InplaceAccumulateGradPartialsIntoOptimizerAccumTensor),
        and never stashes it. (The executor keeps eager's order of additions.)"""
        if v in accumulated:
            return accumulated[v]
        accumulated[v] = False  # (no cycles in SSA; a guard all the same)
        uses = list(v.uses)
        ok = bool(uses)
        for u in uses:
            user = u.operation
            if user.name == "ipu.accumulate":
                ok = u.index == 1
            elif partials_in_place and user.name == "aten.add.Tensor" and \
                    _prop(user, "alpha", 1) == 1 and _bytes(user.results[0]) == _bytes(v):
                # (acc += each term: the other term joins the accumulator as well)
                ok = into_accumulator(user.results[0])
            elif user.name.removeprefix("aten.") in VIEW_OPS and user.results and \
                    _bytes(user.results[0]) == _bytes(v):  # (the transposed gradient of `x @ w.t()`)
                ok = into_accumulator(user.results[0])
            elif partials_in_place and user.name == "ipu.yield" and isinstance(user.parent_op(), StageOp):
                ok = into_accumulator(user.parent_op().results[u.index])
            else:
                ok = False
            if not ok:
                break
        accumulated[v] = ok
        return ok

    last_use: dict[SSAValue, int] = {}
    last_stage: dict[SSAValue, int] = {}
    for op, _ in order:
        for v in op.operands:
            v = root(v)
            if isinstance(v.owner, Operation) and v.owner in index:
                last_use[v] = max(last_use.get(v, 0), index[op])
                last_stage[v] = max(last_stage.get(v, 0), stage_index[op])
    # values alive across the stage boundary: stashed, one copy per micro-batch
    # between their stage and their last use (Schedule.in_flight)
    depth: dict[SSAValue, int] = {}
    spans: dict[tuple[int, int], int] = {}
    stashed: list[tuple[int, int, int, int]] = []  # ipu, bytes, first stage, last stage
    if training and schedule.strategy == "pipelined":
        for op, ipu in order:
            for r in op.results:
                s0, s1 = stage_index[op], last_stage.get(r, -1)
                if s1 > s0 and not into_accumulator(r):
                    if (s0, s1) not in spans:
                        spans[(s0, s1)] = schedule.in_flight(s0, s1)
                    depth[r] = spans[(s0, s1)]
                    if op.name.removeprefix("aten.") not in VIEW_OPS and r not in offload.offloaded:
                        stashed.append((op.dst.value.data if op.name == "ipu.copy" else ipu,
                                        _bytes(r), s0, s1))
    if stash_out is not None:
        stash_out.update(schedule.stash_peaks(stashed))
    peaks: dict[int, list[Tensor]] = {}
    live_bytes: dict[int, int] = defaultdict(int)
    best: dict[int, float] = defaultdict(float)
    temp_at: dict[int, int] = defaultdict(int)
    live: dict[int, dict[SSAValue, Tensor]] = defaultdict(dict)
    ends: dict[int, list[SSAValue]] = defaultdict(list)
    for v, i in last_use.items():
        if v not in offload.offloaded:
            ends[i].append(v)
    begins: dict[int, list[int]] = defaultdict(list)
    for k, iv in enumerate(offload.intervals):
        begins[iv.start].append(k)
        ends[iv.end].append(k)
    for i, (op, ipu) in enumerate(order):
        for k in begins.get(i, []):
            iv = offload.intervals[k]
            live[iv.ipu][k] = Tensor(iv.name, iv.nbytes, iv.made_by, iv.kind, iv.owner)
            live_bytes[iv.ipu] += iv.nbytes
        if op.name == "ipu.copy":
            ipu = op.dst.value.data
        target = _updated_in_place(op, i, last_use, depth, root)
        if target is not None and target in live[ipu] and op.results[0] in last_use and \
                not into_accumulator(op.results[0]):
            # a scatter-add into a tensor that dies here (an embedding's gradient
            # into its zeros) writes into that tensor's memory, as Poplar's
            # multiUpdateAdd does: the result takes it over
            live_bytes[ipu] -= live[ipu].pop(target).nbytes
        for r in op.results:
            if op.name.removeprefix("aten.") in VIEW_OPS or r in offload.offloaded:
                continue  # a view: no memory of its own; off chip: in an interval
            if into_accumulator(r):
                continue  # made into its accumulator (Poplar's matMulAcc: C += A B in place)
            if r in last_use:
                n = _bytes(r) * depth.get(r, 1)
                kind = "stash" if r in depth else "activation"
                p = place(op)
                block = f" in block {p.block.data!r}" if p is not None and p.block.data else ""
                live[ipu][r] = Tensor(f"%{r.name_hint or r.index} ({op.name} result)", n,
                                      f"{op.name}{block}", kind)
                live_bytes[ipu] += n
        c = cost_of.get(op)
        tmp = c.temp_bytes if c is not None else 0
        if live_bytes[ipu] / tiles + tmp > best[ipu]:
            best[ipu] = live_bytes[ipu] / tiles + tmp
            peaks[ipu] = list(live[ipu].values())
            temp_at[ipu] = tmp
        for v in ends.get(i, []):
            owner_ipu = next((k for k, d in live.items() if v in d), None)
            if owner_ipu is not None:
                t = live[owner_ipu].pop(v)
                live_bytes[owner_ipu] -= t.nbytes
    return peaks, dict(temp_at)


# ops that add into their first operand's elements (ATen's functional forms of
# index_put_(accumulate=True) and scatter_add_)
_SCATTER_ADD_OPS = {"aten.index_put": "accumulate", "aten.scatter_add": None}


def _prop(op: Operation, name: str, default):
    a = op.properties.get(name)
    return default if a is None else to_py(a)


def _updated_in_place(op: Operation, i: int, last_use: dict, depth: dict, root) -> SSAValue | None:
    """The operand whose memory `op`'s result takes over: a scatter-add's
    destination when this op is its last use, it is not stashed, and the
    result has its size; else None."""
    flag = _SCATTER_ADD_OPS.get(op.name, "")
    if flag == "" or not op.operands or len(op.results) != 1:
        return None
    if flag is not None and not _prop(op, flag, False):
        return None
    v = op.operands[0]
    if root(v) is not v or last_use.get(v) != i or v in depth or _bytes(v) != _bytes(op.results[0]):
        return None
    return v


def check_fits(memory: dict[int, IpuMemory], m: Machine) -> None:
    """The out-of-memory check: an Error naming the fullest tile of the
    first IPU whose peak exceeds a tile's memory, and its largest tensors."""
    for ipu, mem in memory.items():
        tile = int(mem.peak.argmax())
        need = int(mem.peak[tile])
        if need > m.bytes_per_tile:
            top = mem.largest_on_tile(tile)
            listing = "; ".join(f"{t.name} [{t.kind}, made by {t.made_by}]: {b:,} B" for t, b in top)
            raise Error(
                f"Out of memory on IPU {ipu}, tile {tile}: {need:,} bytes needed, "
                f"{m.bytes_per_tile:,} available ({m.name}: {m.tiles} tiles x "
                f"{m.bytes_per_tile // 1024} KiB). Largest tensors on that tile: {listing}. "
                f"{advice(mem, tile, m.bytes_per_tile)}", type="memory")
