"""Fusion groups: which chains of float32 elementwise ops the executor may run as one step.

A chain such as LayerNorm's backward or an attention scale is a run of
aten elementwise ops each reading and writing a whole tensor. Evaluated op
by op, every intermediate is a fresh array and one more pass over memory.
These are the groups the numpy executor can evaluate as one step with its
intermediates written in place (backend/fused_steps.py):

- a member is an aten op of `FUSIBLE` whose result and tensor operands are
  all f32 (so torch's type promotion is the identity and the group computes
  exactly what the op-by-op kernels compute), except that the arithmetic
  ops of `SCALAR_OPERAND_OPS` may also take a 0-d tensor of another real
  dtype (`x * scalar_tensor(256)` in a decomposed layer-norm backward):
  with an f32 result the kernel casts that value to f32 first, and so does
  the executor;
- a member's result feeds exactly one op, a member of the same group in the
  same block; the group's root is the one member whose result is used
  elsewhere (several times, by another op, or returned);
- groups have at least two members.

`fusion_groups(fn)` finds them, leaving the IR as it is; `fusion_plan(fn,
exclude, fused)` keeps those the executor runs fused (`FusionGroups`: only
where every member would otherwise run on numpy's kernels, as ATen's kernels
op by op beat numpy's fused chunks). `passes/fuse_elementwise.py` writes the
groups on the IR for tilefx-opt. The machine model ignores them: how the
host simulator evaluates a chain is not a device cost.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.dialects import func
from xdsl.dialects.builtin import AnyFloat, IntegerType, f32
from xdsl.ir import Block, Operation, SSAValue

from tilefx.dialects.aten import op_name
from tilefx.dialects.aten_traits import ops_where
from tilefx.dialects.irutil import blocks_of

# the ops the executor evaluates with numpy ufuncs (backend/fused_steps.py), and
# the members whose 0-d operands may be of any integer or float dtype (cast
# to f32): op traits (dialects/aten_traits.py)
FUSIBLE = frozenset(op_name(n) for n in ops_where(fusible=True))
SCALAR_OPERAND_OPS = frozenset(op_name(n) for n in ops_where(scalar_operand=True))


def _is_f32_tensor(v: SSAValue) -> bool:
    t = v.type
    return hasattr(t, "get_shape") and getattr(t, "element_type", None) == f32


def is_real_scalar(v: SSAValue) -> bool:
    """A 0-d tensor of an integer or float dtype (not bool, not complex)."""
    t = v.type
    if not hasattr(t, "get_shape") or tuple(t.get_shape()) != ():
        return False
    et = getattr(t, "element_type", None)
    return isinstance(et, AnyFloat) or (isinstance(et, IntegerType) and et.width.data > 1)


def is_fusible(op: Operation) -> bool:
    if op.name not in FUSIBLE or len(op.results) != 1 or not _is_f32_tensor(op.results[0]):
        return False
    scalars_ok = op.name in SCALAR_OPERAND_OPS
    return all(_is_f32_tensor(v) or (scalars_ok and is_real_scalar(v)) for v in op.operands)


def _single_user(v: SSAValue) -> Operation | None:
    uses = list(v.uses)
    return uses[0].operation if len(uses) == 1 else None


@dataclass(frozen=True)
class FusionGroup:
    """Members in program order; the last one is the root."""

    ops: tuple[Operation, ...]

    @property
    def root(self) -> Operation:
        return self.ops[-1]


def _block_groups(block: Block, exclude: frozenset[Operation] | set[Operation]) -> list[FusionGroup]:
    group_of: dict[Operation, list[Operation]] = {}
    for op in block.ops:
        if not is_fusible(op) or op in exclude:
            continue
        members = [op]
        for v in op.operands:
            p = v.owner
            if isinstance(p, Operation) and p in group_of and _single_user(v) is op:
                members = group_of.pop(p) + members
        for m in members:
            group_of[m] = members
    roots: dict[int, list[Operation]] = {}
    for members in group_of.values():
        roots[id(members)] = members
    order = {op: i for i, op in enumerate(block.ops)}
    out = [FusionGroup(tuple(sorted(m, key=order.__getitem__))) for m in roots.values() if len(m) > 1]
    return sorted(out, key=lambda g: order[g.root])


def fusion_groups(fn: func.FuncOp, exclude: frozenset[Operation] | set[Operation] = frozenset()
                  ) -> list[FusionGroup]:
    """The elementwise groups of every block of `fn` (stage bodies included),
    leaving out the ops in `exclude` (another group's: an attention's scale)."""
    return [g for block in blocks_of(fn) for g in _block_groups(block, exclude)]


@dataclass(frozen=True)
class FusionGroups:
    """The fusion groups the executor runs as one fused step, by root;
    `members`, every op of them, the roots included."""

    at: dict[Operation, FusionGroup]
    members: frozenset[Operation]


def fusion_plan(fn: func.FuncOp, exclude: frozenset[Operation] | set[Operation],
                fused: Callable[[FusionGroup], bool]) -> FusionGroups:
    """The groups of `fusion_groups(fn, exclude)` for which `fused(group)`:
    the executor's test of whether every member would otherwise run on
    numpy's kernels (a chain with a member a provider takes runs op by op on
    the providers' kernels, which beat numpy's fused chunks)."""
    at = {g.root: g for g in fusion_groups(fn, exclude=exclude) if fused(g)}
    return FusionGroups(at, frozenset(op for g in at.values() for op in g.ops))
