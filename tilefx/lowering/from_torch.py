"""torch.nn.Module -> graph IR (a `func.func @main` of aten.* and ipu.* ops).

Training graphs come from `aot_export_joint_with_descriptors`: one functional
ATen graph holding forward and backward, whose inputs and outputs carry
descriptors (parameter, buffer, user input, tangent; user output, gradient,
buffer mutation). Those descriptors become argument / result attributes:

    {tilefx.param = "fc.weight"}  {tilefx.buffer = "bn.running_mean"}
    {tilefx.input = 0}            {tilefx.const = "_tensor_constant0"}
    {tilefx.output = 0}           {tilefx.grad = "fc.weight"}

The loss output is marked `tilefx.loss`; the tangent fed to its backward is
an `aten.full` of ones marked `tilefx.loss_seed` (the loss-scaling pass finds
it there); tangents of other outputs are zeros.
"""

from __future__ import annotations

import contextlib
import inspect
import operator
from dataclasses import dataclass, field

import numpy as np
import torch
from torch._functorch.aot_autograd import aot_export_joint_with_descriptors
from torch.nn.attention import SDPBackend, sdpa_kernel
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    DictionaryAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    TensorType,
    UnitAttr,
    i64,
)
from xdsl.ir import Attribute, Block, Region, SSAValue

from tilefx.errors import Error
from tilefx.dialects import ipu
from tilefx.dialects.aten import ATEN_SCHEMAS, create_aten_op
from tilefx.dialects.aten_schema import Schema
from tilefx.lowering.tracing_state import Tracing, end_begin_blocks, start_tracing, uses_begin_block
from tilefx.dialects.names import BLOCK_META_KEY, IPU_META_KEY, AUTOCAST_KEY, AUTOCAST_META_KEY, BUFFER_KEY, CONST_KEY, GRAD_KEY, INPUT_KEY, LOSS_KEY, LOSS_SEED_KEY, OUTPUT_KEY, PARAM_KEY

_TORCH_TO_NP = {
    torch.float32: np.float32, torch.float16: np.float16, torch.float64: np.float64,
    torch.int64: np.int64, torch.int32: np.int32, torch.int8: np.int8, torch.bool: np.bool_,
    torch.uint8: np.uint8,
}


def np_dtype_of(dtype: torch.dtype) -> np.dtype:
    if dtype not in _TORCH_TO_NP:
        raise Error(f"tensors of dtype {dtype} are not supported")
    return np.dtype(_TORCH_TO_NP[dtype])


def tensor_type_of(val) -> TensorType:
    from tilefx.dialects.aten import tensor_type

    if val is None:
        return tensor_type([0], np.float32)
    return tensor_type(list(val.shape), np_dtype_of(val.dtype))


def to_numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy().copy() if t.dtype != torch.bfloat16 else t.float().numpy()


@dataclass
class TracedGraph:
    """The graph IR of a model plus what binds it to the torch world."""

    module: ModuleOp
    params: list[str]  # in argument order
    buffers: list[str]
    num_inputs: int
    num_outputs: int
    loss_index: int | None
    consts: dict[str, np.ndarray] = field(default_factory=dict)
    out_spec: object = None  # the pytree structure of the model's outputs (dicts, nesting)


START_BLOCK = ipu.START_BLOCK


class _LayerWatch:
    """Module hooks active while tracing: restart the BeginBlock state at each
    forward of the root module (the tracer runs it more than once), and note
    the layers (modules with parameters) that run outside every block after
    the first block was seen (PopTorch: every layer must be inside a Block)."""

    def __init__(self, model: torch.nn.Module):
        self.names = {m: n or type(m).__name__ for n, m in model.named_modules()}
        self.seen_block = False
        self.outside: list[str] = []
        self.handles = [
            model.register_forward_pre_hook(lambda m, a: self.restart(), prepend=True),
            # a BeginBlock annotation ends with the forward: backward nodes get
            # their block from their forward node, not from the last BeginBlock
            model.register_forward_hook(lambda m, a, out: end_begin_blocks()),
            torch.nn.modules.module.register_module_forward_pre_hook(self.layer),
        ]

    def restart(self) -> None:
        end_begin_blocks()
        start_tracing()
        self.seen_block = False
        self.outside = []

    def layer(self, module, args) -> None:
        custom = torch.fx.traceback.current_meta.get("custom") or {}
        if BLOCK_META_KEY in custom or IPU_META_KEY in custom:
            self.seen_block = True
        elif self.seen_block and module in self.names and \
                any(True for _ in module.parameters(recurse=False)):
            self.outside.append(f"{self.names[module]} ({type(module).__name__})")

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


