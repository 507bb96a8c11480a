"""ONNX control flow and sequences for the ONNX module (from_onnx.OnnxModule):
`Loop` and `Scan` unrolled at compile time, and the sequence operators the
TorchScript exporter writes around a scripted loop (`SequenceEmpty`,
`SequenceInsert`, `ConcatFromSequence`, ...), with sequences as Python lists.

Why unroll: the ONNX module is a torch module that make_fx traces
(from_onnx), and a trace has no loop construct; tilefx compiles static
graphs, as PopART does, so a trip count known at compile time (a constant, an
initializer, a value computed from shapes) gives the same ops repeated, each
iteration's body running in a scope that sees the outer graph. Autograd then
derives the backward through every iteration, so training flows through the
loop as through any other op, and the loop-carried values may even change
shape between iterations. What cannot be unrolled, a trip count or a
condition computed from the graph inputs (a data-dependent `while`), is a
clear error naming the node. The machine model costs the unrolled ops (the
cycles of PopART's LoopOp, which runs one body `trip count` times, but N
copies of its code rather than one).

A body runs through `run_body(node, body, feeds)`, the module's own
interpreter: the body's outputs in order, for its inputs bound to `feeds`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
import torch

from tilefx.errors import Error
from tilefx.lowering.onnx_values import _axis, _t

# more iterations than this is a mistake (or a loop meant to run on the device
# with a data-dependent exit), not a model to unroll
MAX_UNROLLED_ITERATIONS = 4096

RunBody = Callable[[onnx.NodeProto, onnx.GraphProto, dict], list]


def _label(node: onnx.NodeProto) -> str:
    return f"ONNX node {node.name or node.op_type!r} ({node.op_type})"


def _body(node: onnx.NodeProto) -> onnx.GraphProto:
    for a in node.attribute:
        if a.name == "body" and a.type == onnx.AttributeProto.GRAPH:
            return a.g
    raise Error(f"{_label(node)}: it has no 'body' graph attribute", type="frontend")


def _static_scalar(node: onnx.NodeProto, value, what: str):
    """A compile-time scalar operand, else the error saying why it must be one."""
    if isinstance(value, torch.Tensor):
        raise Error(f"{_label(node)}: its {what} is computed from the graph inputs (known only when the "
                    "program runs); tilefx compiles static graphs and unrolls a Loop at compile time, so "
                    f"the {what} must be known at compile time (a constant, an initializer or a value "
                    "computed from shapes)", type="frontend")
    a = np.asarray(value)
    if a.size != 1:
        raise Error(f"{_label(node)}: its {what} must have one element, it has shape {list(a.shape)}",
                    type="frontend")
    return a.reshape(-1)[0]


def _stack(values: list, axis: int = 0):
    """Per-iteration values stacked along a new axis (numpy if all are compile-time values)."""
    if all(isinstance(v, np.ndarray) for v in values):
        return np.stack(values, axis)
    return torch.stack([_t(v) for v in values], axis)


def _empty_scan_output(node: onnx.NodeProto, body: onnx.GraphProto, k: int, axis: int = 0):
    """A scan output of zero iterations: its element shape is the body output's declared one."""
    from onnx.helper import tensor_dtype_to_np_dtype

    vi = body.output[k]
    tt = vi.type.tensor_type
    if not tt.elem_type or not tt.HasField("shape") or not all(d.HasField("dim_value") for d in tt.shape.dim):
        raise Error(f"{_label(node)}: it runs zero times, so the shape of its scan output {vi.name!r} "
                    "comes from the body's declared output type, which is not fully static", type="frontend")
    shape = [d.dim_value for d in tt.shape.dim]
    shape.insert(_axis(axis, len(shape) + 1), 0)
    return np.zeros(shape, tensor_dtype_to_np_dtype(tt.elem_type))


