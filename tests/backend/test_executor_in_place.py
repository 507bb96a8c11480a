"""In-place optimizer updates and gradient accumulation (kernels.ipu.IN_PLACE_OPERANDS):
the same numbers as the kernels that return fresh arrays, written into the
arguments only when the caller gave them up and nothing else reads them; the
executor's own arrays (weights, optimizer state, accumulators after the
first micro-batch) are reused from step to step, and nothing a caller holds changes behind its back."""

import copy
import itertools
import weakref

import numpy as np
import pytest
import torch
from torch import nn
from xdsl.parser import Parser

import tilefx
from tilefx.backend.executor import CompiledFunction
from tilefx.backend.kernels.ipu import IN_PLACE_OPERANDS, accumulate, adam, sgd
from tilefx.passes.pipelines import graph_context
from tilefx.passes.training_step import find_func

RNG = np.random.default_rng(0)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _both(kernel, args, kw, owned):
    """Results of the kernel on copies, pure and in place; the in-place call
    writes only into the `owned` positions and returns those arrays."""
    pure_args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    own_args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    pure = kernel(*pure_args, **kw)
    mine = kernel(*own_args, **kw, inplace=True)
    pure = pure if isinstance(pure, tuple) else (pure,)
    mine = mine if isinstance(mine, tuple) else (mine,)
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray) and i not in owned:
            np.testing.assert_array_equal(own_args[i], a)  # read-only operands untouched
    return pure, mine, own_args


@pytest.mark.parametrize("momentum,dampening,nesterov,weight_decay,step,grad_scale", [
    (0.9, 0.0, False, 0.0, 3, 1.0), (0.9, 0.0, False, 0.0, 1, 1.0), (0.9, 0.25, False, 0.01, 2, 0.5),
    (0.8, 0.0, True, 0.1, 4, 1.0), (0.0, 0.0, False, 0.0, 2, 1.0), (0.0, 0.0, False, 0.05, 1, 0.25)])
def test_sgd_in_place_is_bitwise_the_pure_update(momentum, dampening, nesterov, weight_decay, step,
                                                 grad_scale):
    w, g, v = _f32(300, 257), _f32(300, 257), _f32(300, 257)  # 3 chunks (kernels._common.CHUNK)
    args = [w, g, np.float32(0.05), v, np.asarray(step, np.float32), None, None, None, None, None]
    kw = dict(momentum=momentum, dampening=dampening, nesterov=nesterov, weight_decay=weight_decay,
              grad_scale=grad_scale)
    pure, mine, own = _both(sgd, args, kw, owned=IN_PLACE_OPERANDS["ipu.sgd"])
    for p, m in zip(pure, mine):
        np.testing.assert_array_equal(p, m)
    assert mine[0] is own[0]
    if momentum:
        assert mine[1] is own[3]


def test_sgd_without_velocity_in_place():
    w, g = _f32(8), _f32(8)
    pure, mine, own = _both(sgd, [w, g, np.float32(0.1), None, np.float32(1), None, None, None, None,
                                  None], dict(momentum=0.0, dampening=0.0, nesterov=False,
                                              weight_decay=0.0), owned=(0,))
    np.testing.assert_array_equal(pure[0], mine[0])
    assert mine[0] is own[0]


@pytest.mark.parametrize("decoupled,weight_decay,bias_correction,step,grad_scale,shape",
                         [c + ((5, 31),) for c in itertools.product(
                             [True, False], [0.0, 0.01], [True, False], [1, 7], [1.0, 0.5])]
                         + [(True, 0.01, True, 3, 1.0, (70000,)), (False, 0.1, True, 2, 0.5, (3, 40000))])
def test_adam_in_place_is_bitwise_the_pure_update(decoupled, weight_decay, bias_correction, step,
                                                  grad_scale, shape):
    w, g, m, v = _f32(*shape), _f32(*shape), _f32(*shape), np.abs(_f32(*shape))
    args = [w, g, m, v, np.asarray(step, np.float32), np.float32(1e-3), None, None, None, None]
    kw = dict(beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=weight_decay, decoupled=decoupled,
              bias_correction=bias_correction, grad_scale=grad_scale)
    pure, mine, own = _both(adam, args, kw, owned=IN_PLACE_OPERANDS["ipu.adam"])
    for p, q in zip(pure, mine):
        np.testing.assert_array_equal(p, q)
    assert mine[0] is own[0] and mine[1] is own[2] and mine[2] is own[3]


