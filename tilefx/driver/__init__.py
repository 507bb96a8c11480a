"""The torch-free compiler core (docs/architecture.md): a
`CompileConfig` holds what a compilation reads, `compile(module, config)`
turns a frontend's graph IR into a `Program`. Imports no torch."""

from tilefx.driver.compiler import (auto_stage_pass, autocast_pass, available_memory_pass, build, build_update, check_ipu_count,
                                    compile, partials_type_pass, prepare, profile_of, run_graph_passes,
                                    schedule_of)
from tilefx.driver.config import DEFAULT_STRATEGY, CompileConfig, config_from_json, read_config
from tilefx.driver.program import Program, role_list

__all__ = ["CompileConfig", "DEFAULT_STRATEGY", "Program", "auto_stage_pass", "autocast_pass", "available_memory_pass", "build",
           "build_update", "check_ipu_count", "compile", "config_from_json", "partials_type_pass", "prepare",
           "profile_of", "read_config", "role_list", "run_graph_passes", "schedule_of"]
