"""Inference outputs of the model zoo equal PyTorch on the CPU (rtol 1e-5)."""

import pytest
import torch
from torch import nn

import tilefx
from models import MLP, PoolNormCNN, Transformer, TutorialCNN

CASES = {
    "mlp": (lambda: MLP(), lambda: (torch.randn(6, 12),)),
    "tutorial_cnn": (lambda: TutorialCNN(), lambda: (torch.randn(4, 1, 28, 28),)),
    "pool_norm_cnn": (lambda: PoolNormCNN(), lambda: (torch.randn(4, 3, 8, 8),)),
    "transformer": (lambda: Transformer(), lambda: (torch.randint(0, 20, (3, 6)),)),
    "transformer_mha": (lambda: Transformer(torch_mha=True), lambda: (torch.randint(0, 20, (3, 6)),)),
}


@pytest.mark.parametrize("name", CASES)
def test_inference_matches_pytorch(name):
    torch.manual_seed(0)
    make_model, make_inputs = CASES[name]
    model = make_model()
    # non-trivial running statistics for the BatchNorm layers
    model.train()
    with torch.no_grad():
        for _ in range(2):
            model(*make_inputs())
    model.eval()
    inputs = make_inputs()
    expected = model(*inputs)
    out = tilefx.inferenceModel(model)(*inputs)
    assert out.shape == expected.shape and out.dtype == expected.dtype
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


def test_compile_api_shows_ir():
    torch.manual_seed(0)
    model = TutorialCNN().eval()
    x = torch.randn(2, 1, 28, 28)
    compiled = tilefx.compile(model, x)
    assert "aten.convolution" in compiled.ir("import")
    assert "aten.max_pool2d_with_indices" in compiled.ir("graph")
    torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
    with pytest.raises(tilefx.Error, match="unknown IR level"):
        compiled.ir("nonsense")


def test_buffers_persist_across_calls():
    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("i", torch.tensor([0.0]))

        def forward(self, x):
            self.i += 1
            return x + self.i

    m = Counter()
    model = tilefx.inferenceModel(m)
    x = torch.zeros(1)
    assert model(x).item() == 1.0
    assert model(x).item() == 2.0
    assert m.i.item() == 0.0  # inference buffers are not written back implicitly
    model.copyWeightsToHost()
    assert m.i.item() == 2.0


class _Queue(nn.Module):
    """Reassigns its buffer in forward (a new tensor, not an in-place write)."""

    def __init__(self, shape=(3,), widen=False):
        super().__init__()
        self.register_buffer("q", torch.zeros(shape))
        self.widen = widen

    def forward(self, x):
        tail = x.sum().reshape(1)
        self.q = torch.cat([self.q if self.widen else self.q[1:], tail])
        return self.q * 1


def test_reassigned_buffer_persists_across_calls():
    """`self.q = new` put the new tensor into functional_call's state dict only:
    the trace never saw a buffer write, so every call started from zeros."""
    m, ref = _Queue(), _Queue()
    model = tilefx.inferenceModel(m)
    for v in [1.0, 2.0, 3.0]:
        x = torch.full((2,), v)
        torch.testing.assert_close(model(x), ref(x))
    model.copyWeightsToHost()
    torch.testing.assert_close(m.q, ref.q)
    assert m.q.tolist() == [2.0, 4.0, 6.0]


def test_reassigning_a_buffer_to_another_shape_is_an_error():
    with pytest.raises(tilefx.Error, match="reassigns buffer 'q'.*shape"):
        tilefx.inferenceModel(_Queue(widen=True))(torch.ones(2))


