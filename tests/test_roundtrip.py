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
