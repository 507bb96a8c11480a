"""What a wrapper does with the options it is given (PopTorch's
PoplarExecutor): it freezes them and keeps its own copy, in which
OutputMode.Default becomes Final (training) or All (inference) and, when
compiling, the mean reduction strategy is resolved."""

import pytest
import torch
from torch import nn

import tilefx
from tilefx import MeanReductionStrategy, OutputMode


class _Lin(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)

    def forward(self, x):
        out = self.lin(x)
        return out, tilefx.identity_loss(out.sum(), reduction="sum")


def test_default_output_mode_resolves_on_the_wrappers_copy():
    opts = tilefx.Options()
    training = tilefx.trainingModel(_Lin(), opts)
    inference = tilefx.inferenceModel(_Lin(), opts)
    assert opts.defaultOutputMode() and opts.frozen
    assert training.options is not opts and training.options.output_mode == OutputMode.Final
    assert inference.options.output_mode == OutputMode.All
    explicit = tilefx.Options().outputMode(OutputMode.Sum)
    assert tilefx.inferenceModel(_Lin(), explicit).options.output_mode == OutputMode.Sum


@pytest.mark.parametrize("accum_type, combined, training, want", [
    (torch.float32, False, True, MeanReductionStrategy.Post),
    (torch.float16, False, True, MeanReductionStrategy.Running),
    (torch.float16, True, True, MeanReductionStrategy.Post),  # combined SGD cannot run a running mean
    (None, False, True, MeanReductionStrategy.Post),
    (None, False, False, MeanReductionStrategy.Post),
])
def test_mean_reduction_strategy_resolved_at_compile(accum_type, combined, training, want):
    model = _Lin()
    opts = tilefx.Options()
    if training:
        opt = tilefx.optim.SGD(model.parameters(), lr=0.01, accum_type=accum_type,
                               use_combined_accum=combined)
        wrapped = tilefx.trainingModel(model, opts, opt)
    else:
        wrapped = tilefx.inferenceModel(model, opts)
    assert wrapped.options.Training.meanAccumulationAndReplicationReductionStrategy is None
    wrapped.compile(torch.ones(1, 2))
    assert wrapped.options.Training.meanAccumulationAndReplicationReductionStrategy == want
    assert opts.Training.meanAccumulationAndReplicationReductionStrategy is None  # the user's own


def test_structural_optimizer_change_after_compile_is_a_value_error():
    model = _Lin()
    opt = tilefx.optim.Adam(model.parameters(), lr=0.5)
    wrapped = tilefx.trainingModel(model, optimizer=opt)
    wrapped.compile(torch.ones(1, 2))
    opt.accum_type = torch.half
    with pytest.raises(ValueError, match="is already compiled with accum_type") as info:
        wrapped.setOptimizer(opt)
    assert isinstance(info.value, tilefx.Error)


def test_compile_hooks_run_in_order_and_can_be_removed():
    calls = []
    pre = [tilefx.registerPreCompileHook(lambda i=i: calls.append(("pre", i))) for i in range(3)]
    post = tilefx.registerPostCompileHook(lambda: calls.append(("post", 0)))
    try:
        removed = tilefx.registerPreCompileHook(lambda: calls.append(("removed", 0)))
        removed.remove()
        tilefx.inferenceModel(_Lin())(torch.ones(1, 2))
    finally:
        for h in pre + [post]:
            h.remove()
    assert calls == [("pre", 0), ("pre", 1), ("pre", 2), ("post", 0)]
    with pytest.raises(RuntimeError, match="must be callable"):
        tilefx.registerPreCompileHook(2)


class _Buffers(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("b1", torch.ones(3))
        self.register_buffer("b2", torch.ones(3))

    def forward(self, x):
        return torch.sum(x + self.b1 + self.b2)


def test_copy_named_buffers_to_device_copies_the_updatable_ones():
    x = torch.ones(3)
    model = tilefx.inferenceModel(_Buffers(), tilefx.Options().updatableNamedBuffers(["b1"]))
    assert model(x) == 9
    model.b1.add_(1)
    model.b2.add_(1)
    model.copyNamedBuffersToDevice()
    assert model(x) == 12  # b1 copied, b2 the device's own
    plain = tilefx.inferenceModel(_Buffers())
    assert plain(x) == 9
    with pytest.raises(tilefx.Error, match="no buffer is updatable"):
        plain.copyNamedBuffersToDevice()
    wrong = tilefx.inferenceModel(_Buffers(), tilefx.Options().updatableNamedBuffers(["b3"]))
    with pytest.raises(tilefx.Error, match="'b3' is not a buffer of the model"):
        wrong(x)
