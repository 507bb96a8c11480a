"""Jia et al.'s microbenchmarks as curves: the machine model against the
published points of "Dissecting the Graphcore IPU Architecture via
Microbenchmarking" (Jia, Tillman, Maggioni, Scarpazza; arXiv:1912.03413,
December 2019), measured on a GC2 (Mk1) C2 board.

    PYTHONPATH=. .venv/bin/python benchmarks/machine_validation.py --plots [DIR]

Each curve is tilefx's machine model on the offline Mk1 target
(`Options.useOfflineIpuTarget(1)`), computed by compiling the benchmark's
operation compile-only (its input on the meta device) at the curve's x values
and reading the compiled op's cost, with the paper's points overlaid:

- memory: aggregate on-tile bandwidth against the bytes each tile reads
  (a sum over every tile's block) or writes (a fill), the paper's chapter 3
  (Table 3.1, Figure 3.1);
- exchange: latency of a 64-byte message per tile against the number of
  tiles sending at once, relative to one sender (a copy's exchange), the
  paper's chapter 4 (Table 4.2);
- matmul: square fp32 and fp16 products' throughput against their size, the
  paper's section 5.1, drawn against the Mk1 peaks (31.1 and 124.5 TFLOPS,
  the machine's constants, not evidence).

The published points are facts taken from the paper as its section-by-section
summaries and a review report them (apaperaday.com's notes on chapters 3 and
4, Dec 2019; paperium.net's review): the full text's tables and figures were
not reachable, so the matmul curve has no measured point and two points are
recorded without a ratio (`Point.not_modelled` says why). docs/machine-validation.md
("Jia et al.'s curves") lists each point with its place in the paper.

Writes memory.png, exchange.png, matmul.png (matplotlib), curves.csv (every
computed point) and points.csv (the table) into the output directory, and
prints the table: point, published, tilefx, ratio, and each curve's worst
ratio (the one farthest from 1).
"""

from __future__ import annotations

import csv
import functools
import math
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch

import tilefx
from tilefx.backend.machine import MK1

# where `--plots` writes when no directory is given (ignored by git)
DEFAULT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "output", "jia-curves")

# the x values: bytes each tile reads or writes (64 B, one grain, to 128 KiB, half a GC2 tile)
BLOCK_BYTES = tuple(2 ** e for e in range(6, 18))
LARGE_BLOCK = BLOCK_BYTES[-1]
SMALL_BLOCK = 8 * 1024  # the paper's "blocks above 8 KB" (Figure 3.1)
# tiles sending a message at once, up to every tile of a GC2
SENDERS = (1, 4, 16, 64, 256, MK1.tiles)
MESSAGE_BYTES = 64  # [assumed: the summaries do not give the paper's message size]
# square products n x n x n (up to the largest whose fp32 operands and result fit a GC2's 304 MiB)
MATMUL_SIZES = (128, 256, 512, 1024, 2048, 4096)


class _Sum(torch.nn.Module):
    def forward(self, x):
        return x.sum()


class _Fill(torch.nn.Module):
    def forward(self, x):
        return torch.full_like(x, 1.0)


class _Copy(torch.nn.Module):
    def forward(self, x):
        return x.clone()


class _MatMul(torch.nn.Module):
    def forward(self, a, b):
        return a @ b


def _op_cycles(module: torch.nn.Module, *shapes, dtype=torch.float32) -> int:
    """Cycles the machine model gives the ops of `module` on the offline Mk1
    target, its inputs on the meta device (compile-only)."""
    inputs = [torch.zeros(*s, dtype=dtype, device="meta") for s in shapes]
    opts = tilefx.Options().useOfflineIpuTarget(MK1.ipu_version)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = tilefx.compile(module, *inputs, options=opts)
    return sum(r.cost.cycles for r in compiled.profile.ops)


def _tbs(nbytes: float, cycles: float) -> float:
    return nbytes / MK1.seconds(cycles) / 1e12


