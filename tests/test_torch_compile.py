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
