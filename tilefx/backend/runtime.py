"""The plugins a process runs with, installed by whoever has them.

The layers below the frontends know nothing of torch: the `aten` verifier
checks result types by the rules its `RESULT_TYPE_RULES` hold, and the
executor runs an op on a kernel its `KERNEL_PROVIDERS` (and attention
groups on its `ATTENTION_PROVIDERS`) offer, calling its `CALL_HOOKS` as each
call starts. Those hook lists change only here, when a caller installs a
plugin: the torch frontend and the surfaces install torch's shape rules and
ATen's kernels (`runtime.install(TorchRules(), AtenKernels())`,
lowering/torch_rules.py, lowering/aten_kernels.py), tilefx-opt installs
only the rules, and only once it reads `aten` IR. Importing a module
installs nothing, so what runs does not depend on what happened to be
imported.
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


_INSTALLED: dict[str, Plugin] = {}


def install(*plugins: Plugin) -> None:
    """Add each plugin's rules, kernel providers and call hooks to the
    verifier's and the executor's hook lists (a plugin already installed:
    nothing). The executor is imported only for a plugin with kernels."""
    for plugin in plugins:
        if plugin.name in _INSTALLED:
            continue
        if plugin.result_type_rules:
            from tilefx.dialects.aten import RESULT_TYPE_RULES

            _extend(RESULT_TYPE_RULES, plugin.result_type_rules)
        if plugin.kernel_providers or plugin.attention_providers or plugin.call_hooks:
            from tilefx.backend import executor

            _extend(executor.KERNEL_PROVIDERS, plugin.kernel_providers)
            _extend(executor.ATTENTION_PROVIDERS, plugin.attention_providers)
            _extend(executor.CALL_HOOKS, plugin.call_hooks)
        _INSTALLED[plugin.name] = plugin


def installed() -> tuple[str, ...]:
    """The names of the plugins installed, in order."""
    return tuple(_INSTALLED)


def _extend(hooks: list, new: Sequence) -> None:
    hooks.extend(h for h in new if h not in hooks)
