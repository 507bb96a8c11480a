"""Which ATen ops the tracer decomposes: torch's core-ATen table, less the
backward ops the executor runs better whole.

Core ATen decomposes the backward of layer norm, softmax, log-softmax, GELU
and ReLU into chains of 5 to 15 elementwise ops and reductions, for backends
that generate their own fused code. tilefx runs a graph op by op, so each
link is one more pass over memory: torch running the traced encoder's joint
graph took 194 ms decomposed and 156 ms with these five kept whole (eager
training, optimizer included, 154 ms; benchmarks/RESULTS.md, 2026-11-24).
The negative log-likelihood (cross-entropy's second half) is kept too:
decomposed, its forward and backward were ~25 small steps per
training step (masks, gathers, scatters, 0-d constants) where torch eager
runs two kernels, and PopART's graph has one `NllLoss` op.
Each kept op is in the aten dialect with its numpy kernel (IPU float16
semantics) and its ATen kernel (lowering/aten_kernels.py), and keeps its
node's annotations as any traced op does.

The table also gains decompositions for ops beyond core ATen: some from
torch's full table (`TORCH_DECOMPOSED`, where those are made of ops tilefx
runs), the rest written here (`OWN_DECOMPOSITIONS`: where torch's are made of
prims, wrong, or missing), and it fixes one torch decomposition that the trace
reaches through the op's Python Autograd kernel (multilabel_margin_loss).
"""

from __future__ import annotations

import math

from tilefx.dialects.aten_traits import ops_where

# ATen packets kept whole (every overload of each): op traits (kept_whole)
KEPT_WHOLE = tuple(sorted({n.split(".")[0] for n in ops_where(kept_whole=True)}))


# ops outside core ATen whose decomposition in torch's full table (torch._decomp)
# is made of ops tilefx runs
TORCH_DECOMPOSED = ("triu_indices.default", "tril_indices.default", "dist.default",
                    "rrelu_with_noise_backward.default", "view_copy.default",
                    "permute_copy.default", "narrow_copy.default", "unbind_copy.int", "as_strided_copy.default",
                    "_batch_norm_with_update_functional.default", "batch_norm_backward.default",
                    "cauchy.default", "geometric.default", "log_normal.default")


def _overload(name: str):
    import torch

    packet, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.aten if packet != "scalar_tensor" else torch.ops.prims, packet), overload)


def _scalar_tensor(s, *, dtype=None, device=None):
    """prims.scalar_tensor (torch's decompositions of xlogy(2.0, x), ...): a 0-d full."""
    import torch

    return torch.full((), s, dtype=dtype if dtype is not None else torch.get_default_dtype()
                      if isinstance(s, float) else None)


def _addbmm(self, batch1, batch2, *, beta=1, alpha=1):
    """addbmm: beta * self + alpha * (sum over the batch of batch1 @ batch2)."""
    import torch

    prod = torch.bmm(batch1, batch2).sum(0)
    out = prod if alpha == 1 else prod * alpha
    if beta == 0:
        return out.expand(torch.broadcast_shapes(self.shape, out.shape)).clone()
    return out + (self if beta == 1 else self * beta)


def _addmv(self, mat, vec, *, beta=1, alpha=1):
    """addmv: beta * self + alpha * (mat @ vec). As ATen, a zero alpha drops
    the product and a zero beta drops self: NaNs in a dropped term do not
    reach the result (torch's decomposition multiplies them by 0)."""
    import torch

    dtype = torch.result_type(self, mat)
    if alpha == 0:
        prod = torch.zeros(mat.shape[0], dtype=dtype)
    else:
        prod = torch.mv(mat, vec)
        prod = prod if alpha == 1 else prod * alpha
    if beta == 0:
        return prod.expand(torch.broadcast_shapes(self.shape, prod.shape)).clone()
    return prod + (self if beta == 1 else self * beta)


