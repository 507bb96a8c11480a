"""Automatic mixed precision: the forms of autocast, the default and custom
policies, and what the IR looks like after ipu-autocast."""

import copy
import re

import pytest
import torch
from torch import nn

import tilefx
from models import WithLoss


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 4, 3)
        self.act = nn.ReLU()
        self.fc = nn.Linear(4 * 4 * 4, 5)

    def forward(self, x):
        return self.fc(torch.flatten(self.act(self.conv(x)), 1))


def _ops(ir: str, name: str) -> list[str]:
    return [line for line in ir.splitlines() if re.search(rf"= {re.escape(name)} ", line)]


def _x():
    return torch.randn(3, 2, 6, 6)


def test_default_policy_runs_matmul_and_conv_in_half_and_the_rest_in_float():
    torch.manual_seed(0)
    model = Net().autocast()
    c = tilefx.compile(model, _x())
    ir = c.ir("graph")
    for name in ("aten.convolution", "aten.addmm"):
        (line,) = _ops(ir, name)
        assert "-> tensor<" in line and line.rstrip().endswith("f16>"), line
    # an fp16 op returns fp16 and the ops after it follow (torch.autocast): relu of fp16 is fp16
    (relu,) = _ops(ir, "aten.relu")
    assert relu.rstrip().endswith("f16>")
    assert "aten._to_copy" in ir and "dtype = f16" in ir
    # dtype and numbers as torch.autocast on the CPU: fp16 matmuls and convolutions
    x = _x()
    out = c(x)
    with torch.autocast("cpu", dtype=torch.float16):
        ref = model(x)
    assert out.dtype == ref.dtype == torch.float16
    torch.testing.assert_close(out, ref, rtol=1e-2, atol=1e-2)


def test_without_autocast_nothing_is_cast():
    ir = tilefx.compile(Net(), _x()).ir("graph")
    assert "f16" not in ir


def test_layer_setting_overrides_the_model_setting():
    model = Net().autocast()
    model.conv.autocast(False)
    ir = tilefx.compile(model, _x()).ir("graph")
    assert _ops(ir, "aten.convolution")[0].rstrip().endswith("f32>")
    assert _ops(ir, "aten.addmm")[0].rstrip().endswith("f16>")


def test_decorator_and_block_forms():
    class Dec(Net):
        @tilefx.autocast()
        def forward(self, x):
            return super().forward(x)

    class Blk(Net):
        def forward(self, x):
            with tilefx.autocast():
                x = self.act(self.conv(x))
            return self.fc(torch.flatten(x, 1))

    ir = tilefx.compile(Dec(), _x()).ir("graph")
    assert _ops(ir, "aten.addmm")[0].rstrip().endswith("f16>")
    ir = tilefx.compile(Blk(), _x()).ir("graph")
    assert _ops(ir, "aten.convolution")[0].rstrip().endswith("f16>")
    assert _ops(ir, "aten.addmm")[0].rstrip().endswith("f32>")


def test_autocast_enabled_false_turns_it_off():
    opts = tilefx.Options()
    opts.Precision.autocastEnabled(False)
    ir = tilefx.compile(Net().autocast(), _x(), options=opts).ir("graph")
    assert "f16" not in ir


def test_custom_policy():
    opts = tilefx.Options()
    opts.Precision.autocastPolicy(tilefx.Policy(fp16=[torch.relu, nn.Conv2d], fp32=[torch.nn.Linear]))
    ir = tilefx.compile(Net().autocast(), _x(), options=opts).ir("graph")
    assert _ops(ir, "aten.relu")[0].rstrip().endswith("f16>")
    assert _ops(ir, "aten.convolution")[0].rstrip().endswith("f16>")
    assert _ops(ir, "aten.addmm")[0].rstrip().endswith("f32>")
    # conv -> relu stay in fp16: the cast back and forth between them is folded
    conv = _ops(ir, "aten.convolution")[0].split("=")[0].strip()
    assert re.search(rf"aten\.relu {re.escape(conv)} ", ir)


