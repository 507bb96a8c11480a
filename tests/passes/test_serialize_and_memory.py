"""`ipu-serialize-matmul` and `ipu-available-memory` on graphs traced from torch models.

Serialized matmuls must equal torch.matmul forward and backward in every
mode and factor after the lowering; the available-memory pass must put the
right proportion on each memory-planning op and reject values outside (0, 1].
"""

from __future__ import annotations

import logging
import numpy as np
import re

import pytest
import torch

import tilefx
from tilefx.api.ops import _serialized_matmul
from tilefx.backend.executor import CompiledFunction
from tilefx.dialects.irutil import arg_roles, result_roles
from tilefx.lowering.from_torch import trace
from tilefx.passes.assign_stages import AssignStagesPass
from tilefx.passes.available_memory import AvailableMemoryError, AvailableMemoryPass
from tilefx.passes.pipelines import graph_context, run_graph_passes
from tilefx.passes.serialize_matmul import SerializationError, SerializeMatmulPass
from tilefx.passes.training_step import find_func

Mode = tilefx.MatMulSerializationMode
MODES = {Mode.InputChannels: "input_channels", Mode.ReducingDim: "reducing_dim",
         Mode.OutputChannels: "output_channels"}
M, K, N = 8, 12, 16  # divisible by 1, 2 and 4


class SMM(torch.nn.Module):
    """loss = sum(serializedMatMul(a, w) * g): gradients of both operands come out as
    parameter gradients. Factor 1 calls the custom op itself (the frontend
    would emit a plain matmul) so that the pass sees it too."""

    def __init__(self, mode, factor, batch=(), m=M, k=K, n=N):
        super().__init__()
        gen = torch.Generator().manual_seed(factor * 10 + len(batch))
        self.a = torch.nn.Parameter(torch.randn(*batch, m, k, generator=gen))
        self.w = torch.nn.Parameter(torch.randn(k, n, generator=gen))
        self.mode, self.factor = mode, factor

    def forward(self, g):
        if self.factor == 1:
            y = _serialized_matmul(self.a, self.w, MODES[self.mode], 1, False)
        else:
            y = tilefx.serializedMatMul(self.a, self.w, self.mode, self.factor)
        return y, (y * g).sum()


def _ops(module, name):
    return [o for o in module.walk() if o.name == name]


def _run(tg, model, inputs):
    """Run @main, binding arguments by role; results by role as a dict."""
    fn = find_func(tg.module, "main")
    params = dict(model.named_parameters())
    args = []
    for r in arg_roles(fn):
        if "param" in r:
            args.append(params[r["param"]].detach().numpy().copy())
        elif "input" in r:
            args.append(inputs[r["input"]].numpy().copy())
        else:
            args.append(tg.consts[r["const"]])
    out = CompiledFunction(fn)(*args)
    res = {}
    for r, v in zip(result_roles(fn), out):
        key = ("output", r["output"]) if "output" in r else ("grad", r.get("grad"))
        res[key] = np.asarray(v)
    return res


def _reference(model, g):
    a = model.a.detach().clone().requires_grad_()
    w = model.w.detach().clone().requires_grad_()
    y = torch.matmul(a, w)
    loss = (y * g).sum()
    loss.backward()
    return y.detach().numpy(), loss.detach().numpy(), a.grad.numpy(), w.grad.numpy()


