"""optimum-graphcore's IPUConfig._to_options through poptorch.Options, call for call."""

import copy
from tempfile import NamedTemporaryFile

import pytest
import torch

from tilefx.api.enums import (
    AutoStage,
    OutputMode,
    ReductionType,
)
import tilefx.popart as popart
from tilefx.api.options import (
    Options,
    TensorLocationSettings,
)
from options_support import PipelinedExecution, ShardedExecution
from options_support import _hermetic  # noqa: F401  (autouse: no option variables in the environment)


# --------------------------------------------------------------------------
# optimum-graphcore's IPUConfig._to_options, call for call
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
