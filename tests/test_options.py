"""Tests for tilefx.api.options (poptorch.Options) and tilefx.api.enums."""

import builtins
import copy
import json
import logging
import os
from tempfile import NamedTemporaryFile

import pytest
import torch

from tilefx.api import enums
from tilefx.api import option_groups
from tilefx.api import options as options_module
from tilefx.api.enums import (
    AnchorMode,
    AutoStage,
    CommGroup,
    CommGroupType,
    ConnectionType,
    HalfFloatCastingBehavior,
    MeanReductionStrategy,
    OutputMode,
    ReductionType,
    SyncPattern,
)
import tilefx.popart as popart
from tilefx.api.errors import Error
from tilefx.api.options import (
    FROZEN_MESSAGE,
    STRATEGY_FACTORIES,
    ConfigFileError,
    Options,
    OptionsError,
    TensorLocationSettings,
)

ENV_VARS = ("POPTORCH_DEFAULT_OPTIONS", "TILEFX_DEFAULT_OPTIONS",
            "POPTORCH_CACHE_DIR", "TILEFX_CACHE_DIR", "OMPI_COMM_WORLD_SIZE",
            "OMPI_COMM_WORLD_RANK", "WORLD_SIZE", "RANK", "TILEFX_DISTRIBUTED_TIMEOUT")


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch):
    """No option-related environment variables; torch RNG restored."""
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    state = torch.get_rng_state()
    yield
    torch.set_rng_state(state)


# Stand-ins for the execution strategies (defined elsewhere in tilefx).
class FakeStrategy:
    def __init__(self, auto_stage=AutoStage.SameAsIpu):
        self.auto_stage = auto_stage

    def __repr__(self):
        return f"{type(self).__name__}({self.auto_stage})"


class ShardedExecution(FakeStrategy):
    pass


class PipelinedExecution(FakeStrategy):
    _CONFIG_METHODS = {"setAutoStage"}

    def setAutoStage(self, auto_stage):
        self.auto_stage = auto_stage
        return self

    def secret(self):  # not whitelisted
        raise RuntimeError("must never be called from a config file")


@pytest.fixture
def strategies(monkeypatch):
    monkeypatch.setitem(STRATEGY_FACTORIES, "ShardedExecution",
                        ShardedExecution)
    monkeypatch.setitem(STRATEGY_FACTORIES, "PipelinedExecution",
                        PipelinedExecution)


