"""Tensor ids as PopART shows them to users: its reserved prefixes of a
tensor's gradient and updated value (read by PopTorch's anchors and
PopART's data flow), and for the torch frontend's builder
(from_torch._Builder, a mixin) the id `ipu_print_tensor` without a title
prints, as PopART's print does."""

from __future__ import annotations

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import BlockArgument

from tilefx.dialects import ipu
from tilefx.dialects.names import BUFFER_KEY, CONST_KEY, INPUT_KEY, MODULE_META_KEY, PARAM_KEY

GRADIENT_PREFIX = "Gradient___"  # PopART's reserved prefixes (popart.reservedGradientPrefix() ...)
UPDATED_PREFIX = "UpdatedVar___"


class TensorIds:
    """Needs the builder's `values` (fx node -> SSA value), `top` (the
    function's block), `arg_attrs` (its arguments' attributes) and
    `printed_ids` (autograd seq_nr -> the id of an untitled forward print)."""

    def print_title(self, node) -> str:
        """The title of an untitled `ipu_print_tensor`: PopART prints the
        tensor's id. The backward's print of its gradient (the same autograd
        sequence number) is `<id>_gradient`, as a titled print's is."""
        seq = node.meta.get("seq_nr")
        if node.meta.get("partitioner_tag") == "is_backward" and seq in self.printed_ids:
            return self.printed_ids[seq] + ipu.PRINT_GRADIENT_TITLE_SUFFIX
        title = self.tensor_id(node.args[0])
        if seq is not None:
            self.printed_ids.setdefault(seq, title)
        return title

    def tensor_id(self, x) -> str:
        """A tensor's id in the program, as PopART names tensors for users: a
        graph argument's name (the parameter, buffer or constant, the
        forward's argument), else the module path of the op that makes it and
        its node's name in the traced graph (unique: `fc/addmm`, `add_1`)."""
        v = self.values.get(x)
        if isinstance(v, BlockArgument) and v.owner is self.top and v.index < len(self.arg_attrs):
            arg = self.arg_attrs[v.index].data
            for key in (PARAM_KEY, BUFFER_KEY, CONST_KEY):
                if isinstance(arg.get(key), StringAttr):
                    return arg[key].data
            return v.name_hint or f"input{arg[INPUT_KEY].value.data}"
        parts = [p for p in ((x.meta.get("custom") or {}).get(MODULE_META_KEY, "")).split("/") if p]
        return "/".join(parts + [x.name])
