"""popart.Builder: build an ONNX ModelProto op by op (PopART's Builder API).

    builder = popart.Builder()
    x = builder.addInputTensor(popart.TensorInfo("FLOAT", [4, 2]), "x")
    w = builder.addInitializedInputTensor(np.ones([2, 3], np.float32), "w")
    y = builder.aiOnnx.relu([builder.aiOnnx.matmul([x, w])])
    loss = builder.aiGraphcore.l1loss([y], 0.1)
    builder.addOutputTensor(y)
    proto = builder.getModelProto()

`aiOnnx` (opset 11 as in PopART, or `aiOnnxOpset6` ... `aiOnnxOpset20`) has
one method per ai.onnx operator, named in lower case; its parameters follow
PopART's generated signatures: the input list, `num_outputs` for operators
with optional outputs, the required attributes then the optional ones (each
group in alphabetical order), then `debugContext`. The ONNX schema (from the
`onnx` package) checks each attribute's name. `aiGraphcore` holds PopART's
own operators (`identityloss`, `l1loss`, `nllloss`, `gelu`, `scale`, ...).

Annotations are node attributes with PopART's names (`__ipu_number`,
`__pipeline_stage`, `__execution_phase`, `__available_memory_proportion`,
`__serialize_matmul_mode`/`_factor`, `__partials_type`); the ONNX frontend
turns them into the same block placement, `ipu.set_available_memory` and
`ipu.serialized_matmul` the PopTorch API produces.
"""

from __future__ import annotations

import contextlib
import enum

import numpy as np
import onnx
import onnx.defs
from onnx import TensorProto, helper, numpy_helper

from tilefx.dialects.ipu import is_proportion
from tilefx.dialects.names import (
    ONNX_AVAILABLE_MEMORY_ATTR,
    ONNX_EXECUTION_PHASE_ATTR,
    ONNX_IPU_ATTR,
    ONNX_PARTIALS_TYPE_ATTR,
    ONNX_PIPELINE_STAGE_ATTR,
    ONNX_SERIALIZE_FACTOR_ATTR,
    ONNX_SERIALIZE_MODE_ATTR,
)
from tilefx.lowering.onnx_ops import GRAPHCORE_DOMAIN
from tilefx.popart.errors import popart_exception
from tilefx.popart.logger import getLogger

_builder_log = getLogger("builder")

DEFAULT_OPSET = 10  # PopART's defaultAiOnnxOpset (builder.aiOnnx)

# PopART's data type names -> ONNX element types
DTYPES = {
    "FLOAT": TensorProto.FLOAT, "FLOAT16": TensorProto.FLOAT16, "DOUBLE": TensorProto.DOUBLE,
    "INT8": TensorProto.INT8, "INT16": TensorProto.INT16, "INT32": TensorProto.INT32,
    "INT64": TensorProto.INT64, "UINT8": TensorProto.UINT8, "UINT16": TensorProto.UINT16,
    "UINT32": TensorProto.UINT32, "UINT64": TensorProto.UINT64, "BOOL": TensorProto.BOOL,
    "BFLOAT16": TensorProto.BFLOAT16,
}
_NP_NAMES = {"float32": "FLOAT", "float16": "FLOAT16", "float64": "DOUBLE", "int8": "INT8",
             "int16": "INT16", "int32": "INT32", "int64": "INT64", "uint8": "UINT8", "uint16": "UINT16",
             "uint32": "UINT32", "uint64": "UINT64", "bool": "BOOL", "float": "FLOAT", "half": "FLOAT16"}


def dtype_name(dtype) -> str:
    """PopART's name ("FLOAT", ...) for a PopART name, a numpy name or a numpy dtype."""
    if isinstance(dtype, str):
        key = dtype.upper() if dtype.upper() in DTYPES else _NP_NAMES.get(dtype.lower())
        if key is None:
            raise popart_exception(f"unknown data type {dtype!r}: expected one of {', '.join(DTYPES)}")
        return key
    try:
        return _NP_NAMES[np.dtype(dtype).name]
    except (TypeError, KeyError):
        raise popart_exception(f"unsupported data type {dtype!r}") from None


class TensorInfo:
    """A tensor's data type and shape: TensorInfo("FLOAT", [2, 3]) or TensorInfo(np_array)."""

    def __init__(self, dtype_or_array, shape=None):
        if shape is None and isinstance(dtype_or_array, np.ndarray):
            shape, dtype_or_array = dtype_or_array.shape, dtype_or_array.dtype
        if shape is None:
            raise popart_exception("TensorInfo needs a data type and a shape")
        self._dtype = dtype_name(dtype_or_array)
        self._shape = [int(s) for s in shape]

    def shape(self) -> list[int]:
        return list(self._shape)

    def data_type(self) -> str:
        return self._dtype

    def data_type_lcase(self) -> str:
        return np.dtype(helper.tensor_dtype_to_np_dtype(DTYPES[self._dtype])).name

    def rank(self) -> int:
        return len(self._shape)

    def nelms(self) -> int:
        return int(np.prod(self._shape, dtype=np.int64))

    def nbytes(self) -> int:
        return self.nelms() * np.dtype(self.data_type_lcase()).itemsize

    @property
    def np_dtype(self) -> np.dtype:
        return np.dtype(self.data_type_lcase())

    def __eq__(self, other) -> bool:
        return isinstance(other, TensorInfo) and (self._dtype, self._shape) == (other._dtype, other._shape)

    def __repr__(self) -> str:
        return f"{self._dtype}   {self._shape}"


