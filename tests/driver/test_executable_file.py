"""The executable file's format is the driver's (tilefx/driver/executable.py):
any surface reads and verifies a file, and parses its IR, without torch;
PopTorch's reader adds what only torch can check."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

import tilefx as poptorch
from tilefx.api import export
from executable_parts import rewritten
from tilefx.driver import executable as file_format
from tilefx.errors import Error


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    path = tmp_path_factory.mktemp("exe") / "m.poptorch"
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    poptorch.inferenceModel(model.eval()).compileAndExport(str(path), torch.ones(2, 4))
    return path


def test_the_driver_reads_a_poptorch_executable_without_torch(exported):
    code = (
        "import sys, json\n"
        "from tilefx.driver import executable\n"
        f"parts = executable.read({str(exported)!r})\n"
        "module = executable.parse_ir(parts['graph.mlir'], 'f', 'graph.mlir')\n"
        "funcs = sorted(op.sym_name.data for op in module.body.block.ops)\n"
        "print(json.dumps([parts['executor']['num_inputs'], parts['executor']['input_torch_dtypes'], funcs,\n"
        "                  sorted(m for m in sys.modules if m == 'torch' or m.startswith('torch.'))]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == [1, ["float32"], ["main"], []]


def _with_executor_field(src, dst, key, value) -> str:
    """`src` with executor.json's `key` set to `value`, the manifest made to match."""
    def edit(name, data):
        if name != "executor.json":
            return data
        meta = json.loads(data)
        meta[key] = value
        return json.dumps(meta).encode()
    return rewritten(src, dst, edit)


def test_input_dtype_names_are_checked_by_each_reader(exported, tmp_path):
    """The driver takes dtype names as names; PopTorch's reader, which makes
    the inputs' torch dtypes from them, refuses a name torch lacks."""
    bad = _with_executor_field(exported, tmp_path / "bad.poptorch", "input_torch_dtypes", ["float33"])
    assert file_format.read(bad)["executor"]["input_torch_dtypes"] == ["float33"]
    with pytest.raises(Error, match="input_torch_dtypes: must list torch dtype names"):
        export.read(bad)
    odd = _with_executor_field(exported, tmp_path / "odd.poptorch", "input_torch_dtypes", ["float32; rm"])
    for read in (file_format.read, export.read):
        with pytest.raises(Error, match="input_torch_dtypes: must list torch dtype names"):
            read(odd)


def test_an_unknown_executor_field_is_refused_by_the_driver(exported, tmp_path):
    bad = _with_executor_field(exported, tmp_path / "extra.poptorch", "code", "print(1)")
    with pytest.raises(Error, match="executor.json.*unknown field"):
        file_format.read(bad)
