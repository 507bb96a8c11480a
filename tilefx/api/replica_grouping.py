"""Grouping weights across replicas (PopTorch user guide, 4.4.3 "Grouping tensor weights across replicas"):
`param.replicaGrouping()`.

`executor.W.replicaGrouping(comm_group_type, shards, variable_retrieval_mode)`
gives the weight one value per group of replicas: `CommGroup(comm_group_type,
shards)` over `replicationFactor` replicas makes the groups (Consecutive:
{0, 1}, {2, 3}; Orthogonal: {0, 2}, {1, 3}; NoGrouping: one per replica;
All: one group, the ordinary weight). With more than one group the host
tensor has a leading group dimension (PopART's `VariableSettings`: a [2, 3]
weight in 4 groups is held as [4, 2, 3]) and replica r computes with the
slice of its group. Each group trains on its own: its gradients are summed
over the replicas of the group only, and its optimizer state is its own.
ReductionType.Mean divides by replicationFactor as for any weight (PopART
scales the loss gradient by the replication factor, whatever the variable's
grouping): in the guide's example, 8 replicas each holding a quarter of W
and half of X, the groups then follow the full problem's gradient exactly. `copyWeightsToHost`
writes one value per group (`VariableRetrievalMode.OnePerGroup`, shape
[groups, ...]) or one per replica (`AllReplicas`, shape [replicas, ...]).

The grouping is kept on the parameter (so an inference model wrapping the
same module uses it too) and read when the executor compiles.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np
import torch

from tilefx.api.enums import CommGroup, CommGroupType, VariableRetrievalMode
from tilefx.errors import Error

_ATTR = "_tilefx_replica_grouping"
_SET_COUNT = [0]  # replicaGrouping calls so far: an executor re-checks its weights when it moves


def settings_count() -> int:
    """How many times replicaGrouping was called in this process."""
    return _SET_COUNT[0]


def _replica_grouping(self: torch.nn.Parameter, comm_group_type: CommGroupType, shards: int,
                      variable_retrieval_mode: VariableRetrievalMode = VariableRetrievalMode.OnePerGroup):
    """Give this weight one value per group of replicas (see the module docstring)."""
    if not isinstance(comm_group_type, CommGroupType):
        raise Error(f"replicaGrouping: comm_group_type must be a poptorch.CommGroupType, got "
                    f"{comm_group_type!r}")
    if not isinstance(variable_retrieval_mode, VariableRetrievalMode):
        raise Error("replicaGrouping: variable_retrieval_mode must be a poptorch.VariableRetrievalMode, "
                    f"got {variable_retrieval_mode!r}")
    group = CommGroup(comm_group_type, shards)  # checks the size
    object.__setattr__(self, _ATTR, (group, variable_retrieval_mode))
    _SET_COUNT[0] += 1


def install_parameter_method() -> None:
    """`torch.nn.Parameter.replicaGrouping`, as PopTorch offers it on a wrapper's weights."""
    if not hasattr(torch.nn.Parameter, "replicaGrouping"):
        torch.nn.Parameter.replicaGrouping = _replica_grouping


def grouping_to_json(groups: "ReplicaGroups") -> dict[str, dict]:
    """The groupings of an executor's weights as an executable file keeps them."""
    return {n: {"type": g.group.type.name, "size": g.group.replicaGroupSize, "mode": g.mode.name}
            for n, g in groups.grouped.items()}


def restore_grouping(data, named_p: dict[str, torch.nn.Parameter], filename: str, replicas: int) -> None:
    """Give the parameters of a model an executable file was loaded into the
    groupings the file was compiled with: a model rebuilt by `poptorch.load`
    has none; a model given `loadExecutable` must have the same ones (its own
    would not be the program's)."""
    data = data or {}
    if not isinstance(data, dict):
        raise Error(f"{filename}: replica_grouping must be an object")
    for name, spec in data.items():
        try:
            setting = (CommGroup(CommGroupType[spec["type"]], spec["size"]),
                       VariableRetrievalMode[spec["mode"]])
        except (KeyError, TypeError, Error):
            raise Error(f"{filename}: the replica grouping of {name!r} is not valid: {spec!r}") from None
        if name not in named_p:
            raise Error(f"{filename}: the executable groups the parameter {name!r} across replicas, "
                        "which the model does not have")
        own = getattr(named_p[name], _ATTR, None)
        if own is None:
            object.__setattr__(named_p[name], _ATTR, setting)
        elif own != setting:
            raise Error(f"{filename}: the executable groups {name} across replicas as {_shown(setting)}, "
                        f"the model as {_shown(own)}")
    for name, p in named_p.items():
        own = getattr(p, _ATTR, None)
        if own is not None and name not in data and (len(own[0].groups(replicas)) > 1 or
                                                      own[1] != VariableRetrievalMode.OnePerGroup):
            raise Error(f"{filename}: the model groups {name} across replicas ({_shown(own)}), the "
                        "executable was compiled without that grouping")


