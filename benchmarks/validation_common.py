"""What every row of the machine-model validation (docs/machine-validation.md)
is made of: the `Row` a published figure becomes, the compile options a row
starts from, meta-device inputs, and the compile context that leaves the
out-of-memory check to the caller. `machine_validation.py` (the training
rows) and `inference_validation.py` (the inference rows) build on it."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch

import tilefx
from tilefx.backend.machine import Machine


@dataclass(frozen=True)
class Row:
    """A prediction: a published measurement the model computes from the constants."""

    key: str
    workload: str
    published: float
    unit: str
    source: str
    config: str  # the published configuration
    assumed: str  # what the source does not give
    compute: Callable[[], float]
    band: float = 0.25


def meta(*shape, dtype=torch.half):
    """A meta-device tensor: a row's input, with no memory behind it."""
    return torch.zeros(*shape, dtype=dtype, device="meta")


@contextlib.contextmanager
def past_the_memory_check():
    """Compile without the machine model's out-of-memory check (the rows'
    callers read the memory fractions themselves) and without warnings."""
    from tilefx.backend import profile as profile_module

    check, profile_module.check_fits = profile_module.check_fits, lambda memory, machine: None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        profile_module.check_fits = check


def options(machine: Machine, half_partials: bool = True, proportion: float | None = None,
            state_off_chip: bool = False):
    """A row's options: its machine, fp16 partials (16.16) unless told
    otherwise, IPU 0's memory proportion, the optimizer state off chip."""
    opts = tilefx.Options().setMachine(machine)
    if half_partials:
        opts.Precision.setPartialsType(torch.half)
    if proportion is not None:
        opts.setAvailableMemoryProportion({"IPU0": proportion})
    if state_off_chip:
        opts.TensorLocations.setOptimizerLocation(tilefx.TensorLocationSettings().useOnChipStorage(False))
    return opts
