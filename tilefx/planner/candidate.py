"""One configuration the planner costed: what it sets, what the machine
model predicts for it, and the PopTorch code that sets it."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch

from tilefx.api.annotations import BeginBlock
from tilefx.api.option_groups import TensorLocationSettings
from tilefx.api.options import Options
from tilefx.api.strategies import AutoStage, PipelinedExecution

# where the optimizer state lives (PopTorch's TensorLocations.setOptimizerLocation)
STATE_ON_CHIP, STATE_OFF_CHIP, STATE_SHARDED = "on chip", "off chip", "replica-sharded"
# off chip and sharded over the replicas: each replica streams its share
# (Graphcore's BERT pre-training configurations)
STATE_OFF_CHIP_SHARDED = "off chip, sharded"
STATES = (STATE_ON_CHIP, STATE_SHARDED, STATE_OFF_CHIP_SHARDED, STATE_OFF_CHIP)


@dataclass
class Candidate:
    """A configuration of `ipus` IPUs: `stages` pipeline stages x `replicas`
    replicas, `micro_batch` samples per micro-batch, `accumulation`
    micro-batches per weight update, and its predicted figures (the machine
    model's, `tilefx.backend.profile`)."""

    stages: int
    replicas: int
    micro_batch: int
    accumulation: int
    schedule: str
    state: str
    proportion: float
    machine: str
    # (module path, IPU): BeginBlock(model.<path>, ipu_id=IPU) starts each stage after the first
    placement: list[tuple[str, int]] = field(default_factory=list)
    # the module starting the tail (the ops after the last repeated layer),
    # put back on IPU 0 as a last pipeline stage: its weight is tied to one
    # of IPU 0's; "" for contiguous stages
    tail: str = ""
    # per IPU, where it differs from `proportion` (the smallest): the IPUs
    # with room on their tiles run their matmuls at a larger proportion
    proportions: dict[int, float] = field(default_factory=dict)
    # bytes per tile ipu-auto-stage left free on each IPU (see the planner's re-cut)
    reserve: list[int] = field(default_factory=list)
    throughput: float = 0.0  # samples per second
    memory: dict[int, int] = field(default_factory=dict)  # per IPU: bytes on its fullest tile
    tile_bytes: int = 0
    # the fewest bytes per tile, on average over the IPUs of one replica, that
    # any configuration of these stages and replicas holds (search.py)
    held_bytes: int = 0
    bubble: float = 0.0
    allreduce_share: float = 0.0
    stage_cycles: list[int] = field(default_factory=list)
    fits: bool = True
    reason: str = ""  # why it does not fit, or what was given up
    # ipu-auto-stage found no split whose stages fit its memory estimate
    refused: bool = False
    base: Options | None = None  # the user's options the candidate starts from

    @property
    def ipus(self) -> int:
        return self.stages * self.replicas

    @property
    def pipeline_stages(self) -> int:
        """Pipeline stages: one per IPU, and the tail's on IPU 0."""
        return self.stages + (1 if self.tail else 0)

    @property
    def global_batch(self) -> int:
        return self.micro_batch * self.accumulation * self.replicas

    @property
    def options(self) -> Options:
        """A `tilefx.Options` that sets this configuration (with `place(model)`
        putting the stages where the planner cut)."""
        o = self.base.clone() if self.base is not None else Options()
        o.replicationFactor(self.replicas)
        o.Training.gradientAccumulation(self.accumulation)
        own = o.execution_strategy
        if own is not None:  # the user's strategy, with the candidate's schedule
            own = copy.copy(own)
            own.schedule = self.schedule
            o.setExecutionStrategy(own)
        elif self.tail:  # each block the next stage: the tail's block a stage after the last IPU's
            o.setExecutionStrategy(PipelinedExecution(AutoStage.AutoIncrement, schedule=self.schedule))
        elif self.stages > 1:
            o.setExecutionStrategy(PipelinedExecution(schedule=self.schedule))
        if not o.available_memory_proportion:
            o.setAvailableMemoryProportion({f"IPU{i}": self.proportions.get(i, self.proportion)
                                            for i in range(self.stages)})
        if self.state != STATE_ON_CHIP and o.TensorLocations.optimizer is None:
            o.TensorLocations.setOptimizerLocation(self._state_settings())
        return o

    @property
    def state_flags(self) -> tuple[bool, bool]:
        """Where the optimizer state lives: (on chip, sharded over the replicas)."""
        return (self.state not in (STATE_OFF_CHIP, STATE_OFF_CHIP_SHARDED),
                self.state in (STATE_SHARDED, STATE_OFF_CHIP_SHARDED))

    def _state_settings(self) -> TensorLocationSettings:
        s = TensorLocationSettings()
        on_chip, sharded = self.state_flags
        if not on_chip:
            s.useOnChipStorage(False)
        if sharded:
            s.useReplicatedTensorSharding(True)
        return s

    def place(self, model: torch.nn.Module) -> torch.nn.Module:
        """Start each stage's block at its first module, on its IPU (the
        model must not carry other BeginBlock annotations there)."""
        for k, (path, ipu) in enumerate(self.placement, 1):
            BeginBlock(model.get_submodule(path), f"stage{k}", ipu_id=ipu)
        return model

    @property
    def code(self) -> str:
        """The PopTorch code that sets this configuration, to paste."""
        lines = ["opts = poptorch.Options()",
                 f"opts.replicationFactor({self.replicas})",
                 f"opts.Training.gradientAccumulation({self.accumulation})"]
        if self.stages > 1:
            sched = "" if self.schedule == "FillDrain" else f", schedule={self.schedule!r}"
            own = self.base.execution_strategy if self.base is not None else None
            mode = getattr(getattr(own, "auto_stage", None), "name", "AutoIncrement" if self.tail else "SameAsIpu")
            lines.append(f"opts.setExecutionStrategy(poptorch.PipelinedExecution("
                         f"poptorch.AutoStage.{mode}{sched}))")
        amp = ", ".join(f'"{k}": {v}' for k, v in self.options.available_memory_proportion.items())
        lines.append(f"opts.setAvailableMemoryProportion({{{amp}}})")
        if self.state == STATE_OFF_CHIP:
            lines.append("opts.TensorLocations.setOptimizerLocation("
                         "poptorch.TensorLocationSettings().useOnChipStorage(False))")
        elif self.state == STATE_SHARDED:
            lines.append("opts.TensorLocations.setOptimizerLocation("
                         "poptorch.TensorLocationSettings().useReplicatedTensorSharding(True))")
        elif self.state == STATE_OFF_CHIP_SHARDED:
            lines.append("opts.TensorLocations.setOptimizerLocation(poptorch.TensorLocationSettings()"
                         ".useOnChipStorage(False).useReplicatedTensorSharding(True))")
        for k, (path, ipu) in enumerate(self.placement, 1):
            lines.append(f"poptorch.BeginBlock(model.{_python_path(path)}, \"stage{k}\", ipu_id={ipu})")
        return "\n".join(lines)

    def row(self) -> str:
        mem = max(self.memory.values(), default=0)
        share = f"{100 * mem / self.tile_bytes:.0f}%" if self.tile_bytes else "-"
        stages = f"{self.stages}+tail" if self.tail else f"{self.stages:>2}"
        return (f"{stages} x {self.replicas:<3} {self.micro_batch:>4} {self.accumulation:>6} "
                f"{self.schedule:<11} {self.state:<17} {self._amp():<4} "
                f"{self.throughput:>12,.1f} {share:>6} {100 * self.bubble:>6.1f}% "
                f"{100 * self.allreduce_share:>6.1f}%  {self.limit()}")

    def _amp(self) -> str:
        """The proportion, or the smallest and the largest per IPU."""
        if not self.proportions:
            return f"{self.proportion}"
        return f"{self.proportion}-{max(self.proportions.values())}"

    def limit(self) -> str:
        """What limits the throughput most: the pipeline's bubble, the
        gradient all-reduce or the slowest stage."""
        if not self.fits:
            return f"does not fit: {self.reason}"
        if self.bubble >= max(self.allreduce_share, 0.15):
            return f"pipeline bubble {100 * self.bubble:.0f}%"
        if self.allreduce_share >= 0.15:
            return f"gradient all-reduce {100 * self.allreduce_share:.0f}%"
        if self.stage_cycles:
            k = max(range(len(self.stage_cycles)), key=self.stage_cycles.__getitem__)
            return f"compute of IPU {k} ({self.stage_cycles[k]:,} cycles per micro-batch)"
        return "compute"

    def explain(self) -> str:
        """Why this configuration: its choices and the figures behind them."""
        mem = ", ".join(f"IPU{i} {b / 1024:.0f} KiB" for i, b in sorted(self.memory.items()))
        tail = f" (and the tail's on IPU 0, {self.pipeline_stages} in all)" if self.tail else ""
        lines = [f"{self.stages} pipeline stage(s){tail} x {self.replicas} replica(s) = {self.ipus} IPUs "
                 f"({self.machine}), micro-batch {self.micro_batch}, gradient accumulation "
                 f"{self.accumulation}: {self.global_batch} samples per weight update",
                 f"  predicted throughput {self.throughput:,.1f} samples/s; limited by {self.limit()}",
                 f"  schedule {self.schedule}: bubble {100 * self.bubble:.1f}% of the pipeline's IPU time",
                 f"  gradient all-reduce: {100 * self.allreduce_share:.1f}% of a weight update",
                 f"  optimizer state {self.state}; available memory proportion "
                 + (", ".join(f"IPU{i} {self.proportions.get(i, self.proportion)}" for i in range(self.stages))
                    if self.proportions else f"{self.proportion}"),
                 f"  fullest tile per IPU (of {self.tile_bytes / 1024:.0f} KiB): {mem}"]
        if self.stage_cycles:
            lines.append(f"  cycles per micro-batch by IPU (forward and backward): {self.stage_cycles}")
        for k, (path, ipu) in enumerate(self.placement, 1):
            lines.append(f"  stage {k} (IPU {ipu}) starts at {path}"
                         + (", back on the IPU holding its tied weight" if path == self.tail else ""))
        if self.reason and self.fits:
            lines.append(f"  {self.reason}")
        return "\n".join(lines)


def _python_path(path: str) -> str:
    """`layers.3.attn` as Python attribute access: `layers[3].attn`."""
    out = ""
    for part in path.split("."):
        out += f"[{part}]" if part.isdigit() else f".{part}"
    return out.lstrip(".")
