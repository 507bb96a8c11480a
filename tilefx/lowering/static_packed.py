"""Packed sequences (`pack_padded_sequence` -> `nn.LSTM` / `nn.GRU` /
`nn.RNN` -> `pad_packed_sequence`) with static shapes, while tilefx traces.

torch packs the valid steps of a padded batch into `sum(lengths)` rows: a
shape that depends on the data. While tracing, `_VF._pack_padded_sequence`
keeps the padded batch instead: the PackedSequence's `data` is the
time-major (T, B, ...) batch with the padded steps zeroed, and its
`batch_sizes` is a (T,) tensor of the same values as torch's when the
longest sequence fills the batch (`count of lengths > t`), remembered by
this module. torch's own Python around it (sorting by length with
`enforce_sorted=False`, the index permutations, `PackedSequence`) runs as it
is. The recurrent modules run such a PackedSequence step by step with the
state kept where a sequence has ended (the reverse direction reads each
sequence backwards from its own last step), which gives eager's outputs,
zeros past each length, and the state at each sequence's last step.
`_VF._pad_packed_sequence` puts `padding_value` past each length.

A pointwise op on `packed.data` works on the padded layout; a reduction over
it sees the padded steps as zeros. `pad_packed_sequence` without
`total_length` returns as many steps as the longest sequence: here the
batch's T, with a run-time check that the longest sequence is that long.
"""

from __future__ import annotations

import contextlib
import sys

import torch

# id(batch_sizes) -> (batch_sizes, lengths sorted as the data): the packed
# sequences made while a trace runs (the tensors are kept, so ids stay unique)
_PACKED: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}


def _static_pack(input, lengths, batch_first):
    x = input.transpose(0, 1) if batch_first else input  # (T, B, ...)
    steps = x.shape[0]
    lengths = lengths.to(device=x.device, dtype=torch.int64)
    torch._assert_async(torch.all(lengths > 0), "Length of all samples has to be greater than 0, but found an "
                        "element in 'lengths' that is <= 0")
    torch._assert_async(torch.all(lengths <= steps), "the lengths must not exceed the padded input's length")
    if lengths.shape[0] > 1:
        torch._assert_async(torch.all(lengths[:-1] >= lengths[1:]), "`lengths` array must be sorted in "
                            "decreasing order when `enforce_sorted` is True. You can pass `enforce_sorted=False` "
                            "to pack_padded_sequence and/or pack_sequence to sidestep this requirement if you do "
                            "not need ONNX exportability.")
    valid = torch.arange(steps, device=x.device).unsqueeze(1) < lengths.unsqueeze(0)  # (T, B)
    data = x * valid.view(*valid.shape, *([1] * (x.dim() - 2))).to(x.dtype)
    batch_sizes = valid.sum(1)
    _PACKED[id(batch_sizes)] = (batch_sizes, lengths)
    return data, batch_sizes


