"""PopTorch's optimizer surface beyond the update itself: the
`poptorch.optim.Optimizer` base class, `variable_attrs`' attribute sets,
LAMB's host `step()` and the state-dict errors (PopTorch user guide,
"Optimizers")."""

import copy
import logging

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


class _Lin(nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.lin = nn.Linear(n, n)

    def forward(self, x):
        out = self.lin(x)
        return out, tilefx.identity_loss((out ** 2).sum(), reduction="sum")


def test_state_dict_names_the_device_tensors_as_popart():
    torch.manual_seed(0)
    x = torch.randn(3)
    m = _Lin()
    sgd = X.SGD(m.parameters(), lr=0.05, weight_decay=0.025, loss_scaling=0.75)
    trainer = tilefx.trainingModel(m, optimizer=sgd)
    sd = sgd.state_dict()
    assert sd["ipu_state"] is None and sd["ipu_param"] is None
    trainer.compile(x)
    p = sgd.state_dict()["ipu_param"]
    # SGD without momentum (PopART's SGD0): lr / ls and 1 - lr * wd
    torch.testing.assert_close(p["scaledLearningRate0___specific___lin.bias"], torch.tensor(0.05 / 0.75))
    torch.testing.assert_close(p["weightDecayScaleFactor0___specific___lin.weight"],
                               torch.tensor(1 - 0.05 * 0.025))
    torch.testing.assert_close(p["lossScaling_FLOAT"], torch.tensor(0.75))
    assert sgd.state_dict()["ipu_state"] == {}
    trainer.destroy()

    adam = X.Adam(m.parameters(), lr=0.05, weight_decay=0.025)
    trainer = tilefx.trainingModel(m, optimizer=adam)
    trainer.compile(x)
    s0 = adam.state_dict()
    assert set(s0["ipu_state"]) == {f"Accl{i}___lin.{w}" for i in (1, 2) for w in ("weight", "bias")}
    assert set(s0["ipu_param"]) == {f"{h}___specific___lin.{w}" for h in ("learningRate", "weightDecay")
                                    for w in ("weight", "bias")}
    trainer(x)
    s1 = adam.state_dict()
    assert all(not torch.equal(s0["ipu_state"][k], v) for k, v in s1["ipu_state"].items())


def test_loading_ipu_param_sets_the_device_hyper_parameters():
    torch.manual_seed(0)
    x = torch.randn(3)
    m = _Lin()
    opt = X.Adam(m.parameters(), lr=0.05)
    trainer = tilefx.trainingModel(m, optimizer=opt)
    trainer(x)
    sd = opt.state_dict()
    for k in sd["ipu_param"]:
        if k.startswith("learningRate"):
            sd["ipu_param"][k] = torch.tensor(0.0)
    dropped = "Accl2___lin.bias"
    kept = sd["ipu_state"].pop(dropped)
    opt.load_state_dict(sd)
    loaded = opt.state_dict()
    assert dropped not in loaded["ipu_state"]  # the loaded state itself, until the model runs
    assert float(loaded["ipu_param"]["learningRate___specific___lin.weight"]) == 0.0
    before = m.lin.weight.detach().clone()
    trainer(x)
    trainer.copyWeightsToHost()
    assert torch.equal(m.lin.weight, before)  # lr 0 on the device: the weights stay
    after = opt.state_dict()
    assert float(after["ipu_param"]["learningRate___specific___lin.bias"]) == 0.0
    assert not torch.equal(after["ipu_state"][dropped], kept)  # the device's own, updated again
    assert opt.param_groups[0]["lr"] == 0.05  # the optimizer object is not the device

    sd = opt.state_dict()
    sd["ipu_param"]["learningRate___specific___lin.weight"] = torch.tensor(0.5)
    with pytest.raises(tilefx.Error, match="one value per parameter group"):
        opt.load_state_dict(sd)
    sd = opt.state_dict()
    sd["ipu_param"]["adamBeta1___specific___lin.weight"] = torch.tensor(0.5)
    with pytest.raises(tilefx.Error, match="not a variable hyper-parameter"):
        opt.load_state_dict(sd)


def test_automatic_loss_scaling_factor_and_final_loss_scale():
    """ipu_state's lossScaleUpdateFactor is the factor the next step uses,
    finalLossScale the scale the last step used: loss_scaling x factor."""
    torch.manual_seed(0)
    m = _Lin(5).half()
    opts = tilefx.Options()
    opts.Training.setAutomaticLossScaling(True)
    opts.anchorTensor("ls", "finalLossScale")
    opt = X.SGD(m.parameters(), lr=0.0, loss_scaling=2.0)
    trainer = tilefx.trainingModel(m, opts, opt)
    x = torch.ones(5, dtype=torch.float16)
    trainer.compile(x)
    seen = []
    for _ in range(3):
        factor = opt.state_dict()["ipu_state"]["lossScaleUpdateFactor"]
        trainer(x)
        torch.testing.assert_close(trainer.getAnchoredTensor("ls"), 2.0 * factor)
        seen.append(float(factor))
    assert seen == [1.0, 2.0, 4.0]  # no overflow: the factor doubles each period


def test_a_zero_dimensional_half_parameter_trains_and_writes_back():
    """numpy gives the update of a 0-d float16 weight as a scalar, not an
    array: the write-back to the parameter failed on it."""
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.tensor(2.0))
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            out = self.lin(x) * self.w
            return out, tilefx.identity_loss(out.sum(), reduction="sum")

    torch.manual_seed(0)
    model = Scaled().half()
    ref = copy.deepcopy(model).float()
    trainer = tilefx.trainingModel(model, optimizer=X.SGD(model.parameters(), lr=0.01))
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.01)
    x = torch.ones(2, 3)
    for _ in range(2):
        trainer(x.half())
        ref_opt.zero_grad()
        ref(x)[1].backward()
        ref_opt.step()
    trainer.copyWeightsToHost()
    assert model.w.dtype == torch.float16 and model.w.dim() == 0
    torch.testing.assert_close(model.w.float(), ref.w.detach(), rtol=1e-2, atol=1e-2)


