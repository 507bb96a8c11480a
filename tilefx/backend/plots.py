"""PNG plots of a profile directory (written by Profile.write, re-made by
`tilefx-report DIR`): the timeline per IPU, memory per tile of each IPU, and
memory over time (always-live plus the micro-batches in flight).

Each figure keeps its legend outside the axes (beside them, never over the
data), starts its memory axes at zero, and is titled by what the run is: a
single IPU, replicas, or a pipeline with its schedule and bubble only when
there is one (`run_title`, shared with the text report)."""

from __future__ import annotations

import json
import os
import re

import numpy as np

COLOURS = {"compute": "#4c72b0", "exchange": "#64b5cd", "sync": "#ccb974", "update": "#dd8452",
           "host": "#55a868", "copy": "#c44e52", "load": "#8172b3", "store": "#937860",
           "allreduce": "#da8bc3", "allgather": "#8c8c8c"}
# a step's pass, from the trace event's name ("stage 3 bwd mb 2 compute"): backward hatched
HATCHES = {"fwd": "", "bwd": "////", "fwd+bwd": "xx"}
PASS_LABELS = {"fwd": "forward", "bwd": "backward", "fwd+bwd": "last stage: forward + backward"}
_STEP = re.compile(r"stage (\d+) (fwd\+bwd|fwd|bwd)(?: mb (\d+))?")
# the legend's place: beside the axes, to their right
LEGEND = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "borderaxespad": 0.0, "fontsize": 7}


def is_pipelined(summary: dict) -> bool:
    """Whether the run is a pipeline: pipelined execution over more than one stage."""
    return summary["strategy"] == "pipelined" and len(summary.get("stage_cycles") or {}) > 1


def run_title(summary: dict) -> str:
    """What the run is, for titles and the report: "mk2, 1 IPU", "mk2, 2 replicas
    of 1 IPU", "mk2, pipelined over 4 IPUs (FillDrain, bubble 31.2%)"."""
    ipus = summary["ipus"]
    if is_pipelined(summary):
        what = (f"pipelined over {ipus} IPUs ({summary.get('schedule') or 'FillDrain'}, "
                f"bubble {100 * summary.get('bubble_fraction', 0.0):.1f}%)")
    elif ipus == 1:
        what = "1 IPU"
    else:
        what = f"{summary['strategy'].replace('_', ' ')} over {ipus} IPUs"
    replicas = (summary.get("distributed") or {}).get("replicas", 1)
    if replicas > 1:
        what = f"{replicas} replicas of {what}"
    return f"{summary['machine']}, {what}"


def timeline_figure(events: list[dict], summary: dict):
    """Each IPU's steps over time, coloured by kind; backward steps hatched
    and each stage step numbered with its micro-batch."""
    import matplotlib.pyplot as plt

    ipus = sorted({e["tid"] for e in events})
    fig, ax = plt.subplots(figsize=(12, 1.2 + 0.6 * max(len(ipus), 1)))
    steps: dict[tuple, list[float]] = {}
    passes = set()
    for e in events:
        m = _STEP.match(e["name"])
        hatch = HATCHES[m.group(2)] if m else ""
        ax.barh(e["tid"], e["dur"], left=e["ts"], color=COLOURS.get(e["cat"], "grey"),
                edgecolor="white", linewidth=0.3, hatch=hatch)
        if m:
            passes.add(m.group(2))
            if m.group(3) is not None:  # one step: its compute, exchange and sync events
                key = (e["tid"], m.group(1), m.group(2), int(m.group(3)))
                span = steps.setdefault(key, [e["ts"], e["ts"] + e["dur"]])
                span[0], span[1] = min(span[0], e["ts"]), max(span[1], e["ts"] + e["dur"])
    end = max((e["ts"] + e["dur"] for e in events), default=1.0)
    for (tid, _, _, mb), (t0, t1) in steps.items():
        if t1 - t0 > 0.012 * end:  # room for the number
            ax.text((t0 + t1) / 2, tid, str(mb), ha="center", va="center", fontsize=6,
                    color="black", bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none",
                                         "alpha": 0.7})
    ax.set_yticks(ipus, [f"IPU{i}" for i in ipus])
    ax.invert_yaxis()
    ax.set_xlim(0, end)
    ax.set_xlabel("time (us); numbers: micro-batch")
    ax.set_title(f"{run_title(summary)}: {summary['total_cycles']:,} cycles per call")
    used = [k for k in COLOURS if any(e["cat"] == k for e in events)]
    handles = [plt.Rectangle((0, 0), 1, 1, color=COLOURS[k]) for k in used]
    labels = list(used)
    for p in ("fwd", "bwd", "fwd+bwd"):
        if p in passes:
            handles.append(plt.Rectangle((0, 0), 1, 1, facecolor="white", edgecolor="black", hatch=HATCHES[p]))
            labels.append(PASS_LABELS[p])
    ax.legend(handles, labels, **LEGEND)
    return fig


