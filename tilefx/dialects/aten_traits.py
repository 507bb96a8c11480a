"""Op traits: what every layer needs to know of an ATen op besides its
schema (`aten_schema.py`), one column each, decided for every op of the
schema (tests/dialects/test_op_traits.py fails on an op without them).

- `cost`: how the machine model costs it (backend/costs.py `op_cost`):
  `view` (an alias of its operand: no compute, no memory of its own),
  `copy` (moves its input), `gather` (reads by index), `reduction`,
  `row_reduction` (a reduction along rows with a full-size result: softmax,
  layer norm), `batch_norm`, `batch_norm_inference`, `matmul`,
  `convolution`, `convolution_backward`, `linalg` (dense decompositions,
  costs.DENSE_LINALG_FLOPS), `elementwise`.
- `flops`: the arithmetic operations per element of an `elementwise` or
  `row_reduction` op (an estimate of the vertex's work: a transcendental is
  a few multiply-adds, a special function a series).
- `same_shape`: the result has the broadcast shape of its tensor operands
  (the `aten` verifier checks it).
- `random`: it draws random numbers (the executor passes its generator;
  never merged with another draw).
- `fusible`: the executor may evaluate it inside a fused elementwise chain
  with numpy ufuncs (analysis/fusion.py); `scalar_operand`: such a
  member may take a 0-d operand of any real dtype.
- `in_place`: the operands ATen's in-place overload may overwrite when they
  die at the op (analysis/in_place.py; memory-bound ops only).
- `memory_planned`: Poplar plans its temporaries within the available
  memory proportion (matmuls, convolutions, embeddings and gathers:
  passes/available_memory.py writes it on them).
- `kept_whole`: the tracer keeps it (every overload of its packet) instead
  of core ATen's decomposition: a graph run op by op pays a pass over
  memory per decomposed link (lowering/decompositions.py).
- `view_step`: the executor computes it as a view from the result type;
  `same_value`: its result is its operand's value (one slot for both).

Names are op names without the `aten.` prefix and without `.default`
(`add.Tensor`, `relu`), as `op_name` prints them.
"""

from __future__ import annotations

from dataclasses import dataclass

from tilefx.dialects.aten_schema import ATEN_SCHEMAS, RANDOM_SCHEMAS

# how the machine model costs each op that is not elementwise
_COST = {
    "view": """
alias expand permute select.int slice.Tensor split_with_sizes squeeze.dims unsqueeze view
""",
    "copy": """
_to_copy as_strided_scatter cat clone constant_pad_nd diagonal_scatter fill.Scalar flip lift_fresh_copy
lu_unpack masked_fill.Scalar reflection_pad1d reflection_pad2d reflection_pad3d repeat replication_pad2d
replication_pad3d resize_ select_scatter slice_scatter unfold upsample_nearest2d.vec
""",
    "gather": """
_embedding_bag _embedding_bag_backward as_strided avg_pool1d avg_pool2d avg_pool2d_backward avg_pool3d
avg_pool3d_backward embedding embedding_dense_backward gather grid_sampler_2d grid_sampler_2d_backward
grid_sampler_3d grid_sampler_3d_backward index.Tensor index_put index_select masked_scatter
masked_scatter_backward max_pool2d_with_indices max_pool2d_with_indices_backward max_pool3d_with_indices
max_pool3d_with_indices_backward nll_loss_backward nll_loss_forward scatter.src scatter.value scatter_add
scatter_reduce.two upsample_bilinear2d.vec
""",
    "reduction": """
_adaptive_avg_pool2d _adaptive_avg_pool2d_backward _adaptive_avg_pool3d _adaptive_avg_pool3d_backward
_assert_async.msg _cdist_backward _cdist_forward _histogramdd_bin_edges _histogramdd_from_bin_cts
_histogramdd_from_bin_tensors _linalg_check_errors _native_batch_norm_legit
_native_batch_norm_legit.no_stats _pdist_backward _pdist_forward _trilinear _weight_norm_interface_backward
adaptive_avg_pool1d adaptive_max_pool2d adaptive_max_pool2d_backward adaptive_max_pool3d
adaptive_max_pool3d_backward amax amin any any.dim any.dims argmax argmin bucketize.Tensor col2im cummin
cumprod cumsum histc histogram.bin_ct histogram.bins_tensor kthvalue linalg_vector_norm logcumsumexp max.dim
mean mean.dim median median.dim min.dim mode nanmedian nanmedian.dim native_group_norm
native_group_norm_backward prod prod.dim_int replication_pad2d_backward replication_pad3d_backward
searchsorted.Tensor sort sort.stable sum sum.dim_IntList topk var.correction var.dim var_mean.correction
""",
    "row_reduction": """
_log_softmax _log_softmax_backward_data _softmax _softmax_backward_data native_layer_norm
native_layer_norm_backward
""",
    "batch_norm": """
_native_batch_norm_legit_functional
""",
    "batch_norm_inference": """
_native_batch_norm_legit_no_training
""",
    "matmul": """
addmm bmm mm
""",
    "convolution": """
convolution
""",
    "convolution_backward": """
convolution_backward
""",
    "linalg": """
_linalg_det _linalg_eigh _linalg_slogdet _linalg_solve_ex _linalg_svd cholesky cholesky_inverse
cholesky_solve linalg_cholesky_ex linalg_inv_ex linalg_lu linalg_lu_factor_ex linalg_lu_solve
linalg_matrix_exp linalg_pinv.atol_rtol_tensor linalg_qr linalg_solve_triangular triangular_solve
""",
}

