"""torch.nn.Module -> graph IR (a `func.func @main` of aten.* and ipu.* ops).

Graphs come from `joint_trace.trace_joint`: make_fx traces the model run
functionally on fake tensors (and, in training, `torch.autograd.grad` of its
loss) into one functional ATen graph holding forward and backward, with
core-ATen decompositions, whose inputs and outputs carry descriptors
(parameter, buffer, user input; mutated input, user output, gradient). This
is the recipe of torch's aot_autograd without aot_autograd, whose import
loads torch.compile (~2 s of a cold compile); `no_compiler.py` lets torch's
tracing run without loading it. Those descriptors become
argument / result attributes:

    {tilefx.param = "fc.weight"}  {tilefx.buffer = "bn.running_mean"}
    {tilefx.input = 0}            {tilefx.const = "_tensor_constant0"}
    {tilefx.output = 0}           {tilefx.grad = "fc.weight"}

A constant also carries its value (`tilefx.value`, dialects/const_value.py).
The loss output is marked `tilefx.loss`; the seed fed to its backward is an
`aten.full` of ones marked `tilefx.loss_seed` (the loss-scaling pass finds it
there). The backward starts from the loss alone: other outputs feed it
nothing (a zero tangent would add only zeros).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import operator
from dataclasses import dataclass, field

import numpy as np
import torch
from torch._export.utils import _compiling_state_context
from torch.nn.attention import SDPBackend, sdpa_kernel
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    DictionaryAttr,
    FileLineColLoc,
    IntAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    TensorType,
    UnitAttr,
    bf16,
    i64,
)
from xdsl.ir import Attribute, Block, Region, SSAValue

from tilefx.errors import Error, set_text, wrapping
from tilefx.dialects import ipu
from tilefx.dialects.aten import ATEN_SCHEMAS, create_aten_op
from tilefx.dialects.const_value import const_attrs
from tilefx.dialects.aten_schema import Schema
from tilefx.lowering import aten_kernels
from tilefx.lowering.call_spec import CallSpec, CallWith, bind_call
from tilefx.lowering.joint_trace import (BufferInput, GradOutput, InputMutation, LossSeed, ParamInput, PlainInput,
                                         PlainOutput, trace_joint)
from tilefx.lowering.dtensor_lookup import prime as prime_dtensor_lookup
from tilefx.lowering.no_compiler import without_compiler
from tilefx.lowering.mixed_precision import PromoteMixedHalf
from tilefx.lowering.model_state import MetaAsFake, TensorAttributes
from tilefx.lowering.static_ops import static_ops
from tilefx.lowering.tensor_ids import TensorIds
from tilefx.lowering.find_loss import loss_or_error
from tilefx.lowering.trace_locations import (data_dependent, located, location_of, module_of, quiet_meta_failures,
                                             traceback_line, traceback_location)
from tilefx.lowering.tracing_state import (GradientOutputs, ModuleScope, SourceLocations, Tracing, end_begin_blocks,
                                          node_meta_kept, start_tracing, uses_begin_block)
from tilefx.dialects.names import MODULE_META_KEY, AVAILABLE_MEMORY_KEY, MULTICONV_KEY, MULTICONV_META_KEY, NAME_KEY
from tilefx.dialects.names import ATTRIBUTES_KEY, ATTRIBUTES_META_KEY
from tilefx.dialects.names import BLOCK_META_KEY, IPU_META_KEY, AUTOCAST_KEY, AUTOCAST_META_KEY, BUFFER_KEY, GRAD_KEY, INPUT_KEY, LOSS_KEY, LOSS_SEED_KEY, MUTATED_INPUT_KEY, OUTPUT_KEY, PARAM_KEY, UPCAST_INPUT_KEY, UPCAST_INPUT_META_KEY

_TORCH_TO_NP = {
    torch.float32: np.float32, torch.float16: np.float16, torch.float64: np.float64,
    torch.int64: np.int64, torch.int32: np.int32, torch.int16: np.int16, torch.int8: np.int8,
    torch.bool: np.bool_, torch.uint8: np.uint8,
    torch.bfloat16: np.float32,  # held as float32 rounded to bf16 precision (docs/ir.md)
}


def np_dtype_of(dtype: torch.dtype) -> np.dtype:
    if dtype not in _TORCH_TO_NP:
        kind = "complex numbers are" if dtype.is_complex else f"tensors of dtype {dtype} are"
        raise Error(f"{kind} not supported on the IPU (supported: float32, float16, bfloat16, "
                    "float64, int64, int32, int16, int8, uint8, bool)", type="frontend")
    return np.dtype(_TORCH_TO_NP[dtype])


def tensor_type_of(val) -> TensorType:
    from tilefx.dialects.aten import tensor_type

    if val is None:
        return tensor_type([0], np.float32)
    if not isinstance(val, torch.Tensor):  # a SymInt/number result (sym_size, item)
        return tensor_type([], np.int64 if isinstance(val, (int, torch.SymInt, bool)) else np.float32)
    if val.dtype == torch.bfloat16:
        return TensorType(bf16, list(val.shape))
    return tensor_type(list(val.shape), np_dtype_of(val.dtype))


def to_numpy(t: torch.Tensor) -> np.ndarray:
    if t.device.type == "meta":  # no values: a read-only zero view of the shape, no memory
        return np.broadcast_to(np.zeros((), np.float32 if t.dtype == torch.bfloat16 else np_dtype_of(t.dtype)),
                               tuple(t.shape))
    return t.detach().cpu().numpy().copy() if t.dtype != torch.bfloat16 else t.float().numpy()


def _ir_dtype(dtype: torch.dtype):
    """A ScalarType property: a numpy dtype, or the IR type bf16 (no numpy equivalent)."""
    return bf16 if dtype == torch.bfloat16 else np_dtype_of(dtype)


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
    out_consts: dict[int, object] = field(default_factory=dict)  # non-tensor outputs by index
    # trailing outputs that are gradients anchored with poptorch's Options.anchorTensor
    # (api/anchors.py), not the model's: its executor sets them aside
    anchor_outputs: int = 0
    # parameters, buffers and constants the model holds on the meta device: shapes
    # without values (a model built for sizing only; see model_state.MetaAsFake)
    meta_tensors: list[str] = field(default_factory=list)
    # the call passed or the model returned transformers caches: the outputs
    # are (the model's outputs, the tensors the caches gained) and these the
    # caches' states after the call (CallWith.cache_states, for restore_caches)
    cache_states: list | None = None


START_BLOCK = ipu.START_BLOCK


class _LayerWatch:
    """Module hooks active while tracing: restart the BeginBlock state at each
    forward of the root module (the tracer runs it more than once), and note
    the layers (modules with parameters) that run outside every block after
    the first block was seen (PopTorch: every layer must be inside a Block)."""

    def __init__(self, model: torch.nn.Module, prefix: str = ""):
        # paths as the user knows them: without the tracing wrapper's `prefix`
        self.paths: dict[torch.nn.Module, str] = {}
        for n, m in model.named_modules():
            if prefix and not n:
                continue  # the tracing wrapper itself
            self.paths.setdefault(m, "" if n == prefix.rstrip(".") else n.removeprefix(prefix))
        self.names = {m: n or type(m).__name__ for m, n in self.paths.items()}
        self.root = model
        ModuleScope.stack = []
        self.seen_block = False
        self.outside: list[str] = []
        self.running: list[str] = []  # the modules whose forward is running, outermost first
        self.saved_stacks: list = []
        self.handles = [
            model.register_forward_pre_hook(lambda m, a: self.restart(), prepend=True),
            # a BeginBlock annotation ends with the forward: backward nodes get
            # their block from their forward node, not from the last BeginBlock
            model.register_forward_hook(lambda m, a, out: end_begin_blocks()),
            torch.nn.modules.module.register_module_forward_pre_hook(self.layer),
            torch.nn.modules.module.register_module_forward_hook(self.layer_done),
        ]

    def restart(self) -> None:
        end_begin_blocks()
        start_tracing()
        self.seen_block = False
        self.outside = []
        self.running = self.running[:1]  # the root's own pre-hook ran before this one
        self.saved_stacks = self.saved_stacks[:1]

    def layer_done(self, module, args, out) -> None:
        ModuleScope.pop()
        if self.running:
            self.running.pop()
        if self.saved_stacks:
            self._set_module_stack(self.saved_stacks.pop())

    @staticmethod
    def _set_module_stack(stack) -> None:
        meta = torch.fx.traceback.current_meta
        if stack is None:
            meta.pop("nn_module_stack", None)
        else:
            meta["nn_module_stack"] = stack

    def where(self) -> str:
        """The module running now (after a failure: the one that failed)."""
        return self.running[-1] if self.running else "<top level>"

    def layer(self, module, args) -> None:
        path = self.paths.get(module)
        self.running.append(f"{path or '<root>'} ({type(module).__name__})" if path is not None
                            else type(module).__name__)
        # nodes traced inside this module carry its path (node.meta["nn_module_stack"],
        # as dynamo records it), so errors and reports can name it
        old = torch.fx.traceback.current_meta.get("nn_module_stack")
        self.saved_stacks.append(old)
        if path is not None:
            self._set_module_stack({**(old or {}), path or "<root>": (path, type(module))})
        # PopTorch's op names: the module's attribute name as a name scope
        ModuleScope.push((self.paths.get(module) or "").rsplit(".", 1)[-1])
        custom = torch.fx.traceback.current_meta.get("custom") or {}
        if BLOCK_META_KEY in custom or IPU_META_KEY in custom:
            self.seen_block = True
        elif self.seen_block and module in self.names and \
                any(True for _ in module.parameters(recurse=False)):
            self.outside.append(f"{self.names[module]} ({type(module).__name__})")

    def remove(self) -> None:
        ModuleScope.stack = []
        torch.fx.traceback.current_meta.get("custom", {}).pop(MODULE_META_KEY, None)
        for h in self.handles:
            h.remove()


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
                v = _ir_dtype(v)
            props[a.name] = v
    return operands, props


def _multiconv_count_error(option: str, n: int, convs: str, node) -> Error:
    return Error(f"MultiConv: {option} has {n} values for a multi-convolution of {convs} convolutions: "
                 "give one value for all of them or one per convolution", type="frontend",
                 location=location_of(node) if node is not None else None)


class _Builder(TensorIds):
    def __init__(self, gm: torch.fx.GraphModule, descs: dict, loss_index: int | None,
                 has_blocks: bool):
        self.gm = gm
        self.values: dict = {}  # fx node -> SSAValue or list of SSAValue
        self.block = self.top = Block()
        self.arg_attrs: list[DictionaryAttr] = []
        self.loss_index = loss_index
        self.has_blocks = has_blocks
        self.seen_block = False
        self.start_seqs: set[int] = set()
        self.multiconv_seen: dict[int, int] = {}  # MultiConv group -> convolutions seen
        self.multiconv_sizes: dict[int, dict[str, int]] = {}  # group -> per-convolution option counts
        self.printed_ids: dict[int, str] = {}  # autograd seq_nr -> id of an untitled forward print
        self.loops, self.in_loop = _find_loops(list(gm.graph.nodes))

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

    def add_const(self, node, name: str, value: np.ndarray, has_value: bool) -> SSAValue:
        """A lifted constant, its value on the argument unless it is on the meta device."""
        return self.add_arg(node, const_attrs(name, value if has_value else None,
                                              tensor_type_of(node.meta.get("val"))))

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
        if node in self.in_loop:
            return  # emitted into its ipu.for region when the loop's end is reached
        if node in self.loops:
            self.loop(node)
            return
        if target is operator.getitem:
            src, idx = node.args
            self.values[node] = self.values[src][idx]
            return
        if target is torch.ops.aten._local_scalar_dense.default and not node.users:
            return  # a constant tensor read on the host (a slice bound `t[s:s + 2]`): the trace used its value
        try:
            self.convert(node)
        except Error as e:
            if "(from module" in str(e):
                raise located(e, location_of(node))
            raise Error(f"{e.message if hasattr(e, 'message') else e} (in {node.target}, from module "
                        f"{module_of(node)})", type="frontend", location=location_of(node)) from None
        except Exception as e:  # never an internal KeyError/IndexError/... for a user's model
            raise Error(f"cannot convert {node.target} (from module {module_of(node)}): "
                        f"{type(e).__name__}: {e}", type="frontend", location=location_of(node)) from e

    def convert(self, node) -> None:
        target = node.target
        val = node.meta.get("val")
        if isinstance(val, (list, tuple)):
            rtypes = [tensor_type_of(v) for v in val]
        elif val is None and not node.users:  # an op without results (`_assert_async`)
            rtypes = []
        else:
            rtypes = [tensor_type_of(val)]
        attrs = {ipu.PLACE_KEY: self.place(node)}
        flag = (node.meta.get("custom") or {}).get(AUTOCAST_META_KEY)
        if flag is not None:
            from xdsl.dialects.builtin import BoolAttr

            attrs[AUTOCAST_KEY] = BoolAttr.from_bool(bool(flag))
        if (node.meta.get("custom") or {}).get(UPCAST_INPUT_META_KEY):
            from xdsl.dialects.builtin import UnitAttr

            attrs[UPCAST_INPUT_KEY] = UnitAttr()
        self.annotate(node, attrs)
        ns = getattr(target, "namespace", None)
        if ns == "tilefx":
            op = self.custom_op(node, rtypes, attrs)
        elif ns == "aten":
            name = str(target).removeprefix("aten.")
            schema = ATEN_SCHEMAS.get(name)
            if schema is None:
                raise Error(f"unsupported operation aten::{name} (from module {module_of(node)})",
                            type="frontend", location=location_of(node))
            if name == "as_strided.default":
                _check_as_strided_view(node)
            operands, props = _schema_args(node, schema)
            operands = {k: self.operand(v, val) for k, v in operands.items()}
            if name in ("_linalg_det.default", "_linalg_slogdet.default") and \
                    not node.args[0].meta["val"].is_contiguous():
                # torch factors A^T of a contiguous A, A itself otherwise, and the traced
                # backward solves with that LU; the kernel factors its operand's transpose
                operands["A"] = self.matrix_transposed(operands["A"], attrs)
            if name in ("index.Tensor", "index_put.default") and None in operands["indices"]:
                self.values[node] = self.sliced_index(name, operands, props, rtypes[0], attrs)
                return
            try:
                op = create_aten_op(name, operands, props, rtypes, attrs)
            except (ValueError, TypeError) as e:
                raise Error(f"cannot convert aten::{name} (from module {module_of(node)}): {e}",
                            type="frontend", location=location_of(node)) from e
        else:
            what = f"a custom operator of the '{ns}' library, whose body tilefx cannot see" if ns else ""
            raise Error(f"unsupported operation {target}{' (' + what + ')' if what else ''} (from module "
                        f"{module_of(node)})", type="frontend", location=location_of(node))
        loc = location_of(node)
        if loc:
            file, _, line = loc.rpartition(":")
            op.location = FileLineColLoc(StringAttr(file), IntAttr(int(line)), IntAttr(0))
        self.emit(op)
        results = list(op.results)
        self.values[node] = results if isinstance(val, (list, tuple)) else results[0] if results else None

    def matrix_transposed(self, x: SSAValue, attrs) -> SSAValue:
        """x with its last two dimensions swapped (an aten.permute)."""
        shape = list(x.type.get_shape())
        dims = list(range(len(shape) - 2)) + [len(shape) - 1, len(shape) - 2]
        op = create_aten_op("permute.default", {"self": x}, {"dims": dims},
                            [TensorType(x.type.element_type, [shape[d] for d in dims])], attrs)
        self.emit(op)
        return op.results[0]

    def sliced_index(self, name, operands, props, rtype, attrs) -> SSAValue:
        """x[:, idx] (a None among the indices: a full slice) as permute, an
        index over leading dimensions only, and the permute back: the IR's
        index operands are tensors, never None (numpy's placement rule: the
        broadcast index dimensions go where the first index was when the
        indices are adjacent, else in front)."""
        x, idx = operands["self"], list(operands["indices"])
        shape = list(x.type.get_shape())
        idx += [None] * (len(shape) - len(idx))
        pos = [i for i, v in enumerate(idx) if v is not None]
        rest = [i for i, v in enumerate(idx) if v is None]
        at = pos[0] if pos == list(range(pos[0], pos[-1] + 1)) else 0
        index_shape = list(np.broadcast_shapes(*[tuple(idx[i].type.get_shape()) for i in pos]))
        nb, rest_shape = len(index_shape), [shape[i] for i in rest]
        # z (indexed, B first) -> result order: rest[:at] + B + rest[at:]
        to_result = [nb + j for j in range(at)] + list(range(nb)) + [nb + j for j in range(at, len(rest))]
        elem = x.type.element_type

        def permute(v, dims):
            if dims == list(range(len(dims))):
                return v
            vshape = list(v.type.get_shape())
            op = create_aten_op("permute.default", {"self": v}, {"dims": dims},
                                [TensorType(v.type.element_type, [vshape[d] for d in dims])], attrs)
            self.emit(op)
            return op.results[0]

        xp = permute(x, pos + rest)
        tensors = [idx[i] for i in pos]
        if name == "index.Tensor":
            op = create_aten_op(name, {"self": xp, "indices": tensors}, {},
                                [TensorType(elem, index_shape + rest_shape)], attrs)
            self.emit(op)
            return permute(op.results[0], to_result)
        result_shape = [list(index_shape + rest_shape)[d] for d in to_result]
        values = operands["values"]
        if list(values.type.get_shape()) != result_shape:
            ex = create_aten_op("expand.default", {"self": values}, {"size": result_shape},
                                [TensorType(values.type.element_type, result_shape)], attrs)
            self.emit(ex)
            values = ex.results[0]
        values = permute(values, [to_result.index(d) for d in range(len(to_result))])
        op = create_aten_op(name, {"self": xp, "indices": tensors, "values": values}, props,
                            [xp.type], attrs)
        self.emit(op)
        back = pos + rest
        return permute(op.results[0], [back.index(d) for d in range(len(back))])

    def custom_op(self, node, rtypes, attrs):
        name = node.target._opname
        a = [self.value(x) for x in node.args]
        if name == "identity_loss":
            return ipu.IdentityLossOp.build(operands=[a[0]], result_types=rtypes,
                                            properties={"reduction": StringAttr(a[1])}, attributes=attrs)
        if name == "nop":
            return ipu.NopOp.build(operands=[a[0]], result_types=rtypes, attributes=attrs)
        if name == "print_tensor":  # (x, title, print_gradient, *format): see api/ops.py
            from tilefx.dialects.irutil import from_py

            fmt = from_py(dict(zip(ipu.PRINT_FORMAT_DEFAULTS, a[3:])))
            title = a[1] or self.print_title(node)
            return ipu.PrintTensorOp.build(operands=[a[0]], result_types=rtypes,
                                           properties={"title": StringAttr(title), "format": fmt},
                                           attributes=attrs)
        if name == "set_available_memory":
            from xdsl.dialects.builtin import FloatAttr, f64

            return ipu.SetAvailableMemoryOp.build(operands=[a[0]], result_types=rtypes,
                                                  properties={"proportion": FloatAttr(a[1], f64)},
                                                  attributes=attrs)
        if name == "dynamic_slice":
            return ipu.DynamicSliceOp.build(
                operands=[a[0], a[1]], result_types=rtypes, attributes=attrs,
                properties={"dim": IntegerAttr(a[2], i64), "size": IntegerAttr(a[3], i64),
                            "step": IntegerAttr(a[4], i64)})
        if name == "dynamic_update":
            return ipu.DynamicUpdateOp.build(
                operands=[a[0], a[1], a[2]], result_types=rtypes, attributes=attrs,
                properties={"dim": IntegerAttr(a[3], i64), "size": IntegerAttr(a[4], i64)})
        if name == "recomputation_checkpoint":
            return ipu.RecomputationCheckpointOp.build(operands=[a[0]], result_types=rtypes,
                                                       attributes=attrs)
        if name == "ctc_beam_search_decoder":
            return ipu.CtcBeamSearchDecoderOp.build(
                operands=[a[0], a[1]], result_types=rtypes, attributes=attrs,
                properties={k: IntegerAttr(v, i64) for k, v in
                            zip(("blank", "beam_width", "top_paths"), a[2:5])})
        if name in ("ctc_loss", "ctc_loss_grad"):
            from xdsl.dialects.builtin import BoolAttr

            cls = ipu.CtcLossOp if name == "ctc_loss" else ipu.CtcLossGradOp
            n = 4 if name == "ctc_loss" else 5
            return cls.build(operands=a[:n], result_types=rtypes, attributes=attrs,
                             properties={"blank": IntegerAttr(a[n], i64),
                                         "zero_infinity": BoolAttr.from_bool(a[n + 1])})
        if name == "custom_op":
            from tilefx.dialects.irutil import from_py

            props = {"op_name": StringAttr(a[1]), "domain": StringAttr(a[2]),
                     "domain_version": IntegerAttr(a[3], i64)}
            if a[4] != "{}":
                props["op_attributes"] = from_py(json.loads(a[4]))
            return ipu.CustomOp.build(operands=[a[0]], result_types=[rtypes], attributes=attrs,
                                      properties=props)
        if name == "serialized_matmul":
            from xdsl.dialects.builtin import BoolAttr

            return ipu.SerializedMatmulOp.build(
                operands=[a[0], a[1]], result_types=rtypes, attributes=attrs,
                properties={"mode": StringAttr(a[2]), "factor": IntegerAttr(a[3], i64),
                            "keep_precision": BoolAttr.from_bool(a[4])})
        raise Error(f"unsupported operation tilefx::{name}")

    def check_multiconvs(self) -> None:
        """Each MultiConv option given per convolution has one value per
        convolution of its group (fewer are caught as the convolutions come)."""
        for group, sizes in self.multiconv_sizes.items():
            for option, n in sizes.items():
                if n != self.multiconv_seen[group]:
                    raise _multiconv_count_error(option, n, str(self.multiconv_seen[group]), None)

    def annotate(self, node, attrs: dict) -> None:
        """`ipu.name` (module path, NameScope, op), a poptorch.Attribute's
        `ipu.attributes` and a MultiConv's `ipu.multiconv`."""
        custom = node.meta.get("custom") or {}
        parts = [p for p in custom.get(MODULE_META_KEY, "").split("/") if p]
        if parts:
            op = getattr(node.target, "__name__", str(node.target)).split(".")[0]
            attrs[NAME_KEY] = StringAttr("/".join(parts + [op]))
        if custom.get(ATTRIBUTES_META_KEY):
            from tilefx.dialects.irutil import from_py

            attrs[ATTRIBUTES_KEY] = from_py(custom[ATTRIBUTES_META_KEY])
        mc = custom.get(MULTICONV_META_KEY)
        if mc is not None and node.target is torch.ops.aten.convolution.default:
            from tilefx.dialects.irutil import from_py
            from xdsl.dialects.builtin import FloatAttr, f64

            fwd = node.meta.get("partitioner_tag") != "is_backward"
            index = self.multiconv_seen.get(mc["group"], 0)
            if fwd:
                self.multiconv_seen[mc["group"]] = index + 1
                self.multiconv_sizes[mc["group"]] = mc.get("sizes") or {}
                for option, n in self.multiconv_sizes[mc["group"]].items():
                    if index >= n:
                        raise _multiconv_count_error(option, n, f"more than {n}", node)
            attrs[MULTICONV_KEY] = from_py({"group": mc["group"], "plan": mc["plan"]})
            amps = mc.get("amps")
            if amps and fwd:
                attrs[AVAILABLE_MEMORY_KEY] = FloatAttr(amps[index] if len(amps) > 1 else amps[0], f64)

    def loop(self, end) -> None:
        """Build `ipu.for` from a for_loop's traced body (the nodes between
        its begin and end markers that depend on the loop's inputs)."""
        begin, body = self.loops[end]
        inits = [self.value(x) for x in begin.args[0]]
        region_block = Block(arg_types=[v.type for v in inits])
        outer, self.block = self.block, region_block
        self.values[begin] = list(region_block.args)
        try:
            for n in body:
                self.in_loop.discard(n)
                self.call(n)
            yields = [self.value(x) for x in end.args[0]]
        finally:
            self.block = outer
        region_block.add_op(ipu.YieldOp.build(operands=[yields]))
        # values from outside the body become explicit loop-invariant arguments
        invariants: list[SSAValue] = []
        inner: dict[SSAValue, SSAValue] = {}
        for op in region_block.walk():
            for i, v in enumerate(op.operands):
                if v.owner is region_block or region_block.is_ancestor(v.owner):
                    continue
                if v not in inner:
                    invariants.append(v)
                    inner[v] = region_block.insert_arg(v.type, len(region_block.args))
                op.operands[i] = inner[v]
        attrs = {ipu.PLACE_KEY: self.place(end)}
        self.annotate(end, attrs)
        op = ipu.ForOp.build(operands=[inits, invariants], result_types=[[v.type for v in inits]],
                             properties={"count": IntegerAttr(int(end.args[2]), i64)},
                             regions=[Region(region_block)], attributes=attrs)
        self.emit(op)
        self.values[end] = list(op.results)

    def loss_seed(self, node) -> None:
        """The ones the backward of the loss starts from, marked for the loss-scaling pass."""
        val = node.meta["val"]
        attrs: dict[str, Attribute] = {ipu.PLACE_KEY: ipu.PlacementAttr("bwd"), LOSS_SEED_KEY: UnitAttr()}
        op = create_aten_op("full.default", {}, {"size": list(val.shape), "fill_value": 1.0,
                                                 "dtype": _ir_dtype(val.dtype)},
                            [tensor_type_of(val)], attrs)
        self.emit(op)
        self.values[node] = op.results[0]


