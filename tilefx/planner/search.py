"""`tilefx.plan`: which configuration, on how many IPUs.

The model is traced once, at the example inputs' micro-batch, as
`trainingModel` would trace it. Every configuration is then costed from a
copy of that graph IR: its options set on the module as the executor sets
them, the graph passes run (`ipu-auto-stage` cuts the stages, at the model's
repeated layers when it has them), and the machine model's profile
(`backend/profile.py`) predicts its cycles per weight update and each IPU's
fullest tile. The space: stages x replicas = ipus (each stage one IPU), the
gradient accumulation that reaches the global batch, the pipeline schedule
(FillDrain, 1F1B, ZeroBubble), where the optimizer state lives (on chip,
sharded over the replicas, off chip) and the available memory proportion.
What the user's options fix (a replication factor, an accumulation, a
strategy, proportions, an optimizer location, Blocks with IPUs) is kept.
Configurations that fit are ranked by predicted throughput.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
from dataclasses import fields, replace

import torch

from tilefx.api.annotations import BeginBlock, Block, removeBlocks
from tilefx.api.executor import trainingModel
from tilefx.api.compile_config import compile_config
from tilefx.api.options import Options
from tilefx.api.strategies import PipelinedExecution
from tilefx import driver
from tilefx.analysis.repeated_layers import attach, twin_pairs, twins_in
from tilefx.analysis.shared_results import Shared
from tilefx.analysis.shared_results import attach as share
from tilefx.backend.machine import machine as machine_named
from tilefx.dialects.ipu import PLACE_KEY, START_BLOCK, PlacementAttr, StageOp
from tilefx.dialects.irutil import find_func
from tilefx.errors import Error
from tilefx.gcpause import gc_paused, long_lived_frozen
from tilefx.passes.assign_stages import AssignStagesPass
from tilefx.passes.auto_stage import STATE_RANK, AutoStagePass, NoSplitFits, refusal_covers, stash_depths
from tilefx.passes.pipelines import graph_context, run_graph_passes
from tilefx.planner.candidate import (STATE_OFF_CHIP, STATE_OFF_CHIP_SHARDED, STATE_ON_CHIP, STATE_SHARDED,
                                     Candidate)

PIPELINE_SCHEDULES = ("FillDrain", "1F1B", "ZeroBubble")
# the default available memory proportion first (PopTorch's 0.6), then
# smaller ones, tried only where a larger one does not fit: a matmul's
# temporaries shrink with it. 0.15 is the smallest proportion of Graphcore's
# BERT-Large pre-training configurations (graphcore/examples,
# nlp/bert/pytorch/configs_pretraining.yml: matmul_proportion 0.15 to 0.25).
PROPORTIONS = (0.6, 0.3, 0.15)
# ipu-auto-stage sizes a stage by its average tile; the profile's memory
# plan by its fullest. Where the plan finds an IPU over its tile, the split
# is cut again leaving that excess free there, at most this many times.
RECUTS = 3
_UNIT_BLOCK = "plan.unit"
_TAIL_BLOCK = "plan.tail"


def plan(model: torch.nn.Module, *example_inputs, ipus: int, optimizer=None,
         global_batch: int | None = None, options: Options | None = None,
         keep_all: bool = False, workers: int | None = None) -> list[Candidate]:
    """The configurations of `model` on `ipus` IPUs that fit, best predicted
    throughput first. `example_inputs` are one micro-batch; `optimizer` a
    `tilefx.optim` optimizer over the model's parameters (SGD by default);
    `global_batch` the samples per weight update (default: micro-batch x
    ipus x 16); `options` the user's fixed choices. `keep_all`: also return
    the configurations that do not fit (last, with the reason). `workers`:
    processes costing the stage counts at once, forked on Linux (default:
    the CPUs this process may run on; 1: this process alone; elsewhere one
    process). The model is traced once, in this process, whatever their
    number; the result is the same."""
    if isinstance(ipus, bool) or not isinstance(ipus, int) or ipus < 1:
        raise Error(f"tilefx.plan: ipus must be a positive int, got {ipus!r}")
    if workers is None:
        workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    elif isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise Error(f"tilefx.plan: workers must be a positive int, got {workers!r}")
    tensors = [x for x in example_inputs if isinstance(x, torch.Tensor) and x.dim()]
    if not tensors:
        raise Error("tilefx.plan: give example inputs of one micro-batch (tensors with a batch dimension)")
    mb = tensors[0].shape[0]
    global_batch = mb * ipus * 16 if global_batch is None else global_batch
    if isinstance(global_batch, bool) or not isinstance(global_batch, int) or global_batch < mb:
        raise Error(f"tilefx.plan: global_batch must be an int of at least the micro-batch ({mb}), "
                    f"got {global_batch!r}")
    planner = _Planner(model, example_inputs, ipus, optimizer, global_batch, options or Options(), mb)
    planner.workers = workers
    return planner.run(keep_all)


class _Planner:
    def __init__(self, model, inputs, ipus, optimizer, global_batch, base: Options, mb: int):
        self.model, self.inputs, self.ipus = model, inputs, ipus
        self.optimizer, self.global_batch, self.base, self.mb = optimizer, global_batch, base, mb
        self.machine = machine_named(base.machine)
        default = Options()
        self.fixed_replicas = base.replication_factor if base.replication_factor != 1 else None
        g = base.Training.gradient_accumulation
        self.fixed_accumulation = g if g != default.Training.gradient_accumulation else None
        self.strategy = base.execution_strategy
        self.fixed_proportion = dict(base.available_memory_proportion) or None
        loc = base.TensorLocations.optimizer
        self.fixed_state = None if loc is None else (
            (STATE_OFF_CHIP_SHARDED if loc.resolved().sharded else STATE_OFF_CHIP)
            if loc.resolved().on_chip is False else
            STATE_SHARDED if loc.resolved().sharded else STATE_ON_CHIP)
        self.user_blocks = any(getattr(m, "_tilefx_begin_block", None) is not None for m in model.modules())
        self.units: list[str] = []
        self.tail: str | None = None  # the module starting the tail whose weight is tied to stage 0's
        self.trace_seconds = 0.0
        self.costings = 0
        self.workers = 1  # processes costing the stage counts (_search_forked)
        self.hopeless: set[int] = set()  # stage counts no configuration of which can fit
        # per split (stages, replicas, accumulation, tail): the (state rank,
        # proportion, stash depths) at which ipu-auto-stage found no split that fits
        self.refusals: dict[tuple, list[tuple]] = {}
        self._not_refused: set[tuple] = set()  # configurations ipu-auto-stage was asked about (_probe)
        # the traced ops of identical repeated layers, each with its twin in the
        # first of them (analysis/repeated_layers.py); False: every op of every copy costed
        self.reuse_repeats = True
        self.repeat_pairs: list[tuple[int, int]] = []
        # what ipu-auto-stage derives from the traced ops alone (each op's
        # position, the recomputation, each position's cycles and bytes, the
        # split of each configuration) and training-step's @update, computed
        # once per setting they read for every copy costed, and the split
        # asked on the trace before copying it (analysis/shared_results.py,
        # _refused_on_trace); False: each copy computes its own
        self.share_results = True
        self.shared = Shared()

    # -- the one trace -------------------------------------------------------
    def _repeated_layers(self) -> list[str]:
        """The children of the model's longest ModuleList / Sequential (its
        repeated layers): the planner cuts only between them."""
        best: list[str] = []
        for name, m in self.model.named_modules():
            if isinstance(m, (torch.nn.ModuleList, torch.nn.Sequential)) and len(m) > len(best):
                best = [f"{name}.{i}" if name else str(i) for i in range(len(m))]
        return best if len(best) >= 2 else []

    def _trace(self) -> None:
        start = time.perf_counter()
        if not self.user_blocks and not self._fixed_stages():
            self.units = self._repeated_layers()
            for i, path in enumerate(self.units):  # blocks without an IPU: never cut inside one
                BeginBlock(self.model.get_submodule(path), f"{_UNIT_BLOCK}{i}")
        hooks = self._tail_hooks() if self.units else []
        opts = self.base.clone()
        opts.replicationFactor(1).deviceIterations(1)
        opts.Training.gradientAccumulation(1)
        opts.useOfflineIpuTarget()
        opts.showCompilationProgressBar(False)
        optimizer = self.optimizer
        if optimizer is None:
            from tilefx.lowering import optimizers as optim

            optimizer = optim.SGD(self.model.parameters(), lr=0.01)
        self.executor = trainingModel(self.model, opts, optimizer=optimizer)
        try:
            self.traced = self.executor.trace_only(*self.inputs)
        finally:
            for h in hooks:
                h.remove()
            if self.units:
                removeBlocks(self.model)
        if self.reuse_repeats:
            # ipu-autocast is the same for every configuration (the model's
            # autocast regions and policy): run once here, not on each copy, so
            # the repeated layers are compared with the types the passes cost
            autocast = driver.autocast_pass(compile_config(opts, training=True))
            if autocast is not None:  # the user's policy and half-float casting, as a compile runs it
                autocast.apply(graph_context(), self.traced)
            self.repeat_pairs = twin_pairs(find_func(self.traced, "main"))
            # ipu-auto-stage runs on the trace itself too (_refused_on_trace)
            attach(self.traced, twins_in(find_func(self.traced, "main"), self.repeat_pairs))
        self.trace_seconds = time.perf_counter() - start

    def _tail_hooks(self) -> list:
        """Forward hooks that find the tail while the model is traced: the
        first module after the last repeated layer owning a parameter that a
        module before the first repeated layer also owns (a masked-LM head
        tied to the word embedding). They open the tail's block there (a
        block without an IPU) and note its path in `self.tail`."""
        owners: dict[int, list[tuple[str, torch.nn.Module]]] = {}
        for path, m in self.model.named_modules():
            for p in m.parameters(recurse=False):
                owners.setdefault(id(p), []).append((path, m))
        inside = tuple(self.units) + tuple(u + "." for u in self.units)
        tied = {}  # module outside the repeated layers -> its tied parameters
        for group in owners.values():
            if len(group) > 1 and not any(path.startswith(inside) for path, _ in group):
                for path, m in group:
                    tied.setdefault((path, m), set()).update(id(p) for p in m.parameters(recurse=False)
                                                             if len(owners[id(p)]) > 1)
        if not tied:
            return []
        state = {"phase": "before", "seen": set()}

        def reset(module, args):
            state["phase"], state["seen"] = "before", set()

        def started(module, args):
            state["phase"] = "layers"

        def ended(module, args, out):
            state["phase"] = "after"

        def owner(path, ids):
            def hook(module, args):
                if state["phase"] == "before":
                    state["seen"] |= ids
                elif state["phase"] == "after" and ids & state["seen"]:
                    state["phase"] = "tail"
                    self.tail = path
                    Block.start(_TAIL_BLOCK)
            return hook

        hooks = [self.model.register_forward_pre_hook(reset),
                 self.model.get_submodule(self.units[0]).register_forward_pre_hook(started),
                 self.model.get_submodule(self.units[-1]).register_forward_hook(ended)]
        hooks += [m.register_forward_pre_hook(owner(path, ids)) for (path, m), ids in tied.items()]
        return hooks

    def _fixed_stages(self) -> int | None:
        """The IPUs per replica the user's strategy or Blocks fix, if any."""
        if self.user_blocks:
            ipus = [b[1] for m in self.model.modules()
                    if (b := getattr(m, "_tilefx_begin_block", None)) is not None and b[1] is not None]
            if ipus:
                return max(ipus) + 1
        s = self.strategy
        if s is None:
            return None
        if getattr(s, "auto_ipus", None) is not None:
            return s.auto_ipus
        ipus = {st.to_config().get("ipu") for st in getattr(s, "stages", [])}
        return len(ipus) if ipus and None not in ipus else None

    # -- the search ------------------------------------------------------------
    def run(self, keep_all: bool) -> list[Candidate]:
        self._trace()
        with long_lived_frozen():  # the model, torch and the trace outlive every copy costed
            out = self._search()
        fitting = sorted((c for c in out if c.fits), key=lambda c: -c.throughput)
        return fitting + ([c for c in out if not c.fits] if keep_all else [])

    def _search(self) -> list[Candidate]:
        groups = self._groups()
        # forked workers on Linux only: macOS's system libraries are not
        # safe to use in a forked child (Python's multiprocessing docs,
        # "Contexts and start methods"); elsewhere one process costs them all
        if self.workers > 1 and len(groups) > 1 and sys.platform.startswith("linux"):
            return self._search_forked(groups)
        return [c for g in groups for c in self._group(*g)]

    def _groups(self) -> list[tuple[int, int, int]]:
        """(stages, replicas, accumulation) of each stage count searched."""
        out = []
        fixed = self._fixed_stages()
        for stages in (d for d in range(1, self.ipus + 1) if self.ipus % d == 0):
            if fixed is not None and stages != fixed:
                continue
            if self.units and stages > len(self.units):
                continue
            replicas = self.ipus // stages
            if self.fixed_replicas is not None and replicas != self.fixed_replicas:
                continue
            per_step = self.mb * replicas
            accumulation = self.fixed_accumulation or self.global_batch // per_step
            if accumulation < 1 or accumulation * per_step != self.global_batch:
                continue
            out.append((stages, replicas, accumulation))
        return out

    def _group(self, stages: int, replicas: int, accumulation: int) -> list[Candidate]:
        """The configurations of one stage count. Nothing a group learns
        (the stage counts proved hopeless, the refused splits) is read by
        another, so the groups can be costed in any order or at once."""
        out: list[Candidate] = []
        for schedule in self._schedules(stages, accumulation):
            out += self._first_that_fits(stages, replicas, accumulation, schedule)
            if stages in self.hopeless:  # no schedule changes what proves it
                break
        # the tail back on IPU 0, with the weight it shares: one more
        # pipeline stage, which PopTorch's FillDrain pipeline runs. Tried
        # even when the contiguous splits proved this stage count hopeless:
        # they hold the tied weight twice, the tail once
        if self.tail is not None and stages > 1 and accumulation >= 2 * (stages + 1) - 1:
            out += self._first_that_fits(stages, replicas, accumulation, "FillDrain", self.tail)
        return out

    def _search_forked(self, groups: list[tuple[int, int, int]]) -> list[Candidate]:
        """The stage counts costed by `self.workers` forked processes, each
        starting from this process's trace (shared with it, not copied: the
        trace is frozen, so the collector does not touch its pages). A
        worker sends back each candidate's fields as plain values; the
        candidates are then as a search in one process makes them, in the
        same order. Pipelines with more stages are sent first: they have
        more schedules and the tail to try."""
        global _FORKED
        order = sorted(range(len(groups)), key=lambda i: -groups[i][0])
        _FORKED = (self, groups)
        try:
            with multiprocessing.get_context("fork").Pool(min(self.workers, len(groups))) as pool:
                done = dict(zip(order, pool.map(_group_in_worker, order, chunksize=1)))
        finally:
            _FORKED = None
        out: list[Candidate] = []
        for i in range(len(groups)):
            records, costings = done[i]
            self.costings += costings
            out += [Candidate(**r, base=self.base) for r in records]
        return out

    def _schedules(self, stages: int, accumulation: int) -> list[str]:
        if stages == 1:
            return ["FillDrain"]
        own = getattr(self.strategy, "schedule", None)
        if self.strategy is not None and own is not None and own != "FillDrain":
            return [own]
        return [s for s in PIPELINE_SCHEDULES if s != "FillDrain" or accumulation >= 2 * stages - 1]

    def _states(self, replicas: int) -> list[str]:
        if self.fixed_state is not None:
            return [self.fixed_state]
        sharded = [STATE_SHARDED, STATE_OFF_CHIP_SHARDED] if replicas > 1 else []
        return [STATE_ON_CHIP] + sharded + [STATE_OFF_CHIP]

    def _first_that_fits(self, stages, replicas, accumulation, schedule, tail=None) -> list[Candidate]:
        """Cost the state locations and proportions in turn, from the one
        that costs the least time, until one fits. Those ipu-auto-stage is
        known to refuse (`_covered`) are not costed."""
        tried = []
        proportions = [None] if self.fixed_proportion else PROPORTIONS
        states = self._states(replicas)

        def variant(state, prop, sched=schedule):
            return Candidate(stages, replicas, self.mb, accumulation, sched, state,
                             prop if prop is not None else min(self.fixed_proportion.values()),
                             self.machine.name, base=self.base, tail=tail)

        for state in states:
            c = None
            for prop in proportions:
                v = variant(state, prop)
                if self._covered(v):
                    continue
                c = v
                self._cost(c)
                tried.append(c)
                if c.fits:
                    return tried + self._raised(c)
                # the planner's own cut (its stages' IPUs and depths are what
                # _variant_of reads): try the least memory at once, its refusal
                # covers the rest
                if c.refused and self._fixed_stages() is None and not self.user_blocks:
                    least = min(states, key=lambda st: STATE_RANK[variant(st, prop).state_flags])
                    tried += self._probe(c, [variant(least, min(proportions), sched) for sched in
                                             self._least_stash_first(stages, accumulation, schedule, tail)])
                    continue
                if not c.memory and "fits" not in c.reason:
                    return tried  # fails for a reason memory does not change
                if c.held_bytes > c.tile_bytes:
                    self.hopeless.add(stages)
                    c.reason += (f"; no configuration of {stages} stage(s) fits: its weights, buffers and "
                                 f"gradient accumulators alone take {c.held_bytes:,} bytes per tile on "
                                 f"average ({c.tile_bytes:,} per tile)")
                    return tried
            if c is not None and self._fixed_stages() is None and not self.user_blocks:
                tried += self._recut(c)
                if tried and tried[-1].fits:
                    return tried + self._raised(tried[-1])
        return tried

    # -- refused splits ----------------------------------------------------------
    @staticmethod
    def _key(c: Candidate) -> tuple:
        return (c.stages, c.replicas, c.accumulation, c.schedule, c.state, c.proportion, c.tail or "")

    @staticmethod
    def _variant_of(c: Candidate) -> tuple:
        """What ipu-auto-stage's memory estimate of `c` grows with: its
        optimizer state's rank, its proportion and each stage's stash depth."""
        stage_ipus = list(range(c.stages)) + ([0] if c.tail else [])
        return (STATE_RANK[c.state_flags], c.proportion,
                tuple(stash_depths(stage_ipus, c.schedule, c.accumulation, True)))

    def _covered(self, c: Candidate) -> bool:
        """Whether ipu-auto-stage refused this split at no more memory
        (auto_stage.refusal_covers: the same refusal holds here)."""
        refused = self.refusals.get((c.stages, c.replicas, c.accumulation, c.tail or ""), ())
        return any(refusal_covers(r, *self._variant_of(c)) for r in refused)

    def _refused(self, c: Candidate) -> None:
        self.refusals.setdefault((c.stages, c.replicas, c.accumulation, c.tail or ""), []).append(
            self._variant_of(c))

    def _least_stash_first(self, stages, accumulation, schedule, tail) -> list[str]:
        """The schedules of this split to probe: one stashing no more than
        any other the search tries (if there is one), then `schedule`."""
        scheds = ["FillDrain"] if tail else self._schedules(stages, accumulation)
        stage_ipus = list(range(stages)) + ([0] if tail else [])
        depth = {s: stash_depths(stage_ipus, s, accumulation, True) for s in scheds}
        least = [s for s in scheds if all(all(a <= b for a, b in zip(depth[s], depth[t])) for t in scheds)]
        return list(dict.fromkeys(least[:1] + [schedule]))

    def _probe(self, c: Candidate, floors: list[Candidate]) -> list[Candidate]:
        """`c` was refused by ipu-auto-stage: record it, and ask the pass
        about the configurations of this split needing the least memory
        (the state location with the fewest resident bytes at the smallest
        proportion, for the schedule stashing the least, then `c`'s). A
        refusal of one covers every configuration of the split needing as
        much or more, which the search then skips: that one is returned,
        with what it covers."""
        self._refused(c)
        for f in floors:
            key = self._key(f)
            if self._covered(f) or key in self._not_refused:
                continue
            e = self._refusal(f)
            if e is None:
                self._not_refused.add(key)
                continue
            self._refused(f)
            f.fits, f.refused = False, True
            f.reason = (str(e).splitlines()[0] + "; so is every configuration of this split stashing as many "
                        "micro-batches or more, with the optimizer state at least as much on chip and a "
                        f"proportion of at least {f.proportion} (not costed)")
            return [f]
        return []

    def _raised(self, c: Candidate) -> list[Candidate]:
        """`c` with a larger proportion on every IPU but its fullest, the
        next larger of PROPORTIONS first, while that fits and is faster (as
        Graphcore's BERT configurations give IPU 0, with the embedding, the
        smallest). One that fits but is no faster is left out (`c` says the
        same, with less memory)."""
        out: list[Candidate] = []
        if self.fixed_proportion or c.stages == 1 or not c.memory:
            return out
        fullest = max(c.memory, key=c.memory.__getitem__)
        best = c
        for q in sorted(p for p in PROPORTIONS if p > c.proportion):
            r = Candidate(c.stages, c.replicas, c.micro_batch, c.accumulation, c.schedule, c.state,
                          c.proportion, c.machine, base=c.base, tail=c.tail,
                          proportions={i: q for i in range(c.stages) if i != fullest})
            self._cost(r, c.reserve or None)
            if not r.fits:
                out.append(r)
                break
            if r.throughput <= best.throughput:
                break
            out.append(r)
            r.reason = c.reason
            best = r
        return out

    def _recut(self, c: Candidate) -> list[Candidate]:
        """`c` cut again, leaving free on each IPU the profile found over its
        tile what it was over by (added up over the tries)."""
        out: list[Candidate] = []
        reserve = [0] * c.stages
        for _ in range(RECUTS):
            over = {i: b - c.tile_bytes for i, b in c.memory.items() if b > c.tile_bytes}
            if c.stages == 1 or not over:
                break
            for i, b in over.items():
                reserve[i] += b
            c = Candidate(c.stages, c.replicas, c.micro_batch, c.accumulation, c.schedule, c.state,
                          c.proportion, c.machine, base=c.base, tail=c.tail)
            self._cost(c, reserve)
            out.append(c)
            if c.fits:
                c.reason = "cut again leaving free per tile " + ", ".join(
                    f"{b / 1024:.0f} KiB on IPU {i}" for i, b in enumerate(reserve) if b) + \
                    " (the memory plan of the first split was over there)"
                break
        return out

    def _passes(self, c: Candidate, reserve: list[int] | None = None, stop_after: str | None = None):
        """A copy of the traced IR with `c`'s options written in and the
        graph passes run on it (up to `stop_after`): (module, config, the
        repeated layer of each forward op)."""
        opts = self._options(c)
        module = self.traced.clone()
        if self.repeat_pairs:  # each repeated layer's ops costed once per context
            attach(module, twins_in(find_func(module, "main"), self.repeat_pairs))
        unit_of = self._units_of(module)
        if c.stages == 1 and self.units:
            self._drop_unit_blocks(module)
        elif self.share_results:  # the ops as traced: what the passes derive from them alone is shared
            share(module, self.shared)
        config = self._prepare(module, opts)
        auto_stage = self._auto_stage(config, c, reserve)
        # not verified: the trace it copies was (trace_only), the graph passes
        # keep IR well formed, and a configuration is costed, never run (the one
        # a user picks is verified when it compiles)
        run_graph_passes(module, training=True,
                         autocast=None if self.reuse_repeats else driver.autocast_pass(config),
                         assign=AssignStagesPass(gradient_accumulation=c.accumulation, device_iterations=1),
                         verify=False, stop_after=stop_after, auto_recomputation=config.auto_recomputation,
                         host_io=config.host_io, available_memory=driver.available_memory_pass(config),
                         partials_type=driver.partials_type_pass(config), auto_stage=auto_stage)
        return module, config, unit_of

    def _options(self, c: Candidate) -> Options:
        opts = c.options
        # one stage is no pipeline: the candidate's own options (and the
        # model a user compiles with them) carry no strategy, so neither does
        # its costing; the profile's memory plan judges whether it fits
        if self._fixed_stages() is None and not self.user_blocks and c.stages > 1:
            opts.setExecutionStrategy(PipelinedExecution.auto(c.stages, schedule=c.schedule,
                                                              tail=_TAIL_BLOCK if c.tail else None))
        return opts

    @staticmethod
    def _prepare(module, opts: Options):
        """`opts` written into `module` as a compile writes them; its config."""
        config = compile_config(opts, training=True)
        driver.prepare(module, config)
        return config

    @staticmethod
    def _auto_stage(config, c: Candidate, reserve: list[int] | None, **fields) -> AutoStagePass:
        """ipu-auto-stage (where the strategy is automatic) over `c`'s
        micro-batches, leaving `reserve` bytes per tile free on each IPU."""
        return replace(driver.auto_stage_pass(config), micro_batches=c.accumulation,
                       reserve=tuple(reserve or ()), **fields)

    def _refused_on_trace(self, c: Candidate, reserve: list[int] | None = None) -> NoSplitFits | None:
        """ipu-auto-stage's refusal of `c`, asked of the traced module itself
        before it is copied: `c`'s options written into its attributes, the
        pass run to find the split only (it changes no op), the attributes
        put back. A configuration it refuses is then never copied; the split
        it finds is shared with the copy costed next (the pass finds it
        there). Only where the copies share the pass's results and are not
        autocast again."""
        if not (self.share_results and self.reuse_repeats) or c.stages == 1:
            return None
        opts = self._options(c)
        module, main = self.traced, find_func(self.traced, "main")
        attributes, arg_attrs = dict(module.attributes), main.arg_attrs
        share(module, self.shared)
        try:
            config = self._prepare(module, opts)
            if "auto" not in config.strategy or config.half_partials:  # (ipu-partials-type not run here)
                return None
            with gc_paused():
                self._auto_stage(config, c, reserve, split_only=True).apply(graph_context(), module)
        except NoSplitFits as e:
            return e
        except Error:  # another error: the costing of `c` reports it
            pass
        finally:
            module.attributes.clear()
            module.attributes.update(attributes)
            main.arg_attrs = arg_attrs
        return None

    def _refusal(self, c: Candidate) -> NoSplitFits | None:
        """ipu-auto-stage's refusal of `c`, if it refuses it (only the
        passes up to it are run)."""
        self.costings += 1
        if self.share_results and self.reuse_repeats and c.stages > 1:
            return self._refused_on_trace(c)
        try:
            with gc_paused():
                self._passes(c, stop_after=AutoStagePass.name)
        except NoSplitFits as e:
            return e
        except Error:  # another error: the costing of `c` in its turn reports it
            pass
        return None

    def _cost(self, c: Candidate, reserve: list[int] | None = None) -> None:
        self.costings += 1
        c.reserve = list(reserve or [])
        refused = self._refused_on_trace(c, reserve)
        if refused is not None:
            c.fits, c.reason, c.refused = False, str(refused).splitlines()[0], True
            return
        try:
            # as a compile does (gcpause.py): a costing makes a few hundred
            # thousand objects, each counted towards the collector's thresholds
            with gc_paused():
                module, config, unit_of = self._passes(c, reserve)
                profile = driver.profile_of(module, config, check_memory=False)
        except Error as e:
            c.fits, c.reason = False, str(e).splitlines()[0]
            c.refused = isinstance(e, NoSplitFits)
            return
        c.tile_bytes = profile.machine.bytes_per_tile
        # a floor under the fullest tile of every configuration of these stages
        # and replicas: the always-live tensors no optimizer-state location or
        # proportion moves (each on one IPU, spread over its tiles with at
        # least its bytes) and the codelets every tile holds. The fullest
        # tile holds at least the average of the stages' IPUs' tiles.
        held = sum(t.nbytes for m in profile.memory.values() for t in m.tensors if t.held_whatever_the_plan)
        c.held_bytes = -(-held // (c.stages * profile.machine.tiles)) + profile.machine.codelet_bytes_per_tile
        c.memory = {i: int(m.peak.max()) for i, m in profile.memory.items()}
        over = [i for i, b in c.memory.items() if b > c.tile_bytes]
        if over:
            c.fits = False
            c.reason = "IPU " + ", ".join(map(str, over)) + " out of tile memory"
        c.throughput = c.global_batch / profile.seconds if profile.seconds else 0.0
        c.bubble = profile.bubble_fraction() if c.stages > 1 else 0.0
        per_ipu_reduce = [0] * profile.num_ipus  # one pass over the timeline (steps x micro-batches)
        for t in profile.timeline:
            if t.kind == "allreduce" and 0 <= t.ipu < profile.num_ipus:
                per_ipu_reduce[t.ipu] += t.end - t.start
        reduce = max(per_ipu_reduce, default=0)
        c.allreduce_share = reduce / profile.cycles_per_update if profile.cycles_per_update else 0.0
        per_ipu = [0] * c.stages  # forward and backward stages of each IPU (the tail's with IPU 0's)
        for op in find_func(module, "main").body.block.ops:
            if isinstance(op, StageOp):
                per_ipu[op.ipu.value.data] += int(profile.stage_cycles.get(op.stage.value.data, 0))
        c.stage_cycles = per_ipu
        c.placement = self._placement(module, unit_of)

    @staticmethod
    def _drop_unit_blocks(module) -> None:
        """Remove the repeated layers' blocks (they only bound where
        ipu-auto-stage may cut): the one-stage model is costed as traced
        without them, as the candidate's unannotated model compiles."""
        for op in module.walk():
            p = op.attributes.get(PLACE_KEY)
            if isinstance(p, PlacementAttr) and p.block.data.startswith((_UNIT_BLOCK, _TAIL_BLOCK, START_BLOCK)):
                op.attributes[PLACE_KEY] = p.with_(block="", ipu=-1)

    def _units_of(self, module) -> dict:
        """Each forward op of a repeated layer, with the layer's index, and
        of the tail, with the index after the last layer (read before
        ipu-auto-stage renames the blocks after the stages)."""
        out = {}
        for op in find_func(module, "main").body.block.ops:
            p = op.attributes.get(PLACE_KEY)
            if not isinstance(p, PlacementAttr) or p.is_backward:
                continue
            if p.block.data.startswith(_UNIT_BLOCK):
                out[op] = int(p.block.data[len(_UNIT_BLOCK):])
            elif p.block.data == _TAIL_BLOCK:
                out[op] = len(self.units)
        return out

    def _placement(self, module, unit_of: dict) -> list[tuple[str, int]]:
        """Where each forward stage after the first starts (its first
        repeated layer, or the tail), with its IPU, in stage order."""
        if not self.units:
            return []
        paths = self.units + [self.tail]
        first: dict[int, tuple[int, int]] = {}  # forward stage -> (first unit, IPU)
        for op in find_func(module, "main").body.block.ops:
            if isinstance(op, StageOp):
                k, ipu = op.stage.value.data, op.ipu.value.data
                for inner in op.body.block.ops:
                    if inner in unit_of:
                        u = min(first.get(k, (unit_of[inner], ipu))[0], unit_of[inner])
                        first[k] = (u, ipu)
        return [(paths[u], ipu) for k, (u, ipu) in sorted(first.items()) if k > 0]


# the planner and its groups while a pool of forked workers costs them
_FORKED: tuple | None = None
_FIELDS = tuple(f.name for f in fields(Candidate) if f.name != "base")


def _group_in_worker(i: int) -> tuple[list[dict], int]:
    """In a forked worker: group `i` costed, each candidate as its fields."""
    planner, groups = _FORKED
    before = planner.costings
    cands = planner._group(*groups[i])
    return [{k: getattr(c, k) for k in _FIELDS} for c in cands], planner.costings - before


def table(candidates: list[Candidate], top: int = 10) -> str:
    """The best configurations as a table (CLI and docs)."""
    head = ("stages x replicas  mb  accum  schedule    optimizer state    amp    samples/s   "
            "tile   bubble  all-reduce  limited by")
    return "\n".join([head] + [c.row() for c in candidates[:top]])

