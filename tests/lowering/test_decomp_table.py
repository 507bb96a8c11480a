"""`DecompTable` is torch's core ATen decomposition table, read per op:
every op torch's table holds is in it with the same decomposition, and no
other op is (decomp_table.py decides CompositeImplicit entries per op
instead of listing them all, to save ~0.2 s of a cold compile)."""

from __future__ import annotations

import functools

import torch
from torch._decomp import core_aten_decompositions

from tilefx.lowering.decomp_table import DecompTable


def _all_ops():
    ops = []
    for ns in list(torch.ops._dir):
        namespace = getattr(torch.ops, ns, None)
        for name in list(getattr(namespace, "_dir", [])):
            packet = getattr(namespace, name)
            for overload in packet.overloads():
                try:
                    ops.append(getattr(packet, overload))
                except (AttributeError, RuntimeError):
                    pass
    return ops


def _same(a, b) -> bool:
    # a CompositeImplicit entry is a fresh partial of one closure per table (bound
    # to the op); one made from the op's own Python kernel is that kernel
    if isinstance(a, functools.partial) and isinstance(b, functools.partial):
        return (a.func.__qualname__ == b.func.__qualname__ and a.args == b.args
                and a.keywords == b.keywords)
    return a is b


def test_every_op_is_decided_as_torch_s_table_decides_it():
    want = dict(core_aten_decompositions().items())  # also makes every CompositeImplicit op's handle
    table = DecompTable()
    ops = _all_ops()
    assert len(ops) > 1000 and len(want) > 300
    wrong = [op for op in ops if (op in want) != (op in table)]
    assert wrong == []
    for op, fn in want.items():
        assert op in table and _same(table[op], fn), op
        assert table.get(op) is not None


def test_reading_the_whole_table_gives_torch_s():
    want = dict(core_aten_decompositions().items())
    table = DecompTable()
    assert set(table) == set(want) and len(table) == len(want)
    assert dict(table).keys() == want.keys()  # what a sub-tracer's copy holds


def test_an_op_it_does_not_hold_is_a_key_error():
    table = DecompTable()
    op = torch.ops.aten.convolution.default  # core ATen: kept, not decomposed
    assert op not in table and table.get(op) is None
    try:
        table[op]
    except KeyError:
        pass
    else:
        raise AssertionError("expected a KeyError")


def test_an_op_taken_out_is_out_however_the_table_is_read():
    """The tracer takes the backward ops it keeps whole out of the table
    (lowering/decompositions.py): gone for lookups and for a full read."""
    from tilefx.lowering.decompositions import KEPT_WHOLE, tracing_decompositions

    table = tracing_decompositions(DecompTable())
    for name in KEPT_WHOLE:
        packet = getattr(torch.ops.aten, name)
        for overload in packet.overloads():
            op = getattr(packet, overload)
            assert op not in table and table.get(op) is None and op not in set(table)
    assert torch.ops.aten.silu_backward.default in table  # others stay
