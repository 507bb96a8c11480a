# lit configuration for tilefx's FileCheck tests (`make lit`).
#
# `tilefx-opt` and `filecheck` in RUN lines resolve to the scripts of the
# virtual environment lit runs from (the Makefile puts .venv/bin first on PATH;
# this also works when lit is started as `.venv/bin/lit` without that PATH).
# `tilefx-opt` runs in a child of one server process that has imported torch
# once (opt_server.py, opt_client.py), unless TILEFX_LIT_SERVER=0.

import atexit
import os
import shutil
import subprocess
import sys
import tempfile

import lit.formats

config.name = "tilefx"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.excludes = ["lit.cfg.py"]
config.test_source_root = os.path.dirname(__file__)

config.environment["PATH"] = os.environ["PATH"]
if "PYTHONPATH" in os.environ:  # a work tree testing its own copy of tilefx
    config.environment["PYTHONPATH"] = os.environ["PYTHONPATH"]


def _tool(name: str) -> str:
    """The venv's script for `name`: the repo's .venv, then the interpreter's
    bin directory, then whatever PATH finds."""
    repo = os.path.dirname(os.path.dirname(config.test_source_root))
    for bindir in (os.path.join(repo, ".venv", "bin"), os.path.dirname(sys.executable)):
        path = os.path.join(bindir, name)
        if os.access(path, os.X_OK):
            return path
    return name


def _opt_server() -> str:
    """Start opt_server.py; the command that runs `tilefx-opt` through it."""
    here = config.test_source_root
    scratch = tempfile.mkdtemp(prefix="tilefx-lit-")
    atexit.register(shutil.rmtree, scratch, True)
    sock = os.path.join(scratch, "opt.sock")
    env = dict(os.environ, **config.environment)
    server = subprocess.Popen([sys.executable, os.path.join(here, "opt_server.py"), sock], env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    atexit.register(server.kill)
    if server.stdout.readline().strip() != "ready":
        lit_config.fatal("opt_server.py did not start (TILEFX_LIT_SERVER=0 runs tilefx-opt itself)")
    return f"{sys.executable} -E -S {os.path.join(here, 'opt_client.py')} {sock}"


_OPT = _opt_server() if os.environ.get("TILEFX_LIT_SERVER", "1") != "0" else _tool("tilefx-opt")

for tool, command in (("tilefx-opt", _OPT), ("xdsl-opt", _tool("xdsl-opt")), ("filecheck", _tool("filecheck"))):
    # Whole words only: don't touch e.g. `--check-prefix` or file names.
    config.substitutions.append((rf"(?<![\w/.-]){tool}(?![\w.-])", command))