def _check_as_strided_view(node) -> None:
    """as_strided is kept where it is a view of a contiguous tensor at storage
    offset 0 (the executor takes the elements in row-major order); elsewhere it
    depends on memory layout the IR does not have."""
    src = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
    if src is None or not src.is_contiguous() or src.storage_offset() != 0:
        raise Error("unsupported operation aten::as_strided.default on a non-contiguous tensor "
                    f"(from module {module_of(node)}): call .contiguous() first", type="frontend")


def _find_loops(nodes: list) -> tuple[dict, set]:
    """Each for_loop's end marker -> (begin marker, body nodes in order): the
    nodes that depend on the loop's inputs and feed its outputs. A value of
    the body used after the loop is an error (only the outputs leave it)."""
    begin_op = getattr(torch.ops.tilefx, "for_begin", None)
    if begin_op is None:
        return {}, set()
    order = {n: i for i, n in enumerate(nodes)}
    loops, in_loop = {}, set()
    for begin in nodes:
        if begin.op != "call_function" or begin.target is not begin_op.default:
            continue
        ends = [u for g in begin.users for u in g.users if u.target is torch.ops.tilefx.for_end.default]
        if not ends:
            raise Error("for_loop: the loop's outputs are not used", type="frontend")
        end = ends[0]
        if begin in in_loop or end in in_loop:
            raise Error("for_loop: loops inside a for_loop body are not supported", type="frontend")
        reach, stack = set(), list(begin.users)
        while stack:
            n = stack.pop()
            if n is end or n in reach:
                continue
            reach.add(n)
            stack.extend(n.users)
        feeds, stack = set(), [a for a in end.all_input_nodes]
        while stack:
            n = stack.pop()
            if n in feeds or n is begin:
                continue
            feeds.add(n)
            stack.extend(n.all_input_nodes)
        escaping = [n for n in reach if n not in feeds]
        if escaping:
            raise Error(f"for_loop: {escaping[0].name} is computed in the loop body but used outside it; "
                        "only the body's outputs leave the loop", type="frontend")
        body = sorted(reach, key=order.__getitem__)
        loops[end] = (begin, body)
        in_loop.update(body)
        in_loop.add(begin)
    return loops, in_loop