def write(tmp_path, text, name="poptorch.conf"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# --------------------------------------------------------------------------
# Enums
# --------------------------------------------------------------------------


def test_enum_members_and_values():
    assert [m.name for m in OutputMode] == [
        "Final", "EveryN", "All", "Sum", "Default"
    ]
    assert int(OutputMode.All) == 2 and int(OutputMode.Default) == 4
    assert [m.name for m in ReductionType] == ["Sum", "Mean", "NoReduction"]
    assert [m.name for m in MeanReductionStrategy] == [
        "Running", "Post", "PostAndLoss"
    ]
    assert [m.name for m in enums.Liveness] == [
        "AlwaysLive", "OffChipAfterFwd", "OffChipAfterFwdNoOverlap",
        "OffChipAfterEachPhase"
    ]
    assert [m.name for m in AutoStage] == ["SameAsIpu", "AutoIncrement"]
    assert [m.name for m in CommGroupType] == [
        "All", "Consecutive", "Orthogonal", "NoGrouping"
    ]
    assert [m.name for m in enums.VariableRetrievalMode
            ] == ["OnePerGroup", "AllReplicas"]
    assert [m.name for m in enums.DataLoaderMode
            ] == ["Sync", "Async", "AsyncRebatched"]
    assert [m.name for m in enums.MatMulSerializationMode] == [
        "InputChannels", "ReducingDim", "OutputChannels", "Disabled"
    ]
    assert [m.name for m in enums.MultiConvPlanType] == ["Parallel", "Serial"]
    assert [m.name for m in SyncPattern
            ] == ["Full", "SinglePipeline", "ReplicaAndLadder"]
    assert [m.name for m in ConnectionType] == ["Always", "OnDemand", "Never"]
    assert [m.name for m in HalfFloatCastingBehavior] == [
        "FloatDowncastToHalf", "HalfUpcastToFloat", "Default"
    ]
    assert enums.AnchorMode is OutputMode


def test_enum_str_is_qualified():
    assert str(OutputMode.All) == "OutputMode.All"
    assert f"{ReductionType.Mean}" == "ReductionType.Mean"
    assert str(enums.MatMulSerializationMode.ReducingDim) == \
        "MatMulSerializationMode.ReducingDim"


def test_comm_group():
    assert CommGroup().type == CommGroupType.All
    assert CommGroup(CommGroupType.Consecutive, 2).groups(4) == [[0, 1],
                                                                [2, 3]]
    assert CommGroup(CommGroupType.Orthogonal, 2).groups(4) == [[0, 2],
                                                               [1, 3]]
    assert CommGroup(CommGroupType.Orthogonal, 2).groups(8) == [[0, 4],
                                                               [1, 5],
                                                               [2, 6],
                                                               [3, 7]]
    assert CommGroup(CommGroupType.All, 0).groups(3) == [[0, 1, 2]]
    assert CommGroup(CommGroupType.NoGrouping, 0).groups(3) == [[0], [1],
                                                               [2]]
    with pytest.raises(Error, match="must divide"):
        CommGroup(CommGroupType.Consecutive, 3).groups(4)
    with pytest.raises(Error):
        CommGroup(CommGroupType.Consecutive, 0)
    with pytest.raises(Error):
        CommGroup("All", 1)


# --------------------------------------------------------------------------
# Defaults
# --------------------------------------------------------------------------


def test_defaults():
    opts = Options()
    assert opts.device_iterations == 1
    assert opts.replication_factor == 1
    assert opts.input_group_size == 1
    assert opts.input_group_type == CommGroupType.Consecutive
    assert opts.output_mode == OutputMode.Default
    assert opts.defaultOutputMode()
    assert opts.output_return_period == 1
    assert opts.random_seed is None
    assert opts.execution_strategy is None
    assert opts.available_memory_proportion == {}
    assert opts.broadcast_buffers is True
    assert opts.log_cycle_count is False
    assert opts.auto_round_num_ipus is False
    assert opts.profile_dir is None
    assert opts.executable_cache_dir is None
    assert opts.connection_type == ConnectionType.Always
    assert opts.sync_pattern == SyncPattern.Full
    assert opts.log_dir == "."
    assert opts.frozen is False

    assert opts.Training.gradient_accumulation == 1
    assert opts.Training.reduction_type == ReductionType.Mean
    assert opts.Training.mean_reduction_strategy is None
    assert opts.Training.automatic_loss_scaling is False

    assert opts.Precision.partials_type == torch.float
    assert opts.Precision.stochastic_rounding is False
    assert opts.Precision.half_float_casting == \
        HalfFloatCastingBehavior.Default
    assert opts.Precision.autocast_enabled is True
    assert opts.Precision.autocast_policy is None
    assert opts.Precision.running_statistics_always_float is True

    for group in ("optimizer", "weight", "activation", "accumulator"):
        assert getattr(opts.TensorLocations, group) is None
    assert opts.Jit.trace_model is True
    assert opts.Distributed.processId == 0
    assert opts.Distributed.numProcesses == 1
    assert opts._Popart.options == {}
    assert opts._popart is opts._Popart


# --------------------------------------------------------------------------
# General options
# --------------------------------------------------------------------------


def test_general_setters_chain():
    strategy = ShardedExecution()
    opts = Options()
    result = (opts.deviceIterations(4).replicationFactor(8)
              .inputReplicaGrouping(4, CommGroupType.Orthogonal)
              .outputMode(OutputMode.EveryN, 2).randomSeed(42)
              .useIpuModel(True).useIpuId(3).enableSyntheticData(True)
              .autoRoundNumIPUs(True).setExecutionStrategy(strategy)
              .setAvailableMemoryProportion({"IPU0": 0.3, "IPU1": 1})
              .broadcastBuffers(False).logCycleCount(True)
              .enableExecutableCaching("/tmp/cache")
              .enableProfiling("/tmp/prof")
              .connectionType(ConnectionType.OnDemand)
              .syncPattern(SyncPattern.SinglePipeline)
              .relaxOptimizerAttributesChecks()
              .enableStableNorm(True).showCompilationProgressBar(False)
              .logDir("/tmp/logs").updatableNamedBuffers(["bn.running_mean"])
              .maxRepeatLogs(7).modelName("net")
              .anchorTensor("g", "Gradient___x", OutputMode.Final))
    assert result is opts
    assert opts.device_iterations == 4
    assert opts.replication_factor == 8
    assert opts.input_group_size == 4
    assert opts.input_group_type == CommGroupType.Orthogonal
    assert opts.output_mode == OutputMode.EveryN
    assert opts.output_return_period == 2
    assert not opts.defaultOutputMode()
    assert opts.random_seed == 42
    assert opts.use_ipu_model is True
    assert opts.ipu_id == 3
    assert opts.synthetic_data is True
    assert opts.auto_round_num_ipus is True
    assert opts.execution_strategy is strategy
    assert opts.available_memory_proportion == {"IPU0": 0.3, "IPU1": 1.0}
    assert opts.broadcast_buffers is False
    assert opts.log_cycle_count is True
    assert opts.executable_cache_dir == "/tmp/cache"
    assert opts.profile_dir == "/tmp/prof"
    assert opts.connection_type == ConnectionType.OnDemand
    assert opts.sync_pattern == SyncPattern.SinglePipeline
    assert opts.relax_optimizer_attributes_checks is True
    assert opts.stable_norm is True
    assert opts.show_compilation_progress_bar is False
    assert opts.log_dir == "/tmp/logs"
    assert opts.updatable_named_buffers == ["bn.running_mean"]
    assert opts.max_repeat_logs == 7
    assert opts.model_name == "net"
    assert opts.anchored_tensors["g"] == {
        "long_name": "Gradient___x",
        "output_mode": OutputMode.Final,
        "output_return_period": 1
    }


def test_random_seed_seeds_torch():
    Options().randomSeed(123)
    a = torch.rand(3)
    torch.manual_seed(123)
    assert torch.equal(a, torch.rand(3))


def test_output_mode_rules():
    opts = Options()
    opts.outputMode(OutputMode.All, 5)  # period ignored unless EveryN
    assert opts.output_mode == OutputMode.All
    assert opts.output_return_period == 1
    with pytest.raises(AssertionError, match="output_return_period"):
        opts.outputMode(OutputMode.EveryN)
    with pytest.raises(AssertionError):
        opts.outputMode(OutputMode.EveryN, 0)
    with pytest.raises(AssertionError):
        opts.outputMode("All")
    opts.outputMode(OutputMode.Default)
    assert opts.defaultOutputMode()


@pytest.mark.parametrize("call, exc", [
    (lambda o: o.deviceIterations(0), ValueError),
    (lambda o: o.deviceIterations("4"), ValueError),
    (lambda o: o.deviceIterations(True), ValueError),
    (lambda o: o.deviceIterations(2.0), ValueError),
    (lambda o: o.replicationFactor(0), ValueError),
    (lambda o: o.replicationFactor(None), ValueError),
    (lambda o: o.inputReplicaGrouping(0, CommGroupType.Consecutive),
     ValueError),
    (lambda o: o.inputReplicaGrouping(2, CommGroupType.All), ValueError),
    (lambda o: o.inputReplicaGrouping(2, 1), ValueError),
    (lambda o: o.randomSeed("1"), AssertionError),
    (lambda o: o.randomSeed(-1), ValueError),
    (lambda o: o.useIpuId(1.5), AssertionError),
    (lambda o: o.connectionType(0), AssertionError),
    (lambda o: o.syncPattern("Full"), AssertionError),
    (lambda o: o.setExecutionStrategy(None), ValueError),
    (lambda o: o.setExecutionStrategy(ShardedExecution), ValueError),
    (lambda o: o.broadcastBuffers(1), ValueError),
    (lambda o: o.logDir(3), ValueError),
    (lambda o: o.maxRepeatLogs(0), ValueError),
    (lambda o: o.updatableNamedBuffers("buf"), ValueError),
    (lambda o: o.enableExecutableCaching(""), ValueError),
    (lambda o: o.anchorTensor("a", "b", OutputMode.EveryN, 0), ValueError),
])
def test_general_validation(call, exc):
    opts = Options()
    before = repr(opts)
    with pytest.raises(exc) as info:
        call(opts)
    # Every option error is also a tilefx (poptorch) Error.
    assert isinstance(info.value, Error)
    assert repr(opts) == before


def test_input_replica_grouping_semantics():
    opts = Options().replicationFactor(8)
    # The doc example: 8 replicas, groups of 4 consecutive replicas share an
    # input, so the input is split two ways.
    opts.inputReplicaGrouping(4, CommGroupType.Consecutive)
    assert opts.input_group_size == 4
    assert opts.replication_factor // opts.input_group_size == 2
    # NoGrouping: every replica has its own input.
    opts.inputReplicaGrouping(4, CommGroupType.NoGrouping)
    assert opts.input_group_size == 1
    assert opts.input_group_type == CommGroupType.NoGrouping


def test_an_input_group_size_that_does_not_divide_the_replicas_is_a_clear_error():
    """Options set in any order: 3-replica input groups over 4 replicas ran
    into an IndexError deep in the executor (the DataLoader checked it)."""
    import tilefx as poptorch

    opts = Options().replicationFactor(4).inputReplicaGrouping(3, CommGroupType.Consecutive)
    with pytest.raises(Error, match=r"The input group size \(3\) must divide the replication factor \(4\)"):
        poptorch.inferenceModel(torch.nn.Linear(2, 2), opts)(torch.randn(4, 2))


@pytest.mark.parametrize("value", [{
    "IPU0": 0.0
}, {
    "IPU0": -0.1
}, {
    "IPU0": 1.01
}, {
    "IPU0": "0.5"
}, {
    "IPU0": True
}, {
    "ipu0": 0.5
}, {
    "IPU": 0.5
}, {
    0: 0.5
}, [("IPU0", 0.5)]])
def test_available_memory_proportion_validation(value):
    with pytest.raises(ValueError):
        Options().setAvailableMemoryProportion(value)


def test_available_memory_proportion_bounds():
    opts = Options().setAvailableMemoryProportion({"IPU0": 1.0, "IPU3": 0.1})
    assert opts.available_memory_proportion == {"IPU0": 1.0, "IPU3": 0.1}
    # Replaces, does not merge.
    opts.setAvailableMemoryProportion({"IPU1": 0.5})
    assert opts.available_memory_proportion == {"IPU1": 0.5}


def test_offline_ipu_target():
    opts = Options().useOfflineIpuTarget()
    assert opts.offline_ipu_target is True
    assert opts.ipu_version == 2
    assert opts.connection_type == ConnectionType.Never


def test_connection_type_never_compiles_but_does_not_run():
    """ConnectionType.Never (without an offline target) "never tries to attach
    to an IPU ... trying to run an executable will raise an exception": the
    model compiles; calling it is PopTorch's AssertionError (it ran)."""
    import tilefx

    model = torch.nn.Linear(2, 2)
    never = tilefx.inferenceModel(model, Options().connectionType(ConnectionType.Never))
    never.compile(torch.ones(1, 2))
    assert never.isCompiled()
    with pytest.raises(AssertionError, match=r"Trying to run a model on an offline device "
                                             r"\(ConnectionType.Never\): use model.compile\(inputs\)"):
        never(torch.ones(1, 2))
    on_demand = tilefx.inferenceModel(model, Options().connectionType(ConnectionType.OnDemand))
    torch.testing.assert_close(on_demand(torch.ones(1, 2)), model(torch.ones(1, 2)))


def test_synthetic_data_makes_the_inputs_on_the_device_and_streams_nothing():
    """enableSyntheticData(True): "data generated from a random normal
    distribution on the IPU. Host I/O is disabled" (it was recorded and
    ignored). The caller's tensors are neither read nor written, the outputs
    stream nothing back (zeros), training steps on the random data (the same
    for the same randomSeed), and the timeline has no host transfers."""
    import tilefx

    class AddsInPlace(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(3, 1)

        def forward(self, x, y):
            x.add_(1.0)
            out = self.fc(x).squeeze(1)
            return out, torch.nn.functional.mse_loss(out, y)

    def train(synthetic: bool, x, y):
        torch.manual_seed(0)
        model = AddsInPlace()
        opts = Options().enableSyntheticData(synthetic).randomSeed(7).deviceIterations(2)
        trainer = tilefx.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.1))
        out = trainer(x, y)
        trainer.copyWeightsToHost()
        return out, model.fc.weight.detach().clone(), trainer

    x, y = torch.randn(4, 3), torch.randn(4)
    x_before = x.clone()
    (out, loss), w_synthetic, trainer = train(True, x, y)
    assert torch.equal(x, x_before)  # neither read (the weights below) nor written
    assert not out.any() and not loss.any()
    assert not any(step.kind == "host" for step in trainer.profile.timeline)
    assert trainer.getPerfCounters()["input"] == [[]]
    assert torch.equal(train(True, x.clone(), y)[1], w_synthetic)  # the same seeded stream
    (out_real, _), w_real, real = train(False, x.clone(), y)
    assert out_real.any() and not torch.equal(w_real, w_synthetic)
    assert any(step.kind == "host" for step in real.profile.timeline)


