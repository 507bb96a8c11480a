"""The standing fuzz suite's properties (hypothesis; `make fuzz` runs the long
campaign with the same cases, tests/fuzz/): on any mutated IR, options file or
API argument, tilefx answers with a result or a clean, located error of its
documented class: never a traceback, and nothing in an options file runs."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import tilefx
from fuzz import cases
from tilefx.api.options import Options



def fast(n: int) -> settings:
    """n examples, reproducible (derandomized), no deadline (the IR cases run tools)."""
    return settings(max_examples=n, deadline=None, derandomize=True, database=None,
                    phases=[Phase.explicit, Phase.generate],  # random edits: nothing to shrink
                    suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def seeds():
    return cases.ir_seeds()


@pytest.fixture(scope="module")
def ops():
    return cases.aten_op_names()


@fast(30)
@given(rng=st.randoms(use_true_random=False))
def test_ir_mutants_get_an_answer_or_a_located_diagnostic(seeds, ops, tmp_path_factory, rng):
    text = cases.mutate_ir(rng.choice(seeds), rng, ops)
    res = cases.run_ir_case(text, str(tmp_path_factory.mktemp("ir")))
    assert res["opt"] in ("accepted", "diagnostic"), (text, res)
    assert res.get("run", "accepted") in ("accepted", "diagnostic"), (text, res)


def test_unmutated_seeds_are_accepted_and_run(seeds, tmp_path):
    for text in seeds:
        res = cases.run_ir_case(text, str(tmp_path))
        assert res["opt"] == "accepted" and res.get("run") == "accepted", res


@fast(150)
@given(rng=st.randoms(use_true_random=False))
def test_options_files_are_accepted_or_a_config_error_and_never_run(tmp_path_factory, rng):
    work = str(tmp_path_factory.mktemp("opt"))
    sentinel = os.path.join(work, "SENTINEL")
    text = cases.mutate_options(cases.OPTION_SEED_LINES, rng, sentinel)
    res = cases.run_options_case(text, work, sentinel)
    assert res["options"] in ("accepted", "diagnostic"), (text, res)


def test_every_injection_is_refused(tmp_path):
    sentinel = str(tmp_path / "SENTINEL")
    for line in cases.INJECTIONS:
        res = cases.run_options_case(line.format(sentinel=sentinel), str(tmp_path), sentinel)
        assert res["options"] == "diagnostic", (line, res)


VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
    st.text(max_size=8), st.lists(st.integers(-3, 3), max_size=3),
    st.dictionaries(st.text(max_size=5), st.floats(-2, 2), max_size=2),
    st.sampled_from([tilefx.OutputMode.All, tilefx.AutoStage.AutoIncrement, object(), type]))
SETTERS = [
    "deviceIterations", "replicationFactor", "randomSeed", "enableSyntheticData", "logDir",
    "modelName", "setAvailableMemoryProportion", "enableProfiling", "setExecutionStrategy",
    "outputMode", "useIpuModel", "useIpuId", "useOfflineIpuTarget", "connectionType",
    "syncPattern", "logCycleCount", "enableExecutableCaching", "autoRoundNumIPUs",
    "Training.gradientAccumulation", "Training.setAutomaticLossScaling",
    "Training.accumulationAndReplicationReductionType", "Precision.setPartialsType",
    "Precision.enableStochasticRounding", "Precision.halfFloatCasting",
    "TensorLocations.numIOTiles", "Jit.traceModel",
]


@fast(150)
@given(name=st.sampled_from(SETTERS), value=VALUES)
def test_option_setters_accept_or_raise_a_poptorch_error(name, value):
    target = Options()
    *groups, method = name.split(".")
    for g in groups:
        target = getattr(target, g)
    try:
        getattr(target, method)(value)
    except tilefx.Error:
        pass


@fast(60)
@given(value=VALUES)
def test_model_wrappers_reject_bad_arguments_with_a_poptorch_error(value):
    from torch import nn

    for call in (lambda: tilefx.inferenceModel(nn.Linear(2, 2), value),
                 lambda: tilefx.trainingModel(nn.Linear(2, 2), optimizer=value) if value is not None
                 else None):
        try:
            call()
        except tilefx.Error:
            pass
