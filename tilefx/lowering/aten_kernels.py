"""ATen's own CPU kernels for the executor's large full-precision ops.

Every `aten` op names a real ATen overload, so the kernel that computes it
exactly as PyTorch does on the CPU is that overload itself. For the ops where
it pays, the executor calls it on its numpy arrays through zero-copy tensor
views (`torch.from_numpy` in, `Tensor.numpy()` out), instead of the numpy
kernel of the same op in `backend/kernels/`:

- speed: ATen's kernels are vectorised and run on torch's intra-op threads
  (MKL for products, oneDNN for convolutions), where numpy makes one
  single-threaded pass per ufunc. Running the program on the same thread
  pool as the user's torch code also ends the fight between two pools:
  OpenBLAS's and OpenMP's workers each busy-wait after their calls and took
  the second core from the other side (benchmarks/RESULTS.md, 2026-11-23);
- numerics: the results are PyTorch's, bit for bit, for the ops taken here;
  an attention group (`provide_attention`) runs the fused kernel eager torch
  runs for `F.scaled_dot_product_attention`, within the last bits of the
  op-by-op chain.

What stays on the numpy kernels (`provide` returns None): anything with a
float16 or bfloat16 operand or result (the IPU computes those with float32
partials and rounds once per op, which ATen's CPU kernels do not do), the
random ops (one seeded numpy stream per replica), ops whose only read result
the numpy table computes alone (values-only max pooling), small one-flop ops
(below `MIN_ELEMENTS_CHEAP`: a numpy ufunc's ~1 us beats ATen's ~7 us of
dispatch and conversion) and fused elementwise groups (analysis/fusion.py,
run by the executor). `TILEFX_KERNELS=numpy` turns this table off, which is how the
numpy kernels are tested as a whole (tests/lowering/test_aten_kernels.py).

The backend cannot import torch (tests/test_layers.py): the executor runs the
kernel providers of the process's plugin registry (`RUNTIME.kernel_providers`,
..., tilefx/runtime.py), which `AtenKernels`, a plugin, adds to when a caller
installs it (`RUNTIME.install(TorchRules(), AtenKernels())`: the torch
frontend, the surfaces and tilefx-run do, with torch's shape rules,
torch_rules.py).
"""

from __future__ import annotations

import math
import os
import warnings
from typing import Any, Callable

import numpy as np
from xdsl.ir import Operation

from xdsl.dialects.builtin import TypeAttribute

from tilefx.analysis.values import RANDOM_OPS
from tilefx.backend.emitter import FIRST_RESULT_TABLE
from tilefx.runtime import RUNTIME, Plugin
from tilefx.backend.kernels.tuning import blas_cores
from tilefx.dialects.aten import from_attr, type_key
from tilefx.dialects.aten_schema import ATEN_SCHEMAS
from tilefx.dialects.aten_traits import traits
from tilefx.dialects.irutil import value_numel
from tilefx.lowering.torch_rules import TORCH_DTYPES, TorchRules, load_torch

