"""backend/steps.py `step_name`: a step's name, as errors and profiles show it."""

from xdsl.parser import Parser

from tilefx.backend.steps import step_name
from tilefx.passes.pipelines import graph_context
from tilefx.passes.training_step import find_func

IR = """
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = aten.relu %x {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1>} : tensor<4xf32> -> tensor<4xf32>
  %b = aten.neg %a {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1>} : tensor<4xf32> -> tensor<4xf32>
  %c = aten.neg %b : tensor<4xf32> -> tensor<4xf32>
  func.return %c : tensor<4xf32>
}
"""


def test_the_name_is_the_op_and_its_printed_placement():
    a, b, c = list(find_func(Parser(graph_context(), IR).parse_module(), "main").body.block.ops)[:3]
    place = str(a.attributes["ipu.place"])
    assert place.startswith("#ipu.place<fwd") and "B1" in place
    assert step_name(a) == f"aten.relu {place}"
    assert step_name(b) == f"aten.neg {place}"  # the same placement, printed once
    assert step_name(b, "attention") == f"attention {place}"
    assert step_name(c) == "aten.neg "  # no placement
