"""Where weights, activations and gradient accumulators live in the machine
model (`opts.TensorLocations.setWeightLocation` / `setActivationLocation` /
`setAccumulatorLocation`, backend/offload.py): off-chip tensors leave the
memory plan and are loaded (and stored) around their uses at the streaming
memory bandwidth, sharded weights keep 1/R on each replica and are
all-gathered before use, phased `Liveness.OffChipAfterFwd` reloads the
weights and activations for the backward. Each expectation is the formula:
bytes from the shapes, cycles from `Machine.link_cycles` and
`all_reduce_cost`; the profile, its summary and `ir("device")` agree, and
the numbers never change."""

import copy
import re

import torch
from torch import nn

import tilefx
from tilefx.backend.collectives import all_reduce_cost
from tilefx.backend.machine import MK2
from models import ShardablePair

F32 = 4
STREAM = MK2.streaming_bytes_per_s


def _stream(nbytes):
    return MK2.link_cycles(nbytes, STREAM)



SIZES = {"fc.weight": 128 * 256 * F32, "fc.bias": 128 * F32, "head.weight": 4 * 128 * F32, "head.bias": 4 * F32}
ALL = sum(SIZES.values())


def _settings(off=False, sharded=False):
    return tilefx.TensorLocationSettings().useOnChipStorage(not off).useReplicatedTensorSharding(sharded)


def _compiled(replicas=1, accumulation=2, **where):
    opts = tilefx.Options().replicationFactor(replicas)
    opts.useOfflineIpuTarget()
    opts.Training.gradientAccumulation(accumulation)
    for what, loc in where.items():
        getattr(opts.TensorLocations, f"set{what.capitalize()}Location")(loc)
    torch.manual_seed(0)
    model = ShardablePair()
    ex = tilefx.trainingModel(model, opts, optimizer=tilefx.optim.SGD(model.parameters(), lr=1e-2))
    n = 2 * replicas * accumulation
    ex.compile(torch.randn(n, 256), torch.randint(0, 4, (n,)))
    return ex


def _steps(ex, kind):
    return [s for s in ex.profile.timeline if s.kind == kind]


def _resident(ex, kind):
    return {t.name: t.nbytes for t in ex.profile.memory[0].tensors if t.kind == kind and "(" not in t.made_by
            and t.made_by in ("parameter", "ipu.accumulate")}


def _update(ex):
    return next(s.end - s.start for s in ex.profile.timeline if s.kind == "update")


def _device_moves(ex, func="main"):
    text = ex.ir("device")
    body = text[text.index(f"func.func @{func}"):]
    body = body[:body.index("\n  func.func") if "\n  func.func" in body else len(body)]
    return re.findall(r'tile\.(remote_load|remote_store|all_gather) %\S+ \{tensor = "([^"]+)"(?:, bytes = (\d+) : i64)?'
                      r', cycles = (\d+)', body)


def test_off_chip_weights_are_loaded_for_each_use_and_streamed_by_the_update():
    on, off = _compiled(), _compiled(weight=_settings(off=True))
    assert _resident(off, "weight") == {} and _resident(on, "weight") == SIZES
    # every micro-batch loads the four weights for the forward and head.weight again for the backward
    per_step = ALL + SIZES["head.weight"]
    loads = _steps(off, "load")
    assert [s.end - s.start for s in loads] == [_stream(per_step)] * 2
    computes = _steps(off, "compute")
    assert all(ld.end == c.start for ld, c in zip(loads, computes))
    assert off.profile.summary()["streaming"] == {"load": {"weight": 2 * per_step},
                                                  "load_cycles": 2 * _stream(per_step), "update_bytes": 2 * ALL}
    # the update loads every weight and stores the new value
    assert _update(off) - _update(on) == 2 * _stream(ALL)
    assert "tensor locations, per weight update: loaded from streaming memory: weights" in off.profile.table()
    # ir("device"): the same loads, one per tensor and stretch of uses
    main = _device_moves(off)
    assert sorted((k, t, int(c)) for k, t, _, c in main) == sorted(
        [("remote_load", n, _stream(b)) for n, b in SIZES.items()] +
        [("remote_load", "head.weight", _stream(SIZES["head.weight"]))])
    update = _device_moves(off, "update")
    assert sorted((k, t, int(c)) for k, t, _, c in update) == sorted(
        (k, n, _stream(b)) for n, b in SIZES.items() for k in ("remote_load", "remote_store"))


