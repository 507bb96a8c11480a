"""Verification of `aten` ops by torch's own shape and dtype rules.

Every `aten` op names a real ATen overload, so its result types are whatever
torch computes for operands of the declared types: the check runs the overload
on *meta* tensors (shape and dtype, no data) with the op's properties, and
compares. Torch's own errors (a stride of 0, a dimension out of range, shapes
that do not broadcast or multiply) become verifier errors, so attributes are
range-checked exactly where torch would reject them and no rule is written by
hand: an op added to `dialects/aten_schema.py` is verified with no extra work.
An elementwise op whose operands share one element type is typed by ATen's
CPU kernel on one-element stand-ins instead (`_elementwise_results`): the same
type, in C++, without the Python meta function's first-call import of sympy.
Matmuls, reductions, softmax, layer norm, convolution, pooling, cat, padding,
embedding, gather and scatter are typed by their CPU kernel on stand-ins
with relabelled sizes (`STAND_INS`, `_stand_in_results`).

The dialect layer cannot import torch (tests/test_layers.py), so its verifier
runs the rules of the process's plugin registry (`RUNTIME.result_type_rules`,
tilefx/runtime.py), which `TorchRules`, a plugin, adds to when a caller
installs it (`RUNTIME.install(TorchRules())`): the torch frontend, the
surfaces, tilefx-run, and tilefx-opt and stock xdsl-opt when they load the
`aten` dialect (tools/universe.py), so all verify with it. torch is imported
on the first check, not at install time.

Results are cached by (op, operand types, properties): a model repeats the same
few signatures, so a compile runs torch once per signature.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from xdsl.dialects.builtin import TensorType, TypeAttribute
from xdsl.irdl import IRDLOperation
from xdsl.utils.exceptions import VerifyException

from tilefx.gcpause import gc_paused
from tilefx.runtime import RUNTIME, Plugin
from tilefx.dialects.aten import broadcast_shape, field_name, from_attr, type_key
from tilefx.dialects.aten_traits import TRAITS, short_name

_CACHE_LIMIT = 65536
_cache: dict[tuple, tuple] = {}
_torch: Any = None
TORCH_DTYPES: dict[str, Any] = {}  # IR element type key -> torch dtype
_FLOATS = {"f16", "bf16", "f32", "f64"}


def load_torch() -> Any:
    """torch, imported on first use (with TORCH_DTYPES filled)."""
    global _torch
    if _torch is None:
        # `import torch` makes ~250,000 objects, and the collector walks every
        # live one (xDSL's classes and IR among them, in tilefx-opt) in the
        # full collections they trigger: ~0.2 s of CPU (gcpause.py)
        with gc_paused():
            import torch

        TORCH_DTYPES.update({"f32": torch.float32, "f16": torch.float16, "f64": torch.float64,
                             "bf16": torch.bfloat16, "i64": torch.int64, "i32": torch.int32,
                             "i16": torch.int16, "i8": torch.int8, "ui8": torch.uint8,
                             "i1": torch.bool, "c64": torch.complex64})
        _torch = torch
    return _torch


def _dtype_key(dtype: Any) -> str | None:
    """The IR element type key of a torch dtype (None: not one of TORCH_DTYPES)."""
    return next((k for k, v in TORCH_DTYPES.items() if v == dtype), None)


def _type_text(shape: tuple[int, ...], key: str) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + key + ">"


def _tensor_sig(t: Any) -> tuple[tuple[int, ...], str]:
    if not isinstance(t, TensorType):
        raise VerifyException(f"expected a ranked tensor, got {t}")
    try:
        key = type_key(t.element_type)
    except ValueError as e:
        raise VerifyException(str(e)) from None
    shape = tuple(t.get_shape())
    if any(d < 0 for d in shape):
        raise VerifyException(f"dynamic dimensions are not supported: {t}")
    return shape, key


def _freeze(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    return (type(v).__name__, v)


def _signature(op: IRDLOperation) -> tuple[tuple, dict[str, Any]]:
    """The cache key and the arguments of the torch call, as plain values
    (operands as (shape, type key), lists of them, or None)."""
    schema = op.schema  # type: ignore[attr-defined]
    args: dict[str, Any] = {}
    for a in schema.operands:
        v = getattr(op, field_name(a.name))
        if a.kind == "tensor":
            args[a.name] = _tensor_sig(v.type)
        elif a.kind == "optional":
            args[a.name] = None if v is None else _tensor_sig(v.type)
        else:
            args[a.name] = [_tensor_sig(x.type) for x in v]
    props = {}
    for a in schema.properties:
        if a.name in op.properties:
            attr = op.properties[a.name]
            try:
                props[a.name] = type_key(attr) if isinstance(attr, TypeAttribute) else from_attr(attr)
            except ValueError as e:
                raise VerifyException(f"property {a.name}: {e}") from None
        elif a.optional and not a.has_default:
            props[a.name] = None  # `int[]? bias_sizes`: absent means None, which torch wants said
    key = (op.name, tuple((k, _freeze(v)) for k, v in args.items()),
           tuple((k, _freeze(v)) for k, v in props.items()))
    return key, {**args, **{f"\0{k}": v for k, v in props.items()}}


def _call_args(schema, args: dict[str, Any], tensor) -> dict[str, Any]:
    """The keyword arguments of the torch call: each operand signature made a
    tensor by `tensor(shape, dtype)`, the properties as torch takes them."""
    kwargs: dict[str, Any] = {}
    for name, v in args.items():
        if name.startswith("\0"):
            kwargs[name[1:]] = TORCH_DTYPES.get(v, v) if _is_scalar_type(schema, name[1:]) else v
            continue
        for sig in v if isinstance(v, list) else () if v is None else (v,):
            if sig[1] not in TORCH_DTYPES:
                raise VerifyException(f"element type {sig[1]} has no torch dtype")
        if isinstance(v, list):
            kwargs[name] = [tensor(shape, TORCH_DTYPES[key]) for shape, key in v]
        else:
            kwargs[name] = None if v is None else tensor(v[0], TORCH_DTYPES[v[1]])
    return kwargs


# elementwise ops whose CPU kernel accepts operands their meta function
# rejects: `where` with a uint8 condition (deprecated, still run by the kernel)
_META_ONLY = frozenset({"where.self"})


def _run_on_cpu(fn, kwargs: dict[str, Any]) -> Any:
    """ATen's CPU kernel `fn` on stand-in tensors, warnings silenced; None
    when it refuses them (the meta function then decides, and words the
    error)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn(**kwargs)
    except Exception:  # noqa: BLE001 - the meta function decides, and words the error
        return None