def test_training_with_autocast_casts_the_backward_too():
    torch.manual_seed(0)
    model = WithLoss(Net(), nn.CrossEntropyLoss())
    model.model.autocast()
    ref = copy.deepcopy(model)
    t = tilefx.trainingModel(model, optimizer=tilefx.optim.SGD(model.parameters(), lr=0.05))
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05)
    for _ in range(3):
        x, y = _x(), torch.randint(0, 5, (3,))
        out, loss = t(x, y)
        with torch.autocast("cpu", dtype=torch.float16):
            ref_out, ref_loss = ref(x, y)
        ref_opt.zero_grad()
        ref_loss.backward()
        ref_opt.step()
        # the logits come from an fp16 matmul: fp16, as torch.autocast returns them
        assert out.dtype == ref_out.dtype == torch.float16
        assert loss.dtype == ref_loss.dtype == torch.float32
        torch.testing.assert_close(loss, ref_loss.detach(), rtol=5e-3, atol=5e-3)
    ir = t.ir("graph")
    assert len([line for line in _ops(ir, "aten.mm") if "bwd" in line and line.rstrip().endswith("f16>")]) >= 1
    assert any("bwd" in line and line.rstrip().endswith("f16>") for line in _ops(ir, "aten.convolution_backward"))
    # master weights stay fp32 and follow torch.autocast's training
    for p, q in zip(model.parameters(), ref.parameters()):
        assert p.dtype == torch.float32
        torch.testing.assert_close(p, q.detach(), rtol=1e-3, atol=1e-4)


class _Mixed(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 6))
        self.b = nn.Parameter(torch.randn(6))
        self.s = nn.Parameter(torch.tensor(0.5))

    def forward(self, x):
        y = torch.matmul(x, self.w)
        return y + self.b, y * self.s, torch.relu(y), torch.cat([y, x[:, :6]], 1)


def test_dtypes_flow_downstream_as_torch_autocast():
    """fp16 + fp32 tensor -> fp32, fp16 * fp32 0-d tensor -> fp16, relu(fp16) -> fp16,
    cat (promote list) of fp16 and fp32 -> fp32: dtype and value as torch.autocast."""
    torch.manual_seed(0)
    model = _Mixed().autocast()
    x = torch.randn(4, 8)
    outs = tilefx.compile(model, x)(x)
    with torch.autocast("cpu", dtype=torch.float16):
        refs = model(x)
    assert [o.dtype for o in outs] == [r.dtype for r in refs] == [
        torch.float32, torch.float16, torch.float16, torch.float32]
    for o, r in zip(outs, refs):
        torch.testing.assert_close(o, r.detach(), rtol=1e-3, atol=1e-3)


def test_fp32_policy_ops_return_fp32():
    torch.manual_seed(0)
    opts = tilefx.Options()
    opts.Precision.autocastPolicy(tilefx.Policy(fp16=[nn.Conv2d], fp32=[nn.Linear]))
    model = Net().autocast()
    x = _x()
    out = tilefx.inferenceModel(model, opts)(x)
    # the reference with the casts written out: conv in fp16, relu follows, Linear in fp32
    h = torch.relu(nn.functional.conv2d(x.half(), model.conv.weight.half(), model.conv.bias.half()))
    ref = model.fc(torch.flatten(h, 1).float())
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, ref.detach(), rtol=1e-5, atol=1e-5)


def _downcast():
    opts = tilefx.Options()
    opts.Precision.halfFloatCasting(tilefx.HalfFloatCastingBehavior.FloatDowncastToHalf)
    return opts


def test_float_downcast_to_half_runs_fp32_weights_in_fp16():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 10), nn.ReLU(), nn.Linear(10, 2))
    x = torch.randn(4, 3).half()
    out = tilefx.inferenceModel(model, _downcast())(x)
    f = nn.functional
    ref = f.linear(torch.relu(f.linear(x, model[0].weight.half(), model[0].bias.half())),
                   model[2].weight.half(), model[2].bias.half())
    assert out.dtype == torch.float16
    torch.testing.assert_close(out, ref.detach(), rtol=0, atol=0)
    # HalfUpcastToFloat (the default) follows PyTorch: fp32
    upcast = tilefx.inferenceModel(model)(x)
    assert upcast.dtype == torch.float32
    torch.testing.assert_close(upcast, model(x.float()).detach())


def test_float_downcast_to_half_casts_fp32_inputs_meeting_fp16_ones():
    """PopTorch user guide, earlier releases, "Half / float16 support": with FloatDowncastToHalf "PopTorch
    ... will cast all inputs
    to float16": an fp32 input meeting an fp16 one (no weights at all) is cast
    down, as fp32 weights are; fp32 inputs that meet no fp16 stay fp32."""
    class Mix(nn.Module):
        def forward(self, x, y, z):
            return x + y, y * 2, z + y

    x, y, z = torch.tensor([1.5, 3.0]).half(), torch.tensor([2.1, -0.7]), torch.tensor([0.25, 8.0])
    for args in ((x, y, z), (y.half(), x.float(), z)):
        a, b, c = tilefx.inferenceModel(Mix(), _downcast())(*args)
        assert (a.dtype, b.dtype, c.dtype) == (torch.float16, torch.float32, torch.float32)
        torch.testing.assert_close(a, args[0].half() + args[1].half(), rtol=0, atol=0)
        torch.testing.assert_close(b, args[1] * 2, rtol=0, atol=0)
    a, _, _ = tilefx.inferenceModel(Mix())(x, y, z)  # the default: PyTorch's promotion
    assert a.dtype == torch.float32
    torch.testing.assert_close(a, x + y, rtol=0, atol=0)


