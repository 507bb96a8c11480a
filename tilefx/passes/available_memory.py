"""`ipu-available-memory`: attach the available-memory proportion to the ops that plan temporaries.

On the IPU, matmuls, convolutions, embeddings and gathers/index ops pick a
plan whose temporary memory per tile stays under bytes_per_tile x
proportion (Graphcore technical note "Optimising Temporary Memory Usage for Convolutions and Matmuls on the
IPU"). This pass writes that proportion as
`ipu.available_memory = <f64>` on each such op, so the machine model reads
one attribute instead of re-deriving the user's settings:

1. `ipu.set_available_memory(x, p)` gives `p` to the op producing `x`,
   looking through the shape-only ops a traced linear or a lowered
   serialized matmul puts after it (view, permute, cat, add.Tensor, ...);
   the set op itself is an identity and is replaced by its input. A later
   set on the same op wins.
2. else the proportion of the op's IPU (`#ipu.place<..., ipu = N>`), the
   option `per_ipu`: entry i is IPU i's, or with the option `ipus` the IPU
   of entry i is `ipus[i]` (`ipu-available-memory{per-ipu=0.75 ipus=1}`;
   the driver builds these from `Options.setAvailableMemoryProportion`,
   `AvailableMemoryPass.of_proportions`, and each IPU so named must be one
   the model runs on);
3. else `default_proportion`.

An op that already carries the attribute keeps it (the pass is idempotent).
Proportions outside (0, 1] are errors. A set_available_memory whose input no
such op produces (a constant, a relu) has nothing to tune: it is dropped with
a warning naming the producer, as PopTorch accepts it (its own tests set it on
a constant).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from xdsl.context import Context
from typing import Mapping

from xdsl.dialects.builtin import FloatAttr, ModuleOp, f64
from xdsl.ir import Operation, OpResult, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from tilefx.errors import Error
from tilefx.dialects import ipu
from tilefx.dialects.aten_traits import ops_where
from tilefx.dialects.names import AVAILABLE_MEMORY_KEY
from tilefx.passes import check_option

# the ops whose temporaries the proportion bounds (op traits: memory_planned)
MEMORY_OPS = frozenset({"aten." + n for n in ops_where(memory_planned=True)} | {"ipu.serialized_matmul"})
# ops between a memory op and the tensor the user sees: a traced linear
# (view, addmm, view; mm + bias add) or a lowered serialized matmul (cat / add / view)
_SEE_THROUGH = frozenset({
    "aten.view", "aten.permute", "aten.alias", "aten.clone", "aten.squeeze.dims",
    "aten.unsqueeze", "aten.expand", "aten._to_copy", "aten.add.Tensor", "aten.cat",
    "ipu.nop",
})
_IPU_KEY = re.compile(r"^IPU(\d+)$")
log = logging.getLogger("tilefx.passes")


class AvailableMemoryError(Error, DiagnosticException):
    """A bad available-memory proportion (a tilefx.Error and an IR diagnostic)."""

    def __init__(self, message: str):
        Error.__init__(self, message, type="ipu-available-memory")


def _check(p: float, where: str) -> float:
    if not ipu.is_proportion(p):
        raise AvailableMemoryError(f"available memory proportion must be in (0, 1], got {p} ({where})")
    return p


def _producers(v: SSAValue) -> list[Operation]:
    """The memory ops whose result reaches `v` through see-through ops only."""
    found: list[Operation] = []
    stack, seen = [v], set()
    while stack:
        x = stack.pop()
        if not isinstance(x, OpResult) or x.op in seen:
            continue
        seen.add(x.op)
        if x.op.name in MEMORY_OPS:
            found.append(x.op)
        elif x.op.name in _SEE_THROUGH:
            stack.extend(x.op.operands)
    return found


@dataclass(frozen=True)
class AvailableMemoryPass(ModulePass):
    """Write `ipu.available_memory` on every memory-planning op."""

    name = "ipu-available-memory"

    default_proportion: float | int = ipu.DEFAULT_PROPORTION
    per_ipu: tuple[int | float, ...] = ()
    # the IPU of each per_ipu entry (empty: entry i is IPU i's)
    ipus: tuple[int, ...] = ()

    def __post_init__(self):
        check_option(self.name, not self.ipus or len(self.ipus) == len(self.per_ipu),
                     f"ipus names {len(self.ipus)} IPU(s) for {len(self.per_ipu)} per-ipu proportion(s)")
        check_option(self.name, all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in self.ipus)
                     and len(set(self.ipus)) == len(self.ipus), f"ipus must be distinct IPU ids >= 0, got {self.ipus}")

    @classmethod
    def of_proportions(cls, proportions: Mapping[str, float],
                       default_proportion: float = ipu.DEFAULT_PROPORTION) -> AvailableMemoryPass:
        """The pass of `Options.setAvailableMemoryProportion`'s dictionary
        (`{"IPU0": 0.3, "IPU2": 0.5}`, `CompileConfig.available_memory_proportion`)."""
        ids, values = [], []
        for key, val in proportions.items():
            m = _IPU_KEY.match(key)
            if m is None:
                raise AvailableMemoryError(f"available memory proportions: expected IPU<n> = <float>, "
                                           f"got {key} = {val}")
            ids.append(int(m.group(1)))
            values.append(float(val))
        return cls(default_proportion=default_proportion, per_ipu=tuple(values), ipus=tuple(ids))

    def proportions(self) -> dict[int, float]:
        """Each IPU's proportion given (checked in (0, 1])."""
        if self.ipus:
            return {i: _check(float(p), f"IPU{i}") for i, p in zip(self.ipus, self.per_ipu)}
        return {i: _check(float(p), f"per_ipu[{i}]") for i, p in enumerate(self.per_ipu)}

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        default = _check(float(self.default_proportion), "default_proportion")
        per_ipu = self.proportions()
        if self.ipus:  # the user's Options: name only IPUs in use
            used = {pl.ipu.data for o in op.walk()
                    if isinstance(pl := o.attributes.get(ipu.PLACE_KEY), ipu.PlacementAttr)} - {-1}
            used = used or {0}
            if extra := sorted(set(per_ipu) - used):
                raise AvailableMemoryError(
                    f"setAvailableMemoryProportion names IPU{extra[0]}, but the model runs on "
                    f"{', '.join(f'IPU{i}' for i in sorted(used))} only")
        explicit: dict[Operation, float] = {}
        for sam in [o for o in op.walk() if o.name == "ipu.set_available_memory"]:
            p = _check(sam.proportion.value.data, "set_available_memory")
            targets = _producers(sam.input)
            if not targets:
                src = sam.input.op.name if isinstance(sam.input, OpResult) else "a function argument"
                log.warning("set_available_memory(%s) has no effect: it applies to a matmul, "
                            "convolution, embedding or gather/index op, but its input comes from %s",
                            p, src)
            for t in targets:
                explicit[t] = p
            sam.result.replace_all_uses_with(sam.input)
            sam.parent_block().erase_op(sam)
        for o in op.walk():
            if o.name not in MEMORY_OPS or AVAILABLE_MEMORY_KEY in o.attributes and o not in explicit:
                continue
            place = o.attributes.get(ipu.PLACE_KEY)
            dev = place.ipu.data if isinstance(place, ipu.PlacementAttr) else -1
            p = explicit.get(o, per_ipu.get(dev, default))
            o.attributes[AVAILABLE_MEMORY_KEY] = FloatAttr(p, f64)
