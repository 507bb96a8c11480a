"""The ONNX operators that converters and exporters other than torch.onnx
write (older exporters, TensorFlow converters, quantised or newer-opset
models), as torch functions with onnx_ops.py's calling convention
`(inputs, attributes, opset) -> outputs`: Upsample, LpPool and
GlobalLpPool, CumProd, ReverseSequence, RMSNormalization, QuantizeLinear
and DequantizeLinear (simulated in float, as a quantisation-aware graph),
MaxUnpool, Col2Im, AffineGrid, CenterCropPad, Bernoulli, Attention (in
onnx_attention.py); and PopART's Subsample (ai.graphcore,
`GRAPHCORE_OPS`)."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from tilefx import limits
from tilefx.errors import Error
from tilefx.lowering.onnx_attention import attention
from tilefx.lowering.onnx_resize import resize
from tilefx.lowering.onnx_values import _axis, _ints, _pads, _symmetric, _t, _torch_dtype


def constant_of_shape(ins, at, v):
    """ONNX ConstantOfShape, evaluated at compile time: its size is checked
    against limits.TENSOR_BYTES before the array is made."""
    value = at.get("value")
    arr = np.asarray(value if value is not None else np.zeros(1, np.float32))
    shape = _ints(ins[0])
    limits.TENSOR_BYTES.check(math.prod(shape) * arr.dtype.itemsize, f"ConstantOfShape of shape {shape}")
    return np.full(shape, arr.reshape(-1)[0], dtype=arr.dtype)


def _upsample(ins, at, v):
    """The deprecated Upsample (opsets 7-9): scales per dimension, as an
    attribute (7) or a compile-time input (9); nearest or linear."""
    x = _t(ins[0])
    scales = [float(s) for s in (at["scales"] if v < 9 and "scales" in at else np.asarray(ins[1]).reshape(-1))]
    if len(scales) != x.dim() or scales[:2] != [1.0, 1.0]:
        raise Error(f"Upsample: scales {scales} must have one value per dimension, 1 for batch and "
                    "channels", type="frontend")
    mode = at.get("mode", "nearest")
    if isinstance(mode, bytes):
        mode = mode.decode()
    if mode not in ("nearest", "linear"):
        raise Error(f"Upsample mode {mode!r} is not an ONNX value (nearest, linear)", type="frontend")
    return resize([x, None, np.asarray(scales, np.float32)],
                  {"mode": mode, "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}, 13)


def _lp_pool(ins, at, v):
    x = _t(ins[0])
    k = list(at["kernel_shape"])
    n, p = len(k), float(at.get("p", 2))
    begin, end = _pads(at, n, x, k)
    xp = _symmetric(x.abs().pow(p), begin, end)[0]
    fn = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[n]
    if at.get("dilations", [1] * n) != [1] * n:
        raise Error("LpPool with dilations is not supported", type="frontend")
    pooled = fn(xp, k, stride=at.get("strides", [1] * n), ceil_mode=bool(at.get("ceil_mode", 0)),
                count_include_pad=True)
    return (pooled * float(np.prod(k))).pow(1.0 / p)


def _global_lp_pool(ins, at, v):
    x, p = _t(ins[0]), float(at.get("p", 2))
    return x.abs().pow(p).sum(dim=tuple(range(2, x.dim())), keepdim=True).pow(1.0 / p)


def _cum_prod(ins, at, v):
    x = _t(ins[0])
    axis = _axis(_ints(ins[1])[0], x.dim())
    if at.get("reverse", 0):
        x = x.flip(axis)
    if at.get("exclusive", 0):  # shift by one along the axis, a 1 first
        ones = torch.ones_like(x.narrow(axis, 0, 1))
        x = torch.cat([ones, x.narrow(axis, 0, x.shape[axis] - 1)], axis)
    y = torch.cumprod(x, axis)
    return y.flip(axis) if at.get("reverse", 0) else y


def _reverse_sequence(ins, at, v):
    """Each batch entry's first `sequence_lens[b]` time steps reversed, the rest kept."""
    x, lens = _t(ins[0]), _t(ins[1]).to(torch.int64)
    b_axis, t_axis = at.get("batch_axis", 1), at.get("time_axis", 0)
    T = x.shape[t_axis]
    t = torch.arange(T).reshape(T, 1)
    idx = torch.where(t < lens.reshape(1, -1), lens.reshape(1, -1) - 1 - t, t)  # [T, B]
    if (t_axis, b_axis) == (1, 0):
        idx = idx.t()
    idx = idx.reshape(idx.shape + (1,) * (x.dim() - 2)).expand(x.shape)
    return torch.gather(x, t_axis, idx)


def _rms_norm(ins, at, v):
    x = _t(ins[0])
    axis = _axis(at.get("axis", -1), x.dim())
    dims = tuple(range(axis, x.dim()))
    y = x * torch.rsqrt(x.float().pow(2).mean(dim=dims, keepdim=True) + at.get("epsilon", 1e-5)).to(x.dtype)
    return y * _t(ins[1]) if len(ins) > 1 and ins[1] is not None else y


def _per_axis(param: torch.Tensor, x: torch.Tensor, axis: int) -> torch.Tensor:
    """A per-tensor (0-d / 1-element) or per-axis (1-d) scale or zero point, broadcast over x."""
    if param.dim() == 0 or param.numel() == 1 and x.shape[axis] != 1:
        return param.reshape(())
    if param.dim() != 1 or param.shape[0] != x.shape[axis]:
        raise Error(f"quantisation parameter of shape {list(param.shape)} fits neither the tensor nor "
                    f"axis {axis} (size {x.shape[axis]}); blocked quantisation is not supported",
                    type="frontend")
    shape = [1] * x.dim()
    shape[axis] = -1
    return param.reshape(shape)


