"""torch functions whose own ops the static IPU graph cannot hold, replaced
while tilefx traces a model: by ops of static shape (registered by the API
layer as `torch.ops.tilefx.*`, lowered to the `ipu` dialect), by the
branch that does not read a tensor's value on the host, or (where torch's
backward formula asks a data-dependent shape) by ops whose gradients have
static shapes. The CTC loss ops are
registered here, when a traced model first calls `F.ctc_loss`. `static_ops()` is
the one context the tracer enters.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import itertools
import math
import sys
import warnings

import torch


@contextlib.contextmanager
def static_ops():
    """Every swap of this module (and of `static_packed`), for the duration of a trace."""
    from tilefx.lowering.static_packed import static_packed_sequences

    with static_ctc_loss(), undetected_causal_masks(), linalg_checks_in_graph(), static_composites(), \
            cumulative_batch_norm(), static_gaussian_nll_loss(), unchunked_linear_cross_entropy(), \
            masked_put_gradients(), host_randomness_warned(), distribution_checks_in_graph(), \
            tensor_checks_in_graph(), nested_encoder_padding(), static_adaptive_log_softmax(), \
            static_packed_sequences():
        yield


@contextlib.contextmanager
def host_randomness_warned():
    """While tracing, numpy's global random functions warn once: what they draw
    on the host becomes a constant of the program, the same for every call,
    where eager draws anew each call (Hugging Face's SpecAugment draws its
    masks so). torch's random ops are ops of the program, drawn per call."""
    import numpy as np

    state = np.random.mtrand._rand
    originals = {name: fn for name in dir(np.random) if not name.startswith("_")
                 for fn in [getattr(np.random, name)] if getattr(fn, "__self__", None) is state}
    warned: list[bool] = []

    def wrapped(name, fn):
        def draw(*args, **kwargs):
            if not warned:
                warned.append(True)
                warnings.warn(f"numpy.random.{name} was called while tilefx traced the model: the values it "
                              f"draws on the host are now constants of the compiled program, the same at every "
                              f"call (eager PyTorch draws new ones each call). Draw them with torch (torch.rand, "
                              f"...), which the program draws per call, or pass them in as inputs.", stacklevel=2)
            return fn(*args, **kwargs)
        return draw

    for name, fn in originals.items():
        setattr(np.random, name, wrapped(name, fn))
    try:
        yield
    finally:
        for name, fn in originals.items():
            setattr(np.random, name, fn)


@contextlib.contextmanager
def linalg_checks_in_graph():
    """While tracing, torch.linalg's `_linalg_check_errors` (inv of a singular
    matrix, cholesky of one not positive-definite, ...) is a plain op of the
    graph: torch registers it as effectful, so functionalization threads an
    effect token through it (`with_effects`, an extra graph input). It has
    no result and reads only the factorizations' `info`, so as a plain op it
    stays where it is and the executor fails the call with torch's message."""
    from torch._library.simple_registry import singleton

    holder = singleton.find("aten::_linalg_check_errors").effect
    previous = holder.effect
    holder.register(None)
    try:
        yield
    finally:
        holder.register(previous)