# elementwise operations per element: every `elementwise` op (the ops of no
# other cost kind) and the row reductions
_FLOPS = {
    1: """
__lshift__.Scalar __rshift__.Scalar _fft_c2r _fft_r2c _is_all_true _is_any_true _local_scalar_dense abs
add.Scalar add.Tensor arange.start_step atan2.out bernoulli.Tensor bitwise_and.Scalar bitwise_and.Tensor
bitwise_left_shift.Tensor bitwise_left_shift.Tensor_Scalar bitwise_not bitwise_or.Scalar bitwise_or.Tensor
bitwise_right_shift.Tensor bitwise_right_shift.Tensor_Scalar bitwise_xor.Scalar bitwise_xor.Tensor ceil
clamp clamp.Tensor copy copysign.Scalar copysign.Tensor cos cummax diagonal div.Scalar div.Scalar_mode
div.Tensor div.Tensor_mode elu_backward empty.memory_format empty_permuted empty_strided eq.Scalar eq.Tensor
exponential floor fmod.Scalar fmod.Tensor frexp.Tensor full full_like gcd ge.Scalar ge.Tensor gelu_backward
gt.Scalar gt.Tensor hardtanh hardtanh_backward heaviside isinf isnan ldexp.Tensor le.Scalar le.Tensor
leaky_relu logical_and logical_not logical_or logical_xor lt.Scalar lt.Tensor max maximum min minimum
mul.Scalar mul.Tensor native_dropout_backward ne.Scalar ne.Tensor neg new_empty_strided nextafter nonzero
normal.Tensor_Tensor normal.Tensor_float normal.float_Tensor normal.float_float pow.Tensor_Tensor rand_like
randint randint.low randint_like randn_like randperm reciprocal relu remainder.Scalar remainder.Tensor
replication_pad1d_backward round scalar_tensor sigmoid_backward sign signbit sin squeeze.dim sub.Scalar
sub.Tensor sym_is_contiguous sym_numel sym_size.int sym_storage_offset sym_stride.int tanh_backward
threshold_backward trunc where.self
""",
    2: """
pow.Tensor_Scalar rsqrt sqrt
""",
    3: """
_softmax_backward_data bernoulli.p native_dropout rand uniform
""",
    4: """
_log_softmax_backward_data cosh elu exp exp2 expm1 hypot log log10 log1p log2 pow.Scalar sigmoid sinh tanh
""",
    5: """
_softmax
""",
    6: """
_log_softmax normal_functional randn special_spherical_bessel_j0
""",
    8: """
acos acosh asin asinh atan atan2 atanh erf erfc native_layer_norm tan
""",
    10: """
gelu native_layer_norm_backward
""",
    12: """
digamma erfinv i0 lgamma logaddexp special_airy_ai special_bessel_j0 special_bessel_j1 special_bessel_y0
special_bessel_y1 special_erfcx special_i0e special_i1 special_i1e special_modified_bessel_i0
special_modified_bessel_i1 special_modified_bessel_k0 special_modified_bessel_k1 special_ndtri
special_scaled_modified_bessel_k0 special_scaled_modified_bessel_k1
""",
    16: """
polygamma
""",
    24: """
igamma igammac special_zeta
""",
    32: """
special_chebyshev_polynomial_t special_chebyshev_polynomial_u special_chebyshev_polynomial_v
special_chebyshev_polynomial_w special_hermite_polynomial_h special_hermite_polynomial_he
special_laguerre_polynomial_l special_legendre_polynomial_p special_shifted_chebyshev_polynomial_t
special_shifted_chebyshev_polynomial_u special_shifted_chebyshev_polynomial_v
special_shifted_chebyshev_polynomial_w
""",
}

