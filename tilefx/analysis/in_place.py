"""Which steps may write their result over an operand.

Two rules. An optimizer update or a gradient accumulation (the `ipu` ops of
kernels/ipu.py's IN_PLACE_OPERANDS) writes into its argument arrays when the
caller gives them up for the call (`donated=`: arrays only it holds, such as
the weights) and no other step reads them (`donation_rule`).

An elementwise op whose operand dies at it can compute in place, as
`x.relu_()` does: no new allocation, and one pass over memory that is
already in cache instead of reading one array and writing another (ATen's
`div_` on a 2 MB attention score tensor: ~70 us against ~135 for `div`).
Torch eager cannot do this for a model that does not ask (`inplace=False` is
nn.ReLU's default); the compiler knows every reader of every value.

The rule (`overwritable`), from what the executor knows when it compiles a function:
- the operand's memory was made by a step of this function for its own
  result (a provider's ATen kernel: functional ops return new tensors), so
  it is no argument (a weight, an input), no precomputed constant, no fused
  group's reused buffer and no array a numpy kernel may have passed through;
- no step after this one reads that memory: not the operand, not the value
  it is a view of, not any other view of it (views and clones that may alias
  are followed to the memory's owner);
- it is not a function result, and no other operand of the step shares it;
- the operand has the result's type (shape and element type): writing it is
  computing the result, with no broadcasting into a smaller array and no
  change of type.
The executor asks the provider for the in-place form (its `in_place` maker);
the numbers are the same kernels' (tests/backend/test_executor_in_place.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence, Set
from dataclasses import dataclass


def overwritable(candidates: Iterable[tuple[int, list[int], list[bool]]], view_of: dict[int, int],
                 fresh: set[int], last: dict[int, int], keep: set[int]) -> dict[int, int]:
    """{step index: operand position it may write}. `candidates`: (step,
    operand slots, for each operand whether it may be the written one: an
    in-place form exists for it and it has the result's type). `view_of`:
    slot -> the slot whose memory it may share. `fresh`: slots holding memory
    their own step made. `last`: slot -> index of the last step reading it.
    `keep`: argument and result slots."""

    def owner(s: int) -> int:
        while s in view_of:
            s = view_of[s]
        return s

    sharing: dict[int, list[int]] = {}
    for s in view_of:
        sharing.setdefault(owner(s), []).append(s)
    chosen: dict[int, int] = {}
    for i, operands, writable in candidates:
        owners = [owner(s) for s in operands]
        for k, (s, o) in enumerate(zip(operands, owners)):
            if not writable[k] or o not in fresh or o in keep or owners.count(o) != 1:
                continue
            if all(last.get(m, -1) <= i and m not in keep for m in (o, *sharing.get(o, ()))):
                chosen[i] = k
                break
    return chosen


@dataclass(frozen=True)
class DonationRule:
    """`needed(written, i)`: the argument positions the caller must give up
    for step i to write the slots `written` (the in-place operands of its
    op), or None when it never may: each of them an argument, read by step
    i only, not returned, and no two the same."""

    arg_pos: dict[int, int]
    readers: dict[int, int]
    last: dict[int, int]
    results: frozenset[int]

    def needed(self, written: Sequence, i: int) -> frozenset[int] | None:
        if not written or len(set(written)) != len(written) or not all(
                type(j) is int and j in self.arg_pos and self.readers.get(j) == 1 and self.last.get(j) == i
                and j not in self.results for j in written):
            return None
        return frozenset(self.arg_pos[j] for j in written)


def donation_rule(reads: Sequence[Set[int]], last: dict[int, int], arg_slots: Sequence[int],
                  result_slots: Sequence[int]) -> DonationRule:
    """The rule for the function whose steps read `reads` (`last`: slot ->
    the last step reading it, analysis/liveness.py)."""
    readers: dict[int, int] = {}
    for slots in reads:
        for j in slots:
            readers[j] = readers.get(j, 0) + 1
    return DonationRule({s: k for k, s in enumerate(arg_slots)}, readers, last, frozenset(result_slots))