def _cov(original):
    """torch.cov as at::native::cov computes it, with the checks that read
    values on the host (`is_scalar_tensor_true`: weights not negative, not
    summing to zero; degrees of freedom <= 0) as graph ops: the weight checks
    become `_assert_async` (the call fails at run time, as torch raises) and
    the normalization's clamp to 0 a `where`. Without weights the degrees of
    freedom are a shape, checked (and warned about) while tracing."""

    def cov(input, *, correction=1, fweights=None, aweights=None):
        weights = [w for w in (fweights, aweights) if w is not None]
        if input.dim() > 2 or input.dtype == torch.bool or any(w.dim() > 1 for w in weights) \
                or (fweights is not None and (fweights.is_floating_point() or fweights.is_complex())) \
                or (aweights is not None and not aweights.is_floating_point()) \
                or any(w.numel() != (input.shape[-1] if input.dim() == 2 else input.numel())
                       for w in weights):
            return original(input, correction=correction, fweights=fweights, aweights=aweights)
        x = input if input.dim() == 2 else input.view(1, -1)
        n = x.shape[1]
        w = None
        for kind, weight in (("fweights", fweights), ("aweights", aweights)):
            if weight is None:
                continue
            if n:
                torch._assert_async(weight.amin() >= 0, f"cov(): {kind} cannot be negative")
            w = weight if w is None else w * weight
        if w is None:
            norm = n - correction
            if norm <= 0:
                warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less "
                              "than the number of observations.")
                norm = 0
            xc = x - (x.sum(1) / n).unsqueeze(1)
            return torch.true_divide(torch.mm(xc, xc.t().conj()), norm).squeeze()
        w_sum = w.sum()
        torch._assert_async(w_sum != 0, "cov(): weights sum to zero, can't be normalized")
        xc = x - ((x * w).sum(1) / w_sum).unsqueeze(1)
        if aweights is not None and correction != 0:
            norm = w_sum - correction * (w * aweights).sum() / w_sum
        else:
            norm = w_sum - correction
        norm = torch.where(norm <= 0, torch.zeros_like(norm), norm)
        return torch.true_divide(torch.mm(xc, (xc * w).t().conj()), norm).squeeze()

    return cov


def _corrcoef(cov, original):
    """torch.corrcoef as at::native::corrcoef, on the static torch.cov."""

    def corrcoef(input):
        if input.dim() > 2 or input.dtype == torch.bool or input.is_complex():
            return original(input)
        c = cov(input)
        if c.dim() == 0:
            return c / c
        std = torch.sqrt(c.diagonal())
        return (c / std.view(-1, 1) / std.view(1, -1)).clip(-1, 1)

    return corrcoef


def _combinations(original):
    """torch.combinations: the rows of index tuples are fixed by the length
    and r alone, so they are a constant here, and the result one gather
    (ATen's composite selects them from a meshgrid with masked_select, a
    data-dependent shape to the trace)."""

    def combinations(self, r=2, with_replacement=False):
        if self.dim() != 1 or r <= 0:
            return original(self, r, with_replacement)
        choose = itertools.combinations_with_replacement if with_replacement else itertools.combinations
        rows = list(choose(range(self.shape[0]), r))
        index = torch.tensor(rows, dtype=torch.int64).reshape(len(rows), r)
        return self[index]

    return combinations


# ATen composites replaced while tracing, by name: factory(ATen's own composite) -> kernel
STATIC_COMPOSITES = {
    "cov.default": _cov,
    "corrcoef.default": lambda original: _corrcoef(torch.cov, original),
    "combinations.default": _combinations,
}


@contextlib.contextmanager
def static_composites():
    """While tracing, the ATen ops of `STATIC_COMPOSITES` are their static
    formulas in torch ops: ATen's composites ask data-dependent questions
    (cov: `aten::equal` on the weights and the degrees of freedom;
    combinations: a masked_select) that stop the trace. Same numbers, same
    warnings and errors. The swap is the op's Python
    CompositeImplicitAutograd kernel, which the traced call reaches however
    it names the op (`torch.cov`, the method, or a reference taken before
    tracing, as `from torch import cov` or PyTorch's OpInfo hold); inputs
    torch refuses go to ATen's composite, which raises its error."""
    key = torch._C.DispatchKey.CompositeImplicitAutograd
    ops = {name: getattr(getattr(torch.ops.aten, name.partition(".")[0]), name.partition(".")[2])
           for name in STATIC_COMPOSITES}

    def composite(op):
        return lambda *args, **kwargs: op._op_dk(key, *args, **kwargs)

    previous = {name: op.py_kernels.get(key) for name, op in ops.items()}
    for name, op in ops.items():
        op.py_kernels[key] = STATIC_COMPOSITES[name](composite(op))
        op._dispatch_cache.clear()
    try:
        yield
    finally:
        for name, op in ops.items():
            if previous[name] is None:
                op.py_kernels.pop(key, None)
            else:
                op.py_kernels[key] = previous[name]
            op._dispatch_cache.clear()


