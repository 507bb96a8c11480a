"""Where a class of tensors lives: PopTorch's `TensorLocationSettings`
(the PopTorch user guide's `opts.TensorLocations`, optimum-graphcore's `IPUConfig._to_options`: optimizer
state off chip and
sharded "with zero-redundancy"), resolved to the two questions the machine
model asks of each tensor: is it in streaming memory, and over how many
replicas is it sharded. `Locations` holds the four classes PopART places
(weights, activations, gradient accumulators, optimizer state).

PopART's rules (its "Tensor locations" chapter): an off-chip tensor lives in
streaming memory "when not immediately required by IPU computations" and is
loaded for its use; only variables equal on every replica (weights and
optimizer state) can be sharded, and a sharded tensor needed whole is
all-gathered first. A shard of `n` elements over R replicas holds
ceil(n / R) elements (the last shards padded).

Replicated tensor sharding (PopTorch user guide, `TensorLocationSettings.useReplicatedTensorSharding`): each
of R replicas
keeps 1/R of a sharded tensor; tensors under `min_elements_sharded`
elements (8192 by default) are not sharded, and tensors under
`min_elements_off_chip` (PopART's default 2) stay on chip. The executor
computes every replica's numbers whole either way: sharding changes where
the bytes live and what the collectives cost, never the values.
"""

from __future__ import annotations

from dataclasses import dataclass

MIN_ELEMENTS_SHARDED = 8192
MIN_ELEMENTS_OFF_CHIP = 2


@dataclass(frozen=True)
class TensorLocation:
    on_chip: bool = True
    sharded: bool = False  # replicated tensor sharding
    min_elements_off_chip: int = MIN_ELEMENTS_OFF_CHIP
    min_elements_sharded: int = MIN_ELEMENTS_SHARDED

    def off_chip(self, numel: int) -> bool:
        """Whether a tensor of `numel` elements is kept in streaming memory."""
        return not self.on_chip and numel >= self.min_elements_off_chip

    def shards(self, numel: int, replicas: int) -> int:
        """Over how many replicas a tensor of `numel` elements is sharded (1: whole)."""
        if self.sharded and replicas > 1 and numel >= self.min_elements_sharded:
            return replicas
        return 1

    def shard_bytes(self, nbytes: int, numel: int, replicas: int) -> int:
        """The bytes one replica keeps of a tensor of `nbytes` (`numel` elements)."""
        n = self.shards(numel, replicas)
        if n == 1 or numel <= 0:
            return nbytes
        return -(-numel // n) * (nbytes // numel)


ON_CHIP = TensorLocation()


@dataclass(frozen=True)
class Locations:
    """Where each class of tensors lives (`opts.TensorLocations`, resolved)."""

    weight: TensorLocation = ON_CHIP
    activation: TensorLocation = ON_CHIP
    accumulator: TensorLocation = ON_CHIP
    optimizer: TensorLocation = ON_CHIP
