"""A session's report (getReport): the machine model's profile as PopART's libpva
report gives it, the compilation always and the execution when profiling is on."""

from __future__ import annotations

from tilefx.popart.devices import DeviceInfo


class Report:
    """A profile of the simulated machine: `compilation` (target and memory per IPU) and
    `execution` (cycles, stage cycles, timeline; None when profiling is not enabled).
    `profile` is the full tilefx Profile (tilefx.backend.profile) when enabled."""

    def __init__(self, profile, enabled: bool, runs: int, device: DeviceInfo):
        summary = profile.summary()
        self.compilation = {
            "target": {"type": device.type.value, "numIPUs": profile.num_ipus,
                       "tilesPerIPU": profile.machine.tiles, "machine": profile.machine.name,
                       "bytesPerTile": profile.machine.bytes_per_tile},
            "memory": summary["memory"],
        }
        self.execution = None
        self.profile = profile if enabled else None
        if enabled:
            self.execution = {"runs": runs, "cyclesPerRun": profile.total_cycles,
                              "secondsPerRun": profile.seconds, "stageCycles": summary["stage_cycles"],
                              "cyclesByOp": summary["cycles_by_op"], "strategy": profile.strategy}

    def __repr__(self) -> str:
        state = "with" if self.execution is not None else "without"
        return f"Report({self.compilation['target']}, {state} execution profile)"