@contextlib.contextmanager
def cumulative_batch_norm():
    """While tracing, a batch norm with `momentum=None` in training updates its
    running statistics on the device: torch's `_BatchNorm.forward` reads
    `num_batches_tracked` on the host to make the cumulative average's factor
    (1 / batches seen) a Python number for `F.batch_norm`. Here the factor is
    a tensor and the update is written out: the batch's mean and unbiased
    variance (what ATen's kernel folds in), `factor * batch + (1 - factor) *
    running`. The normalization itself is `F.batch_norm` on the batch's
    statistics, as torch's; every other configuration is torch's forward.
    SyncBatchNorm too, where it would not synchronise (torch.distributed not
    initialized; with it, torch's forward raises on the CPU)."""
    from torch.nn.modules.batchnorm import SyncBatchNorm, _BatchNorm

    originals = {cls: cls.forward for cls in (_BatchNorm, SyncBatchNorm)}

    def swapped(cls):
        def forward(self, input):
            if self.momentum is not None or not self.training or not self.track_running_stats \
                    or self.num_batches_tracked is None or self.running_mean is None \
                    or self.running_var is None or (cls is SyncBatchNorm and torch.distributed.is_available()
                                                    and torch.distributed.is_initialized()):
                return originals[cls](self, input)
            self._check_input_dim(input)
            if cls is SyncBatchNorm:
                self._check_non_zero_input_channels(input)
            self.num_batches_tracked.add_(1)
            out = torch.nn.functional.batch_norm(input, None, None, self.weight, self.bias, True, 0.0, self.eps)
            with torch.no_grad():
                dims = [0, *range(2, input.dim())]
                var, mean = torch.var_mean(input, dim=dims, correction=1)
                factor = self.num_batches_tracked.to(self.running_mean.dtype).reciprocal()
                for running, batch in ((self.running_mean, mean), (self.running_var, var)):
                    running.copy_(factor * batch.to(running.dtype) + (1 - factor) * running)
            return out
        return forward

    for cls in originals:
        cls.forward = swapped(cls)
    try:
        yield
    finally:
        for cls, fn in originals.items():
            cls.forward = fn


def _gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """F.gaussian_nll_loss with its check that `var` has no negative entry as
    a graph op (`_assert_async`: the call fails at run time where torch raises);
    the shape checks, the clamp that passes no gradient and the loss are
    torch's."""
    if isinstance(var, float):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = var * torch.ones_like(input)
    else:
        torch._assert_async(torch.logical_not(torch.any(var < 0)), "var has negative entry/entries")
    if var.size() != input.size():
        if input.size()[:-1] == var.size():  # one variance per row: homoscedastic
            var = torch.unsqueeze(var, -1)
        elif not (input.ndim == var.ndim
                  and sum(v for i, v in zip(input.size(), var.size()) if i != v) == 1):
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    var = var.clone()
    with torch.no_grad():  # the clamp is not differentiated, as in torch
        var.clamp_(min=eps)
    loss = 0.5 * (torch.log(var) + (input - target) ** 2 / var)
    if full:
        loss += 0.5 * math.log(2 * math.pi)
    if reduction == "mean":
        return loss.mean()
    return loss.sum() if reduction == "sum" else loss


@contextlib.contextmanager
def static_gaussian_nll_loss():
    """While tracing, `F.gaussian_nll_loss` (which nn.GaussianNLLLoss calls) is
    `_gaussian_nll_loss`: torch's asks `torch.any(var < 0)` on the host."""
    original = torch.nn.functional.gaussian_nll_loss
    torch.nn.functional.gaussian_nll_loss = _gaussian_nll_loss
    try:
        yield
    finally:
        torch.nn.functional.gaussian_nll_loss = original


def _linear_cross_entropy_whole(input, linear_weight, target, linear_bias, weight, reduction, ignore_index,
                                label_smoothing, *chunking):
    """The chunked op's loss, as (loss,): F.cross_entropy of the whole
    F.linear (torch's own path without `options`)."""
    logits = torch.nn.functional.linear(input, linear_weight, linear_bias)
    return (torch.nn.functional.cross_entropy(logits, target, weight=weight, reduction=reduction,
                                              ignore_index=ignore_index, label_smoothing=label_smoothing),)


