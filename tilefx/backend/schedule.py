"""The multi-IPU schedule as data: which IPU does what, in which time step.

One step is one unit of time here; the machine model will give each step
its cycles. The schedule does not change the numbers (pipelined, sharded
and phased training compute exactly what plain training computes), only
when and where the work happens.

Pipelines have four schedules (`PipelinedExecution(..., schedule=...)`):

- `FillDrain`, PopTorch's: stage s runs micro-batch i at step i + s (fill
  S-1, main, flush S-1 over the S = 2P-1 training stages). IPU k keeps
  2(P-k)-1 micro-batches of activations for its backward.
- `1F1B` (PipeDream-flush, `torch.distributed.pipelining.Schedule1F1B`):
  IPU k runs P-1-k warm-up forwards, then alternates one forward and one
  backward, then drains the backwards: it keeps only P-k micro-batches.
- `Interleaved1F1B` (Megatron-LM's, `ScheduleInterleaved1F1B`): v virtual
  stages per IPU (forward stage j on the j mod N-th IPU) shorten the fill
  and flush by v at the price of v times the IPU-link copies.
- `ZeroBubble`, ZB-H1 of Qi et al., "Zero Bubble Pipeline Parallelism"
  (ICLR 2024): each backward step is split in two, the input gradient (B,
  which the previous stage waits for) and the weight gradient (W, which
  nothing downstream waits for). Each IPU runs a B as soon as its gradient
  arrives, else a forward while it holds fewer micro-batches than 1F1B
  allows (P-k awaiting B on IPU k, and P awaiting W: 1F1B's peak), else a
  pending W: the W steps fill the waits 1F1B spends idle in its drain. The parts
  are `Step.part` "input" and "weight" of the same pipeline stage; the
  machine model gives each its ops' cycles (`weight_gradient_ops`).

Each IPU runs its steps in the order listed; the machine model
(profile._simulate) times them with the stage costs and the data
dependencies (stage s of a micro-batch after stage s-1).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects import func
from xdsl.ir import Operation, OpResult

from tilefx.dialects.ipu import PLACE_KEY, PlacementAttr
from tilefx.errors import Error

SCHEDULES = ("FillDrain", "1F1B", "Interleaved1F1B", "ZeroBubble")
# ZeroBubble's two parts of a backward step (Step.part); "" is a whole step
INPUT_PART, WEIGHT_PART = "input", "weight"


@dataclass(frozen=True)
class Step:
    time: int
    ipu: int
    kind: str  # compute | load | store
    stage: int
    micro_batch: int  # -1 for loads and stores of a whole phase
    direction: str  # fwd | bwd | fwd+bwd
    # ZeroBubble: INPUT_PART (the forward ops and input gradients) or
    # WEIGHT_PART (the weight gradients) of the stage; "" for the whole stage
    part: str = ""


# poptorch.Liveness's names (PopTorch user guide, "Phased execution"): which
# tensors stay on chip between the phases of a phased strategy
LIVENESS = ("AlwaysLive", "OffChipAfterFwd", "OffChipAfterFwdNoOverlap", "OffChipAfterEachPhase")


@dataclass
class Schedule:
    """The steps of one weight update (training) or one device iteration
    window (inference); it repeats `repeats` times per call."""

    strategy: str
    num_stages: int
    micro_batches: int
    steps: list[Step] = field(default_factory=list)
    repeats: int = 1
    training: bool = True
    # the pipeline schedule's name (SCHEDULES); "" for the other strategies
    name: str = ""
    # one IPU at a time: a step starts after the previous step has ended (sharded)
    sequential: bool = False
    # phased strategies: poptorch.Liveness's name (which tensors stay on chip between phases)
    liveness: str = ""

    @property
    def length(self) -> int:
        return 1 + max((s.time for s in self.steps), default=-1)

    def per_ipu(self) -> dict[int, list[Step]]:
        out: dict[int, list[Step]] = defaultdict(list)
        for s in sorted(self.steps, key=lambda s: (s.ipu, s.time)):
            out[s.ipu].append(s)
        return dict(out)

    def phases(self) -> dict[str, int]:
        """Fill / main / flush lengths of a pipeline (PopTorch user guide, 4.4.2 "Available execution
        strategies")."""
        if self.strategy != "pipelined" or self.name not in ("", "FillDrain"):
            return {"total": self.length}
        fill = self.num_stages - 1
        return {"fill": fill, "main": self.length - 2 * fill, "flush": fill, "total": self.length}

    def utilisation(self) -> dict[int, float]:
        """The fraction of time steps in which each IPU computes (an IPU that
        holds a forward and a backward stage runs both in one step)."""
        busy: dict[int, set[int]] = defaultdict(set)
        for s in self.steps:
            if s.kind == "compute":
                busy[s.ipu].add(s.time)
        return {ipu: len(ts) / self.length for ipu, ts in sorted(busy.items())}

    def in_flight(self, first: int, last: int) -> int:
        """The most micro-batches that have started stage `first` but not yet
        finished stage `last` at one time step: how many copies of a value
        made in `first` and last used in `last` are stashed."""
        return int(self._level_peak([(1, first, last)]))

    def compute_times(self) -> tuple[dict[tuple[int, int], int], dict[tuple[int, int], int]]:
        """The first and the last time step of each (stage, micro-batch): a
        ZeroBubble stage runs in two parts, and a value stashed for it is
        kept until the later one (the weight gradient reads it too)."""
        starts: dict[tuple[int, int], int] = {}
        ends: dict[tuple[int, int], int] = {}
        for s in self.steps:
            if s.kind == "compute":
                key = (s.stage, s.micro_batch)
                starts[key] = min(starts.get(key, s.time), s.time)
                ends[key] = max(ends.get(key, s.time), s.time)
        return starts, ends

    def stash_peaks(self, stashed: list[tuple[int, int, int, int]]) -> dict[int, int]:
        """Per IPU, the most bytes of stashed values alive at one time step:
        `stashed` lists (IPU, bytes, s0, s1), a value of stage s0 last used
        by stage s1, kept for micro-batch i from the first step of (s0, i) to
        the last of (s1, i)."""
        by_ipu: dict[int, dict[tuple[int, int], int]] = {}
        for ipu, nbytes, s0, s1 in stashed:  # values of one stage pair live over the same steps
            if self._kept(s0, s1).any():
                pairs = by_ipu.setdefault(ipu, {})
                pairs[(s0, s1)] = pairs.get((s0, s1), 0) + nbytes
        return {ipu: int(self._level_peak([(b, s0, s1) for (s0, s1), b in pairs.items()]))
                for ipu, pairs in by_ipu.items()}

    def _kept(self, s0: int, s1: int):
        """The micro-batches that run both stage s0 and stage s1."""
        starts, ends = self._time_arrays()
        if max(s0, s1) >= len(starts) or min(s0, s1) < 0:
            return np.zeros(self.micro_batches, dtype=bool)
        return (starts[s0] >= 0) & (ends[s1] >= 0)

    def _level_peak(self, kept: list[tuple[int, int, int]]) -> int:
        """The most of `kept` alive at one time step, at least 0: each (bytes,
        s0, s1) holds its bytes for micro-batch i from the first step of
        (s0, i) to the last of (s1, i), inclusive. The level at a step is
        what was taken on at or before it less what was let go before it, so
        a release and a take at one step never overlap (as a sweep over
        the events that sorts releases first counts them)."""
        starts, ends = self._time_arrays()
        diff = np.zeros(int(ends.max(initial=-1)) + 2, dtype=np.int64)  # a release after the last step
        for nbytes, s0, s1 in kept:
            mask = self._kept(s0, s1)
            if not mask.any():
                continue
            np.add.at(diff, starts[s0][mask], nbytes)
            np.add.at(diff, ends[s1][mask] + 1, -nbytes)
        return max(0, int(np.cumsum(diff).max()))

    def _time_arrays(self):
        """compute_times() as two (stage, micro-batch) arrays, -1 where a
        stage does not run a micro-batch: built once per step list, as the
        memory plan asks for the stash of many stage pairs."""
        memo = self._memo()
        if "times" in memo:
            return memo["times"]
        M = self.micro_batches
        comp = [(s.stage, s.micro_batch, s.time) for s in self.steps
                if s.kind == "compute" and 0 <= s.micro_batch < M and s.stage >= 0]
        stage, mb, time = (np.array([c[k] for c in comp], dtype=np.int64) for k in range(3))
        n_stages = int(stage.max()) + 1 if len(stage) else 0
        first = np.full((n_stages, M), np.iinfo(np.int64).max, dtype=np.int64)
        last = np.full((n_stages, M), -1, dtype=np.int64)
        np.minimum.at(first, (stage, mb), time)
        np.maximum.at(last, (stage, mb), time)
        first[last < 0] = -1
        memo["times"] = (first, last)
        return memo["times"]

    def makespan(self, stage_cycles: dict[int, float],
                 weight_cycles: dict[int, float] | None = None) -> float:
        """The cycles of the schedule when stage s takes stage_cycles[s] (its
        compute and the copy of its results to the next IPU): each IPU runs its
        steps in order, a step starts once its IPU is free and stage s-1 of its
        micro-batch is done. `weight_cycles`: the part of stage s's cycles
        its weight gradients take (ZeroBubble's W steps; the rest is its B
        step). The planning-time estimate (ipu-auto-stage, the planner); the
        profile's timeline adds host streams and streaming memory."""
        weight_cycles = weight_cycles or {}
        order, parts, ipus, slots = self._makespan_order()
        cycles = []  # each (stage, part)'s cycles, as part_cycles gives them
        for stage, part in parts:
            c = stage_cycles.get(stage, 0.0)
            if part:
                w = weight_cycles.get(stage, 0.0)
                c = w if part == WEIGHT_PART else c - w
            cycles.append(c)
        free = [0.0] * ipus
        done = [0.0] * slots
        end = 0.0
        for ipu, k, dep, out in order:
            f, d = free[ipu], done[dep]
            f = (f if f >= d else d) + cycles[k]
            free[ipu] = f
            if out:
                done[out] = f
            if f > end:
                end = f
        return end

    def simulation_order(self) -> list[Step]:
        """The steps in the order the profile's timeline places them (time
        step, then stage): sorted once per step list."""
        memo = self._memo()
        if "simulation" not in memo:
            memo["simulation"] = sorted(self.steps, key=lambda s: (s.time, s.stage))
        return memo["simulation"]

    def _makespan_order(self):
        """The compute steps in makespan's order (time step, then stage), each
        as (IPU index, index of its (stage, part), slot it waits for, slot it
        completes or 0), with the (stage, part) pairs: built once per step
        list, as the planner and ipu-auto-stage ask for many makespans of one
        schedule. A step waits for stage s-1 of its micro-batch (ZeroBubble's
        W step: its own stage's B step); a slot not yet completed reads 0, as
        a missing producer does."""
        memo = self._memo()
        if "order" in memo:
            return memo["order"]
        ipu_index: dict[int, int] = {}
        part_index: dict[tuple[int, str], int] = {}
        slot: dict[tuple[int, int], int] = {}

        def slot_of(k):
            return slot.setdefault(k, len(slot) + 1)

        order = []
        for s in sorted(self.steps, key=lambda s: (s.time, s.stage)):
            if s.kind != "compute":
                continue
            ipu = ipu_index.setdefault(s.ipu, len(ipu_index))
            k = part_index.setdefault((s.stage, s.part), len(part_index))
            if s.part == WEIGHT_PART:
                order.append((ipu, k, slot_of((s.stage, s.micro_batch)), 0))
            else:
                order.append((ipu, k, slot_of((s.stage - 1, s.micro_batch)), slot_of((s.stage, s.micro_batch))))
        memo["order"] = (order, list(part_index), len(ipu_index), len(slot) + 1)
        return memo["order"]

    def _memo(self) -> dict:
        """What is derived from the step list (makespan's order, the compute
        times), kept while the list is the same; schedules built from one
        cached pipeline share it (`pipelined`)."""
        key = (id(self.steps), len(self.steps))
        cached = self.__dict__.get("_derived")
        if cached is None or cached[0] != key:
            cached = self.__dict__["_derived"] = (key, {})
        return cached[1]

    def chrome_trace(self, step_us: float = 1.0) -> dict:
        """The schedule as Chrome / Perfetto trace events: one track per IPU,
        each step `step_us` microseconds long (until the machine model times them)."""
        events = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": self.strategy}}]
        for ipu in sorted({s.ipu for s in self.steps}):
            events.append({"ph": "M", "name": "thread_name", "pid": 0, "tid": ipu,
                           "args": {"name": f"IPU{ipu}"}})
        for s in self.steps:
            what = f"micro-batch {s.micro_batch}" if s.micro_batch >= 0 else "phase"
            events.append({"ph": "X", "pid": 0, "tid": s.ipu, "ts": s.time * step_us, "dur": step_us,
                           "name": f"{s.kind} stage {s.stage} ({s.direction})",
                           "cat": s.kind, "args": {"stage": s.stage, "micro_batch": s.micro_batch,
                                                   "direction": s.direction, "what": what}})
        return {"traceEvents": events, "displayTimeUnit": "ns"}

    def summary(self) -> str:
        ph = self.phases()
        lines = [f"{self.strategy}{' ' + self.name if self.name else ''} schedule: {self.num_stages} stages, {self.micro_batches} micro-batches, "
                 f"{self.length} steps per {'weight update' if self.training else 'call'}"
                 + (f" (x{self.repeats} per call)" if self.training else "")]
        if "fill" in ph:
            lines.append(f"  fill {ph['fill']}, main {ph['main']}, flush {ph['flush']}")
        util = ", ".join(f"IPU{i} {100 * u:.0f}%" for i, u in self.utilisation().items())
        lines.append(f"  busy: {util}")
        return "\n".join(lines)


def part_cycles(step: Step, stage_cycles: float, weight_cycles: float) -> float:
    """The cycles of one step of a stage whose weight gradients take
    `weight_cycles` of its `stage_cycles`."""
    if step.part == WEIGHT_PART:
        return weight_cycles
    return stage_cycles - weight_cycles if step.part == INPUT_PART else stage_cycles


def weight_gradient_ops(stage: Operation) -> set[Operation]:
    """The ops of an `ipu.stage` that ZeroBubble runs in its weight part:
    the backward ops that only weight gradients need (what the stage adds
    into the gradient accumulators, or returns as gradients), not the
    values a later stage or the outputs read. Nested ops go with their
    top-level op."""
    block = stage.body.block
    term = block.last_op
    results = list(stage.results)

    def weight_root(i: int, v) -> bool:
        if not isinstance(v, OpResult):
            return False
        if v.op.name == "ipu.accumulate":
            return True
        place = v.op.attributes.get(PLACE_KEY)
        backward = isinstance(place, PlacementAttr) and place.is_backward
        uses = results[i].uses if i < len(results) else ()
        return backward and bool(uses) and all(isinstance(u.operation, func.ReturnOp) for u in uses)

    needed: set[Operation] = set()
    work = [v.op for i, v in enumerate(term.operands) if not weight_root(i, v) and isinstance(v, OpResult)]
    while work:
        o = work.pop()
        while o.parent_op() is not stage and o.parent_op() is not None:
            o = o.parent_op()
        if o in needed or o.parent_op() is not stage:
            continue
        needed.add(o)
        for inner in o.walk():
            work += [v.op for v in inner.operands if isinstance(v, OpResult)]
    out: set[Operation] = set()
    for o in block.ops:
        place = o.attributes.get(PLACE_KEY)
        if o is not term and o not in needed and isinstance(place, PlacementAttr) and place.is_backward:
            out.update(o.walk())
    return out


def _direction(stage: int, num_fwd: int, training: bool, known: dict | None = None) -> str:
    if known and stage in known:
        return known[stage]
    if not training:
        return "fwd"
    if stage < num_fwd - 1:
        return "fwd"
    return "fwd+bwd" if stage == num_fwd - 1 else "bwd"


def pipelined(stage_ipu: dict[int, int], num_fwd: int, micro_batches: int, training: bool,
              repeats: int, name: str = "FillDrain") -> Schedule:
    """The pipeline under schedule `name` (see the module docstring)."""
    if name not in SCHEDULES:
        raise Error(f"unknown pipeline schedule {name!r}: expected one of {', '.join(SCHEDULES)}")
    stage_ipu = _complete(stage_ipu, num_fwd, training)
    S = len(stage_ipu)
    steps, memo = _pipeline_steps(tuple(sorted(stage_ipu.items())), num_fwd, micro_batches, training, name)
    sched = Schedule("pipelined", S, micro_batches, list(steps), repeats=repeats, training=training, name=name)
    sched.__dict__["_derived"] = ((id(sched.steps), len(sched.steps)), memo)
    return sched


@functools.lru_cache(maxsize=8)
def _pipeline_steps(sip: tuple, num_fwd: int, micro_batches: int, training: bool,
                    name: str) -> tuple[tuple[Step, ...], dict]:
    """The steps of one pipeline (frozen, shared by every schedule of that
    shape) and what is derived from them: ipu-auto-stage, the profile and
    the planner's many configurations of one shape ask for the same
    pipeline, each walk of it linear in the micro-batches."""
    stage_ipu = dict(sip)
    S = len(stage_ipu)
    sched = Schedule("pipelined", S, micro_batches, training=training, name=name)
    if name == "FillDrain" or S == 1:
        # stage s runs micro-batch i at step i + s: fill S-1, main M-(S-1), flush S-1
        for i in range(micro_batches):
            for s in range(S):
                sched.steps.append(Step(i + s, stage_ipu[s], "compute", s, i,
                                        _direction(s, num_fwd, training)))
        return tuple(sched.steps), {}
    if name == "ZeroBubble" and training:
        return tuple(_zero_bubble_steps(stage_ipu, num_fwd, micro_batches)), {}
    orders = _one_f_one_b_orders(stage_ipu, num_fwd, micro_batches, training,
                                 interleaved=name == "Interleaved1F1B")
    for ipu, stage, mb, t in _unit_times(orders, micro_batches):
        sched.steps.append(Step(t, ipu, "compute", stage, mb, _direction(stage, num_fwd, training)))
    sched.steps.sort(key=lambda s: (s.time, s.ipu))
    return tuple(sched.steps), {}


def _complete(stage_ipu: dict[int, int], num_fwd: int, training: bool) -> dict[int, int]:
    """Every stage up to the last, on its IPU: a forward stage whose backward
    has no ops (its gradients are computed by neighbouring stages) still
    takes its empty step, on the IPU of its forward."""
    out = dict(stage_ipu)
    for s in range(max(stage_ipu, default=-1) + 1):
        if s not in out:
            mirror = 2 * num_fwd - 2 - s
            if not training or mirror not in stage_ipu:
                raise Error(f"internal error: pipeline stage {s} has no IPU")
            out[s] = stage_ipu[mirror]
    return out


def _one_f_one_b_orders(stage_ipu: dict[int, int], num_fwd: int, M: int, training: bool,
                        interleaved: bool) -> dict[int, list[tuple[int, int]]]:
    """Each IPU's (pipeline stage, micro-batch) list under 1F1B or Megatron's
    interleaved 1F1B. Forward stage j is chunk j // N of the (j mod N)-th IPU;
    its backward is pipeline stage 2F-2-j; the last forward stage also runs the
    first backward step, so it has no backward entry of its own."""
    ipus = _round_robin_ipus(stage_ipu, num_fwd, "Interleaved1F1B" if interleaved else "1F1B",
                             one_per_ipu=not interleaved)
    N = len(ipus)
    v = num_fwd // N
    if interleaved and M % N:
        raise Error(f"Interleaved1F1B needs the micro-batches per weight update ({M}) to be a "
                    f"multiple of the number of IPUs ({N}), as Megatron-LM's schedule does")

    def fwd(k: int) -> tuple[int, int]:  # the k-th forward of an IPU: (chunk, micro-batch)
        if not interleaved:
            return 0, k
        return (k // N) % v, (k // (N * v)) * N + k % N

    def bwd(k: int) -> tuple[int, int]:
        c, mb = fwd(k)
        return v - 1 - c, mb

    orders: dict[int, list[tuple[int, int]]] = {}
    total = M * v
    for r, ipu in enumerate(ipus):
        def f_step(k, r=r):
            c, mb = fwd(k)
            return c * N + r, mb

        def b_step(k, r=r):
            c, mb = bwd(k)
            j = c * N + r
            return (2 * num_fwd - 2 - j, mb) if j != num_fwd - 1 else None

        if not training:
            orders[ipu] = [f_step(k) for k in range(total)]
            continue
        warm = min(total, (N - r - 1) * 2 + (v - 1) * N if interleaved else N - r - 1)
        seq: list = [f_step(k) for k in range(warm)]
        nf, nb = warm, 0
        while nf < total:
            seq.append(f_step(nf))
            nf += 1
            seq.append(b_step(nb))
            nb += 1
        seq += [b_step(k) for k in range(nb, total)]
        orders[ipu] = [x for x in seq if x is not None]
    return orders


def _round_robin_ipus(stage_ipu: dict[int, int], num_fwd: int, what: str, one_per_ipu: bool) -> list[int]:
    """The IPUs of the forward stages in order, checked to be visited
    round-robin (and once each when `one_per_ipu`)."""
    ipus = list(dict.fromkeys(stage_ipu[j] for j in range(num_fwd)))
    N = len(ipus)
    if num_fwd % N or any(stage_ipu[j] != ipus[j % N] for j in range(num_fwd)):
        raise Error(f"{what} needs the forward stages to visit the IPUs round-robin (stage j on "
                    f"the (j mod N)-th IPU, the same number on each); got stage IPUs "
                    f"{[stage_ipu[j] for j in range(num_fwd)]}")
    if one_per_ipu and num_fwd > N:
        raise Error(f"{what} runs one forward stage per IPU, but {num_fwd} stages share {N} IPUs: "
                    "use schedule='Interleaved1F1B' for several stages per IPU")
    return ipus


def _zero_bubble_steps(stage_ipu: dict[int, int], num_fwd: int, M: int) -> list[Step]:
    """ZB-H1 (see the module docstring). IPU r runs forward stage r and
    backward stage 2F-2-r, split into its input part (which the next
    backward stage waits for) and its weight part; the last IPU's stage F-1
    runs the forward and the loss's input gradient as one step. The order is
    found by list scheduling with the paper's unit costs (a forward, an
    input gradient and a weight gradient one time step each): whenever an
    IPU is free it starts the first that is ready of the next input
    gradient, the next forward while fewer than F-r micro-batches wait for
    their input gradient (1F1B's count) and fewer than F for their weight
    gradient (1F1B's peak, on its first IPU: ZB-H1 keeps the peak memory of
    1F1B), the next weight gradient. `Step.time` is the step's start in
    those units."""
    ipus = _round_robin_ipus(stage_ipu, num_fwd, "ZeroBubble", one_per_ipu=True)
    F = num_fwd
    nf, nb, nw = [0] * F, [0] * F, [0] * F
    fwd_done: dict[tuple[int, int], int] = {}  # (IPU rank, micro-batch) -> the step it ends at
    bwd_done: dict[tuple[int, int], int] = {}
    free = [0] * F
    steps: list[Step] = []
    t = 0
    while any(n < M for n in nw):
        for r in range(F):
            if free[r] > t:
                continue
            last = r == F - 1
            b_stage = F - 1 if last else 2 * F - 2 - r
            i = nb[r]
            if not last and i < nf[r] and bwd_done.get((r + 1, i), t + 1) <= t:
                steps.append(Step(t, ipus[r], "compute", b_stage, i, _direction(b_stage, F, True), INPUT_PART))
                bwd_done[(r, i)] = free[r] = t + 1
                nb[r] += 1
                continue
            i = nf[r]
            if i < M and nf[r] - nb[r] < F - r and nf[r] - nw[r] < F and (r == 0 or fwd_done.get((r - 1, i), t + 1) <= t):
                if last:  # the forward and the loss's input gradient in one step
                    steps.append(Step(t, ipus[r], "compute", r, i, _direction(r, F, True), INPUT_PART))
                    fwd_done[(r, i)] = bwd_done[(r, i)] = free[r] = t + 2
                    nb[r] += 1
                else:
                    steps.append(Step(t, ipus[r], "compute", r, i, _direction(r, F, True)))
                    fwd_done[(r, i)] = free[r] = t + 1
                nf[r] += 1
                continue
            i = nw[r]
            if i < nb[r] and bwd_done[(r, i)] <= t:
                steps.append(Step(t, ipus[r], "compute", b_stage, i, _direction(b_stage, F, True), WEIGHT_PART))
                free[r] = t + 1
                nw[r] += 1
        t += 1
        if t > 4 * (M + F):  # every step has started by 3M + 3(F-1) + 1
            raise Error(f"internal error: the ZeroBubble schedule deadlocks at step {t}")
    steps.sort(key=lambda s: (s.time, s.ipu))
    return steps


def _unit_times(orders: dict[int, list[tuple[int, int]]], M: int) -> list[tuple[int, int, int, int]]:
    """Run each IPU's list with one time step per entry: an entry starts once
    its IPU is free and stage s-1 of its micro-batch has finished. Returns
    (ipu, stage, micro-batch, time) of every entry."""
    done: dict[tuple[int, int], int] = {}
    pos = {ipu: 0 for ipu in orders}
    out = []
    t = 0
    left = sum(len(o) for o in orders.values())
    while left:
        ran = []
        for ipu, order in orders.items():
            if pos[ipu] == len(order):
                continue
            stage, mb = order[pos[ipu]]
            if stage == 0 or done.get((stage - 1, mb), t) < t:
                ran.append((ipu, stage, mb))
        if not ran:
            raise Error(f"internal error: the pipeline schedule deadlocks at step {t}")
        for ipu, stage, mb in ran:
            done[(stage, mb)] = t
            pos[ipu] += 1
            out.append((ipu, stage, mb, t))
        left -= len(ran)
        t += 1
    return out


def sharded(stage_ipu: dict[int, int], num_fwd: int, micro_batches: int, training: bool,
            repeats: int) -> Schedule:
    """One IPU at a time: every stage of a micro-batch, then the next micro-batch."""
    stage_ipu = _complete(stage_ipu, num_fwd, training)
    S = len(stage_ipu)
    sched = Schedule("sharded", S, micro_batches, repeats=repeats, training=training, sequential=True)
    t = 0
    for i in range(micro_batches):
        for s in range(S):
            sched.steps.append(Step(t, stage_ipu[s], "compute", s, i, _direction(s, num_fwd, training)))
            t += 1
    return sched


def phased(stage_ipu: dict[int, int], stage_phase: dict[int, int], num_fwd: int, micro_batches: int,
           training: bool, repeats: int, parallel: bool, liveness: str,
           stage_dir: dict[int, str] | None = None) -> Schedule:
    """Each phase loads its weights and activations from streaming memory,
    runs its stages (in parallel on their IPUs) over the micro-batches and
    stores what later phases need. Parallel phased overlaps a phase's loads
    with the previous phase's compute (the other IPU group)."""
    kind = "parallel_phased" if parallel else "serial_phased"
    sched = Schedule(kind, len(stage_ipu), micro_batches, repeats=repeats, training=training,
                     liveness=liveness)
    by_phase: dict[int, list[int]] = defaultdict(list)
    for s, ph in stage_phase.items():
        by_phase[ph].append(s)
    t = 0
    for ph in sorted(by_phase):
        stages = sorted(by_phase[ph])
        load_t = t - 1 if parallel and t > 0 else t
        for s in stages:
            sched.steps.append(Step(load_t, stage_ipu[s], "load", s, -1, _direction(s, num_fwd, training, stage_dir)))
        t = load_t + 1
        for i in range(micro_batches):
            for s in stages:
                sched.steps.append(Step(t, stage_ipu[s], "compute", s, i,
                                        _direction(s, num_fwd, training, stage_dir)))
            t += 1
        if liveness != "AlwaysLive" or not parallel:
            for s in stages:
                sched.steps.append(Step(t, stage_ipu[s], "store", s, -1,
                                        _direction(s, num_fwd, training, stage_dir)))
            t += 1
    return sched
