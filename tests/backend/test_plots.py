"""The profile's PNGs as a user sees them: rendered, then checked that the
legend sits beside the axes (never over the data), memory axes start at zero,
titles say what the run is (a pipeline's schedule and bubble only for a
pipeline), the code every tile holds is shown, and the timeline marks
micro-batches and backward steps."""

import json

import matplotlib
import numpy as np
import pytest
import torch
from torch import nn

import tilefx
from tilefx.backend.plots import memory_over_time_figure, memory_per_tile_figure, timeline_figure

matplotlib.use("Agg")


class _Two(nn.Module):
    def __init__(self, ipus):
        super().__init__()
        self.ipus = ipus
        self.a, self.b = nn.Linear(16, 32), nn.Linear(32, 4)

    def forward(self, x, t):
        with tilefx.Block("B1", ipu_id=self.ipus[0]):
            x = torch.relu(self.a(x))
        with tilefx.Block("B2", ipu_id=self.ipus[1]):
            return nn.functional.mse_loss(self.b(x), t)


RUNS = {  # name: (IPU of each block, replicas, gradient accumulation)
    "single": ((0, 0), 1, 2),
    "replicated": ((0, 0), 2, 2),
    "pipelined": ((0, 1), 1, 4),
}


@pytest.fixture(scope="module", params=list(RUNS))
def run(request, tmp_path_factory):
    ipus, replicas, accumulation = RUNS[request.param]
    torch.manual_seed(0)
    model = _Two(ipus)
    opts = tilefx.Options().replicationFactor(replicas)
    opts.Training.gradientAccumulation(accumulation)
    n = 2 * replicas * accumulation
    ex = tilefx.trainingModel(model, opts, optimizer=tilefx.optim.SGD(model.parameters(), lr=0.1))
    ex.compile(torch.randn(n, 16), torch.randn(n, 4))
    directory = tmp_path_factory.mktemp(request.param)
    paths = ex.profile.write(str(directory))
    events = [e for e in json.loads((directory / "trace.json").read_text())["traceEvents"] if e.get("ph") == "X"]
    summary = json.loads((directory / "summary.json").read_text())
    return request.param, paths, events, summary, np.load(directory / "memory.npz")


def _drawn(fig):
    fig.canvas.draw()
    (ax,) = fig.axes
    return ax, ax.get_legend().get_window_extent(), ax.get_window_extent()


def test_pngs_are_written_and_readable(run):
    import matplotlib.image

    _, paths, *_ = run
    for p in paths:
        if p.endswith(".png"):
            image = matplotlib.image.imread(p)
            assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 500


def test_legends_sit_beside_the_axes_never_over_the_data(run):
    _, _, events, summary, mem = run
    for fig in (timeline_figure(events, summary), memory_per_tile_figure(mem, summary),
                memory_over_time_figure(events, summary)):
        ax, legend, axes = _drawn(fig)
        assert legend.x0 >= axes.x1, (legend, axes)  # wholly to the right of the plotted area
        # and inside the figure that is saved (bbox_inches="tight" keeps it)
        assert legend.x1 <= fig.get_tightbbox().transformed(fig.dpi_scale_trans).x1 + 1


def test_memory_axes_start_at_zero_and_show_the_code_every_tile_holds(run):
    _, _, events, summary, mem = run
    fig = memory_per_tile_figure(mem, summary)
    ax, *_ = _drawn(fig)
    assert ax.get_ylim()[0] == 0
    labels = ax.get_legend_handles_labels()[1]
    assert any("codelets" in t and "16 KiB" in t for t in labels)
    assert ax.get_ylim()[1] * 1024 >= max(mem[k].max() for k in mem.files)
    ax, *_ = _drawn(memory_over_time_figure(events, summary))
    assert ax.get_ylim()[0] == 0


def test_titles_match_the_strategy(run):
    name, _, events, summary, mem = run
    for fig in (timeline_figure(events, summary), memory_per_tile_figure(mem, summary)):
        title = fig.axes[0].get_title()
        if name == "pipelined":
            assert "pipelined over 2 IPUs (FillDrain, bubble" in title
        else:
            assert "pipelined" not in title and "FillDrain" not in title and "bubble" not in title
        if name == "replicated":
            assert "2 replicas of 1 IPU" in title
        if name == "single":
            assert "mk2, 1 IPU:" in title
    table = tilefx.backend.profile.summary_table(summary)
    assert ("bubble" in table) == (name == "pipelined")


def test_timeline_marks_micro_batches_and_backward_steps(run):
    name, _, events, summary, _ = run
    fig = timeline_figure(events, summary)
    ax, *_ = _drawn(fig)
    numbers = {t.get_text() for t in ax.texts}
    accumulation = RUNS[name][2]
    assert {str(i) for i in range(accumulation)} <= numbers  # every micro-batch numbered
    hatches = {p.get_hatch() for p in ax.patches}
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    if name == "pipelined":  # forward, backward and the last stage's combined step
        assert {"////", "xx"} <= hatches and {"forward", "backward"} <= set(labels)
    else:  # one stage: every step is forward + backward
        assert "xx" in hatches and "last stage: forward + backward" in labels


@pytest.fixture(autouse=True)
def _close_figures():
    import matplotlib.pyplot as plt

    yield
    plt.close("all")
