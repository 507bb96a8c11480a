"""`ipu-fuse-attention`: mark the attention groups the executor runs as one kernel.

The analysis is `tilefx/analysis/attention.py` (`attention_groups`); this
pass writes it on the IR, `ipu.attention = <group id>` on each member and
`ipu.attention_root` on the root, for tilefx-opt and its tests. The executor
reads the analysis itself and leaves the IR as it is; the machine model
ignores both (PopART computes attention op by op).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from tilefx.analysis.attention import attention_groups
from tilefx.dialects.irutil import mark_groups
from tilefx.dialects.names import ATTENTION_KEY, ATTENTION_ROOT_KEY


@dataclass(frozen=True)
class FuseAttentionPass(ModulePass):
    """Mark the attention groups (`ipu.attention`, `ipu.attention_root`) of every function."""

    name = "ipu-fuse-attention"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        mark_groups(op, attention_groups, ATTENTION_KEY, ATTENTION_ROOT_KEY)