def test_float_downcast_to_half_trains_fp32_master_weights():
    torch.manual_seed(0)
    model = WithLoss(nn.Sequential(nn.Linear(3, 10), nn.ReLU(), nn.Linear(10, 2)), nn.MSELoss())
    ref = copy.deepcopy(model)
    t = tilefx.trainingModel(model, _downcast(), optimizer=tilefx.optim.SGD(model.parameters(), lr=0.1))
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for _ in range(3):
        x, y = torch.randn(4, 3).half(), torch.randn(4, 2).half()
        _, loss = t(x, y)
        # the reference: every fp32 weight cast down where it meets the fp16 input
        half = copy.deepcopy(ref.model).half()
        for p16, p in zip(half.parameters(), ref.model.parameters()):
            p16.data = p.detach().half().requires_grad_()
        ref_loss = nn.functional.mse_loss(half(x), y)
        ref_loss.backward()
        for p16, p in zip(half.parameters(), ref.model.parameters()):
            p.grad = p16.grad.float()
        ref_opt.step()
        ref_opt.zero_grad()
        assert loss.dtype == torch.float16
        torch.testing.assert_close(loss.float(), ref_loss.detach().float(), rtol=2e-3, atol=2e-3)
    for p, q in zip(model.parameters(), ref.parameters()):
        assert p.dtype == torch.float32
        torch.testing.assert_close(p, q.detach(), rtol=2e-3, atol=2e-3)


def test_policy_rejects_what_it_cannot_name():
    opts = tilefx.Options()
    opts.Precision.autocastPolicy(tilefx.Policy(fp16=[object()]))
    with pytest.raises(tilefx.Error, match="cannot name"):
        tilefx.compile(Net().autocast(), _x(), options=opts)


class _Head(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x, y):
        out = self.net(x)
        return out, nn.functional.mse_loss(out.float(), y)


def test_norms_and_activations_train_as_torch_autocast():
    """BatchNorm, LayerNorm, GELU, tanh and sigmoid after fp16 matmuls: dtypes,
    losses and weights after two SGD steps as torch.autocast on the CPU."""
    from models import MLP

    torch.manual_seed(0)
    model = _Head(MLP())
    model.net.autocast()
    ref = copy.deepcopy(model)
    t = tilefx.trainingModel(model, optimizer=tilefx.optim.SGD(model.parameters(), lr=0.05))
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05)
    for _ in range(2):
        x, y = torch.randn(8, 12), torch.randn(8, 5)
        out, loss = t(x, y)
        with torch.autocast("cpu", dtype=torch.float16):
            ref_out, ref_loss = ref(x, y)
        ref_opt.zero_grad()
        ref_loss.backward()
        ref_opt.step()
        assert out.dtype == ref_out.dtype == torch.float16
        torch.testing.assert_close(loss, ref_loss.detach(), rtol=1e-3, atol=1e-3)
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q.detach(), rtol=1e-3, atol=1e-4)


def test_encoder_layer_inference_as_torch_autocast():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True).eval().autocast()
    x = torch.randn(2, 5, 16)
    out = tilefx.inferenceModel(layer)(x)
    with torch.autocast("cpu", dtype=torch.float16):
        ref = layer(x)
    # softmax and the residual LayerNorm promote back to fp32 as in torch
    assert out.dtype == ref.dtype == torch.float32
    torch.testing.assert_close(out, ref.detach(), rtol=2e-3, atol=2e-3)


