"""`lower-to-device`: the outlined graph IR -> the device IR (`tile` dialect).

Runs after `ipu-outline-stages`. Every compute op gets the cost model's
answer (`tile.cost`) and the tile mapping of its result (`tile.mapping`: a
`#tile.grid` plan for matmuls and convolutions, a `#tile.linear` spread for
the rest); matmul-like ops get a `tile.exchange` per operand (the operand
is brought to the tiles of the plan) and every compute op is followed by
its `tile.sync`; `ipu.copy` becomes `tile.ipu_copy` over the IPU-links;
inputs arrive by `tile.host_in`, outputs leave by `tile.host_out`; with the
optimizer state off chip, @update loads it with `tile.remote_load` and
stores it back with `tile.remote_store`; off-chip weights, activations and
accumulators get the loads and stores backend/offload.py plans (the ones
the profile times) in @main, and @update loads and stores the weights and
accumulators it reads; a sharded weight is `tile.all_gather`ed before each
stretch of its uses. The numbers do not change.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, IntegerAttr, ModuleOp, StringAttr, TensorType, i64
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from tilefx.backend.costs import (
    VIEW_OPS,
    _bytes,
    _itemsize,
    _shape,
    is_resident,
    op_cost,
    plan_matmul,
    proportion_of,
)
from tilefx.backend.locations import Locations, TensorLocation
from tilefx.backend.offload import OffloadPlan, plan_offload, program_order
from tilefx.backend.collectives import all_reduce_cost
from tilefx.backend.machine import Machine, machine as machine_named
from tilefx.dialects.irutil import arg_roles, find_func, result_roles, stage_ops
from tilefx.dialects.ipu import PLACE_KEY, CopyOp
from tilefx.dialects.names import TILE_COST_KEY, TILE_MAPPING_KEY
from tilefx.dialects.tile import (
    AllGatherOp,
    CostAttr,
    ExchangeOp,
    GridMappingAttr,
    HostInOp,
    HostOutOp,
    IpuCopyOp,
    LinearMappingAttr,
    RemoteLoadOp,
    RemoteStoreOp,
    SyncOp,
)

MATMUL_OPS = {"aten.mm", "aten.bmm", "aten.addmm", "aten.convolution", "aten.convolution_backward"}


def _i(v: int) -> IntegerAttr:
    return IntegerAttr(int(v), i64)


def _matmul_dims(op: Operation) -> tuple[int, int, int, int] | None:
    """(batch, M, K, N) of the main product of a matmul-like op."""
    if op.name in ("aten.mm", "aten.bmm", "aten.addmm"):
        a, b = (op.operands[1], op.operands[2]) if op.name == "aten.addmm" else op.operands[:2]
        sa, sb = _shape(a), _shape(b)
        return (sa[0] if op.name == "aten.bmm" else 1, sa[-2], sa[-1], sb[-1])
    if op.name == "aten.convolution":
        sw, sy = _shape(op.operands[1]), _shape(op.results[0])
        return (1, sy[0] * math.prod(sy[2:]), sw[1] * math.prod(sw[2:]), sw[0])
    if op.name == "aten.convolution_backward":
        sgy, sw = _shape(op.operands[0]), _shape(op.operands[2])
        return (1, sw[0], sgy[0] * math.prod(sgy[2:]), sw[1] * math.prod(sw[2:]))
    return None


@dataclass(frozen=True)
class LowerToDevicePass(ModulePass):
    name = "lower-to-device"

    machine: str = "mk2"
    optimizer_off_chip: bool = False
    # replicas the optimizer state is sharded over (replicated tensor sharding:
    # each remote load and store moves one replica's shard)
    state_shards: int = 1

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        lower_to_device(op, machine_named(self.machine), self.optimizer_off_chip,
                        replicas=self.state_shards,
                        state_location=TensorLocation(on_chip=not self.optimizer_off_chip,
                                                      sharded=self.state_shards > 1))


def lower_to_device(module: ModuleOp, m: Machine, optimizer_off_chip: bool = False,
                    state_location: TensorLocation | None = None, replicas: int = 1,
                    locations: Locations | None = None, *, training: bool = False,
                    accumulate: bool = False, strategy: str = "", liveness: str = "") -> None:
    """The pass's work, for a Machine object (the API's custom machines).
    `state_location` (backend/locations.py; `optimizer_off_chip` is its short
    form): which optimizer state tensors the update loads from and stores to
    streaming memory, and over how many of the `replicas` each is sharded,
    as the profile costs them. `locations` (its optimizer entry wins):
    where every class of tensors lives; with `training`, `accumulate` and
    the schedule's `strategy` and `liveness`, the moves of @main (as
    build_profile plans them)."""
    main = find_func(module, "main")
    if any(o.name.startswith("tile.") for o in main.walk()):
        return  # already lowered
    if locations is not None:
        state_location = locations.optimizer
    lowering = _Lowering(state_location or TensorLocation(on_chip=not optimizer_off_chip), replicas)
    if locations is not None:
        lowering.offload = plan_offload(main, arg_roles(main), locations, replicas, training=training,
                                        accumulate=accumulate, strategy=strategy, liveness=liveness)
        lowering.insert_moves(main, m)
    lowering.main(main, m)
    for o in module.ops:
        if isinstance(o, func.FuncOp) and o.sym_name.data == "update":
            lowering.update(o, m)


class _Lowering:
    def __init__(self, state: TensorLocation, replicas: int = 1):
        self.state, self.replicas = state, replicas
        self.offload = OffloadPlan()

    def insert_moves(self, main: func.FuncOp, m: Machine) -> None:
        """The offload plan's loads, all-gathers and stores in @main: each
        an identity the ops of its span read instead of the moved value."""
        placed = program_order(main)
        order = [op for op, _ in placed]
        num_ipus = 1 + max((ipu for _, ipu in placed), default=0)
        now: dict[tuple[int, int], Operation] = {}  # (value, span start) -> the last move of it
        for mv in self.offload.moves:
            key = (id(mv.value), mv.span[0])
            src = now[key].results[0] if key in now else mv.value
            if mv.kind == "gather":
                cyc = all_reduce_cost(mv.nbytes, self.replicas, num_ipus, m, "allgather").cycles
                new = AllGatherOp.build(operands=[src], result_types=[src.type], properties={
                    "tensor": StringAttr(mv.tensor), "bytes": _i(mv.nbytes), "cycles": _i(cyc)})
            else:
                cls = RemoteLoadOp if mv.kind == "load" else RemoteStoreOp
                new = cls.build(operands=[src], result_types=[src.type], properties={
                    "tensor": StringAttr(mv.tensor),
                    "cycles": _i(m.link_cycles(mv.nbytes, m.streaming_bytes_per_s))})
            if mv.kind == "store":
                mv.at.parent_block().insert_op_after(new, mv.at)
            else:
                mv.at.parent_block().insert_op_before(new, mv.at)
            now[key] = new
            first, last = mv.span
            span = set(order[first:last + 1])
            for use in list(src.uses):  # a gather after a load: the span reads the gathered value
                if use.operation in span:
                    use.operation.operands[use.index] = new.results[0]

    # -- @main ------------------------------------------------------------
    def main(self, main: func.FuncOp, m: Machine) -> None:
        block = main.body.block
        roles = arg_roles(main)
        stages = stage_ops(main)
        regions = [s.body.block for s in stages] or [block]
        order = {o: i for i, o in enumerate(main.walk())}
        # weights, buffers and accumulators live spread linearly over the tiles
        attrs = [dict(a.data) for a in main.arg_attrs.data] if main.arg_attrs else []
        start = 0
        for arg, a, role in zip(block.args, attrs, roles):
            if any(k in role for k in ("param", "buffer", "const", "accum")):
                used = max(1, min(m.tiles, math.ceil(_bytes(arg) / m.grain_bytes)))
                a[TILE_MAPPING_KEY] = LinearMappingAttr(start % m.tiles, used, m.grain_bytes)
                start = (start + used) % m.tiles
        if attrs:
            main.arg_attrs = ArrayAttr([DictionaryAttr(a) for a in attrs])
        # inputs: streamed from the host just before their first use
        for arg, role in zip(block.args, roles):
            if "input" not in role or not arg.uses:
                continue
            first = min((u.operation for u in arg.uses), key=order.__getitem__)
            host = HostInOp.build(operands=[arg], result_types=[arg.type], properties={
                "cycles": _i(m.link_cycles(_bytes(arg), m.host_link_bytes_per_s))})
            while first.parent_block() is not block:  # before the stage that first reads it,
                first = first.parent_op()  # so that every later stage sees the streamed value
            block.insert_op_before(host, first)
            for use in list(arg.uses):
                if use.operation is not host:
                    use.operation.operands[use.index] = host.results[0]
        start = 0
        for region in regions:
            for o in list(region.ops):
                if not isinstance(o, func.ReturnOp):
                    start = self._lower_op(o, m, start)
        # outputs: streamed to the host
        ret = block.last_op
        for i, (v, role) in enumerate(zip(ret.operands, result_roles(main))):
            if "output" in role:
                out = HostOutOp.build(operands=[v], result_types=[v.type], properties={
                    "cycles": _i(m.link_cycles(_bytes(v), m.host_link_bytes_per_s))})
                block.insert_op_before(out, ret)
                ret.operands[i] = out.results[0]

    def _lower_op(self, o: Operation, m: Machine, start: int) -> int:
        if isinstance(o, CopyOp):
            new = IpuCopyOp.build(operands=[o.input], result_types=[o.result.type], properties={
                "src": o.src, "dst": o.dst,
                "cycles": _i(m.link_cycles(_bytes(o.result), m.ipu_link_bytes_per_s))},
                attributes=dict(o.attributes))
            o.parent_block().insert_op_before(new, o)
            o.result.replace_all_uses_with(new.results[0])
            o.parent_block().erase_op(o)
            return start
        if o.name in ("ipu.yield", "ipu.stage") or o.name.removeprefix("aten.") in VIEW_OPS or \
                o.name.startswith("tile."):
            return start
        cost = op_cost(o, m)
        o.attributes[TILE_COST_KEY] = CostAttr(cost.cycles, cost.compute_cycles, cost.exchange_cycles,
                                             cost.sync_cycles, cost.temp_bytes)
        dims = _matmul_dims(o) if o.name in MATMUL_OPS else None
        if dims is not None:
            idx = (1, 2) if o.name == "aten.addmm" else (0, 1)
            if o.name == "aten.convolution_backward":
                idx = (0, 1)
            resident = o.name != "aten.convolution_backward" and is_resident(o.operands[idx[1]])
            p = plan_matmul(*dims, _itemsize(o.operands[0]), m, proportion_of(o), resident)
            o.attributes[TILE_MAPPING_KEY] = GridMappingAttr(p.pm, p.pn, p.pk, p.serial)
            m_t, n_t, k_t = (-(-dims[1] // p.pm), -(-dims[3] // p.pn), -(-dims[2] // p.pk))
            isz = _itemsize(o.operands[0])
            # a weight laid out for the plan: only the share other tiles hold moves
            b_share = (p.pm - 1) / p.pm if resident else 1.0
            per_operand = {0: m_t * k_t * isz, 1: math.ceil(k_t * n_t * isz * b_share)}
            for j, which in zip(idx, (0, 1)):
                v = o.operands[j]
                attrs = {TILE_MAPPING_KEY: o.attributes[TILE_MAPPING_KEY]}  # the plan's blocks
                if PLACE_KEY in o.attributes:
                    attrs[PLACE_KEY] = o.attributes[PLACE_KEY]
                ex = ExchangeOp.build(operands=[v], result_types=[v.type], properties={
                    "bytes": _i(per_operand[which]),
                    "cycles": _i(-(-per_operand[which] // m.exchange_bytes_per_cycle))},
                    attributes=attrs)
                o.parent_block().insert_op_before(ex, o)
                o.operands[j] = ex.results[0]
        elif o.results:
            nbytes = sum(_bytes(r) for r in o.results)
            used = max(1, min(m.tiles, math.ceil(nbytes / m.grain_bytes)))
            o.attributes[TILE_MAPPING_KEY] = LinearMappingAttr(start % m.tiles, used, m.grain_bytes)
            start = (start + used) % m.tiles
        o.parent_block().insert_op_after(SyncOp.build(properties={
            "ipus": _i(1), "cycles": _i(m.sync_cycles(1))}), o)
        return start

    # -- @update ----------------------------------------------------------
    def update(self, update: func.FuncOp, m: Machine) -> None:
        block = update.body.block
        start = 0
        for o in list(block.ops):
            if not isinstance(o, func.ReturnOp):
                start = self._lower_op(o, m, start)
        roles = arg_roles(update)
        first = block.first_op
        streamed = {}  # state, weight or accumulator name -> bytes of this replica's share

        def name_of(role: dict) -> str | None:
            if "state" in role:
                return role["state"]
            if "param" in role:
                return role["param"]
            return f"{role['accum']} (gradient accumulator)" if "accum" in role else None

        for arg, role in zip(block.args, roles):
            numel = math.prod(arg.type.get_shape()) if isinstance(arg.type, TensorType) else 1
            if "state" in role and self.state.off_chip(numel):
                streamed[role["state"]] = self.state.shard_bytes(_bytes(arg), numel, self.replicas)
            elif name_of(role) in self.offload.update_stream:
                streamed[name_of(role)] = self.offload.update_stream[name_of(role)]
            elif "accum" in role and role["accum"] in self.offload.update_load:
                streamed[name_of(role)] = self.offload.update_load[role["accum"]]
        for arg, role in zip(block.args, roles):
            if name_of(role) not in streamed:
                continue
            ld = RemoteLoadOp.build(operands=[arg], result_types=[arg.type], properties={
                "tensor": StringAttr(name_of(role)),
                "cycles": _i(m.link_cycles(streamed[name_of(role)], m.streaming_bytes_per_s))})
            block.insert_op_before(ld, first)
            for use in list(arg.uses):
                if use.operation is not ld:
                    use.operation.operands[use.index] = ld.results[0]
        ret = block.last_op
        for i, (v, role) in enumerate(zip(ret.operands, result_roles(update))):
            if name_of(role) in streamed:
                st = RemoteStoreOp.build(operands=[v], result_types=[v.type], properties={
                    "tensor": StringAttr(name_of(role)),
                    "cycles": _i(m.link_cycles(streamed[name_of(role)], m.streaming_bytes_per_s))})
                block.insert_op_before(st, ret)
                ret.operands[i] = st.results[0]
