"""Graphcore's PopTorch tutorial "PopTorch Parallel Execution Using Pipelining" on tilefx's simulated IPU.

MNIST cannot be downloaded here, so by default the network trains on the
handwritten digits scikit-learn ships (8x8 images upsampled to 28x28), with a
held-out test split; `--dataset mnist` uses torchvision's MNIST when present.

The model is annotated with the tutorial's blocks B1..B4, one stage per IPU
over 4 simulated IPUs, run with `--strategy pipelined` or `sharded`. The
numbers do not depend on the strategy; the schedule (which IPU runs which
stage and micro-batch when) does, and is printed at the end.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time

import torch
import torch.nn as nn

import tilefx as poptorch


class ConvLayer(nn.Module):
    def __init__(self, in_channels, num_filters, kernel_size, pool_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, num_filters, kernel_size=kernel_size)
        self.pool = nn.MaxPool2d(kernel_size=pool_size)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.pool(self.conv(x)))


class Network(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = ConvLayer(1, 10, 5, 2)
        self.layer2 = ConvLayer(10, 20, 5, 2)
        self.layer3 = nn.Linear(320, 256)
        self.layer3_act = nn.ReLU()
        self.layer4 = nn.Linear(256, 10)

    def forward(self, x):
        with poptorch.Block("B1"):
            x = self.layer1(x)
        with poptorch.Block("B2"):
            x = self.layer2(x)
        with poptorch.Block("B3"):
            x = x.view(-1, 320)
            x = self.layer3_act(self.layer3(x))
        with poptorch.Block("B4"):
            x = self.layer4(x)
        return x


class TrainingModelWithLoss(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.loss = nn.CrossEntropyLoss()

    def forward(self, args, labels=None):
        output = self.model(args)
        if labels is None:
            return output
        with poptorch.Block("B4"):
            loss = self.loss(output, labels)
        return output, loss


def load_digits_28x28(seed: int = 0):
    """scikit-learn's 1797 digits, upsampled to 28x28 and normalised like MNIST."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = torch.tensor(d.images, dtype=torch.float32) / 16.0
    x = nn.functional.interpolate(x[:, None], size=(28, 28), mode="bilinear", align_corners=False)
    x = (x - 0.1307) / 0.3081
    y = torch.tensor(d.target, dtype=torch.int64)
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(len(y), generator=g)
    n_test = 297
    test, train = perm[:n_test], perm[n_test:]
    return (x[train], y[train]), (x[test], y[test])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--device-iterations", type=int, default=2)
    ap.add_argument("--gradient-accumulation", type=int, default=8)
    ap.add_argument("--test-batch-size", type=int, default=80)
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--learning-rate", type=float, default=0.002)
    ap.add_argument("--strategy", choices=["pipelined", "sharded"], default="pipelined")
    ap.add_argument("--offload-optimiser", action="store_true",
                    help="keep the optimiser state in streaming memory")
    ap.add_argument("--profile", action="store_true",
                    help="write the schedule as a Chrome/Perfetto trace and a JSON summary")
    ap.add_argument("--profile-dir", default="profile")
    ap.add_argument("--debug", action="store_true", help="print tilefx's debug logging")
    ap.add_argument("--max-calls", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--dataset", choices=["digits", "mnist"], default="digits")
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args(argv)

    if args.debug:
        logging.basicConfig(level=logging.DEBUG, format="%(name)s: %(message)s")
        logging.getLogger("tilefx").setLevel(logging.DEBUG)
    torch.manual_seed(args.seed)
    (xtr, ytr), (xte, yte) = load_digits_28x28(args.seed)
    model = Network()

    stages = [poptorch.Stage(f"B{i + 1}").ipu(i) for i in range(4)]
    strategy = (poptorch.PipelinedExecution(*stages) if args.strategy == "pipelined"
                else poptorch.ShardedExecution(*stages))
    opts = poptorch.Options().deviceIterations(args.device_iterations)
    opts.setExecutionStrategy(strategy)
    opts.Training.gradientAccumulation(args.gradient_accumulation)
    opts.outputMode(poptorch.OutputMode.All)
    opts.randomSeed(args.seed)
    if args.offload_optimiser:
        opts.TensorLocations.setOptimizerLocation(
            poptorch.TensorLocationSettings().useOnChipStorage(False))
    training = poptorch.trainingModel(
        TrainingModelWithLoss(model), opts,
        optimizer=poptorch.optim.AdamW(model.parameters(), lr=args.learning_rate))

    train_data = poptorch.DataLoader(opts, torch.utils.data.TensorDataset(xtr, ytr),
                                     batch_size=args.batch_size, shuffle=True, drop_last=True)
    combined = train_data.combinedBatchSize
    steps, t_run, losses = 0, 0.0, []
    for epoch in range(args.epochs):
        correct = total = 0
        for x, y in train_data:
            if args.max_calls is not None and steps >= args.max_calls:
                break
            t0 = time.perf_counter()
            out, loss = training(x, y)
            t_run += time.perf_counter() - t0
            losses.append(loss)
            steps += 1
            correct += (out.argmax(1) == y).sum().item()
            total += len(y)
        if total:
            print(f"epoch {epoch + 1}: loss {loss.mean().item():.4f}, "
                  f"train accuracy {100 * correct / total:.2f}%")

    inf_opts = poptorch.Options().deviceIterations(args.test_batch_size // args.batch_size)
    inf_opts.setExecutionStrategy(
        poptorch.PipelinedExecution(*[poptorch.Stage(f"B{i + 1}").ipu(i) for i in range(4)])
        if args.strategy == "pipelined" else
        poptorch.ShardedExecution(*[poptorch.Stage(f"B{i + 1}").ipu(i) for i in range(4)]))
    inference = poptorch.inferenceModel(model.eval(), inf_opts)
    test_data = poptorch.DataLoader(inf_opts, torch.utils.data.TensorDataset(xte, yte),
                                    batch_size=args.batch_size, drop_last=True)
    correct = n = 0
    for x, y in test_data:
        correct += (inference(x).argmax(1) == y).sum().item()
        n += len(y)
    print(f"Accuracy on test set: {100 * correct / n:.2f}%")
    print("Profile summary:")
    print(f"  compile (trace to ready executor): training {training.compile_seconds:.2f} s, "
          f"inference {inference.compile_seconds:.2f} s")
    print(f"  {steps} training calls of {combined} samples, "
          f"{args.epochs * 0 + steps * args.device_iterations} weight updates, "
          f"{1000 * t_run / max(steps, 1):.1f} ms per call on the host")
    print("  training " + training.schedule.summary().replace("\n", "\n  "))
    print("  simulated " + training.profile.table().replace("\n", "\n  "))
    print("  inference " + inference.schedule.summary().replace("\n", "\n  "))
    print("  simulated " + inference.profile.table().replace("\n", "\n  "))
    if args.profile:
        os.makedirs(args.profile_dir, exist_ok=True)
        for name, model_ in (("training", training), ("inference", inference)):
            written = model_.profile.write(os.path.join(args.profile_dir, name))
            print(f"  {name} profile written to {os.path.dirname(written[0])}: trace.json "
                  "(open it in ui.perfetto.dev), summary.json, PNG plots")
    return {"accuracy": 100 * correct / n, "losses": losses, "model": model}


if __name__ == "__main__":
    main()
