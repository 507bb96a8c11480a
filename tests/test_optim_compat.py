"""PopTorch's optimizer surface beyond the update itself: the
`poptorch.optim.Optimizer` base class, `variable_attrs`' attribute sets,
LAMB's host `step()` and the state-dict errors (PopTorch user guide,
"Optimizers")."""

import copy

import pytest
import torch
from torch import nn

import tilefx
from models import MLP, WithLoss
from test_optimizers import RefLAMB

X = tilefx.optim


def _model():
    torch.manual_seed(0)
    m = WithLoss(MLP(), nn.CrossEntropyLoss())
    m.model.fc1.bias.requires_grad_(False)  # feeds BatchNorm: a zero gradient up to rounding
    return m


def _batches(n):
    g = torch.Generator().manual_seed(3)
    return [(torch.randn(4, 12, generator=g), torch.randint(0, 5, (4,), generator=g)) for _ in range(n)]


def test_every_poptorch_optimizer_derives_from_the_base_class():
    m = _model()
    for cls in (X.SGD, X.Adam, X.AdamW, X.RMSprop, X.LAMB):
        opt = cls(m.parameters(), lr=0.1)
        assert isinstance(opt, X.Optimizer) and isinstance(opt, torch.optim.Optimizer)
    assert not isinstance(torch.optim.SGD(m.parameters(), lr=0.1), X.Optimizer)


def test_variable_attrs_keep_poptorchs_attribute_sets():
    """Programs make every attribute variable by assigning the allowed set."""
    opt = X.SGD(_model().parameters(), lr=0.1)
    va = opt.variable_attrs
    assert va._variable_attributes == {"lr"}
    assert {"lr", "momentum", "dampening", "weight_decay", "loss_scaling"} <= va._allowed_attributes
    va._variable_attributes = copy.deepcopy(va._allowed_attributes)
    assert not va.isConstant("momentum") and not va.isConstant("loss_scaling")
    m = _model()
    opt = X.SGD(m.parameters(), lr=0.1)
    opt.variable_attrs._variable_attributes = set(opt.variable_attrs._allowed_attributes)
    trainer = tilefx.trainingModel(m, optimizer=opt)
    trainer(*_batches(1)[0])
    assert {"momentum", "dampening", "weight_decay"} <= set(trainer._opt_cfg["variable"])


@pytest.mark.parametrize("bias_correction", [True, False])
def test_lamb_host_step_matches_the_reference_and_the_compiled_update(bias_correction):
    host, ref, ipu = _model(), _model(), _model()
    host_opt = X.LAMB(host.parameters(), lr=1e-2, bias_correction=bias_correction)
    ref_opt = RefLAMB(ref.parameters(), lr=1e-2, bias_correction=bias_correction)
    trainer = tilefx.trainingModel(ipu, optimizer=X.LAMB(ipu.parameters(), lr=1e-2,
                                                          bias_correction=bias_correction))
    for x, y in _batches(5):
        for model, opt in ((host, host_opt), (ref, ref_opt)):
            opt.zero_grad()
            model(x, y)[1].backward()
            opt.step()
        trainer(x, y)
    for (n, a), (_, b), (_, c) in zip(host.named_parameters(), ref.named_parameters(),
                                      ipu.named_parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=lambda s, n=n: f"{n}: {s}")
        torch.testing.assert_close(c, a, rtol=1e-4, atol=1e-5, msg=lambda s, n=n: f"{n}: {s}")


def test_loading_a_torch_optimizer_state_is_poptorchs_runtime_error():
    m = _model()
    cpu = torch.optim.Adam(m.parameters())
    with pytest.raises(RuntimeError, match="Only IPU optimizer states can be loaded onto the IPU"):
        X.Adam(m.parameters()).load_state_dict(cpu.state_dict())
