"""`ipu-auto-stage`: cut a model into pipeline stages from the machine model.

PopTorch leaves the cut points to the user (Graphcore's PopLiner needs a
hardware profile); this pass picks them from the cost model instead. It runs
before `ipu-assign-stages` on @main as traced (forward and backward ops with
their `#ipu.place`), and rewrites every op's placement into blocks
"stage0".."stage{S-1}" with their IPUs, plus the module's `ipu.strategy`
(the stages in order), so `ipu-assign-stages` resolves them as if the user
had written `PipelinedExecution(Stage("stage0").ipu(0), ...)`.

How it cuts:

1. Positions. Each forward op whose operands come from forward ops is a
   position, in program order (S = num_ipus x virtual_stages stages are
   contiguous ranges of positions). Every other op is anchored to a
   position: a forward op that only reads arguments or constants (a
   transposed weight, a constant) to its earliest user; a backward op to the
   latest forward op that reads the same forward values or weights (the
   layer whose gradient it computes), but never later than the backward
   ops that give it its gradient (gradients flow back through the stages);
   a backward op without either to its latest user; one in a block
   without an IPU (never cut) within that block's positions. Stage ids
   then never decrease along the data flow, forward or backward.
2. Costs. The machine model (`backend/costs.py`, at each IPU's available
   memory proportion) gives every op its cycles; a stage's cycles per
   micro-batch are its forward and backward ops' cycles plus the IPU-link
   copies of the activations crossing its cuts (and of their gradients),
   and on stage 0 the host streams of a micro-batch (its inputs before
   its forward, the outputs after its backward, the pipeline's last step,
   as the profile's timeline has them).
   Its memory per tile is its weights (with optimizer state and gradient
   accumulators when training, where TensorLocations keeps them) and the
   activations its backward needs (with recomputation, only the values
   `ipu-recompute` keeps: the checkpoints and, under PopART's Pipeline
   recomputation, PopTorch's default over several IPUs, the stage's inputs,
   the activations a forward op of it reads across the cut before it, which
   the stage that made them stashes only if its own backward reads them;
   the ops it recomputes count
   their cycles twice; the last stage, whose backward follows its
   forward, recomputes only the ops feeding a checkpoint, and stashes
   the rest for one micro-batch), times the micro-batches the schedule
   stashes for that stage, spread over the tiles, plus code and its peak
   position's largest temporary with the working activations live there
   (forward values the backward does not read, from their maker to their
   last forward reader).
3. Choice. A dynamic program over the cut points minimises the slowest
   stage (the pipeline's steady-state throughput) subject to every stage
   fitting its IPU (the tile memory, shared by the virtual stages of an
   IPU) and to the user's placements: an op in a Block/BeginBlock with an
   ipu_id stays on that IPU; a block without one is never cut. Then the
   cuts move, one at a time, while the schedule's predicted length for the
   accumulated micro-batches (`Schedule.makespan`: fill, flush and each
   IPU's order of forward and backward steps) shrinks.
4. A tail (`tail_block`): the forward ops from the first op of that block
   (a Block without an ipu_id) to the end, with their backward, form one
   more pipeline stage on IPU `tail_ipu`, after the N cut stages. This is
   how Graphcore's BERT pipelines put the masked-LM head, whose weight is
   tied to the word embedding, back on IPU 0 (PopTorch user guide,
   "Pipelined execution": a Stage may be placed on an IPU an earlier stage
   uses, with AutoStage.AutoIncrement): that IPU holds the tied weight
   once. The tail's cycles and memory count on the stage that shares its
   IPU; the activations crossing into the tail, and their gradients back,
   are copied over the IPU links as at any cut, once, and not to the
   tail's own IPU (the tied weight's partial gradient, which the
   embedding's backward reads there). Only FillDrain runs such a
   pipeline (the 1F1B schedules need the stages in IPU order).

The module attribute `ipu.auto_stage` reports the cut points, each stage's
IPU, predicted cycles per micro-batch and memory.

The strategy (the module's `ipu.strategy`, its `auto` entry set by
`PipelinedExecution.auto`) wins over the options it names: `num_ipus`,
`virtual_stages` (Interleaved1F1B), `schedule`, `tail_block` and `tail_ipu`
(PipelinedExecution.auto's `tail`). The other options come from the
compile's configuration only: `micro_batches` (the gradient accumulation,
for the stash), `machine` (mk1, mk2, bow), `default_proportion`, `per_ipu`
and `ipus` (ipu-available-memory's), where the optimizer state lives
(`state_*`), the other tensors' `locations` (a `Locations`, no pipeline-text
form) over `replicas`, the bytes per tile to `reserve` on each IPU,
`auto_recomputation` (PopART's, as `ipu-recompute` reads it), `host_io`
(False: synthetic data, no host streams).
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import OpResult
from xdsl.passes import ModulePass

from tilefx.analysis.repeated_layers import op_cost_reusing, twins_of
from tilefx.analysis.shared_results import shared_of
from tilefx.backend.collectives import host_stream_cycles
from tilefx.backend.costs import VIEW_OPS, _bytes
from tilefx.backend.locations import MIN_ELEMENTS_OFF_CHIP, MIN_ELEMENTS_SHARDED, ON_CHIP, Locations, TensorLocation
from tilefx.backend.machine import machine as machine_named
from tilefx.backend.memory_model import STATE_ITEMSIZE, optimizer_state_tensors, resident_share
from tilefx.backend.schedule import SCHEDULES, pipelined
from tilefx.dialects.ipu import DEFAULT_PROPORTION, PLACE_KEY, START_BLOCK
from tilefx.dialects.irutil import find_func, from_py, module_config, place, value_numel
from tilefx.dialects.names import AUTO_STAGE_KEY, OPTIMIZER_KEY, PARAM_KEY, PARTIALS_TYPE_KEY, STRATEGY_KEY
from tilefx.passes import check_option
from tilefx.passes.assign_stages import PlacementError
from tilefx.passes.auto_stage_positions import (_UNPLACED, _anchor_list, _forward_op, _is_position, _tail_gradients,
                                                _tail_start, _user_constraints)
from tilefx.passes.available_memory import AvailableMemoryPass
from tilefx.passes.recompute import MODELLED, NO_RECOMPUTATION, PIPELINE, has_checkpoints, is_recomputable

class NoSplitFits(PlacementError):
    """No split whose every stage fits its IPU's tile memory (the pass's
    estimate). The estimate of a stage grows with each of its inputs and
    with nothing else: its weights' resident bytes (none off chip, a share
    sharded, all on chip: `resident_share`), the micro-batches each stage
    stashes (`stash_depths`) and its largest temporary (a matmul's plan
    never needs more temporary memory at a smaller available memory
    proportion: `plan_matmul`), so what this refuses is refused with more
    of any of them as well (`refusal_covers`)."""


def refusal_covers(refused: tuple, state_rank: int, proportion: float, depths: tuple) -> bool:
    """Whether a `NoSplitFits` of the same model, stages, IPUs, reserve and
    micro-batches at `refused` = (state rank, proportion, stash depths) also
    refuses the configuration at the given ones: each needs at least the
    refused one's memory (the state's rank orders its resident bytes of
    every tensor, `STATE_RANK`)."""
    r_rank, r_prop, r_depths = refused
    return (state_rank >= r_rank and proportion >= r_prop and len(depths) == len(r_depths)
            and all(d >= r for d, r in zip(depths, r_depths)))


# the optimizer state's resident bytes of every tensor, least first: none off
# chip (sharded or not, above PopART's 2-element minimum; a smaller tensor
# stays whole in every location), a 1/replicas share sharded on chip (above
# 8192 elements, else whole), all on chip (backend/locations.py)
STATE_RANK = {(False, False): 0, (False, True): 0, (True, True): 1, (True, False): 2}  # (on chip, sharded)


@dataclass(frozen=True)
class AutoStagePass(ModulePass):
    name = "ipu-auto-stage"

    num_ipus: int = 0
    virtual_stages: int = 1
    schedule: str = "FillDrain"
    micro_batches: int = 0  # 0: the fewest the schedule allows
    machine: str = "mk2"
    default_proportion: float | int = DEFAULT_PROPORTION
    # each IPU's available memory proportion, as ipu-available-memory's options
    per_ipu: tuple[int | float, ...] = ()
    ipus: tuple[int, ...] = ()
    # where the optimizer state lives (backend/locations.py): off chip it
    # takes no tile memory; sharded, 1/state-shards of each large tensor
    state_on_chip: bool = True
    state_shards: int = 1
    state_min_elements_off_chip: int = MIN_ELEMENTS_OFF_CHIP
    state_min_elements_sharded: int = MIN_ELEMENTS_SHARDED
    # the weights, activations and accumulators (off chip or sharded over `replicas`)
    locations: Locations = Locations()
    replicas: int = 1
    # bytes per tile to leave free on IPU i (the i-th entry)
    reserve: tuple[int | float, ...] = ()
    # a last stage on an earlier IPU: the ops from this block's first one on
    tail_block: str = ""
    tail_ipu: int = 0
    # PopART's autoRecomputation (passes/recompute.py); -1: not set
    auto_recomputation: int = -1
    # False: synthetic data, no host streams (CompileConfig.host_io)
    host_io: bool = True
    # find the split (and share it, analysis/shared_results.py) or refuse,
    # and leave the module as it was: a planner's question before it copies
    split_only: bool = False

    def __post_init__(self):
        v = self.auto_recomputation
        check_option(self.name, isinstance(v, int) and not isinstance(v, bool) and v in MODELLED,
                     f"auto-recomputation must be -1 (unset), 0 (None) or 3 (Pipeline), got {v!r}")

    def _settings(self, module: ModuleOp) -> dict:
        cfg = module_config(module, STRATEGY_KEY) or {}
        auto = cfg.get("auto", {})
        s = {"kind": cfg.get("kind", "pipelined"), "schedule": cfg.get("schedule", self.schedule),
             "num_ipus": auto.get("num_ipus", self.num_ipus),
             "virtual_stages": auto.get("virtual_stages", self.virtual_stages),
             "machine": self.machine,
             "state": TensorLocation(on_chip=self.state_on_chip, sharded=self.state_shards > 1,
                                     min_elements_off_chip=self.state_min_elements_off_chip,
                                     min_elements_sharded=self.state_min_elements_sharded),
             "state_shards": self.state_shards, "locations": self.locations, "replicas": self.replicas,
             "tail_block": str(auto.get("tail_block", self.tail_block) or ""),
             "tail_ipu": auto.get("tail_ipu", self.tail_ipu),
             "reserve": {i: float(b) for i, b in enumerate(self.reserve)}}
        if s["num_ipus"] < 1:
            raise PlacementError("ipu-auto-stage needs the number of IPUs: num-ipus=N, or "
                                 "PipelinedExecution.auto(N)")
        if s["virtual_stages"] < 1:
            raise PlacementError(f"ipu-auto-stage: virtual-stages must be >= 1, got {s['virtual_stages']}")
        if s["schedule"] not in SCHEDULES:
            raise PlacementError(f"ipu-auto-stage: unknown schedule {s['schedule']!r}: expected one "
                                 f"of {', '.join(SCHEDULES)}")
        if s["kind"] not in ("pipelined", "sharded"):
            raise PlacementError(f"ipu-auto-stage places pipelined or sharded stages, not {s['kind']}")
        if s["tail_block"]:
            t = s["tail_ipu"]
            if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < s["num_ipus"]:
                raise PlacementError(f"ipu-auto-stage: tail-ipu must be one of the IPUs 0..{s['num_ipus'] - 1}, "
                                     f"got {t!r}")
            if s["virtual_stages"] != 1 or s["kind"] != "pipelined":
                raise PlacementError("ipu-auto-stage: a tail stage needs a pipelined strategy without "
                                     "virtual stages")
        return s

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        cfg = self._settings(op)
        mach = machine_named(cfg["machine"])
        N, v = cfg["num_ipus"], cfg["virtual_stages"]
        stage_ipus = [k % N for k in range(N * v)] + ([cfg["tail_ipu"]] if cfg["tail_block"] else [])
        S = len(stage_ipus)
        main = find_func(op, "main")
        ops = [o for o in main.body.block.ops if not isinstance(o, func.ReturnOp)]
        if any(o.name == "ipu.stage" for o in ops):
            raise PlacementError("ipu-auto-stage runs before ipu-outline-stages: @main already has stages")
        training = any(place(o, _UNPLACED).is_backward for o in ops)
        # what follows up to the partition reads the ops, which every copy of
        # one trace has unchanged, and the settings in each result's key: a
        # planner's copies share it (analysis/shared_results.py)
        shared = shared_of(op)

        def once(key: tuple, compute):
            return compute() if shared is None else shared.get(key, compute)

        anchor_at, n = once(("anchors",), lambda: _anchor_list(ops))
        anchor = dict(zip(ops, anchor_at))
        tail = once(("tail", cfg["tail_block"]), lambda: _tail_start(ops, anchor, cfg["tail_block"])) \
            if cfg["tail_block"] else None
        if tail is not None and tail < N:
            raise PlacementError(f"ipu-auto-stage: block {cfg['tail_block']!r} starts at forward op {tail}, "
                                 f"too early for {N} stages before it")
        if n < S:
            raise PlacementError(f"ipu-auto-stage: the model has {n} forward ops with inputs from other "
                                 f"ops, too few for {S} stages")

        rc = self.auto_recomputation
        on = training and rc != NO_RECOMPUTATION
        # PopART's Pipeline recomputation (PopTorch's default over several
        # IPUs) keeps each stage's inputs. With checkpoints it recomputes
        # what the checkpoints alone would (segment by segment); without,
        # every stage but the last recomputes its whole forward from its
        # inputs, and the last (whose backward follows at once) nothing
        by_stage = on and rc in (-1, PIPELINE) and cfg["kind"] == "pipelined" and len(set(stage_ipus)) > 1
        whole = by_stage and not has_checkpoints(main)
        recomputing = (on, by_stage, whole)
        rec: dict = {}

        def recomputation() -> dict:
            """(kept, recomputed) of every stage but the last ("s"), of the
            last ("f") and without Pipeline recomputation (""), on this copy."""
            if not rec:
                rec[""] = _recomputation(main, ops) if on else ({}, set())
                rec["s"] = _recomputation(main, ops, from_stage_inputs=True) if whole else rec[""]
                # the loss stage (the last), whose backward follows its forward at
                # once, recomputes nothing after its last checkpoints (PopART's
                # setFinalFwdStageRecomputation; ipu-recompute's `stage_kept`): only
                # the ops feeding a checkpoint, which lies in the stage whatever its
                # first cut. Without checkpoints, nothing (`recomputed` is empty)
                rec["f"] = _recomputation(main, ops, final=True) if by_stage and not whole else rec[""]
            return rec

        split = once(("split",) + recomputing, lambda: recomputation()["f"][1] != recomputation()["s"][1])
        # per-position costs, one vector per distinct available memory proportion
        props = AvailableMemoryPass(default_proportion=self.default_proportion, per_ipu=self.per_ipu,
                                    ipus=self.ipus).proportions()
        ipu_prop = [props.get(i, float(self.default_proportion)) for i in range(N)]
        # an op of a repeated block takes its twin's cost (analysis/repeated_layers.py)
        twins = twins_of(op)

        def cost_vectors(p: float) -> tuple:
            """Per position at proportion `p`: (cycles, backward cycles) of
            the last stage and of the others, the largest temporary and the
            ops (the code)."""
            r = recomputation()
            out: list = []
            temp, code = np.zeros(n), np.zeros(n)
            done: dict = {}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the profile warns once the stages are final
                for last, again in ((True, r["f"][1]), (False, r["s"][1]))[:1 + split]:
                    c = np.zeros(n)
                    cb = np.zeros(n)
                    for o in ops:
                        cost = op_cost_reusing(o, mach, p, twins, done)
                        # a recomputed forward op runs twice: again in its backward
                        times = 2 if o in again else 1
                        c[anchor[o]] += times * cost.cycles
                        if place(o, _UNPLACED).is_backward or o in again:
                            cb[anchor[o]] += cost.cycles
                        if last:
                            temp[anchor[o]] = max(temp[anchor[o]], cost.temp_bytes)
                            code[anchor[o]] += 1
                    out.append((c, cb))
            if not split:  # every stage recomputes as the last does
                out.append(out[0])
            return out[0], out[1], temp, code

        # the partials types ipu-partials-type wrote on the ops (part of what
        # the cycles depend on, so of their key)
        partials = tuple(sorted({str(o.attributes[PARTIALS_TYPE_KEY]) for o in ops
                                 if PARTIALS_TYPE_KEY in o.attributes}))
        per_prop = {p: once(("cycles", mach.name, partials, p) + recomputing, lambda: cost_vectors(p))
                    for p in sorted(set(ipu_prop))}
        cycles = {(p, last): per_prop[p][0 if last else 1][0] for p in per_prop for last in (True, False)}
        bwd_cycles = {(p, last): per_prop[p][0 if last else 1][1] for p in per_prop for last in (True, False)}
        temp, code = per_prop[ipu_prop[0]][2:]
        states = optimizer_state_tensors(module_config(op, OPTIMIZER_KEY) or {})

        def memory() -> tuple:
            r = recomputation()
            vectors = (op, main, ops, anchor, n, training, cfg["state"], cfg["state_shards"], cfg["locations"],
                       cfg["replicas"])
            inputs, inputs_s = ({}, {}) if by_stage else (None, None)
            weights, saved, crossing, working = _memory_vectors(*vectors, r[""][0], inputs)
            # and the backward of every stage but the last holds what it recomputes
            saved_s = _memory_vectors(*vectors, r["s"][0], inputs_s)[1] if whole else saved
            # the loss stage stashes what it does not recompute, for one micro-batch
            saved_f = _memory_vectors(*vectors, r["f"][0])[1] if r["f"][0] is not r[""][0] else saved
            return weights, saved, crossing, working, inputs, inputs_s, saved_s, saved_f

        weights, saved, crossing, working, inputs, inputs_s, saved_s, saved_f = once(
            ("memory", states, cfg["state"], cfg["state_shards"], cfg["locations"], cfg["replicas"]) + recomputing,
            memory)

        def find_split() -> tuple:
            """The cut positions with each stage's cycles and bytes, or the
            refusal's message."""
            stash_in, once_held = np.zeros(n + 1), np.zeros(n)
            leaving = leaving_s = leaving_once = None
            if by_stage:  # a stage holds its inputs (the values a forward op reads across the cut before it)
                stash_in[1:n] = inputs["held"][1:n]  # per micro-batch, and its maker does not
                leaving = leaving_s = inputs["leaving"]
            if whole:  # and its backward holds what it recomputes, every value the backward reads, for one
                once_held, leaving_s, leaving_once = saved, inputs_s["leaving"], leaving
            stage_saved = [saved_s] * (S - 1) + [saved_f]
            stage_once = [once_held] * (S - 1) + [np.zeros(n)]
            stage_leaving = [(leaving_s, leaving_once)] * (S - 1) + [(leaving, None)]
            stage_cycles = [cycles[ipu_prop[i], k == S - 1] for k, i in enumerate(stage_ipus)]
            stage_bwd = [bwd_cycles[ipu_prop[i], k == S - 1] for k, i in enumerate(stage_ipus)]
            # a position's peak per tile: its largest temporary with the working activations live then
            peak = temp + working / mach.tiles
            tail_back, crossing_t = None, crossing
            if tail is not None and training:
                # the tail's backward values an earlier stage's backward reads (the
                # gradient into the stage before it; the partial gradient of the weight
                # it shares with the IPU it is back on): one copy out of the tail to the
                # reader's IPU, none to its own, not one across every cut between (the
                # partition knows which IPU the reader's stage is on)
                crossing_t = crossing.copy()
                tail_back = np.zeros(n)
                for e, b in once(("tail gradients", tail), lambda: _tail_gradients(ops, anchor, tail)):
                    crossing_t[1, e + 1:tail] -= b
                    tail_back[e] += b
            link = np.array([[mach.link_cycles(int(b), mach.ipu_link_bytes_per_s) if b else 0 for b in row]
                             for row in crossing_t], dtype=np.float64)
            # the host streams of a micro-batch, on the steps the profile's
            # timeline puts them: the inputs before stage 0's forward, the
            # outputs after the last step (stage 0's backward when training)
            host = once(("host", mach.name, self.host_io), lambda: host_stream_cycles(main, mach, self.host_io))
            depth = stash_depths(stage_ipus, cfg["schedule"], self.micro_batches, training)
            pinned, no_cut = once(("constraints",), lambda: _user_constraints(ops, anchor, n))

            try:
                cuts, stage_report, stage_mem_ok, tail_saving = _partition(
                    stage_cycles, link, weights, stage_saved, peak, code, depth, stage_ipus, pinned, no_cut,
                    training, mach, v, tail, cfg["reserve"], stash_in, stage_once, stage_leaving, tail_back, host)
            except NoSplitFits as e:  # (shared as its message: the same refusal for every copy)
                return str(e), None, None
            cuts = _refine(cuts, stage_cycles, stage_bwd, link, stage_ipus, cfg["schedule"],
                           self.micro_batches, training, stage_mem_ok, tail is not None, tail_saving, host)
            return cuts, *stage_report(cuts)

        # the split: a function of every setting (the strategy's, the pass's)
        # and of the vectors above
        cuts, stage_cyc, stage_mem = once(
            ("cuts", repr(cfg), tuple(ipu_prop), partials, states, self.micro_batches, rc, self.host_io,
             self.default_proportion), find_split)
        if isinstance(cuts, str):
            raise NoSplitFits(cuts)
        if self.split_only:
            return
        stage_of_pos = np.zeros(n, dtype=np.int64)
        for k, (i, j) in enumerate(zip(cuts[:-1], cuts[1:])):
            stage_of_pos[i:j] = k
        # a block without an IPU is never cut: its backward ops go with it, as
        # they go with their block when the user places it (a weight
        # gradient's data flow alone could anchor it one stage over)
        # (its forward ops that read only arguments, such as a BatchNorm's
        # running-statistics update, go with it too: nothing anchors them)
        block_stage = {}
        for o in ops:
            p = place(o, _UNPLACED)
            if _is_position(o) and p.block.data not in ("", START_BLOCK) and p.ipu.data < 0:
                block_stage[p.block.data] = int(stage_of_pos[anchor[o]])
        for o in ops:
            p = place(o, _UNPLACED)
            k = int(stage_of_pos[anchor[o]])
            if p.is_backward or not _is_position(o):
                k = block_stage.get(p.block.data, k)
            o.attributes[PLACE_KEY] = p.with_(block=f"stage{k}", ipu=stage_ipus[k])
        strategy = module_config(op, STRATEGY_KEY) if STRATEGY_KEY in op.attributes else \
            {"kind": cfg["kind"], "auto_stage": "same_as_ipu", "schedule": cfg["schedule"]}
        strategy.pop("auto", None)
        strategy["stages"] = [{"blocks": [f"stage{k}"], "ipu": stage_ipus[k]} for k in range(S)]
        op.attributes[STRATEGY_KEY] = from_py(strategy)
        first_at = {}
        for o in ops:
            if anchor[o] not in first_at and not place(o, _UNPLACED).is_backward:
                first_at[anchor[o]] = o
        op.attributes[AUTO_STAGE_KEY] = from_py({
            "num_ipus": N, "stage_ipus": stage_ipus, "cut_positions": [int(c) for c in cuts[1:-1]],
            "cuts": [f"forward op {c} ({first_at[c].name})" for c in cuts[1:-1]],
            "stage_cycles": [int(c) for c in stage_cyc], "stage_bytes": [int(b) for b in stage_mem],
            "schedule": cfg["schedule"], "machine": mach.name})