@contextlib.contextmanager
def _mkldnn_off():
    """torch.backends.mkldnn.flags(enabled=False) without its TF32 warning."""
    was = torch._C._get_mkldnn_enabled()
    torch._C._set_mkldnn_enabled(False)
    try:
        yield
    finally:
        torch._C._set_mkldnn_enabled(was)


def _forward_arg_names(model: torch.nn.Module) -> list[str]:
    """The forward's positional parameter names, for the IR's input arguments."""
    try:
        params = inspect.signature(model.forward).parameters.values()
    except (TypeError, ValueError):
        return []
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def trace(model: torch.nn.Module, args: tuple, training: bool,
          upcast_inputs: frozenset[int] = frozenset(), call: CallSpec | None = None) -> TracedGraph:
    """Trace `model` called with the tensors `args` (micro-batch shaped) into
    the graph IR. `call` says how they make the model's arguments (nesting,
    keywords, constants; default: positional); the inputs in `upcast_inputs`
    are fp16 and cast to fp32 inside the graph. With fp16 inputs, ops that
    take one dtype promote fp16 meeting fp32 (`mixed_precision.py`)."""
    aten_kernels.install()  # the graph IR this makes is verified by torch's rules and run on ATen's kernels
    if call is None:
        call = bind_call(None, tuple(args), {})[0]
    prime_dtensor_lookup()  # before any mode is on: torch's DTensor check without importing it
    half_inputs = any(isinstance(a, torch.Tensor) and a.dtype == torch.float16 for a in args)
    model, prefix = CallWith(model, call, upcast_inputs), "inner."
    requested = list(GradientOutputs.requested) if training else []
    Tracing.on = True
    frozen = TensorAttributes(model)
    metas = MetaAsFake(model, tuple(args))
    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(node_meta_kept())  # first in, last out: after every annotation closed
            stack.enter_context(frozen)
            stack.enter_context(metas)  # after `frozen`: its meta tensor attributes too
            args = metas.args
            stack.enter_context(torch.fx.traceback.preserve_node_meta())
            stack.enter_context(sdpa_kernel([SDPBackend.MATH]))
            stack.enter_context(static_ops())
            # what torch.export sets while it traces: torch.compiler.is_compiling()
            # is True, so libraries take their traceable paths instead of asking
            # data-dependent questions (transformers' mask shortcuts, checks)
            stack.enter_context(_compiling_state_context())
            # RNNs decompose to matmuls and pointwise ops, not to oneDNN's fused layer
            stack.enter_context(_mkldnn_off())
            stack.enter_context(quiet_meta_failures())
            stack.enter_context(SourceLocations())
            if half_inputs:  # inside SourceLocations: its casts carry the user's line too
                stack.enter_context(PromoteMixedHalf())
            stack.enter_context(without_compiler())
            if not training:
                stack.enter_context(torch.no_grad())
            try:
                watch = _LayerWatch(model, prefix)
                try:
                    joint = trace_joint(model, tuple(args), training, loss_or_error, requested,
                                        fake_mode=metas.fake_mode)
                finally:
                    watch.remove()
            except Error as e:  # raised in the model's code (a tilefx call in forward): say in which module
                where = watch.where() if watch.running else ""  # (not raised in a module: PopTorch's text alone)
                if where and where not in str(e):
                    set_text(e, f"{e} (in module {where})")
                raise located(e, traceback_location(e))
            except Exception as e:  # torch's own tracing failures
                inner = e
                while inner is not None and not isinstance(inner, Error):
                    inner = inner.__cause__ or inner.__context__
                if inner is not None:
                    raise located(inner, traceback_location(e)) from None
                dynamic = data_dependent(e, watch.where())
                if dynamic is not None:
                    raise located(dynamic, traceback_location(e)) from e
                raise located(wrapping(
                    e, f"tracing the model failed: {type(e).__name__}: {e} (in module "
                    f"{watch.where()}{traceback_line(e)})", type="frontend"), traceback_location(e)) from e
            finally:
                end_begin_blocks()
    finally:
        Tracing.on = False

    gm = joint.graph_module
    nodes = list(gm.graph.nodes)
    out_node = nodes[-1]
    out_descs = out_node.meta["desc"]
    outs = out_node.args[0]
    loss_index = joint.loss_index
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
    input_names = call.tensor_names() if call is not None else _forward_arg_names(model)
    grad_index: dict[str, int] = {}
    num_inputs = 0
    for node in nodes:
        if node.op == "placeholder":
            d = node.meta["desc"]
            if isinstance(d, ParamInput):
                name = canonical.get(d.target, d.target.removeprefix(prefix))
                if name in param_args:  # a tied weight: one argument for all its names
                    b.values[node] = param_args[name]
                    continue
                params.append(name)
                param_args[name] = b.add_arg(node, {PARAM_KEY: StringAttr(name)})
            elif isinstance(d, BufferInput) and d.target in frozen.values:  # a constant
                name = d.target.removeprefix(prefix)
                consts[name] = to_numpy(frozen.values[d.target])
                b.add_const(node, name, consts[name], frozen.values[d.target].device.type != "meta")
            elif isinstance(d, BufferInput):
                buffers.append(d.target.removeprefix(prefix))
                b.add_arg(node, {BUFFER_KEY: StringAttr(buffers[-1])})
            elif isinstance(d, PlainInput):
                num_inputs = max(num_inputs, d.idx + 1)
                arg = b.add_arg(node, {INPUT_KEY: IntegerAttr(d.idx, i64)})
                if d.idx < len(input_names) and SSAValue.is_valid_name(input_names[d.idx]):
                    arg.name_hint = input_names[d.idx]  # the forward's own name (tilefx-run --inputs)
            else:
                raise Error(f"unsupported graph input {d}", type="frontend")
        elif node.op == "get_attr":
            name = str(node.target)
            consts[name] = to_numpy(getattr(gm, name))
            b.add_const(node, name, consts[name], getattr(gm, name).device.type != "meta")
        elif node.op == "call_function" and isinstance(node.meta.get("desc"), LossSeed):
            b.loss_seed(node)
        elif node.op == "call_function":
            b.call(node)

    b.check_multiconvs()
    # PopTorch user guide, "Multi-IPU execution strategies": all layers must be declared
    # inside a Block scope (BeginBlock has no such rule: later layers join the last one)
    if watch.outside and not uses_begin_block(model):
        raise Error("No active Block: once blocks are in use, every layer must be inside a Block: "
                    f"{', '.join(dict.fromkeys(watch.outside))} ran outside every block",
                    type="frontend")
    results, res_attrs = [], []
    num_outputs = 0
    out_consts: dict[int, object] = {}
    first_extra = 1 + max((d.idx for d in out_descs if isinstance(d, PlainOutput)), default=-1)
    extra: dict[int, SSAValue] = {}  # requested gradients by output index
    for d, n in zip(out_descs, outs):
        if isinstance(d, PlainOutput) and not isinstance(n, torch.fx.Node):
            num_outputs = max(num_outputs, d.idx + 1)
            out_consts[d.idx] = n  # None or a Python value the model returned
            continue
        if n is None:
            continue
        if isinstance(d, PlainOutput):
            num_outputs = max(num_outputs, d.idx + 1)
            attrs: dict[str, Attribute] = {OUTPUT_KEY: IntegerAttr(d.idx, i64)}
            if d.idx == loss_index:
                attrs[LOSS_KEY] = UnitAttr()
        elif isinstance(d, GradOutput) and isinstance(d.grad_of, ParamInput):
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
            if name in requested and n is not None:
                extra[first_extra + requested.index(name)] = b.value(n)
        elif isinstance(d, InputMutation) and isinstance(d.mutated_input, BufferInput) \
                and d.mutated_input.target in frozen.values:
            # a tensor attribute changed in forward: the change is not kept
            # (PopTorch user guide, 4.8 "PyTorch buffers")
            continue
        elif isinstance(d, InputMutation) and isinstance(d.mutated_input, BufferInput):
            attrs = {BUFFER_KEY: StringAttr(d.mutated_input.target.removeprefix(prefix))}
        elif isinstance(d, InputMutation) and isinstance(d.mutated_input, PlainInput):
            # an in-place or out= write to a user input: the functional graph
            # returns the new value, the executor copies it into the caller's tensor
            attrs = {MUTATED_INPUT_KEY: IntegerAttr(d.mutated_input.idx, i64)}
        elif isinstance(d, GradOutput):
            if isinstance(d.grad_of, PlainInput) and d.grad_of.idx in requested and n is not None:
                extra[first_extra + requested.index(d.grad_of.idx)] = b.value(n)
            continue  # gradient of a user input: returned only when requested
        else:
            raise Error(f"unsupported graph output {d} (in-place update of a model input?)",
                        type="frontend")
        v = b.value(n)
        if not isinstance(v, SSAValue):
            raise Error(f"output {d} is not a tensor", type="frontend")
        results.append(v)
        res_attrs.append(DictionaryAttr(attrs))
    missing = [r for i, r in enumerate(requested) if first_extra + i not in extra]
    if missing:
        raise Error(f"no gradient for {', '.join(map(str, missing))}: the loss does not depend on it "
                    "(or it is not a trained parameter / a float input)", type="frontend")
    for idx, v in sorted(extra.items()):
        results.append(v)
        res_attrs.append(DictionaryAttr({OUTPUT_KEY: IntegerAttr(idx, i64)}))
        num_outputs = max(num_outputs, idx + 1)
    b.emit(func.ReturnOp(*results))

    ftype = func.FunctionType.from_lists([a.type for a in b.block.args], [r.type for r in results])
    from xdsl.dialects.builtin import ArrayAttr

    fn = func.FuncOp("main", ftype, Region(b.block), arg_attrs=ArrayAttr(b.arg_attrs),
                     res_attrs=ArrayAttr(res_attrs))
    return TracedGraph(ModuleOp([fn]), params, buffers, num_inputs, num_outputs, loss_index, consts,
                       out_spec=getattr(joint, "out_spec", None), out_consts=out_consts,
                       meta_tensors=[n.removeprefix(prefix) for n in metas.names],
                       cache_states=model.cache_states)
