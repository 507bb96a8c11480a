"""What the OpInfo sweep (`make opinfo`, tests/fuzz/opinfo_sweep.py: PyTorch's
own operator database through tilefx) found, each against PyTorch on the
CPU: inference outputs equal, and for training the gradient of a fixed
weighting of the outputs (read back as the anchored `Gradient___w`)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import tilefx

TOL = {"rtol": 1e-5, "atol": 1e-6}


class _Op(nn.Module):
    """fn(w, *inputs) of one parameter w; training returns a fixed weighting
    of the output summed as the loss."""

    def __init__(self, fn, w, training=False):
        super().__init__()
        self.fn, self.training_loss = fn, training
        self.w = nn.Parameter(w.clone())

    def forward(self, *inputs):
        y = self.fn(self.w, *inputs)
        if not self.training_loss:
            return y
        probe = torch.sin(torch.arange(y.numel(), dtype=y.dtype) + 1).reshape(y.shape)
        return tilefx.identity_loss((y * probe).sum(), reduction="none")


def _check(fn, w, *inputs, tol=TOL, training=True):
    """Inference output and (training) loss and gradient equal eager's."""
    want = fn(w, *inputs)
    got = tilefx.inferenceModel(_Op(fn, w))(*inputs)
    torch.testing.assert_close(got, want, **tol)
    if not training:
        return
    ref = _Op(fn, w, training=True)
    loss = ref(*inputs)
    loss.backward()
    opts = tilefx.Options()
    opts.anchorTensor("grad", "Gradient___w")
    ours = _Op(fn, w, training=True)
    model = tilefx.trainingModel(ours, opts, optimizer=tilefx.optim.SGD(ours.parameters(), lr=0.0))
    torch.testing.assert_close(model(*inputs), loss.detach(), **tol)
    torch.testing.assert_close(model.getAnchoredTensor("grad"), ref.w.grad, **tol)


def test_repeated_multi_result_op_reads_a_result_the_first_left_unread():
    """torch.linalg.inv called twice: the first call's inverse is unread (only
    its error check reads the info result), so its step converted the info
    only; the executor took the second call for a repeat of the first and
    read an inverse that was never made (AttributeError inside the program).
    A repeat now reuses the first op's results only where the first read
    every result the repeat reads."""
    torch.manual_seed(0)
    w = torch.randn(4, 4) + 4 * torch.eye(4)

    def twice(w):
        torch.linalg.inv(w)  # checked for a singular matrix, the inverse dropped
        return torch.linalg.inv(w)

    _check(twice, w)


def test_sparse_input_is_a_clear_error():
    """A sparse input failed inside the executor's batch slicing ('Sparse CSR
    tensors do not have strides'); it is now refused by name."""
    class MM(nn.Module):
        def forward(self, a, b):
            return a @ b

    a = torch.eye(3).to_sparse_csr()
    with pytest.raises(tilefx.Error, match=r"input a is a sparse_csr tensor: the IPU takes dense tensors"):
        tilefx.inferenceModel(MM())(a, torch.ones(3, 2))


@pytest.mark.parametrize("name, kwargs", [("cov", {}), ("cov", {"correction": 0}), ("corrcoef", {}),
                                          ("cov", {"fweights": torch.tensor([1, 2, 1, 3, 1])})])
def test_cov_bound_before_tracing(name, kwargs):
    """`torch.cov` / `torch.corrcoef` held before tracing (`from torch import
    cov`, PyTorch's OpInfo): tilefx swapped the module attribute only, so the
    held builtin reached ATen's composite and its host reads (aten::equal).
    The static formula is now the ops' own composite kernel while tracing."""
    torch.manual_seed(0)
    fn = getattr(torch, name)  # held, as an import at the top of a user's file holds it
    _check(lambda w: fn(w, **kwargs), torch.randn(3, 5))


