"""`ipu-auto-stage`'s positions: each op of @main anchored to a forward
op in program order (the cut points run between positions), and the
constraints and tail bounds read from the ops' placements. See
`auto_stage.py`'s docstring, "How it cuts", step 1."""

from __future__ import annotations

import numpy as np
from xdsl.ir import BlockArgument, Operation, OpResult

from tilefx.backend.costs import _bytes
from tilefx.dialects.ipu import START_BLOCK, PlacementAttr
from tilefx.dialects.irutil import place
from tilefx.passes.assign_stages import PlacementError

_UNPLACED = PlacementAttr()  # an op without ipu.place: a forward op of the default block


def _forward_op(v) -> Operation | None:
    return v.op if isinstance(v, OpResult) and not place(v.op, _UNPLACED).is_backward else None


def _is_position(o: Operation) -> bool:
    """A forward op reading another forward op's result: a position."""
    return not place(o, _UNPLACED).is_backward and any(_forward_op(v) for v in o.operands)


def _anchor_list(ops: list[Operation]) -> tuple[list[int], int]:
    """`_anchors` as a list in the order of `ops` (what copies of the ops share)."""
    anchor, n = _anchors(ops)
    return [anchor[o] for o in ops], n


def _anchors(ops: list[Operation]) -> tuple[dict[Operation, int], int]:
    """Each op's position (see the module docstring) and the number of positions."""
    anchor: dict[Operation, int] = {}
    n = 0
    for o in ops:
        if not place(o, _UNPLACED).is_backward and any(_forward_op(v) for v in o.operands):
            anchor[o] = n
            n += 1
    if n == 0:
        return {o: 0 for o in ops}, 1
    fwd_users = {}

    def users(o):
        return [u.operation for r in o.results for u in r.uses if u.operation in anchor]

    late = []
    for o in reversed(ops):  # forward ops reading only arguments: their earliest forward user
        if o in anchor or place(o, _UNPLACED).is_backward:
            continue
        us = [anchor[u] for u in users(o) if not place(u, _UNPLACED).is_backward]
        if us:
            anchor[o] = min(us)
        else:
            late.append(o)
    for o in ops:  # forward values: the latest forward op that reads them
        if o in anchor and not place(o, _UNPLACED).is_backward:
            us = [anchor[u] for u in users(o) if not place(u, _UNPLACED).is_backward]
            fwd_users[o] = max(us, default=anchor[o])
    # a block without an IPU is never cut, and its backward ops go with it
    # (`apply`): they are costed within its positions, not at a later
    # stage's (the backward of a slice of a layer's output reads only the
    # gradient from the stage after, where its result would be copied back)
    span: dict[str, tuple[int, int]] = {}
    for o, a in list(anchor.items()):
        p = place(o, _UNPLACED)
        if _is_position(o) and p.block.data not in ("", START_BLOCK) and p.ipu.data < 0:
            lo, hi = span.get(p.block.data, (a, a))
            span[p.block.data] = (min(lo, a), max(hi, a))

    def in_block(o, a: int) -> int:
        lo, hi = span.get(place(o, _UNPLACED).block.data, (a, a))
        return min(max(a, lo), hi)

    param_first: dict[BlockArgument, int] = {}
    floating_bwd = []
    for o in ops:
        if not place(o, _UNPLACED).is_backward:
            continue
        grads, layers = [], []
        for v in o.operands:
            if isinstance(v, OpResult) and v.op in anchor:
                (grads if place(v.op, _UNPLACED).is_backward else layers).append(
                    anchor[v.op] if place(v.op, _UNPLACED).is_backward else fwd_users.get(v.op, anchor[v.op]))
            elif isinstance(v, BlockArgument):
                if v not in param_first:
                    us = [anchor[u.operation] for u in v.uses if u.operation in anchor
                          and not place(u.operation, _UNPLACED).is_backward]
                    param_first[v] = min(us) if us else -1
                if param_first[v] >= 0:
                    layers.append(param_first[v])
        if grads and layers:
            anchor[o] = in_block(o, min(min(grads), max(layers)))
        elif grads or layers:
            anchor[o] = in_block(o, min(grads) if grads else max(layers))
        else:
            floating_bwd.append(o)
    for o in reversed(floating_bwd):  # constants of the backward: their latest user
        anchor[o] = max((anchor[u] for u in users(o)), default=n - 1)
    for o in reversed(late):
        anchor[o] = min((anchor[u] for u in users(o)), default=0)
    return anchor, n


def _user_constraints(ops, anchor, n):
    """Positions pinned to an IPU (-1: free) and the positions a cut may not
    precede (inside a block without an IPU). Only positions count: an op
    reading only arguments sits at its earliest user, or at position 0 when
    it has none (a BatchNorm's running-statistics update), which would
    stretch its block over every cut."""
    pinned = np.full(n, -1)
    span: dict[str, list[int]] = {}
    for o in ops:
        p = place(o, _UNPLACED)
        b = p.block.data
        if not _is_position(o) or not b or b == START_BLOCK:
            continue
        pos = anchor[o]
        if p.ipu.data >= 0:
            if pinned[pos] not in (-1, p.ipu.data):
                raise PlacementError(f"ipu-auto-stage: forward op {pos} ({o.name}) is placed on IPU "
                                     f"{pinned[pos]} and on IPU {p.ipu.data}")
            pinned[pos] = p.ipu.data
        else:
            lo, hi = span.get(b, [pos, pos])
            span[b] = [min(lo, pos), max(hi, pos)]
    no_cut = np.zeros(n + 1, dtype=bool)
    for lo, hi in span.values():
        no_cut[lo + 1:hi + 1] = True
    return pinned, no_cut


def _tail_gradients(ops, anchor, tail: int) -> list[tuple[int, int]]:
    """The backward values of the tail (positions from `tail` on) that a
    backward op before the tail reads: (the first such reader's position,
    bytes)."""
    out = []
    for o in ops:
        if place(o, _UNPLACED).is_backward and anchor[o] >= tail:
            for r in o.results:
                e = min((anchor[u.operation] for u in r.uses if u.operation in anchor), default=tail)
                if e < tail:
                    out.append((e, _bytes(r)))
    return out


def _tail_start(ops, anchor, block: str) -> int:
    """The position of the first forward op of `block` (the tail's start)."""
    at = [anchor[o] for o in ops if not (p := place(o, _UNPLACED)).is_backward and p.block.data == block]
    if not at:
        raise PlacementError(f"ipu-auto-stage: the tail block {block!r} has no forward ops in the model")
    return min(at)
