"""The machine model applied to a compiled program: per-op costs, a timed
multi-IPU timeline, per-tile memory and its out-of-memory check (both from
backend/memory_model.py) and the profile users read (`executor.profile`).

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
from xdsl.ir import BlockArgument, Operation

from tilefx.backend.collectives import AllReduceCost, all_reduce_cost, host_stream_bytes, host_stream_cycles, host_traffic
from tilefx.backend.validated import band_text
from tilefx.analysis.repeated_layers import op_cost_reusing, twins_of
from tilefx.backend.costs import DEFAULT_PROPORTION, OpCost, _bytes, multiconv_costs, op_cost
from tilefx.backend.locations import Locations, TensorLocation
from tilefx.backend.offload import plan_offload
from tilefx.backend.machine import Machine
from tilefx.backend.plots import is_pipelined, run_title
from tilefx.backend.memory_model import IpuMemory, check_fits, ipu_memory, phase_residency
from tilefx.backend.schedule import WEIGHT_PART, Schedule, part_cycles, weight_gradient_ops
from tilefx.dialects.ipu import StageOp
from tilefx.dialects import irutil
from tilefx.dialects.irutil import flat_ops, place, to_py, value_numel
from tilefx.dialects.names import AUTO_STAGE_KEY, MULTICONV_KEY


@dataclass
class OpRecord:
    name: str
    stage: int
    ipu: int
    cost: OpCost
    direction: str


@dataclass(slots=True)
class TimedStep:
    ipu: int
    start: int
    end: int
    kind: str  # compute | copy | host | load | store | update
    stage: int
    micro_batch: int
    direction: str


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
            "codelet_bytes_per_tile": self.machine.codelet_bytes_per_tile,
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
            "validated_range": band_text(self.cycles_by_op(), self.cycles_per_update, self.machine.clock_hz,
                                         training=any(r.direction == "bwd" for r in self.ops)),
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


def _parallel_multiconvs(block, machine: Machine) -> dict:
    """Each convolution of a parallel MultiConv group -> (its cost on its share
    of the tiles, the cycles it adds to the stage: the group's slowest
    member's cycles for the group's first op, 0 for the others)."""
    groups: dict[tuple, list[Operation]] = defaultdict(list)
    for op in flat_ops(block):
        mc = op.attributes.get(MULTICONV_KEY)
        if mc is not None and mc.data["plan"].data == "parallel":
            groups[(mc.data["group"].value.data, place(op).direction.data if place(op) else "")].append(op)
    out = {}
    for convs in groups.values():
        costs, cycles = multiconv_costs(convs, machine)
        for i, (op, c) in enumerate(zip(convs, costs)):
            out[op] = (c, cycles if i == 0 else 0)
    return out


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
    # an op of a repeated block takes its twin's cost (analysis/repeated_layers.py)
    twins, done = twins_of(module), {}
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
            c, group_cycles = parallel.get(op) or (op_cost_reusing(op, machine, DEFAULT_PROPORTION, twins, done),
                                                   None)
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
    arg_roles = irutil.arg_roles(main)
    in_bytes, out_bytes = host_stream_bytes(main)
    host_in, host_out = host_stream_cycles(main, machine, host_io)

    # weights and where they live
    param_ipu = _param_ipus(main, arg_roles)
    # serial phased execution with Liveness.OffChipAfterEachPhase: each phase
    # loads the weights (and buffers, accumulators) its stages use from
    # streaming memory and stores what it changed; only one phase's are on chip
    phase_resident = phase_residency(main, arg_roles, schedule)
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
        upd_roles = irutil.arg_roles(update)
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
            if "state" in r and location.off_chip(value_numel(a)):
                pname = r["state"].rsplit("/", 1)[0]
                state_bytes[param_ipu.get(pname, 0)] += -(-_bytes(a) // location.shards(value_numel(a), n_replicas))
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
                elif "state" in r and not location.off_chip(value_numel(a)):
                    pname = r["state"].rsplit("/", 1)[0]
                    state_bytes[param_ipu.get(pname, 0)] += -(-_bytes(a) // location.shards(value_numel(a), n_replicas))
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
    profile.memory = ipu_memory(main, update, arg_roles, param_ipu, stage_of, records, machine, schedule,
                             training, location, n_replicas, accumulate, num_ipus, cost_of,
                             profile.stash_bytes, phase_resident, offload, decompose_grad_sum)
    if check_memory:
        check_fits(profile.memory, machine)
    return profile


def _param_shards(update: func.FuncOp, location: TensorLocation, replicas: int) -> dict[str, int]:
    """Each parameter with optimizer state: over how many replicas its update
    is sharded (its largest state tensor's sharding; 1 for whole)."""
    out: dict[str, int] = {}
    for a, r in zip(update.body.block.args, irutil.arg_roles(update)):
        if "state" in r:
            pname = r["state"].rsplit("/", 1)[0]
            out[pname] = max(out.get(pname, 1), location.shards(value_numel(a), replicas))
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
            p = place(use.operation)
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
    step takes the rest, moves and the copy to the next stage).

    A stage's cycles of each kind are the same at every micro-batch, so they
    are worked out once per (stage, IPU, part); the loop over the steps (a
    pipeline of 2,048 micro-batches over 16 IPUs has 63,000) only places
    them in time."""
    ipu_free: dict[int, int] = defaultdict(int)
    done: dict[tuple[int, int], int] = {}
    out: list[TimedStep] = []
    append = out.append
    step_cycles: dict[int, int] = {}
    last_stage = max(stage_of, default=0)
    prev_end = 0  # sharded: one IPU at a time, each step after the previous one
    weight_cycles = weight_cycles or {}
    sequential = schedule.sequential
    per_stage: dict[tuple, tuple] = {}  # (stage, IPU, part) -> its steps' cycles of each kind

    def moves_of(st) -> tuple:
        """(the timed steps before the compute, its cycles, those after):
        each a (kind, cycles, stage, direction or None for the step's own)
        of the moves this stage's steps make, the empty ones left out."""
        load, gather, store = (step_moves or {}).get(st.stage, (0, 0, 0))
        nxt = stage_of.get(st.stage + 1)
        copy = machine.link_cycles(copy_bytes[st.stage + 1], machine.ipu_link_bytes_per_s) \
            if nxt is not None and nxt[0] != st.ipu and copy_bytes.get(st.stage + 1, 0) else 0
        compute = int(part_cycles(st, stage_cycles.get(st.stage, 0), weight_cycles.get(st.stage, 0)))
        before = ((("host", host_in, 0, "in"),) if st.stage == 0 else ()) + (
            ("load", machine.link_cycles(load, machine.streaming_bytes_per_s), st.stage, None),
            ("allgather", gather, st.stage, None))
        after = (("store", machine.link_cycles(store, machine.streaming_bytes_per_s) if store else 0, st.stage, None),
                 ("copy", copy, st.stage, None)) + (
            (("host", host_out, st.stage, "out"),) if st.stage == last_stage else ())
        before, after = tuple(m for m in before if m[1]), tuple(m for m in after if m[1])
        span = sum(m[1] for m in before) + compute + sum(m[1] for m in after)  # end - begin of every step
        step_cycles[st.stage] = max(step_cycles.get(st.stage, 0), span)
        return before, compute, after

    for st in schedule.simulation_order():
        ipu, stage, mb, direction = st.ipu, st.stage, st.micro_batch, st.direction
        if st.part == WEIGHT_PART:  # after its stage's input part, on the same IPU
            start = max(ipu_free[ipu], done.get((stage, mb), 0))
            end = start + weight_cycles.get(stage, 0)
            append(TimedStep(ipu, start, end, "compute", stage, mb, direction))
            ipu_free[ipu] = prev_end = end
            step_cycles[stage] = max(step_cycles.get(stage, 0), end - start)
            continue
        kind = st.kind
        if kind == "load" or kind == "store":
            start = ipu_free[ipu]
            resident = (load_bytes if kind == "load" else store_bytes) or {}
            nbytes = copy_bytes.get(stage, 0) + resident.get(stage, 0)
            cyc = machine.link_cycles(max(nbytes, 1), machine.streaming_bytes_per_s)
            append(TimedStep(ipu, start, start + cyc, kind, stage, -1, direction))
            ipu_free[ipu] = start + cyc
            g = (phase_gathers or {}).get(stage, 0) if kind == "load" else 0
            if g:
                append(TimedStep(ipu, start + cyc, start + cyc + g, "allgather", stage, -1, direction))
                ipu_free[ipu] = start + cyc + g
            continue
        key = (stage, ipu, st.part)
        moves = per_stage.get(key)
        if moves is None:  # the same for every micro-batch of the stage
            moves = per_stage[key] = moves_of(st)
        before, compute, after = moves
        start = ipu_free[ipu]
        d = done.get((stage - 1, mb), 0)
        if d > start:
            start = d
        if sequential and prev_end > start:
            start = prev_end
        for what, cyc, at, way in before:
            append(TimedStep(ipu, start, start + cyc, what, at, mb, way or direction))
            start += cyc
        end = start + compute
        append(TimedStep(ipu, start, end, "compute", stage, mb, direction))
        for what, cyc, at, way in after:
            append(TimedStep(ipu, end, end + cyc, what, at, mb, way or direction))
            end += cyc
        ipu_free[ipu] = prev_end = done[(stage, mb)] = end
    return out, step_cycles


def summary_table(summary: dict, top_ops: int = 15) -> str:
    """The summary (as summary.json holds it: string keys) as a table."""
    s = summary
    lines = [f"{run_title(s)}: {s['total_cycles']:,} cycles "
             f"= {1e3 * s['seconds']:.3f} ms per call ({s['weight_updates_per_call']} x "
             f"{s['cycles_per_weight_update']:,} cycles)",
             "  IPU   busy cycles   utilisation   peak tile memory   always-live (max tile)"]
    if s.get("schedule") and is_pipelined(s):
        stash = ", ".join(f"IPU{k} {v:,} B" for k, v in s.get("stash_bytes", {}).items()) or "none"
        lines.insert(1, f"  {s['schedule']} schedule: bubble fraction {100 * s['bubble_fraction']:.1f}%, "
                        f"peak stashed activations {stash}")
    if s.get("validated_range"):
        lines.insert(1, "  " + s["validated_range"])
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
