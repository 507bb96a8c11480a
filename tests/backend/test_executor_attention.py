"""Attention run as ATen's fused kernel (analysis/attention.py, the
executor's attention step): the forms models write and torch decomposes,
against eager torch at tight tolerances; fully masked rows as op by op;
and where it must not apply (training steps, the numpy kernels)."""

import copy
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from xdsl.parser import Parser

import tilefx
from tilefx.lowering import aten_kernels
from tilefx.backend.executor import CompiledFunction
from tilefx.passes.pipelines import graph_context
from tilefx.passes.training_step import find_func
from models import Transformer, WithLoss

aten_kernels.install()  # ATen's kernels (and the attention one), as the API runs

RTOL, ATOL = 1e-5, 1e-6


def _attention_steps(executor) -> int:
    return sum("attention" in s.__qualname__.split(" ")[0] for s in executor._program.main.steps)


class Written(nn.Module):
    """Attention as a model writes it: q k^T / sqrt(d), an optional additive
    mask, softmax, @ v; `heads=0` keeps three dimensions (torch.bmm)."""

    def __init__(self, d=32, heads=4, scale="div"):
        super().__init__()
        self.heads, self.scale = heads, scale
        self.qkv = nn.Linear(d, 3 * d)

    def forward(self, x, mask=None):
        b, s, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        if self.heads:
            q, k, v = (t.reshape(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
            scores = q @ k.transpose(-2, -1)
            e = d // self.heads
        else:
            scores = torch.bmm(q, k.transpose(1, 2))
            e = d
        if self.scale == "div":
            scores = scores / math.sqrt(e)
        elif self.scale == "mul":
            scores = scores * (1 / math.sqrt(e))
        if mask is not None:
            scores = scores + mask
        p = torch.softmax(scores, dim=-1)
        return p @ v if self.heads else torch.bmm(p, v)


class Sdpa(nn.Module):
    """`F.scaled_dot_product_attention`, which eager torch runs as the fused kernel."""

    def __init__(self, d=32, heads=4, causal=False):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.qkv = nn.Linear(d, 3 * d)

    def forward(self, x, mask=None):
        b, s, d = x.shape
        q, k, v = (t.reshape(b, s, self.heads, d // self.heads).transpose(1, 2)
                   for t in self.qkv(x).chunk(3, dim=-1))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=self.causal)


class Grouped(nn.Module):
    """Grouped-query attention as Llama writes it: 2 key/value heads each
    repeated for 2 query heads (expand and reshape), then SDPA."""

    def __init__(self, d=32, heads=4, kv_heads=2):
        super().__init__()
        self.heads, self.kv_heads, self.e = heads, kv_heads, d // heads
        self.q = nn.Linear(d, d)
        self.kv = nn.Linear(d, 2 * kv_heads * self.e)

    def forward(self, x):
        b, s, d = x.shape
        q = self.q(x).reshape(b, s, self.heads, self.e).transpose(1, 2)
        k, v = (t.reshape(b, s, self.kv_heads, self.e).transpose(1, 2) for t in self.kv(x).chunk(2, dim=-1))
        rep = self.heads // self.kv_heads
        k, v = (t[:, :, None].expand(b, self.kv_heads, rep, s, self.e).reshape(b, self.heads, s, self.e)
                for t in (k, v))
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


class GroupedWritten(nn.Module):
    """Grouped-query attention as Hugging Face's eager attention writes it:
    `repeat_kv` (expand and reshape), then q k^T * scale + mask, softmax, @ v;
    or SDPA's own `enable_gqa`."""

    def __init__(self, d=32, heads=4, kv_heads=2, native=False):
        super().__init__()
        self.heads, self.kv_heads, self.e, self.native = heads, kv_heads, d // heads, native
        self.q = nn.Linear(d, d)
        self.kv = nn.Linear(d, 2 * kv_heads * self.e)

    def forward(self, x, mask):
        b, s, d = x.shape
        q = self.q(x).reshape(b, s, self.heads, self.e).transpose(1, 2)
        k, v = (t.reshape(b, s, self.kv_heads, self.e).transpose(1, 2) for t in self.kv(x).chunk(2, dim=-1))
        if self.native:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        rep = self.heads // self.kv_heads
        k, v = (t[:, :, None, :, :].expand(b, self.kv_heads, rep, s, self.e).reshape(b, self.heads, s, self.e)
                for t in (k, v))
        p = torch.softmax(q @ k.transpose(2, 3) * self.e ** -0.5 + mask, dim=-1)
        return (p @ v).transpose(1, 2).reshape(b, s, d)


class PerHead(nn.Module):
    """BART's form: q, k, v per (batch x head) in three dimensions, the
    scores viewed to (batch, heads, L, S) for a (batch, 1, L, S) mask. The
    kernel would take q as (1, batch x heads, L, E), which the mask does not
    fit: this one runs op by op."""

    def __init__(self, heads=4):
        super().__init__()
        self.heads = heads

    def forward(self, q, k, v, mask):
        n, length, e = q.shape
        scores = torch.bmm(q, k.transpose(1, 2)).view(n // self.heads, self.heads, length, -1)
        p = (scores / math.sqrt(e) + mask).softmax(-1)
        return torch.bmm(p.view(n, length, -1), v)


class FlatResult(nn.Module):
    """Heads split to four dimensions, then q, k^T and v flattened for
    torch.bmm, and the three-dimensional result used as it is: the kernel's
    output follows q's strided layout, so it is reshaped, not viewed
    (found in review)."""

    def __init__(self, d=16, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)

    def forward(self, x):
        b, s, d = x.shape
        h, e = self.heads, d // self.heads
        q, k, v = (t.reshape(b, s, h, e).transpose(1, 2) for t in self.qkv(x).chunk(3, -1))
        q, kt, v = q.reshape(b * h, s, e), k.transpose(-2, -1).reshape(b * h, e, s), v.reshape(b * h, s, e)
        return torch.bmm(torch.softmax(torch.bmm(q, kt) / math.sqrt(e), -1), v)


class Cross(nn.Module):
    """Cross-attention: queries of one length, keys and values of another."""

    def __init__(self, d=24, heads=3):
        super().__init__()
        self.mha = nn.MultiheadAttention(d, heads, batch_first=True)

    def forward(self, x, memory):
        return self.mha(x, memory, memory, need_weights=False)[0]


def _x(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


CASES = {
    "written, 4 heads": (lambda: Written(), lambda: (_x(2, 8, 32),)),
    "written, no heads": (lambda: Written(heads=0), lambda: (_x(3, 8, 32),)),
    "written, scale by a product": (lambda: Written(scale="mul"), lambda: (_x(2, 8, 32),)),
    "written, no scale": (lambda: Written(scale=None), lambda: (_x(2, 8, 32),)),
    "written, additive mask": (lambda: Written(), lambda: (_x(2, 8, 32), _x(2, 1, 1, 8, seed=1))),
    "written, causal mask": (lambda: Written(), lambda: (
        _x(2, 8, 32), torch.full((8, 8), float("-inf")).triu(1))),
    "sdpa": (lambda: Sdpa(), lambda: (_x(2, 8, 32),)),
    "sdpa, causal": (lambda: Sdpa(causal=True), lambda: (_x(2, 8, 32),)),
    "sdpa, float mask": (lambda: Sdpa(), lambda: (_x(2, 8, 32), _x(2, 4, 8, 8, seed=1))),
    "sdpa, boolean mask": (lambda: Sdpa(), lambda: (_x(2, 8, 32), _x(2, 1, 8, 8, seed=1) > 0)),
    "grouped keys and values": (lambda: Grouped(), lambda: (_x(2, 8, 32),)),
    "flattened heads, three-dimensional result": (lambda: FlatResult(), lambda: (_x(3, 5, 16),)),
    "multi-head attention, cross": (lambda: Cross(), lambda: (_x(2, 5, 24), _x(2, 7, 24, seed=1))),
    "transformer encoder": (lambda: Transformer(vocab=50, d=32, heads=4, layers=2, seq=8),
                            lambda: (torch.randint(0, 50, (2, 8), generator=torch.Generator().manual_seed(0)),)),
    "transformer, nn.MultiheadAttention": (
        lambda: Transformer(vocab=50, d=32, heads=4, layers=2, seq=8, torch_mha=True),
        lambda: (torch.randint(0, 50, (2, 8), generator=torch.Generator().manual_seed(0)),)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_inference_runs_attention_fused_and_matches_eager(name):
    make, inputs = CASES[name]
    torch.manual_seed(0)
    model = make().eval()
    args = inputs()
    with torch.no_grad():
        want = model(*args)
    ie = tilefx.inferenceModel(copy.deepcopy(model))
    got = ie(*args)
    assert _attention_steps(ie) >= 1
    torch.testing.assert_close(got, want, rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(ie(*args), want, rtol=RTOL, atol=ATOL)  # and again, from the same program


def test_a_mask_that_does_not_fit_the_kernel_runs_op_by_op():
    model = PerHead().eval()
    args = (_x(8, 5, 16), _x(8, 7, 16, seed=1), _x(8, 7, 16, seed=2), _x(2, 1, 5, 7, seed=3))
    with torch.no_grad():
        want = model(*args)
    ie = tilefx.inferenceModel(copy.deepcopy(model))
    torch.testing.assert_close(ie(*args), want, rtol=RTOL, atol=ATOL)
    assert _attention_steps(ie) == 0


def test_a_row_masked_out_entirely_is_nan_as_op_by_op():
    """The fused kernel gives 0 for a row of -inf scores, softmax NaN: with a
    mask of the model's own (no zeroing of such rows) the step computes the
    chain instead, so the row is NaN as in eager; other rows are the numbers."""
    torch.manual_seed(0)
    model = Written().eval()
    x = _x(2, 8, 32)
    mask = torch.zeros(2, 1, 1, 8)
    mask[1] = float("-inf")  # every key masked for the second sample
    with torch.no_grad():
        want = model(x, mask)
    ie = tilefx.inferenceModel(copy.deepcopy(model))
    got = ie(x, mask)
    assert _attention_steps(ie) == 1
    assert torch.isnan(want[1]).all() and torch.isnan(got[1]).all()
    torch.testing.assert_close(got, want, rtol=RTOL, atol=ATOL, equal_nan=True)
    # the same program with a mask that masks no whole row: fused again
    mask[1, ..., :4] = 0
    with torch.no_grad():
        want = model(x, mask)
    torch.testing.assert_close(ie(x, mask), want, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("native", [False, True])
@pytest.mark.parametrize("kv_heads", [2, 1])
def test_keys_and_values_shared_by_query_heads_are_read_unrepeated(native, kv_heads):
    """Grouped-query attention: the kernel takes the 2 key/value heads (1:
    multi-query, whose repeat needs no copy) for 4 query heads itself, so the
    ops that repeat them are group members and no step runs them; a fully
    masked row still falls back to the chain (with the heads repeated
    there), NaN as in eager."""
    from tilefx.analysis.attention import attention_groups

    torch.manual_seed(0)
    model = GroupedWritten(kv_heads=kv_heads, native=native).eval()
    x = _x(2, 8, 32)
    mask = torch.zeros(2, 1, 8, 8)
    with torch.no_grad():
        want = model(x, mask)
    ie = tilefx.inferenceModel(copy.deepcopy(model))
    torch.testing.assert_close(ie(x, mask), want, rtol=RTOL, atol=ATOL)
    (g,) = attention_groups(find_func(ie._program.module, "main"))
    assert tuple(g.key.type.get_shape()) == tuple(g.value.type.get_shape()) == (2, kv_heads, 8, 8)
    assert tuple(g.query.type.get_shape()) == (2, 4, 8, 8)
    assert sum(m.name == "aten.expand" and len(m.operands[0].type.get_shape()) == 5 for m in g.ops) == 2
    if kv_heads > 1:  # (one head's repeat is a view, with or without a copy)
        assert sum(m.name == "aten.clone" and len(m.operands[0].type.get_shape()) == 5 for m in g.ops) == 2
    # the one copy left merges the output's heads (transpose, reshape)
    assert sum(s.__qualname__.startswith("aten.clone") for s in ie._program.main.steps) == (0 if native else 1)
    mask[1, :, 2] = float("-inf")  # query 2 of sample 1 sees no key
    with torch.no_grad():
        want = model(x, mask)
    got = ie(x, mask)
    torch.testing.assert_close(got, want, rtol=RTOL, atol=ATOL, equal_nan=True)
    assert torch.isnan(got[1, 2]).all() != native  # SDPA zeroes such a row, the written chain gives NaN


def test_sdpa_zeroes_rows_masked_out_entirely_as_eager_does():
    torch.manual_seed(0)
    model = Sdpa().eval()
    x = _x(2, 8, 32)
    mask = torch.ones(2, 1, 8, 8, dtype=torch.bool)
    mask[0, :, 3] = False  # query 3 of sample 0 sees nothing
    with torch.no_grad():
        want = model(x, mask)
    ie = tilefx.inferenceModel(copy.deepcopy(model))
    got = ie(x, mask)
    assert _attention_steps(ie) == 1
    torch.testing.assert_close(got, want, rtol=RTOL, atol=ATOL, equal_nan=True)


def test_training_runs_attention_op_by_op():
    """A training step's backward reads the softmax's result: no group, and
    the step's numbers are eager's as before."""
    torch.manual_seed(0)
    base = Transformer(vocab=50, d=32, heads=4, layers=2, seq=8)
    x = torch.randint(0, 50, (2, 8), generator=torch.Generator().manual_seed(0))
    y = torch.randint(0, 50, (2, 8), generator=torch.Generator().manual_seed(1))
    ours = WithLoss(copy.deepcopy(base), nn.CrossEntropyLoss())
    ref = WithLoss(copy.deepcopy(base), nn.CrossEntropyLoss())
    tr = tilefx.trainingModel(ours, optimizer=tilefx.optim.SGD(ours.parameters(), lr=0.1))
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for _ in range(2):
        _, loss = tr(x, y)
        opt.zero_grad()
        _, want = ref(x, y)
        want.backward()
        opt.step()
        torch.testing.assert_close(loss, want.detach(), rtol=RTOL, atol=ATOL)
    assert _attention_steps(tr) == 0
    tr.copyWeightsToHost()
    for (n, p), q in zip(ours.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, rtol=RTOL, atol=ATOL, msg=n)


def test_numpy_kernels_run_attention_op_by_op(monkeypatch):
    monkeypatch.setenv("TILEFX_KERNELS", "numpy")
    torch.manual_seed(0)
    model = Written().eval()
    x = _x(2, 8, 32)
    with torch.no_grad():
        want = model(x)
    ie = tilefx.inferenceModel(copy.deepcopy(model))
    got = ie(x)
    assert _attention_steps(ie) == 0
    torch.testing.assert_close(got, want, rtol=RTOL, atol=ATOL)


def test_pipelined_inference_fuses_attention_in_each_stage():
    torch.manual_seed(0)
    model = Transformer(vocab=50, d=32, heads=4, layers=2, seq=8).eval()
    x = torch.randint(0, 50, (4, 8), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = model(x)
    staged = copy.deepcopy(model)
    staged.layers[1] = tilefx.BeginBlock(staged.layers[1], ipu_id=1)
    ie = tilefx.inferenceModel(staged, tilefx.Options().deviceIterations(2))
    got = ie(x)
    assert _attention_steps(ie) == 2
    torch.testing.assert_close(got, want, rtol=RTOL, atol=ATOL)


# q, k^T and v arguments of a hand-written group, v wider than the heads
IR = """
func.func @main(%q: tensor<6x5x4xf32>, %kt: tensor<6x4x7xf32>, %v: tensor<6x7x4xf32>, %m: tensor<5x7xf32>) -> tensor<6x5x4xf32> {
  %s = aten.bmm %q, %kt : tensor<6x5x4xf32>, tensor<6x4x7xf32> -> tensor<6x5x7xf32>
  %sc = aten.mul.Scalar %s {other = 0.5 : f64} : tensor<6x5x7xf32> -> tensor<6x5x7xf32>
  %x = aten.add.Tensor %sc, %m : tensor<6x5x7xf32>, tensor<5x7xf32> -> tensor<6x5x7xf32>
  %p = aten._softmax %x {dim = -1 : i64, half_to_float = false} : tensor<6x5x7xf32> -> tensor<6x5x7xf32>
  %o = aten.bmm %p, %v : tensor<6x5x7xf32>, tensor<6x7x4xf32> -> tensor<6x5x4xf32>
  func.return %o : tensor<6x5x4xf32>
}
"""


@pytest.mark.parametrize("fuse", [True, False])
def test_hand_written_ir_against_torch(fuse):
    f = CompiledFunction(find_func(Parser(graph_context(), IR).parse_module(), "main"), fuse=fuse)
    assert any("attention" in s.__qualname__ for s in f.steps) == fuse
    rng = np.random.default_rng(0)
    q, kt, v, m = (rng.standard_normal(s).astype(np.float32) for s in ((6, 5, 4), (6, 4, 7), (6, 7, 4), (5, 7)))
    (got,) = f(q, kt, v, m)
    tq, tkt, tv, tm = map(torch.from_numpy, (q, kt, v, m))
    want = torch.softmax(torch.bmm(tq, tkt) * 0.5 + tm, -1).bmm(tv)
    assert type(got) is np.ndarray
    torch.testing.assert_close(torch.from_numpy(got), want, rtol=RTOL, atol=ATOL)


# the scale a graph divides by as an argument (an ONNX constant comes in as one)
IR_RUNTIME_SCALE = """
func.func @main(%q: tensor<2x3x5x4xf32>, %k: tensor<2x3x7x4xf32>, %v: tensor<2x3x7x4xf32>, %c: tensor<SCALExf32>) -> tensor<2x3x5x4xf32> {
  %kt = aten.permute %k {dims = array<i64: 0, 1, 3, 2>} : tensor<2x3x7x4xf32> -> tensor<2x3x4x7xf32>
  %q3 = aten.view %q {size = array<i64: 6, 5, 4>} : tensor<2x3x5x4xf32> -> tensor<6x5x4xf32>
  %kc = aten.clone %kt : tensor<2x3x4x7xf32> -> tensor<2x3x4x7xf32>
  %k3 = aten.view %kc {size = array<i64: 6, 4, 7>} : tensor<2x3x4x7xf32> -> tensor<6x4x7xf32>
  %s = aten.bmm %q3, %k3 : tensor<6x5x4xf32>, tensor<6x4x7xf32> -> tensor<6x5x7xf32>
  %s4 = aten.view %s {size = array<i64: 2, 3, 5, 7>} : tensor<6x5x7xf32> -> tensor<2x3x5x7xf32>
  %x = aten.div.Tensor %s4, %c : tensor<2x3x5x7xf32>, tensor<SCALExf32> -> tensor<2x3x5x7xf32>
  %p = aten._softmax %x {dim = -1 : i64, half_to_float = false} : tensor<2x3x5x7xf32> -> tensor<2x3x5x7xf32>
  %p3 = aten.view %p {size = array<i64: 6, 5, 7>} : tensor<2x3x5x7xf32> -> tensor<6x5x7xf32>
  %v3 = aten.view %v {size = array<i64: 6, 7, 4>} : tensor<2x3x7x4xf32> -> tensor<6x7x4xf32>
  %o = aten.bmm %p3, %v3 : tensor<6x5x7xf32>, tensor<6x7x4xf32> -> tensor<6x5x4xf32>
  %o4 = aten.view %o {size = array<i64: 2, 3, 5, 4>} : tensor<6x5x4xf32> -> tensor<2x3x5x4xf32>
  func.return %o4 : tensor<2x3x5x4xf32>
}
"""


@pytest.mark.parametrize("shape", ["", "1"])
@pytest.mark.parametrize("divisor", [2.0, 0.0])
def test_a_scale_known_only_at_run_time(shape, divisor):
    """A divisor the graph takes as an argument (0-d, or (1,) as ONNX gives
    it) is read as the step runs; dividing by 0 gives what op by op gives."""
    ir = IR_RUNTIME_SCALE.replace("SCALEx", f"{shape}x" if shape else "")
    f = CompiledFunction(find_func(Parser(graph_context(), ir).parse_module(), "main"))
    assert any("attention" in s.__qualname__ for s in f.steps)
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3, 5, 4), (2, 3, 7, 4), (2, 3, 7, 4)))
    c = np.full((1,) if shape else (), divisor, np.float32)
    (got,) = f(q, k, v, c)
    tq, tk, tv = map(torch.from_numpy, (q, k, v))
    want = torch.softmax(tq @ tk.transpose(-2, -1) / torch.from_numpy(c), -1) @ tv
    torch.testing.assert_close(torch.from_numpy(got), want, rtol=RTOL, atol=ATOL, equal_nan=True)


@pytest.mark.parametrize("dynamo", [False, True])
def test_onnx_exports_of_attention_are_grouped(dynamo):
    """torch.onnx.export's graphs of the hand-written attention (the scale an
    initializer: a 0-d argument from either exporter) form the
    groups the executor fuses (their numbers: tests/lowering/test_onnx_frontend.py, against
    onnxruntime)."""
    import onnx
    from xdsl.dialects import func

    from onnx_export import export
    from tilefx.lowering.from_onnx import import_onnx
    from tilefx.analysis.attention import attention_groups

    torch.manual_seed(0)
    proto = export(Transformer(), torch.randint(0, 20, (2, 6)), dynamo)
    imported = import_onnx(onnx.load_model_from_string(proto))
    module = getattr(imported, "module", imported)
    fns = [op for op in module.walk() if isinstance(op, func.FuncOp)]
    groups = [g for fn in fns for g in attention_groups(fn)]
    assert len(groups) == 2 and all(g.scale_op == "div" for g in groups)
