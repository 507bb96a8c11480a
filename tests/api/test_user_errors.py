"""Errors that say what to change: every error the API raises for what a user
did is the class PopTorch raises for it or a `poptorch.Error` (the guide's
`except poptorch.Error` catches it, and `python -O` cannot strip it), and the
errors a new user meets first name the option that fixes them."""

import ast
import dataclasses
import importlib
import pathlib

import numpy as np
import pytest
import torch
from torch import nn

import tilefx
from tilefx.backend.machine import MK2
from tilefx.backend.memory_advice import advice, remedies
from tilefx.backend.memory_model import IpuMemory, Tensor
from tilefx.popart import popart_exception

ROOT = pathlib.Path(tilefx.__file__).resolve().parent
SURFACES = sorted([*ROOT.glob("api/*.py"), *ROOT.glob("popart/*.py")])

# raises of classes that are not poptorch.Error, each with why it is the right class
NOT_ERROR = {
    # Python's protocols, anywhere: hasattr/getattr defaults, iterators, abstract methods
    "AttributeError": "the attribute protocol (hasattr/getattr with a default)",
    "StopIteration": "the iterator protocol",
    "NotImplementedError": "an abstract method for subclasses",
    # option_groups._check_enum's parameter: OptionsError or OptionsAssertionError
    "exc": "an OptionsError class passed in",
}
# the same, where only one module may raise them
NOT_ERROR_IN = {
    ("runner/logs.py", "ValueError"): "PopTorch's class (poptorch.setLogLevel)",
    ("api/data_async.py", "TypeError"): "the pickle protocol (an AsynchronousDataAccessor is not picklable)",
    ("api/data.py", "ValueError"): "torch's DataLoader rule (batch_sampler is exclusive), in torch's class",
    ("api/data.py", "IndexError"): "the sequence protocol (a Dataset's __getitem__ ends iteration)",
    # options_file.py's internal errors, re-raised as ConfigFileError with the file's line
    ("api/options_file.py", "ValueError"): "internal, re-raised as ConfigFileError",
    ("api/options_file.py", "_LineError"): "internal, re-raised as ConfigFileError",
    ("api/options_file.py", "_ResolveError"): "internal, re-raised as ConfigFileError",
}


def _raised(path: pathlib.Path):
    """(line, what is raised, the class it names in its module or None) for each raise."""
    module = importlib.import_module("tilefx." + ".".join(path.relative_to(ROOT).with_suffix("").parts))
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Raise) and node.exc is not None:
            exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            name = ast.unparse(exc)
            yield node.lineno, name, getattr(module, name, None) if name.isidentifier() else None


@pytest.mark.parametrize("path", SURFACES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_raise_is_a_poptorch_error_or_poptorch_own_class(path):
    tree = ast.parse(path.read_text())
    asserts = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Assert)]
    assert not asserts, f"assert statements (stripped by python -O) at lines {asserts}"
    wrong = []
    for line, name, cls in _raised(path):
        if isinstance(cls, type) and issubclass(cls, (tilefx.Error, popart_exception)):
            continue
        if name in NOT_ERROR or (str(path.relative_to(ROOT)), name) in NOT_ERROR_IN:
            continue
        if name.startswith("error_also("):  # an Error by construction
            continue
        if cls is None and name.islower():  # a caught exception re-raised: `raise e`
            continue
        wrong.append(f"line {line}: raise {name}")
    assert not wrong, wrong


def test_a_batch_that_is_not_a_multiple_is_a_poptorch_error_and_an_assertion_error():
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    opts = tilefx.Options().deviceIterations(3)
    with pytest.raises(tilefx.Error) as e:
        tilefx.inferenceModel(model, opts)(torch.randn(4, 4))
    assert isinstance(e.value, AssertionError)  # PopTorch's class, for code that catches it
    assert "not a multiple of" in str(e.value) and "poptorch.DataLoader" in str(e.value)


def test_custom_op_attribute_errors_are_poptorch_errors_and_value_errors():
    with pytest.raises(tilefx.Error) as e:
        tilefx.custom_op([torch.ones(2)], "Op", "dom", 1, example_outputs=[torch.ones(2)],
                         attributes={1: 2})
    assert isinstance(e.value, ValueError)


class _TwoIpus(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 2)

    def forward(self, x, t):
        with tilefx.Block("B1", ipu_id=0):
            x = torch.relu(self.a(x))
        with tilefx.Block("B2", ipu_id=1):
            return nn.functional.mse_loss(self.b(x), t)


def _train(opts):
    torch.manual_seed(0)
    model = _TwoIpus()
    n = opts.Training.gradient_accumulation
    return tilefx.trainingModel(model, opts, optimizer=tilefx.optim.SGD(model.parameters(), lr=0.1))(
        torch.randn(2 * n, 4), torch.randn(2 * n, 2))


