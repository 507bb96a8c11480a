"""`executor.generate(...)`: Hugging Face generation with a wrapped model.

An executor runs the one program it compiled, for one call signature (as in
PopTorch, a call with other shapes is an error, not a recompile). `generate()` calls the
model once per new token with changing inputs: the prompt, then one token at a
time with a key/value cache. So the executor's `generate` runs transformers'
own loop (the model's `generate`, with every argument it takes) on a view of
the model whose calls go to inference programs made with the executor's
options, one per call signature (shapes, structure and non-tensor values),
kept on the executor for later calls. An encoder-decoder's encoder, which
generate() runs once through `get_encoder()`, runs the same way.

Unless the call or the model's generation config chooses a cache, the loop
uses transformers' static cache (`cache_implementation="static"`, for models
transformers can compile whole): its tensors have the generation's full
length from the start, so the prompt is one program and every later step
another; with transformers' usual growing `DynamicCache`
(`cache_implementation="dynamic"`) each step has new shapes and compiles a
program of its own.
Either way the caches are read and written as in eager (call_spec.restore_caches).
"""

from __future__ import annotations

import logging

import torch

from tilefx.lowering.call_spec import bind_call

_log = logging.getLogger("tilefx")

# what chooses a cache already: generate()'s arguments, under their old and new names
_CACHE_ARGUMENTS = ("past_key_values", "cache", "cache_implementation")


class _StepPrograms:
    """Runs a call of `module` on the program compiled for its signature
    (`make_program(module)`: an inference executor of it, under the
    generating executor's options)."""

    def __init__(self, module, make_program):
        self.module = module
        self.make_program = make_program
        self.programs: dict = {}

    def __call__(self, *args, **kwargs):
        model = self.module
        call, inputs = bind_call(model.forward, args, kwargs)
        key = (call.spec, tuple(_hashable(v) for v in call.leaves),
               tuple((tuple(x.shape), x.dtype) for x in inputs))
        program = self.programs.get(key)
        if program is None:
            _log.info("generate(): compiling %s for a new call signature (%d so far)", type(model).__name__,
                      len(self.programs) + 1)
            program = self.programs[key] = self.make_program(model)
        return program(*args, **kwargs)


def _hashable(v):
    try:
        hash(v)
    except TypeError:
        return repr(v)
    return v


def generate(executor, make_program, one_batch: bool, *args, **kwargs):
    """The wrapped model's `generate(*args, **kwargs)`, each model call on the
    simulated IPU (see the module docstring): on `make_program(module)`, an
    inference executor of the module called. `one_batch`: a call of the
    executor runs one micro-batch on one replica (no batching of its
    inputs), so the static cache can be chosen."""
    model = executor.model
    config = kwargs.get("generation_config") or getattr(model, "generation_config", None)
    # the static cache's own tensors (one per layer, batch 1 in places) are inputs
    # of the step program, which PopTorch's batching would split: only without it
    if not any(k in kwargs for k in _CACHE_ARGUMENTS) and kwargs.get("use_cache", True) is not False \
            and getattr(config, "cache_implementation", None) is None \
            and getattr(model, "_can_compile_fullgraph", False) and one_batch:
        kwargs["cache_implementation"] = "static"  # two programs instead of one per new token
    steps = executor.__dict__.get("_generate_steps")
    if steps is None:
        steps = executor._generate_steps = {}
    # the programs kept from an earlier generate() take the host's weights as they
    # are now, as the executor's own program does after load_state_dict or
    # copyWeightsToDevice: they are the executor's, not programs the user can sync
    for programs in steps.values():
        for program in programs.programs.values():
            if program.isCompiled():
                program.copyWeightsToDevice()
    return type(model).generate(_view(model, steps, make_program), *args, **kwargs)


def _view(module, steps: dict, make_program):
    """`module` as generate() sees it: its own state (a shallow copy, as the
    executor is) and methods, but calling it runs its programs, and so does
    calling the encoder it hands out (an encoder-decoder's generate() runs
    the encoder once, through `get_encoder()`)."""
    programs = steps.get(id(module))
    if programs is None or programs.module is not module:
        programs = steps[id(module)] = _StepPrograms(module, make_program)
    mcls = type(module)
    cls = type(mcls.__name__, (_Calls, mcls), {"__module__": mcls.__module__,
                                                "__qualname__": mcls.__qualname__})
    view = object.__new__(cls)
    view.__dict__.update({k: v for k, v in module.__dict__.items() if not k.startswith("_tilefx")})
    view.__dict__["_tilefx_steps"] = (programs, steps, make_program)
    return view


class _Calls:
    def __call__(self, *args, **kwargs):
        return self.__dict__["_tilefx_steps"][0](*args, **kwargs)

    def get_encoder(self, *args, **kwargs):
        encoder = super().get_encoder(*args, **kwargs)
        _, steps, make_program = self.__dict__["_tilefx_steps"]
        return _view(encoder, steps, make_program) if isinstance(encoder, torch.nn.Module) else encoder