def test_half_weights_are_not_updated_in_place():
    """fp16 weights compute in fp32: the in-place form leaves them alone and
    returns fresh arrays, the same as the pure form."""
    w, g, v = _f32(6).astype(np.float16), _f32(6).astype(np.float16), np.zeros(6, np.float16)
    args = [w, g, np.float32(0.1), v, np.float32(2), None, None, None, None, None]
    kw = dict(momentum=0.9, dampening=0.0, nesterov=False, weight_decay=0.0)
    pure, mine, own = _both(sgd, args, kw, owned=())
    for p, q in zip(pure, mine):
        np.testing.assert_array_equal(p, q)
    np.testing.assert_array_equal(own[0], w)


def test_accumulate_onto_the_executors_zero_is_the_gradient_itself():
    """-0.0 + g is g for every float g (+0.0 + -0.0 would be +0.0): an
    accumulator that is one broadcast -0.0 gives the gradient back."""
    g = np.array([1.5, -0.0, 0.0, np.inf, -np.inf, np.nan, -3e-39], np.float32)
    zero = np.broadcast_to(np.array(-0.0, np.float32), g.shape)
    out = accumulate(zero, g)
    assert out is g
    np.testing.assert_array_equal(np.signbit(out), np.signbit(zero + g))
    plus = np.broadcast_to(np.array(0.0, np.float32), g.shape)  # +0.0: the ordinary sum
    summed = accumulate(plus, g)
    assert summed is not g and not np.signbit(summed[1])


def test_accumulate_in_place():
    acc, g = _f32(4, 4), _f32(4, 4)
    own = acc.copy()
    out = accumulate(own, g, inplace=True)
    assert out is own
    np.testing.assert_array_equal(out, accumulate(acc, g))
    half = accumulate(acc.astype(np.float16), g.astype(np.float16), inplace=True)
    assert half.dtype == np.float16


UPDATE = """
func.func @update(%w: tensor<3x4xf32>, %g: tensor<3x4xf32>, %lr: tensor<f32>, %m: tensor<f32>,
                  %s: tensor<f32>, %v: tensor<3x4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>%EXTRA_T) {
  %nw, %nv = ipu.sgd %w, %g lr %lr velocity %v step %s momentum %m {dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = false, grad_scale = 1.0 : f64} : tensor<3x4xf32>, tensor<3x4xf32>, tensor<f32> velocity tensor<3x4xf32> step tensor<f32> -> tensor<3x4xf32>, tensor<3x4xf32>
  func.return %nw, %nv%EXTRA : tensor<3x4xf32>, tensor<3x4xf32>%EXTRA_T
}
"""


def _update(extra: bool) -> CompiledFunction:
    text = UPDATE.replace("%EXTRA_T", ", tensor<3x4xf32>" if extra else "")
    text = text.replace("%EXTRA", ", %w" if extra else "")
    return CompiledFunction(find_func(Parser(graph_context(), text).parse_module(), "update"))


def _update_args():
    return [_f32(3, 4), _f32(3, 4), np.float32(0.1), np.float32(0.9), np.float32(3), _f32(3, 4)]


def test_donated_arguments_take_the_update_and_others_stay():
    fn = _update(extra=False)
    args = _update_args()
    kept = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    fresh = fn(*kept)
    assert not any(r is a for r in fresh for a in kept)
    for a, k in zip(args, kept):  # not donated: nothing written
        np.testing.assert_array_equal(a, k)
    own = fn(*kept, donated=[0, 5])
    assert own[0] is kept[0] and own[1] is kept[5]
    for f, o in zip(fresh, own):
        np.testing.assert_array_equal(f, o)
    # donating only one of the two operands: fresh results, nothing written
    again = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    part = fn(*again, donated=[0])
    assert part[0] is not again[0]
    np.testing.assert_array_equal(again[0], args[0])


