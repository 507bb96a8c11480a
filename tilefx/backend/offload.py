"""Which tensors one step moves between the tiles and streaming memory, and
which it all-gathers: the weights, activations and gradient accumulators
that `opts.TensorLocations` puts off chip or shards (backend/locations.py),
and phased execution's `Liveness.OffChipAfterFwd`. The profile (memory plan
and timeline) and the device IR (`tile.remote_load` / `tile.remote_store` /
`tile.all_gather`) read the same plan, so they agree.

The rules (PopART's "Tensor locations": an off-chip tensor is in streaming
memory "when not immediately required", a sharded one is all-gathered when
needed whole), per micro-batch, in program order:
- an off-chip weight is loaded before each stretch of its uses (its forward
  uses in a stage, its backward uses in a stage) and is on the tiles only
  during it; the update loads it and stores the new value;
- a sharded weight keeps ceil(n / R) elements per replica on the tiles (in
  streaming memory when also off chip: that share is what is loaded) and is
  all-gathered whole before each stretch of its uses; its update runs on
  the shard, so nothing is gathered after it;
- an off-chip activation (a forward value the backward reads) is stored
  after its last forward use and loaded before its first backward use, so
  it is not on the tiles in between (nor stashed on chip by a pipeline);
- an off-chip accumulator is loaded before each accumulation and stored
  after it; the update loads it (for the all-reduce and the update).
`Liveness.OffChipAfterFwd` (and `OffChipAfterFwdNoOverlap`, the same moves:
serial phases never overlap them) under phased strategies: the weights stay
on chip through the forward phases and each backward phase reloads the ones
it uses; the activations the backward reads go off chip after the forward,
as above.
Phased strategies move these once per phase (activations: once per
micro-batch of the phase); the others once per step of each stage.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from xdsl.dialects import func
from xdsl.ir import Operation, SSAValue

from tilefx.backend.costs import VIEW_OPS, _bytes
from tilefx.backend.locations import Locations
from tilefx.dialects.ipu import StageOp
from tilefx.dialects.irutil import flat_ops, place
from tilefx.dialects.irutil import value_numel as _numel


@dataclass
class Interval:
    """A tensor on the tiles from op `start` to op `end` (program-order indices)."""

    ipu: int
    name: str
    nbytes: int
    kind: str  # weight | accumulator | activation
    made_by: str
    owner: str
    start: int
    end: int


@dataclass
class Move:
    """One load, store or all-gather of the device IR: `kind` of `tensor`
    (`nbytes`) at op `at` (before it for loads and gathers, after it for
    stores); the ops of `span` (program-order indices) read `value` from it."""

    kind: str  # load | store | gather
    tensor: str
    value: SSAValue  # the tensor moved, as the ops at `at` see it
    at: Operation
    nbytes: int
    span: tuple[int, int] = (0, -1)


@dataclass
class OffloadPlan:
    intervals: list[Interval] = field(default_factory=list)
    offloaded: set = field(default_factory=set)  # activations the intervals account for
    # weights the plan moves -> the bytes that stay on the tiles (0: none)
    resident: dict[str, int] = field(default_factory=dict)
    # per stage, bytes moved once per step of the stage (weights, accumulators) and
    # once per micro-batch (activations); bytes all-gathered
    load_once: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    store_once: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    load_each: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    store_each: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    gather: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    # weights the update loads and stores -> bytes each way; the weights whose
    # accumulators are off chip -> the accumulator bytes the update loads (the
    # executor zeroes them for the next step on chip)
    update_stream: dict[str, int] = field(default_factory=dict)
    update_load: dict[str, int] = field(default_factory=dict)
    weight_shards: dict[str, int] = field(default_factory=dict)  # sharded weights
    moves: list[Move] = field(default_factory=list)
    # (stage, "load" | "store" | "gather", tensor class, bytes, once per micro-batch?)
    ledger: list[tuple[int, str, str, int, bool]] = field(default_factory=list)

    def _add(self, stage: int, kind: str, cls: str, nbytes: int, each: bool = False) -> None:
        table = {("load", False): self.load_once, ("load", True): self.load_each, ("store", False): self.store_once,
                 ("store", True): self.store_each, ("gather", False): self.gather}[(kind, each)]
        table[stage] += nbytes
        self.ledger.append((stage, kind, cls, nbytes, each))

    def totals(self, steps_of: dict[int, int], micro_batches: int, phased: bool) -> dict[str, dict[str, int]]:
        """Bytes moved per weight update, by move and tensor class: a stage
        runs `steps_of[stage]` steps (non-phased: each moves its tensors);
        phased moves its weights and accumulators once per phase and its
        activations once per micro-batch."""
        out: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for stage, kind, cls, nbytes, each in self.ledger:
            times = (micro_batches if each else 1) if phased else steps_of.get(stage, 0)
            out[kind][cls] += nbytes * times
        return {k: dict(v) for k, v in out.items()}

    def __bool__(self) -> bool:
        return bool(self.intervals or self.update_stream or self.update_load or self.resident)


def program_order(main: func.FuncOp) -> list[tuple[Operation, int]]:
    """Every op of the stages (their yields left out) with its IPU: the order
    the memory plan walks."""
    order = []
    for top in main.body.block.ops:
        if isinstance(top, StageOp):
            for op in flat_ops(top.body.block):
                if op.name != "ipu.yield":
                    order.append((op, top.ipu.value.data))
    return order


def value_root(main: func.FuncOp, index: dict):
    """`root(v)`: the value whose memory `v` is, through views and, across
    stages, through the stage results it is yielded as (the memory plan's
    and the offload plan's notion of one tensor). `index`: the ops of
    program_order, by position."""
    inner: dict[SSAValue, SSAValue] = {}
    for top in main.body.block.ops:
        if isinstance(top, StageOp):
            inner.update(zip(top.results, top.body.block.last_op.operands))

    def root(v: SSAValue) -> SSAValue:
        while True:
            v = inner.get(v, v)
            o = v.owner
            if not (isinstance(o, Operation) and o in index and o.operands and _is_view(o)):
                return v
            v = o.operands[0]
    return root


def _is_view(op: Operation) -> bool:
    return op.name.removeprefix("aten.") in VIEW_OPS


def plan_offload(main: func.FuncOp, roles: list[dict], locations: Locations, replicas: int, *,
                 training: bool, accumulate: bool, strategy: str = "", liveness: str = "") -> OffloadPlan:
    """The moves of one step (module docstring). `roles`: main's argument
    roles; `replicas`: all replicas (sharding); `strategy` and `liveness`:
    the schedule's (serial phased execution with OffChipAfterEachPhase
    already moves every weight and accumulator phase by phase)."""
    plan = OffloadPlan()
    each_phase = strategy == "serial_phased" and liveness == "OffChipAfterEachPhase"
    order = program_order(main)
    index = {op: i for i, (op, _) in enumerate(order)}
    stage_of: dict[Operation, int] = {}
    stage_dir: dict[int, str] = {}
    for top in main.body.block.ops:
        if isinstance(top, StageOp):
            stage_dir[top.stage.value.data] = top.direction.data
            for op in flat_ops(top.body.block):
                stage_of[op] = top.stage.value.data
    ipu_at = [ipu for _, ipu in order]

    def direction(op: Operation) -> str:
        p = place(op)
        if p is not None and p.direction.data in ("fwd", "bwd"):
            return p.direction.data
        return "bwd" if stage_dir.get(stage_of.get(op, -1), "fwd") == "bwd" else "fwd"

    root = value_root(main, index)
    users: dict[SSAValue, list[int]] = defaultdict(list)
    for i, (op, _) in enumerate(order):
        for v in op.operands:
            users[root(v)].append(i)

    def stretches(uses: list[int]) -> list[tuple[int, int]]:
        """The uses grouped by stage and direction: (first, last) of each."""
        groups: dict[tuple[int, str], list[int]] = defaultdict(list)
        for i in uses:
            op = order[i][0]
            groups[(stage_of[op], direction(op))].append(i)
        return sorted((min(g), max(g)) for g in groups.values())

    phased = strategy in ("serial_phased", "parallel_phased")
    # NoOverlap (serial phased only): the same moves; serial phases never overlap them anyway
    after_fwd = phased and training and liveness in ("OffChipAfterFwd", "OffChipAfterFwdNoOverlap")
    fwd_end = max((i for i, (op, _) in enumerate(order) if direction(op) == "fwd"), default=-1)

    # weights (the parameters)
    for arg, role in zip(main.body.block.args, roles):
        name = role.get("param")
        if name is None or each_phase or not users.get(arg):
            continue
        numel, nbytes = _numel(arg), _bytes(arg)
        loc = locations.weight
        off, shards = loc.off_chip(numel), loc.shards(numel, replicas)
        moved = after_fwd and numel >= loc.min_elements_off_chip  # by the liveness
        if not off and shards == 1 and not moved:
            continue
        share = loc.shard_bytes(nbytes, numel, replicas)
        plan.resident[name] = 0 if off or (moved and shards == 1) else share
        if shards > 1:
            plan.weight_shards[name] = shards
        spans = stretches(users[arg])
        if moved and not off:  # on chip through the forward phases, reloaded for the backward
            fwd = [s for s in spans if s[0] <= fwd_end]
            spans = ([(fwd[0][0], fwd_end)] if fwd else []) + [s for s in spans if s[0] > fwd_end]
        how = "loaded" if off or moved else "gathered"
        for start, end in spans:
            first = order[start][0]
            st = stage_of[first]
            plan.intervals.append(Interval(ipu_at[start], f"{name} ({how})", nbytes, "weight",
                                           f"streaming memory ({how})", name, start, end))
            if off or moved:
                plan._add(st, "load", "weight", share)
                plan.moves.append(Move("load", name, arg, first, share, (start, end)))
            if shards > 1:
                plan._add(st, "gather", "weight", nbytes)
                plan.moves.append(Move("gather", name, arg, first, nbytes, (start, end)))
        if training and (off or moved):
            plan.update_stream[name] = share

    # gradient accumulators
    if training and accumulate:
        loc = locations.accumulator
        for arg, role in zip(main.body.block.args, roles):
            name = role.get("accum")
            if name is None or each_phase or not users.get(arg) or not loc.off_chip(_numel(arg)):
                continue
            nbytes = _bytes(arg)
            for start, end in stretches(users[arg]):
                st = stage_of[order[start][0]]
                plan.intervals.append(Interval(ipu_at[start], f"{name} (gradient accumulator, loaded)", nbytes,
                                               "accumulator", "streaming memory (loaded)", name, start, end))
                plan._add(st, "load", "accumulator", nbytes)
                plan._add(stage_of[order[end][0]], "store", "accumulator", nbytes)
                last = order[end][0]
                plan.moves.append(Move("load", f"{name} (gradient accumulator)", arg, order[start][0], nbytes,
                                       (start, end)))
                if last.results:  # the accumulated value, stored back (later ops read the stored one)
                    plan.moves.append(Move("store", f"{name} (gradient accumulator)", last.results[0], last,
                                           nbytes, (end + 1, len(order))))
            plan.update_load[name] = nbytes

    # activations: forward values the backward reads
    if training and (not locations.activation.on_chip or after_fwd):
        loc = locations.activation
        for i, (op, _) in enumerate(order):
            if _is_view(op) or direction(op) != "fwd":
                continue
            for r in op.results:
                uses = users.get(r, [])
                bwd = [j for j in uses if direction(order[j][0]) == "bwd"]
                moved = after_fwd and _numel(r) >= loc.min_elements_off_chip  # by the liveness
                if not bwd or not (loc.off_chip(_numel(r)) or moved):
                    continue
                if r.uses and all(u.operation.name == "ipu.accumulate" and u.index == 1 for u in r.uses):
                    continue
                fwd_last = max([j for j in uses if j not in bwd] + [i])
                first_bwd = min(bwd)
                if first_bwd <= fwd_last:
                    continue  # read by the backward while the forward still needs it: stays
                nbytes = _bytes(r)
                ipu = op.dst.value.data if op.name == "ipu.copy" else ipu_at[i]
                label = f"%{r.name_hint or r.index} ({op.name} result)"
                plan.offloaded.add(r)
                plan.intervals.append(Interval(ipu, label, nbytes, "activation", op.name, "", i, fwd_last))
                plan.intervals.append(Interval(ipu, f"{label}, loaded", nbytes, "activation",
                                               "streaming memory (loaded)", "", first_bwd, max(bwd)))
                plan._add(stage_of[order[fwd_last][0]], "store", "activation", nbytes, True)
                plan._add(stage_of[order[first_bwd][0]], "load", "activation", nbytes, True)
                plan.moves.append(Move("store", label, r, order[fwd_last][0], nbytes, (0, -1)))
                seen = next(v for v in order[first_bwd][0].operands if root(v) is r)
                plan.moves.append(Move("load", label, seen, order[first_bwd][0], nbytes, (first_bwd, max(bwd))))
    return plan
