"""One functional ATen graph of a model's forward and backward, from make_fx.

`trace_joint` runs the model functionally (`torch.func.functional_call` on
its parameters and buffers), takes `torch.autograd.grad` of the loss, and
traces all of it with `make_fx` under a fake-tensor mode and torch's Python
functionalization (`FunctionalTensorMode`), with the core ATen
decompositions (`decomp_table.py`): the same recipe torch's aot_autograd
uses for its joint graph, without aot_autograd (whose import loads
torch._dynamo, ~2 s of a cold compile; see `no_compiler.py`).

The graph's placeholders and outputs carry small descriptor records in
`node.meta["desc"]` (the output node: a list, one per output):

    inputs:  ParamInput(name), BufferInput(name), PlainInput(index)
    outputs: InputMutation(of a BufferInput / PlainInput), PlainOutput(index),
             GradOutput(of a ParamInput / PlainInput)

in that order (mutated inputs, the model's outputs, gradients). The loss
seed, `aten.full` of ones fed to the backward, is the call node whose desc
is `LossSeed(output)`. Backward nodes carry `partitioner_tag =
"is_backward"` and, through torch's node-meta replay (`seq_nr`), the custom
meta (Block annotations, source lines) of the forward node they come from.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from dataclasses import dataclass
from typing import Callable

import torch
import torch.fx.traceback as fx_traceback
from torch.utils import _pytree as pytree

from tilefx.lowering.decomp_table import DecompTable


@dataclass(frozen=True)
class ParamInput:
    target: str


@dataclass(frozen=True)
class BufferInput:
    target: str


@dataclass(frozen=True)
class PlainInput:
    idx: int


@dataclass(frozen=True)
class PlainOutput:
    idx: int


@dataclass(frozen=True)
class GradOutput:
    grad_of: ParamInput | PlainInput


@dataclass(frozen=True)
class InputMutation:
    mutated_input: BufferInput | PlainInput


@dataclass(frozen=True)
class LossSeed:
    output: PlainOutput


@dataclass
class JointGraph:
    graph_module: torch.fx.GraphModule
    out_spec: object  # the pytree structure of the model's outputs
    loss_index: int | None


@contextlib.contextmanager
def _backward_meta():
    """Nodes traced in the backward are tagged as such (torch's partitioner tag)."""
    old = fx_traceback.current_meta.get("partitioner_tag")
    fx_traceback.current_meta["partitioner_tag"] = "is_backward"
    try:
        yield
    finally:
        fx_traceback.current_meta["partitioner_tag"] = old


@contextlib.contextmanager
def checkpoint_runs_directly():
    """While tracing, `torch.utils.checkpoint.checkpoint` runs its function once,
    as a plain call, with no recomputation in the backward.

    The joint trace runs the model inside `torch.func.functional_call`, which
    swaps the traced parameters in only until forward returns; the backward
    (`autograd.grad`) runs after. A non-reentrant checkpoint recomputes its
    function during the backward, so the recomputed forward read the module's
    real parameters, which the trace captured as constants: gradients from the
    second training step on used the first step's weights. (Reentrant
    checkpoints refuse `autograd.grad` outright.) Recomputation only trades
    memory for compute, so the same numbers come from running the function
    directly; the IPU's own recomputation is tilefx's `recomputationCheckpoint`
    and the recompute options. A reentrant checkpoint whose tensor inputs do
    not require grad gives no gradient to the weights inside it in eager
    (`CheckpointFunction` runs its forward under no_grad); that stays so."""
    import torch.utils.checkpoint as ckpt

    with _CHECKPOINT_LOCK:
        if _CHECKPOINT_PATCH["users"] == 0:
            _CHECKPOINT_PATCH["restore"] = _patch_checkpoint(ckpt)
        _CHECKPOINT_PATCH["users"] += 1
    _CHECKPOINT_LOCAL.depth = getattr(_CHECKPOINT_LOCAL, "depth", 0) + 1
    try:
        yield
    finally:
        _CHECKPOINT_LOCAL.depth -= 1
        with _CHECKPOINT_LOCK:
            _CHECKPOINT_PATCH["users"] -= 1
            if _CHECKPOINT_PATCH["users"] == 0:
                _CHECKPOINT_PATCH.pop("restore")()


# the patch is installed once for all the traces running (threads), and acts
# only in a thread that is tracing: elsewhere checkpoint is torch's own
_CHECKPOINT_LOCK = threading.Lock()
_CHECKPOINT_PATCH: dict = {"users": 0}
_CHECKPOINT_LOCAL = threading.local()


def _tracing_here() -> bool:
    return getattr(_CHECKPOINT_LOCAL, "depth", 0) > 0


def _patch_checkpoint(ckpt) -> Callable[[], None]:
    """Install the direct checkpoint in `torch.utils.checkpoint`; returns the undo."""
    old_gen = ckpt._checkpoint_without_reentrant_generator
    had_apply = "apply" in ckpt.CheckpointFunction.__dict__
    old_apply = ckpt.CheckpointFunction.__dict__.get("apply")
    torch_apply = ckpt.CheckpointFunction.apply  # bound to the class

    def direct_generator(*args, **kwargs):
        if not _tracing_here():
            yield from old_gen(*args, **kwargs)
            return
        yield  # `checkpoint` calls function(*args, **kwargs) itself between the two next()s

    def run_reentrant(function, *args):
        if any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
            return function(*args)
        with torch.no_grad():
            return function(*args)

    def direct_apply(cls, function, preserve_rng_state, *args):
        if not _tracing_here():
            return torch_apply(function, preserve_rng_state, *args)
        return run_reentrant(function, *args)

    def mark(args):
        """The checkpoint's differentiable inputs, through tilefx's recomputation
        checkpoint op (identity; the machine model's `ipu-recompute` then keeps
        them and recomputes the ops between, as torch recomputes the function)."""
        from tilefx.lowering.recompute_op import recomputation_checkpoint as op

        return tuple(op(a) if isinstance(a, torch.Tensor) and a.requires_grad and a.is_floating_point()
                     else a for a in args)

    # `checkpoint` is `torch._disable_dynamo(checkpoint)`: its wrapper calls the
    # function in its closure cell `fn`, the one callers (transformers' partial of
    # it) reach; the generator and apply patches cover anything calling deeper
    wrapper = ckpt.checkpoint
    free = dict(zip(getattr(getattr(wrapper, "__code__", None), "co_freevars", ()),
                    getattr(wrapper, "__closure__", None) or ()))
    cell = free.get("fn")
    inner = cell.cell_contents if cell is not None else None
    if inner is None or getattr(inner, "__name__", "") != "checkpoint":
        cell = None

    def direct_checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check=None,
                          debug=False, early_stop=True, **kwargs):
        if not _tracing_here():
            extra = {} if context_fn is None else {"context_fn": context_fn}
            if determinism_check is not None:
                extra["determinism_check"] = determinism_check
            return inner(function, *args, use_reentrant=use_reentrant, debug=debug,
                         early_stop=early_stop, **extra, **kwargs)
        kwargs.pop("preserve_rng_state", None)
        if use_reentrant is None or use_reentrant:  # torch's default is reentrant
            return run_reentrant(function, *mark(args))
        return function(*mark(args), **kwargs)

    ckpt._checkpoint_without_reentrant_generator = direct_generator
    ckpt.CheckpointFunction.apply = classmethod(direct_apply)
    if cell is not None:
        cell.cell_contents = direct_checkpoint

    def undo():
        if cell is not None:
            cell.cell_contents = inner
        ckpt._checkpoint_without_reentrant_generator = old_gen
        if had_apply:
            ckpt.CheckpointFunction.apply = old_apply
        else:
            del ckpt.CheckpointFunction.apply
    return undo