def test_an_argument_read_elsewhere_is_never_overwritten():
    """@update also returns the old weight: the sgd step is not its only
    reader, so even a donated weight keeps its value."""
    fn = _update(extra=True)
    args = _update_args()
    w0 = args[0].copy()
    new_w, _, old_w = fn(*args, donated=[0, 5])
    np.testing.assert_array_equal(old_w, w0)
    assert new_w is not args[0]


class _Net(nn.Module):
    def __init__(self, returns_weight=False):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(6, 8), nn.Linear(8, 3)
        self.returns_weight = returns_weight

    def forward(self, x, y):
        out = self.fc2(torch.relu(self.fc1(x)))
        loss = nn.functional.cross_entropy(out, y)
        if self.returns_weight:  # an output that is a view of a parameter
            return out, loss, self.fc1.weight.t()
        return out, loss


def _torch_steps(model, opt, x, y, n):
    outs = []
    for _ in range(n):
        opt.zero_grad()
        res = model(x, y)
        outs.append([r.detach().clone() for r in res])  # before the step changes a weight view
        res[1].backward()
        opt.step()
    return outs


@pytest.mark.parametrize("make_opt", [
    lambda p, t: (torch.optim.SGD(p, lr=0.1, momentum=0.9) if t else
                  tilefx.optim.SGD(p, lr=0.1, momentum=0.9)),
    lambda p, t: torch.optim.AdamW(p, lr=0.01) if t else tilefx.optim.AdamW(p, lr=0.01)])
@pytest.mark.parametrize("returns_weight", [False, True])
def test_training_reuses_its_arrays_and_returned_tensors_stay(make_opt, returns_weight):
    torch.manual_seed(0)
    base = _Net(returns_weight)
    ref = copy.deepcopy(base)
    ref_outs = _torch_steps(ref, make_opt(ref.parameters(), True), *_data(), 4)
    model = copy.deepcopy(base)
    ex = tilefx.trainingModel(model, optimizer=make_opt(model.parameters(), False))
    x, y = _data()
    first = ex(x, y)
    # weak references: holding the arrays would keep them from being reused
    weights = {n: weakref.ref(w) for n, w in ex._weights.items()}
    kept = [t.clone() for t in first]
    got = [first] + [ex(x, y) for _ in range(3)]
    for a, b in zip(first, kept):  # a returned tensor does not move with later steps
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    for mine, theirs in zip(got, ref_outs):
        for a, b in zip(mine, theirs):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    for n, w in weights.items():
        if returns_weight and n == "fc1.weight":
            continue  # an output held it during the update: a new array each step
        assert ex._weights[n] is w(), n
    for n, p in model.named_parameters():
        torch.testing.assert_close(p, dict(ref.named_parameters())[n], rtol=1e-5, atol=1e-6)


def _data():
    g = torch.Generator().manual_seed(1)
    return torch.randn(5, 6, generator=g), torch.randint(0, 3, (5,), generator=g)


def test_gradient_accumulation_and_replicas_with_in_place_accumulators():
    torch.manual_seed(0)
    base = _Net()
    opts = tilefx.Options()
    opts.Training.gradientAccumulation(2)
    opts.deviceIterations(2)
    model = copy.deepcopy(base)
    ex = tilefx.trainingModel(model, opts, optimizer=tilefx.optim.SGD(model.parameters(), lr=0.1,
                                                                       momentum=0.9))
    ref = copy.deepcopy(base)
    opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    g = torch.Generator().manual_seed(2)
    for _ in range(2):
        x, y = torch.randn(20, 6, generator=g), torch.randint(0, 3, (20,), generator=g)
        ex(x, y)
        for d in range(2):  # one weight update per device iteration, mean over 2 micro-batches
            opt.zero_grad()
            for k in range(2):
                sl = slice(10 * d + 5 * k, 10 * d + 5 * k + 5)
                (ref(x[sl], y[sl])[1] / 2).backward()
            opt.step()
    for n, p in model.named_parameters():
        torch.testing.assert_close(p, dict(ref.named_parameters())[n], rtol=1e-5, atol=1e-6)
