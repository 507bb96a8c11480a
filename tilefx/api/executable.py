"""PopTorch's side of the executor's executable file (PopTorch user guide,
4.10 "Precompilation and caching"): `compileAndExport` and `save`, the
options as the file's `options.json` (api/export.py) and what the executor
reads of them when it loads one, the replica grouping of its weights. What
any executor writes into the file's parts and takes back from them is the
runner's (runner/executable.py), the format itself the driver's."""

from __future__ import annotations

import json

from tilefx.api import export
from tilefx.api.export import options_from_json, options_to_json
from tilefx.api.replica_grouping import groups_of, grouping_to_json, restore_grouping
from tilefx.errors import Error
from tilefx.runner.replica_groups import ReplicaGroups


class PopTorchFiles:
    """PoplarExecutor's methods that write executable files, and its side of the runner's."""

    def compileAndExport(self, filename: str, *args, export_model: bool = True, **kwargs) -> None:
        """Compile for these inputs and write the executable to `filename` (a
        file that never runs code when loaded: see tilefx/driver/executable.py)."""
        self._check_alive()
        export.check_export_args("compileAndExport", filename, export_model=export_model)
        if self._program is None:
            self.compile(*args, **kwargs)
        self._write_compiled("compileAndExport", filename, export_model, rng=False)

    def save(self, filename: str, export_model: bool = True, save_rng_state: bool = True) -> None:
        """Write the compiled model to `filename` (PopTorch's `save`): the
        executable file of compileAndExport, with the trained weights and
        optimizer state, and with `save_rng_state` the random generators' state
        so `poptorch.load` continues the random stream where it stopped. A
        model already compiled (by a call or compile()), written as it is now."""
        self._check_alive()
        export.check_export_args("save", filename, export_model=export_model, save_rng_state=save_rng_state)
        if self._program is None:
            raise Error("save: the model has not been compiled yet: call it or compile() it first "
                        "(compileAndExport compiles and saves in one step)")
        self._write_compiled("save", filename, export_model, rng=save_rng_state)

    def _write_compiled(self, what: str, filename, export_model: bool, rng: bool) -> None:
        if self._program.traced.cache_states is not None:
            raise Error(f"{what}: the call passes or the model returns transformers caches (a "
                        "`past_key_values` / `cache` object), whose Python objects the executable file does not "
                        "keep: pass use_cache=False (and no cache) to export the model")
        self._export_model, self._export_rng = export_model, rng
        try:
            self.write_executable(str(filename))
        finally:
            self._export_rng = False  # only this file: the executable cache never records a stream

    def _options_part(self) -> dict:
        return options_to_json(self._options)

    def _continues_rng_of(self, options: dict) -> bool:
        """Whether a file's random streams are this executor's to continue: it
        was written with the same random seed."""
        return self._options.random_seed == options_from_json(options).random_seed

    def _cache_identity(self) -> list[str]:
        """What the program depends on of the options (the cache's key)."""
        return [json.dumps(options_to_json(self._options), sort_keys=True)]

    def _install_grouping(self, data, named_p: dict, filename: str) -> ReplicaGroups:
        """The file's replica grouping of weights given to the model's parameters, and its groups."""
        restore_grouping(data, named_p, filename, self._config.replication_factor)
        return groups_of(self.model, self._config.replication_factor)

    def _grouping_json(self) -> dict:
        return grouping_to_json(self._groups)

    def _takes_signature(self) -> bool:
        """Whether the model is `poptorch.load`'s, which binds calls with the recorded forward's signature."""
        return isinstance(self.model, export.LoadedModel)