def _elementwise_results(schema, fn, args: dict[str, Any]) -> tuple | None:
    """("ok", [(shape, key)]) of an elementwise op (the `same_shape` trait: its
    result has its operands' broadcast shape) whose tensor operands share one
    element type and which sets no property, from ATen's CPU kernel; None
    otherwise, or if the kernel rejects the operands.

    The meta functions of these ops are Python (`torch._refs` references,
    registered over any C++ meta kernel), and the first call of one imports
    sympy for its type promotion: about half of `tilefx-opt`'s start-up on
    IR with `aten` ops. The result dtype depends on the operands' dtypes and
    on which of them are 0-d, not on their sizes (torch's type promotion ranks
    a 0-d tensor below one with dimensions: "Type promotion", Tensor
    Attributes, PyTorch documentation), so the CPU kernel computes it in C++
    on a one-element stand-in of each operand of the same rank. Outside that
    domain the two may differ (with mixed dtypes `threshold_backward`'s meta
    function takes the gradient's dtype, the kernel promotes), so everything
    else, the ops of `_META_ONLY` and whatever the kernel rejects go to the
    meta function, whose error the verifier reports.
    tests/lowering/test_torch_rules.py checks that both give the same type
    over the whole domain: every such op, element type and pattern of 0-d
    operands."""
    t = TRAITS.get(short_name(schema.name))
    if t is None or not t.same_shape or schema.num_results != 1 or schema.name in _META_ONLY:
        return None
    if any(v is not None for name, v in args.items() if name.startswith("\0")):
        return None  # a property set: its value can decide the dtype (pow of a bool by True)
    operands = [v for name, v in args.items() if not name.startswith("\0") and v is not None]
    if not operands or any(isinstance(v, list) for v in operands) or len({key for _, key in operands}) != 1:
        return None
    shape = broadcast_shape([s for s, _ in operands])
    if shape is None:
        return None
    torch = load_torch()
    # on the CPU by name: a default device the process set (torch.set_default_device) is not asked
    kwargs = _call_args(schema, args, lambda s, dtype: torch.ones((1,) * len(s), dtype=dtype, device="cpu"))
    out = _run_on_cpu(fn, kwargs)
    if out is None:
        return None
    key = _dtype_key(out.dtype) if isinstance(out, torch.Tensor) else None
    return None if key is None else ("ok", [(shape, key)])


