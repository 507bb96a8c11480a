"""Replicated tensor sharding of the optimizer state in the machine model
(PopTorch user guide, `useReplicatedTensorSharding`; optimum-graphcore's `IPUConfig._to_options`): each of
R replicas keeps 1/R of a sharded state tensor, the gradient all-reduce of
its weight becomes a reduce-scatter before a sharded update and an
all-gather after it; tensors under 8192 elements stay whole; the numbers
never change."""

import copy

import pytest
import torch
from torch import nn

import tilefx
from tilefx.backend.collectives import all_reduce_cost
from tilefx.backend.locations import TensorLocation
from tilefx.backend.machine import MK2
from models import ShardablePair



def _compiled(replicas, sharded=True, on_chip=True, min_elements=None, offline=True, model=None):
    opts = tilefx.Options().replicationFactor(replicas)
    if offline:
        opts.useOfflineIpuTarget()
    loc = tilefx.TensorLocationSettings().useOnChipStorage(on_chip).useReplicatedTensorSharding(sharded)
    if min_elements is not None:
        loc.minElementsForReplicatedTensorSharding(min_elements)
    opts.TensorLocations.setOptimizerLocation(loc)
    torch.manual_seed(0)
    model = model or ShardablePair()
    ex = tilefx.trainingModel(model, opts, optimizer=tilefx.optim.AdamW(model.parameters(), lr=1e-2))
    ex.compile(torch.randn(2 * replicas, 256), torch.randint(0, 4, (2 * replicas,)))
    return ex


def _state(ex):
    return {t.name: t.nbytes for t in ex.profile.memory[0].tensors if t.kind == "optimizer"}


def test_sharded_state_keeps_one_replicas_share_and_small_tensors_stay_whole():
    whole = _state(_compiled(4, sharded=False))
    sharded = _state(_compiled(4))
    big = [n for n in whole if n.startswith("fc.weight/")]
    assert big and len(whole) == len(sharded)
    for n, b in whole.items():
        if n in big:  # 32,768 fp32 elements: a quarter on each replica's IPU
            assert sharded[f"{n} (1/4 shard)"] == b // 4 == 32768
        else:
            assert sharded[n] == b  # under 8192 elements: whole
    # the threshold is PopTorch's option
    everything = _state(_compiled(4, min_elements=0))
    assert all(name.endswith("(1/4 shard)") for name in everything)
    # one replica: nothing to shard over
    assert _state(_compiled(1)) == _state(_compiled(1, sharded=False))


def test_sharding_turns_the_all_reduce_into_reduce_scatter_update_all_gather():
    plain, rts = _compiled(4, sharded=False), _compiled(4)
    grads = (128 * 256 + 128 + 4 * 128 + 4) * 4
    sharded = 128 * 256 * 4  # fc.weight's accumulator: its state is sharded
    d = rts.profile.summary()["distributed"]
    assert d["sharded_bytes"] == {0: sharded}
    gather = all_reduce_cost(sharded, 4, 1, MK2, "allgather")
    assert d["allgather_cycles"] == gather.cycles
    steps = {s.kind: s for s in rts.profile.timeline if s.kind in ("allreduce", "update", "allgather")}
    # before the update: the whole gradients' all-reduce and the sharded one's reduce-scatter
    scatter = all_reduce_cost(sharded, 4, 1, MK2, "reducescatter")
    rest = all_reduce_cost(grads - sharded, 4, 1, MK2)
    assert steps["allreduce"].end - steps["allreduce"].start == scatter.cycles + rest.cycles
    assert steps["update"].start > steps["allreduce"].end and steps["allgather"].start == steps["update"].end
    # the two halves move the all-reduce's ring bytes
    full = all_reduce_cost(sharded, 4, 1, MK2)
    assert scatter.ipu_link_cycles + gather.ipu_link_cycles == pytest.approx(full.ipu_link_cycles, abs=2)
    assert scatter.sync_cycles + gather.sync_cycles == full.sync_cycles
    # the sharded update runs on a quarter of fc.weight's elements
    upd = {s.kind: s.end - s.start for s in plain.profile.timeline if s.kind == "update"}
    assert steps["update"].end - steps["update"].start < upd["update"]
    text = tilefx.backend.profile.summary_table(tilefx.backend.profile._jsonable(rts.profile.summary()))
    assert "replicated tensor sharding" in text


def _update_cycles(ex):
    return next(s.end - s.start for s in ex.profile.timeline if s.kind == "update")