def test_enable_executable_caching_none_disables():
    opts = Options().enableExecutableCaching("/tmp/c")
    opts.enableExecutableCaching(None)
    assert opts.executable_cache_dir is None


def test_enable_profiling_default_dir():
    assert Options().enableProfiling().profile_dir == "."


# --------------------------------------------------------------------------
# Groups
# --------------------------------------------------------------------------


def test_precision_options():
    opts = Options()
    policy = object()
    precision = opts.Precision
    result = (precision.setPartialsType(torch.half)
              .enableFloatingPointExceptions(True)
              .enableStochasticRounding(True).halfFloatCasting(
                  HalfFloatCastingBehavior.HalfUpcastToFloat)
              .runningStatisticsAlwaysFloat(False).autocastEnabled(False)
              .autocastPolicy(policy))
    assert result is precision
    assert type(precision).__name__ == "_PrecisionOptions"
    assert precision.partials_type == torch.float16
    assert precision.floating_point_exceptions is True
    assert precision.stochastic_rounding is True
    assert precision.half_float_casting == \
        HalfFloatCastingBehavior.HalfUpcastToFloat
    assert precision.running_statistics_always_float is False
    assert precision.autocast_enabled is False
    assert precision.autocast_policy is policy
    precision.setPartialsType(torch.float)
    assert precision.partials_type == torch.float32
    precision.setPartialsType(torch.float16)
    assert precision.partials_type == torch.half


@pytest.mark.parametrize("call, exc", [
    (lambda p: p.setPartialsType(torch.int32), ValueError),
    (lambda p: p.setPartialsType("half"), ValueError),
    (lambda p: p.halfFloatCasting(1), ValueError),
    (lambda p: p.autocastEnabled(1), ValueError),
    (lambda p: p.autocastPolicy(None), ValueError),
    (lambda p: p.runningStatisticsAlwaysFloat("yes"), ValueError),
    (lambda p: p.enableFloatingPointExceptions(1), AssertionError),
    (lambda p: p.enableStochasticRounding(None), ValueError),
])
def test_precision_validation(call, exc):
    with pytest.raises(exc):
        call(Options().Precision)


def test_training_options():
    opts = Options()
    training = opts.Training
    result = (training.gradientAccumulation(8)
              .accumulationAndReplicationReductionType(ReductionType.Sum)
              .setMeanAccumulationAndReplicationReductionStrategy(
                  MeanReductionStrategy.Running)
              .setAutomaticLossScaling(True).setConvolutionDithering(True))
    assert result is training
    assert training.gradient_accumulation == 8
    assert training.reduction_type == ReductionType.Sum
    assert training.accumulation_and_replication_reduction_type == \
        ReductionType.Sum
    assert training.mean_reduction_strategy == MeanReductionStrategy.Running
    assert training.meanAccumulationAndReplicationReductionStrategy == \
        MeanReductionStrategy.Running
    assert training.automatic_loss_scaling is True
    assert training.convolution_dithering is True


