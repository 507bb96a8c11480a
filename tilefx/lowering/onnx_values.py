"""How the ONNX operator functions (onnx_ops.py, onnx_converter_ops.py,
onnx_attention.py) take their operands: torch tensors for graph values,
numpy arrays for values known at compile time; ONNX element types as torch
dtypes; the padding attributes (`pads`, `auto_pad`) of convolutions and
pooling."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from onnx.helper import tensor_dtype_to_np_dtype

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


def _torch_dtype(onnx_type: int) -> torch.dtype:
    return torch.from_numpy(np.zeros(0, tensor_dtype_to_np_dtype(onnx_type))).dtype


def _pads(at, n: int, x: torch.Tensor | None = None, kernel=None) -> tuple[list[int], list[int]]:
    """(begin, end) padding of the n spatial dimensions: explicit `pads`, or the
    padding `auto_pad` SAME_UPPER / SAME_LOWER implies for x's static shape
    (output = ceil(input / stride); the odd element at the end for UPPER)."""
    auto = at.get("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER") and x is not None and kernel is not None:
        stride, dil = at.get("strides", [1] * n), at.get("dilations", [1] * n)
        total = []
        for i in range(n):
            size = x.shape[2 + i]
            out = -(-size // stride[i])
            total.append(max((out - 1) * stride[i] + (kernel[i] - 1) * dil[i] + 1 - size, 0))
        small, big = [t // 2 for t in total], [t - t // 2 for t in total]
        return (small, big) if auto == "SAME_UPPER" else (big, small)
    if auto not in ("NOTSET", "VALID"):
        raise Error(f"auto_pad={auto} is not an ONNX value", type="frontend")
    if auto == "VALID":
        return [0] * n, [0] * n
    pads = list(at.get("pads", [0] * (2 * n)))
    if len(pads) != 2 * n:
        raise Error(f"pads has {len(pads)} values; {n} spatial dimensions need {2 * n} "
                    "(begin and end of each)", type="frontend")
    if min(pads, default=0) < 0:
        raise Error(f"pads {pads} has negative values", type="frontend")
    return pads[:n], pads[n:]


def _symmetric(x: torch.Tensor, begin, end, value=0.0):
    """Padding that torch's conv/pool arguments cannot express (begin != end)."""
    if begin == end:
        return x, begin
    flat = []
    for b, e in zip(reversed(begin), reversed(end)):
        flat += [b, e]
    return F.pad(x, flat, value=value), [0] * len(begin)
