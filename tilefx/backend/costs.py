"""Static cost model: cycles, exchange and temporary memory of each op on the
simulated IPU, computed once at compile time (shapes are static).

Matmul-like ops (mm, bmm, addmm, convolution and its backward, serialized
matmul) go through a planner that partitions the work over the tiles as an
(m, n, k) grid and splits the reduction dimension into serial steps until
the plan's temporary memory per tile fits `bytes_per_tile x proportion` (the
available memory proportion). Among the plans that fit it picks the fastest
(ties: less memory); when nothing fits it takes the plan with the least
memory and warns, as PopLibs does. Weights are created in the layout their
plan wants, so only the share a replicating plan needs moves (`is_resident`).
Gathers and scatter-adds of whole rows by index (embedding, index_select,
index_put, scatter_add and their gradients) are planned as PopLibs plans
multiSlice / multiUpdateAdd (`slice_plan.py`). Every other op is
elementwise or a reduction spread linearly over the tiles, bound by the
vector width or the tile's load bandwidth; reductions exchange
partials only when a reduced group spans tiles. docs/machine-validation.md
compares the model with published measurements.

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
from xdsl.dialects.builtin import BFloat16Type, Float16Type, Float32Type, Float64Type
from xdsl.ir import BlockArgument, Operation

from tilefx.backend.machine import Machine
from tilefx.backend.slice_plan import plan_slice
from tilefx.dialects import ipu
from tilefx.dialects.aten_traits import TRAITS, ops_where, traits
from tilefx.dialects.irutil import numel as _numel
from tilefx.dialects.irutil import shape_of as _shape
from tilefx.dialects.names import AVAILABLE_MEMORY_KEY, BUFFER_KEY, CONST_KEY, PARAM_KEY, PARTIALS_TYPE_KEY

# the cost kind and flops per element of each ATen op are its traits
# (dialects/aten_traits.py): views alias their input (a transposed operand is
# read in place by matmul plans), copies move it, gathers read by index;
# row reductions have full-size results (softmax, layer norm)
VIEW_OPS = ops_where(cost="view")
COPY_OPS = ops_where(cost="copy")
REDUCTION_OPS = ops_where(cost="reduction")
GATHER_OPS = ops_where(cost="gather")
ROW_REDUCTIONS = {n: TRAITS[n].flops for n in ops_where(cost="row_reduction")}
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
    tiles: int = 0  # tiles the op runs on (0: all of them), for its code and vertex state

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
                proportion: float, resident_b: bool = False, partials_itemsize: int = 4) -> MatmulPlan:
    """The fastest (m, n, k) tile grid and serial split of `batch` independent
    [M, K] x [K, N] products whose temporaries fit the memory bound.

    `partials_itemsize`: 4 for fp32 partials (the default), 2 for fp16
    (`Precision.setPartialsType(torch.half)`, fp16 operands only): half the
    partial-sum memory and exchange, and the AMP's FP16.16 rate
    (`Machine.macs_per_cycle`).

    `resident_b`: the [K, N] operand is a weight. Poplar creates weights in
    the layout their matmul plan wants (createMatMulInputRHS), so each (k, n)
    block already lives on the pm tiles that use it, 1/pm of it on each: a
    tile receives only the (pm - 1)/pm it does not hold, and a weight-
    stationary plan (pm = 1) moves and copies no weight bytes at all."""
    batch = max(batch, 1)  # an empty batch (torch.linalg.matrix_power of a 0 x n x n stack): planned as one
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
    psize = partials_itemsize if itemsize <= 2 else 4  # fp32 operands keep fp32 partials
    partials = m_t * n_t * psize  # partial sums of a tile's piece of the result
    # with pk == 1 they are the result tensor itself (counted as its output, not as a
    # temporary); splitting k needs pk extra partial buffers to reduce
    extra = np.where(pk > 1, partials, 0)
    # the share of a tile's weight block it must receive (0 for a weight-stationary plan)
    b_share = (pm - 1) / pm if resident_b else np.ones_like(pm, dtype=np.float64)
    n_moved = n_t * b_share
    # the largest k-chunk whose operand buffers fit next to the partials
    k_max = np.floor((bound - extra) / np.maximum((m_t + n_moved) * itemsize, 1)).astype(np.int64)
    fits = k_max >= 1
    serial = np.where(fits, -(-k_t // np.maximum(k_max, 1)), k_t)
    k_s = -(-k_t // serial)
    temp = np.ceil((m_t + n_moved) * k_s * itemsize).astype(np.int64) + extra
    # the AMP unit works on k-vectors of 16 (fp16) / 8 (fp32) and 4 output channels;
    # splitting k serially adds a sync and a compute-set launch per step, so for a
    # given grid more memory never costs cycles (the planner's choice is monotone)
    kvec = 16 if itemsize <= 2 else 8
    nvec = 4
    macs = machine.macs_per_cycle(itemsize, psize)
    compute = m_t * (-(-n_t // nvec)) * (-(-k_t // kvec)) * (kvec * nvec) // macs
    exch_bytes = np.ceil((m_t * k_t + k_t * n_moved) * itemsize).astype(np.int64) + \
        np.where(pk > 1, partials, 0)
    exch = -(-exch_bytes // machine.exchange_bytes_per_cycle)
    reduce_cycles = np.where(pk > 1, -(-(m_t * n_t) // machine.elems_per_cycle(psize)), 0)
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
                proportion: float, where: str = "", resident_b: bool = False,
                partials_itemsize: int = 4) -> OpCost:
    p = plan_matmul(batch, M, K, N, itemsize, machine, proportion, resident_b, partials_itemsize)
    if not p.fits:
        warnings.warn(f"{where or 'matmul'} [{batch}x{M}x{K}x{N}]: no plan fits the available memory "
                      f"proportion {proportion} ({int(machine.bytes_per_tile * proportion)} bytes per "
                      f"tile); using the plan with the least temporary memory ({p.temp_bytes} bytes)",
                      stacklevel=2)
    used = min(machine.tiles, p.pm * p.pn * p.pk * min(batch, max(1, machine.tiles // (p.pm * p.pn * p.pk))))
    return OpCost(p.compute_cycles, p.exchange_bytes, p.exchange_cycles, p.sync_cycles, p.temp_bytes,
                  2.0 * batch * M * K * N, p.describe(), used)


def linear_cost(out_elems: int, in_bytes: int, out_bytes: int, itemsize: int, machine: Machine,
                flops_per_elem: float = 1.0, reduction: bool = False, moves: bool = False,
                reduced: int | None = None, group: int | None = None) -> OpCost:
    """An elementwise op (or a reduction, or a data rearrangement) spread over the tiles.

    A reduction makes `reduced` values (default: `out_elems`), each from a group
    of `group` input elements. Groups that lie within one tile (the last-axis
    reductions of softmax and layer norm: rows are mapped whole) need no
    exchange; a group spread over p tiles sends p fp32 partials (a two-stage
    reduce, at most 64 partials per value in its first stage)."""
    total_bytes = max(in_bytes, out_bytes, 1)
    tiles = max(1, min(machine.tiles, math.ceil(total_bytes / machine.grain_bytes)))
    # the vector units work on every result (every input of a reduction); the
    # operands stream in at the tile's load bandwidth, whichever is slower
    work = max(out_elems, 1)
    if reduction:
        work = max(work, in_bytes // max(itemsize, 1))
    arith = math.ceil(math.ceil(work / tiles) * flops_per_elem / machine.elems_per_cycle(itemsize))
    loads = math.ceil(in_bytes / tiles / machine.load_bytes_per_cycle)
    compute = max(arith, loads)
    exch_bytes = 0
    syncs = 1
    if reduction:
        values = max(reduced if reduced is not None else out_elems, 1)
        in_elems = max(1, in_bytes // max(itemsize, 1))
        if group is None:  # strided groups: spread over as many tiles as they have elements
            spread = min(tiles, max(1, in_elems // values))
        else:  # contiguous groups: the tiles one group spans
            spread = min(tiles, max(1, math.ceil(group / max(1.0, in_elems / tiles))))
        if spread > 1:
            exch_bytes = math.ceil(values * 4 * min(spread, 64) / tiles) + 4 * min(spread, 64)
            syncs = 2
    if moves:
        exch_bytes = math.ceil(out_bytes / tiles)
        compute = math.ceil(exch_bytes / 8)
    exch = math.ceil(exch_bytes / machine.exchange_bytes_per_cycle)
    sync = syncs * (machine.sync_cycles(1) + machine.compute_set_overhead_cycles)
    return OpCost(compute, exch_bytes, exch, sync, 0, float(out_elems * flops_per_elem), "", tiles)


# The dense linear algebra ops: flops of one matrix as a function of its rows m,
# columns n (m >= n after a swap) and right-hand-side columns k, the standard
# counts of the LAPACK drivers the kernels run (LAPACK Working Note 41 for
# getrf, potrf, geqrf/orgqr, getrs, trsm; Golub & Van Loan, Matrix
# Computations, 4th ed., sections 8.3 and 8.6, for syevd and the R-SVD), e.g.
# LU 2/3 n^3, Cholesky 1/3 n^3, QR with Q 4mn^2 - 4/3 n^3. matrix_exp: a
# degree-13 Pade approximant, ~6 products, a solve and a few squarings (~20 n^3).
_LU, _SOLVE = (lambda m, n, k: m * n * n - n ** 3 / 3), (lambda m, n, k: 2 * n * n * k)
DENSE_LINALG_FLOPS = {
    "linalg_inv_ex": lambda m, n, k: 2 / 3 * n ** 3 + 2 * n ** 3,
    "_linalg_solve_ex": lambda m, n, k: 2 / 3 * n ** 3 + 2 * n * n * k,
    "_linalg_det": _LU, "_linalg_slogdet": _LU, "linalg_lu_factor_ex": _LU, "linalg_lu": _LU,
    "linalg_lu_solve": _SOLVE, "cholesky_solve": _SOLVE,
    "linalg_cholesky_ex": lambda m, n, k: n ** 3 / 3,
    "cholesky": lambda m, n, k: n ** 3 / 3,
    "cholesky_inverse": lambda m, n, k: 2 / 3 * n ** 3,
    "linalg_solve_triangular": lambda m, n, k: n * n * k,
    "triangular_solve": lambda m, n, k: n * n * k,
    "linalg_qr": lambda m, n, k: 4 * m * n * n - 4 / 3 * n ** 3,
    "_linalg_svd": lambda m, n, k: 6 * m * n * n + 20 * n ** 3,
    "_linalg_eigh": lambda m, n, k: 9 * n ** 3,
    "linalg_pinv.atol_rtol_tensor": lambda m, n, k: 6 * m * n * n + 20 * n ** 3 + 2 * m * n * n,
    "linalg_matrix_exp": lambda m, n, k: 20 * n ** 3,
}


def dense_linalg_cost(name: str, ins: list, in_bytes: int, out_bytes: int, itemsize: int,
                      machine: Machine) -> OpCost:
    """A batch of factorizations or solves: each is a chain of dependent column
    steps, so one matrix runs on one tile (no exchange between its steps) and
    the batch spreads over the tiles; its operands arrive over the exchange."""
    # which operand is the matrix and which the right-hand side (k columns)
    a_at, b_at = {"_linalg_solve_ex": (0, 1), "cholesky_solve": (1, 0), "triangular_solve": (1, 0),
                  "linalg_lu_solve": (0, 2), "linalg_solve_triangular": (0, 1)}.get(name, (0, None))
    sa = _shape(ins[a_at])
    m, n = (max(sa[-2:]), min(sa[-2:])) if len(sa) >= 2 else (1, 1)
    batch, k = _numel(sa[:-2]), 1
    if b_at is not None:
        sb = _shape(ins[b_at])
        k = sb[-1] if len(sb) >= 2 and sb[-2] == sa[-1] else 1
        batch = max(batch, _numel(sb[:-2]))
    per_matrix = max(DENSE_LINALG_FLOPS[name](m, n, k), 1.0)
    tiles = max(1, min(machine.tiles, batch))
    rounds = math.ceil(batch / tiles)
    compute = math.ceil(rounds * per_matrix / machine.elems_per_cycle(itemsize))
    exch_bytes = math.ceil(max(in_bytes, out_bytes) / tiles)
    exch = math.ceil(exch_bytes / machine.exchange_bytes_per_cycle)
    sync = machine.sync_cycles(1) + machine.compute_set_overhead_cycles
    return OpCost(compute, exch_bytes, exch, sync, 0, float(batch * per_matrix),
                  f"{batch} matrices of {m}x{n} on {tiles} tiles", tiles)


# ---------------------------------------------------------------------------
# costs of IR ops

DEFAULT_PROPORTION = ipu.DEFAULT_PROPORTION


# bytes per element of the float types, by class: `str(t)` runs xDSL's printer
# (~0.1 ms), and a small model's compile asks this ~300 times
_FLOAT_BYTES = {Float16Type: 2, BFloat16Type: 2, Float32Type: 4, Float64Type: 8}


def _itemsize(v) -> int:
    return _itemsize_of(v.type.element_type)


@functools.lru_cache(maxsize=None)  # a handful of element types; str() of one is slow
def _itemsize_of(t) -> int:
    width = getattr(t, "width", None)
    if width is not None:  # integer types
        return max(1, width.data // 8)
    return _FLOAT_BYTES.get(type(t), 4)


def _bytes(v) -> int:
    return _numel(_shape(v)) * _itemsize(v)


def _prop(op, name, default=None):
    from tilefx.dialects.aten import from_attr

    attr = op.properties.get(name)
    return default if attr is None else from_attr(attr)


def proportion_of(op, default: float = DEFAULT_PROPORTION) -> float:
    attr = op.attributes.get(AVAILABLE_MEMORY_KEY)
    return float(attr.value.data) if attr is not None else default


# the ops whose partial sums have a type (Precision.setPartialsType)
PARTIALS_OPS = frozenset({"aten.mm", "aten.bmm", "aten.addmm", "aten.convolution", "aten.convolution_backward",
                          "ipu.serialized_matmul"})


def partials_itemsize_of(op) -> int:
    """Bytes of one matmul / convolution partial: 2 when the op carries
    `ipu.partials_type = "half"` (Precision.setPartialsType(torch.half),
    written by ipu-partials-type), else 4 (fp32, the default)."""
    attr = op.attributes.get(PARTIALS_TYPE_KEY)
    return 2 if attr is not None and str(attr.data).lower() == "half" else 4


# ops through which a weight keeps the tile layout it was created with (views,
# and the elementwise cast autocast puts in front of a matmul)
# a weight loaded from streaming memory or all-gathered (the device IR's moves)
# lands in the layout its consumer's plan wants, as Poplar allocates the target
_LAYOUT_KEEPING = VIEW_OPS | {"t", "transpose.int", "_to_copy", "tile.remote_load", "tile.all_gather"}


def is_resident(v) -> bool:
    """Whether `v` is (a view or cast of) a weight, buffer or constant: a tensor
    Poplar lays out for the op that uses it, so the op exchanges none of it."""
    for _ in range(16):  # a chain of views and casts is short
        owner = v.owner
        if isinstance(v, BlockArgument):
            fn = owner.parent_op() if hasattr(owner, "parent_op") else None
            attrs = getattr(fn, "arg_attrs", None)
            if attrs is None or v.index >= len(attrs.data):
                return False
            keys = attrs.data[v.index].data
            return any(k in keys for k in (PARAM_KEY, BUFFER_KEY, CONST_KEY))
        if not isinstance(owner, Operation) or owner.name.removeprefix("aten.") not in _LAYOUT_KEEPING:
            return False
        v = owner.operands[0]
    return False


# attributes that name or place one op and do not change what it costs
INSTANCE_KEYS = frozenset({"ipu.place", "ipu.name"})
_PLANNED = frozenset({"aten.mm", "aten.bmm", "aten.addmm", "aten.convolution", "aten.convolution_backward",
                      "ipu.serialized_matmul"})
_COSTS: dict = {}
_COSTS_MAX = 1 << 16


def _signature(op, machine: Machine, proportion: float):
    """What an op's cost depends on: its name, operand and result types,
    properties and attributes, whether each operand is a resident weight,
    the partials type and proportion it runs with. Equal for the same op
    in each of a model's repeated layers. None for an op with a region, and
    for the matmuls and convolutions: their plans are cached by shape
    (plan_matmul) and they warn at each compile where no plan fits."""
    if op.regions or op.name in _PLANNED:
        return None
    return (op.name, tuple(v.type for v in op.operands), tuple(r.type for r in op.results),
            tuple(op.properties.items()),
            tuple((k, v) for k, v in op.attributes.items() if k not in INSTANCE_KEYS),
            tuple(is_resident(v) for v in op.operands), partials_itemsize_of(op),
            proportion_of(op, proportion), machine)


def op_cost(op, machine: Machine, proportion: float = DEFAULT_PROPORTION) -> OpCost:
    """The cost of one graph-IR op on `machine` (see the module docstring);
    `proportion` is the available memory proportion of an op that does not
    carry its own `ipu.available_memory` yet (before ipu-available-memory).
    Costed once per signature: a deep model's repeated layers (and the
    planner's many configurations of one model) reuse their costs."""
    key = _signature(op, machine, proportion)
    if key is None:
        return _op_cost(op, machine, proportion)
    cost = _COSTS.get(key)
    if cost is None:
        if len(_COSTS) >= _COSTS_MAX:
            _COSTS.clear()
        cost = _COSTS[key] = _op_cost(op, machine, proportion)
    return cost


