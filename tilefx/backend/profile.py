"""The machine model applied to a compiled program: per-op costs, a timed
multi-IPU timeline, per-tile memory, out-of-memory errors and the profile
users read (`executor.profile`).

Everything is computed once at compile time from the outlined graph IR
(`ipu.stage` regions), the schedule and the `Machine` parameters; running
the program never changes it (shapes are static).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field, replace

import numpy as np
from xdsl.dialects import func
from xdsl.ir import BlockArgument, Operation, SSAValue

from tilefx.errors import Error
from tilefx.backend.collectives import AllReduceCost, all_reduce_cost, host_traffic
from tilefx.backend.costs import VIEW_OPS, OpCost, _bytes, _numel as _numel_of_shape, _shape, multiconv_costs, op_cost
from tilefx.backend.locations import Locations, TensorLocation
from tilefx.backend.offload import OffloadPlan, plan_offload, program_order, value_root
from tilefx.backend.machine import Machine
from tilefx.backend.schedule import WEIGHT_PART, Schedule, part_cycles, weight_gradient_ops
from tilefx.dialects.ipu import PLACE_KEY, PlacementAttr, StageOp
from tilefx.dialects.irutil import flat_ops, to_py
from tilefx.dialects.names import AUTO_STAGE_KEY, MULTICONV_KEY


@dataclass
class OpRecord:
    name: str
    stage: int
    ipu: int
    cost: OpCost
    direction: str


@dataclass
class TimedStep:
    ipu: int
    start: int
    end: int
    kind: str  # compute | copy | host | load | store | update
    stage: int
    micro_batch: int
    direction: str


@dataclass
class Tensor:
    """A tensor that occupies tile memory: what it is and who made it."""

    name: str
    nbytes: int
    made_by: str
    kind: str  # weight | buffer | accumulator | optimizer | activation | stash
    # the weight, buffer or constant it is or belongs to (accumulators and
    # optimizer state: their weight's); "" for activations
    owner: str = ""


@dataclass
class IpuMemory:
    ipu: int
    always_live: np.ndarray  # bytes per tile
    peak: np.ndarray  # bytes per tile: always live + peak activations + largest temporary
    temp_bytes: int
    tensors: list[Tensor]
    tile_of_tensor: dict[int, tuple[int, int]]  # index -> (first tile, tiles used)

    def largest_on_tile(self, tile: int, n: int = 5) -> list[tuple[Tensor, int]]:
        """The n tensors with the most bytes on `tile`."""
        out = []
        T = len(self.peak)
        for i, t in enumerate(self.tensors):
            first, used = self.tile_of_tensor[i]
            if (tile - first) % T < used:
                out.append((t, math.ceil(t.nbytes / used)))
        return sorted(out, key=lambda x: -x[1])[:n]


@dataclass
class Profile:
    machine: Machine
    strategy: str
    num_ipus: int
    ops: list[OpRecord]
    stage_cycles: dict[int, int]
    timeline: list[TimedStep]
    cycles_per_update: int
    updates_per_call: int
    total_cycles: int
    memory: dict[int, IpuMemory] = field(default_factory=dict)
    exchange_bytes: int = 0
    # per stage: the length of one of its steps (compute + host I/O + copy out)
    step_cycles: dict[int, int] = field(default_factory=dict)
    stage_parts: dict[int, list[int]] = field(default_factory=dict)
    schedule: str = ""  # the pipeline schedule (backend/schedule.py SCHEDULES)
    # per IPU: the most bytes of activations stashed for later backward steps at one time
    stash_bytes: dict[int, int] = field(default_factory=dict)
    auto_stage: dict = field(default_factory=dict)  # ipu-auto-stage's report, when it ran
    # scale-out (backend/collectives.py): this process's replicas and host traffic,
    # the gradient all-reduce of each IPU across all processes' replicas
    distributed: dict = field(default_factory=dict)
    # tensor locations (backend/offload.py): bytes per weight update loaded from and
    # stored to streaming memory and all-gathered, by tensor class, and their cycles
    streaming: dict = field(default_factory=dict)

    def bubble_fraction(self) -> float:
        """The share of the pipeline's IPU time spent waiting: 1 - busy / (IPUs
        x span), over the steps of one weight update before the optimizer (compute,
        IPU-link copies, host transfers, streaming-memory loads and stores and
        the all-gathers of sharded weights count as busy)."""
        steps = [s for s in self.timeline if s.stage >= 0 or s.kind not in ("update", "allreduce", "allgather")]
        if not steps:
            return 0.0
        span = max(s.end for s in steps) - min(s.start for s in steps)
        ipus = {s.ipu for s in steps}
        busy = sum(s.end - s.start for s in steps)
        return max(0.0, 1.0 - busy / (len(ipus) * span)) if span else 0.0

    @property
    def seconds(self) -> float:
        return self.machine.seconds(self.total_cycles)

    def ipu_busy_cycles(self) -> dict[int, int]:
        busy: dict[int, int] = defaultdict(int)
        for s in self.timeline:
            if s.kind in ("compute", "update"):
                busy[s.ipu] += s.end - s.start
        return dict(sorted(busy.items()))

    def utilisation(self) -> dict[int, float]:
        length = max((s.end for s in self.timeline), default=0) or 1
        return {ipu: c / length for ipu, c in self.ipu_busy_cycles().items()}

    def cycles_by_op(self) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for r in self.ops:
            out[r.name] += r.cost.cycles
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def summary(self) -> dict:
        return {
            "machine": self.machine.name,
            "strategy": self.strategy,
            "ipus": self.num_ipus,
            "total_cycles": self.total_cycles,
            "seconds": self.seconds,
            "cycles_per_weight_update": self.cycles_per_update,
            "weight_updates_per_call": self.updates_per_call,
            "ipu_busy_cycles": self.ipu_busy_cycles(),
            "utilisation": self.utilisation(),
            "stage_cycles": self.stage_cycles,
            "schedule": self.schedule,
            "bubble_fraction": self.bubble_fraction(),
            "stash_bytes": self.stash_bytes,
            **({"auto_stage": self.auto_stage} if self.auto_stage else {}),
            **({"distributed": self.distributed} if self.distributed else {}),
            **({"streaming": self.streaming} if self.streaming else {}),
            "step_cycles": self.step_cycles,
            "exchange_bytes": self.exchange_bytes,
            "cycles_by_op": self.cycles_by_op(),
            "memory": {
                ipu: {"peak_tile_bytes": int(m.peak.max()), "peak_tile": int(m.peak.argmax()),
                      "always_live_max_tile_bytes": int(m.always_live.max()),
                      "total_bytes": int(m.peak.sum()), "largest_temporary": m.temp_bytes}
                for ipu, m in self.memory.items()},
        }

    def table(self, top_ops: int = 5) -> str:
        """The summary as a table (the one `tilefx-report` prints)."""
        return summary_table(_jsonable(self.summary()), top_ops)

    def chrome_trace(self) -> dict:
        """The timed timeline as Chrome / Perfetto trace events (one track per IPU)."""
        us = 1e6 / self.machine.clock_hz
        events = [{"ph": "M", "name": "process_name", "pid": 0,
                   "args": {"name": f"{self.machine.name} {self.strategy}"}}]
        for ipu in range(self.num_ipus):
            events.append({"ph": "M", "name": "thread_name", "pid": 0, "tid": ipu,
                           "args": {"name": f"IPU{ipu}"}})
        for s in self.timeline:
            label = s.kind if s.kind in ("update", "allreduce", "allgather", "host", "load", "store") \
                else f"stage {s.stage}"
            name = f"{label} {s.direction}" + (f" mb {s.micro_batch}" if s.micro_batch >= 0 else "")
            parts = self.stage_parts.get(s.stage) if s.kind == "compute" else None
            if parts:  # a stage step is its ops' compute, exchange and sync phases
                t = s.start
                for kind, cyc in zip(("compute", "exchange", "sync"), parts):
                    if cyc:
                        events.append({"ph": "X", "pid": 0, "tid": s.ipu, "ts": t * us, "dur": cyc * us,
                                       "cat": kind, "name": f"{name} {kind}",
                                       "args": {"cycles": cyc, "stage": s.stage,
                                                "micro_batch": s.micro_batch}})
                        t += cyc
                continue
            events.append({"ph": "X", "pid": 0, "tid": s.ipu, "ts": s.start * us,
                           "dur": max(s.end - s.start, 1) * us, "cat": s.kind, "name": name,
                           "args": {"cycles": s.end - s.start, "stage": s.stage,
                                    "micro_batch": s.micro_batch}})
        return {"traceEvents": events, "displayTimeUnit": "ns"}

    def write(self, directory: str) -> list[str]:
        """Write trace.json, summary.json and the PNG plots into `directory`."""
        import os

        os.makedirs(directory, exist_ok=True)
        paths = [os.path.join(directory, "trace.json"), os.path.join(directory, "summary.json"),
                 os.path.join(directory, "memory.npz")]
        with open(paths[0], "w") as f:
            json.dump(self.chrome_trace(), f)
        with open(paths[1], "w") as f:
            json.dump(_jsonable(self.summary()), f, indent=1)
        np.savez(paths[2], **{f"ipu{ipu}_peak": m.peak for ipu, m in self.memory.items()},
                 **{f"ipu{ipu}_always_live": m.always_live for ipu, m in self.memory.items()})
        from tilefx.backend.plots import write_plots

        paths += write_plots(directory)
        return paths


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return float(x)
    return x


# ---------------------------------------------------------------------------


def _place(op: Operation) -> PlacementAttr | None:
    p = op.attributes.get(PLACE_KEY)
    return p if isinstance(p, PlacementAttr) else None


def _parallel_multiconvs(block, machine: Machine) -> dict:
    """Each convolution of a parallel MultiConv group -> (its cost on its share
    of the tiles, the cycles it adds to the stage: the group's slowest
    member's cycles for the group's first op, 0 for the others)."""
    groups: dict[tuple, list[Operation]] = defaultdict(list)
    for op in flat_ops(block):
        mc = op.attributes.get(MULTICONV_KEY)
        if mc is not None and mc.data["plan"].data == "parallel":
            groups[(mc.data["group"].value.data, _place(op).direction.data if _place(op) else "")].append(op)
    out = {}
    for convs in groups.values():
        costs, cycles = multiconv_costs(convs, machine)
        for i, (op, c) in enumerate(zip(convs, costs)):
            out[op] = (c, cycles if i == 0 else 0)
    return out


def _roles(fn: func.FuncOp, which: str) -> list[dict]:
    from tilefx.backend.executor import arg_roles, result_roles

    return arg_roles(fn) if which == "arg" else result_roles(fn)


def build_profile(module, main: func.FuncOp, update: func.FuncOp | None, schedule: Schedule,
                  machine: Machine, *, training: bool, device_iterations: int,
                  optimizer_off_chip: bool = False, accumulate: bool = False,
                  check_memory: bool = True, replicas: int = 1, processes: int = 1,
                  process_id: int = 0, optimizer_location: TensorLocation | None = None,
                  host_io: bool = True, locations: Locations | None = None,
                  decompose_grad_sum: bool = False) -> Profile:
    """Cost every op, time the schedule, and plan the memory of every IPU.
    `replicas` are this process's replicas, `processes` the processes of the
    run (each with as many): they share the gradient all-reduce and each
    process's host link (backend/collectives.py). `optimizer_location`: where
    the optimizer state lives (backend/locations.py: on or off chip, sharded
    over the replicas); `optimizer_off_chip` is its short form. `locations`:
    where every class of tensors lives (its optimizer entry wins over
    `optimizer_location`); off-chip and sharded weights, activations and
    accumulators are moved as backend/offload.py plans. `host_io`
    False: the inputs are made on the device and nothing streams back
    (PopTorch's synthetic data), so the timeline has no host transfers.
    `decompose_grad_sum`: PopART's session option of that name (a weight's
    gradient partials are added into its accumulator as they are made)."""
    stage_of: dict[int, tuple[int, str]] = {}
    records: list[OpRecord] = []
    stage_cycles: dict[int, int] = defaultdict(int)
    copy_bytes: dict[int, int] = defaultdict(int)  # into each stage over IPU-links
    stage_parts: dict[int, list[int]] = {}  # compute, exchange, sync cycles of a stage step
    exchange_bytes = 0
    cost_of: dict[Operation, OpCost] = {}
    # ZeroBubble: the cycles of each stage's weight gradients (its W steps)
    weight_cycles: dict[int, int] = defaultdict(int)
    split = any(st.part for st in schedule.steps)
    for top in main.body.block.ops:
        if not isinstance(top, StageOp):
            continue
        s, ipu = top.stage.value.data, top.ipu.value.data
        stage_of[s] = (ipu, top.direction.data)
        parallel = _parallel_multiconvs(top.body.block, machine)
        weight_ops = weight_gradient_ops(top) if split else set()
        for op in flat_ops(top.body.block):
            if op.name == "ipu.copy":
                copy_bytes[s] += _bytes(op.results[0])
                continue
            if op.name == "ipu.yield":
                continue
            c, group_cycles = parallel.get(op) or (op_cost(op, machine), None)
            cost_of[op] = c
            records.append(OpRecord(op.name, s, ipu, c, top.direction.data))
            stage_cycles[s] += c.cycles if group_cycles is None else group_cycles
            if op in weight_ops:
                weight_cycles[s] += c.cycles if group_cycles is None else group_cycles
            parts = stage_parts.setdefault(s, [0, 0, 0])
            parts[0] += c.compute_cycles
            parts[1] += c.exchange_cycles
            parts[2] += c.sync_cycles
            exchange_bytes += c.exchange_bytes
    num_ipus = 1 + max((ipu for ipu, _ in stage_of.values()), default=0)

    # host streams: inputs into the first stage that reads them, outputs out of the last
    arg_roles = _roles(main, "arg")
    in_bytes = sum(_bytes(a) for a, r in zip(main.body.block.args, arg_roles) if "input" in r)
    ret = main.body.block.last_op
    res_roles = _roles(main, "res")
    out_bytes = sum(_bytes(v) for v, r in zip(ret.operands, res_roles) if "output" in r)
    host_in = machine.link_cycles(in_bytes, machine.host_link_bytes_per_s) if in_bytes and host_io else 0
    host_out = machine.link_cycles(out_bytes, machine.host_link_bytes_per_s) if out_bytes and host_io else 0

    # weights and where they live
    param_ipu = _param_ipus(main, arg_roles)
    # serial phased execution with Liveness.OffChipAfterEachPhase: each phase
    # loads the weights (and buffers, accumulators) its stages use from
    # streaming memory and stores what it changed; only one phase's are on chip
    phase_resident = _phase_residency(main, arg_roles, schedule)
    load_bytes: dict[int, int] = defaultdict(int)
    store_bytes: dict[int, int] = defaultdict(int)
    for a, r in zip(main.body.block.args, arg_roles):
        name = r.get("param") or r.get("buffer") or r.get("const") or r.get("accum")
        for st in phase_resident.get(name, ()) if name is not None else ():
            if "accum" in r:  # read and written by the backward stages that accumulate into it
                if accumulate and "bwd" in stage_of.get(st, (0, ""))[1]:
                    load_bytes[st] += _bytes(a)
                    store_bytes[st] += _bytes(a)
            else:
                load_bytes[st] += _bytes(a)
    n_replicas = replicas * processes
    if locations is not None:
        optimizer_location = locations.optimizer
    offload = plan_offload(main, arg_roles, locations or Locations(), n_replicas, training=training,
                           accumulate=accumulate, strategy=schedule.strategy, liveness=schedule.liveness)
    gather_cycles = {st: all_reduce_cost(b, n_replicas, num_ipus, machine, "allgather").cycles
                     for st, b in offload.gather.items()}
    if schedule.strategy in ("serial_phased", "parallel_phased"):  # once per phase
        for st in set(offload.load_once) | set(offload.load_each):
            load_bytes[st] += offload.load_once[st] + offload.load_each[st] * schedule.micro_batches
        for st in set(offload.store_once) | set(offload.store_each):
            store_bytes[st] += offload.store_once[st] + offload.store_each[st] * schedule.micro_batches
        step_moves = None
    else:  # around every step of the stage
        step_moves = {st: (offload.load_once[st] + offload.load_each[st], gather_cycles.get(st, 0),
                           offload.store_once[st] + offload.store_each[st])
                      for st in set(offload.load_once) | set(offload.load_each) | set(offload.store_once)
                      | set(offload.store_each) | set(gather_cycles)}
        gather_cycles = {}

    # the timeline of one weight update (training) or one call (inference)
    timeline, step_cycles = _simulate(schedule, stage_of, stage_cycles, copy_bytes, machine, host_in,
                                      host_out, num_ipus, load_bytes, store_bytes, step_moves, gather_cycles,
                                      weight_cycles)
    end = max((t.end for t in timeline), default=0)

    # this process's host link carries the streams of all its replicas: when they
    # need it for longer than the pipeline runs, the weight update waits for it
    traffic = host_traffic(in_bytes, out_bytes, schedule.micro_batches, replicas, machine)
    pipeline_end = end
    end = max(end, traffic.cycles)
    location = optimizer_location or TensorLocation(on_chip=not optimizer_off_chip)
    # replicated tensor sharding: a weight whose optimizer state is sharded is
    # updated on its shard (its gradient reduce-scattered, the new weight gathered);
    # a sharded weight is updated on its shard and stays sharded (gathered before use)
    shards = _param_shards(update, location, n_replicas) if training and update is not None else {}
    for pname, n in offload.weight_shards.items():
        shards[pname] = max(shards.get(pname, 1), n)
    reduces: dict[int, AllReduceCost] = {}
    gathers: dict[int, AllReduceCost] = {}
    if training and update is not None:
        grad_bytes: dict[int, int] = defaultdict(int)
        sharded_bytes: dict[int, int] = defaultdict(int)
        gathered_bytes: dict[int, int] = defaultdict(int)  # whole weights after a sharded update
        for a, r in zip(main.body.block.args, arg_roles):
            if "accum" in r:
                ipu = param_ipu.get(r["accum"], 0)
                if shards.get(r["accum"], 1) > 1:
                    sharded_bytes[ipu] += _bytes(a)
                    if r["accum"] not in offload.weight_shards:
                        gathered_bytes[ipu] += _bytes(a)
                else:
                    grad_bytes[ipu] += _bytes(a)
        for ipu in sorted(set(grad_bytes) | set(sharded_bytes)):
            whole = all_reduce_cost(grad_bytes[ipu], n_replicas, num_ipus, machine)
            if sharded_bytes[ipu]:
                scatter = all_reduce_cost(sharded_bytes[ipu], n_replicas, num_ipus, machine, "reducescatter")
                if gathered_bytes[ipu]:
                    gathers[ipu] = all_reduce_cost(gathered_bytes[ipu], n_replicas, num_ipus, machine,
                                                   "allgather")
                whole = _combined(whole, scatter)
            reduces[ipu] = whole

    update_records: list[OpRecord] = []
    state_bytes: dict[int, int] = defaultdict(int)
    if training and update is not None:
        upd_roles = _roles(update, "arg")
        per_ipu: dict[int, int] = defaultdict(int)
        for op in update.body.block.ops:
            if isinstance(op, func.ReturnOp):
                continue
            w = op.operands[0]
            name = upd_roles[w.index].get("param", "") if isinstance(w, BlockArgument) else ""
            ipu = param_ipu.get(name, 0)
            c = _shard_cost(op_cost(op, machine), shards.get(name, 1))
            update_records.append(OpRecord(op.name, -1, ipu, c, "update"))
            per_ipu[ipu] += c.cycles
        for a, r in zip(update.body.block.args, upd_roles):
            if "state" in r and location.off_chip(_numel(a)):
                pname = r["state"].rsplit("/", 1)[0]
                state_bytes[param_ipu.get(pname, 0)] += -(-_bytes(a) // location.shards(_numel(a), n_replicas))
        loaded_bytes: dict[int, int] = defaultdict(int)
        for pname, nbytes in offload.update_stream.items():  # off-chip weights: loaded and stored
            state_bytes[param_ipu.get(pname, 0)] += nbytes
        for pname, nbytes in offload.update_load.items():  # off-chip accumulators: loaded
            loaded_bytes[param_ipu.get(pname, 0)] += nbytes
        sync = machine.sync_cycles(num_ipus)
        for ipu, ar in reduces.items():
            if ar.cycles:  # the replicas sum this IPU's gradients before its update
                timeline.append(TimedStep(ipu, end, end + ar.cycles, "allreduce", -1, -1, "allreduce"))
        if phase_resident:  # the update loads and stores each weight and its state
            for a, r in zip(update.body.block.args, upd_roles):
                if "param" in r and r["param"] in phase_resident and r["param"] not in offload.update_stream:
                    state_bytes[param_ipu.get(r["param"], 0)] += _bytes(a)
                elif "state" in r and not location.off_chip(_numel(a)):
                    pname = r["state"].rsplit("/", 1)[0]
                    state_bytes[param_ipu.get(pname, 0)] += -(-_bytes(a) // location.shards(_numel(a), n_replicas))
        for ipu, cyc in per_ipu.items():
            if state_bytes[ipu]:  # load and store the state (its shard) and weights in streaming memory
                cyc += 2 * machine.link_cycles(state_bytes[ipu], machine.streaming_bytes_per_s)
            if loaded_bytes[ipu]:  # load the accumulators kept in streaming memory
                cyc += machine.link_cycles(loaded_bytes[ipu], machine.streaming_bytes_per_s)
            start = end + (reduces[ipu].cycles if ipu in reduces else 0) + sync
            timeline.append(TimedStep(ipu, start, start + cyc, "update", -1, -1, "update"))
            if ipu in gathers and gathers[ipu].cycles:  # the updated shards to every replica
                g = gathers[ipu].cycles
                timeline.append(TimedStep(ipu, start + cyc, start + cyc + g, "allgather", -1, -1, "allgather"))
        end = max((t.end for t in timeline), default=end)
    records += update_records

    updates = device_iterations if training else 1
    profile = Profile(machine, schedule.strategy, num_ipus, records, dict(stage_cycles), timeline,
                      end, updates, end * updates, exchange_bytes=exchange_bytes,
                      step_cycles=step_cycles, stage_parts=stage_parts, schedule=schedule.name,
                      auto_stage=_auto_stage_report(module),
                      distributed=_distributed_report(replicas, processes, process_id, num_ipus,
                                                      traffic, pipeline_end, reduces, machine, gathers))
    if offload:
        steps_of: dict[int, int] = defaultdict(int)
        for stp in schedule.steps:
            if stp.kind == "compute" and stp.part != WEIGHT_PART:
                steps_of[stp.stage] += 1
        streaming = offload.totals(steps_of, schedule.micro_batches,
                                   schedule.strategy in ("serial_phased", "parallel_phased"))
        for kind, step_kind in (("load", "load"), ("store", "store"), ("gather", "allgather")):
            if streaming.get(kind) and step_moves is not None:  # phased: inside the phase moves
                streaming[kind + "_cycles"] = sum(t.end - t.start for t in timeline
                                                  if t.kind == step_kind and t.stage >= 0)
        update_bytes = sum(offload.update_stream.values()) * 2 + sum(offload.update_load.values())
        if training and update_bytes:
            streaming["update_bytes"] = update_bytes
        profile.streaming = streaming
    profile.memory = _memory(main, update, arg_roles, param_ipu, stage_of, records, machine, schedule,
                             training, location, n_replicas, accumulate, num_ipus, cost_of,
                             profile.stash_bytes, phase_resident, offload, decompose_grad_sum)
    if check_memory:
        _check_memory(profile)
    return profile


def _numel(v) -> int:
    return _numel_of_shape(_shape(v))


def _param_shards(update: func.FuncOp, location: TensorLocation, replicas: int) -> dict[str, int]:
    """Each parameter with optimizer state: over how many replicas its update
    is sharded (its largest state tensor's sharding; 1 for whole)."""
    out: dict[str, int] = {}
    for a, r in zip(update.body.block.args, _roles(update, "arg")):
        if "state" in r:
            pname = r["state"].rsplit("/", 1)[0]
            out[pname] = max(out.get(pname, 1), location.shards(_numel(a), replicas))
    return out


def _shard_cost(c: OpCost, shards: int) -> OpCost:
    """An elementwise update op on 1/shards of its elements."""
    if shards <= 1:
        return c
    return replace(c, compute_cycles=-(-c.compute_cycles // shards), flops=c.flops / shards,
                   exchange_bytes=-(-c.exchange_bytes // shards),
                   exchange_cycles=-(-c.exchange_cycles // shards))


def _combined(a: AllReduceCost, b: AllReduceCost) -> AllReduceCost:
    """Two collectives of one IPU back to back (the whole gradients'
    all-reduce and the sharded ones' reduce-scatter), as one step."""
    if not a.nbytes:
        return b
    if not b.nbytes:
        return a
    return replace(a, nbytes=a.nbytes + b.nbytes, ipu_link_cycles=a.ipu_link_cycles + b.ipu_link_cycles,
                   gw_link_cycles=a.gw_link_cycles + b.gw_link_cycles,
                   sync_cycles=a.sync_cycles + b.sync_cycles)


def _phase_residency(main: func.FuncOp, roles: list[dict], schedule: Schedule) -> dict[str, list[int]]:
    """Under serial phased execution with Liveness.OffChipAfterEachPhase
    (seeds/000 4.4: "a portion of the weights and activations are
    transferred to and from Streaming Memory, before and after each phase"):
    each weight, buffer, constant and gradient accumulator -> the stages that
    use it, which load it when their phase starts. Empty otherwise: the
    tensors stay on chip (AlwaysLive, the default)."""
    if schedule.strategy != "serial_phased" or schedule.liveness != "OffChipAfterEachPhase":
        return {}
    out: dict[str, list[int]] = {}
    for a, r in zip(main.body.block.args, roles):
        name = r.get("param") or r.get("buffer") or r.get("const") or r.get("accum")
        if name is None:
            continue
        stages = set()
        for use in a.uses:
            op = use.operation
            while op is not None and not isinstance(op, StageOp):
                op = op.parent_op()
            if op is not None:
                stages.add(op.stage.value.data)
        out.setdefault(name, [])
        out[name] = sorted(set(out[name]) | stages)
    return out


def _largest_phase(always: dict[int, list[Tensor]], phase_resident: dict[str, list[int]],
                   stage_phase: dict[int, int]) -> dict[int, list[Tensor]]:
    """Per IPU, the resident tensors of the phase that holds the most of them
    (a tensor belongs to the phases of the stages that use it; its optimizer
    state and accumulator to its weight's)."""
    out: dict[int, list[Tensor]] = {}
    for ipu, tensors in always.items():
        groups: dict[int, list[Tensor]] = defaultdict(list)
        for t in tensors:
            stages = phase_resident.get(t.owner) or [-1]
            for ph in {stage_phase.get(s, -1) for s in stages}:
                groups[ph].append(t)
        out[ipu] = max(groups.values(), key=lambda g: sum(t.nbytes for t in g)) if groups else []
    return out


def _distributed_report(replicas: int, processes: int, process_id: int, num_ipus: int, traffic,
                        pipeline_end: int, reduces: dict[int, AllReduceCost], machine: Machine,
                        gathers: dict[int, AllReduceCost] | None = None) -> dict:
    """The scale-out section of the summary: empty for one replica in one
    process. With replicated tensor sharding, `reduces` holds each IPU's
    all-reduce of the whole gradients plus the reduce-scatter of the sharded
    ones, and `gathers` the all-gather of the updated shards."""
    if replicas * processes <= 1:
        return {}
    worst = max(reduces.values(), key=lambda c: c.cycles, default=None)
    total = num_ipus * replicas * processes
    out = {
        "processes": processes, "process_id": process_id, "replicas_per_process": replicas,
        "replicas": replicas * processes, "ipus_per_replica": num_ipus, "total_ipus": total,
        "ipus_per_process": num_ipus * replicas,
        "ipu_link_domains": math.ceil(total / machine.ipu_link_domain_ipus),
        "host_bytes_in_per_process": traffic.bytes_in, "host_bytes_out_per_process": traffic.bytes_out,
        "host_link_cycles_per_process": traffic.cycles,
        "host_bound": traffic.cycles > pipeline_end,
    }
    if reduces:
        out.update({
            "replicas_per_ipu_link_domain": worst.replicas_per_rack,
            "gw_link_domains": worst.racks,
            "allreduce_cycles": worst.cycles,
            "allreduce_ipu_link_cycles": worst.ipu_link_cycles,
            "allreduce_gw_link_cycles": worst.gw_link_cycles,
            "allreduce_sync_cycles": worst.sync_cycles,
            "allreduce_bytes": {ipu: c.nbytes for ipu, c in reduces.items()},
            "allreduce_cycles_per_ipu": {ipu: c.cycles for ipu, c in reduces.items()},
        })
    if gathers:
        out.update({
            "sharded_bytes": {ipu: c.nbytes for ipu, c in gathers.items()},
            "allgather_cycles_per_ipu": {ipu: c.cycles for ipu, c in gathers.items()},
            "allgather_cycles": max(c.cycles for c in gathers.values()),
        })
    return out


def _auto_stage_report(module) -> dict:
    attr = module.attributes.get(AUTO_STAGE_KEY) if module is not None else None
    return to_py(attr) if attr is not None else {}


def _param_ipus(main: func.FuncOp, roles: list[dict]) -> dict[str, int]:
    """Each parameter/buffer lives on the IPU of its first user."""
    where: dict[str, int] = {}
    for a, r in zip(main.body.block.args, roles):
        key = r.get("param") or r.get("buffer") or r.get("const") or r.get("accum")
        if key is None:
            continue
        ipus = []
        for use in a.uses:
            p = _place(use.operation)
            if p is not None and p.ipu.data >= 0:
                ipus.append(p.ipu.data)
        where.setdefault(key, min(ipus) if ipus else 0)
    return where


def _simulate(schedule: Schedule, stage_of, stage_cycles, copy_bytes, machine: Machine, host_in: int,
              host_out: int, num_ipus: int, load_bytes: dict[int, int] | None = None,
              store_bytes: dict[int, int] | None = None,
              step_moves: dict[int, tuple[int, int, int]] | None = None,
              phase_gathers: dict[int, int] | None = None,
              weight_cycles: dict[int, int] | None = None) -> tuple[list[TimedStep], dict[int, int]]:
    """Time the logical schedule. A step starts when its IPU is free and the
    previous stage of its micro-batch has finished and been copied over; the
    copy is an exchange, so it keeps the sending IPU busy too (BSP). Returns
    the timed steps and each stage's step length (compute + host I/O + copy out).
    `step_moves`: per stage, the bytes each of its steps loads from streaming
    memory before computing, the cycles it all-gathers sharded weights, and
    the bytes it stores after (backend/offload.py); `phase_gathers`: the
    all-gather cycles after a phase's load; `weight_cycles`: per stage, the
    cycles of its weight gradients, a ZeroBubble W step's length (its input
    step takes the rest, moves and the copy to the next stage)."""
    ipu_free: dict[int, int] = defaultdict(int)
    done: dict[tuple[int, int], int] = {}
    out: list[TimedStep] = []
    step_cycles: dict[int, int] = {}
    last_stage = max(stage_of, default=0)
    prev_end = 0  # sharded: one IPU at a time, each step after the previous one
    weight_cycles = weight_cycles or {}
    for st in sorted(schedule.steps, key=lambda s: (s.time, s.stage)):
        ipu = st.ipu
        if st.part == WEIGHT_PART:  # after its stage's input part, on the same IPU
            start = max(ipu_free[ipu], done.get((st.stage, st.micro_batch), 0))
            end = start + weight_cycles.get(st.stage, 0)
            out.append(TimedStep(ipu, start, end, "compute", st.stage, st.micro_batch, st.direction))
            ipu_free[ipu] = prev_end = end
            step_cycles[st.stage] = max(step_cycles.get(st.stage, 0), end - start)
            continue
        if st.kind in ("load", "store"):
            start = ipu_free[ipu]
            resident = (load_bytes if st.kind == "load" else store_bytes) or {}
            nbytes = copy_bytes.get(st.stage, 0) + resident.get(st.stage, 0)
            cyc = machine.link_cycles(max(nbytes, 1), machine.streaming_bytes_per_s)
            out.append(TimedStep(ipu, start, start + cyc, st.kind, st.stage, -1, st.direction))
            ipu_free[ipu] = start + cyc
            g = (phase_gathers or {}).get(st.stage, 0) if st.kind == "load" else 0
            if g:
                out.append(TimedStep(ipu, start + cyc, start + cyc + g, "allgather", st.stage, -1, st.direction))
                ipu_free[ipu] = start + cyc + g
            continue
        start = max(ipu_free[ipu], done.get((st.stage - 1, st.micro_batch), 0))
        if schedule.sequential:
            start = max(start, prev_end)
        begin = start
        if st.stage == 0 and host_in:
            out.append(TimedStep(ipu, start, start + host_in, "host", 0, st.micro_batch, "in"))
            start += host_in
        load, gather, store = (step_moves or {}).get(st.stage, (0, 0, 0))
        for kind, cyc in (("load", machine.link_cycles(load, machine.streaming_bytes_per_s)), ("allgather", gather)):
            if cyc:
                out.append(TimedStep(ipu, start, start + cyc, kind, st.stage, st.micro_batch, st.direction))
                start += cyc
        end = start + int(part_cycles(st, stage_cycles.get(st.stage, 0), weight_cycles.get(st.stage, 0)))
        out.append(TimedStep(ipu, start, end, "compute", st.stage, st.micro_batch, st.direction))
        if store:
            cyc = machine.link_cycles(store, machine.streaming_bytes_per_s)
            out.append(TimedStep(ipu, end, end + cyc, "store", st.stage, st.micro_batch, st.direction))
            end += cyc
        nxt = stage_of.get(st.stage + 1)
        if nxt is not None and nxt[0] != ipu and copy_bytes.get(st.stage + 1, 0):
            cyc = machine.link_cycles(copy_bytes[st.stage + 1], machine.ipu_link_bytes_per_s)
            out.append(TimedStep(ipu, end, end + cyc, "copy", st.stage, st.micro_batch, st.direction))
            end += cyc
        if st.stage == last_stage and host_out:
            out.append(TimedStep(ipu, end, end + host_out, "host", st.stage, st.micro_batch, "out"))
            end += host_out
        ipu_free[ipu] = end
        prev_end = end
        done[(st.stage, st.micro_batch)] = end
        step_cycles[st.stage] = max(step_cycles.get(st.stage, 0), end - begin)
    return out, step_cycles


def _memory(main, update, arg_roles, param_ipu, stage_of, records, machine: Machine,
            schedule: Schedule, training: bool, location: TensorLocation, n_replicas: int,
            accumulate: bool,
            num_ipus: int, cost_of: dict | None = None,
            stash_out: dict[int, int] | None = None,
            phase_resident: dict[str, list[int]] | None = None,
            offload: OffloadPlan | None = None,
            decompose_grad_sum: bool = False) -> dict[int, IpuMemory]:
    T = machine.tiles
    offload = offload or OffloadPlan()
    always: dict[int, list[Tensor]] = defaultdict(list)
    for a, r in zip(main.body.block.args, arg_roles):
        if "param" in r and r["param"] in offload.resident:  # off chip (none) or sharded (its share)
            share, n = offload.resident[r["param"]], offload.weight_shards.get(r["param"], 1)
            if share:
                always[param_ipu.get(r["param"], 0)].append(
                    Tensor(r["param"] if n == 1 else f"{r['param']} (1/{n} shard)", share, "parameter", "weight",
                           r["param"]))
        elif "param" in r:
            always[param_ipu.get(r["param"], 0)].append(Tensor(r["param"], _bytes(a), "parameter", "weight",
                                                                     r["param"]))
        elif "buffer" in r:
            always[param_ipu.get(r["buffer"], 0)].append(Tensor(r["buffer"], _bytes(a), "buffer", "buffer",
                                                                      r["buffer"]))
        elif "const" in r:
            always[param_ipu.get(r["const"], 0)].append(Tensor(r["const"], _bytes(a), "constant", "buffer",
                                                                     r["const"]))
        elif "accum" in r and accumulate and r["accum"] not in offload.update_load:
            always[param_ipu.get(r["accum"], 0)].append(
                Tensor(f"{r['accum']} (gradient accumulator)", _bytes(a), "ipu.accumulate", "accumulator",
                       r["accum"]))
    if training and update is not None:
        for a, r in zip(update.body.block.args, _roles(update, "arg")):
            if "state" in r and not location.off_chip(_numel(a)):
                pname = r["state"].rsplit("/", 1)[0]
                n = location.shards(_numel(a), n_replicas)
                always[param_ipu.get(pname, 0)].append(
                    Tensor(r["state"] if n == 1 else f"{r['state']} (1/{n} shard)", -(-_bytes(a) // n),
                           "optimizer state", "optimizer", pname))

    if phase_resident:  # only the phase with the most resident bytes at its peak
        stage_phase = {top.stage.value.data: top.phase.value.data for top in main.body.block.ops
                       if isinstance(top, StageOp)}
        always = _largest_phase(always, phase_resident, stage_phase)
    # activations: the peak of live values per IPU in program order, with the
    # pipeline's stash (forward values kept for the backward of later micro-batches)
    # and the temporary memory of the op running at that peak (the largest sum of
    # live activations and temporaries, not the largest of each at different times)
    peak_set, temp = _activation_peaks(main, stage_of, schedule, training, cost_of or {}, T,
                                       stash_out, offload,
                                       partials_in_place=decompose_grad_sum and accumulate)
    # code and vertex state: each op's on the tiles it runs on, averaged over the tiles
    # (Poplar spreads vertices evenly), plus the codelet library every tile holds
    op_tiles: dict[int, float] = defaultdict(float)
    for r in records:
        if r.cost.cycles:  # views and aliases have no code
            op_tiles[r.ipu] += (r.cost.tiles or T) / T
    result = {}
    start_tile = 0
    for ipu in range(num_ipus):
        live = always.get(ipu, [])
        acts = peak_set.get(ipu, [])
        all_t = live + acts
        always_arr = np.zeros(T + 1, dtype=np.int64)
        peak_arr = np.zeros(T + 1, dtype=np.int64)
        placement = {}
        for i, t in enumerate(all_t):
            used = max(1, min(T, math.ceil(t.nbytes / machine.grain_bytes)))
            per = math.ceil(t.nbytes / used)
            first = start_tile % T
            placement[i] = (first, used)
            for arr in ((always_arr, peak_arr) if i < len(live) else (peak_arr,)):
                end = first + used
                if end <= T:
                    arr[first] += per
                    arr[end] -= per
                else:
                    arr[first] += per
                    arr[T] -= per
                    arr[0] += per
                    arr[end - T] -= per
            start_tile = (start_tile + used) % T
        code = machine.codelet_bytes_per_tile + math.ceil(machine.code_bytes_per_op_per_tile *
                                                          op_tiles.get(ipu, 0.0))
        always_tiles = np.cumsum(always_arr[:T]) + code
        peak_tiles = np.cumsum(peak_arr[:T]) + code + temp.get(ipu, 0)
        result[ipu] = IpuMemory(ipu, always_tiles, peak_tiles, temp.get(ipu, 0), all_t, placement)
    return result


def _activation_peaks(main, stage_of, schedule: Schedule, training: bool, cost_of: dict,
                      tiles: int, stash_out: dict[int, int] | None = None,
                      offload: OffloadPlan | None = None,
                      partials_in_place: bool = False
                      ) -> tuple[dict[int, list[Tensor]], dict[int, int]]:
    """Per IPU, the activations live at its peak, stash copies included (as
    many copies as the schedule has micro-batches between the value's stage
    and its last use), and the temporary bytes per tile of the op running
    then: the peak is the program point with the most live bytes per tile
    plus that op's temporaries. `stash_out` receives each IPU's peak stashed
    bytes. `offload`'s intervals (tensors loaded from streaming memory or
    all-gathered for a stretch of ops) are live over their stretch; its
    off-chip activations only over theirs, never stashed on chip.
    `partials_in_place`: a weight's gradient partials go into its
    accumulator where they are made (into_accumulator)."""
    offload = offload or OffloadPlan()
    order = program_order(main)
    index = {op: i for i, (op, _) in enumerate(order)}
    stage_index = {op: s for top in main.body.block.ops if isinstance(top, StageOp)
                   for op in flat_ops(top.body.block) for s in [top.stage.value.data]}
    # a value's uses include those of its views and, across stages, of the
    # stage results it is yielded as (the later stages' ops, copies included)
    root = value_root(main, index)

    accumulated: dict[SSAValue, bool] = {}

    def into_accumulator(v: SSAValue) -> bool:
        """`v` is a gradient that only ever reaches a weight's gradient
        accumulator (`ipu.accumulate`), directly or through views (the
        transposed gradient of `x @ w.t()`): the plan counts it as made into
        the accumulator (as Poplar's matMulAcc computes C += A B in place),
        with no memory of its own. With `decompose_grad_sum` (PopART's `decomposeGradSum` session
        option, which Graphcore's BERT sets) and an accumulator, also through
        the sum of a weight's gradient partials (a weight used twice, as a
        tied embedding and projection) and across pipeline stages: PopART then
        adds each partial into the accumulator where it is made
        (DecomposeGradSum and InplaceAccumulateGradPartialsIntoOptimizerAccumTensor),
        and never stashes it. (The executor keeps eager's order of additions.)"""
        if v in accumulated:
            return accumulated[v]
        accumulated[v] = False  # (no cycles in SSA; a guard all the same)
        uses = list(v.uses)
        ok = bool(uses)
        for u in uses:
            user = u.operation
            if user.name == "ipu.accumulate":
                ok = u.index == 1
            elif partials_in_place and user.name == "aten.add.Tensor" and \
                    _prop(user, "alpha", 1) == 1 and _bytes(user.results[0]) == _bytes(v):
                # (acc += each term: the other term joins the accumulator as well)
                ok = into_accumulator(user.results[0])
            elif user.name.removeprefix("aten.") in VIEW_OPS and user.results and \
                    _bytes(user.results[0]) == _bytes(v):  # (the transposed gradient of `x @ w.t()`)
                ok = into_accumulator(user.results[0])
            elif partials_in_place and user.name == "ipu.yield" and isinstance(user.parent_op(), StageOp):
                ok = into_accumulator(user.parent_op().results[u.index])
            else:
                ok = False
            if not ok:
                break
        accumulated[v] = ok
        return ok

    last_use: dict[SSAValue, int] = {}
    last_stage: dict[SSAValue, int] = {}
    for op, _ in order:
        for v in op.operands:
            v = root(v)
            if isinstance(v.owner, Operation) and v.owner in index:
                last_use[v] = max(last_use.get(v, 0), index[op])
                last_stage[v] = max(last_stage.get(v, 0), stage_index[op])
    # values alive across the stage boundary: stashed, one copy per micro-batch
    # between their stage and their last use (Schedule.in_flight)
    depth: dict[SSAValue, int] = {}
    spans: dict[tuple[int, int], int] = {}
    stashed: list[tuple[int, int, int, int]] = []  # ipu, bytes, first stage, last stage
    if training and schedule.strategy == "pipelined":
        for op, ipu in order:
            for r in op.results:
                s0, s1 = stage_index[op], last_stage.get(r, -1)
                if s1 > s0 and not into_accumulator(r):
                    if (s0, s1) not in spans:
                        spans[(s0, s1)] = schedule.in_flight(s0, s1)
                    depth[r] = spans[(s0, s1)]
                    if op.name.removeprefix("aten.") not in VIEW_OPS and r not in offload.offloaded:
                        stashed.append((op.dst.value.data if op.name == "ipu.copy" else ipu,
                                        _bytes(r), s0, s1))
    if stash_out is not None:
        stash_out.update(schedule.stash_peaks(stashed))
    peaks: dict[int, list[Tensor]] = {}
    live_bytes: dict[int, int] = defaultdict(int)
    best: dict[int, float] = defaultdict(float)
    temp_at: dict[int, int] = defaultdict(int)
    live: dict[int, dict[SSAValue, Tensor]] = defaultdict(dict)
    ends: dict[int, list[SSAValue]] = defaultdict(list)
    for v, i in last_use.items():
        if v not in offload.offloaded:
            ends[i].append(v)
    begins: dict[int, list[int]] = defaultdict(list)
    for k, iv in enumerate(offload.intervals):
        begins[iv.start].append(k)
        ends[iv.end].append(k)
    for i, (op, ipu) in enumerate(order):
        for k in begins.get(i, []):
            iv = offload.intervals[k]
            live[iv.ipu][k] = Tensor(iv.name, iv.nbytes, iv.made_by, iv.kind, iv.owner)
            live_bytes[iv.ipu] += iv.nbytes
        if op.name == "ipu.copy":
            ipu = op.dst.value.data
        target = _updated_in_place(op, i, last_use, depth, root)
        if target is not None and target in live[ipu] and op.results[0] in last_use and \
                not into_accumulator(op.results[0]):
            # a scatter-add into a tensor that dies here (an embedding's gradient
            # into its zeros) writes into that tensor's memory, as Poplar's
            # multiUpdateAdd does: the result takes it over
            live_bytes[ipu] -= live[ipu].pop(target).nbytes
        for r in op.results:
            if op.name.removeprefix("aten.") in VIEW_OPS or r in offload.offloaded:
                continue  # a view: no memory of its own; off chip: in an interval
            if into_accumulator(r):
                continue  # made into its accumulator (Poplar's matMulAcc: C += A B in place)
            if r in last_use:
                n = _bytes(r) * depth.get(r, 1)
                kind = "stash" if r in depth else "activation"
                p = _place(op)
                block = f" in block {p.block.data!r}" if p is not None and p.block.data else ""
                live[ipu][r] = Tensor(f"%{r.name_hint or r.index} ({op.name} result)", n,
                                      f"{op.name}{block}", kind)
                live_bytes[ipu] += n
        c = cost_of.get(op)
        tmp = c.temp_bytes if c is not None else 0
        if live_bytes[ipu] / tiles + tmp > best[ipu]:
            best[ipu] = live_bytes[ipu] / tiles + tmp
            peaks[ipu] = list(live[ipu].values())
            temp_at[ipu] = tmp
        for v in ends.get(i, []):
            owner_ipu = next((k for k, d in live.items() if v in d), None)
            if owner_ipu is not None:
                t = live[owner_ipu].pop(v)
                live_bytes[owner_ipu] -= t.nbytes
    return peaks, dict(temp_at)


# ops that add into their first operand's elements (ATen's functional forms of
# index_put_(accumulate=True) and scatter_add_)
_SCATTER_ADD_OPS = {"aten.index_put": "accumulate", "aten.scatter_add": None}


def _prop(op: Operation, name: str, default):
    a = op.properties.get(name)
    return default if a is None else to_py(a)


def _updated_in_place(op: Operation, i: int, last_use: dict, depth: dict, root) -> SSAValue | None:
    """The operand whose memory `op`'s result takes over: a scatter-add's
    destination when this op is its last use, it is not stashed, and the
    result has its size; else None."""
    flag = _SCATTER_ADD_OPS.get(op.name, "")
    if flag == "" or not op.operands or len(op.results) != 1:
        return None
    if flag is not None and not _prop(op, flag, False):
        return None
    v = op.operands[0]
    if root(v) is not v or last_use.get(v) != i or v in depth or _bytes(v) != _bytes(op.results[0]):
        return None
    return v


def _check_memory(profile: Profile) -> None:
    m = profile.machine
    for ipu, mem in profile.memory.items():
        tile = int(mem.peak.argmax())
        need = int(mem.peak[tile])
        if need > m.bytes_per_tile:
            top = mem.largest_on_tile(tile)
            listing = "; ".join(f"{t.name} [{t.kind}, made by {t.made_by}]: {b:,} B" for t, b in top)
            raise Error(
                f"Out of memory on IPU {ipu}, tile {tile}: {need:,} bytes needed, "
                f"{m.bytes_per_tile:,} available ({m.name}: {m.tiles} tiles x "
                f"{m.bytes_per_tile // 1024} KiB). Largest tensors on that tile: {listing}. "
                f"Use more IPUs (pipelining), off-chip optimizer state, or a lower available "
                f"memory proportion", type="memory")


def summary_table(summary: dict, top_ops: int = 15) -> str:
    """The summary (as summary.json holds it: string keys) as a table."""
    s = summary
    lines = [f"{s['machine']} x {s['ipus']} IPU(s), {s['strategy']}: {s['total_cycles']:,} cycles "
             f"= {1e3 * s['seconds']:.3f} ms per call ({s['weight_updates_per_call']} x "
             f"{s['cycles_per_weight_update']:,} cycles)",
             "  IPU   busy cycles   utilisation   peak tile memory   always-live (max tile)"]
    if s.get("schedule"):
        stash = ", ".join(f"IPU{k} {v:,} B" for k, v in s.get("stash_bytes", {}).items()) or "none"
        lines.insert(1, f"  {s['schedule']} schedule: bubble fraction {100 * s['bubble_fraction']:.1f}%, "
                        f"peak stashed activations {stash}")
    if s.get("auto_stage"):
        lines.insert(1, "  ipu-auto-stage: " + auto_stage_text(s["auto_stage"]))
    if s.get("distributed"):
        lines.insert(1, "  " + distributed_text(s["distributed"]))
    if s.get("streaming"):
        lines.insert(1, "  " + streaming_text(s["streaming"]))
    for ipu, busy in s["ipu_busy_cycles"].items():
        mem = s["memory"].get(str(ipu), {})
        lines.append(f"  {ipu:>3}   {busy:>11,}   {100 * s['utilisation'].get(str(ipu), 0):>10.1f}%   "
                     f"{mem.get('peak_tile_bytes', 0):>12,} B   {mem.get('always_live_max_tile_bytes', 0):>12,} B")
    lines.append("  op                                   cycles")
    for name, cyc in [kv for kv in s["cycles_by_op"].items() if kv[1]][:top_ops]:
        lines.append(f"  {name:<34} {cyc:>10,}")
    return "\n".join(lines)


def distributed_text(d: dict) -> str:
    """The scale-out section in two lines: per process, host traffic; per weight update, the all-reduce."""
    head = (f"process {d['process_id']} of {d['processes']}: {d['replicas_per_process']} replica(s) x "
            f"{d['ipus_per_replica']} IPU(s); {d['replicas']} replicas on {d['total_ipus']} IPUs; host link "
            f"{d['host_bytes_in_per_process'] + d['host_bytes_out_per_process']:,} B = "
            f"{d['host_link_cycles_per_process']:,} cycles per process"
            + (" (host-bound)" if d.get("host_bound") else ""))
    if "allreduce_cycles" not in d:
        return head
    return (head + f"\n  gradient all-reduce: {d['allreduce_cycles']:,} cycles (IPU-Links "
            f"{d['allreduce_ipu_link_cycles']:,} over {d['replicas_per_ipu_link_domain']} replica(s) per "
            f"IPU-Link domain, GW-Links {d['allreduce_gw_link_cycles']:,} over {d['gw_link_domains']} "
            f"domain(s), sync {d['allreduce_sync_cycles']:,})"
            + (f"\n  replicated tensor sharding: {sum(d['sharded_bytes'].values()):,} B of gradients "
               f"reduce-scattered into shards (in the all-reduce above), updated weights all-gathered in "
               f"{d['allgather_cycles']:,} cycles" if d.get("sharded_bytes") else ""))


def streaming_text(st: dict) -> str:
    """The tensor-location moves of a weight update in one line."""
    parts = []
    for kind, label in (("load", "loaded from"), ("store", "stored to"), ("gather", "all-gathered")):
        if st.get(kind):
            classes = ", ".join(f"{cls}s {b:,} B" for cls, b in sorted(st[kind].items()))
            where = f"{label} streaming memory" if kind != "gather" else label
            cycles = st.get(kind + "_cycles")  # phased: inside each phase's load and store
            parts.append(f"{where}: {classes}" + (f" ({cycles:,} cycles)" if cycles is not None else ""))
    if st.get("update_bytes"):
        parts.append(f"update streams {st['update_bytes']:,} B")
    return "tensor locations, per weight update: " + "; ".join(parts)


def auto_stage_text(report: dict) -> str:
    """ipu-auto-stage's report in one line per stage."""
    lines = [f"{len(report['stage_cycles'])} stages over {report['num_ipus']} IPUs, cuts before "
             + (", ".join(report["cuts"]) or "nothing")]
    for k, (cyc, mem) in enumerate(zip(report["stage_cycles"], report["stage_bytes"])):
        lines.append(f"    stage {k} (IPU {report['stage_ipus'][k]}): {cyc:,} cycles per micro-batch, "
                     f"{mem:,} B")
    return "\n".join(lines)
