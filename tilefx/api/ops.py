"""PopTorch helper ops (`poptorch.identity_loss`, `serializedMatMul`, ...).

Each is a `torch.library.custom_op` in the `tilefx` namespace (those the
frontends place too in lowering/ipu_torch_ops.py) with a fake and an
autograd implementation, so it stays one node through tracing and
decomposition and the frontend turns it into the matching `ipu.*` op. On
the CPU (outside tracing) they compute what the IPU would.
"""

from __future__ import annotations

import torch

from tilefx.api.enums import MatMulSerializationMode
from tilefx.dialects.ipu import PRINT_FLOAT_FORMATS, is_proportion
from tilefx.dialects.names import ATTRIBUTES_META_KEY, MULTICONV_META_KEY
from tilefx.errors import Error, error_also
from tilefx.lowering.ipu_torch_ops import identity_loss as _identity_loss
from tilefx.lowering.ipu_torch_ops import nop as _nop
from tilefx.lowering.ipu_torch_ops import print_tensor as _print_tensor
from tilefx.lowering.ipu_torch_ops import serialized_matmul as _serialized_matmul
from tilefx.lowering.ipu_torch_ops import set_available_memory as _set_available_memory
from tilefx.lowering.recompute_op import recomputation_checkpoint as _recomputation_checkpoint
from tilefx.lowering.tracing_state import ModuleScope, Tracing

_REDUCTIONS = ("sum", "mean", "none")


def identity_loss(x: torch.Tensor, reduction: str = "none") -> torch.Tensor:
    """Mark `x` as the loss; backward sends ones through it (PopTorch user guide, 4.6.3
    "poptorch.identity_loss")."""
    if reduction not in _REDUCTIONS:
        raise Error(f"identity_loss: reduction must be one of {_REDUCTIONS}, got {reduction!r}")
    return _identity_loss(x, reduction)


def nop(x: torch.Tensor) -> torch.Tensor:
    """An identity the compiler keeps, for debugging (PopTorch user guide, 4.6.5 "poptorch.nop")."""
    if not isinstance(x, torch.Tensor):
        raise Error(f"nop: expected a tensor, got {type(x).__name__}")
    return _nop(x, "")


def ipu_print_tensor(tensor: torch.Tensor, title: str = "", print_gradient: bool = True,
                     summarise_threshold: int = 1000, edge_items: int = 3, max_line_width: int = 80,
                     digits: int = 4, float_format: str = "auto", separator: str = ", ",
                     open_bracket: str = "(", close_bracket: str = ")") -> torch.Tensor:
    """Print `tensor` when the program runs, and its gradient in the backward
    pass when `print_gradient`; use the result (PopTorch user guide, 4.6.2 "poptorch.ipu_print_tensor").
    Without a
    `title` the print is titled with the tensor's id, as PopART's. The other
    arguments format the print as PopTorch's do: summarised beyond
    `summarise_threshold` elements to `edge_items` per edge, lines of at most
    `max_line_width`, `digits` digits in the `float_format` ("auto",
    "fixed", "scientific" or "none"), and the separator and brackets."""
    if not isinstance(tensor, torch.Tensor):
        raise Error(f"ipu_print_tensor: expected a tensor, got {type(tensor).__name__}")
    ints = {"summarise_threshold": summarise_threshold, "edge_items": edge_items,
            "max_line_width": max_line_width, "digits": digits}
    for name, v in ints.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise Error(f"ipu_print_tensor: {name} must be a non-negative int, got {v!r}")
    if float_format not in PRINT_FLOAT_FORMATS:
        raise Error(f"ipu_print_tensor: float_format must be one of {', '.join(PRINT_FLOAT_FORMATS)}, "
                    f"got {float_format!r}")
    for name, v in (("title", title), ("separator", separator), ("open_bracket", open_bracket),
                    ("close_bracket", close_bracket)):
        if not isinstance(v, str):
            raise Error(f"ipu_print_tensor: {name} must be a string, got {v!r}")
    return _print_tensor(tensor, title, bool(print_gradient), summarise_threshold, edge_items,
                         max_line_width, digits, float_format, separator, open_bracket, close_bracket)