def test_older_poptorch_names_still_set_the_options(caplog):
    """anchorMode (AnchorMode is OutputMode) and
    Training.accumulationReductionType: PopTorch's older names, still in code
    written for it and in its own batching tests; each warns, as PopTorch did."""
    opts = Options()
    with caplog.at_level(logging.WARNING, logger="tilefx"):
        assert opts.anchorMode(AnchorMode.EveryN, anchor_return_period=5) is opts
        assert opts.Training.accumulationReductionType(ReductionType.Sum) is opts.Training
    assert opts.output_mode == OutputMode.EveryN and opts.output_return_period == 5
    assert opts.Training.reduction_type == ReductionType.Sum
    assert "anchorMode is deprecated" in caplog.text
    assert "accumulationReductionType is deprecated" in caplog.text
    with pytest.raises(AssertionError, match="output_return_period"):
        opts.anchorMode(AnchorMode.EveryN)
    with pytest.raises(ValueError):
        opts.Training.accumulationReductionType(ReductionType.NoReduction)


def test_training_validation():
    training = Options().Training
    with pytest.raises(Error, match="Mean or poptorch.ReductionType.Sum"):
        training.accumulationAndReplicationReductionType(
            ReductionType.NoReduction)
    with pytest.raises(ValueError):
        training.accumulationAndReplicationReductionType("Mean")
    with pytest.raises(ValueError):
        training.gradientAccumulation(0)
    with pytest.raises(ValueError):
        training.setMeanAccumulationAndReplicationReductionStrategy(1)
    with pytest.raises(ValueError):
        training.setAutomaticLossScaling("True")
    assert training.gradient_accumulation == 1
    assert training.reduction_type == ReductionType.Mean


def test_tensor_location_settings():
    settings = TensorLocationSettings()
    assert settings.toDict() == {}
    result = (settings.useOnChipStorage(False).useReplicatedTensorSharding(
        True).minElementsForOffChip(16).minElementsForReplicatedTensorSharding(
            8192).useIOTilesToLoad(True).useIOTilesToStore(False))
    assert result is settings
    assert settings.on_chip is False
    assert settings.replicated_tensor_sharding is True
    assert settings.min_elements_for_off_chip == 16
    assert settings.min_elements_for_replicated_tensor_sharding == 8192
    assert settings.io_tiles_to_load is True
    assert settings.io_tiles_to_store is False
    assert settings.toDict() == {
        "onChip": 0,
        "useReplicatedTensorSharding": 1,
        "minElementsForOffChip": 16,
        "minElementsForReplicatedTensorSharding": 8192,
        "useIOTilesToLoad": 1,
        "useIOTilesToStore": 0,
    }
    settings.useOnChipStorage(None)
    assert settings.on_chip is None
    assert "onChip" not in settings.toDict()
    with pytest.raises(AssertionError):
        settings.useReplicatedTensorSharding(1)
    with pytest.raises(AssertionError):
        settings.minElementsForOffChip("16")


def test_tensor_locations_group():
    opts = Options()
    location = TensorLocationSettings().useOnChipStorage(False)
    locations = opts.TensorLocations
    result = (locations.setOptimizerLocation(location).setWeightLocation(
        TensorLocationSettings().useOnChipStorage(True)
    ).setActivationLocation(TensorLocationSettings()).setAccumulatorLocation(
        TensorLocationSettings().useIOTilesToLoad()).numIOTiles(32))
    assert result is locations
    assert isinstance(locations.optimizer, TensorLocationSettings)
    assert locations.optimizer.on_chip is False
    assert locations.weight.on_chip is True
    assert locations.activation.toDict() == {}
    assert locations.accumulator.io_tiles_to_load is True
    assert locations.num_io_tiles == 32
    assert locations.location_weight == {"onChip": 1}
    # The options keep a copy: later changes to the argument do not leak in.
    location.useOnChipStorage(True)
    assert locations.optimizer.on_chip is False
    with pytest.raises(AssertionError):
        locations.setWeightLocation({"onChip": 1})


def test_tensor_locations_print_as_the_tutorial_shows():
    """The pipelining tutorial (seeds/003) prints opts.TensorLocations after
    setOptimizerLocation(TensorLocationSettings().useOnChipStorage(False)) and
    shows PopTorch's backend dictionary: location_optimizer={'onChip': 0}."""
    opts = Options()
    assert repr(opts.TensorLocations) == "_TensorLocationOptions()"
    opts.TensorLocations.setOptimizerLocation(
        TensorLocationSettings().useOnChipStorage(False))
    assert repr(opts.TensorLocations) == \
        "_TensorLocationOptions(location_optimizer={'onChip': 0})"
    assert "TensorLocations=_TensorLocationOptions(location_optimizer={'onChip': 0})" in repr(opts)
    opts.TensorLocations.setWeightLocation(
        TensorLocationSettings().useReplicatedTensorSharding(True)).numIOTiles(32)
    assert repr(opts.TensorLocations) == (
        "_TensorLocationOptions(location_weight={'useReplicatedTensorSharding': 1}, "
        "location_optimizer={'onChip': 0}, num_io_tiles=32)")


def test_num_io_tiles():
    locations = Options().TensorLocations
    message = "numIOTiles must be an even number between 32 and 192."
    for bad in (10, 193, 33, 194, "32"):
        with pytest.raises(AssertionError, match=message):
            locations.numIOTiles(bad)
    for good in (32, 100, 192):
        locations.numIOTiles(good)
        assert locations.num_io_tiles == good


def test_jit_options():
    jit = Options().Jit
    assert jit.traceModel(False) is jit
    assert jit.trace_model is False
    with pytest.raises(ValueError):
        jit.traceModel("no")


def test_distributed_options(monkeypatch):
    distributed = Options().Distributed
    assert distributed.configureProcessId(2, 4) is distributed
    assert distributed.processId == 2
    assert distributed.numProcesses == 4
    assert distributed.distributed_process_id == 2
    assert distributed.num_distributed_processes == 4
    with pytest.raises(ValueError):
        distributed.configureProcessId(4, 4)
    with pytest.raises(ValueError):
        distributed.configureProcessId(0, 0)
    assert distributed.disableProcessGroupsSetup() is distributed
    assert distributed.setup_process_groups is False
    distributed.disable()
    assert (distributed.processId, distributed.numProcesses) == (0, 1)

    monkeypatch.setenv("MY_SIZE", "8")
    monkeypatch.setenv("MY_RANK", "5")
    distributed.setEnvVarNames("MY_SIZE", "MY_RANK")
    assert (distributed.processId, distributed.numProcesses) == (5, 8)
    monkeypatch.setenv("MY_RANK", "five")
    with pytest.raises(ValueError, match="MY_RANK"):
        distributed.setEnvVarNames("MY_SIZE", "MY_RANK")


def test_distributed_reads_openmpi_variables(monkeypatch):
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "4")
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "3")
    opts = Options()
    assert opts.Distributed.numProcesses == 4
    assert opts.Distributed.processId == 3


def test_popart_options():
    opts = Options()
    popart = opts._Popart
    assert popart.set("outlineThreshold", 10.0) is popart
    assert opts._popart.set("enableExplicitIR", True) is popart
    popart.setPatterns({"TiedGather": True}, 0)
    popart.setEngineOptions({"opt.useAutoloader": "true"})
    assert popart.options == {
        "outlineThreshold": 10.0,
        "enableExplicitIR": True,
        "patterns_level": 0,
        "patterns": {
            "TiedGather": True
        },
        "engineOptions": {
            "opt.useAutoloader": "true"
        },
    }
    with pytest.raises(AssertionError):
        popart.setPatterns(["TiedGather"])
    with pytest.raises(AssertionError):
        popart.setPatterns({}, "2")
    with pytest.raises(ValueError):
        popart.set(3, 1)