def _recomputation(main, ops, from_stage_inputs: bool = False, final: bool = False) -> tuple[dict, set]:
    """What `ipu-recompute` (passes/recompute.py) will do, without doing it:
    for each forward value a backward op reads and the function recomputes,
    the kept forward values (checkpoints, random ops' results) it is
    recomputed from; and the forward ops it runs again in the backward.
    Empty without checkpoints (every value the backward reads is stashed),
    unless `from_stage_inputs` (Pipeline recomputation, before the cuts
    exist: recomputed from the kept values alone; the caller adds the
    stage inputs each cut keeps). `final`: the loss stage's under Pipeline
    recomputation, which recomputes only the ops feeding a checkpoint (the
    values after its last checkpoints are kept)."""
    if not (from_stage_inputs or has_checkpoints(main)):
        return {}, set()
    block = main.body.block
    feeds: set = set()  # forward ops a checkpoint depends on
    if final:
        for o in reversed(ops):
            if not place(o, _UNPLACED).is_backward and any(
                    u.operation.name == "ipu.recomputation_checkpoint" or u.operation in feeds
                    for r in o.results for u in r.uses):
                feeds.add(o)

    def recomputable(x) -> bool:
        return is_recomputable(x, block) and (not final or x.op in feeds)

    kept: dict = {}
    recomputed: set = set()
    for o in ops:
        if not place(o, _UNPLACED).is_backward:
            continue
        for v in o.operands:
            if v in kept or not isinstance(v, OpResult) or not recomputable(v):
                continue
            stack = [v]  # depth first, without recursion: a segment can be long
            while stack:
                w = stack[-1]
                if w in kept:
                    stack.pop()
                    continue
                ins = [x for x in w.op.operands if isinstance(x, OpResult) and _forward_op(x) is not None]
                todo = [x for x in ins if recomputable(x) and x not in kept]
                if todo:
                    stack += todo
                    continue
                stack.pop()
                recomputed.add(w.op)
                roots: set = set()
                for x in ins:
                    roots |= kept[x] if recomputable(x) else {x}
                kept[w] = roots
    return kept, recomputed


