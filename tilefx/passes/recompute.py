"""`ipu-recompute`: recompute forward values in the backward instead of
stashing them (`poptorch.recomputationCheckpoint`).

In a training @main every forward value a backward op reads stays alive
from the forward to the backward (in a pipeline: stashed for every
micro-batch in flight). Once the model marks checkpoints
(`ipu.recomputation_checkpoint`), only the checkpoints (and the function's
arguments) are kept: every other forward value a backward op needs is
recomputed from them, right before its first backward user, by clones of
the forward ops between the checkpoints. The numbers are unchanged; the
machine model sees shorter activation lifetimes (less memory) and the
cloned ops (more cycles).

Random ops (dropout) are never recomputed (their masks would differ): their
results are kept, like checkpoints. A module without checkpoints is left
alone. Clones are placed with their backward user (`ipu.place` of the user).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from tilefx.dialects.ipu import PLACE_KEY, PlacementAttr
from tilefx.dialects.irutil import find_func, place

_KEPT_OPS = {"aten.native_dropout", "ipu.recomputation_checkpoint", "ipu.for",
             "ipu.ctc_beam_search_decoder", "ipu.custom_op", "ipu.print_tensor"}


def _direction(op: Operation) -> str | None:
    p = place(op)
    return p.direction.data if p is not None else None


@dataclass(frozen=True)
class RecomputePass(ModulePass):
    """Recompute the forward segments between checkpoints in the backward."""

    name = "ipu-recompute"

    def apply(self, ctx: Context, module: ModuleOp) -> None:
        if any(isinstance(fn, func.FuncOp) and fn.sym_name.data == "main" for fn in module.ops):
            recompute(find_func(module, "main"))  # (checked: a declaration is a diagnostic)


def has_checkpoints(fn: func.FuncOp) -> bool:
    return any(op.name == "ipu.recomputation_checkpoint" for op in fn.body.block.ops)


def is_recomputable(v: SSAValue, block) -> bool:
    """A forward value of `block` the backward recomputes rather than keeps
    (once the function has checkpoints): not a checkpoint, a random op's
    result or an argument."""
    owner = v.owner
    return isinstance(owner, Operation) and owner.parent_block() is block and \
        _direction(owner) == "fwd" and owner.name not in _KEPT_OPS and not owner.regions


def recompute(fn: func.FuncOp) -> int:
    """Rewrite `fn`; returns the number of forward ops cloned into the backward."""
    block = fn.body.block
    if not has_checkpoints(fn):
        return 0
    clones: dict[SSAValue, SSAValue] = {}
    count = 0

    def recomputable(v: SSAValue) -> bool:
        return is_recomputable(v, block)

    def clone_of(v: SSAValue, before: Operation) -> SSAValue:
        nonlocal count
        if not recomputable(v):
            return v
        if v in clones:
            return clones[v]
        op = v.owner
        mapper = {o: clone_of(o, before) for o in op.operands}
        new = op.clone(value_mapper=mapper)
        new.attributes[PLACE_KEY] = before.attributes.get(PLACE_KEY, PlacementAttr("bwd"))
        block.insert_op_before(new, before)
        count += 1
        for old_r, new_r in zip(op.results, new.results):
            clones[old_r] = new_r
        return clones[v]

    for op in list(block.ops):
        if _direction(op) != "bwd":
            continue
        for i, v in enumerate(op.operands):
            if recomputable(v):
                op.operands[i] = clone_of(v, op)
    return count
