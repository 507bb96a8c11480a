"""tilefx-opt's start-up: what a one-op file without `aten` ops costs it."""

import ast
import os
import subprocess
import sys

from repo_paths import REPO

_NOP = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = ipu.nop %x : tensor<4xf32> -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
"""


def _fresh(tmp_path, code: str, *args: str) -> subprocess.CompletedProcess:
    """`code` in a fresh Python with the checkout's tilefx, run twice: from
    compiled bytecode, as an installed tilefx is (compiling a module's source
    happens before its first line runs), written by the first run."""
    (tmp_path / "nop.mlir").write_text(_NOP)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env |= {"PYTHONPATH": REPO, "PYTHONPYCACHEPREFIX": str(tmp_path / "pycache")}
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", code, *args], env=env, cwd=tmp_path, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    return done


def test_tilefx_opt_starts_without_torch_and_without_a_collection(tmp_path):
    """Importing the tool (xDSL, the dialects) and parsing make objects that
    all live to the end: no collection of the cyclic collector walks them
    (tilefx/gcpause.py), and the collector is on again after; neither torch
    nor a module only rare paths use (JSON: executables and options files) is
    imported for IR without `aten` ops."""
    code = ("import contextlib, gc, io, sys\n"
            "import tilefx\n"  # the package: PopTorch's names, imported lazily
            "runs = []\n"
            "gc.callbacks.append(lambda phase, info: runs.append(info['generation']) if phase == 'start' else None)\n"
            "from tilefx.tools.opt import main\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            "    rc = main(['nop.mlir'])\n"
            "gc.callbacks.clear()\n"
            "print(repr({'rc': rc, 'printed': 'ipu.nop' in out.getvalue(), 'collections': len(runs),\n"
            "            'enabled': gc.isenabled(),\n"
            "            'imported': sorted(m for m in ('torch', 'numpy', 'json') if m in sys.modules)}))\n")
    got = ast.literal_eval(_fresh(tmp_path, code).stdout.splitlines()[-1])
    assert got == {"rc": 0, "printed": True, "collections": 0, "enabled": True, "imported": []}


# prints, from an `atexit` handler registered before tilefx-opt's (so run after
# it), how many objects are frozen when the interpreter goes on to its final collections
_AT_EXIT = ("import atexit, gc, sys\n"
            "atexit.register(lambda: print('frozen at exit:', gc.get_freeze_count(), file=sys.stderr))\n"
            "from tilefx.tools.opt import main\n")


def test_tilefx_opt_as_the_command_ends_without_walking_its_objects(tmp_path):
    """Run as the command (arguments from the command line), tilefx-opt
    freezes every object at exit, so the interpreter's final collections do
    not walk xDSL's classes, the dialects and the IR (gcpause.py); its output
    is whole. Called with arguments from Python, it leaves the caller's
    process as it was."""
    command = _fresh(tmp_path, _AT_EXIT + "sys.exit(main())", "nop.mlir")
    assert "ipu.nop" in command.stdout and command.stdout.rstrip().endswith("}")
    frozen = int(command.stderr.split("frozen at exit:")[1].split()[0])
    assert frozen > 10_000  # xDSL's classes and functions, at least

    called = _fresh(tmp_path, _AT_EXIT + "sys.exit(main(['nop.mlir']))")
    assert "ipu.nop" in called.stdout
    assert "frozen at exit: 0" in called.stderr


def test_tilefx_opt_runs_graph_passes_on_ipu_ir_without_numpy(tmp_path):
    """The graph passes import the `aten` dialect to read IR; numpy (~0.15 s
    of CPU) comes with the first element-type conversion, not with the
    dialect, so a pipeline that converts none imports neither it nor torch."""
    pipeline = "ipu-assign-stages,ipu-serialize-matmul,ipu-available-memory,ipu-autocast,ipu-fuse-elementwise"
    code = ("import contextlib, io, sys\n"
            "from tilefx.tools.opt import main\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            f"    rc = main(['nop.mlir', '-p', {pipeline!r}])\n"
            "print(repr({'rc': rc, 'placed': '#ipu.place<fwd' in out.getvalue(),\n"
            "            'imported': sorted(m for m in ('torch', 'numpy') if m in sys.modules),\n"
            "            'aten': 'tilefx.dialects.aten' in sys.modules}))\n")
    got = ast.literal_eval(_fresh(tmp_path, code).stdout.splitlines()[-1])
    assert got == {"rc": 0, "placed": True, "imported": [], "aten": True}


def test_tilefx_run_as_the_command_ends_without_walking_its_objects(tmp_path):
    """tilefx-run, run as the command, freezes its objects at exit as
    tilefx-opt does (torch's included, ~0.6 s of collections otherwise), and
    its results file is whole."""
    import numpy as np

    (tmp_path / "relu.mlir").write_text(
        "func.func @main(%a: tensor<3xf32> {tilefx.input = 0 : i64}) -> (tensor<3xf32> {tilefx.output = 0 : i64}) {\n"
        "  %0 = aten.relu %a : tensor<3xf32> -> tensor<3xf32>\n"
        "  func.return %0 : tensor<3xf32>\n}\n")
    np.savez(tmp_path / "in.npz", input0=np.array([-1.0, 0.5, 2.0], np.float32))
    code = _AT_EXIT.replace("tilefx.tools.opt", "tilefx.tools.run") + "sys.exit(main())"
    done = _fresh(tmp_path, code, "relu.mlir", "--inputs", "in.npz", "--output", "out.npz")
    assert int(done.stderr.split("frozen at exit:")[1].split()[0]) > 100_000  # torch's objects too
    np.testing.assert_array_equal(np.load(tmp_path / "out.npz")["output0"], [0.0, 0.5, 2.0])