@contextlib.contextmanager
def nested_backward_as_grad():
    """While tracing, `tensor.backward()` called inside the traced backward (a
    custom autograd.Function's backward that reruns its layers and
    differentiates them itself: Reformer's reversible layers, RevNets) is
    `autograd.grad` over the leaves it reaches and the traced parameters and
    inputs, added to the leaves' `.grad` as `backward()` accumulates it.
    torch's own accumulation fails on the traced parameters ("Cannot backprop
    through mirrored meta": they are functional wrappers of the fake inputs),
    and their graph edges are no AccumulateGrad nodes to find them by: their
    share is kept aside, and `trace_joint` adds it to their gradients, as
    eager's `loss.backward()` sums both in `.grad`."""
    import torch.autograd as autograd

    with _CHECKPOINT_LOCK:
        if _BACKWARD_PATCH["users"] == 0:
            _BACKWARD_PATCH["torch_backward"] = autograd.backward
            autograd.backward = _backward_while_tracing
        _BACKWARD_PATCH["users"] += 1
    try:
        yield
    finally:
        with _CHECKPOINT_LOCK:
            _BACKWARD_PATCH["users"] -= 1
            if _BACKWARD_PATCH["users"] == 0:
                autograd.backward = _BACKWARD_PATCH.pop("torch_backward")