# the result has the broadcast shape of the tensor operands (verified)
_SAME_SHAPE = """
_to_copy abs acos acosh add.Scalar add.Tensor alias asin asinh atan atan2 atanh bitwise_and.Scalar
bitwise_and.Tensor bitwise_not bitwise_or.Scalar bitwise_or.Tensor bitwise_xor.Scalar bitwise_xor.Tensor
ceil clamp clamp.Tensor clone cos cosh div.Scalar div.Scalar_mode div.Tensor div.Tensor_mode elu eq.Scalar
eq.Tensor erf exp expm1 fill.Scalar floor fmod.Scalar fmod.Tensor ge.Scalar ge.Tensor gelu gelu_backward
gt.Scalar gt.Tensor hardtanh hardtanh_backward isinf isnan le.Scalar le.Tensor leaky_relu lift_fresh_copy
log log10 log1p log2 logaddexp logical_and logical_not logical_or logical_xor lt.Scalar lt.Tensor masked_fill.Scalar
maximum minimum mul.Scalar mul.Tensor native_dropout_backward ne.Scalar ne.Tensor neg pow.Scalar
pow.Tensor_Scalar pow.Tensor_Tensor reciprocal relu remainder.Scalar remainder.Tensor round rsqrt sigmoid
sigmoid_backward sign sin sinh sqrt sub.Scalar sub.Tensor tan tanh tanh_backward threshold_backward trunc
where.self
"""

# evaluated with numpy ufuncs in fused elementwise chains (backend/fused_steps.py FUSED_EVAL)
_FUSIBLE = """
add.Tensor add.Scalar sub.Tensor sub.Scalar mul.Tensor mul.Scalar div.Tensor div.Scalar neg exp tanh sqrt rsqrt
reciprocal relu sigmoid erf
"""
# fused members whose 0-d operands may be of any integer or float dtype (cast to f32)
_SCALAR_OPERAND = "add.Tensor sub.Tensor mul.Tensor div.Tensor"

# the operands ATen's in-place overload (`relu_`, `add_.Tensor`, ...) may
# overwrite. Writing the second operand computes other + self, or other *
# self: IEEE addition and multiplication commute exactly. Memory-bound ops
# only: GELU's in-place form measured no faster (its erf is the cost).
_IN_PLACE = {"relu": (0,), "add.Tensor": (0, 1), "mul.Tensor": (0, 1), "sub.Tensor": (0,), "div.Tensor": (0,),
             "neg": (0,)}

# ops whose temporaries Poplar plans within the available memory proportion
_MEMORY_PLANNED = "mm bmm addmm convolution convolution_backward embedding embedding_dense_backward index.Tensor " \
    "index_put gather"

# backward ops and the negative log-likelihood the tracer keeps whole
_KEPT_WHOLE = "native_layer_norm_backward _softmax_backward_data _log_softmax_backward_data gelu_backward " \
    "threshold_backward nll_loss_forward nll_loss_backward logaddexp"

# views the executor computes from the result type (CompiledFunction._view_step)
_VIEW_STEP = "view unsqueeze squeeze.dim squeeze.dims permute expand"
# the result is the operand's value: a slot shared with it (values are never
# written once made; an in-place form only takes a donated argument no other step reads)
_SAME_VALUE = "alias lift_fresh_copy"


@dataclass(frozen=True)
class OpTraits:
    cost: str
    flops: int | None = None
    same_shape: bool = False
    random: bool = False
    fusible: bool = False
    scalar_operand: bool = False
    in_place: tuple[int, ...] = ()
    memory_planned: bool = False
    kept_whole: bool = False
    view_step: bool = False
    same_value: bool = False


def short_name(name: str) -> str:
    """`add.Tensor` for `aten.add.Tensor` or `add.Tensor`, `relu` for
    `aten.relu`, `relu.default` or `relu`."""
    return name.removeprefix("aten.").removesuffix(".default")


def _names(text: str) -> set[str]:
    return set(text.split())


def _build() -> dict[str, OpTraits]:
    cost = {n: kind for kind, text in _COST.items() for n in _names(text)}
    flops = {n: f for f, text in _FLOPS.items() for n in _names(text)}
    same_shape, fusible, scalar = _names(_SAME_SHAPE), _names(_FUSIBLE), _names(_SCALAR_OPERAND)
    view_step, same_value, planned = _names(_VIEW_STEP), _names(_SAME_VALUE), _names(_MEMORY_PLANNED)
    whole = _names(_KEPT_WHOLE)
    random = {short_name(s) for s in RANDOM_SCHEMAS}
    out = {}
    for s in ATEN_SCHEMAS:
        n = short_name(s)
        kind = cost.get(n, "elementwise" if n in flops else None)
        if kind is None:
            continue  # undecided: tests/dialects/test_op_traits.py names it
        out[n] = OpTraits(kind, flops.get(n), n in same_shape, n in random, n in fusible, n in scalar,
                          _IN_PLACE.get(n, ()), n in planned, n in whole, n in view_step, n in same_value)
    return out


TRAITS: dict[str, OpTraits] = _build()


def traits(name: str) -> OpTraits | None:
    """The traits of an ATen op (by op or schema name, with or without the
    `aten.` prefix); None for an op of another dialect."""
    return TRAITS.get(short_name(name))


def ops_where(**column) -> frozenset[str]:
    """The short names of the ops whose traits have every given column value
    (`ops_where(cost="view")`, `ops_where(fusible=True)`)."""
    return frozenset(n for n, t in TRAITS.items() if all(getattr(t, k) == v for k, v in column.items()))