@functools.cache
def read_tbs(block: int) -> float:
    """Aggregate TB/s of a sum over `block` fp32 bytes on every tile."""
    return _tbs(block * MK1.tiles, _op_cycles(_Sum(), (MK1.tiles * block // 4,)))


@functools.cache
def write_tbs(block: int) -> float:
    """Aggregate TB/s of a fill of `block` fp32 bytes on every tile."""
    return _tbs(block * MK1.tiles, _op_cycles(_Fill(), (MK1.tiles * block // 4,)))


@functools.cache
def exchange_latency(senders: int) -> int:
    """Cycles of a copy of MESSAGE_BYTES on each of `senders` tiles: the exchange of
    `senders` messages at once."""
    return _op_cycles(_Copy(), (senders * MESSAGE_BYTES // 4,))


@functools.cache
def matmul_tflops(n: int, dtype: torch.dtype) -> float:
    return 2 * n ** 3 / MK1.seconds(_op_cycles(_MatMul(), (n, n), (n, n), dtype=dtype)) / 1e12


@dataclass(frozen=True)
class Point:
    """A published measurement of the paper and what the model computes for it."""

    curve: str  # memory | exchange | matmul
    what: str
    where: str  # its place in the paper
    published: float
    unit: str
    compute: Callable[[], float] | None  # tilefx's value; None: the model has no term for it
    lower_bound: bool = False  # the paper gives "more than" this value
    not_modelled: str = ""  # why there is no tilefx value


def points() -> list[Point]:
    return [
        Point("memory", "read, hand-written assembly loop, large blocks", "chapter 3", 30.7, "TB/s",
              lambda: read_tbs(LARGE_BLOCK)),
        Point("memory", "read, compiler-generated loop, large blocks", "chapter 3, Table 3.1", 7.59, "TB/s",
              lambda: read_tbs(LARGE_BLOCK)),
        Point("memory", "write, large blocks (8 B per tile and cycle)", "chapter 3, Table 3.1", 15.5, "TB/s",
              lambda: write_tbs(LARGE_BLOCK)),
        Point("memory", "read at 8 KiB per tile, share of the large-block bandwidth",
              "chapter 3, Figure 3.1", 0.95, "share", lambda: read_tbs(SMALL_BLOCK) / read_tbs(LARGE_BLOCK),
              lower_bound=True),
        Point("memory", "load-to-use latency of tile memory", "chapter 3", 6, "cycles", None,
              not_modelled="tilefx costs memory by bandwidth only: it has no load-latency term"),
        Point("exchange", "on-chip latency, every tile sending / one tile sending", "chapter 4, Table 4.2",
              1.24, "x", lambda: exchange_latency(MK1.tiles) / exchange_latency(1)),
        Point("exchange", "IPU-Link latency, full load / no load (range over the IPU pairs: 4.0-7.7)",
              "chapter 4, Table 4.2", 4.0, "x", None,
              not_modelled="tilefx costs an IPU-to-IPU copy by its bytes over one link's bandwidth, with "
                           "no per-message latency, and the summaries give neither the message size nor the "
                           "no-load latency to compute it at"),
    ]


def ratio(p: Point, got: float) -> float:
    return got / p.published


def worst(ratios: list[float]) -> float:
    """The ratio farthest from 1 (in either direction)."""
    return max(ratios, key=lambda r: abs(math.log(r)))


def _fmt(v: float) -> str:
    return f"{v:.3g}"


def table(results: list[tuple[Point, float | None]]) -> str:
    """point | published | tilefx | ratio, and each curve's worst ratio."""
    lines = [f"  {'curve':<9} {'point':<72} {'published':>10} {'tilefx':>8} {'ratio':>6}"]
    by_curve: dict[str, list[float]] = {}
    for p, got in results:
        pub = (">= " if p.lower_bound else "") + _fmt(p.published) + f" {p.unit}"
        if got is None:
            lines.append(f"  {p.curve:<9} {p.what:<72} {pub:>10} {'-':>8} {'-':>6}  not modelled: {p.not_modelled}")
            continue
        r = ratio(p, got)
        by_curve.setdefault(p.curve, []).append(r)
        lines.append(f"  {p.curve:<9} {p.what:<72} {pub:>10} {_fmt(got):>8} {r:>6.2f}  ({p.where})")
    for curve in ("memory", "exchange", "matmul"):
        rs = by_curve.get(curve)
        lines.append(f"  worst ratio, {curve}: " + (f"{worst(rs):.2f}" if rs else
                                                    "none (no published point of this curve was reachable)"))
    return "\n".join(lines)


def curves() -> dict[str, list[tuple[float, float]]]:
    """Every curve's (x, tilefx) points."""
    return {
        "memory read (TB/s) vs bytes per tile": [(b, read_tbs(b)) for b in BLOCK_BYTES],
        "memory write (TB/s) vs bytes per tile": [(b, write_tbs(b)) for b in BLOCK_BYTES],
        "exchange latency (x one sender) vs tiles sending": [
            (s, exchange_latency(s) / exchange_latency(1)) for s in SENDERS],
        "matmul fp32 (TFLOPS) vs n": [(n, matmul_tflops(n, torch.float32)) for n in MATMUL_SIZES],
        "matmul fp16 (TFLOPS) vs n": [(n, matmul_tflops(n, torch.float16)) for n in MATMUL_SIZES],
    }


def _plot(out_dir: str, data: dict, results: list[tuple[Point, float | None]]) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tilefx.backend.plots import LEGEND

    pub = {p.what: p for p, _ in results}
    written = []

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for key, style in (("memory read (TB/s) vs bytes per tile", "o-"),
                       ("memory write (TB/s) vs bytes per tile", "s-")):
        xs, ys = zip(*data[key])
        ax.plot(xs, ys, style, label="tilefx " + key.split(" (")[0].removeprefix("memory "), markersize=3)
    ceiling = MK1.tiles * MK1.load_bytes_per_cycle * MK1.clock_hz / 1e12
    ax.axhline(ceiling, color="grey", linestyle=":", label=f"load ceiling {ceiling:.1f} TB/s (constant)")
    for p, _ in results:
        if p.curve != "memory" or p.unit != "TB/s":
            continue
        ax.plot([LARGE_BLOCK], [p.published], "*", markersize=11, label=f"Jia: {p.what} ({p.published} TB/s)")
    share = pub["read at 8 KiB per tile, share of the large-block bandwidth"]
    ax.plot([SMALL_BLOCK], [share.published * ceiling], "^", markersize=10,
            label="Jia: read at 8 KiB, above 95% of the ceiling (Figure 3.1)")
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, ceiling * 1.1)
    ax.set_xlabel("bytes per tile")
    ax.set_ylabel("aggregate bandwidth (TB/s), GC2")
    ax.set_title("On-tile memory bandwidth, Mk1 (Jia et al. chapter 3)")
    ax.legend(**LEGEND)
    written.append(_save(fig, out_dir, "memory.png"))

    fig, ax = plt.subplots(figsize=(8, 4.5))
    xs, ys = zip(*data["exchange latency (x one sender) vs tiles sending"])
    ax.plot(xs, ys, "o-", label=f"tilefx, {MESSAGE_BYTES} B per tile (exchange copy)")
    on_chip = pub["on-chip latency, every tile sending / one tile sending"]
    ax.plot([MK1.tiles], [on_chip.published], "*", markersize=11, label="Jia: on-chip, full load (Table 4.2)")
    ax.vlines([MK1.tiles], 4.0, 7.7, colors="C3", linewidth=3,
              label="Jia: IPU-Link, full load 4.0-7.7x (not modelled)")
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 8.5)
    ax.set_xlabel("tiles sending at once")
    ax.set_ylabel("latency / latency of one sender")
    ax.set_title("Exchange latency under load, Mk1 (Jia et al. chapter 4)")
    ax.legend(**LEGEND)
    written.append(_save(fig, out_dir, "exchange.png"))

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for key, peak in (("matmul fp32 (TFLOPS) vs n", MK1.peak_flops(4) / 1e12),
                      ("matmul fp16 (TFLOPS) vs n", MK1.peak_flops(2) / 1e12)):
        xs, ys = zip(*data[key])
        line, = ax.plot(xs, ys, "o-", label="tilefx " + key.split(" (")[0].removeprefix("matmul "))
        ax.axhline(peak, color=line.get_color(), linestyle=":", label=f"peak {peak:.1f} TFLOPS (constant)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("n (n x n x n product)")
    ax.set_ylabel("TFLOPS, GC2")
    ax.set_title("Matmul throughput, Mk1 (Jia et al. section 5.1: no published point reachable)")
    ax.legend(**LEGEND)
    written.append(_save(fig, out_dir, "matmul.png"))
    return written


def _save(fig, out_dir: str, name: str) -> str:
    path = os.path.join(out_dir, name)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path


def run(out_dir: str = DEFAULT_DIR) -> list[tuple[Point, float | None]]:
    """Compute every curve and point, write the plots and CSVs into `out_dir`
    and print the table; returns each point with tilefx's value (None: not
    modelled)."""
    os.makedirs(out_dir, exist_ok=True)
    results = [(p, p.compute() if p.compute else None) for p in points()]
    data = curves()
    with open(os.path.join(out_dir, "curves.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["curve", "x", "tilefx"])
        for name, pts in data.items():
            w.writerows([name, x, f"{y:.6g}"] for x, y in pts)
    with open(os.path.join(out_dir, "points.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["curve", "point", "where", "published", "unit", "lower_bound", "tilefx", "ratio",
                    "not_modelled"])
        for p, got in results:
            w.writerow([p.curve, p.what, p.where, p.published, p.unit, p.lower_bound,
                        "" if got is None else f"{got:.6g}", "" if got is None else f"{ratio(p, got):.4f}",
                        p.not_modelled])
    written = _plot(out_dir, data, results)
    print(f"Jia et al. (arXiv:1912.03413) against the machine model, offline Mk1 target; written to {out_dir}:")
    print("  " + ", ".join(os.path.basename(p) for p in written) + ", curves.csv, points.csv")
    print(table(results))
    return results