def _torch_results(schema, args: dict[str, Any]) -> tuple:
    """("ok", [(shape, key), ...]) | ("error", message) | ("unknown",)."""
    torch = load_torch()

    base, overload = schema.name.split(".")
    try:
        fn = getattr(getattr(torch.ops.aten, base), overload)
    except (AttributeError, RuntimeError):
        return ("unknown",)
    found = _elementwise_results(schema, fn, args)
    if found is None:
        found = _stand_in_results(schema, fn, args)
    return _meta_results(schema, fn, args) if found is None else found


# -- stand-ins with relabelled sizes -------------------------------------------------
#
# The other ops whose meta function is Python (matmuls, reductions, softmax,
# layer norm, convolution, pooling, cat, padding, embedding, gather and
# scatter) are typed by their CPU kernel on stand-ins whose sizes are
# relabelled: every size of 2 or more is replaced by its rank among the
# distinct such sizes of the signature, plus 2 (768, 3072 and 50257 become 2,
# 3 and 4), 0 and 1 stay, and the result's sizes are mapped back. For these
# ops whether operands are valid depends on their sizes only through their
# order (equal, broadcast against 1, empty, at most another: the index of
# `gather`, `k` of `topk`), which the relabelling keeps, and each size of the
# result is one of the operands' or 1. The sizes the kernel computes by
# arithmetic (the concatenated axis of `cat`, the spatial axes of convolution
# and pooling, the channels of a grouped convolution, the padded axes) are
# kept as they are (`keep`). A result size that is not the image of an
# operand's, or a kernel that rejects the stand-ins, sends the op to the meta
# function, which decides and words the error: the stand-ins only confirm
# what the meta function accepts. tests/lowering/test_torch_rules.py checks
# that both give the same types over many signatures of each op, valid and not.
#
# Only forward ops: they are public API whose CPU kernels check their
# operands. Backward kernels trust autograd to pass consistent shapes and
# read out of bounds when they are not (avg_pool2d_backward and the batch norm
# kernels crash the process on mismatched operands), so they keep the meta
# function, as do the ops whose kernel types differently from it (nll_loss
# with an out-of-range reduction) and var and var_mean, whose kernel warns on
# stderr when the relabelled count of elements falls to the correction.

_STAND_IN_ELEMENTS = 1 << 24  # a bound on the stand-ins' elements: past it, the meta function


def _keep_none(args: dict[str, Any], which: str | int, rank: int) -> range:
    return range(0)


def _keep_trailing(count: int):
    """The last `count` axes of every tensor (pooling's spatial axes)."""
    def keep(args: dict[str, Any], which: str | int, rank: int) -> range:
        return range(max(rank - count, 0), rank)
    return keep


def _keep_cat(args: dict[str, Any], which: str | int, rank: int) -> range:
    """The concatenated axis (its size in the result is the operands' sum)."""
    dim = args.get("\0dim", 0)
    return range(dim % rank, dim % rank + 1) if rank and -rank <= dim < rank else range(0)


