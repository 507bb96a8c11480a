"""Attention groups: which chains of ops the executor may run as one attention kernel.

Attention reaches the IR as a chain, whether the model writes it out or calls
`F.scaled_dot_product_attention` (which the trace decomposes): two batched
products around a softmax, each operand flattened to three dimensions by an
expand, a copy and a view, with a scale and perhaps an additive mask between:

    s = bmm(view(clone(expand(q))), view(clone(expand(k^T))))      (B*H, L, S)
    p = softmax(view(s) * scale [+ mask], dim=-1)
    o = view(bmm(view(expand(p)), view(clone(expand(v)))))          (B, H, L, E)

Run op by op that is three copies of the operands and four passes over the
(B, H, L, S) scores. ATen's fused CPU kernel for attention, the one eager
torch runs for `F.scaled_dot_product_attention`, reads q, k and v where they
are (strided views of the projections) and keeps the scores in cache-sized
blocks: one layer of the benchmark encoder in 1.2 ms against 1.6-2.1 for the
chain. Its results differ from the chain's in the last bits only (an online
softmax, the scale applied once).

A group is:
- `bmm(a, b)` whose operands, seen through views that only split or merge
  the leading dimensions, same-shape expands and copies, are q (..., L, E)
  and k^T (..., E, S) with the same leading dimensions; a `mul.Scalar` on
  each (torch's decomposition scales both by sqrt(scale)) folds into the
  scale, and a `permute` swapping the last two dimensions of k is looked
  through, so the kernel reads k itself;
- then at most one scale (`mul`/`div` by a Python scalar, a 0-d
  `scalar_tensor`, or any other single f32 value, which the step reads as
  it runs: an ONNX graph's constant is an argument), at most one additive f32
  `mask`, and `_softmax` over the last dimension;
- optionally the decomposition's zeroing of rows that are masked out
  entirely (`where(~any(x != -inf, -1), 0, p)`): the fused kernel does the
  same;
- optionally a copy (dropout in eval), then `bmm(p, v)` with v (..., S, E)
  seen the same way, E the same as q's (the kernel's condition);
- keys and values whose heads are each repeated for a group of query heads
  (grouped-query attention: `view(clone(expand(unsqueeze(x, 2))))`, llama's
  `repeat_kv`) are read unrepeated, (B, H / r, S, E): the kernel shares
  them itself, with no copy;
- every value between the first member and the root feeds members only.
  So nothing else reads the scores or the probabilities, which a training
  step's backward does: groups are found in forward-only code.

A mask without the row zeroing differs from the kernel on one input only: a
row of -inf gives NaN op by op and 0 fused. The executor's step checks for
such a row and then computes the chain instead (`AttentionGroup.check_rows`).

`attention_groups(fn)` finds them, leaving the IR as it is;
`attention_plan(fn, kernel_of)` keeps those a kernel provider takes, as the
executor runs them (`AttentionGroups`). `passes/fuse_attention.py` writes the
groups on the IR for tilefx-opt. The machine model ignores them: how the host
simulator evaluates attention is not an IPU cost, and PopART computes it op
by op.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import f32
from xdsl.ir import Block, Operation, SSAValue

from tilefx.dialects.aten import op_props
from tilefx.dialects.irutil import blocks_of, shape_of

# ops an operand is seen through on its way to a product: they move no numbers
# the kernel needs moved (views of leading dimensions, same-shape expands, copies)
_FLATTENING = frozenset({"aten.view", "aten._unsafe_view", "aten.clone", "aten.expand"})


@dataclass(frozen=True)
class AttentionGroup:
    """Members in program order; the last one is the root, whose result is
    the attention output: (..., L, E) with q's leading dimensions, or the
    product's (N, L, E)."""

    ops: tuple[Operation, ...]
    query: SSAValue  # (..., L, E)
    key: SSAValue  # (..., S, E), or (..., E, S) when key_transposed
    value: SSAValue  # (..., S, E)
    mask: SSAValue | None  # added to the scaled scores, broadcast to (..., L, S)
    scale: float
    key_transposed: bool
    check_rows: bool  # a mask without the row zeroing: the step checks for all -inf rows
    # a one-element value the scores are divided ("div") or multiplied ("mul") by, known
    # only at run time (an ONNX graph's constant comes in as an argument)
    scale_value: SSAValue | None = None
    scale_op: str | None = None

    @property
    def root(self) -> Operation:
        return self.ops[-1]


def _f32(v: SSAValue) -> bool:
    return getattr(v.type, "element_type", None) == f32


def _owner(v: SSAValue, name: str | tuple[str, ...], uses: int = 1) -> Operation | None:
    """The op of that name that made v, if v has `uses` uses (the caller
    knows them for members: by default, v feeds nothing else)."""
    op = v.owner
    names = (name,) if isinstance(name, str) else name
    if isinstance(op, Operation) and op.name in names and len(list(v.uses)) == uses:
        return op
    return None