def test_off_chip_sharded_state_streams_only_its_shard():
    """Off chip, the state is in streaming memory (not on the tiles) and each
    update loads and stores it: with sharding, only this replica's shard."""
    on, on_rts = _compiled(4, sharded=False), _compiled(4)
    off, off_rts = _compiled(4, sharded=False, on_chip=False), _compiled(4, on_chip=False)
    assert _state(off) == {} == _state(off_rts)
    stream = MK2.streaming_bytes_per_s
    for chip, streamed, state in ((on, off, _state(on)), (on_rts, off_rts, _state(on_rts))):
        assert _update_cycles(streamed) - _update_cycles(chip) == \
            2 * MK2.link_cycles(sum(state.values()), stream)
    assert sum(_state(on_rts).values()) < sum(_state(on).values())
    assert _update_cycles(off_rts) < _update_cycles(off)


def test_tensor_location_resolves_popart_defaults():
    settings = tilefx.TensorLocationSettings()
    assert settings.resolved() == TensorLocation()
    loc = tilefx.TensorLocationSettings().useOnChipStorage(False).minElementsForOffChip(100) \
        .useReplicatedTensorSharding(True).resolved()
    assert loc.off_chip(100) and not loc.off_chip(99)
    assert loc.shards(8192, 4) == 4 and loc.shards(8191, 4) == 1 and loc.shards(8192, 1) == 1


def test_sharding_never_changes_the_numbers():
    """Two replicas trained two steps with and without sharded state: the
    same weights, as the executor computes each replica whole."""
    torch.manual_seed(0)
    base = ShardablePair()
    x, y = torch.randn(4, 256), torch.randint(0, 4, (4,))
    weights = []
    for sharded in (False, True):
        m = copy.deepcopy(base)
        opts = tilefx.Options().replicationFactor(2)
        opts.TensorLocations.setOptimizerLocation(
            tilefx.TensorLocationSettings().useReplicatedTensorSharding(sharded))
        ex = tilefx.trainingModel(m, opts, optimizer=tilefx.optim.AdamW(m.parameters(), lr=1e-2))
        for _ in range(2):
            ex(x, y)
        ex.copyWeightsToHost()
        weights.append({k: v.clone() for k, v in m.state_dict().items()})
    for k in weights[0]:
        assert torch.equal(weights[0][k], weights[1][k]), k


# -- serial phased execution: which weights are on chip ------------------------------