_V = torch.tensor([0.5, -1.0, 2.0])
COPIES_AND_MORE = {
    "addmv": lambda w: torch.addmv(torch.ones(4), w, _V, beta=0.5, alpha=2.0),
    "view_copy": lambda w: torch.view_copy(w, (3, 4)),
    "permute_copy": lambda w: torch.permute_copy(w, (1, 0)) * 2,
    "narrow_copy": lambda w: torch.narrow_copy(w, 1, 1, 2),
    "unbind_copy": lambda w: torch.stack(torch.unbind_copy(w, 1)[::-1]),
    "sgn": lambda w: torch.sgn(w) * w,  # autograd's zero gradient of sgn: an efficient zero tensor
    "adaptive_max_pool3d": lambda w: torch.nn.functional.adaptive_max_pool3d(w.reshape(1, 2, 2, 3), (1, 2, 2)),
    "adaptive_max_pool3d_uneven": lambda w: torch.nn.functional.adaptive_max_pool3d(w.reshape(1, 1, 4, 3), (3, 2, 2)),
    "batch_norm_with_update": lambda w: torch.ops.aten._batch_norm_with_update(
        w.reshape(2, 2, 3), torch.tensor([1.5, 0.5]), torch.tensor([0.1, -0.2]), torch.zeros(2), torch.ones(2),
        0.1, 1e-5)[0],
}


@pytest.mark.parametrize("name", list(COPIES_AND_MORE))
def test_ops_outside_core_aten_run_and_train(name):
    """Ops the sweep found unsupported that torch's full decomposition table
    (or a decomposition of tilefx's) writes in ops tilefx runs: addmv, the
    *_copy forms of views, adaptive_max_pool3d (a kernel and its backward,
    as the 2-D one's), batch_norm's backward,
    sgn's zero gradient."""
    torch.manual_seed(0)
    _check(COPIES_AND_MORE[name], torch.randn(4, 3))


@pytest.mark.parametrize("beta, alpha", [(0, 1.5), (0.5, 0), (0, 0), (0.5, 1.5)])
def test_addmv_drops_a_zero_scaled_term_with_its_nans(beta, alpha):
    """torch.addmv ignores self when beta == 0 and mat @ vec when alpha == 0,
    NaNs included (a product with 0 would make them NaN)."""
    mat, vec, inp = torch.randn(4, 3), torch.randn(3), torch.randn(4)
    if beta == 0:
        inp[0] = float("nan")
    if alpha == 0:
        mat[0, 0], vec[0] = float("nan"), float("nan")

    class M(torch.nn.Module):
        def forward(self, inp, mat, vec):
            return torch.addmv(inp, mat, vec, beta=beta, alpha=alpha) + torch.zeros_like(inp)

    want = M()(inp, mat, vec)
    assert not want.isnan().any()
    torch.testing.assert_close(tilefx.inferenceModel(M())(inp, mat, vec), want)


def test_random_ops_from_torchs_references():
    """cauchy_, log_normal_, geometric_ (torch's references: transforms of a
    uniform draw) and randint_like(x, low, high) run on tilefx's stream:
    their support and dtypes are torch's."""
    class Draws(nn.Module):
        def forward(self, x):
            return (torch.empty_like(x).log_normal_(0.0, 0.5), torch.empty_like(x).geometric_(0.3),
                    torch.empty_like(x).cauchy_(1.0, 2.0), torch.randint_like(x, 3, 7))

    x = torch.zeros(2000)
    log_normal, geometric, cauchy, randint = tilefx.inferenceModel(Draws())(x)
    assert all(t.dtype == torch.float32 and t.shape == x.shape for t in (log_normal, geometric, cauchy, randint))
    assert (log_normal > 0).all() and abs(log_normal.log().mean()) < 0.1
    assert (geometric >= 1).all() and (geometric == geometric.round()).all() and abs(geometric.mean() - 1 / 0.3) < 0.3
    assert abs(cauchy.median() - 1.0) < 0.3
    assert set(randint.unique().tolist()) == {3.0, 4.0, 5.0, 6.0}


def test_embedding_bag_without_gradients():
    """nn.EmbeddingBag whose weight needs no gradient (frozen, or a buffer)
    traces ATen's forward-only variant, which had no lowering."""
    torch.manual_seed(0)
    bag = nn.EmbeddingBag(6, 3, mode="max").requires_grad_(False)
    idx, offsets = torch.tensor([0, 2, 1, 5, 3]), torch.tensor([0, 2])
    torch.testing.assert_close(tilefx.inferenceModel(bag)(idx, offsets), bag(idx, offsets), **TOL)


@pytest.mark.parametrize("shape, size", [((3, 4), 5), ((3, 4), 20), ((2, 3, 2), 4), ((6,), 2), ((0, 3), 2)])
def test_nonzero_static_equals_eager(shape, size):
    """nonzero_static has a static shape (size x ndim): it runs, where
    nonzero stays a data-dependent error."""
    torch.manual_seed(0)
    x = torch.randn(*shape).relu()

    class NonzeroStatic(nn.Module):
        def forward(self, x):
            return torch.nonzero_static(x, size=size, fill_value=-7)

    torch.testing.assert_close(tilefx.inferenceModel(NonzeroStatic())(x),
                               torch.nonzero_static(x, size=size, fill_value=-7))