_BACKWARD_PATCH: dict = {"users": 0}
# .differentiated: the traced tensors trace_joint differentiates; .side: {id: the
# gradient nested backward() calls gave them}
_BACKWARD_LOCAL = threading.local()


def _leaves(roots: list) -> list:
    """The leaf tensors requiring grad that the autograd graph of `roots` reaches."""
    leaves, seen, stack = {}, set(), []
    for t in roots:
        if t.grad_fn is None:
            if t.requires_grad:
                leaves[id(t)] = t
        else:
            stack.append(t.grad_fn)
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        variable = getattr(node, "variable", None)  # AccumulateGrad
        if isinstance(variable, torch.Tensor):
            leaves.setdefault(id(variable), variable)
        stack.extend(n for n, _ in node.next_functions)
    return list(leaves.values())


def _backward_while_tracing(tensors, grad_tensors=None, retain_graph=None, create_graph=False,
                            grad_variables=None, inputs=None):
    if not _tracing_here():
        return _BACKWARD_PATCH["torch_backward"](tensors, grad_tensors, retain_graph, create_graph,
                                                 grad_variables, inputs)
    roots = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors)
    grads = grad_tensors if grad_tensors is not None else grad_variables
    if isinstance(grads, torch.Tensor):
        grads = [grads]
    differentiated = getattr(_BACKWARD_LOCAL, "differentiated", [])
    side = getattr(_BACKWARD_LOCAL, "side", {})
    if inputs is None:
        targets = list({id(t): t for t in [*differentiated, *_leaves(roots)]}.values())
    else:
        targets = [inputs] if isinstance(inputs, torch.Tensor) else list(inputs)
    if not targets:
        return
    got = torch.autograd.grad(roots, targets, grads, retain_graph=retain_graph, create_graph=create_graph,
                              allow_unused=True)
    for t, g in zip(targets, got):
        if g is None:
            continue
        if any(t is d for d in differentiated):
            # a traced parameter: kept aside (its `.grad` is no leaf's, torch warns)
            side[id(t)] = g if side.get(id(t)) is None else side[id(t)] + g
        else:
            t.grad = g if t.grad is None else t.grad + g


def _node_of(t: torch.Tensor):
    """The fx node that made `t` in the make_fx trace running now (None: not traced)."""
    from torch._subclasses.functional_tensor import FunctionalTensor
    from torch.fx.experimental.proxy_tensor import get_proxy_mode, get_proxy_slot

    mode = get_proxy_mode()
    if mode is None or not isinstance(t, torch.Tensor):
        return None
    if isinstance(t, FunctionalTensor):
        torch._sync(t)
        t = torch._from_functional_tensor(t.elem)
    proxy = get_proxy_slot(t, mode.tracer, None)
    return None if proxy is None else proxy.proxy.node


def _check_parameters_kept(state: dict, params: dict, traced: list) -> None:
    """A forward that replaces or deletes a parameter (`self.w = nn.Parameter(...)`)
    is PopTorch's error: the program's weight would silently stay the old one
    (eager replaces it at every call)."""
    from tilefx.errors import Error

    for name, t in zip(params, traced):
        new = state.get(name, t)
        if new is t:
            continue
        short = name.removeprefix('inner.')  # (as _reassigned_buffers)
        if type(new) is object:
            raise Error(f"Parameter {short} is removed from the model when calling the forward method.",
                        type="frontend")
        raise Error(f"Parameter {short} is reassigned within the model when calling the forward method. "
                    "This is not supported: a parameter is a weight of the compiled program (compute the "
                    "new value as a tensor, or change the parameter's data outside the model's forward)",
                    type="frontend")


