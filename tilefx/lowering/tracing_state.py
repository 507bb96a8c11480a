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
    next_auto_id = 0  # the id of the next block started without a user_id, in this trace


def next_auto_id() -> str:
    """The id of a block started without a user_id: "0", "1", ... in the order
    the blocks start in one trace (PopTorch's automatic block ids), so two
    id-less blocks are two blocks even on one IPU."""
    n = BeginBlockState.next_auto_id
    BeginBlockState.next_auto_id += 1
    return str(n)


class Tracing:
    """`Tracing.on` is True while tilefx traces a model for the (simulated) IPU."""

    on = False


class GradientOutputs:
    """Gradients a caller asks the trace to return after the model's own
    outputs (PopART's gradient anchors, `Gradient___<name>`): parameter names
    (str) and indices of tensor inputs (int). The i-th requested gradient is
    output number `model outputs + i`, one value per micro-batch. Inputs whose
    gradient is requested must be traced with `requires_grad`."""

    requested: tuple = ()


class ModuleScope:
    """The name scopes open while tracing, outermost first: the attribute name
    of each module whose forward is running and each `poptorch.NameScope`,
    joined by "/" into each traced node's custom meta so op names carry them
    (PopTorch's module name scopes: "enc/act/fc")."""

    stack: list[str] = []

    @classmethod
    def apply(cls) -> None:
        from tilefx.dialects.names import MODULE_META_KEY

        custom = torch.fx.traceback.current_meta.setdefault("custom", {})
        path = "/".join(p for p in cls.stack if p)
        if path:
            custom[MODULE_META_KEY] = path
        else:
            custom.pop(MODULE_META_KEY, None)

    @classmethod
    def push(cls, path: str) -> None:
        cls.stack.append(path)
        cls.apply()

    @classmethod
    def pop(cls) -> None:
        if cls.stack:
            cls.stack.pop()
        cls.apply()


def open_annotation(meta: dict) -> None:
    """Close the open BeginBlock annotation, if any, and open `meta`."""
    if BeginBlockState.current is not None:
        BeginBlockState.current.__exit__(None, None, None)
    BeginBlockState.current = torch.fx.traceback.annotate(meta)
    BeginBlockState.current.__enter__()
    ModuleScope.apply()  # the annotation restored an older module path: the current one wins


@contextlib.contextmanager
def node_meta_kept():
    """torch's node metadata (`torch.fx.traceback.current_meta`) as it was
    before a trace, put back after it whether the trace succeeded or failed.
    `preserve_node_meta` alone keeps only a shallow copy, whose "custom" dict
    is the one the trace's annotations write into: a trace that stops half
    way (a forward that raised) would leave its annotations there, and the
    next trace would stamp them on every node. The dicts are put back as the
    same objects, so a caller holding one sees it as it was."""
    meta = torch.fx.traceback.current_meta
    saved = {k: (v, dict(v) if isinstance(v, dict) else None) for k, v in meta.items()}
    try:
        yield
    finally:
        meta = torch.fx.traceback.current_meta
        meta.clear()
        for key, (value, contents) in saved.items():
            if contents is not None:  # the same dict object, holding what it held
                value.clear()
                value.update(contents)
            meta[key] = value


def start_tracing() -> None:
    BeginBlockState.last_fired = -1
    BeginBlockState.last_layer = ""
    BeginBlockState.next_auto_id = 0


def end_begin_blocks() -> None:
    """Close the annotation left open by the last BeginBlock (after tracing)."""
    if BeginBlockState.current is not None:
        BeginBlockState.current.__exit__(None, None, None)
        BeginBlockState.current = None
        ModuleScope.apply()


def uses_begin_block(model: torch.nn.Module) -> bool:
    return any(getattr(m, "_tilefx_begin_block", None) is not None for m in model.modules())


_SKIP_DIRS: tuple[str, ...] = ()


def user_location() -> tuple[str, int, int] | None:
    """(file, line, column) of the innermost frame of user code: the first
    frame outside torch, tilefx and the standard library."""
    import os
    import sys
    import sysconfig

    import tilefx

    global _SKIP_DIRS
    if not _SKIP_DIRS:
        _SKIP_DIRS = tuple(os.path.dirname(m.__file__) + os.sep for m in (torch, tilefx)) + \
            (sysconfig.get_paths()["stdlib"] + os.sep,)
    f = sys._getframe(1)
    while f is not None:
        name = f.f_code.co_filename
        if not name.startswith(_SKIP_DIRS) and not name.startswith("<"):
            return name, f.f_lineno, 0
        f = f.f_back
    return None


class SourceLocations(torch.overrides.TorchFunctionMode):
    """While tracing: stamps each torch call's node with the user's source
    line (custom meta), so ops carry it as their IR location and errors as
    their `location`."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        from tilefx.dialects.names import LOC_META_KEY

        loc = user_location()
        if loc is not None:
            torch.fx.traceback.current_meta.setdefault("custom", {})[LOC_META_KEY] = f"{loc[0]}:{loc[1]}"
        return func(*args, **(kwargs or {}))