def _callers_total_length():
    """`total_length` of torch's `pad_packed_sequence` calling `_VF` (it passes
    the longest length or total_length, and only it knows which)."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "pad_packed_sequence" and "total_length" in frame.f_locals:
            return frame.f_locals["total_length"]
        frame = frame.f_back
    return None


def _static_pad(data, batch_sizes, batch_first, padding_value, max_seq_length):
    _, lengths = _PACKED[id(batch_sizes)]
    steps = data.shape[0]
    total_length = _callers_total_length()
    if total_length is None:
        torch._assert_async(lengths.max() == steps, "pad_packed_sequence without total_length returns as many "
                            "steps as the longest sequence, which is shorter than the padded batch here: the "
                            "IPU needs that length before the data; pass total_length=<the padded length>")
    else:
        torch._assert_async(lengths.max() <= total_length, "Expected total_length to be at least the length of "
                            "the longest sequence")
    valid = torch.arange(steps, device=data.device).unsqueeze(1) < lengths.unsqueeze(0)
    out = torch.where(valid.view(*valid.shape, *([1] * (data.dim() - 2))), data,
                      torch.full((), padding_value, dtype=data.dtype, device=data.device))
    if max_seq_length > steps:
        out = torch.nn.functional.pad(out, [0, 0] * (out.dim() - 1) + [0, max_seq_length - steps],
                                      value=padding_value)
    elif max_seq_length < steps:
        out = out[:max_seq_length]
    return (out.transpose(0, 1) if batch_first else out), lengths.cpu()


def _reverse_within(x, lengths):
    """Each sequence of time-major `x` reversed within its own length."""
    steps = x.shape[0]
    t = torch.arange(steps, device=x.device).unsqueeze(1)
    index = torch.where(t < lengths.unsqueeze(0), lengths.unsqueeze(0) - 1 - t, t)  # (T, B)
    return x.gather(0, index.view(*index.shape, 1).expand(x.shape))


def _scan(mode, x, valid, h, c, w_ih, w_hh, b_ih, b_hh, w_hr):
    """One direction of one layer over time-major `x`: (outputs, h, c)."""
    gates_x = torch.matmul(x, w_ih.t())
    if b_ih is not None:
        gates_x = gates_x + b_ih
    outs = []
    for step in range(x.shape[0]):
        keep = valid[step].unsqueeze(1)
        gh = torch.matmul(h, w_hh.t())
        if b_hh is not None:
            gh = gh + b_hh
        if mode == "LSTM":
            i, f, g, o = (gates_x[step] + gh).chunk(4, 1)
            c_new = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h_new = torch.sigmoid(o) * torch.tanh(c_new)
            if w_hr is not None:
                h_new = torch.matmul(h_new, w_hr.t())
            c = torch.where(keep, c_new, c)
        elif mode == "GRU":
            xr, xz, xn = gates_x[step].chunk(3, 1)
            hr, hz, hn = gh.chunk(3, 1)
            r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
            n = torch.tanh(xn + r * hn)
            h_new = (1 - z) * n + z * h
        else:
            pre = gates_x[step] + gh
            h_new = torch.tanh(pre) if mode == "RNN_TANH" else torch.relu(pre)
        h = torch.where(keep, h_new, h)
        outs.append(torch.where(keep, h_new, torch.zeros_like(h_new)))
    return torch.stack(outs), h, c


def _static_rnn(module, packed, hx):
    from torch.nn.utils.rnn import PackedSequence

    data, batch_sizes, sorted_indices, unsorted_indices = packed
    _, lengths = _PACKED[id(batch_sizes)]
    steps, batch = data.shape[:2]
    dirs = 2 if module.bidirectional else 1
    proj = getattr(module, "proj_size", 0)
    out_size = proj or module.hidden_size
    lstm = module.mode == "LSTM"
    zeros = lambda size: torch.zeros(module.num_layers * dirs, batch, size, dtype=data.dtype,  # noqa: E731
                                     device=data.device)
    if hx is None:
        h0, c0 = zeros(out_size), (zeros(module.hidden_size) if lstm else None)
    else:
        hx = module.permute_hidden(hx, sorted_indices)  # eager's order: sorted by length
        h0, c0 = (hx if lstm else (hx, None))
    valid = torch.arange(steps, device=data.device).unsqueeze(1) < lengths.unsqueeze(0)
    layer_in = data
    hs, cs = [], []
    for layer in range(module.num_layers):
        outs = []
        for d in range(dirs):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            weight = lambda name: getattr(module, name + sfx, None)  # noqa: E731
            k = layer * dirs + d
            x = layer_in if d == 0 else _reverse_within(layer_in, lengths)
            out, h, c = _scan(module.mode, x, valid, h0[k], c0[k] if lstm else None, weight("weight_ih"),
                              weight("weight_hh"), weight("bias_ih") if module.bias else None,
                              weight("bias_hh") if module.bias else None, weight("weight_hr") if proj else None)
            outs.append(out if d == 0 else _reverse_within(out, lengths))
            hs.append(h)
            cs.append(c)
        layer_in = torch.cat(outs, -1) if dirs == 2 else outs[0]
        if module.dropout and module.training and layer < module.num_layers - 1:
            layer_in = torch.nn.functional.dropout(layer_in, module.dropout, True)
    output = PackedSequence(layer_in, batch_sizes, sorted_indices, unsorted_indices)
    hidden = (torch.stack(hs), torch.stack(cs)) if lstm else torch.stack(hs)
    return output, module.permute_hidden(hidden, unsorted_indices)


@contextlib.contextmanager
def static_packed_sequences():
    """The swaps of this module for the duration of a trace."""
    from torch import _VF
    from torch.nn.utils.rnn import PackedSequence

    pack, pad = _VF._pack_padded_sequence, _VF._pad_packed_sequence
    originals = {cls: cls.forward for cls in (torch.nn.LSTM, torch.nn.GRU, torch.nn.RNN)}

    def pack_static(input, lengths, batch_first):
        return _static_pack(input, lengths, batch_first)

    def pad_static(data, batch_sizes, batch_first, padding_value, max_seq_length):
        if id(batch_sizes) not in _PACKED:
            return pad(data, batch_sizes, batch_first, padding_value, max_seq_length)
        return _static_pad(data, batch_sizes, batch_first, padding_value, max_seq_length)

    def swapped(cls):
        original = originals[cls]

        def forward(self, input, hx=None):
            if isinstance(input, PackedSequence) and id(input.batch_sizes) in _PACKED:
                return _static_rnn(self, input, hx)
            return original(self, input, hx)
        return forward

    _VF._pack_padded_sequence, _VF._pad_packed_sequence = pack_static, pad_static
    for cls in originals:
        cls.forward = swapped(cls)
    try:
        yield
    finally:
        _VF._pack_padded_sequence, _VF._pad_packed_sequence = pack, pad
        for cls, fn in originals.items():
            cls.forward = fn
        _PACKED.clear()
