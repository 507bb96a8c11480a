"""The random streams of a program's random ops (backend/random_streams.py):
one generator per replica, from one seed, by the replica's global index."""

import numpy as np
import pytest

from tilefx.backend.random_streams import RandomStreams
from tilefx.errors import Error


def _draws(streams: RandomStreams) -> list[np.ndarray]:
    return [g.random(4) for g in streams.generators]


def test_each_replica_has_its_own_stream_from_the_seed():
    s = RandomStreams(7, first=0, count=3)
    assert s.own is s.generators[0]
    draws = _draws(s)
    assert np.array_equal(draws[0], np.random.default_rng(7).random(4))
    for r in (1, 2):
        assert np.array_equal(draws[r], np.random.default_rng([7, r]).random(4))
    assert not np.array_equal(draws[1], draws[2])


def test_a_later_process_continues_the_global_replica_index():
    """Process 1 of two replicas each holds global replicas 2 and 3 (the
    same numbers as one process of four), and the program's own stream
    (global replica 0's) apart from them."""
    whole = _draws(RandomStreams(3, first=0, count=4))
    second = RandomStreams(3, first=2, count=2)
    assert second.own is not second.generators[0]
    assert all(np.array_equal(a, b) for a, b in zip(_draws(second), whole[2:]))
    assert np.array_equal(second.own.random(4), np.random.default_rng(3).random(4))


def test_reseed_starts_every_stream_again():
    s = RandomStreams(5, count=2)
    first = _draws(s)
    _draws(s)
    s.reseed(5)
    assert all(np.array_equal(a, b) for a, b in zip(_draws(s), first))
    s.reseed(6)
    assert not np.array_equal(_draws(s)[0], first[0])


def test_states_continue_where_they_were_taken():
    s = RandomStreams(None, count=2)  # the operating system's entropy
    _draws(s)
    saved = s.states()
    after = _draws(s)
    other = RandomStreams(1, count=2)
    other.set_states(saved, "file: rng_states")
    assert all(np.array_equal(a, b) for a, b in zip(_draws(other), after))


@pytest.mark.parametrize("states, words", [
    ([{}], "must list one generator state per replica (2)"),
    ("x", "must list one generator state per replica (2)"),
    ([{"bit_generator": "PCG64"}, {}], "is not a valid generator state"),
])
def test_bad_states_are_an_error_naming_where(states, words):
    s = RandomStreams(0, count=2)
    with pytest.raises(Error, match="^file: rng_states ") as e:
        s.set_states(states, "file: rng_states")
    assert words in str(e.value)