def test_min_elements_for_off_chip_keeps_small_weights_on_chip():
    ex = _compiled(weight=_settings(off=True).minElementsForOffChip(1000))
    assert _resident(ex, "weight") == {n: b for n, b in SIZES.items() if n != "fc.weight"}
    assert {t for _, t, _, _ in _device_moves(ex)} == {"fc.weight"}
    assert ex.profile.summary()["streaming"]["load"] == {"weight": 2 * SIZES["fc.weight"]}


def test_sharded_weights_keep_one_share_and_are_gathered_before_use():
    """Replicated tensor sharding of weights over 4 replicas: fc.weight keeps
    a quarter on each replica and is all-gathered before the forward; its
    gradient is reduce-scattered and its update runs on the shard, which
    stays sharded (no all-gather after the update)."""
    ex = _compiled(replicas=4, weight=_settings(sharded=True))
    assert _resident(ex, "weight") == {"fc.weight (1/4 shard)": SIZES["fc.weight"] // 4,
                                       **{n: b for n, b in SIZES.items() if n != "fc.weight"}}
    gather = all_reduce_cost(SIZES["fc.weight"], 4, 1, MK2, "allgather").cycles
    per_step = [s for s in _steps(ex, "allgather") if s.stage >= 0]
    assert [s.end - s.start for s in per_step] == [gather] * 2
    assert not [s for s in _steps(ex, "allgather") if s.stage < 0]
    reduce = _steps(ex, "allreduce")[0]
    scatter = all_reduce_cost(SIZES["fc.weight"], 4, 1, MK2, "reducescatter").cycles
    assert reduce.end - reduce.start == scatter + all_reduce_cost(ALL - SIZES["fc.weight"], 4, 1, MK2).cycles
    assert ex.profile.summary()["streaming"] == {"gather": {"weight": 2 * SIZES["fc.weight"]},
                                                 "gather_cycles": 2 * gather}
    assert [(k, t, int(b), int(c)) for k, t, b, c in _device_moves(ex)] == [
        ("all_gather", "fc.weight", SIZES["fc.weight"], gather)]
    # the sharded update: a quarter of fc.weight's SGD
    assert _update(ex) < _update(_compiled(replicas=4))


def test_off_chip_sharded_weights_stream_only_their_share():
    ex = _compiled(replicas=4, weight=_settings(off=True, sharded=True))
    assert _resident(ex, "weight") == {}
    share = SIZES["fc.weight"] // 4
    per_step = share + ALL - SIZES["fc.weight"] + SIZES["head.weight"]
    assert [s.end - s.start for s in _steps(ex, "load")] == [_stream(per_step)] * 2
    moves = {(k, t): int(c) for k, t, _, c in _device_moves(ex)}
    assert moves[("remote_load", "fc.weight")] == _stream(share)
    assert moves[("all_gather", "fc.weight")] == all_reduce_cost(SIZES["fc.weight"], 4, 1, MK2, "allgather").cycles
    assert ex.profile.summary()["streaming"]["update_bytes"] == 2 * (ALL - SIZES["fc.weight"] + share)
    # the chain in the device IR: load the share, gather it, the matmul's transpose reads the whole
    text = ex.ir("device")
    loaded = re.search(r'(%\d+) = tile\.remote_load %\d+ \{tensor = "fc\.weight"', text).group(1)
    gathered = re.search(rf'(%\d+) = tile\.all_gather {loaded} ', text).group(1)
    assert f"aten.permute {gathered} " in text


