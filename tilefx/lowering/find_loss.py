"""Which output of a training model is its loss: the final output made by
`poptorch.identity_loss`, else the final scalar float output with a
gradient path (PopTorch user guide 4.6.3, `poptorch.identity_loss`). The joint trace
(`joint_trace.py`) asks this between the forward and the backward, whose
seed is that output."""

from __future__ import annotations

import torch

from tilefx.errors import Error


def _is_identity_loss(node) -> bool:
    t = getattr(node, "target", None)
    return getattr(t, "namespace", None) == "tilefx" and getattr(t, "_opname", None) == "identity_loss"


_MULTIPLE_LOSSES = ("Multiple independent losses found in graph. Graph must have one final loss. "
                    "Wrap final graph loss in poptorch.identity_loss.")


def _feeds(node: torch.fx.Node, into: torch.fx.Node) -> bool:
    """Whether `node`'s value is used (through any ops) to compute `into`."""
    stack, seen = list(into.all_input_nodes), set()
    while stack:
        n = stack.pop()
        if n is node:
            return True
        if n not in seen:
            seen.add(n)
            stack.extend(n.all_input_nodes)
    return False


def _final_losses(candidates: dict[torch.fx.Node, int]) -> list[int]:
    """The output indices of the candidates no other candidate is computed
    from: PopTorch trains the final loss, and a model may return the partial
    losses it was built from next to it (PopTorch's custom losses do)."""
    return sorted(i for n, i in candidates.items()
                  if not any(o is not n and _feeds(n, o) for o in candidates))


def find_loss(plain_outputs: list, differentiable: set[int]) -> int | None:
    """The loss: the final output made by identity_loss, else the final
    scalar float output that has a gradient path (`return l1, l1 + l2`
    trains l1 + l2). Several final candidates are ambiguous: an error asks
    for identity_loss rather than guessing."""
    losses: dict[torch.fx.Node, int] = {}
    for idx, node in plain_outputs:
        if isinstance(node, torch.fx.Node) and _is_identity_loss(node):
            losses.setdefault(node, idx)
    finals = _final_losses(losses)
    if len(finals) > 1:
        raise Error(f"trainingModel: {_MULTIPLE_LOSSES} (outputs {finals} are "
                    "poptorch.identity_loss results, none computed from the others)", type="frontend")
    if finals:
        return finals[0]
    scalars: dict[torch.fx.Node, int] = {}
    for idx, node in plain_outputs:
        v = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        if v is not None and v.dim() == 0 and v.is_floating_point() and idx in differentiable:
            scalars.setdefault(node, idx)
    finals = _final_losses(scalars)
    if len(finals) > 1:
        raise Error(f"trainingModel: {_MULTIPLE_LOSSES} (outputs {finals} are scalar losses with "
                    "gradients, none computed from the others; mark the one to minimise with "
                    "poptorch.identity_loss(loss, reduction='none'))", type="frontend")
    return finals[0] if finals else None


def loss_or_error(plain_outputs: list, differentiable: set[int]) -> int:
    loss_index = find_loss(plain_outputs, differentiable)
    if loss_index is None:
        raise Error("trainingModel: Couldn't find a loss in graph: the model must return a loss, a "
                    "scalar float output that depends on the parameters (e.g. from a torch.nn loss) "
                    "or the result of poptorch.identity_loss")
    return loss_index
