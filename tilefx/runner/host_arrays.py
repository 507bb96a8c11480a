"""The host side of an executor's arrays: numpy arrays of torch tensors and
back, without a copy where both can share memory, and the reference
counting that says when an array is the executor's alone (so an update may
write it in place, or a result may be handed out without a copy). Used by
the runner's executor (runner/runner.py) and its mixins."""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any

import numpy as np
import torch


def fresh_outputs(args: list, res: list, roles: list[tuple[str, Any]],
                   constant_ids: frozenset[int] = frozenset()) -> list[int]:
    """Ids of the output arrays of one call that nothing of the executor's
    will hold or read again, so the caller may have them without a copy:
    not an argument of the call (a weight, a buffer, an input, a constant)
    nor a result the executor keeps (buffers, accumulators, mutated
    inputs, the program's precomputed constants: `constant_ids`), nor a
    view of one, row-major and writable. Results of kernels are fresh
    arrays (ATen's functional ops return new tensors; the provider takes no
    op whose schema returns an alias); a fused group's output buffer is
    reused by the next call only while no one else holds it
    (backend/executor.py). A view of such a result (a language model's
    logits, (batch x sequence, vocabulary) viewed as (batch, sequence,
    vocabulary)) is fresh too when no other output shares its memory: it
    was copied, 4 MB a step on the encoder benchmark."""
    ids = []
    views = []  # (id of an output that views another array, id of that array's root)
    for (kind, _), v in zip(roles, res):
        if kind != "output":
            continue
        if type(v) is np.ndarray:
            if v.flags.c_contiguous and v.flags.writeable:
                if isinstance(v.base, np.ndarray):
                    views.append((id(v), memory_ids(v)[1:]))
                else:
                    ids.append(id(v))
        elif type(v) is torch.Tensor and v.is_contiguous():
            if v._base is None:
                ids.append(id(v))  # an ATen step's result (main's tensors=True), not a view
            else:
                views.append((id(v), memory_ids(v)[1:]))
    if not ids and not views:
        return ids
    kept = set(map(id, args))
    for (kind, _), v in zip(roles, res):
        if kind != "output":
            kept.add(id(v))
    if len(set(ids)) != len(ids):  # one array for two outputs (the executor computed a
        kept.update(i for i in ids if ids.count(i) > 1)  # repeated op once): each gets a copy
    fresh = [i for i in ids if i not in kept and i not in constant_ids]
    if views:
        # the memory a view shares must be no one else's: not an argument's nor a
        # kept result's (nor of what they view), not another output's
        for a in (*args, *(v for (kind, _), v in zip(roles, res) if kind != "output")):
            if isinstance(a, (np.ndarray, torch.Tensor)):
                kept.update(memory_ids(a))
        seen = Counter(i for _, chain in views for i in chain)
        kept.update(ids)
        kept.update(constant_ids)
        fresh += [i for i, chain in views if not any(c in kept or seen[c] > 1 for c in chain)]
    return fresh


def memory_ids(a) -> tuple[int, ...]:
    """Ids of the objects whose memory `a` views: the arrays and tensors down
    to the one that owns it (a numpy view of a tensor's `numpy()` reaches the
    tensor, a tensor view its base); `(id(a),)` for one that owns its own."""
    ids = [id(a)]
    while True:
        base = a.base if type(a) is np.ndarray else getattr(a, "_base", None)
        if not isinstance(base, (np.ndarray, torch.Tensor)):
            return tuple(ids)
        a = base
        ids.append(id(a))


def held_alone(args: list, positions: list[int]) -> list[int]:
    """The `positions` (Program.main_donatable, update_donatable) whose
    arguments only this executor holds: in one table of its own and in
    `args` (reference count 3 with getrefcount's own), writable and not
    views of another array. A caller's output, a buffer or a view sharing
    the array raises the count: that array is not given up, and the update
    leaves it as it was."""
    return [i for i in positions
            if isinstance(args[i], np.ndarray) and sys.getrefcount(args[i]) <= 3
            and args[i].flags.writeable and not isinstance(args[i].base, np.ndarray)]


def weight_tensor(w):
    """A weight as main takes it at a `tensor_args` position: a tensor of its
    memory, or the array itself where torch cannot view it writably (main's
    steps then wrap it as they read it; they never write an argument)."""
    if type(w) is np.ndarray and w.flags.writeable:
        return torch.from_numpy(w)
    return w


def copied(v) -> torch.Tensor:
    """A row-major tensor of its own with `v`'s values (an array or a tensor)."""
    if type(v) is torch.Tensor:
        return v.clone(memory_format=torch.contiguous_format)
    return torch.from_numpy(np.array(v, order="C"))


def copy_into(t: torch.Tensor, value: np.ndarray) -> None:
    if t.is_contiguous() and t.device.type == "cpu" and t.dtype != torch.bfloat16:
        np.copyto(t.detach().numpy(), value, casting="same_kind")
    else:
        with torch.no_grad():
            t.copy_(torch.from_numpy(np.asarray(value, order="C")))  # (ascontiguousarray: 0-d -> 1-d)


def join(items: list[np.ndarray]) -> np.ndarray:
    if len(items) == 1:
        return items[0]
    if items[0].ndim == 0:
        return np.stack(items)
    return np.concatenate(items, axis=0)


def viewable(t: torch.Tensor) -> bool:
    """A tensor numpy can view as it is: CPU, row-major, of a numpy dtype."""
    return (t.device.type == "cpu" and t.is_contiguous() and t.dtype != torch.bfloat16
            and not t.is_complex() and t.layout == torch.strided and type(t.data) is torch.Tensor)


def same_memory(t: torch.Tensor, a: np.ndarray) -> bool:
    return (a.ctypes.data == t.data_ptr() and a.shape == tuple(t.shape) and a.flags.c_contiguous
            and t.is_contiguous())


def input_np(t: torch.Tensor) -> np.ndarray:
    """A call's input as the executor reads it: the tensor's own memory where
    numpy can view it (the call only reads its inputs; outputs and kept
    results that come out equal to one are copied or are new arrays)."""
    try:  # numpy() itself refuses what it cannot view: bfloat16, another device, conj/neg bits
        return (t.detach() if t.requires_grad else t).numpy()
    except (TypeError, RuntimeError):
        return to_np(t)


def to_np(t: torch.Tensor) -> np.ndarray:
    if t.dtype == torch.bfloat16:  # held as float32 (the IR type says bf16)
        return t.detach().cpu().float().numpy()
    return t.detach().cpu().numpy().copy()


# each module's live training wrapper (PopTorch allows one: PopTorch user guide, 4.5.5 "Reading and writing
# optimizer state": "Destroy
# original model to prevent an error when wrapping the model again")
