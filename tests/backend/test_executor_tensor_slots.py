"""Values that stay ATen's tensors between ATen's own steps
(analysis/kept.py): which slots, on compiled IR; that the
numbers are the same bits whichever way a value travels; and, through a
wrapped model, that outputs, inputs and weights keep their contracts."""

import copy

import numpy as np
import pytest
import torch
from torch import nn
from xdsl.parser import Parser

import tilefx
from tilefx.lowering import aten_kernels
from tilefx.backend.executor import CompiledFunction
from tilefx.runner.outputs import plan_of
from tilefx.passes.pipelines import graph_context
from tilefx.passes.training_step import find_func

aten_kernels.install()  # ATen's kernels (and the attention one), as the API runs

RNG = np.random.default_rng(0)

# x -> addmm (b, x, permute(w)) -> relu -> view -> mm with w2, and the relu's
# result returned as well: the addmm's result is read by the relu only (a
# tensor); the relu's by a view and the return (an array: views are numpy's)
IR = """
func.func @main(%x: tensor<64x256xf32>, %w: tensor<512x256xf32>, %b: tensor<512xf32>, %w2: tensor<1024x128xf32>) -> (tensor<32x128xf32>, tensor<64x512xf32>) {
  %wt = aten.permute %w {dims = array<i64: 1, 0>} : tensor<512x256xf32> -> tensor<256x512xf32>
  %h = aten.addmm %b, %x, %wt {beta = 1 : i64, alpha = 1 : i64} : tensor<512xf32>, tensor<64x256xf32>, tensor<256x512xf32> -> tensor<64x512xf32>
  %r = aten.relu %h : tensor<64x512xf32> -> tensor<64x512xf32>
  %v = aten.view %r {size = array<i64: 32, 1024>} : tensor<64x512xf32> -> tensor<32x1024xf32>
  %g = aten.gelu %v {approximate = "none"} : tensor<32x1024xf32> -> tensor<32x1024xf32>
  %y = aten.mm %g, %w2 : tensor<32x1024xf32>, tensor<1024x128xf32> -> tensor<32x128xf32>
  func.return %y, %r : tensor<32x128xf32>, tensor<64x512xf32>
}
"""


def _compiled(ir: str) -> CompiledFunction:
    return CompiledFunction(find_func(Parser(graph_context(), ir).parse_module(), "main"), fuse=False)


def _args():
    return [RNG.standard_normal(s).astype(np.float32) for s in ((64, 256), (512, 256), (512,), (1024, 128))]


def _torch_reference(x, w, b, w2):
    x, w, b, w2 = map(torch.from_numpy, (x, w, b, w2))
    r = torch.relu(torch.addmm(b, x, w.t()))
    return torch.nn.functional.gelu(r.view(32, 1024)) @ w2, r


def test_which_slots_hold_tensors():
    f = _compiled(IR)
    x, w, b, w2 = range(4)  # argument positions
    # x, b and w2 are read by ATen's steps alone; w by a view of an argument,
    # which gives a tensor's view for a tensor, to the addmm alone
    assert f.tensor_args == frozenset({x, w, b, w2})
    names = [s.__qualname__.split(" ")[0] for s in f.steps]
    assert names == ["aten.permute", "aten.addmm", "aten.relu", "aten.view", "aten.gelu", "aten.mm"]
    assert "(in place)" in f.steps[2].__qualname__  # the relu, over the product
    y_slot, r_slot = f.result_slots
    # the last product is only returned: a tensor; the relu's result is read by
    # a view (and returned): an array, which the view and the caller take
    assert y_slot in f.tensor_slots and r_slot not in f.tensor_slots
    assert f._tensor_results == (0,)
    assert f._aten_only  # no numpy arithmetic: no floating-point state, no BLAS threads to set


def test_the_numbers_are_the_same_bits_whichever_way_values_travel():
    f = _compiled(IR)
    args = _args()
    kept = [a.copy() for a in args]
    want_y, want_r = _torch_reference(*kept)
    y, r = f(*args)
    assert type(y) is np.ndarray and type(r) is np.ndarray  # the default: arrays
    ty, tr = f(*[torch.from_numpy(a) if i in f.tensor_args else a for i, a in enumerate(args)],
               tensors=True)
    assert type(ty) is torch.Tensor and type(tr) is np.ndarray
    for got in (y, ty):
        assert torch.equal(torch.as_tensor(got), want_y)
    for got in (r, tr):
        assert torch.equal(torch.from_numpy(got), want_r)
    for a, k in zip(args, kept):  # nothing written into an argument
        np.testing.assert_array_equal(a, k)