def _close(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _serialize(tg):
    SerializeMatmulPass().apply(graph_context(), tg.module)
    tg.module.verify()
    assert not _ops(tg.module, "ipu.serialized_matmul")


@pytest.mark.parametrize("batch", [(), (3,)], ids=["2d", "batched"])
@pytest.mark.parametrize("factor", [1, 2, 4])
@pytest.mark.parametrize("mode", list(MODES), ids=list(MODES.values()))
def test_serialized_matmul_forward_and_backward(mode, factor, batch):
    model = SMM(mode, factor, batch)
    g = torch.randn(*batch, M, N, generator=torch.Generator().manual_seed(1))
    tg = trace(model, (g,), training=True)
    assert len(_ops(tg.module, "ipu.serialized_matmul")) == 1
    fwd_before = len(_ops(tg.module, "aten.mm")) + len(_ops(tg.module, "aten.bmm"))
    _serialize(tg)
    pieces = len(_ops(tg.module, "aten.mm")) + len(_ops(tg.module, "aten.bmm")) - fwd_before
    assert pieces == factor
    if factor > 1:
        combine = "aten.add.Tensor" if MODES[mode] == "reducing_dim" else "aten.cat"
        assert _ops(tg.module, combine)
    res = _run(tg, model, [g])
    y, loss, ga, gw = _reference(model, g)
    _close(res["output", 0], y)
    _close(res["output", 1], loss)
    _close(res["grad", "a"], ga)
    _close(res["grad", "w"], gw)


@pytest.mark.parametrize("factor", [2, 4])
@pytest.mark.parametrize("mode", list(MODES), ids=list(MODES.values()))
def test_serialized_matmul_inference(mode, factor):
    model = SMM(mode, factor, batch=(2, 3))
    g = torch.randn(2, 3, M, N)
    tg = trace(model, (g,), training=False)
    _serialize(tg)
    res = _run(tg, model, [g])
    y, loss, _, _ = _reference(model, g)
    _close(res["output", 0], y)
    _close(res["output", 1], loss)


def test_serialized_matmul_keeps_placement_and_runs_the_graph_passes():
    class TwoIPUs(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w1 = torch.nn.Parameter(torch.randn(K, N))
            self.w2 = torch.nn.Parameter(torch.randn(N, 4))

        def forward(self, x):
            with tilefx.Block("B0", ipu_id=0):
                h = tilefx.serializedMatMul(x, self.w1, Mode.OutputChannels, 4)
            with tilefx.Block("B1", ipu_id=1):
                y = tilefx.serializedMatMul(h, self.w2, Mode.ReducingDim, 2)
            return y

    model = TwoIPUs()
    x = torch.randn(M, K)
    tg = trace(model, (x,), training=False)
    _serialize(tg)
    for op in _ops(tg.module, "aten.mm") + _ops(tg.module, "aten.slice.Tensor"):
        assert op.attributes["ipu.place"].ipu.data in (0, 1)
    assert {o.attributes["ipu.place"].ipu.data for o in _ops(tg.module, "aten.cat")} == {0}
    assert {o.attributes["ipu.place"].ipu.data for o in _ops(tg.module, "aten.add.Tensor")} == {1}
    run_graph_passes(tg.module, training=False, assign=AssignStagesPass(strategy="sharded"))
    assert _ops(tg.module, "ipu.stage")
    res = _run(tg, model, [x])
    _close(res["output", 0], (x @ model.w1 @ model.w2).detach().numpy())


@pytest.mark.parametrize("mode,factor,message", [
    (Mode.ReducingDim, -2, "factor must be a non-negative int, got -2"),
    (Mode.ReducingDim, True, "factor must be a non-negative int, got True"),
    (Mode.ReducingDim, "2", "factor must be a non-negative int, got '2'"),
    ("reducing_dim", 1, "unknown mode 'reducing_dim'"),  # (was a plain matmul with a factor of 0 or 1)
])
def test_bad_mode_or_factor_is_a_clear_error(mode, factor, message):
    """A negative factor was a SerializationError from the pass, a string
    a TypeError, an unknown mode with factor 0 or 1 silently a matmul."""
    with pytest.raises(tilefx.Error, match=message):
        tilefx.serializedMatMul(torch.randn(M, K), torch.randn(K, N), mode, factor)
    assert torch.equal(tilefx.serializedMatMul(torch.eye(2), torch.ones(2, 2), Mode.ReducingDim, 0),
                       torch.ones(2, 2))  # PopTorch's default factor 0: not serialized


@pytest.mark.parametrize("mode,factor,dim", [
    (Mode.InputChannels, 3, M), (Mode.ReducingDim, 5, K), (Mode.OutputChannels, 3, N)])
def test_factor_that_does_not_divide_is_an_error(mode, factor, dim):
    a, w = torch.randn(M, K), torch.randn(K, N)
    with pytest.raises(tilefx.Error, match=rf"factor {factor} does not divide .* {dim}\b"):
        tilefx.serializedMatMul(a, w, mode, factor)

    class Raw(torch.nn.Module):  # past the frontend's check: the pass reports it
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(w)

        def forward(self, x):
            return _serialized_matmul(x, self.w, MODES[mode], factor, False)

    tg = trace(Raw(), (a,), training=False)
    with pytest.raises(SerializationError, match=rf"factor {factor} does not divide the "
                                                 rf"{MODES[mode]} dimension {dim}$") as e:
        SerializeMatmulPass().apply(graph_context(), tg.module)
    assert isinstance(e.value, tilefx.Error)


# ---------------------------------------------------------------------------
# available memory


class MemModel(torch.nn.Module):
    """mm on IPU 0 with set_available_memory(0.3), relu, then a plain mm and a
    serialized matmul on IPU 1."""

    def __init__(self):
        super().__init__()
        self.w1 = torch.nn.Parameter(torch.randn(K, N))
        self.w2 = torch.nn.Parameter(torch.randn(N, N))
        self.w3 = torch.nn.Parameter(torch.randn(N, 4))

    def forward(self, x):
        with tilefx.Block("B0", ipu_id=0):
            h = tilefx.set_available_memory(x @ self.w1, 0.3)
            h = torch.relu(h)
        with tilefx.Block("B1", ipu_id=1):
            h = h @ self.w2
            y = tilefx.serializedMatMul(h, self.w3, Mode.InputChannels, 2)
        return y


def _memory(module):
    return {o: o.attributes["ipu.available_memory"].value.data
            for o in module.walk() if "ipu.available_memory" in o.attributes}


def _ipu(op):
    return op.attributes["ipu.place"].ipu.data


def test_available_memory_explicit_per_ipu_and_default():
    model = MemModel()
    x = torch.randn(M, K)
    tg = trace(model, (x,), training=False)
    AvailableMemoryPass(per_ipu=(0.2, 0.4)).apply(graph_context(), tg.module)
    assert not _ops(tg.module, "ipu.set_available_memory")
    mem = _memory(tg.module)
    by_name = sorted((o.name, _ipu(o), p) for o, p in mem.items())
    assert by_name == [("aten.mm", 0, 0.3), ("aten.mm", 1, 0.4), ("ipu.serialized_matmul", 1, 0.4)]
    # the memory attribute follows the serialized matmul into its pieces; numbers unchanged
    _serialize(tg)
    assert sorted(_memory(tg.module).values()) == [0.3, 0.4, 0.4, 0.4]
    res = _run(tg, model, [x])
    _close(res["output", 0], model(x).detach().numpy())


def test_available_memory_default_and_named_ipus():
    model = MemModel()
    tg = trace(model, (torch.randn(M, K),), training=False)
    AvailableMemoryPass().apply(graph_context(), tg.module)
    assert sorted(_memory(tg.module).values()) == [0.3, 0.6, 0.6]

    tg = trace(model, (torch.randn(M, K),), training=False)
    AvailableMemoryPass.of_proportions({"IPU1": 0.7}, default_proportion=0.5).apply(graph_context(), tg.module)
    assert sorted((_ipu(o), p) for o, p in _memory(tg.module).items()) == [(0, 0.3), (1, 0.7), (1, 0.7)]


def test_available_memory_on_training_graph():
    model = MemModel()

    class Loss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = model

        def forward(self, x):
            y = self.inner(x)
            return y, y.sum()

    tg = trace(Loss(), (torch.randn(M, K),), training=True)
    AvailableMemoryPass(default_proportion=0.25).apply(graph_context(), tg.module)
    mem = _memory(tg.module)
    bwd = [p for o, p in mem.items() if o.attributes["ipu.place"].is_backward]
    fwd = [p for o, p in mem.items() if not o.attributes["ipu.place"].is_backward]
    assert sorted(fwd) == [0.25, 0.25, 0.3]  # the set proportion is for the forward op only
    assert bwd and set(bwd) == {0.25}


@pytest.mark.parametrize("kw", [dict(default_proportion=0.0), dict(default_proportion=1.5),
                                dict(per_ipu=(0.5, 0.0)), dict(per_ipu=(1.5,))])
def test_available_memory_out_of_range_option(kw):
    tg = trace(MemModel(), (torch.randn(M, K),), training=False)
    bad = kw.get("default_proportion", (kw.get("per_ipu") or (0,))[-1])
    with pytest.raises(AvailableMemoryError, match=rf"must be in \(0, 1\], got {bad}") as e:
        AvailableMemoryPass(**kw).apply(graph_context(), tg.module)
    assert isinstance(e.value, tilefx.Error)


@pytest.mark.parametrize("p", [0.0, 1.5])
def test_available_memory_out_of_range_value(p):
    with pytest.raises(ValueError, match=rf"got {p}"):
        tilefx.set_available_memory(torch.randn(2, 2), p)
    tg = trace(MemModel(), (torch.randn(M, K),), training=False)
    with pytest.raises(AvailableMemoryError, match=rf"got {p} \(IPU0\)"):
        AvailableMemoryPass.of_proportions({"IPU0": p}).apply(graph_context(), tg.module)


def test_set_available_memory_without_a_memory_op_warns_and_runs(caplog):
    """PopTorch accepts set_available_memory on any tensor (its inputs_test sets
    it on a constant): with no matmul/conv/gather to tune it is dropped with a
    warning naming the producer, and the model runs (it was a compile error)."""
    class Relu(torch.nn.Module):
        def forward(self, x):
            c = tilefx.set_available_memory(torch.tensor([1.0]), 0.1)
            return tilefx.set_available_memory(torch.relu(x), 0.5), c

    tg = trace(Relu(), (torch.randn(2, 2),), training=False)
    with caplog.at_level(logging.WARNING, logger="tilefx"):
        AvailableMemoryPass().apply(graph_context(), tg.module)
    assert "its input comes from aten.relu" in caplog.text
    assert not [o for o in tg.module.walk() if o.name == "ipu.set_available_memory"]
    x = torch.randn(2, 2)
    out, c = tilefx.inferenceModel(Relu())(x)
    torch.testing.assert_close(out, torch.relu(x), rtol=0, atol=0)
    torch.testing.assert_close(c, torch.tensor([1.0]), rtol=0, atol=0)


def test_backward_is_serialized_like_the_forward():
    """REFERENCE: InputChannels sums the weight gradient over its m-slices,
    ReducingDim concatenates the input gradient, OutputChannels sums it."""
    for mode, op, count in ((Mode.InputChannels, "aten.add.Tensor", 3),
                            (Mode.ReducingDim, "aten.cat", 1),
                            (Mode.OutputChannels, "aten.add.Tensor", 3)):
        tg = trace(SMM(mode, 4), (torch.randn(M, N),), training=True)
        bwd = [line for line in str(tg.module).splitlines() if "bwd" in line]
        assert sum(bool(re.search(rf"= {re.escape(op)}[ (]", line)) for line in bwd) >= count, mode
