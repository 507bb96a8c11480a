"""How the ONNX operator functions (onnx_ops.py, onnx_ops_more.py) take
their operands: torch tensors for graph values, numpy arrays for values
known at compile time."""

from __future__ import annotations

import numpy as np
import torch

from tilefx.errors import Error


def _t(x, like: torch.Tensor | None = None) -> torch.Tensor:
    """A tensor for an operand (static numpy values become constants)."""
    if isinstance(x, torch.Tensor):
        return x
    return torch.as_tensor(np.array(x, copy=True, order="C"))


def _ints(x) -> list[int]:
    """A compile-time list of ints (a shape, axes, ...) from a static operand."""
    if isinstance(x, torch.Tensor):
        raise Error("this ONNX operand must be known at compile time (a constant, an initializer "
                    "of integers or computed from shapes), but it depends on a graph input",
                    type="frontend")
    return [int(v) for v in np.asarray(x).reshape(-1)]


def _axis(a: int, rank: int) -> int:
    return a + rank if a < 0 else a
