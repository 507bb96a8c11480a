"""The state the torch frontend keeps while it traces a model.

The PopTorch API (`api/annotations.py`, `api/ops.py`) writes it, through
BeginBlock's forward pre-hooks and `isRunningOnIpu()`; the tracer
(`lowering/from_torch.py`) resets and closes it around each trace. It lives
here, below both, so the lowering never imports the user API.
"""

from __future__ import annotations

import contextlib

import torch


class BeginBlockState:
    """The annotation set by the last BeginBlock hook (or Block.start), until
    the next one, and the declaration order of the BeginBlock layers."""

    current: contextlib.AbstractContextManager | None = None
    declared = 0
    last_fired = -1
    last_layer = ""


class Tracing:
    """`Tracing.on` is True while tilefx traces a model for the (simulated) IPU."""

    on = False


def open_annotation(meta: dict) -> None:
    """Close the open BeginBlock annotation, if any, and open `meta`."""
    if BeginBlockState.current is not None:
        BeginBlockState.current.__exit__(None, None, None)
    BeginBlockState.current = torch.fx.traceback.annotate(meta)
    BeginBlockState.current.__enter__()


def start_tracing() -> None:
    BeginBlockState.last_fired = -1
    BeginBlockState.last_layer = ""


def end_begin_blocks() -> None:
    """Close the annotation left open by the last BeginBlock (after tracing)."""
    if BeginBlockState.current is not None:
        BeginBlockState.current.__exit__(None, None, None)
        BeginBlockState.current = None


def uses_begin_block(model: torch.nn.Module) -> bool:
    return any(getattr(m, "_tilefx_begin_block", None) is not None for m in model.modules())
