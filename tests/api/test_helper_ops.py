"""PopTorch helper ops (PopTorch user guide, 4.6 "PopTorch ops" and 4.9 "Creating custom ops"): dynamic_slice
/ dynamic_update,
for_loop, recomputationCheckpoint, ctc_beam_search_decoder, custom_op,
NameScope, MultiConv; numbers against PyTorch on the CPU."""

from __future__ import annotations

import copy
import itertools
import math

import numpy as np
import pytest
import torch

import tilefx as poptorch
from tilefx.errors import Error


def _train_ref(model, args, steps=2, lr=0.1):
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        out = model(*args)
        (out[-1] if isinstance(out, tuple) else out).backward()
        opt.step()


class _Dyn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 6)

    def forward(self, x, start, y):
        h = self.fc(x)
        part = poptorch.dynamic_slice(h, 1, start, 3, 2)  # h[:, start:start + 3:2]: columns start, start + 2
        upd = poptorch.dynamic_update(h, part * 3.0, 1, start, 2)
        loss = ((upd - y) ** 2).mean() + part.sum()
        return part, loss


def test_dynamic_slice_and_update_train_like_pytorch():
    torch.manual_seed(0)
    model = _Dyn()
    ref = copy.deepcopy(model)
    x, y, start = torch.randn(4, 6), torch.randn(4, 6), torch.tensor([1])
    _train_ref(ref, (x, start, y))
    ex = poptorch.trainingModel(model, optimizer=poptorch.optim.SGD(model.parameters(), lr=0.1))
    for _ in range(2):
        ex(x, start, y)
    ex.copyWeightsToHost()
    for a, b in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert "ipu.dynamic_slice" in ex.ir("import") and "ipu.dynamic_update" in ex.ir("import")


def test_dynamic_slice_start_is_a_runtime_value_and_out_of_range_is_an_error():
    class M(torch.nn.Module):
        def forward(self, x, start):
            return poptorch.dynamic_slice(x, 0, start, 3, 1)

    x = torch.arange(24.0).reshape(6, 4)
    ex = poptorch.inferenceModel(M())
    torch.testing.assert_close(ex(x, torch.tensor([0])), x[0:3])
    torch.testing.assert_close(ex(x, torch.tensor([3])), x[3:6])  # same program, new start
    with pytest.raises(Error, match=r"dynamic_slice: start index 4 is out of range"):
        ex(x, torch.tensor([4]))
    with pytest.raises(Error, match="must be a torch.tensor"):
        poptorch.dynamic_slice(x, 0, 1, 3, 1)
    with pytest.raises(Error, match="does not fit in dimension 0"):
        poptorch.dynamic_slice(x, 0, torch.tensor([0]), 7, 1)
    with pytest.raises(Error, match="src has shape"):
        poptorch.dynamic_update(x, torch.zeros(2, 3), 0, torch.tensor([0]), 2)


@pytest.mark.parametrize("step", [1, 2, 3])
def test_dynamic_slice_is_a_python_slice_with_a_runtime_start(step):
    """dynamic_slice(t, dim, start, size, step) is t[start:start + size:step]
    along dim: ceil(size / step) elements (PopTorch's definition)."""
    class M(torch.nn.Module):
        def forward(self, x, start):
            return poptorch.dynamic_slice(x, 1, start, 4, step) * 2.0

    x = torch.arange(24.0).reshape(3, 8)
    ex = poptorch.inferenceModel(M())
    for s in (0, 3, 4):
        want = x[:, s:s + 4:step] * 2.0
        torch.testing.assert_close(poptorch.dynamic_slice(x, 1, torch.tensor([s]), 4, step) * 2.0, want)
        torch.testing.assert_close(ex(x, torch.tensor([s])), want)


