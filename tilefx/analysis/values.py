"""Which values of a function hold one array, and which pure ops repeat an earlier one.

The executor keeps each value in an integer slot of a list. Several values
share a slot where their numbers are the same array (values are never
written once made; an in-place form only takes a donated argument no other
step reads, backend/executor.py):
- a move (`ipu.copy`, the device IR's exchanges, loads and stores) and an
  op whose result is its operand's value (`SAME_VALUE_OPS`: `alias`, ...);
- a view whose result is its operand unchanged (`same_shape_view`): the
  traced matmuls expand every batched operand, mostly to the shape it has;
- a stage's results and the values its body yields;
- a repeat of a pure ATen op and the op it repeats (`value_slots`).

`value_slots(fn, members)` numbers the slots and decides the repeats. `members`: the ops of the groups the executor
runs as one step (analysis/attention.py, analysis/fusion.py), which it
neither computes again nor views apart from their group.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from xdsl.dialects import func
from xdsl.ir import Block, Operation, SSAValue

from tilefx.dialects.aten import op_name, op_props
from tilefx.dialects.aten_traits import ops_where

# ops whose result is their operand's numbers, moved (the device IR's
# exchanges and host transfers): the same array on the host
MOVE_OPS = frozenset({"ipu.copy", "tile.exchange", "tile.ipu_copy", "tile.host_in", "tile.host_out",
                      "tile.remote_load", "tile.remote_store", "tile.all_gather"})
# ops whose result is their operand's value (op traits, dialects/aten_traits.py)
SAME_VALUE_OPS = frozenset(op_name(n) for n in ops_where(same_value=True))
# views the executor computes from the result type (one numpy call)
VIEW_OPS = frozenset(op_name(n) for n in ops_where(view_step=True))
# ops drawing from a random stream: they run every time
RANDOM_OPS = frozenset(op_name(n) for n in ops_where(random=True))


def same_shape_view(op: Operation) -> bool:
    """A view whose result is its operand unchanged: an expand or view to
    the operand's own shape, a permute that keeps the order (the traced
    matmuls expand every batched operand, mostly to the shape it has)."""
    src, res = op.operands[0].type, op.results[0].type
    if not hasattr(src, "get_shape") or not hasattr(res, "get_shape") or \
            tuple(src.get_shape()) != tuple(res.get_shape()) or src != res:
        return False
    if op.name == "aten.permute":
        dims = [int(d) for d in op_props(op)["dims"]]  # type: ignore[arg-type]
        return dims == sorted(dims) and all(d >= 0 for d in dims)
    return True


def repeat_key(op: Operation, slot: Callable[[SSAValue], int]) -> tuple | None:
    """What a pure ATen op computes, for finding a repeat of it in the same
    function: its name, operand slots, properties and result types. None for
    what must run every time or has a step of its own kind: random ops,
    views, copies, ops with regions (ops writing their operands are `ipu`
    ops, IN_PLACE_OPERANDS, so none of these)."""
    name = op.name
    if not name.startswith("aten.") or not op.results or op.regions or name in RANDOM_OPS or \
            name in VIEW_OPS or name in SAME_VALUE_OPS or name == "aten.clone":
        return None
    props = tuple(sorted(op.properties.items()))  # xDSL's attributes: hashable, equal by value
    try:
        hash(props)
    except TypeError:
        return None
    return (name, tuple(slot(v) for v in op.operands), props, tuple(r.type for r in op.results))


def walk(block: Block, top: bool = True) -> Iterator[tuple[Operation, bool]]:
    """The ops the executor compiles, in program order: a stage's body
    inline after the stage op, a loop's body after the loop op. `top`:
    whether the op runs once per call (not in a loop's body)."""
    for op in block.ops:
        yield op, top
        if op.name == "ipu.stage":
            yield from walk(op.regions[0].block, top)
        elif op.name == "ipu.for":
            yield from walk(op.regions[0].block, False)


def same_array(op: Operation, members: frozenset[Operation]) -> list[tuple[SSAValue, SSAValue]]:
    """(value, the value whose array it is) for each result of `op` that
    holds its operand's array (see the module's docstring)."""
    if op.name == "ipu.yield":
        parent = op.parent_op()
        return [] if parent is None or parent.name == "ipu.for" else list(zip(parent.results, op.operands))
    if op.name in MOVE_OPS or op.name in SAME_VALUE_OPS:
        return [(op.results[0], op.operands[0])]
    if op not in members and op.name in VIEW_OPS and same_shape_view(op):
        return [(op.results[0], op.operands[0])]
    return []


@dataclass
class _Numbering:
    of: dict[SSAValue, int] = field(default_factory=dict)
    count: int = 0

    def slot(self, v: SSAValue) -> int:
        s = self.of.get(v)
        if s is None:
            s = self.of[v] = self.count
            self.count += 1
        return s

    def add(self, op: Operation, members: frozenset[Operation]) -> None:
        """Number the values `op` reads and makes."""
        for v in op.operands:
            self.slot(v)
        for region in op.regions:
            for block in region.blocks:
                for a in block.args:
                    self.slot(a)
        pairs = same_array(op, members)
        for new, old in pairs:
            self.of[new] = self.slot(old)
        if op.name != "ipu.stage":  # a stage's results are numbered at its yield
            for r in op.results[len(pairs):]:
                self.slot(r)


@dataclass(frozen=True)
class RepeatedOps:
    """By repeat, the earlier op computing the same (`repeat_key`), whose
    results it reads instead of computing them again."""

    first: dict[Operation, Operation]


@dataclass(frozen=True)
class ValueSlots:
    """The slot of each value the executor reads or writes (`of`), how many
    slots a call's list has (`count`), and the repeated ops whose results
    are their first's slots (`repeats`)."""

    of: dict[SSAValue, int]
    count: int
    repeats: RepeatedOps


def value_slots(fn: func.FuncOp, members: frozenset[Operation], repeats: bool = True) -> ValueSlots:
    """Number the values of `fn`: the arguments first, in order; a value
    holding another's array (`same_array`) shares its slot, and so do a
    repeated op's results and its first's (with `repeats`).

    A repeat is a pure ATen op computing what an earlier op of the function
    computed: the same op on the same arrays (slots) with the same
    properties. Traced models repeat work per layer: each layer turns the
    same boolean mask into the same additive one (`where`), a SiLU's
    backward computes its forward's sigmoid again, fills and scalars recur;
    llama's inference had 46 such ops, its training step 73. The IR keeps
    them (the machine model costs what the graph holds); the executor
    computes each once. Only ops run once per call (not in a loop's body)
    and outside the groups (`members`). A multi-result op's step converts
    only the results its own users read: a repeat reading one the first left
    unread is no repeat (torch.linalg.inv's first call only checked for
    errors, the second read the inverse)."""
    num = _Numbering()
    for a in fn.body.block.args:
        num.slot(a)
    computed: dict[tuple, Operation] = {}
    first: dict[Operation, Operation] = {}
    for op, top in walk(fn.body.block):
        if repeats and top and op not in members and (key := repeat_key(op, num.slot)) is not None:
            earlier = computed.get(key)
            if earlier is not None and all(bool(e.uses) or not r.uses
                                           for r, e in zip(op.results, earlier.results)):
                first[op] = earlier
                for r, e in zip(op.results, earlier.results):
                    num.of[r] = num.of[e]
                continue
            if earlier is None:
                computed[key] = op
        num.add(op, members)
    return ValueSlots(num.of, num.count, RepeatedOps(first))
