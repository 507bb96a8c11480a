"""torch functions whose own ops the static IPU graph cannot hold, replaced
while tilefx traces a model: by ops of static shape (registered by the API
layer as `torch.ops.tilefx.*`, lowered to the `ipu` dialect), or by the
branch that does not read a tensor's value on the host. `static_ops()` is
the one context the tracer enters.
"""

from __future__ import annotations

import contextlib

import torch


@contextlib.contextmanager
def static_ops():
    """Every swap of this module, for the duration of a trace."""
    with static_ctc_loss(), undetected_causal_masks():
        yield


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
        lengths = [torch.as_tensor(v, dtype=torch.int64) if not isinstance(v, torch.Tensor)
                   else v.to(torch.int64) for v in (input_lengths, target_lengths)]
        loss = torch.ops.tilefx.ctc_loss(log_probs, targets.to(torch.int64), *lengths, int(blank),
                                         bool(zero_infinity))
        if reduction == "mean":
            return (loss / lengths[1].clamp(min=1).to(loss.dtype)).mean()
        if reduction == "sum":
            return loss.sum()
        return loss

    if hasattr(torch.ops.tilefx, "ctc_loss"):  # registered by the API layer
        torch.nn.functional.ctc_loss = ctc_loss
    try:
        yield
    finally:
        torch.nn.functional.ctc_loss = original
