"""Tests for tilefx.api.options (poptorch.Options) and tilefx.api.enums: enums, defaults, the general options and the option groups."""

import logging
import os

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
from tilefx.api.errors import Error
from tilefx.api.options import (
    Options,
    OptionsError,
    TensorLocationSettings,
)
from options_support import ShardedExecution
from options_support import _hermetic  # noqa: F401  (autouse: no option variables in the environment)


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
    """Graphcore's PopTorch pipelining tutorial prints opts.TensorLocations after
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
        # Options._execution_strategy's default, PipelinedExecution(): the strategies build on these options
        "from tilefx.api.strategies import PipelinedExecution  # the strategies build on these options",
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