def _op_cost(op, machine: Machine, proportion: float) -> OpCost:
    name = op.name.removeprefix("aten.")
    if name in VIEW_OPS or op.name in ("ipu.nop", "ipu.set_available_memory", "ipu.copy", "ipu.yield",
                                       "ipu.print_tensor", "ipu.recomputation_checkpoint"):
        return ZERO
    if op.name == "ipu.for":  # the body's cost times the trip count (plus a sync per iteration)
        count = int(op.count.value.data)
        body = _sum([op_cost(o, machine) for o in op.body.block.ops if o.name != "ipu.yield"])
        one = OpCost(body.compute_cycles, body.exchange_bytes, body.exchange_cycles,
                     body.sync_cycles + machine.sync_cycles(1), body.temp_bytes, body.flops, body.plan)
        c = _scale(one, count)
        return OpCost(c.compute_cycles, c.exchange_bytes, c.exchange_cycles, c.sync_cycles, c.temp_bytes,
                      c.flops, f"{count} iterations of ({body.plan or 'elementwise'})")
    where = name
    p = proportion_of(op, proportion)
    ps = partials_itemsize_of(op) if op.name in PARTIALS_OPS else 4
    ins = list(op.operands)
    outs = list(op.results)
    if name in ("mm", "bmm", "addmm"):
        a, b = (ins[1], ins[2]) if name == "addmm" else (ins[0], ins[1])
        sa, sb = _shape(a), _shape(b)
        batch = sa[0] if name == "bmm" else 1
        return matmul_cost(batch, sa[-2], sa[-1], sb[-1], _itemsize(a), machine, p, where,
                           resident_b=is_resident(b), partials_itemsize=ps)
    if name == "convolution":
        x, w, y = ins[0], ins[1], outs[0]
        g = _prop(op, "groups", 1)
        sx, sw, sy = _shape(x), _shape(w), _shape(y)
        M = sy[0] * _numel(sy[2:])
        K = sw[1] * _numel(sw[2:])
        return matmul_cost(g, M, K, sw[0] // g, _itemsize(x), machine, p, where,
                           resident_b=is_resident(w), partials_itemsize=ps)
    if name == "convolution_backward":
        gy, x, w = ins[0], ins[1], ins[2]
        g = _prop(op, "groups", 1)
        mask = _prop(op, "output_mask", [True, True, True])
        sgy, sx, sw = _shape(gy), _shape(x), _shape(w)
        costs = []
        if mask[0]:
            costs.append(matmul_cost(g, sx[0] * _numel(sx[2:]), (sw[0] // g) * _numel(sw[2:]),
                                     sx[1] // g, _itemsize(x), machine, p, where + " (input grad)",
                                     resident_b=is_resident(w), partials_itemsize=ps))
        if mask[1]:
            costs.append(matmul_cost(g, sw[0] // g, sgy[0] * _numel(sgy[2:]), sw[1] * _numel(sw[2:]),
                                     _itemsize(x), machine, p, where + " (weight grad)",
                                     partials_itemsize=ps))
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
        one = matmul_cost(1, M, K, N, _itemsize(a), machine, p, where, partials_itemsize=ps)
        return _scale(one, f)
    out_bytes = sum(_bytes(r) for r in outs if _numel(_shape(r)))
    in_bytes = sum(_bytes(v) for v in ins)
    out_elems = sum(_numel(_shape(r)) for r in outs)
    isz = _itemsize(outs[0]) if outs else 4
    if op.name in ("ipu.sgd", "ipu.adam", "ipu.accumulate"):
        return linear_cost(_numel(_shape(ins[0])), in_bytes, out_bytes, isz, machine,
                           flops_per_elem=UPDATE_FLOPS[op.name.removeprefix("ipu.")])
    if op.name in ("ipu.ctc_loss", "ipu.ctc_loss_grad"):  # per step: each extended label, log-sum-exps
        T, N, C = _shape(op.log_probs)
        tg = _shape(op.targets)
        S = tg[1] if len(tg) == 2 else max(1, tg[0] // max(N, 1))
        passes = 1 if op.name == "ipu.ctc_loss" else 3  # alpha; alpha, beta and the class sums
        return linear_cost(passes * T * N * (2 * S + 1), in_bytes, out_bytes, 4, machine,
                           flops_per_elem=12, reduction=True)
    if op.name == "ipu.ctc_beam_search_decoder":  # per step: every beam extended by every class
        T, B, C = _shape(ins[0])
        w = int(op.beam_width.value.data)
        return linear_cost(B * w * C * T, in_bytes, out_bytes, 4, machine, flops_per_elem=4,
                           reduction=True)
    if name in DENSE_LINALG_FLOPS:
        return dense_linalg_cost(name, ins, in_bytes, out_bytes, isz, machine)
    indexed = _indexed_rows(op, name, ins)
    if indexed is not None:
        return slice_cost(*indexed, machine, p)
    if name in GATHER_OPS or op.name in ("ipu.dynamic_slice", "ipu.dynamic_update"):
        return linear_cost(out_elems, in_bytes, out_bytes, isz, machine, flops_per_elem=2, moves=True)
    if name in COPY_OPS:
        return linear_cost(out_elems, in_bytes, out_bytes, isz, machine, moves=True)
    if name == "_native_batch_norm_legit_no_training":
        # inference batch norm uses the running statistics: y = x * scale + shift per
        # channel, an elementwise op over x (its statistics outputs are empty)
        x = ins[0]
        return linear_cost(_numel(_shape(x)), _bytes(x), _bytes(outs[0]), isz, machine, flops_per_elem=2)
    if name in ROW_REDUCTIONS:
        # reductions along the last axis whose results are full-size (softmax, layer
        # norm and their gradients): an elementwise pass plus per-row statistics
        x = ins[0]
        sx = _shape(x)
        row = sx[-1] if sx else 1
        if name.startswith("native_layer_norm"):
            row = _numel(_prop(op, "normalized_shape", [row]))
            x = ins[1] if name == "native_layer_norm_backward" else x
            sx = _shape(x)
        return linear_cost(_numel(sx), in_bytes, out_bytes, isz, machine, flops_per_elem=ROW_REDUCTIONS[name],
                           reduction=True, reduced=max(1, _numel(sx) // max(row, 1)), group=row)
    if name == "_native_batch_norm_legit_functional":
        # training batch norm: per-channel statistics over batch and space (strided
        # groups), then the elementwise normalisation of the whole input
        x = ins[0]
        sx = _shape(x)
        return linear_cost(_numel(sx), in_bytes, out_bytes, isz, machine, flops_per_elem=8,
                           reduction=True, reduced=sx[1] if len(sx) > 1 else 1)
    if name in REDUCTION_OPS or op.name == "ipu.identity_loss":
        return linear_cost(out_elems, in_bytes, out_bytes, isz, machine, flops_per_elem=2,
                           reduction=True)
    flops = _elementwise_flops(op)
    return linear_cost(out_elems, in_bytes, out_bytes, isz, machine, flops_per_elem=flops)


# ops Poplar runs as PopLibs' planned multiSlice (a lookup of whole rows by
# index) or multiUpdate / multiUpdateAdd (rows written or added by index):
# PopTorch lowers embedding, index_select and advanced indexing to a gather
# (popops::multiSlice), their gradients and index_put / scatter_add to a
# scatter (popops::multiUpdateAdd; without accumulation multiUpdate)
_LOOKUPS = frozenset({"embedding", "index_select", "index.Tensor"})
_UPDATES = frozenset({"embedding_dense_backward", "index_put", "scatter_add", "scatter.src", "scatter_reduce.two"})


def _indexed_rows(op, name: str, ins: list):
    """(table rows, row width, indices, bytes per element, update kind) of a
    row gather or scatter (`slice_plan.plan_slice`), None for another op or
    a boolean mask index."""
    if name not in _LOOKUPS and name not in _UPDATES:
        return None
    if name == "embedding":
        table, index = ins[0], [ins[1]]
    elif name == "embedding_dense_backward":
        grad = _shape(ins[0])
        width = grad[-1] if grad else 1
        return (int(_prop(op, "num_weights", 1)), width, _numel(_shape(ins[1])), _itemsize(ins[0]), "add")
    elif name in ("index.Tensor", "index_put"):
        table, index = ins[0], ins[1:-1] if name == "index_put" else ins[1:]
    else:  # index_select and the scatters: (self, index[, src]) along `dim`
        table, index = ins[0], [ins[1]]
    if not index or any(_is_mask(v) for v in index):
        return None  # a data-dependent selection, not rows by index
    shape = _shape(table)
    if name in ("index.Tensor", "index_put"):
        # the IR's indices index the leading dimensions (from_torch.sliced_index)
        entries = _numel(shape[:len(index)])
        count = _numel(np.broadcast_shapes(*[tuple(_shape(v)) for v in index]))
    else:
        dim = int(_prop(op, "dim", 0)) % max(len(shape), 1) if shape else 0
        entries = shape[dim] if shape else 1
        count = _numel(_shape(index[0]))
    width = _numel(shape) // max(entries, 1)
    if name in _UPDATES and name != "index_put":
        count = max(1, count // max(width, 1))  # scatter's index is one per element of its rows
    kind = None
    if name in _UPDATES:
        kind = "add" if name in ("scatter_add", "scatter_reduce.two") or \
            (name == "index_put" and _prop(op, "accumulate", False)) else "set"
    return entries, width, count, _itemsize(table), kind


def _is_mask(v) -> bool:
    width = getattr(v.type.element_type, "width", None)
    return width is not None and width.data == 1


def slice_cost(entries: int, width: int, indices: int, itemsize: int, update: str | None, machine: Machine,
               proportion: float) -> OpCost:
    """A planned multiSlice / multiUpdate(Add) (`slice_plan.plan_slice`) as an OpCost."""
    p = plan_slice(entries, width, indices, itemsize, machine, proportion, update)
    return OpCost(p.compute_cycles, p.exchange_bytes, p.exchange_cycles, p.sync_cycles, p.temp_bytes,
                  float(indices * width), p.describe(), min(machine.tiles, p.u * p.s * p.l))


# graph-IR ops of the ipu dialect costed as elementwise passes over their
# result, one operation per element (an explicit decision, as for ATen ops
# their traits' flops)
_IPU_ELEMENTWISE_FLOPS = {"ipu.rmsprop": 1, "ipu.lamb": 1, "ipu.clip_grad_norm": 1, "ipu.custom_op": 1}
_UNCOSTED: set[str] = set()


def _elementwise_flops(op) -> int:
    t = traits(op.name)
    if t is not None and t.flops is not None:
        return t.flops
    if op.name in _IPU_ELEMENTWISE_FLOPS:
        return _IPU_ELEMENTWISE_FLOPS[op.name]
    if op.name not in _UNCOSTED:  # no decided cost: say so once, cost one operation per element
        _UNCOSTED.add(op.name)
        warnings.warn(f"the machine model has no cost for {op.name}: costed as one operation per "
                      "element of its results (add its traits to dialects/aten_traits.py)", stacklevel=2)
    return 1


def _sum(costs: list[OpCost]) -> OpCost:
    if not costs:
        return ZERO
    return OpCost(sum(c.compute_cycles for c in costs), max(c.exchange_bytes for c in costs),
                  sum(c.exchange_cycles for c in costs), sum(c.sync_cycles for c in costs),
                  max(c.temp_bytes for c in costs), sum(c.flops for c in costs),
                  "; ".join(c.plan for c in costs if c.plan), max(c.tiles for c in costs))


def _scale(c: OpCost, f: int) -> OpCost:
    return OpCost(c.compute_cycles * f, c.exchange_bytes * f, c.exchange_cycles * f, c.sync_cycles * f,
                  c.temp_bytes, c.flops * f, f"{f} serialized pieces of {c.plan}", c.tiles)


def multiconv_costs(convs: list, machine: Machine) -> tuple[list[OpCost], int]:
    """A MultiConv group with the parallel plan (`ipu.multiconv` plan
    "parallel"): the convolutions run at the same time on disjoint tile
    sets, each sized to its share of the group's multiply-accumulates. Each
    op's cost on its tiles, and the group's cycles: the slowest of them."""
    from dataclasses import replace

    costs = [op_cost(op, machine) for op in convs]
    total = sum(c.flops for c in costs) or 1.0
    shared = []
    for op, c in zip(convs, costs):
        tiles = max(1, int(machine.tiles * c.flops / total))
        shared.append(op_cost(op, replace(machine, tiles=tiles)))
    return shared, max((c.cycles for c in shared), default=0)