# --------------------------------------------------------------------------
# Freezing, clone, repr, toDict
# --------------------------------------------------------------------------

FROZEN_CALLS = [
    lambda o: o.deviceIterations(2),
    lambda o: o.replicationFactor(2),
    lambda o: o.outputMode(OutputMode.All),
    lambda o: o.randomSeed(1),
    lambda o: o.setExecutionStrategy(ShardedExecution()),
    lambda o: o.setAvailableMemoryProportion({"IPU0": 0.5}),
    lambda o: o.inputReplicaGrouping(1, CommGroupType.Consecutive),
    lambda o: o.anchorTensor("a", "b"),
    lambda o: o.enableProfiling("x"),
    lambda o: o.Training.gradientAccumulation(4),
    lambda o: o.Training.gradientAccumulation(0),
    lambda o: o.Precision.setPartialsType(torch.half),
    lambda o: o.Precision.autocastEnabled(False),
    lambda o: o.TensorLocations.setWeightLocation(TensorLocationSettings()),
    lambda o: o.TensorLocations.weight.useOnChipStorage(False),
    lambda o: o.Jit.traceModel(False),
    lambda o: o.Distributed.configureProcessId(0, 2),
    lambda o: o._Popart.set("groupNormStridedChannelGrouping", True),
    lambda o: o._popart.setPatterns({}),
    lambda o: setattr(o, "device_iterations", 3),
    lambda o: setattr(o.Training, "gradient_accumulation", 3),
    lambda o: o.loadFromFile("does-not-matter.conf"),
]


@pytest.mark.parametrize("call", FROZEN_CALLS)
def test_frozen_options_refuse_changes(call):
    opts = Options()
    opts.TensorLocations.setWeightLocation(TensorLocationSettings())
    before = repr(opts)
    opts._freeze()
    assert opts.frozen and opts.Training.frozen and opts._Popart.frozen
    with pytest.raises(AttributeError, match="^Can't modify frozen Options$"):
        call(opts)
    assert repr(opts) == before


def test_frozen_options_still_readable():
    opts = Options().deviceIterations(3)
    opts._freeze()
    assert opts.device_iterations == 3
    assert opts.Training.gradient_accumulation == 1
    assert opts.defaultOutputMode()
    assert "device_iterations=3" in repr(opts)
    assert opts.toDict()["device_iterations"] == 3
    assert FROZEN_MESSAGE == "Can't modify frozen Options"


def test_clone_is_unfrozen_deep_copy():
    strategy = ShardedExecution()
    opts = (Options().deviceIterations(5).setExecutionStrategy(strategy)
            .anchorTensor("t1", "tensor1", OutputMode.EveryN, 2))
    opts.Distributed.configureProcessId(5, 15)
    opts._Popart.set("autoRecomputation", 3)
    opts.Training.gradientAccumulation(4)
    opts.TensorLocations.setWeightLocation(
        TensorLocationSettings().useOnChipStorage(True))
    opts._freeze()

    clone = opts.clone()
    assert not clone.frozen
    assert not clone.Training.frozen
    assert not clone.TensorLocations.weight.frozen
    assert repr(clone) == repr(opts)
    assert opts.frozen  # the original stays frozen

    clone.deviceIterations(4)
    clone.Distributed.configureProcessId(2, 15)
    clone.anchorTensor("t2", "tensor2", OutputMode.Final)
    clone._Popart.set("autoRecomputation", 2)
    clone.Training.gradientAccumulation(2)
    clone.TensorLocations.setWeightLocation(
        TensorLocationSettings().useOnChipStorage(False))
    clone.Precision.setPartialsType(torch.float16)

    assert opts.device_iterations == 5
    assert opts.Distributed.processId == 5
    assert set(opts.anchored_tensors) == {"t1"}
    assert opts._Popart.options["autoRecomputation"] == 3
    assert opts.Training.gradient_accumulation == 4
    assert opts.TensorLocations.weight.on_chip is True
    assert opts.Precision.partials_type == torch.float32
    # copy.deepcopy behaves like clone (PopTorch semantics).
    assert not copy.deepcopy(opts).frozen


def test_unfreeze():
    opts = Options()._freeze()
    opts._unfreeze()
    opts.deviceIterations(2).Training.gradientAccumulation(2)
    assert opts.device_iterations == 2


def test_repr_shows_values():
    opts = Options().replicationFactor(4).deviceIterations(7)
    opts.Training.gradientAccumulation(16)
    opts.Precision.setPartialsType(torch.half)
    opts.outputMode(OutputMode.Sum)
    opts._Popart.set("myKey", "myValue")
    text = repr(opts)
    assert text.startswith("Options(")
    assert f"{id(opts):x}" not in text
    for fragment in ("replication_factor=4", "device_iterations=7",
                     "gradient_accumulation=16", "torch.float16",
                     "output_mode=OutputMode.Sum", "myKey='myValue'"):
        assert fragment in text
    assert str(opts) == text


def test_to_dict():
    opts = Options().deviceIterations(2)
    opts.TensorLocations.setOptimizerLocation(
        TensorLocationSettings().useOnChipStorage(False))
    opts._Popart.set("k", [1])
    d = opts.toDict()
    assert d["device_iterations"] == 2
    assert d["Training"]["gradient_accumulation"] == 1
    assert d["TensorLocations"]["optimizer"] == {"onChip": 0}
    assert d["_Popart"] == {"k": [1]}
    d["_Popart"]["k"].append(2)
    assert opts._Popart.options["k"] == [1]


# --------------------------------------------------------------------------
# optimum-graphcore's IPUConfig._to_options (seeds/004), call for call
# --------------------------------------------------------------------------