def _keep_pad(args: dict[str, Any], which: str | int, rank: int) -> range:
    """The padded axes: the last len(pad) // 2."""
    return range(max(rank - len(args["\0pad"]) // 2, 0), rank)


def _keep_convolution(args: dict[str, Any], which: str | int, rank: int) -> range:
    """The spatial axes (their sizes come from the padding, stride and
    dilation); with groups also the channels (a multiple of the groups)."""
    spatial = len(args["weight"][0]) - 2
    if args.get("\0groups", 1) == 1:
        return range(0) if which == "bias" else range(max(rank - spatial, 0), rank)
    return range(rank) if which in ("weight", "bias") else range(max(rank - spatial - 1, 0), rank)


def _grow_none(args: dict[str, Any], kept: list[int]) -> int:
    return 1


def _grow_cat(args: dict[str, Any], kept: list[int]) -> int:
    return sum(kept)


def _grow_pad(args: dict[str, Any], kept: list[int]) -> int:
    return max(kept, default=0) + sum(abs(p) for p in args["\0pad"])


def _grow_window(args: dict[str, Any], kept: list[int]) -> int:
    """At most the size of a convolution's or pooling's result axis."""
    m = max(kept, default=0)
    pad = max((abs(p) for p in args.get("\0padding") or ()), default=0)
    if args.get("\0transposed"):
        stride, dilation = (max(map(abs, args.get(f"\0{n}") or ()), default=1) for n in ("stride", "dilation"))
        out_pad = max(map(abs, args.get("\0output_padding") or ()), default=0)
        return m * stride + m * dilation + out_pad + 2 * pad + 1
    return max([m + 2 * pad + 1, *map(abs, args.get("\0output_size") or ())])


@dataclass(frozen=True)
class _StandIn:
    sizes: tuple[str, ...] = ()  # properties whose entries are sizes, relabelled with the operands'
    keep: Callable[[dict[str, Any], str | int, int], range] = _keep_none  # axes kept at their size
    grow: Callable[[dict[str, Any], list[int]], int] = _grow_none  # at most a kept axis of the result
    # element types the kernel types otherwise: the meta function. Complex
    # operands for every op: a kernel casting them to a real dtype warns on
    # stderr (the meta function does not)
    meta_for: frozenset[str] = frozenset({"c64"})


_EQUAL = _StandIn()
_POOL2D, _POOL3D = (_StandIn(keep=_keep_trailing(n), grow=_grow_window) for n in (2, 3))
STAND_INS: dict[str, _StandIn] = {
    **dict.fromkeys("""
mm addmm bmm _softmax _log_softmax sum.dim_IntList sum mean mean.dim prod prod.dim_int amax amin argmax argmin
any any.dim any.dims max.dim min.dim max min linalg_vector_norm
cumsum cumprod logcumsumexp cummax cummin sort sort.stable median median.dim nanmedian nanmedian.dim mode flip
embedding index_select gather scatter.src scatter.value scatter_add scatter_reduce.two scalar_tensor
""".split(), _EQUAL),
    # the CPU kernel keeps a half-precision input's mean and rstd in its type, meta makes them f32
    "native_layer_norm": _StandIn(sizes=("normalized_shape",), meta_for=frozenset({"f16", "bf16", "c64"})),
    "topk": _StandIn(sizes=("k",)),
    "kthvalue": _StandIn(sizes=("k",)),
    "histc": _StandIn(sizes=("bins",)),
    "full": _StandIn(sizes=("size",)),
    "cat": _StandIn(keep=_keep_cat, grow=_grow_cat),
    "constant_pad_nd": _StandIn(keep=_keep_pad, grow=_grow_pad),
    "convolution": _StandIn(keep=_keep_convolution, grow=_grow_window),
    **dict.fromkeys("max_pool2d_with_indices avg_pool2d _adaptive_avg_pool2d adaptive_max_pool2d".split(), _POOL2D),
    **dict.fromkeys("max_pool3d_with_indices avg_pool3d _adaptive_avg_pool3d adaptive_max_pool3d".split(), _POOL3D),
}


def _operand_sigs(args: dict[str, Any]) -> Iterator[tuple[str, tuple[tuple[int, ...], str]]]:
    for name, v in args.items():
        if not name.startswith("\0") and v is not None:
            yield from ((name, sig) for sig in (v if isinstance(v, list) else [v]))


def _stand_in_results(schema, fn, args: dict[str, Any]) -> tuple | None:
    """("ok", [(shape, key), ...]) of an op of STAND_INS from its CPU kernel on
    relabelled stand-ins; None for any other op, or where the kernel rejects
    the stand-ins, a result size does not map back, or the stand-ins would
    be large (the kept axes of huge tensors)."""
    rule = STAND_INS.get(short_name(schema.name))
    if rule is None or any(key in rule.meta_for for _, (_, key) in _operand_sigs(args)):
        return None
    # the operands' and size properties' sizes, each with the axes kept as they are
    shapes = [(name, shape, rule.keep(args, name, len(shape))) for name, (shape, _) in _operand_sigs(args)]
    for name in rule.sizes:
        v = args.get("\0" + name)
        if isinstance(v, int) and not isinstance(v, bool):
            shapes.append((name, (v,), range(0)))
        elif isinstance(v, list):
            shapes.append((name, tuple(v), range(0)))
    order = sorted({d for _, shape, kept in shapes for i, d in enumerate(shape) if i not in kept and d >= 2})
    stand_in = {d: 2 + i for i, d in enumerate(order)}
    back = {0: 0, 1: 1} | {v: d for d, v in stand_in.items()}

    def shrink(shape: tuple[int, ...], kept: range) -> tuple[int, ...]:
        return tuple(d if i in kept or d < 2 else stand_in[d] for i, d in enumerate(shape))

    # the stand-ins' elements, and at most the result's: each relabelled size of
    # it is an operand's, each kept one at most `grow`
    kept_sizes = [shape[i] for _, shape, kept in shapes for i in kept if i < len(shape)]
    elements = max(rule.grow(args, kept_sizes), 1) ** max((len(kept) for _, _, kept in shapes), default=0)
    for _, shape, kept in shapes:
        elements *= max(math.prod(stand_in.get(d, d) for i, d in enumerate(shape) if i not in kept), 1)
    if elements > _STAND_IN_ELEMENTS:
        return None
    small: dict[str, Any] = {}
    for name, v in args.items():
        if name.startswith("\0"):
            if name[1:] in rule.sizes and v is not None and not isinstance(v, bool):
                v = list(shrink(tuple(v), range(0))) if isinstance(v, list) else shrink((v,), range(0))[0]
        elif isinstance(v, list):
            v = [(shrink(s, rule.keep(args, name, len(s))), key) for s, key in v]
        elif v is not None:
            v = (shrink(v[0], rule.keep(args, name, len(v[0]))), v[1])
        small[name] = v
    torch = load_torch()
    # zeros: a valid index wherever the indexed axis is not empty; on the CPU by name
    kwargs = _call_args(schema, small, lambda s, dtype: torch.zeros(s, dtype=dtype, device="cpu"))
    out = _run_on_cpu(fn, kwargs)
    if out is None:
        return None
    found = []
    for i, t in enumerate(out if isinstance(out, (tuple, list)) else (out,)):
        if not isinstance(t, torch.Tensor) or _dtype_key(t.dtype) is None:
            return None
        kept = rule.keep(args, i, t.dim())
        if any(j not in kept and d not in back for j, d in enumerate(t.shape)):
            return None  # a size the kernel computed: not one of the operands'
        found.append((tuple(d if j in kept else back[d] for j, d in enumerate(t.shape)), _dtype_key(t.dtype)))
    return ("ok", found)


def _meta_results(schema, fn, args: dict[str, Any]) -> tuple:
    """`_torch_results` by the op's meta function, on meta tensors."""
    from tilefx.lowering.no_compiler import without_compiler

    torch = load_torch()
    kwargs = _call_args(schema, args, lambda shape, dtype: torch.empty(shape, dtype=dtype, device="meta"))
    try:
        with warnings.catch_warnings(), without_compiler():  # meta functions load no compiler
            warnings.simplefilter("ignore")
            out = fn(**kwargs)
    except NotImplementedError:  # no meta function (data-dependent shapes): not checkable
        return ("unknown",)
    except RuntimeError as e:
        if "meta tensors" in str(e) or "data-dependent" in str(e):  # .item() and the like
            return ("unknown",)
        text = (str(e).strip().splitlines() or [type(e).__name__])[0]
        return ("error", f"{type(e).__name__}: {text[:300]}")
    except Exception as e:  # torch rejects the operands or properties
        text = (str(e).strip().splitlines() or [type(e).__name__])[0]
        return ("error", f"{type(e).__name__}: {text[:300]}")
    outs = out if isinstance(out, (tuple, list)) else () if out is None and schema.num_results == 0 \
        else (out,)
    # None: an output the op's mask turned off (convolution_backward); any type goes
    def sig(t):
        if t is None:
            return None
        if not isinstance(t, torch.Tensor):  # a number (sym_size, ...): a 0-d tensor in the IR
            return ((), "i1" if isinstance(t, bool) else "f32" if isinstance(t, float) else "i64")
        return (tuple(t.shape), _dtype_key(t.dtype) or str(t.dtype))

    return ("ok", [sig(t) for t in outs])


def _is_scalar_type(schema, name: str) -> bool:
    return any(a.name == name and a.base == "ScalarType" for a in schema.properties)


def check_result_types(op: IRDLOperation) -> None:
    """Raise VerifyException if torch rejects `op` or computes other result types."""
    try:
        key, args = _signature(op)
        found = _cache.get(key)
        if found is None:
            found = _torch_results(op.schema, args)  # type: ignore[attr-defined]
            if len(_cache) >= _CACHE_LIMIT:
                _cache.clear()
            _cache[key] = found
    except VerifyException as e:
        raise VerifyException(f"{op.name}: {e}") from None
    if found[0] == "unknown":
        return
    if found[0] == "error":
        raise VerifyException(f"{op.name}: torch rejects these operands and properties: {found[1]}")
    want = found[1]
    got = [_tensor_sig(r.type) for r in op.results]
    if len(got) != len(want):
        raise VerifyException(f"{op.name}: {len(got)} results, torch's rule gives {len(want)}")
    for i, (g, w) in enumerate(zip(got, want)):
        # an empty result on either side is an auxiliary output one implementation
        # does not compute: CPU kernels return empty statistics (batch norm in
        # eval) that the meta function sizes, and the meta function leaves empty
        # the max_indices of a sum-mode _embedding_bag that the CPU kernel fills
        empty = 0 in g[0] or 0 in w[0] if w is not None else False
        # saved statistics (native_layer_norm's mean and rstd of an f16 input)
        # are f16 from the CPU kernel that traced graphs record, f32 from meta
        stats = i > 0 and g[0] == w[0] and g[1] in _FLOATS and w[1] in _FLOATS if w is not None else False
        # an empty statistic may differ in float type too: the CPU kernel of an f16
        # batch norm in eval returns empty f16 tensors where meta sizes f32 ones
        empty_stats = empty and i > 0 and g[1] in _FLOATS and w[1] in _FLOATS if w is not None else False
        # _embedding_bag with include_last_offset: torch's meta function sizes bag_size and
        # max_indices by the offsets (one more than the bags), the CPU kernel by the bags
        last_offset = op.name == "aten._embedding_bag" and i > 1 and g[1] == w[1] \
            and getattr(op, "include_last_offset", None) is not None \
            and from_attr(op.include_last_offset) is True if w is not None else False
        if w is not None and g != w and not (empty and g[1] == w[1]) and not stats and not empty_stats \
                and not last_offset:
            raise VerifyException(f"{op.name}: result {i} is {_type_text(*g)}, torch's rule for "
                                  f"these operands and properties gives {_type_text(*w)}")


class TorchRules(Plugin):
    """torch's result-type rules for the aten verifier (tilefx/runtime.py)."""

    name = "torch-rules"
    result_type_rules = (check_result_types,)


def install() -> None:
    """Add the check to the aten dialect's verifier (once)."""
    RUNTIME.install(TorchRules())
