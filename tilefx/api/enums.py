"""PopTorch's enumerations (``poptorch.enums``).

Member names and integer values follow PopTorch so that code written for
PopTorch (``poptorch.OutputMode.All``, ``int(poptorch.ReductionType.Mean)``,
``poptorch.enums.CommGroupType.Consecutive`` ...) runs unchanged.

``str()`` of a member is ``"OutputMode.All"`` (Python 3.11 would otherwise
print the bare integer for an ``IntEnum``), which keeps error messages and
``Options.__repr__`` readable.

This module imports nothing from tilefx except ``tilefx.api.errors``.
"""

from __future__ import annotations

import dataclasses
import enum

from tilefx.errors import Error

__all__ = [
    "OutputMode",
    "AnchorMode",
    "ReductionType",
    "MeanReductionStrategy",
    "SyncPattern",
    "ConnectionType",
    "HalfFloatCastingBehavior",
    "Liveness",
    "AutoStage",
    "CommGroupType",
    "VariableRetrievalMode",
    "DataLoaderMode",
    "SharingStrategy",
    "OverlapMode",
    "MultiConvPlanType",
    "MatMulSerializationMode",
    "CommGroup",
    "ENUM_TYPES",
]


class _IntEnum(enum.IntEnum):
    """An IntEnum whose str() is ``"ClassName.Member"``."""

    def __str__(self) -> str:
        return f"{type(self).__name__}.{self.name}"


class _StrEnum(enum.Enum):
    """A string-valued Enum whose str() is ``"ClassName.Member"``."""

    def __str__(self) -> str:
        return f"{type(self).__name__}.{self.name}"


class OutputMode(_IntEnum):
    """Which results a model returns to the host after a run.

    - ``All``: return a result for each batch (multiplier R x D x G).
    - ``EveryN``: return every N-th batch; N is ``output_return_period``.
    - ``Final``: return the last batch of each replica.
    - ``Sum``: return the sum over all the batches of each replica.
    - ``Default``: ``All`` for inference models, ``Final`` for training.
    """

    Final = 0
    EveryN = 1
    All = 2
    Sum = 3
    Default = 4


# Older PopTorch releases called it AnchorMode.
AnchorMode = OutputMode


class ReductionType(_IntEnum):
    """How gradients are reduced across accumulation steps and replicas.

    - ``Sum``: sum of all values.
    - ``Mean``: mean of all values (PopTorch's default for training).
    - ``NoReduction``: do not reduce (not valid for
      ``Training.accumulationAndReplicationReductionType``).
    """

    Sum = 0
    Mean = 1
    NoReduction = 2


class MeanReductionStrategy(_IntEnum):
    """When the division of a ``Mean`` reduction happens.

    - ``Running``: keep the accumulator as a running mean (numerically
      robust; the default when accumulating in float16).
    - ``Post``: sum, then divide once at the end (default otherwise).
    - ``PostAndLoss``: deprecated legacy behaviour.
    """

    Running = 0
    Post = 1
    PostAndLoss = 2


class SyncPattern(_IntEnum):
    """Synchronisation pattern between IPUs and the host.

    - ``Full``: all IPUs synchronise on every communication (default).
    - ``SinglePipeline``: IPUs synchronise with the host independently.
    - ``ReplicaAndLadder``: IPU groups alternate host IO and compute.
    """

    Full = 0
    SinglePipeline = 1
    ReplicaAndLadder = 2


class ConnectionType(_IntEnum):
    """When to attach to the (simulated) IPU.

    - ``Always``: attach from the start (default).
    - ``OnDemand``: attach once the executable is ready to run.
    - ``Never``: never attach (offline compilation only; running raises).
    """

    Always = 0
    OnDemand = 1
    Never = 2


class HalfFloatCastingBehavior(_IntEnum):
    """Casting of ops mixing float16 and float32 operands.

    - ``FloatDowncastToHalf``: cast every operand to float16 (the older
      PopTorch's rule: PopTorch user guide, earlier releases, "Half / float16 support"): float16 inputs make
      float32 weights
      meet them in float16.
    - ``HalfUpcastToFloat``: follow PyTorch, promote float16 to float32.
    - ``Default``: ``HalfUpcastToFloat`` (PopTorch complies with PyTorch's
      convention, PopTorch user guide, 4.7 "16-bit float support").
    """

    FloatDowncastToHalf = 0
    HalfUpcastToFloat = 1
    Default = 2


class Liveness(_IntEnum):
    """Where tensors live between phases of a phased execution.

    - ``AlwaysLive``: tensors stay on the IPU between phases.
    - ``OffChipAfterFwd``: tensors go off-chip after the forward pass.
    - ``OffChipAfterFwdNoOverlap``: like ``OffChipAfterFwd`` without
      overlapping loads and stores between phases (serial phased only).
    - ``OffChipAfterEachPhase``: tensors go off-chip after every phase
      (serial phased only).
    """

    AlwaysLive = 0
    OffChipAfterFwd = 1
    OffChipAfterFwdNoOverlap = 2
    OffChipAfterEachPhase = 3


