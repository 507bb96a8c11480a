"""The processes of tests/integration/distributed/test_distributed_jobs.py.

    python rendezvous_worker.py
    torchrun --nproc-per-node N rendezvous_worker.py --hold STOP_FILE

A launcher that imports tilefx (and torch) once, then reads commands, one
JSON line each, from its standard input:

    {"start": NAME, "env": {...}, "timeout": SECONDS}   fork a process that meets the others
                                                     of its job with this environment
    {"stop": NAME}                                   end that process (it held its place)

Each forked process is a real process meeting the others over TCP as a
training model does (tilefx.api.distributed.rendezvous); it prints one JSON
line {"name", "joined": true} or {"name", "error"}, with the seconds it
took, then, once joined, holds its place (and process 0's store) until
stopped. Forking skips the seconds a fresh process spends importing torch.

--hold: one process of a job (under torchrun) that meets the others,
prints the same line and holds its place until STOP_FILE exists.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

import tilefx as poptorch
from tilefx.api.distributed import rendezvous


def _meet(name: str, env: dict, timeout: float) -> None:
    os.environ.update(env)
    opts = poptorch.Options()  # the process id and count from RANK / WORLD_SIZE
    opts.Distributed.setTimeout(timeout)
    start = time.monotonic()
    try:
        rendezvous(opts)
        result = {"name": name, "joined": True}
    except poptorch.Error as e:
        result = {"name": name, "error": str(e)}
    result["seconds"] = time.monotonic() - start
    os.write(1, (json.dumps(result) + "\n").encode())
    if result.get("joined"):
        while True:
            signal.pause()


def hold(stop_file: str) -> None:
    opts = poptorch.Options()
    opts.Distributed.setTimeout(120)
    rendezvous(opts)
    # one write of the whole line: two processes share the pipe (print's text
    # and newline can reach it as two writes and interleave with the other's)
    os.write(1, (json.dumps({"name": f"rank {opts.Distributed.processId}", "joined": True}) + "\n").encode())
    deadline = time.monotonic() + 300  # never outlive the test
    while not os.path.exists(stop_file) and time.monotonic() < deadline:
        time.sleep(0.2)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--hold":
        hold(sys.argv[2])
        return
    pids: dict[str, int] = {}
    for line in sys.stdin:
        cmd = json.loads(line)
        if "start" in cmd:
            sys.stdout.flush()
            pid = os.fork()
            if pid == 0:  # the child: never returns into the launcher's loop
                code = 1
                try:
                    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
                    _meet(cmd["start"], cmd["env"], cmd["timeout"])
                    code = 0
                finally:
                    os._exit(code)
            pids[cmd["start"]] = pid
        elif "stop" in cmd:
            pid = pids.pop(cmd["stop"])
            os.kill(pid, signal.SIGTERM)
            os.waitpid(pid, 0)
    for pid in pids.values():
        os.kill(pid, signal.SIGTERM)
        os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
