"""`poptorch.load(filename, edit_opts_fn=None)`: a PoplarExecutor made from
an executable file (api/export.py reads it, the executor installs it: api/executable.py), its model the
file's weights (`LoadedModel`), with the run-time options `edit_opts_fn`
may change."""

from __future__ import annotations

import json
import logging

from tilefx.api.enums import ConnectionType
from tilefx.api.executable_schema import HOST_OPTIONS, encode
from tilefx.api.executor import PoplarExecutor, without_optimizer
from tilefx.driver.archive import tensors_from
from tilefx.api.export import LoadedModel, option_items, options_from_json
from tilefx.runner.executable import read
from tilefx.errors import Error

log = logging.getLogger("tilefx.export")


# The options `poptorch.load`'s edit_opts_fn may change (PopTorch user guide, 4.10.2 "Precompilation": "When
# loading a precompiled model, only run-time options will be applied; all others
# will be ignored"): which device to attach to and when, the random seed, the
# host's logging. Everything else (batching, strategy, precision, ...) is
# compiled into the executable's program.
RUNTIME_OPTIONS = ("ipu_id", "use_ipu_model", "offline_ipu_target", "ipu_version", "connection_type",
                   "random_seed", *sorted(HOST_OPTIONS), "Distributed.timeout_seconds")
_EDITABLE_GROUPS = ("Precision", "Training", "TensorLocations", "Jit", "Distributed")


def _flat_options(opts) -> dict[str, tuple[object, str]]:
    """"group.name" (or "name") -> (the object holding it, its value as JSON text)."""
    out = {}
    for prefix, holder in (("", opts), *((g + ".", getattr(opts, g)) for g in _EDITABLE_GROUPS)):
        for k, v in option_items(holder).items():
            if k not in _EDITABLE_GROUPS:
                out[prefix + k] = (holder, json.dumps(encode(v), sort_keys=True, default=repr))
    out["_Popart"] = (opts._Popart, json.dumps(encode(dict(opts._Popart.options)), sort_keys=True,
                                              default=repr))
    return out


def _apply_runtime_edits(opts, edit_opts_fn, filename: str):
    """`opts` with the run-time options edit_opts_fn changes (on a copy); the
    compile-time ones it changes are ignored, with a warning naming them."""
    edited = opts.clone()
    edit_opts_fn(edited)
    before, after = _flat_options(opts), _flat_options(edited)
    ignored = []
    for key, (holder, value) in after.items():
        if before.get(key, (None, None))[1] == value:
            continue
        if key in RUNTIME_OPTIONS:
            name = key.rpartition(".")[2]
            object.__setattr__(before[key][0], name, getattr(holder, name))
        else:
            ignored.append(key)
    if ignored:
        log.warning("poptorch.load(%s): edit_opts_fn changed compile-time options, which are ignored: "
                    "%s (the executable was compiled with the file's values; only run-time options "
                    "apply: %s)", filename, ", ".join(sorted(ignored)), ", ".join(RUNTIME_OPTIONS))
    return opts


def load(filename: str, edit_opts_fn=None):
    """`poptorch.load(filename, edit_opts_fn=None)`: an executor ready to run."""
    if edit_opts_fn is not None and not callable(edit_opts_fn):
        raise Error(f"load: edit_opts_fn must be callable, got {type(edit_opts_fn).__name__}")
    parts = read(filename)
    meta = parts["executor"]
    if not meta.get("exported_model", True):
        raise Error(f"{filename} was exported with export_model=False: wrap the model yourself and call "
                    "loadExecutable(filename)")
    tensors = tensors_from(parts["weights.safetensors"], "weights.safetensors")
    missing = [k for k in [f"param/{n}" for n in meta["params"]] + [f"buffer/{n}" for n in meta["buffers"]]
               if k not in tensors]
    if missing:
        raise Error(f"{filename}: weights.safetensors lacks the weights {', '.join(missing[:5])}")
    model = LoadedModel(str(meta.get("model", "model")),
                        {n: tensors[f"param/{n}"] for n in meta["params"]},
                        {n: tensors[f"buffer/{n}"] for n in meta["buffers"]})
    opts = options_from_json(parts["options"])
    if opts.offline_ipu_target:
        # the offline target is where the file was compiled (PopTorch user guide, 4.10.2 "Precompilation":
        # "compile
        # your model on a machine which doesn't have an IPU ... then reload and execute
        # it on a different machine"); the loading machine attaches as usual.
        # edit_opts_fn still sees the options and may choose otherwise.
        opts.offline_ipu_target = False
        if opts.connection_type == ConnectionType.Never:
            opts.connection_type = ConnectionType.Always
    seed = opts.random_seed
    if edit_opts_fn is not None:
        opts = _apply_runtime_edits(opts, edit_opts_fn, filename)
    training = bool(meta.get("training"))
    ex = PoplarExecutor(model, opts, training=training)
    without_optimizer(ex)  # the compiled optimizer configuration is in the IR (setOptimizer replaces it)
    # (a seed edit_opts_fn sets starts its own streams)
    ex.install_executable(parts, filename, weights_from_file=True, restore_rng=opts.random_seed == seed)
    return ex
