"""The `xdsl.universe` entry point: stock `xdsl-opt` sees tilefx's dialects and passes."""

from xdsl.universe import Universe


def _aten():
    from tilefx.dialects.aten import ATen

    return ATen


def _ipu():
    from tilefx.dialects.ipu import IPU

    return IPU


def _training_step():
    from tilefx.passes.training_step import TrainingStepPass

    return TrainingStepPass


DIALECTS = {"aten": _aten, "ipu": _ipu}
PASSES = {"ipu-training-step": _training_step}

TILEFX_UNIVERSE = Universe(all_dialects=DIALECTS, all_passes=PASSES)
