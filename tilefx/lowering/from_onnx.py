"""ONNX ModelProto -> graph IR (the same `func.func @main` the torch frontend builds).

How: `OnnxModule` is a torch.nn.Module that holds the graph's float
initializers as parameters (named by their ONNX names: "fc1.weight" is the
parameter `fc1.weight`) and whose forward runs the ONNX nodes with the torch
functions of `onnx_ops.py`. The torch frontend (`from_torch.trace`: make_fx
with core-ATen decompositions, `joint_trace.py`) then traces it, so an ONNX graph
becomes the same aten/ipu IR, with the same argument roles (`tilefx.param`
for initializers, `tilefx.buffer` for BatchNormalization running statistics,
`tilefx.input` for graph inputs), as a torch model. Training needs a backward:
it is the one torch's autograd derives from those torch functions, i.e. PyTorch's
autograd formulas for each ONNX operator; the training passes then run
unchanged.

Values known at compile time (constants, integer initializers, shapes and
what is computed from them only, as the legacy torch.onnx exporter emits for
Reshape targets) are folded while tracing with onnx's reference evaluator, so
shape arithmetic never reaches the IR. A folded value the graph uses as a
tensor (an LSTM's zero initial state made by Constant nodes, Gather indices)
becomes a `tilefx.const` argument carrying its value (`tilefx.value`,
docs/ir.md), so the IR tilefx-opt prints runs on the file's inputs and
initializers alone.

PopART's per-node annotations (`__ipu_number`, `__pipeline_stage`,
`__execution_phase`, `__available_memory_proportion`, matmul serialisation)
become the same block annotations and helper ops the PopTorch API produces.
"""

from __future__ import annotations

import math
import os

import numpy as np
import onnx
import torch
from onnx import helper, numpy_helper

from tilefx.dialects.names import (
    BLOCK_META_KEY,
    BUFFER_KEY,
    IPU_META_KEY,
    ONNX_AVAILABLE_MEMORY_ATTR,
    ONNX_EXECUTION_PHASE_ATTR,
    ONNX_IPU_ATTR,
    ONNX_PIPELINE_STAGE_ATTR,
    ONNX_SERIALIZE_FACTOR_ATTR,
    INPUT_KEY,
    ONNX_SERIALIZE_MODE_ATTR,
    PARAM_KEY,
)
from tilefx import limits
from tilefx.errors import Error
from tilefx.lowering import ipu_torch_ops, onnx_checks, onnx_control_flow, onnx_ops, onnx_unsigned
from tilefx.lowering.from_torch import TracedGraph, trace

_ANNOTATIONS = {ONNX_IPU_ATTR, ONNX_PIPELINE_STAGE_ATTR, ONNX_EXECUTION_PHASE_ATTR,
                ONNX_AVAILABLE_MEMORY_ATTR, ONNX_SERIALIZE_MODE_ATTR, ONNX_SERIALIZE_FACTOR_ATTR,
                "__serialize_matmul_precision", "__partials_type"}


_CHECK = ("Check that it is either a valid path to an existing onnx model file, or is a valid onnx "
          "ModelProto string.")  # PopART's words, which its model-loading tests compare


def load_model(model) -> onnx.ModelProto:
    """A ModelProto from a ModelProto, serialized bytes or a file path (whose
    external data files onnx.load reads from the file's directory)."""
    if isinstance(model, onnx.ModelProto):
        _no_external_data(model, "a ModelProto")
        return model
    try:
        if isinstance(model, (bytes, bytearray)):
            proto = onnx.load_model_from_string(bytes(model))
            _no_external_data(proto, "bytes")
            return proto
        if isinstance(model, (str, os.PathLike)):
            if not os.path.exists(model):
                # PopART reads a string that names no file as a serialized model: its message
                raise Error(f"Failed to load a ModelProto from the string {str(model)[:80]!r}. {_CHECK}",
                            type="frontend")
            return onnx.load(str(model))
    except Error:
        raise
    except Exception as e:  # noqa: BLE001  (protobuf's errors: whatever does not parse)
        what = f"{len(model)} bytes" if isinstance(model, (bytes, bytearray)) else repr(str(model)[:80])
        raise Error(f"Failed to load a ModelProto from the string ({what}; cannot read the ONNX model: "
                    f"{type(e).__name__}: {e}). {_CHECK}", type="frontend") from None
    raise Error(f"expected an ONNX ModelProto, its bytes or a file path, got {type(model).__name__}",
                type="frontend")


