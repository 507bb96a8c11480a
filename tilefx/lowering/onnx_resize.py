"""ONNX's Resize (and the deprecated Upsample's linear mode through it), with
onnx_ops.py's calling convention `(inputs, attributes, opset) -> output`.

Where torch's F.interpolate computes ONNX's coordinate transformation (nearest
with asymmetric + floor or half_pixel + round_prefer_ceil; linear and cubic with
half_pixel, pytorch_half_pixel or align_corners) it is used: the IR keeps
torch's interpolation op and its backward. Nearest and linear with the other
transformations (asymmetric, half_pixel_symmetric, tf_half_pixel_for_nn) and
nearest modes are separable static gathers: for each resized axis the source
coordinate of every output position is computed at compile time (numpy, as
ONNX defines it), and the output is an index_select (nearest) or the blend of
the two neighbours (linear), the coordinate clamped to the axis as onnxruntime
clamps it. The gathers also take the cases where torch would compute another
output size (onnxruntime's floor(input x scale) is a float32 product: 5 x 1.8
is 9) and Resize-10's nearest, which onnxruntime floors on a growing axis and
rounds up on a shrinking one.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from tilefx.errors import Error
from tilefx.lowering.onnx_values import _ints, _t

# coordinate transformations the gathers compute (tf_crop_and_resize needs the roi)
_GATHER_CTMS = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "half_pixel_symmetric",
                "tf_half_pixel_for_nn")
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
# Resize-10's nearest (no nearest_mode yet), as onnxruntime runs it: floor when an axis
# grows, ceil when it shrinks
_SIMPLE = "simple"


def resize(ins, at, v):
    """Resize over the spatial dimensions (see the module docstring); other
    combinations are a clear error."""
    x = _t(ins[0])
    if v < 11:
        scales_arg, sizes_arg = ins[1], None
    else:
        scales_arg = ins[2] if len(ins) > 2 else None
        sizes_arg = ins[3] if len(ins) > 3 else None
    if isinstance(scales_arg, torch.Tensor) or isinstance(sizes_arg, torch.Tensor):
        raise Error("Resize scales and sizes must be known at compile time", type="frontend")
    sizes = _ints(sizes_arg) if sizes_arg is not None and np.asarray(sizes_arg).size else None
    scales = [float(s) for s in np.asarray(scales_arg).reshape(-1)] \
        if scales_arg is not None and np.asarray(scales_arg).size and sizes is None else None
    if "axes" in at:
        raise Error("Resize with axes is not supported", type="frontend")
    if sizes is not None and at.get("keep_aspect_ratio_policy", "stretch") != "stretch":
        raise Error("Resize with keep_aspect_ratio_policy other than stretch is not supported",
                    type="frontend")
    spatial = x.dim() - 2
    lead = sizes[:2] if sizes is not None else scales[:2] if scales is not None else None
    if lead is None:
        raise Error("Resize needs scales or sizes", type="frontend")
    if (sizes is not None and list(lead) != list(x.shape[:2])) or (scales is not None and lead != [1.0, 1.0]):
        raise Error("Resize of the batch or channel dimension is not supported", type="frontend")
    kw = {"size": sizes[2:]} if sizes is not None else {"scale_factor": scales[2:]}
    mode = at.get("mode", "nearest")
    ctm = at.get("coordinate_transformation_mode", "half_pixel" if v >= 11 else "asymmetric")
    if at.get("antialias", 0):
        raise Error("Resize with antialias is not supported", type="frontend")
    # the output size is floor(input x scale) with the product in float32 (onnxruntime's); where
    # torch's (in float64) differs, the gathers compute it with the scale as given
    off = scales is not None and any(_out_size(n, s) != int(np.floor(n * s))
                                     for n, s in zip(x.shape[2:], scales[2:]))
    if mode == "nearest":
        nearest = at.get("nearest_mode", "round_prefer_floor" if v >= 11 else _SIMPLE)
        down = scales is not None and any(s < 1 for s in scales[2:])
        if (off or (nearest == _SIMPLE and down)) and nearest in (*_NEAREST_MODES, _SIMPLE):
            return _gathered(x, sizes, scales, "nearest", ctm, nearest)
        if ctm == "asymmetric" and (nearest == "floor" or v < 11):
            return F.interpolate(x, mode="nearest", **kw)
        if ctm in ("half_pixel", "pytorch_half_pixel") and nearest == "round_prefer_ceil":
            return F.interpolate(x, mode="nearest-exact", **kw)
        if nearest not in _NEAREST_MODES:
            raise Error(f"Resize nearest_mode {nearest!r} is not an ONNX value ({', '.join(_NEAREST_MODES)})",
                        type="frontend")
        return _gathered(x, sizes, scales, "nearest", ctm, nearest)
    torch_mode = {("linear", 1): "linear", ("linear", 2): "bilinear", ("linear", 3): "trilinear",
                  ("cubic", 2): "bicubic"}.get((mode, spatial))
    if torch_mode is None:
        raise Error(f"Resize mode {mode!r} over {spatial} spatial dimension(s) is not supported",
                    type="frontend")
    if mode == "cubic" and (at.get("cubic_coeff_a", -0.75) != -0.75 or at.get("exclude_outside", 0)):
        raise Error("Resize cubic needs cubic_coeff_a=-0.75 and exclude_outside=0 (torch's bicubic)",
                    type="frontend")
    if off and mode == "linear":
        return _gathered(x, sizes, scales, "linear", ctm, None)
    if ctm in ("half_pixel", "pytorch_half_pixel"):
        return F.interpolate(x, mode=torch_mode, align_corners=False, **kw)
    if ctm == "align_corners":
        return F.interpolate(x, mode=torch_mode, align_corners=True, **kw)
    if mode == "linear":
        return _gathered(x, sizes, scales, "linear", ctm, None)
    raise Error(f"Resize {mode} with coordinate_transformation_mode={ctm} is not supported "
                "(supported: half_pixel, pytorch_half_pixel, align_corners)", type="frontend")


def _out_size(n_in: int, scale: float) -> int:
    """floor(input x scale) with the product in float32, as onnxruntime computes it (a
    9 / 5 scale is 1.7999999523 in float32: times 5 it rounds to 9, not 8.99...)."""
    return int(np.floor(np.float32(n_in) * np.float32(scale)))


def _source(ctm: str, n_in: int, n_out: int, scale: float) -> np.ndarray:
    """The input coordinate of each output position along one axis (ONNX's
    coordinate_transformation_mode), in float64."""
    i = np.arange(n_out, dtype=np.float64)
    if ctm == "half_pixel":
        return (i + 0.5) / scale - 0.5
    if ctm == "pytorch_half_pixel":
        return (i + 0.5) / scale - 0.5 if n_out > 1 else np.zeros(n_out)
    if ctm == "align_corners":
        return i * (n_in - 1) / (n_out - 1) if n_out > 1 else np.zeros(n_out)
    if ctm == "asymmetric":
        return i / scale
    if ctm == "half_pixel_symmetric":
        adjustment = n_out / (scale * n_in)
        offset = n_in / 2 * (1 - adjustment)
        return offset + (i + 0.5) / scale - 0.5
    if ctm == "tf_half_pixel_for_nn":
        return (i + 0.5) / scale
    raise Error(f"Resize coordinate_transformation_mode {ctm!r} is not supported "
                f"(supported: {', '.join(_GATHER_CTMS)})", type="frontend")


def _gathered(x: torch.Tensor, sizes, scales, mode: str, ctm: str, nearest: str | None) -> torch.Tensor:
    """Nearest or linear resize axis by axis with compile-time indices and weights."""
    if mode == "linear" and ctm == "tf_half_pixel_for_nn":
        raise Error("Resize linear with coordinate_transformation_mode=tf_half_pixel_for_nn is not an "
                    "ONNX combination (it is for nearest)", type="frontend")
    for axis in range(2, x.dim()):
        n_in = x.shape[axis]
        if sizes is not None:
            n_out, scale = int(sizes[axis]), int(sizes[axis]) / n_in
        else:
            scale = scales[axis]
            n_out = _out_size(n_in, scale)
        if n_out == n_in and scale == 1.0:
            continue
        src = _source(ctm, n_in, n_out, scale)
        if mode == "nearest":
            rule = ("ceil" if scale < 1 else "floor") if nearest == _SIMPLE else nearest
            rounded = {"round_prefer_floor": np.ceil(src - 0.5), "round_prefer_ceil": np.floor(src + 0.5),
                       "floor": np.floor(src), "ceil": np.ceil(src)}[rule]
            index = np.clip(rounded, 0, n_in - 1).astype(np.int64)
            x = x.index_select(axis, torch.from_numpy(index))
            continue
        src = np.clip(src, 0, n_in - 1)
        lo = np.floor(src).astype(np.int64)
        hi = np.minimum(lo + 1, n_in - 1)
        frac = (src - lo).reshape([n_out] + [1] * (x.dim() - axis - 1))
        w = torch.from_numpy(frac).to(x.dtype)
        a, b = x.index_select(axis, torch.from_numpy(lo)), x.index_select(axis, torch.from_numpy(hi))
        x = a + (b - a) * w
    return x