def _linear_cross_entropy_whole_none(input, linear_weight, target, linear_bias, weight, ignore_index, *chunking):
    """The chunked op with reduction='none': the per-sample losses."""
    return _linear_cross_entropy_whole(input, linear_weight, target, linear_bias, weight, "none",
                                       ignore_index, 0.0)[0]


_LINEAR_CROSS_ENTROPY = "torch.nn.modules.linear_cross_entropy"


@contextlib.contextmanager
def unchunked_linear_cross_entropy():
    """While tracing, `F.linear_cross_entropy(..., options=...)` computes its
    loss whole: the chunked path is a custom op (`torch_nn::`) whose
    Python body, with its hand-written backward over batch chunks, the
    trace cannot see into. The IPU program is static and its memory
    planned, so the chunks' purpose (not holding the whole logits at once
    in eager) does not carry over; the numbers are the unchunked path's,
    which torch's own tracing (`torch.jit.is_tracing()`) also takes.

    `F.linear_cross_entropy` imports the chunked ops' module when it takes
    that path. Importing it registers the two custom ops (~30 ms, a few
    percent of a small model's first compile), so a trace that does not
    load it does not either: the swap is made when the module is loaded,
    during the trace or before it."""
    names = {"_linear_cross_entropy_batch_chunked": _linear_cross_entropy_whole,
             "_linear_cross_entropy_batch_chunked_no_reduction": _linear_cross_entropy_whole_none}
    original: dict = {}

    def swap(module) -> None:
        original.update((name, getattr(module, name)) for name in names)
        for name, fn in names.items():
            setattr(module, name, fn)

    hook = None
    if _LINEAR_CROSS_ENTROPY in sys.modules:
        swap(sys.modules[_LINEAR_CROSS_ENTROPY])
    else:
        hook = _AfterImport(_LINEAR_CROSS_ENTROPY, swap)
        sys.meta_path.insert(0, hook)
    try:
        yield
    finally:
        if hook is not None and hook in sys.meta_path:
            sys.meta_path.remove(hook)
        module = sys.modules.get(_LINEAR_CROSS_ENTROPY)
        for name, fn in original.items():
            setattr(module, name, fn)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs `then(module)` once the module `name` has been loaded by its own
    loader (the finder steps aside at that one import)."""

    def __init__(self, name: str, then) -> None:
        self.name, self.then = name, then

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenCall(spec.loader, self.then)
        return spec


class _ThenCall(importlib.abc.Loader):
    """A module's own loader, then `then(module)`; anything else asked of it is the loader's."""

    def __init__(self, inner, then) -> None:
        self._inner, self._then = inner, then

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        self._then(module)

    def __getattr__(self, name):
        return getattr(self._inner, name)


@contextlib.contextmanager
def distribution_checks_in_graph():
    """While tracing, the argument checks of `torch.distributions` (on by
    default: `validate_args`) are graph ops (`_assert_async`: the call fails at
    run time where torch raises). torch asks `torch._is_all_true(valid)` on the
    host (Hugging Face's time-series heads build a StudentT each call); the
    distributions are its only Python callers."""
    original = torch._is_all_true

    def checked_in_graph(valid):
        torch._assert_async(torch.all(valid), "a torch.distributions argument or value is outside its "
                            "constraint (the distribution's validate_args check)")
        return True

    torch._is_all_true = checked_in_graph
    try:
        yield
    finally:
        torch._is_all_true = original


@contextlib.contextmanager
def tensor_checks_in_graph():
    """While tracing, `torch._check_tensor_all(cond)` (and `_with`) is a graph
    assert (`_assert_async`: the call fails at run time where torch raises)
    instead of `cond.all().item()` on the host. transformers' checks take this
    form when the model is compiled (`torch_compilable_check`: Llava's count
    of image tokens against image features). The message callable is not
    called: it may format the tensors' values."""
    originals = {name: getattr(torch, name) for name in ("_check_tensor_all", "_check_tensor_all_with")}

    def check(cond, what):
        if isinstance(cond, torch.Tensor) and cond.dtype == torch.bool:
            torch._assert_async(torch.all(cond), f"a check of the model failed ({what}, traced as a graph assert)")
            return True
        return False

    def check_tensor_all(cond, message=None):
        if not check(cond, "torch._check_tensor_all"):
            originals["_check_tensor_all"](cond, message)

    def check_tensor_all_with(error_type, cond, message=None):
        if not check(cond, f"torch._check_tensor_all_with({error_type.__name__})"):
            originals["_check_tensor_all_with"](error_type, cond, message)

    torch._check_tensor_all, torch._check_tensor_all_with = check_tensor_all, check_tensor_all_with
    try:
        yield
    finally:
        for name, fn in originals.items():
            setattr(torch, name, fn)


def _adaptive_log_softmax(self, input_, target_):
    """nn.AdaptiveLogSoftmaxWithLoss's forward with every cluster computed for
    every row and each row's value selected by a `where` (torch's selects each
    cluster's rows with `nonzero()`: a data-dependent shape). The other rows'
    gradients through a cluster are zeros, as in torch; the target range check
    is a graph assert."""
    from torch.nn.modules.adaptive import _ASMoutput

    is_batched = target_.dim() > 0
    input = input_ if is_batched else input_.unsqueeze(0)
    target = target_ if is_batched else target_.unsqueeze(0)
    torch._assert_async(torch.all((target >= 0) & (target < self.n_classes)),
                        f"Target values should be in [0, {self.n_classes - 1}]")
    cutoffs = [0] + self.cutoffs
    gather_inds = torch.where(target < cutoffs[1], target, 0)
    output = input.new_zeros(target.shape[0])
    for i in range(1, len(cutoffs) - 1):
        low, high = cutoffs[i], cutoffs[i + 1]
        rows = (target >= low) & (target < high)
        cluster_logprob = torch.nn.functional.log_softmax(self.tail[i - 1](input), dim=1)
        local = cluster_logprob.gather(1, (target - low).clamp(0, high - low - 1).unsqueeze(1)).squeeze(1)
        output = torch.where(rows, local, output)
        gather_inds = torch.where(rows, self.shortlist_size + i - 1, gather_inds)
    head_logprob = torch.nn.functional.log_softmax(self.head(input), dim=1)
    output = output + head_logprob.gather(1, gather_inds.unsqueeze(1)).squeeze(1)
    loss = (-output).mean()
    return _ASMoutput(output if is_batched else output.squeeze(0), loss)


@contextlib.contextmanager
def static_adaptive_log_softmax():
    """While tracing, `nn.AdaptiveLogSoftmaxWithLoss.forward` is
    `_adaptive_log_softmax` for the shapes torch accepts (torch's own forward
    raises its errors for the others)."""
    cls = torch.nn.AdaptiveLogSoftmaxWithLoss
    original = cls.forward

    def forward(self, input_, target_):
        if (target_.dim() == 1 and input_.dim() == 2 and input_.size(0) == target_.size(0)) or \
                (target_.dim() == 0 and input_.dim() == 1):
            return _adaptive_log_softmax(self, input_, target_)
        return original(self, input_, target_)

    cls.forward = forward
    try:
        yield
    finally:
        cls.forward = original


def _zeroed_by_nested_path(encoder, src, mask, key_padding_mask):
    """The (batch, seq) positions eager's TransformerEncoder outputs as zeros:
    in eval mode without gradients, with a key padding mask and no attention
    mask, it runs the layers on a nested tensor of the tokens the mask keeps
    and pads the result with zeros (if the mask is left-aligned, which it
    checks on the host). None when eager takes the plain path."""
    first = encoder.layers[0]
    weights = [src] + [p for p in first.parameters()]
    if not (torch.backends.mha.get_fastpath_enabled() and getattr(encoder, "use_nested_tensor", False)
            and not first.training and src.dim() == 3 and key_padding_mask is not None and mask is None
            and not src.is_nested and not torch.is_autocast_enabled()
            and not (torch.is_grad_enabled() and any(t.requires_grad for t in weights))):
        return None
    pad = key_padding_mask if key_padding_mask.dtype == torch.bool else key_padding_mask != 0
    if getattr(encoder, "mask_check", True) and pad.shape[-1] > 1:
        keep = ~pad  # left-aligned: every row keeps a prefix
        pad = pad & (keep[:, 1:] <= keep[:, :-1]).all()
    return pad


@contextlib.contextmanager
def nested_encoder_padding():
    """While tracing, `nn.TransformerEncoder` zeros the padded positions'
    outputs where eager's nested-tensor path does (`_zeroed_by_nested_path`;
    the trace takes the plain path, whose outputs there are the padding's own
    attention results). The positions are a graph mask, as is eager's
    left-alignment check."""
    cls = torch.nn.TransformerEncoder
    original = cls.forward

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        zero = _zeroed_by_nested_path(self, src, mask, src_key_padding_mask)
        if zero is None:
            return original(self, src, mask, src_key_padding_mask, is_causal)
        norm = self.norm  # eager pads with zeros before the final norm
        self.norm = None
        try:
            out = original(self, src, mask, src_key_padding_mask, is_causal)
        finally:
            self.norm = norm
        out = out.masked_fill(zero.unsqueeze(-1), 0.0)
        return out if norm is None else norm(out)

    cls.forward = forward
    try:
        yield
    finally:
        cls.forward = original


def _mask_key(self, key) -> tuple[int, torch.Tensor | None]:
    """(p, mask) when `self[key]` is p full slices (or index_put's Nones) then
    one boolean mask matching self's next dimensions (`x[mask]`, `x[:, mask]`),
    else (0, None)."""
    parts = list(key) if isinstance(key, tuple) else [key]
    p = 0
    while p < len(parts) and (parts[p] is None or isinstance(parts[p], slice) and parts[p] == slice(None)):
        p += 1
    if p != len(parts) - 1 or not isinstance(parts[p], torch.Tensor):
        return 0, None
    mask = parts[p]
    if mask.dtype != torch.bool or mask.dim() == 0 or tuple(mask.shape) != tuple(self.shape[p:p + mask.dim()]):
        return 0, None
    return p, mask


def _masked_put(self, p: int, mask, values, accumulate: bool = False):
    """self with self[(:,) * p + (mask,)] = values (+= with `accumulate`) in
    static-shape ops whose gradients are static too. Values that broadcast
    along the k masked positions (size 1 or absent there) are a `where`;
    values with one row per masked position fill them in order
    (`masked_scatter`, the count checked at run time)."""
    d = mask.dim()
    rest = self.shape[p + d:]
    rank = p + 1 + len(rest)  # the indexing result: self.shape[:p] + (k,) + rest
    while values.dim() > rank and values.shape[0] == 1:  # leading ones are dropped, as torch's assignment does
        values = values.squeeze(0)
    if values.dim() > rank:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(values.shape)} cannot be broadcast to "
                           f"indexing result of shape {[*self.shape[:p], 'k', *rest]}")
    v = values.to(self.dtype).reshape((1,) * (rank - values.dim()) + tuple(values.shape))
    full_mask = mask.reshape((1,) * p + tuple(mask.shape) + (1,) * len(rest)).expand(self.shape)
    n = v.shape[p]
    if n == 1:
        v = v.reshape(tuple(v.shape[:p]) + (1,) * d + tuple(v.shape[p + 1:]))
        if accumulate:
            return self + torch.where(full_mask, v, torch.zeros_like(v))
        return torch.where(full_mask, v, self)
    torch._assert_async(mask.sum() == n, f"shape mismatch: value tensor of shape {list(values.shape)} cannot be "
                                         f"broadcast to the indexing result of the mask's count of positions")
    source = v.expand(tuple(self.shape[:p]) + (n,) + tuple(rest))
    if accumulate:
        return self + torch.zeros_like(self).masked_scatter(full_mask, source)
    return self.masked_scatter(full_mask, source)