KERNELS_ENV = "TILEFX_KERNELS"  # "numpy": the numpy kernels for every op
# A one-flop op (CHEAP) whose largest operand or result has fewer elements
# runs on numpy: ATen's call costs ~7 us (two views in, one out, the
# dispatch) against a numpy ufunc's ~1 us, and up to ~150,000 elements both
# are memory bound (mul of 262,144: 45.6 against 33.2 us; benchmarks/
# RESULTS.md, 2026-11-24). Every other op runs on ATen whatever its size: one
# ATen call against the numpy kernel's several ufunc passes and their Python.
# Measured alone on warm caches, the numpy kernels won below ~4,000 elements;
# but in a program each step runs on caches the last large kernel left cold,
# where a 64x10 log_softmax took 118 us on numpy and 35 on ATen. The MLP's
# training step went from 0.99 to 0.95 of torch's (at batch 1, from 0.97 to
# 0.90; 2026-11-25). The one-flop ops below the bar stay faster on numpy in
# programs too (the MLP step: 0.95 against 0.98 with them on ATen). Dense
# linear algebra must be ATen's at any size besides: eigenvectors and
# singular vectors are defined up to sign, and MKL's LAPACK picks other signs
# than scipy's reference one for about a quarter of the columns.
MIN_ELEMENTS_CHEAP = 1 << 17
CHEAP = {f"aten.{n}" for n in (
    "add.Tensor", "add.Scalar", "sub.Tensor", "sub.Scalar", "mul.Tensor", "mul.Scalar",
    "div.Tensor", "div.Scalar", "neg", "copy", "_to_copy", "cat", "full", "full_like",
    "scalar_tensor", "fill.Scalar", "logical_and", "logical_or", "logical_not",
    "bitwise_and.Tensor", "bitwise_or.Tensor", "bitwise_not", "constant_pad_nd", "index.Tensor",
    "embedding", "gather", "masked_fill.Scalar", "slice_scatter", "select_scatter")}
# element types ATen computes as the IPU program does (not f16 / bf16)
_EXACT_TYPES = {"f32", "f64", "i64", "i32", "i16", "i8", "ui8", "i1"}
# Ops left to their numpy kernels although ATen has them: checks whose
# failure the numpy kernel words as torch does and the executor reports,
# ops returning host numbers, and views (numpy's are free and need no copy
# back).
_NUMPY_ONLY = {
    "aten._assert_async.msg", "aten._linalg_check_errors", "aten.sym_size.int", "aten.sym_numel", "aten.sym_stride.int",
    "aten._local_scalar_dense", "aten.view", "aten._unsafe_view", "aten.reshape",
    "aten.permute", "aten.expand", "aten.alias", "aten.squeeze.dims", "aten.squeeze.dim",
    "aten.unsqueeze", "aten.slice.Tensor", "aten.select.int", "aten.t", "aten.transpose.int",
    "aten.as_strided", "aten.split_with_sizes", "aten.unbind.int", "aten.detach",
    "aten.lift_fresh_copy",
    # comparisons: ATen's boolean results are slower than numpy's at every size
    # measured (le.Scalar of 262,144: 108 us against 25)
    "aten.eq.Scalar", "aten.eq.Tensor", "aten.ne.Scalar", "aten.ne.Tensor", "aten.lt.Scalar",
    "aten.lt.Tensor", "aten.le.Scalar", "aten.le.Tensor", "aten.gt.Scalar", "aten.gt.Tensor",
    "aten.ge.Scalar", "aten.ge.Tensor",
    # ATen's CPU kernel reads `grad_w` as contiguous without checking (torch's
    # autograd passes `grad.contiguous()`); the executor's gradient can be a
    # strided view (a convolution's weight gradient from the numpy kernel):
    # weight-normed convolutions trained wrong
    "aten._weight_norm_interface_backward",
}
_torch: Any = None


def _load_torch() -> Any:
    global _torch
    if _torch is None:
        _torch = load_torch()
    return _torch


def enabled() -> bool:
    return os.environ.get(KERNELS_ENV, "").strip().lower() != "numpy"


def _types_exact(op: Operation) -> bool:
    for v in (*op.operands, *op.results):
        t = v.type
        if not hasattr(t, "element_type"):
            return False
        try:
            if type_key(t.element_type) not in _EXACT_TYPES:
                return False
        except ValueError:
            return False
    return True