def _module_of(node) -> str:
    stack = node.meta.get("nn_module_stack") or node.meta.get("fwd_nn_module_stack") or {}
    if not stack:
        return "<top level>"
    path, cls = list(stack.values())[-1]
    cls_name = cls if isinstance(cls, str) else getattr(cls, "__name__", str(cls))
    return f"{path or '<root>'} ({cls_name.rsplit('.', 1)[-1]})"


def _schema_args(node, schema: Schema) -> tuple[dict, dict]:
    """Map an fx node's args/kwargs onto our schema's operand and property names."""
    torch_args = node.target._schema.arguments
    values = {}
    for i, a in enumerate(torch_args):
        if i < len(node.args):
            values[a.name] = node.args[i]
        elif a.name in node.kwargs:
            values[a.name] = node.kwargs[a.name]
    operands, props = {}, {}
    for a in schema.args:
        if a.name not in values:
            continue
        v = values[a.name]
        if a.kind in ("tensor", "optional", "variadic"):
            operands[a.name] = v
        else:
            if isinstance(v, torch.dtype):
                v = np_dtype_of(v)
            props[a.name] = v
    return operands, props


class _Builder:
    def __init__(self, gm: torch.fx.GraphModule, descs: dict, loss_index: int | None,
                 has_blocks: bool):
        self.gm = gm
        self.values: dict = {}  # fx node -> SSAValue or list of SSAValue
        self.block = Block()
        self.arg_attrs: list[DictionaryAttr] = []
        self.loss_index = loss_index
        self.has_blocks = has_blocks
        self.seen_block = False
        self.start_seqs: set[int] = set()

    # -- helpers -------------------------------------------------------
    def value(self, x):
        if isinstance(x, torch.fx.Node):
            v = self.values[x]
            return v
        if isinstance(x, (list, tuple)):
            return [self.value(e) for e in x]
        return x

    def operand(self, x, out_val):
        """An SSA value for a tensor argument; Python numbers become 0-d tensors."""
        if isinstance(x, (bool, int, float)) and not isinstance(x, torch.fx.Node):
            if isinstance(x, bool):
                dtype = np.dtype(np.bool_)
            elif isinstance(x, int):
                dtype = np.dtype(np.int64)
            else:
                out_dtype = getattr(out_val, "dtype", torch.float32)
                dtype = np_dtype_of(out_dtype if out_dtype.is_floating_point else torch.float32)
            from tilefx.dialects.aten import tensor_type

            op = create_aten_op("scalar_tensor.default", {}, {"s": x, "dtype": dtype},
                                [tensor_type([], dtype)], {})
            self.emit(op)
            return op.results[0]
        return self.value(x)

    def add_arg(self, node, attrs: dict[str, Attribute]) -> SSAValue:
        arg = self.block.insert_arg(tensor_type_of(node.meta.get("val")), len(self.block.args))
        self.arg_attrs.append(DictionaryAttr(attrs))
        self.values[node] = arg
        return arg

    def place(self, node) -> ipu.PlacementAttr:
        custom = node.meta.get("custom") or {}
        direction = "bwd" if node.meta.get("partitioner_tag") == "is_backward" else "fwd"
        block = custom.get(BLOCK_META_KEY)
        ipu_id = custom.get(IPU_META_KEY)
        if block is None and ipu_id is not None:
            block = f"ipu{ipu_id}"
        seq = node.meta.get("seq_nr")
        if block is None and self.has_blocks and direction == "fwd" and not self.seen_block:
            # ops before the first block run on IPU 0 (stage 0) ...
            block, ipu_id = START_BLOCK, 0
            self.start_seqs.add(seq)
        elif block is None and direction == "bwd" and seq is not None and seq in self.start_seqs:
            # ... and so does their backward (matched like torch matches custom meta)
            block, ipu_id = START_BLOCK, 0
        if block and block != START_BLOCK:
            self.seen_block = True
        return ipu.PlacementAttr(direction, block or "", -1 if ipu_id is None else ipu_id)

    def emit(self, op) -> None:
        self.block.add_op(op)

    # -- nodes ---------------------------------------------------------
    def call(self, node) -> None:
        target = node.target
        if target is operator.getitem:
            src, idx = node.args
            self.values[node] = self.values[src][idx]
            return
        val = node.meta.get("val")
        if isinstance(val, (list, tuple)):
            rtypes = [tensor_type_of(v) for v in val]
        else:
            rtypes = [tensor_type_of(val)]
        attrs = {ipu.PLACE_KEY: self.place(node)}
        flag = (node.meta.get("custom") or {}).get(AUTOCAST_META_KEY)
        if flag is not None:
            from xdsl.dialects.builtin import BoolAttr

            attrs[AUTOCAST_KEY] = BoolAttr.from_bool(bool(flag))
        ns = getattr(target, "namespace", None)
        if ns == "tilefx":
            op = self.custom_op(node, rtypes, attrs)
        elif ns == "aten":
            name = str(target).removeprefix("aten.")
            schema = ATEN_SCHEMAS.get(name)
            if schema is None:
                raise Error(f"unsupported operation aten::{name} (from module {_module_of(node)})",
                            type="frontend")
            operands, props = _schema_args(node, schema)
            operands = {k: self.operand(v, val) for k, v in operands.items()}
            try:
                op = create_aten_op(name, operands, props, rtypes, attrs)
            except (ValueError, TypeError) as e:
                raise Error(f"cannot convert aten::{name} (from module {_module_of(node)}): {e}",
                            type="frontend") from e
        else:
            raise Error(f"unsupported operation {target} (from module {_module_of(node)})",
                        type="frontend")
        self.emit(op)
        results = list(op.results)
        self.values[node] = results if isinstance(val, (list, tuple)) else results[0]

    def custom_op(self, node, rtypes, attrs):
        name = node.target._opname
        a = [self.value(x) for x in node.args]
        if name == "identity_loss":
            return ipu.IdentityLossOp.build(operands=[a[0]], result_types=rtypes,
                                            properties={"reduction": StringAttr(a[1])}, attributes=attrs)
        if name == "nop":
            return ipu.NopOp.build(operands=[a[0]], result_types=rtypes, attributes=attrs)
        if name == "print_tensor":
            return ipu.PrintTensorOp.build(operands=[a[0]], result_types=rtypes,
                                           properties={"title": StringAttr(a[1])}, attributes=attrs)
        if name == "set_available_memory":
            from xdsl.dialects.builtin import FloatAttr, f64

            return ipu.SetAvailableMemoryOp.build(operands=[a[0]], result_types=rtypes,
                                                  properties={"proportion": FloatAttr(a[1], f64)},
                                                  attributes=attrs)
        if name == "serialized_matmul":
            from xdsl.dialects.builtin import BoolAttr

            return ipu.SerializedMatmulOp.build(
                operands=[a[0], a[1]], result_types=rtypes, attributes=attrs,
                properties={"mode": StringAttr(a[2]), "factor": IntegerAttr(a[3], i64),
                            "keep_precision": BoolAttr.from_bool(a[4])})
        raise Error(f"unsupported operation tilefx::{name}")

    def tangent(self, node, output_idx: int | None) -> None:
        val = node.meta["val"]
        is_loss = output_idx is not None and output_idx == self.loss_index
        attrs: dict[str, Attribute] = {ipu.PLACE_KEY: ipu.PlacementAttr("bwd")}
        if is_loss:
            attrs[LOSS_SEED_KEY] = UnitAttr()
        op = create_aten_op("full.default", {}, {"size": list(val.shape),
                                                 "fill_value": 1.0 if is_loss else 0.0,
                                                 "dtype": np_dtype_of(val.dtype)},
                            [tensor_type_of(val)], attrs)
        self.emit(op)
        self.values[node] = op.results[0]


