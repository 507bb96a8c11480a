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


def test_a_process_s_own_frozen_objects_stay_frozen(collector):
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with gcpause.gc_paused():
            _cycle()
        assert gc.get_freeze_count() == frozen
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
