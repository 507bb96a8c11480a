"""tilefx-opt's start-up: what a one-op file without `aten` ops costs it."""

import json
import os
import subprocess
import sys

from repo_paths import REPO

_NOP = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = ipu.nop %x : tensor<4xf32> -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
"""


def test_tilefx_opt_starts_without_torch_and_without_a_collection(tmp_path):
    """Importing the tool (xDSL, the dialects) and parsing make objects that
    all live to the end: no collection of the cyclic collector walks them
    (tilefx/gcpause.py), and the collector is on again after; torch is not
    imported for IR without `aten` ops. Run from compiled bytecode, as an
    installed tilefx is (compiling a module's source happens before its first
    line runs), written by a first run."""
    (tmp_path / "nop.mlir").write_text(_NOP)
    code = ("import contextlib, gc, io, json, sys\n"
            "import tilefx\n"  # the package: PopTorch's names, imported lazily
            "runs = []\n"
            "gc.callbacks.append(lambda phase, info: runs.append(info['generation']) if phase == 'start' else None)\n"
            "from tilefx.tools.opt import main\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            "    rc = main(['nop.mlir'])\n"
            "gc.callbacks.clear()\n"
            "print(json.dumps({'rc': rc, 'printed': 'ipu.nop' in out.getvalue(), 'collections': len(runs),\n"
            "                  'enabled': gc.isenabled(), 'torch': 'torch' in sys.modules}))\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env |= {"PYTHONPATH": REPO, "PYTHONPYCACHEPREFIX": str(tmp_path / "pycache")}
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.splitlines()[-1])
    assert got == {"rc": 0, "printed": True, "collections": 0, "enabled": True, "torch": False}