def set_available_memory(x: torch.Tensor, available_memory_proportion: float) -> torch.Tensor:
    """Bound the temporary memory of the op that produced `x` (PopTorch user guide, 4.6.9
    "poptorch.set_available_memory")."""
    p = float(available_memory_proportion)
    if not is_proportion(p):
        raise error_also(ValueError)(f"set_available_memory: proportion must be in (0, 1], got {p}")
    return _set_available_memory(x, p)


_SERIAL_MODE_NAMES = {
    MatMulSerializationMode.InputChannels: "input_channels",
    MatMulSerializationMode.ReducingDim: "reducing_dim",
    MatMulSerializationMode.OutputChannels: "output_channels",
}


def serializedMatMul(lhs, rhs, mode, factor=0, keep_precision=False):
    """A matmul split into `factor` serial pieces to save memory (PopTorch user guide, 4.6.8
    "poptorch.serializedMatMul")."""
    if mode != MatMulSerializationMode.Disabled and mode not in _SERIAL_MODE_NAMES:
        raise Error(f"serializedMatMul: unknown mode {mode!r} (a poptorch.MatMulSerializationMode)")
    if isinstance(factor, bool) or not isinstance(factor, int) or factor < 0:
        raise Error(f"serializedMatMul: factor must be a non-negative int, got {factor!r}")
    if mode == MatMulSerializationMode.Disabled or factor in (0, 1):
        return torch.matmul(lhs, rhs)
    if rhs.dim() != 2:
        raise Error(f"serializedMatMul: rhs must be 2-D, got shape {tuple(rhs.shape)}")
    name = _SERIAL_MODE_NAMES[mode]
    dim = {"input_channels": lhs.shape[-2], "reducing_dim": lhs.shape[-1],
           "output_channels": rhs.shape[-1]}[name]
    if dim % factor:
        raise Error(f"serializedMatMul: factor {factor} does not divide the {name} dimension {dim}")
    return _serialized_matmul(lhs, rhs, name, int(factor), bool(keep_precision))


def isRunningOnIpu() -> bool:
    """True while tilefx traces the model for the (simulated) IPU."""
    return Tracing.on


# -- dynamic slices (PopTorch user guide, 4.6.6 and 4.6.7) ---------------------

def _check_start(op: str, x: torch.Tensor, start: torch.Tensor, dim: int, span: int) -> int:
    s = int(start.reshape(-1)[0])
    if s < 0 or s + span > x.shape[dim]:
        raise Error(f"{op}: start index {s} is out of range: {span} element(s) from it do not fit in "
                    f"dimension {dim} of size {x.shape[dim]}")
    return s