def _reassigned_buffers(state: dict, buffers: dict, traced: list) -> list:
    """[(traced buffer, new value)] for the buffers the forward reassigned to
    another tensor, which must keep the buffer's shape and dtype."""
    from tilefx.errors import Error

    out = []
    for (name, real), t in zip(buffers.items(), traced):
        new = state.get(name, t)
        if new is t:
            continue
        # (from_torch traces the model wrapped as `inner` of its CallWith)
        short = name.removeprefix('inner.')
        where = f"the forward reassigns buffer '{short}'"
        if type(new) is object:  # functional_call's mark for a buffer the forward deleted
            raise Error(f"Buffer {short} is removed from the model when calling the forward method.",
                        type="frontend")
        if not isinstance(new, torch.Tensor):
            raise Error(f"{where} to {type(new).__name__}: a buffer keeps a tensor of its shape and "
                        f"dtype on the IPU ({tuple(real.shape)}, {real.dtype})", type="frontend")
        if tuple(new.shape) != tuple(t.shape) or new.dtype != t.dtype:
            # PopTorch's words first: users know them (a reassignment keeping the
            # shape and dtype is supported here, so the details follow)
            raise Error(f"Buffer {short} is reassigned within the model when calling the forward method. "
                        f"This is not supported. Consider using self.{short}.copy_(src) to copy data from "
                        f"a source tensor, where src is the name of the source tensor. ({where} to a "
                        f"tensor of shape {tuple(new.shape)} and dtype {new.dtype}, but it has shape "
                        f"{tuple(t.shape)} and dtype {t.dtype}: on the IPU a buffer keeps its shape and "
                        f"dtype.)", type="frontend")
        out.append((t, new))
    return out


def _make_fx(joint: Callable, flat: list, fake_mode) -> torch.fx.GraphModule:
    """make_fx's trace of `joint(*flat)`: fake tensors, functionalized, with the
    core ATen decompositions."""
    from tilefx.lowering.decompositions import tracing_decompositions
    from torch._dispatch.python import enable_python_dispatcher
    from torch._subclasses.functional_tensor import FunctionalTensorMode
    from torch.fx.experimental.proxy_tensor import _MakefxTracer

    with fake_mode, enable_python_dispatcher(), checkpoint_runs_directly(), \
            nested_backward_as_grad(), \
            FunctionalTensorMode(pre_dispatch=False, export=False, _allow_token_discovery=True):
        # make_fx(...) itself is this tracer plus a read of torch._inductor's config
        # (for its provenance-tracking flag), whose import loads inductor and dynamo
        tracer = _MakefxTracer({}, "real", _allow_non_fake_inputs=False,
                               pre_dispatch=False, record_module_stack=False,
                               _allow_fake_constant=False, _error_on_data_dependent_ops=True)
        # torch's core ATen decompositions, set after the constructor (which would copy
        # the whole table, and listing it costs ~0.2 s; see decomp_table.py)
        table = tracing_decompositions(DecompTable())  # less the backward ops kept whole
        table.setdefault(torch.ops.aten.sym_numel.default, torch._decomp.decompositions.sym_numel)
        tracer.decomposition_table = table
        gm = tracer.trace(joint, *flat)
    return gm


def _host_constants(model: torch.nn.Module, buffers: dict) -> dict[str, torch.Tensor]:
    """{name: value} of the buffers whose value the trace may read on the host:
    non-persistent (no state dict loads them; tensor attributes are traced as
    such) single-element tensors, the configuration some models keep in
    tensors (Encodec's convolutions compute their padding from `stride` and
    `kernel_size` buffers with `.item()`). A trace reads them as PopTorch's
    does, as the value they hold when the model is compiled; one the forward
    writes is traced again as data (`trace_joint`)."""
    from torch._subclasses.fake_tensor import FakeTensor
    from torch.fx.experimental.proxy_tensor import CONSTANT_NUMEL_LIMIT

    transient = {f"{mname}.{b}" if mname else b
                 for mname, m in model.named_modules() for b in m._non_persistent_buffers_set}
    return {n: t.detach().clone() for n, t in buffers.items()
            if n in transient and t.numel() <= CONSTANT_NUMEL_LIMIT
            and not isinstance(t, FakeTensor) and t.device.type != "meta"}


def _mark_host_constants(primals: tuple, names: list, constants: dict) -> None:
    """Give the traced buffers in `constants` their value (real tensors, copied
    before the trace: torch's tracer folds an op whose inputs all have one, and
    `.item()` of such a tensor is its value)."""
    from torch.fx.experimental.proxy_tensor import _ProxyTensor, get_proxy_mode, get_proxy_slot, set_proxy_slot

    mode = get_proxy_mode()
    if mode is None:
        return
    for name, t in zip(names, primals):
        if name in constants:
            slot = get_proxy_slot(t, mode.tracer)
            set_proxy_slot(t, mode.tracer, _ProxyTensor(slot.proxy, constants[name]))