def optimum_to_options(for_inference, compile_only, *, replication_factor=4,
                       device_iterations=2, gradient_accumulation_steps=8,
                       auto_loss_scaling=True, output_mode="final", seed=42,
                       optimizer_state_offchip=True,
                       replicated_tensor_sharding=True, matmul_proportion=0.2,
                       ipus_per_replica=4, executable_cache_dir="./cache",
                       enable_half_partials=True, explicit_ir_inference=True):
    # the popart enums optimum reads, from tilefx.popart as optimum's `import popart` finds them
    overlap_memory_optimized = popart.AccumulateOuterFragmentSchedule.OverlapMemoryOptimized
    just_in_time = popart.SubgraphCopyingStrategy.JustInTime
    opts = Options()
    opts.autoRoundNumIPUs(True)
    opts.replicationFactor(replication_factor)
    opts.deviceIterations(device_iterations)
    if not for_inference:
        opts.Training.gradientAccumulation(gradient_accumulation_steps)
        opts.Training.accumulationAndReplicationReductionType(
            ReductionType.Mean)
    if auto_loss_scaling and not for_inference:
        opts.Training.setAutomaticLossScaling(True)
    output_mode_mapping = {
        "all": OutputMode.All,
        "sum": OutputMode.Sum,
        "final": OutputMode.Final,
        "default": OutputMode.Default,
    }
    training_output_mode = output_mode_mapping[output_mode]
    opts.outputMode(OutputMode.All if for_inference else training_output_mode)
    if seed:
        opts.randomSeed(seed)
    opts.TensorLocations.setOptimizerLocation(
        TensorLocationSettings().useOnChipStorage(
            not optimizer_state_offchip).useReplicatedTensorSharding(
                replicated_tensor_sharding and opts.replication_factor > 1))
    if for_inference:
        opts.setExecutionStrategy(ShardedExecution(AutoStage.AutoIncrement))
    else:
        opts.setExecutionStrategy(PipelinedExecution(AutoStage.AutoIncrement))
    if compile_only:
        opts.useOfflineIpuTarget()
    matmul_proportion = copy.deepcopy(matmul_proportion)
    if isinstance(matmul_proportion, float):
        matmul_proportion = [matmul_proportion] * ipus_per_replica
    mem_prop = {f"IPU{i}": matmul_proportion[i] for i in range(ipus_per_replica)}
    opts.setAvailableMemoryProportion(mem_prop)
    if executable_cache_dir and executable_cache_dir != "disabled":
        opts.enableExecutableCaching(executable_cache_dir)
    opts._Popart.set("saveInitializersToFile", NamedTemporaryFile().name)
    opts.Precision.enableStochasticRounding(not for_inference)
    if enable_half_partials:
        opts.Precision.setPartialsType(torch.float16)
    opts._Popart.set("disableGradAccumulationTensorStreams", True)
    opts._Popart.set("accumulateOuterFragmentSettings.schedule",
                     int(overlap_memory_optimized))
    opts._Popart.set("accumulateOuterFragmentSettings.excludedVirtualGraphs",
                     ["0"])
    opts._Popart.set("outlineThreshold", 10.0)
    opts._Popart.set("subgraphCopyingStrategy", int(just_in_time))
    opts._Popart.set("scheduleNonWeightUpdateGradientConsumersEarly", True)
    opts._Popart.setPatterns({
        "TiedGather": True,
        "TiedGatherAccumulate": True,
        "UpdateInplacePrioritiesForIpu": True
    })
    engine_options = {
        "opt.useAutoloader": "true",
        "target.syncReplicasIndependently": "true",
    }
    if for_inference and explicit_ir_inference:
        opts._popart.set("enableExplicitIR", True)
    opts._Popart.set("engineOptions", engine_options)
    return opts


@pytest.mark.parametrize("for_inference", [False, True])
@pytest.mark.parametrize("compile_only", [False, True])
def test_optimum_graphcore_to_options(for_inference, compile_only):
    opts = optimum_to_options(for_inference, compile_only)
    assert opts.auto_round_num_ipus
    assert opts.replication_factor == 4
    assert opts.device_iterations == 2
    assert opts.random_seed == 42
    if for_inference:
        assert opts.Training.gradient_accumulation == 1
        assert opts.output_mode == OutputMode.All
        assert isinstance(opts.execution_strategy, ShardedExecution)
        assert opts._Popart.options["enableExplicitIR"] is True
        assert opts.Precision.stochastic_rounding is False
    else:
        assert opts.Training.gradient_accumulation == 8
        assert opts.Training.reduction_type == ReductionType.Mean
        assert opts.Training.automatic_loss_scaling is True
        assert opts.output_mode == OutputMode.Final
        assert isinstance(opts.execution_strategy, PipelinedExecution)
        assert opts.Precision.stochastic_rounding is True
    assert opts.execution_strategy.auto_stage == AutoStage.AutoIncrement
    assert opts.offline_ipu_target is compile_only
    assert opts.TensorLocations.optimizer.on_chip is False
    assert opts.TensorLocations.optimizer.replicated_tensor_sharding is True
    assert opts.available_memory_proportion == {
        f"IPU{i}": 0.2
        for i in range(4)
    }
    assert opts.executable_cache_dir == "./cache"
    assert opts.Precision.partials_type == torch.float16
    assert opts._Popart.options["patterns"]["TiedGather"] is True
    # PopART's enum values, read by optimum as `int(popart.X.Y)`
    assert opts._Popart.options["accumulateOuterFragmentSettings.schedule"] == 3
    assert opts._Popart.options["subgraphCopyingStrategy"] == 1
    assert opts._Popart.options["engineOptions"][
        "target.syncReplicasIndependently"] == "true"


def test_optimum_graphcore_variants():
    opts = optimum_to_options(False, False, replication_factor=1,
                              output_mode="default", seed=0,
                              matmul_proportion=[0.1, 0.2],
                              ipus_per_replica=2,
                              executable_cache_dir="disabled",
                              enable_half_partials=False)
    # RTS only when replication_factor > 1.
    assert opts.TensorLocations.optimizer.replicated_tensor_sharding is False
    assert opts.defaultOutputMode()
    assert opts.random_seed is None
    assert opts.available_memory_proportion == {"IPU0": 0.1, "IPU1": 0.2}
    assert opts.executable_cache_dir is None
    assert opts.Precision.partials_type == torch.float32


# --------------------------------------------------------------------------
# loadFromFile
# --------------------------------------------------------------------------


def test_load_from_file_poptorch_example(tmp_path, strategies):
    path = write(
        tmp_path, "deviceIterations(1)\n"
        "setExecutionStrategy(poptorch.ShardedExecution())\n"
        "  replicationFactor(1)\n"
        " \n"
        "enableSyntheticData(True) # Inline comments should be ignored\n"
        "# Comments should be ignored\n")
    opts = Options()
    assert opts.loadFromFile(path) is opts
    assert opts.device_iterations == 1
    assert isinstance(opts.execution_strategy, ShardedExecution)
    assert opts.replication_factor == 1
    assert opts.synthetic_data is True


