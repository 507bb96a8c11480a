"""What one compilation produced (`tilefx.driver.compile`): the IR at each
level, the compiled @main and @update, how their arguments and results bind
to weights, inputs, buffers, accumulators and outputs, and the machine
model's schedule and profile. The frontend's record of the trace
(`traced`: parameters, buffers, the outputs' structure) is the surface's,
opaque here."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from tilefx.backend.executor import CompiledFunction
from tilefx.backend.profile import Profile
from tilefx.backend.schedule import Schedule
from tilefx.driver.config import CompileConfig
from tilefx.errors import Error


@dataclass
class Program:
    """What one compilation produced: IR at each level and compiled functions."""

    module: ModuleOp
    main: CompiledFunction
    update: CompiledFunction | None
    main_args: list[tuple[str, Any]]
    main_results: list[tuple[str, Any]]
    schedule: Schedule | None = None
    profile: Profile | None = None
    config: CompileConfig | None = None  # what it was compiled with
    traced: Any = None  # the frontend's TracedGraph (lowering/from_torch.py)
    import_module: Any = None  # the IR as the frontend made it (or its text, read from a file)
    update_args: list[tuple[str, Any]] = field(default_factory=list)
    update_results: list[tuple[str, Any]] = field(default_factory=list)
    input_shapes: list[tuple] = field(default_factory=list)  # micro-batch shapes
    input_dtypes: list[np.dtype] = field(default_factory=list)
    compile_seconds: float = 0.0
    # what the surface's calls read of this program, worked out once (opaque here)
    call_plan: Any = field(default=None, init=False, repr=False, compare=False)

    @functools.cached_property
    def main_donatable(self) -> list[int]:
        """main's argument positions an executor may give up (held_alone)."""
        return [i for i, (kind, _) in enumerate(self.main_args) if kind == "accum"]

    @functools.cached_property
    def update_donatable(self) -> list[int]:
        """update's argument positions an executor may give up (held_alone)."""
        return [i for i, (kind, _) in enumerate(self.update_args) if kind in ("param", "state")]

    @functools.cached_property
    def trained(self) -> list[str]:
        """The weights whose gradients main accumulates."""
        return [n for k, n in self.main_args if k == "accum"]

    @functools.cached_property
    def out_index(self) -> list[int]:
        """Positions of main's results that are the model's outputs."""
        return [i for i, (k, _) in enumerate(self.main_results) if k == "output"]

    @functools.cached_property
    def outputs_only(self) -> bool:
        """Whether every result of main is a model output (an inference
        program: no buffers nor accumulators to keep)."""
        return all(k == "output" for k, _ in self.main_results)

    @functools.cached_property
    def out_ids(self) -> list[int]:
        """The model output index of each of those."""
        return [self.main_results[i][1] for i in self.out_index]


def role_list(roles: list[dict]) -> list[tuple[str, Any]]:
    out = []
    for r in roles:
        for key in ("param", "buffer", "input", "const", "accum", "output", "grad", "state", "hyper",
                    "als_upper", "mutated_input"):
            if key in r:
                out.append((key, r[key]))
                break
        else:
            if r.get("step"):
                out.append(("step", None))
            else:
                raise Error(f"function argument/result without a tilefx role: {r}")
    return out