def _memory_vectors(module, main, ops, anchor, n, training, state: TensorLocation = ON_CHIP,
                    replicas: int = 1, locations: Locations = Locations(), all_replicas: int = 1,
                    kept: dict | None = None, stage_inputs: dict | None = None):
    """Per position: bytes of weights (with optimizer state, where `state`
    keeps it on chip and sharded over `replicas`, and accumulators),
    bytes of forward values the backward reads (stashed per micro-batch), and
    the bytes crossing a cut just before the position: forward values into
    later stages (row 0), values read by earlier stages' backward (row 1).
    `locations`: off-chip weights, accumulators and activations take no
    resident tile memory (backend/offload.py loads them for their uses),
    sharded weights 1/`all_replicas` of theirs. Last, per position, the
    bytes of the working activations live while it runs: forward values the
    backward does not read (those are stashed), from the position that makes
    them to their last forward reader, copied-in ones included.

    `stage_inputs` (PopART's Pipeline recomputation, where a stage holds its
    inputs: `ipu-recompute`'s `receive_stage_inputs`) receives `held`, the
    bytes of the forward values a forward op reads across each cut (per cut
    position: what the stage starting there stashes), and `leaving`, the
    stashed values a later stage holds instead of their maker (position,
    last position before the first cut that would hand them on, bytes; see
    `_left`)."""
    weights = np.zeros(n)
    opt = module_config(module, OPTIMIZER_KEY) or {}
    states = optimizer_state_tensors(opt)
    for a, attrs in zip(main.body.block.args, main.arg_attrs.data if main.arg_attrs else []):
        if PARAM_KEY not in attrs.data:
            continue
        us = [anchor[u.operation] for u in a.uses if u.operation in anchor
              and not place(u.operation, _UNPLACED).is_backward]
        if not us:
            continue
        numel = value_numel(a)
        w = locations.weight
        b = 0 if w.off_chip(numel) else w.shard_bytes(_bytes(a), numel, all_replicas)
        if training:  # a gradient accumulator and the fp32 optimizer state per element
            b += 0 if locations.accumulator.off_chip(numel) else _bytes(a)
            b += resident_share(state, states * STATE_ITEMSIZE * numel, numel, replicas)
        weights[min(us)] += b
    saved = np.zeros(n)
    cross = np.zeros((2, n + 1))  # forward values into later stages, values back into earlier ones
    # a value the backward reads, itself or through forward views of it, is stashed
    root: dict = {}
    stashed = set()
    first_bwd: dict = {}  # a stashed value -> its first backward reader's position
    for o in ops:
        bwd = place(o, _UNPLACED).is_backward
        if bwd:
            for v in o.operands:
                if isinstance(v, OpResult) and not place(v.op, _UNPLACED).is_backward:
                    # a recomputed value stashes the kept values it is recomputed from
                    for k in (kept or {}).get(v, (v,)):
                        k = root.get(k, k)
                        stashed.add(k)
                        first_bwd[k] = min(first_bwd.get(k, n), anchor[o])
        view = o.name.removeprefix("aten.") in VIEW_OPS
        a = anchor[o]
        for r in o.results:
            if view and o.operands and not bwd:  # a view of a weight is the weight: not stashed
                root[r] = root.get(o.operands[0], o.operands[0])
            at = [anchor[u.operation] for u in r.uses if u.operation in anchor]
            later = max(at, default=a)
            if later > a and not bwd:  # copied across every cut in (a, later]
                cross[0, a + 1] += _bytes(r)
                cross[0, later + 1] -= _bytes(r)
            earlier = min(at, default=a)
            if earlier < a:  # read by an earlier stage's backward: copied back across (earlier, a]
                cross[1, earlier + 1] += _bytes(r)
                cross[1, a + 1] -= _bytes(r)
    if training:
        for v in stashed:
            if isinstance(v, OpResult) and v.op in anchor and \
                    v.op.name.removeprefix("aten.") not in VIEW_OPS and \
                    not locations.activation.off_chip(value_numel(v)):
                saved[anchor[v.op]] += _bytes(v)
    last_read: dict = {}  # a value (through forward views of it) -> its last forward reader's position
    for o in ops:
        if not place(o, _UNPLACED).is_backward:
            for v in o.operands:
                v = root.get(v, v)
                last_read[v] = max(last_read.get(v, -1), anchor[o])
    work = np.zeros(n + 1)
    for o in ops:
        if place(o, _UNPLACED).is_backward or o.name.removeprefix("aten.") in VIEW_OPS:
            continue
        for r in o.results:
            last = last_read.get(r, -1)
            if r not in stashed and last > anchor[o]:
                work[anchor[o]] += _bytes(r)
                work[last + 1] -= _bytes(r)
    if stage_inputs is not None:
        _stage_inputs(stage_inputs, ops, anchor, n, training, stashed, first_bwd, last_read,
                      locations)
    return weights, saved, np.cumsum(cross, axis=1)[:, :n], np.cumsum(work)[:n]


