"""The pipelining tutorial example: accuracy with its defaults, and losses
equal to a plain PyTorch run of the same schedule (gradient accumulation of
mean losses, AdamW, the same data order)."""

import importlib.util
import os

import pytest
import torch

from repo_paths import REPO

ROOT = REPO


def _example():
    spec = importlib.util.spec_from_file_location(
        "mnist_pipeline", os.path.join(ROOT, "examples", "mnist_pipeline.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _pytorch_replay(example, args, calls):
    """The same schedule in plain PyTorch: per weight update, G micro-batches
    whose mean losses are averaged into one gradient."""
    import tilefx as poptorch

    torch.manual_seed(args["seed"])
    (xtr, ytr), _ = example.load_digits_28x28(args["seed"])
    model = example.Network()
    full = example.TrainingModelWithLoss(model)
    opt = torch.optim.AdamW(model.parameters(), lr=args["lr"])
    opts = poptorch.Options().deviceIterations(args["D"])
    opts.Training.gradientAccumulation(args["G"])
    opts.randomSeed(args["seed"])  # as the example: the data order follows this seed
    data = poptorch.DataLoader(opts, torch.utils.data.TensorDataset(xtr, ytr), batch_size=args["mb"],
                               shuffle=True, drop_last=True)
    losses = []
    for i, (x, y) in enumerate(data):
        if i == calls:
            break
        xs = x.reshape(args["D"], args["G"], args["mb"], *x.shape[1:])
        ys = y.reshape(args["D"], args["G"], args["mb"])
        call = []
        for d in range(args["D"]):
            opt.zero_grad()
            for g in range(args["G"]):
                _, loss = full(xs[d, g], ys[d, g])
                (loss / args["G"]).backward()
                call.append(loss.detach())
            opt.step()
        losses.append(torch.stack(call))
    return losses


CALLS = 4


@pytest.fixture(scope="module")
def replayed():
    """The example's defaults (seed 42, lr 0.002, D=2, G=8, micro-batch 8)
    replayed in plain PyTorch for CALLS calls: the one reference every
    strategy below must equal, since none of them changes the schedule's
    numbers."""
    return _pytorch_replay(_example(), {"seed": 42, "lr": 0.002, "D": 2, "G": 8, "mb": 8}, CALLS)


@pytest.mark.parametrize("flags", [["--strategy", "pipelined"], ["--strategy", "sharded"],
                                   ["--strategy", "pipelined", "--offload-optimiser"],
                                   ["--strategy", "sharded", "--offload-optimiser"]])
def test_example_losses_equal_a_pytorch_run_of_the_same_schedule(flags, replayed):
    result = _example().main([*flags, "--epochs", "1", "--max-calls", str(CALLS)])
    ref = replayed
    assert len(result["losses"]) == CALLS
    for ours, theirs in zip(result["losses"], ref):
        assert ours.shape == (16,)
        torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-5)


def test_example_reaches_94_percent_with_its_defaults(capsys):
    result = _example().main([])
    assert result["accuracy"] >= 94.0
    out = capsys.readouterr().out
    assert "Accuracy on test set:" in out and "fill 6, main 2, flush 6" in out
