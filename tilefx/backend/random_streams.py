"""The random streams a program's random ops draw from: one numpy generator
per replica, all from one seed.

Global replica 0's generator is also the one the program is built with
(the executor's own stream, `own`, which other processes hold too); replica r's is seeded with (seed, r) by the
replica's global index, so process p's replicas continue after those of
processes 0 .. p-1 and a replica draws the same numbers whichever process
runs it. Without a seed, the operating system's entropy takes its place.
The surfaces read and write the streams' states through this object: the
executable file and the training checkpoint save and restore them, PopART's
`setRandomSeed` / `getRNGState` / `setRNGState` reseed and show them.
"""

from __future__ import annotations

import numpy as np

from tilefx.errors import Error


class RandomStreams:
    """The generators of `count` replicas, the first of global index `first`."""

    def __init__(self, seed: int | None, first: int = 0, count: int = 1):
        self.first = first
        self.count = count
        # `own`: the program's stream, built with it (global replica 0's,
        # so in the first process it is also `generators[0]`)
        self.own: np.random.Generator
        self.generators: list[np.random.Generator]
        self.reseed(seed)

    def reseed(self, seed: int | None) -> None:
        """New generators for every replica, all from `seed` (None: from the
        operating system). Programs read the replica's generator at each call,
        so the next call draws from the new streams."""
        self.own = own = np.random.default_rng(seed)
        entropy = seed if seed is not None else np.random.SeedSequence().entropy
        self.generators = [own if r == 0 else np.random.default_rng([entropy, r])
                           for r in range(self.first, self.first + self.count)]

    def states(self) -> list[dict]:
        """Each replica's generator state (numpy's `bit_generator.state`:
        plain ints and strings)."""
        return [g.bit_generator.state for g in self.generators]

    def set_states(self, states: list, where: str) -> None:
        """Continue from `states()` of the same replicas; a list of another
        length or an invalid state is an Error naming `where`."""
        if not isinstance(states, list) or len(states) != len(self.generators):
            raise Error(f"{where} must list one generator state per replica ({len(self.generators)})")
        for g, st in zip(self.generators, states):
            try:
                g.bit_generator.state = st
            except (TypeError, ValueError, KeyError) as e:
                raise Error(f"{where} is not a valid generator state: {e}") from None