def _no_external_data(model: onnx.ModelProto, given_as: str) -> None:
    """Weights kept in external data files are found relative to the .onnx file:
    a model given as bytes (or a ModelProto loaded without them) has no directory
    to look in, and reading them relative to the working directory would be a guess."""
    from onnx.external_data_helper import uses_external_data

    tensors = list(model.graph.initializer) + [a.t for n in model.graph.node for a in n.attribute
                                               if a.type == onnx.AttributeProto.TENSOR]
    for t in tensors:
        if uses_external_data(t):
            location = next((e.value for e in t.external_data if e.key == "location"), "?")
            raise Error(f"tensor {t.name!r} keeps its data in the external file {location!r}, which cannot "
                        f"be found from a model given as {given_as} (external data is found relative to "
                        "the .onnx file): pass the model's file path instead, or load it with "
                        "onnx.load(path), which reads the external data", type="frontend")


def opset_of(model: onnx.ModelProto, domain: str = "") -> int:
    for o in model.opset_import:
        if o.domain in (domain, "ai.onnx" if domain == "" else domain):
            return int(o.version)
    return 1 if domain else 9


def _attrs(node: onnx.NodeProto) -> dict:
    out = {}
    for a in node.attribute:
        if a.name in _ANNOTATIONS:
            continue
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode()
        elif isinstance(v, onnx.TensorProto):
            v = numpy_helper.to_array(v)
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [x.decode() for x in v]
        out[a.name] = v
    return out


def annotations_of(node: onnx.NodeProto) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute if a.name in _ANNOTATIONS}


def _shape_of(vi: onnx.ValueInfoProto) -> tuple[list[int], np.dtype]:
    from onnx.helper import tensor_dtype_to_np_dtype

    tt = vi.type.tensor_type
    dims = []
    shown = [str(d.dim_value) if d.HasField("dim_value") else d.dim_param or "?" for d in tt.shape.dim]
    for d, text in zip(tt.shape.dim, shown):
        if not d.HasField("dim_value") or d.dim_value < 0:
            # tilefx compiles static shapes; PopART's own message (its dim_param tests compare it)
            raise Error(f"Input tensor '{vi.name}' must be specified in InputShapeInfo, as it has shape "
                        f"[{', '.join(shown)}], which uses an unknown value '{text}'.", type="frontend")
        dims.append(int(d.dim_value))
    return dims, np.dtype(tensor_dtype_to_np_dtype(tt.elem_type))


def check_supported(model: onnx.ModelProto) -> None:
    """Every node's operator has a conversion, else an Error naming op type, node and opset
    (the nodes of If's branches and of Loop's and Scan's bodies too)."""
    for i, node in enumerate(all_nodes(model.graph)):
        if not onnx_ops.supported(node.domain, node.op_type):
            domain = node.domain or "ai.onnx"
            raise Error(f"unsupported ONNX operator {domain}::{node.op_type} (node "
                        f"{node.name or '#' + str(i)!r}, opset {opset_of(model, node.domain)})",
                        type="frontend")
        if node.op_type == "Constant" and any(a.name == "sparse_value" for a in node.attribute):
            # PopART's message; onnx's evaluator cannot fold it and tilefx has no sparse tensors
            raise Error("The Constant op attribute 'sparse_value' is not supported.", type="frontend")


