"""A lit RUN line's `tilefx-opt`: runs it in a child of opt_server.py (see
there) with this process's arguments, environment, working directory,
stdin, stdout and stderr, and exits with its status.

    python -E -S opt_client.py SOCKET [tilefx-opt arguments...]

Standard library only, so it starts with `-S` (no site-packages).
"""

from __future__ import annotations

import json
import os
import socket
import sys


def main() -> int:
    path, args = sys.argv[1], sys.argv[2:]
    request = json.dumps({"args": args, "env": dict(os.environ), "cwd": os.getcwd()}).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(path)
        sent = socket.send_fds(conn, [request], [0, 1, 2])
        conn.sendall(request[sent:])
        conn.shutdown(socket.SHUT_WR)
        status = b""
        while chunk := conn.recv(64):
            status += chunk
    if not status.strip().isdigit():  # the child died without a status (a signal)
        print("error: tilefx-opt ended without an exit status (opt_server.py)", file=sys.stderr)
        return 2
    return int(status)


if __name__ == "__main__":
    sys.exit(main())