def test_slice_bounds_from_constant_tensors_train_like_pytorch():
    """`t[s:s + 2:2, r:r + 4:2]` with `s` and `r` tensors the model holds (not
    inputs): the trace reads their values on the host and slices statically."""
    s, r = torch.tensor([1]), torch.tensor([0])

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.linspace(0.5, 1.5, 32).reshape(4, 8))

        def forward(self, x):
            out = (x * self.w)[s:s + 2:2, r:r + 4:2]
            return out, out.square().sum()

    torch.manual_seed(0)
    model, x = M(), torch.randn(4, 8)
    ref = copy.deepcopy(model)
    want = ref(x)[0]
    _train_ref(ref, (x,))
    ex = poptorch.trainingModel(model, optimizer=poptorch.optim.SGD(model.parameters(), lr=0.1))
    torch.testing.assert_close(ex(x)[0], want)
    ex(x)
    ex.copyWeightsToHost()
    torch.testing.assert_close(model.w, ref.w)


def test_slice_bounds_from_an_input_tensor_are_a_clear_error():
    class M(torch.nn.Module):
        def forward(self, x, s):
            return x[s:s + 2]

    with pytest.raises(Error, match="data-dependent operation aten::_local_scalar_dense"):
        poptorch.inferenceModel(M())(torch.arange(8.0), torch.tensor([1]))


def test_dynamic_slice_and_update_errors_are_poptorchs():
    x, start = torch.arange(8.0), torch.tensor([1])
    with pytest.raises(Error, match=r"^The start and end of a slice must be different\.$"):
        poptorch.dynamic_slice(x, 0, start, 0, 1)
    with pytest.raises(Error, match="^Taking a slice of a tensor with the end less than the start"):
        poptorch.dynamic_slice(x, 0, start, -2, 2)
    with pytest.raises(Error, match=r"^The size of the slice \(7\) must be a factor of the slicing "
                                    r"dimension \(8\)\.$"):
        poptorch.dynamic_slice(x, 0, start, 7, 1)
    with pytest.raises(Error, match="^The start and end of a slice must be different"):
        poptorch.dynamic_update(x, x[:0], 0, start, 0)
    with pytest.raises(Error, match=r"same dimensionality\. \(2\) vs \(1\)"):
        poptorch.dynamic_update(x.reshape(2, 4), torch.zeros(4), 0, start, 1)
    with pytest.raises(Error, match=r"same dtype\. \(torch\.float32 vs torch\.int32\)"):
        poptorch.dynamic_update(x, torch.tensor([-1]), 0, start, 1)
    # an update's size need not divide the dimension
    torch.testing.assert_close(poptorch.dynamic_update(x[:3], torch.zeros(2), 0, start, 2),
                               torch.tensor([0.0, 0.0, 0.0]))


class _Loop(torch.nn.Module):
    def __init__(self, count):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)
        self.count = count

    def forward(self, x, h):
        def body(a, b):
            return torch.tanh(self.fc(a) + b), b * 0.5
        return poptorch.for_loop(self.count, body, [x, h])


def test_for_loop_runs_its_traced_body_count_times():
    torch.manual_seed(0)
    x, h = torch.randn(3, 8), torch.randn(3, 8)
    costs = {}
    for count in (1, 4):
        model = _Loop(count).eval()
        ref = model(x, h)
        ex = poptorch.inferenceModel(model)
        out = ex(x, h)
        for a, b in zip(out, ref):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
        ir = ex.ir("graph")
        assert ir.count("ipu.for") == 1 and ir.count("aten.addmm") == 1  # traced once
        assert f"count = {count} : i64" in ir
        costs[count] = ex.profile.cycles_by_op()["ipu.for"]
    assert costs[4] == 4 * costs[1]