def test_off_chip_accumulators_are_loaded_around_each_accumulation():
    on, off = _compiled(), _compiled(accumulator=_settings(off=True))
    assert _resident(off, "accumulator") == {} and len(_resident(on, "accumulator")) == 4
    assert [s.end - s.start for s in _steps(off, "load")] == [_stream(ALL)] * 2
    assert [s.end - s.start for s in _steps(off, "store")] == [_stream(ALL)] * 2
    assert off.profile.summary()["streaming"] == {
        "load": {"accumulator": 2 * ALL}, "store": {"accumulator": 2 * ALL}, "load_cycles": 2 * _stream(ALL),
        "store_cycles": 2 * _stream(ALL), "update_bytes": ALL}
    assert _update(off) - _update(on) == _stream(ALL)  # the update reads them from streaming memory
    main = _device_moves(off)
    for n, b in SIZES.items():
        name = f"{n} (gradient accumulator)"
        assert [(k, int(c)) for k, t, _, c in main if t == name] == [("remote_load", _stream(b)),
                                                                     ("remote_store", _stream(b))]
    assert "ipu.accumulate" in off.ir("device")


def test_off_chip_activations_are_stored_after_the_forward_and_loaded_for_the_backward():
    """The forward values the backward reads: the ReLU output (2 x 128) and
    the log-softmax (2 x 4) of each micro-batch."""
    ex = _compiled(activation=_settings(off=True))
    saved = (2 * 128 + 2 * 4) * F32
    assert [s.end - s.start for s in _steps(ex, "store")] == [_stream(saved)] * 2
    assert [s.end - s.start for s in _steps(ex, "load")] == [_stream(saved)] * 2
    assert ex.profile.summary()["streaming"]["store"] == {"activation": 2 * saved}
    main = _device_moves(ex)
    assert sorted((k, int(c)) for k, _, _, c in main) == sorted(
        [(k, _stream(b)) for b in (2 * 128 * F32, 2 * 4 * F32) for k in ("remote_load", "remote_store")])


