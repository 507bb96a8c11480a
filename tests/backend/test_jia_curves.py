"""Jia et al.'s microbenchmark curves (`benchmarks/machine_validation.py
--plots`, docs/machine-validation.md "Jia et al.'s curves"): the flag writes
the plots, the CSVs and the table into the directory it is given, every
published point is in the table with its ratio (or the reason the model has
no value for it), and each computed ratio stays in the band it reaches today,
so a change to the memory or exchange costs that moves it fails here.
Compile-only, on the offline Mk1 target."""

import contextlib
import csv
import io
import math
import os
import sys

import pytest

from repo_paths import REPO

sys.path.insert(0, os.path.join(REPO, "benchmarks"))
import jia_curves  # noqa: E402
import machine_validation as mv  # noqa: E402

# tilefx / published of each point the model computes, with a little room
PINNED = {
    # tilefx costs a sum at one fp32 element per cycle (2 flops per element, 2 fp32 per
    # cycle): a quarter of the 16-byte loads of the hand-written loop ...
    "read, hand-written assembly loop, large blocks": (0.22, 0.28),
    # ... and the rate of the compiler-generated loop
    "read, compiler-generated loop, large blocks": (0.95, 1.07),
    # an elementwise op writes 8 bytes per tile and cycle (2 fp32 or 4 fp16 results)
    "write, large blocks (8 B per tile and cycle)": (0.95, 1.05),
    # the compute set's launch and sync, amortised over 8 KiB per tile
    "read at 8 KiB per tile, share of the large-block bandwidth": (0.85, 0.95),
    # the model's exchange has no contention: a tile receives at its own rate whatever the others do
    "on-chip latency, every tile sending / one tile sending": (0.78, 0.84),
}


@pytest.fixture(scope="module")
def plotted(tmp_path_factory):
    out = tmp_path_factory.mktemp("jia")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        mv.main(["--plots", str(out)])
    return out, printed.getvalue()


def test_plots_writes_the_figures_and_the_tables(plotted):
    out, _ = plotted
    for name in ("memory.png", "exchange.png", "matmul.png"):
        with open(out / name, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n", name
    with open(out / "curves.csv", newline="") as f:
        curves = {}
        for row in csv.DictReader(f):
            curves.setdefault(row["curve"], []).append((float(row["x"]), float(row["tilefx"])))
    assert len(curves) == 5 and all(len(v) >= 6 for v in curves.values())
    for name, pts in curves.items():
        # bandwidth and throughput grow with the block and the product; the exchange stays flat
        ys = [y for _, y in pts]
        assert all(y > 0 for y in ys) and ys == sorted(ys), name


def test_every_published_point_is_in_the_table_with_its_ratio(plotted):
    out, printed = plotted
    with open(out / "points.csv", newline="") as f:
        rows = {r["point"]: r for r in csv.DictReader(f)}
    pts = jia_curves.points()
    assert set(rows) == {p.what for p in pts}
    ratios: dict[str, list[float]] = {}
    for p in pts:
        row = rows[p.what]
        line = next(ln for ln in printed.splitlines() if p.what in ln)
        assert p.where and float(row["published"]) == p.published, p.what
        if p.compute is None:
            assert p.not_modelled and row["ratio"] == "" and "not modelled" in line, p.what
            continue
        r = float(row["ratio"])
        assert r == pytest.approx(float(row["tilefx"]) / p.published, rel=1e-3), p.what
        assert f"{r:.2f}" in line.split(), p.what
        ratios.setdefault(p.curve, []).append(r)
    for curve, rs in ratios.items():
        worst = max(rs, key=lambda x: abs(math.log(x)))
        assert f"worst ratio, {curve}: {worst:.2f}" in printed
    assert "worst ratio, matmul: none" in printed


@pytest.mark.parametrize("what", sorted(PINNED))
def test_point_stays_in_its_band(plotted, what):
    out, _ = plotted
    with open(out / "points.csv", newline="") as f:
        row = next(r for r in csv.DictReader(f) if r["point"] == what)
    lo, hi = PINNED[what]
    assert lo <= float(row["ratio"]) <= hi, (what, row["ratio"])


def test_every_computed_point_is_pinned():
    assert {p.what for p in jia_curves.points() if p.compute} == set(PINNED)


def test_plots_default_directory_and_a_file_in_its_place(monkeypatch, tmp_path, capsys):
    """--plots alone writes under benchmarks/output (ignored by git); a path
    that is a file is refused before anything compiles."""
    written = []
    monkeypatch.setattr(jia_curves, "run", written.append)
    mv.main(["--plots"])
    assert written == [jia_curves.DEFAULT_DIR]
    assert os.path.commonpath([jia_curves.DEFAULT_DIR, os.path.join(REPO, "benchmarks", "output")]) == \
        os.path.join(REPO, "benchmarks", "output")
    a_file = tmp_path / "plots"
    a_file.write_text("")
    with pytest.raises(SystemExit) as done:
        mv.main(["--plots", str(a_file)])
    assert done.value.code == 2 and "is not a directory" in capsys.readouterr().err
    assert written == [jia_curves.DEFAULT_DIR]