def test_deleting_or_retyping_a_buffer_in_forward_is_poptorchs_error():
    class Deletes(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("y", torch.tensor([2]))

        def forward(self, x):
            del self._buffers["y"]
            return x + 1

    class Retypes(Deletes):
        def forward(self, x):
            self.y = x + 1
            return x

    with pytest.raises(tilefx.Error, match=r"^Buffer y is removed from the model when calling the "
                                           r"forward method\.$"):
        tilefx.inferenceModel(Deletes())(torch.tensor([5.0]))
    with pytest.raises(tilefx.Error, match=r"Buffer y is reassigned within the model when calling the "
                                           r"forward method\. This is not supported\. Consider using "
                                           r"self\.y\.copy_\(src\)"):
        tilefx.inferenceModel(Retypes())(torch.tensor([5.0]))


@pytest.mark.parametrize("training", [False, True])
def test_replacing_or_deleting_a_parameter_in_forward_is_poptorchs_error(training):
    """`self.w = nn.Parameter(self.w * 2)` in forward ran with the old weight
    at every call (eager doubles it each time) and left the model's alone."""
    class Replaces(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(2))

        def forward(self, x):
            self.w = nn.Parameter(self.w * 2)
            return (x * self.w).sum()

    class Deletes(Replaces):
        def forward(self, x):
            w = self.w
            del self._parameters["w"]
            return (x * w).sum()

    wrap = tilefx.trainingModel if training else tilefx.inferenceModel
    with pytest.raises(tilefx.Error, match=r"^Parameter w is reassigned within the model when calling the "
                                           r"forward method\. This is not supported"):
        wrap(Replaces())(torch.ones(2))
    with pytest.raises(tilefx.Error, match=r"^Parameter w is removed from the model when calling the "
                                           r"forward method\.$"):
        wrap(Deletes())(torch.ones(2))


def test_copy_into_a_buffer():
    class Last(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.register_buffer("last", torch.zeros(2, 3))

        def forward(self, x):
            o = self.lin(x)
            self.last.copy_(o.detach())
            return o

    torch.manual_seed(0)
    m = Last()
    x = torch.randn(2, 3)
    model = tilefx.inferenceModel(m)
    out = model(x)
    model.copyWeightsToHost()
    torch.testing.assert_close(m.last, out)


class _PadToStride(nn.Module):
    """Encodec's pattern: configuration kept in single-element tensors
    (`stride`), read on the host to size a padding."""

    def __init__(self, persistent=False, counts=False):
        super().__init__()
        self.register_buffer("stride", torch.tensor(3), persistent=persistent)
        self.scale = torch.tensor(0.5)  # a plain tensor attribute: a constant of the graph
        self.fc = nn.Linear(4, 2)
        self.counts = counts

    def forward(self, x):
        if self.counts:
            self.stride += 1
        frames = torch.ceil(x.shape[-1] / self.stride).to(torch.int64)
        pad = int(frames * self.stride - x.shape[-1])
        return self.fc(nn.functional.pad(x, (0, pad))[..., -4:]) * float(self.scale)


def test_single_element_configuration_tensors_are_read_as_their_value():
    """`.item()` of a non-persistent single-element buffer or a tensor attribute
    is its value when the model is compiled (PopTorch's trace reads it so): no
    state dict loads another. It was a data-dependent error."""
    torch.manual_seed(0)
    m = _PadToStride().eval()
    for width in (4, 5):  # 2 and 1 columns of padding
        x = torch.randn(2, width)
        with torch.no_grad():
            torch.testing.assert_close(tilefx.inferenceModel(m)(x), m(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("persistent, counts", [(True, False), (False, True)])
def test_state_read_on_the_host_stays_a_data_dependent_error(persistent, counts):
    """A persistent buffer (a loaded state dict may change it) or one the
    forward writes (another value at the next call) is data."""
    with pytest.raises(tilefx.Error, match="data-dependent.*_PadToStride.*int\\(frames"):
        tilefx.inferenceModel(_PadToStride(persistent, counts).eval())(torch.randn(2, 4))


@pytest.mark.parametrize("case", ["left_aligned", "not_left_aligned", "float_mask"])
def test_transformer_encoder_padding_as_eagers_nested_path(case):
    """Eager's nn.TransformerEncoder in eval mode without gradients runs a
    padded batch as a nested tensor: the padded positions come out as zeros
    (before the final norm), when the mask is left-aligned. The trace took
    the plain path, which computes them."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    model = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8), enable_nested_tensor=True).eval()
    x = torch.randn(3, 6, 8)
    pad = torch.zeros(3, 6, dtype=torch.bool)
    pad[1, -2:] = True
    pad[2, -1:] = True
    if case == "not_left_aligned":
        pad[2, 0] = True
    mask = pad if case != "float_mask" else torch.zeros(3, 6).masked_fill(pad, float("-inf"))

    class Encode(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = model

        def forward(self, x, mask):
            return self.encoder(x, src_key_padding_mask=mask)

    with torch.no_grad():
        ref = Encode()(x, mask)
    torch.testing.assert_close(tilefx.inferenceModel(Encode())(x, mask), ref, rtol=1e-5, atol=1e-5)


class _Checked(nn.Module):
    """transformers' `torch_compilable_check` on a tensor, as it runs when the
    model is compiled: `torch._check_tensor_all(cond)`."""

    def forward(self, x):
        torch._check_tensor_all(x.sum(-1) > 0)
        return x * 2


def test_tensor_checks_are_graph_asserts():
    """`torch._check_tensor_all` read the condition on the host (a
    data-dependent error); it is a graph assert now."""
    model = tilefx.inferenceModel(_Checked())
    torch.testing.assert_close(model(torch.ones(2, 3)), torch.full((2, 3), 2.0))
    with pytest.raises(tilefx.Error, match="torch._check_tensor_all"):
        model(-torch.ones(2, 3))


def test_compiling_keeps_every_submodules_own_mode():
    """A model in training mode holding an eval() submodule (a wrapper around
    a Hugging Face model put in eval, the guide's BeginBlock example): after
    an inference model compiled, the submodule was in training mode too (the
    mode was put back on the root only), so the eager model then ran its
    dropout."""
    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5)).eval()

        def forward(self, x):
            return self.inner(x)

    model = Outer()
    x = torch.randn(2, 4)
    torch.testing.assert_close(tilefx.inferenceModel(model)(x), model.inner[0](x).detach())
    assert model.training and not model.inner.training and not model.inner[1].training
    torch.testing.assert_close(model(x), model.inner[0](x))  # eager: still no dropout
