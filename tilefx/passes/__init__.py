"""The graph passes, one `ModulePass` per module (see docs/architecture.md)."""

from __future__ import annotations

import math

from tilefx.errors import Error


class PassOptionError(Error):
    """A pass option outside its domain (`tilefx-opt -p 'pass{option=...}'`)."""


def check_option(pass_name: str, ok: bool, message: str) -> None:
    """Raise PassOptionError naming the pass unless `ok` (pass options are
    checked when the pass is made, before any IR is touched)."""
    if not ok:
        raise PassOptionError(f"{pass_name}: {message}", type=pass_name)


def finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
