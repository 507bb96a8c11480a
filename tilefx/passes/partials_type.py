"""`ipu-partials-type`: the type of matmul and convolution partial sums.

`Options.Precision.setPartialsType(torch.half)` (PopTorch user guide,
"Reduced and mixed precision" / "Partials data type") has Poplar accumulate
the partial sums of matrix products and convolutions in float16: half the
memory for partials and the AMP units' faster half rate (backend/costs.py
`matmul_cost`). The machine model reads each op's own
`ipu.partials_type = "half" | "float"`; this pass writes the option `type`
on every op whose partials it costs (`costs.PARTIALS_OPS`) that carries none
(a type written on an op by hand is kept). It runs first, so `ipu-auto-stage`
costs the stages with it, and the ops later passes make from these (a
serialized matmul's pieces, a recomputed clone) copy the attribute.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.passes import ModulePass

from tilefx.backend.costs import PARTIALS_OPS
from tilefx.dialects.names import PARTIALS_TYPE_KEY
from tilefx.passes import check_option

PARTIALS_TYPES = ("half", "float")


@dataclass(frozen=True)
class PartialsTypePass(ModulePass):
    """Write `ipu.partials_type` on every matmul and convolution."""

    name = "ipu-partials-type"

    type: str = "float"

    def __post_init__(self):
        check_option(self.name, self.type in PARTIALS_TYPES,
                     f"type: {self.type!r} is not one of {', '.join(PARTIALS_TYPES)}")

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for o in op.walk():
            if o.name in PARTIALS_OPS and PARTIALS_TYPE_KEY not in o.attributes:
                o.attributes[PARTIALS_TYPE_KEY] = StringAttr(self.type)