def _index_fill_kernel(in_place: bool):
    def kernel(self, dim, index, value):
        """index_fill with a tensor value as `where` over the filled positions:
        torch's gradient of the value sums the gradient over `unique(index)`
        (a data-dependent shape); the where sums it over the same positions."""
        if value.dim() != 0:
            raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                               f"{value.dim()} dimension(s).")
        if index.dim() > 1:
            raise RuntimeError("Index has to be a vector/scalar")
        if index.dtype != torch.int64:
            raise IndexError("index_fill_(): Expected dtype int64 for index.")
        nd = max(self.dim(), 1)
        if not -nd <= dim < nd:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], but got {dim})")
        dim = dim % nd
        size = self.shape[dim] if self.dim() else 1
        hit = torch.zeros(size, dtype=torch.bool, device=self.device).index_fill(0, index.reshape(-1), True)
        hit = hit.reshape([size if i == dim else 1 for i in range(self.dim())])
        out = torch.where(hit, value.to(self.dtype), self)
        return self.copy_(out) if in_place else out
    return kernel


@contextlib.contextmanager
def masked_put_gradients():
    """While tracing, `x[mask] = v` (and index_put(_) with a mask) where v needs
    a gradient is `_masked_put` (torch's gradient of v is `grad[mask]`, whose
    shape is the mask's count: `nonzero`), and the autograd kernel of index_fill with a tensor value is
    `_index_fill_kernel` (torch's sums over `_unique(index)`): same numbers,
    gradients of static shape. Every other assignment is torch's. (The
    tracer runs with the Python dispatcher, which takes the py_kernels.)"""
    originals = {"__setitem__": torch.Tensor.__setitem__, "index_put": torch.Tensor.index_put,
                 "index_put_": torch.Tensor.index_put_}
    function = torch.index_put

    def static(self, key, value) -> bool:
        return isinstance(value, torch.Tensor) and value.requires_grad and torch.is_grad_enabled() \
            and _mask_key(self, key)[1] is not None

    def setitem(self, key, value):
        if not static(self, key, value):
            return originals["__setitem__"](self, key, value)
        self.copy_(_masked_put(self, *_mask_key(self, key), value))

    def index_put(self, indices, values, accumulate=False):
        if not static(self, tuple(indices), values):
            return originals["index_put"](self, indices, values, accumulate)
        return _masked_put(self, *_mask_key(self, tuple(indices)), values, accumulate)

    def index_put_(self, indices, values, accumulate=False):
        if not static(self, tuple(indices), values):
            return originals["index_put_"](self, indices, values, accumulate)
        return self.copy_(_masked_put(self, *_mask_key(self, tuple(indices)), values, accumulate))

    key = torch._C.DispatchKey.Autograd
    aten = torch.ops.aten
    kernels = {aten.index_fill_.int_Tensor: _index_fill_kernel(True),
               aten.index_fill.int_Tensor: _index_fill_kernel(False)}
    for op, fn in kernels.items():
        op.py_kernels[key] = fn
        op._dispatch_cache.clear()
    torch.Tensor.__setitem__, torch.Tensor.index_put, torch.Tensor.index_put_ = setitem, index_put, index_put_
    torch.index_put = index_put
    try:
        yield
    finally:
        for name, fn in originals.items():
            setattr(torch.Tensor, name, fn)
        torch.index_put = function
        for op in kernels:
            op.py_kernels.pop(key, None)
            op._dispatch_cache.clear()


