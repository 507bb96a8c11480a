"""tilefx/gcpause.py: the collector paused for a compile, the objects made
meanwhile moved to the oldest generation unexamined when it resumes, and
nothing lost: cycles made meanwhile are collected by a full collection."""

import gc
import weakref

import pytest

from tilefx import gcpause


class _Node:
    pass


def _cycle() -> weakref.ref:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


@pytest.fixture
def collector():
    was = gc.isenabled()
    gc.enable()
    gc.collect()
    yield
    (gc.enable if was else gc.disable)()


def test_the_young_generation_is_empty_after_and_cycles_are_still_collected(collector, monkeypatch):
    # no forced full collection in this pause: the count of objects moved so
    # far is this process's (earlier compiles in the same test worker)
    monkeypatch.setattr(gcpause, "_moved", [0])
    with gcpause.gc_paused():
        assert not gc.isenabled()
        keep = [[i] for i in range(20_000)]  # tracked objects that live on
        dead = _cycle()
    assert gc.isenabled()
    assert gc.get_count()[0] < 1_000  # not 20,000 waiting for a young collection
    assert dead() is not None  # moved, not examined yet
    gc.collect()
    assert dead() is None and len(keep) == 20_000


def _made_after_freezing() -> list:
    """Tracked objects a freeze of the process would add to its frozen set.
    (The frozen count is compared within their number, not exactly: a
    frozen object that another thread or a finaliser drops leaves it.)"""
    return [[i] for i in range(5_000)]


def test_a_process_s_own_frozen_objects_stay_frozen(collector):
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with gcpause.gc_paused():
            _cycle()
            young = _made_after_freezing()
        assert frozen - 1_000 < gc.get_freeze_count() < frozen + len(young)  # neither thawed nor grown
    finally:
        gc.unfreeze()


def test_a_full_collection_after_enough_objects_moved(collector, monkeypatch):
    monkeypatch.setattr(gcpause, "FULL_COLLECTION_AFTER", 100)
    monkeypatch.setattr(gcpause, "_moved", [0])
    with gcpause.gc_paused():
        dead = _cycle()
        keep = [[i] for i in range(1_000)]
    assert dead() is None and len(keep) == 1_000
    assert gcpause._moved == [0]


def test_a_disabled_collector_stays_disabled(collector):
    gc.disable()
    with gcpause.gc_paused():
        pass
    assert not gc.isenabled()


def test_long_lived_objects_frozen_for_the_block_garbage_of_the_block_still_collected(collector):
    keep = [[i] for i in range(5_000)]  # alive before and after the block
    old_garbage = _cycle()
    with gcpause.long_lived_frozen():
        assert old_garbage() is None  # collected before freezing: nothing dead is kept frozen
        assert gc.get_freeze_count() >= len(keep)
        made_here = _cycle()
        gc.collect()  # walks only what the block made
        assert made_here() is None
    assert gc.get_freeze_count() == 0 and len(keep) == 5_000


def test_long_lived_frozen_leaves_a_process_s_own_frozen_set_alone(collector):
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        young = _made_after_freezing()
        with gcpause.long_lived_frozen():
            assert frozen - 1_000 < gc.get_freeze_count() < frozen + len(young)  # nothing more frozen
        assert frozen - 1_000 < gc.get_freeze_count() < frozen + len(young)  # nor thawed
    finally:
        gc.unfreeze()


def test_planning_freezes_the_trace_while_costing(monkeypatch):
    """The planner costs its configurations with the model, torch and the
    trace frozen, and thaws them after."""
    import torch

    import tilefx
    from tilefx.planner import search

    counts = []
    real = search._Planner._search
    monkeypatch.setattr(search._Planner, "_search", lambda self: counts.append(gc.get_freeze_count()) or real(self))
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 2)

        def forward(self, x):
            return self.fc(x).square().mean()

    fits = tilefx.plan(Net(), torch.randn(2, 4), ipus=1)
    assert fits and counts and counts[0] > 10_000 and gc.get_freeze_count() == 0
