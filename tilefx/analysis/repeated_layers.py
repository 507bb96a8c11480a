"""Identical repeated blocks of a function, and each op's cost computed once for all its repeats.

A transformer's layers are one block of ops repeated: the same op sequence
with the same shapes, properties and attributes, each layer reading its own
weights. A block here is the ops of one `ipu.place` block and direction
(the forward or the backward ops of a `Block`/`BeginBlock`, such as the
one the planner opens on each repeated layer), in program order. Two
blocks are identical when, op for op, they have the same name, operand and
result types, properties, attributes (but the ones naming or placing an
op), the same operands among the weights, buffers and constants, and the
same data flow inside the block (each operand made by the op at the same
place of the block, or else from outside it); SSA names and which weight
an op reads do not count.

`twin_pairs(fn)` pairs each op of a block with the op at the same place
of the first block identical to it (its twin), as indices into the
function's ops, so that a copy of the function (`twins_in`) has the pairs
without comparing anything again. `op_cost_reusing` then gives an op its
twin's cost when the twin was costed in the same context (the same call,
machine and default proportion) and the op's attributes still equal its
twin's: the machine model's cost of an op (backend/costs.py `op_cost`) is a
function of exactly what the comparison found equal and of those
attributes (the available memory proportion `ipu-available-memory` writes
per IPU) and the module's partials type, the same for both.

Left to the full costing: ops with regions (their body is not compared),
ops reading a weight, buffer or constant or a view of one (whether such an
operand is laid out for its user is decided again after the graph passes
move a value between stages), and ops in no block. What the passes do after
the comparison keeps a pair equal: they move ops between stages, reroute an
operand to a copy or a recomputed value of the same type (which is no
weight's view, so the rule above covers it), and write the proportion,
which `op_cost_reusing` compares. Types change only in `ipu-autocast`,
which the comparison must follow (the planner compares the traced function
after autocast, which its copies then skip).
"""

from __future__ import annotations

import weakref

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import BlockArgument, Operation

from tilefx.backend.costs import INSTANCE_KEYS, OpCost, is_resident, op_cost
from tilefx.backend.machine import Machine
from tilefx.dialects.ipu import PLACE_KEY, PlacementAttr

# the pairs of a module's function @main, for the passes and the profile that
# cost it (`attach`); a module nobody attached pairs to is costed op by op
_ATTACHED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def twin_pairs(fn: func.FuncOp) -> list[tuple[int, int]]:
    """(op, twin) index pairs into `fn`'s ops: each op of a block identical
    to an earlier one, and the op at its place in the first of them."""
    ops = list(fn.body.block.ops)
    blocks: dict[tuple[str, bool], list[int]] = {}
    for i, o in enumerate(ops):
        p = o.attributes.get(PLACE_KEY)
        if isinstance(p, PlacementAttr) and p.block.data:
            blocks.setdefault((p.block.data, p.is_backward), []).append(i)
    first: dict[tuple, list[int]] = {}
    pairs: list[tuple[int, int]] = []
    for members in blocks.values():
        rep = first.setdefault(_fingerprint([ops[i] for i in members]), members)
        if rep is members:
            continue
        pairs += [(i, j) for i, j in zip(members, rep) if _reusable(ops[i])]
    return pairs


def _fingerprint(block: list[Operation]) -> tuple:
    at = {o: k for k, o in enumerate(block)}

    def source(v) -> tuple:
        if isinstance(v, BlockArgument):
            return ("arg",)
        k = at.get(v.op)
        return ("out",) if k is None else (k, v.index)

    return tuple((o.name, tuple(v.type for v in o.operands), tuple(r.type for r in o.results),
                  tuple(o.properties.items()),
                  tuple((k, a) for k, a in o.attributes.items() if k not in INSTANCE_KEYS),
                  tuple(is_resident(v) for v in o.operands), tuple(source(v) for v in o.operands),
                  len(o.regions))
                 for o in block)


def _reusable(o: Operation) -> bool:
    return not o.regions and not any(is_resident(v) for v in o.operands)


def twins_in(fn: func.FuncOp, pairs: list[tuple[int, int]]) -> dict[Operation, Operation]:
    """The pairs as ops of `fn`, a copy of the function `twin_pairs` read
    (the same ops in the same order)."""
    ops = list(fn.body.block.ops)
    return {ops[i]: ops[j] for i, j in pairs}


def attach(module: ModuleOp, twins: dict[Operation, Operation]) -> None:
    """Let the passes and the profile that cost `module` reuse these pairs' costs."""
    _ATTACHED[module] = twins


def twins_of(module: ModuleOp) -> dict[Operation, Operation]:
    return _ATTACHED.get(module, {})


def _same_attributes(a: Operation, b: Operation) -> bool:
    if len(a.attributes) != len(b.attributes):
        return False
    return all(k in INSTANCE_KEYS or b.attributes.get(k) == v for k, v in a.attributes.items())


def op_cost_reusing(op: Operation, machine: Machine, proportion: float, twins: dict[Operation, Operation],
                    done: dict[Operation, OpCost]) -> OpCost:
    """`op_cost(op, machine, proportion)`, or its twin's cost if the twin is
    in `done` (the costs of one context: this machine and proportion) and
    its attributes are still the op's. Records the cost in `done`."""
    twin = twins.get(op)
    if twin is not None:
        c = done.get(twin)
        if c is not None and _same_attributes(op, twin):
            done[op] = c
            return c
    c = done[op] = op_cost(op, machine, proportion)
    return c
