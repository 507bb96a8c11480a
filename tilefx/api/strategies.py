"""Multi-IPU execution strategies (PopTorch user guide, 4.4.2 "Available execution strategies"): Stage, Phase
and
the four strategies. A strategy is only a description: `to_config()` turns it
into the `ipu.strategy` module attribute that the `ipu-assign-stages` pass
resolves against the blocks recorded on the ops (its layout:
driver/strategy.py)."""

from __future__ import annotations

from tilefx.api.enums import AutoStage, Liveness
from tilefx.errors import Error
from tilefx.api.option_groups import STRATEGY_FACTORIES
from tilefx.backend.schedule import SCHEDULES
from tilefx.driver import strategy as strategy_config


class Stage:
    """One or more blocks (by user id) that run on one IPU."""

    _CONFIG_METHODS = frozenset({"ipu"})

    def __init__(self, *block_ids: str):
        if not block_ids:
            raise Error("Stage needs at least one block id")
        self.blocks = [str(b) for b in block_ids]
        self._ipu: int | None = None

    def ipu(self, ipu: int) -> Stage:
        if not isinstance(ipu, int) or ipu < 0:
            raise Error(f"Stage.ipu: expected a non-negative int, got {ipu!r}")
        self._ipu = ipu
        return self

    def to_config(self) -> dict:
        return strategy_config.stage(self.blocks, self._ipu)

    def __repr__(self) -> str:
        ipu = "" if self._ipu is None else f".ipu({self._ipu})"
        return f"Stage({', '.join(map(repr, self.blocks))}){ipu}"


def _check_one_stage_per_block(stages: list[Stage], what: str = "stage") -> None:
    """A block belongs to one stage (PopTorch: "associated with more than one stage")."""
    seen: dict[str, int] = {}
    for i, st in enumerate(stages):
        for b in st.blocks:
            if b in seen:
                where = f"{what} {seen[b]} and {what} {i}" if seen[b] != i else f"{what} {i} twice"
                raise Error(f"block {b!r} is associated with more than one stage ({where}): "
                            "list each block in one Stage")
            seen[b] = i


def _stage(x) -> Stage:
    if isinstance(x, Stage):
        return x
    if isinstance(x, str):
        return Stage(x)
    if isinstance(x, (list, tuple)) and all(isinstance(b, str) for b in x):
        return Stage(*x)
    raise Error(f"expected a Stage, a block id or a list of block ids, got {x!r}")


def _find_stage(stages: list[Stage], key) -> Stage:
    """`strategy.stage(block_id)`: the Stage the block belongs to (PopTorch's
    ExecutionStrategy.stage); an int that names no block is the stage's index."""
    if not isinstance(key, bool) and isinstance(key, (str, int)):
        for st in stages:
            if str(key) in st.blocks:
                return st
    if isinstance(key, int) and not isinstance(key, bool) and 0 <= key < len(stages):
        return stages[key]
    raise Error(f"stage: no stage holds block {key!r} (the strategy's blocks: "
                f"{[b for st in stages for b in st.blocks]})")


class Phase:
    """Stages that run at the same time, each on its own IPU (phased execution)."""

    _CONFIG_METHODS = frozenset({"ipus"})

    def __init__(self, *stages):
        if len(stages) == 1 and isinstance(stages[0], (list, tuple)) and \
                not all(isinstance(s, str) for s in stages[0]):
            stages = tuple(stages[0])
        self.stages = [_stage(s) for s in stages]
        if not self.stages:
            raise Error("Phase needs at least one stage")

    def ipus(self, *ipus: int) -> Phase:
        if len(ipus) != len(self.stages):
            raise Error(f"Phase.ipus: {len(ipus)} IPUs given for {len(self.stages)} stages")
        for s, i in zip(self.stages, ipus):
            s.ipu(i)
        return self

    def stage_configs(self) -> list[dict]:
        return [s.to_config() for s in self.stages]