class ReductionType(enum.IntEnum):
    """How a loss reduces its elements (PopART's values)."""

    Sum = 0
    Mean = 1
    NoReduction = 2


def _op_types() -> dict[str, str]:
    return {s.name.lower(): s.name for s in onnx.defs.get_all_schemas_with_history() if s.domain == ""}


_OP_TYPES: dict[str, str] = {}
_LOGICAL = {"logical_and": "and", "logical_or": "or", "logical_xor": "xor", "logical_not": "not",
            "logical_if": "if"}


class _Opset:
    """builder.aiOnnx: one method per ai.onnx operator of an opset."""

    def __init__(self, builder: Builder, version: int):
        self._builder = builder
        self._version = version

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        if not _OP_TYPES:
            _OP_TYPES.update(_op_types())
        # PopART spells And/Or/Xor/Not logical_and/... (Python keywords)
        op_type = _OP_TYPES.get(_LOGICAL.get(name, name).lower())
        if op_type is None:
            raise AttributeError(f"aiOnnx has no operator {name!r}")
        try:
            schema = onnx.defs.get_schema(op_type, self._version, "")
        except onnx.defs.SchemaError:
            raise AttributeError(f"ai.onnx::{op_type} does not exist in opset {self._version}") from None
        if name == "constant":
            return self._constant
        return lambda *args, **kw: self._call(schema, args, kw)

    def _constant(self, value, debugContext: str = "", is_value_sized=False):
        arr = np.asarray(value)
        return self._builder._add_node("Constant", [], 1, {"value": numpy_helper.from_array(arr)},
                                       debugContext, self._version)[0]

    def _call(self, schema, args, kw):
        if not args:
            raise popart_exception(f"aiOnnx.{schema.name.lower()} needs its list of input tensors")
        inputs, rest = list(args[0]) if not isinstance(args[0], str) else [args[0]], list(args[1:])
        if not schema.min_input <= len(inputs) <= schema.max_input:
            most = "any number" if schema.max_input > 1000 else schema.max_input
            raise popart_exception(f"{schema.name} has invalid number of inputs {len(inputs)}: ai.onnx::"
                                   f"{schema.name} opset {self._version} takes {schema.min_input} to {most}")
        attrs = {k: v for k, v in schema.attributes.items() if k != "auto_pad" or "auto_pad" in kw}
        required = sorted(k for k, v in attrs.items() if v.required)
        optional = sorted(k for k, v in attrs.items() if not v.required)
        params = required + optional
        multi = any(o.option == onnx.defs.OpSchema.FormalParameterOption.Optional for o in schema.outputs) \
            or schema.outputs and schema.outputs[-1].option == onnx.defs.OpSchema.FormalParameterOption.Variadic
        if multi:
            params = ["num_outputs"] + params
        values = dict(kw)
        debug = values.pop("debugContext", values.pop("debugPrefix", ""))
        for i, v in enumerate(rest):
            if i < len(params) and not (isinstance(v, str) and params[i] != "num_outputs" and
                                         attrs.get(params[i]) is not None and
                                         attrs[params[i]].type != onnx.defs.OpSchema.AttrType.STRING):
                values[params[i]] = v
            elif isinstance(v, str) and i == len(rest) - 1:
                debug = v
            else:
                raise popart_exception(f"aiOnnx.{schema.name.lower()}: too many arguments "
                                       f"(parameters: inputs, {', '.join(params)}, debugContext)")
        n_out = int(values.pop("num_outputs", 1 if multi else len(schema.outputs)))
        if schema.name == "Split" and multi:
            n_out = max(n_out, len(values.get("split") or []))
        for k in values:
            if k not in attrs:
                raise popart_exception(f"aiOnnx.{schema.name.lower()}: unknown attribute {k!r} "
                                       f"(ai.onnx::{schema.name} opset {self._version} has: "
                                       f"{', '.join(sorted(attrs)) or 'none'})")
        onnx_attrs = {}
        for k, v in values.items():
            if v is None or (isinstance(v, (list, tuple)) and len(v) == 0):
                continue  # PopART's empty defaults: the attribute is absent
            if k == "to" and isinstance(v, str):
                v = DTYPES[dtype_name(v)]
            if isinstance(v, Builder):  # a subgraph (Loop's and Scan's body, If's branches)
                v = v._subgraph(self._builder, k)
            onnx_attrs[k] = v
        outs = self._builder._add_node(schema.name, inputs, n_out, onnx_attrs, debug, self._version)
        return outs if multi or len(schema.outputs) > 1 else outs[0]


