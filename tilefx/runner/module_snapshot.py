"""The parameters and buffers of a wrapped model, walked once and reused
from call to call while the module tree stays the same.

Every call of a wrapped model reads the torch module's tensors by name: to
see whether another executor wrote them (the implicit weight sync between a
training and an inference model, PopTorch user guide, 4 "Features"), to write a training step's
weights back, and to check that no replicaGrouping was set after compiling.
torch's `named_parameters()` walks the module tree with nested generators
and builds every dotted name again (~60 us for the tutorial CNN, ~1 ms for
a BERT, several times per call). A snapshot keeps the two name -> tensor
dicts and, per module, the names and identities of its submodules,
parameters and buffers; `valid()` compares those (a few us), so
replacing, adding or removing a submodule, a
parameter or a buffer anywhere in the tree makes the executor walk the tree
again.
"""

from __future__ import annotations

from itertools import chain

import torch


class ModuleSnapshot:
    """`named_parameters` / `named_buffers` (remove_duplicate=False) of `model`
    as dicts, with what it takes to tell whether they are still the model's."""

    __slots__ = ("model", "named_p", "named_b", "_dicts", "_sizes", "_filled", "_keys", "_values")

    def __init__(self, model: torch.nn.Module):
        self.model = model
        self.named_p = dict(model.named_parameters(remove_duplicate=False))
        self.named_b = dict(model.named_buffers(remove_duplicate=False))
        self._dicts = [d for m in model.modules() for d in (m._modules, m._parameters, m._buffers)]
        self._sizes = list(map(len, self._dicts))
        self._filled = [d for d in self._dicts if d]  # the others hold nothing to compare
        self._keys = list(chain.from_iterable(self._dicts))
        # held, so that no other object can take one of their ids while compared
        self._values = list(chain.from_iterable(map(dict.values, self._dicts)))

    def valid(self) -> bool:
        """True while every module of the tree holds the same submodules,
        parameters and buffers under the same names as when walked. (Plain
        loops: this runs as each call starts, after the last call's kernels
        have left the caches cold, where map/chain/all's C paths measured
        ~10 us against ~6 for the interpreter's own, which stays hot.)"""
        for d, n in zip(self._dicts, self._sizes):
            if len(d) != n:
                return False
        keys, values = self._keys, self._values
        i = 0
        for d in self._filled:
            for k, v in d.items():
                if v is not values[i] or k != keys[i]:
                    return False
                i += 1
        return True


def snapshot_of(model: torch.nn.Module, current: ModuleSnapshot | None) -> ModuleSnapshot:
    """`current` while it still describes `model`, else a new walk."""
    if current is not None and current.model is model and current.valid():
        return current
    return ModuleSnapshot(model)
