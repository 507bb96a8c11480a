"""The graph-level pass pipeline the library API runs, and the context with
every dialect tilefx knows (shared with tilefx-opt)."""

from __future__ import annotations

import logging
import time

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.transforms.dead_code_elimination import DeadCodeElimination

from tilefx.dialects.context import OpByOpContext
from tilefx.dialects.names import STRATEGY_KEY
from tilefx.passes.assign_stages import AssignStagesPass
from tilefx.passes.auto_stage import AutoStagePass
from tilefx.passes.autocast import AutocastPass
from tilefx.passes.available_memory import AvailableMemoryPass
from tilefx.passes.loss_scaling import LossScalingPass
from tilefx.passes.outline_stages import OutlineStagesPass
from tilefx.passes.partials_type import PartialsTypePass
from tilefx.passes.recompute import RecomputePass
from tilefx.passes.serialize_matmul import SerializeMatmulPass
from tilefx.passes.training_step import TrainingStepPass


log = logging.getLogger("tilefx.passes")
TRACE = 5  # PopTorch's TRACE level (tilefx.runner.logs names it)


def graph_context() -> Context:
    from xdsl.dialects.builtin import Builtin
    from xdsl.dialects.func import Func

    def ipu():
        from tilefx.dialects.ipu import IPU

        return IPU

    def aten():
        from tilefx.dialects.aten import ATen

        return ATen

    def tile():
        from tilefx.dialects.tile import Tile

        return Tile

    def aten_op(name: str):
        from tilefx.dialects.aten import op_class_named

        return op_class_named(name)

    def ipu_op(name: str):
        from tilefx.dialects.ipu import op_or_attr_named

        return op_or_attr_named(name)

    ctx = OpByOpContext()
    for d in (Builtin, Func):
        ctx.load_dialect(d)
    # loaded when asked for: the graph passes parse no aten or ipu op (their
    # op classes are defined as they are used, dialects/aten.py and ipu.py),
    # IR text loads the classes of the ops it names, and no pass makes a tile op
    ctx.register_dialect("ipu", ipu)
    ctx.register_dialect("aten", aten)
    ctx.register_dialect("tile", tile)
    ctx.register_lookup("aten", aten_op)
    ctx.register_lookup("ipu", ipu_op)
    return ctx


def run_graph_passes(module: ModuleOp, training: bool,
                     assign: AssignStagesPass | None = None,
                     loss_scaling: LossScalingPass | None = None,
                     autocast: AutocastPass | bool | None = True, verify: bool = True, stop_after: str | None = None,
                     auto_recomputation: int | None = None, host_io: bool = True,
                     available_memory: AvailableMemoryPass | None = None,
                     partials_type: PartialsTypePass | None = None,
                     auto_stage: AutoStagePass | None = None) -> None:
    """partials-type (when given), autocast, auto-stage (PipelinedExecution.auto), assign-stages,
    available-memory, serialize-matmul, recompute, training-step and
    loss-scaling (training), dce, outline-stages; then the IR verifier
    (`verify`: the program that runs; a module only costed, such as the
    planner's copies of a verified trace, may skip it). `stop_after`: the
    name of the last pass to run (a question about one pass's result).
    `auto_recomputation`: PopART's autoRecomputation (None: not set,
    PopTorch's default). `host_io` False: synthetic data (no host streams,
    which ipu-auto-stage otherwise counts). The passes built with their
    options (the driver's, from a CompileConfig): `autocast`, the
    `ipu-autocast` to run (True: PopTorch's default policy; False or None:
    none); `available_memory` (None: its defaults); `partials_type`, run
    first (None: none, float partials); `auto_stage`, run where the strategy
    asks for automatic stages (None: one costing `assign`'s micro-batches
    with `available_memory`'s proportions)."""
    rc = -1 if auto_recomputation is None else auto_recomputation
    ctx = graph_context()
    if autocast is True:
        autocast = AutocastPass()
    passes = ([partials_type] if partials_type else []) + ([autocast] if autocast else [])
    assign = assign or AssignStagesPass()
    memory = available_memory or AvailableMemoryPass()
    strategy = module.attributes.get(STRATEGY_KEY)
    if strategy is not None and "auto" in strategy.data:
        passes.append(auto_stage or AutoStagePass(
            micro_batches=assign.gradient_accumulation if training else assign.device_iterations,
            auto_recomputation=rc, host_io=host_io, default_proportion=memory.default_proportion,
            per_ipu=memory.per_ipu, ipus=memory.ipus))
    passes += [assign, memory, SerializeMatmulPass()]
    if training:
        passes += [RecomputePass(auto_recomputation=rc), TrainingStepPass()] + ([loss_scaling] if loss_scaling else [])
    for p in passes + [DeadCodeElimination(), OutlineStagesPass()]:
        run_logged(p, ctx, module)
        if p.name == stop_after:
            return
    if verify:  # the program that runs: aten ops by torch's rules, when installed
        module.verify()


def run_logged(p, ctx: Context, module: ModuleOp) -> None:
    """Apply one pass; DEBUG logs its time and op counts, TRACE the IR after it."""
    if not log.isEnabledFor(logging.DEBUG):
        p.apply(ctx, module)
        return
    before = sum(1 for _ in module.walk())
    t0 = time.perf_counter()
    p.apply(ctx, module)
    log.debug("pass %s: %d ops -> %d ops in %.3f s", p.name, before, sum(1 for _ in module.walk()),
              time.perf_counter() - t0)
    if log.isEnabledFor(TRACE):
        log.log(TRACE, "IR after %s:\n%s", p.name, module)