def test_load_from_file_full_syntax(tmp_path, strategies):
    path = write(
        tmp_path, """
# every kind of argument
deviceIterations(4).replicationFactor(2)
Training.gradientAccumulation(8)
Training.accumulationAndReplicationReductionType(poptorch.ReductionType.Sum)
outputMode(OutputMode.EveryN, output_return_period=2)
inputReplicaGrouping(2, poptorch.enums.CommGroupType.Orthogonal)
Precision.setPartialsType(torch.float16)
Precision.halfFloatCasting(tilefx.HalfFloatCastingBehavior.HalfUpcastToFloat)
setAvailableMemoryProportion({"IPU0": 0.25, 'IPU1': 1e-1,})
randomSeed(+7)
logDir('/tmp/it\\'s')
modelName("tab\\there")
updatableNamedBuffers(["a", "b"])
anchorTensor("x", "y", None, 1)
maxRepeatLogs(None)
setExecutionStrategy(PipelinedExecution(poptorch.AutoStage.AutoIncrement))
TensorLocations.setOptimizerLocation(poptorch.TensorLocationSettings().useOnChipStorage(False).useReplicatedTensorSharding(True))
TensorLocations.numIOTiles(64)
_Popart.set("accumulateOuterFragmentSettings.excludedVirtualGraphs", ["0"])
_popart.set("tupleValue", (1, 2.5, (3,), ()))
_Popart.setPatterns({"TiedGather": True}, level=0)
Distributed.configureProcessId(1, 2)
Jit.traceModel(False)
""")
    opts = Options().loadFromFile(path)
    assert opts.device_iterations == 4
    assert opts.replication_factor == 2
    assert opts.Training.gradient_accumulation == 8
    assert opts.Training.reduction_type == ReductionType.Sum
    assert opts.output_mode == OutputMode.EveryN
    assert opts.output_return_period == 2
    assert opts.input_group_size == 2
    assert opts.input_group_type == CommGroupType.Orthogonal
    assert opts.Precision.partials_type == torch.float16
    assert opts.Precision.half_float_casting == \
        HalfFloatCastingBehavior.HalfUpcastToFloat
    assert opts.available_memory_proportion == {"IPU0": 0.25, "IPU1": 0.1}
    assert opts.random_seed == 7
    assert opts.log_dir == "/tmp/it's"
    assert opts.model_name == "tab\there"
    assert opts.updatable_named_buffers == ["a", "b"]
    assert opts.anchored_tensors["x"]["output_mode"] is None
    assert opts.max_repeat_logs is None
    assert isinstance(opts.execution_strategy, PipelinedExecution)
    assert opts.execution_strategy.auto_stage == AutoStage.AutoIncrement
    assert opts.TensorLocations.optimizer.on_chip is False
    assert opts.TensorLocations.optimizer.replicated_tensor_sharding is True
    assert opts.TensorLocations.num_io_tiles == 64
    assert opts._Popart.options[
        "accumulateOuterFragmentSettings.excludedVirtualGraphs"] == ["0"]
    assert opts._Popart.options["tupleValue"] == (1, 2.5, (3, ), ())
    assert opts._Popart.options["patterns_level"] == 0
    assert opts.Distributed.processId == 1
    assert opts.Jit.trace_model is False


def test_load_from_file_later_file_overrides(tmp_path):
    first = write(tmp_path, "deviceIterations(2)\nreplicationFactor(2)\n",
                  "a.conf")
    second = write(tmp_path, "deviceIterations(1)\n", "b.conf")
    opts = Options().loadFromFile(first).loadFromFile(second)
    assert opts.device_iterations == 1
    assert opts.replication_factor == 2


def test_load_from_file_whitelisted_strategy_methods(tmp_path, strategies):
    path = write(
        tmp_path, "setExecutionStrategy(PipelinedExecution()"
        ".setAutoStage(AutoStage.AutoIncrement))\n")
    opts = Options().loadFromFile(path)
    assert opts.execution_strategy.auto_stage == AutoStage.AutoIncrement
    bad = write(tmp_path, "setExecutionStrategy(PipelinedExecution().secret())",
                "bad.conf")
    with pytest.raises(ConfigFileError, match="secret"):
        Options().loadFromFile(bad)


def test_load_from_file_never_executes_python(tmp_path, monkeypatch,
                                              strategies):
    def forbidden(*args, **kwargs):
        raise AssertionError("exec/eval/compile must not be used")

    path = write(tmp_path, "deviceIterations(3)\n"
                 "setExecutionStrategy(poptorch.ShardedExecution())\n")
    monkeypatch.setattr(builtins, "exec", forbidden)
    monkeypatch.setattr(builtins, "eval", forbidden)
    monkeypatch.setattr(builtins, "compile", forbidden)
    opts = Options().loadFromFile(path)
    assert opts.device_iterations == 3


MALICIOUS = [
    # (line, column of the error, fragment of the message)
    ("__import__('os').system('x')", 1, "__import__"),
    ("open('f')", 1, "open"),
    ("deviceIterations(1+1)", 19, "unexpected '+1'"),
    ("deviceIterations(1 + 1)", 20, "unexpected"),
    ("deviceIterations(2*2)", 19, "unexpected character '*'"),
    ("deviceIterations(os.getpid())", 18, "os.getpid"),
    ("deviceIterations(x)", 18, "'x' is not an allowed name"),
    ("logDir(os.environ)", 8, "'os.environ' is not an allowed name"),
    ("deviceIterations(lambda: 1)", 24, "unexpected"),
    ("logDir(f'{open(1)}')", 9, "unexpected"),
    ("deviceIterations([x for x in y])", 21, "unexpected"),
    ("import os", 8, "unexpected"),
    ("loadFromFile('/etc/passwd')", 1, "loadFromFile"),
    ("toDict()", 1, "toDict"),
    ("_freeze()", 1, "_freeze"),
    ("Training.__class__.x(1)", 10, "__class__"),
    ("_Popart.options.clear()", 9, "options"),
    ("__class__.__init__(1)", 1, "__class__"),
    ("deviceIterations", 1, "must call an option setter"),
    ("Training", 1, "must call an option setter"),
    ("setExecutionStrategy(poptorch.TeleportExecution())", 22,
     "'poptorch.TeleportExecution' is not allowed"),
    ("setExecutionStrategy(os.system('rm -rf /'))", 22, "os.system"),
    ("outputMode(poptorch.OutputMode.Nope)", 12, "OutputMode.Nope"),
    ("Precision.setPartialsType(torch.zeros)", 27, "torch.zeros"),
    ("deviceIterations(1", 19, "unexpected end of line"),
    ("deviceIterations(1); import os", 20, "unexpected character ';'"),
    ("deviceIterations(k=1, 2)", 23, "positional argument follows"),
    ("setAvailableMemoryProportion({[1]: 0.5})", 31, "hashable"),
    ("setAvailableMemoryProportion({'IPU0': 1.5})", 1,
     "setAvailableMemoryProportion(...) failed"),
    ("deviceIterations(0)", 1, "deviceIterations(...) failed"),
    ("deviceIterations(1, 2)", 1, "deviceIterations(...) failed"),
]


@pytest.mark.parametrize("line, column, fragment", MALICIOUS)
def test_load_from_file_rejects(tmp_path, line, column, fragment):
    path = write(tmp_path, "# header\nreplicationFactor(2)\n\n" + line + "\n")
    opts = Options()
    with pytest.raises(Error) as info:
        opts.loadFromFile(path)
    error = info.value
    assert isinstance(error, ConfigFileError)
    message = str(error)
    assert f"line 4, column {column} of {path}" in message, message
    assert fragment in message, message
    assert error.lineno == 4 and error.column == column
    assert error.filename == path
    assert line.strip() in message
    # All or nothing: line 2 was not applied either.
    assert opts.replication_factor == 1


def test_load_from_file_unknown_strategy_names_it(tmp_path):
    path = write(tmp_path, "setExecutionStrategy(poptorch.FooExecution())\n")
    with pytest.raises(Error, match="FooExecution"):
        Options().loadFromFile(path)


