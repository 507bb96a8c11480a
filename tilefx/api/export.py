"""The PopTorch side of the executable file (PopTorch user guide, 4.10
"Precompilation and caching"): the file format itself (its parts, the
manifest, reading and verifying) is the driver's (driver/executable.py);
here are the Options as its `options.json` and back, and the model
`poptorch.load` makes (the file's torch side, the inputs' torch dtypes, the
outputs' structure and the dtypes tensors are saved in, is the runner's:
runner/executable.py).

`compileAndExport` writes a file, `poptorch.load` makes an executor from
one (the model becomes a plain module holding the exported weights; its
Python code is not exported), `loadExecutable` gives an existing wrapper the
compiled program; what an executor puts into the parts and takes from them
is the executor's own (runner/executable.py, api/executable.py). The
executable cache (`Options.enableExecutableCaching`, `POPTORCH_CACHE_DIR`)
stores the same files under a key that covers the
tilefx version, the options, the optimizer, the inputs' shapes and dtypes,
the model's parameters and buffers and the source of every module class in
it (what the traced IR is made from); a hit skips tracing and the passes.
"""

from __future__ import annotations

import logging
import os

import numpy as np
import torch

from tilefx.api.executable_schema import HOST_OPTIONS, SKIP, check_popart_options, encode, option_value
from tilefx.errors import Error

log = logging.getLogger("tilefx.export")

# -- options as JSON -------------------------------------------------------------

_GROUPS = ("Precision", "Training", "Jit", "Distributed")


def option_items(group) -> dict:
    return {k: v for k, v in group.__dict__.items() if not k.startswith("_")}


def options_to_json(opts) -> dict:
    """The compile-time options as JSON (the host's settings, HOST_OPTIONS,
    stay on the host)."""
    out = {k: encode(v) for k, v in option_items(opts).items() if k not in HOST_OPTIONS}
    for g in _GROUPS:
        out[g] = {k: encode(v) for k, v in option_items(getattr(opts, g)).items()}
    out["_Popart"] = encode(dict(opts._Popart.options))
    return out


def options_from_json(data: dict):
    """A new Options with the stored values: only options a fresh Options has,
    each of its declared kind and within the bounds its setter enforces
    (objects compiled into the IR, such as the execution strategy, are not
    restored); a host setting (a path on this machine) in the file is an
    error, never applied."""
    from tilefx.api.options import Options

    opts = Options()

    def assign(target, values, where: str):
        if not isinstance(values, dict):
            raise Error(f"options.json: {where or 'the options'} must be an object")
        fresh = option_items(target)
        for k, raw in values.items():
            if k in _GROUPS or k == "_Popart":
                continue
            if k in HOST_OPTIONS:
                raise Error(f"options.json: {where}{k} is a setting of the loading host (a path or how it "
                            "reports), which is never taken from a file")
            if k not in fresh:
                raise Error(f"options.json: unknown option {where}{k}")
            v = option_value(k, raw, fresh[k], where)
            if v is SKIP:
                continue
            object.__setattr__(target, k, v)

    assign(opts, data, "")
    for g in _GROUPS:
        assign(getattr(opts, g), data.get(g, {}), g + ".")
    if opts.Distributed.process_id >= opts.Distributed.num_processes:
        raise Error("options.json: Distributed.process_id must be smaller than Distributed.num_processes")
    opts._Popart.options.update(check_popart_options(data.get("_Popart", {})))
    return opts


class LoadedModel(torch.nn.Module):
    """The model of an executor made by `poptorch.load`: the exported
    parameters and buffers under their names (the Python code of the
    original model is not in the file, so it cannot run on the CPU)."""

    def __init__(self, name: str, params: dict[str, np.ndarray], buffers: dict[str, np.ndarray]):
        super().__init__()
        self.exported_name = name
        for names, make in ((params, lambda v: torch.nn.Parameter(torch.from_numpy(v.copy()))),
                            (buffers, lambda v: torch.from_numpy(v.copy()))):
            for qual, value in names.items():
                *path, leaf = qual.split(".")
                mod = self
                for part in path:
                    if not hasattr(mod, part):
                        mod.add_module(part, torch.nn.Module())
                    mod = getattr(mod, part)
                if isinstance(make(value), torch.nn.Parameter):
                    mod.register_parameter(leaf, make(value))
                else:
                    mod.register_buffer(leaf, make(value))

    def forward(self, *args):
        raise Error(f"this {self.exported_name} was loaded from an executable file: run it through the "
                    "executor poptorch.load returned")

    def take_signature(self, sig) -> None:
        """Bind calls with the exported model's forward signature (a function
        of this instance: `call_spec.bind_call` reads its `__signature__`)."""
        def forward(*args, **kwargs):
            return LoadedModel.forward(self)

        forward.__signature__ = sig
        self.forward = forward


def check_export_args(what: str, filename, **flags) -> None:
    if not isinstance(filename, (str, os.PathLike)) or not str(filename):
        raise Error(f"{what}: filename must be a non-empty string, got {filename!r}")
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise Error(f"{what}: {name} must be a bool, got {value!r}")
