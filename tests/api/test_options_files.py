"""Options from files and the environment: Options.loadFromFile's grammar (never executed as Python) and the JSON defaults of POPTORCH_DEFAULT_OPTIONS."""

import builtins
import json

import pytest
import torch

from tilefx.api.enums import (
    AutoStage,
    CommGroupType,
    ConnectionType,
    HalfFloatCastingBehavior,
    OutputMode,
    ReductionType,
)
from tilefx.api.errors import Error
from tilefx.api.options import (
    ConfigFileError,
    Options,
)
from options_support import PipelinedExecution, ShardedExecution, strategies, write  # noqa: F401  (strategies: a fixture)
from options_support import _hermetic  # noqa: F401  (autouse: no option variables in the environment)


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