@contextlib.contextmanager
def undetected_causal_masks():
    """While tracing, nn.Transformer's layers do not test whether an attention
    mask is the causal one: `_detect_is_causal_mask` compares the mask's
    values (`bool((mask == causal).all())`), which a trace cannot know. The
    answer is only a hint (with it, attention applies a causal mask instead
    of the given one, which is the same mask), so the trace keeps the
    caller's hint and otherwise uses the mask as given: the same numbers."""
    from torch.nn.modules import transformer

    original = transformer._detect_is_causal_mask

    def detect(mask, is_causal=None, size=None):
        return is_causal is True

    transformer._detect_is_causal_mask = detect
    try:
        yield
    finally:
        transformer._detect_is_causal_mask = original


@contextlib.contextmanager
def static_ctc_loss():
    """While tracing, `F.ctc_loss` (which `nn.CTCLoss` calls) is `tilefx::ctc_loss`:
    torch's `_ctc_loss` also returns the forward variables, sized by the
    longest target's value, which a static graph cannot hold; the loss itself
    is [N]. (The function is swapped for the trace and put back after, so the
    model's own call of `F.ctc_loss` reaches it whatever module it imported it from.)"""
    original = torch.nn.functional.ctc_loss

    def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
                 zero_infinity=False):
        register_ctc_ops()
        lengths = [torch.as_tensor(v, dtype=torch.int64) if not isinstance(v, torch.Tensor)
                   else v.to(torch.int64) for v in (input_lengths, target_lengths)]
        loss = torch.ops.tilefx.ctc_loss(log_probs, targets.to(torch.int64), *lengths, int(blank),
                                         bool(zero_infinity))
        if reduction == "mean":
            return (loss / lengths[1].clamp(min=1).to(loss.dtype)).mean()
        if reduction == "sum":
            return loss.sum()
        return loss

    torch.nn.functional.ctc_loss = ctc_loss
    try:
        yield
    finally:
        torch.nn.functional.ctc_loss = original


