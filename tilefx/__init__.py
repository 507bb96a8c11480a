"""tilefx: PopTorch-style models compiled with xDSL and run on a simulated IPU.

`import tilefx as poptorch` is enough for code written for PopTorch.
"""

from tilefx.api import optim
from tilefx.api.annotations import BeginBlock, Block, BlockFunction
from tilefx.api.enums import (
    CommGroup,
    CommGroupType,
    DataLoaderMode,
    HalfFloatCastingBehavior,
    Liveness,
    MatMulSerializationMode,
    MeanReductionStrategy,
    OutputMode,
    ReductionType,
    SyncPattern,
    VariableRetrievalMode,
)
from tilefx.api.errors import Error, RecoverableError, UnrecoverableError
from tilefx.api.executor import PoplarExecutor, compile, inferenceModel, trainingModel
from tilefx.api.ops import (
    identity_loss,
    ipu_print_tensor,
    isRunningOnIpu,
    nop,
    serializedMatMul,
    set_available_memory,
)
from tilefx.api.options import Options, TensorLocationSettings

__version__ = "0.1.0"

__all__ = [
    "BeginBlock", "Block", "BlockFunction", "CommGroup", "CommGroupType", "DataLoaderMode",
    "Error", "HalfFloatCastingBehavior", "Liveness", "MatMulSerializationMode",
    "MeanReductionStrategy", "Options", "OutputMode", "PoplarExecutor", "RecoverableError",
    "ReductionType", "SyncPattern", "TensorLocationSettings", "UnrecoverableError",
    "VariableRetrievalMode", "compile", "identity_loss", "inferenceModel", "ipu_print_tensor",
    "isRunningOnIpu", "nop", "optim", "serializedMatMul", "set_available_memory", "trainingModel",
]
