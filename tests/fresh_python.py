"""A fresh interpreter for the tests of what `import poptorch` / `import popart`
bind to: the answer depends on the path a process starts with."""

import os
import subprocess
import sys
import tempfile


def run_python(code: str, path: list[str]) -> str:
    """Run `code` in a fresh interpreter with PYTHONPATH `path`, from an empty directory."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    with tempfile.TemporaryDirectory() as cwd:
        done = subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, capture_output=True,
                              text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout
