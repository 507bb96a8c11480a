"""analysis/liveness.py: each slot's last reader, and what each step drops."""

from tilefx.analysis.liveness import liveness


def test_each_slot_is_dropped_after_its_last_reader():
    # slots 0, 1 arguments; 2 = f(0, 1); 3 = g(2); 4 = h(2, 3), returned
    live = liveness([{0, 1}, {2}, {2, 3}], keep={0, 1, 4})
    assert live.last == {0: 0, 1: 0, 2: 2, 3: 2}
    assert live.dead == ((), (), (2, 3))  # arguments and results are never dropped


def test_a_slot_no_step_reads_is_never_dropped_by_a_step():
    live = liveness([set(), {5}], keep=set())
    assert live.last == {5: 1}
    assert live.dead == ((), (5,))
