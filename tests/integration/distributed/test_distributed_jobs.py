"""Two jobs on one MASTER_PORT (docs/distributed.md, "Jobs and timeouts"):
real processes meeting over TCP, as tilefx.api.rendezvous makes them. The
second job is refused at once, each of its processes naming both jobs,
while the first keeps its rendezvous; a process that never comes is named
after the rendezvous timeout."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys

import pytest

from repo_paths import REPO, TESTS

HERE, ROOT = TESTS, REPO  # the helper scripts' folder, the checkout
WORKER = os.path.join(HERE, "rendezvous_worker.py")
EXCHANGE_TIMEOUT = 120  # seconds: the refusals below must come long before it
PROMPT = 20  # seconds: "at once" on a loaded 2-core machine


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Launcher:
    """tests/rendezvous_worker.py: forks the processes of the jobs below."""

    def __init__(self) -> None:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("TORCHELASTIC_", "OMPI_COMM_WORLD_", "TILEFX_JOB_ID", "TILEFX_RENDEZVOUS",
                                    "TILEFX_DISTRIBUTED", "RANK", "WORLD_SIZE", "MASTER_"))}
        env.update({"PYTHONPATH": os.pathsep.join([ROOT, env.get("PYTHONPATH", "")]), "OMP_NUM_THREADS": "1"})
        self.proc = subprocess.Popen([sys.executable, WORKER], env=env, text=True, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, start_new_session=True)
        self.results: dict[str, dict] = {}
        self.pending = b""
        self.count = 0

    def start(self, port: int, rank: int, size: int, job: str | None, **extra: str) -> str:
        self.count += 1
        name = f"{job}-{rank}-{self.count}"
        env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
               "WORLD_SIZE": str(size), **extra}
        if job is not None:
            env["TILEFX_JOB_ID"] = job
        self._send({"start": name, "env": env, "timeout": EXCHANGE_TIMEOUT})
        return name

    def stop(self, *names: str) -> None:
        for n in names:
            self._send({"stop": n})

    def result(self, name: str) -> dict:
        """The line process `name` printed (read from the pipe itself: a
        buffered reader could hold the line while select waits)."""
        fd = self.proc.stdout.fileno()
        while name not in self.results:
            while b"\n" not in self.pending:
                ready, _, _ = select.select([fd], [], [], 240)
                assert ready, f"no answer from {name} within 240 s"
                chunk = os.read(fd, 65536)
                assert chunk, "the launcher exited"
                self.pending += chunk
            line, self.pending = self.pending.split(b"\n", 1)
            res = json.loads(line)
            self.results[res["name"]] = res
        return self.results[name]

    def _send(self, cmd: dict) -> None:
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@pytest.fixture(scope="module")
def launcher():
    it = Launcher()
    yield it
    it.close()


@pytest.fixture
def first_job(launcher):
    """Job 'alpha' of two processes, joined at a port and holding it."""
    port = _free_port()
    names = [launcher.start(port, r, 2, "alpha") for r in range(2)]
    try:
        for n in names:
            assert launcher.result(n).get("joined"), launcher.result(n)
        yield port
    finally:
        launcher.stop(*names)


def test_a_second_job_on_the_port_is_refused_naming_both(launcher, first_job):
    results = [launcher.result(launcher.start(first_job, r, 2, "beta")) for r in range(2)]
    for rank, res in enumerate(results):
        msg = res.get("error")
        assert msg is not None, f"process {rank} of job beta joined job alpha"
        assert msg.startswith(f"process {rank} of 2 of job 'beta': "), msg
        assert "job 'alpha' of 2 process(es)" in msg and "own MASTER_PORT" in msg, msg
        assert res["seconds"] < PROMPT, res  # at once, not after the timeout
    assert "cannot serve the rendezvous" in results[0]["error"]  # process 0: the port is taken
    assert "belongs to another job" in results[1]["error"]  # process 1: the store is alpha's


def test_a_stranger_of_another_process_count_is_refused(launcher, first_job):
    res = launcher.result(launcher.start(first_job, 2, 3, "alpha"))
    assert "belongs to another job: job 'alpha' of 2 process(es)" in res["error"], res
    assert "this process is of job 'alpha' of 3 process(es)" in res["error"], res
    assert res["seconds"] < PROMPT


def test_unnamed_jobs_are_told_apart_by_the_places(launcher):
    """Without job ids, a stranger that asks for a taken place is refused and
    the job keeps it."""
    port = _free_port()
    names = [launcher.start(port, r, 2, None) for r in range(2)]
    try:
        assert all(launcher.result(n).get("joined") for n in names)
        res = launcher.result(launcher.start(port, 1, 2, None))
    finally:
        launcher.stop(*names)
    assert res["error"].startswith("process 1 of 2 of job <unnamed>: process 1's place at "), res
    assert "is taken by pid" in res["error"] and "TILEFX_JOB_ID" in res["error"], res
    assert res["seconds"] < PROMPT


def test_a_stranger_at_a_torchrun_jobs_store_is_refused(launcher, tmp_path):
    """torchrun's agent serves the store (its job id: --rdzv-id); a process
    started by hand on that port is refused at once, naming torchrun's job."""
    port, stop = _free_port(), tmp_path / "stop"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHELASTIC_", "TILEFX_JOB_ID", "MASTER_"))}
    env["PYTHONPATH"] = os.pathsep.join([ROOT, env.get("PYTHONPATH", "")])
    job = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                            "--master-port", str(port), "--rdzv-id", "nightly", WORKER, "--hold", str(stop)],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                           start_new_session=True)
    try:
        joined = [job.stdout.readline() for _ in range(2)]
        assert all('"joined": true' in line for line in joined), joined
        res = launcher.result(launcher.start(port, 1, 2, "adhoc"))
    finally:
        stop.touch()
        try:
            job.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
    assert res["error"].startswith("process 1 of 2 of job 'adhoc': the rendezvous at "), res
    assert "belongs to another job: job 'nightly' of 2 process(es)" in res["error"], res
    assert res["seconds"] < PROMPT


def test_a_missing_process_is_named_after_the_rendezvous_timeout(launcher):
    res = launcher.result(launcher.start(_free_port(), 0, 3, "alone", TILEFX_RENDEZVOUS_TIMEOUT="1.5"))
    assert res["error"].startswith("process 0 of 3: no rendezvous with the other 2 process(es) at "), res
    assert "within 1.5 s (TILEFX_RENDEZVOUS_TIMEOUT" in res["error"], res
    assert "process(es) 1, 2 of job 'alone' never came" in res["error"], res
    assert res["seconds"] < PROMPT


def test_the_rendezvous_timeout_variable_is_checked(monkeypatch):
    from tilefx.api.rendezvous import rendezvous_timeout

    import tilefx as poptorch

    monkeypatch.delenv("TILEFX_RENDEZVOUS_TIMEOUT", raising=False)
    assert rendezvous_timeout(1800.0) == 300.0
    assert rendezvous_timeout(2.0) == 2.0
    monkeypatch.setenv("TILEFX_RENDEZVOUS_TIMEOUT", "45")
    assert rendezvous_timeout(1800.0) == 45.0
    for bad in ("soon", "0", "-3", "inf", "nan"):
        monkeypatch.setenv("TILEFX_RENDEZVOUS_TIMEOUT", bad)
        with pytest.raises(poptorch.Error, match=rf"TILEFX_RENDEZVOUS_TIMEOUT='{bad}' is not a number"):
            rendezvous_timeout(1800.0)