def test_pipelining_rule_names_the_option_and_the_implicit_strategy():
    with pytest.raises(tilefx.Error) as e:
        _train(tilefx.Options())
    msg = str(e.value)
    assert "needs gradientAccumulation >= 3, got 1" in msg
    assert ("poptorch.Options().Training.gradientAccumulation must be greater than or equal to the number of "
            "pipeline stages (3) when using poptorch.PipelinedExecution. Please note that a model with 2 "
            "pipeline stages in PopTorch will have an additional 1 stages when training.") in msg  # PopTorch's
    assert "opts.Training.gradientAccumulation(3)" in msg
    # no strategy was set: Block(ipu_id=...) switched pipelining on, and sharding needs no minimum
    assert "Block(ipu_id=...)" in msg and "opts.setExecutionStrategy(poptorch.ShardedExecution())" in msg
    # the two fixes it names both work
    _train(tilefx.Options().setExecutionStrategy(tilefx.ShardedExecution()))
    opts = tilefx.Options()
    opts.Training.gradientAccumulation(3)
    _train(opts)


def test_pipelining_rule_with_an_explicit_strategy_does_not_blame_the_blocks():
    with pytest.raises(tilefx.Error) as e:
        _train(tilefx.Options().setExecutionStrategy(tilefx.PipelinedExecution()))
    assert "opts.Training.gradientAccumulation(3)" in str(e.value)
    assert "ShardedExecution" not in str(e.value)


# ---------------------------------------------------------------------------
# out of memory: the advice ranks what would fit by the memory plan
# ---------------------------------------------------------------------------

SMALL = dataclasses.replace(MK2, name="small", tiles=16, bytes_per_tile=64 * 1024)


def _oom(model, x):
    opts = tilefx.Options().setMachine(SMALL)
    with pytest.raises(tilefx.Error) as e:
        tilefx.inferenceModel(model.eval(), opts)(x)
    return str(e.value)


def test_out_of_memory_with_many_weights_ranks_weights_off_chip_first():
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(256, 256, bias=False) for _ in range(5)])
    msg = _oom(model, torch.randn(2, 256))
    assert "Out of memory on IPU 0" in msg
    first = msg.split("(1) ")[1].split("(2) ")[0]
    assert "setWeightLocation" in first and "would fit" in first
    # the temporaries are small: a lower proportion is offered last, not first
    assert "setAvailableMemoryProportion" not in first
    assert "alone needs" not in msg


def test_out_of_memory_with_one_weight_larger_than_the_tiles_says_so():
    torch.manual_seed(0)
    model = nn.Linear(1024, 640, bias=False)  # 2.6 MB over 16 tiles of 64 KiB
    msg = _oom(model, torch.randn(2, 1024))
    assert "weight alone needs" in msg and "split it into smaller tensors" in msg
    assert "would fit" not in msg  # nothing the options offer fits it


def _memory(parts: dict[str, int], temp: int, tiles: int = 4) -> IpuMemory:
    tensors = [Tensor(name, nbytes * tiles, "op", kind) for name, (kind, nbytes) in parts.items()]
    per_tile = sum(nb for _, nb in parts.values()) + temp
    return IpuMemory(0, np.zeros(tiles, np.int64), np.full(tiles, per_tile, np.int64), temp, tensors,
                     {i: (0, tiles) for i in range(len(tensors))})


def test_remedies_rank_what_fits_before_what_frees_more():
    # 100 over: the optimizer state (120) fits alone, the temporaries (300) free more
    mem = _memory({"w": ("weight", 50), "s": ("optimizer", 120), "a": ("activation", 30)}, temp=300)
    ranked = remedies(mem, 0, capacity=400)
    assert [r.fits for r in ranked] == [True, True, False]
    assert "serializedMatMul" in ranked[0].what and ranked[0].frees == 300
    assert "setOptimizerLocation" in ranked[1].what
    mem = _memory({"w": ("weight", 60), "s": ("optimizer", 60), "a": ("activation", 60)}, temp=60)
    text = advice(mem, 0, capacity=100)  # 140 over, 60 from each part: nothing alone
    assert text.startswith("No one change fits alone")


def test_pipelined_inference_rules_are_poptorchs_words():
    """Pipelined inference: too few device iterations, and a gradient
    accumulation other than 1 (PopTorch's messages; the pipelined one points
    at deviceIterations). The default strategy is PopTorch's
    PipelinedExecution (Options._execution_strategy)."""
    assert type(tilefx.Options()._execution_strategy) is tilefx.PipelinedExecution
    sharded = tilefx.Options().setExecutionStrategy(tilefx.ShardedExecution())
    assert type(sharded._execution_strategy) is tilefx.ShardedExecution

    class Two(nn.Module):
        def forward(self, x):
            with tilefx.Block(ipu_id=0):
                x = x + 1
            with tilefx.Block(ipu_id=1):
                return x * 2

    with pytest.raises(tilefx.Error, match=r"poptorch\.Options\(\)\.deviceIterations must be greater than or "
                                           r"equal to the number of pipeline stages \(2\)"):
        tilefx.inferenceModel(Two())(torch.zeros(1))
    for opts, pipelined in ((tilefx.Options(), True), (sharded, False)):
        opts.Training.gradientAccumulation(2)
        with pytest.raises(tilefx.Error) as e:
            tilefx.inferenceModel(Two(), opts)
        assert str(e.value).startswith(
            "You must set poptorch.Options().Training.gradientAccumulation to 1 or leave it as its default "
            "value (1) when running a poptorch.inferenceModel().")
        assert ("Use poptorch.Options().deviceIterations to process" in str(e.value)) == pipelined
