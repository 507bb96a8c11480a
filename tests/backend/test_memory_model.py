"""The one memory model (tilefx/backend/memory_model.py): the optimizer state
ipu-auto-stage plans with is the state the update function gets, resident
shares of located tensors, the out-of-memory check, and the profile and
ipu-auto-stage counting a weight's resident bytes alike."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.context import Context

from irtext import parse
from tilefx.backend.locations import TensorLocation
from tilefx.backend.machine import machine
from tilefx.backend.memory_model import (STATE_ITEMSIZE, IpuMemory, Tensor, check_fits, optimizer_state_tensors,
                                         resident_share)
from tilefx.dialects.irutil import arg_roles, find_func, from_py
from tilefx.dialects.names import OPTIMIZER_KEY
from tilefx.errors import Error
from tilefx.passes.training_step import TrainingStepPass

MAIN = """
func.func @main(%w: tensor<4x2xf32> {tilefx.param = "fc.weight"}, %b: tensor<2xf32> {tilefx.param = "fc.bias"},
                %x: tensor<3x4xf32> {tilefx.input = 0 : i64})
    -> (tensor<f32> {tilefx.output = 0 : i64, tilefx.loss}, tensor<4x2xf32> {tilefx.grad = "fc.weight"},
        tensor<2xf32> {tilefx.grad = "fc.bias"}) {
  %xw = aten.mm %x, %w {ipu.place = #ipu.place<fwd>} : tensor<3x4xf32>, tensor<4x2xf32> -> tensor<3x2xf32>
  %y = aten.add.Tensor %xw, %b {ipu.place = #ipu.place<fwd>, alpha = 1 : i64} : tensor<3x2xf32>, tensor<2xf32> -> tensor<3x2xf32>
  %loss = aten.mean %y {ipu.place = #ipu.place<fwd>} : tensor<3x2xf32> -> tensor<f32>
  %seed = aten.full {ipu.place = #ipu.place<bwd>, tilefx.loss_seed, size = array<i64: 3, 2>, fill_value = 0.16666666666666666 : f64, dtype = f32} : tensor<3x2xf32>
  %xt = aten.permute %x {ipu.place = #ipu.place<bwd>, dims = array<i64: 1, 0>} : tensor<3x4xf32> -> tensor<4x3xf32>
  %gw = aten.mm %xt, %seed {ipu.place = #ipu.place<bwd>} : tensor<4x3xf32>, tensor<3x2xf32> -> tensor<4x2xf32>
  %gb = aten.sum.dim_IntList %seed {ipu.place = #ipu.place<bwd>, dim = array<i64: 0>, keepdim = false} : tensor<3x2xf32> -> tensor<2xf32>
  func.return %loss, %gw, %gb : tensor<f32>, tensor<4x2xf32>, tensor<2xf32>
}
"""

GROUP = {"lr": 0.01, "weight_decay": 0.0}
CONFIGS = [
    {"type": "sgd", "groups": [{**GROUP, "momentum": 0.0, "dampening": 0.0, "nesterov": False}]},
    {"type": "sgd", "groups": [{**GROUP, "momentum": 0.9, "dampening": 0.0, "nesterov": False}]},
    # a momentum of 0 now but variable: the buffer exists for later values
    {"type": "sgd", "variable": ["lr", "momentum"],
     "groups": [{**GROUP, "momentum": 0.0, "dampening": 0.0, "nesterov": False}]},
    {"type": "adam", "groups": [{**GROUP, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "amsgrad": False}]},
    {"type": "adamw", "groups": [{**GROUP, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "amsgrad": False}]},
    {"type": "lamb", "groups": [{**GROUP, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "max_weight_norm": 65500.0}]},
    {"type": "rmsprop", "groups": [{**GROUP, "alpha": 0.99, "eps": 1e-8, "momentum": 0.0, "centered": False}]},
    {"type": "rmsprop", "groups": [{**GROUP, "alpha": 0.99, "eps": 1e-8, "momentum": 0.9, "centered": False}]},
    {"type": "rmsprop", "groups": [{**GROUP, "alpha": 0.99, "eps": 1e-8, "momentum": 0.9, "centered": True}]},
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c['type']}-{len(c.get('variable', []))}-"
                         + "-".join(f"{k}={v}" for k, v in c["groups"][0].items() if k in ("momentum", "centered")))
def test_the_planned_state_is_the_state_the_update_function_gets(cfg):
    module = parse(f"builtin.module {{\n{MAIN}\n}}")
    module.attributes[OPTIMIZER_KEY] = from_py(cfg)
    TrainingStepPass().apply(Context(), module)
    states: dict[str, int] = {}
    for r in arg_roles(find_func(module, "update")):
        if "state" in r:
            param = r["state"].rsplit("/", 1)[0]
            states[param] = states.get(param, 0) + 1
    assert set(states.values()) <= {optimizer_state_tensors(cfg)}
    assert sum(states.values()) == 2 * optimizer_state_tensors(cfg)


def test_resident_share_of_located_tensors():
    on = TensorLocation()
    assert resident_share(on, 4000, 1000, 4) == 4000
    off = TensorLocation(on_chip=False, min_elements_off_chip=0)
    assert resident_share(off, 4000, 1000, 4) == 0
    sharded = TensorLocation(sharded=True, min_elements_sharded=0)
    assert resident_share(sharded, 4000, 1000, 3) == 1334  # rounded up
    assert resident_share(sharded, 4000, 1000, 1) == 4000


def _memory(per_tile: int, m) -> dict[int, IpuMemory]:
    t = Tensor("%big (aten.mm result)", per_tile * m.tiles, "aten.mm", "activation")
    peak = np.full(m.tiles, per_tile, dtype=np.int64)
    return {0: IpuMemory(0, peak, peak, 0, [t], {0: (0, m.tiles)})}


def test_out_of_memory_check():
    m = machine("mk2")
    check_fits(_memory(m.bytes_per_tile, m), m)  # exactly full fits
    with pytest.raises(Error, match=r"Out of memory on IPU 0, tile 0: .*%big \(aten.mm result\)") as e:
        check_fits(_memory(m.bytes_per_tile + 1, m), m)
    assert e.value.type == "memory"


def test_profile_and_auto_stage_count_the_optimizer_state_alike():
    """The profile's resident optimizer state of a trained model is what
    ipu-auto-stage plans per weight: state tensors x 4 bytes x elements."""
    import torch

    import tilefx as poptorch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))

    class WithLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, x, y):
            out = self.model(x)
            return out, torch.nn.functional.mse_loss(out, y)

    ex = poptorch.trainingModel(WithLoss(), poptorch.Options(), optimizer=poptorch.optim.Adam(
        model.parameters(), lr=1e-3))
    ex.compile(torch.randn(8, 16), torch.randn(8, 4))
    state = sum(t.nbytes for mem in ex.profile.memory.values() for t in mem.tensors if t.kind == "optimizer")
    planned = optimizer_state_tensors({"type": "adam"}) * STATE_ITEMSIZE * sum(p.numel() for p in model.parameters())
    assert state == planned
