"""Which values may stay a kernel provider's tensors between its steps.

A provider's step (ATen's, lowering/aten_kernels.py) takes its operands as
tensors: a numpy array each step wraps, and a result each step makes into a
numpy view, cost ~2 us a step hot and several after a kernel has left the
caches cold. A value only such steps read can stay the provider's tensor.
Views stay numpy's: torch makes a view in ~2 us hot and 6-9 in a program
(the encoder's 111 views took 0.72 ms more a call as tensors), numpy in 0.2,
so a view's operand is an array, and its result wrapped by the step reading
it; except a view of an argument, made once while the argument is the same
object (backend/steps.py `argument_view_step`): a tensor's view for a tensor.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass


@dataclass(frozen=True)
class KeptValues:
    """`slots`: the slots that hold a provider's tensors; `args`: the
    argument positions a caller may pass a tensor in; `results`: the result
    positions that come back as tensors (made numpy arrays as the function
    returns, unless the caller asks for tensors)."""

    slots: frozenset[int]
    args: frozenset[int]
    results: tuple[int, ...]


NONE_KEPT = KeptValues(frozenset(), frozenset(), ())


def kept_values(reads: Sequence[Set[int]], made: Mapping[int, Sequence[int]],
                passes: Mapping[int, tuple[int, int]], arg_slots: Sequence[int],
                result_slots: Sequence[int]) -> KeptValues:
    """The slots every reader of which is a step able to take and leave
    tensors (`made`: such a step -> the slots it writes), or a step passing
    a tensor on (`passes`: step -> (operand slot, result slot): a clone, a
    view of an argument) whose result is such a slot too. A slot written by
    such a step that no step reads (returned, or dropped) is kept as well."""
    if not made:
        return NONE_KEPT
    readers: dict[int, list[int]] = {}
    for i, slots in enumerate(reads):
        for j in slots:
            readers.setdefault(j, []).append(i)
    written = {o for outs in made.values() for o in outs}
    ok = {j for j, rs in readers.items() if all(i in made or i in passes for i in rs)}
    ok |= written - set(readers)
    while True:  # a clone of a tensor is a tensor: its result must be such a slot too
        drop = {src for src, out in passes.values() if src in ok and out not in ok}
        if not drop:
            break
        ok -= drop
    return KeptValues(frozenset(ok), frozenset(k for k, s in enumerate(arg_slots) if s in ok),
                      tuple(k for k, s in enumerate(result_slots) if s in ok))