def test_for_loop_body_updating_its_inputs_in_place():
    """Body inputs are passed by value: `y += 1` in the body updates the
    iteration's copy, never the model's input (PopTorch's for_loop)."""
    class M(torch.nn.Module):
        def forward(self, x, z):
            def body(y, w):
                y += 1
                w.mul_(2.0)
                w += y.float()
                return y, w

            return poptorch.for_loop(3, body, [x, z])

    x, z = torch.ones(1, 5, dtype=torch.int32), torch.arange(5.0).reshape(1, 5)
    x0, z0 = x.clone(), z.clone()
    want = M()(x.clone(), z.clone())
    got = poptorch.inferenceModel(M())(x, z)
    assert torch.equal(x, x0) and torch.equal(z, z0)
    assert torch.equal(got[0], x0 * 4) and torch.equal(got[0], want[0])
    torch.testing.assert_close(got[1], want[1])


def test_for_loop_checks_its_body_and_is_inference_only():
    class Bad(torch.nn.Module):
        def forward(self, x):
            return poptorch.for_loop(2, lambda a: a.sum(0), [x])

    with pytest.raises(Error, match=r"for_loop: body output 0 is torch.float32\[3\] but input 0 is"):
        poptorch.inferenceModel(Bad())(torch.ones(2, 3))
    with pytest.raises(ValueError, match="to be a list of tensors"):
        poptorch.for_loop(2, lambda a: a, (torch.ones(2),))

    class NotAList(torch.nn.Module):
        def forward(self, x):
            return poptorch.for_loop(2, lambda a: a, x)

    # raised inside forward while tracing: still PopTorch's ValueError (its
    # loop_test catches that class), and a tilefx.Error naming the module and line
    with pytest.raises(ValueError, match=r"\(Object is not list\)") as e:
        poptorch.inferenceModel(NotAList())(torch.ones(2))
    assert isinstance(e.value, Error) and "NotAList" in str(e.value) and e.value.location
    model = _Loop(2)

    class WithLoss(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = model

        def forward(self, x, h):
            return self.inner(x, h)[0].sum()

    # PopTorch's own rule and words (its loop_test.py: test_loop_training)
    import warnings

    with warnings.catch_warnings(record=True) as caught, \
            pytest.raises(Error, match=r"poptorch.for_loop\(\) is only supported in inference"):
        warnings.simplefilter("always")
        poptorch.trainingModel(WithLoss())(torch.ones(3, 8), torch.ones(3, 8))
    # the error alone: no note from torch's anomaly mode about where the backward failed
    assert not [w for w in caught if "Error detected in" in str(w.message)]


class _Deep(torch.nn.Module):
    def __init__(self, checkpoints):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(32, 32) for _ in range(4)])
        self.checkpoints = checkpoints

    def forward(self, x, y):
        for i, layer in enumerate(self.layers):
            x = torch.tanh(layer(x))
            if self.checkpoints and i % 2 == 1:
                x = poptorch.recomputationCheckpoint(x)
        return torch.nn.functional.mse_loss(x, y)


