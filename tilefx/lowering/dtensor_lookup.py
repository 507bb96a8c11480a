"""Let torch's C++ subclass dispatch find DTensor without importing it (~0.3 s).

The first time torch dispatches an op on a tensor subclass with no mode
taking it (a fake tensor does so when its view rule calls a prim on itself),
its C++ `is_dtensor` check runs `import torch.distributed.tensor` and keeps
`torch.distributed.tensor.DTensor` for the life of the process. That import
(sharding rules for every op, and sympy) was ~0.3 s of a cold compile beyond
what tilefx's trace needs, and nothing in a tilefx compile is a DTensor.

`prime()` answers that one lookup with `DTensorLookup`, a class that stands
for DTensor as C++ uses it, so the check is what it would be with the real
class:

- C++ tests `type(x) is DTensor`, then `isinstance(x, DTensor)`.
  `DTensorLookup` is no object's type, so the first test is always false;
  `isinstance(x, DTensorLookup)` is `isinstance(x, DTensor)` with the real
  class once `torch.distributed.tensor._api` is loaded, and false before
  (no DTensor can exist before its class does).
- For an instance, C++ then compares `type(x).__torch_dispatch__` with
  `DTensor.__torch_dispatch__` (a subclass overriding it takes the Python
  route). Any attribute of `DTensorLookup` is read from the real class,
  loading it if need be (here it is loaded: x is a DTensor).

So a DTensor made later takes the same C++ route as without tilefx; every
subclass dispatch pays one Python-level `isinstance` more (~1 us).

The lookup is answered by dispatching one op on a private subclass while a
stand-in module holding `DTensorLookup` sits at
`sys.modules["torch.distributed.tensor"]`; the stand-in is removed right
after (any attribute read from it meanwhile loads the real module). It is
done once per process, and only when nothing has loaded the real module
(then C++ may have kept the real class already, and the lookup is cheap
anyway) and no torch function or dispatch mode is active (the op must reach
the subclass, and no mode may see it).
"""

from __future__ import annotations

import importlib
import sys
import types

import torch

_MODULE = "torch.distributed.tensor"
_API = "torch.distributed.tensor._api"
_primed = False


def _real_dtensor() -> type:
    return importlib.import_module(_API).DTensor


class _LookupMeta(type):
    def __instancecheck__(cls, obj) -> bool:
        api = sys.modules.get(_API)
        dtensor = getattr(api, "DTensor", None) if api is not None else None
        return dtensor is not None and isinstance(obj, dtensor)

    def __subclasscheck__(cls, sub) -> bool:
        api = sys.modules.get(_API)
        dtensor = getattr(api, "DTensor", None) if api is not None else None
        return dtensor is not None and issubclass(sub, dtensor)

    def __getattr__(cls, name: str):
        if name.startswith("__") and name != "__torch_dispatch__":
            raise AttributeError(name)
        return getattr(_real_dtensor(), name)


class DTensorLookup(metaclass=_LookupMeta):
    """DTensor as torch's C++ `is_dtensor` uses it (see the module docstring)."""


class _StandIn(types.ModuleType):
    """`torch.distributed.tensor` for the one C++ lookup: DTensor is DTensorLookup."""

    def __init__(self) -> None:
        super().__init__(_MODULE)
        self.DTensor = DTensorLookup

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        if sys.modules.get(_MODULE) is self:  # someone else wants the real module: step aside
            del sys.modules[_MODULE]
        return getattr(importlib.import_module(_MODULE), name)


class _Probe(torch.Tensor):
    """A subclass whose one dispatched op makes C++ look DTensor up."""

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return torch.empty(0)


def _modes_active() -> bool:
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    if torch._C._len_torch_function_stack() or _get_current_dispatch_mode_stack():
        return True
    keys = torch._C._TorchDispatchModeKey
    return any(torch._C._get_dispatch_mode(k) is not None
               for k in (keys.FAKE, keys.PROXY, keys.FUNCTIONAL))


def prime() -> None:
    """Answer C++'s DTensor lookup with DTensorLookup, when it is safe to (once)."""
    global _primed
    if _primed or _MODULE in sys.modules or not torch.distributed.is_available() or _modes_active():
        return
    _primed = True
    probe = torch.Tensor._make_subclass(_Probe, torch.empty(0))
    stand_in = _StandIn()
    sys.modules[_MODULE] = stand_in
    try:
        torch.ops.aten.alias.default(probe)
    finally:
        if sys.modules.get(_MODULE) is stand_in:
            del sys.modules[_MODULE]