def _rrelu_with_noise_functional(self, noise, lower=0.125, upper=1.0 / 3.0, training=False, generator=None):
    """rrelu: in eval a leaky relu with the mean slope (lower + upper) / 2; in training
    each non-positive element draws its slope from U(lower, upper) (ATen's kernel),
    returned as the noise the backward multiplies by."""
    import torch

    if training:
        r = torch.rand_like(self) * (float(upper) - float(lower)) + float(lower)
        noise_out = torch.where(self <= 0, r, torch.ones_like(self))
        return self * noise_out, noise_out
    return torch.nn.functional.leaky_relu(self, (float(lower) + float(upper)) / 2), noise.clone()


def _index_reduce(self, dim, index, source, reduce, *, include_self=True):
    """index_reduce as scatter_reduce, the index spread along source's other dimensions."""
    import torch

    dim = dim % max(self.dim(), 1)
    shape = [1] * source.dim()
    if source.dim():
        shape[dim] = -1
    idx = index.reshape(shape).expand(source.shape)
    return torch.scatter_reduce(self, dim, idx, source, reduce, include_self=include_self)


def _round_decimals(self, *, decimals=0):
    """round(x, decimals): ATen's CPU kernel, nearbyint(x * 10^d) / 10^d, or for d < 0
    nearbyint(x / 10^-d) * 10^-d, in the tensor's own float type (torch's reference
    decomposition is made of prims)."""
    import torch

    if decimals == 0:
        return torch.round(self)
    if decimals > 0:
        p = 10.0 ** decimals
        return torch.round(self * p) / p
    p = 10.0 ** (-decimals)
    return torch.round(self / p) * p


def _fextreme(largest: bool):
    def fn(self, other):
        """fmax/fmin: the non-NaN operand wins; the gradient goes where ATen's formula sends it
        (to self where self >= other (<= for fmin) or other is NaN)."""
        import torch

        take = ((self >= other) if largest else (self <= other)) | torch.isnan(other)
        return torch.where(take, self, other)
    return fn


def _lcm(self, other):
    """lcm as ATen computes it: |a / gcd(a, b) * b|, 0 where the gcd is 0."""
    import torch

    g = torch.gcd(self, other)
    zero = g == 0
    q = torch.div(self, torch.where(zero, torch.ones_like(g), g), rounding_mode="trunc")
    return torch.where(zero, torch.zeros_like(g), torch.abs(q * other))


def _aa_weights(n_in: int, n_out: int, align_corners: bool, scale, bicubic: bool, like):
    """The [n_out, n_in] matrix of ATen's antialiased resampling along one axis
    (UpSampleKernel.cpp, _compute_indices_min_size_weights_aa): a triangle (bilinear)
    or Keys a=-0.5 (bicubic) filter stretched by the scale when downsampling, each
    row's taps inside [xmin, xmax) normalised to sum 1. Built from traced ops."""
    import torch

    if align_corners:
        s = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    else:
        s = 1.0 / scale if scale is not None and scale > 0 else n_in / n_out
    interp = 4 if bicubic else 2
    support = interp / 2 * s if s >= 1.0 else interp / 2
    invscale = 1.0 / s if s >= 1.0 else 1.0
    center = (torch.arange(n_out, dtype=torch.float64) + 0.5) * s
    xmin = torch.clamp(torch.trunc(center - support + 0.5), min=0)
    xmax = torch.clamp(torch.trunc(center + support + 0.5), max=n_in)
    j = torch.arange(n_in, dtype=torch.float64)
    x = ((j[None, :] - center[:, None] + 0.5) * invscale).abs()
    if bicubic:
        a = -0.5
        w = torch.where(x < 1, ((a + 2) * x - (a + 3)) * x * x + 1,
                        torch.where(x < 2, (((x - 5) * x + 8) * x - 4) * a, torch.zeros_like(x)))
    else:
        w = torch.clamp(1 - x, min=0)
    inside = (j[None, :] >= xmin[:, None]) & (j[None, :] < xmax[:, None])
    w = torch.where(inside, w, torch.zeros_like(w))
    total = w.sum(1, keepdim=True)
    w = w / torch.where(total != 0, total, torch.ones_like(total))
    return w.to(like.dtype)