def _shown(setting) -> str:
    group, mode = setting
    return f"CommGroup({group.type.name}, {group.replicaGroupSize}), {mode.name}"


@dataclass
class _Grouped:
    group: CommGroup
    mode: VariableRetrievalMode
    groups: list[list[int]]
    of_replica: list[int]  # replica -> its group
    shape: tuple  # what one replica sees

    @property
    def count(self) -> int:
        return len(self.groups)


class ReplicaGroups:
    """The grouped weights of one executor and how replicas see them."""

    def __init__(self, grouped: dict[str, _Grouped] | None = None, replicas: int = 1):
        self.grouped = grouped or {}
        self.replicas = replicas

    @classmethod
    def of(cls, model: torch.nn.Module, replicas: int) -> ReplicaGroups:
        grouped = {}
        for name, p in model.named_parameters(remove_duplicate=False):
            setting = getattr(p, _ATTR, None)
            if setting is None:
                continue
            group, mode = setting
            groups = group.groups(replicas)
            if len(groups) == 1 and mode == VariableRetrievalMode.OnePerGroup:
                continue  # one group: the ordinary weight
            of_replica = [0] * replicas
            for g, members in enumerate(groups):
                for r in members:
                    of_replica[r] = g
            grouped[name] = _Grouped(group, mode, groups, of_replica, _replica_shape(
                name, tuple(p.shape), len(groups), mode, replicas))
        return cls(grouped, replicas)

    @property
    def names(self):
        return self.grouped.keys()

    def check_unchanged(self, model: torch.nn.Module) -> None:
        """A grouping set after compiling would not be used: say so."""
        named = dict(model.named_parameters(remove_duplicate=False))
        for name, p in named.items():
            setting = getattr(p, _ATTR, None)
            mine = self.grouped.get(name)
            if setting is not None and (mine is None or (mine.group, mine.mode) != setting) and \
                    not (mine is None and len(setting[0].groups(self.replicas)) == 1
                         and setting[1] == VariableRetrievalMode.OnePerGroup):
                raise Error(f"replicaGrouping({name}) was set after the model was compiled: set it "
                            "before the first call (or compile), then wrap the model again")

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
        if g.mode == VariableRetrievalMode.AllReplicas and shape == (self.replicas,) + g.shape:
            firsts = [members[0] for members in g.groups]
            return stack([host[r] for r in firsts]) if g.count > 1 else host[firsts[0]]
        raise Error(f"replicaGrouping: {name} has shape {shape} on the host, expected "
                    f"{_host_shapes(g, self.replicas)}")

    def to_device(self, name: str, host: np.ndarray) -> np.ndarray:
        return host if name not in self.grouped else self._select(name, host, np.stack)

    def to_host(self, name: str, value: np.ndarray) -> np.ndarray:
        g = self.grouped[name]
        if g.mode == VariableRetrievalMode.AllReplicas:
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


def _replica_shape(name: str, shape: tuple, count: int, mode: VariableRetrievalMode,
                   replicas: int) -> tuple:
    """What one replica sees of a host tensor of `shape`: without its leading
    group (or, with AllReplicas, replica) dimension when there are groups."""
    if count == 1:
        return shape
    if shape and (shape[0] == count or (mode == VariableRetrievalMode.AllReplicas and shape[0] == replicas)):
        return shape[1:]
    extra = f" or, with AllReplicas, the replica ({replicas})" if mode == VariableRetrievalMode.AllReplicas else ""
    raise Error(f"replicaGrouping: {name} has shape {shape}; with {count} groups of replicas its first "
                f"dimension must be the group ({count}){extra} dimension: one value per group")


def _host_shapes(g: _Grouped, replicas: int) -> str:
    shapes = [(g.count,) + g.shape if g.count > 1 else g.shape]
    if g.mode == VariableRetrievalMode.AllReplicas:
        shapes.append((replicas,) + g.shape)
    return " or ".join(str(s) for s in shapes)


NO_GROUPS = ReplicaGroups()

install_parameter_method()
