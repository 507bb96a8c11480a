"""Automatic mixed precision (PopTorch user guide, earlier releases, "Automatic mixed-precision casting").

`autocast(enabled)` works as a context manager, a function decorator and, as
`module.autocast(enabled)`, on a layer and everything inside it (the inner
setting wins). Each form stamps `tilefx.autocast` on the traced nodes
(backward included); the `ipu-autocast` pass then casts the ops the
`Policy` names. Nothing happens unless autocast is enabled somewhere and
`Options.Precision.autocastEnabled` is left True.
"""

from __future__ import annotations

import contextlib

import torch

from tilefx.errors import Error
from tilefx.dialects.names import AUTOCAST_META_KEY



_UNSET = object()


class autocast(contextlib.ContextDecorator):
    """`with poptorch.autocast(): ...`, `@poptorch.autocast()` or `model.autocast()`."""

    def __init__(self, enabled: bool = True):
        if not isinstance(enabled, bool):
            raise Error(f"autocast(enabled) expects a bool, got {enabled!r}")
        self.enabled = enabled
        self._saved: list = []

    # The setting is one key of torch's node metadata (`current_meta["custom"]`),
    # set on entry and given back its previous value on exit. torch's
    # `fx.traceback.annotate` would restore the whole dict it copied on entry,
    # and, left open by a forward that raised, would do so whenever the
    # generator is collected, in the middle of a later trace.
    def __enter__(self):
        custom = torch.fx.traceback.current_meta.setdefault("custom", {})
        self._saved.append(custom.get(AUTOCAST_META_KEY, _UNSET))
        custom[AUTOCAST_META_KEY] = self.enabled
        return self

    def __exit__(self, *exc):
        if not self._saved:
            return False
        previous = self._saved.pop()
        custom = torch.fx.traceback.current_meta.setdefault("custom", {})
        if previous is _UNSET:
            custom.pop(AUTOCAST_META_KEY, None)
        else:
            custom[AUTOCAST_META_KEY] = previous
        return False


def _module_autocast(self: torch.nn.Module, enabled: bool = True) -> torch.nn.Module:
    """`module.autocast(enabled)`: automatic casting for this layer and the layers inside it."""
    for h in getattr(self, "_tilefx_autocast_handles", ()):
        h.remove()
    scope = autocast(enabled)

    def enter(module, args):  # a pre-hook that returns something replaces the inputs
        scope.__enter__()

    def leave(module, args, out):
        scope.__exit__(None, None, None)

    # always_call: the setting ends with the forward, also when the forward raises
    self._tilefx_autocast_handles = (self.register_forward_pre_hook(enter),
                                     self.register_forward_hook(leave, always_call=True))
    return self


def install_module_method() -> None:
    """Give every torch.nn.Module an `autocast` method, as PopTorch does."""
    if not hasattr(torch.nn.Module, "autocast"):
        torch.nn.Module.autocast = _module_autocast


# What the policies name: torch functions or module classes, as aten ops.
_LAYER_OPS = {
    "Linear": ("aten.addmm", "aten.mm", "aten.bmm"),
    "Conv1d": ("aten.convolution", "aten.convolution_backward"), "Conv2d": ("aten.convolution", "aten.convolution_backward"), "Conv3d": ("aten.convolution", "aten.convolution_backward"),
    "ConvTranspose1d": ("aten.convolution", "aten.convolution_backward"), "ConvTranspose2d": ("aten.convolution", "aten.convolution_backward"),
    "ConvTranspose3d": ("aten.convolution", "aten.convolution_backward"),
}
_FUNCTION_OPS = {
    "matmul": ("aten.mm", "aten.bmm", "aten.addmm"), "mm": ("aten.mm",), "bmm": ("aten.bmm",),
    "addmm": ("aten.addmm",), "addbmm": ("aten.bmm",), "baddbmm": ("aten.bmm",), "mv": ("aten.mm",),
    "addmv": ("aten.addmm",), "addr": ("aten.mm",), "chain_matmul": ("aten.mm",), "dot": ("aten.mm",),
    "linear": ("aten.addmm", "aten.mm"), "tensordot": ("aten.mm", "aten.bmm"),
    "conv1d": ("aten.convolution", "aten.convolution_backward"), "conv2d": ("aten.convolution", "aten.convolution_backward"), "conv3d": ("aten.convolution", "aten.convolution_backward"),
    "conv_tbc": ("aten.convolution", "aten.convolution_backward"), "conv_transpose1d": ("aten.convolution", "aten.convolution_backward"),
    "conv_transpose2d": ("aten.convolution", "aten.convolution_backward"), "conv_transpose3d": ("aten.convolution", "aten.convolution_backward"),
    "convolution": ("aten.convolution", "aten.convolution_backward"), "cat": ("aten.cat",), "stack": ("aten.cat",),
    "index_put": ("aten.index_put",), "softmax": ("aten._softmax",),
    "log_softmax": ("aten._log_softmax",), "layer_norm": ("aten.native_layer_norm",),
}

DEFAULT_FP16 = ["addbmm", "addmm", "addmv", "addr", "baddbmm", "bmm", "chain_matmul", "conv1d", "conv2d",
                "conv3d", "conv_tbc", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
                "convolution", "matmul", "mm", "mv"]
DEFAULT_PROMOTE = ["addcdiv", "addcmul", "atan2", "bilinear", "cat", "cross", "dot", "equal",
                   "index_put", "stack", "tensordot"]


def _ops_of(item) -> tuple[str, ...]:
    if isinstance(item, type) and issubclass(item, torch.nn.Module):
        name = item.__name__
        return _LAYER_OPS.get(name, (f"aten.{name.lower()}",))
    name = item if isinstance(item, str) else getattr(item, "__name__", None)
    if not name:
        raise Error(f"Policy: cannot name the op of {item!r}: give a torch function or a module class")
    name = name.rsplit(".", 1)[-1]
    return _FUNCTION_OPS.get(name, (f"aten.{name}",))


class Policy:
    """A casting policy: ops typed fp16 / fp32, and ops promoted to fp32 or
    demoted to fp16 when their inputs mix precisions."""

    def __init__(self, fp16=None, fp32=None, promote=None, demote=None):
        self.fp16 = list(fp16 if fp16 is not None else [])
        self.fp32 = list(fp32 if fp32 is not None else [])
        self.promote = list(promote if promote is not None else [])
        self.demote = list(demote if demote is not None else [])

    @staticmethod
    def default() -> Policy:
        return Policy(fp16=DEFAULT_FP16, promote=DEFAULT_PROMOTE)

    def op_sets(self) -> dict[str, tuple[str, ...]]:
        """Each class as aten op names (a later, more specific class wins: fp32 over fp16)."""
        out = {}
        for key in ("fp16", "fp32", "promote", "demote"):
            names: list[str] = []
            for item in getattr(self, key):
                names += _ops_of(item)
            out[key] = tuple(dict.fromkeys(names))
        return out


install_module_method()