class TwoStages(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(64, 64)
        self.b = nn.Linear(64, 8)
        tilefx.BeginBlock(self.a, "a", ipu_id=0)
        tilefx.BeginBlock(self.b, "b", ipu_id=1)

    def forward(self, x, y):
        out = self.b(torch.relu(self.a(x)))
        return out, nn.functional.cross_entropy(out, y)


def _pipelined(activation=None):
    opts = tilefx.Options()
    opts.useOfflineIpuTarget()
    opts.Training.gradientAccumulation(4)
    if activation is not None:
        opts.TensorLocations.setActivationLocation(activation)
    torch.manual_seed(0)
    model = TwoStages()
    ex = tilefx.trainingModel(model, opts, optimizer=tilefx.optim.SGD(model.parameters(), lr=1e-2))
    ex.compile(torch.randn(16, 64), torch.randint(0, 8, (16,)))
    return ex


def test_off_chip_activations_are_not_stashed_on_chip_by_the_pipeline():
    on, off = _pipelined(), _pipelined(_settings(off=True))
    # IPU 0 stashes its forward values for the backward stage 2 (two micro-batches in flight)
    assert on.profile.stash_bytes[0] > 0 and off.profile.stash_bytes.get(0, 0) == 0
    # IPU 1's stash is a backward value (the gradient sent to stage 2): not an activation
    assert off.profile.stash_bytes[1] == on.profile.stash_bytes[1]
    stores = {(s.stage, s.micro_batch) for s in _steps(off, "store")}
    loads = {(s.stage, s.micro_batch) for s in _steps(off, "load")}
    # stored by the forward stages, loaded by the backward ones, every micro-batch
    fwd = {s.stage for s in _steps(off, "compute") if s.direction == "fwd"}
    assert {st for st, _ in stores} <= fwd | {1} and not ({st for st, _ in loads} & (fwd - {1}))
    assert {mb for _, mb in stores} == {0, 1, 2, 3} == {mb for _, mb in loads}
    st = off.profile.summary()["streaming"]
    assert st["store"] == st["load"]
    assert max(off.profile.memory[0].peak) <= max(on.profile.memory[0].peak)


def test_locations_never_change_the_numbers():
    torch.manual_seed(0)
    base = ShardablePair()
    x, y = torch.randn(8, 256), torch.randint(0, 4, (8,))
    results = []
    for where in ({}, {"weight": _settings(off=True, sharded=True), "activation": _settings(off=True),
                       "accumulator": _settings(off=True)}):
        m = copy.deepcopy(base)
        opts = tilefx.Options().replicationFactor(2)
        opts.Training.gradientAccumulation(2)
        for what, loc in where.items():
            getattr(opts.TensorLocations, f"set{what.capitalize()}Location")(loc)
        ex = tilefx.trainingModel(m, opts, optimizer=tilefx.optim.SGD(m.parameters(), lr=1e-2))
        losses = [ex(x, y)[1].clone() for _ in range(2)]
        ex.copyWeightsToHost()
        results.append((losses, {k: v.clone() for k, v in m.state_dict().items()}))
    (l0, w0), (l1, w1) = results
    assert all(torch.equal(a, b) for a, b in zip(l0, l1))
    assert all(torch.equal(w0[k], w1[k]) for k in w0)


# -- phased execution: Liveness.OffChipAfterFwd -----------------------------------


def test_off_chip_after_fwd_reloads_weights_and_activations_for_the_backward():
    from test_tensor_sharding import _phased

    live, after = _phased("AlwaysLive"), _phased("OffChipAfterFwd")
    layer_w, layer_b = 256 * 256 * F32, 256 * F32
    assert {n for n in _resident(live, "weight")} == {f"layers.{k}.{p}" for k in range(3) for p in ("weight", "bias")}
    assert _resident(after, "weight") == {}
    st = after.profile.summary()["streaming"]
    # every layer's weights come back for the forward; layers 1 and 2's weight
    # matrices again for the backward (layer 0's input gradient is not needed,
    # and no bias is read by the backward)
    assert st["load"]["weight"] == 3 * (layer_w + layer_b) + 2 * layer_w
    # the three ReLU outputs (1 x 256) of both micro-batches leave after the forward
    # (the loss's one-element values stay: under minElementsForOffChip's 2)
    saved = 3 * 2 * 256 * F32
    assert st["store"] == {"activation": saved} and st["load"]["activation"] == saved
    assert st["update_bytes"] == 2 * 3 * (layer_w + layer_b)
    assert "load_cycles" not in st  # the phases' own load steps carry them
    line = next(t for t in after.profile.table().splitlines() if "tensor locations" in t)
    assert "weights 1,313,792 B" in line and "cycles" not in line
    assert _update(after) - _update(live) == 2 * _stream(3 * (layer_w + layer_b))
    # the backward phases carry the reloads: more load cycles than AlwaysLive's
    loads = {s.stage: s.end - s.start for s in live.profile.timeline if s.kind == "load"}
    reloads = {s.stage: s.end - s.start for s in after.profile.timeline if s.kind == "load"}
    assert all(reloads[s] >= loads[s] for s in loads) and sum(reloads.values()) > sum(loads.values())
    x, y = torch.randn(2, 256), torch.randn(2, 256)
    assert torch.equal(live(x, y)[1], after(x, y)[1])
    # without overlap (serial phased only): the same moves, as serial phases never overlap them
    no_overlap = _phased("OffChipAfterFwdNoOverlap")
    assert no_overlap.profile.summary()["streaming"] == st
    assert no_overlap.profile.total_cycles == after.profile.total_cycles


# -- a user's options (optimum-graphcore's `IPUConfig._to_options`) ------


def test_ipu_config_style_options_with_weights_and_activations_off_chip(caplog):
    """optimum-graphcore's `IPUConfig._to_options` with the optimizer state
    off chip and sharded, plus weights sharded and activations off chip, on a
    pipelined two-IPU model: no warning, the profile says what moves where,
    and the losses equal those of the same run with everything on chip."""

    def options(locations):
        opts = tilefx.Options()
        opts.replicationFactor(2)
        opts.deviceIterations(1)
        opts.Training.gradientAccumulation(4)
        opts.Training.accumulationAndReplicationReductionType(tilefx.ReductionType.Mean)
        opts.outputMode(tilefx.OutputMode.Final)
        opts.randomSeed(42)
        if locations:
            opts.TensorLocations.setOptimizerLocation(
                tilefx.TensorLocationSettings().useOnChipStorage(False)
                .useReplicatedTensorSharding(opts.replication_factor > 1))
            opts.TensorLocations.setWeightLocation(
                tilefx.TensorLocationSettings().useReplicatedTensorSharding(True)
                .minElementsForReplicatedTensorSharding(1024))
            opts.TensorLocations.setActivationLocation(tilefx.TensorLocationSettings().useOnChipStorage(False))
        opts.setExecutionStrategy(tilefx.PipelinedExecution(tilefx.AutoStage.AutoIncrement))
        opts.setAvailableMemoryProportion({"IPU0": 0.3, "IPU1": 0.3})
        opts.Precision.enableStochasticRounding(False)
        return opts

    torch.manual_seed(0)
    base = TwoStages()
    x, y = torch.randn(16, 64), torch.randint(0, 8, (16,))
    runs = []
    for locations in (False, True):
        m = copy.deepcopy(base)
        with caplog.at_level("WARNING"):
            ex = tilefx.trainingModel(m, options(locations), optimizer=tilefx.optim.AdamW(m.parameters(), lr=1e-3))
            losses = [ex(x, y)[1].clone() for _ in range(2)]
        runs.append((ex, losses))
    assert "TensorLocations" not in caplog.text
    (plain, l0), (placed, l1) = runs
    torch.testing.assert_close(l0, l1, rtol=0, atol=0)
    st = placed.profile.summary()["streaming"]
    gathered = 64 * 64 * F32  # a.weight: 4,096 elements, sharded from 1,024
    # four micro-batches, each gathers a.weight for the forward (the backward of
    # the first layer does not read it)
    assert st["gather"] == {"weight": gathered * 4}
    assert st["store"]["activation"] == st["load"]["activation"] > 0
    shards = [t for t in placed.profile.memory[0].tensors if t.name == "a.weight (1/2 shard)"]
    assert [t.nbytes for t in shards] == [gathered // 2]
    assert placed.profile.stash_bytes.get(0, 0) == 0 < plain.profile.stash_bytes[0]
    assert "tile.all_gather" in placed.ir("device")


def test_auto_stage_sizes_weights_activations_and_accumulators_where_they_live():
    """ipu-auto-stage's predicted bytes per stage leave out off-chip weights,
    accumulators and stashed activations, and count a sharded weight's share,
    as the profile's memory plan does."""
    from models import BlockCNN, mnist_batches

    def stage_bytes(**where):
        torch.manual_seed(0)
        model = BlockCNN(ipus=(None,) * 4)
        opts = tilefx.Options().replicationFactor(2).setExecutionStrategy(tilefx.PipelinedExecution.auto(2))
        opts.useOfflineIpuTarget()
        opts.Training.gradientAccumulation(4)
        for what, loc in where.items():
            getattr(opts.TensorLocations, f"set{what.capitalize()}Location")(loc)
        ex = tilefx.trainingModel(model, opts, optimizer=tilefx.optim.SGD(model.parameters(), lr=1e-2))
        ex.compile(*mnist_batches(2, 8)[0])
        return sum(ex.profile.auto_stage["stage_bytes"])

    everything = stage_bytes()
    for what, loc in (("weight", _settings(off=True)), ("accumulator", _settings(off=True)),
                      ("activation", _settings(off=True)),
                      ("weight", _settings(sharded=True).minElementsForReplicatedTensorSharding(0))):
        assert stage_bytes(**{what: loc}) < everything, (what, loc.toDict())


def test_device_ir_costs_the_ops_of_loaded_weights_as_the_profile_does():
    """A weight loaded from streaming memory or all-gathered lands laid out
    for its matmul, as a resident one: the device IR's op costs in @main are
    the profile's."""
    for ex in (_compiled(weight=_settings(off=True)), _compiled(replicas=4, weight=_settings(sharded=True))):
        text = ex.ir("device")
        main = text[:text.index("func.func @update")]
        device = sum(int(c) for c in re.findall(r"tile\.cost = #tile\.cost<cycles = (\d+)", main))
        assert device == sum(r.cost.cycles for r in ex.profile.ops if r.direction != "update") > 0
