"""An xDSL `Context` that loads the ops of tilefx's dialects one at a time.

xDSL loads a registered dialect whole the first time the parser meets one of
its ops or attributes: every op class of it is built (xDSL's
`irdl_op_definition` for each). The `aten` dialect has an op per ATen
overload (~350) and `ipu` 22, defined lazily (dialects/aten.py, ipu.py), so
loading them whole cost more than the rest of `tilefx-opt`'s start-up on a
one-op file. `OpByOpContext` asks a dialect's lookup for the one op or
attribute the parser names and loads only that class; anything the lookup
does not know (an op that does not exist, a dialect listed as a whole) goes
to xDSL's own loading, which then finds the classes already loaded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.ir import Attribute, Operation, TypeAttribute

# `dialect.name` -> the op or attribute class of that name (None: not one)
Lookup = Callable[[str], "type[Operation] | type[Attribute] | None"]


@dataclass
class OpByOpContext(Context):
    """xDSL's `Context`, plus per-dialect lookups of single op and attribute classes."""

    _lookups: dict[str, Lookup] = field(default_factory=dict)

    def register_lookup(self, dialect: str, lookup: Lookup) -> None:
        """Load `dialect`'s ops and attributes one by one through `lookup`
        (the dialect itself stays registered, for whoever asks for it whole)."""
        self._lookups[dialect] = lookup

    def _single(self, name: str) -> type[Operation] | type[Attribute] | None:
        dialect = name.partition(".")[0]
        lookup = self._lookups.get(dialect)
        if lookup is None or dialect in self._loaded_dialects:
            return None
        return lookup(name)

    def _get_known_op(self, name: str) -> type[Operation] | None:
        if name in self._loaded_ops:
            return self._loaded_ops[name]
        found = self._single(name)
        if isinstance(found, type) and issubclass(found, Operation):
            self._loaded_ops[name] = found
            return found
        return super()._get_known_op(name)

    def get_optional_attr(self, name: str) -> type[Attribute] | None:
        if name not in self._loaded_attrs:
            found = self._single(name)
            if isinstance(found, type) and issubclass(found, Attribute) and not issubclass(found, TypeAttribute):
                self._loaded_attrs[name] = found
        return super().get_optional_attr(name)

    def load_op(self, op: type[Operation]) -> None:
        if self._loaded_ops.get(op.name) is not op:  # loaded one by one before its dialect
            super().load_op(op)

    def load_attr_or_type(self, attr: type[Attribute]) -> None:
        if self._loaded_attrs.get(attr.name) is not attr:
            super().load_attr_or_type(attr)

    def clone(self) -> OpByOpContext:
        other = OpByOpContext(self.allow_unregistered, self._loaded_dialects.copy(), self._loaded_ops.copy(),
                              self._loaded_attrs.copy(), self._loaded_types.copy(),
                              self._registered_dialects.copy(), self._lookups.copy())
        return other
