"""`ipu-fuse-elementwise`: mark the chains of float32 elementwise ops the executor may fuse.

The analysis is `tilefx/analysis/fusion.py` (`fusion_groups`); this pass
writes it on the IR, `ipu.fuse = <group id>` on each member and
`ipu.fuse_root` on the root, for tilefx-opt and its tests. The executor reads
the analysis itself and leaves the IR as it is; the machine model ignores
both: how the host simulator evaluates a chain is not a device cost.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from tilefx.analysis.fusion import fusion_groups
from tilefx.dialects.irutil import mark_groups
from tilefx.dialects.names import FUSE_KEY, FUSE_ROOT_KEY


@dataclass(frozen=True)
class FuseElementwisePass(ModulePass):
    """Mark the fusion groups (`ipu.fuse`, `ipu.fuse_root`) of every function."""

    name = "ipu-fuse-elementwise"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        mark_groups(op, fusion_groups, FUSE_KEY, FUSE_ROOT_KEY)
