"""The graph-level pass pipeline the library API runs, and the context with
every dialect tilefx knows (shared with tilefx-opt)."""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.transforms.dead_code_elimination import DeadCodeElimination

from tilefx.passes.assign_stages import AssignStagesPass
from tilefx.passes.autocast import AutocastPass
from tilefx.passes.available_memory import AvailableMemoryPass
from tilefx.passes.loss_scaling import LossScalingPass
from tilefx.passes.outline_stages import OutlineStagesPass
from tilefx.passes.serialize_matmul import SerializeMatmulPass
from tilefx.passes.training_step import TrainingStepPass


def graph_context() -> Context:
    from xdsl.dialects.builtin import Builtin
    from xdsl.dialects.func import Func

    from tilefx.dialects.aten import ATen
    from tilefx.dialects.ipu import IPU
    from tilefx.dialects.tile import Tile

    ctx = Context()
    for d in (Builtin, Func, ATen, IPU, Tile):
        ctx.load_dialect(d)
    return ctx


def run_graph_passes(module: ModuleOp, training: bool,
                     assign: AssignStagesPass | None = None,
                     loss_scaling: LossScalingPass | None = None,
                     autocast: bool = True) -> None:
    """autocast, assign-stages, available-memory, serialize-matmul,
    training-step and loss-scaling (training), dce, outline-stages."""
    ctx = graph_context()
    if autocast:
        AutocastPass().apply(ctx, module)
    (assign or AssignStagesPass()).apply(ctx, module)
    AvailableMemoryPass().apply(ctx, module)
    SerializeMatmulPass().apply(ctx, module)
    if training:
        TrainingStepPass().apply(ctx, module)
        if loss_scaling is not None:
            loss_scaling.apply(ctx, module)
    DeadCodeElimination().apply(ctx, module)
    OutlineStagesPass().apply(ctx, module)
    module.verify()  # the program that runs: aten ops by torch's rules, when installed