def run_loop(node: onnx.NodeProto, ins: list, run_body: RunBody) -> list:
    """ONNX Loop (opsets 1-21): inputs (M, cond, v_initial...), body (iteration_num,
    cond_in, v...) -> (cond_out, v..., scan_outputs...); outputs (v_final...,
    scan_outputs stacked along a new first axis). Unrolled: M and every
    condition must be known at compile time."""
    body = _body(node)
    carried = list(ins[2:])
    n_carried = len(carried)
    if len(body.input) != 2 + n_carried:
        raise Error(f"{_label(node)}: the body takes {len(body.input)} inputs, the node gives it "
                    f"2 + {n_carried} (iteration number, condition, loop-carried values)", type="frontend")
    n_scan = len(body.output) - 1 - n_carried
    if n_scan < 0 or len(node.output) > n_carried + n_scan:
        raise Error(f"{_label(node)}: the body has {len(body.output)} outputs and the node "
                    f"{len(node.output)}, for {n_carried} loop-carried values", type="frontend")
    trip = None if ins[0] is None else int(_static_scalar(node, ins[0], "trip count M"))
    cond = True if ins[1] is None else bool(_static_scalar(node, ins[1], "condition"))
    if trip is None and ins[1] is None:
        raise Error(f"{_label(node)}: it has neither a trip count nor a condition (a loop that never "
                    "ends)", type="frontend")
    scans: list[list] = [[] for _ in range(n_scan)]
    i = 0
    while cond and (trip is None or i < trip):
        if i >= MAX_UNROLLED_ITERATIONS or (trip or 0) > MAX_UNROLLED_ITERATIONS:
            raise Error(f"{_label(node)}: it runs more than the {MAX_UNROLLED_ITERATIONS} iterations tilefx "
                        f"unrolls at compile time{f' (trip count {trip})' if trip else ''}", type="frontend")
        feeds = dict(zip((v.name for v in body.input),
                         [np.array(i, np.int64), np.array(cond, np.bool_), *carried]))
        outs = run_body(node, body, feeds)
        if ins[1] is not None or trip is None:  # with M alone, ONNX ignores cond_out
            cond = bool(_static_scalar(node, outs[0], "condition (the body's first output)"))
        carried = list(outs[1:1 + n_carried])
        for k, v in enumerate(outs[1 + n_carried:]):
            scans[k].append(v)
        i += 1
    stacked = [_stack(s) if s else _empty_scan_output(node, body, 1 + n_carried + k)
               for k, s in enumerate(scans)]
    return carried + stacked


def run_scan(node: onnx.NodeProto, ins: list, at: dict, opset: int, run_body: RunBody) -> list:
    """ONNX Scan (opsets 9-21): inputs (initial states..., scan inputs...), body
    (states..., one slice of each scan input) -> (states..., scan output slices...);
    outputs (final states..., scan outputs stacked along their axes). The
    sequence length is the scan inputs' static length along their axes."""
    if opset < 9:
        raise Error(f"{_label(node)}: Scan of opset {opset} (with a batch axis and sequence_lens) is not "
                    "supported; export at opset 9 or later", type="frontend")
    body = _body(node)
    m = int(at.get("num_scan_inputs", 0))
    n_states = len(ins) - m
    if m < 1 or n_states < 0:
        raise Error(f"{_label(node)}: num_scan_inputs is {m} for {len(ins)} inputs", type="frontend")
    states, xs = list(ins[:n_states]), [_value(node, x) for x in ins[n_states:]]
    in_axes = [_axis(int(a), x.dim() if isinstance(x, torch.Tensor) else x.ndim)
               for a, x in zip(at.get("scan_input_axes", [0] * m), xs)]
    in_dirs = list(at.get("scan_input_directions", [0] * m))
    lengths = {int(x.shape[a]) for x, a in zip(xs, in_axes)}
    if len(lengths) != 1:
        raise Error(f"{_label(node)}: its scan inputs have different lengths along their scan axes "
                    f"({sorted(lengths)})", type="frontend")
    length = lengths.pop()
    if length > MAX_UNROLLED_ITERATIONS:
        raise Error(f"{_label(node)}: it runs {length} iterations, more than the {MAX_UNROLLED_ITERATIONS} "
                    "tilefx would unroll at compile time", type="frontend")
    n_out = len(body.output) - n_states
    if len(body.input) != n_states + m or n_out < 0:
        raise Error(f"{_label(node)}: the body takes {len(body.input)} inputs and gives {len(body.output)} "
                    f"outputs, for {n_states} states and {m} scan inputs", type="frontend")
    out_axes = list(at.get("scan_output_axes", [0] * n_out))
    out_dirs = list(at.get("scan_output_directions", [0] * n_out))
    scans: list[list] = [[] for _ in range(n_out)]
    for t in range(length):
        slices = [_select(x, a, length - 1 - t if d else t) for x, a, d in zip(xs, in_axes, in_dirs)]
        outs = run_body(node, body, dict(zip((v.name for v in body.input), states + slices)))
        states = list(outs[:n_states])
        for k, v in enumerate(outs[n_states:]):
            scans[k].append(v)
    stacked = []
    for k, s in enumerate(scans):
        if not s:
            stacked.append(_empty_scan_output(node, body, n_states + k, out_axes[k]))
            continue
        rank = (s[0].dim() if isinstance(s[0], torch.Tensor) else np.ndim(s[0])) + 1
        stacked.append(_stack(s[::-1] if out_dirs[k] else s, _axis(int(out_axes[k]), rank)))
    return states + stacked


def _value(node: onnx.NodeProto, x):
    if x is None or isinstance(x, list):
        raise Error(f"{_label(node)}: a scan input must be a tensor", type="frontend")
    return x if isinstance(x, torch.Tensor) else np.asarray(x)


