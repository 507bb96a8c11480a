"""torch's core ATen decomposition table, deciding its CompositeImplicit entries per op.

`torch._decomp.core_aten_decompositions()` is the table tilefx traces with:
a fixed list of decompositions plus one entry for every op that has a
CompositeImplicitAutograd kernel and is safe to decompose (functional, not
one of `PRESERVED_ATEN_CIA_OPS`). To list those, torch first builds the
Python handle of every such op in every namespace (~400 op packets, each
reading all its overloads' schemas): ~0.2 s of a cold compile, and ~0.05 s
of every later one for the namespaces it does not cache, while a trace
looks up a few dozen ops.

`DecompTable` holds the fixed list and answers `op in table` and
`table[op]` for any other op with torch's own per-op rule
(`_is_preservable_cia_op`, the preserved set for ATen ops, and
`_get_decomp_for_cia` for the entry), remembering the answers. Anything that
wants the whole table (iterating it, its length, copying it, as a sub-tracer
for a higher-order op does) gets torch's table built in full, so it is the
same table whichever way it is read.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

_MISSING = object()


class DecompTable(dict):
    """The table `core_aten_decompositions()` gives (see the module docstring)."""

    def __init__(self) -> None:
        from torch._decomp import _core_aten_decompositions_post_autograd

        super().__init__(_core_aten_decompositions_post_autograd())
        self._decided: dict[Any, Callable | None] = {}  # per-op answers not in the fixed list
        self._full: dict | None = None
        self._removed: set = set()  # ops taken out (`pop`): kept whole by the tracer

    def _cia(self, op) -> Callable | None:
        found = self._decided.get(op, _MISSING)
        if found is not _MISSING:
            return found  # type: ignore[return-value]
        from torch._export.utils import _get_decomp_for_cia, _is_aten_op, _is_preservable_cia_op
        from torch.export.decomp_utils import PRESERVED_ATEN_CIA_OPS

        fn = None
        if isinstance(op, torch._ops.OpOverload) and _is_preservable_cia_op(op) \
                and not (_is_aten_op(op) and op in PRESERVED_ATEN_CIA_OPS):
            fn = _get_decomp_for_cia(op)
        self._decided[op] = fn
        return fn

    def __contains__(self, op) -> bool:
        if op in self._removed:
            return False
        return dict.__contains__(self, op) or self._cia(op) is not None

    def __missing__(self, op):
        fn = None if op in self._removed else self._cia(op)
        if fn is None:
            raise KeyError(op)
        return fn

    def get(self, op, default=None):
        return self[op] if op in self else default

    def __bool__(self) -> bool:
        return True  # never empty; `table or {}` must not count it

    # reading the whole table: torch's, in full, with the entries set here
    def _materialized(self) -> dict:
        if self._full is None:
            from torch._decomp import core_aten_decompositions

            full = dict(core_aten_decompositions().items())
            full.update(dict.items(self))
            for op in self._removed:
                full.pop(op, None)
            self._full = full
        return self._full

    def __iter__(self):
        return iter(self._materialized())

    def __len__(self) -> int:
        return len(self._materialized())

    def keys(self):
        return self._materialized().keys()

    def values(self):
        return self._materialized().values()

    def items(self):
        return self._materialized().items()

    def copy(self) -> dict:
        return dict(self._materialized())

    def __setitem__(self, op, fn) -> None:
        self._removed.discard(op)
        dict.__setitem__(self, op, fn)
        if self._full is not None:
            self._full[op] = fn

    def pop(self, op, *default):
        """Take `op` out: it is then not in the table, however it is read."""
        found = self[op] if op in self else _MISSING
        self._removed.add(op)
        dict.pop(self, op, None)
        if self._full is not None:
            self._full.pop(op, None)
        if found is _MISSING:
            if default:
                return default[0]
            raise KeyError(op)
        return found

    def __delitem__(self, op) -> None:
        self.pop(op)

    def setdefault(self, op, fn=None):
        if op not in self:
            self[op] = fn
        return self[op]
