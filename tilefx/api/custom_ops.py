"""`poptorch.custom_op` with ops written in Python (PopTorch user guide, 4.9 "Creating custom ops").

PopTorch loads custom ops from C++ libraries built against PopART; tilefx
registers them from Python instead:

    def cube(x, bias):                       # numpy in, numpy out
        return x ** 3 + bias, x * 3

    def cube_grad(gx3, gx, x, bias):         # output gradients, then the inputs
        return 3 * x ** 2 * gx3 + 3 * gx, gx3.sum(...)

    tilefx.register_custom_op("Cube", "com.acme", 1, cube, grad=cube_grad)
    x, y = poptorch.custom_op([x, bias], "Cube", "com.acme", 1, example_outputs=[x, x])

The op is one `ipu.custom_op` in the IR, run by name from the registry; its
gradient is the op `<name>Grad` of the same domain. Attributes are checked
as PopTorch checks them and passed to the implementation as keywords.
"""

from __future__ import annotations

import json

import numpy as np
import torch

from tilefx.backend.kernels.custom import CustomOpDef, lookup, register, run
from tilefx.errors import Error, error_also
from tilefx.lowering.from_torch import np_dtype_of


def register_custom_op(name: str, domain: str, domain_version: int, forward, *, grad=None,
                       shape=None) -> None:
    """Register a custom op implemented in numpy.

    forward(*inputs, **attributes) -> array or list of arrays.
    grad(*output_grads, *inputs, **attributes) -> one gradient (or None) per input; optional:
        without it the op has no gradient (training through it is an error).
    shape(*input_specs, **attributes) -> [(shape, dtype), ...] per output, each input spec a
        (shape, dtype) pair; optional: without it the outputs take the types of
        `example_outputs`.
    """
    for what, v in (("name", name), ("domain", domain)):
        if not isinstance(v, str) or not v:
            raise Error(f"register_custom_op: {what} must be a non-empty string, got {v!r}")
    if not isinstance(domain_version, int) or isinstance(domain_version, bool):
        raise Error(f"register_custom_op: domain_version must be an int, got {domain_version!r}")
    for what, fn in (("forward", forward), ("grad", grad), ("shape", shape)):
        if fn is not None and not callable(fn):
            raise Error(f"register_custom_op: {what} must be callable, got {type(fn).__name__}")
    if forward is None:
        raise Error("register_custom_op: forward (the numpy implementation) is required")
    register(CustomOpDef(name, domain, domain_version, forward, shape, grad))


def _spec(t) -> tuple[list[int], str]:
    return list(t.shape), str(np_dtype_of(t.dtype))


@torch.library.custom_op("tilefx::custom_op", mutates_args=())
def _custom_op(inputs: list[torch.Tensor], name: str, domain: str, version: int, attributes: str,
               outputs: str) -> list[torch.Tensor]:
    outs = run([t.detach().numpy() for t in inputs], name, domain, version, json.loads(attributes))
    specs = json.loads(outputs)
    if len(outs) != len(specs):
        raise Error(f"custom_op {name}: the implementation returned {len(outs)} output(s), "
                    f"{len(specs)} expected")
    res = []
    for i, (o, (shape, dtype)) in enumerate(zip(outs, specs)):
        if list(o.shape) != shape:
            raise Error(f"custom_op {name}: output {i} has shape {list(o.shape)}, expected {shape}")
        res.append(torch.from_numpy(np.asarray(o.astype(dtype, copy=False), order="C")))  # 0-d stays 0-d
    return res


def _torch_dtype(name: str) -> torch.dtype:
    from tilefx.lowering.from_torch import _TORCH_TO_NP

    inverse: dict = {}
    for k, v in _TORCH_TO_NP.items():  # the first torch dtype of a numpy one: float32, not bfloat16
        inverse.setdefault(np.dtype(v), k)
    return inverse[np.dtype(name)]


@_custom_op.register_fake
def _(inputs, name, domain, version, attributes, outputs):
    return [torch.empty(shape, dtype=_torch_dtype(dt)) for shape, dt in json.loads(outputs)]


def _setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs[0])
    ctx.name, ctx.domain, ctx.version, ctx.attributes = inputs[1:5]
    ctx.out_specs = json.loads(inputs[5])


def _backward(ctx, grads):
    inputs = list(ctx.saved_tensors)
    if lookup(ctx.name, ctx.domain, ctx.version).grad is None:
        raise Error(f"custom_op {ctx.name} ({ctx.domain} v{ctx.version}) has no gradient: register "
                    "it with grad= to train through it")
    grads = [g if g is not None else torch.zeros(shape, dtype=_torch_dtype(dt))
             for g, (shape, dt) in zip(grads, ctx.out_specs)]
    specs = json.dumps([_spec(t) for t in inputs])
    g_in = _custom_op(grads + inputs, ctx.name + "Grad", ctx.domain, ctx.version, ctx.attributes, specs)
    return list(g_in), None, None, None, None, None


_custom_op.register_autograd(_backward, setup_context=_setup)


def _check_attributes(attributes) -> dict:
    if attributes is None:
        return {}
    if not isinstance(attributes, dict):
        raise error_also(ValueError)("custom_op: attributes must be a dict")
    for k, v in attributes.items():
        if not isinstance(k, str):
            raise error_also(ValueError)("All attribute keys must be strings.")
        if not isinstance(v, (float, int, str, list, tuple)) or isinstance(v, bool):
            raise error_also(ValueError)("Attribute values must be floats, ints, strings or a list/tuple of float, "
                             "ints of strings.")
        if isinstance(v, (list, tuple)):
            if not v:
                raise error_also(ValueError)(f"custom_op: attribute {k!r} is an empty list")
            if any(type(e) is not type(v[0]) for e in v) or not isinstance(v[0], (float, int, str)):
                raise error_also(ValueError)("The types in a list/tuple attribute must all be the same.")
        for s in [k, *(v if isinstance(v, (list, tuple)) else [v])]:
            if isinstance(s, str) and any(ord(ch) >= 128 for ch in s):
                raise error_also(ValueError)(f"{s} contains non-ASCII characters.")
    return {k: list(v) if isinstance(v, tuple) else v for k, v in attributes.items()}


def custom_op(inputs, name: str, domain: str, domain_version: int, example_outputs,
              attributes: dict | None = None) -> list[torch.Tensor]:
    """Apply the registered custom op (name, domain, domain_version) to
    `inputs`; `example_outputs` give the outputs' shapes and dtypes (unless
    the op registered a shape function). Returns a list of tensors."""
    if not isinstance(inputs, (list, tuple)) or not all(isinstance(t, torch.Tensor) for t in inputs):
        raise Error("custom_op: inputs must be a list or tuple of tensors")
    if not isinstance(example_outputs, (list, tuple)) or not all(
            isinstance(t, torch.Tensor) for t in example_outputs):
        raise Error("custom_op: example_outputs must be a list or tuple of tensors")
    attrs = _check_attributes(attributes)
    op = lookup(name, domain, domain_version)
    specs = [_spec(t) for t in example_outputs]
    if op.shape is not None:
        got = op.shape(*[(tuple(t.shape), np_dtype_of(t.dtype)) for t in inputs], **attrs)
        specs = [[list(s), str(np.dtype(d))] for s, d in got]
    return list(_custom_op(list(inputs), name, domain, int(domain_version), json.dumps(attrs),
                           json.dumps(specs)))
