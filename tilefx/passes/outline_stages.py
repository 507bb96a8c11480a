"""`ipu-outline-stages`: group @main's ops into one `ipu.stage` region per
pipeline stage, in stage order, with an `ipu.copy` wherever a stage uses a
value computed on another IPU.

Needs `ipu-assign-stages` first (every op's placement has a stage and an
IPU). Stage s's ops keep their program order; the regions run in stage
order 0, 1, ..., which is a valid order because stage ids never decrease
along the data flow (the forward of stage k comes before stage k+1, the
backward of stage k, numbered 2P-2-k, after the backward of stage k+1).
Phased execution only needs phases not to decrease: the stages of one phase
run at once and may feed each other both ways, and then each stage gets one
region per run of its ops in phase order (see `_phase_runs`).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from tilefx.dialects.ipu import PLACE_KEY, CopyOp, PlacementAttr, StageOp, YieldOp
from tilefx.passes.assign_stages import PlacementError
from tilefx.dialects.irutil import find_func, module_config, place
from tilefx.dialects.names import STAGES_KEY


def _staged(o: Operation) -> PlacementAttr:
    """The placement of `o`, which must have a stage."""
    p = place(o)
    if p is None or p.stage.data < 0:
        raise PlacementError(f"{o.name} has no stage: run ipu-assign-stages first")
    return p


@dataclass(frozen=True)
class OutlineStagesPass(ModulePass):
    name = "ipu-outline-stages"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        main = find_func(op, "main")
        block = main.body.block
        ret = block.last_op
        assert isinstance(ret, func.ReturnOp)
        ops = [o for o in block.ops if o is not ret]
        if any(isinstance(o, StageOp) for o in ops):
            return  # already outlined
        stage_of = {o: _staged(o).stage.data for o in ops}
        back = [(o, v.owner) for o in ops for v in o.operands
                if isinstance(v.owner, Operation) and stage_of[v.owner] > stage_of[o]]
        if not back:
            groups = [[o for o in ops if stage_of[o] == s] for s in sorted(set(stage_of.values()))]
        else:
            phase_of = {o: _staged(o).phase.data for o in ops}
            bad = [(o, src) for o, src in back if phase_of[src] > phase_of[o]] if _is_phased(op) else back
            if bad:
                o, src = bad[0]
                raise PlacementError(
                    f"{o.name} (stage {stage_of[o]}) uses a value of {src.name} from the later "
                    f"stage {stage_of[src]}")
            groups = _phase_runs(ops, stage_of, phase_of)
        for members in groups:
            s = stage_of[members[0]]
            first = _staged(members[0])
            ipu = first.ipu.data
            # a constant (an op without operands) sits with its first user and
            # keeps the direction of the op it was made for: the stage's work
            # says which pass the stage is
            working = [o for o in members if o.operands] or members
            directions = {_staged(o).direction.data for o in working}
            direction = directions.pop() if len(directions) == 1 else "fwd+bwd"
            body = Block()
            copies: dict[SSAValue, SSAValue] = {}
            for o in members:
                o.detach()
                body.add_op(o)
            member_set = set(members)
            # copies for values computed on another IPU
            for o in members:
                for i, v in enumerate(o.operands):
                    src = v.owner
                    if isinstance(src, Operation) and src not in member_set:
                        src_ipu = _src_ipu(src)
                        if src_ipu is not None and src_ipu != ipu:
                            if v not in copies:
                                c = CopyOp.build(operands=[v], result_types=[v.type], properties={
                                    "src": IntegerAttr(src_ipu, i64), "dst": IntegerAttr(ipu, i64)},
                                    attributes={PLACE_KEY: first})
                                body.insert_op_before(c, body.first_op)
                                copies[v] = c.results[0]
                            o.operands[i] = copies[v]
            # values used outside become the stage's results
            escaping = [r for o in members for r in o.results
                        if any(u.operation.parent_op() is not None and
                               _outside(u.operation, member_set, copies) for u in r.uses)]
            body.add_op(YieldOp.build(operands=[escaping]))
            stage_op = StageOp.build(
                properties={"stage": IntegerAttr(s, i64), "ipu": IntegerAttr(ipu, i64),
                            "phase": IntegerAttr(first.phase.data, i64),
                            "direction": StringAttr(direction)},
                result_types=[[r.type for r in escaping]], regions=[Region(body)])
            block.insert_op_before(stage_op, ret)
            for r, new in zip(escaping, stage_op.results):
                for use in list(r.uses):
                    if _outside(use.operation, member_set, copies):
                        use.operation.operands[use.index] = new


def _is_phased(module: ModuleOp) -> bool:
    info = module_config(module, STAGES_KEY)
    return info is not None and str(info.get("kind", "")).endswith("phased")


def _phase_runs(ops: list, stage_of: dict, phase_of: dict) -> list[list]:
    """Regions for phased execution whose stages of one phase exchange values both
    ways (they run at once on their IPUs: the guide's ParallelPhasedExecution
    example, PopTorch user guide, 4.4.1 "Annotations"): the ops in phase order (values never flow to an
    earlier phase; within a phase, program order), cut into runs of one stage. A
    stage may then have several regions, which the machine model adds up."""
    ordered = sorted(ops, key=lambda o: phase_of[o])  # stable: program order within a phase
    groups: list[list] = []
    for o in ordered:
        if groups and stage_of[groups[-1][0]] == stage_of[o]:
            groups[-1].append(o)
        else:
            groups.append([o])
    return groups


def _outside(user: Operation, members: set, copies: dict) -> bool:
    if isinstance(user, YieldOp):
        return False
    return user not in members and not (isinstance(user, CopyOp) and user.results[0] in copies.values())


def _src_ipu(src: Operation) -> int | None:
    if isinstance(src, StageOp):
        return src.ipu.value.data
    p = place(src)
    return p.ipu.data if p is not None else None
