"""torch.compile(backend="tilefx") for inference."""

import pytest
import torch

import tilefx
from models import MLP


def test_torch_compile_backend_matches_eager():
    torch.manual_seed(0)
    model = MLP().eval()
    x = torch.randn(6, 12)
    compiled = torch.compile(model, backend="tilefx", dynamic=False)
    with torch.no_grad():
        out = compiled(x)
        ref = model(x)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    assert tilefx.torch_compile_backend.last.profile.total_cycles > 0
    assert "aten.addmm" in tilefx.torch_compile_backend.last.ir("graph")


def test_torch_compile_backend_refuses_to_train():
    torch._dynamo.reset()
    model = torch.nn.Linear(4, 2)
    compiled = torch.compile(model, backend=tilefx.torch_compile_backend, dynamic=False)
    with pytest.raises(Exception, match="inference only"):
        compiled(torch.randn(3, 4))


def test_backend_registered_lazily_through_entry_point(tmp_path):
    """With the `torch_dynamo_backends` entry point installed, `import tilefx`
    leaves torch._dynamo unloaded and torch.compile still finds "tilefx"."""
    import os
    import subprocess
    import sys

    info = tmp_path / "tilefx-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tilefx\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(
        "[torch_dynamo_backends]\ntilefx = tilefx.api.dynamo:torch_compile_backend\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(tilefx.__file__)))
    script = (
        "import sys, torch, tilefx\n"
        "assert 'torch._dynamo' not in sys.modules, 'import tilefx loaded torch._dynamo'\n"
        "m = torch.nn.Linear(4, 2).eval()\n"
        "x = torch.randn(3, 4)\n"
        "with torch.no_grad():\n"
        "    out = torch.compile(m, backend='tilefx', dynamic=False)(x)\n"
        "    torch.testing.assert_close(out, m(x), rtol=1e-5, atol=1e-5)\n"
        "assert tilefx.torch_compile_backend.last is not None\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, str(tmp_path)])}
    res = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]


def test_dynamic_graphs_get_one_program_per_shape():
    """A new batch size makes dynamo recompile the graph with a symbolic batch
    dimension (its automatic dynamic shapes; dynamic=True does it from the start):
    tilefx builds one static program per shape it meets, each equal to eager, and
    reuses it for a shape seen before."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = MLP().eval()
    compiled = torch.compile(model, backend="tilefx")
    programs = []
    with torch.no_grad():
        for batch in (4, 7, 5, 7):
            x = torch.randn(batch, 12)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
            programs.append(tilefx.torch_compile_backend.last)
    assert len({id(p) for p in programs}) == 3 and programs[3] is programs[2]  # 7 again: no new program
    lin = torch.nn.Linear(3, 2).eval()
    dyn = torch.compile(lin, backend="tilefx", dynamic=True)
    with torch.no_grad():
        for batch in (2, 6):
            x = torch.randn(batch, 3)
            torch.testing.assert_close(dyn(x), lin(x), rtol=1e-6, atol=1e-6)
    with pytest.raises(tilefx.Error, match="inference only"):
        dyn(torch.randn(4, 3))  # grad enabled, parameters that need it
    torch._dynamo.reset()
