"""Block annotations: `Block`, `BeginBlock`, `BlockFunction` (PopTorch user guide, 4.4.1 "Annotations").

All three stamp `node.meta["custom"]` through `torch.fx.traceback.annotate`,
so every traced node, backward included, knows its block and IPU.
"""

from __future__ import annotations

import contextlib
import functools

import torch

from tilefx.errors import Error
from tilefx.dialects.names import BLOCK_META_KEY, IPU_META_KEY
from tilefx.lowering.tracing_state import BeginBlockState, Tracing, next_auto_id, open_annotation
from tilefx.lowering.tracing_state import end_begin_blocks, start_tracing, uses_begin_block  # noqa: F401  (re-exported)


class Block(contextlib.ContextDecorator):
    """`with poptorch.Block("B1", ipu_id=0): ...` puts the ops inside in one block.

    A block without a `user_id` gets PopTorch's automatic id when it starts
    while tilefx traces the model: "0", "1", ... in the order the id-less
    blocks start in that trace (each `with Block()`, `Block.start()` or
    BeginBlock layer run is a new block). Blocks sharing one id are one block.
    """

    def __init__(self, user_id: str | None = None, ipu_id: int | None = None):
        if user_id is not None and not isinstance(user_id, str):
            user_id = str(user_id)
        if ipu_id is not None and (isinstance(ipu_id, bool) or not isinstance(ipu_id, int) or ipu_id < 0):
            raise Error(f"Block: ipu_id must be a non-negative int, got {ipu_id!r}")
        self.user_id = user_id
        self.ipu_id = ipu_id
        self._cm = None

    @staticmethod
    def useAutoId() -> None:
        """Restart the automatic ids of id-less blocks at "0" (PopTorch: call it
        at the start of `forward`). Each trace starts them at "0" anyway."""
        if Tracing.on:
            BeginBlockState.next_auto_id = 0

    @staticmethod
    def start(user_id: str | None = None, ipu_id: int | None = None) -> None:
        """Start a new block here, lasting until the next Block.start or
        BeginBlock layer (outside tilefx tracing it does nothing)."""
        if not Tracing.on:
            return
        _open_block(Block(user_id, ipu_id))

    def _meta(self) -> dict:
        meta: dict = {}
        user_id = self.user_id
        if user_id is None and Tracing.on:
            user_id = next_auto_id()
        if user_id is not None:
            meta[BLOCK_META_KEY] = user_id
        if self.ipu_id is not None:
            meta[IPU_META_KEY] = self.ipu_id
        return meta

    def __enter__(self):
        self._cm = torch.fx.traceback.annotate(self._meta())
        self._cm.__enter__()
        return self

    def __exit__(self, *exc):
        cm, self._cm = self._cm, None
        return cm.__exit__(*exc)


def BlockFunction(user_id: str | None = None, ipu_id: int | None = None):
    """Decorator: the whole function runs in one block."""

    def wrap(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            with Block(user_id, ipu_id):
                return fn(*args, **kwargs)

        return inner

    return wrap


def _open_block(block: Block) -> None:
    open_annotation(block._meta())


class _BeginBlockHook:
    """The forward pre-hook BeginBlock registers: opens the layer's block
    when tilefx traces it. A class, not a closure, so that a module carrying
    it can be pickled (torch.save) and copied."""

    def __init__(self, user_id, ipu_id, order: int, name: str):
        self.user_id, self.ipu_id, self.order, self.name = user_id, ipu_id, order, name

    def __call__(self, module, args):
        if not Tracing.on:
            return
        if self.order < BeginBlockState.last_fired:
            raise Error(f"BeginBlock layers run in a different order than they were declared: "
                        f"{self.name} (declared earlier) runs after {BeginBlockState.last_layer}; "
                        "declare BeginBlock for layer A before layer B when A runs first")
        BeginBlockState.last_fired, BeginBlockState.last_layer = self.order, self.name
        _open_block(Block(self.user_id, self.ipu_id))


class _BeginBlockFunction:
    """PopTorch's legacy `BeginBlock(function, user_id, ipu_id)`: a callable
    that starts the block, then calls the function."""

    def __init__(self, fn, user_id, ipu_id):
        self._fn, self._user_id, self._ipu_id = fn, user_id, ipu_id

    def __call__(self, *args, **kwargs):
        Block.start(None if self._user_id is None else str(self._user_id), self._ipu_id)
        return self._fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"{_block_text(self._user_id, self._ipu_id)} {self._fn!r}"


def _block_text(user_id, ipu_id) -> str:
    return f"BeginBlock(user_id={user_id}, ipu_id={ipu_id})"


def module_repr(module: torch.nn.Module) -> str:
    """`repr(module)` with each BeginBlock layer's block written before it:
    `(l1): BeginBlock(user_id=None, ipu_id=1) Block()` (PopTorch's
    `poptorch.module_repr`; a wrapped model's repr is this one)."""
    from torch.nn.modules.module import _addindent

    lines = module.extra_repr().split("\n") if module.extra_repr() else []
    lines += [f"({name}): " + _addindent(module_repr(child), 2)
              for name, child in module._modules.items() if child is not None]
    head = torch.nn.Module._get_name(module) + "("
    if lines:
        body = lines[0] if len(lines) == 1 and not module._modules else "\n  " + "\n  ".join(lines) + "\n"
        head += body
    text = head + ")"
    block = getattr(module, "_tilefx_begin_block", None)
    return text if block is None else f"{_block_text(*block)} {text}"


def removeBlocks(module: torch.nn.Module) -> torch.nn.Module:
    """Remove every BeginBlock annotation from `module` and its children."""
    for m in module.modules():
        handle = getattr(m, "_tilefx_begin_block_handle", None)
        if handle is not None:
            handle.remove()
            del m._tilefx_begin_block_handle
        if hasattr(m, "_tilefx_begin_block"):
            del m._tilefx_begin_block
    return module


def BeginBlock(layer: torch.nn.Module, user_id: str | None = None, ipu_id: int | None = None):
    """Start a new block at `layer`; it lasts until the next BeginBlock.
    (A function instead of a layer is PopTorch's legacy form: the result
    starts the block each time it is called, then calls the function.)"""
    if not isinstance(layer, torch.nn.Module) and callable(layer):
        if ipu_id is not None and (isinstance(ipu_id, bool) or not isinstance(ipu_id, int) or ipu_id < 0):
            raise Error(f"BeginBlock: ipu_id must be a non-negative int, got {ipu_id!r}")
        return _BeginBlockFunction(layer, user_id, ipu_id)
    if not isinstance(layer, torch.nn.Module):
        raise Error(f"BeginBlock expects a torch.nn.Module, got {type(layer).__name__}")
    if getattr(layer, "_tilefx_begin_block", None) is not None:
        raise Error(f"BeginBlock: this module has already been assigned to a block ({type(layer).__name__}); "
                    "poptorch.removeBlocks(model) clears the assignments")
    if user_id is not None and not isinstance(user_id, str):
        user_id = str(user_id)
    if ipu_id is not None and (isinstance(ipu_id, bool) or not isinstance(ipu_id, int) or ipu_id < 0):
        raise Error(f"BeginBlock: ipu_id must be a non-negative int, got {ipu_id!r}")
    order = BeginBlockState.declared
    BeginBlockState.declared += 1
    layer._tilefx_begin_block = (user_id, ipu_id)
    name = f"{type(layer).__name__}(user_id={user_id!r})"
    layer._tilefx_begin_block_handle = layer.register_forward_pre_hook(
        _BeginBlockHook(user_id, ipu_id, order, name))
    return layer