def provide(op: Operation) -> Callable | None:
    """An ATen kernel for `op`, or None to keep its numpy kernel. For an aten
    op the kernel takes the op's operand groups (array, None or list of
    arrays) and returns its result, or the list of its results; for the
    optimizer updates it has the numpy kernel's signature (aten_optimizers)."""
    name = op.name
    if name in ("ipu.sgd", "ipu.adam") and enabled():
        return _optimizers()[name]
    if not name.startswith("aten.") or name in _NUMPY_ONLY or name in RANDOM_OPS:
        return None
    if name in FIRST_RESULT_TABLE and not any(r.uses for r in op.results[1:]):
        return None
    if not enabled() or not _types_exact(op) or _numpy_faster(op):
        return None
    if name in CHEAP and max((value_numel(v) for v in (*op.operands, *op.results)),
                             default=0) < MIN_ELEMENTS_CHEAP:
        return None
    schema = getattr(op, "schema", None)
    if schema is None:
        return None
    torch = _load_torch()
    base, overload = schema.name.split(".")
    try:
        overload_fn = getattr(getattr(torch.ops.aten, base), overload)
    except (AttributeError, RuntimeError):
        return None
    if any(a.alias_info is not None and a.alias_info.is_write for a in overload_fn._schema.arguments):
        # ATen writes into an operand (`_native_batch_norm_legit`'s running
        # statistics, `resize_`, `out=` forms): the executor's arrays are
        # values, which the numpy kernels never change
        return None
    if any(r.alias_info is not None for r in overload_fn._schema.returns):
        # a view of an operand: the executor's views are numpy's, and an output
        # that is one is copied (runner/host_arrays.py's fresh_outputs counts on it)
        return None
    return _bind(overload_fn, schema, op)


_OPTIMIZERS: dict[str, Callable] = {}


def _optimizers() -> dict[str, Callable]:
    """torch.optim's updates (aten_optimizers.py): kernels with the numpy
    kernels' signature, `inplace=` included, which the executor calls as it
    calls those."""
    if not _OPTIMIZERS:
        from tilefx.lowering.aten_optimizers import make

        _OPTIMIZERS.update(make(_load_torch(), _as_tensor))
    return _OPTIMIZERS


def _numpy_faster(op: Operation) -> bool:
    """Where tilefx's own numpy kernel measured faster (benchmarks/RESULTS.md):
    2x2 / stride 2 max pooling with its indices (a branch-free formula,
    kernels/pooling.py: 0.31 against 0.54 ms on the tutorial CNN's,
    2026-11-24; the CNN's training step 0.95 against 0.99 of eager with ATen's pooling,
    2026-11-28). The weight gradient of a convolution over few input channels
    was numpy's too (on a 2026-11-24 machine ATen took 1.78 ms against 0.50
    for 40 images of 1x28x28, 5x5 kernels), until a 2026-11-28 machine ran ATen's in 0.20 ms
    against numpy's 0.32 (the CNN's SGD step 0.95 of eager instead of 1.01):
    every convolution now takes ATen's, eager's own kernel bit for bit."""
    if op.name == "aten.max_pool2d_with_indices":
        props = {k: from_attr(v) for k, v in op.properties.items() if k in ("kernel_size", "stride")}
        return list(props.get("kernel_size", ())) == [2, 2] and list(props.get("stride", [2, 2])) in ([2, 2], [])
    return False


def _constant(attr) -> Any:
    """A property as the overload takes it (a dtype as torch's)."""
    return TORCH_DTYPES[type_key(attr)] if isinstance(attr, TypeAttribute) else from_attr(attr)