def test_a_numpy_kernel_makes_the_function_set_numpys_state():
    # a one-flop op below ATen's size threshold runs on numpy's kernel
    ir = """
func.func @main(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>) -> (tensor<4x4xf32>) {
  %t = aten.neg %a : tensor<4x4xf32> -> tensor<4x4xf32>
  %m = aten.mm %t, %b : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  func.return %m : tensor<4x4xf32>
}
"""
    f = _compiled(ir)
    assert not f._aten_only
    a, b = (RNG.standard_normal((4, 4)).astype(np.float32) for _ in range(2))
    (m,) = f(a, b, tensors=True)
    torch.testing.assert_close(torch.as_tensor(m), -torch.from_numpy(a) @ torch.from_numpy(b))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                                 nn.Linear(512, 10))

    def forward(self, x):
        return self.net(x)


def test_a_wrapped_model_hands_over_atens_tensor_and_keeps_its_contracts():
    torch.manual_seed(0)
    model = MLP().eval()
    ref = copy.deepcopy(model)
    ie = tilefx.inferenceModel(model)
    x = torch.randn(64, 256, requires_grad=True)
    out = ie(x)
    main = ie._program.main
    assert main.tensor_args  # the input and the biases go in as tensors
    with torch.no_grad():
        want = ref(x)
    assert torch.equal(out, want)
    assert not out.requires_grad and out._base is None and torch.is_grad_enabled()
    for t in (x, *model.parameters()):
        assert not np.shares_memory(out.detach().numpy(), t.detach().numpy())
    out2 = ie(x)
    assert out2 is not out and torch.equal(out2, out) and not np.shares_memory(out2.numpy(), out.numpy())
    # a transposed input: ATen reads its strides
    xt = torch.randn(256, 64).t()
    with torch.no_grad():
        assert torch.equal(ie(xt), ref(xt))


def test_inference_sees_new_weights_through_its_kept_tensors():
    """The executor keeps each weight's tensor from call to call while the
    weight is the same array: weights loaded into the model, written in
    place, or a parameter replaced all reach the call after
    copyWeightsToDevice."""
    torch.manual_seed(0)
    model = MLP().eval()
    ie = tilefx.inferenceModel(model)
    x = torch.randn(8, 256)
    ie(x)
    other = MLP().eval()
    model.load_state_dict(other.state_dict())
    ie.copyWeightsToDevice()
    with torch.no_grad():
        assert torch.equal(ie(x), other(x))
        model.net[4].bias.add_(1.0)
    ie.copyWeightsToDevice()
    with torch.no_grad():
        assert torch.equal(ie(x), model(x))
    model.net[4].bias = nn.Parameter(torch.full((10,), 3.0))  # a new array for the weight
    ie.copyWeightsToDevice()
    with torch.no_grad():
        assert torch.equal(ie(x), model(x))


def test_training_with_a_frozen_layer_still_updates_in_place():
    """A frozen layer's weights are read by ATen's steps alone (main may take
    them as tensors), but a training call passes arrays only (a returned
    argument must come back as the object passed, to be copied); the trained
    weights stay the parameters' memory, updated in place."""
    torch.manual_seed(0)
    model = MLP()
    model.net[0].requires_grad_(False)
    ref = copy.deepcopy(model)

    class Loss(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x, y):
            out = self.m(x)
            return out, nn.functional.cross_entropy(out, y)

    mine = Loss(model)
    tm = tilefx.trainingModel(mine, optimizer=tilefx.optim.SGD(
        [p for p in mine.parameters() if p.requires_grad], lr=0.1, momentum=0.9))
    opt = torch.optim.SGD([p for p in ref.parameters() if p.requires_grad], lr=0.1, momentum=0.9)
    x, y = torch.randn(16, 256), torch.randint(0, 10, (16,))
    for _ in range(3):
        _, loss = tm(x, y)
        opt.zero_grad()
        rloss = nn.functional.cross_entropy(ref(x), y)
        rloss.backward()
        opt.step()
        torch.testing.assert_close(loss, rloss.detach(), rtol=1e-6, atol=1e-6)
    p = tm._program
    assert p.main.tensor_args and not any(as_tensor for _, _, as_tensor in plan_of(p).lean_args)
    assert tm._weights["m.net.4.bias"].ctypes.data == model.net[4].bias.data_ptr()
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-5, atol=1e-6)


