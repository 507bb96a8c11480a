"""`torch.compile(model, backend="tilefx")`: inference on the simulated IPU.

Dynamo hands over each captured graph as a GraphModule; tilefx compiles it
like an `inferenceModel` (the graph IR, passes, numpy executor and machine
model), so `compiled.profile` style information is on `backend.last`. The
backend computes no gradients: with grad enabled and parameters that need
them it raises instead of silently returning outputs that cannot train.
"""

from __future__ import annotations

import torch

from torch._dynamo.exc import ShortenTraceback

from tilefx.errors import Error


class BackendError(Error, ShortenTraceback):
    """A tilefx error raised while torch.compile builds the program: a
    poptorch.Error that dynamo lets through as is (it wraps other exceptions
    in BackendCompilerFailed)."""

    def __init__(self, message: str):
        ShortenTraceback.__init__(self, message, first_useful_frame=None)
        self.message, self.type, self.location = message, "torch.compile", ""


class _Backend:
    def __init__(self):
        self.last = None  # the PoplarExecutor of the most recent graph

    def __call__(self, gm: torch.fx.GraphModule, example_inputs, options=None):
        try:
            return self._compile(gm, example_inputs, options)
        except Error as e:
            raise BackendError(str(e)) from e

    def _compile(self, gm: torch.fx.GraphModule, example_inputs, options=None):
        symbolic = any(isinstance(x, torch.SymInt) or isinstance(x, torch.Tensor) and any(
            isinstance(d, torch.SymInt) for d in x.shape) for x in example_inputs)
        # an IPU program has one shape: a graph dynamo made dynamic (dynamic=True, or
        # its automatic dynamic shapes after a recompile) gets one program per shape
        # met at run time, as PopTorch recompiles for new input shapes
        programs: dict[tuple, object] = {}
        if not symbolic:
            programs[_shape_key(example_inputs)] = self._program(gm, example_inputs, options)

        def run(*args):
            needs_grad = any(p.requires_grad for p in gm.parameters()) or any(
                isinstance(a, torch.Tensor) and a.requires_grad for a in args)  # lifted parameters
            if torch.is_grad_enabled() and needs_grad:
                raise BackendError("the tilefx torch.compile backend runs inference only: call the model "
                                   "under torch.no_grad(), or train with tilefx.trainingModel")
            key = _shape_key(args)
            if key not in programs:
                try:
                    programs[key] = self._program(gm, args, options)
                except Error as e:
                    raise BackendError(str(e)) from e
            out = programs[key](*args)
            return out if isinstance(out, (tuple, list)) else (out,)

        return run

    def _program(self, gm: torch.fx.GraphModule, inputs, options):
        from tilefx.api.executor import PoplarExecutor

        if any(isinstance(x, torch.Tensor) and x.dim() == 0 for x in inputs):
            raise Error("the tilefx torch.compile backend needs batched (>= 1-D) tensor inputs (with "
                        "dynamic=True dynamo passes float attributes such as eps as 0-d tensors: "
                        "leave dynamic unset, shapes still change freely)")
        ex = PoplarExecutor(gm, options, training=False)
        ex.compile(*inputs)
        self.last = ex
        return ex


def _shape_key(args) -> tuple:
    """What a program is specialised on: tensor shapes and types, other values."""
    return tuple((tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else ("value", a) for a in args)


torch_compile_backend = _Backend()


def register() -> None:
    """Make `backend="tilefx"` known to torch.compile."""
    from torch._dynamo.backends.registry import _BACKENDS, register_backend

    if "tilefx" not in _BACKENDS:
        register_backend(name="tilefx")(torch_compile_backend)


register()
