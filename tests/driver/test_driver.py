"""The compiler driver (tilefx/driver): CompileConfig, its JSON form for
tilefx-run --config, PopTorch's Options as one, and compile(module, config)
giving the program the API runs."""

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest
import torch

import tilefx
from models import MLP
from tilefx import driver
from tilefx.api.compile_config import compile_config
from tilefx.backend.locations import Locations, TensorLocation
from tilefx.driver import CompileConfig, config_from_json
from tilefx.errors import Error


def test_importing_the_driver_imports_no_torch():
    code = ("import sys, tilefx.driver, tilefx.driver.executable, tilefx.driver.archive; "
            "print(sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_config_is_frozen_and_checked():
    c = CompileConfig(training=True, optimizer={"type": "sgd"}, available_memory_proportion={"ipu0": 0.5})
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.training = False
    with pytest.raises(TypeError):  # what made it cannot change it either
        c.available_memory_proportion["ipu0"] = 0.9
    assert c.replace(device_iterations=4).device_iterations == 4 and c.device_iterations == 1
    nested = {"kind": "pipelined", "stages": [{"blocks": ["b0"], "ipu": 0}]}
    c = CompileConfig(strategy=nested)
    nested["stages"][0]["ipu"] = 1  # a deep copy: what made it cannot change it, however deep
    assert c.strategy["stages"][0]["ipu"] == 0
    with pytest.raises(TypeError):  # a config has no hash (its fields are mappings)
        hash(c)
    for bad in ({"device_iterations": 0}, {"replication_factor": True}, {"process_id": 2, "processes": 2},
                {"machine": "mk9"}, {"training": "yes"}, {"host_io": 1},
                {"available_memory_proportion": {"ipu0": 5.0}}, {"available_memory_proportion": {"ipu0": True}},
                {"liveness": "OffChip"}, {"strategy": {"auto": 3}}, {"strategy": {"kind": object()}},
                {"strategy": {1: "x"}}, {"autocast_policy": {"fp16": 3}}, {"autocast_policy": {"fp16": [1]}},
                {"optimizer": ["sgd"]}, {"optimizer": {"lr": None}}, {"optimizer_groups": {"w": -1}},
                {"optimizer_groups": {"w": 1.0}}, {"locations": {"weight": None}},
                {"locations": Locations(weight=TensorLocation(min_elements_off_chip=-1))},
                {"seed": 1.5}, {"seed": -1}, {"process_id": -1}):
        with pytest.raises(Error, match=f"CompileConfig.{next(iter(bad))}"):
            CompileConfig(**bad)
    assert CompileConfig(liveness="OffChipAfterEachPhase", seed=0).liveness == "OffChipAfterEachPhase"


def test_the_liveness_names_are_poptorchs():
    from tilefx.backend.schedule import LIVENESS
    assert set(LIVENESS) == {m.name for m in tilefx.Liveness}


def test_every_compile_config_field_reads_from_json():
    """A JSON file can set each field (a field config_from_json has no case
    for fails here rather than being dropped)."""
    values = {
        "training": True, "machine": "bow", "strategy": {"kind": "sharded", "stages": [{"blocks": ["b"], "ipu": 1}]},
        "liveness": "OffChipAfterFwd", "available_memory_proportion": {"ipu0": 0.25}, "autocast": False,
        "autocast_policy": {"fp16": ["aten::mm"], "fp32": []}, "downcast_half": True, "half_partials": True,
        "stochastic_rounding": True, "optimizer": {"type": "adam", "lr": 0.5}, "optimizer_groups": {"w": 1},
        "automatic_loss_scaling": True, "loss_scaled": True, "device_iterations": 2, "replication_factor": 2,
        "gradient_accumulation": 3, "processes": 2, "process_id": 1, "reserve_ipus": False,
        "auto_round_num_ipus": True, "locations": {"weight": {"on_chip": False}}, "optimizer_location_set": True,
        "host_io": False, "decompose_grad_sum": True, "auto_recomputation": 3, "seed": 9}
    assert set(values) == {f.name for f in dataclasses.fields(CompileConfig)}
    c = config_from_json(json.dumps(values), "cfg.json")
    default = CompileConfig()
    for name, value in values.items():
        got = getattr(c, name)
        assert got != getattr(default, name), name
        if name == "locations":
            assert got == Locations(weight=TensorLocation(on_chip=False)), name
        else:
            assert json.loads(json.dumps(got, default=dict)) == value, name


def test_config_from_json_names_compile_config_fields():
    c = config_from_json(json.dumps({
        "training": True, "machine": "BOW", "replication_factor": 2, "device_iterations": 3,
        "available_memory_proportion": {"ipu0": 0.3}, "half_partials": True, "seed": 7,
        "locations": {"optimizer": {"on_chip": False, "min_elements_off_chip": 16}}}), "cfg.json")
    assert c.training and c.machine == "bow" and c.replication_factor == 2 and c.device_iterations == 3
    assert dict(c.available_memory_proportion) == {"ipu0": 0.3} and c.half_partials and c.seed == 7
    assert c.locations == Locations(optimizer=TensorLocation(on_chip=False, min_elements_off_chip=16))


@pytest.mark.parametrize("text, words", [
    ('{"trainig": true}', "unknown CompileConfig field"),
    ('{"device_iterations": "4"}', "must be a positive int"),
    ('{"device_iterations": 2.0}', "must be a positive int"),
    ('{"training": 1}', "must be a bool"),
    ('{"locations": {"weight": {"min_elements_off_chip": true}}}', "must be an int"),
    ('{"locations": {"weight": {"min_elements_sharded": -1}}}', "non-negative element counts"),
    ('{"optimizer_groups": {"w": -1}}', "non-negative ints"),
    ('{"strategy": {"auto": 3}}', "'auto' entry is a mapping"),
    ('{"autocast_policy": {"fp16": 3}}', "lists of op names"),
    ('{"autocast_policy": {"fp64": []}}', "lists of op names"),
    ('{"optimizer": {"type": null}}', "CompileConfig.optimizer.type must be"),
    ('{"liveness": "OffChip"}', "must be one of"),
    ('{"seed": -1}', "non-negative int"),
    ('{"available_memory_proportion": {"ipu0": 1.5}}', "(0, 1]"),
    ('{"locations": {"weights": {}}}', "unknown tensor class"),
    ('[1, 2]', "expected a JSON object"),
    ('{"strategy": ' + "[" * 100 + "]" * 100 + "}", "nested deeper"),
    ('{"seed": ' + "9" * 100 + "}", "digits"),
    ("{'training': True}", "not valid JSON"),
])
def test_config_from_json_rejects_bad_files_with_an_error(text, words):
    with pytest.raises(Error) as e:
        config_from_json(text, "cfg.json")
    assert words in str(e.value) and "cfg.json" in str(e.value)


def test_poptorch_options_as_a_config():
    opts = tilefx.Options().deviceIterations(3).replicationFactor(2).setAvailableMemoryProportion({"IPU0": 0.4})
    opts.Training.gradientAccumulation(4)
    opts.Precision.setPartialsType(torch.half)
    opts.TensorLocations.setOptimizerLocation(tilefx.TensorLocationSettings().useOnChipStorage(False))
    opts.randomSeed(5)
    c = compile_config(opts, training=True, optimizer={"type": "sgd"}, optimizer_groups={"w": 1})
    assert (c.device_iterations, c.replication_factor, c.gradient_accumulation) == (3, 2, 4)
    assert dict(c.available_memory_proportion) == {"IPU0": 0.4} and c.half_partials and c.seed == 5
    assert c.optimizer_location_set and not c.locations.optimizer.on_chip
    assert c.accumulate and c.micro_batches == 4
    inference = compile_config(opts, training=False)
    assert inference.gradient_accumulation == 1 and inference.micro_batches == 3 and not inference.accumulate


def _inference_ir():
    torch.manual_seed(0)
    model = MLP().eval()
    x = torch.randn(4, 12)
    ex = tilefx.inferenceModel(model)
    ex(x)
    return model, x, ex


def test_compile_gives_the_program_and_machine_model_the_api_runs():
    """The graph IR before the passes, compiled by the driver under the
    executor's options, runs to the executor's numbers bit for bit, with
    the executor's cycles."""
    from irtext import parse

    model, x, ex = _inference_ir()
    module = parse(ex.ir("import"))
    config = compile_config(ex.options, training=False)
    program = driver.compile(module, config)
    assert program.config is config  # the program says what it was compiled with
    state = {n: t.detach().numpy() for n, t in [*model.named_parameters(), *model.named_buffers()]}
    args = [x.numpy() if kind == "input" else state[key] for kind, key in program.main_args]
    got = program.main(*args)[program.out_index[0]]
    np.testing.assert_array_equal(got, ex(x).numpy())
    assert program.profile.total_cycles == ex.profile.total_cycles
    assert str(program.module) == ex.ir("graph")


def test_profile_of_a_module_under_other_options():
    """The machine model of a compiled module under another configuration
    (what the planner costs): more device iterations, more cycles; the
    executor keeps its own."""
    from irtext import parse

    _, _, ex = _inference_ir()
    module = parse(ex.ir("graph"))
    base = compile_config(ex.options, training=False)
    one = driver.profile_of(module, base)
    four = driver.profile_of(module, base.replace(device_iterations=4))
    assert one.total_cycles == ex.profile.total_cycles
    assert four.total_cycles > one.total_cycles


def test_run_with_a_config_compiles_as_the_api(tmp_path, capsys):
    """tilefx-run --config runs the driver on the imported IR: the graph
    passes, the program and the machine model, then @main, equal to the API."""
    from tilefx.tools.run import main as run

    model, x, ex = _inference_ir()
    src = tmp_path / "mlp.mlir"
    src.write_text(ex.ir("import"))
    arrays = {n: t.detach().numpy() for n, t in [*model.named_parameters(), *model.named_buffers()]}
    arrays["input0"] = x.numpy()
    np.savez(tmp_path / "in.npz", **arrays)
    (tmp_path / "cfg.json").write_text(json.dumps({"machine": "mk2", "device_iterations": 1}))
    assert run([str(src), "--inputs", str(tmp_path / "in.npz"), "--output", str(tmp_path / "out.npz"),
                "--config", str(tmp_path / "cfg.json")]) == 0, capsys.readouterr().err
    np.testing.assert_array_equal(np.load(tmp_path / "out.npz")["output0"], ex(x).numpy())
    (tmp_path / "bad.json").write_text('{"machine": "mk9"}')
    assert run([str(src), "--inputs", str(tmp_path / "in.npz"), "--config", str(tmp_path / "bad.json")]) == 1
    err = capsys.readouterr().err
    assert "unknown IPU machine 'mk9'" in err and "Traceback" not in err


def test_the_strategy_layout_is_written_in_one_place():
    """driver/strategy.py writes the `ipu.strategy` attribute (the layout
    ipu-assign-stages reads) PopTorch's strategy objects and PopART's
    sessions compile with: each kind's keys, as a CompileConfig holds them."""
    from tilefx.driver import strategy

    assert strategy.stage(["b0"], 1) == {"blocks": ["b0"], "ipu": 1}
    assert strategy.stage(("b0", "b1")) == {"blocks": ["b0", "b1"]}
    assert strategy.staged("pipelined", [strategy.stage(["b0"], 0)], schedule="1F1B") == {
        "kind": "pipelined", "stages": [{"blocks": ["b0"], "ipu": 0}], "auto_stage": "same_as_ipu",
        "schedule": "1F1B"}
    assert strategy.staged("sharded", [], auto_increment=True, auto_ipus=4, tail=("head", 0)) == {
        "kind": "sharded", "stages": [], "auto_stage": "auto_increment",
        "auto": {"num_ipus": 4, "virtual_stages": 1, "tail_block": "head", "tail_ipu": 0}}
    assert strategy.phased("serial_phased", [[strategy.stage(["p0"], 0)], [strategy.stage(["p1"], 1)]]) == {
        "kind": "serial_phased", "phases": [{"stages": [{"blocks": ["p0"], "ipu": 0}]},
                                            {"stages": [{"blocks": ["p1"], "ipu": 1}]}],
        "separate_backward": False, "liveness": "AlwaysLive"}
    # a config holds each as it is (checked as module attribute data)
    for s in (strategy.staged("pipelined", [strategy.stage(["b0"], 0)], schedule="FillDrain"),
              strategy.phased("parallel_phased", [[strategy.stage(["p0"], 0)]], True, "OffChipAfterFwd")):
        assert dict(CompileConfig(strategy=s).strategy) == s