def memory_per_tile_figure(mem, summary: dict):
    """Each IPU's peak and always-live bytes per tile, from zero, with the
    codelets every tile holds shaded: the floor of the always-live line."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(12, 3.5))
    codelets = summary.get("codelet_bytes_per_tile", 0) / 1024
    if codelets:
        ax.axhspan(0, codelets, color="#dddddd", zorder=0,
                   label=f"code every tile holds: PopLibs codelets, {codelets:.0f} KiB")
    keys = sorted(k for k in mem.files if k.endswith("_peak"))
    for k in keys:
        ipu = k.replace("_peak", "").upper()
        ax.plot(mem[k] / 1024, lw=0.8, label=f"{ipu} peak")
        ax.plot(mem[k.replace("_peak", "_always_live")] / 1024, lw=0.8, ls="--",
                label=f"{ipu} always live (code, weights, optimizer state, accumulators)")
    ax.set_ylim(bottom=0)
    ax.set_xlim(0, max((len(mem[k]) for k in keys), default=1) - 1)
    ax.set_xlabel("tile")
    ax.set_ylabel("KiB")
    ax.set_title(f"{run_title(summary)}: memory per tile")
    ax.legend(**LEGEND)
    return fig


def memory_over_time_figure(events: list[dict], summary: dict):
    """The busiest tile's bytes over time: always live, plus the activations
    of the micro-batches in flight (forward steps add one, backward steps
    retire one)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(12, 3.5))
    for ipu, m in summary["memory"].items():
        base = m["always_live_max_tile_bytes"]
        act = max(m["peak_tile_bytes"] - base, 0)
        steps = sorted((e for e in events if e["tid"] == int(ipu)), key=lambda e: e["ts"])
        if not steps:
            continue
        flight = np.cumsum([1 if "fwd" in e["name"] else -1 if "bwd" in e["name"] else 0 for e in steps])
        flight = np.maximum(flight, 0)
        level = base + act * flight / max(flight.max(), 1)
        line, = ax.step([e["ts"] for e in steps], level / 1024, where="post", label=f"IPU{ipu}")
        ax.axhline(base / 1024, color=line.get_color(), lw=0.6, ls=":",
                   label=f"IPU{ipu} always live (busiest tile)")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("time (us)")
    ax.set_ylabel("KiB on the busiest tile")
    ax.set_title(f"{run_title(summary)}: memory over time")
    ax.legend(**LEGEND)
    return fig


def write_plots(directory: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")

    with open(os.path.join(directory, "trace.json")) as f:
        trace = json.load(f)["traceEvents"]
    with open(os.path.join(directory, "summary.json")) as f:
        summary = json.load(f)
    mem = np.load(os.path.join(directory, "memory.npz"))
    events = [e for e in trace if e.get("ph") == "X"]
    return [_save(timeline_figure(events, summary), directory, "timeline.png"),
            _save(memory_per_tile_figure(mem, summary), directory, "memory_per_tile.png"),
            _save(memory_over_time_figure(events, summary), directory, "memory_over_time.png")]


def _save(fig, directory: str, name: str) -> str:
    import matplotlib.pyplot as plt

    path = os.path.join(directory, name)
    fig.tight_layout()
    fig.savefig(path, dpi=100, bbox_inches="tight")  # the legend beside the axes included
    plt.close(fig)
    return path
