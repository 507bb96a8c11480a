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
        from tilefx.api.executor import PoplarExecutor

        if any(isinstance(x, torch.SymInt) or isinstance(x, torch.Tensor) and any(
                isinstance(d, torch.SymInt) for d in x.shape) for x in example_inputs):
            raise Error("the tilefx torch.compile backend compiles static shapes only: the IPU "
                        "program is built for one shape; use torch.compile(..., dynamic=False)")
        if any(isinstance(x, torch.Tensor) and x.dim() == 0 for x in example_inputs):
            raise Error("the tilefx torch.compile backend needs batched (>= 1-D) tensor inputs")
        ex = PoplarExecutor(gm, options, training=False)
        ex.compile(*example_inputs)
        self.last = ex

        def run(*args):
            needs_grad = any(p.requires_grad for p in gm.parameters()) or any(
                isinstance(a, torch.Tensor) and a.requires_grad for a in args)  # lifted parameters
            if torch.is_grad_enabled() and needs_grad:
                raise Error("the tilefx torch.compile backend runs inference only: call the model "
                            "under torch.no_grad(), or train with tilefx.trainingModel")
            out = ex(*args)
            return out if isinstance(out, (tuple, list)) else (out,)

        return run


torch_compile_backend = _Backend()


def register() -> None:
    """Make `backend="tilefx"` known to torch.compile."""
    from torch._dynamo.backends.registry import _BACKENDS, register_backend

    if "tilefx" not in _BACKENDS:
        register_backend(name="tilefx")(torch_compile_backend)


register()