def test_ipu_print_tensor_formats_and_prints_the_gradient(capfd):
    """PopTorch's ipu_print_tensor arguments: the print is formatted as asked
    (digits, float format, separator, brackets, summarised past the
    threshold), and in training the gradient is printed too, titled
    `<title>_gradient`, unless print_gradient=False. The values pass through."""
    class Printing(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.tensor([1.0, 2.0, 3.0]))

        def forward(self, x):
            h = poptorch.ipu_print_tensor(x * self.w, "h", digits=2, float_format="fixed")
            y = poptorch.ipu_print_tensor(h + 1, "y", print_gradient=False, separator=" ",
                                          open_bracket="{", close_bracket="}")
            return y, poptorch.identity_loss((y * y).sum(), reduction="none")

    model = Printing()
    reference = copy.deepcopy(model)
    x = torch.tensor([1.0, 1.0, 1.0])
    training = poptorch.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    y, loss = training(x)
    want_y, want_loss = reference(x)
    torch.testing.assert_close(y, want_y.detach())
    torch.testing.assert_close(loss, want_loss.detach())
    lines = [line for line in capfd.readouterr().out.splitlines() if line.startswith(("h", "y"))]
    # dloss/dh = 2 (h + 1) = (4, 6, 8)
    assert lines == ["h: (1.00, 2.00, 3.00)", "y: {2. 3. 4.}", "h_gradient: (4.00, 6.00, 8.00)"]

    class Long(torch.nn.Module):
        def forward(self, x):
            return poptorch.ipu_print_tensor(x, "long", summarise_threshold=4, edge_items=1,
                                             float_format="scientific", digits=1) * 2

    x = torch.arange(6.0)
    torch.testing.assert_close(poptorch.inferenceModel(Long())(x), x * 2)
    assert "long: (0.0e+00, ..., 5.0e+00)" in capfd.readouterr().out
    with pytest.raises(Error, match="float_format must be one of auto, fixed, scientific, none"):
        poptorch.ipu_print_tensor(x, float_format="hex")
    with pytest.raises(Error, match="digits must be a non-negative int"):
        poptorch.ipu_print_tensor(x, digits=-1)
    with pytest.raises(Error, match="nop: expected a tensor, got list"):  # (was the op schema's message)
        poptorch.nop([x])


def test_ipu_print_tensor_without_a_title_prints_the_tensors_id(capfd):
    """The guide's own example, `ipu_print_tensor(x)` without a title, prints
    the tensor's id as PopART does (it printed `tensor:` for every untitled
    print): an argument's or parameter's name, else the module path of the op
    that makes it and its node's unique name; the gradient's print is
    `<id>_gradient`."""
    class Untitled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(2, 2)
            self.bias = torch.nn.Parameter(torch.tensor(0.5))

        def forward(self, x):
            x = poptorch.ipu_print_tensor(x)
            b = poptorch.ipu_print_tensor(self.bias)
            h = poptorch.ipu_print_tensor(self.fc(x) + 1)
            y = poptorch.ipu_print_tensor(self.fc(h))
            return y, poptorch.identity_loss((y * b).sum(), reduction="none")

    torch.manual_seed(0)
    model = Untitled()
    x = torch.tensor([[1.0, -1.0]])
    y, _ = poptorch.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.0))(x)
    titles = [line.split(":")[0] for line in capfd.readouterr().out.splitlines()
              if not line.startswith(("Graph compilation", " ", "["))]
    assert titles == ["x", "bias", "add", "fc/addmm_1", "fc/addmm_1_gradient", "add_gradient",
                      "bias_gradient"], titles
    torch.testing.assert_close(y, model(x)[0].detach())


def test_recomputation_trades_activation_memory_for_cycles():
    torch.manual_seed(0)
    x, y = torch.randn(256, 32), torch.randn(256, 32)
    plain = _Deep(False)
    ref = copy.deepcopy(plain)
    _train_ref(ref, (x, y))
    stats = {}
    for ck in (False, True):
        model = _Deep(ck)
        model.load_state_dict(plain.state_dict())
        ex = poptorch.trainingModel(model, optimizer=poptorch.optim.SGD(model.parameters(), lr=0.1))
        for _ in range(2):
            ex(x, y)
        ex.copyWeightsToHost()
        for a, b in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
        mem = ex.profile.memory[0]
        acts = sum(t.nbytes for t in mem.tensors if t.kind in ("activation", "stash"))
        stats[ck] = (acts, ex.profile.total_cycles, ex.ir("graph").count("aten.tanh"))
    assert stats[True][0] < stats[False][0]  # fewer bytes kept for the backward
    assert stats[True][1] > stats[False][1]  # paid for with recomputed ops
    assert stats[True][2] > stats[False][2]  # tanh recomputed in the backward
    assert poptorch.recomputationCheckpoint(torch.ones(2), torch.ones(3))[1].shape == (3,)