class _AiGraphcore:
    """builder.aiGraphcore: PopART's own operators (domain ai.graphcore)."""

    def __init__(self, builder: Builder):
        self._b = builder

    def _node(self, op_type, args, attrs, debug):
        return self._b._add_node(op_type, list(args), 1, attrs, debug, 1, domain=GRAPHCORE_DOMAIN)[0]

    def identityloss(self, args, reduction=ReductionType.Mean, debugContext: str = ""):
        return self._node("IdentityLoss", args, {"reduction": int(reduction)}, debugContext)

    def l1loss(self, args, lambda_: float = 1.0, reduction=ReductionType.Mean, debugContext: str = "",
               **kw):
        lam = kw.pop("lambda", lambda_)
        return self._node("L1", args, {"lambda": float(lam), "reduction": int(reduction)}, debugContext)

    def nllloss(self, args, reduction=ReductionType.Mean, ignoreIndex=None,
                inputIsLogProbability: bool = False, debugContext: str = ""):
        attrs = {"reduction": int(reduction), "inputIsLogProbability": int(bool(inputIsLogProbability))}
        if ignoreIndex is not None:
            attrs["ignoreIndex"] = int(ignoreIndex)
        return self._node("Nll", args, attrs, debugContext)

    def gelu(self, args, debugContext: str = ""):
        """PopART's Gelu: the tanh approximation (poplibs); geluerf is the exact one."""
        return self._node("Gelu", args, {}, debugContext)

    def geluerf(self, args, debugContext: str = ""):
        return self._node("GeluErf", args, {}, debugContext)

    def ctcloss(self, args, reduction=ReductionType.Mean, blank: int = 0, outDataType: str = "UNDEFINED",
                zeroInfinity: bool = False, debugContext: str = ""):
        """CTC loss of [log_probs [T, N, C], targets [N, S], input_lengths [N], target_lengths [N]]
        (torch's nn.CTCLoss: Mean divides each item by its target length)."""
        return self._node("Ctc", args, {"reduction": int(reduction), "blank": int(blank),
                                        "zeroInfinity": int(bool(zeroInfinity))}, debugContext)

    def groupedgather(self, args, axis: int = 0, group_size: int = 1, debugContext: str = ""):
        """Gather within each group: data and indices have a leading group dimension."""
        return self._node("GroupedGather", args, {"axis": int(axis), "group_size": int(group_size)},
                          debugContext)

    def depthtospace(self, args, blocksize: int, mode: str = "DCR", debugContext: str = ""):
        return self._node("DepthToSpace", args, {"blocksize": int(blocksize), "mode": mode}, debugContext)

    def subsample(self, args, strides, debugContext: str = ""):
        """Every strides[d]-th element along each dimension d."""
        return self._node("Subsample", args, {"strides": [int(s) for s in strides]}, debugContext)

    def scale(self, args, scale: float, debugContext: str = ""):
        return self._node("Scale", args, {"scale": float(scale)}, debugContext)

    def detach(self, args, debugContext: str = ""):
        return self._node("Detach", args, {}, debugContext)

    def call(self, args, num_outputs: int, callee: Builder, debugContext: str = ""):
        """PopART's Call: run the subgraph `callee` (createSubgraphBuilder) on `args`,
        its inputs in order, giving its `num_outputs` outputs."""
        if not isinstance(callee, Builder):
            raise popart_exception("call: the callee must be a subgraph builder (createSubgraphBuilder)")
        graph = callee._subgraph(self._b, "callee", for_call=True)
        for what, given, has in (("input", len(args), len(graph.input)),
                                 ("output", int(num_outputs), len(graph.output))):
            if given != has:  # PopART's message
                raise popart_exception(f"For CallOp '{debugContext}', number of {what}s ({given}) does not "
                                       f"match that of the callee subgraph ({has})")
        return self._b._add_node("Call", list(args), int(num_outputs), {"callee": graph},
                                 debugContext, 1, domain=GRAPHCORE_DOMAIN)

    def printtensor(self, args, print_gradient: int = 1, debugContext: str = "", title: str = ""):
        return self._node("PrintTensor", args, {"print_gradient": int(print_gradient), "title": title},
                          debugContext)


def _elementwise(op_type: str):
    def method(self, args, debugContext: str = ""):
        return self._node(op_type, args, {}, debugContext)
    method.__name__ = op_type.lower()
    method.__doc__ = f"PopART's {op_type} (ai.graphcore)."
    return method


for _op in ("Swish", "Expm1", "Log1p", "Atan2", "Remainder", "Fmod", "Round"):
    setattr(_AiGraphcore, _op.lower(), _elementwise(_op))


