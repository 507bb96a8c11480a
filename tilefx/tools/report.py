"""`tilefx-report DIR`: print a profile directory's summary as a table and
re-make its plots (timeline, memory per tile, memory over time).

A directory whose files are missing, unreadable or not what tilefx writes
(summary.json, trace.json, memory.npz) gives a one-line `error:` and exit 1."""

from __future__ import annotations

import argparse
import json
import os
import sys
import zipfile

from tilefx.backend.profile import summary_table as table

# what a damaged or foreign file raises while the table or the plots read it
_BAD_DATA = (OSError, EOFError, json.JSONDecodeError, KeyError, TypeError, ValueError,
             AttributeError, IndexError, zipfile.BadZipFile)


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


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
    except (OSError, ValueError) as e:
        print(f"error: cannot read {path}: {_one_line(e)}", file=sys.stderr)
        return 1
    try:
        if not isinstance(summary, dict):
            raise TypeError(f"expected a JSON object, got {type(summary).__name__}")
        text = table(summary)
    except _BAD_DATA as e:
        print(f"error: {path} is not a tilefx profile summary ({_one_line(e)})", file=sys.stderr)
        return 1
    print(text)
    if not args.no_plots:
        from tilefx.backend.plots import write_plots

        try:
            for p in write_plots(args.directory):
                print(f"wrote {p}")
        except _BAD_DATA as e:
            print(f"error: cannot plot the profile in {args.directory} ({_one_line(e)})",
                  file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