def all_nodes(graph: onnx.GraphProto):
    """The graph's nodes and, after each node with subgraphs (If, Loop, Scan), theirs
    (recursively)."""
    for node in graph.node:
        yield node
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from all_nodes(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for sub in a.graphs:
                    yield from all_nodes(sub)


class OnnxModule(torch.nn.Module):
    """An ONNX graph as a torch module (see the module docstring).

    `outputs` are the tensors forward returns (default: the graph outputs);
    any tensor of the graph may be listed. `training` selects the training
    behaviour of BatchNormalization and Dropout. `input_shapes` gives the
    shape and dtype of inputs the graph leaves dynamic.
    """

    def __init__(self, model, outputs: list[str] | None = None, training: bool = False,
                 input_shapes: dict[str, tuple[list[int], np.dtype]] | None = None,
                 gradient_probes: list[str] = ()):
        super().__init__()
        # tensors whose gradient a caller wants: forward takes one more argument per
        # probe, added to the tensor where it is made, so the gradient of that
        # argument is the tensor's (PopART's gradient anchors of activations)
        self.probes = list(gradient_probes)
        self.proto = load_model(model)
        onnx_checks.check_model(self.proto)
        check_supported(self.proto)
        onnx_unsigned.check_boundary(self.proto)
        self._uint64: dict = {}  # the unsigned values of a forward: id -> (tensor, width) (onnx_unsigned)
        g = self.proto.graph
        self.opset = opset_of(self.proto)
        self.graphcore_opset = opset_of(self.proto, onnx_ops.GRAPHCORE_DOMAIN)
        self.opsets = {"": self.opset, **{o.domain: int(o.version) for o in self.proto.opset_import
                                           if o.domain not in ("", "ai.onnx")}}
        self.is_training = training
        inits = {t.name: t for t in g.initializer}
        self.input_names = [i.name for i in g.input if i.name not in inits]
        given = input_shapes or {}
        for name in given:
            if name not in self.input_names:
                raise Error(f"the input shape given for {name!r} names no input of the graph "
                            f"(inputs: {', '.join(self.input_names)})", type="frontend")
        self.input_info = {i.name: (list(given[i.name][0]), np.dtype(given[i.name][1])) if i.name in given
                           else _shape_of(i) for i in g.input if i.name not in inits}
        for name, (dims, dtype) in self.input_info.items():  # before an example input of it is made
            limits.TENSOR_BYTES.check(math.prod(dims) * dtype.itemsize, f"the input {name!r} of shape {dims}")
        stats = {n.input[k] for n in all_nodes(g) if n.op_type == "BatchNormalization"
                 for k in (3, 4) if len(n.input) > k}
        self.path: dict[str, str] = {}  # ONNX initializer name -> module attribute path
        self.static: dict[str, np.ndarray] = {}
        # initializers read as numbers while tracing (a Pad value, Range's bounds, a
        # Dropout ratio, ...) stay numpy: as parameters they are traced tensors
        compile_time = {n.input[k] for n in all_nodes(g) for k in onnx_ops.STATIC_INPUTS.get(n.op_type, ())
                        if len(n.input) > k and n.input[k]}
        compile_time |= {i for n in all_nodes(g) if n.domain in ("", "ai.onnx")
                         and n.op_type in onnx_ops.STATIC_ONLY for i in n.input if i}
        for name, t in inits.items():
            arr = numpy_helper.to_array(t).copy()
            if arr.dtype.kind != "f" or name in compile_time:
                self.static[name] = arr
                continue
            tensor = torch.from_numpy(np.asarray(arr, order="C"))  # ascontiguousarray makes 0-d 1-d
            if name in stats:
                self._attach(name, tensor, buffer=True)
            else:
                self._attach(name, torch.nn.Parameter(tensor), buffer=False)
        self.known = set(inits) | set(self.input_names) | {o for n in g.node for o in n.output}
        self.outputs = list(outputs) if outputs is not None else [o.name for o in g.output]
        for o in self.outputs:
            if o not in self.known:
                raise Error(f"tensor {o!r} is not in the ONNX graph", type="frontend")

    def _attach(self, name: str, tensor, buffer: bool) -> None:
        parts = name.split(".")
        owner = self
        try:
            for p in parts[:-1]:
                sub = owner._modules.get(p)
                if sub is None:
                    if not p or hasattr(owner, p):
                        raise KeyError(p)
                    sub = torch.nn.Module()
                    owner.add_module(p, sub)
                owner = sub
            leaf = parts[-1]
            if not leaf or hasattr(owner, leaf):
                raise KeyError(leaf)
            (owner.register_buffer if buffer else owner.register_parameter)(leaf, tensor)
            self.path[name] = name
        except KeyError:
            path = f"onnx_{len(self.path)}"
            (self.register_buffer if buffer else self.register_parameter)(path, tensor)
            self.path[name] = path

    def tilefx_cache_identity(self) -> str:
        """What the executable cache keys this module by: the graph itself (every
        ONNX model is this same class), its outputs, probes and mode."""
        import hashlib

        graph = onnx.GraphProto()
        graph.CopyFrom(self.proto.graph)
        for t in graph.initializer:  # weights by name, shape and type: their values are not the program
            if t.name in self.path:
                for f in ("raw_data", "float_data", "double_data", "int32_data", "int64_data"):
                    t.ClearField(f)
        h = hashlib.sha256(graph.SerializeToString(deterministic=True))
        h.update(repr((self.outputs, self.probes, self.is_training, self.input_info)).encode())
        return h.hexdigest()

    def tensor(self, name: str) -> torch.Tensor:
        """The parameter or buffer holding initializer `name`."""
        owner = self
        *mods, leaf = self.path[name].split(".")
        for m in mods:
            owner = owner._modules[m]
        return getattr(owner, leaf)

    @property
    def weight_names(self) -> list[str]:
        return list(self.path)

    def forward(self, *inputs):
        if len(inputs) != len(self.input_names) + len(self.probes):
            raise Error(f"the ONNX graph has {len(self.input_names)} inputs "
                        f"({', '.join(self.input_names)}), got {len(inputs) - len(self.probes)}",
                        type="frontend")
        env: dict = dict(self.static)
        for name in self.path:
            env[name] = self.tensor(name)
        for name, x in zip(self.input_names, inputs):
            # a scalar input arrives with a length-1 dimension to split batches along
            env[name] = x.reshape(()) if not self.input_info[name][0] and x.dim() == 1 else x
        probes = dict(zip(self.probes, inputs[len(self.input_names):]))
        self._uint64 = {}
        for node in self.proto.graph.node:
            self._run(node, env)
            for name in node.output:
                if name in probes:
                    value = _as_tensor(env[name])
                    env[name] = value + probes[name].reshape(value.shape).to(value.dtype)
        for o in self.outputs:
            if isinstance(env[o], list):
                raise Error(f"tensor {o!r} is a sequence of tensors, which a session cannot return "
                            "(ConcatFromSequence makes it one tensor)", type="frontend")
            bits_wide = onnx_unsigned.width(env[o], self._uint64)
            if bits_wide is not None:
                raise Error(f"tensor {o!r} is uint{bits_wide}, which tilefx carries only inside the graph "
                            "(as int64): anchor an int64 cast of it", type="frontend")
        return tuple(_as_tensor(env[o]) for o in self.outputs)

    def _run(self, node: onnx.NodeProto, env: dict) -> None:
        ins = [env[i] if i else None for i in node.input]
        if (node.domain in ("", "ai.onnx") and node.op_type in onnx_control_flow.CONTROL_FLOW) or (
                node.domain == onnx_ops.GRAPHCORE_DOMAIN and node.op_type in onnx_control_flow.GRAPHCORE_CONTROL_FLOW):
            outs = self._run_subgraphs(node, ins, env)
            for out, value in zip(node.output, outs):
                if out:
                    env[out] = value
            return
        if node.domain in ("", "ai.onnx") and node.op_type in onnx_control_flow.SEQUENCE_OPS:
            try:
                env[node.output[0]] = onnx_control_flow.SEQUENCE_OPS[node.op_type](node, ins, _attrs(node))
            except (RuntimeError, ValueError, TypeError, IndexError) as e:
                raise Error(f"cannot convert ONNX node {node.name or node.op_type!r} ({node.op_type}): "
                            f"{type(e).__name__}: {e}", type="frontend") from None
            return
        at = _attrs(node)
        if node.op_type == "Split" and "num_outputs" not in at:
            at["_num_outputs"] = len(node.output)
        if node.op_type in ("MaxPool", "Dropout"):  # Indices, mask: only when the graph asks for it
            at["_num_outputs"] = len([o for o in node.output if o])
        if node.op_type == "Constant" or (
                node.op_type not in RANDOM_OPS
                and all(x is None or isinstance(x, np.ndarray) for x in ins) and node.domain == ""
                and node.op_type != "Shape"):
            outs = _fold(node, ins, self.opsets)
        elif node.domain in ("", "ai.onnx") and any(onnx_unsigned.is_unsigned(x, self._uint64) for x in ins):
            outs, bits_wide = onnx_unsigned.run(node, ins, at, lambda xs: self._call(node, xs, at), self._uint64)
            if bits_wide is not None:
                onnx_unsigned.mark(outs, self._uint64, bits_wide)
        elif node.domain in ("", "ai.onnx") and node.op_type == "Cast" and at.get("to") in onnx_unsigned.WIDTHS:
            bits_wide = onnx_unsigned.WIDTHS[at["to"]]
            outs = onnx_unsigned.cast_to_unsigned(onnx_ops._t(ins[0]), bits_wide)
            onnx_unsigned.mark([outs], self._uint64, bits_wide)
        else:
            outs = self._call(node, ins, at)
        outs = outs if isinstance(outs, tuple) else (outs,)
        for name, v in zip(node.output, outs):
            if name:
                env[name] = v

    def _run_subgraphs(self, node: onnx.NodeProto, ins: list, env: dict) -> list:
        """If, Loop, Scan and PopART's Call: their subgraphs run by this module, seeing `env`."""
        def run_body(node, graph, feeds):
            return self._subgraph(node, graph, feeds, env)

        if node.op_type == "If":
            return self._run_if(node, ins, env)
        if node.op_type == "Call":
            return onnx_control_flow.run_call(node, ins, run_body)
        if node.op_type == "Loop":
            return onnx_control_flow.run_loop(node, ins, run_body)
        return onnx_control_flow.run_scan(node, ins, _attrs(node), self.opset, run_body)

    def _run_if(self, node: onnx.NodeProto, ins: list, env: dict) -> list:
        """If. A condition known at compile time (the TorchScript exporter's tests of
        shapes, e.g. Squeeze when a dimension is 1) picks the branch, whose nodes run
        inline, seeing the outer scope. A condition computed from the graph inputs runs
        both branches (ONNX branches have no side effects) and selects each output with
        it, which needs the branches' outputs to have equal shapes and types."""
        name, cond = node.name or "If", ins[0]
        if cond is None or (np.asarray(cond).size if not isinstance(cond, torch.Tensor) else cond.numel()) != 1:
            raise Error(f"ONNX node {name!r} (If): the condition must have one element", type="frontend")
        branches = {a.name: a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH}
        if not isinstance(cond, torch.Tensor):
            taken = "then_branch" if bool(np.asarray(cond).reshape(-1)[0]) else "else_branch"
            values = self._branch(node, branches[taken], env)
        else:
            then, other = (self._branch(node, branches[k], env) for k in ("then_branch", "else_branch"))
            values = []
            for k, (t, e) in enumerate(zip(then, other)):
                t, e = _as_tensor(t), _as_tensor(e)
                if t.shape != e.shape or t.dtype != e.dtype:
                    raise Error(f"ONNX node {name!r} (If): its condition depends on graph inputs, so both "
                                "branches run and each output is selected, which needs equal shapes and "
                                f"types; output {k} is {t.dtype} {list(t.shape)} in then_branch and "
                                f"{e.dtype} {list(e.shape)} in else_branch", type="frontend")
                values.append(torch.where(cond.reshape(()).to(torch.bool), t, e))
        return values

    def _branch(self, node: onnx.NodeProto, branch: onnx.GraphProto, env: dict) -> list:
        """The outputs of an If branch."""
        if len(branch.output) != len(node.output):
            raise Error(f"ONNX node {node.name or 'If'!r} (If): the branch {branch.name!r} has "
                        f"{len(branch.output)} outputs, the node {len(node.output)}", type="frontend")
        return self._subgraph(node, branch, {}, env)

    def _subgraph(self, node: onnx.NodeProto, graph: onnx.GraphProto, feeds: dict, env: dict) -> list:
        """The outputs of a subgraph (an If branch, a Loop or Scan body) run with its
        inputs bound to `feeds`, in a scope that sees the enclosing one (`env`)."""
        scope = dict(env)
        scope.update({t.name: numpy_helper.to_array(t).copy() for t in graph.initializer})
        scope.update(feeds)
        for inner in graph.node:
            self._run(inner, scope)
        missing = [v.name for v in graph.output if v.name not in scope]
        if missing:
            raise Error(f"ONNX node {node.name or node.op_type!r} ({node.op_type}): its subgraph "
                        f"{graph.name!r} outputs {missing[0]!r}, which nothing in it or around it makes",
                        type="frontend")
        return [scope[v.name] for v in graph.output]

    def _call(self, node, ins, at):
        ann = annotations_of(node)
        meta = {}
        ipu = ann.get(ONNX_IPU_ATTR)
        stage = ann.get(ONNX_PIPELINE_STAGE_ATTR)
        phase = ann.get(ONNX_EXECUTION_PHASE_ATTR)
        if stage is not None:
            meta[BLOCK_META_KEY] = f"stage{stage}"
        elif phase is not None:
            meta[BLOCK_META_KEY] = f"phase{phase}"
        elif ipu is not None:
            meta[BLOCK_META_KEY] = f"ipu{ipu}"
        if ipu is not None:
            meta[IPU_META_KEY] = int(ipu)
        ctx = torch.fx.traceback.annotate(meta) if meta else _null()
        with ctx:
            try:
                if node.domain == onnx_ops.GRAPHCORE_DOMAIN:
                    if node.op_type == "PrintTensor" and not at.get("title"):
                        at = {**at, "title": node.input[0]}  # PopART prints the tensor's id
                    out = onnx_ops.GRAPHCORE_OPS[node.op_type](ins, at, self.graphcore_opset)
                elif node.op_type in onnx_ops.TRAINING_OPS:
                    out = onnx_ops.TRAINING_OPS[node.op_type](ins, at, self.opset, self.is_training)
                elif node.op_type == "MatMul" and ONNX_SERIALIZE_MODE_ATTR in ann:
                    out = _serialized(ins, ann)
                else:
                    out = onnx_ops.OPS[node.op_type](ins, at, self.opset)
                if ONNX_AVAILABLE_MEMORY_ATTR in ann and isinstance(out, torch.Tensor):
                    out = ipu_torch_ops.set_available_memory(out, float(ann[ONNX_AVAILABLE_MEMORY_ATTR]))
            except Error as e:
                raise Error(f"ONNX node {node.name or node.op_type!r} ({node.op_type}): {e.message}",
                            type="frontend") from None
            except (RuntimeError, ValueError, TypeError, IndexError, KeyError) as e:
                raise Error(f"cannot convert ONNX node {node.name or node.op_type!r} ({node.op_type}, "
                            f"opset {self.opset}): {type(e).__name__}: {e}", type="frontend") from None
        return out

    def example_inputs(self) -> list[torch.Tensor]:
        """Zeros of each graph input's shape and type (for tracing)."""
        return [torch.from_numpy(np.zeros(s, d)) for s, d in self.input_info.values()]


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _serialized(ins, ann):
    modes = {"input_channels": "input_channels", "output_channels": "output_channels",
             "reducing_dim": "reducing_dim", "none": "none"}
    mode = ann[ONNX_SERIALIZE_MODE_ATTR]
    mode = mode.decode() if isinstance(mode, bytes) else mode
    factor = int(ann.get(ONNX_SERIALIZE_FACTOR_ATTR, 1))
    if mode not in modes or mode == "none":
        return torch.matmul(onnx_ops._t(ins[0]), onnx_ops._t(ins[1]))
    return ipu_torch_ops.serialized_matmul(onnx_ops._t(ins[0]), onnx_ops._t(ins[1]), mode, factor, False)


# never evaluated at compile time, even on constant inputs: each run draws anew
RANDOM_OPS = ("Dropout", "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Bernoulli")


# deprecated operators folded as the operator that replaced them (and its first opset):
# opset 9's Scatter is opset 11's ScatterElements (torch.onnx.export writes it for index_fill)
_FOLD_AS = {"Scatter": ("ScatterElements", 11)}


def _fold(node: onnx.NodeProto, ins: list, opsets: dict[str, int]):
    """Evaluate a node whose inputs are all known at compile time, at the opset
    versions of its model (`opsets`: domain -> version; an opset-11 Unsqueeze
    takes its axes as an attribute, an opset-13 one as an input)."""
    from onnx.reference import ReferenceEvaluator

    op_type = node.op_type
    onnx_checks.check_fold_size(node, ins)  # the ops whose output size their inputs choose
    if node.domain in ("", "ai.onnx") and op_type in _FOLD_AS:  # a deprecated name the evaluator lacks
        op_type, version = _FOLD_AS[op_type]
        opsets = {**opsets, "": max(opsets.get("", version), version)}
    one = helper.make_node(op_type, [f"i{k}" if x is not None else "" for k, x in enumerate(ins)],
                           [f"o{k}" if o else "" for k, o in enumerate(node.output)], domain=node.domain)
    one.attribute.extend(a for a in node.attribute if a.name not in _ANNOTATIONS)
    inputs = [helper.make_tensor_value_info(f"i{k}", helper.np_dtype_to_tensor_dtype(np.asarray(x).dtype),
                                            None) for k, x in enumerate(ins) if x is not None]
    outputs = [helper.make_empty_tensor_value_info(f"o{k}") for k, o in enumerate(node.output) if o]
    model = helper.make_model(helper.make_graph([one], "fold", inputs, outputs),
                              opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()])
    feeds = {f"i{k}": x for k, x in enumerate(ins) if x is not None}
    try:
        outs = iter(ReferenceEvaluator(model).run(None, feeds))
    except Exception as e:  # noqa: BLE001  (the reference evaluator's errors, as a frontend Error)
        raise Error(f"cannot evaluate ONNX node {node.name or node.op_type!r} ({node.op_type}) at "
                    f"compile time: {type(e).__name__}: {e}", type="frontend") from None
    return tuple(np.asarray(next(outs)) if o else None for o in node.output)