def test_the_device_state_is_read_once_per_change_and_kept_on_detach(caplog):
    """PopTorch reads the optimizer state from the device once per change
    ('Writing optimiser state tensors from IPU to host.'), then answers from
    its cached copy ('Using cached optimiser state dict'), and reads it as it
    detaches; a torch.optim optimizer has no device state to read."""
    read, cached = "Writing optimiser state tensors from IPU to host.", "Using cached optimiser state dict"

    def messages():
        out = [r.getMessage() for r in caplog.records]
        caplog.clear()
        return out

    x = torch.randn(3)
    m = _Lin()
    opt = X.SGD(m.parameters(), lr=0.05, momentum=0.9)
    trainer = tilefx.trainingModel(m, optimizer=opt)
    trainer.compile(x)
    with caplog.at_level(logging.DEBUG, logger="tilefx"):
        caplog.clear()
        first = opt.state_dict()
        assert read in messages()
        again = opt.state_dict()
        assert cached in messages() and again["ipu_param"].keys() == first["ipu_param"].keys()
        trainer(x)  # an update: the cached copy is stale
        after = opt.state_dict()
        assert read in messages()
        assert not torch.equal(after["ipu_state"]["Accl___lin.weight"], first["ipu_state"]["Accl___lin.weight"])
        opt.param_groups[0]["lr"] = 0.01
        trainer.setOptimizer(opt)  # new hyper-parameters: read again
        messages()
        lr = opt.state_dict()["ipu_param"]["scaledLearningRate1___specific___lin.weight"]
        assert read in messages() and float(lr) == pytest.approx(0.01)
        trainer(x)
        messages()
        trainer.detachFromDevice()
        assert read in messages()
        opt.state_dict()
        assert cached in messages()

        other = _Lin()
        plain = tilefx.trainingModel(other, optimizer=torch.optim.SGD(other.parameters(), lr=0.05))
        plain.compile(x)
        messages()
        plain.detachFromDevice()
        assert read not in messages()


def test_set_optimizer_from_a_poptorch_sgd_to_a_torch_sgd():
    """A torch.optim.SGD is PopTorch's SGD with its defaults (the separate
    variant, float32 state): switching to one after compile keeps the
    program, and its lr takes effect; a structural change is still refused."""
    torch.manual_seed(0)
    x = torch.randn(3)
    m = _Lin()
    trainer = tilefx.trainingModel(m, optimizer=X.SGD(m.parameters(), lr=0.05, momentum=0.5))
    trainer(x)
    trainer.copyWeightsToDevice()
    trainer.setOptimizer(torch.optim.SGD(m.parameters(), lr=0.0, momentum=0.5))
    before = m.lin.weight.detach().clone()
    trainer(x)
    trainer.copyWeightsToHost()
    assert torch.equal(m.lin.weight, before)  # lr 0: no update
    with pytest.raises(ValueError, match="use_combined_accum"):
        trainer.setOptimizer(X.SGD(m.parameters(), lr=0.05, momentum=0.5, use_combined_accum=True))

    other = _Lin()  # and the other way: compiled with torch's, then PopTorch's
    trainer = tilefx.trainingModel(other, optimizer=torch.optim.SGD(other.parameters(), lr=0.05))
    trainer(x)
    trainer.setOptimizer(X.SGD(other.parameters(), lr=0.0))
    before = other.lin.weight.detach().clone()
    trainer(x)
    trainer.copyWeightsToHost()
    assert torch.equal(other.lin.weight, before)