def _select(x, axis: int, index: int):
    return x.select(axis, index) if isinstance(x, torch.Tensor) else np.take(x, index, axis)


# -- sequences (Python lists of tensors or compile-time arrays) ---------------------

def _sequence(node: onnx.NodeProto, seq) -> list:
    if not isinstance(seq, list):
        raise Error(f"{_label(node)}: its first input must be a sequence, it is a tensor", type="frontend")
    return seq


def _position(node: onnx.NodeProto, pos, size: int, insert: bool) -> int:
    p = int(_static_scalar(node, pos, "position"))
    top = size if insert else size - 1
    if not -size <= p <= top:
        raise Error(f"{_label(node)}: position {p} is outside the sequence of {size} tensors", type="frontend")
    return p + size if p < 0 else p


def _sequence_empty(node, ins, at):
    return []


def _sequence_construct(node, ins, at):
    return list(ins)


def _sequence_insert(node, ins, at):
    seq = list(_sequence(node, ins[0]))
    pos = len(seq) if len(ins) < 3 or ins[2] is None else _position(node, ins[2], len(seq), True)
    seq.insert(pos, ins[1])
    return seq


def _sequence_erase(node, ins, at):
    seq = list(_sequence(node, ins[0]))
    if not seq:
        raise Error(f"{_label(node)}: the sequence is empty", type="frontend")
    pos = len(seq) - 1 if len(ins) < 2 or ins[1] is None else _position(node, ins[1], len(seq), False)
    del seq[pos]
    return seq


def _sequence_at(node, ins, at):
    seq = _sequence(node, ins[0])
    return seq[_position(node, ins[1], len(seq), False)]


def _sequence_length(node, ins, at):
    return np.array(len(_sequence(node, ins[0])), np.int64)


def _concat_from_sequence(node, ins, at):
    seq = _sequence(node, ins[0])
    if not seq:
        raise Error(f"{_label(node)}: the sequence is empty (its result would have no shape)", type="frontend")
    new_axis = int(at.get("new_axis", 0))
    rank = (seq[0].dim() if isinstance(seq[0], torch.Tensor) else np.ndim(seq[0])) + new_axis
    axis = _axis(int(at["axis"]), rank)
    if new_axis:
        return _stack(seq, axis)
    if all(isinstance(v, np.ndarray) for v in seq):
        return np.concatenate(seq, axis)
    return torch.cat([_t(v) for v in seq], axis)


def _split_to_sequence(node, ins, at):
    x = _t(ins[0])
    axis = _axis(int(at.get("axis", 0)), x.dim())
    split = ins[1] if len(ins) > 1 else None
    if split is None:
        parts = list(torch.split(x, 1, axis))
        return parts if int(at.get("keepdims", 1)) else [p.squeeze(axis) for p in parts]
    if isinstance(split, torch.Tensor):
        raise Error(f"{_label(node)}: its split sizes are computed from the graph inputs; they set the "
                    "shapes of the sequence's tensors and must be known at compile time", type="frontend")
    sizes = np.asarray(split)
    return list(torch.split(x, int(sizes) if sizes.ndim == 0 else [int(s) for s in sizes], axis))


SEQUENCE_OPS = {"SequenceEmpty": _sequence_empty, "SequenceConstruct": _sequence_construct,
                "SequenceInsert": _sequence_insert, "SequenceErase": _sequence_erase,
                "SequenceAt": _sequence_at, "SequenceLength": _sequence_length,
                "ConcatFromSequence": _concat_from_sequence, "SplitToSequence": _split_to_sequence}

# the operators with subgraphs the ONNX module runs itself
CONTROL_FLOW = {"If", "Loop", "Scan"}
# and PopART's (domain ai.graphcore): Call runs its `callee` graph on its inputs
GRAPHCORE_CONTROL_FLOW = {"Call"}


def run_call(node: onnx.NodeProto, ins: list, run_body: RunBody) -> list:
    """ai.graphcore Call: the callee's outputs for its inputs bound to the node's, in order
    (inlined: the trace has no call either)."""
    callee = next((a.g for a in node.attribute if a.name == "callee" and a.type == onnx.AttributeProto.GRAPH),
                  None)
    if callee is None:
        raise Error(f"{_label(node)}: it has no 'callee' graph attribute", type="frontend")
    if len(callee.input) != len(ins) or len(callee.output) < len(node.output):
        raise Error(f"{_label(node)}: the callee {callee.name!r} takes {len(callee.input)} inputs and gives "
                    f"{len(callee.output)} outputs; the node has {len(ins)} and {len(node.output)}",
                    type="frontend")
    return run_body(node, callee, dict(zip((v.name for v in callee.input), ins)))