def _upsample_aa(bicubic: bool):
    def fn(self, output_size, align_corners, scales_h=None, scales_w=None):
        """F.interpolate(..., antialias=True): separable, one weight matrix per axis."""
        import torch

        h, w = self.shape[-2], self.shape[-1]
        oh, ow = output_size
        wh = _aa_weights(h, oh, align_corners, scales_h, bicubic, self)
        ww = _aa_weights(w, ow, align_corners, scales_w, bicubic, self)
        return torch.matmul(torch.matmul(wh, self), ww.transpose(0, 1))
    return fn


def _upsample_aa_backward(bicubic: bool):
    def fn(grad_output, output_size, input_size, align_corners, scales_h=None, scales_w=None):
        """The transpose of the forward's two weight matrices."""
        import torch

        h, w = input_size[-2], input_size[-1]
        oh, ow = output_size
        wh = _aa_weights(h, oh, align_corners, scales_h, bicubic, grad_output)
        ww = _aa_weights(w, ow, align_corners, scales_w, bicubic, grad_output)
        return torch.matmul(torch.matmul(wh.transpose(0, 1), grad_output), ww)
    return fn


def _angle(self):
    """angle of real numbers: pi below zero, 0 from -0 up, NaN for NaN (float32
    for integers), with the zero gradient ATen gives, through a term that is
    0 wherever x is finite."""
    import math

    import torch

    x = self if self.is_floating_point() else self.to(torch.get_default_dtype())
    nan, pi, zero = torch.full_like(x, math.nan), torch.full_like(x, math.pi), torch.zeros_like(x)
    value = torch.where(torch.isnan(x), nan, torch.where(x < 0, pi, zero))
    return value + torch.where(torch.isfinite(x), x * 0, zero)


def _scatter_reduce_deprecated(self, dim, index, src, *, reduce):
    """scatter(reduce="add" | "multiply"), deprecated in torch: scatter_reduce
    with "sum" | "prod", the input included."""
    import torch

    return torch.scatter_reduce(self, dim, index, src, "sum" if reduce == "add" else "prod", include_self=True)


def _scatter_value_reduce(self, dim, index, value, *, reduce):
    import torch

    src = torch.full(index.shape, value, dtype=self.dtype)
    return _scatter_reduce_deprecated(self, dim, index, src, reduce=reduce)


def _put(self, index, source, accumulate=False):
    """put (Tensor.put_, and take's backward): index_put into the flattened
    tensor, indices counting in row-major order (negative ones from the end),
    after ATen's checks (index_put would broadcast a short source)."""
    import torch

    if index.dtype != torch.int64:
        raise RuntimeError(f"put_(): Expected a long tensor for index, but got {index.dtype}")
    if source.numel() != index.numel():
        raise IndexError(f"put_(): Expected source and index to have the same number of elements, but got "
                         f"source.numel() = {source.numel()}, index.numel() = {index.numel()}")
    if source.dtype != self.dtype:
        raise RuntimeError(f"put_(): self and source expected to have the same dtype, but got self.dtype = "
                           f"{self.dtype} and source.dtype = {source.dtype}")
    flat = torch.index_put(self.reshape(-1), (index.reshape(-1),), source.reshape(-1), accumulate)
    return flat.reshape(self.shape)


def _fractional_starts(sample, n_in: int, n_out: int, pool: int):
    """ATen's pseudo-random window starts along one axis (generate_intervals):
    int((i + u) * a) - int(u * a) with a = (n_in - pool) / (n_out - 1) in the
    input's float type, the last window at the end. `sample` holds each
    plane's u, [N, C]; the result is [N, C, n_out] int64."""
    import numpy as np
    import torch

    last = torch.full((*sample.shape, 1), n_in - pool, dtype=torch.int64)
    if n_out == 1:
        return last
    alpha = float(np.float32(n_in - pool) / np.float32(n_out - 1)) if sample.dtype == torch.float32 \
        else (n_in - pool) / (n_out - 1)
    i = torch.arange(n_out - 1, dtype=sample.dtype)
    u = sample.unsqueeze(-1)
    starts = torch.trunc((i + u) * alpha).to(torch.int64) - torch.trunc(u * alpha).to(torch.int64)
    return torch.cat([starts, last.expand(*sample.shape, 1)], -1)


