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

import torch

from tilefx.api.enums import CommGroup, CommGroupType, VariableRetrievalMode
from tilefx.errors import Error
from tilefx.runner.replica_groups import Grouped, ReplicaGroups, replica_shape

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


def groups_of(model: torch.nn.Module, replicas: int) -> ReplicaGroups:
    """The weights of `model` its parameters' replicaGrouping groups over `replicas` replicas."""
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
        all_replicas = mode == VariableRetrievalMode.AllReplicas
        grouped[name] = Grouped(group, mode, groups, of_replica, replica_shape(
            name, tuple(p.shape), len(groups), all_replicas, replicas), all_replicas)
    return ReplicaGroups(grouped, replicas)


def check_unchanged(groups: ReplicaGroups, model: torch.nn.Module) -> None:
    """A grouping set after compiling would not be used: say so."""
    named = dict(model.named_parameters(remove_duplicate=False))
    for name, p in named.items():
        setting = getattr(p, _ATTR, None)
        mine = groups.grouped.get(name)
        if setting is not None and (mine is None or (mine.group, mine.mode) != setting) and \
                not (mine is None and len(setting[0].groups(groups.replicas)) == 1
                     and setting[1] == VariableRetrievalMode.OnePerGroup):
            raise Error(f"replicaGrouping({name}) was set after the model was compiled: set it "
                        "before the first call (or compile), then wrap the model again")


install_parameter_method()
