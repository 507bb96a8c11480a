"""Batches as data: the structure of a batch, joining batches and cutting
them again, and the error data loading raises.

A batch is a tensor or any nesting of tuples, lists, dicts, namedtuples and
classes registered with ``poptorch.registerCustomArgParser`` (torch's pytree
reads them all: ``custom_args.py`` registers the custom classes as pytree
nodes).  Both ``poptorch.DataLoader`` (joining the micro-batches of a batch
sampler into combined batches) and the asynchronous accessor's worker
(rebatching) work on the flattened tensors and rebuild the user's structure.
"""

from __future__ import annotations

from typing import Any, Optional

import torch
from torch.utils import _pytree as pytree

from tilefx.errors import Error


class DataLoaderError(Error, AssertionError):
    """An invalid DataLoader / AsynchronousDataAccessor argument.

    PopTorch asserts in these places, so this is both a ``tilefx.Error``
    (``poptorch.Error``) and an ``AssertionError``.
    """

    def __init__(self, message: str):
        super().__init__(message, type="dataloader")


def check(condition: bool, message: str) -> None:
    if not condition:
        raise DataLoaderError(message)


def positive_int(name: str, value: Any, minimum: int = 1) -> int:
    check(isinstance(value, int) and not isinstance(value, bool)
          and value >= minimum,
          f"{name} must be an int >= {minimum}, got {value!r}")
    return value


def flatten(batch: Any) -> tuple[list, Any]:
    """The leaves of a batch and the spec that rebuilds it."""
    return pytree.tree_flatten(batch)


def unflatten(leaves: list, spec: Any) -> Any:
    return pytree.tree_unflatten(list(leaves), spec)


def leading_size(batch: Any) -> Optional[int]:
    """dim 0 of the first tensor of a batch (None if it has no tensor)."""
    for leaf in flatten(batch)[0]:
        if isinstance(leaf, torch.Tensor) and leaf.dim() > 0:
            return int(leaf.shape[0])
    return None


def _batch_tensors(batch: Any, what: str) -> tuple[list, Any, int]:
    """The tensors of a batch, its spec and its number of rows; an Error
    if the batch holds anything else or its tensors disagree on dim 0."""
    leaves, spec = flatten(batch)
    if not leaves or not all(isinstance(t, torch.Tensor) and t.dim() > 0
                             for t in leaves):
        raise Error(f"{what} needs batches made only of tensors with a batch "
                    "dimension (a tensor, or a tuple, list, dict or "
                    "registered custom class of them), got "
                    f"{type(batch).__name__}")
    rows = int(leaves[0].shape[0])
    if any(t.shape[0] != rows for t in leaves):
        raise Error(f"{what} needs every tensor of a batch to have the same "
                    f"dim 0, got {[tuple(t.shape) for t in leaves]}")
    return leaves, spec, rows


def concatenate(batches: list, what: str) -> Any:
    """One batch holding the rows of ``batches`` in order (same structure)."""
    if len(batches) == 1:
        return batches[0]
    parts = [_batch_tensors(b, what) for b in batches]
    spec = parts[0][1]
    if any(p[1] != spec for p in parts[1:]):
        raise Error(f"{what} needs every batch to have the same structure")
    joined = [torch.cat(column) for column in zip(*(p[0] for p in parts))]
    return unflatten(joined, spec)


class Rebatcher:
    """Cuts a stream of batches into batches of exactly ``size`` rows;
    ``flush()`` returns the rows left at the end of a pass as one shorter
    batch (what PopTorch yields with ``drop_last=False``)."""

    def __init__(self, size: int):
        self.size = size
        self.reset()

    def reset(self) -> None:
        self.pending: Optional[list] = None
        self.spec = None
        self.rows = 0

    def add(self, batch) -> list:
        leaves, spec, rows = _batch_tensors(batch, "Rebatching")
        if self.spec is None:
            self.spec = spec
        elif spec != self.spec:
            raise Error("Rebatching needs every batch to have the same "
                        "structure")
        if self.pending is None:
            self.pending = list(leaves)
        else:
            self.pending = [torch.cat([p, t]) for p, t in
                            zip(self.pending, leaves)]
        self.rows += rows
        out = []
        while self.rows >= self.size:
            full = [t[:self.size].clone() for t in self.pending]
            self.pending = [t[self.size:] for t in self.pending]
            self.rows -= self.size
            out.append(unflatten(full, self.spec))
        if self.rows == 0:
            self.pending = None
        return out

    def flush(self) -> Optional[Any]:
        batch = None
        if self.rows:
            batch = unflatten([t.clone() for t in self.pending], self.spec)
        self.reset()
        return batch