class Builder:
    """Builds an ONNX model (PopART's Builder)."""

    def __init__(self, modelProtoOrFilename=None, opsets: dict | None = None):
        self._nodes: list[onnx.NodeProto] = []
        self._inputs: list[onnx.ValueInfoProto] = []
        self._initializers: dict[str, onnx.TensorProto] = {}
        self._outputs: list[str] = []
        self._ids: set[str] = set()
        self._producer: dict[str, onnx.NodeProto] = {}
        self._scope: list[str] = []
        self._context: dict[str, object] = {}
        self._opset = int((opsets or {}).get("ai.onnx", DEFAULT_OPSET))
        self._graph_name = "BuilderGraph"
        self._parent: Builder | None = None  # the enclosing builder of a subgraph builder
        self._uses_graphcore = False  # a subgraph holds ai.graphcore nodes
        self._from_parent: list[str] = []  # a subgraph's tensors of its parent (addInputTensorFromParentGraph)
        self.aiOnnx = _Opset(self, self._opset)
        self.aiGraphcore = _AiGraphcore(self)
        self.aiGraphcoreOpset1 = self.aiGraphcore  # the only ai.graphcore opset
        if modelProtoOrFilename is not None:
            self._load(modelProtoOrFilename)

    def _load(self, model) -> None:
        from tilefx.errors import Error
        from tilefx.lowering.from_onnx import load_model, opset_of

        try:
            proto = load_model(model)
        except Error as e:
            raise popart_exception(e.message) from None
        g = proto.graph
        self._opset = opset_of(proto)
        self.aiOnnx = _Opset(self, self._opset)
        self._initializers = {t.name: t for t in g.initializer}
        self._inputs = [i for i in g.input if i.name not in self._initializers]
        self._nodes = list(g.node)
        self._outputs = [o.name for o in g.output]
        self._ids = set(self._initializers) | {i.name for i in self._inputs} | \
            {o for n in g.node for o in n.output}
        self._producer = {o: n for n in g.node for o in n.output}

    def __getattr__(self, name: str):
        if name.startswith("aiOnnxOpset"):
            try:
                return _Opset(self, int(name.removeprefix("aiOnnxOpset")))
            except ValueError:
                pass
        raise AttributeError(f"'Builder' object has no attribute {name!r}")

    def reshape_const(self, aiOnnx, args, shape, debugContext: str = "") -> str:
        """PopART's Python helper: Reshape `args[0]` to `shape` through an int64
        Constant (ONNX Reshape takes its shape as a tensor, not an attribute)."""
        if not isinstance(args, (list, tuple)) or not args:
            raise popart_exception("reshape_const needs a list holding the tensor to reshape")
        new_shape = aiOnnx.constant(np.asarray(shape, dtype=np.int64), debugContext + "_const")
        return aiOnnx.reshape([args[0], new_shape], debugContext)

    # -- ids -----------------------------------------------------------
    def _unique(self, base: str) -> str:
        name = "/".join(self._scope + [base]) if self._scope else base
        if name not in self._ids:
            self._ids.add(name)
            return name
        k = 1
        while f"{name}/{k}" in self._ids:
            k += 1
        self._ids.add(f"{name}/{k}")
        return f"{name}/{k}"

    def _check(self, tensor: str, what: str) -> None:
        if tensor and tensor not in self._ids:
            raise popart_exception(f"{what}: no tensor {tensor!r} in the model")

    def _add_node(self, op_type, inputs, n_out, attrs, debug, version, domain=""):
        for t in inputs:
            self._check(t, f"{op_type}")
        if domain == "" and version > self._opset:
            self._opset = version
        base = debug or op_type
        outs = [self._unique(f"{base}:{i}") for i in range(n_out)]
        node = helper.make_node(op_type, list(inputs), outs, name=self._unique(base + "_node"),
                                domain=domain or None, **attrs)
        for key, value in self._context.items():
            node.attribute.append(helper.make_attribute(key, value))
        self._nodes.append(node)
        for o in outs:
            self._producer[o] = node
        _builder_log.trace("Adding %s.%s:%d to the graph (outputs %s)", domain or "ai.onnx", op_type, version,
                           ", ".join(outs))
        return outs

    # -- tensors -------------------------------------------------------
    def addInputTensor(self, tensorInfo, shape=None, debugContext: str = "") -> str:
        """An input fed by the session's IStepIO: (TensorInfo[, debugContext]) or (dtype, shape[, debugContext])."""
        if isinstance(tensorInfo, TensorInfo):
            if isinstance(shape, str):
                debugContext, shape = shape, None
            info = tensorInfo
        else:
            info = TensorInfo(tensorInfo, shape)
        name = self._unique(debugContext or "input")
        self._inputs.append(helper.make_tensor_value_info(name, DTYPES[info.data_type()], info.shape()))
        return name

    def addUntypedInputTensor(self, debugContext: str = "") -> str:
        """An input of a subgraph whose type its caller gives (a Loop's carried value, a
        Scan's slice); the main graph's inputs need their shapes."""
        if self._parent is None:
            raise popart_exception("addUntypedInputTensor: tilefx compiles static shapes; use addInputTensor "
                                   "(a subgraph builder's inputs may be untyped)")
        name = self._unique(debugContext or "input")
        self._inputs.append(helper.make_empty_tensor_value_info(name))
        return name

    # -- subgraphs -----------------------------------------------------
    def createSubgraphBuilder(self) -> Builder:
        """A builder for a graph nested in this one: the body of a Loop or Scan, or a
        branch of an If (`aiOnnx.loop([M, cond, *carried], num_outputs, body)`,
        `aiOnnx.scan(..., body=...)`, `aiOnnx.logical_if([cond], num_outputs,
        else_builder, then_builder)`). It sees this graph's tensors by name
        (addInputTensorFromParentGraph) and shares its tensor ids, so no name of the
        subgraph shadows one outside."""
        sub = Builder(opsets={"ai.onnx": self._opset})
        sub._parent, sub._ids, sub._graph_name = self, self._ids, "subgraph"
        return sub

    def addInputTensorFromParentGraph(self, tensorId: str) -> None:
        """Use a tensor of an enclosing graph in this subgraph: a Loop, Scan or If sees
        it as ONNX's outer scope; a Call takes it as an input of that name, after the
        others, as PopART counts it among the callee's inputs."""
        if self._parent is None:
            raise popart_exception("addInputTensorFromParentGraph: this builder is not a subgraph builder "
                                   "(createSubgraphBuilder makes one)")
        self._check(tensorId, "addInputTensorFromParentGraph")
        if tensorId not in self._from_parent:
            self._from_parent.append(tensorId)

    addInputTensorFromHigherScope = addInputTensorFromParentGraph

    def _subgraph(self, parent: Builder, attribute: str, for_call: bool = False) -> onnx.GraphProto:
        """This subgraph builder's graph, for `attribute` of a node `parent` adds (a
        Call's callee takes the parent's tensors it uses as inputs)."""
        if self._parent is None:
            raise popart_exception(f"{attribute}: a subgraph must come from createSubgraphBuilder(), not a "
                                   "top-level Builder")
        if not self._outputs:
            raise popart_exception(f"{attribute}: the subgraph {self._graph_name!r} has no outputs "
                                   "(addOutputTensor)")
        parent._opset = max(parent._opset, self._opset)
        if self._uses_graphcore or any(n.domain == GRAPHCORE_DOMAIN for n in self._nodes):
            parent._uses_graphcore = True
        inputs = self._inputs + ([helper.make_empty_tensor_value_info(t) for t in self._from_parent]
                                 if for_call else [])
        return helper.make_graph(self._nodes, self._graph_name, inputs,
                                 [helper.make_empty_tensor_value_info(o) for o in self._outputs],
                                 initializer=list(self._initializers.values()))

    def addInitializedInputTensor(self, initVal, debugContext: str = "") -> str:
        """A weight: trained by TrainingSession, read/written by weightsToHost/weightsFromHost."""
        arr = np.asarray(initVal, order="C")  # a 0-d value stays 0-d (ascontiguousarray gives [1])
        dtype_name(arr.dtype)
        name = self._unique(debugContext or "init_input")
        self._initializers[name] = numpy_helper.from_array(arr, name)
        return name

    def addOutputTensor(self, tensorId: str) -> None:
        self._check(tensorId, "addOutputTensor")
        if tensorId not in self._outputs:
            self._outputs.append(tensorId)

    # -- annotations ---------------------------------------------------
    def _annotate(self, key: str, args, what: str):
        """(tensorId, value): set on the op producing tensorId; (value): a context manager
        for the ops created inside (also usable as a plain call setting it from now on)."""
        if len(args) == 2:
            tensor, value = args
            self._set_on(tensor, key, value, what)
            return None
        (value,) = args
        return _Scope(self, key, value)

    def _set_on(self, tensor, key, value, what) -> None:
        tensors = tensor if isinstance(tensor, (set, list, tuple)) else [tensor]
        for t in tensors:
            self._check(t, what)
            node = self._producer.get(t)
            if node is None:
                raise popart_exception(f"{what}: tensor {t!r} is not produced by an op "
                                       "(inputs and weights take the placement of their users)")
            for a in list(node.attribute):
                if a.name == key:
                    node.attribute.remove(a)
            node.attribute.append(helper.make_attribute(key, value))

    def virtualGraph(self, *args):
        """Place ops on a virtual graph (an IPU): virtualGraph(tensorId, ipu) or `with virtualGraph(ipu):`."""
        return self._annotate(ONNX_IPU_ATTR, [*args[:-1], int(args[-1])], "virtualGraph")

    def pipelineStage(self, *args):
        return self._annotate(ONNX_PIPELINE_STAGE_ATTR, [*args[:-1], int(args[-1])], "pipelineStage")

    def executionPhase(self, *args):
        return self._annotate(ONNX_EXECUTION_PHASE_ATTR, [*args[:-1], int(args[-1])], "executionPhase")

    def setAvailableMemoryProportion(self, tensorIds, availableMemoryProportion: float) -> None:
        p = float(availableMemoryProportion)
        if not is_proportion(p):
            raise popart_exception(f"setAvailableMemoryProportion: {p} is not in (0, 1]")
        self._set_on(tensorIds, ONNX_AVAILABLE_MEMORY_ATTR, p, "setAvailableMemoryProportion")

    def setSerializeMatMul(self, tensorIds, mode: str, factor: int = 0, keep_precision: bool = False) -> None:
        modes = ("input_channels", "output_channels", "reducing_dim", "none")
        if mode not in modes:
            raise popart_exception(f"setSerializeMatMul: unknown mode {mode!r}: expected one of {modes}")
        for t in (tensorIds if isinstance(tensorIds, (set, list, tuple)) else [tensorIds]):
            node = self._producer.get(t)
            if node is None or node.op_type != "MatMul":
                raise popart_exception(f"setSerializeMatMul: tensor {t!r} is not the output of a MatMul")
        self._set_on(tensorIds, ONNX_SERIALIZE_MODE_ATTR, mode, "setSerializeMatMul")
        self._set_on(tensorIds, ONNX_SERIALIZE_FACTOR_ATTR, int(factor), "setSerializeMatMul")

    def setPartialsType(self, tensorId: str, partialsType: str) -> None:
        if partialsType.upper() not in ("FLOAT", "HALF"):
            raise popart_exception(f"setPartialsType: {partialsType!r} is not FLOAT or HALF")
        self._set_on(tensorId, ONNX_PARTIALS_TYPE_ATTR, partialsType.upper(), "setPartialsType")

    def getVirtualGraph(self, tensorId: str) -> int:
        return int(self._node_attr(tensorId, ONNX_IPU_ATTR, "getVirtualGraph"))

    def getPipelineStage(self, tensorId: str) -> int:
        return int(self._node_attr(tensorId, ONNX_PIPELINE_STAGE_ATTR, "getPipelineStage"))

    def getExecutionPhase(self, tensorId: str) -> int:
        return int(self._node_attr(tensorId, ONNX_EXECUTION_PHASE_ATTR, "getExecutionPhase"))

    def _node_attr(self, tensor, key, what):
        self._check(tensor, what)
        node = self._producer.get(tensor)
        for a in (node.attribute if node is not None else []):
            if a.name == key:
                return helper.get_attribute_value(a)
        raise popart_exception(f"{what}: tensor {tensor!r} has no such annotation")

    # -- node attributes (PopART's Builder API: a node named by its outputs) --
    def _node_of(self, nodeOutputNames, what: str):
        names = [nodeOutputNames] if isinstance(nodeOutputNames, str) else list(nodeOutputNames)
        if not names:
            raise popart_exception(f"{what}: no node outputs given")
        nodes = {id(self._producer.get(t)): self._producer.get(t) for t in names}
        if None in nodes.values() or len(nodes) != 1:
            raise popart_exception(f"{what}: no single node has the outputs {sorted(names)}")
        return next(iter(nodes.values()))

    def addNodeAttribute(self, attributeName: str, attributeValue, nodeOutputNames) -> None:
        """Add an attribute to the node producing `nodeOutputNames`; it must not have it yet."""
        node = self._node_of(nodeOutputNames, "addNodeAttribute")
        if any(a.name == attributeName for a in node.attribute):
            raise popart_exception(f"addNodeAttribute: node {node.name!r} already has attribute "
                                   f"{attributeName!r}")
        if isinstance(attributeValue, bool):
            attributeValue = int(attributeValue)
        node.attribute.append(helper.make_attribute(attributeName, attributeValue))

    def nodeHasAttribute(self, attributeName: str, nodeOutputNames) -> bool:
        node = self._node_of(nodeOutputNames, "nodeHasAttribute")
        return any(a.name == attributeName for a in node.attribute)

    def getAllNodeAttributeNames(self, nodeOutputNames) -> list[str]:
        return [a.name for a in self._node_of(nodeOutputNames, "getAllNodeAttributeNames").attribute]

    def removeNodeAttribute(self, attributeName: str, nodeOutputNames) -> None:
        """Remove an attribute the node producing `nodeOutputNames` has."""
        node = self._node_of(nodeOutputNames, "removeNodeAttribute")
        for a in list(node.attribute):
            if a.name == attributeName:
                node.attribute.remove(a)
                return
        raise popart_exception(f"removeNodeAttribute: node {node.name!r} has no attribute "
                               f"{attributeName!r}")

    def _typed_node_attr(self, attributeName, nodeOutputNames, kinds, what):
        node = self._node_of(nodeOutputNames, what)
        for a in node.attribute:
            if a.name == attributeName:
                if a.type not in kinds:
                    raise popart_exception(f"{what}: attribute {attributeName!r} of node {node.name!r} "
                                           f"is {onnx.AttributeProto.AttributeType.Name(a.type)}")
                value = helper.get_attribute_value(a)
                if isinstance(value, bytes):
                    return value.decode()
                if isinstance(value, list):
                    return [v.decode() if isinstance(v, bytes) else v for v in value]
                return value
        raise popart_exception(f"{what}: node {node.name!r} has no attribute {attributeName!r}")

    def getInt64NodeAttribute(self, attributeName: str, nodeOutputNames) -> int:
        return int(self._typed_node_attr(attributeName, nodeOutputNames, (onnx.AttributeProto.INT,),
                                         "getInt64NodeAttribute"))

    def getInt64VectorNodeAttribute(self, attributeName: str, nodeOutputNames) -> list[int]:
        return [int(v) for v in self._typed_node_attr(attributeName, nodeOutputNames, (
            onnx.AttributeProto.INTS,), "getInt64VectorNodeAttribute")]

    def getFloatNodeAttribute(self, attributeName: str, nodeOutputNames) -> float:
        return float(self._typed_node_attr(attributeName, nodeOutputNames, (onnx.AttributeProto.FLOAT,),
                                           "getFloatNodeAttribute"))

    def getFloatVectorNodeAttribute(self, attributeName: str, nodeOutputNames) -> list[float]:
        return [float(v) for v in self._typed_node_attr(attributeName, nodeOutputNames, (
            onnx.AttributeProto.FLOATS,), "getFloatVectorNodeAttribute")]

    def getStringNodeAttribute(self, attributeName: str, nodeOutputNames) -> str:
        return self._typed_node_attr(attributeName, nodeOutputNames, (onnx.AttributeProto.STRING,),
                                     "getStringNodeAttribute")

    def getStringVectorNodeAttribute(self, attributeName: str, nodeOutputNames) -> list[str]:
        return self._typed_node_attr(attributeName, nodeOutputNames, (onnx.AttributeProto.STRINGS,),
                                     "getStringVectorNodeAttribute")

    def getBoolNodeAttribute(self, attributeName: str, nodeOutputNames) -> bool:
        return bool(self._typed_node_attr(attributeName, nodeOutputNames, (onnx.AttributeProto.INT,),
                                          "getBoolNodeAttribute"))

    @contextlib.contextmanager
    def nameScope(self, name: str):
        self._scope.append(name)
        try:
            yield
        finally:
            self._scope.pop()

    def setGraphName(self, name: str) -> None:
        self._graph_name = name

    # -- the model -----------------------------------------------------
    def _proto(self, outputs_typed: bool = True) -> onnx.ModelProto:
        outs = [helper.make_empty_tensor_value_info(o) for o in self._outputs]
        graph = helper.make_graph(self._nodes, self._graph_name, self._inputs, outs,
                                  initializer=list(self._initializers.values()))
        opsets = [helper.make_opsetid("", self._opset)]
        if self._uses_graphcore or any(n.domain == GRAPHCORE_DOMAIN for n in self._nodes):
            opsets.append(helper.make_opsetid(GRAPHCORE_DOMAIN, 1))
        model = helper.make_model(graph, opset_imports=opsets, producer_name="tilefx.popart")
        if outputs_typed:
            typed = {}
            for o in self._outputs:
                with contextlib.suppress(popart_exception):
                    typed[o] = self._info(model, o)
            for vi in model.graph.output:
                if vi.name in typed:
                    info = typed[vi.name]
                    vi.CopyFrom(helper.make_tensor_value_info(vi.name, DTYPES[info.data_type()],
                                                              info.shape()))
        return model

    def getModelProto(self) -> bytes:
        """The serialized ONNX model (what InferenceSession / TrainingSession take)."""
        return self._proto().SerializeToString()

    def saveModelProto(self, filename: str) -> None:
        onnx.save(self._proto(), filename)

    def _info(self, model: onnx.ModelProto, tensor: str) -> TensorInfo:
        if tensor in self._initializers:
            arr = numpy_helper.to_array(self._initializers[tensor])
            return TensorInfo(arr.dtype, arr.shape)
        for i in self._inputs:
            if i.name == tensor:
                tt = i.type.tensor_type
                return TensorInfo(np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type)),
                                  [d.dim_value for d in tt.shape.dim])
        return tensor_info(model, tensor)

    def getTensorShape(self, tensorId: str) -> list[int]:
        self._check(tensorId, "getTensorShape")
        return self._info(self._proto(outputs_typed=False), tensorId).shape()

    def getTensorDtypeString(self, tensorId: str) -> str:
        """The tensor's type as PopART gives it (INT32 indices: popart_typed)."""
        self._check(tensorId, "getTensorDtypeString")
        model = self._proto(outputs_typed=False)
        return popart_typed(model, {tensorId: self._info(model, tensorId)})[tensorId].data_type_lcase()

    def getInputTensorIds(self) -> list[str]:
        return [i.name for i in self._inputs] + list(self._initializers)

    def getOutputTensorIds(self) -> list[str]:
        return list(self._outputs)

    def getValueTensorIds(self) -> list[str]:
        return [o for n in self._nodes for o in n.output]

    def getTrainableTensorIds(self) -> list[str]:
        return [n for n, t in self._initializers.items()
                if helper.tensor_dtype_to_np_dtype(t.data_type).kind == "f"]

    def isInitializer(self, tensorId: str) -> bool:
        return tensorId in self._initializers