class ThreePhases(nn.Module):
    """Three 256 x 256 layers, one per phase, on one IPU."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(256, 256) for _ in range(3))
        for k, layer in enumerate(self.layers):
            tilefx.BeginBlock(layer, f"p{k}", ipu_id=0)

    def forward(self, x, y):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x, nn.functional.mse_loss(x, y)


def _phased(liveness):
    from tilefx.enums import Liveness

    s = tilefx.SerialPhasedExecution(*(tilefx.Phase(tilefx.Stage(f"p{k}")) for k in range(3)))
    for k in range(3):
        s.phase(k).ipus(0)
    s.setTensorsLiveness(getattr(Liveness, liveness))
    torch.manual_seed(0)
    model = ThreePhases()
    opts = tilefx.Options().setExecutionStrategy(s)
    opts.Training.gradientAccumulation(2)
    ex = tilefx.trainingModel(model, opts, optimizer=tilefx.optim.AdamW(model.parameters(), lr=1e-3))
    ex.compile(torch.randn(2, 256), torch.randn(2, 256))
    return ex


def test_off_chip_after_each_phase_keeps_one_phases_weights_on_chip():
    """Liveness.OffChipAfterEachPhase (serial phased only): each phase loads
    its layer's weights, accumulators and state from streaming memory and
    only one phase's are on the tiles; AlwaysLive keeps all three layers'."""
    live, each = _phased("AlwaysLive"), _phased("OffChipAfterEachPhase")

    def resident(ex):
        return {t.name for t in ex.profile.memory[0].tensors if t.kind != "activation" and t.kind != "stash"}

    everything, one = resident(live), resident(each)
    prefixes = {n.split(".")[1] for n in one}
    assert len(prefixes) == 1 and one < everything  # one layer's tensors of the three
    assert {n.split(".")[1] for n in everything} == {"0", "1", "2"}
    layer = (256 * 256 + 256) * 4
    drop = live.profile.memory[0].always_live.sum() - each.profile.memory[0].always_live.sum()
    # two layers' weights, accumulators and AdamW's two state tensors each
    assert drop == pytest.approx(2 * 4 * layer, rel=0.01)

    def loads(ex):
        return sum(s.end - s.start for s in ex.profile.timeline if s.kind == "load")

    # each phase's load moves its layer's weights (and accumulator in the backward)
    assert loads(each) - loads(live) >= MK2.link_cycles(3 * layer * 2, MK2.streaming_bytes_per_s) - 12
    # the numbers never depend on where the tensors live
    x, y = torch.randn(2, 256), torch.randn(2, 256)
    assert torch.equal(live(x, y)[1], each(x, y)[1])
    live.copyWeightsToHost(), each.copyWeightsToHost()
    assert all(torch.equal(a, b) for a, b in zip(live.parameters(), each.parameters()))


def test_unmodelled_activation_sharding_is_said_not_dropped(caplog):
    """PopART shards only variables: a sharded activation location is said,
    not silently dropped (the numbers do not depend on it); an off-chip
    weight location is modelled (tests/backend/test_tensor_locations.py), so no
    warning."""
    opts = tilefx.Options()
    opts.TensorLocations.setWeightLocation(tilefx.TensorLocationSettings().useOnChipStorage(False))
    opts.TensorLocations.setActivationLocation(tilefx.TensorLocationSettings().useReplicatedTensorSharding(True))
    model = nn.Linear(4, 4)
    with caplog.at_level("WARNING"):
        out = tilefx.inferenceModel(model, opts)(torch.ones(2, 4))
    assert ("setActivationLocation({'useReplicatedTensorSharding': 1}): the machine model keeps activations "
            "whole") in caplog.text
    assert "setWeightLocation" not in caplog.text
    torch.testing.assert_close(out, model(torch.ones(2, 4)), rtol=0, atol=0)


def test_auto_stage_sizes_the_state_where_it_lives():
    """ipu-auto-stage's predicted bytes per stage count the optimizer state
    on chip, sharded over the replicas, or not at all off chip, as the
    profile does."""
    from models import BlockCNN, mnist_batches

    def stage_bytes(loc):
        torch.manual_seed(0)
        model = BlockCNN(ipus=(None,) * 4)
        opts = tilefx.Options().replicationFactor(2).setExecutionStrategy(tilefx.PipelinedExecution.auto(2))
        opts.useOfflineIpuTarget()
        opts.Training.gradientAccumulation(4)
        if loc is not None:
            opts.TensorLocations.setOptimizerLocation(loc)
        ex = tilefx.trainingModel(model, opts, optimizer=tilefx.optim.AdamW(model.parameters()))
        ex.compile(*mnist_batches(2, 8)[0])
        return sum(ex.profile.auto_stage["stage_bytes"])

    on = stage_bytes(None)
    rts = stage_bytes(tilefx.TensorLocationSettings().useReplicatedTensorSharding(True)
                      .minElementsForReplicatedTensorSharding(0))
    off = stage_bytes(tilefx.TensorLocationSettings().useOnChipStorage(False).minElementsForOffChip(0))
    assert off < rts < on


def test_device_ir_streams_the_state_the_profile_streams():
    """ir("device")'s remote loads of off-chip state follow the same location
    rules as the profile: tensors under minElementsForOffChip stay on chip,
    a sharded tensor moves one replica's share."""
    import re

    def loads(ex):
        return dict(re.findall(r'tile.remote_load.*?tensor = "([^"]+)".*?cycles = (\d+)', ex.ir("device")))

    every = {f"{p}/{s}" for p in ("fc.weight", "fc.bias", "head.weight", "head.bias") for s in ("exp_avg", "exp_avg_sq")}
    assert set(loads(_compiled(4, on_chip=False))) == every
    few = tilefx.Options().replicationFactor(4)
    few.useOfflineIpuTarget()
    few.TensorLocations.setOptimizerLocation(
        tilefx.TensorLocationSettings().useOnChipStorage(False).minElementsForOffChip(1000))
    model = ShardablePair()
    small = tilefx.trainingModel(model, few, optimizer=tilefx.optim.AdamW(model.parameters()))
    small.compile(torch.randn(8, 256), torch.randint(0, 4, (8,)))
    assert set(loads(small)) == {"fc.weight/exp_avg", "fc.weight/exp_avg_sq"}  # the others: under 1000 elements
    cycles = loads(_compiled(4, on_chip=False))
    stream = MK2.streaming_bytes_per_s
    assert int(cycles["fc.weight/exp_avg"]) == MK2.link_cycles(128 * 256 * 4 // 4, stream)  # a quarter
    assert int(cycles["fc.bias/exp_avg"]) == MK2.link_cycles(128 * 4, stream)  # whole: under 8192 elements