def _find_loss(plain_outputs: list, differentiable: set[int]) -> int | None:
    """The loss: the output made by identity_loss, else the one scalar float
    output that has a gradient path. Several such outputs are ambiguous: an
    error asks for identity_loss rather than guessing."""
    for idx, node in plain_outputs:
        # the op exists once tilefx.api.ops registered it (a model that never
        # called poptorch.identity_loss may trace before that)
        if isinstance(node, torch.fx.Node) and str(node.target) == "tilefx.identity_loss.default":
            return idx
    scalars = []
    for idx, node in plain_outputs:
        v = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        if v is not None and v.dim() == 0 and v.is_floating_point() and idx in differentiable:
            scalars.append(idx)
    if len(scalars) > 1:
        raise Error(f"trainingModel: outputs {scalars} are all scalar losses with gradients; mark the "
                    "one to minimise with poptorch.identity_loss(loss, reduction='none')",
                    type="frontend")
    return scalars[0] if scalars else None


class _UpcastInputs(torch.nn.Module):
    """Runs the model on its float16 inputs cast to float32 (PyTorch's promotion
    of fp16 inputs meeting fp32 weights); the casts are traced into the graph."""

    def __init__(self, inner: torch.nn.Module, which: frozenset[int]):
        super().__init__()
        self.inner = inner
        self.which = which

    def forward(self, *args):
        return self.inner(*[a.float() if i in self.which else a for i, a in enumerate(args)])


