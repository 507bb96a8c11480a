"""ONNX operators as torch functions: the semantics the ONNX frontend traces.

Each entry of `OPS` takes the node's inputs (torch tensors, or numpy arrays
for values known at compile time such as shapes, axes and constants; None for
an omitted optional input), its attributes as a dict and the opset of its
domain, and returns the node's outputs (a tensor or a tuple). Tracing these
functions through the torch frontend gives the graph IR of the ONNX graph and,
for training, its backward (see from_onnx.py).

Operators of the `ai.graphcore` domain are PopART's (`IdentityLoss`, `L1`,
`Nll`, ...); their reduction attribute is PopART's ReductionType (0 Sum,
1 Mean, 2 NoReduction).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from tilefx.errors import Error
from tilefx.lowering import onnx_control_flow, onnx_converter_ops, onnx_recurrent
from tilefx.lowering.ipu_torch_ops import print_tensor
from tilefx.lowering.onnx_resize import resize
from tilefx.lowering.onnx_values import _axis, _ints, _pads, _symmetric, _t

GRAPHCORE_DOMAIN = "ai.graphcore"


def _binary(fn):
    return lambda ins, at, v: fn(_t(ins[0]), _t(ins[1]))


def _unary(fn):
    return lambda ins, at, v: fn(_t(ins[0]))


def _div(ins, at, v):
    a, b = _t(ins[0]), _t(ins[1])
    if not a.is_floating_point():
        return torch.div(a, b, rounding_mode="trunc")
    return a / b


def _gemm(ins, at, v):
    a, b = _t(ins[0]), _t(ins[1])
    if at.get("transA", 0):
        a = a.t()
    if at.get("transB", 0):
        b = b.t()
    y = (a @ b) * at.get("alpha", 1.0) if at.get("alpha", 1.0) != 1.0 else a @ b
    if len(ins) > 2 and ins[2] is not None:
        c = _t(ins[2])
        y = y + (c * at["beta"] if at.get("beta", 1.0) != 1.0 else c)
    return y


def _conv(ins, at, v):
    x, w = _t(ins[0]), _t(ins[1])
    b = _t(ins[2]) if len(ins) > 2 and ins[2] is not None else None
    n = w.dim() - 2
    begin, end = _pads(at, n, x, list(w.shape[2:]))
    x, pad = _symmetric(x, begin, end)
    fn = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[n]
    return fn(x, w, b, stride=at.get("strides", [1] * n), padding=pad,
              dilation=at.get("dilations", [1] * n), groups=at.get("group", 1))


def _maxpool(ins, at, v):
    x = _t(ins[0])
    k = at["kernel_shape"]
    n = len(k)
    begin, end = _pads(at, n, x, k)
    x, pad = _symmetric(x, begin, end, value=-math.inf)
    fn = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[n]
    want_indices = at.get("_num_outputs", 1) > 1
    if want_indices and begin != end:
        raise Error("MaxPool's Indices output with asymmetric pads is not supported", type="frontend")
    out = fn(x, k, stride=at.get("strides", [1] * n), padding=pad, dilation=at.get("dilations", [1] * n),
             ceil_mode=bool(at.get("ceil_mode", 0)), return_indices=want_indices)
    if not want_indices:
        return out
    # ONNX indexes the whole tensor (N, C, spatial...), row-major (or column-major
    # spatially with storage_order 1); torch indexes within each (n, c) plane
    y, idx = out
    spatial = list(x.shape[2:])
    if at.get("storage_order", 0):
        if n != 2:
            raise Error("MaxPool storage_order=1 is only defined for 2-d pooling", type="frontend")
        h, w = idx // spatial[1], idx % spatial[1]
        idx = w * spatial[0] + h
    plane = int(np.prod(spatial))
    nc = torch.arange(x.shape[0] * x.shape[1]).reshape(x.shape[0], x.shape[1], *([1] * n))
    return y, idx + nc * plane


def _avgpool(ins, at, v):
    x = _t(ins[0])
    k = at["kernel_shape"]
    n = len(k)
    if at.get("dilations", [1] * n) != [1] * n:
        raise Error("AveragePool with dilations is not supported", type="frontend")
    begin, end = _pads(at, n, x, k)
    fn = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[n]
    stride, ceil = at.get("strides", [1] * n), bool(at.get("ceil_mode", 0))
    include_pad = bool(at.get("count_include_pad", 0))
    if begin == end:
        return fn(x, k, stride=stride, padding=begin, ceil_mode=ceil, count_include_pad=include_pad)
    # asymmetric (e.g. auto_pad SAME_UPPER): pool the zero-padded input; without
    # count_include_pad, divide the window sums by the real elements in each window
    xp, _ = _symmetric(x, begin, end)
    if include_pad:
        return fn(xp, k, stride=stride, ceil_mode=ceil)
    ones, _ = _symmetric(torch.ones_like(x[:1, :1]), begin, end)
    return fn(xp, k, stride=stride, ceil_mode=ceil) / fn(ones, k, stride=stride, ceil_mode=ceil)


def _global_avgpool(ins, at, v):
    x = _t(ins[0])
    return x.mean(dim=tuple(range(2, x.dim())), keepdim=True)


def _batchnorm(ins, at, v, training: bool):
    x, scale, bias, mean, var = (_t(i) for i in ins[:5])
    eps = at.get("epsilon", 1e-5)
    # running statistics that are graph values derived from weights (the legacy
    # exporter shares equal initializers: running_var = Identity(bn.weight)) are no
    # weights: not differentiated, and not updated in place, as there is no buffer
    # to keep the update in (the normalisation in training uses the batch's anyway)
    mean, var = ((s.detach().clone() if training else s.detach()) if s.requires_grad else s
                 for s in (mean, var))
    if training:
        # ONNX: running = running * momentum + batch * (1 - momentum); torch the other way round
        return F.batch_norm(x, mean, var, scale, bias, training=True,
                            momentum=1.0 - at.get("momentum", 0.9), eps=eps)
    return F.batch_norm(x, mean, var, scale, bias, training=False, eps=eps)


def _layernorm(ins, at, v):
    x = _t(ins[0])
    axis = _axis(at.get("axis", -1), x.dim())
    shape = list(x.shape[axis:])
    w = _t(ins[1]) if len(ins) > 1 and ins[1] is not None else None
    b = _t(ins[2]) if len(ins) > 2 and ins[2] is not None else None
    if w is not None and list(w.shape) != shape:
        w = w.expand(shape)
    if b is not None and list(b.shape) != shape:
        b = b.expand(shape)
    return F.layer_norm(x, shape, w, b, eps=at.get("epsilon", 1e-5))


def _softmax(fn):
    def impl(ins, at, v):
        x = _t(ins[0])
        if v >= 13:
            return fn(x, dim=at.get("axis", -1))
        # opsets < 13: the input is coerced to 2-D at `axis`
        axis = _axis(at.get("axis", 1), x.dim())
        shape = x.shape
        return fn(x.reshape(int(np.prod(shape[:axis])), -1), dim=1).reshape(shape)
    return impl


def _reshape(ins, at, v):
    x = ins[0]
    shape = _ints(ins[1])
    if not at.get("allowzero", 0):
        shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    return _t(x).reshape(shape)


def _flatten(ins, at, v):
    x = _t(ins[0])
    axis = _axis(at.get("axis", 1), x.dim())
    return x.reshape(int(np.prod(x.shape[:axis])), -1)


def _transpose(ins, at, v):
    x = _t(ins[0])
    perm = at.get("perm", list(reversed(range(x.dim()))))
    return x.permute(*perm)


def _axes(ins, at, v, since: int, idx: int = 1):
    if v >= since:
        return _ints(ins[idx]) if len(ins) > idx and ins[idx] is not None else None
    return at.get("axes")


def _unsqueeze(ins, at, v):
    x = _t(ins[0])
    axes = _axes(ins, at, v, 13)
    rank = x.dim() + len(axes)
    for a in sorted(_axis(a, rank) for a in axes):
        x = x.unsqueeze(a)
    return x


def _squeeze(ins, at, v):
    x = _t(ins[0])
    axes = _axes(ins, at, v, 13)
    if axes is None:
        axes = [i for i, s in enumerate(x.shape) if s == 1]
    for a in sorted((_axis(a, x.dim()) for a in axes), reverse=True):
        x = x.squeeze(a)
    return x


def _concat(ins, at, v):
    xs = [_t(i) for i in ins]
    return torch.cat(xs, dim=at["axis"])


def _slice(ins, at, v):
    x = _t(ins[0])
    if v < 10:
        starts, ends = at["starts"], at["ends"]
        axes, steps = at.get("axes"), None
    else:
        starts, ends = _ints(ins[1]), _ints(ins[2])
        axes = _ints(ins[3]) if len(ins) > 3 and ins[3] is not None else None
        steps = _ints(ins[4]) if len(ins) > 4 and ins[4] is not None else None
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    index: list = [slice(None)] * x.dim()
    flips = []
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = _axis(a, x.dim())
        n = x.shape[a]
        if st > 0:
            s = max(0, min(n, s + n if s < 0 else s))
            e = max(0, min(n, e + n if e < 0 else e))
            index[a] = slice(s, max(s, e), st)
        else:  # negative steps: slice the flipped axis
            s = max(-1, min(n - 1, s + n if s < 0 else s))
            e = max(-1, min(n - 1, e + n if e < 0 else e))
            index[a] = slice(n - 1 - s, max(n - 1 - s, n - 1 - e), -st)
            flips.append(a)
    if flips:
        x = torch.flip(x, flips)
    return x[tuple(index)]


def _gather(ins, at, v):
    x, idx = _t(ins[0]), ins[1]
    axis = _axis(at.get("axis", 0), x.dim())
    if isinstance(idx, np.ndarray):
        idx = np.where(idx < 0, idx + x.shape[axis], idx).astype(np.int64)
        if idx.ndim == 0:
            return x.select(axis, int(idx))
        idx_t = _t(idx)
    else:
        idx_t = idx.to(torch.int64)
        idx_t = torch.where(idx_t < 0, idx_t + x.shape[axis], idx_t)
    if axis == 0 and x.dim() == 2 and x.is_floating_point():
        return F.embedding(idx_t, x)
    return x[(slice(None),) * axis + (idx_t,)]


def _split(ins, at, v):
    x = _t(ins[0])
    axis = at.get("axis", 0)
    if v >= 13 and len(ins) > 1 and ins[1] is not None:
        sizes = _ints(ins[1])
    elif "split" in at:
        sizes = at["split"]
    else:
        n = at.get("num_outputs") or at["_num_outputs"]
        size = -(-x.shape[axis] // n)
        sizes = [min(size, x.shape[axis] - i * size) for i in range(n)]
    return tuple(torch.split(x, sizes, dim=axis))


def _reduce(fn):
    def impl(ins, at, v):
        x = _t(ins[0])
        since = 13 if fn is torch.sum else 18
        axes_arg = ins[1] if len(ins) > 1 else None
        if v < since and axes_arg is not None:
            since = 0  # a newer form in an older-labelled model
        axes = _axes(ins, at, v, since)
        keep = bool(at.get("keepdims", 1))
        if not axes:
            if at.get("noop_with_empty_axes", 0):
                return x
            axes = list(range(x.dim()))
        if x.is_floating_point() or x.dtype == torch.bool:
            return fn(x, dim=axes, keepdim=keep)
        if fn is torch.mean:  # as onnxruntime: the sum (in int64) divided with truncation
            count = int(np.prod([x.shape[_axis(a, x.dim())] for a in axes], dtype=np.int64))
            total = torch.sum(x, dim=axes, keepdim=keep)
            return torch.div(total, max(count, 1), rounding_mode="trunc").to(x.dtype)
        # ONNX's reductions keep the input's type; torch's sums and products of
        # integers are int64
        y = fn(x, dim=axes, keepdim=keep)
        return y.to(x.dtype) if y.dtype == torch.int64 else y
    return impl


def _cast(ins, at, v):
    from onnx.helper import tensor_dtype_to_np_dtype

    x = _t(ins[0])
    return x.to(torch.from_numpy(np.zeros(0, tensor_dtype_to_np_dtype(at["to"]))).dtype)


def _expand(ins, at, v):
    x = _t(ins[0])
    shape = _ints(ins[1])
    full = torch.broadcast_shapes(tuple(x.shape), tuple(shape))
    return x.expand(full)


def _clip(ins, at, v):
    x = _t(ins[0])
    if v < 11:
        lo, hi = at.get("min"), at.get("max")
    else:
        lo = ins[1] if len(ins) > 1 else None
        hi = ins[2] if len(ins) > 2 else None
        lo = None if lo is None else _scalar(lo) if not isinstance(lo, torch.Tensor) else lo
        hi = None if hi is None else _scalar(hi) if not isinstance(hi, torch.Tensor) else hi
    if isinstance(lo, torch.Tensor) or isinstance(hi, torch.Tensor):
        return torch.clamp(x, _t(lo) if lo is not None else None, _t(hi) if hi is not None else None)
    return torch.clamp(x, lo, hi)


def _scalar(x, what: str = "this operand"):
    """A one-element static operand (a 0-d or [1] tensor) as a Python number of its
    own type (an int stays an int: int64 bounds are exact)."""
    if isinstance(x, torch.Tensor):
        raise Error(f"{what} must be known at compile time (a constant or an initializer), but it "
                    "depends on a graph input", type="frontend")
    a = np.asarray(x)
    if a.size != 1:
        raise Error(f"expected a one-element value, got shape {a.shape}", type="frontend")
    return a.reshape(-1)[0].item()


def _where(ins, at, v):
    return torch.where(_t(ins[0]), _t(ins[1]), _t(ins[2]))


def _pad(ins, at, v):
    """Pad: ONNX's pads are the begins of every padded axis, then their ends
    (axes: opset 18's optional input, default every axis). Constant padding is
    torch's F.pad (negative pads crop); reflect, edge and wrap gather each padded
    axis with a static index (numpy's np.pad of the positions gives it), so any
    axis of any rank pads, where torch's reflect/replicate take the trailing
    dimensions of 2- to 5-d inputs only. A constant_value computed from graph
    inputs (a runtime value: the shapes do not depend on it) fills the padding
    through a static mask of it."""
    x = _t(ins[0])
    mode = at.get("mode", "constant")
    if v < 11:
        pads, value = list(at["pads"]), at.get("value", 0.0)
    else:
        pads = _ints(ins[1])
        cv = ins[2] if len(ins) > 2 else None
        empty = cv is None or (not isinstance(cv, torch.Tensor) and np.asarray(cv).size == 0)
        if isinstance(cv, torch.Tensor) and cv.numel() != 1:
            raise Error(f"Pad's constant_value must have one element, got shape {tuple(cv.shape)}",
                        type="frontend")
        value = 0 if empty else cv.reshape(()).to(x.dtype) if isinstance(cv, torch.Tensor) else \
            _scalar(cv, "Pad's constant_value")
    n = x.dim()
    axes = _ints(ins[3]) if v >= 18 and len(ins) > 3 and ins[3] is not None else list(range(n))
    axes = [_axis(a, n) for a in axes]
    if len(pads) != 2 * len(axes):
        raise Error(f"Pad: pads has {len(pads)} values; {len(axes)} padded axes need {2 * len(axes)} "
                    "(begin and end of each)", type="frontend")
    begin, end = [0] * n, [0] * n
    for i, a in enumerate(axes):
        begin[a], end[a] = pads[i], pads[i + len(axes)]
    if mode == "constant":
        flat = []
        for i in reversed(range(n)):
            flat += [begin[i], end[i]]
        if not isinstance(value, torch.Tensor):
            return F.pad(x, flat, value=value)
        # where the input lands (padding x's positions with False, cropping as x is)
        inside = torch.from_numpy(np.ones(tuple(x.shape), np.bool_))
        return torch.where(F.pad(inside, flat, value=False), F.pad(x, flat, value=0), value)
    if mode not in ("reflect", "edge", "wrap"):
        raise Error(f"Pad mode {mode!r} is not an ONNX value (constant, reflect, edge, wrap)",
                    type="frontend")
    for a in range(n):
        b, e = begin[a], end[a]
        if b < 0 or e < 0:  # negative pads remove elements first
            x = x.narrow(a, max(-b, 0), x.shape[a] - max(-b, 0) - max(-e, 0))
            b, e = max(b, 0), max(e, 0)
        if b == 0 and e == 0:
            continue
        if (mode == "reflect" and x.shape[a] < 2) or x.shape[a] == 0:
            raise Error(f"Pad {mode}: axis {a} has {x.shape[a]} element(s), too few to pad from",
                        type="frontend")
        if mode == "reflect" and max(b, e) >= x.shape[a]:
            raise Error(f"Pad reflect: the pads of axis {a} ({b}, {e}) must be smaller than its size "
                        f"{x.shape[a]}", type="frontend")
        index = np.pad(np.arange(x.shape[a]), (b, e), mode={"edge": "edge"}.get(mode, mode))
        x = x.index_select(a, torch.from_numpy(index.astype(np.int64)))
    return x


def _matmul(ins, at, v):
    return torch.matmul(_t(ins[0]), _t(ins[1]))


def _gelu(ins, at, v):
    return F.gelu(_t(ins[0]), approximate=at.get("approximate", "none"))


def _dropout(ins, at, v, training: bool):
    """Dropout: the ratio an attribute (< 12) or an input, known at compile time or
    computed from graph inputs (a runtime value: `_dropout_runtime`); outside
    training (or at ratio 0) the identity, with an all-True mask."""
    x = _t(ins[0])
    ratio = at.get("ratio", 0.5) if v < 12 else ins[1] if len(ins) > 1 and ins[1] is not None else 0.5
    if isinstance(ratio, torch.Tensor):
        if ratio.numel() != 1:
            raise Error(f"Dropout's ratio must have one element, got shape {tuple(ratio.shape)}",
                        type="frontend")
        if not training:
            ratio = 0.0
        else:
            return _dropout_runtime(x, ratio.reshape(()).to(x.dtype), at.get("_num_outputs", 1) > 1)
    elif v >= 12:
        ratio = float(_scalar(ratio, "Dropout's ratio"))
    if at.get("_num_outputs", 1) < 2:
        return F.dropout(x, ratio, training=training) if training and ratio > 0 else x
    # the mask output too: True where x is kept (everywhere without dropout); of
    # x's type before opset 10
    if not training or ratio == 0:
        return x, torch.ones_like(x, dtype=torch.bool if v >= 10 else x.dtype)
    if v < 10:
        y, keep = torch.native_dropout(x, ratio, True)
        return y, keep.to(x.dtype)
    # the op F.dropout traces to in training (the same draw), with its keep-mask
    return torch.native_dropout(x, ratio, True)


def _dropout_runtime(x: torch.Tensor, ratio: torch.Tensor, with_mask: bool):
    """Training dropout at a ratio the graph computes: each element kept with
    probability 1 - ratio (a Bernoulli draw from the session's random streams)
    and scaled by 1 / (1 - ratio), as torch's dropout."""
    keep = torch.bernoulli((1 - ratio).expand(x.shape)).to(torch.bool)
    y = torch.where(keep, x / (1 - ratio), torch.zeros((), dtype=x.dtype))
    return (y, keep) if with_mask else y  # (an input ratio: opset 12 or later, a bool mask)


def _reduction(x: torch.Tensor, reduction: int) -> torch.Tensor:
    if reduction == 0:
        return x.sum()
    if reduction == 1:
        return x.mean()
    return x


def _identityloss(ins, at, v):
    return _reduction(_t(ins[0]), at.get("reduction", 1))


def _l1loss(ins, at, v):
    return _reduction(_t(ins[0]).abs() * at.get("lambda", 1.0), at.get("reduction", 1))


def _nllloss(ins, at, v):
    probs, label = _t(ins[0]), _t(ins[1]).to(torch.int64)
    if tuple(label.shape) != tuple(probs.shape[:-1]):
        raise Error(f"Nll: the label has shape {tuple(label.shape)}, expected the probabilities' shape "
                    f"without the class dimension, {tuple(probs.shape[:-1])}", type="frontend")
    flat = probs.reshape(-1, probs.shape[-1])
    lab = label.reshape(-1)
    picked = flat.gather(1, lab.clamp(min=0).unsqueeze(1)).squeeze(1)
    # the log of the label's probability only: the others' gradient is 0, not 0 * (1/0)
    picked = -(picked if at.get("inputIsLogProbability", 0) else torch.log(picked))
    ignore = at.get("ignoreIndex")
    reduction = at.get("reduction", 1)
    if ignore is not None:
        keep = lab != ignore
        picked = torch.where(keep, picked, torch.zeros_like(picked))
        if reduction == 1:
            return picked.sum() / keep.sum().clamp(min=1).to(picked.dtype)
    out = _reduction(picked, reduction)
    return out if reduction != 2 else out.reshape(label.shape)


def _shape(ins, at, v):
    shape = np.asarray(ins[0].shape, dtype=np.int64)
    return shape[at.get("start", 0): at.get("end", len(shape))]


def _size(ins, at, v):
    """The element count: known from the static shape (an int64 scalar)."""
    return np.asarray(int(np.prod(ins[0].shape, dtype=np.int64)), dtype=np.int64)


def _instance_norm(ins, at, v):
    x = _t(ins[0])
    return F.instance_norm(x, weight=_t(ins[1]), bias=_t(ins[2]), eps=at.get("epsilon", 1e-5))


def _group_norm(ins, at, v):
    x = _t(ins[0])
    groups = at["num_groups"]
    scale, bias = _t(ins[1]), _t(ins[2])
    if scale.numel() != x.shape[1]:  # opset 18: one scale per group
        scale = scale.repeat_interleave(x.shape[1] // groups)
        bias = bias.repeat_interleave(x.shape[1] // groups)
    return F.group_norm(x, groups, scale, bias, eps=at.get("epsilon", 1e-5))


def _topk(ins, at, v):
    """ONNX TopK orders equal values lowest index first (largest and smallest);
    torch.topk leaves ties in any order: a stable sort, then the first k."""
    x = _t(ins[0])
    k = _ints(ins[1])[0] if v >= 10 else at["k"]
    axis = _axis(at.get("axis", -1), x.dim())
    if k > x.shape[axis] or k < 0:
        raise Error(f"TopK: k ({k}) must be between 0 and the size of axis {axis} ({x.shape[axis]})",
                    type="frontend")
    values, indices = torch.sort(x, dim=axis, descending=bool(at.get("largest", 1)), stable=True)
    return values.narrow(axis, 0, k), indices.narrow(axis, 0, k)


def _cumsum(ins, at, v):
    x = _t(ins[0])
    axis = _ints(ins[1])[0]
    if at.get("reverse", 0):
        x = torch.flip(x, [axis])
    y = torch.cumsum(x, axis, dtype=x.dtype)  # torch's integer cumsum is int64; ONNX keeps the type
    if at.get("exclusive", 0):
        y = y - x
    return torch.flip(y, [axis]) if at.get("reverse", 0) else y


def _trilu(ins, at, v):
    x = _t(ins[0])
    k = _ints(ins[1])[0] if len(ins) > 1 and ins[1] is not None else 0
    return torch.triu(x, k) if at.get("upper", 1) else torch.tril(x, k)


def _prelu(ins, at, v):
    x, slope = _t(ins[0]), _t(ins[1])
    return torch.where(x >= 0, x, x * slope)


def _conv_transpose(ins, at, v):
    """ConvTranspose: torch's call where the pads are symmetric, otherwise the full
    transposed convolution cropped (or padded) to ONNX's output size."""
    x, w = _t(ins[0]), _t(ins[1])
    b = _t(ins[2]) if len(ins) > 2 and ins[2] is not None else None
    n = w.dim() - 2
    stride, dil = at.get("strides", [1] * n), at.get("dilations", [1] * n)
    group = at.get("group", 1)
    kernel = list(w.shape[2:])
    out_pad = list(at.get("output_padding", [0] * n))
    auto = at.get("auto_pad", "NOTSET")
    full = [stride[i] * (x.shape[2 + i] - 1) + (kernel[i] - 1) * dil[i] + 1 for i in range(n)]
    if "output_shape" in at or auto in ("SAME_UPPER", "SAME_LOWER"):
        want = list(at["output_shape"])[-n:] if "output_shape" in at else \
            [x.shape[2 + i] * stride[i] for i in range(n)]
        total = [full[i] + out_pad[i] - want[i] for i in range(n)]
        small = [t // 2 for t in total]
        big = [t - t // 2 for t in total]
        begin, end = (small, big) if auto == "SAME_UPPER" else (big, small)
    elif auto in ("NOTSET", "VALID"):
        begin, end = _pads(at, n)
    else:
        raise Error(f"auto_pad={auto} is not an ONNX value", type="frontend")
    fn = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}[n]
    if begin == end and min(begin) >= 0 and all(p < max(s, d) for p, s, d in zip(out_pad, stride, dil)):
        return fn(x, w, b, stride=stride, padding=begin, output_padding=out_pad, groups=group, dilation=dil)
    y = fn(x, w, None, stride=stride, padding=0, groups=group, dilation=dil)
    crop = []
    for i in reversed(range(n)):
        crop += [-begin[i], -end[i] + out_pad[i]]
    y = F.pad(y, crop)
    return y if b is None else y + b.reshape([1, -1] + [1] * n)


def _index(idx, size: int) -> torch.Tensor:
    """Indices with ONNX's negative values counted from the end."""
    idx = _t(idx).to(torch.int64)
    return torch.where(idx < 0, idx + size, idx)


def _gather_elements(ins, at, v):
    x = _t(ins[0])
    axis = _axis(at.get("axis", 0), x.dim())
    return torch.gather(x, axis, _index(ins[1], x.shape[axis]))


_SCATTER_REDUCE = {"add": "sum", "mul": "prod", "max": "amax", "min": "amin"}


def _scatter_elements(ins, at, v):
    x, upd = _t(ins[0]), _t(ins[2])
    axis = _axis(at.get("axis", 0), x.dim())
    idx = _index(ins[1], x.shape[axis])
    red = at.get("reduction", "none")
    if red == "none":
        return torch.scatter(x, axis, idx, upd)
    if red not in _SCATTER_REDUCE:
        raise Error(f"ScatterElements reduction {red!r} is not an ONNX value", type="frontend")
    return torch.scatter_reduce(x, axis, idx, upd, _SCATTER_REDUCE[red], include_self=True)


def _nd_index(x: torch.Tensor, idx) -> tuple:
    idx = _t(idx).to(torch.int64)
    k = idx.shape[-1]
    return tuple(_index(idx[..., i], x.shape[i]) for i in range(k))


def _scatter_nd(ins, at, v):
    x, upd = _t(ins[0]), _t(ins[2])
    red = at.get("reduction", "none")
    if red not in ("none", "add"):
        raise Error(f"ScatterND reduction {red!r} is not supported (none, add)", type="frontend")
    return torch.index_put(x, _nd_index(x, ins[1]), upd, accumulate=red == "add")


def _gather_nd(ins, at, v):
    x = _t(ins[0])
    if at.get("batch_dims", 0):
        raise Error("GatherND with batch_dims > 0 is not supported", type="frontend")
    return x[_nd_index(x, ins[1])]


def _one_hot(ins, at, v):
    depth = int(np.asarray(ins[1]).reshape(-1)[0]) if not isinstance(ins[1], torch.Tensor) else None
    if depth is None:
        raise Error("OneHot depth must be known at compile time", type="frontend")
    values = _t(ins[2])
    idx = _index(ins[0], depth)
    hot = idx.unsqueeze(-1) == torch.arange(depth)
    out = torch.where(hot, values[1], values[0])
    axis = _axis(at.get("axis", -1), out.dim())
    return out.movedim(-1, axis)


def _depth_to_space(ins, at, v):
    x = _t(ins[0])
    bs, (n, c, h, w) = at["blocksize"], x.shape
    if at.get("mode", "DCR") == "DCR":
        y = x.reshape(n, bs, bs, c // (bs * bs), h, w).permute(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(n, c // (bs * bs), bs, bs, h, w).permute(0, 1, 4, 2, 5, 3)
    return y.reshape(n, c // (bs * bs), h * bs, w * bs)


def _space_to_depth(ins, at, v):
    x = _t(ins[0])
    bs, (n, c, h, w) = at["blocksize"], x.shape
    y = x.reshape(n, c, h // bs, bs, w // bs, bs).permute(0, 3, 5, 1, 2, 4)
    return y.reshape(n, c * bs * bs, h // bs, w // bs)


def _hardmax(ins, at, v):
    x = _t(ins[0])
    if v < 13:  # the input coerced to 2D at `axis` (default 1)
        axis = _axis(at.get("axis", 1), x.dim())
        flat = x.reshape(int(np.prod(x.shape[:axis], dtype=np.int64)), -1)
        return _one_hot_of(flat.argmax(-1), flat.shape[-1], x.dtype).reshape(x.shape)
    axis = _axis(at.get("axis", -1), x.dim())
    return _one_hot_of(x.argmax(axis), x.shape[axis], x.dtype).movedim(-1, axis)


def _one_hot_of(idx: torch.Tensor, n: int, dtype) -> torch.Tensor:
    """One-hot along a new last dimension (F.one_hot asserts on the data at run time)."""
    return (idx.unsqueeze(-1) == torch.arange(n)).to(dtype)


def _arg_extreme(fn):
    def impl(ins, at, v):
        x = _t(ins[0])
        axis = _axis(at.get("axis", 0), x.dim())
        keep = bool(at.get("keepdims", 1))
        if at.get("select_last_index", 0):  # the last of equal extremes: search the flipped tensor
            r = x.shape[axis] - 1 - fn(torch.flip(x, [axis]), dim=axis, keepdim=keep)
            return r
        return fn(x, dim=axis, keepdim=keep)
    return impl


def _is_inf(ins, at, v):
    x = _t(ins[0])
    pos, neg = at.get("detect_positive", 1), at.get("detect_negative", 1)
    if pos and neg:
        return torch.isinf(x)
    if pos:
        return torch.isposinf(x)
    if neg:
        return torch.isneginf(x)
    return torch.zeros_like(x, dtype=torch.bool)


def _shrink(ins, at, v):
    x = _t(ins[0])
    lambd, bias = at.get("lambd", 0.5), at.get("bias", 0.0)
    return torch.where(x < -lambd, x + bias, torch.where(x > lambd, x - bias, torch.zeros_like(x)))


def _lp_norm(ins, at, v):
    x = _t(ins[0])
    p, axis = at.get("p", 2), at.get("axis", -1)
    norm = x.abs().sum(axis, keepdim=True) if p == 1 else torch.sqrt((x * x).sum(axis, keepdim=True))
    return x / norm


def _mvn(ins, at, v):
    x = _t(ins[0])
    axes = at.get("axes", [0, 2, 3])
    mean = x.mean(dim=axes, keepdim=True)
    var = (x * x).mean(dim=axes, keepdim=True) - mean * mean
    return (x - mean) / (torch.sqrt(var) + 1e-9)


def _eye_like(ins, at, v):
    x = _t(ins[0])
    from onnx.helper import tensor_dtype_to_np_dtype

    dtype = torch.from_numpy(np.zeros(0, tensor_dtype_to_np_dtype(at["dtype"]))).dtype \
        if "dtype" in at else x.dtype
    n, m = x.shape
    return (torch.arange(n).unsqueeze(1) + at.get("k", 0) == torch.arange(m).unsqueeze(0)).to(dtype)


def _grid_sample(ins, at, v):
    modes = {"bilinear": "bilinear", "linear": "bilinear", "nearest": "nearest",
             "bicubic": "bicubic", "cubic": "bicubic"}
    mode = at.get("mode", "linear" if v >= 20 else "bilinear")
    if mode not in modes:
        raise Error(f"GridSample mode {mode!r} is not an ONNX value", type="frontend")
    return F.grid_sample(_t(ins[0]), _t(ins[1]), mode=modes[mode],
                         padding_mode=at.get("padding_mode", "zeros"),
                         align_corners=bool(at.get("align_corners", 0)))


def _nll(log_prob, target, weight, at):
    ignore = at.get("ignore_index")
    return F.nll_loss(log_prob, _t(target).to(torch.int64), weight=None if weight is None else _t(weight),
                      ignore_index=-100 if ignore is None else int(ignore),
                      reduction=at.get("reduction", "mean"))


def _nll_loss(ins, at, v):
    return _nll(_t(ins[0]), ins[1], ins[2] if len(ins) > 2 else None, at)


def _softmax_ce(ins, at, v):
    log_prob = torch.log_softmax(_t(ins[0]), dim=1)
    return _nll(log_prob, ins[1], ins[2] if len(ins) > 2 else None, at), log_prob


def _lrn(ins, at, v):
    """ONNX's window: floor((size-1)/2) channels before, ceil((size-1)/2) after
    (torch's local_response_norm puts the larger half before)."""
    x = _t(ins[0])
    size, alpha, beta, bias = at["size"], at.get("alpha", 1e-4), at.get("beta", 0.75), at.get("bias", 1.0)
    n, c = x.shape[0], x.shape[1]
    sq = (x * x).reshape(n, 1, c, -1)
    sq = F.pad(sq, (0, 0, (size - 1) // 2, size // 2))
    window = F.avg_pool2d(sq, (size, 1), stride=1) * size
    return x / (bias + alpha / size * window.reshape(x.shape)) ** beta


def _ctc(ins, at, v):
    """ai.graphcore Ctc: torch's ctc_loss (a static-shape op while tracing), PopART's
    ReductionType (0 Sum, 1 Mean, 2 NoReduction)."""
    reduction = {0: "sum", 1: "mean", 2: "none"}[int(at.get("reduction", 1))]
    return F.ctc_loss(_t(ins[0]), _t(ins[1]).to(torch.int64), _t(ins[2]).to(torch.int64),
                      _t(ins[3]).to(torch.int64), blank=int(at.get("blank", 0)), reduction=reduction,
                      zero_infinity=bool(at.get("zeroInfinity", 0)))


def _grouped_gather(ins, at, v):
    """ai.graphcore GroupedGather: an ONNX Gather per group (dimension 0 of data and indices)."""
    data, idx = _t(ins[0]), ins[1]
    axis = _axis(at.get("axis", 0), data.dim())
    if axis == 0:
        raise Error("GroupedGather: axis 0 is the group dimension", type="frontend")
    return torch.stack([_gather([data[g], idx[g]], {"axis": axis - 1}, v) for g in range(data.shape[0])])


def _bit_shift(ins, at, v):
    a, b = _t(ins[0]), _t(ins[1])
    if at["direction"] == "LEFT":
        return torch.bitwise_left_shift(a, b)
    return torch.bitwise_right_shift(a, b)


def _random(normal: bool, like: bool):
    """RandomNormal/RandomUniform(Like): drawn from the session's random streams
    (seeded by its random seed, one per replica), not from the `seed` attribute."""
    def impl(ins, at, v):
        from onnx.helper import tensor_dtype_to_np_dtype

        src = _t(ins[0]) if like else None
        shape = list(src.shape) if like else list(at["shape"])
        if "dtype" in at:
            dtype = torch.from_numpy(np.zeros(0, tensor_dtype_to_np_dtype(at["dtype"]))).dtype
        else:
            dtype = src.dtype if like else torch.float32
        if normal:
            return torch.randn(shape, dtype=dtype) * at.get("scale", 1.0) + at.get("mean", 0.0)
        low, high = at.get("low", 0.0), at.get("high", 1.0)
        return torch.rand(shape, dtype=dtype) * (high - low) + low
    return impl


def _recurrent(fn):
    """ONNX's LSTM/GRU/RNN: tensor operands, the sequence lengths (input 4) kept static."""
    return lambda ins, at, v: fn([x if x is None or k == 4 else _t(x) for k, x in enumerate(ins)], at, v)


OPS = {
    "Identity": lambda ins, at, v: ins[0],
    "Add": _binary(torch.add), "Sub": _binary(torch.sub), "Mul": _binary(torch.mul), "Div": _div,
    "Pow": _binary(torch.pow),
    "Mod": lambda ins, at, v: (torch.fmod if at.get("fmod", 0) else torch.remainder)(_t(ins[0]), _t(ins[1])), "Max": lambda ins, at, v: _fold(torch.maximum, ins),
    "Min": lambda ins, at, v: _fold(torch.minimum, ins), "Sum": lambda ins, at, v: _fold(torch.add, ins),
    "Mean": lambda ins, at, v: _fold(torch.add, ins) / len(ins),
    "Equal": _binary(torch.eq), "Less": _binary(torch.lt), "Greater": _binary(torch.gt),
    "LessOrEqual": _binary(torch.le), "GreaterOrEqual": _binary(torch.ge),
    "And": _binary(torch.logical_and), "Or": _binary(torch.logical_or), "Not": _unary(torch.logical_not),
    "Sqrt": _unary(torch.sqrt), "Exp": _unary(torch.exp), "Log": _unary(torch.log),
    "Neg": _unary(torch.neg), "Abs": _unary(torch.abs), "Reciprocal": _unary(torch.reciprocal),
    "Relu": _unary(torch.relu), "Sigmoid": _unary(torch.sigmoid), "Tanh": _unary(torch.tanh),
    "Erf": _unary(torch.erf), "Sin": _unary(torch.sin), "Cos": _unary(torch.cos),
    "Floor": _unary(torch.floor), "Ceil": _unary(torch.ceil), "Sign": _unary(torch.sign),
    "Softplus": _unary(F.softplus), "Gelu": _gelu,
    "LeakyRelu": lambda ins, at, v: F.leaky_relu(_t(ins[0]), at.get("alpha", 0.01)),
    "Elu": lambda ins, at, v: F.elu(_t(ins[0]), at.get("alpha", 1.0)),
    "HardSigmoid": lambda ins, at, v: torch.clamp(_t(ins[0]) * at.get("alpha", 0.2) + at.get("beta", 0.5), 0, 1),
    "Softmax": _softmax(torch.softmax), "LogSoftmax": _softmax(torch.log_softmax),
    "MatMul": _matmul, "Gemm": _gemm, "Conv": _conv, "MaxPool": _maxpool, "AveragePool": _avgpool,
    "GlobalAveragePool": _global_avgpool, "LayerNormalization": _layernorm,
    "Reshape": _reshape, "Flatten": _flatten, "Transpose": _transpose, "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze, "Concat": _concat, "Slice": _slice, "Gather": _gather, "Split": _split,
    "ReduceMean": _reduce(torch.mean), "ReduceSum": _reduce(torch.sum),
    "ReduceMax": _reduce(torch.amax), "ReduceMin": _reduce(torch.amin), "Cast": _cast,
    "Expand": _expand, "Clip": _clip, "Where": _where, "Pad": _pad,
    "Shape": _shape, "Size": _size, "ConstantOfShape": onnx_converter_ops.constant_of_shape,
    "ArgMax": _arg_extreme(torch.argmax),
    "Tile": lambda ins, at, v: _t(ins[0]).repeat(*_ints(ins[1])),
    "InstanceNormalization": _instance_norm,
    "GroupNormalization": _group_norm, "TopK": _topk, "CumSum": _cumsum, "Trilu": _trilu,
    "PRelu": _prelu, "Selu": lambda ins, at, v: _selu(_t(ins[0]), at),
    "HardSwish": lambda ins, at, v: F.hardswish(_t(ins[0])),
    "GlobalMaxPool": lambda ins, at, v: torch.amax(_t(ins[0]), dim=tuple(range(2, _t(ins[0]).dim())),
                                                   keepdim=True),
    "Einsum": lambda ins, at, v: torch.einsum(at["equation"], *[_t(i) for i in ins]),
    "ReduceProd": _reduce(lambda x, dim, keepdim: _prod(x, dim, keepdim)),
    "ReduceL2": _reduce(lambda x, dim, keepdim: torch.sqrt((x * x).sum(dim=dim, keepdim=keepdim))),
    "ReduceLogSumExp": _reduce(lambda x, dim, keepdim: torch.logsumexp(x, dim=dim, keepdim=keepdim)),
    "ReduceSumSquare": _reduce(lambda x, dim, keepdim: (x * x).sum(dim=dim, keepdim=keepdim)),
    "ReduceLogSum": _reduce(lambda x, dim, keepdim: torch.log(x.sum(dim=dim, keepdim=keepdim))),
    "Atan": _unary(torch.atan), "Tan": _unary(torch.tan), "Asin": _unary(torch.asin),
    "Acos": _unary(torch.acos), "Sinh": _unary(torch.sinh), "Cosh": _unary(torch.cosh),
    "IsNaN": _unary(torch.isnan), "Round": _unary(torch.round),
    "Range": lambda ins, at, v: torch.arange(*(_scalar(x, "Range's start, limit and delta") for x in ins)),
    "ConvTranspose": _conv_transpose, "Resize": resize,
    "GatherElements": _gather_elements, "ScatterElements": _scatter_elements, "ScatterND": _scatter_nd,
    "GatherND": _gather_nd, "OneHot": _one_hot, "DepthToSpace": _depth_to_space,
    "SpaceToDepth": _space_to_depth, "Hardmax": _hardmax, "ArgMin": _arg_extreme(torch.argmin),
    "IsInf": _is_inf, "Shrink": _shrink, "LpNormalization": _lp_norm, "MeanVarianceNormalization": _mvn,
    "EyeLike": _eye_like, "GridSample": _grid_sample,
    "NegativeLogLikelihoodLoss": _nll_loss, "SoftmaxCrossEntropyLoss": _softmax_ce,
    "CastLike": lambda ins, at, v: _t(ins[0]).to(_t(ins[1]).dtype),
    "Scatter": _scatter_elements,  # the deprecated name (opsets 9-10) of ScatterElements
    "Softsign": _unary(lambda x: x / (1 + x.abs())), "Mish": _unary(F.mish),
    "Celu": lambda ins, at, v: F.celu(_t(ins[0]), at.get("alpha", 1.0)),
    "ThresholdedRelu": lambda ins, at, v: torch.where(_t(ins[0]) > at.get("alpha", 1.0), _t(ins[0]),
                                                      torch.zeros_like(_t(ins[0]))),
    "LRN": _lrn,
    "ReduceL1": _reduce(lambda x, dim, keepdim: x.abs().sum(dim=dim, keepdim=keepdim)),
    "Acosh": _unary(torch.acosh), "Asinh": _unary(torch.asinh), "Atanh": _unary(torch.atanh),
    "Xor": _binary(torch.logical_xor), "BitwiseAnd": _binary(torch.bitwise_and),
    "BitwiseOr": _binary(torch.bitwise_or), "BitwiseXor": _binary(torch.bitwise_xor),
    "BitwiseNot": _unary(torch.bitwise_not), "BitShift": _bit_shift,
    "RandomNormal": _random(True, False), "RandomUniform": _random(False, False),
    "RandomNormalLike": _random(True, True), "RandomUniformLike": _random(False, True),
    **{name: _recurrent(fn) for name, fn in onnx_recurrent.OPS.items()},
    **onnx_converter_ops.OPS,
}

# operators whose behaviour depends on training (batch statistics, dropout)
TRAINING_OPS = {"BatchNormalization": _batchnorm, "Dropout": _dropout}

def _selu(x, at):
    alpha, gamma = at.get("alpha", 1.67326319217681884765625), at.get("gamma", 1.05070102214813232421875)
    return gamma * torch.where(x > 0, x, alpha * (torch.exp(x) - 1))


def _print_tensor(ins, at, v):
    """aiGraphcore PrintTensor: PopTorch's print op (lowering/ipu_torch_ops.py),
    printing the tensor when the program runs and, with print_gradient, its
    gradient; PopTorch's default format."""
    x = _t(ins[0])
    return print_tensor(x, str(at.get("title", "")), bool(at.get("print_gradient", 1)),
                        1000, 3, 80, 4, "auto", ", ", "(", ")")


def _prod(x, dims, keepdim):
    for d in sorted(dims, reverse=True):
        x = torch.prod(x, d, keepdim=keepdim)
    return x


GRAPHCORE_OPS = {"IdentityLoss": _identityloss, "L1": _l1loss, "Nll": _nllloss,
                 "PrintTensor": _print_tensor,
                 "Swish": lambda ins, at, v: F.silu(_t(ins[0])),
                 "Expm1": lambda ins, at, v: torch.expm1(_t(ins[0])),
                 "Log1p": lambda ins, at, v: torch.log1p(_t(ins[0])),
                 "Atan2": lambda ins, at, v: torch.atan2(_t(ins[0]), _t(ins[1])),
                 "Remainder": lambda ins, at, v: torch.remainder(_t(ins[0]), _t(ins[1])),
                 "Fmod": lambda ins, at, v: torch.fmod(_t(ins[0]), _t(ins[1])),
                 "Round": lambda ins, at, v: torch.round(_t(ins[0])),
                 "Gelu": lambda ins, at, v: F.gelu(_t(ins[0]), approximate="tanh"),  # poplibs' GELU
                 "GeluErf": lambda ins, at, v: F.gelu(_t(ins[0])),
                 "GroupedGather": _grouped_gather, "Ctc": _ctc,
                 "DepthToSpace": _depth_to_space,
                 "Scale": lambda ins, at, v: _t(ins[0]) * at.get("scale", 1.0),
                 "Detach": lambda ins, at, v: _t(ins[0]).detach(), **onnx_converter_ops.GRAPHCORE_OPS}

# float operands that are settings, not weights: initializers feeding them stay
# compile-time values (numpy arrays) instead of becoming parameters, as do the
# inputs of the STATIC_ONLY operators (Range's bounds, ...); `_scalar` and `_ints`
# read them, and say so clearly if one depends on a graph input (Pad's constant
# value and Dropout's ratio may: they do not change shapes, and run as tensors then)
STATIC_INPUTS = {"Resize": (1, 2), "OneHot": (1, 2), "Clip": (1, 2), "Upsample": (1,), "Pad": (2,),
                 "Dropout": (1,)}

# operators evaluated at compile time only (their result is always static)
STATIC_ONLY = {"Shape", "ConstantOfShape", "Constant", "Range", "Size", "HannWindow", "HammingWindow",
               "BlackmanWindow", "MelWeightMatrix"}


def _fold(fn, ins):
    out = _t(ins[0])
    for x in ins[1:]:
        out = fn(out, _t(x))
    return out


def supported(domain: str, op_type: str) -> bool:
    """Control flow and sequences (onnx_control_flow.py) run in the ONNX module itself."""
    if domain in ("", "ai.onnx"):
        return (op_type in OPS or op_type in TRAINING_OPS or op_type in STATIC_ONLY
                or op_type in onnx_control_flow.CONTROL_FLOW or op_type in onnx_control_flow.SEQUENCE_OPS)
    return domain == GRAPHCORE_DOMAIN and (op_type in GRAPHCORE_OPS
                                           or op_type in onnx_control_flow.GRAPHCORE_CONTROL_FLOW)