def _bind(overload_fn, schema, op: Operation) -> Callable | None:
    """The overload called positionally with the op's operands (as tensors)
    and properties (as constants), in the order of ATen's own schema."""
    operand_index = {a.name: i for i, a in enumerate(schema.operands)}
    kinds = [a.kind for a in schema.operands]
    consts = {a.name: _constant(op.properties[a.name])
              for a in schema.properties if a.name in op.properties}
    positional: list[tuple[bool, Any]] = []  # (is operand, operand index | constant)
    keywords: dict[str, tuple[bool, Any]] = {}
    for arg in overload_fn._schema.arguments:
        if arg.name in operand_index:
            entry = (True, operand_index[arg.name])
        elif arg.name in consts:
            entry = (False, consts[arg.name])
        elif arg.name == "memory_format":
            # the IR has no layouts: results are row-major, as the numpy kernels
            # make them (ATen's default, preserve, would keep a transposed
            # operand's strides and every later view would copy)
            entry = (False, _torch.contiguous_format)
        elif arg.kwarg_only:
            continue  # left at ATen's default (layout, device, pin_memory, ...)
        elif arg.has_default_value():
            entry = (False, arg.default_value)
        else:
            entry = (False, None)  # an optional the IR leaves out
        if arg.kwarg_only:
            keywords[arg.name] = entry
        else:
            positional.append(entry)
    fn = overload_fn._op
    n_results = schema.num_results
    lead = len(kinds)
    # the operands first, in order, then constants only: one positional call
    in_order = (all(is_op and i == j for j, (is_op, i) in enumerate(positional[:lead]))
                and not any(is_op for is_op, _ in positional[lead:])
                and not any(is_op for is_op, _ in keywords.values()))
    simple = in_order and all(k == "tensor" for k in kinds)
    tail = tuple(c for _, c in positional[lead:])
    kw_tail = {k: c for k, (_, c) in keywords.items()}  # constants only, when simple (`alpha`)
    as_tensor = _as_tensor

    def tensors(vals):
        out = []
        for k, v in zip(kinds, vals):
            if k == "tensor":
                out.append(as_tensor(v))
            elif k == "optional":
                out.append(None if v is None else as_tensor(v))
            else:
                out.append([None if x is None else as_tensor(x) for x in v])
        return out

    if simple:
        def call(*vals):
            return fn(*[as_tensor(v) for v in vals], *tail, **kw_tail)
    else:
        def call(*vals):
            ts = tensors(vals)
            args = [ts[c] if is_op else c for is_op, c in positional]
            kw = {k: ts[c] if is_op else c for k, (is_op, c) in keywords.items()}
            return fn(*args, **kw)

    if n_results == 1:
        def kernel(*vals):
            try:
                return _as_array(call(*vals))
            except RuntimeError as e:
                raise _users_data(e) from None
    else:
        def kernel(*vals):
            try:
                res = call(*vals)
            except RuntimeError as e:
                raise _users_data(e) from None
            if isinstance(res, (tuple, list)):
                return [None if r is None else _as_array(r) for r in res]
            return [_as_array(res)]
    kernel.__qualname__ = f"aten kernel {op.name}"
    if in_order and n_results > 1 and all(k in ("tensor", "optional") for k in kinds):
        # (an optional operand the IR leaves out takes `kernel`: the executor
        # uses a direct step only where every operand is a value)
        kernel.direct_multi_step = _direct_multi_step(fn, tail, kw_tail, kernel)
    if simple and n_results == 1:
        kernel.direct_step = _direct_step(fn, tail, kw_tail, kernel)
        form = IN_PLACE_FORMS.get(schema.name)
        if form is not None and len(kinds) in (1, 2):
            name, overload, operands = form
            if operands == (0, 1) and kw_tail.get("alpha", 1) != 1:
                operands = (0,)  # b + alpha * a is not a + alpha * b
            in_place = getattr(getattr(_torch.ops.aten, name), overload)._op
            kernel.in_place = _in_place_step(in_place, tail, kw_tail, kernel, operands)
    return kernel


# The elementwise ops the executor may run in place when an operand dies at
# them (analysis/in_place.py), the operands their in-place form may overwrite
# (op traits, dialects/aten_traits.py): schema -> (ATen's in-place overload,
# operands), `relu_.default` for `relu.default`, `add_.Tensor` for `add.Tensor`.
IN_PLACE_FORMS = {s: (s.split(".")[0] + "_", s.split(".")[1], t.in_place) for s in ATEN_SCHEMAS
                  if (t := traits(s)).in_place}


