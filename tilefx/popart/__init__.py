"""tilefx.popart: PopART's session API on the ONNX frontend (`import tilefx.popart as popart`).

Build a graph with `Builder` (or load an ONNX file or a torch.onnx export),
describe the data flow with `DataFlow` and `AnchorReturnType`, pick a
(simulated) device with `DeviceManager`, and run it with `InferenceSession`
or `TrainingSession` and a `PyStepIO` (PopART user guide, 5 "Executing graphs"). The
sessions compile through the same passes, executor and machine model as the
PopTorch side.
"""

from tilefx.popart.builder import DEFAULT_OPSET, Builder, ReductionType, TensorInfo
from tilefx.popart.dataflow import (
    ACCL1_PREFIX,
    ACCL2_PREFIX,
    ACCL_PREFIX,
    ACCUM_PREFIX,
    GRADIENT_PREFIX,
    STEP_PREFIX,
    AnchorReturnType,
    AnchorReturnTypeId,
    DataFlow,
    PyStepIO,
    PyStepIOCallback,
    PyWeightsIO,
)
from tilefx.popart.devices import (
    DeviceConnectionType,
    DeviceInfo,
    DeviceManager,
    DeviceType,
    SyncPattern,
)
from tilefx.popart.errors import (
    OutOfMemoryException,
    RecoveryAction,
    popart_exception,
    popart_internal_exception,
    popart_runtime_error,
    poplar_application_runtime_error,
    poplar_exception,
    poplar_recoverable_runtime_error,
    poplar_runtime_error,
    poplar_system_runtime_error,
    poplar_unknown_runtime_error,
    poplar_unrecoverable_runtime_error,
    poplibs_exception,
)
from tilefx.popart.logger import getLogger
from tilefx.popart.optimizers import (
    SGD,
    Adam,
    AdamMode,
    ConstSGD,
    Optimizer,
    OptimizerValue,
    SGDAccumulatorAndMomentum,
    WeightDecayMode,
)
from tilefx.popart.patterns import Patterns, PatternsLevel
from tilefx.popart.report import Report
from tilefx.popart.session import (
    AccumulateOuterFragmentSchedule,
    InferenceSession,
    InputShapeInfo,
    SessionOptions,
    SubgraphCopyingStrategy,
    SyntheticDataMode,
    TrainingSession,
    VirtualGraphMode,
)

__version__ = "3.4.0+tilefx"


# the opsets builder.aiOnnx / builder.aiGraphcore use unless Builder(opsets=...) says otherwise
defaultAiOnnxOpset = DEFAULT_OPSET
defaultAiGraphcoreOpset = 1


def reservedGradientPrefix() -> str:
    return GRADIENT_PREFIX


def reservedAccumPrefix() -> str:
    return ACCUM_PREFIX


def reservedAcclPrefix() -> str:
    """SGD's momentum of weight w is saved as reservedAcclPrefix() + w (popart/state.py)."""
    return ACCL_PREFIX


def reservedAccl1Prefix() -> str:
    """Adam's / LAMB's first moment of weight w: reservedAccl1Prefix() + w."""
    return ACCL1_PREFIX


def reservedAccl2Prefix() -> str:
    """Adam's / LAMB's second moment (AdaMax's infinity norm) of weight w."""
    return ACCL2_PREFIX


def reservedStepPrefix() -> str:
    """The number of weight updates of weight w: reservedStepPrefix() + w (a float scalar)."""
    return STEP_PREFIX


def versionString() -> str:
    return __version__


__all__ = [
    "defaultAiOnnxOpset",
    "defaultAiGraphcoreOpset",
    "Patterns",
    "PatternsLevel",
    "SGD",
    "AccumulateOuterFragmentSchedule",
    "Adam",
    "AdamMode",
    "AnchorReturnType",
    "AnchorReturnTypeId",
    "Builder",
    "ConstSGD",
    "DataFlow",
    "DeviceConnectionType",
    "DeviceInfo",
    "DeviceManager",
    "DeviceType",
    "InferenceSession",
    "InputShapeInfo",
    "Optimizer",
    "OptimizerValue",
    "OutOfMemoryException",
    "PyStepIO",
    "PyStepIOCallback",
    "PyWeightsIO",
    "RecoveryAction",
    "ReductionType",
    "Report",
    "SessionOptions",
    "SGDAccumulatorAndMomentum",
    "SubgraphCopyingStrategy",
    "SyncPattern",
    "SyntheticDataMode",
    "TensorInfo",
    "TrainingSession",
    "VirtualGraphMode",
    "WeightDecayMode",
    "getLogger",
    "popart_exception",
    "popart_internal_exception",
    "popart_runtime_error",
    "poplar_application_runtime_error",
    "poplar_exception",
    "poplar_recoverable_runtime_error",
    "poplar_runtime_error",
    "poplar_system_runtime_error",
    "poplar_unknown_runtime_error",
    "poplar_unrecoverable_runtime_error",
    "poplibs_exception",
    "reservedAccl1Prefix",
    "reservedAccl2Prefix",
    "reservedAcclPrefix",
    "reservedAccumPrefix",
    "reservedGradientPrefix",
    "reservedStepPrefix",
    "versionString",
]
