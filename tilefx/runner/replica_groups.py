"""Weights grouped across replicas, as the host loop holds and runs them
(PopTorch user guide, 4.4.3 "Grouping tensor weights across replicas"; the
setting itself, `param.replicaGrouping()`, is the surface's:
api/replica_grouping.py): one value per group of replicas on the device,
replica r computing with its group's slice, gradients summed within a group,
and the host's layout (one value per group, or per replica with
AllReplicas)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from tilefx.errors import Error


@dataclass
class Grouped:
    """One weight's grouping: the surface's setting (PopTorch's CommGroup
    and VariableRetrievalMode), the replicas of each group, and whether the
    host holds one value per replica (AllReplicas) rather than per group."""

    group: Any
    mode: Any
    groups: list[list[int]]
    of_replica: list[int]  # replica -> its group
    shape: tuple  # what one replica sees
    all_replicas: bool

    @property
    def count(self) -> int:
        return len(self.groups)


class ReplicaGroups:
    """The grouped weights of one executor and how replicas see them."""

    def __init__(self, grouped: dict[str, Grouped] | None = None, replicas: int = 1):
        self.grouped = grouped or {}
        self.replicas = replicas

    @property
    def names(self):
        return self.grouped.keys()

    # -- host <-> device -------------------------------------------------
    def _select(self, name: str, host, stack):
        """The device value ([groups, ...], or the weight itself for one
        group) of a host value of [groups, ...], [replicas, ...] (AllReplicas)
        or, for one group, the weight's own shape."""
        g = self.grouped[name]
        shape = tuple(host.shape)
        if g.count > 1 and shape == (g.count,) + g.shape:
            return host
        if g.count == 1 and shape == g.shape:
            return host
        if g.all_replicas and shape == (self.replicas,) + g.shape:
            firsts = [members[0] for members in g.groups]
            return stack([host[r] for r in firsts]) if g.count > 1 else host[firsts[0]]
        raise Error(f"replicaGrouping: {name} has shape {shape} on the host, expected "
                    f"{_host_shapes(g, self.replicas)}")

    def to_device(self, name: str, host: np.ndarray) -> np.ndarray:
        return host if name not in self.grouped else self._select(name, host, np.stack)

    def to_host(self, name: str, value: np.ndarray) -> np.ndarray:
        g = self.grouped[name]
        if g.all_replicas:
            per_group = value if g.count > 1 else value[None]
            return np.stack([per_group[g.of_replica[r]] for r in range(self.replicas)])
        return value

    @contextlib.contextmanager
    def per_replica_view(self, model: torch.nn.Module):
        """While tracing, each grouped weight shows the shape one replica sees."""
        named = dict(model.named_parameters(remove_duplicate=False))
        saved = {}
        try:
            for name, g in self.grouped.items():
                p = named[name]
                saved[name] = p.data
                value = self._select(name, p.data, torch.stack)
                p.data = value[0] if g.count > 1 else value
            yield
        finally:
            for name, data in saved.items():
                named[name].data = data

    # -- running -----------------------------------------------------------
    def weight(self, weights: dict[str, np.ndarray], name: str, replica: int) -> np.ndarray:
        g = self.grouped.get(name)
        if g is None or g.count == 1:
            return weights[name]
        return weights[name][g.of_replica[replica]]

    def state_shape(self, name: str, shape) -> tuple:
        """The shape an optimizer state "param/kind" is held in (one per group)."""
        g = self.grouped.get(name.rsplit("/", 1)[0])
        shape = tuple(shape)
        return (len(g.groups),) + shape if g is not None and len(g.groups) > 1 else shape

    def reduce(self, accs: list[dict[str, np.ndarray]], trained: list[str]) -> dict[str, np.ndarray]:
        """The replicas' accumulated gradients summed over all replicas, or over
        each group for a grouped weight ([groups, ...])."""
        total = dict(accs[0])
        for a in accs[1:]:
            total = {n: total[n] + a[n] for n in trained}
        for n in trained:
            g = self.grouped.get(n)
            if g is None:
                continue
            per = [sum(accs[r][n] for r in members) for members in g.groups]
            total[n] = np.stack([x.astype(accs[0][n].dtype) for x in per]) if len(per) > 1 \
                else per[0].astype(accs[0][n].dtype)
        return total

    def update_counts(self) -> dict[str, int]:
        """The weights grouped in more than one group, with their group
        counts: the executor's @update runs once per group on those
        weights' slices (WeightUpdates._grouped_update)."""
        return {n: len(g.groups) for n, g in self.grouped.items() if len(g.groups) > 1}


def _host_shapes(g: Grouped, replicas: int) -> str:
    shapes = [(g.count,) + g.shape if g.count > 1 else g.shape]
    if g.all_replicas:
        shapes.append((replicas,) + g.shape)
    return " or ".join(str(s) for s in shapes)


NO_GROUPS = ReplicaGroups()


def replica_shape(name: str, shape: tuple, count: int, all_replicas: bool, replicas: int) -> tuple:
    """What one replica sees of a host tensor of `shape`: without its leading
    group (or, with AllReplicas, replica) dimension when there are groups."""
    if count == 1:
        return shape
    if shape and (shape[0] == count or (all_replicas and shape[0] == replicas)):
        return shape[1:]
    extra = f" or, with AllReplicas, the replica ({replicas})" if all_replicas else ""
    raise Error(f"replicaGrouping: {name} has shape {shape}; with {count} groups of replicas its first "
                f"dimension must be the group ({count}){extra} dimension: one value per group")
