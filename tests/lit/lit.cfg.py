# lit configuration for tilefx's FileCheck tests (`make lit`).
#
# `tilefx-opt` and `filecheck` in RUN lines resolve to the scripts of the
# virtual environment lit runs from (the Makefile puts .venv/bin first on PATH;
# this also works when lit is started as `.venv/bin/lit` without that PATH).

import os
import sys

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


for tool in ("tilefx-opt", "xdsl-opt", "filecheck"):
    # Whole words only: don't touch e.g. `--check-prefix` or file names.
    config.substitutions.append((rf"(?<![\w/.-]){tool}(?![\w.-])", _tool(tool)))
