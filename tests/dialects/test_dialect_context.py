"""OpByOpContext (tilefx/dialects/context.py): IR text loads the classes of
the ops it names, not whole dialects, and reads as it did with xDSL's own
context (unknown ops fail, a dialect asked for whole still loads)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from xdsl.dialects.builtin import Builtin
from xdsl.dialects.func import Func
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError

from tilefx.dialects.context import OpByOpContext

ATEN = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = aten.relu %x : tensor<4xf32> -> tensor<4xf32>
  %z = "aten.add.Tensor"(%y, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %w = ipu.nop %z {ipu.place = #ipu.place<fwd>} : tensor<4xf32> -> tensor<4xf32>
  func.return %w : tensor<4xf32>
}
"""


def _context() -> OpByOpContext:
    from tilefx.tools.universe import DIALECTS, OP_LOOKUPS

    ctx = OpByOpContext()
    for d in (Builtin, Func):
        ctx.load_dialect(d)
    for name, factory in DIALECTS.items():
        ctx.register_dialect(name, factory)
    for name, lookup in OP_LOOKUPS.items():
        ctx.register_lookup(name, lookup)
    return ctx


def test_a_file_loads_only_the_op_classes_it_names(tmp_path):
    """In a fresh process: tilefx-opt on three ops defines those aten and ipu
    classes, not the ~350 of the aten dialect nor the 22 of ipu."""
    path = tmp_path / "in.mlir"
    path.write_text(ATEN)
    code = ("import io, json, contextlib; from tilefx.tools.opt import main\n"
            f"with contextlib.redirect_stdout(io.StringIO()): rc = main([{str(path)!r}])\n"
            "from tilefx.dialects import aten, ipu\n"
            "print(json.dumps({'rc': rc, 'aten': sorted(aten.ATEN_OPS._classes),\n"
            "                  'ipu': sorted(n for n in ipu._PLAIN if n in vars(ipu))}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"rc": 0, "aten": ["add.Tensor", "relu.default"], "ipu": ["NopOp"]}


def test_the_ops_parse_verify_and_print_as_with_whole_dialects():
    ctx = _context()
    module = Parser(ctx, ATEN).parse_module()
    module.verify()
    assert [op.name for op in module.ops.first.body.block.ops] == [
        "aten.relu", "aten.add.Tensor", "ipu.nop", "func.return"]
    assert "aten" not in {d.name for d in ctx.loaded_dialects}


def test_an_unknown_op_of_a_lazy_dialect_is_still_an_error():
    ctx = _context()
    text = ATEN.replace("aten.relu", "aten.no_such_op")
    with pytest.raises(ParseError, match="aten.no_such_op"):
        Parser(ctx, text).parse_module()


def test_the_whole_dialect_loads_after_single_ops_and_clones_keep_the_lookups():
    ctx = _context()
    Parser(ctx, ATEN).parse_module()
    ctx.load_registered_dialect("aten")  # the classes loaded one by one are the dialect's own
    ctx.load_registered_dialect("ipu")
    whole = {op.name: op for op in ctx.get_dialect("aten").operations}
    assert ctx.get_op("aten.relu") is whole["aten.relu"] and len(whole) > 300
    other = ctx.clone()
    assert isinstance(other, OpByOpContext) and other._lookups == ctx._lookups
    Parser(other, ATEN).parse_module().verify()
