"""`import popart` as the first import of a program, as `import poptorch` is:
the distribution's one-file `popart` package binds the name to tilefx.popart
(a real PopART elsewhere on the path still wins), enough for downstream code
that reads PopART's enums next to PopTorch's options to run as written:
optimum-graphcore's `IPUConfig._to_options` (optimum-graphcore `IPUConfig._to_options`)."""

import os
import textwrap

import poptorch
from fresh_python import run_python

CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(poptorch.__file__)))

# optimum/graphcore/ipu_configuration.py's imports and IPUConfig._to_options as
# optimum-graphcore `IPUConfig._to_options` gives it, on a stand-in IPUConfig holding the attributes it reads
OPTIMUM = textwrap.dedent('''
    import copy
    from tempfile import NamedTemporaryFile

    import popart
    import poptorch
    import torch
    from poptorch import Options, OutputMode


    class IPUConfig:
        def __init__(self, **kwargs):
            self.execute_encoder_on_cpu_for_generation = False
            self.mode = "training"
            self.replication_factor = 2
            self.inference_replication_factor = 1
            self.device_iterations = 4
            self.inference_device_iterations = 8
            self.gradient_accumulation_steps = 16
            self.auto_loss_scaling = True
            self.output_mode = "final"
            self.seed = 42
            self.optimizer_state_offchip = True
            self.replicated_tensor_sharding = True
            self._matmul_proportion = [0.2, 0.3]
            self._ipus_per_replica = 2
            self.executable_cache_dir = "disabled"
            self.enable_half_partials = True
            self.explicit_ir_inference = True
            self.__dict__.update(kwargs)

        def eval(self):
            self.mode = "inference"

        def train(self):
            self.mode = "training"

        def _to_options(self, for_inference: bool = False, compile_only: bool = False) -> poptorch.Options:
            if not compile_only and poptorch.ipuHardwareVersion() not in (2, 21):
                raise RuntimeError("This requires an IPU Mk2 system to run.")
            if self.execute_encoder_on_cpu_for_generation:
                raise NotImplementedError("execute_encoder_on_cpu_for_generation is not supported yet.")
            old_mode = self.mode
            self.eval() if for_inference else self.train()
            opts = Options()
            opts.autoRoundNumIPUs(True)
            opts.replicationFactor(self.inference_replication_factor if for_inference else self.replication_factor)
            opts.deviceIterations(self.inference_device_iterations if for_inference else self.device_iterations)
            if not for_inference:
                opts.Training.gradientAccumulation(self.gradient_accumulation_steps)
                opts.Training.accumulationAndReplicationReductionType(poptorch.ReductionType.Mean)
            if self.auto_loss_scaling and not for_inference:
                opts.Training.setAutomaticLossScaling(True)
            output_mode_mapping = {
                "all": OutputMode.All,
                "sum": OutputMode.Sum,
                "final": OutputMode.Final,
                "default": OutputMode.Default,
            }
            training_output_mode = output_mode_mapping.get(self.output_mode, None)
            if training_output_mode is None:
                supported_output_modes = ", ".join(output_mode_mapping.keys())
                raise KeyError(
                    f"{self.output_mode} is not a valid poptorch.OutputMode, supported output modes: {supported_output_modes}"
                )
            opts.outputMode(OutputMode.All if for_inference else training_output_mode)
            if self.seed:
                opts.randomSeed(self.seed)
            opts.TensorLocations.setOptimizerLocation(
                poptorch.TensorLocationSettings()
                .useOnChipStorage(not self.optimizer_state_offchip)
                .useReplicatedTensorSharding(self.replicated_tensor_sharding and opts.replication_factor > 1)
            )
            if for_inference:
                opts.setExecutionStrategy(poptorch.ShardedExecution(poptorch.AutoStage.AutoIncrement))
            else:
                opts.setExecutionStrategy(poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement))
            if compile_only:
                opts.useOfflineIpuTarget()
            matmul_proportion = copy.deepcopy(self._matmul_proportion)
            if isinstance(matmul_proportion, float):
                matmul_proportion = [matmul_proportion] * self._ipus_per_replica
            mem_prop = {f"IPU{i}": matmul_proportion[i] for i in range(self._ipus_per_replica)}
            opts.setAvailableMemoryProportion(mem_prop)
            if self.executable_cache_dir and self.executable_cache_dir != "disabled":
                opts.enableExecutableCaching(self.executable_cache_dir)
            opts._Popart.set("saveInitializersToFile", NamedTemporaryFile().name)
            opts.Precision.enableStochasticRounding(not for_inference)
            if self.enable_half_partials:
                opts.Precision.setPartialsType(torch.float16)
            opts._Popart.set("disableGradAccumulationTensorStreams", True)
            opts._Popart.set(
                "accumulateOuterFragmentSettings.schedule",
                int(popart.AccumulateOuterFragmentSchedule.OverlapMemoryOptimized),
            )
            opts._Popart.set("accumulateOuterFragmentSettings.excludedVirtualGraphs", ["0"])
            opts._Popart.set("outlineThreshold", 10.0)
            opts._Popart.set("subgraphCopyingStrategy", int(popart.SubgraphCopyingStrategy.JustInTime))
            opts._Popart.set("scheduleNonWeightUpdateGradientConsumersEarly", True)
            opts._Popart.setPatterns(
                {"TiedGather": True, "TiedGatherAccumulate": True, "UpdateInplacePrioritiesForIpu": True}
            )
            engine_options = {
                "opt.useAutoloader": "true",
                "target.syncReplicasIndependently": "true",
            }
            if for_inference and self.explicit_ir_inference:
                opts._popart.set("enableExplicitIR", True)
            opts._Popart.set("engineOptions", engine_options)
            self.mode = old_mode
            return opts
''')




def test_optimum_graphcore_to_options_runs_as_written_with_import_popart():
    out = run_python(OPTIMUM + textwrap.dedent('''
        import tilefx.popart
        assert popart is tilefx.popart and popart.Builder is tilefx.popart.Builder
        for for_inference in (False, True):
            for compile_only in (False, True):
                opts = IPUConfig()._to_options(for_inference, compile_only)
                print(opts._Popart.options["accumulateOuterFragmentSettings.schedule"],
                      opts._Popart.options["subgraphCopyingStrategy"],
                      opts.replication_factor, opts.device_iterations,
                      opts.Training.gradient_accumulation,
                      type(opts.execution_strategy).__name__)
    '''), [CHECKOUT])
    assert out.splitlines() == ["3 1 2 4 16 PipelinedExecution"] * 2 + ["3 1 1 8 1 ShardedExecution"] * 2


def test_a_real_popart_on_the_path_wins(tmp_path):
    (tmp_path / "popart").mkdir()
    (tmp_path / "popart" / "__init__.py").write_text("REAL = True\n")
    for path in ([CHECKOUT, str(tmp_path)], [str(tmp_path), CHECKOUT]):
        assert run_python("import popart, poptorch, tilefx\n"
                       "assert poptorch is tilefx\nprint(popart.REAL)", path).split() == ["True"]
