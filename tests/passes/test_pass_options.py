"""The graph passes take their options as dataclass fields that the driver
builds from a CompileConfig, the same passes a `tilefx-opt` pipeline text
gives; the module carries the IR the passes write, not the options."""

import pytest
import torch
from torch import nn
from xdsl.dialects.builtin import StringAttr, f16
from xdsl.passes import PassPipeline

import tilefx
from tilefx import driver
from tilefx.backend.costs import partials_itemsize_of
from tilefx.backend.locations import Locations, TensorLocation
from tilefx.dialects.irutil import to_py
from tilefx.driver import CompileConfig, strategy
from tilefx.lowering.from_torch import trace
from tilefx.passes import PassOptionError, pipelines
from tilefx.passes.auto_stage import AutoStagePass
from tilefx.passes.autocast import AutocastPass
from tilefx.passes.available_memory import AvailableMemoryError, AvailableMemoryPass
from tilefx.passes.partials_type import PartialsTypePass
from tilefx.tools.universe import PASSES

# the module attributes that carried these options
OPTION_KEYS = ("ipu.autocast_policy", "ipu.half_float_casting", "ipu.available_memory_proportion",
               "ipu.partials_type")
CONFIG = CompileConfig(autocast_policy={"fp16": ["aten.mm", "aten.addmm"], "promote": ["aten.cat", "aten.bilinear"]},
                       downcast_half=True, available_memory_proportion={"IPU0": 0.3}, half_partials=True)
PIPELINE = ('ipu-partials-type{type=half},'
            'ipu-autocast{fp16="aten.mm,aten.addmm" fp32="" promote="aten.cat" demote="" half_float_casting="downcast"},'
            'ipu-available-memory{per-ipu=0.3 ipus=0}')


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def _module():
    torch.manual_seed(0)
    return trace(Net().autocast(), (torch.randn(4, 8),), training=False).module


def test_the_driver_builds_the_passes_a_pipeline_text_gives():
    text = PassPipeline.parse_spec(PASSES, PIPELINE).passes
    assert (driver.partials_type_pass(CONFIG), driver.autocast_pass(CONFIG), driver.available_memory_pass(CONFIG)) \
        == text


def test_the_driver_writes_no_option_into_the_module():
    """Compiled under every one of these options, the module holds none of
    them; the matmuls carry what the passes wrote from them."""
    module = _module()
    program = driver.compile(module, CONFIG)
    assert not set(OPTION_KEYS) & set(program.module.attributes)
    mms = [o for o in program.module.walk() if o.name == "aten.addmm"]
    assert len(mms) == 2
    for o in mms:
        assert o.attributes["ipu.partials_type"].data == "half" and partials_itemsize_of(o) == 2
        assert o.attributes["ipu.available_memory"].value.data == 0.3
        assert o.results[0].type.element_type == f16


def test_the_passes_as_fields_give_the_drivers_ir():
    """The passes of the pipeline text, run on the traced module with the
    rest of the driver's pipeline, give the IR the driver compiles."""
    compiled = _module()
    driver.compile(compiled, CONFIG)
    by_text = _module()
    partials, autocast, memory = PassPipeline.parse_spec(PASSES, PIPELINE).passes
    driver.prepare(by_text, CONFIG)
    pipelines.run_graph_passes(by_text, training=False, autocast=autocast, available_memory=memory,
                               partials_type=partials)
    assert str(by_text) == str(compiled)


def test_a_policy_leaves_out_names_no_op_has_and_a_pipeline_refuses_them():
    """poptorch.autocasting.Policy names torch functions tilefx has no op for
    (its default promote list has `bilinear`): no IR op has the name, so the
    driver's pass leaves it out; in a pipeline text it is a typo, refused."""
    assert driver.autocast_pass(CONFIG).promote == "aten.cat"
    with pytest.raises(PassOptionError, match="'aten.bilinear' is not an aten or ipu op name"):
        AutocastPass(promote="aten.bilinear")
    # autocast off: no pass unless FloatDowncastToHalf asks for one, which runs with no policy
    assert driver.autocast_pass(CompileConfig(autocast=False)) is None
    assert driver.autocast_pass(CompileConfig(autocast=False, downcast_half=True)) == AutocastPass(
        fp16="", fp32="", promote="", demote="", half_float_casting="downcast")
    assert driver.autocast_pass(CompileConfig()) == AutocastPass()


def test_named_proportions_are_checked_when_the_pass_is_built():
    with pytest.raises(AvailableMemoryError, match="expected IPU<n> = <float>, got ipu0 = 0.5") as e:
        driver.available_memory_pass(CompileConfig(available_memory_proportion={"ipu0": 0.5}))
    assert isinstance(e.value, tilefx.Error)
    with pytest.raises(PassOptionError, match="ipus names 1 IPU"):
        AvailableMemoryPass(per_ipu=(0.5, 0.5), ipus=(1,))
    with pytest.raises(PassOptionError, match="distinct IPU ids"):
        AvailableMemoryPass(per_ipu=(0.5, 0.5), ipus=(1, 1))
    assert driver.available_memory_pass(CompileConfig()) == AvailableMemoryPass()


def test_partials_type_is_read_from_the_op_only():
    """The machine model reads each op's own partials type; the pass writes it
    where none is written, and float partials are the default (no pass)."""
    module = _module()
    mm = next(o for o in module.walk() if o.name == "aten.addmm")
    assert partials_itemsize_of(mm) == 4
    mm.attributes["ipu.partials_type"] = StringAttr("float")
    PartialsTypePass(type="half").apply(None, module)
    assert partials_itemsize_of(mm) == 4  # written by hand: kept
    other = [o for o in module.walk() if o.name == "aten.addmm" and o is not mm]
    assert [partials_itemsize_of(o) for o in other] == [2]
    assert driver.partials_type_pass(CompileConfig()) is None
    with pytest.raises(PassOptionError, match="'fp16' is not one of half, float"):
        PartialsTypePass(type="fp16")


def test_automatic_stages_take_the_machine_and_locations_as_fields():
    """The strategy written into the module is the user's (IPUs, virtual
    stages); ipu-auto-stage's machine, micro-batches, proportions and where
    the optimizer state and the other tensors live are its fields."""
    off, sharded = TensorLocation(on_chip=False), TensorLocation(sharded=True)
    config = CompileConfig(training=True, machine="bow", strategy=strategy.staged("pipelined", [], auto_ipus=2),
                           locations=Locations(weight=off, optimizer=sharded), optimizer_location_set=True,
                           replication_factor=2, gradient_accumulation=4, available_memory_proportion={"IPU1": 0.4})
    module = _module()
    driver.prepare(module, config)
    assert to_py(module.attributes["ipu.strategy"]) == {"kind": "pipelined", "stages": [], "auto_stage": "same_as_ipu",
                                                        "auto": {"num_ipus": 2, "virtual_stages": 1}}
    p = driver.auto_stage_pass(config)
    assert (p.machine, p.micro_batches, p.per_ipu, p.ipus) == ("bow", 4, (0.4,), (1,))
    assert (p.state_on_chip, p.state_shards, p.locations, p.replicas) == (True, 2, Locations(weight=off), 2)
    # the pass reads them: its report names the machine it costed on
    AutoStagePass(num_ipus=2, machine="bow").apply(None, module)
    assert to_py(module.attributes["ipu.auto_stage"])["machine"] == "bow"
