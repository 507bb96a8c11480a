"""Gathers and scatter-adds by index (tilefx/backend/slice_plan.py): costed as
PopLibs plans popops::multiSlice / multiUpdateAdd, so their cycles grow with
the indices each tile checks and the table's partitions, and a compiled
gather or scatter-add of edge-sized index sets is no longer a pass over its
result spread over every tile."""

import warnings

import pytest
import torch
from torch import nn

import tilefx
from tilefx.backend.machine import BOW, MK2
from tilefx.backend.slice_plan import plan_slice, slice_vertex_cycles, update_add_vertex_cycles


def test_multislice_vertex_estimate():
    # per worker: 30 fixed, 19 + 2 per 64-bit vector for an index in range, 8 out of range; x 6 workers
    assert slice_vertex_cycles(4, 8, 10, 10, 6) == (30 + 10 * (19 + 4 * 2)) * 6
    assert slice_vertex_cycles(4, 8, 10, 0, 6) == (30 + 10 * 8) * 6
    assert slice_vertex_cycles(2, 8, 10, 10, 6) == (30 + 10 * (19 + 4 * 2)) * 6  # fp16: 2 per vector


def test_multiupdateadd_vertex_estimate():
    # fp32: 38 fixed, 11 + 3 per further 4-byte atom in range, 5 out of range; x 6 workers
    assert update_add_vertex_cycles(4, 8, 10, 2, 6) == (38 + 2 * (11 + 7 * 3) + 8 * 5) * 6
    # fp16: two elements per atom
    assert update_add_vertex_cycles(2, 8, 10, 2, 6) == (37 + 2 * (13 + 3 * 3) + 8 * 5) * 6


@pytest.mark.parametrize("update", [None, "add"])
def test_cost_scales_with_the_indices(update):
    small = plan_slice(1024, 128, 4096, 4, BOW, 0.6, update)
    large = plan_slice(1024, 128, 32768, 4, BOW, 0.6, update)
    # 8x the indices: every tile checks more of them (the planner spreads some of the
    # growth over more index groups, each receiving the table block: never 8x)
    assert 2.5 < large.cycles / small.cycles < 8
    assert large.fits and small.fits


@pytest.mark.parametrize("update", [None, "add"])
def test_cost_grows_with_the_table(update):
    # the same indices into a table 4x as long and 4x as wide: the blocks each index
    # group broadcasts (a lookup) or reduces (an accumulating update) grow
    small = plan_slice(1024, 128, 32768, 4, BOW, 0.6, update)
    large = plan_slice(4096, 512, 32768, 4, BOW, 0.6, update)
    assert large.cycles > 2 * small.cycles


def test_plan_fits_the_memory_proportion():
    roomy = plan_slice(4096, 512, 32768, 4, BOW, 0.6, "add")
    tight = plan_slice(4096, 512, 32768, 4, BOW, 0.2, "add")
    assert tight.fits and tight.temp_bytes <= 0.2 * BOW.bytes_per_tile < roomy.temp_bytes
    assert tight.cycles >= roomy.cycles
    assert tight.u * tight.s * tight.l <= BOW.tiles


def test_update_without_accumulation_never_splits_the_indices():
    # multiUpdate has no reduction to merge index groups (PopLibs forbids the split)
    assert plan_slice(1024, 128, 32768, 4, MK2, 0.6, "set").l == 1


class _Messages(nn.Module):
    """Rows gathered along edges and summed into nodes, as message passing does."""

    def forward(self, h, src, dst):
        return torch.zeros_like(h).index_add(0, dst, h.index_select(0, src))


def _message_cycles(edges):
    opts = tilefx.Options().useOfflineIpuTarget(21)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ex = tilefx.inferenceModel(_Messages(), opts)
        with torch.device("meta"):
            args = (torch.zeros(1024, 128), torch.zeros(edges, dtype=torch.long),
                    torch.zeros(edges, dtype=torch.long))
        ex.compile(*args)
    return {r.name: r.cost for r in ex.profile.ops if r.name in ("aten.index_select", "aten.index_put")}


def test_compiled_gather_and_scatter_add_pay_for_every_index():
    costs = _message_cycles(32768)
    gather, scatter = costs["aten.index_select"], costs["aten.index_put"]
    # every gathered row is copied and every added row added on some tile: at least
    # 1 cycle per element copied and 3 per fp32 element added, over all the tiles
    assert gather.compute_cycles >= 32768 * 128 / BOW.tiles
    assert scatter.compute_cycles >= 3 * 32768 * 128 / BOW.tiles
    assert "indices in" in gather.plan and "indices in" in scatter.plan
    fewer = _message_cycles(4096)
    assert scatter.cycles > 2.5 * fewer["aten.index_put"].cycles
    assert gather.cycles > 2.5 * fewer["aten.index_select"].cycles


def test_embedding_lookup_is_planned_on_its_table():
    opts = tilefx.Options().useOfflineIpuTarget(21)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.device("meta"):
            model = nn.Embedding(30522, 1024).half()
        ex = tilefx.inferenceModel(model, opts)
        ex.compile(torch.zeros(8, 384, dtype=torch.long, device="meta"))
    cost = next(r.cost for r in ex.profile.ops if r.name == "aten.embedding")
    plan = plan_slice(30522, 1024, 8 * 384, 2, BOW, 0.6)
    assert cost.plan == plan.describe() and cost.cycles == plan.cycles
