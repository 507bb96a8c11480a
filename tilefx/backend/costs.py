"""Static cost model: cycles, exchange and temporary memory of each op on the
simulated IPU, computed once at compile time (shapes are static).

Matmul-like ops (mm, bmm, addmm, convolution and its backward, serialized
matmul) go through a planner that partitions the work over the tiles as an
(m, n, k) grid and splits the reduction dimension into serial steps until
the plan's temporary memory per tile fits `bytes_per_tile x proportion` (the
available memory proportion). Among the plans that fit it picks the fastest
(ties: less memory); when nothing fits it takes the plan with the least
memory and warns, as PopLibs does. Every other op is elementwise or a
reduction spread linearly over the tiles.

The BSP model of one op: compute cycles on the busiest tile, then exchange
(bytes received per tile / exchange bytes per cycle), plus a sync and the
fixed cost of launching the compute set for every serial step.
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass

import numpy as np

from tilefx.backend.machine import Machine
from tilefx.dialects.names import AVAILABLE_MEMORY_KEY

# views alias their input (a transposed operand is read in place by matmul plans)
VIEW_OPS = {"view", "alias", "squeeze.dims", "unsqueeze", "select.int", "slice.Tensor", "expand",
            "split_with_sizes", "nop", "set_available_memory", "identity_loss.none", "permute"}
COPY_OPS = {"clone", "_to_copy", "cat", "constant_pad_nd", "slice_scatter"}
REDUCTION_OPS = {"sum.dim_IntList", "sum", "mean", "mean.dim", "amax", "amin", "any.dim", "argmax",
                 "var_mean.correction", "_softmax", "_log_softmax", "_softmax_backward_data",
                 "_log_softmax_backward_data", "native_layer_norm", "native_layer_norm_backward",
                 "_native_batch_norm_legit_functional", "_native_batch_norm_legit_no_training",
                 "identity_loss"}
GATHER_OPS = {"embedding", "embedding_dense_backward", "index.Tensor", "index_put", "gather",
              "scatter.value", "scatter.src", "scatter_add", "max_pool2d_with_indices",
              "max_pool2d_with_indices_backward", "avg_pool2d", "avg_pool2d_backward"}
# elementwise operations per element of the optimizer updates (a documented estimate)
UPDATE_FLOPS = {"sgd": 4, "adam": 14, "accumulate": 1}


@dataclass(frozen=True)
class OpCost:
    """What one op costs on the busiest tile of its IPU."""

    compute_cycles: int
    exchange_bytes: int  # received by the busiest tile
    exchange_cycles: int
    sync_cycles: int
    temp_bytes: int  # temporary memory per tile while the op runs
    flops: float
    plan: str = ""

    @property
    def cycles(self) -> int:
        return self.compute_cycles + self.exchange_cycles + self.sync_cycles


ZERO = OpCost(0, 0, 0, 0, 0, 0.0, "view")


@dataclass(frozen=True)
class MatmulPlan:
    pm: int
    pn: int
    pk: int
    serial: int
    cycles: int
    compute_cycles: int
    exchange_bytes: int
    exchange_cycles: int
    sync_cycles: int
    temp_bytes: int
    fits: bool

    def describe(self) -> str:
        return (f"grid m{self.pm} x n{self.pn} x k{self.pk} over {self.pm * self.pn * self.pk} tiles, "
                f"{self.serial} serial step{'s' if self.serial > 1 else ''}"
                + ("" if self.fits else ", over the memory bound"))


@functools.lru_cache(maxsize=8)
def _grid(tiles: int) -> np.ndarray:
    """Candidate (pm, pn, pk) partitions: 2^a and 3*2^a factors using <= tiles."""
    vals = sorted({v for a in range(12) for v in (2 ** a, 3 * 2 ** a) if v <= tiles})
    v = np.array(vals, dtype=np.int64)
    pm, pn, pk = np.meshgrid(v, v, v, indexing="ij")
    pm, pn, pk = pm.ravel(), pn.ravel(), pk.ravel()
    keep = pm * pn * pk <= tiles
    return np.stack([pm[keep], pn[keep], pk[keep]])


@functools.lru_cache(maxsize=4096)
def plan_matmul(batch: int, M: int, K: int, N: int, itemsize: int, machine: Machine,
                proportion: float) -> MatmulPlan:
    """The fastest (m, n, k) tile grid and serial split of `batch` independent
    [M, K] x [K, N] products whose temporaries fit the memory bound."""
    tiles_per_batch = max(1, machine.tiles // batch) if batch <= machine.tiles else 1
    batch_rounds = math.ceil(batch / machine.tiles) if batch > machine.tiles else 1
    grid = _grid(tiles_per_batch)
    pm, pn, pk = grid
    ok = (pm <= max(M, 1)) & (pn <= max(N, 1)) & (pk <= max(K, 1))
    pm, pn, pk = pm[ok], pn[ok], pk[ok]
    m_t = -(-M // pm)
    n_t = -(-N // pn)
    k_t = -(-K // pk)
    bound = machine.bytes_per_tile * proportion
    partials = m_t * n_t * 4  # fp32 partial sums of a tile's piece of the result
    # with pk == 1 they are the result tensor itself (counted as its output, not as a
    # temporary); splitting k needs pk extra partial buffers to reduce
    extra = np.where(pk > 1, partials, 0)
    # the largest k-chunk whose operand buffers fit next to the partials
    k_max = np.floor((bound - extra) / ((m_t + n_t) * itemsize)).astype(np.int64)
    fits = k_max >= 1
    serial = np.where(fits, -(-k_t // np.maximum(k_max, 1)), k_t)
    k_s = -(-k_t // serial)
    temp = (m_t + n_t) * k_s * itemsize + extra
    # the AMP unit works on k-vectors of 16 (fp16) / 8 (fp32) and 4 output channels;
    # splitting k serially adds a sync and a compute-set launch per step, so for a
    # given grid more memory never costs cycles (the planner's choice is monotone)
    kvec = 16 if itemsize <= 2 else 8
    nvec = 4
    macs = machine.macs_per_cycle(itemsize)
    compute = m_t * (-(-n_t // nvec)) * (-(-k_t // kvec)) * (kvec * nvec) // macs
    exch_bytes = (m_t * k_t + k_t * n_t) * itemsize + np.where(pk > 1, partials, 0)
    exch = -(-exch_bytes // machine.exchange_bytes_per_cycle)
    reduce_cycles = np.where(pk > 1, -(-(m_t * n_t) // machine.elems_per_cycle(4)), 0)
    steps = serial + (pk > 1)
    sync = steps * (machine.sync_cycles(1) + machine.compute_set_overhead_cycles)
    total = (compute + exch + reduce_cycles + sync) * batch_rounds
    if fits.any():
        cand = np.flatnonzero(fits)
        order = np.lexsort((temp[cand], total[cand]))
        i = cand[order[0]]
    else:
        i = int(np.lexsort((total, temp))[0])
    return MatmulPlan(int(pm[i]), int(pn[i]), int(pk[i]), int(serial[i]), int(total[i]),
                      int((compute[i] + reduce_cycles[i]) * batch_rounds), int(exch_bytes[i] * batch_rounds),
                      int(exch[i] * batch_rounds), int(sync[i] * batch_rounds), int(temp[i]), bool(fits[i]))


def matmul_cost(batch: int, M: int, K: int, N: int, itemsize: int, machine: Machine,
                proportion: float, where: str = "") -> OpCost:
    p = plan_matmul(batch, M, K, N, itemsize, machine, proportion)
    if not p.fits:
        warnings.warn(f"{where or 'matmul'} [{batch}x{M}x{K}x{N}]: no plan fits the available memory "
                      f"proportion {proportion} ({int(machine.bytes_per_tile * proportion)} bytes per "
                      f"tile); using the plan with the least temporary memory ({p.temp_bytes} bytes)",
                      stacklevel=2)
    return OpCost(p.compute_cycles, p.exchange_bytes, p.exchange_cycles, p.sync_cycles, p.temp_bytes,
                  2.0 * batch * M * K * N, p.describe())


def _numel(shape) -> int:
    return int(np.prod(shape)) if len(shape) else 1


def linear_cost(out_elems: int, in_bytes: int, out_bytes: int, itemsize: int, machine: Machine,
                flops_per_elem: float = 1.0, reduction: bool = False, moves: bool = False) -> OpCost:
    """An elementwise op (or a reduction, or a data rearrangement) spread over the tiles."""
    total_bytes = max(in_bytes, out_bytes, 1)
    tiles = max(1, min(machine.tiles, math.ceil(total_bytes / machine.grain_bytes)))
    elems_per_tile = math.ceil(max(out_elems, 1) * max(1.0, in_bytes / max(out_bytes, 1)) / tiles)
    compute = math.ceil(elems_per_tile * flops_per_elem / machine.elems_per_cycle(itemsize))
    exch_bytes = 0
    syncs = 1
    if reduction:
        exch_bytes = math.ceil(max(out_elems, 1) * 4 * min(tiles, 64) / tiles) + 4 * min(tiles, 64)
        syncs = 2
    if moves:
        exch_bytes = math.ceil(out_bytes / tiles)
        compute = math.ceil(exch_bytes / 8)
    exch = math.ceil(exch_bytes / machine.exchange_bytes_per_cycle)
    sync = syncs * (machine.sync_cycles(1) + machine.compute_set_overhead_cycles)
    return OpCost(compute, exch_bytes, exch, sync, 0, float(out_elems * flops_per_elem))


# ---------------------------------------------------------------------------
# costs of IR ops

DEFAULT_PROPORTION = 0.6


def _shape(v) -> tuple[int, ...]:
    return tuple(v.type.get_shape())


def _itemsize(v) -> int:
    t = v.type.element_type
    width = getattr(t, "width", None)
    if width is not None:  # integer types
        return max(1, width.data // 8)
    return {"f16": 2, "bf16": 2, "f32": 4, "f64": 8}.get(str(t), 4)


def _bytes(v) -> int:
    return _numel(_shape(v)) * _itemsize(v)


def _prop(op, name, default=None):
    from tilefx.dialects.aten import from_attr

    attr = op.properties.get(name)
    return default if attr is None else from_attr(attr)


def proportion_of(op, default: float = DEFAULT_PROPORTION) -> float:
    attr = op.attributes.get(AVAILABLE_MEMORY_KEY)
    return float(attr.value.data) if attr is not None else default


def op_cost(op, machine: Machine, proportion: float = DEFAULT_PROPORTION) -> OpCost:
    """The cost of one graph-IR op on `machine` (see the module docstring);
    `proportion` is the available memory proportion of an op that does not
    carry its own `ipu.available_memory` yet (before ipu-available-memory)."""
    name = op.name.removeprefix("aten.")
    if name in VIEW_OPS or op.name in ("ipu.nop", "ipu.set_available_memory", "ipu.copy", "ipu.yield",
                                       "ipu.print_tensor"):
        return ZERO
    where = name
    p = proportion_of(op, proportion)
    ins = list(op.operands)
    outs = list(op.results)
    if name in ("mm", "bmm", "addmm"):
        a, b = (ins[1], ins[2]) if name == "addmm" else (ins[0], ins[1])
        sa, sb = _shape(a), _shape(b)
        batch = sa[0] if name == "bmm" else 1
        return matmul_cost(batch, sa[-2], sa[-1], sb[-1], _itemsize(a), machine, p, where)
    if name == "convolution":
        x, w, y = ins[0], ins[1], outs[0]
        g = _prop(op, "groups", 1)
        sx, sw, sy = _shape(x), _shape(w), _shape(y)
        M = sy[0] * _numel(sy[2:])
        K = sw[1] * _numel(sw[2:])
        return matmul_cost(g, M, K, sw[0] // g, _itemsize(x), machine, p, where)
    if name == "convolution_backward":
        gy, x, w = ins[0], ins[1], ins[2]
        g = _prop(op, "groups", 1)
        mask = _prop(op, "output_mask", [True, True, True])
        sgy, sx, sw = _shape(gy), _shape(x), _shape(w)
        costs = []
        if mask[0]:
            costs.append(matmul_cost(g, sx[0] * _numel(sx[2:]), (sw[0] // g) * _numel(sw[2:]),
                                     sx[1] // g, _itemsize(x), machine, p, where + " (input grad)"))
        if mask[1]:
            costs.append(matmul_cost(g, sw[0] // g, sgy[0] * _numel(sgy[2:]), sw[1] * _numel(sw[2:]),
                                     _itemsize(x), machine, p, where + " (weight grad)"))
        if mask[2]:
            costs.append(linear_cost(sgy[1], _bytes(gy), sgy[1] * 4, _itemsize(gy), machine,
                                     reduction=True))
        return _sum(costs)
    if op.name == "ipu.serialized_matmul":
        a, b = ins
        sa, sb = _shape(a), _shape(b)
        f = int(op.factor.value.data)
        mode = op.mode.data
        M, K, N = _numel(sa[:-1]), sa[-1], sb[-1]
        M, K, N = (M // f, K, N) if mode == "input_channels" else \
            (M, K // f, N) if mode == "reducing_dim" else (M, K, N // f)
        one = matmul_cost(1, M, K, N, _itemsize(a), machine, p, where)
        return _scale(one, f)
    out_bytes = sum(_bytes(r) for r in outs if _numel(_shape(r)))
    in_bytes = sum(_bytes(v) for v in ins)
    out_elems = sum(_numel(_shape(r)) for r in outs)
    isz = _itemsize(outs[0]) if outs else 4
    if op.name in ("ipu.sgd", "ipu.adam", "ipu.accumulate"):
        return linear_cost(_numel(_shape(ins[0])), in_bytes, out_bytes, isz, machine,
                           flops_per_elem=UPDATE_FLOPS[op.name.removeprefix("ipu.")])
    if name in GATHER_OPS:
        return linear_cost(out_elems, in_bytes, out_bytes, isz, machine, flops_per_elem=2, moves=True)
    if name in COPY_OPS:
        return linear_cost(out_elems, in_bytes, out_bytes, isz, machine, moves=True)
    if name in REDUCTION_OPS or op.name == "ipu.identity_loss":
        return linear_cost(out_elems, in_bytes, out_bytes, isz, machine, flops_per_elem=2,
                           reduction=True)
    flops = {"exp": 4, "erf": 8, "gelu": 10, "tanh": 4, "sigmoid": 4, "log": 4, "rsqrt": 2,
             "sqrt": 2, "pow.Tensor_Scalar": 2, "native_dropout": 3}.get(name, 1)
    return linear_cost(out_elems, in_bytes, out_bytes, isz, machine, flops_per_elem=flops)


def _sum(costs: list[OpCost]) -> OpCost:
    if not costs:
        return ZERO
    return OpCost(sum(c.compute_cycles for c in costs), max(c.exchange_bytes for c in costs),
                  sum(c.exchange_cycles for c in costs), sum(c.sync_cycles for c in costs),
                  max(c.temp_bytes for c in costs), sum(c.flops for c in costs),
                  "; ".join(c.plan for c in costs if c.plan))


def _scale(c: OpCost, f: int) -> OpCost:
    return OpCost(c.compute_cycles * f, c.exchange_bytes * f, c.exchange_cycles * f, c.sync_cycles * f,
                  c.temp_bytes, c.flops * f, f"{f} serialized pieces of {c.plan}")