def _ctc_best_by_enumeration(lp: np.ndarray, blank: int) -> tuple[tuple, float]:
    """Exact: sum the probabilities of all alignments of every label sequence."""
    T, C = lp.shape
    totals: dict[tuple, float] = {}
    for path in itertools.product(range(C), repeat=T):
        labels, prev = [], None
        for c in path:
            if c != blank and c != prev:
                labels.append(c)
            prev = c
        p = math.exp(sum(lp[t, c] for t, c in enumerate(path)))
        totals[tuple(labels)] = totals.get(tuple(labels), 0.0) + p
    best = max(totals.items(), key=lambda kv: kv[1])
    return best[0], math.log(best[1])


def test_ctc_beam_search_decoder_finds_the_most_likely_labels():
    torch.manual_seed(3)
    T, B, C = 5, 2, 3
    log_probs = torch.randn(T, B, C).log_softmax(-1)
    lengths = torch.tensor([5, 4], dtype=torch.int32)

    class M(torch.nn.Module):
        def forward(self, lp, n):
            return poptorch.ctc_beam_search_decoder(lp, n, blank=0, beam_width=50, top_paths=2)

    ex = poptorch.inferenceModel(M())
    probs, lens, paths = ex(log_probs, lengths)
    assert probs.shape == (B, 2) and lens.shape == (B, 2) and paths.shape == (B, 2, T)
    for b in range(B):
        labels, logp = _ctc_best_by_enumeration(log_probs[: int(lengths[b]), b].numpy(), 0)
        assert tuple(paths[b, 0, : lens[b, 0]].tolist()) == labels
        assert probs[b, 0].item() == pytest.approx(logp, abs=1e-5)
        assert probs[b, 0] >= probs[b, 1]
    with pytest.raises(Error, match="top_paths"):
        poptorch.ctc_beam_search_decoder(log_probs, lengths, beam_width=1, top_paths=2)


