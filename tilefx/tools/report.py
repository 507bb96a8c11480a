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
