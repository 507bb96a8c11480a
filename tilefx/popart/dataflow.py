"""DataFlow, AnchorReturnType and the StepIO classes (PopART user guide, 5.1 "Setting input and output data
buffers for an execution" and 5.2 "Session options"):
what a session returns and how buffers reach it. Split from session.py, which
compiles and runs; these only describe and check.

Buffers have PopART's shapes (see session.py) and are checked as PopART's
StepIO checks them: by number of elements, C-contiguous (PopART reads and
writes them in place).
"""

from __future__ import annotations

import enum
from collections.abc import Callable

import numpy as np

# PopART's name of the gradient of tensor `t`: GRADIENT_PREFIX + t (popart.reservedGradientPrefix()),
# one id scheme with PopTorch's anchors (Options.anchorTensor): lowering/tensor_ids.py
from tilefx.lowering.tensor_ids import GRADIENT_PREFIX
from tilefx.popart.errors import popart_exception

# -- DataFlow ---------------------------------------------------------------
# PopART's name of weight w's gradient accumulator: ACCUM_PREFIX + w (popart.reservedAccumPrefix())
ACCUM_PREFIX = "Accum___"
# PopART's names of a weight w's optimizer state, saved by modelToHost as initializers
# (popart.reservedAcclPrefix() + w, ...): SGD's momentum, Adam's / LAMB's first and second
# moments, the count of weight updates
ACCL_PREFIX = "Accl___"
ACCL1_PREFIX = "Accl1___"
ACCL2_PREFIX = "Accl2___"
STEP_PREFIX = "Step___"
OPTIMIZER_STATE_PREFIXES = (ACCL_PREFIX, ACCL1_PREFIX, ACCL2_PREFIX, STEP_PREFIX)


class AnchorReturnTypeId(enum.Enum):
    All = "ALL"
    EveryN = "EVERYN"
    Final = "FINAL"
    Sum = "SUM"
    # PopART's upper-case spellings
    ALL = "ALL"  # noqa: PIE796  (an alias: PopART's upper-case spelling)
    EVERYN = "EVERYN"  # noqa: PIE796  (an alias: PopART's upper-case spelling)
    FINAL = "FINAL"  # noqa: PIE796  (an alias: PopART's upper-case spelling)
    SUM = "SUM"  # noqa: PIE796  (an alias: PopART's upper-case spelling)


class AnchorReturnType:
    """How an anchor returns its values: AnchorReturnType("ALL" | "FINAL" | "SUM") or ("EVERYN", N)."""

    def __init__(self, artString: str = "ALL", returnPeriod: int | None = None):
        # PopART's own messages (its anchorreturntype tests compare them)
        key = str(artString).upper()
        if key not in ("ALL", "EVERYN", "FINAL", "SUM"):
            raise popart_exception(f"Invalid anchor return type ID supplied: {artString}")
        if key == "EVERYN":
            if returnPeriod is None:
                raise popart_exception("Must specify return period with option 'EVERYN'")
            if int(returnPeriod) < 1:
                raise popart_exception("Anchor return period must be greater than zero")
        elif returnPeriod not in (None, 0):
            raise popart_exception("A return period should not be supplied for this anchor return type")
        self._id = AnchorReturnTypeId(key)
        self._rp = int(returnPeriod) if key == "EVERYN" else 1

    def id(self) -> AnchorReturnTypeId:
        return self._id

    def rp(self) -> int:
        return self._rp

    def str(self) -> str:
        return self._id.value

    def __repr__(self) -> str:
        return f"AnchorReturnType({self._id.value!r}" + (f", {self._rp})" if self._id.value == "EVERYN" else ")")


class DataFlow:
    """batchesPerStep and the anchors: DataFlow(1, {tensorId: AnchorReturnType("ALL")})
    (or a list of tensor ids with one AnchorReturnType for all)."""

    def __init__(self, batchesPerStep: int, anchorTensors=None, art: AnchorReturnType | None = None):
        if not isinstance(batchesPerStep, int) or batchesPerStep < 1:
            raise popart_exception(f"DataFlow: batchesPerStep must be a positive int, got {batchesPerStep!r}")
        anchors = anchorTensors if anchorTensors is not None else {}
        if isinstance(anchors, (list, tuple)):
            anchors = {a: art or AnchorReturnType("ALL") for a in anchors}
        for name, a in anchors.items():
            if not isinstance(a, AnchorReturnType):
                raise popart_exception(f"DataFlow: anchor {name!r} needs an AnchorReturnType, got {a!r}")
            if a.id() == AnchorReturnTypeId.EveryN and batchesPerStep % a.rp():
                raise popart_exception(f"DataFlow: anchor {name!r} has return period {a.rp()}, which does "
                                       f"not divide batchesPerStep ({batchesPerStep})")
        self._bps = batchesPerStep
        self._anchors = dict(anchors)

    def batchesPerStep(self) -> int:
        return self._bps

    def anchors(self) -> list[str]:
        return list(self._anchors)

    def art(self, anchor: str) -> AnchorReturnType:
        if anchor not in self._anchors:
            raise popart_exception(f"DataFlow: {anchor!r} is not an anchor (anchors: {self.anchors()})")
        return self._anchors[anchor]

    def isAnchored(self, tensorId: str) -> bool:
        return tensorId in self._anchors

    def nAnchors(self) -> int:
        return len(self._anchors)


# -- StepIO -----------------------------------------------------------------
class PyStepIO:
    """Input buffers and anchor (output) buffers, by tensor id (PopART user guide, 5.1 "Setting input and
    output data buffers for an execution")."""

    def __init__(self, inputs: dict, outputs: dict):
        # PopART reads and writes the arrays in place, so it refuses strided views (a
        # copy could cost much time unseen); its message, which its tests look for
        for kind, arrays in (("input", inputs), ("output", outputs)):
            for name, a in arrays.items():
                _check_contiguous(a, name, kind)
        self.inputs = dict(inputs)
        self.outputs = outputs
        self.runtime_asserts = True

    def enableRuntimeAsserts(self, b: bool) -> None:
        self.runtime_asserts = bool(b)


def _check_contiguous(a, name: str, kind: str) -> None:
    if isinstance(a, np.ndarray) and not a.flags.c_contiguous:
        raise popart_exception(f"PyStepIO is unable to use the numpy {kind} array for tensor {name!r} as it is "
                               "not c-contiguous (a data conversion here could have a significant impact on "
                               "performance and hence is not allowed)")


class PyStepIOCallback:
    """StepIO by callbacks: input(tensorId, prefetch) returns one micro-batch,
    inputComplete(tensorId) follows it; output(tensorId) returns the array to
    write one value of the anchor into, outputComplete(tensorId) follows it."""

    def __init__(self, input_callback: Callable, input_complete_callback: Callable,
                 output_callback: Callable, output_complete_callback: Callable):
        self.input_callback = input_callback
        self.input_complete_callback = input_complete_callback
        self.output_callback = output_callback
        self.output_complete_callback = output_complete_callback


class PyWeightsIO:
    """Weights by tensor id, for readWeights / writeWeights."""

    def __init__(self, weights: dict):
        self.weights = weights