def test_multinomial_draws_by_the_probabilities():
    """torch.multinomial (sampling in text generation) runs on tilefx's
    stream: with replacement each category comes up in proportion to its
    weight; without, each row's draws are distinct, zero-weight categories
    never come while others remain, and the first draw follows the weights."""
    weights = torch.tensor([[1.0, 0.0, 3.0, 4.0], [0.0, 5.0, 0.0, 5.0]])

    class Draw(nn.Module):
        def forward(self, w):
            return torch.multinomial(w, 4000, replacement=True), torch.multinomial(w[:1].expand(4000, 4), 3)

    opts = tilefx.Options().randomSeed(3)
    with_r, without = tilefx.inferenceModel(Draw(), opts)(weights)
    assert with_r.dtype == without.dtype == torch.int64
    assert with_r.shape == (2, 4000) and without.shape == (4000, 3)
    for row, w in zip(with_r, weights):
        freq = torch.bincount(row, minlength=4).float() / row.numel()
        torch.testing.assert_close(freq, w / w.sum(), atol=0.03, rtol=0)
    assert (without != 1).all()  # the zero-weight category, with three others to draw
    assert (without.sort(1).values == torch.tensor([0, 2, 3])).all()
    first = torch.bincount(without[:, 0], minlength=4).float() / 4000
    torch.testing.assert_close(first, weights[0] / weights[0].sum(), atol=0.03, rtol=0)


@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_linear_cross_entropy_with_chunking_options(reduction):
    """F.linear_cross_entropy(..., options=LinearCrossEntropyOptions()) runs
    torch's chunked custom op, whose body the trace cannot see: traced, the
    loss is computed whole (loss and gradients as torch's)."""
    torch.manual_seed(0)
    x, target = torch.randn(6, 4), torch.tensor([0, 4, 2, 1, 4, 3])
    options = nn.LinearCrossEntropyOptions(batch_chunk_size=2)

    def fn(w, x, target):
        return torch.nn.functional.linear_cross_entropy(x, w, target, reduction=reduction, options=options)

    _check(fn, torch.randn(5, 4), x, target, tol={"rtol": 1e-5, "atol": 1e-5})


@pytest.mark.parametrize("r, with_replacement, n", [(2, False, 4), (3, True, 3), (3, False, 2)])
def test_combinations_trains_like_eager(r, with_replacement, n):
    """torch.combinations selects its rows with masked_select in ATen (a
    data-dependent shape to the trace), yet the rows depend only on the
    length and r: a constant gather here."""
    torch.manual_seed(0)
    _check(lambda w: torch.combinations(w, r, with_replacement), torch.randn(n))


@pytest.mark.parametrize("shape, index", [((), 0), ((3, 4), [[0, 5], [-1, 11]]), ((5,), 3)])
def test_take_with_a_0d_index_or_tensor(shape, index):
    """torch.take with a 0-d index (or of a 0-d tensor): torch's decomposition
    indexed with the 0-d tensor, Python's scalar indexing, a host read."""
    torch.manual_seed(0)
    _check(lambda w: torch.take(w, torch.tensor(index)), torch.randn(shape))


