"""Replicas over several processes (docs/distributed.md): real localhost
processes on torch.distributed (gloo), compared with one process holding
all the replicas.

A fresh process spends seconds importing torch, so the equal-weights and
bad-input runs share one launcher that imports and compiles once, then forks
the processes of each launch (tests/distributed_worker.py); the example runs
under torchrun itself. Every launch is bounded by a timeout that kills its
whole process group, so a hang fails a test instead of the suite.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import socket
import subprocess
import sys

import numpy as np
import pytest
import torch
from distributed_worker import loader_batches, make_options, train

import tilefx as poptorch

from repo_paths import REPO, TESTS

HERE, ROOT = TESTS, REPO  # the helper scripts' folder, the checkout
WORKER = os.path.join(HERE, "distributed_worker.py")
LAUNCH_TIMEOUT = 300  # seconds for all the launches: generous on a loaded 2-core machine

SGD = {"name": "sgd", "kind": "train", "optimizer": "sgd", "D": 2, "G": 2, "mb": 2, "steps": 3,
       "samples": 96, "shuffle": True}
ADAM = {"name": "adam", "kind": "train", "optimizer": "adam", "D": 1, "G": 2, "mb": 2, "steps": 3,
        "samples": 48, "shuffle": True}
# fp16 with automatic loss scaling: only process 1's shard overflows, so the
# processes agree on the scale only if they sum the statistics
ALS = {"name": "als", "kind": "train", "optimizer": "sgd", "half": True, "als": True, "R": 1, "D": 1,
       "G": 1, "mb": 2, "steps": 4, "samples": 16, "loud_tail": True}
GLOBAL_REPLICAS = 4  # P x R in every equal-weights run
INFER = {"name": "infer", "kind": "infer", "samples": 8}
MISMATCH = {"name": "mismatch", "kind": "mismatch", "optimizer": "sgd", "samples": 8, "timeout": 60}
DIVERGE = {"name": "diverge", "kind": "diverge", "optimizer": "sgd", "samples": 8, "timeout": 60}
DEAD = {"name": "dead", "kind": "dead", "optimizer": "sgd", "samples": 8, "timeout": 60}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(extra: dict) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                        "MASTER_ADDR", "MASTER_PORT", "TILEFX_DISTRIBUTED_TIMEOUT")}
    env["PYTHONPATH"] = os.pathsep.join([ROOT, HERE, env.get("PYTHONPATH", "")])
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"  # no thread pools in a process that forks (and 2 cores to share)
    env.update(extra)
    return env


def _run_bounded(cmd: list[str]) -> tuple[int, str]:
    """Run `cmd` in its own process group, which is killed whole (the processes
    it started with it) if it outlives LAUNCH_TIMEOUT; its exit code and output."""
    proc = subprocess.Popen(cmd, env=_env({}), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        log = proc.communicate(timeout=LAUNCH_TIMEOUT)[0]
        return proc.returncode, log
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        log = proc.communicate()[0]
        pytest.fail(f"{cmd[:4]} did not finish within {LAUNCH_TIMEOUT} s:\n{log[-3000:]}")


def launch(launches: list[dict]) -> list[list[dict]]:
    """Run the launches {"processes", "scenarios", "out_dir", "torchrun"} in one
    launcher process that forks each launch's processes (see
    distributed_worker.fork_launches); each launch's per-process results.
    torchrun: the processes learn their id as under torchrun (RANK,
    WORLD_SIZE); otherwise through configureProcessId."""
    plan = []
    for spec in launches:
        port, n = _free_port(), spec["processes"]
        ids = [{"RANK": str(r), "WORLD_SIZE": str(n), "LOCAL_RANK": str(r)} if spec["torchrun"] else
               {"PROCESS_ID": str(r), "NUM_PROCESSES": str(n)} for r in range(n)]
        plan.append({"out_dir": str(spec["out_dir"]),
                     "scenarios": [dict(s, explicit=not spec["torchrun"]) for s in spec["scenarios"]],
                     "env": [{"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), **i} for i in ids]})
    code, log = _run_bounded([sys.executable, WORKER, "--fork", json.dumps(plan)])
    assert code == 0, f"{code} process(es) failed:\n{log[-4000:]}"
    return [_results(spec) for spec in launches]


def _results(spec: dict) -> list[dict]:
    out = []
    for rank in range(spec["processes"]):
        with open(os.path.join(spec["out_dir"], f"{rank}.json")) as f:
            out.append(json.load(f))
    return out


def reference(cfg: dict, processes: int, replicas: int):
    """One process with processes x replicas replicas, fed what the processes'
    DataLoaders give them: process p's replicas are the global p*R .. p*R+R-1."""
    shards = [loader_batches(cfg, make_options(cfg, replicas, (p, processes))) for p in range(processes)]
    d, g, mb = cfg.get("D", 1), cfg.get("G", 1), cfg.get("mb", 2)
    batches = []
    for step in zip(*shards):
        joined = []
        for i in range(2):  # x, y
            parts = [b[i].reshape((d, g, replicas, mb) + b[i].shape[1:]) for b in step]
            joined.append(torch.cat(parts, dim=2).reshape((-1,) + step[0][i].shape[1:]))
        batches.append(joined)
    assert len(batches) == cfg["steps"]
    return train(cfg, make_options(cfg, processes * replicas, (0, 1)), batches)


