"""PopTorch's module-level names and submodules under `import tilefx as
poptorch`, inferenceModel(training executor), tensor attributes frozen as
constants (PopTorch user guide, 4.8 "PyTorch buffers"), PVTI channels, post-compile hooks."""

from __future__ import annotations

import os

import torch

import tilefx as poptorch
from fresh_python import run_python


def test_submodules_and_module_level_names():
    from poptorch.enums import VariableRetrievalMode  # noqa: F401  (real poptorch absent: tilefx)
    from poptorch.options import Options
    from tilefx.autocasting import autocast  # noqa: F401

    assert Options is poptorch.Options and poptorch.enums.CommGroupType.Orthogonal.value == 2
    assert poptorch.options.__spec__.name == "tilefx.api.options"  # the real module keeps its spec
    assert poptorch.ipuHardwareIsAvailable() and poptorch.ipuHardwareIsAvailable(16)
    assert poptorch.ipuHardwareVersion() == 2
    ch = poptorch.profiling.Channel("user")
    with ch.tracepoint("step"):
        pass
    assert any(e["channel"] == "user" and e["name"] == "step" for e in poptorch.profiling.events())


# every `poptorch.X` the PopTorch user guide ("Features") and the pipelining tutorial name, without the
# tutorial's typos (poptorch.Dataloader, Option.TensorLocations, PhasedExecution)
# and file names (poptorch.conf)
GUIDE_NAMES = """
AutoStage.AutoIncrement BeginBlock Block.useAutoId BlockFunction DataLoader DataLoaderMode.Async
Error HalfFloatCastingBehavior.HalfUpcastToFloat Liveness MultiConv MultiConvPlanType
Options.TensorLocations Options.autoRoundNumIPUs Options.broadcastBuffers Options.deviceIterations
Options.enableExecutableCaching Options.loadFromFile Options.outputMode Options.replicationFactor
Options.setExecutionStrategy Options.useIpuModel OutputMode.All ParallelPhasedExecution Phase
PipelinedExecution PoplarExecutor.compileAndExport PoplarExecutor.copyWeightsToHost
PoplarExecutor.setOptimizer RecoverableError ReductionType.Mean SerialPhasedExecution
ShardedExecution Stage TensorLocationSettings UnrecoverableError autocast autocasting.Policy
ctc_beam_search_decoder custom_op dynamic_slice dynamic_update enums.CommGroupType.Consecutive
enums.CommGroupType.Orthogonal enums.VariableRetrievalMode.OnePerGroup identity_loss inferenceModel
ipuHardwareIsAvailable ipuHardwareVersion ipu_print_tensor isRunningOnIpu load nop optim.Adam
optim.AdamW optim.LAMB optim.RMSprop optim.SGD optim.VariableAttributes.markAsConstant
optim.VariableAttributes.markAsVariable options._DistributedOptions options._JitOptions
options._PrecisionOptions options._TensorLocationOptions options._TrainingOptions.gradientAccumulation
options._TrainingOptions.setAutomaticLossScaling profiling.Channel serializedMatMul setLogLevel
set_available_memory trainingModel
""".split()


def test_every_name_the_guide_uses_resolves():
    """`poptorch.MultiConvPlanType` (PopTorch user guide, 4.6.4 "poptorch.MultiConv") and every other
    name the guide writes as `poptorch.X`; PopTorch's enums are all top level."""
    for name in GUIDE_NAMES:
        obj = poptorch
        for part in name.split("."):
            assert hasattr(obj, part), f"poptorch.{name}: no {part!r}"
            obj = getattr(obj, part)
    assert poptorch.MultiConvPlanType is poptorch.enums.MultiConvPlanType
    for name in poptorch.enums.__all__:  # PopTorch: `from .enums import *`
        value = getattr(poptorch.enums, name)
        if isinstance(value, type):
            assert getattr(poptorch, name) is value, name
    assert {"MultiConvPlanType", "OverlapMode"} <= set(dir(poptorch))


CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(poptorch.__file__)))


def test_a_bare_import_poptorch_is_tilefx(tmp_path):
    """`import poptorch` first (no tilefx import before it), as PopTorch code
    starts: the distribution's `poptorch` package binds the name to tilefx. A
    real PopTorch elsewhere on the path still wins, even after this checkout."""
    out = run_python("from poptorch.options import Options\n"
                  "import poptorch, poptorch.enums, tilefx\n"
                  "assert poptorch is tilefx and Options is tilefx.Options\n"
                  "assert poptorch.enums.AutoStage is tilefx.AutoStage\n"
                  "print(poptorch.options.__spec__.name)", [CHECKOUT])
    assert out.split() == ["tilefx.api.options"]
    (tmp_path / "poptorch").mkdir()
    (tmp_path / "poptorch" / "__init__.py").write_text("REAL = True\n")
    for path in ([CHECKOUT, str(tmp_path)], [str(tmp_path), CHECKOUT]):
        assert run_python("import poptorch, tilefx\nprint(poptorch.REAL)", path).split() == ["True"]


