"""Module-level PopTorch functions about the machine and compilation:
`ipuHardwareIsAvailable`, `ipuHardwareVersion`, `registerPreCompileHook`,
`registerPostCompileHook`.

tilefx's IPUs are simulated, so "hardware" is always there: any number of
IPUs a POD could hold (up to 256) is available, and its version is the
default machine's (Mk2: 2, as PopTorch reports for IPU-M2000 systems).
"""

from __future__ import annotations

from collections.abc import Callable

from tilefx.backend.machine import MAX_IPUS
from tilefx.errors import Error
_pre_compile_hooks: dict[int, Callable] = {}
_post_compile_hooks: dict[int, Callable] = {}
_next_id = 0


def ipuHardwareIsAvailable(num_ipus: int = 1) -> bool:
    """True: the simulated machine has `num_ipus` IPUs (1 to 256)."""
    if isinstance(num_ipus, bool) or not isinstance(num_ipus, int) or num_ipus < 1:
        raise Error(f"ipuHardwareIsAvailable: num_ipus must be a positive int, got {num_ipus!r}")
    return num_ipus <= MAX_IPUS


def ipuHardwareVersion() -> int:
    """The IPU version of the simulated machine: 2 (Mk2, the default machine)."""
    return 2


class _HookHandle:
    """What registering a hook returns: `.remove()` unregisters it."""

    def __init__(self, registry: dict[int, Callable], key: int):
        self.registry, self.key = registry, key

    def remove(self) -> None:
        self.registry.pop(self.key, None)


def _register(name: str, registry: dict[int, Callable], hook) -> _HookHandle:
    global _next_id
    if not callable(hook):
        raise Error(f"{name}: the hook must be callable, got {type(hook).__name__}")
    _next_id += 1
    registry[_next_id] = hook
    return _HookHandle(registry, _next_id)


def registerPreCompileHook(hook: Callable[[], None]) -> _HookHandle:
    """Call `hook()` before every compilation, hooks in the order they were
    registered; `.remove()` on the returned handle unregisters it."""
    return _register("registerPreCompileHook", _pre_compile_hooks, hook)


def registerPostCompileHook(hook: Callable[[], None]) -> _HookHandle:
    """Call `hook()` after every compilation (also when loaded from the
    executable cache); `.remove()` on the returned handle unregisters it."""
    return _register("registerPostCompileHook", _post_compile_hooks, hook)


def run_pre_compile_hooks() -> None:
    for hook in list(_pre_compile_hooks.values()):
        hook()


def run_post_compile_hooks() -> None:
    for hook in list(_post_compile_hooks.values()):
        hook()
