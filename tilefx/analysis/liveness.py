"""When each slot of a compiled function is read for the last time.

The executor drops each intermediate after the step that reads it last, so
its memory goes back to the allocator (hot in cache) for the next result;
the in-place analyses (analysis/in_place.py) read the same last uses.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import dataclass


@dataclass(frozen=True)
class Liveness:
    """`last`: slot -> index of the last step reading it. `dead`: per step,
    the slots nothing reads after it (arguments and results excepted)."""

    last: dict[int, int]
    dead: tuple[tuple[int, ...], ...]


def liveness(reads: Sequence[Set[int]], keep: Set[int]) -> Liveness:
    """`reads`: the slots each step reads, in step order (a loop step reads
    everything its body reads). `keep`: the argument and result slots,
    which outlive the call's steps."""
    last: dict[int, int] = {}
    for i, slots in enumerate(reads):
        for j in slots:
            last[j] = i
    dead: list[list[int]] = [[] for _ in reads]
    for j, i in last.items():
        if j not in keep:
            dead[i].append(j)
    return Liveness(last, tuple(tuple(d) for d in dead))
