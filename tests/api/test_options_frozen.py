"""poptorch.Options once a wrapper holds them: frozen, clone, unfreeze, repr and toDict."""

import copy

import pytest
import torch

from tilefx.api.enums import (
    CommGroupType,
    OutputMode,
)
from tilefx.api.options import (
    FROZEN_MESSAGE,
    Options,
    TensorLocationSettings,
)
from options_support import ShardedExecution
from options_support import _hermetic  # noqa: F401  (autouse: no option variables in the environment)


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