def _dequantize(ins, at, v):
    x = _t(ins[0])
    axis = _axis(at.get("axis", 1), max(x.dim(), 1))
    scale = _per_axis(_t(ins[1]), x, axis)
    y = x.to(scale.dtype)
    if len(ins) > 2 and ins[2] is not None:
        y = y - _per_axis(_t(ins[2]), x, axis).to(scale.dtype)
    return y * scale


_INT_RANGES = {torch.uint8: (0, 255), torch.int8: (-128, 127), torch.int16: (-32768, 32767),
               torch.int32: (-2**31, 2**31 - 1)}


def _quantize(ins, at, v):
    x = _t(ins[0])
    axis = _axis(at.get("axis", 1), max(x.dim(), 1))
    scale = _per_axis(_t(ins[1]), x, axis)
    zp = _t(ins[2]) if len(ins) > 2 and ins[2] is not None else None
    out_type = zp.dtype if zp is not None else (_torch_dtype(at["output_dtype"]) if at.get("output_dtype")
                                                 else torch.uint8)
    if out_type not in _INT_RANGES:
        raise Error(f"QuantizeLinear to {out_type} is not supported (int8, uint8, int16, int32)",
                    type="frontend")
    lo, hi = _INT_RANGES[out_type]
    y = torch.round(x / scale)  # half to even, as ONNX
    if zp is not None:
        y = y + _per_axis(zp, x, axis).to(y.dtype)
    return torch.clamp(y, lo, hi).to(out_type)


def _max_unpool(ins, at, v):
    """Values put back at MaxPool's flat indices (over the whole N, C, spatial tensor)."""
    x, idx = _t(ins[0]), _t(ins[1]).to(torch.int64)
    k = list(at["kernel_shape"])
    n = len(k)
    strides, pads = at.get("strides", [1] * n), at.get("pads", [0] * (2 * n))
    if len(ins) > 2 and ins[2] is not None:
        shape = _ints(ins[2])
    else:
        shape = list(x.shape[:2]) + [(x.shape[2 + i] - 1) * strides[i] + k[i] - pads[i] - pads[n + i]
                                     for i in range(n)]
    flat = torch.zeros(int(np.prod(shape)), dtype=x.dtype).scatter(0, idx.reshape(-1), x.reshape(-1))
    return flat.reshape(shape)


def _col2im(ins, at, v):
    x = _t(ins[0])
    image, block = _ints(ins[1]), _ints(ins[2])
    n = len(image)
    if n != 2:
        raise Error(f"Col2Im over {n} spatial dimensions is not supported (2 are)", type="frontend")
    pads = at.get("pads", [0] * 4)
    if pads[:2] != pads[2:]:
        raise Error("Col2Im with asymmetric pads is not supported", type="frontend")
    return F.fold(x, image, block, dilation=at.get("dilations", [1, 1]), padding=pads[:2],
                  stride=at.get("strides", [1, 1]))


def _affine_grid(ins, at, v):
    theta, size = _t(ins[0]), _ints(ins[1])
    return F.affine_grid(theta, size, align_corners=bool(at.get("align_corners", 0)))


def _center_crop_pad(ins, at, v):
    x, shape = _t(ins[0]), _ints(ins[1])
    axes = [_axis(a, x.dim()) for a in at.get("axes", range(x.dim()))]
    if len(axes) != len(shape):
        raise Error(f"CenterCropPad: {len(shape)} sizes for {len(axes)} axes", type="frontend")
    for a, want in zip(axes, shape):
        have = x.shape[a]
        if want < have:
            x = x.narrow(a, (have - want) // 2, want)
        elif want > have:
            before = (want - have) // 2
            pad = [0, 0] * (x.dim() - 1 - a) + [before, want - have - before]
            x = F.pad(x, pad)
    return x


def _bernoulli(ins, at, v):
    p = _t(ins[0])
    dtype = _torch_dtype(at["dtype"]) if "dtype" in at else p.dtype
    return torch.bernoulli(p).to(dtype)


def _subsample(ins, at, v):
    """PopART's Subsample: every strides[d]-th element along each dimension, from the first."""
    x = _t(ins[0])
    strides = [int(s) for s in at.get("strides", [])]
    if len(strides) != x.dim() or any(s < 1 for s in strides):
        raise Error(f"Subsample: strides {strides} must hold one positive stride per dimension of the "
                    f"rank-{x.dim()} input", type="frontend")
    return x[tuple(slice(None, None, s) for s in strides)]


GRAPHCORE_OPS = {"Subsample": _subsample}

OPS = {
    "Upsample": _upsample, "LpPool": _lp_pool, "GlobalLpPool": _global_lp_pool, "CumProd": _cum_prod,
    "ReverseSequence": _reverse_sequence, "RMSNormalization": _rms_norm,
    "DequantizeLinear": _dequantize, "QuantizeLinear": _quantize, "MaxUnpool": _max_unpool,
    "Col2Im": _col2im, "AffineGrid": _affine_grid, "CenterCropPad": _center_crop_pad,
    "Bernoulli": _bernoulli, "Attention": attention,
}