def _leading_only(src: tuple[int, ...], dst: tuple[int, ...]) -> bool:
    """A reshape that only splits or merges dimensions before the last two."""
    return len(src) >= 2 and len(dst) >= 2 and src[-2:] == dst[-2:] and \
        math.prod(src[:-2]) == math.prod(dst[:-2])


def _through(v: SSAValue, members: list[Operation], uses: int = 1, operand: bool = True) -> SSAValue:
    """The value v was flattened from (views of leading dimensions,
    same-shape expands, copies), adding the ops passed to `members`.
    `uses`: v's own, all by members (_owner). An `operand` of a product is
    followed through views that merge dimensions only, up to four (the
    kernel's), so it stops where q, k and v have their heads: grouped keys
    and values shared by several heads stop at the view that repeats them."""
    while True:
        op = _owner(v, tuple(_FLATTENING), uses)
        uses = 1
        if op is None:
            return v
        src, dst = shape_of(op.operands[0], None), shape_of(v, None)
        if src is None or dst is None:
            return v
        if op.name == "aten.expand" and src != dst:
            return v
        if op.name in ("aten.view", "aten._unsafe_view") and (
                not _leading_only(src, dst) or (operand and not len(dst) <= len(src) <= 4)):
            return v
        members.append(op)
        v = op.operands[0]


def _shared_heads(v: SSAValue, members: list[Operation]) -> SSAValue | None:
    """x (B, Hkv, S, E) where v (B, Hkv * r, S, E) is x's heads each
    repeated r times in place (grouped-query attention's `repeat_kv`, and
    the decomposition of SDPA's `enable_gqa`): view(clone(expand(
    unsqueeze(x, 2)))), without the clone for one head (multi-query). The
    kernel reads x itself, query head h using x's head h // r. None
    (members untouched) for anything else."""
    view = _owner(v, ("aten.view", "aten._unsafe_view"))
    if view is None:
        return None
    # the copy is absent where the view needs none (one key/value head: multi-query)
    clone = _owner(view.operands[0], "aten.clone")
    expand = _owner(clone.operands[0] if clone else view.operands[0], "aten.expand")
    single = expand and _owner(expand.operands[0], ("aten.unsqueeze", "aten.view", "aten._unsafe_view"))
    if single is None:
        return None
    x = single.operands[0]
    xs, ss, es, vs = (shape_of(w, None) for w in (x, single.results[0], expand.results[0], v))
    if xs is None or len(xs) != 4 or ss != xs[:2] + (1,) + xs[2:] or es is None or \
            es != xs[:2] + (es[2],) + xs[2:] or vs != (xs[0], xs[1] * es[2]) + xs[2:]:
        return None
    members.extend(op for op in (view, clone, expand, single) if op is not None)
    return x


def _constant(v: SSAValue) -> float | None:
    """The value of a 0-d `scalar_tensor`."""
    op = v.owner
    if isinstance(op, Operation) and op.name == "aten.scalar_tensor" and shape_of(v, None) == ():
        s = op_props(op).get("s")
        if isinstance(s, (int, float)) and not isinstance(s, bool):
            return float(s)
    return None


def _scale_of(op: Operation) -> float | None:
    """The factor a scale op multiplies by, or None."""
    props = op_props(op)
    if op.name in ("aten.mul.Scalar", "aten.div.Scalar"):
        c = props.get("other")
        c = float(c) if isinstance(c, (int, float)) and not isinstance(c, bool) else None
    elif op.name in ("aten.mul.Tensor", "aten.div.Tensor"):
        c = _constant(op.operands[1])
    else:
        return None
    if c is None or not math.isfinite(c) or c == 0:
        return None
    if op.name.startswith("aten.div"):
        # the kernel divides by the divisor's f32 value
        return float(1 / np.float32(c)) if op.name == "aten.div.Tensor" else 1 / c
    return c


def _unscaled(v: SSAValue, members: list[Operation]) -> tuple[SSAValue, float]:
    """v before a `mul.Scalar` that feeds nothing else (torch's decomposition
    scales q and k^T each by sqrt(scale)), and its factor (1 without one)."""
    if (mul := _owner(v, "aten.mul.Scalar")) is not None and (f := _scale_of(mul)) is not None:
        members.append(mul)
        return mul.operands[0], f
    return v, 1.0


