"""The README's PopTorch example runs as written, in a fresh process, with
`import poptorch` resolving to tilefx (what a newcomer copies first)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from repo_paths import REPO

ROOT = REPO


def test_readme_poptorch_example_runs():
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, "the README has no Python example"
    example = blocks[0]
    assert "import poptorch" in example
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", example], capture_output=True, text=True, env=env,
                          timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    # the profile table and the inference output the comments promise
    assert "pipelined" in done.stdout and "bubble" in done.stdout, done.stdout
    assert "torch.Size([64, 10])" in done.stdout, done.stdout