def _stage_inputs(out: dict, ops, anchor, n, training, stashed, first_bwd, last_read, locations) -> None:
    """`_memory_vectors`' `stage_inputs`. A forward value read by a forward
    op of a later stage is copied to that stage's IPU and held there for the
    stage's backward and recomputation (PopART stashes the IPU copy's
    result); its maker's stage stashes it only if its own backward reads it
    (its first backward reader comes before the cut)."""
    held = np.zeros(n + 2)
    for o in ops:
        if place(o, _UNPLACED).is_backward:
            continue
        a = anchor[o]
        for r in o.results:
            f = max((anchor[u.operation] for u in r.uses if u.operation in anchor
                     and not place(u.operation, _UNPLACED).is_backward), default=a)
            if f > a:  # held by the stage of every cut in (a, f]
                held[a + 1] += _bytes(r)
                held[f + 1] -= _bytes(r)
    out["held"] = np.cumsum(held)[:n + 1]
    leaving = []
    if training:
        for v in stashed:
            if not (isinstance(v, OpResult) and v.op in anchor) or \
                    v.op.name.removeprefix("aten.") in VIEW_OPS or locations.activation.off_chip(value_numel(v)):
                continue
            a = anchor[v.op]
            m = min(first_bwd[v], last_read.get(v, -1))
            if m > a:
                leaving.append((a, m, _bytes(v)))
    out["leaving"] = tuple(np.array(x, dtype=np.float64) for x in zip(*leaving)) if leaving else None


