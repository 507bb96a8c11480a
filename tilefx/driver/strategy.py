"""An execution strategy as `CompileConfig.strategy` holds it: the
`ipu.strategy` module attribute the `ipu-assign-stages` pass resolves
against the blocks recorded on the ops (`kind`, `stages` or `phases`, and
the kind's settings). The one place its layout is written: PopTorch's
strategy objects (api/strategies.py `to_config`) and PopART's virtual
graph modes (popart/session.py) both build it here. Imports no torch."""

from __future__ import annotations

from typing import Any, Mapping, Sequence


def stage(blocks: Sequence[str], ipu: int | None = None) -> dict[str, Any]:
    """A stage: the blocks (by user id) that run on one IPU (None: the pass
    picks it by the strategy's `auto_stage` rule)."""
    cfg: dict[str, Any] = {"blocks": list(blocks)}
    if ipu is not None:
        cfg["ipu"] = ipu
    return cfg


def staged(kind: str, stages: Sequence[Mapping[str, Any]], auto_increment: bool = False,
           auto_ipus: int | None = None, virtual_stages: int = 1, tail: tuple[str, int] | None = None,
           schedule: str | None = None) -> dict[str, Any]:
    """A pipelined or sharded strategy (`kind`) of `stages`; `auto_increment`:
    a stage without an IPU takes the next one (AutoStage.AutoIncrement),
    else its block's IPU; `auto_ipus`: the `ipu-auto-stage` pass cuts the
    model into stages over that many IPUs (`virtual_stages` per IPU, a
    `tail` block and every op after it on IPU `tail[1]`); `schedule`: the
    pipeline's (backend/schedule.py SCHEDULES)."""
    cfg: dict[str, Any] = {"kind": kind, "stages": [dict(s) for s in stages],
                           "auto_stage": "auto_increment" if auto_increment else "same_as_ipu"}
    if auto_ipus is not None:
        cfg["auto"] = {"num_ipus": auto_ipus, "virtual_stages": virtual_stages}
        if tail is not None:
            cfg["auto"]["tail_block"], cfg["auto"]["tail_ipu"] = tail
    if schedule is not None:
        cfg["schedule"] = schedule
    return cfg


def phased(kind: str, phases: Sequence[Sequence[Mapping[str, Any]]], separate_backward: bool = False,
           liveness: str = "AlwaysLive") -> dict[str, Any]:
    """A serial or parallel phased strategy (`kind`): each phase's stages,
    whether the backward runs in phases of its own, and the tensors'
    liveness (poptorch.Liveness's name)."""
    return {"kind": kind, "phases": [{"stages": [dict(s) for s in p]} for p in phases],
            "separate_backward": separate_backward, "liveness": liveness}


__all__ = ["phased", "stage", "staged"]
