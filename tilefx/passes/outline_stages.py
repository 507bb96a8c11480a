"""`ipu-outline-stages`: group @main's ops into one `ipu.stage` region per
pipeline stage, in stage order, with an `ipu.copy` wherever a stage uses a
value computed on another IPU.

Needs `ipu-assign-stages` first (every op's placement has a stage and an
IPU). Stage s's ops keep their program order; the regions run in stage
order 0, 1, ..., which is a valid order because stage ids never decrease
along the data flow (the forward of stage k comes before stage k+1, the
backward of stage k, numbered 2P-2-k, after the backward of stage k+1).
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
from tilefx.dialects.irutil import find_func


def _place(o: Operation) -> PlacementAttr:
    p = o.attributes.get(PLACE_KEY)
    if not isinstance(p, PlacementAttr) or p.stage.data < 0:
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
        stage_of = {o: _place(o).stage.data for o in ops}
        for o in ops:
            for v in o.operands:
                if isinstance(v.owner, Operation) and stage_of[v.owner] > stage_of[o]:
                    raise PlacementError(
                        f"{o.name} (stage {stage_of[o]}) uses a value of {v.owner.name} from the later "
                        f"stage {stage_of[v.owner]}")
        stages = sorted(set(stage_of.values()))
        for s in stages:
            members = [o for o in ops if stage_of[o] == s]
            first = _place(members[0])
            ipu = first.ipu.data
            directions = {_place(o).direction.data for o in members}
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


def _outside(user: Operation, members: set, copies: dict) -> bool:
    if isinstance(user, YieldOp):
        return False
    return user not in members and not (isinstance(user, CopyOp) and user.results[0] in copies.values())


def _src_ipu(src: Operation) -> int | None:
    if isinstance(src, StageOp):
        return src.ipu.value.data
    p = src.attributes.get(PLACE_KEY)
    return p.ipu.data if isinstance(p, PlacementAttr) else None
