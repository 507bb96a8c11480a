"""The plugins a process runs with: one registry object, `RUNTIME`, that
callers install plugins into.

The layers below the frontends know nothing of torch: the `aten` verifier
checks result types by the rules the registry holds
(`RUNTIME.result_type_rules`), and the executor runs an op on a kernel its
providers offer (`RUNTIME.kernel_providers`; attention groups on
`RUNTIME.attention_providers`), calling `RUNTIME.call_hooks` as each call
starts. They change only when a caller installs a plugin: the torch frontend
and the surfaces install torch's shape rules and ATen's kernels
(`RUNTIME.install(TorchRules(), AtenKernels())`, lowering/torch_rules.py,
lowering/aten_kernels.py), tilefx-opt installs only the rules, and only once
it reads `aten` IR. Importing a module installs nothing, so what runs does
not depend on what happened to be imported.

The registry sits below the dialects (it imports nothing of tilefx), so the
verifier and the executor read it without importing the layers that fill it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


class Plugin:
    """What a plugin adds; `name` identifies it (installed once)."""

    name: str = ""
    result_type_rules: Sequence[Callable[..., None]] = ()
    kernel_providers: Sequence[Callable[..., Any]] = ()
    attention_providers: Sequence[Callable[..., Any]] = ()
    call_hooks: Sequence[Callable[[], Any]] = ()


class Runtime:
    """A registry of installed plugins; its hooks are tuples, in install order
    (the verifier and the executor read them on every op and call)."""

    def __init__(self) -> None:
        self._plugins: dict[str, Plugin] = {}
        self.result_type_rules: tuple[Callable[..., None], ...] = ()
        self.kernel_providers: tuple[Callable[..., Any], ...] = ()
        self.attention_providers: tuple[Callable[..., Any], ...] = ()
        self.call_hooks: tuple[Callable[[], Any], ...] = ()

    def install(self, *plugins: Plugin) -> None:
        """Add each plugin's rules, kernel providers and call hooks (a plugin
        installed already, by name: nothing)."""
        for plugin in plugins:
            if plugin.name in self._plugins:
                continue
            self._plugins[plugin.name] = plugin
            for hooks in ("result_type_rules", "kernel_providers", "attention_providers", "call_hooks"):
                have = getattr(self, hooks)
                setattr(self, hooks, have + tuple(h for h in getattr(plugin, hooks) if h not in have))

    def installed(self) -> tuple[str, ...]:
        """The names of the plugins installed, in order."""
        return tuple(self._plugins)


RUNTIME = Runtime()  # the process's: what the verifier and the executor read
