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

LIT = Path(__file__).parent / "lit" / "dialects"
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