class _ReturnsItsArguments(nn.Module):
    """Returns its input and a weight next to what it computes (and, in
    inference, updates a buffer, so its program's results are not outputs
    alone)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(256, 4096)
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x, y=None):
        self.calls.add_(1)
        out = self.fc(x)
        if y is None:
            return out, x, self.fc.bias
        return x, self.fc.bias, nn.functional.cross_entropy(out, y)


def test_a_returned_argument_is_a_copy_in_training_and_inference():
    """An argument the program returns comes back as a copy: never the
    user's input, a parameter's memory or a weight the executor keeps."""
    torch.manual_seed(0)
    m = _ReturnsItsArguments().eval()
    ie = tilefx.inferenceModel(m)
    x = torch.randn(64, 256)
    out, xo, b = ie(x)
    assert not np.shares_memory(xo.numpy(), x.numpy())
    assert not np.shares_memory(b.numpy(), m.fc.bias.detach().numpy())
    b.add_(100.0)  # the caller's to change
    xo.add_(100.0)
    out2, _, b2 = ie(x)
    assert torch.equal(b2, m.fc.bias.detach()) and torch.equal(out2, out)

    m = _ReturnsItsArguments()
    tm = tilefx.trainingModel(m, optimizer=tilefx.optim.SGD(m.parameters(), lr=0.1))
    y = torch.randint(0, 10, (64,))
    before = m.fc.bias.detach().clone()
    xo, b, _ = tm(x, y)
    assert not np.shares_memory(xo.numpy(), x.numpy())
    assert not np.shares_memory(b.numpy(), m.fc.bias.detach().numpy())
    assert torch.equal(b, before)  # the value the forward read, before the update
    assert not torch.equal(m.fc.bias.detach(), before)


def test_destroy_lets_the_program_go():
    import gc
    import weakref

    ie = tilefx.inferenceModel(MLP().eval())
    ie(torch.randn(4, 256))
    program = weakref.ref(ie._program)
    ie.destroy()
    gc.collect()
    assert program() is None


# -- random models: numbers and aliasing -----------------------------------------

_OPS = ("linear", "relu", "gelu", "add_input", "mul_self", "view", "transpose_back", "clone",
        "softmax", "layernorm", "tanh", "neg", "div2", "sub_bias")
_RETURNS = ("one", "pair_input", "pair_weight", "pair_mid", "dict", "same_twice", "view_out")


class _Random(nn.Module):
    """A chain of ops drawn from _OPS (a linear layer first, so a loss on it
    trains), returning one of _RETURNS: its result alone, next to its input,
    a weight, an intermediate, in a dict, twice, or as a view."""

    def __init__(self, rng, d):
        super().__init__()
        self.plan = ["linear"] + [rng.choice(_OPS) for _ in range(rng.randint(1, 6))]
        self.lins = nn.ModuleList(nn.Linear(d, d) for _ in self.plan)
        self.ln = nn.LayerNorm(d)
        self.ret = rng.choice(_RETURNS)

    def forward(self, x):
        h, mids = x, []
        for i, op in enumerate(self.plan):
            h = {"linear": lambda: self.lins[i](h), "relu": lambda: torch.relu(h),
                 "gelu": lambda: nn.functional.gelu(h), "add_input": lambda: h + x,
                 "mul_self": lambda: h * h, "view": lambda: h.reshape(-1).reshape(h.shape),
                 "transpose_back": lambda: h.t().contiguous().t(), "clone": lambda: h.clone(),
                 "softmax": lambda: torch.softmax(h, -1), "layernorm": lambda: self.ln(h),
                 "tanh": lambda: torch.tanh(h), "neg": lambda: -h, "div2": lambda: h / 2.0,
                 "sub_bias": lambda: h - self.lins[i].bias}[op]()
            mids.append(h)
        return {"one": lambda: h, "pair_input": lambda: (h, x),
                "pair_weight": lambda: (h, self.lins[0].weight), "pair_mid": lambda: (h, mids[0]),
                "dict": lambda: {"h": h, "m": mids[-1] * 1.0}, "same_twice": lambda: (h, h),
                "view_out": lambda: h.t()}[self.ret]()


def _leaves(o):
    if isinstance(o, dict):
        return [v for k in sorted(o) for v in _leaves(o[k])]
    if isinstance(o, (tuple, list)):
        return [v for x in o for v in _leaves(x)]
    return [o]


@pytest.mark.parametrize("seed", range(16))
def test_random_models_match_torch_and_alias_nothing(seed):
    """Whichever slots hold tensors: the numbers are eager's, no output shares
    memory with the input or a parameter, and neither the next call nor the
    caller writing into an output changes another call's results."""
    import random

    rng = random.Random(seed)
    torch.manual_seed(seed)
    d, n = rng.choice([64, 128, 256]), rng.choice([32, 64, 128])
    model = _Random(rng, d).eval()
    ref = copy.deepcopy(model)
    x = torch.randn(n, d)
    ie = tilefx.inferenceModel(model)
    out = _leaves(ie(x))
    with torch.no_grad():
        want = _leaves(ref(x))
    kept = [x.numpy(), *(p.detach().numpy() for p in model.parameters())]
    for o, w in zip(out, want):
        torch.testing.assert_close(o, w, rtol=1e-5, atol=1e-5)
        assert not any(np.shares_memory(o.numpy(), k) for k in kept)
    saved = [o.clone() for o in out]
    again = _leaves(ie(x))
    assert all(torch.equal(o, s) for o, s in zip(out, saved))
    for o in out + again:
        o.mul_(0.0)
    for o, w in zip(_leaves(ie(x)), want):
        torch.testing.assert_close(o, w, rtol=1e-5, atol=1e-5)

    class Loss(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            o = self.m(x)
            first = _leaves(o)[0]
            return o, (first * first).mean()

    mine, theirs = Loss(copy.deepcopy(ref).train()), Loss(copy.deepcopy(ref).train())
    tm = tilefx.trainingModel(mine, optimizer=tilefx.optim.SGD(mine.parameters(), lr=0.01))
    opt = torch.optim.SGD(theirs.parameters(), lr=0.01)
    for _ in range(2):
        o, loss = tm(x)
        opt.zero_grad()
        _, want_loss = theirs(x)
        want_loss.backward()
        opt.step()
        torch.testing.assert_close(loss, want_loss.detach(), rtol=1e-4, atol=1e-5)
        kept = [x.numpy(), *(p.detach().numpy() for p in mine.parameters())]
        assert not any(np.shares_memory(a.numpy(), k) for a in _leaves(o) for k in kept)
    for p, q in zip(mine.parameters(), theirs.parameters()):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=1e-4, atol=1e-5)


