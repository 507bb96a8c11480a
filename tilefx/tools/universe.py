"""The `xdsl.universe` entry point: stock `xdsl-opt` sees tilefx's dialects and passes."""

from xdsl.universe import Universe


def _torch_rules() -> None:
    from tilefx.lowering.torch_rules import TorchRules
    from tilefx.runtime import RUNTIME

    RUNTIME.install(TorchRules())  # torch's shape rules for the aten verifier, as IR with aten ops loads


def _aten():
    from tilefx.dialects.aten import ATen

    _torch_rules()
    return ATen


def _aten_op(name: str):
    from tilefx.dialects.aten import op_class_named

    _torch_rules()
    return op_class_named(name)


def _ipu():
    from tilefx.dialects.ipu import IPU

    return IPU


def _ipu_op(name: str):
    from tilefx.dialects.ipu import op_or_attr_named

    return op_or_attr_named(name)


def _training_step():
    from tilefx.passes.training_step import TrainingStepPass

    return TrainingStepPass


def _assign_stages():
    from tilefx.passes.assign_stages import AssignStagesPass

    return AssignStagesPass


def _outline_stages():
    from tilefx.passes.outline_stages import OutlineStagesPass

    return OutlineStagesPass


def _serialize_matmul():
    from tilefx.passes.serialize_matmul import SerializeMatmulPass

    return SerializeMatmulPass


def _available_memory():
    from tilefx.passes.available_memory import AvailableMemoryPass

    return AvailableMemoryPass


def _partials_type():
    from tilefx.passes.partials_type import PartialsTypePass

    return PartialsTypePass


def _auto_stage():
    from tilefx.passes.auto_stage import AutoStagePass

    return AutoStagePass


def _tile():
    from tilefx.dialects.tile import Tile

    return Tile


def _lower_to_device():
    from tilefx.lowering.to_device import LowerToDevicePass

    return LowerToDevicePass


def _loss_scaling():
    from tilefx.passes.loss_scaling import LossScalingPass

    return LossScalingPass


def _autocast():
    from tilefx.passes.autocast import AutocastPass

    return AutocastPass


def _fuse_elementwise():
    from tilefx.passes.fuse_elementwise import FuseElementwisePass

    return FuseElementwisePass


def _fuse_attention():
    from tilefx.passes.fuse_attention import FuseAttentionPass

    return FuseAttentionPass


def _recompute():
    from tilefx.passes.recompute import RecomputePass

    return RecomputePass


DIALECTS = {"aten": _aten, "ipu": _ipu, "tile": _tile}
# the dialects whose ops tilefx-opt loads one at a time (dialects/context.py)
OP_LOOKUPS = {"aten": _aten_op, "ipu": _ipu_op}
PASSES = {
    "ipu-training-step": _training_step,
    "ipu-assign-stages": _assign_stages,
    "ipu-auto-stage": _auto_stage,
    "ipu-outline-stages": _outline_stages,
    "ipu-serialize-matmul": _serialize_matmul,
    "ipu-available-memory": _available_memory,
    "ipu-partials-type": _partials_type,
    "lower-to-device": _lower_to_device,
    "ipu-loss-scaling": _loss_scaling,
    "ipu-autocast": _autocast,
    "ipu-fuse-elementwise": _fuse_elementwise,
    "ipu-fuse-attention": _fuse_attention,
    "ipu-recompute": _recompute,
}

TILEFX_UNIVERSE = Universe(all_dialects=DIALECTS, all_passes=PASSES)