class _Counter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.i = torch.tensor([0.0])
        self.register_buffer("j", torch.tensor([0.0]))

    def forward(self, x):
        self.i += 1
        self.j += 1
        return x + self.i, x + self.j


def test_tensor_attribute_is_frozen_buffer_persists_and_hooks_run():
    calls = []
    handle = poptorch.registerPostCompileHook(lambda: calls.append(1))
    model = _Counter()
    ex = poptorch.inferenceModel(model, poptorch.Options().showCompilationProgressBar(False))
    x = torch.zeros(1)
    outs = [ex(x) for _ in range(2)]
    handle.remove()
    assert [o[0].item() for o in outs] == [1.0, 1.0]  # the attribute: its initial value each call
    assert [o[1].item() for o in outs] == [1.0, 2.0]  # the buffer keeps its value
    assert model.i.item() == 0.0 and calls == [1]


def test_inference_model_from_a_training_executor_shares_weights():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(3, 3)

        def forward(self, x):
            out = self.fc(x)
            return (out, out.pow(2).mean()) if self.training else out

    opts = poptorch.Options().showCompilationProgressBar(False)
    opts.Training.gradientAccumulation(2)
    training = poptorch.trainingModel(M(), opts)
    x = torch.randn(4, 3)
    training(x)
    validation = poptorch.inferenceModel(training)
    validation.model.eval()
    assert validation.model is training.model
    assert validation.options.Training.gradient_accumulation == 1
    training(x)  # the inference executor picks the new weights up implicitly
    torch.testing.assert_close(validation(x), training.model(x), rtol=1e-5, atol=1e-6)


class _LinearWithSquareLoss(torch.nn.Module):
    """A linear layer returning its output and a loss made from it."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        out = self.fc(x)
        return out, out.pow(2).mean()


def test_backward_on_an_output_is_poptorchs_error_and_training_still_matches_torch():
    """A CPU training loop ported as is calls loss.backward() on the loss the
    trainingModel returned: PopTorch answers that the backward pass already ran
    (its own poptorch.Error), where torch would say "element 0 of tensors does not
    require grad". The model's numbers are unaffected (compared with torch)."""
    import pytest

    Net = _LinearWithSquareLoss

    torch.manual_seed(0)
    model, reference = Net(), Net()
    reference.load_state_dict(model.state_dict())
    x = torch.randn(2, 4)
    training = poptorch.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    for _ in range(2):
        out, loss = training(x)
        with pytest.raises(poptorch.Error, match=r"backward\(\) cannot be called explicitly"):
            loss.backward()
        optimizer.zero_grad()
        want_out, want_loss = reference(x)
        want_loss.backward()
        optimizer.step()
        torch.testing.assert_close(loss, want_loss.detach(), rtol=1e-6, atol=1e-7)
        torch.testing.assert_close(out, want_out.detach(), rtol=1e-6, atol=1e-7)
    inference = poptorch.inferenceModel(Net())
    out, loss = inference(x)
    with pytest.raises(poptorch.Error, match="use a trainingModel instead"):
        out.backward()


def test_wrapping_a_model_again_for_training_needs_destroy_first():
    """PopTorch user guide, 4.5.5 "Reading and writing optimizer state": "Destroy original model to prevent
    an error when wrapping
    the model again" (PopTorch: "Model has already been wrapped in
    'poptorch.trainingModel'"). tilefx let two live training wrappers own the same
    weights, each with its own optimizer state. After destroy() the new wrapper
    carries on from the trained weights, as torch does."""
    import pytest

    Net = _LinearWithSquareLoss

    torch.manual_seed(0)
    model, reference = Net(), Net()
    reference.load_state_dict(model.state_dict())
    x = torch.randn(2, 4)
    first = poptorch.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    first(x)
    with pytest.raises(poptorch.Error, match="already been wrapped in 'poptorch.trainingModel'"):
        poptorch.trainingModel(model)
    with pytest.raises(RuntimeError, match="model.destroy()"):  # PopTorch raises a RuntimeError
        poptorch.trainingModel(first)
    poptorch.inferenceModel(model)  # inference wrappers are not training wrappers
    first.destroy()
    second = poptorch.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    _, loss = second(x)
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    for _ in range(2):
        optimizer.zero_grad()
        want = reference(x)[1]
        want.backward()
        optimizer.step()
    torch.testing.assert_close(loss, want.detach(), rtol=1e-6, atol=1e-7)