def _row_zeroing(x: SSAValue, p: SSAValue, members: list[Operation]) -> SSAValue | None:
    """torch's decomposition of masked attention sets rows whose scores `x`
    are all -inf to 0: `where(~any(~(x == -inf), -1, keepdim), zeros_like(p), p)`.
    Returns that where's result, adding the chain to `members`."""
    uses = [u.operation for u in x.uses]
    eq = next((u for u in uses if u.name == "aten.eq.Scalar"), None)
    if eq is None or op_props(eq).get("other") != -math.inf:
        return None
    chain = [eq]
    v = eq.results[0]
    for name in ("aten.logical_not", "aten.any.dim", "aten.logical_not"):
        uses_v = [u.operation for u in v.uses]
        if len(uses_v) != 1 or uses_v[0].name != name:
            return None
        op = uses_v[0]
        if name == "aten.any.dim":
            props = op_props(op)
            rank = len(shape_of(x, None) or ())
            if props.get("dim") not in (-1, rank - 1) or not props.get("keepdim"):
                return None
        chain.append(op)
        v = op.results[0]
    where = next((u.operation for u in v.uses), None)
    p_users = [u.operation for u in p.uses]
    if where is None or where.name != "aten.where.self" or len(list(v.uses)) != 1 or \
            len(p_users) != 2 or where.operands[0] is not v or where.operands[2] is not p:
        return None
    zeros = where.operands[1].owner
    if not isinstance(zeros, Operation) or zeros.name != "aten.full_like" or zeros.operands[0] is not p \
            or op_props(zeros).get("fill_value") != 0 or len(list(zeros.results[0].uses)) != 1 \
            or set(p_users) != {zeros, where}:
        return None
    members.extend(chain + [zeros, where])
    return where.results[0]


def _match(softmax: Operation) -> AttentionGroup | None:
    props = op_props(softmax)
    x, p = softmax.operands[0], softmax.results[0]
    rank = len(shape_of(x, None) or ())
    if rank not in (3, 4) or props.get("dim") not in (-1, rank - 1) or props.get("half_to_float") \
            or not _f32(x) or not _f32(p):
        return None
    members: list[Operation] = [softmax]
    # after the softmax: the row zeroing, then (through copies and views) the second product
    x_users = list(x.uses)
    after = p
    zeroed = False
    if len(x_users) == 2:
        after = _row_zeroing(x, p, members)
        if after is None:
            return None
        zeroed = True
    elif len(x_users) != 1:
        return None
    uses = list(after.uses)
    v = after
    while len(uses) == 1 and uses[0].operation.name in _FLATTENING:
        op = uses[0].operation
        if op.name == "aten.expand" and shape_of(op.operands[0], None) != shape_of(op.results[0], None):
            return None
        if op.name in ("aten.view", "aten._unsafe_view") and \
                not _leading_only(shape_of(op.operands[0], None), shape_of(op.results[0], None)):
            return None
        members.append(op)
        v = op.results[0]
        uses = list(v.uses)
    if len(uses) != 1 or uses[0].operation.name != "aten.bmm" or uses[0].index != 0:
        return None
    bmm2 = uses[0].operation
    # before the softmax: the mask, the scale, views, the first product. The
    # softmax's operand feeds members only (the softmax, and the zeroing's test)
    scale = 1.0
    mask = None
    y, y_uses = x, len(x_users)
    add = _owner(y, "aten.add.Tensor", y_uses)
    if add is not None and op_props(add).get("alpha", 1) == 1:
        # the scores are the operand of the result's shape (a mask may come first)
        k = 0 if shape_of(add.operands[0], None) == shape_of(x, None) else 1
        s, m = add.operands[k], add.operands[1 - k]
        if shape_of(s, None) == shape_of(x, None) and _f32(m) and m is not s:
            members.append(add)
            mask, y, y_uses = m, s, 1
    scale_value, scale_op = None, None
    if (sc := _owner(y, ("aten.mul.Scalar", "aten.div.Scalar", "aten.mul.Tensor", "aten.div.Tensor"), y_uses)) \
            is not None and shape_of(sc.operands[0], None) == shape_of(y, None):
        if (f := _scale_of(sc)) is not None:
            members.append(sc)
            scale *= f
            y, y_uses = sc.operands[0], 1
        elif sc.name.endswith(".Tensor") and _f32(sc.operands[1]) and \
                shape_of(sc.operands[1], None) is not None and math.prod(shape_of(sc.operands[1], None)) == 1:
            members.append(sc)  # one f32 value (0-d, or (1,) from ONNX) the step reads as it runs
            scale_value, scale_op = sc.operands[1], sc.name[len("aten."):-len(".Tensor")]
            y, y_uses = sc.operands[0], 1
    scores = _through(y, members, y_uses, operand=False)
    bmm1 = _owner(scores, "aten.bmm", y_uses if scores is y else 1)
    if bmm1 is None:
        return None
    members.append(bmm1)
    q, fq = _unscaled(_through(bmm1.operands[0], members), members)
    kt, fk = _unscaled(_through(bmm1.operands[1], members), members)
    scale *= fq * fk
    key, transposed = kt, True
    if (perm := _owner(kt, "aten.permute")) is not None:
        dims = [int(d) for d in op_props(perm)["dims"]]
        n = len(dims)
        if dims == list(range(n - 2)) + [n - 1, n - 2]:
            members.append(perm)
            key, transposed = perm.operands[0], False
    value = _through(bmm2.operands[1], members)
    # keys and values shared by groups of query heads: the kernel reads them unrepeated
    if (_owner(key, ("aten.view", "aten._unsafe_view")) is not None
            and _owner(value, ("aten.view", "aten._unsafe_view")) is not None):
        shared: list[Operation] = []
        k1, v1 = _shared_heads(key, shared), _shared_heads(value, shared)
        if k1 is not None and v1 is not None and shape_of(k1, None)[1] == shape_of(v1, None)[1]:
            members.extend(shared)
            key, value = k1, v1
    members.append(bmm2)  # the root, or the view of its output below (_block_groups orders them)
    out = bmm2.results[0]
    if (view := next((u.operation for u in out.uses), None)) is not None and len(list(out.uses)) == 1 \
            and view.name in ("aten.view", "aten._unsafe_view") \
            and shape_of(view.results[0], None) == shape_of(q, None)[:-1] + (shape_of(value, None)[-1],):
        members.append(view)
    # the kernel's conditions: q (..., L, E), k (..., S, E), v (..., S, E), one leading shape
    qs, ks, vs = shape_of(q, None), shape_of(key, None), shape_of(value, None)
    if qs is None or ks is None or vs is None or not all(_f32(t) for t in (q, key, value)):
        return None
    if transposed:
        ks = ks[:-2] + (ks[-1], ks[-2]) if len(ks) >= 2 else ks
    if not (len(qs) == len(ks) == len(vs) and len(qs) in (3, 4) and ks[:-2] == vs[:-2]
            and qs[-1] == ks[-1] == vs[-1] and ks[-2] == vs[-2] and min(qs + ks) > 0):
        return None
    if qs[:-2] != ks[:-2] and not (len(qs) == 4 and qs[0] == ks[0] and qs[1] % ks[1] == 0):
        return None  # one leading shape, or (B, H) queries over (B, H / r) shared keys
    if math.prod(qs[:-2]) != (shape_of(scores, None) or (0,))[0]:
        return None
    if mask is not None and (shape_of(x, None) or ())[:-2] != qs[:-2]:
        return None  # the mask broadcasts to the scores' shape, which the kernel takes as q's
    ops = set(members)
    if any(v in ops for v in (q.owner, key.owner, value.owner)) or \
            any(v is not None and v.owner in ops for v in (mask, scale_value)):
        return None
    return AttentionGroup(tuple(members), q, key, value, mask, scale, transposed,
                          mask is not None and not zeroed, scale_value, scale_op)