def _forward_arg_names(model: torch.nn.Module) -> list[str]:
    """The forward's positional parameter names, for the IR's input arguments."""
    try:
        params = inspect.signature(model.forward).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def trace(model: torch.nn.Module, args: tuple, training: bool,
          upcast_inputs: frozenset[int] = frozenset()) -> TracedGraph:
    """Trace `model(*args)` (micro-batch shaped) into the graph IR; the inputs
    in `upcast_inputs` are fp16 and cast to fp32 inside the graph."""
    prefix = ""
    if upcast_inputs:
        model, prefix = _UpcastInputs(model, upcast_inputs), "inner."
    from torch._functorch._aot_autograd.descriptors import (
        BufferAOTInput,
        GradAOTOutput,
        InputMutationAOTOutput,
        ParamAOTInput,
        PlainAOTInput,
        PlainAOTOutput,
        TangentAOTInput,
    )

    Tracing.on = True
    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(torch.fx.traceback.preserve_node_meta())
            stack.enter_context(sdpa_kernel([SDPBackend.MATH]))
            if not training:
                stack.enter_context(torch.no_grad())
            try:
                watch = _LayerWatch(model)
                try:
                    joint = aot_export_joint_with_descriptors(
                        stack, model, tuple(args), decompositions=torch._decomp.core_aten_decompositions(),
                        ignore_shape_env=True)  # static shapes, also for graphs from torch.compile
                finally:
                    watch.remove()
            except Error:
                raise
            except Exception as e:  # torch's own tracing failures
                inner = e
                while inner is not None and not isinstance(inner, Error):
                    inner = inner.__cause__ or inner.__context__
                if inner is not None:
                    raise inner from None
                raise Error(f"tracing the model failed: {type(e).__name__}: {e}", type="frontend") from e
            finally:
                end_begin_blocks()
    finally:
        Tracing.on = False

    gm = joint.graph_module
    nodes = list(gm.graph.nodes)
    out_node = nodes[-1]
    out_descs = out_node.meta["desc"]
    outs = out_node.args[0]
    plain = [(d.idx, n) for d, n in zip(out_descs, outs) if isinstance(d, PlainAOTOutput)]
    differentiable = {n.meta["desc"].output.idx for n in nodes if n.op == "placeholder"
                      and isinstance(n.meta.get("desc"), TangentAOTInput)
                      and isinstance(n.meta["desc"].output, PlainAOTOutput)}
    loss_index = _find_loss(plain, differentiable) if training else None
    if training and loss_index is None:
        raise Error("trainingModel: the model must return a loss: a scalar float output that "
                    "depends on the parameters (e.g. from a torch.nn loss) or the result of "
                    "poptorch.identity_loss")
    has_blocks = any(
        BLOCK_META_KEY in (n.meta.get("custom") or {}) or IPU_META_KEY in (n.meta.get("custom") or {})
        for n in nodes)

    b = _Builder(gm, {}, loss_index, has_blocks)
    params, buffers, consts = [], [], {}
    # tied weights (one tensor, several names) are one parameter, named by its first name
    first_name: dict[int, str] = {}
    canonical: dict[str, str] = {}
    for n, p in model.named_parameters(remove_duplicate=False):
        canonical[n] = first_name.setdefault(id(p), n.removeprefix(prefix))
    param_args: dict[str, SSAValue] = {}
    input_names = _forward_arg_names(model)
    grad_index: dict[str, int] = {}
    num_inputs = 0
    for node in nodes:
        if node.op == "placeholder":
            d = node.meta["desc"]
            if isinstance(d, ParamAOTInput):
                name = canonical.get(d.target, d.target.removeprefix(prefix))
                if name in param_args:  # a tied weight: one argument for all its names
                    b.values[node] = param_args[name]
                    continue
                params.append(name)
                param_args[name] = b.add_arg(node, {PARAM_KEY: StringAttr(name)})
            elif isinstance(d, BufferAOTInput):
                buffers.append(d.target.removeprefix(prefix))
                b.add_arg(node, {BUFFER_KEY: StringAttr(buffers[-1])})
            elif isinstance(d, PlainAOTInput):
                num_inputs = max(num_inputs, d.idx + 1)
                arg = b.add_arg(node, {INPUT_KEY: IntegerAttr(d.idx, i64)})
                if d.idx < len(input_names) and SSAValue.is_valid_name(input_names[d.idx]):
                    arg.name_hint = input_names[d.idx]  # the forward's own name (tilefx-run --inputs)
            elif isinstance(d, TangentAOTInput):
                od = d.output
                b.tangent(node, od.idx if isinstance(od, PlainAOTOutput) else None)
            else:
                raise Error(f"unsupported graph input {d}", type="frontend")
        elif node.op == "get_attr":
            name = str(node.target)
            consts[name] = to_numpy(getattr(gm, name))
            b.add_arg(node, {CONST_KEY: StringAttr(name)})
        elif node.op == "call_function":
            b.call(node)

    if watch.outside and not uses_begin_block(model):
        raise Error("once blocks are in use, every layer must be inside a Block: "
                    f"{', '.join(dict.fromkeys(watch.outside))} ran outside every block",
                    type="frontend")
    results, res_attrs = [], []
    num_outputs = 0
    for d, n in zip(out_descs, outs):
        if n is None:
            continue
        if isinstance(d, PlainAOTOutput):
            num_outputs = max(num_outputs, d.idx + 1)
            attrs: dict[str, Attribute] = {OUTPUT_KEY: IntegerAttr(d.idx, i64)}
            if d.idx == loss_index:
                attrs[LOSS_KEY] = UnitAttr()
        elif isinstance(d, GradAOTOutput) and isinstance(d.grad_of, ParamAOTInput):
            name = canonical.get(d.grad_of.target, d.grad_of.target.removeprefix(prefix))
            if name in grad_index:  # a tied weight: its gradients add up
                i = grad_index[name]
                add = create_aten_op("add.Tensor", {"self": results[i], "other": b.value(n)}, {},
                                     [results[i].type], {ipu.PLACE_KEY: ipu.PlacementAttr("bwd")})
                b.emit(add)
                results[i] = add.results[0]
                continue
            grad_index[name] = len(results)
            attrs = {GRAD_KEY: StringAttr(name)}
        elif isinstance(d, InputMutationAOTOutput) and isinstance(d.mutated_input, BufferAOTInput):
            attrs = {BUFFER_KEY: StringAttr(d.mutated_input.target.removeprefix(prefix))}
        elif isinstance(d, GradAOTOutput):
            continue  # gradient of a user input: not needed
        else:
            raise Error(f"unsupported graph output {d} (in-place update of a model input?)",
                        type="frontend")
        v = b.value(n)
        if not isinstance(v, SSAValue):
            raise Error(f"output {d} is not a tensor", type="frontend")
        results.append(v)
        res_attrs.append(DictionaryAttr(attrs))
    b.emit(func.ReturnOp(*results))

    ftype = func.FunctionType.from_lists([a.type for a in b.block.args], [r.type for r in results])
    from xdsl.dialects.builtin import ArrayAttr

    fn = func.FuncOp("main", ftype, Region(b.block), arg_attrs=ArrayAttr(b.arg_attrs),
                     res_attrs=ArrayAttr(res_attrs))
    return TracedGraph(ModuleOp([fn]), params, buffers, num_inputs, num_outputs, loss_index, consts,
                       out_spec=getattr(joint, "out_spec", None))
