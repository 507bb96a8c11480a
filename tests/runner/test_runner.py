"""The executor beneath both surfaces (tilefx/runner): a `Runner` made from
a CompileConfig and HostSettings trains as PyTorch does and as PopTorch's
wrapper of the same options, bit for bit; PopTorch's Options give the
settings the host loop reads (api/compile_config.py `surface_config`); the
output modes pick a call's arrays in one place (`output_items`)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import tilefx
from tilefx.api.compile_config import surface_config
from tilefx.api.enums import CommGroupType, OutputMode, ReductionType
from tilefx.driver import CompileConfig
from tilefx.errors import Error
from tilefx.runner.outputs import output_items, stacked
from tilefx.runner.runner import Runner
from tilefx.runner.settings import HostSettings


class _Regression(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(6, 3)

    def forward(self, x, y):
        return torch.nn.functional.mse_loss(self.fc(x), y)


def _data(n: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 6, generator=g), torch.randn(n, 3, generator=g)


def test_a_runner_trains_as_pytorch_and_as_poptorchs_wrapper():
    """Two replicas, two micro-batches each, gradients averaged (Mean): one
    weight update per call, PyTorch's SGD step on the whole batch; the
    PopTorch wrapper of the same options gives the same bits."""
    opts = tilefx.Options()
    opts.replicationFactor(2)
    opts.Training.gradientAccumulation(2)
    opts.Training.accumulationAndReplicationReductionType(ReductionType.Mean)
    config, host = surface_config(opts, True)
    assert config.replication_factor == 2 and config.gradient_accumulation == 2 and host.mean_reduction

    ref, ours, wrapped = _Regression(), _Regression(), _Regression()
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    runner = Runner(ours, config, host, torch.optim.SGD(ours.parameters(), lr=0.1, momentum=0.9))
    poptorch = tilefx.trainingModel(wrapped, opts, torch.optim.SGD(wrapped.parameters(), lr=0.1, momentum=0.9))
    for step in range(3):
        x, y = _data(8, step)
        ref_opt.zero_grad()
        ref_loss = ref(x, y)
        ref_loss.backward()
        ref_opt.step()
        got = runner(x, y)
        assert got.shape == (2,)  # Final (PopTorch's training default): each replica's last micro-batch
        assert torch.equal(got, poptorch(x, y))
    runner.copyWeightsToHost()
    for (name, p), q, r in zip(ours.named_parameters(), wrapped.parameters(), ref.parameters()):
        assert torch.equal(p, q), name
        torch.testing.assert_close(p, r, rtol=1e-6, atol=1e-7)


def test_a_runner_returns_what_its_output_mode_says():
    """Inference over 4 device iterations: every iteration's output ("all"),
    the last ("final"), their sum ("sum"), every second ("every_n")."""
    model = torch.nn.Linear(6, 3)
    x = torch.randn(8, 6)
    want = model(x).detach().reshape(4, 2, 3)
    config = CompileConfig(device_iterations=4)
    got = {mode: Runner(copy.deepcopy(model), config, HostSettings(output_mode=mode, output_return_period=2))(x)
           for mode in ("all", "final", "sum", "every_n")}
    torch.testing.assert_close(got["all"], want.reshape(8, 3), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(got["final"], want[3], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(got["sum"], want.sum(0), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got["every_n"], want[1::2].reshape(4, 3), rtol=1e-6, atol=1e-6)


def test_output_items_pick_and_lay_out_a_calls_arrays():
    # outputs[d][g][r][k]: D=2 iterations, G=1, R=2 replicas, one result
    outputs = [[[[np.full(2, 10 * d + r, np.float32)] for r in range(2)]] for d in range(2)]
    items, dims = output_items(outputs, 0, "all", 1, 2, 1, 2)
    assert dims == [2, 1, 2] and stacked(items, dims).tolist() == [[[0, 0], [1, 1]], [[10, 10], [11, 11]]]
    items, dims = output_items(outputs, 0, "sum", 1, 2, 1, 2)
    assert dims == [2] and stacked(items, dims).tolist() == [[10, 10], [12, 12]]
    items, dims = output_items(outputs, 0, "every_n", 2, 2, 1, 2)
    assert dims == [1, 1, 2] and stacked(items, dims).tolist() == [[10, 10], [11, 11]]
    with pytest.raises(Error, match="unsupported output mode"):
        output_items(outputs, 0, "some", 1, 2, 1, 2)


def test_poptorchs_options_give_the_host_settings():
    o = tilefx.Options()
    o.replicationFactor(4)
    o.inputReplicaGrouping(2, CommGroupType.Orthogonal)
    o.outputMode(OutputMode.EveryN, 2)
    o.deviceIterations(4)
    o.broadcastBuffers(False)
    o.enableExecutableCaching("/tmp/some-cache")
    _, host = surface_config(o, False)
    # (Mean: PopTorch's default reduction of a training step's gradients)
    assert host == HostSettings(output_mode="every_n", output_return_period=2, mean_reduction=True,
                                input_group_size=2, input_group_orthogonal=True, broadcast_buffers=False,
                                cache_dir="/tmp/some-cache")
    # Default output mode: each model's own (Final for training, All for inference)
    assert surface_config(tilefx.Options(), True)[1].output_mode == "final"
    assert surface_config(tilefx.Options(), False)[1].output_mode == "all"


@pytest.mark.parametrize("field, value, match", [
    ("output_mode", "every", "output_mode must be one of"),
    ("output_return_period", 0, "output_return_period must be a positive int"),
    ("input_group_size", True, "input_group_size must be a positive int"),
    ("mean_reduction", 1, "mean_reduction must be a bool"),
    ("cache_dir", 3, "cache_dir must be None or a str"),
])
def test_bad_host_settings_are_errors(field, value, match):
    with pytest.raises(Error, match=match):
        HostSettings(**{field: value})
