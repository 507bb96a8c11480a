"""The lit suite's `tilefx-opt` (tests/lit/opt_server.py, opt_client.py)
answers as the command itself: the same stdout, stderr and exit status for
IR from a file or stdin, a diagnostic, a bad option and an environment
variable the tool reads."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest
from repo_paths import TESTS

LIT = pathlib.Path(TESTS) / "lit"
ATEN = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = aten.relu %x : tensor<4xf32> -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
"""
DENSE = """func.func @main() -> tensor<64xf32> {
  %c = "test.c"() {value = dense<1.0> : tensor<64xf32>} : () -> tensor<64xf32>
  func.return %c : tensor<64xf32>
}
"""


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    sock = str(tmp_path_factory.mktemp("server") / "opt.sock")
    server = subprocess.Popen([sys.executable, str(LIT / "opt_server.py"), sock], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline().strip() == "ready"
        yield [sys.executable, "-E", "-S", str(LIT / "opt_client.py"), sock]
    finally:
        server.kill()
        server.wait(timeout=60)


def _both(client, args, stdin="", env=None, cwd=None):
    opt = [os.path.join(os.path.dirname(sys.executable), "tilefx-opt")]  # the command itself
    env = dict(os.environ, **(env or {}))
    got = []
    for cmd in (opt, client):
        out = subprocess.run(cmd + args, input=stdin, capture_output=True, text=True, env=env, cwd=cwd,
                             timeout=600)
        got.append((out.returncode, out.stdout, out.stderr))
    return got


def test_a_file_and_stdin(client, tmp_path):
    (tmp_path / "in.mlir").write_text(ATEN)
    direct, served = _both(client, ["in.mlir", "-p", "ipu-autocast"], cwd=tmp_path)  # a path from the cwd
    assert served == direct and direct[0] == 0 and "aten.relu" in direct[1]
    direct, served = _both(client, ["--print-op-generic"], stdin=ATEN)
    assert served == direct and direct[0] == 0 and '"aten.relu"' in direct[1]


def test_a_diagnostic_and_a_bad_option(client, tmp_path):
    (tmp_path / "bad.mlir").write_text(ATEN.replace("-> tensor<4xf32>\n  func", "-> tensor<5xf32>\n  func"))
    direct, served = _both(client, [str(tmp_path / "bad.mlir")])
    assert served == direct and direct[0] == 1 and "error:" in direct[2]
    direct, served = _both(client, ["--no-such-option"])
    assert served == direct and direct[0] == 2


def test_the_environment_reaches_the_tool(client, tmp_path):
    (tmp_path / "dense.mlir").write_text(DENSE)
    args = [str(tmp_path / "dense.mlir"), "--allow-unregistered-dialect"]
    direct, served = _both(client, args, env={"TILEFX_MAX_CONSTANT_BYTES": "16"})
    assert served == direct and direct[0] == 1 and "TILEFX_MAX_CONSTANT_BYTES" in direct[2]
    direct, served = _both(client, args)
    assert served == direct and direct[0] == 0
