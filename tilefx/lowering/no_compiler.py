"""Run torch's tracing machinery without importing torch.compile (~2 s).

While tilefx traces a model (make_fx, fake tensors, functionalization), or
checks an op on meta tensors, or builds a torch optimizer, torch touches its
compiler in three ways that do nothing when nothing is being compiled:

- functions wrapped in `torch._compile._disable_dynamo` (make_fx's
  `dispatch_trace`, the elementwise reference and meta functions, custom-op
  kernels, `Optimizer.add_param_group`) run `import torch._dynamo` on their
  first call and cache `torch._dynamo.disable(fn)` on the wrapped function
  as `fn.__dynamo_disable`. The wrapper exists so that torch.compile does
  not trace into them. If `torch._dynamo` is not in `sys.modules`, nothing
  in the process can be compiling, so calling the function itself is what
  the disabled wrapper would do.
- make_fx's `_trace_inner` runs `import torch._dynamo` before it traces.
- the proxy mode, FakeTensorMode and the functional tensor mode read flags
  from `torch._dynamo.config` and `torch._inductor.config`, and importing
  those packages loads both compilers (each package's `__init__` imports
  the other's).

`without_compiler()` makes that so for its duration, and only when dynamo
is not loaded: it puts stand-in modules at `sys.modules["torch._dynamo"]` and
`["torch._inductor"]`. Their `__path__` is the real packages' directory, so
a submodule imported by name loads as itself (the `config` flag tables)
without the package `__init__`; the dynamo stand-in's `disable(fn)` returns
`fn` unchanged. Any other attribute loads the real compiler: the stand-ins
step aside first, so code that truly needs dynamo during the trace gets it.

On exit the stand-ins are removed, the submodules loaded through them are
dropped from `sys.modules` (a later `import torch._dynamo` starts from
scratch, exactly as if tilefx had never run), and every
`fn.__dynamo_disable` the stand-in caused to be cached is deleted, so the
next call of such a function goes through the real wrapper: a user who
calls torch.compile afterwards gets the real `torch._dynamo.disable` on
every one of them. If dynamo is loaded already (the user compiled or
imported it before), the context does nothing and torch behaves as it would
without tilefx. (A thread that imports torch._dynamo while another traces
gets the stand-in; tilefx does not trace from several threads at once.)

The submodules a session loaded through the stand-ins (the flag tables and
the few helpers they import) are kept aside when it ends and put back, bound
to the new stand-ins, when the next one starts: executing the two flag
tables again (they tokenize their own source) cost ~0.07 s of every compile,
and in a process without tilefx torch loads each of them once too. While a
session loads them, torch's reading of their source for `# compile_ignored`
comments returns nothing: those comments only take flags out of
torch.compile's cache keys, and these copies of the tables never serve a
compile (a real `import torch._dynamo` loads its own); the tokenizing was
30-45 ms of the first compile in a process. Outside a
session they are in no `sys.modules`, as before, so a later real `import
torch._dynamo` still starts from scratch. A session costs two passes over
the names in `sys.modules`; the compile runs in one session (nested ones do
nothing), the op verifier outside a compile in one per new op signature.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import sys
import types
from collections.abc import Iterator

import torch
import torch.utils._config_module as _config_module

_PACKAGES = ("torch._dynamo", "torch._inductor")
_FLAG_TABLES = ("config",)  # the submodules torch reads as `<package>.config`


@functools.cache
def _package_path(name: str) -> list[str]:
    spec = importlib.util.find_spec(name)  # finds the directory, runs nothing
    return list(spec.submodule_search_locations or []) if spec is not None else []


class _StandIn(types.ModuleType):
    """A compiler package while tilefx traces with it not loaded (see the module docstring)."""

    def __init__(self, name: str, session: "_Session") -> None:
        super().__init__(name)
        self._session = session
        self.__path__ = _package_path(name)

    def disable(self, fn=None, recursive=True, *, reason=None, wrapping=True):
        """`torch._dynamo.disable` while nothing can compile: `fn` itself."""
        if fn is None:
            return lambda f: self.disable(f, recursive, reason=reason, wrapping=wrapping)
        if not self._session.active:  # the real dynamo was loaded meanwhile
            return sys.modules["torch._dynamo"].disable(fn, recursive, reason=reason, wrapping=wrapping)
        self._session.passed_through.append(fn)
        return fn

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        if self._session.active and name in _FLAG_TABLES:
            return importlib.import_module(f"{self.__name__}.{name}")
        self._session.step_aside()  # something needs the compiler itself: load it
        return getattr(importlib.import_module(self.__name__), name)


_PREFIXES = tuple(name + "." for name in _PACKAGES)

# the submodules the last session loaded through its stand-ins, by name (see the docstring)
_kept: dict[str, types.ModuleType] = {}


def _loaded_under_packages() -> set[str]:
    return {k for k in list(sys.modules) if k.startswith(_PREFIXES)}


def _no_compile_ignored_comments(module: types.ModuleType) -> set[str]:
    """`get_assignments_with_compile_ignored_comments` for a flag table loaded
    through a stand-in (see the module docstring)."""
    return set()


class _Session:
    def __init__(self) -> None:
        self.active = True
        self.read_comments = _config_module.get_assignments_with_compile_ignored_comments
        _config_module.get_assignments_with_compile_ignored_comments = _no_compile_ignored_comments
        self.passed_through: list = []
        self.loaded_before = _loaded_under_packages()
        self.stand_ins = {name: _StandIn(name, self) for name in _PACKAGES}
        for name, m in self.stand_ins.items():
            sys.modules[name] = m
            torch.__dict__[name.rpartition(".")[2]] = m
        for name, m in _kept.items():  # as the import that loaded them left them
            if name not in sys.modules:
                sys.modules[name] = m
                parent, _, child = name.rpartition(".")
                if parent in self.stand_ins:
                    setattr(self.stand_ins[parent], child, m)

    def step_aside(self, keep: bool = False) -> None:
        if not self.active:
            return
        self.active = False
        _config_module.get_assignments_with_compile_ignored_comments = self.read_comments
        for name, m in self.stand_ins.items():
            if sys.modules.get(name) is m:
                del sys.modules[name]
            attr = name.rpartition(".")[2]
            if torch.__dict__.get(attr) is m:
                del torch.__dict__[attr]
        loaded = _loaded_under_packages() - self.loaded_before
        if keep:
            _kept.clear()
            _kept.update((k, sys.modules[k]) for k in loaded)
        for sub in loaded:
            del sys.modules[sub]

    def close(self) -> None:
        self.step_aside(keep=True)
        for fn in self.passed_through:
            if getattr(fn, "__dynamo_disable", None) is fn:
                try:
                    delattr(fn, "__dynamo_disable")
                except AttributeError:
                    pass


@contextlib.contextmanager
def without_compiler() -> Iterator[None]:
    """While active, torch's tracing runs without loading torch._dynamo and
    torch._inductor, when (and only when) torch._dynamo is not loaded yet."""
    if any(name in sys.modules for name in _PACKAGES):
        yield
        return
    session = _Session()
    try:
        yield
    finally:
        session.close()
