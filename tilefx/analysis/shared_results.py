"""Results an analysis of one traced module may hand to every copy of it.

A planner costs many configurations of one traced model, each on its own
copy of the traced IR (`Operation.clone`: the same ops in the same order,
with the same types, attributes and data flow) with the configuration's
options written into the module's attributes. What a pass derives from the
ops alone, before it changes them, is then the same on every copy: which
position each op is anchored to, which values recomputation keeps, the
cycles and bytes of each position. Such a result, computed in the op order
of the function (positions and indices, never the ops of one copy), is
kept in a `Shared` the planner attaches to each copy (`attach`), keyed by
everything else it reads (machine, proportion, where the optimizer state
lives...); a pass asks `shared_of(module)` and computes it once per key
(`Shared.get`). A module nobody attached one to computes every result
afresh, as a compile does.

The one who attaches promises that the copies' ops are unchanged from the
module the results were first computed on; a pass keys a result by every
module attribute it reads.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp


class Shared:
    """Results per key, and how many times each kind (a key's first item)
    was computed (`computed`)."""

    def __init__(self) -> None:
        self._results: dict[Hashable, Any] = {}
        self.computed: dict[Hashable, int] = {}

    def get(self, key: tuple, compute: Callable[[], Any]) -> Any:
        """The result for `key`, computed on the first ask. Arrays in it are
        made read-only, so a caller that would change them in place fails
        instead of changing what the next copy reads."""
        try:
            return self._results[key]
        except KeyError:
            pass
        out = self._results[key] = _frozen(compute())
        self.computed[key[0]] = self.computed.get(key[0], 0) + 1
        return out


def _frozen(x):
    if isinstance(x, np.ndarray):
        x.flags.writeable = False
    elif isinstance(x, (tuple, list)):
        for y in x:
            _frozen(y)
    elif isinstance(x, dict):
        for y in x.values():
            _frozen(y)
    return x


_ATTACHED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def attach(module: ModuleOp, shared: Shared) -> None:
    """Let the passes that run on `module` (a copy of the traced module the
    results are of) read and fill `shared`."""
    _ATTACHED[module] = shared


def shared_of(module: ModuleOp) -> Shared | None:
    return _ATTACHED.get(module)