def trace_joint(model: torch.nn.Module, args: tuple, training: bool,
                find_loss: Callable[[list, set], int | None], requested: tuple = (),
                fake_mode=None) -> JointGraph:
    """Trace `model(*args)` (and, when `training`, the backward of its loss)
    into a functional ATen graph. `find_loss(plain_outputs, differentiable)`
    picks the loss among [(index, fx node)] given the indices with a gradient
    path. Gradients are returned for the trainable parameters and for the
    inputs in `requested` (indices; the caller made them require grad).
    `fake_mode`: the FakeTensorMode the model's tensors already live in, if any."""
    from torch._functorch._aot_autograd.functional_utils import from_fun, has_data_mutation, to_fun
    from torch._functorch._aot_autograd.logging_utils import setup_stacktrace_preservation_hooks
    from torch._functorch._aot_autograd.utils import copy_fwd_metadata_to_bw_nodes
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
    from torch.nn.utils.stateless import _reparametrize_module

    # the proxy mode checks nodes against this module's classes; it is loaded as
    # a side effect of importing torch.compile, which the trace does without
    import torch._higher_order_ops.triton_kernel_wrap  # noqa: F401

    params = dict(model.named_parameters())  # tied weights: one entry, the first name
    buffers = dict(model.named_buffers())
    tensor_args = list(args)
    in_descs = ([ParamInput(n) for n in params] + [BufferInput(n) for n in buffers]
                + [PlainInput(i) for i in range(len(tensor_args))])
    n_params, n_buffers = len(params), len(buffers)
    result: dict = {}

    if fake_mode is None:
        fake_mode = FakeTensorMode(allow_non_fake_inputs=True)

    memo: dict[int, torch.Tensor] = {}

    def fake(t):
        """A fake tensor of `t`'s shape, strides, dtype, device and requires_grad.
        (Built from a meta tensor: `fake_mode.from_tensor` would name it with a
        dynamo Source, importing the compiler.) One tensor passed twice stays one."""
        if not isinstance(t, torch.Tensor) or isinstance(t, FakeTensor):
            return t
        if id(t) not in memo:
            meta = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
            f = fake_mode.fake_tensor_converter.from_meta_and_device(fake_mode, meta, t.device)
            memo[id(t)] = f.requires_grad_(t.requires_grad) if t.requires_grad else f
        return memo[id(t)]

    flat = [fake(t) for t in [*params.values(), *buffers.values(), *tensor_args]]

    def backward(outs: list, f_in: list):
        """The loss's gradients for the trainable parameters and the requested
        inputs: `autograd.grad`, plus what a custom autograd.Function's backward
        gave them with a `backward()` of its own (Reformer's reversible layers;
        eager's `loss.backward()` sums both in `.grad`)."""
        plain = [(i, _node_of(o)) for i, o in enumerate(outs) if isinstance(o, torch.Tensor)]
        differentiable = {i for i, o in enumerate(outs)
                          if isinstance(o, torch.Tensor) and o.requires_grad}
        loss_index = find_loss(plain, differentiable)
        wrt = [(d, t) for d, t in zip(in_descs, f_in) if isinstance(t, torch.Tensor) and t.requires_grad
               and (isinstance(d, ParamInput) or (isinstance(d, PlainInput) and d.idx in requested))]
        loss = outs[loss_index]
        if not (wrt and loss.requires_grad):
            return [], [], loss_index
        with fx_traceback.preserve_node_meta(), _backward_meta(), warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Anomaly Detection has been enabled.")
            # (anomaly mode's note on a backward that raises: the error itself says what failed)
            warnings.filterwarnings("ignore", "Error detected in ")
            seed = torch.ops.aten.full.default(list(loss.shape), 1.0, dtype=loss.dtype,
                                               device=loss.device)
            result["seed"] = seed
            # backward nodes get the sequence number (and stack trace) of the
            # forward op they differentiate, so its custom meta can follow them
            if loss.grad_fn is not None:
                setup_stacktrace_preservation_hooks([loss.grad_fn])
            _BACKWARD_LOCAL.differentiated, _BACKWARD_LOCAL.side = [t for _, t in wrt], {}
            try:
                with torch.autograd.detect_anomaly(check_nan=False):
                    gs = list(torch.autograd.grad([loss], [t for _, t in wrt], grad_outputs=[seed],
                                                  allow_unused=True))
                side = _BACKWARD_LOCAL.side
            finally:
                _BACKWARD_LOCAL.differentiated, _BACKWARD_LOCAL.side = [], {}
            for i, (_, t) in enumerate(wrt):
                extra = side.get(id(t))
                if extra is not None:
                    gs[i] = extra if gs[i] is None else gs[i] + extra
        return gs, [GradOutput(d) for d, _ in wrt], loss_index

    constants = _host_constants(model, buffers)
    names = list(params) + list(buffers)

    def joint(*primals):
        _mark_host_constants(primals, names, constants)
        f_in = [to_fun(t) for t in primals]
        state = dict(zip(list(params) + list(buffers), f_in[:n_params + n_buffers]))
        user = f_in[n_params + n_buffers:]
        # the model holds the traced parameters through its backward too (torch's
        # functional_call would put the real ones back when forward returns): a
        # custom autograd.Function whose backward reruns layers (Reformer's
        # reversible layers) must read the traced weights, not bake in the real ones
        with _reparametrize_module(model, state, tie_weights=True, strict=False):
            with torch.set_grad_enabled(training and torch.is_grad_enabled()):
                out = model(*user)
            outs, spec = pytree.tree_flatten(out)
            grads, grad_descs, loss_index = backward(outs, f_in) if training else ([], [], None)
        # leaving the reparametrization writes a buffer the forward reassigned
        # (`self.q = new`) back into `state`; it is written into the buffer after the backward, as an
        # in-place write would be (not before: the forward may have saved the old one)
        _check_parameters_kept(state, params, f_in[:n_params])
        reassigned = _reassigned_buffers(state, buffers, f_in[n_params:n_params + n_buffers])
        result["out_spec"] = spec
        result["loss_index"] = loss_index
        out_descs: list = []
        values: list = []
        if reassigned:
            with torch.no_grad():
                for buf, value in reassigned:
                    buf.copy_(value.detach())
        # data written into inputs (buffers updated in forward, in-place writes to user inputs)
        written_params = [d.target.removeprefix("inner.") for d, t in zip(in_descs, f_in)
                          if isinstance(d, ParamInput) and isinstance(t, torch.Tensor) and has_data_mutation(t)]
        if written_params:
            from tilefx.errors import Error

            raise Error(f"the forward writes parameter(s) {', '.join(written_params)} in place (e.g. "
                        "weight clipping under torch.no_grad(), nn.Embedding(max_norm=...)): the program "
                        "would use the written value in this call but not keep it, and train the old one; "
                        "write the parameter between calls instead (then copyWeightsToDevice())",
                        type="frontend")
        for d, t in zip(in_descs, f_in):
            if isinstance(t, torch.Tensor) and not isinstance(d, ParamInput) and has_data_mutation(t):
                values.append(from_fun(t))
                out_descs.append(InputMutation(d))
        for i, o in enumerate(outs):
            values.append(from_fun(o) if isinstance(o, torch.Tensor) else o)
            out_descs.append(PlainOutput(i))
        values += [from_fun(g) if g is not None else None for g in grads]
        out_descs += grad_descs
        result["out_descs"] = out_descs
        if "seed" in result:
            result["seed_node"] = _node_of(result.pop("seed"))
        return values

    while True:
        gm = _make_fx(joint, flat, fake_mode)
        # a host-read buffer the forward writes holds another value at the next call:
        # traced again as data (reading it on the host is then a data-dependent error)
        written = {d.mutated_input.target for d in result["out_descs"]
                   if isinstance(d, InputMutation) and isinstance(d.mutated_input, BufferInput)}
        if not written & constants.keys():
            break
        for name in written:
            constants.pop(name, None)
        result.clear()

    copy_fwd_metadata_to_bw_nodes(gm)  # Block annotations, autocast, module paths
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for n, d in zip(placeholders, in_descs):
        n.meta["desc"] = d
    out_node = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    out_node.meta["desc"] = result["out_descs"]
    seed_node = result.get("seed_node")
    if seed_node is not None:
        seed_node.meta["desc"] = LossSeed(PlainOutput(result["loss_index"]))
    return JointGraph(gm, result.get("out_spec"), result.get("loss_index"))