class _Resize(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.size = size

    def forward(self, x):
        y = x * 2
        return y.resize_(self.size) + 1


@pytest.mark.parametrize("size", [(2, 5), (12,), (1, 3, 4), ()])
def test_resize_keeps_the_first_elements(size):
    """Tensor.resize_ to as many or fewer elements: the first ones in
    row-major order, as ATen keeps a contiguous tensor's storage."""
    x = torch.randn(3, 4)
    torch.testing.assert_close(tilefx.inferenceModel(_Resize(size))(x), _Resize(size)(x.clone()))


def test_resize_that_grows_is_a_clear_error():
    """Growing a tensor leaves its new elements uninitialised in PyTorch."""
    with pytest.raises(tilefx.Error, match=r"resize_ from \[3, 4\] to \[4, 4\] grows the tensor"):
        tilefx.inferenceModel(_Resize((4, 4)))(torch.randn(3, 4))


def test_gather_and_scatter_with_an_empty_index_of_more_dimensions():
    """torch accepts an empty index with more dimensions than the tensor
    (gather of a 1-D tensor by a (2, 0) index): the numpy kernels indexed
    with it and failed inside the program (IndexError)."""
    class Empty(nn.Module):
        def forward(self, x, i):
            return torch.gather(x, 0, i), torch.scatter(x, 0, i, 1.0), torch.scatter_add(x, 0, i, torch.ones(2, 0))

    x, i = torch.randn(5), torch.zeros(2, 0, dtype=torch.int64)
    for got, want in zip(tilefx.inferenceModel(Empty())(x, i), Empty()(x, i)):
        torch.testing.assert_close(got, want)


def test_batched_product_of_an_empty_batch():
    """A stack of no matrices (torch.linalg.matrix_power of a 0 x 3 x 3
    tensor): the machine model's matmul plan divided the tiles by the batch
    of 0 (ZeroDivisionError while compiling)."""
    class Power(nn.Module):
        def forward(self, x):
            return torch.linalg.matrix_power(x, 3), x @ x

    x = torch.randn(0, 3, 3)
    for got, want in zip(tilefx.inferenceModel(Power())(x), Power()(x)):
        assert got.shape == want.shape == (0, 3, 3) and got.dtype == want.dtype


class _Clipped(nn.Module):
    """WGAN-style weight clipping written in the forward."""

    def __init__(self):
        super().__init__()
        self.l = nn.Linear(3, 2)

    def forward(self, x):
        with torch.no_grad():
            self.l.weight.clamp_(-0.2, 0.2)
        y = self.l(x)
        return y, (y * y).sum()


@pytest.mark.parametrize("training", [False, True])
def test_parameter_written_in_forward_is_a_clear_error(training):
    """A parameter written in place during the forward: the trace dropped the
    write, so training went on from the unwritten weight (outputs 0.18 off
    eager's from the second step: a silent wrong result)."""
    torch.manual_seed(0)
    model = _Clipped()
    wrap = (lambda m: tilefx.trainingModel(m, optimizer=tilefx.optim.SGD(m.parameters(), lr=0.1))) \
        if training else tilefx.inferenceModel
    with pytest.raises(tilefx.Error, match=r"the forward writes parameter\(s\) l\.weight in place"):
        wrap(model)(torch.randn(4, 3))


def test_embedding_max_norm_of_an_input_weight():
    """F.embedding(max_norm=...) renormalises the rows it reads
    (aten::embedding_renorm, now a decomposition): with the weight an input
    its output is eager's."""
    class Emb(nn.Module):
        def forward(self, idx, weight):
            return torch.nn.functional.embedding(idx, weight, max_norm=1.0)

    torch.manual_seed(0)
    idx, weight = torch.tensor([[0, 2], [2, 5]]), torch.randn(6, 3)
    torch.testing.assert_close(tilefx.inferenceModel(Emb())(idx, weight.clone()), Emb()(idx, weight.clone()))


def test_sparse_parameter_is_a_clear_error():
    """A sparse parameter failed inside the trace with torch's 'Sparse CSR
    tensors do not have strides'; it is now refused by name."""
    class SparseWeight(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.eye(3).to_sparse_csr())

        def forward(self, x):
            return (self.w @ x).sum()

    model = SparseWeight()
    with pytest.raises(tilefx.Error, match=r"parameter w is a sparse_csr tensor: the IPU takes dense tensors"):
        tilefx.trainingModel(model, optimizer=tilefx.optim.SGD(model.parameters(), lr=0.1))(torch.ones(3, 2))


@pytest.mark.parametrize("weights, replacement, message", [
    ([[1.0, -1.0, 2.0]], True, "entry < 0"), ([[1.0, float("nan"), 2.0]], True, "entry < 0"),
    ([[1.0, float("inf"), 2.0]], True, "entry = infinity or NaN"),
    ([[1.0, float("inf"), 2.0]], False, "contains either `inf`, `nan` or element < 0"),
    ([[0.0, 0.0, 0.0]], True, r"sum of probabilities <= 0")])
def test_multinomial_checks_its_weights_as_torch(weights, replacement, message):
    """torch checks the weights on the host; here they are graph asserts
    that fail the call with torch's message."""
    class Draw(nn.Module):
        def forward(self, w):
            return torch.multinomial(w, 2, replacement=replacement)

    with pytest.raises(RuntimeError, match=message):
        torch.multinomial(torch.tensor(weights), 2, replacement=replacement)
    with pytest.raises(tilefx.Error, match=message):
        tilefx.inferenceModel(Draw())(torch.tensor(weights))
