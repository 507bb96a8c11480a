"""`tilefx-report DIR`: print a profile directory's summary as a table and
re-make its plots (timeline, memory per tile, memory over time)."""

from __future__ import annotations

import argparse
import json
import os
import sys


def table(summary: dict, top_ops: int = 15) -> str:
    """The summary (as summary.json holds it: string keys) as a table."""
    s = summary
    lines = [f"{s['machine']} x {s['ipus']} IPU(s), {s['strategy']}: {s['total_cycles']:,} cycles "
             f"= {1e3 * s['seconds']:.3f} ms per call ({s['weight_updates_per_call']} x "
             f"{s['cycles_per_weight_update']:,} cycles)",
             "  IPU   busy cycles   utilisation   peak tile memory   always-live (max tile)"]
    for ipu, busy in s["ipu_busy_cycles"].items():
        mem = s["memory"].get(str(ipu), {})
        lines.append(f"  {ipu:>3}   {busy:>11,}   {100 * s['utilisation'].get(str(ipu), 0):>10.1f}%   "
                     f"{mem.get('peak_tile_bytes', 0):>12,} B   {mem.get('always_live_max_tile_bytes', 0):>12,} B")
    lines.append("  op                                   cycles")
    for name, cyc in [kv for kv in s["cycles_by_op"].items() if kv[1]][:top_ops]:
        lines.append(f"  {name:<34} {cyc:>10,}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tilefx-report", description=__doc__.splitlines()[0])
    ap.add_argument("directory")
    ap.add_argument("--no-plots", action="store_true")
    args = ap.parse_args(argv)
    path = os.path.join(args.directory, "summary.json")
    try:
        with open(path) as f:
            summary = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        print(f"error: cannot read {path}: {e}", file=sys.stderr)
        return 1
    print(table(summary))
    if not args.no_plots:
        from tilefx.backend.plots import write_plots

        for p in write_plots(args.directory):
            print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