def _check_fractional(x, kernel_size, output_size, random_samples, nd: int) -> None:
    """ATen's checks of fractional max pooling's operands (its meta function,
    which the decomposition replaces), with its messages."""
    name = f"fractional_max_pool{nd}d"
    if x.dim() not in (nd + 1, nd + 2):
        raise RuntimeError(f"{name}(): Expected {nd + 1}D or {nd + 2}D tensor, but got: {list(x.shape)}")
    if len(kernel_size) != nd or len(output_size) != nd:
        raise RuntimeError(f"{name}: kernel_size and output_size must have {nd} elements")
    planes = (x.shape[0] if x.dim() == nd + 2 else 1, x.shape[-nd - 1])
    if random_samples.dim() != 3 or tuple(random_samples.shape) != (*planes, nd):
        raise RuntimeError(f"{name}(): expected _random_samples of shape {[*planes, nd]} (batch, channels, "
                           f"{nd}), got {list(random_samples.shape)}")
    axes = ("height", "width") if nd == 2 else ("time", "height", "width")
    for axis, size, k, out in zip(axes, x.shape[-nd:], kernel_size, output_size):
        if out + k - 1 > size:
            raise RuntimeError(f"{name}(): pool {axis} {k} too large relative to input {axis} {size}")


def _fractional_max_pool(nd: int):
    def fn(self, kernel_size, output_size, random_samples):
        """Fractional max pooling (2-d and 3-d): each plane's window starts from its
        random samples (sample d drives spatial axis nd - 1 - d in 2-d, d in 3-d,
        as ATen's), every window gathered whole and its maximum taken: the first
        of equal values, the last NaN (ATen's kernel). Indices are flat within the
        plane."""
        import torch

        _check_fractional(self, kernel_size, output_size, random_samples, nd)
        x = self if self.dim() == nd + 2 else self.unsqueeze(0)
        n, c, sizes = x.shape[0], x.shape[1], list(x.shape[2:])
        flat = torch.zeros((n, c) + (1,) * (2 * nd), dtype=torch.int64)
        for d in range(nd):
            sample = random_samples[..., nd - 1 - d if nd == 2 else d]
            starts = _fractional_starts(sample, sizes[d], output_size[d], kernel_size[d])
            pos = starts.reshape(n, c, *[output_size[d] if e == d else 1 for e in range(nd)], *([1] * nd))
            offsets = torch.arange(kernel_size[d]).reshape(*[kernel_size[d] if e == d else 1 for e in range(nd)])
            stride = 1
            for e in range(d + 1, nd):
                stride *= sizes[e]
            flat = flat + (pos + offsets) * stride
        windows = flat.reshape(n, c, *output_size, -1)
        values = torch.gather(x.reshape(n, c, -1), 2, windows.reshape(n, c, -1)).reshape(windows.shape)
        first = torch.argmax(values, -1, keepdim=True)  # torch.argmax: the first maximum, or the first NaN
        nan = torch.isnan(values)
        k = values.shape[-1]
        last_nan = k - 1 - torch.argmax(torch.flip(nan, [-1]).to(torch.uint8), -1, keepdim=True)
        at = torch.where(nan.any(-1, keepdim=True), last_nan, first)
        out = torch.gather(values, -1, at).squeeze(-1)
        indices = torch.gather(windows, -1, at).squeeze(-1)
        if self.dim() != nd + 2:
            out, indices = out.squeeze(0), indices.squeeze(0)
        return out, indices
    return fn


def _fractional_max_pool_backward(grad_output, self, kernel_size, output_size, indices):
    """The gradient of fractional max pooling: each output's gradient added at its index."""
    import torch

    lead = grad_output.dim() - len(output_size)
    shape = self.shape
    g = grad_output.reshape(*grad_output.shape[:lead], -1)
    idx = indices.reshape(*indices.shape[:lead], -1)
    plane = torch.zeros(*shape[:lead], math.prod(shape[lead:]), dtype=grad_output.dtype)
    return plane.scatter_add(lead, idx, g).reshape(shape)


