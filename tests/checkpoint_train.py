"""The training run of tests/integration/poptorch/test_checkpoint.py, as a user writes it with
poptorch.ResumableTraining:

    torchrun --nproc-per-node 2 --max-restarts 1 checkpoint_train.py CHECKPOINT_DIR OUT_NPZ [KILL_AT_STEP]
    python checkpoint_train.py --runs '[[CHECKPOINT_DIR, OUT_NPZ, KILL_AT_STEP or null, PROCESSES], ...]'

(--runs: runs one after another, their processes forked from this one,
which has imported torch already; it prints each process's exit code.)

A small model with dropout (the replicas' random streams) and BatchNorm
(buffers), Adam (optimizer state), a shuffled DataLoader over two epochs,
and a loop body that draws from torch's, numpy's and Python's global
streams, so a resumed run ends with the uninterrupted run's weights only
when every one of them comes back. With KILL_AT_STEP, the first run of
process 1 (of process 0 alone) kills itself with SIGKILL right after that
training step, before the step's checkpoint can be written; the restarted
run resumes. Process 0 writes the final weights to OUT_NPZ and prints where
it resumed from.
"""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import sys

import numpy as np
import torch
from torch import nn

import tilefx as poptorch

EVERY = 3  # steps between checkpoints
EPOCHS = 2


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.norm = nn.BatchNorm1d(16)
        self.drop = nn.Dropout(0.25)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x, y):
        h = self.drop(torch.relu(self.norm(self.fc1(x))))
        return poptorch.identity_loss(nn.functional.cross_entropy(self.fc2(h), y), "mean")


def train(directory: str, kill_at: int | None = None, stop_at: int | None = None, seed: int = 42):
    """The run; its final weights. stop_at: leave the loop after that step
    (a run that ends early, within one process)."""
    torch.manual_seed(0)
    np.random.seed(1)
    random.seed(2)
    model = Net()
    opts = poptorch.Options().randomSeed(seed).replicationFactor(2)
    opts.Training.gradientAccumulation(2)
    opts.Distributed.setTimeout(60)
    opts.showCompilationProgressBar(False)
    g = torch.Generator().manual_seed(7)
    data = torch.utils.data.TensorDataset(torch.randn(96, 6, generator=g), torch.randint(0, 3, (96,), generator=g))
    loader = poptorch.DataLoader(opts, data, batch_size=2, shuffle=True)
    trainer = poptorch.trainingModel(model, opts, poptorch.optim.Adam(model.parameters(), lr=0.01))
    rank = opts.Distributed.processId
    first_run = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0" and not (
        os.path.isdir(directory) and os.listdir(directory))
    training = poptorch.ResumableTraining(trainer, loader, directory, every_n_steps=EVERY, epochs=EPOCHS)
    for x, y in training:
        # the loop's own draws from the host's streams
        x = x * float(np.random.uniform(0.9, 1.1)) + 0.01 * torch.randn_like(x) + random.random() * 1e-3
        trainer(x, y)
        last = rank == opts.Distributed.numProcesses - 1
        if kill_at is not None and first_run and training.step == kill_at and last:
            print(f"process {rank}: SIGKILL after step {kill_at}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        if training.step == stop_at:
            break
    trainer.copyWeightsToHost()
    return {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}, training


def run(directory: str, out: str, kill_at: int | None) -> None:
    weights, training = train(directory, kill_at)
    if training.rank == 0:
        print(f"resumed from: {os.path.basename(training.resumed_from or '') or 'none'}", flush=True)
        np.savez(out, **weights)


def forked_runs(runs: list) -> None:
    """Each run [directory, out, kill_at, processes] in turn: its processes
    forked from this one (several meet at a free port, as torchrun's would,
    from RANK / WORLD_SIZE); prints each process's exit code."""
    for directory, out, kill_at, processes in runs:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        pids = []
        for rank in range(processes):
            sys.stdout.flush()
            pid = os.fork()
            if pid == 0:  # the child: never returns into this loop
                code = 1
                try:
                    if processes > 1:
                        os.environ.update({"RANK": str(rank), "WORLD_SIZE": str(processes), "LOCAL_RANK": str(rank),
                                           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
                    run(directory, out, kill_at)
                    code = 0
                finally:
                    sys.stdout.flush()
                    os._exit(code)
            pids.append(pid)
        for pid in pids:
            _, status = os.waitpid(pid, 0)
            print(f"exit {os.waitstatus_to_exitcode(status)}", flush=True)


def main() -> None:
    if sys.argv[1] == "--runs":
        forked_runs(json.loads(sys.argv[2]))
    else:
        run(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else None)


if __name__ == "__main__":
    main()