def _in_place_step(fn_, tail: tuple, kw: dict, kernel: Callable, operands: tuple[int, ...]) -> Callable:
    """`make(ins, out, k, keep)`: a step computing slot `out` into the array
    of operand k (which the executor has found dies here): `_direct_step`
    over ATen's in-place overload `fn_`, the written operand first (k = 1
    only where the op commutes, IN_PLACE_FORMS). An operand torch cannot
    view writably (read-only, a numpy scalar, negative strides) takes the
    functional kernel instead, as a direct step's does."""
    direct = _direct_step(fn_, tail, kw, kernel)

    def make(ins: list[int], out: int, k: int, keep: bool = False) -> Callable:
        return direct(ins if k == 0 else [ins[1], ins[0]], out, keep)

    make.operands = operands
    return make


def _direct_step(fn, tail: tuple, kw: dict, kernel: Callable) -> Callable:
    """`make(ins, out, keep)`: an executor step computing slot `out` from
    slots `ins` with `fn` in one frame. An operand is a torch tensor (the
    result of another such step, or an argument the caller passed as one)
    or a writable numpy array torch can view; anything else (a read-only
    broadcast, a numpy scalar, negative strides) goes through `kernel`,
    which converts it. `keep`: the result stays a tensor, for a slot only
    such steps read (the executor's `tensor_slots`); else it is the
    tensor's numpy view."""
    from_numpy = _torch.from_numpy
    ndarray = np.ndarray
    Tensor = _torch.Tensor

    def make(ins: list[int], out: int, keep: bool = False) -> Callable:
        if len(ins) == 1:
            (i0,) = ins

            def step(env):
                a = env[i0]
                try:
                    if type(a) is not Tensor:
                        if type(a) is not ndarray or not a.flags.writeable:
                            raise ValueError
                        a = from_numpy(a)
                    r = fn(a, *tail, **kw)
                except RuntimeError as e:
                    raise _users_data(e) from None
                except ValueError:  # negative strides, read-only: the kernel converts
                    r = kernel(env[i0])
                env[out] = r if keep or type(r) is not Tensor else r.numpy()
        elif len(ins) == 2:
            i0, i1 = ins

            def step(env):
                a, b = env[i0], env[i1]
                try:
                    if type(a) is not Tensor:
                        if type(a) is not ndarray or not a.flags.writeable:
                            raise ValueError
                        a = from_numpy(a)
                    if type(b) is not Tensor:
                        if type(b) is not ndarray or not b.flags.writeable:
                            raise ValueError
                        b = from_numpy(b)
                    r = fn(a, b, *tail, **kw)
                except RuntimeError as e:
                    raise _users_data(e) from None
                except ValueError:
                    r = kernel(env[i0], env[i1])
                env[out] = r if keep or type(r) is not Tensor else r.numpy()
        elif len(ins) == 3:  # addmm, baddbmm, where, layer norm: no per-call lists
            i0, i1, i2 = ins

            def step(env):
                a, b, c = env[i0], env[i1], env[i2]
                try:
                    if type(a) is not Tensor:
                        if type(a) is not ndarray or not a.flags.writeable:
                            raise ValueError
                        a = from_numpy(a)
                    if type(b) is not Tensor:
                        if type(b) is not ndarray or not b.flags.writeable:
                            raise ValueError
                        b = from_numpy(b)
                    if type(c) is not Tensor:
                        if type(c) is not ndarray or not c.flags.writeable:
                            raise ValueError
                        c = from_numpy(c)
                    r = fn(a, b, c, *tail, **kw)
                except RuntimeError as e:
                    raise _users_data(e) from None
                except ValueError:
                    r = kernel(env[i0], env[i1], env[i2])
                env[out] = r if keep or type(r) is not Tensor else r.numpy()
        else:
            def step(env):
                vals = [env[i] for i in ins]
                try:
                    r = fn(*_viewed(vals, from_numpy, ndarray, Tensor), *tail, **kw)
                except RuntimeError as e:
                    raise _users_data(e) from None
                except ValueError:
                    r = kernel(*vals)
                env[out] = r if keep or type(r) is not Tensor else r.numpy()
        return step

    return make


