"""The numpy kernels of the tilefx backend: one table from op name to kernel.

`KERNELS["add.Tensor"](*operands, **props)` runs the op of that name in
`tilefx.dialects.aten_schema.ATEN_SCHEMAS` on numpy arrays; `IPU_KERNELS`
does the same for the `ipu` dialect's ops, keyed by their full op name. There
is exactly one entry per schema, keyed by the same name, so the executor needs
no per-op code: it looks the name up and calls it.

Calling convention: operands come positionally in schema order (np.ndarray,
None for an absent `Tensor?`, a list for `Tensor[]`); properties come as
keywords. Every parameter has its schema name (operands may be passed by name
too), and every schema default is the Python default of the keyword, so a
property the IR did not record can simply be left out. Kernels return
np.ndarray (0-d for scalars), a tuple for multi-result ops (None for outputs
an output_mask leaves out) and a list for `split_with_sizes`; results may be
views of inputs, never written to afterwards.

One module per op family, each with its own `KERNELS` dict filled by a
decorator; `alu.py` makes the elementwise kernels that are one numpy call
from tables (op name -> numpy function, one table per dtype rule); this
module joins them. The package must not import torch. To add an op: its
schema line in `dialects/aten_schema.py`, its kernel in the family module it
belongs to (or, for one numpy call under a rule of `alu.py`, a row of that
rule's table), a case in `tests/backend/kernels/test_kernels.py`.
"""

from __future__ import annotations

from tilefx.backend.kernels import (
    alu,
    convolution,
    dense_linalg,
    elementwise,
    indexing,
    linalg,
    normalization,
    pointwise_math,
    pooling,
    random,
    reductions,
    resampling,
    sorting,
    special,
    spectral,
    views,
)
from tilefx.backend.kernels._common import Kernel
from tilefx.backend.kernels.ipu import IPU_KERNELS

__all__ = ["FAMILIES", "FIRST_RESULT_KERNELS", "IPU_KERNELS", "KERNELS", "Kernel"]

FAMILIES = (alu, elementwise, pointwise_math, views, indexing, reductions, sorting, linalg, normalization,
            random, convolution, pooling, resampling, spectral, special, dense_linalg)


def _join() -> dict[str, Kernel]:
    table: dict[str, Kernel] = {}
    for family in FAMILIES:
        twice = table.keys() & family.KERNELS.keys()
        if twice:
            raise ValueError(f"kernels defined in two families: {sorted(twice)}")
        table.update(family.KERNELS)
    return table


KERNELS: dict[str, Kernel] = _join()
# kernels that compute only the first result of a multi-result op, for when
# nothing reads the others (the executor chooses; same signature as KERNELS')
FIRST_RESULT_KERNELS: dict[str, Kernel] = dict(pooling.FIRST_RESULT_KERNELS)
