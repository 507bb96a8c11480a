"""The IR helpers of `tilefx/dialects/irutil.py`: a value's shape and element
count, an op's placement and the roles of a function's arguments and
results, each written once for every layer that reads them."""

from __future__ import annotations

import ast
import pathlib

import pytest

from irtext import parse
from tilefx.dialects import irutil
from tilefx.dialects.ipu import PlacementAttr

from repo_paths import REPO

ROOT = pathlib.Path(REPO) / "tilefx"

IR = """
builtin.module {
  func.func @main(%x: tensor<2x3xf32> {tilefx.input}, %w: tensor<3x4xf32> {tilefx.param = "fc.weight"},
                  %s: tensor<f32>) -> (tensor<2x4xf32> {tilefx.output}) {
    %y = aten.mm %x, %w {ipu.place = #ipu.place<bwd, block = "b1", ipu = 1>} : tensor<2x3xf32>, tensor<3x4xf32> -> tensor<2x4xf32>
    %z = aten.relu %y : tensor<2x4xf32> -> tensor<2x4xf32>
    func.return %z : tensor<2x4xf32>
  }
}
"""


@pytest.fixture(scope="module")
def main():
    return irutil.find_func(parse(IR), "main")


def test_shapes_and_element_counts(main):
    x, w, s = main.body.block.args
    assert irutil.shape_of(x) == (2, 3) and irutil.shape_of(w.type) == (3, 4) and irutil.shape_of(s) == ()
    assert irutil.value_numel(x) == 6 and irutil.value_numel(s) == 1
    assert irutil.numel(()) == 1 and irutil.numel((2, 0, 5)) == 0 and irutil.numel([7, 11]) == 77
    # a huge shape counts exactly (no fixed-width overflow)
    assert irutil.numel((2**40, 2**40)) == 2**80


def test_a_value_without_a_shape_takes_the_default():
    class Scalar:  # a type without get_shape, like an index or a token
        pass

    class Value:
        type = Scalar()

    assert irutil.shape_of(Value()) == () and irutil.shape_of(Value(), None) is None


def test_placement(main):
    mm, relu = list(main.body.block.ops)[:2]
    p = irutil.place(mm)
    assert isinstance(p, PlacementAttr) and p.is_backward and p.ipu.data == 1
    assert irutil.place(relu) is None
    unplaced = PlacementAttr()
    assert irutil.place(relu, unplaced) is unplaced


def test_roles(main):
    assert irutil.arg_roles(main) == [{"input": True}, {"param": "fc.weight"}, {}]
    assert irutil.result_roles(main) == [{"output": True}]


# the helpers of this module and the names the copies of them had
HELPERS = {"numel", "_numel", "shape_of", "_shape", "_dims", "value_numel", "place", "_place",
           "arg_roles", "result_roles", "_roles"}
# a different concept under one of those names: ONNX's Shape operator's slice
OTHER_CONCEPTS = {("lowering/onnx_ops.py", "_shape")}


def test_nothing_else_defines_the_ir_helpers():
    copies = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if rel == "dialects/irutil.py":
            continue
        for node in ast.parse(path.read_text()).body:  # module-level functions (methods are another concept)
            if isinstance(node, ast.FunctionDef) and node.name in HELPERS and (rel, node.name) not in OTHER_CONCEPTS:
                copies.append(f"{rel}:{node.lineno} def {node.name}")
    assert not copies, "IR helpers belong in tilefx/dialects/irutil.py:\n" + "\n".join(copies)