def _viewed(vals: list, from_numpy, ndarray, Tensor) -> list:
    """Operands as tensors, as `_direct_step` takes them one by one (ValueError:
    one only the kernel converts)."""
    out = []
    for v in vals:
        if type(v) is not Tensor:
            if type(v) is not ndarray or not v.flags.writeable:
                raise ValueError
            v = from_numpy(v)
        out.append(v)
    return out


def _direct_multi_step(fn, tail: tuple, kw: dict, kernel: Callable) -> Callable:
    """`make(ins, outs, used, keep)`: `_direct_step` for an op of several
    results (layer norm and its backward, convolution backward, pooling with
    indices), converting only the results something reads (`used`); `keep`
    says for each whether it stays a tensor."""
    from_numpy = _torch.from_numpy
    ndarray = np.ndarray
    Tensor = _torch.Tensor

    def make(ins: list[int], outs: list[int], used: list[bool], keep: list[bool] | None = None) -> Callable:
        wanted = list(zip(outs, used, keep or [False] * len(outs)))

        def step(env):
            vals = [env[i] for i in ins]
            try:
                res = fn(*_viewed(vals, from_numpy, ndarray, Tensor), *tail, **kw)
            except RuntimeError as e:
                raise _users_data(e) from None
            except ValueError:  # negative strides, read-only: the kernel converts
                for o, r in zip(outs, kernel(*vals)):
                    env[o] = r
                return
            for (o, u, k), r in zip(wanted, res):
                if not u or r is None:
                    env[o] = None
                elif type(r) is Tensor:
                    env[o] = r if k else r.numpy()
                else:
                    env[o] = _as_array(r)

        return step

    return make


def provide_attention(group, shape: tuple[int, ...]) -> Callable | None:
    """`make(ins, out, keep)` for an attention group (analysis/attention.py's
    AttentionGroup): a step computing slot `out`, of `shape`, from the slots
    of q, k, v, the mask and the run-time scale (those the group has) with
    ATen's fused CPU attention kernel, the one eager torch runs for
    `F.scaled_dot_product_attention`. None with the numpy kernels chosen:
    the group's members then run op by op. The step computes the chain op by
    op, as eager torch does, where the kernel would differ: a row of the
    mask that is all -inf (NaN op by op, 0 fused; `check_rows`, a mask
    without the decomposition's zeroing of such rows), and a run-time scale
    that is 0 or not finite."""
    if not enabled():
        return None
    torch = _load_torch()
    fused = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default
    Tensor = torch.Tensor
    scale, key_transposed, check_rows = group.scale, group.key_transposed, group.check_rows
    has_mask, scale_op = group.mask is not None, group.scale_op

    def attend(q, k, v, m, c):
        if key_transposed:
            k = k.transpose(-2, -1)
        if q.dim() == 3:  # no heads: the kernel wants (batch, heads, length, features)
            q, k, v = q[None], k[None], v[None]
        if m is not None and m.dim() not in (2, 4):
            m = m.reshape((1,) * (4 - m.dim()) + tuple(m.shape))
        # the kernel reads any strides but the last one's, which must be 1
        # (a transposed key gives numbers that are wrong, not an error)
        if q.stride(-1) != 1:
            q = q.contiguous()
        if k.stride(-1) != 1:
            k = k.contiguous()
        if v.stride(-1) != 1:
            v = v.contiguous()
        if m is not None and m.stride(-1) != 1:
            m = m.contiguous()
        s = scale
        if c is not None:
            c = float(c.reshape(()))  # one element: 0-d, or (1,) from ONNX
            s = scale * c if scale_op == "mul" else (scale / c if c != 0 else math.inf)
        if not math.isfinite(s) or s == 0 or \
                (m is not None and check_rows and bool(torch.isneginf(m).all(-1).any())):
            if k.shape[-3] != q.shape[-3]:  # keys and values shared by groups of query heads
                r = q.shape[-3] // k.shape[-3]
                k, v = k.repeat_interleave(r, -3), v.repeat_interleave(r, -3)
            scores = torch.matmul(q, k.transpose(-2, -1)) * scale
            if c is not None:
                scores = scores * c if scale_op == "mul" else scores / c
            p = torch.softmax(scores if m is None else scores + m, -1)
            return torch.matmul(p, v).reshape(shape)
        try:
            # (its result follows q's layout: a view of it when that allows)
            return fused(q, k, v, attn_mask=m, scale=s)[0].reshape(shape)
        except RuntimeError as e:
            raise _users_data(e) from None

    def make(ins: list[int], out: int, keep: bool = False) -> Callable:
        qi, ki, vi = ins[:3]
        mi = ins[3] if has_mask else None
        ci = ins[-1] if scale_op is not None else None

        def step(env):
            q, k, v = env[qi], env[ki], env[vi]
            m = None if mi is None else env[mi]
            r = attend(q if type(q) is Tensor else _as_tensor(q), k if type(k) is Tensor else _as_tensor(k),
                       v if type(v) is Tensor else _as_tensor(v),
                       None if m is None else m if type(m) is Tensor else _as_tensor(m),
                       None if ci is None else env[ci])
            env[out] = r if keep or type(r) is not Tensor else r.numpy()

        return step

    return make


