"""The module attributes the graph passes read from a `tilefx.Options`: the
execution strategy (with what `ipu-auto-stage` needs to cost it: the
machine, where the optimizer state and other tensors live) and the
available memory proportions. One home for the compile (api/executor.py)
and the planner (planner/search.py), which writes many options into copies
of one traced module."""

from __future__ import annotations

import torch
from xdsl.dialects.builtin import ModuleOp, StringAttr

from tilefx.backend.machine import machine
from tilefx.dialects.irutil import from_py
from tilefx.dialects.names import MEMORY_PROPORTION_KEY, PARTIALS_TYPE_KEY, STRATEGY_KEY


def set_module_options(module: ModuleOp, options) -> None:
    """Write `options`' strategy and memory proportions into `module`."""
    strategy = options.execution_strategy
    # no strategy set: PopTorch's default, pipelined, which Block(ipu_id=...) then
    # switches on without the user asking (ipu-assign-stages says so in its errors)
    config = strategy.to_config() if strategy is not None else \
        {"kind": "pipelined", "stages": [], "auto_stage": "same_as_ipu", "implicit": True}
    if "auto" in config:  # ipu-auto-stage costs the ops on this machine, the state where it lives
        config["auto"]["machine"] = machine(options.machine).name
        loc = options.TensorLocations.optimizer
        if loc is not None:
            where = loc.resolved()
            config["auto"].update({"state_on_chip": where.on_chip,
                                   "state_min_elements_off_chip": where.min_elements_off_chip,
                                   "state_min_elements_sharded": where.min_elements_sharded})
            if where.sharded:
                config["auto"]["state_shards"] = options.replication_factor * options.Distributed.numProcesses
        placed = options.TensorLocations.resolved().config()
        if placed:  # weights, activations, accumulators off chip or sharded
            config["auto"].update({"locations": placed,
                                   "replicas": options.replication_factor * options.Distributed.numProcesses})
    module.attributes[STRATEGY_KEY] = from_py(config)
    if options.available_memory_proportion:
        module.attributes[MEMORY_PROPORTION_KEY] = from_py(
            {k: float(v) for k, v in options.available_memory_proportion.items()})
    if options.Precision.partials_type == torch.float16:  # the matmul rate and partial memory
        module.attributes[PARTIALS_TYPE_KEY] = StringAttr("half")