# Two mm layers trained; the weight gradient of layer 1 is an autocast matmul
# whose float16 result goes back to float32 at @main's return.
_PIPELINED = """
func.func @main(%w1: tensor<64x64xf32> {tilefx.param = "w1"}, %w2: tensor<64x64xf32> {tilefx.param = "w2"},
                %x: tensor<32x64xf32> {tilefx.input = 0 : i64})
    -> (tensor<f32> {tilefx.output = 0 : i64, tilefx.loss}, tensor<64x64xf32> {tilefx.grad = "w1"},
        tensor<64x64xf32> {tilefx.grad = "w2"}) {
  %h1 = aten.mm %x, %w1 {ipu.place = #ipu.place<fwd>} : tensor<32x64xf32>, tensor<64x64xf32> -> tensor<32x64xf32>
  %a1 = aten.relu %h1 {ipu.place = #ipu.place<fwd>} : tensor<32x64xf32> -> tensor<32x64xf32>
  %h2 = aten.mm %a1, %w2 {ipu.place = #ipu.place<fwd>} : tensor<32x64xf32>, tensor<64x64xf32> -> tensor<32x64xf32>
  %a2 = aten.relu %h2 {ipu.place = #ipu.place<fwd>} : tensor<32x64xf32> -> tensor<32x64xf32>
  %loss = aten.sum %a2 {ipu.place = #ipu.place<fwd>} : tensor<32x64xf32> -> tensor<f32>
  %seed = aten.full {ipu.place = #ipu.place<bwd>, size = array<i64: 32, 64>, fill_value = 1.0 : f64, dtype = f32} : tensor<32x64xf32>
  %gh2 = aten.threshold_backward %seed, %a2 {ipu.place = #ipu.place<bwd>, threshold = 0.0 : f64} : tensor<32x64xf32>, tensor<32x64xf32> -> tensor<32x64xf32>
  %a1t = aten.permute %a1 {ipu.place = #ipu.place<bwd>, dims = array<i64: 1, 0>} : tensor<32x64xf32> -> tensor<64x32xf32>
  %gw2 = aten.mm %a1t, %gh2 {ipu.place = #ipu.place<bwd>} : tensor<64x32xf32>, tensor<32x64xf32> -> tensor<64x64xf32>
  %w2t = aten.permute %w2 {ipu.place = #ipu.place<bwd>, dims = array<i64: 1, 0>} : tensor<64x64xf32> -> tensor<64x64xf32>
  %ga1 = aten.mm %gh2, %w2t {ipu.place = #ipu.place<bwd>} : tensor<32x64xf32>, tensor<64x64xf32> -> tensor<32x64xf32>
  %gh1 = aten.threshold_backward %ga1, %a1 {ipu.place = #ipu.place<bwd>, threshold = 0.0 : f64} : tensor<32x64xf32>, tensor<32x64xf32> -> tensor<32x64xf32>
  %xt = aten.permute %x {ipu.place = #ipu.place<bwd>, dims = array<i64: 1, 0>} : tensor<32x64xf32> -> tensor<64x32xf32>
  %gw1 = aten.mm %xt, %gh1 {ipu.place = #ipu.place<bwd>, ipu.autocast = true} : tensor<64x32xf32>, tensor<32x64xf32> -> tensor<64x64xf32>
  func.return %loss, %gw1, %gw2 : tensor<f32>, tensor<64x64xf32>, tensor<64x64xf32>
}
"""


def test_casts_at_the_return_live_with_the_op_they_cast_through_the_stage_passes():
    """A cast before @main's return takes the placement of the op whose value
    it casts (the backward matmul), not none, which ipu-auto-stage read as a
    forward op of the first stage: the stages then stay in data-flow order."""
    from irtext import parse
    from tilefx.dialects.irutil import find_func, place
    from tilefx.passes.assign_stages import AssignStagesPass
    from tilefx.passes.auto_stage import AutoStagePass
    from tilefx.passes.autocast import AutocastPass
    from tilefx.passes.outline_stages import OutlineStagesPass
    from tilefx.passes.pipelines import graph_context

    module, ctx = parse(_PIPELINED), graph_context()
    AutocastPass().apply(ctx, module)
    main = find_func(module, "main")
    cast = main.body.block.last_op.operands[1].owner
    assert cast.name == "aten._to_copy" and cast.operands[0].owner.name == "aten.mm"
    assert place(cast) == place(cast.operands[0].owner) and place(cast).is_backward
    for p in (AutoStagePass(num_ipus=2, auto_recomputation=0, host_io=False),
              AssignStagesPass(gradient_accumulation=3), OutlineStagesPass()):
        p.apply(ctx, module)
    stages = [o for o in main.body.block.ops if o.name == "ipu.stage"]
    assert [s.stage.value.data for s in stages] == [0, 1, 2]
    last = stages[-1].body.block
    assert cast.parent_block() is last and cast.operands[0].owner.parent_block() is last
    assert last.last_op.operands[-1] is cast.results[0]  # the stage yields the float32 gradient
