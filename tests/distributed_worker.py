"""The processes of tests/integration/distributed/test_distributed.py.

    python distributed_worker.py '<scenarios as JSON>' OUT_DIR       (one process, under torchrun)
    python distributed_worker.py --fork '<launches as JSON>'          (forks the processes of each launch)

A process learns its id from torchrun's RANK / WORLD_SIZE (or, for a
scenario with "explicit": true, from PROCESS_ID / NUM_PROCESSES through
``Options.Distributed.configureProcessId``), meets the others at
MASTER_ADDR:MASTER_PORT, runs each scenario and writes OUT_DIR/<rank>.json
(messages, losses, loss scales) and OUT_DIR/<rank>-<scenario>.npz (weights
after copyWeightsToHost). The test builds the single-process references with
the same functions (make_model, make_dataset, ...) in its own process.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import torch
from torch import nn

import tilefx as poptorch

SEED = 42


class Net(nn.Module):
    """A small MLP with what crosses processes: BatchNorm buffers (broadcast)
    and dropout (random streams by global replica)."""

    def __init__(self, norm: bool = True, dropout: float = 0.25):
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.norm = nn.BatchNorm1d(16) if norm else nn.Identity()
        self.drop = nn.Dropout(dropout)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x, y):
        h = self.drop(torch.relu(self.norm(self.fc1(x))))
        return poptorch.identity_loss(nn.functional.cross_entropy(self.fc2(h), y), "mean")


def make_model(cfg: dict) -> nn.Module:
    torch.manual_seed(cfg.get("init_seed", 0))
    model = Net(norm=not cfg.get("half"), dropout=0.0 if cfg.get("half") else 0.25)
    return model.half() if cfg.get("half") else model


def make_dataset(cfg: dict) -> torch.utils.data.TensorDataset:
    """Fixed random samples; with "loud_tail" the second half is 300x larger,
    so that only the processes reading it see gradients that overflow fp16."""
    g = torch.Generator().manual_seed(7)
    n = cfg["samples"]
    x = torch.randn(n, 6, generator=g)
    if cfg.get("loud_tail"):
        x[n // 2:] *= 300.0
    y = torch.randint(0, 3, (n,), generator=g)
    if cfg.get("half"):
        x = x.half()
    return torch.utils.data.TensorDataset(x, y)


def make_options(cfg: dict, replicas: int, process: tuple[int, int] | None = None) -> poptorch.Options:
    """`replicas` per process; `process` = (id, count) for configureProcessId."""
    opts = poptorch.Options().replicationFactor(replicas).deviceIterations(cfg.get("D", 1)).randomSeed(SEED)
    opts.Training.gradientAccumulation(cfg.get("G", 1))
    opts.showCompilationProgressBar(False)
    if cfg.get("als"):
        opts.Training.setAutomaticLossScaling(True)
    if process is not None:
        opts.Distributed.configureProcessId(*process)
    opts.Distributed.setTimeout(cfg.get("timeout", 60))
    return opts


def make_optimizer(cfg: dict, model: nn.Module):
    if cfg["optimizer"] == "adam":
        return poptorch.optim.Adam(model.parameters(), lr=0.01)
    kwargs = {"loss_scaling": 256.0} if cfg.get("als") else {}
    return poptorch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, **kwargs)


def state_arrays(model: nn.Module) -> dict[str, np.ndarray]:
    return {k: v.detach().float().numpy().copy() for k, v in model.state_dict().items()
            if v.is_floating_point()}


def train(cfg: dict, opts: poptorch.Options, batches) -> tuple[dict, list, list]:
    """Train a fresh model on `batches`; its weights, losses and loss scales."""
    model = make_model(cfg)
    trainer = poptorch.trainingModel(model, opts, make_optimizer(cfg, model))
    losses, scales = [], []
    for x, y in batches:
        losses.append(trainer(x, y).float().reshape(-1).tolist())
        scales.append(trainer.loss_scaling_factor)
    trainer.copyWeightsToHost()
    return state_arrays(model), losses, scales


def loader_batches(cfg: dict, opts: poptorch.Options) -> list:
    loader = poptorch.DataLoader(opts, make_dataset(cfg), batch_size=cfg.get("mb", 2),
                                 shuffle=cfg.get("shuffle", False))
    return [b for _, b in zip(range(cfg["steps"]), loader)]


def run_scenario(cfg: dict, rank: int, size: int, out_dir: str) -> dict:
    result: dict = {}
    explicit = (rank, size) if cfg.get("explicit") else None
    kind = cfg["kind"]
    if kind == "train":
        opts = make_options(cfg, cfg["R"], explicit)
        assert (opts.Distributed.processId, opts.Distributed.numProcesses) == (rank, size)
        weights, result["losses"], result["scales"] = train(cfg, opts, loader_batches(cfg, opts))
        np.savez(os.path.join(out_dir, f"{rank}-{cfg['name']}.npz"), **weights)
    elif kind == "infer":  # process 0 alone validates: an inference model exchanges nothing
        if rank == 0:
            opts = make_options(cfg, 2, explicit)
            model = make_model(cfg).eval()
            x, y = make_dataset(cfg).tensors
            with torch.no_grad():
                expected = nn.functional.cross_entropy(model.fc2(torch.relu(model.norm(model.fc1(x[:2])))),
                                                       y[:2]).item()
            out = poptorch.inferenceModel(model, opts)(x[:4], y[:4])
            result["shape"] = list(out.shape)  # one loss per replica of this process
            result["first"] = out[0].item()
            result["expected"] = expected
    elif kind == "mismatch":  # process 1 asks for another replication factor
        replicas = 2 if rank == 0 else 1
        opts = make_options(cfg, replicas, explicit)
        model = make_model(cfg)
        trainer = poptorch.trainingModel(model, opts, make_optimizer(cfg, model))
        x, y = make_dataset(cfg).tensors
        try:
            trainer(x[: 2 * replicas], y[: 2 * replicas])
            result["error"] = None
        except poptorch.Error as e:
            result["error"] = str(e)
    elif kind == "diverge":  # process 1 changes its learning rate alone after the compile
        opts = make_options(cfg, 1, explicit)
        model = make_model(cfg)
        optimizer = make_optimizer(cfg, model)
        trainer = poptorch.trainingModel(model, opts, optimizer)
        x, y = make_dataset(cfg).tensors
        trainer(x[:2], y[:2])
        if rank == 1:
            for group in optimizer.param_groups:
                group["lr"] = 0.1
            trainer.setOptimizer(optimizer)
        result["error"] = _error_of(trainer, x[2:4], y[2:4])
        if rank == 1:  # back in step, but process 1 loads other weights alone
            for group in optimizer.param_groups:
                group["lr"] = 0.05
            trainer.setOptimizer(optimizer)
            with torch.no_grad():
                model.fc1.weight.add_(1.0)
            trainer.copyWeightsToDevice()
        result["weights_error"] = _error_of(trainer, x[2:4], y[2:4])
    elif kind == "dead":  # process 1 leaves after the first step; the others go on
        opts = make_options(cfg, 1, explicit)
        model = make_model(cfg)
        trainer = poptorch.trainingModel(model, opts, make_optimizer(cfg, model))
        x, y = make_dataset(cfg).tensors
        trainer(x[:2], y[:2])
        if rank == 1:
            sys.stdout.flush()
            os._exit(0)  # without a word to the others, as a crash would
        try:
            trainer(x[2:4], y[2:4])
            result["error"] = None
        except poptorch.Error as e:
            result["error"] = str(e)
    return result


def _error_of(trainer, *args) -> str | None:
    try:
        trainer(*args)
    except poptorch.Error as e:
        return str(e)
    return None


def write_result(out_dir: str, rank: int, results: dict) -> None:
    with open(os.path.join(out_dir, f"{rank}.json"), "w") as f:
        json.dump(results, f)


def run_process(scenarios: list[dict], out_dir: str) -> None:
    """This process's part of a launch: its id from torchrun's RANK / WORLD_SIZE,
    or from PROCESS_ID / NUM_PROCESSES for configureProcessId."""
    if "PROCESS_ID" in os.environ:
        rank, size = int(os.environ["PROCESS_ID"]), int(os.environ["NUM_PROCESSES"])
    else:
        rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    results: dict = {}
    for cfg in scenarios:
        results[cfg["name"]] = run_scenario(cfg, rank, size, out_dir)
        write_result(out_dir, rank, results)


def fork_launches(launches: list[dict]) -> int:
    """Run each launch {"processes", "env" (per process), "scenarios", "out_dir"}
    in turn: its processes are forked from this one, which has imported torch
    and compiled once already, so they skip seconds of imports each (a fresh
    process spends them on torch and torch._dynamo). Each is a real process
    with its own memory, meeting the others over TCP. Returns the number of
    processes that failed."""
    cfg = {"optimizer": "sgd", "samples": 8}
    model = make_model(cfg)  # warm up: the imports of a first compile
    trainer = poptorch.trainingModel(model, make_options(cfg, 1, (0, 1)), make_optimizer(cfg, model))
    x, y = make_dataset(cfg).tensors
    trainer(x[:2], y[:2])
    failed = 0
    for launch in launches:
        pids = []
        for env in launch["env"]:
            sys.stdout.flush()
            pid = os.fork()
            if pid == 0:  # the child: never returns into the launcher's code
                code = 1
                try:
                    os.environ.update(env)
                    run_process(launch["scenarios"], launch["out_dir"])
                    code = 0
                except BaseException:  # noqa: BLE001 (a fork must never return into the launcher)
                    import traceback

                    traceback.print_exc()
                finally:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(code)
            pids.append(pid)
        for pid in pids:
            _, status = os.waitpid(pid, 0)
            if os.waitstatus_to_exitcode(status) != 0:
                print(f"launch {launch['out_dir']}: process {pid} exited with "
                      f"{os.waitstatus_to_exitcode(status)}", flush=True)
                failed += 1
    return failed


def main() -> None:
    if sys.argv[1] == "--fork":
        sys.exit(fork_launches(json.loads(sys.argv[2])))
    run_process(json.loads(sys.argv[1]), sys.argv[2])


if __name__ == "__main__":
    main()