class AutoStage(_IntEnum):
    """How stages are assigned to blocks without an explicit stage.

    - ``SameAsIpu``: stage id = ipu id.
    - ``AutoIncrement``: each new block gets the next stage id.
    """

    SameAsIpu = 0
    AutoIncrement = 1


class CommGroupType(_IntEnum):
    """How replicas are grouped (weights' ``replicaGrouping`` and
    ``Options.inputReplicaGrouping``).

    With N replicas and group size k:

    - ``All``: one group of every replica; the size is ignored (not valid
      as an input group type).
    - ``Consecutive``: ``{0..k-1}, {k..2k-1}, ...``.
    - ``Orthogonal``: with m = N / k groups, ``{0, m, 2m, ...},
      {1, m+1, ...}, ...``.
    - ``NoGrouping``: each replica is its own group; the size is ignored.
    """

    All = 0
    Consecutive = 1
    Orthogonal = 2
    NoGrouping = 3


class VariableRetrievalMode(_IntEnum):
    """Which replicas a grouped variable is read back from.

    - ``OnePerGroup``: one value per group (from its first replica).
    - ``AllReplicas``: one value per replica.
    """

    OnePerGroup = 0
    AllReplicas = 2


class DataLoaderMode(_IntEnum):
    """How ``poptorch.DataLoader`` reads its dataset.

    - ``Sync``: synchronously.
    - ``Async``: through an ``AsynchronousDataAccessor``.
    - ``AsyncRebatched``: asynchronously, workers use batch size 1 and the
      accessor rebatches (fewer dropped samples for iterable datasets).
    """

    Sync = 0
    Async = 1
    AsyncRebatched = 2


class SharingStrategy(_IntEnum):
    """How DataLoader worker processes are created and share data."""

    SharedMemory = 0
    FileSystem = 1
    Fork = 2
    ForkServer = 3


class OverlapMode(_StrEnum):
    """Overlap of host IO with compute for ``set_overlap_for_input/output``."""

    NoOverlap = "no_overlap"
    OverlapAccumulationLoop = "overlap_accumulation_loop"
    OverlapDeviceIterationLoop = "overlap_device_iteration_loop"


class MultiConvPlanType(_IntEnum):
    """Execution plan of a ``poptorch.MultiConv``.

    - ``Parallel``: run the convolutions in parallel (default).
    - ``Serial``: run each convolution independently.
    """

    Parallel = 0
    Serial = 1


class MatMulSerializationMode(_StrEnum):
    """Which dimension ``serializedMatMul`` splits.

    - ``InputChannels``: split m (rows of the left operand), concatenate.
    - ``ReducingDim``: split k, sum the partial products.
    - ``OutputChannels``: split n (columns of the right operand),
      concatenate.
    - ``Disabled``: no serialisation.
    """

    InputChannels = "input_channels"
    ReducingDim = "reducing_dim"
    OutputChannels = "output_channels"
    Disabled = "none"


@dataclasses.dataclass(frozen=True)
class CommGroup:
    """A replica grouping: ``CommGroup(type, replicaGroupSize)`` as in PopART.

    ``replicaGroupSize`` is ignored for ``All`` and ``NoGrouping``.
    """

    type: CommGroupType = CommGroupType.All
    replicaGroupSize: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.type, CommGroupType):
            raise Error(
                f"CommGroup type must be a poptorch.CommGroupType, got "
                f"{self.type!r}")
        size = self.replicaGroupSize
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise Error(
                f"CommGroup replicaGroupSize must be a non-negative int, got "
                f"{size!r}")
        if (self.type in (CommGroupType.Consecutive, CommGroupType.Orthogonal)
                and size < 1):
            raise Error(
                f"CommGroup({self.type}) needs a replicaGroupSize >= 1, got "
                f"{size}")

    def groups(self, num_replicas: int) -> list[list[int]]:
        """The replica ids of each group, for ``num_replicas`` replicas."""
        if isinstance(num_replicas, bool) or not isinstance(num_replicas, int) \
                or num_replicas < 1:
            raise Error(f"num_replicas must be a positive int, got "
                        f"{num_replicas!r}")
        if self.type == CommGroupType.All:
            return [list(range(num_replicas))]
        if self.type == CommGroupType.NoGrouping:
            return [[r] for r in range(num_replicas)]
        k = self.replicaGroupSize
        if num_replicas % k != 0:
            raise Error(
                f"The replica group size ({k}) must divide the number of "
                f"replicas ({num_replicas})")
        m = num_replicas // k
        if self.type == CommGroupType.Consecutive:
            return [list(range(g * k, (g + 1) * k)) for g in range(m)]
        # Orthogonal
        return [list(range(g, num_replicas, m)) for g in range(m)]


#: Every enum class a config file or ``POPTORCH_DEFAULT_OPTIONS`` may name.
ENUM_TYPES: dict[str, type[enum.Enum]] = {
    cls.__name__: cls
    for cls in (OutputMode, ReductionType, MeanReductionStrategy, SyncPattern,
                ConnectionType, HalfFloatCastingBehavior, Liveness, AutoStage,
                CommGroupType, VariableRetrievalMode, DataLoaderMode,
                SharingStrategy, OverlapMode, MultiConvPlanType,
                MatMulSerializationMode)
}
ENUM_TYPES["AnchorMode"] = OutputMode
