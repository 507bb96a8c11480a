"""`tilefx-report DIR`: print a profile directory's summary as a table and
re-make its plots (timeline, memory per tile, memory over time)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from tilefx.backend.profile import summary_table as table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="tilefx-report", description=__doc__.splitlines()[0])
    ap.add_argument("directory")
    ap.add_argument("--no-plots", action="store_true")
    args = ap.parse_args(argv)
    if not os.path.exists(os.path.join(args.directory, "summary.json")):
        # a directory of several executors' profiles: one per subdirectory
        subs = sorted(d for d in os.listdir(args.directory) if os.path.isfile(
            os.path.join(args.directory, d, "summary.json"))) if os.path.isdir(args.directory) else []
        if subs:
            status = 0
            for d in subs:
                print(f"== {d}")
                status |= main([os.path.join(args.directory, d)] + (["--no-plots"] if args.no_plots else []))
            return status
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