def _users_data(e: RuntimeError) -> ValueError:
    """ATen's own check failed (an index out of range): the user's data, which
    the executor reports as the op's error in ATen's first line of words."""
    text = str(e).strip()
    return ValueError(text.splitlines()[0] if text else "failed")


def _as_tensor(a):
    """A tensor sharing `a`'s memory (a copy only where torch cannot view it:
    negative strides)."""
    if type(a) is not np.ndarray:
        if isinstance(a, _torch.Tensor):
            return a
        a = np.asarray(a)
    if not a.flags.writeable:  # a broadcast constant: ATen only reads it here
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return _tensor_of(a)
    return _tensor_of(a)


def _tensor_of(a: np.ndarray):
    try:
        return _torch.from_numpy(a)
    except (ValueError, TypeError):  # negative strides, a byte order torch lacks
        return _torch.from_numpy(np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("=")))


def _as_array(t) -> np.ndarray:
    if isinstance(t, _torch.Tensor):
        return t.numpy()
    return np.asarray(t)


def threads_for_call():
    """Run this call's ATen kernels on at most `blas_cores()` threads: one on
    a machine oversubscribed by other work, where OpenMP's workers wait at
    every kernel's barrier for a thread the OS has put aside (an SGD update
    measured 4 ms instead of 0.2 at load 5 on 2 cores). The user's setting
    is restored when the call ends. (Grad mode is left as the caller has it:
    turning it off for the call saves autograd's dispatch layer, ~0.3 us an
    ATen call, but the two switches cost more than that on the MLP, 0.998-
    1.003 against 0.990-0.999 of eager, 2026-11-25.)"""
    if _torch is None:
        return None
    before = _torch.get_num_threads()
    # the load average counts this process's own busy threads: the caller's
    # and torch's workers (spinning between its calls, as eager torch's do)
    want = min(before, blas_cores(own_threads=before))
    if want == before:
        return None
    _torch.set_num_threads(want)
    return lambda: _torch.set_num_threads(before)


class AtenKernels(Plugin):
    """ATen's kernels for the executor (`provide`, `provide_attention`) and
    the thread setting of each call (tilefx/runtime.py)."""

    name = "aten-kernels"
    kernel_providers = (provide,)
    attention_providers = (provide_attention,)
    call_hooks = (threads_for_call,)


def install() -> None:
    """Install ATen's kernels and torch's result-type rules (once): what the
    torch frontend and the surfaces run with."""
    RUNTIME.install(TorchRules(), AtenKernels())