def _scalar_operand(function: str, tensor_first: bool):
    def fn(a, b):
        """torch.special's binary function with a Python number (zeta, the
        orthogonal polynomials' x or n): the number as a 0-d tensor of the
        result's type, then the tensor overload."""
        import torch

        t, n = (a, b) if tensor_first else (b, a)
        dtype = torch.result_type(t, n)
        if not dtype.is_floating_point:
            dtype = torch.get_default_dtype()
        n = torch.full((), n, dtype=dtype)
        return getattr(torch.special, function)(*((t, n) if tensor_first else (n, t)))
    return fn


def _shift_tensor(left: bool):
    """`x << t` / `x >> t` with a tensor count: ATen's bitwise shift (the
    operator forms call the same kernel in eager)."""
    def fn(self, other):
        import torch

        return (torch.bitwise_left_shift if left else torch.bitwise_right_shift)(self, other)
    return fn


def _efficientzerotensor(size, *, dtype=None, layout=None, device=None, pin_memory=None):
    """The zeros autograd makes for a gradient known to be zero (sgn's, for
    real inputs): a plain fill, the IPU has no zero-tensor layout."""
    import torch

    return torch.zeros(size, dtype=dtype)


def _randint_like_low(self, low, high, *, dtype=None, layout=None, device=None, pin_memory=None,
                      memory_format=None):
    """randint_like(x, low, high): randint over x's shape, in x's dtype unless given."""
    import torch

    return torch.randint(low, high, self.shape, dtype=dtype if dtype is not None else self.dtype)


def _embedding_bag_forward_only(*args, **kwargs):
    """nn.EmbeddingBag without gradients (inference, no_grad): ATen's variant
    that skips the backward's bookkeeping; the bags are _embedding_bag's."""
    import torch

    return torch.ops.aten._embedding_bag.default(*args, **kwargs)


def _multinomial(self, num_samples, replacement=False, *, generator=None):
    """torch.multinomial on the program's random stream, in static shapes.
    With replacement: inverse-CDF sampling, a uniform draw in [0, total)
    searched in the rows' cumulative sums (a zero-probability category has
    an empty interval). Without: the exponential race, the k largest of
    p / E with E ~ Exp(1), which picks categories in the order sequential
    draws without replacement would. The checks torch makes on the host
    (negative, infinite or NaN weights, all-zero rows) are graph asserts:
    the call fails with torch's message."""
    import torch

    if not replacement and num_samples > self.shape[-1]:
        raise RuntimeError("multinomial: cannot sample n_sample > prob_dist.size(-1) samples without "
                           "replacement")
    p = self.float() if self.dtype in (torch.float16, torch.bfloat16) else self
    rows = p if p.dim() == 2 else p.unsqueeze(0)
    if replacement:  # torch's messages differ between its two kernels
        torch._assert_async((rows >= 0).all(),
                            "invalid multinomial distribution (encountering probability entry < 0)")
        torch._assert_async(~torch.isinf(rows).any(),
                            "invalid multinomial distribution (encountering probability entry = infinity or NaN)")
    else:
        torch._assert_async(((rows >= 0) & torch.isfinite(rows)).all(),
                            "probability tensor contains either `inf`, `nan` or element < 0")
    torch._assert_async((rows.sum(-1) > 0).all(), "invalid multinomial distribution (sum of probabilities <= 0)")
    if replacement:
        cdf = torch.cumsum(rows, -1)
        u = torch.rand(rows.shape[0], num_samples, dtype=rows.dtype) * cdf[:, -1:]
        out = torch.searchsorted(cdf, u, right=True).clamp(max=rows.shape[-1] - 1)
    else:
        race = rows / -torch.log(torch.rand_like(rows))
        out = torch.topk(race, num_samples, -1).indices
    return out if self.dim() == 2 else out.squeeze(0)


