"""analysis/in_place.py: which steps may write their result over an operand."""

from tilefx.analysis.in_place import donation_rule, overwritable
from tilefx.analysis.liveness import liveness


def test_an_update_may_write_arguments_only_it_reads_and_nothing_returns():
    # args 0 (weight), 1 (gradient), 2 (momentum); step 0 reads 1; step 1 is
    # the update reading 0, 1, 2; slot 3 returned; slot 2 also returned
    reads = [{1}, {0, 1, 2}]
    live = liveness(reads, keep={0, 1, 2, 3})
    rule = donation_rule(reads, live.last, arg_slots=[0, 1, 2], result_slots=[3, 2])
    assert rule.needed([0], 1) == frozenset({0})
    assert rule.needed([1], 1) is None  # read by step 0 as well
    assert rule.needed([2], 1) is None  # returned
    assert rule.needed([0, 0], 1) is None  # the same array twice
    assert rule.needed([0], 0) is None  # not read by step 0
    assert rule.needed([], 1) is None
    assert rule.needed([5], 1) is None  # not an argument


def test_an_operand_dying_at_a_step_that_made_its_own_memory_is_overwritten():
    # step 0 makes 2 (fresh); step 1 views 2 as 3; step 2 reads 3 and 2
    # (candidate); step 3 makes 4 from arg 0 (fresh) and step 4 reads 4 (candidate)
    reads = [{0}, {2}, {3, 2}, {0}, {4, 1}]
    live = liveness(reads, keep={0, 1, 5})
    candidates = [(2, [3, 2], [True, True]), (4, [4, 1], [True, True])]
    chosen = overwritable(candidates, view_of={3: 2}, fresh={2, 4}, last=live.last, keep={0, 1, 5})
    # step 2's operands are one memory twice: neither may be written
    assert chosen == {4: 0}
    # an operand read later is not written
    chosen = overwritable([(4, [4, 1], [True, True])], view_of={}, fresh={4}, last={4: 5}, keep=set())
    assert chosen == {}
    # an argument's memory is never written
    chosen = overwritable([(4, [1, 4], [True, False])], view_of={}, fresh={4}, last=live.last, keep={1})
    assert chosen == {}
