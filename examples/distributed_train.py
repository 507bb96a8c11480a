"""Data-parallel training over several processes with torchrun.

    torchrun --nproc-per-node 2 examples/distributed_train.py [--steps 40] [--save model.pt]
    (or: python -m torch.distributed.run --nproc-per-node 2 examples/distributed_train.py)

Each process drives `--replicas` simulated replicas of its own (PopRun's
convention: `replicationFactor` counts this process's replicas, so two
processes of two replicas give a global replication of 4). torchrun's
RANK / WORLD_SIZE become `Options.Distributed` (without torchrun:
`opts.Distributed.configureProcessId(rank, count)`, with MASTER_ADDR /
MASTER_PORT set in every process), the `DataLoader` gives each process its own shard of the
data, and at each weight update the processes sum their gradients with
torch.distributed (gloo). After `copyWeightsToHost` every process holds the
same weights, so process 0 alone saves them. See docs/distributed.md.

The task: classify points drawn around four centres (nothing to download).
"""

from __future__ import annotations

import argparse
import hashlib

import torch
from torch import nn

import tilefx as poptorch

CLASSES, FEATURES, HIDDEN = 4, 2, 32


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(), nn.Dropout(0.1),
                                 nn.Linear(HIDDEN, CLASSES))

    def forward(self, x, labels=None):
        logits = self.net(x)
        if labels is None:
            return logits
        return logits, poptorch.identity_loss(nn.functional.cross_entropy(logits, labels), "mean")


def make_data(n: int, seed: int) -> torch.utils.data.TensorDataset:
    g = torch.Generator().manual_seed(seed)
    centres = torch.tensor([[2.0, 2.0], [-2.0, 2.0], [-2.0, -2.0], [2.0, -2.0]])
    labels = torch.randint(0, CLASSES, (n,), generator=g)
    return torch.utils.data.TensorDataset(centres[labels] + torch.randn(n, FEATURES, generator=g), labels)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=40, help="weight updates per process")
    ap.add_argument("--replicas", type=int, default=2, help="replicas of each process")
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--save", default=None, help="process 0 saves the trained state_dict here")
    ap.add_argument("--timeout", type=float, default=300.0,
                    help="seconds a process waits for the others before it fails")
    ap.add_argument("--tiny", action="store_true", help="a few steps, for the tests")
    args = ap.parse_args()
    if args.tiny:
        args.steps, args.micro_batch = 3, 4

    opts = poptorch.Options().replicationFactor(args.replicas).randomSeed(0)
    opts.Training.gradientAccumulation(2)
    opts.Distributed.setTimeout(args.timeout)
    opts.showCompilationProgressBar(False)
    rank, count = opts.Distributed.processId, opts.Distributed.numProcesses

    torch.manual_seed(0)  # not needed for agreement: process 0's weights are broadcast at compile
    model = Classifier()
    train_data = make_data(4096, seed=1)
    loader = poptorch.DataLoader(opts, train_data, batch_size=args.micro_batch, shuffle=True)
    optimizer = poptorch.optim.AdamW(model.parameters(), lr=0.01)
    trainer = poptorch.trainingModel(model, opts, optimizer)
    print(f"process {rank} of {count}: {args.replicas} replicas of its own, global replication "
          f"{args.replicas * count}, {len(loader)} batches of {loader.combinedBatchSize} samples in "
          f"its shard", flush=True)

    step = 0
    while step < args.steps:
        for x, labels in loader:
            _, losses = trainer(x, labels)  # this process's replicas' last micro-batch losses
            step += 1
            if step % 10 == 0 or step == args.steps:
                print(f"process {rank}: step {step} loss {losses.mean().item():.4f}", flush=True)
            if step == args.steps:
                break

    trainer.copyWeightsToHost()
    digest = hashlib.sha256(b"".join(t.detach().numpy().tobytes() for t in model.state_dict().values()))
    print(f"process {rank}: weights checksum {digest.hexdigest()[:16]}", flush=True)

    # held-out accuracy of the trained weights, with PyTorch on the CPU
    test = make_data(512, seed=2)
    with torch.no_grad():
        model.eval()
        accuracy = (model(test.tensors[0]).argmax(1) == test.tensors[1]).float().mean().item()
    print(f"process {rank}: held-out accuracy {accuracy:.1%}", flush=True)
    if rank == 0 and args.save:
        torch.save(model.state_dict(), args.save)
        print(f"process 0: saved the weights to {args.save}", flush=True)


if __name__ == "__main__":
    main()