def test_custom_op_inference_training_and_attributes():
    def cube(x, bias, alpha=1.0):
        return [alpha * x ** 3 + bias, x * 3.0]

    def cube_grad(g0, g1, x, bias, alpha=1.0):
        return [3.0 * alpha * x ** 2 * g0 + 3.0 * g1, g0.sum(0)]

    poptorch.register_custom_op("Cube", "com.acme", 1, cube, grad=cube_grad)

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)
            self.bias = torch.nn.Parameter(torch.full((4,), 0.5))

        def forward(self, x, custom=True):
            h = self.fc(x)
            if custom:
                a, b = poptorch.custom_op([h, self.bias], "Cube", "com.acme", 1, example_outputs=[h, h],
                                          attributes={"alpha": 0.5})
            else:
                a, b = 0.5 * h ** 3 + self.bias, h * 3.0
            return a, (a.sum() + b.sum()) / 10

    torch.manual_seed(0)
    model = M()
    ref = copy.deepcopy(model)
    x = torch.randn(3, 4)
    out_ref = ref(x, False)
    out = poptorch.inferenceModel(copy.deepcopy(model))(x)
    torch.testing.assert_close(out[0], out_ref[0], rtol=1e-5, atol=1e-6)

    class Ref(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            return self.m(x, False)

    _train_ref(Ref(ref), (x,))
    ex = poptorch.trainingModel(model, optimizer=poptorch.optim.SGD(model.parameters(), lr=0.1))
    for _ in range(2):
        ex(x)
    ex.copyWeightsToHost()
    for a, b in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert 'op_name = "CubeGrad"' in ex.ir("graph")
    with pytest.raises(ValueError, match="same"):
        poptorch.custom_op([x], "Cube", "com.acme", 1, [x], attributes={"v": [1, 2.0]})
    with pytest.raises(Error, match="no op 'Nope'"):
        poptorch.custom_op([x], "Nope", "com.acme", 1, [x])


def test_name_scopes_and_module_paths_name_the_ops():
    class Inner(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, x):
            with poptorch.NameScope("act"):
                return torch.relu(self.fc(x))

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = Inner()

        def forward(self, x):
            return self.enc(x) * 2

    ex = poptorch.inferenceModel(M())
    ex.compile(torch.ones(2, 4))
    text = ex.ir("import")
    assert 'ipu.name = "enc/act/fc/addmm"' in text
    assert 'ipu.name = "enc/act/relu"' in text


def test_attribute_scopes_record_their_attributes_on_the_ops():
    """`with poptorch.Attribute(__outline={"layer": "embedding"}):` (PopTorch's
    misc_test) was a missing name: the model failed to trace. Its attributes
    reach every op inside, backward included; the numbers are unchanged."""
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gn1 = torch.nn.GroupNorm(4, 8)
            self.gn2 = torch.nn.GroupNorm(2, 8)

        def forward(self, x):
            with poptorch.Attribute(__outline={"layer": "embedding"}):
                x = self.gn1(x)
                with poptorch.Attribute(__outline={"layer": "inner"}, tag="t"):
                    x = x * 2
            return poptorch.identity_loss(self.gn2(x).pow(2), reduction="sum")

    torch.manual_seed(0)
    x = torch.randn(3, 8)
    model = M()
    ref = copy.deepcopy(model)
    trainer = poptorch.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    loss = trainer(x)
    want = ref(x)
    want.backward()
    torch.testing.assert_close(loss, want.detach(), rtol=1e-5, atol=1e-5)
    lines = trainer.ir("import").splitlines()
    outer = [ln for ln in lines if 'ipu.attributes = {__outline = {layer = "embedding"}}' in ln]
    inner = [ln for ln in lines if '__outline = {layer = "inner"}' in ln and 'tag = "t"' in ln]
    assert any('ipu.name = "gn1/native_group_norm"' in ln for ln in outer) and inner
    assert any("#ipu.place<fwd>" in ln for ln in outer) and any("#ipu.place<bwd>" in ln for ln in outer)
    assert not any("ipu.attributes" in ln and "gn2/" in ln for ln in lines)
    with pytest.raises(Error, match=r"Attribute: bad=\[1, 2\]: values must be"):
        poptorch.Attribute(bad=[1, 2])


def test_multiconv_groups_convolutions():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Conv2d(2, 4, 3)
            self.b = torch.nn.Conv2d(2, 4, 3)

        def forward(self, x, y):
            with poptorch.MultiConv().availableMemoryProportions([0.3, 0.4]):
                return self.a(x) + self.b(y)

    torch.manual_seed(0)
    model = M().eval()
    x, y = torch.randn(1, 2, 6, 6), torch.randn(1, 2, 6, 6)
    ex = poptorch.inferenceModel(model)
    torch.testing.assert_close(ex(x, y), model(x, y), rtol=1e-5, atol=1e-6)
    text = ex.ir("import")
    assert text.count("ipu.multiconv = {") == 2
    assert "ipu.available_memory = 3.000000e-01" in text and "ipu.available_memory = 4.000000e-01" in text
    with pytest.raises(Error, match="available memory proportions"):
        poptorch.MultiConv().availableMemoryProportions(1.5)


@pytest.mark.parametrize("given,convs", [(2, 3), (3, 2)])
def test_multiconv_options_per_convolution_must_match_the_convolutions(given, convs):
    """Two available memory proportions for three convolutions were an
    IndexError inside the frontend, three for two silently dropped one."""
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.convs = torch.nn.ModuleList(torch.nn.Conv2d(2, 4, 3) for _ in range(convs))

        def forward(self, x):
            with poptorch.MultiConv().availableMemoryProportions([0.5] * given):
                return sum(conv(x) for conv in self.convs)

    many = "more than 2" if given < convs else "2"
    with pytest.raises(Error, match=rf"MultiConv: availableMemoryProportions has {given} values for a "
                                    rf"multi-convolution of {many} convolutions"):
        poptorch.inferenceModel(M())(torch.randn(1, 2, 6, 6))


def test_multiconv_parallel_plan_is_faster_than_serial_on_small_convolutions():
    class M(torch.nn.Module):
        def __init__(self, plan):
            super().__init__()
            self.convs = torch.nn.ModuleList([torch.nn.Conv2d(4, 4, 3) for _ in range(4)])
            self.plan = plan

        def forward(self, *xs):
            with poptorch.MultiConv().planType(self.plan):
                ys = [c(x) for c, x in zip(self.convs, xs)]
            return sum(ys)

    xs = [torch.randn(1, 4, 8, 8) for _ in range(4)]
    cycles = {}
    for plan in (poptorch.enums.MultiConvPlanType.Parallel, poptorch.enums.MultiConvPlanType.Serial):
        ex = poptorch.inferenceModel(M(plan))
        ex.compile(*xs)
        cycles[plan.name] = ex.profile.total_cycles
    assert cycles["Parallel"] < cycles["Serial"]


def test_error_also_combines_builtin_classes_only():
    """errors.error_also: the tracing wrapper of a model's own exception is an
    Error and, for Python's built-in classes, that class too, with the plain
    message (KeyError's quotes are not added); a user's own class is not
    combined (its __str__ may need attributes its __init__ sets)."""
    from tilefx.errors import error_also

    for kind in (ValueError, TypeError, AssertionError, KeyError):
        e = error_also(kind)("tracing the model failed: x")
        assert isinstance(e, Error) and isinstance(e, kind) and str(e) == "tracing the model failed: x"

    class Coded(Exception):
        def __init__(self, code):
            super().__init__()
            self.code = code

        def __str__(self):
            return f"code {self.code}"

    assert error_also(Coded) is Error and error_also(RuntimeError) is Error
    # a built-in with a constructor of its own (ExceptionGroup takes a list of
    # exceptions): the model's exception is reported as a plain Error, not a TypeError
    assert error_also(ExceptionGroup) is Error

    class Grouped(torch.nn.Module):
        def forward(self, x):
            raise ExceptionGroup("two failures", [ValueError("a"), KeyError("b")])

    with pytest.raises(Error, match="tracing the model failed: ExceptionGroup: two failures"):
        poptorch.inferenceModel(Grouped())(torch.ones(2))


def test_a_models_own_exception_keeps_its_fields_as_a_tilefx_error():
    """A built-in exception a model raises while traced comes back as a
    tilefx.Error that is also its class and keeps its fields, so the
    handler written for the original still works: a KeyError's key
    (`args[0]`), an OSError's errno/strerror/filename, an AttributeError's
    name, a UnicodeDecodeError's position; the text is tilefx's."""
    import errno

    class Raises(torch.nn.Module):
        def __init__(self, exc):
            super().__init__()
            self.exc = exc

        def forward(self, x):
            raise self.exc

    cases = [
        (KeyError("missing"), lambda e: e.args == ("missing",)),
        (FileNotFoundError(errno.ENOENT, "No such file", "a.txt"),
         lambda e: (e.errno, e.strerror, e.filename, e.args) == (errno.ENOENT, "No such file", "a.txt",
                                                                  (errno.ENOENT, "No such file"))),
        (AttributeError("no attribute", name="weight"), lambda e: e.name == "weight"),
        (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "bad byte"),
         lambda e: (e.encoding, e.start, e.end, e.reason) == ("utf-8", 0, 1, "bad byte")),
    ]
    for exc, fields_kept in cases:
        with pytest.raises(type(exc)) as info:
            poptorch.inferenceModel(Raises(exc))(torch.ones(2))
        e = info.value
        assert isinstance(e, Error) and fields_kept(e), (type(exc), e.args)
        assert str(e).startswith(f"tracing the model failed: {type(exc).__name__}: ")
        assert e.message.startswith("tracing the model failed") and e.type == "frontend"