def sliced_length(size: int, step: int) -> int:
    """The elements of `x[start:start + size:step]` along the sliced dimension."""
    return -(-size // step)


@torch.library.custom_op("tilefx::dynamic_slice", mutates_args=())
def _dynamic_slice(x: torch.Tensor, start: torch.Tensor, dim: int, size: int, step: int) -> torch.Tensor:
    s = _check_start("dynamic_slice", x, start, dim, size)
    return x.index_select(dim, torch.arange(s, s + size, step))


@_dynamic_slice.register_fake
def _(x, start, dim, size, step):
    shape = list(x.shape)
    shape[dim] = sliced_length(size, step)
    return x.new_empty(shape)


@torch.library.custom_op("tilefx::dynamic_update", mutates_args=())
def _dynamic_update(x: torch.Tensor, src: torch.Tensor, start: torch.Tensor, dim: int,
                    size: int) -> torch.Tensor:
    s = _check_start("dynamic_update", x, start, dim, size)
    out = x.clone()
    out.narrow(dim, s, size).copy_(src)
    return out


@_dynamic_update.register_fake
def _(x, src, start, dim, size):
    return torch.empty_like(x)


def _dyn_slice_setup(ctx, inputs, output):
    x, start, dim, size, step = inputs
    ctx.save_for_backward(start)
    ctx.shape, ctx.dim, ctx.size, ctx.step = x.shape, dim, size, step


def _dyn_slice_backward(ctx, grad):
    """The gradient lands where the slice came from: zeros elsewhere (a
    dynamic_update of zeros), every step-th element of the span."""
    (start,) = ctx.saved_tensors
    dim, step = ctx.dim, ctx.step
    span = ctx.size
    if step > 1:  # interleave step-1 zeros after each element, then cut to the span
        parts = [grad] + [torch.zeros_like(grad)] * (step - 1)
        grad = torch.stack(parts, dim + 1).flatten(dim, dim + 1).narrow(dim, 0, span)
    return _dynamic_update(grad.new_zeros(ctx.shape), grad, start, dim, span), None, None, None, None


def _dyn_update_setup(ctx, inputs, output):
    x, src, start, dim, size = inputs
    ctx.save_for_backward(start)
    ctx.dim, ctx.size, ctx.src_shape = dim, size, src.shape


def _dyn_update_backward(ctx, grad):
    (start,) = ctx.saved_tensors
    g_x = _dynamic_update(grad, grad.new_zeros(ctx.src_shape), start, ctx.dim, ctx.size)
    g_src = _dynamic_slice(grad, start, ctx.dim, ctx.size, 1)
    return g_x, g_src, None, None, None


_dynamic_slice.register_autograd(_dyn_slice_backward, setup_context=_dyn_slice_setup)
_dynamic_update.register_autograd(_dyn_update_backward, setup_context=_dyn_update_setup)


def _check_dynamic_args(op: str, tensor, dim, start, size, *, step=1) -> None:
    """PopTorch's checks of a dynamic slice or update, in its words."""
    if not isinstance(tensor, torch.Tensor):
        raise Error(f"{op} must take a torch.tensor input. {type(tensor).__name__} is not supported.")
    if not isinstance(start, torch.Tensor):
        raise Error(f"Slice start argument to {op} must be a torch.tensor. "
                    f"{type(start).__name__} is not supported.")
    if start.is_floating_point() or start.is_complex() or start.dtype == torch.bool or start.numel() != 1:
        raise Error(f"{op}: start must be a one-element integer tensor, got {start.dtype} of shape "
                    f"{tuple(start.shape)}")
    for what, v in (("Dimension", dim), ("Size", size), ("Step", step)):
        if not isinstance(v, int) or isinstance(v, bool):
            raise Error(f"{op}: {what} must be an integer.")
    if not 0 <= dim < tensor.dim():
        raise Error(f"{op}: dimension {dim} is out of range for a tensor of rank {tensor.dim()}")
    if size == 0:
        raise Error("The start and end of a slice must be different.")
    if size < 0:
        raise Error("Taking a slice of a tensor with the end less than the start is not supported.")
    if step < 1:
        raise Error(f"{op}: Step must be >= 1, got {step}")
    if size > tensor.shape[dim]:
        raise Error(f"{op}: a slice of {size} element(s) does not fit in dimension {dim} of size "
                    f"{tensor.shape[dim]}")


def dynamic_slice(tensor: torch.Tensor, dim: int, start: torch.Tensor, size: int, step: int) -> torch.Tensor:
    """`tensor[start:start + size:step]` along `dim`, `start` a runtime index
    (a tensor) (PopTorch user guide, 4.6.6 "poptorch.dynamic_slice"): ceil(size / step) elements. As PopTorch,
    the slice's size must divide the dimension. A start that puts the slice
    outside the dimension is an error when the op runs."""
    _check_dynamic_args("dynamic_slice", tensor, dim, start, size, step=step)
    if tensor.shape[dim] % size:
        raise Error(f"The size of the slice ({size}) must be a factor of the slicing dimension "
                    f"({tensor.shape[dim]}).")
    return _dynamic_slice(tensor, start, dim, size, step)


def dynamic_update(input: torch.Tensor, src: torch.Tensor, dim: int, start: torch.Tensor,
                   size: int) -> torch.Tensor:
    """`input` with `src` (statically sized: `size` along `dim`) written at the
    runtime index `start` (PopTorch user guide, 4.6.7 "poptorch.dynamic_update")."""
    _check_dynamic_args("dynamic_update", input, dim, start, size)
    if not isinstance(src, torch.Tensor):
        raise Error(f"dynamic_update: src must be a torch.tensor, got {type(src).__name__}")
    if src.dim() != input.dim():
        raise Error(f"input and src tensors must have same dimensionality. ({input.dim()}) vs ({src.dim()})")
    if src.dtype != input.dtype:
        raise Error(f"input and src tensor must have same dtype. ({_ipu_dtype(input.dtype)} vs "
                    f"{_ipu_dtype(src.dtype)})")
    want = list(input.shape)
    want[dim] = size
    if list(src.shape) != want:
        raise Error(f"dynamic_update: src has shape {tuple(src.shape)}, expected {tuple(want)}")
    return _dynamic_update(input, src, start, dim, size)


def _ipu_dtype(dtype: torch.dtype) -> torch.dtype:
    """A type as the IPU holds it: 64-bit integers are 32-bit there (PopTorch)."""
    return torch.int32 if dtype == torch.int64 else dtype


# -- recomputation checkpoints --------------------------------------------------

# (the op, tilefx::recomputation_checkpoint, is in lowering/recompute_op.py:
# the tracer places it too, at torch.utils.checkpoint regions)

def recomputationCheckpoint(*tensors):
    """Keep these values for the backward; the forward ops between checkpoints
    are recomputed in the backward instead of stashed (the `ipu-recompute`
    pass). One tensor in, one out; several (or one list/tuple) in, a tuple out."""
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        return type(tensors[0])(recomputationCheckpoint(*tensors[0]))
    out = []
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            raise Error(f"recomputationCheckpoint: all inputs must be tensors, got {type(t).__name__}")
        out.append(_recomputation_checkpoint(t))
    return out[0] if len(out) == 1 else tuple(out)


# -- CTC beam search decoder (PopTorch user guide, 4.6.1) ----------------------

@torch.library.custom_op("tilefx::ctc_beam_search_decoder", mutates_args=())
def _ctc_beam_search_decoder(log_probs: torch.Tensor, lengths: torch.Tensor, blank: int, beam_width: int,
                             top_paths: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    from tilefx.backend.kernels.ipu import ctc_beam_search_decoder as kernel

    res = kernel(log_probs.detach().float().numpy(), lengths.numpy(), blank=blank,
                 beam_width=beam_width, top_paths=top_paths)
    return (torch.from_numpy(res[0]).to(log_probs.dtype), torch.from_numpy(res[1]),
            torch.from_numpy(res[2]))


@_ctc_beam_search_decoder.register_fake
def _(log_probs, lengths, blank, beam_width, top_paths):
    T, B, _ = log_probs.shape
    return (log_probs.new_empty((B, top_paths)), torch.empty((B, top_paths), dtype=torch.int32),
            torch.empty((B, top_paths, T), dtype=torch.int32))


def ctc_beam_search_decoder(probs: torch.Tensor, lengths: torch.Tensor, blank: int = 0,
                            beam_width: int = 100, top_paths: int = 1):
    """The `top_paths` most likely label sequences of CTC log probabilities
    [input_length, batch, classes]: (log probabilities [batch, top_paths],
    lengths [batch, top_paths], paths [batch, top_paths, input_length])."""
    if not isinstance(probs, torch.Tensor):
        raise Error("ctc_beam_search_decoder: probs must be a torch.tensor argument. "
                    f"{type(probs).__name__} is not supported.")
    if not isinstance(lengths, torch.Tensor):
        raise Error("ctc_beam_search_decoder: lengths must be a torch.tensor argument. "
                    f"{type(lengths).__name__} is not supported.")
    if probs.dim() != 3 or not probs.is_floating_point():
        raise Error(f"ctc_beam_search_decoder: probs must be float [input_length, batch, classes], got "
                    f"{probs.dtype} of shape {tuple(probs.shape)}")
    if tuple(lengths.shape) != (probs.shape[1],) or lengths.is_floating_point():
        raise Error(f"ctc_beam_search_decoder: lengths must be integers of shape ({probs.shape[1]},), "
                    f"got {lengths.dtype} of shape {tuple(lengths.shape)}")
    if not 0 <= blank < probs.shape[2]:
        raise Error(f"ctc_beam_search_decoder: blank {blank} is not one of the {probs.shape[2]} classes")
    if not 1 <= top_paths <= beam_width:
        raise Error(f"ctc_beam_search_decoder: need 1 <= top_paths ({top_paths}) <= beam_width "
                    f"({beam_width})")
    return _ctc_beam_search_decoder(probs, lengths, int(blank), int(beam_width), int(top_paths))


# -- for_loop ---------------------------------------------------------------------

def _loop_marker(name: str, schema: str):
    def impl(*args):
        return [t.clone() for t in args[0]]

    op = torch.library.custom_op(f"tilefx::{name}", impl, mutates_args=(), schema=schema)
    op.register_fake(lambda *args: [torch.empty_like(t) for t in args[0]])

    def backward(ctx, *grads):
        raise Error("poptorch.for_loop() is only supported in inference, as in PopTorch: a "
                    "trainingModel cannot differentiate through the loop (write it as a Python loop "
                    "to train through it)")

    op.register_autograd(backward)
    return op


# the body's ops are traced between these two markers; the lowering moves them into `ipu.for`
_for_begin = _loop_marker("for_begin", "(Tensor[] inputs) -> Tensor[]")
_for_end = _loop_marker("for_end", "(Tensor[] outputs, Tensor[] inputs, int count) -> Tensor[]")


def for_loop(count: int, body, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """An on-device loop: `body(*inputs)` runs `count` times, each iteration
    on the previous one's outputs (same number, shapes and dtypes as the
    inputs). Traced once into an `ipu.for` region (inference models)."""
    if not isinstance(inputs, list):
        raise error_also(ValueError)("poptorch.for_loop expects input tensors (inputs) to be a list of tensors. "
                         "(Object is not list)")
    for i, t in enumerate(inputs):
        if not isinstance(t, torch.Tensor):
            raise error_also(ValueError)("poptorch.for_loop expects input tensors (inputs) to be a list of tensors. "
                             f"(Object contained in list at index {i} is not torch.tensor)")
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise Error(f"for_loop: count must be a non-negative int, got {count!r}")
    if not callable(body):
        raise Error(f"for_loop: body must be callable, got {type(body).__name__}")

    def run_body(args):
        outs = body(*args)
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        if len(outs) != len(args):
            raise Error(f"for_loop: the body returns {len(outs)} tensor(s) but takes {len(args)}; each "
                        "iteration's outputs are the next one's inputs")
        for i, (o, a) in enumerate(zip(outs, args)):
            if not isinstance(o, torch.Tensor) or o.shape != a.shape or o.dtype != a.dtype:
                got = f"{o.dtype}{list(o.shape)}" if isinstance(o, torch.Tensor) else type(o).__name__
                raise Error(f"for_loop: body output {i} is {got} but input {i} is "
                            f"{a.dtype}{list(a.shape)}; outputs must match the inputs")
        return outs

    if not Tracing.on:
        vals = [t.clone() for t in inputs]
        for _ in range(count):
            vals = run_body(vals)
        return vals
    cloned = _for_begin([t for t in inputs])
    # the body gets its inputs by value (PopTorch): a body that updates one in
    # place (`y += 1`) updates its own copy, so the loop's inputs, which the
    # end marker names, stay the values each iteration starts from
    outs = run_body([t.clone() for t in cloned])
    return list(_for_end(outs, cloned, count))


# -- NameScope and MultiConv: annotations on the traced ops -----------------------

class NameScope:
    """`with poptorch.NameScope("enc"):` prefixes the names of the ops inside
    (the `ipu.name` of each op: module path, then the name scopes, then the op)."""

    def __init__(self, name: str):
        if not isinstance(name, str) or not name:
            raise Error(f"NameScope: the name must be a non-empty string, got {name!r}")
        self.name = name
        self._pushed = False

    def __enter__(self):
        self._pushed = Tracing.on
        if self._pushed:
            ModuleScope.push(self.name)
        return self

    def __exit__(self, *exc):
        if self._pushed:
            ModuleScope.pop()
        return False


class Attribute:
    """`with poptorch.Attribute(__outline={"layer": "embedding"}):` sets these
    attributes on every op traced inside (forward and backward), as PopTorch
    passes them to PopART: they are the op's `ipu.attributes` in the IR,
    nested contexts merging theirs. They are PopART directives (its outliner
    reads `__outline`); tilefx records them and no pass of its reads them, as
    the machine model does not outline. optimum-graphcore enters one such
    context in a module's forward pre-hook and leaves it in its forward hook:
    the same object may be entered again after each exit."""

    def __init__(self, **attributes):
        # `Attribute(__outline=...)` written in a method of class M reaches here as
        # `_M__outline` (Python mangles the keyword): keep the name as written
        attributes = {("__" + k.split("__", 1)[1] if k.startswith("_") and not k.startswith("__")
                       and "__" in k else k): v for k, v in attributes.items()}
        for k, v in attributes.items():
            if not _attribute_value(v):
                raise Error(f"Attribute: {k}={v!r}: values must be str, int, float, bool, or a dict "
                            "of those by str keys")
        self.attributes = attributes
        self._entered: list = []

    def __enter__(self):
        cm = None
        if Tracing.on:
            outer = (torch.fx.traceback.current_meta.get("custom") or {}).get(ATTRIBUTES_META_KEY, {})
            cm = torch.fx.traceback.annotate({ATTRIBUTES_META_KEY: {**outer, **self.attributes}})
            cm.__enter__()
        self._entered.append(cm)
        return self

    def __exit__(self, *exc):
        cm = self._entered.pop() if self._entered else None
        if cm is not None:
            return cm.__exit__(*exc)
        return False


def _attribute_value(v, nested: bool = False) -> bool:
    if isinstance(v, (str, int, float, bool)):
        return True
    return not nested and isinstance(v, dict) and all(
        isinstance(k, str) and _attribute_value(x, True) for k, x in v.items())


class MultiConv:
    """`with poptorch.MultiConv():` the convolutions inside form one
    multi-convolution (PopTorch user guide, 4.6.4 "poptorch.MultiConv"): with the Parallel plan (default)
    they run at the same time on disjoint sets of tiles, each sized to its
    share of the work; Serial runs them one after the other. Per-conv
    options take one value for all or one per convolution."""

    _next_group = 0

    def __init__(self):
        self._amps = None
        self._partials = None
        self._plan = None
        self._reserved_tiles = None
        self._cycle_back_off = None
        self._dithering = None
        self._cm = None

    @staticmethod
    def _per_conv(name, value, types):
        if value is None:
            return None
        if isinstance(value, types) and not isinstance(value, bool) or (bool in types and isinstance(value, bool)):
            return (value,)
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, types) for v in value):
            return tuple(value)
        raise Error(f"MultiConv: invalid {name} {value!r}")

    def availableMemoryProportions(self, value):
        """The available memory proportion of each convolution, each in (0, 1]."""
        value = self._per_conv("available memory proportion", value, (float,))
        if value is not None and not all(is_proportion(v) for v in value):
            raise Error(f"MultiConv: available memory proportions must be in (0, 1], got {value}")
        self._amps = value
        return self

    def partialsTypes(self, value):
        """The partials type (torch.float or torch.half) of each convolution."""
        vals = value if isinstance(value, (list, tuple)) else [value]
        if any(v not in (torch.float32, torch.float16) for v in vals):
            raise Error("MultiConv: invalid partials types. Expecting torch.float or torch.half")
        self._partials = tuple(vals)
        return self

    def enableConvDithering(self, value):
        self._dithering = self._per_conv("conv dithering", value, (bool,))
        return self

    def planType(self, value):
        from tilefx.api.enums import MultiConvPlanType

        if value is not None and not isinstance(value, MultiConvPlanType):
            raise Error(f"MultiConv: invalid plan type {value!r} (a poptorch.MultiConvPlanType)")
        self._plan = value
        return self

    def perConvReservedTiles(self, value: int):
        if not isinstance(value, int) or value < 0:
            raise Error(f"MultiConv: perConvReservedTiles must be a non-negative int, got {value!r}")
        self._reserved_tiles = value
        return self

    def cycleBackOff(self, value: float):
        if not isinstance(value, float) or not 0.0 <= value <= 1.0:
            raise Error(f"MultiConv: cycleBackOff must be a float in [0, 1], got {value!r}")
        self._cycle_back_off = value
        return self

    def __enter__(self):
        from tilefx.api.enums import MultiConvPlanType

        group = MultiConv._next_group
        MultiConv._next_group += 1
        meta = {"group": group, "plan": "serial" if self._plan == MultiConvPlanType.Serial else "parallel"}
        if self._amps is not None:
            meta["amps"] = list(self._amps)
        # per-convolution options given one value per convolution: the frontend checks the count
        meta["sizes"] = {name: len(v) for name, v in (("availableMemoryProportions", self._amps),
                                                      ("partialsTypes", self._partials),
                                                      ("enableConvDithering", self._dithering))
                         if v is not None and len(v) > 1}
        self._cm = torch.fx.traceback.annotate({MULTICONV_META_KEY: meta})
        self._cm.__enter__()
        return self

    def __exit__(self, *exc):
        cm, self._cm = self._cm, None
        return cm.__exit__(*exc)
