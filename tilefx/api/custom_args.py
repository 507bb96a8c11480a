"""Custom argument types: `ICustomArgParser` and `registerCustomArgParser`.

PopTorch takes tensors, tuples, lists, dicts and None as a model's inputs;
any other class passed to `forward` (a graph library's `Batch`, a small
dataclass of tensors) needs a parser saying which tensors it holds and how to
rebuild it. `registerCustomArgParser(MyBatch, MyParser())` makes MyBatch a
node of torch's pytree, so the call binding (lowering/call_spec.py) flattens
it into its tensors (each one a batched input of the graph, named
`arg[0]`, `arg[1]`, ...) and the trace hands `forward` an object rebuilt by
the parser around the traced tensors. The same holds for a model returning
such an object, and for a DataLoader whose collate function makes them.
"""

from __future__ import annotations

import abc
from typing import Any, Iterator

import torch
from torch.utils import _pytree as pytree

from tilefx.errors import Error

_PARSERS: dict[type, ICustomArgParser] = {}


class ICustomArgParser(abc.ABC):
    """How PopTorch reads a custom argument type: the tensors it holds, in a
    fixed order, and a new object of its type around given tensors."""

    @abc.abstractmethod
    def yieldTensors(self, struct) -> Iterator[torch.Tensor]:
        """Yield every tensor of `struct`, always in the same order."""

    @abc.abstractmethod
    def reconstruct(self, original_structure, tensor_iterator: Iterator[torch.Tensor]) -> Any:
        """An object like `original_structure` holding the tensors that
        `tensor_iterator` yields (in the order of yieldTensors)."""


class _Layout:
    """The pytree context of a custom argument: the original object (handed to
    `reconstruct`) compared only by its type and tensor count, so a later call
    with a new object of the same layout matches the compiled call."""

    def __init__(self, original, count: int):
        self.original, self.count = original, count

    def __eq__(self, other) -> bool:
        return isinstance(other, _Layout) and type(self.original) is type(other.original) \
            and self.count == other.count

    def __hash__(self) -> int:
        return hash((type(self.original), self.count))

    def __repr__(self) -> str:
        return f"{type(self.original).__name__}({self.count} tensors)"


def _flatten(struct):
    parser = _PARSERS[type(struct)]
    try:
        tensors = list(parser.yieldTensors(struct))
    except Error:
        raise
    except Exception as e:
        raise Error(f"{type(parser).__name__}.yieldTensors failed on a {type(struct).__name__}: "
                    f"{type(e).__name__}: {e}") from e
    return tensors, _Layout(struct, len(tensors))


def _flatten_with_keys(struct):
    tensors, layout = _flatten(struct)
    return [(pytree.SequenceKey(i), t) for i, t in enumerate(tensors)], layout


def _unflatten(children, layout: _Layout):
    struct = layout.original
    parser = _PARSERS[type(struct)]
    try:
        return parser.reconstruct(struct, iter(list(children)))
    except Error:
        raise
    except Exception as e:
        raise Error(f"{type(parser).__name__}.reconstruct failed on a {type(struct).__name__}: "
                    f"{type(e).__name__}: {e}") from e


def registerCustomArgParser(arg_type: type, parser: ICustomArgParser) -> None:
    """Read arguments (and results) of `arg_type` with `parser` (a later
    registration for the same type replaces the parser)."""
    if not isinstance(arg_type, type):
        raise Error(f"registerCustomArgParser: expected a class, got {arg_type!r}")
    if not isinstance(parser, ICustomArgParser):
        raise Error(f"registerCustomArgParser: the parser must be a poptorch.ICustomArgParser, got "
                    f"{type(parser).__name__}")
    if arg_type in _PARSERS:
        _PARSERS[arg_type] = parser
        return
    if arg_type in pytree.SUPPORTED_NODES or issubclass(arg_type, torch.Tensor):
        raise Error(f"registerCustomArgParser: {arg_type.__name__} is already an argument type "
                    "PopTorch reads (tensors, tuples, lists, dicts and registered pytree nodes)")
    _PARSERS[arg_type] = parser
    pytree.register_pytree_node(arg_type, _flatten, _unflatten,
                                flatten_with_keys_fn=_flatten_with_keys,
                                serialized_type_name=f"tilefx.custom_arg.{arg_type.__module__}."
                                                     f"{arg_type.__qualname__}")
