"""`tilefx-opt` for the lit suite: one process that has imported torch and
tilefx-opt's modules forks a child per RUN line.

Most RUN lines verify `aten` IR, which imports torch and runs torch's first
meta function: ~2/3 of a line's time, paid again by each of the suite's ~80
`tilefx-opt` processes. Here the server pays it once. Each RUN line's
`tilefx-opt` is `opt_client.py`, which hands the server its arguments,
environment, working directory and its stdin, stdout and stderr (the file
descriptors themselves); the server forks, and the child runs
`tilefx.tools.opt.main` on them exactly as the command would and exits with
its status, which the client exits with. The child starts from a process
that imported modules and nothing else: no plugin installed, no IR parsed,
so what a RUN line checks is what `tilefx-opt` does. (Start-up itself is not
a lit check: benchmarks/bench_startup.py measures it and tests/test_runtime.py
checks that IR without `aten` ops imports no torch.)

    python opt_server.py SOCKET    # prints "ready" once it listens

lit.cfg.py starts it, unless TILEFX_LIT_SERVER=0 asks for a process per RUN line.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import traceback


def _preload() -> None:
    """The modules every RUN line imports; importing installs nothing (tests/test_runtime.py)."""
    import torch  # noqa: F401
    import torch.fx.experimental.symbolic_shapes  # noqa: F401  (torch's first meta function imports it)

    import tilefx.dialects.aten  # noqa: F401
    import tilefx.dialects.ipu  # noqa: F401
    import tilefx.lowering.torch_rules  # noqa: F401
    import tilefx.tools.opt  # noqa: F401


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
    chunks = [data]
    while True:  # the client shuts its side after sending
        more = conn.recv(1 << 16)
        if not more:
            break
        chunks.append(more)
    return json.loads(b"".join(chunks)), fds


def _child(conn: socket.socket) -> None:
    """Run one RUN line's tilefx-opt in this forked process, then exit."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    rc = 2
    try:
        request, fds = _receive(conn)
        for target, fd in enumerate(fds):  # the client's stdin, stdout, stderr
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = ["tilefx-opt", *request["args"]]
        from tilefx.tools.opt import main

        try:
            rc = main(request["args"])
        except SystemExit as e:  # argparse: --help, a bad argument
            rc = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
            if not isinstance(e.code, (int, type(None))):
                print(e.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - a fault of the server itself: said, and status 2
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except OSError:
                pass
        try:
            conn.sendall(str(rc).encode())
        finally:
            os._exit(rc if isinstance(rc, int) and 0 <= rc < 256 else 1)


def serve(path: str) -> None:
    _preload()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(16)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    parent = os.getppid()
    server.settimeout(2.0)
    print("ready", flush=True)
    while True:
        try:
            conn, _ = server.accept()
        except TimeoutError:
            if os.getppid() != parent:  # lit has gone without stopping the server
                return
            continue
        conn.settimeout(None)
        if os.fork() == 0:
            server.close()
            _child(conn)
        conn.close()


if __name__ == "__main__":
    serve(sys.argv[1])
