"""`HostSettings`: what the host loop reads that is not a compile option
(the compile options are the driver's `CompileConfig`): which outputs a
call returns, how a weight update reduces its gradients, how replicas share
buffers and inputs, where the executable cache and the profile go.

PopTorch's `Options` give one in `api/compile_config.py` `surface_config`
(with the CompileConfig, from the same options); PopART's sessions build
theirs from their DataFlow and SessionOptions (`popart/session.py`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from tilefx.errors import Error

# which of a call's outputs come back (PopTorch user guide, "Efficient data
# batching"): every micro-batch's, the last one's, their sum, or every n-th
# device iteration's
OUTPUT_MODES = ("all", "final", "sum", "every_n")


@dataclass(frozen=True)
class HostSettings:
    """What the host loop reads beyond the CompileConfig (the defaults are
    PopTorch's for an inference model)."""

    output_mode: str = "all"
    output_return_period: int = 1  # the n of "every_n"
    # a training step's gradients averaged over its micro-batches and
    # replicas (ReductionType.Mean), else summed
    mean_reduction: bool = False
    # every replica starts each call from the host's buffers, else each keeps
    # its own from call to call
    broadcast_buffers: bool = True
    # replicas that read one input slice (Options.inputReplicaGrouping), and
    # whether a group is every size-th replica (orthogonal) rather than
    # consecutive ones
    input_group_size: int = 1
    input_group_orthogonal: bool = False
    # compiled for an offline target: never runs, keeps no copies of the weights
    offline: bool = False
    # automatic loss scaling updates its factor once per this many weight updates
    loss_scaling_period: int = 1
    cache_dir: str | None = None  # the executable cache (None: none)
    profile_dir: str | None = None  # the machine model's report, written when compiled
    name: str | None = None  # the model's name in reports (None: "training" or "inference")

    def __post_init__(self) -> None:
        if self.output_mode not in OUTPUT_MODES:
            raise Error(f"HostSettings.output_mode must be one of {list(OUTPUT_MODES)}, got {self.output_mode!r}")
        for name in ("output_return_period", "input_group_size", "loss_scaling_period"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise Error(f"HostSettings.{name} must be a positive int, got {v!r}")
        for name in ("mean_reduction", "broadcast_buffers", "input_group_orthogonal", "offline"):
            if not isinstance(getattr(self, name), bool):
                raise Error(f"HostSettings.{name} must be a bool, got {getattr(self, name)!r}")
        for name in ("cache_dir", "profile_dir", "name"):
            v = getattr(self, name)
            if v is not None and not isinstance(v, str):
                raise Error(f"HostSettings.{name} must be None or a str, got {v!r}")

    def replace(self, **changes) -> HostSettings:
        return dataclasses.replace(self, **changes)
