"""Anchored tensors: `Options.anchorTensor(short_name, long_name, output_mode,
output_return_period)` and `PoplarExecutor.getAnchoredTensor(short_name)`.

PopTorch names a tensor of the program by its PopART id; the ones users
anchor to debug training are a weight's gradient (`Gradient___<name>`), its
value after the update (`UpdatedVar___<name>`) and its value during the step
(`<name>`), with `<name>` a parameter's name in the model (older PopTorch
releases prefix it with the wrapper's `model.`, which is accepted too).
Gradients are one per micro-batch: the trace returns them after the model's
outputs (lowering/tracing_state.GradientOutputs, as for PopART's gradient
anchors) and the executor sets them aside here after each call, with
PopART's anchor layout: [deviceIterations, gradientAccumulation, replicas]
leading dimensions for All ([deviceIterations / N, ...] for EveryN,
[replicas] for Final and Sum), those of size 1 left out. Values and updated
values are taken once per device iteration (each replica's) and laid out
the same way.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from tilefx.api.compile_config import OUTPUT_MODE_NAMES
from tilefx.api.enums import OutputMode
from tilefx.errors import Error
from tilefx.runner.outputs import output_items, stacked
from tilefx.lowering.tensor_ids import GRADIENT_PREFIX, UPDATED_PREFIX

FINAL_LOSS_SCALE = "finalLossScale"  # PopART's anchor of the loss scale a training step used
WRAPPER = "model."  # the attribute older PopTorch wrapped the user's model in


class Anchors:
    """The anchors of one executor and what the last call left in them."""

    def __init__(self, anchored: dict[str, dict[str, Any]], params: list[str], trained: set[str],
                 training: bool, default_mode: OutputMode, device_iterations: int = 1):
        # short -> (kind, param, mode as the runner names it, N)
        self.entries: dict[str, tuple[str, str, str, int]] = {}
        self.gradients: list[str] = []  # the parameters whose gradient main returns, in order
        self.memory: dict[str, torch.Tensor] = {}
        for short, spec in anchored.items():
            long_name = spec["long_name"]
            if long_name == FINAL_LOSS_SCALE:
                if not training:
                    raise Error(f"anchorTensor({short!r}, {long_name!r}): an inference model has no "
                                "loss scale")
                self.entries[short] = ("loss_scale", "", "final", 1)
                continue
            kind, name = ("gradient", long_name[len(GRADIENT_PREFIX):]) \
                if long_name.startswith(GRADIENT_PREFIX) else \
                ("updated", long_name[len(UPDATED_PREFIX):]) if long_name.startswith(UPDATED_PREFIX) \
                else ("value", long_name)
            if name not in params and name.startswith(WRAPPER) and name[len(WRAPPER):] in params:
                name = name[len(WRAPPER):]
            if name not in params:
                shown = ", ".join(params[:8]) + (", ..." if len(params) > 8 else "")
                raise Error(f"anchorTensor({short!r}, {long_name!r}): tilefx anchors a parameter "
                            f"(its name), its gradient ({GRADIENT_PREFIX}<name>) or its updated value "
                            f"({UPDATED_PREFIX}<name>); {name!r} is not a parameter of the model "
                            f"({shown or 'it has none'})")
            if kind != "value" and not training:
                raise Error(f"anchorTensor({short!r}, {long_name!r}): an inference model computes no "
                            "gradients nor updates")
            if kind != "value" and name not in trained:
                raise Error(f"anchorTensor({short!r}, {long_name!r}): {name!r} is not trained (frozen, "
                            "or not given to the optimizer): it has no gradient")
            mode = spec.get("output_mode") or OutputMode.Default
            if mode == OutputMode.Default:
                mode = default_mode
            period = int(spec.get("output_return_period") or 1)
            if mode == OutputMode.EveryN and (period < 1 or device_iterations % period):
                raise Error(f"anchorTensor({short!r}, {long_name!r}): OutputMode.EveryN({period}) needs a "
                            f"period that divides deviceIterations ({device_iterations})")
            self.entries[short] = (kind, name, OUTPUT_MODE_NAMES[mode], period)
            if kind == "gradient" and name not in self.gradients:
                self.gradients.append(name)

    @classmethod
    def of(cls, options, model, training: bool, untrained: list) -> Anchors | None:
        """The anchors `options` name for `model` compiled for training or
        inference; `untrained`: the parameters its optimizer does not list."""
        anchored = options.anchored_tensors
        if not anchored:
            return None
        params = [n for n, _ in model.named_parameters()]
        outside = {id(p) for p in untrained}
        trained = {n for n, p in model.named_parameters() if p.requires_grad and id(p) not in outside}
        mode = options.output_mode
        if mode == OutputMode.Default:
            mode = OutputMode.Final if training else OutputMode.All
        return cls(anchored, params, trained, training, mode, options.device_iterations)

    def gradient_modes(self, index: int) -> list[tuple[str, str, int]]:
        """Each anchor of the `index`-th returned gradient: (short name,
        output mode, period); one gradient may be anchored under several."""
        name = self.gradients[index]
        return [(short, m, n) for short, (kind, p, m, n) in self.entries.items()
                if kind == "gradient" and p == name]

    def set_gradients(self, values: list[torch.Tensor]) -> None:
        """The gradients main returned in this call, collected per their modes."""
        got = dict(zip(self.gradients, values))
        for short, (kind, name, _, _) in self.entries.items():
            if kind == "gradient":
                self.memory[short] = got[name]

    def set_weights(self, kind: str, weights: dict[str, np.ndarray], host, model) -> None:
        """A call of one micro-batch on one replica (one device iteration):
        the weights' values as it starts ("value") or after its weight update
        ("updated"), in the parameter's dtype (numpy holds bfloat16 as float32)."""
        for short, (k, name, _, _) in self.entries.items():
            if k == kind:
                self.memory[short] = _as_param(torch.from_numpy(np.array(host(name, weights[name]))),
                                               model, name)

    def set_loss_scale(self, scale: float) -> None:
        """The loss scale a weight update used (the last one of the call is
        kept: PopTorch returns finalLossScale as OutputMode.Final)."""
        for short, (kind, _, _, _) in self.entries.items():
            if kind == "loss_scale":
                self.memory[short] = torch.tensor(scale, dtype=torch.float32)

    def weight_kinds(self) -> set[str]:
        """The kinds of weight anchors ("value", "updated") a call takes."""
        return {kind for kind, _, _, _ in self.entries.values() if kind not in ("gradient", "loss_scale")}

    def take_weights(self, kind: str, read, replicas: int) -> dict[str, list[np.ndarray]]:
        """One device iteration's values of the weights anchored as `kind`,
        each replica's (`read(name, replica)`; a replica-grouped weight's is
        its group's), copied: the update may write the arrays in place."""
        names = {name for k, name, _, _ in self.entries.values() if k == kind}
        return {n: [np.array(read(n, r)) for r in range(replicas)] for n in names}

    def set_weights_per_iteration(self, kind: str, taken: list[dict[str, list[np.ndarray]]],
                                  G: int, R: int, model) -> None:
        """The weights anchored as `kind` from `taken` (take_weights, one per
        device iteration) in each anchor's mode and PopART's layout, as the
        gradients are: a value is the one every micro-batch of its iteration
        reads, an updated value the one after that iteration's update, so it
        repeats over the gradientAccumulation dimension."""
        D = len(taken)
        for short, (k, name, mode, period) in self.entries.items():
            if k == kind:
                per = [[[[taken[d][name][r]] for r in range(R)] for _ in range(G)] for d in range(D)]
                items, dims = output_items(per, 0, mode, period, D, G, R)
                self.memory[short] = _as_param(torch.from_numpy(stacked(items, dims)), model, name)

    def get(self, short_name: str) -> torch.Tensor:
        if short_name not in self.entries:
            raise Error(f"getAnchoredTensor: no tensor is anchored as {short_name!r} "
                        f"(Options.anchorTensor(short_name, long_name)); anchored: "
                        f"{', '.join(self.entries) or 'none'}")
        if short_name not in self.memory:
            raise Error(f"getAnchoredTensor({short_name!r}): the model has not run yet")
        return self.memory[short_name]


def _as_param(t: torch.Tensor, model, name: str) -> torch.Tensor:
    dtype = model.get_parameter(name).dtype
    return t if t.dtype == dtype else t.to(dtype)