class _StagedExecution:
    kind = ""
    _CONFIG_METHODS = frozenset({"stage"})

    def __init__(self, *args):
        self.auto_ipus: int | None = None  # set by auto(): ipu-auto-stage picks the stages
        self.virtual_stages = 1
        self.auto_tail: tuple[str, int] | None = None  # set by auto(tail=...): (block, IPU)
        self.auto_stage = AutoStage.SameAsIpu
        if args and isinstance(args[0], AutoStage):
            self.auto_stage, args = args[0], args[1:]
        if len(args) == 1 and isinstance(args[0], (list, tuple)):
            args = tuple(args[0])
        self.stages = [_stage(a) for a in args]
        _check_one_stage_per_block(self.stages)
        if args and all(isinstance(a, str) for a in args):
            # PipelinedExecution("B1", "B2", ...): stage i on IPU i
            for i, s in enumerate(self.stages):
                s.ipu(i)

    @classmethod
    def auto(cls, num_ipus: int, **kw):
        """The strategy over `num_ipus` IPUs with the stages chosen by the
        `ipu-auto-stage` pass: cut points that balance the machine model's
        cycles per stage, keep every IPU within its memory and respect the
        model's Block / BeginBlock annotations that name an ipu_id. The
        profile (`executor.profile.auto_stage`) reports the cuts.
        `tail`: the name of a Block (without an ipu_id) whose ops, and every
        op after them, run as one more pipeline stage on IPU `tail_ipu` (0 by
        default): a head whose weight is tied to the embedding goes back to
        the embedding's IPU, which then holds the weight once (PopTorch user
        guide, "Pipelined execution": stages may share an IPU). FillDrain only."""
        if isinstance(num_ipus, bool) or not isinstance(num_ipus, int) or num_ipus < 1:
            raise Error(f"{cls.__name__}.auto: expected a positive number of IPUs, got {num_ipus!r}")
        tail, tail_ipu = kw.pop("tail", None), kw.pop("tail_ipu", 0)
        if tail is not None and (not isinstance(tail, str) or not tail):
            raise Error(f"{cls.__name__}.auto: tail must be a block name, got {tail!r}")
        if isinstance(tail_ipu, bool) or not isinstance(tail_ipu, int) or not 0 <= tail_ipu < num_ipus:
            raise Error(f"{cls.__name__}.auto: tail_ipu must be one of the IPUs 0..{num_ipus - 1}, "
                        f"got {tail_ipu!r}")
        virtual = kw.pop("virtual_stages", None)
        strategy = cls(**kw)
        if virtual is None:
            virtual = 2 if getattr(strategy, "schedule", "") == "Interleaved1F1B" else 1
        if isinstance(virtual, bool) or not isinstance(virtual, int) or virtual < 1:
            raise Error(f"{cls.__name__}.auto: virtual_stages must be a positive int, got {virtual!r}")
        if virtual > 1 and getattr(strategy, "schedule", "") != "Interleaved1F1B":
            raise Error(f"{cls.__name__}.auto: virtual_stages={virtual} needs schedule='Interleaved1F1B'")
        if tail is not None and getattr(strategy, "schedule", "FillDrain") != "FillDrain":
            raise Error(f"{cls.__name__}.auto: a tail stage on an earlier IPU runs with the FillDrain "
                        f"schedule only (the 1F1B schedules need the stages in IPU order), not "
                        f"{strategy.schedule!r}")
        strategy.auto_ipus, strategy.virtual_stages = num_ipus, virtual
        strategy.auto_tail = None if tail is None else (tail, tail_ipu)
        return strategy

    def stage(self, block_id) -> Stage:
        return _find_stage(self.stages, block_id)

    def to_config(self) -> dict:
        return strategy_config.staged(self.kind, [s.to_config() for s in self.stages],
                                      auto_increment=self.auto_stage == AutoStage.AutoIncrement,
                                      auto_ipus=self.auto_ipus, virtual_stages=self.virtual_stages,
                                      tail=self.auto_tail, schedule=getattr(self, "schedule", None))

    def __repr__(self) -> str:
        if self.auto_ipus is not None:
            return f"{type(self).__name__}.auto({self.auto_ipus})"
        return f"{type(self).__name__}({', '.join(map(repr, self.stages))})"


