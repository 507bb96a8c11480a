"""tilefx: PopTorch-style models compiled with xDSL and run on a simulated IPU.

`import tilefx as poptorch` is enough for code written for PopTorch. Names
are imported lazily so that the IR tools (`tilefx-opt`, `tilefx-run`) start
without importing torch.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

from tilefx.errors import Error, RecoverableError, UnrecoverableError
from tilefx.gcpause import gc_paused as _gc_paused

__version__ = "0.1.0"

# PopTorch's submodules: `poptorch.enums.X`, `from poptorch.options import Options`
SUBMODULES = {"optim": "tilefx.lowering.optimizers", "enums": "tilefx.api.enums", "options": "tilefx.api.options",
              "autocasting": "tilefx.api.autocast", "profiling": "tilefx.api.profiling",
              "ops": "tilefx.api.ops"}
_MODULES = set(SUBMODULES)  # names that are modules, not objects in them
_LAZY = {
    **SUBMODULES,
    **{n: "tilefx.api.annotations" for n in ("BeginBlock", "Block", "BlockFunction", "removeBlocks", "module_repr")},
    **{n: "tilefx.api.enums" for n in (
        "CommGroup", "CommGroupType", "DataLoaderMode", "HalfFloatCastingBehavior", "Liveness",
        "MatMulSerializationMode", "MeanReductionStrategy", "OutputMode", "ReductionType",
        "SyncPattern", "VariableRetrievalMode", "AutoStage", "ConnectionType", "SharingStrategy",
        "MultiConvPlanType", "OverlapMode", "AnchorMode")},
    **{n: "tilefx.api.data" for n in ("AsynchronousDataAccessor", "DataLoader")},
    **{n: "tilefx.api.executor" for n in ("PoplarExecutor", "compile", "inferenceModel",
                                          "trainingModel")},
    **{n: "tilefx.api.ops" for n in ("identity_loss", "ipu_print_tensor", "isRunningOnIpu", "nop",
                                     "serializedMatMul", "set_available_memory", "dynamic_slice",
                                     "dynamic_update", "for_loop", "recomputationCheckpoint",
                                     "ctc_beam_search_decoder", "MultiConv", "NameScope", "Attribute")},
    **{n: "tilefx.api.custom_ops" for n in ("custom_op", "register_custom_op")},
    **{n: "tilefx.api.custom_args" for n in ("ICustomArgParser", "registerCustomArgParser")},
    "load": "tilefx.api.loading",
    "ResumableTraining": "tilefx.api.checkpoint",
    "setLogLevel": "tilefx.runner.logs",
    **{n: "tilefx.api.compat" for n in ("ipuHardwareIsAvailable", "ipuHardwareVersion",
                                        "registerPreCompileHook", "registerPostCompileHook")},
    **{n: "tilefx.api.options" for n in ("Options", "TensorLocationSettings")},
    **{n: "tilefx.api.autocast" for n in ("autocast", "Policy")},
    "torch_compile_backend": "tilefx.api.dynamo",
    "plan": "tilefx.planner.search",
    **{n: "tilefx.api.strategies" for n in (
        "Stage", "Phase", "PipelinedExecution", "ShardedExecution", "SerialPhasedExecution",
        "ParallelPhasedExecution")},
}


def _dynamo_entry_point_installed() -> bool:
    """Whether the installed metadata names our `torch_dynamo_backends` entry
    point, through which torch.compile imports tilefx.api.dynamo on first use."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        eps = distribution("tilefx").entry_points
    except PackageNotFoundError:
        return False
    return any(ep.group == "torch_dynamo_backends" and ep.name == "tilefx" for ep in eps)
class _Aliases(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """`tilefx.<submodule>` for PopTorch's submodule names, and `poptorch` /
    `poptorch.<submodule>` as tilefx when no real poptorch is installed (this
    finder comes after the normal ones), so `from poptorch.options import
    Options` runs. The aliased name is bound to the real module object; its
    own `__spec__` is kept."""

    @staticmethod
    def _target(name: str) -> str | None:
        top, _, rest = name.partition(".")
        if top == "poptorch" and not rest:
            return "tilefx"
        if top not in ("poptorch", "tilefx"):
            return None
        if rest in SUBMODULES:
            return SUBMODULES[rest]
        return "tilefx." + rest if top == "poptorch" else None

    def find_spec(self, name, path=None, target=None):
        if self._target(name) is None:
            return None
        return importlib.util.spec_from_loader(name, self)

    def create_module(self, spec):
        real = importlib.import_module(self._target(spec.name))
        self._saved = real.__spec__
        return real

    def exec_module(self, module):
        module.__spec__ = self._saved  # importlib set the alias' spec: the module keeps its own


if not any(isinstance(f, _Aliases) for f in sys.meta_path):
    sys.meta_path.append(_Aliases())


def _with_torch() -> None:
    """What PopTorch adds to torch: `model.autocast()` on every module, and
    torch.compile(backend="tilefx") (importing torch._dynamo costs ~1 s, so only
    when it is loaded already or no entry point in pyproject.toml will
    register the backend lazily)."""
    importlib.import_module("tilefx.api.autocast")
    if "torch._dynamo" in sys.modules or not _dynamo_entry_point_installed():
        importlib.import_module("tilefx.api.dynamo")


class _AfterTorch(importlib.abc.MetaPathFinder):
    """torch imported after tilefx (the IR tools import tilefx without it):
    `_with_torch` runs once torch has loaded, as it would have had torch come
    first. The finder steps aside after that one import; torch's own loader
    does the loading."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torch")
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenWithTorch(spec.loader)
        return spec


class _ThenWithTorch(importlib.abc.Loader):
    """torch's loader, then `_with_torch`; anything else asked of it is its own."""

    def __init__(self, inner):
        self._inner = inner

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        _with_torch()

    def __getattr__(self, name):
        return getattr(self._inner, name)


if "torch" in sys.modules:  # torch already loaded, so this is cheap
    _with_torch()
elif not any(isinstance(f, _AfterTorch) for f in sys.meta_path):
    sys.meta_path.insert(0, _AfterTorch())


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tilefx' has no attribute {name!r}")
    with _gc_paused():  # the first use imports the compiler: xDSL, the dialects (gcpause.py)
        mod = importlib.import_module(module)
    value = mod if name in _MODULES else getattr(mod, name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = ["Error", "RecoverableError", "UnrecoverableError", *_LAZY]