def _nonzero_static(self, *, size, fill_value=-1):
    """nonzero_static: the first `size` coordinates of non-zero elements in
    row-major order, the rest `fill_value`; a static shape (size, ndim), so
    the IPU can run it where nonzero cannot. Each element's coordinates are
    scattered to its rank among the non-zero ones (later and zero elements
    to a row dropped at the end)."""
    import torch

    flat = (self != 0).reshape(-1)
    n, ndim = flat.numel(), self.dim()
    out = torch.full((size + 1, ndim), fill_value, dtype=torch.int64)
    if n == 0 or ndim == 0:
        return out[:size].clone() if ndim else torch.full((size, 0), fill_value, dtype=torch.int64)
    rank = torch.cumsum(flat.to(torch.int64), 0) - 1
    row = torch.where(flat & (rank < size), rank, torch.full_like(rank, size))
    linear = torch.arange(n, dtype=torch.int64)
    coords, stride = [], 1
    for d in reversed(range(ndim)):
        coords.append(linear // stride % self.shape[d])
        stride *= self.shape[d]
    coords = torch.stack(coords[::-1], 1)
    return out.scatter(0, row.unsqueeze(1).expand(n, ndim), coords)[:size].clone()


def _take(self, index):
    """take: the flattened tensor indexed by the index flattened, then shaped
    as the index. torch's decomposition indexes with the index itself, which
    for a 0-d index is Python's scalar indexing (a host read of its value)."""
    return self.reshape(-1)[index.reshape(-1)].reshape(index.shape)


def _resize(self, size, *, memory_format=None):
    """resize_ (functionalized): the tensor's first prod(size) elements in
    row-major order, in the new shape, as ATen keeps a contiguous tensor's
    storage. Growing one is refused: PyTorch leaves the new elements
    uninitialised, values no program can reproduce."""
    import math

    import torch

    n = math.prod(size)
    if n > self.numel():
        raise RuntimeError(f"resize_ from {list(self.shape)} to {list(size)} grows the tensor "
                           f"({self.numel()} to {n} elements): the new elements would be "
                           "uninitialised memory, which the IPU graph does not have")
    return self.reshape(-1)[:n].reshape(size).clone()


def _embedding_renorm(self, indices, max_norm, norm_type):
    """nn.Embedding(max_norm=...)'s renormalisation (functionalized): each
    row the indices name whose norm exceeds max_norm is scaled by
    max_norm / (norm + 1e-7), as ATen's kernel; rows not named stay."""
    import torch

    named = torch.zeros(self.shape[0], dtype=torch.bool).index_fill(0, indices.reshape(-1), True)
    norms = torch.linalg.vector_norm(self, norm_type, dim=1, keepdim=True)
    scale = torch.where(named.unsqueeze(1) & (norms > max_norm), max_norm / (norms + 1e-7),
                        torch.ones_like(norms))
    return self * scale


POLYNOMIALS = ("chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
               "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
               "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
               "laguerre_polynomial_l", "legendre_polynomial_p")


OWN_DECOMPOSITIONS = {
    "_upsample_bilinear2d_aa.default": _upsample_aa(False),
    "_upsample_bicubic2d_aa.default": _upsample_aa(True),
    "_upsample_bilinear2d_aa_backward.default": _upsample_aa_backward(False),
    "_upsample_bicubic2d_aa_backward.default": _upsample_aa_backward(True),
    "round.decimals": _round_decimals,
    "fmax.default": _fextreme(True),
    "fmin.default": _fextreme(False),
    "lcm.default": _lcm,
    "scalar_tensor.default": _scalar_tensor,
    "addbmm.default": _addbmm,
    "addmv.default": _addmv,
    "rrelu_with_noise_functional.default": _rrelu_with_noise_functional,
    "index_reduce.default": _index_reduce,
    "angle.default": _angle,
    "scatter.reduce": _scatter_reduce_deprecated,
    "scatter.value_reduce": _scatter_value_reduce,
    "put.default": _put,
    "__lshift__.Tensor": _shift_tensor(True),
    "__rshift__.Tensor": _shift_tensor(False),
    "embedding_renorm.default": _embedding_renorm,
    "resize.default": _resize,
    "take.default": _take,
    "multinomial.default": _multinomial,
    "nonzero_static.default": _nonzero_static,
    "_embedding_bag_forward_only.default": _embedding_bag_forward_only,
    "_efficientzerotensor.default": _efficientzerotensor,
    "randint_like.low_dtype": _randint_like_low,
    "special_zeta.other_scalar": _scalar_operand("zeta", True),
    "special_zeta.self_scalar": _scalar_operand("zeta", False),
    **{f"special_{p}.n_scalar": _scalar_operand(p, True) for p in POLYNOMIALS},
    **{f"special_{p}.x_scalar": _scalar_operand(p, False) for p in POLYNOMIALS},
    "fractional_max_pool2d.default": _fractional_max_pool(2),
    "fractional_max_pool3d.default": _fractional_max_pool(3),
    "fractional_max_pool2d_backward.default": _fractional_max_pool_backward,
    "fractional_max_pool3d_backward.default": _fractional_max_pool_backward,
}


def tracing_decompositions(table: dict) -> dict:
    """`table` (torch's core-ATen decompositions) without the ops kept whole,
    removed in place (`table.pop`), so a table that decides its entries
    lazily is not read whole; plus the decompositions above."""
    import torch

    for name in KEPT_WHOLE:
        packet = getattr(torch.ops.aten, name)
        for overload in packet.overloads():
            table.pop(getattr(packet, overload), None)
    for name in TORCH_DECOMPOSED:  # torch's decompositions beyond the core set
        op = _overload(name)
        table.setdefault(op, torch._decomp.decomposition_table[op])
    for name, fn in OWN_DECOMPOSITIONS.items():
        table[_overload(name)] = fn
    # F.multilabel_margin_loss: torch registers its (wrong after a -1) decomposition both in
    # the table and as the op's Python Autograd kernel, which the traced call reaches first
    # (the tracer runs with the Python dispatcher); both become the corrected one
    op = torch.ops.aten.multilabel_margin_loss_forward.default
    table[op] = multilabel_margin_loss_forward
    if op.py_kernels.get(torch._C.DispatchKey.Autograd) is not multilabel_margin_loss_forward:
        op.py_kernels[torch._C.DispatchKey.Autograd] = multilabel_margin_loss_forward
        op._dispatch_cache.clear()
    return table


def multilabel_margin_loss_forward(input, target, reduction: int):
    """torch's decomposition (torch/_decomp/decompositions.py), with the terminator
    honoured: the labels of a row stop at its first -1. torch's own masks only
    `is_target` and still adds the margin terms of the positions after the -1
    (as if they named class 0), so F.multilabel_margin_loss([[.1,.2,.4,.8]],
    [[3,0,-1,1]]) came out 2.05 where ATen's kernel gives 0.85."""
    import torch

    orig_target_shape = target.shape
    input = torch.atleast_2d(input)
    target = torch.atleast_2d(target)
    dim = input.shape[1]
    idx = torch.arange(dim, device=target.device)
    end_idx = torch.amin(torch.where(target == -1, idx, dim), dim=-1, keepdim=True)
    target_mask = idx < end_idx  # [batch, j]: label j of the row counts
    u = torch.gather(input, dim=-1, index=torch.where(target_mask, target, 0))
    tidx1 = torch.where(target_mask, target, -1)
    is_target = torch.any(idx == tidx1.unsqueeze(dim=-1), dim=1)
    z = (1.0 - u.T.unsqueeze(dim=-1) + input).clamp_min(0) / dim  # [j, batch, i]
    z = torch.where(is_target | ~target_mask.T.unsqueeze(-1), 0, z)
    if reduction == 1:  # mean
        z = z.sum(dim=(0, -1)).mean()
    elif reduction == 2:  # sum
        z = z.sum()
    else:
        z = z.sum(dim=(0, -1))
        if len(orig_target_shape) < 2:
            z = z.reshape(())  # an unbatched row: a 0-d loss, as ATen's kernel
    return z, is_target.to(input.dtype).reshape(orig_target_shape)
