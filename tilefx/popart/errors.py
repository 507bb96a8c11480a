"""PopART's error hierarchy (PopART user guide, 5.8 "Errors"), rooted in tilefx.errors.Error.

    popart_exception
        popart_internal_exception
        popart_runtime_error
        poplibs_exception
        poplar_exception
            poplar_runtime_error
                poplar_application_runtime_error
                poplar_system_runtime_error
                    poplar_recoverable_runtime_error   (.recoveryAction)
                    poplar_unrecoverable_runtime_error
                    poplar_unknown_runtime_error

Every class derives from popart_exception, so `except popart.popart_exception`
catches what any PopART call raises. The system errors come from the simulated
machine (tilefx has no physical IPUs to reset).
"""

from __future__ import annotations

import enum

from tilefx.errors import Error, RecoverableError, UnrecoverableError


class popart_exception(Error):
    """An application error: a bug in the user's program or in the framework."""

    def __init__(self, message: str, **kw):
        kw.setdefault("type", "popart")
        super().__init__(message, **kw)


class popart_internal_exception(popart_exception):
    """An internal inconsistency of the framework."""


class popart_runtime_error(popart_exception):
    """An error while a session runs (bad buffers, anchors, weights)."""


class poplibs_exception(popart_exception):
    """An error of the (simulated) Poplar libraries."""


class poplar_exception(popart_exception):
    """An error of the (simulated) Poplar graph compiler and engine."""


class poplar_runtime_error(poplar_exception):
    """An error while the (simulated) engine runs."""


class poplar_application_runtime_error(poplar_runtime_error):
    """An application error detected by the engine."""


class poplar_system_runtime_error(poplar_runtime_error):
    """A system error of the (simulated) IPU machine."""


class RecoveryAction(enum.Enum):
    """What a recoverable system error needs (on the simulated machine: nothing physical)."""

    IPU_RESET = "IPU_RESET"
    LINK_RESET = "LINK_RESET"
    PARTITION_RESET = "PARTITION_RESET"
    POWER_CYCLE = "POWER_CYCLE"


class poplar_recoverable_runtime_error(poplar_system_runtime_error, RecoverableError):
    """A system error that `recoveryAction` recovers from."""

    recoveryAction = RecoveryAction.IPU_RESET

    def __init__(self, message: str, recoveryAction: RecoveryAction = RecoveryAction.IPU_RESET,
                 **kw):
        kw.setdefault("type", "popart")
        RecoverableError.__init__(self, message, recovery_action=RecoveryAction(recoveryAction).value, **kw)
        self.recoveryAction = RecoveryAction(recoveryAction)


class poplar_unrecoverable_runtime_error(poplar_system_runtime_error, UnrecoverableError):
    """A system error no reset recovers from."""


class poplar_unknown_runtime_error(poplar_system_runtime_error):
    """A system error that may or may not be recoverable."""


class OutOfMemoryException(popart_exception):
    """The program does not fit in the (simulated) IPUs' memory."""

    def __init__(self, message: str, summary: str = "", profile_path: str = "", **kw):
        super().__init__(message, **kw)
        self._summary = summary or message
        self._path = profile_path

    def getSummaryReport(self) -> str:
        """What did not fit: the IPU, the tile, the bytes and the largest tensors there."""
        return self._summary

    def getProfilePath(self) -> str:
        """The memory report written to engineOptions' "autoReport.directory" ("" without one)."""
        return self._path