def _block_groups(block: Block) -> list[AttentionGroup]:
    order = {op: i for i, op in enumerate(block.ops)}
    groups = []
    taken: set[Operation] = set()
    for op in block.ops:
        if op.name != "aten._softmax":
            continue
        g = _match(op)
        if g is None or any(m in taken or m not in order for m in g.ops):
            continue
        # every member in this block, the root last; each member's result read by members only
        # (the root's by anything)
        members = set(g.ops)
        root = max(g.ops, key=order.__getitem__)
        if any(u.operation not in members for m in g.ops if m is not root
               for r in m.results for u in r.uses):
            continue
        ops = tuple(sorted(g.ops, key=order.__getitem__))
        groups.append(dataclasses.replace(g, ops=ops))
        taken |= members
    return groups


def attention_groups(fn: func.FuncOp) -> list[AttentionGroup]:
    """The attention groups of every block of `fn` (stage bodies included)."""
    return [g for block in blocks_of(fn) for g in _block_groups(block)]


@dataclass(frozen=True)
class AttentionGroups:
    """The attention groups the executor runs as one step: by root, the group
    and the kernel that runs it (what `kernel_of` gave); `members`, every op
    of them, the roots included (computed by their group's step)."""

    at: dict[Operation, tuple[AttentionGroup, Any]]
    members: frozenset[Operation]


def attention_plan(fn: func.FuncOp, kernel_of: Callable[[AttentionGroup], Any]) -> AttentionGroups:
    """The groups of `attention_groups(fn)` that run as one kernel: those for
    which `kernel_of(group)` (a kernel provider's, tilefx/runtime.py) gives
    one; the others' members run op by op, each on its own kernel."""
    at: dict[Operation, tuple[AttentionGroup, Any]] = {}
    members: set[Operation] = set()
    for g in attention_groups(fn):
        kernel = kernel_of(g)
        if kernel is not None:
            at[g.root] = (g, kernel)
            members.update(g.ops)
    return AttentionGroups(at, frozenset(members))