def _weights(out_dir, rank: int, name: str) -> dict[str, np.ndarray]:
    with np.load(os.path.join(out_dir, f"{rank}-{name}.npz"), allow_pickle=False) as f:
        return dict(f)


def _check_equal(cfg, processes, replicas, results, out_dir):
    ref_w, ref_losses, ref_scales = reference(cfg, processes, replicas)
    first = _weights(out_dir, 0, cfg["name"])
    for rank, res in enumerate(results):
        got = _weights(out_dir, rank, cfg["name"])
        assert sorted(got) == sorted(ref_w)
        for k in ref_w:
            # every process holds the same weights, bit for bit ...
            np.testing.assert_array_equal(got[k], first[k], err_msg=f"{k}: process {rank} vs 0")
            # ... and they are those of one process with all the replicas
            np.testing.assert_allclose(got[k], ref_w[k], rtol=1e-6, atol=1e-7, err_msg=k)
        # outputs come back per process: its own replicas' losses
        own = [step[rank * replicas:(rank + 1) * replicas] for step in ref_losses]
        np.testing.assert_allclose(res[cfg["name"]]["losses"], own, rtol=1e-6, atol=1e-7)
        assert res[cfg["name"]]["scales"] == ref_scales
    return ref_w


@pytest.fixture(scope="module")
def launches(tmp_path_factory):
    """Two processes as torchrun starts them (RANK / WORLD_SIZE): the
    equal-weights runs, then mismatched options, then processes out of step,
    then process 1 leaves; four processes told their id with
    configureProcessId(id, 4).

    Under pytest-xdist the workers share one run: the first to get here
    launches, under a file lock in the directory they share, the other reads
    its results."""
    shared = os.environ.get("PYTEST_XDIST_WORKER") is not None
    root = tmp_path_factory.getbasetemp().parent if shared else tmp_path_factory.mktemp("launches")
    two, four = root / "distributed-p2", root / "distributed-p4"
    specs = [{"processes": 2, "out_dir": two, "torchrun": True,
              "scenarios": [dict(SGD, R=2), dict(ADAM, R=2), ALS, INFER, MISMATCH, DIVERGE, DEAD]},
             {"processes": 4, "out_dir": four, "torchrun": False,
              "scenarios": [dict(SGD, R=1), dict(ADAM, R=1)]}]
    with open(root / "distributed.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = root / "distributed.done"
        if not done.exists():
            two.mkdir(exist_ok=True)
            four.mkdir(exist_ok=True)
            launch(specs)
            done.touch()
    res2, res4 = [_results(spec) for spec in specs]
    return {2: (two, res2), 4: (four, res4)}


@pytest.fixture(scope="module")
def two_processes(launches):
    return launches[2]


@pytest.fixture(scope="module")
def four_processes(launches):
    return launches[4]


@pytest.mark.parametrize("cfg", [SGD, ADAM], ids=["sgd", "adam"])
def test_one_process_equals_its_global_replication(cfg):
    """P = 1: configureProcessId(0, 1) and the loader's whole-dataset shard."""
    opts = make_options(cfg, GLOBAL_REPLICAS, (0, 1))
    w, losses, _ = train(cfg, opts, loader_batches(cfg, opts))
    ref_w, ref_losses, _ = reference(dict(cfg, R=GLOBAL_REPLICAS), 1, GLOBAL_REPLICAS)
    for k in ref_w:
        np.testing.assert_array_equal(w[k], ref_w[k], err_msg=k)
    assert losses == ref_losses


@pytest.mark.parametrize("cfg", [SGD, ADAM], ids=["sgd", "adam"])
def test_two_processes_equal_one(two_processes, cfg):
    out, results = two_processes
    _check_equal(cfg, 2, GLOBAL_REPLICAS // 2, results, out)


@pytest.mark.parametrize("cfg", [SGD, ADAM], ids=["sgd", "adam"])
def test_four_processes_equal_one(four_processes, cfg):
    out, results = four_processes
    _check_equal(cfg, 4, GLOBAL_REPLICAS // 4, results, out)


def test_automatic_loss_scaling_statistics_are_summed(two_processes):
    out, results = two_processes
    _check_equal(ALS, 2, 1, results, out)
    scales = results[0]["als"]["scales"]
    # the scale halved at least once: the overflow statistics reached process 0
    assert any(b < a for a, b in zip([1.0] + scales, scales)), scales


def test_inference_in_one_process_alone(two_processes):
    """Process 0 runs an inference model while process 1 does not: no exchange,
    no wait; its outputs are its own replicas'."""
    _, results = two_processes
    res = results[0]["infer"]
    assert res["shape"] == [2]
    assert res["first"] == pytest.approx(res["expected"], rel=1e-5)
    assert results[1]["infer"] == {}


def test_mismatched_options(two_processes):
    _, results = two_processes
    for rank, res in enumerate(results):
        msg = res["mismatch"]["error"]
        assert msg is not None and msg.startswith(f"process {rank} of 2: the processes were given different")
        # the differing values, and only those
        assert msg.endswith("replication_factor: process 0 = 2, process 1 = 1"), msg


def test_processes_out_of_step(two_processes):
    """setOptimizer, or new weights, in one process only: the next call fails on both."""
    _, results = two_processes
    for rank, res in enumerate(results):
        msg = res["diverge"]["error"]
        assert msg is not None and msg.startswith(f"process {rank} of 2: the processes are out of step"), msg
        assert msg.endswith("optimizer lr/0: process 0 = 0.05, process 1 = 0.1"), msg
        # process 1 alone changed its model's weights: copied to its device at its next call
        msg = res["diverge"]["weights_error"]
        assert msg is not None and msg.startswith(f"process {rank} of 2: the processes are out of step"), msg
        assert "weights (copyWeightsToDevice): process 0 = sha256 " in msg and "optimizer" not in msg, msg


def test_a_dead_process_makes_the_others_fail(two_processes):
    _, results = two_processes
    msg = results[0]["dead"]["error"]
    assert msg is not None, "process 0 went on without process 1"
    assert msg.startswith("process 0 of 2: the training call before weight update 2 failed: another "
                          "process exited"), msg
    assert "dead" not in results[1]  # process 1 left before writing its result


def test_missing_rendezvous(monkeypatch):
    """No MASTER_ADDR / MASTER_PORT: an Error at once naming them; a rendezvous
    nobody else comes to: an Error after the timeout naming the process and where."""
    from distributed_worker import make_dataset, make_model, make_optimizer

    cfg = {"optimizer": "sgd", "samples": 8, "timeout": 2}
    x, y = make_dataset(cfg).tensors

    def call(process, again=False):
        model = make_model(cfg)
        trainer = poptorch.trainingModel(model, make_options(cfg, 1, process), make_optimizer(cfg, model))
        if again:
            with pytest.raises(poptorch.Error):
                trainer(x[:2], y[:2])
            assert not trainer.isCompiled()  # the next call tries again: it never trains alone
        trainer(x[:2], y[:2])

    monkeypatch.delenv("MASTER_ADDR", raising=False)
    monkeypatch.setenv("MASTER_PORT", "29500")
    with pytest.raises(poptorch.Error, match=r"process 0 of 3: no rendezvous: MASTER_ADDR=<unset> and "
                                             r"MASTER_PORT=29500; every process needs both"):
        call((0, 3), again=True)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "http")
    with pytest.raises(poptorch.Error, match=r"process 0 of 3: no rendezvous: MASTER_PORT='http' is not"):
        call((0, 3))
    port = _free_port()
    monkeypatch.setenv("MASTER_PORT", str(port))
    with pytest.raises(poptorch.Error, match=rf"process 1 of 2: no rendezvous with the other 1 process\(es\) "
                                             rf"at 127\.0\.0\.1:{port} within 2 s"):
        call((1, 2))
    assert not torch.distributed.is_initialized()


def test_process_group_made_by_the_program(monkeypatch):
    """disableProcessGroupsSetup(): the program's own group, which must exist and
    match Options.Distributed."""
    from distributed_worker import make_dataset, make_model, make_optimizer

    cfg = {"optimizer": "sgd", "samples": 8, "timeout": 5}
    x, y = make_dataset(cfg).tensors

    def trainer(process):
        opts = make_options(cfg, 1, process)
        opts.Distributed.disableProcessGroupsSetup()
        model = make_model(cfg)
        return poptorch.trainingModel(model, opts, make_optimizer(cfg, model))

    with pytest.raises(poptorch.Error, match=r"process 0 of 2: Options.Distributed.disableProcessGroupsSetup"
                                             r"\(\) was called but torch.distributed is not initialised"):
        trainer((0, 2))(x[:2], y[:2])
    torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0,
                                         world_size=1)
    try:
        with pytest.raises(poptorch.Error, match=r"process 1 of 2 \(Options.Distributed\): torch.distributed "
                                                 r"is already initialised as rank 0 of 1"):
            trainer((1, 2))(x[:2], y[:2])
    finally:
        torch.distributed.destroy_process_group()


def test_distributed_options_read_torchrun_variables(monkeypatch):
    for var in ("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "3")
    opts = poptorch.Options()
    assert (opts.Distributed.processId, opts.Distributed.numProcesses) == (3, 4)
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "2")  # PopRun's (mpirun's) come first
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "1")
    opts = poptorch.Options()
    assert (opts.Distributed.processId, opts.Distributed.numProcesses) == (1, 2)
    assert opts.Distributed.setTimeout(2.5).timeout_seconds == 2.5
    for bad in (0, -1, float("inf"), "10", True):
        with pytest.raises(poptorch.Error, match="setTimeout"):
            opts.Distributed.setTimeout(bad)
    monkeypatch.setenv("TILEFX_DISTRIBUTED_TIMEOUT", "7.5")
    assert poptorch.Options().Distributed.timeout_seconds == 7.5
    monkeypatch.setenv("TILEFX_DISTRIBUTED_TIMEOUT", "soon")
    with pytest.raises(poptorch.Error, match="TILEFX_DISTRIBUTED_TIMEOUT='soon'"):
        poptorch.Options()


def test_example_under_torchrun(tmp_path):
    """examples/distributed_train.py as the README runs it, in its tiny mode."""
    out = tmp_path / "weights.pt"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
           "--master-port", str(_free_port()), os.path.join(ROOT, "examples", "distributed_train.py"),
           "--tiny", "--save", str(out)]
    code, log = _run_bounded(cmd)
    assert code == 0, log[-4000:]
    # (the two processes share one pipe: their lines can run into each other)
    sums = dict(re.findall(r"process (\d+): weights checksum ([0-9a-f]{16})", log))
    assert len(sums) == 2 and sums["0"] == sums["1"], log
    assert out.exists()  # saved by process 0 only
    state = torch.load(out, weights_only=True)
    assert state and all(torch.isfinite(v).all() for v in state.values() if v.is_floating_point())
