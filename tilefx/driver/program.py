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
    traced: Any = None  # the frontend's TracedGraph (lowering/from_torch.py)
    import_module: Any = None  # the IR as the frontend made it (or its text, read from a file)
    update_args: list[tuple[str, Any]] = field(default_factory=list)
    update_results: list[tuple[str, Any]] = field(default_factory=list)
    input_shapes: list[tuple] = field(default_factory=list)  # micro-batch shapes
    input_dtypes: list[np.dtype] = field(default_factory=list)
    compile_seconds: float = 0.0

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
    def one_replica(self) -> bool:
        """Whether a surface's one-micro-batch call (`PoplarExecutor._run_one`)
        covers main's arguments and results (not loss scaling statistics,
        nor writes into the caller's inputs)."""
        return all(k in ("param", "buffer", "input", "const", "hyper", "accum") for k, _ in self.main_args) \
            and all(k in ("output", "buffer", "accum") for k, _ in self.main_results)

    @functools.cached_property
    def outputs_only(self) -> bool:
        """Whether every result of main is a model output (an inference
        program: no buffers nor accumulators to keep)."""
        return all(k == "output" for k, _ in self.main_results)

    @functools.cached_property
    def one_plain_output(self) -> bool:
        """Whether the model returns one tensor, as the IR holds it (not
        bfloat16): `_structured` hands it back as it is."""
        spec = self.traced.out_spec
        return len(self.out_index) == 1 and self.traced.num_outputs == 1 and \
            not self.traced.out_consts and not self.main.bf16_results and \
            (spec is None or spec.num_leaves == 1 and spec.is_leaf())

    @functools.cached_property
    def tuple_output(self) -> bool:
        """The model returns a plain tuple of tensors (an output and its loss),
        each an output result in order: `_structured` would rebuild it as is."""
        spec, n = self.traced.out_spec, self.traced.num_outputs
        return spec is not None and spec.type is tuple and spec.num_leaves == n and \
            all(spec.child(i).is_leaf() for i in range(spec.num_children)) and \
            not self.traced.out_consts and not self.main.bf16_results and self.out_ids == list(range(n))

    @functools.cached_property
    def lean_args(self) -> list[tuple[str, Any, bool]]:
        """main's arguments as `_run_one` fills them: (kind, key, whether it
        passes a tensor: main's `tensor_args`, read only by ATen's direct
        steps). Only for an inference program, whose results come back as
        they are (`tensors=True`): an argument returned as a result is then
        the very object passed, which `fresh_outputs` copies; converted to a
        new array it would pass for fresh and alias the input or the weight."""
        return [(kind, key, self.outputs_only and i in self.main.tensor_args)
                for i, (kind, key) in enumerate(self.main_args)]

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
