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