def _as_tensor(v) -> torch.Tensor:
    return v if isinstance(v, torch.Tensor) else torch.as_tensor(np.array(v, order="C"))


def import_onnx(model, outputs: list[str] | None = None) -> TracedGraph:
    """The inference graph IR of an ONNX model, for tilefx-opt: parameters named by
    their ONNX initializer names, inputs in graph-input order."""
    from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, StringAttr
    from xdsl.ir import SSAValue

    from tilefx.dialects.irutil import find_func

    m = OnnxModule(model, outputs=outputs, training=False)
    traced = trace(m, tuple(m.example_inputs()), training=False)
    back = {path: name for name, path in m.path.items()}
    fn = find_func(traced.module, "main")
    attrs = [dict(a.data) for a in fn.arg_attrs.data]
    for a in attrs:
        for key in (PARAM_KEY, BUFFER_KEY):
            if key in a:
                a[key] = StringAttr(back.get(a[key].data, a[key].data))
    fn.arg_attrs = ArrayAttr([DictionaryAttr(a) for a in attrs])
    # the graph inputs keep their ONNX names in the IR (%input_ids), which tilefx-run
    # binds .npz arrays by, as it binds a torch model's forward argument names
    for arg, a in zip(fn.body.block.args, attrs):
        if INPUT_KEY in a:
            i = a[INPUT_KEY].value.data
            if i < len(m.input_names) and SSAValue.is_valid_name(m.input_names[i]):
                arg.name_hint = m.input_names[i]
    traced.params = [back.get(p, p) for p in traced.params]
    traced.buffers = [back.get(b, b) for b in traced.buffers]
    return traced
