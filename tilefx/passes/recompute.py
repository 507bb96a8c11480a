"""`ipu-recompute`: recompute forward values in the backward instead of
stashing them (`poptorch.recomputationCheckpoint`, PopART's
`autoRecomputation`).

In a training @main every forward value a backward op reads stays alive
from the forward to the backward (in a pipeline: stashed for every
micro-batch in flight). Recomputation keeps only some of them: every other
forward value a backward op needs is recomputed from the kept ones, right
before its first backward user, by clones of the forward ops between. The
numbers are unchanged; the machine model sees shorter activation lifetimes
(less memory) and the cloned ops (more cycles).

What is kept follows PopART's `RecomputationType` (`RECOMPUTATION_TYPES`,
the values of `opts._Popart.set("autoRecomputation", N)` and of
`popart.SessionOptions.autoRecomputation`):

- unset (PopTorch's default): `Pipeline` when the model is pipelined over
  more than one IPU (PopTorch's `Compiler::initSession` sets it unless the
  user did, graphcore/poptorch `popart_compiler/source/Compiler.cpp`);
  otherwise the checkpoints alone, as below.
- `Pipeline` (3): each pipeline stage's forward is recomputed in its
  backward from the stage's inputs (the values copied in from other stages,
  which are all the stage stashes, held on the stage's own IPU where PopART
  stashes the copy: `receive_stage_inputs`) and the model's checkpoints. The stage
  that computes the loss recomputes nothing after its last checkpoints (all
  of it without checkpoints): its backward follows its forward at once, so
  recomputing there would run the same ops twice in a row for no memory
  (PopART's `Pipeline::setFinalFwdStageRecomputation`). Not pipelined over
  several IPUs, the checkpoints alone.
- `None` (0): nothing is recomputed; checkpoints have no effect (PopTorch
  documents `recomputationCheckpoint` as acting "when recomputation is
  enabled").
- with checkpoints only (`ipu.recomputation_checkpoint`): the checkpoints
  and the function's arguments are kept, every other forward value the
  backward reads is recomputed from them.

Random ops (dropout) are never recomputed (their masks would differ): their
results are kept, like checkpoints. Clones are placed with their backward
user (`ipu.place` of the user). `Standard` (1), `NormOnly` (2) and
`RecomputeAll` (4) are not modelled: the compile config refuses them for
training (driver/config.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from tilefx.dialects.ipu import PLACE_KEY, PlacementAttr, RecomputationCheckpointOp
from tilefx.dialects.irutil import find_func, module_config, place
from tilefx.dialects.names import STAGES_KEY
from tilefx.passes import check_option

_KEPT_OPS = {"aten.native_dropout", "ipu.recomputation_checkpoint", "ipu.for",
             "ipu.ctc_beam_search_decoder", "ipu.custom_op", "ipu.print_tensor"}

# PopART's RecomputationType (popart/sessionoptions.hpp), by value
RECOMPUTATION_TYPES = {0: "None", 1: "Standard", 2: "NormOnly", 3: "Pipeline", 4: "RecomputeAll"}
NO_RECOMPUTATION, PIPELINE = 0, 3
# the ones ipu-recompute models (-1: unset, PopTorch's default)
MODELLED = (-1, NO_RECOMPUTATION, PIPELINE)


def _direction(op: Operation) -> str | None:
    p = place(op)
    return p.direction.data if p is not None else None


@dataclass(frozen=True)
class RecomputePass(ModulePass):
    """Recompute forward values in the backward from the kept ones."""

    name = "ipu-recompute"

    # PopART's autoRecomputation (RECOMPUTATION_TYPES); -1: the user did not set it
    auto_recomputation: int = -1

    def __post_init__(self):
        v = self.auto_recomputation
        check_option(self.name, isinstance(v, int) and not isinstance(v, bool) and v in MODELLED,
                     f"auto-recomputation must be -1 (unset), 0 (None) or 3 (Pipeline), got {v!r}")

    def apply(self, ctx: Context, module: ModuleOp) -> None:
        if any(isinstance(fn, func.FuncOp) and fn.sym_name.data == "main" for fn in module.ops):
            main = find_func(module, "main")  # (checked: a declaration is a diagnostic)
            recompute(main, stage_recomputation(module, main, self.auto_recomputation),
                      self.auto_recomputation != NO_RECOMPUTATION)


def pipelined_over_ipus(module: ModuleOp, main: func.FuncOp) -> bool:
    """Whether ipu-assign-stages made `main` a pipeline over more than one
    IPU (PopTorch counts the IPUs the model's ops use)."""
    stages = module_config(module, STAGES_KEY) or {}
    ipus = {p.ipu.data for o in main.body.block.ops if (p := place(o)) is not None and p.ipu.data >= 0}
    return stages.get("kind") == "pipelined" and len(ipus) > 1


def stage_recomputation(module: ModuleOp, main: func.FuncOp, auto_recomputation: int) -> int:
    """The forward stages PopART's Pipeline recomputation recomputes over
    when it applies (set, or unset, PopTorch's default, on a model pipelined
    over more than one IPU), else 0."""
    if auto_recomputation in (-1, PIPELINE) and pipelined_over_ipus(module, main):
        return int((module_config(module, STAGES_KEY) or {}).get("forward_stages", 0))
    return 0


def has_checkpoints(fn: func.FuncOp) -> bool:
    return any(op.name == "ipu.recomputation_checkpoint" for op in fn.body.block.ops)


def is_recomputable(v: SSAValue, block) -> bool:
    """A forward value of `block` the backward may recompute rather than
    keep: not a checkpoint, a random op's result or an argument."""
    owner = v.owner
    return isinstance(owner, Operation) and owner.parent_block() is block and \
        _direction(owner) == "fwd" and owner.name not in _KEPT_OPS and not owner.regions


def _forward_stage(op: Operation, backward_of: int) -> int:
    """The forward stage an op belongs to: its own, or for a backward op the
    forward stage it is the backward of (stage k's backward is 2P-2-k)."""
    s = place(op).stage.data
    return backward_of - s if _direction(op) == "bwd" and s >= 0 else s


def receive_stage_inputs(fn: func.FuncOp, forward_stages: int) -> None:
    """Each stage's inputs held where PopART holds them: copied once to the
    stage's IPU and stashed there (the IPU copy's result, which the stage's
    forward, its backward and its recomputation read), not sent again from
    the producer's IPU for the backward. A value of an earlier stage that a
    forward op of stage t reads goes through an identity on stage t (a
    checkpoint: kept) that stage t's ops read instead."""
    block = fn.body.block
    last = forward_stages - 1
    order = {o: i for i, o in enumerate(block.ops)}
    for o in list(block.ops):
        if _direction(o) != "fwd" or place(o) is None:
            continue
        s = place(o).stage.data
        for r in o.results:
            uses: dict[int, list] = {}
            for u in list(r.uses):
                user = u.operation
                if user.parent_block() is block and place(user) is not None and \
                        (t := _forward_stage(user, 2 * last)) > s:
                    uses.setdefault(t, []).append(u)
            for t, us in uses.items():
                readers = [u.operation for u in us if _direction(u.operation) == "fwd"]
                if not readers:
                    continue
                first = min(readers, key=order.__getitem__)
                held = RecomputationCheckpointOp.create(operands=[r], result_types=[r.type],
                                                        attributes={PLACE_KEY: place(first)})
                block.insert_op_before(held, first)
                for u in us:
                    u.operation.operands[u.index] = held.results[0]


def stage_kept(fn: func.FuncOp, forward_stages: int) -> set[SSAValue]:
    """The forward values Pipeline recomputation keeps on top of checkpoints
    and random results: each stage's inputs (a value read by an op of
    another stage, which an IPU copy carries and the reading stage
    stashes) and the loss stage's values from its last checkpoints on."""
    block = fn.body.block
    ops = [o for o in block.ops if place(o) is not None]
    last = forward_stages - 1  # (a forward constant may sit in a backward stage, with its user)
    kept: set[SSAValue] = set()
    for o in ops:
        if _direction(o) != "fwd":
            continue
        s = place(o).stage.data
        for r in o.results:
            if any(u.operation.parent_block() is block and place(u.operation) is not None
                   and _forward_stage(u.operation, 2 * last) != s for u in r.uses):
                kept.add(r)
    # the loss stage (PopART's setFinalFwdStageRecomputation): from the
    # frontier (its checkpoints that no later checkpoint of the stage depends
    # on, and the stage's inputs none of its checkpoints depends on) onwards,
    # nothing is recomputed
    final = [o for o in ops if _direction(o) == "fwd" and place(o).stage.data == last]
    in_final = set(final)

    def consumers(o: Operation):
        return [u.operation for r in o.results for u in r.uses if u.operation in in_final]

    feeds_checkpoint: set[Operation] = set()
    for o in reversed(final):
        if any(u.name == "ipu.recomputation_checkpoint" or u in feeds_checkpoint for u in consumers(o)):
            feeds_checkpoint.add(o)
    frontier = [o for o in final if o.name == "ipu.recomputation_checkpoint" and o not in feeds_checkpoint]
    for o in final:
        stage_inputs = [v for v in o.operands if isinstance(v.owner, Operation) and v.owner not in in_final
                        and _direction(v.owner) == "fwd"]
        if stage_inputs and not any(
                u in feeds_checkpoint or u.name == "ipu.recomputation_checkpoint"
                for v in stage_inputs for u in (x.operation for x in v.uses) if u in in_final):
            frontier.append(o)
    seen = set(frontier)
    while frontier:
        o = frontier.pop()
        kept.update(o.results)
        for u in consumers(o):
            if u not in seen:
                seen.add(u)
                frontier.append(u)
    return kept


def recompute(fn: func.FuncOp, forward_stages: int = 0, checkpoints: bool = True) -> int:
    """Rewrite `fn`; returns the number of forward ops cloned into the
    backward. `forward_stages`: PopART's Pipeline recomputation over that
    many forward stages (the stages' inputs kept, see `stage_kept`; 0: not
    by stage); `checkpoints`: the checkpoints' own recomputation (False:
    PopART's None, nothing recomputed)."""
    block = fn.body.block
    if not checkpoints or not (forward_stages or has_checkpoints(fn)):
        return 0
    if forward_stages:
        receive_stage_inputs(fn, forward_stages)
    kept = stage_kept(fn, forward_stages) if forward_stages else set()
    clones: dict[SSAValue, SSAValue] = {}
    count = 0

    def recomputable(v: SSAValue) -> bool:
        return v not in kept and is_recomputable(v, block)

    def clone_of(v: SSAValue, before: Operation) -> SSAValue:
        """`v` recomputed before `before`: its recomputable operands first
        (depth first without recursion: a stage recomputed from its inputs
        can be a long chain)."""
        nonlocal count
        stack = [v]
        while stack:
            w = stack[-1]
            if w in clones:
                stack.pop()
                continue
            todo = [x for x in w.owner.operands if x not in clones and recomputable(x)]
            if todo:
                stack += todo
                continue
            stack.pop()
            op = w.owner
            new = op.clone(value_mapper={x: clones.get(x, x) for x in op.operands})
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
