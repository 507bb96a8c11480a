"""The structure of an ONNX model checked before any of it is converted
(docs/security.md): a graph to import, initializers that hold the data
their dims declare, within limits.TENSOR_BYTES, and nodes in topological
order whose every input is made by something (the ONNX IR spec: "Nodes
... MUST be topologically sorted", each input a graph input, an
initializer or an earlier node's output, or a name of an enclosing graph
for a subgraph). Each failure an Error naming the tensor or node; PopART's
sessions report it as a popart_exception."""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import helper

from tilefx import limits
from tilefx.errors import Error

# the TensorProto field that holds each data type's values when raw_data is not used
_TYPED_FIELDS = ("float_data", "int32_data", "string_data", "int64_data", "double_data", "uint64_data")
# element types stored packed (two 4-bit values a byte)
_PACKED = frozenset(getattr(onnx.TensorProto, n) for n in ("INT4", "UINT4", "FLOAT4E2M1")
                    if hasattr(onnx.TensorProto, n))


def _fail(message: str):
    raise Error(message, type="frontend")


def tensor_bytes(dims, elem_type: int, what: str) -> int:
    """The bytes of a tensor of `dims` and ONNX `elem_type`, within
    limits.TENSOR_BYTES (before anything of that size is made)."""
    try:
        itemsize = np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).itemsize
    except (KeyError, TypeError, ValueError):
        _fail(f"{what}: unknown ONNX element type {elem_type}")
    if any(d < 0 for d in dims):
        _fail(f"{what}: negative dimension in {list(dims)}")
    nbytes = math.prod(dims) * itemsize
    limits.TENSOR_BYTES.check(nbytes, what)
    return nbytes


def _check_initializer(t: onnx.TensorProto) -> None:
    from onnx.external_data_helper import uses_external_data

    what = f"initializer {t.name!r} of dims {list(t.dims)}"
    tensor_bytes(t.dims, t.data_type, what)
    if uses_external_data(t):
        return  # onnx.load has checked the file's length against the location's
    count = math.prod(t.dims)
    if t.HasField("raw_data"):
        itemsize = np.dtype(helper.tensor_dtype_to_np_dtype(t.data_type)).itemsize
        held = len(t.raw_data) // max(itemsize, 1)
    else:
        held = max((len(getattr(t, f)) for f in _TYPED_FIELDS), default=0)
        if t.data_type in (onnx.TensorProto.COMPLEX64, onnx.TensorProto.COMPLEX128):
            held //= 2  # real and imaginary parts
    if t.data_type in _PACKED:
        return  # several values per stored element: onnx's own reader checks these
    if held != count:
        _fail(f"{what} holds {held} value(s), its dims declare {count}: the model is truncated or corrupt")


def _check_order(graph: onnx.GraphProto, outer: frozenset, where: str) -> None:
    """Every node input is known when the node runs; a name a later node
    makes is a cycle or a graph out of order, a name nothing makes a
    missing producer."""
    known = set(outer) | {i.name for i in graph.input} | {t.name for t in graph.initializer} | {""}
    made_later = {}
    for index, node in enumerate(graph.node):
        for o in node.output:
            made_later.setdefault(o, (index, node))
    for index, node in enumerate(graph.node):
        label = f"{where}node {index} ({node.op_type}{f' {node.name!r}' if node.name else ''})"
        for name in node.input:
            if name in known:
                continue
            producer = made_later.get(name)
            if producer is not None:
                _fail(f"{label} reads {name!r}, which node {producer[0]} ({producer[1].op_type}) makes "
                      "after it: the graph has a cycle or is not in topological order")
            _fail(f"{label} reads {name!r}, which no node, graph input or initializer makes")
        for a in node.attribute:  # subgraphs see every name made so far
            subs = [a.g] if a.type == onnx.AttributeProto.GRAPH else \
                list(a.graphs) if a.type == onnx.AttributeProto.GRAPHS else []
            for sub in subs:
                _check_order(sub, frozenset(known), f"{label}'s {a.name} body: ")
        known.update(node.output)
    for o in graph.output:
        if o.name not in known:
            _fail(f"{where}graph output {o.name!r} is made by no node, graph input or initializer")


def check_model(model: onnx.ModelProto) -> None:
    """The whole model's structure (see the module's docstring)."""
    if not model.HasField("graph") or not (len(model.graph.node) or len(model.graph.output)):
        _fail("the ONNX model holds no graph (an empty or non-ONNX file)")
    for t in model.graph.initializer:
        _check_initializer(t)
    _check_order(model.graph, frozenset(), "")


def check_fold_size(node: onnx.NodeProto, ins: list) -> None:
    """The output of a node evaluated at compile time whose size its input
    values choose (not the model's size): within limits.TENSOR_BYTES before
    it is made. ConstantOfShape and Expand take a shape, Tile repeats, Range
    a count."""
    if node.domain not in ("", "ai.onnx") or not ins or any(x is None for x in ins[:2]):
        return
    what = f"node {node.name or node.op_type!r} ({node.op_type})"
    op = node.op_type
    try:
        if op == "ConstantOfShape":
            count = math.prod(int(d) for d in np.asarray(ins[0]).reshape(-1))
        elif op == "Expand" and len(ins) > 1:
            shape = [int(d) for d in np.asarray(ins[1]).reshape(-1)]
            have = list(np.shape(ins[0]))
            rank = max(len(shape), len(have))
            shape, have = [1] * (rank - len(shape)) + shape, [1] * (rank - len(have)) + have
            count = math.prod(max(a, b) for a, b in zip(shape, have))
        elif op == "Tile" and len(ins) > 1:
            count = np.size(ins[0]) * math.prod(int(d) for d in np.asarray(ins[1]).reshape(-1))
        elif op == "Range" and len(ins) > 2:
            start, limit, delta = (float(np.asarray(x).reshape(-1)[0]) for x in ins[:3])
            count = max(math.ceil((limit - start) / delta), 0) if delta else 0
        else:
            return
    except (TypeError, ValueError, OverflowError, IndexError):
        return  # not numbers: the evaluator reports it
    limits.TENSOR_BYTES.check(count * 8, f"{what}'s output (up to 8 bytes a value)")