def _left(leaving, i, j):
    """The stashed bytes a stage over positions [i, j) leaves to the stages
    after it (`_stage_inputs`' `leaving`): the values it makes (at a
    position >= i) that a forward op at or after the cut j reads and no
    backward op before j does. `i` may be a vector of starts."""
    if leaving is None:
        return 0.0
    at, upto, nbytes = leaving
    sel = (at < j) & (j <= upto)
    if not sel.any():
        return 0.0
    return ((np.asarray(i)[..., None] <= at[sel]) * nbytes[sel]).sum(-1)


def stash_depths(stage_ipus, schedule: str, micro_batches: int, training: bool) -> list[int]:
    """Micro-batches of activations each forward stage keeps for its backward."""
    return list(_stash_depths_of(tuple(stage_ipus), schedule, micro_batches, training))


@functools.lru_cache(maxsize=64)  # a planner costs many configurations of one pipeline shape
def _stash_depths_of(stage_ipus: tuple, schedule: str, micro_batches: int, training: bool) -> tuple:
    S = len(stage_ipus)
    if not training or S == 1:
        return (1,) * S
    sip = {j: stage_ipus[j] for j in range(S)}
    sip.update({2 * S - 2 - j: stage_ipus[j] for j in range(S - 1)})
    N = len(set(stage_ipus))
    M = micro_batches or (2 * S - 1 if schedule == "FillDrain" else N)
    if schedule == "Interleaved1F1B":
        M = -(-M // N) * N
    try:
        sched = pipelined(sip, S, M, True, 1, schedule)
    except Exception as e:  # the schedule's own rule, with its numbers
        raise PlacementError(f"ipu-auto-stage: {e}") from e
    return tuple(sched.in_flight(j, 2 * S - 2 - j) for j in range(S))


def _partition(cycles, link, weights, saved, temp, code, depth, stage_ipus, pinned, no_cut,
               training, mach, virtual, tail=None, reserve=None, stash_in=None, once=None, leaving=None,
               tail_back=None, host=(0, 0)):
    """The cuts 0 = c0 < c1 < ... < cS = n minimising the slowest IPU, each
    stage within its IPU's tile memory; its cycles and bytes. `cycles` and
    `saved` (the stashed bytes per position) are per stage; `stash_in`: the
    bytes a stage starting at each cut stashes on top (its inputs, under
    Pipeline recomputation); `once`, per stage: bytes per position live for
    one micro-batch (the values its backward recomputes); `leaving`, per
    stage: the stashed values of `saved` and of `once` a later stage holds
    instead (`_left`), or None. `tail`: the
    last stage is positions [tail, n), on the IPU of an earlier stage, whose
    cycles and memory it adds to; `tail_back`, per position: the bytes of
    the tail's backward values a backward op there reads (`_tail_gradients`),
    copied out of the tail (`link` has them at the tail's cut) unless that
    op is on the tail's IPU. `host`: the cycles of a micro-batch's host
    streams in and out (`_host_cycles`). `reserve`: bytes per tile, by IPU, that
    the stages on it leave free (an IPU the profile found over its tile
    with an earlier split: the difference between that memory plan's
    fullest tile and this estimate of the average one)."""
    reserve = reserve or {}
    n = len(weights)
    S = len(stage_ipus)
    tiles = mach.tiles
    cap = mach.bytes_per_tile / virtual
    # per stage: its IPU's tile less what the caller reserves there
    caps = [cap - reserve.get(ipu, 0) for ipu in stage_ipus]
    W = np.concatenate([[0], np.cumsum(weights)])
    A = [np.concatenate([[0], np.cumsum(s)]) for s in saved]
    IN = np.zeros(n + 1) if stash_in is None else np.asarray(stash_in, dtype=np.float64)
    O = [np.concatenate([[0], np.cumsum(o)]) for o in (once if once is not None else [np.zeros(n)] * S)]
    K = np.concatenate([[0], np.cumsum(code)])
    L = leaving if leaving is not None else [(None, None)] * S

    def stage_bytes(k, i, j):
        """Stage k's bytes over positions [i, j) (i: a start or a vector of
        them): stashed per micro-batch in flight, and live for one."""
        return depth[k] * (A[k][j] - A[k][i] - _left(L[k][0], i, j) + IN[i]) + \
            O[k][j] - O[k][i] - _left(L[k][1], i, j)

    C = [np.concatenate([[0], np.cumsum(c)]) for c in cycles]
    io = _host_cycles(S, training, host)
    link = np.atleast_2d(link)
    send = np.concatenate([link[0], [0]])  # copy out of a stage ending before position j
    back = np.concatenate([link[-1], [0]])  # copy back out of a stage starting at position i
    send[0] = back[0] = 0
    # the tail: its cycles and its bytes per tile (but its largest temporary,
    # which is not live while its IPU's other stage runs) go to the stage
    # sharing its IPU
    host, tail_cyc, tail_mem, tail_temp = -1, 0.0, 0.0, 0.0
    TB = np.concatenate([[0], np.cumsum(tail_back)]) if tail_back is not None else np.zeros(n + 1)

    def on_host(i, j):
        """The tail's copy-out cycles saved for the readers of its backward
        values at positions [i, j) of its IPU's other stage (i: a start or a
        vector of them; `Machine.link_cycles` over them)."""
        return np.ceil((TB[j] - TB[i]) / mach.ipu_link_bytes_per_s * mach.clock_hz)

    def saving(cuts) -> float:
        """The tail's copy-out cycles saved under `cuts` (0 without a tail)."""
        return float(on_host(cuts[host], cuts[host + 1])) if host >= 0 else 0.0

    if tail is not None:
        host = stage_ipus.index(stage_ipus[-1])
        tail_cyc = C[S - 1][n] - C[S - 1][tail] + (back[tail] if training else 0) + io[S - 1]
        tail_mem = (W[n] - W[tail] + stage_bytes(S - 1, tail, n)) / tiles + \
            mach.code_bytes_per_op_per_tile * (K[n] - K[tail])
        tail_temp = temp[tail:].max()
    inf = np.inf
    best = np.full((S + 1, n + 1), inf)
    arg = np.zeros((S + 1, n + 1), dtype=np.int64)
    best[0, 0] = 0.0
    for k in range(S):
        ipu = stage_ipus[k]
        bad = np.concatenate([[0], np.cumsum((pinned >= 0) & (pinned != ipu))])
        prev = best[k]
        for j in range(k + 1, n + 1):
            if no_cut[j] and j < n:
                continue
            if tail is not None and (j > tail if k < S - 1 else j < n):
                continue
            i = np.arange(k, j) if tail is None or k < S - 1 else np.array([tail])
            ok = (bad[j] - bad[i] == 0) & ~(no_cut[i] & (i > 0)) & np.isfinite(prev[i])
            if not ok.any():
                continue
            cyc = C[k][j] - C[k][i] + (send[j] if j < n else 0) + (back[i] if training else 0) + io[k]
            mtemp = np.maximum.accumulate(temp[i[0]:j][::-1])[::-1]
            mem = (W[j] - W[i] + stage_bytes(k, i, j)) / tiles + \
                mach.code_bytes_per_op_per_tile * (K[j] - K[i]) + mtemp
            if k == host:
                cyc = cyc + tail_cyc - on_host(i, j)
                mem = mem - mtemp + np.maximum(mtemp, tail_temp) + tail_mem
            elif tail is not None and k == S - 1:
                mem = np.zeros_like(mem)  # counted with its host stage
            val = np.where(ok & (mem <= caps[k]), np.maximum(prev[i], cyc), inf)
            m = int(np.argmin(val))
            if np.isfinite(val[m]) and (k < S - 1 or j == n):
                best[k + 1, j], arg[k + 1, j] = val[m], i[m]
    if not np.isfinite(best[S, n]):
        _explain_infeasible(weights, max(max(depth) * A[k][n] + O[k][n] for k in range(S)), pinned, stage_ipus,
                            mach, cap)
    cuts = [n]
    for k in range(S, 0, -1):
        cuts.append(int(arg[k, cuts[-1]]))
    cuts = cuts[::-1]

    def report(cuts):
        stage_cyc, stage_mem = [], []
        for k, (i, j) in enumerate(zip(cuts[:-1], cuts[1:])):
            stage_cyc.append(C[k][j] - C[k][i] + (send[j] if j < n else 0) + (back[i] if training else 0) + io[k])
            stage_mem.append(W[j] - W[i] + stage_bytes(k, i, j) +
                             tiles * (mach.code_bytes_per_op_per_tile * (K[j] - K[i]) + temp[i:j].max()))
        stage_cyc[-1] -= saving(cuts)  # the tail: no copy to its IPU's other stage
        return stage_cyc, stage_mem

    def ok(k, i, j):
        """Stage k over positions [i, j): pins, blocks and memory allow it."""
        if i >= j or (i > 0 and no_cut[i]) or (j < n and no_cut[j]):
            return False
        if tail is not None and (i == tail and j == n) != (k == S - 1):
            return False  # the tail stays the last stage, whole
        if ((pinned[i:j] >= 0) & (pinned[i:j] != stage_ipus[k])).any():
            return False
        if tail is not None and k == S - 1:
            return True  # its memory counts with its host stage
        mem = (W[j] - W[i] + stage_bytes(k, i, j)) / tiles + \
            mach.code_bytes_per_op_per_tile * (K[j] - K[i])
        if k == host:
            return mem + tail_mem + max(temp[i:j].max(), tail_temp) <= caps[k]
        return mem + temp[i:j].max() <= caps[k]

    return cuts, report, ok, saving


def _refine(cuts, cycles, bwd, link, stage_ipus, schedule, micro_batches, training, ok, tail=False,
            saving=None, host=(0, 0)):
    """Move the cuts while the schedule's makespan (Schedule.makespan: fill,
    flush and the order of each IPU's steps, not only the slowest stage)
    shrinks: one cut, or a run of cuts together (moving work between the
    first or last stage and all the others), by steps from half a stage down
    to one position. `tail`: the last cut (the tail's start) stays;
    `saving(cuts)`: the cycles its copy out saves (`_partition`'s);
    `host`: the host streams' cycles in and out (`_host_cycles`)."""
    S = len(stage_ipus)
    if S == 1:
        return cuts
    link = np.atleast_2d(link)
    n = link.shape[1]
    send = np.concatenate([link[0], [0]])
    back = np.concatenate([link[-1], [0]])
    send[0] = back[0] = 0
    sip = {j: stage_ipus[j] for j in range(S)}
    if training:
        sip.update({2 * S - 2 - j: stage_ipus[j] for j in range(S - 1)})
    N = len(set(stage_ipus))
    M = micro_batches or (2 * S - 1 if schedule == "FillDrain" else N)
    if schedule == "Interleaved1F1B":
        M = -(-M // N) * N
    sched = _schedule_of(tuple(sorted(sip.items())), S, M, training, schedule)

    seen: dict[tuple, float] = {}  # a makespan walks every step: each split once

    def cost(cuts):
        key = tuple(cuts)
        if key not in seen:
            seen[key] = _makespan(cuts)
        return seen[key]

    def _makespan(cuts):
        per = {}
        for k, (i, j) in enumerate(zip(cuts[:-1], cuts[1:])):
            b = bwd[k][i:j].sum() + (back[i] if training else 0)
            f = cycles[k][i:j].sum() - bwd[k][i:j].sum() + (send[j] if j < n else 0)
            if training and k < S - 1:
                per[k], per[2 * S - 2 - k] = f, b
            else:
                per[k] = f + b - (saving(cuts) if saving is not None and tail else 0)
        # the host streams: in before stage 0's forward, out after the last step
        per[0] += host[0]
        per[2 * S - 2 if training else S - 1] += host[1]
        return sched.makespan(per)

    best = cost(cuts)
    step = max(1, n // (2 * S))
    while step:
        improved = False
        # move one cut, or a cut with all the cuts after it, or with all before it
        last = S - 1 if tail else S  # the cuts that may move: 1 .. last-1
        moves = [range(c, c + 1) for c in range(1, last)] + [range(c, last) for c in range(1, last - 1)] + \
            [range(1, c + 1) for c in range(2, last)]
        for which in moves:
            for d in (-step, step):
                new = list(cuts)
                for c in which:
                    new[c] += d
                if not 0 < new[which[0]] <= new[which[-1]] < n:
                    continue  # a cut moved past either end of the graph: no split
                if not all(ok(k, new[k], new[k + 1]) for k in range(which[0] - 1, which[-1] + 1)):
                    continue
                val = cost(new)
                if val < best:
                    best, cuts, improved = val, new, True
        if not improved:
            step //= 2
    return cuts


def _host_cycles(S: int, training: bool, host) -> np.ndarray:
    """Each stage's host stream cycles per micro-batch, `host` = (in, out):
    the inputs on stage 0, the outputs on the last step's stage (training:
    stage 0's backward, which shares stage 0's IPU; else the last stage),
    as the profile's timeline puts them."""
    io = np.zeros(S)
    io[0] += host[0]
    io[0 if training else S - 1] += host[1]
    return io


def _schedule_of(sip: tuple, S: int, M: int, training: bool, schedule: str):
    """The pipeline's steps (read only: `_refine` asks for its makespan;
    `pipelined` keeps the steps of recent shapes)."""
    return pipelined(dict(sip), S, M, training, 1, schedule)


def _explain_infeasible(weights, activations, pinned, stage_ipus, mach, cap):
    """`activations`: the bytes the model's activations take in the stage
    that holds most of them, were it the whole model (stashed per
    micro-batch in flight, recomputed ones for one)."""
    need = (weights.sum() + activations) / mach.tiles
    pins = sorted({int(p) for p in pinned if p >= 0})
    bad_pins = [p for p in pins if p not in stage_ipus]
    if bad_pins:
        raise PlacementError(f"ipu-auto-stage: the model places ops on IPUs {bad_pins}, but the "
                             f"strategy has IPUs 0..{max(stage_ipus)}")
    order = [int(p) for p in pinned if p >= 0]
    pins = (f"the user placements (IPUs in program order {sorted(set(order), key=order.index)}) must "
            "not go back to an earlier IPU, and ") if order else ""
    raise NoSplitFits(
        f"ipu-auto-stage: no split into {len(stage_ipus)} stages over {len(set(stage_ipus))} IPUs fits: "
        f"{pins}each stage must fit {int(cap):,} bytes per tile ({mach.name}); the whole model "
        f"needs about {int(need):,} bytes per tile of weights and stashed activations. Use more "
        f"IPUs, a smaller micro-batch, the 1F1B schedule (fewer stashed micro-batches)"
        f"{' or fewer placements' if order else ''}")
