"""The multi-IPU schedule as data: which IPU does what, in which time step.

One step is one unit of time here; the machine model will give each step
its cycles. The schedule does not change the numbers (pipelined, sharded
and phased training compute exactly what plain training computes), only
when and where the work happens.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Step:
    time: int
    ipu: int
    kind: str  # compute | load | store
    stage: int
    micro_batch: int  # -1 for loads and stores of a whole phase
    direction: str  # fwd | bwd | fwd+bwd


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

    @property
    def length(self) -> int:
        return 1 + max((s.time for s in self.steps), default=-1)

    def per_ipu(self) -> dict[int, list[Step]]:
        out: dict[int, list[Step]] = defaultdict(list)
        for s in sorted(self.steps, key=lambda s: (s.ipu, s.time)):
            out[s.ipu].append(s)
        return dict(out)

    def phases(self) -> dict[str, int]:
        """Fill / main / flush lengths of a pipeline (REFERENCE.md section 3)."""
        if self.strategy != "pipelined":
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
        lines = [f"{self.strategy} schedule: {self.num_stages} stages, {self.micro_batches} micro-batches, "
                 f"{self.length} steps per {'weight update' if self.training else 'call'}"
                 + (f" (x{self.repeats} per call)" if self.training else "")]
        if "fill" in ph:
            lines.append(f"  fill {ph['fill']}, main {ph['main']}, flush {ph['flush']}")
        util = ", ".join(f"IPU{i} {100 * u:.0f}%" for i, u in self.utilisation().items())
        lines.append(f"  busy: {util}")
        return "\n".join(lines)


def _direction(stage: int, num_fwd: int, training: bool, known: dict | None = None) -> str:
    if known and stage in known:
        return known[stage]
    if not training:
        return "fwd"
    if stage < num_fwd - 1:
        return "fwd"
    return "fwd+bwd" if stage == num_fwd - 1 else "bwd"


def pipelined(stage_ipu: dict[int, int], num_fwd: int, micro_batches: int, training: bool,
              repeats: int) -> Schedule:
    """Stage s runs micro-batch i at step i + s: fill S-1, main M-(S-1), flush S-1."""
    S = len(stage_ipu)
    sched = Schedule("pipelined", S, micro_batches, repeats=repeats, training=training)
    for i in range(micro_batches):
        for s in range(S):
            sched.steps.append(Step(i + s, stage_ipu[s], "compute", s, i, _direction(s, num_fwd, training)))
    return sched


def sharded(stage_ipu: dict[int, int], num_fwd: int, micro_batches: int, training: bool,
            repeats: int) -> Schedule:
    """One IPU at a time: every stage of a micro-batch, then the next micro-batch."""
    S = len(stage_ipu)
    sched = Schedule("sharded", S, micro_batches, repeats=repeats, training=training)
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
    sched = Schedule(kind, len(stage_ipu), micro_batches, repeats=repeats, training=training)
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