def test_load_from_file_suggests_close_names(tmp_path):
    path = write(tmp_path, "deviceIteration(2)\n")
    with pytest.raises(ConfigFileError, match="did you mean 'deviceIterations'"):
        Options().loadFromFile(path)


def test_load_from_file_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        Options().loadFromFile(str(tmp_path / "missing.conf"))


def test_load_from_file_not_text_names_the_line(tmp_path):
    """A binary or corrupt file was a bare UnicodeDecodeError."""
    path = tmp_path / "corrupt.conf"
    path.write_bytes(b"deviceIterations(2)\nrep\xff\xfelicationFactor(2)\n")
    opts = Options()
    with pytest.raises(ConfigFileError, match=r"line 2, column 4 of .*corrupt.conf: not UTF-8 text \(byte 0xff\)"):
        opts.loadFromFile(str(path))
    assert opts.device_iterations == 1  # all or nothing


# --------------------------------------------------------------------------
# JSON defaults from the environment
# --------------------------------------------------------------------------


@pytest.mark.parametrize("var",
                         ["POPTORCH_DEFAULT_OPTIONS", "TILEFX_DEFAULT_OPTIONS"])
def test_env_json_defaults(monkeypatch, var):
    monkeypatch.setenv(
        var,
        json.dumps({
            "deviceIterations": 4,
            "Training.gradientAccumulation": 2,
            "Precision.enableFloatingPointExceptions": True,
            "connectionType": "ConnectionType.OnDemand",
            "outputMode": ["poptorch.OutputMode.EveryN", 2],
            "Precision.setPartialsType": "torch.half",
            "_Popart.set": ["saveInitializersToFile", "my_file.onnx"],
            "setAvailableMemoryProportion": {
                "IPU0": 0.3
            },
            "logDir": "some.dir",
        }))
    opts = Options()
    assert opts.device_iterations == 4
    assert opts.Training.gradient_accumulation == 2
    assert opts.Precision.floating_point_exceptions is True
    assert opts.connection_type == ConnectionType.OnDemand
    assert opts.output_mode == OutputMode.EveryN
    assert opts.output_return_period == 2
    assert opts.Precision.partials_type == torch.float16
    assert opts._Popart.options["saveInitializersToFile"] == "my_file.onnx"
    assert opts.available_memory_proportion == {"IPU0": 0.3}
    assert opts.log_dir == "some.dir"

    monkeypatch.delenv(var)
    explicit = (Options().deviceIterations(4).outputMode(
        OutputMode.EveryN, 2).connectionType(ConnectionType.OnDemand)
                .setAvailableMemoryProportion({"IPU0": 0.3}).logDir("some.dir"))
    explicit.Training.gradientAccumulation(2)
    explicit.Precision.enableFloatingPointExceptions(True).setPartialsType(
        torch.half)
    explicit._Popart.set("saveInitializersToFile", "my_file.onnx")
    assert repr(explicit) == repr(opts)


def test_env_json_defaults_both_vars(monkeypatch):
    monkeypatch.setenv("POPTORCH_DEFAULT_OPTIONS",
                       '{"deviceIterations": 4, "replicationFactor": 2}')
    monkeypatch.setenv("TILEFX_DEFAULT_OPTIONS", '{"deviceIterations": 8}')
    opts = Options()
    assert opts.device_iterations == 8
    assert opts.replication_factor == 2
    # Explicit calls after construction still win.
    assert opts.deviceIterations(1).device_iterations == 1


@pytest.mark.parametrize("text, fragment", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "JSON object"),
    ('{"noSuchOption": 1}', "noSuchOption"),
    ('{"Training.noSuchOption": 1}', "noSuchOption"),
    ('{"Nope.deviceIterations": 1}', "Nope"),
    ('{"deviceIterations": 0}', "deviceIterations"),
    ('{"loadFromFile": "/etc/passwd"}', "loadFromFile"),
    ('{"__init__": 1}', "__init__"),
    ('{"os.system": "x"}', "os"),
])
def test_env_json_defaults_errors(monkeypatch, text, fragment):
    monkeypatch.setenv("POPTORCH_DEFAULT_OPTIONS", text)
    with pytest.raises(Error, match="POPTORCH_DEFAULT_OPTIONS") as info:
        Options()
    assert fragment in str(info.value)


def test_cache_dir_env(monkeypatch, tmp_path):
    monkeypatch.setenv("POPTORCH_CACHE_DIR", str(tmp_path))
    assert Options().executable_cache_dir == str(tmp_path)


def test_env_defaults_not_reapplied_by_clone(monkeypatch):
    opts = Options()
    monkeypatch.setenv("POPTORCH_DEFAULT_OPTIONS", '{"deviceIterations": 9}')
    assert opts.clone().device_iterations == 1


def _tilefx_imports(path: str) -> list[str]:
    source = open(path, encoding="utf-8").read()
    return [line.strip() for line in source.splitlines()
            if line.strip().startswith(("import tilefx", "from tilefx"))]


def test_module_imports_only_errors_and_enums():
    assert _tilefx_imports(option_groups.__file__) == [
        "from tilefx.api.enums import (",
        "from tilefx.errors import Error",
        "from tilefx.backend.machine import MAX_IPUS",  # check_ipus: the largest IPU system
        "from tilefx.backend.machine import MAX_REPEAT_COUNT",  # check_repeats: Poplar's repeat count
        "from tilefx.backend import locations",  # TensorLocationSettings' thresholds: a leaf module
        "from tilefx.backend import locations",  # _TensorLocationOptions.resolved: the same
    ]
    assert _tilefx_imports(options_module.__file__) == [
        "from tilefx.api.enums import (",
        "from tilefx.api.option_groups import (  # the groups and the shared machinery, re-exported",
        "from tilefx.dialects.ipu import is_proportion",  # the one home of the proportion's range check
        "from tilefx import limits",  # the caps on options texts
        "from tilefx.errors import Error",
        "from tilefx.backend.machine import IPU_VERSIONS, machine",  # useOfflineIpuTarget: the same
        "from tilefx.backend.machine import PRESETS, Machine",  # setMachine: a leaf module
        # the options-file grammar and its evaluator, loaded when a file or JSON is read
        "from tilefx.api.options_file import check_text_size",
        "from tilefx.api.options_file import _apply_commands, _parse_config",
        "from tilefx.api.options_file import _json_value, _resolve_group, _resolve_setter, _ResolveError",
    ]
    assert os.path.basename(options_module.__file__) == "options.py"
    assert isinstance(OptionsError("x"), ValueError)


def test_exists_says_whether_an_option_has_a_value():
    """PopTorch's Options.exists (its DataLoader asks exists("random_seed"))
    was an AttributeError."""
    opts = Options()
    assert not opts.exists("random_seed")
    assert opts.exists("device_iterations")
    assert not opts.exists("no_such_option") and not opts.exists("_frozen")
    opts.randomSeed(3)
    assert opts.exists("random_seed")
    assert opts.Training.exists("gradient_accumulation")