class PipelinedExecution(_StagedExecution):
    """Stages on different IPUs process micro-batches in a pipeline (the default).

    `schedule` orders each IPU's forward and backward steps: "FillDrain"
    (PopTorch's, the default), "1F1B", "Interleaved1F1B" (stages visiting
    the IPUs round-robin, several per IPU) or "ZeroBubble" (ZB-H1: 1F1B with
    each backward split into input and weight gradients, the weight
    gradients filling the bubbles). The schedule changes the timeline,
    the bubbles and the stashed activations, never the numbers."""

    kind = "pipelined"

    def __init__(self, *args, schedule: str = "FillDrain"):
        super().__init__(*args)
        if schedule not in SCHEDULES:
            raise Error(f"PipelinedExecution: unknown schedule {schedule!r}: expected one of "
                        f"{', '.join(map(repr, SCHEDULES))}")
        self.schedule = schedule


class ShardedExecution(_StagedExecution):
    """Stages run one after the other, one IPU active at a time (for debugging)."""

    kind = "sharded"


class _PhasedExecution:
    kind = ""
    _CONFIG_METHODS = frozenset({"phase", "stage", "useSeparateBackwardPhase", "setTensorsLiveness",
                                 "sendTensorsOffChipAfterFwd"})

    def __init__(self, *phases):
        if len(phases) == 1 and isinstance(phases[0], (list, tuple)) and phases[0] and \
                isinstance(phases[0][0], (Phase, list, tuple)):
            phases = tuple(phases[0])
        self.phases = [p if isinstance(p, Phase) else Phase(*p) if isinstance(p, (list, tuple))
                       else Phase(p) for p in phases]
        _check_one_stage_per_block([s for p in self.phases for s in p.stages], "stage")
        self.separate_backward = False
        self.liveness = Liveness.AlwaysLive

    def phase(self, idx: int) -> Phase:
        return self.phases[idx]

    def stage(self, block_id) -> Stage:
        return _find_stage([st for p in self.phases for st in p.stages], block_id)

    def useSeparateBackwardPhase(self, use: bool = True):
        self.separate_backward = bool(use)
        return self

    def setTensorsLiveness(self, liveness: Liveness):
        if not isinstance(liveness, Liveness):
            raise Error(f"setTensorsLiveness expects a poptorch.Liveness, got {liveness!r}")
        self._check_liveness(liveness)
        self.liveness = liveness
        return self

    def sendTensorsOffChipAfterFwd(self, off_chip: bool = True):
        return self.setTensorsLiveness(Liveness.OffChipAfterFwd if off_chip else Liveness.AlwaysLive)

    def _check_liveness(self, liveness: Liveness) -> None:
        pass

    def to_config(self) -> dict:
        return strategy_config.phased(self.kind, [p.stage_configs() for p in self.phases],
                                      separate_backward=self.separate_backward, liveness=self.liveness.name)


class SerialPhasedExecution(_PhasedExecution):
    """Phases run one after the other on one group of IPUs; weights and
    activations move to and from streaming memory around each phase."""

    kind = "serial_phased"


class ParallelPhasedExecution(_PhasedExecution):
    """Phases alternate between two groups of IPUs: even phases on even IPUs."""

    kind = "parallel_phased"

    def _check_liveness(self, liveness: Liveness) -> None:
        if liveness in (Liveness.OffChipAfterFwdNoOverlap, Liveness.OffChipAfterEachPhase):
            raise Error(f"Liveness.{liveness.name} is only valid for SerialPhasedExecution")


#: the constructors an options file may call, by name (options_file falls back
#: to these when STRATEGY_FACTORIES, which a caller may override, lacks one)
CONSTRUCTORS = {c.__name__: c for c in (Stage, Phase, PipelinedExecution, ShardedExecution,
                                        SerialPhasedExecution, ParallelPhasedExecution)}
for _name, _cls in CONSTRUCTORS.items():
    # setdefault: a test (or user) that registered its own stand-in keeps it
    STRATEGY_FACTORIES.setdefault(_name, _cls)