class _Scope:
    """Sets an annotation on the ops created while it is active."""

    def __init__(self, builder: Builder, key: str, value):
        self.b, self.key, self.value = builder, key, value
        self.prev = builder._context.get(key)
        builder._context[key] = value  # a plain call applies from now on, as in PopART

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.prev is None:
            self.b._context.pop(self.key, None)
        else:
            self.b._context[self.key] = self.prev
        return False


def tensor_info(model: onnx.ModelProto, tensor: str, input_shapes: dict | None = None) -> TensorInfo:
    return tensor_infos(model, [tensor], input_shapes)[tensor]


def tensor_infos(model: onnx.ModelProto, tensors: list[str], input_shapes: dict | None = None) -> dict:
    """Tensors' types and shapes: ONNX shape inference, else by running the graph once
    on fake tensors with the ONNX frontend's operators (ai.graphcore ops, shapes given
    by InputShapeInfo)."""
    import torch

    from tilefx.errors import Error
    from tilefx.lowering.from_onnx import OnnxModule

    out: dict[str, TensorInfo] = {}
    if not input_shapes:
        try:
            inferred = onnx.shape_inference.infer_shapes(model)
            for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
                tt = vi.type.tensor_type
                if vi.name in tensors and tt.elem_type and tt.HasField("shape") and \
                        all(d.HasField("dim_value") for d in tt.shape.dim):
                    out[vi.name] = TensorInfo(np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type)),
                                              [d.dim_value for d in tt.shape.dim])
        except Exception:  # noqa: BLE001, S110  (inference gives up on custom domains: evaluate instead)
            pass
    rest = [t for t in tensors if t not in out]
    if rest:
        from torch._subclasses.fake_tensor import FakeTensorMode

        from tilefx.lowering.static_ops import static_ops

        what = ", ".join(map(repr, rest))
        try:
            m = OnnxModule(model, outputs=rest, input_shapes=input_shapes)
            # on fake tensors, with the tracer's static-shape swaps (F.ctc_loss): shapes
            # and types only, as the tracer computes them, so no input value can make
            # the probe fail where the program would not (zeros divide an integer Div
            # by 0; ones would index past a length-1 axis in a Gather)
            with torch.no_grad(), static_ops(), FakeTensorMode(allow_non_fake_inputs=True) as fake:
                values = m(*(fake.from_tensor(x) for x in m.example_inputs()))
                values = [(v.dtype, list(v.shape)) for v in values]
        except Error as e:
            raise popart_exception(f"cannot infer the shape of {what}: {e.message}") from None
        except Exception as e:  # noqa: BLE001  (torch's own, as a PopART error)
            raise popart_exception(f"cannot infer the shape of {what}: {type(e).__name__}: {e}") from None
        for t, (dtype, shape) in zip(rest, values):
            out[t] = TensorInfo(torch.empty(0, dtype=dtype).numpy().dtype, shape)
    return out