_CTC_REGISTERED: list[bool] = []


def register_ctc_ops() -> None:
    """Register `tilefx::ctc_loss` (torch's op has a data-dependent output,
    this one a static [N]) and its gradient, the first time a traced model
    calls `F.ctc_loss` (registering torch ops costs ~3 ms each, which a
    compile of a model without CTC need not pay)."""
    if _CTC_REGISTERED:
        return
    _CTC_REGISTERED.append(True)

    @torch.library.custom_op("tilefx::ctc_loss", mutates_args=())
    def _ctc_loss(log_probs: torch.Tensor, targets: torch.Tensor, input_lengths: torch.Tensor,
                  target_lengths: torch.Tensor, blank: int, zero_infinity: bool) -> torch.Tensor:
        from tilefx.backend.kernels.ctc import ctc_loss as kernel

        return torch.from_numpy(kernel(log_probs.detach().numpy(), targets.numpy(), input_lengths.numpy(),
                                       target_lengths.numpy(), blank=blank, zero_infinity=zero_infinity))

    @_ctc_loss.register_fake
    def _(log_probs, targets, input_lengths, target_lengths, blank, zero_infinity):
        return log_probs.new_empty((log_probs.shape[1],))

    @torch.library.custom_op("tilefx::ctc_loss_grad", mutates_args=())
    def _ctc_loss_grad(grad: torch.Tensor, log_probs: torch.Tensor, targets: torch.Tensor,
                       input_lengths: torch.Tensor, target_lengths: torch.Tensor, blank: int,
                       zero_infinity: bool) -> torch.Tensor:
        from tilefx.backend.kernels.ctc import ctc_loss_grad as kernel

        return torch.from_numpy(kernel(grad.detach().numpy(), log_probs.detach().numpy(), targets.numpy(),
                                       input_lengths.numpy(), target_lengths.numpy(), blank=blank,
                                       zero_infinity=zero_infinity))

    @_ctc_loss_grad.register_fake
    def _(grad, log_probs, targets, input_lengths, target_lengths, blank, zero_infinity):
        return torch.empty_like(log_probs)

    def _ctc_setup(ctx, inputs, output):
        ctx.save_for_backward(*inputs[:4])
        ctx.blank, ctx.zero_infinity = inputs[4], inputs[5]

    def _ctc_backward(ctx, grad):
        log_probs, targets, input_lengths, target_lengths = ctx.saved_tensors
        g = torch.ops.tilefx.ctc_loss_grad(grad, log_probs, targets, input_lengths, target_lengths,
                                           ctx.blank, ctx.zero_infinity)
        return g, None, None, None, None, None

    _ctc_loss.register_autograd(_ctc_backward, setup_context=_ctc_setup)
