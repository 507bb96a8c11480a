"""The round-trip lit tests cover every op, and printing is a fixed point.

(a) tests/lit/dialects/{aten,ipu}_roundtrip.mlir use every op of the `aten`
    and `ipu` dialects: adding an op without a round-trip test fails here.
(b) print(parse(text)) == print(parse(print(parse(text)))), in custom and
    in generic form.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tilefx.dialects.aten import ATEN_OPS
from tilefx.dialects.ipu import IPU_OPS
from irtext import parse, show

from repo_paths import TESTS

LIT = Path(TESTS) / "lit" / "dialects"
FILES = {"aten": LIT / "aten_roundtrip.mlir", "ipu": LIT / "ipu_roundtrip.mlir"}


def op_names(path: Path) -> set[str]:
    return {op.name for op in parse(path.read_text(), str(path)).walk()}


@pytest.mark.parametrize(
    "dialect, expected",
    [("aten", {cls.name for cls in ATEN_OPS.values()}), ("ipu", {cls.name for cls in IPU_OPS})],
)
def test_every_op_has_a_roundtrip_test(dialect: str, expected: set[str]) -> None:
    used = {n for n in op_names(FILES[dialect]) if n.startswith(dialect + ".")}
    assert sorted(expected - used) == [], f"ops without a round-trip test in {FILES[dialect].name}"
    assert sorted(used - expected) == [], "ops in the test that the dialect does not define"


def test_ipu_file_uses_placements() -> None:
    text = FILES["ipu"].read_text()
    for form in ("#ipu.place<fwd>", "#ipu.place<bwd>", "block = ", "ipu = ", "stage = ", "phase = "):
        assert form in text


@pytest.mark.parametrize("generic", [False, True], ids=["custom", "generic"])
@pytest.mark.parametrize("dialect", sorted(FILES))
def test_print_parse_print_is_a_fixed_point(dialect: str, generic: bool) -> None:
    path = FILES[dialect]
    once = show(parse(path.read_text(), str(path)), generic)
    twice = show(parse(once), generic)
    assert twice == once
    if generic:
        # the generic text parses back to the same custom text
        assert show(parse(once)) == show(parse(path.read_text(), str(path)))


@pytest.fixture(scope="module")
def pipelined_training_ir() -> dict[str, str]:
    """The IR of a real compile at every level: two pipeline stages on two
    IPUs, Adam with its state off chip (stages, copies, updates, remote
    loads/stores, syncs, exchanges, host streams)."""
    import torch
    from torch import nn

    import tilefx

    class TwoStages(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(6, 8), nn.Linear(8, 3)

        def forward(self, x, y):
            with tilefx.Block("A", ipu_id=0):
                h = torch.relu(self.a(x))
            with tilefx.Block("B", ipu_id=1):
                out = self.b(h)
                return out, nn.functional.cross_entropy(out, y)

    torch.manual_seed(0)
    model = TwoStages()
    opts = tilefx.Options()
    opts.setExecutionStrategy(tilefx.PipelinedExecution("A", "B"))
    opts.Training.gradientAccumulation(4)
    opts.TensorLocations.setOptimizerLocation(tilefx.TensorLocationSettings().useOnChipStorage(False))
    trainer = tilefx.trainingModel(model, opts, optimizer=tilefx.optim.Adam(model.parameters(), lr=1e-3))
    trainer(torch.randn(8, 6), torch.randint(0, 3, (8,)))
    return {level: trainer.ir(level) for level in ("import", "graph", "device")}


@pytest.mark.parametrize("level", ["import", "graph", "device"])
def test_the_ir_of_a_real_compile_reads_back(pipelined_training_ir, level: str) -> None:
    """What a compile prints parses back to the same text, in custom and in
    generic form, and stock xdsl-opt (the universe entry point) reads it."""
    import subprocess
    import sys

    text = pipelined_training_ir[level]
    module = parse(text)
    names = {op.name for op in module.walk()}
    want = {"import": {"aten.addmm"}, "graph": {"ipu.stage", "ipu.copy", "ipu.adam", "ipu.accumulate"},
            "device": {"tile.ipu_copy", "tile.remote_load", "tile.remote_store", "tile.sync", "tile.exchange",
                       "tile.host_in", "tile.host_out"}}[level]
    assert want <= names, sorted(want - names)
    assert show(module).strip() == text.strip()
    generic = show(module, generic=True)
    assert show(parse(generic)).strip() == text.strip()
    stock = subprocess.run([sys.executable, "-c", "from xdsl.tools.xdsl_opt import main; main()"],
                           input=generic, capture_output=True, text=True, timeout=300)
    assert stock.returncode == 0, stock.stderr
    assert stock.stdout.strip() == text.strip()


@pytest.fixture(scope="module")
def constants_ir():
    """The IR of a model with lifted constants of every value form, at every
    level, and the values the trace lifted."""
    import torch

    import tilefx
    from models import WithConstants

    torch.manual_seed(0)
    model = WithConstants().eval()
    ex = tilefx.compile(model, torch.randn(5, 4), torch.randint(0, 40, (5,)))
    return {level: ex.ir(level) for level in ("import", "graph", "device")}, ex._program.traced.consts


@pytest.mark.parametrize("level", ["import", "graph", "device"])
def test_constant_values_read_back_bit_exact(constants_ir, level: str) -> None:
    """Each `tilefx.const` argument carries its value (`tilefx.value`) in a form
    that survives print -> parse -> print, in custom and generic form, and
    decodes to the lifted tensor bit for bit (inf and NaN included, as their
    bit patterns; bf16 as bf16)."""
    import numpy as np

    from tilefx.dialects.const_value import array_of
    from tilefx.dialects.irutil import find_func
    from tilefx.dialects.names import CONST_KEY, CONST_VALUE_KEY

    texts, consts = constants_ir
    text = texts[level]
    for form in ('dense<"0x', "dense<0.000000e+00> : tensor<5x3xf32>",
                 "dense<[1048576000, -8388608, -1090519040]> : tensor<3xi32>",  # 0.25, -inf, -0.5
                 "dense<[true, false, true]> : tensor<3xi1>", "dense<[2, 0, 1]> : tensor<3xi64>",
                 "dense<[1.500000e+00, 2.250000e+00, 1.000980e-01]> : tensor<3xbf16>"):
        assert form in text, form
    module = parse(text)
    assert show(module).strip() == text.strip()
    assert show(parse(show(module, generic=True))).strip() == text.strip()
    fn = find_func(module, "main")
    seen = set()
    for i, (arg, attrs) in enumerate(zip(fn.body.block.args, fn.arg_attrs.data)):
        if CONST_KEY in attrs.data:
            name = attrs.data[CONST_KEY].data
            got = array_of(attrs.data[CONST_VALUE_KEY], arg.type, f"argument {i}")
            want = consts[name]
            assert got.dtype == want.dtype and got.shape == want.shape, name
            np.testing.assert_array_equal(got, want, err_msg=name)  # NaN equals NaN here
            seen.add(name)
    assert seen == set(consts)


def test_constant_values_read_back_through_stock_xdsl_opt(constants_ir) -> None:
    """Stock xdsl-opt (the universe entry point) prints the IR with constant
    values, at every level, as tilefx does (one run, the levels split)."""
    import subprocess
    import sys

    texts = [t.strip() for t in constants_ir[0].values()]
    stock = subprocess.run([sys.executable, "-c", "from xdsl.tools.xdsl_opt import main; main()",
                            "--split-input-file"], input="\n// -----\n".join(texts),
                           capture_output=True, text=True, timeout=300)
    assert stock.returncode == 0, stock.stderr
    assert [t.strip() for t in stock.stdout.split("// -----")] == texts


@pytest.mark.parametrize("text, message", [
    ("dense<[1.0, 2.0]> : tensor<2xf32>", "tilefx.value has type tensor<2xf32>, the argument is tensor<3xf32>"),
    ("dense<[1, 2, 3]> : tensor<3xi64>", "tilefx.value has type tensor<3xi64>, the argument is tensor<3xf32>"),
    ('"not a tensor"', "tilefx.value must be a dense elements attribute"),
])
def test_a_constant_value_of_the_wrong_type_is_a_clear_error(text: str, message: str) -> None:
    import tilefx
    from tilefx.dialects.const_value import array_of
    from tilefx.dialects.names import CONST_VALUE_KEY

    module = parse("func.func @main(%c: tensor<3xf32> {tilefx.const = \"c\", tilefx.value = " + text + "}) "
                   "-> tensor<3xf32> {\n  func.return %c : tensor<3xf32>\n}\n")
    fn = next(iter(module.ops))
    with pytest.raises(tilefx.Error, match=message.replace("(", r"\(").replace(")", r"\)")):
        array_of(fn.arg_attrs.data[0].data[CONST_VALUE_KEY], fn.body.block.args[0].type, "argument 0")