def popart_typed(model: onnx.ModelProto, infos: dict[str, TensorInfo]) -> dict[str, TensorInfo]:
    """`tensor_infos`' ONNX types as PopART reports them (the model itself keeps ONNX's)."""
    int32 = popart_int32_indices(model)
    return {t: TensorInfo(np.int32, i.shape()) if t in int32 and i.np_dtype == np.int64 else i
            for t, i in infos.items()}


# PopART's index outputs are INT32 where ONNX says INT64 (its ArgExtremaOp and TopKOp
# setup); the ONNX frontend computes them as ONNX does and sessions report and return
# them in PopART's type (the values are the same)
_INT32_INDEX_OUTPUTS = {"ArgMax": 0, "ArgMin": 0, "TopK": 1}
# operators whose output has their first input's type: an index tensor stays INT32 through them
_TYPE_OF_INPUT0 = {"Identity", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Transpose", "Expand",
                   "Slice", "Gather", "Tile"}


def popart_int32_indices(model: onnx.ModelProto) -> set[str]:
    """The tensors PopART types INT32 and ONNX INT64: ArgMax / ArgMin outputs and TopK
    indices, and what shape-only operators make of them."""
    out: set[str] = set()
    for n in model.graph.node:
        if n.domain not in ("", "ai.onnx"):
            continue
        k = _INT32_INDEX_OUTPUTS.get(n.op_type)
        if k is not None and len(n.output) > k and n.output[k]:
            out.add(n.output[k])
        elif n.op_type in _TYPE_OF_INPUT0 and n.input and n.input[0] in out:
            out.update(o for o in n.output[:1] if o)
    return out