def test_a_view_of_an_argument_is_made_once_while_the_argument_is_the_same():
    """The permute of the weight is the tensor's own view, kept from call to
    call while the same tensor comes in (a write into the weight shows
    through it); a new tensor gets a new view, and an array is viewed each
    call and never held (a training step updates a weight in place only while
    nothing else refers to it)."""
    import sys

    f = _compiled(IR)
    args = _args()
    tensors = [torch.from_numpy(a) for a in args]
    permute = f.steps[0]
    w_slot, wt_slot = f.arg_slots[1], 0
    env: list = [None] * f.num_slots
    env[w_slot] = tensors[1]
    permute(env)
    wt_slot = next(i for i, v in enumerate(env) if v is not None and i != w_slot)
    first = env[wt_slot]
    assert type(first) is torch.Tensor and first._base is tensors[1]
    permute(env)
    assert env[wt_slot] is first
    y1, _ = f(*tensors, tensors=True)
    tensors[1].mul_(2)  # the caller's weight, written in place: the view shows it
    y2, _ = f(*tensors, tensors=True)
    want, _ = _torch_reference(*[t.numpy().copy() for t in tensors])
    assert torch.equal(y2, want) and not torch.equal(y1, y2)
    other = tensors[1].clone()
    env[w_slot] = other
    permute(env)
    assert env[wt_slot] is not first and env[wt_slot]._base is other
    array = args[1].copy()
    refs = sys.getrefcount(array)
    env[w_slot] = array
    permute(env)
    assert type(env[wt_slot]) is np.ndarray and env[wt_slot].base is array
    env[wt_slot] = None
    env[w_slot] = None
    assert sys.getrefcount(array) == refs  # not held by the step
