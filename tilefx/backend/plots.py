"""PNG plots of a profile directory (written by Profile.write, re-made by
`tilefx-report DIR`): the timeline per IPU, memory per tile of each IPU, and
memory over time (always-live plus the micro-batches in flight)."""

from __future__ import annotations

import json
import os

import numpy as np

COLOURS = {"compute": "#4c72b0", "exchange": "#64b5cd", "sync": "#ccb974", "update": "#dd8452",
           "host": "#55a868", "copy": "#c44e52", "load": "#8172b3", "store": "#937860",
           "allreduce": "#da8bc3", "allgather": "#8c8c8c"}


def write_plots(directory: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(os.path.join(directory, "trace.json")) as f:
        trace = json.load(f)["traceEvents"]
    with open(os.path.join(directory, "summary.json")) as f:
        summary = json.load(f)
    mem = np.load(os.path.join(directory, "memory.npz"))
    paths = []

    events = [e for e in trace if e.get("ph") == "X"]
    ipus = sorted({e["tid"] for e in events})
    fig, ax = plt.subplots(figsize=(10, 1 + 0.6 * max(len(ipus), 1)))
    for e in events:
        ax.barh(e["tid"], e["dur"], left=e["ts"], color=COLOURS.get(e["cat"], "grey"),
                edgecolor="white", linewidth=0.3)
    ax.set_yticks(ipus, [f"IPU{i}" for i in ipus])
    ax.invert_yaxis()
    ax.set_xlabel("time (us)")
    ax.set_title(f"{summary['machine']} {summary['strategy']}: {summary['total_cycles']:,} cycles per call")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLOURS.values()]
    ax.legend(handles, list(COLOURS), loc="upper right", fontsize=7, ncol=3)
    paths.append(_save(fig, directory, "timeline.png"))

    keys = sorted(k for k in mem.files if k.endswith("_peak"))
    fig, ax = plt.subplots(figsize=(10, 3.5))
    for k in keys:
        ax.plot(mem[k] / 1024, lw=0.8, label=k.replace("_peak", " peak"))
        ax.plot(mem[k.replace("_peak", "_always_live")] / 1024, lw=0.8, ls="--",
                label=k.replace("_peak", " always live"))
    ax.set_xlabel("tile")
    ax.set_ylabel("KiB")
    ax.set_title("memory per tile")
    ax.legend(fontsize=7)
    paths.append(_save(fig, directory, "memory_per_tile.png"))

    fig, ax = plt.subplots(figsize=(10, 3.5))
    for ipu, m in summary["memory"].items():
        base = m["always_live_max_tile_bytes"]
        act = max(m["peak_tile_bytes"] - base, 0)
        steps = sorted((e for e in events if e["tid"] == int(ipu)), key=lambda e: e["ts"])
        if not steps:
            continue
        flight = np.cumsum([1 if "fwd" in e["name"] else -1 if "bwd" in e["name"] else 0 for e in steps])
        flight = np.maximum(flight, 0)
        level = base + act * flight / max(flight.max(), 1)
        ax.step([e["ts"] for e in steps], level / 1024, where="post", label=f"IPU{ipu}")
    ax.set_xlabel("time (us)")
    ax.set_ylabel("KiB on the busiest tile")
    ax.set_title("memory over time")
    ax.legend(fontsize=7)
    paths.append(_save(fig, directory, "memory_over_time.png"))
    return paths


def _save(fig, directory: str, name: str) -> str:
    import matplotlib.pyplot as plt

    path = os.path.join(directory, name)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
