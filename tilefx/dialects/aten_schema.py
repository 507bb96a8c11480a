"""The declarative table of ATen ops that tilefx knows.

Each entry is the op's ATen schema (as printed by `torch.ops.aten.X.Y._schema`,
minus the `aten::` prefix and minus layout/device/memory-format arguments,
which mean nothing on the simulated IPU). The `aten` dialect builds one op
class per entry; the frontend maps an fx node to the entry of the same name;
the backend has one numpy kernel per entry. Adding an op is one line here and
one kernel in `backend/kernels/` (the family module it belongs to, or a row
of `alu.py`'s tables for one numpy call).

Argument kinds: `Tensor` (operand), `Tensor?` (optional operand), `Tensor[]`
and `Tensor?[]` (variadic operand), everything else is a property:
int/SymInt, float, bool, Scalar, str, ScalarType, int[]/SymInt[], bool[],
float[], each optionally `?`.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

SCHEMAS = """
abs(Tensor self) -> Tensor
add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor
addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor
alias(Tensor self) -> Tensor
_assert_async.msg(Tensor self, str assert_msg) -> ()
amax(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor
amin(Tensor self, int[1] dim=[], bool keepdim=False) -> Tensor
linalg_vector_norm(Tensor self, Scalar ord=2, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor
any.dim(Tensor self, int dim, bool keepdim=False) -> Tensor
arange.start_step(Scalar start, Scalar end, Scalar step=1, *, ScalarType? dtype=None) -> Tensor
argmax(Tensor self, int? dim=None, bool keepdim=False) -> Tensor
avg_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor
avg_pool2d_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, int[2] padding, bool ceil_mode, bool count_include_pad, int? divisor_override) -> Tensor
bitwise_and.Tensor(Tensor self, Tensor other) -> Tensor
bitwise_not(Tensor self) -> Tensor
bitwise_or.Tensor(Tensor self, Tensor other) -> Tensor
bmm(Tensor self, Tensor mat2) -> Tensor
cat(Tensor[] tensors, int dim=0) -> Tensor
clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor
clone(Tensor self) -> Tensor
copy(Tensor self, Tensor src, bool non_blocking=False) -> Tensor
constant_pad_nd(Tensor self, SymInt[] pad, Scalar value=0) -> Tensor
convolution(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups) -> Tensor
convolution_backward(Tensor grad_output, Tensor input, Tensor weight, SymInt[]? bias_sizes, SymInt[] stride, SymInt[] padding, SymInt[] dilation, bool transposed, SymInt[] output_padding, SymInt groups, bool[3] output_mask) -> (Tensor, Tensor, Tensor)
cos(Tensor self) -> Tensor
div.Tensor(Tensor self, Tensor other) -> Tensor
div.Scalar(Tensor self, Scalar other) -> Tensor
embedding(Tensor weight, Tensor indices, SymInt padding_idx=-1, bool scale_grad_by_freq=False, bool sparse=False) -> Tensor
embedding_dense_backward(Tensor grad_output, Tensor indices, SymInt num_weights, SymInt padding_idx, bool scale_grad_by_freq) -> Tensor
eq.Scalar(Tensor self, Scalar other) -> Tensor
eq.Tensor(Tensor self, Tensor other) -> Tensor
erf(Tensor self) -> Tensor
exp(Tensor self) -> Tensor
expand(Tensor self, SymInt[] size, *, bool implicit=False) -> Tensor
full(SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None) -> Tensor
full_like(Tensor self, Scalar fill_value, *, ScalarType? dtype=None) -> Tensor
gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor
ge.Scalar(Tensor self, Scalar other) -> Tensor
ge.Tensor(Tensor self, Tensor other) -> Tensor
gelu(Tensor self, *, str approximate="none") -> Tensor
gelu_backward(Tensor grad_output, Tensor self, *, str approximate="none") -> Tensor
gt.Scalar(Tensor self, Scalar other) -> Tensor
gt.Tensor(Tensor self, Tensor other) -> Tensor
index.Tensor(Tensor self, Tensor?[] indices) -> Tensor
index_put(Tensor self, Tensor?[] indices, Tensor values, bool accumulate=False) -> Tensor
le.Scalar(Tensor self, Scalar other) -> Tensor
le.Tensor(Tensor self, Tensor other) -> Tensor
leaky_relu(Tensor self, Scalar negative_slope=0.01) -> Tensor
log(Tensor self) -> Tensor
logical_and(Tensor self, Tensor other) -> Tensor
logical_not(Tensor self) -> Tensor
lt.Scalar(Tensor self, Scalar other) -> Tensor
lt.Tensor(Tensor self, Tensor other) -> Tensor
max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)
max_pool2d_with_indices_backward(Tensor grad_output, Tensor self, int[2] kernel_size, int[2] stride, int[2] padding, int[2] dilation, bool ceil_mode, Tensor indices) -> Tensor
maximum(Tensor self, Tensor other) -> Tensor
mean(Tensor self, *, ScalarType? dtype=None) -> Tensor
mean.dim(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor
minimum(Tensor self, Tensor other) -> Tensor
mm(Tensor self, Tensor mat2) -> Tensor
mul.Tensor(Tensor self, Tensor other) -> Tensor
mul.Scalar(Tensor self, Scalar other) -> Tensor
native_dropout(Tensor input, float p, bool? train) -> (Tensor, Tensor)
native_dropout_backward(Tensor grad_output, Tensor mask, float scale) -> Tensor
native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias, float eps) -> (Tensor, Tensor, Tensor)
native_layer_norm_backward(Tensor grad_out, Tensor input, SymInt[] normalized_shape, Tensor mean, Tensor rstd, Tensor? weight, Tensor? bias, bool[3] output_mask) -> (Tensor, Tensor, Tensor)
_native_batch_norm_legit_functional(Tensor input, Tensor? weight, Tensor? bias, Tensor running_mean, Tensor running_var, bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor, Tensor, Tensor)
_native_batch_norm_legit_no_training(Tensor input, Tensor? weight, Tensor? bias, Tensor running_mean, Tensor running_var, float momentum, float eps) -> (Tensor, Tensor, Tensor)
ne.Scalar(Tensor self, Scalar other) -> Tensor
ne.Tensor(Tensor self, Tensor other) -> Tensor
neg(Tensor self) -> Tensor
permute(Tensor self, int[] dims) -> Tensor
pow.Tensor_Scalar(Tensor self, Scalar exponent) -> Tensor
pow.Tensor_Tensor(Tensor self, Tensor exponent) -> Tensor
reciprocal(Tensor self) -> Tensor
relu(Tensor self) -> Tensor
rsqrt(Tensor self) -> Tensor
scalar_tensor(Scalar s, *, ScalarType? dtype=None) -> Tensor
scatter.value(Tensor self, int dim, Tensor index, Scalar value) -> Tensor
scatter.src(Tensor self, int dim, Tensor index, Tensor src) -> Tensor
scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor
select.int(Tensor self, int dim, SymInt index) -> Tensor
sigmoid(Tensor self) -> Tensor
sin(Tensor self) -> Tensor
slice.Tensor(Tensor self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor
slice_scatter(Tensor self, Tensor src, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) -> Tensor
_softmax(Tensor self, int dim, bool half_to_float) -> Tensor
_softmax_backward_data(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor
_log_softmax(Tensor self, int dim, bool half_to_float) -> Tensor
_log_softmax_backward_data(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor
nll_loss_forward(Tensor self, Tensor target, Tensor? weight, int reduction, SymInt ignore_index) -> (Tensor output, Tensor total_weight)
nll_loss_backward(Tensor grad_output, Tensor self, Tensor target, Tensor? weight, int reduction, SymInt ignore_index, Tensor total_weight) -> Tensor
split_with_sizes(Tensor self, SymInt[] split_sizes, int dim=0) -> Tensor[]
sqrt(Tensor self) -> Tensor
squeeze.dims(Tensor self, int[] dim) -> Tensor
sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
sub.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor
sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor
sum.default(Tensor self, *, ScalarType? dtype=None) -> Tensor
tanh(Tensor self) -> Tensor
tanh_backward(Tensor grad_output, Tensor output) -> Tensor
sigmoid_backward(Tensor grad_output, Tensor output) -> Tensor
threshold_backward(Tensor grad_output, Tensor self, Scalar threshold) -> Tensor
_to_copy(Tensor self, *, ScalarType? dtype=None) -> Tensor
unsqueeze(Tensor self, int dim) -> Tensor
var_mean.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> (Tensor, Tensor)
view(Tensor self, SymInt[] size) -> Tensor
where.self(Tensor condition, Tensor self, Tensor other) -> Tensor
acos(Tensor self) -> Tensor
acosh(Tensor self) -> Tensor
asin(Tensor self) -> Tensor
asinh(Tensor self) -> Tensor
atan(Tensor self) -> Tensor
atanh(Tensor self) -> Tensor
atan2(Tensor self, Tensor other) -> Tensor
atan2.out(Tensor self, Tensor other, *, Tensor out) -> Tensor
ceil(Tensor self) -> Tensor
cosh(Tensor self) -> Tensor
expm1(Tensor self) -> Tensor
floor(Tensor self) -> Tensor
log10(Tensor self) -> Tensor
log1p(Tensor self) -> Tensor
log2(Tensor self) -> Tensor
round(Tensor self) -> Tensor
sign(Tensor self) -> Tensor
sinh(Tensor self) -> Tensor
tan(Tensor self) -> Tensor
trunc(Tensor self) -> Tensor
isnan(Tensor self) -> Tensor
isinf(Tensor self) -> Tensor
hardtanh(Tensor self, Scalar min_val=-1, Scalar max_val=1) -> Tensor
hardtanh_backward(Tensor grad_output, Tensor self, Scalar min_val, Scalar max_val) -> Tensor
elu(Tensor self, Scalar alpha=1, Scalar scale=1, Scalar input_scale=1) -> Tensor
elu_backward(Tensor grad_output, Scalar alpha, Scalar scale, Scalar input_scale, bool is_result, Tensor self_or_result) -> Tensor
bitwise_and.Scalar(Tensor self, Scalar other) -> Tensor
bitwise_or.Scalar(Tensor self, Scalar other) -> Tensor
bitwise_xor.Tensor(Tensor self, Tensor other) -> Tensor
bitwise_xor.Scalar(Tensor self, Scalar other) -> Tensor
bitwise_left_shift.Tensor(Tensor self, Tensor other) -> Tensor
bitwise_right_shift.Tensor(Tensor self, Tensor other) -> Tensor
bitwise_left_shift.Tensor_Scalar(Tensor self, Scalar other) -> Tensor
bitwise_right_shift.Tensor_Scalar(Tensor self, Scalar other) -> Tensor
logical_or(Tensor self, Tensor other) -> Tensor
logical_xor(Tensor self, Tensor other) -> Tensor
div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor
div.Scalar_mode(Tensor self, Scalar other, *, str? rounding_mode) -> Tensor
fmod.Tensor(Tensor self, Tensor other) -> Tensor
fmod.Scalar(Tensor self, Scalar other) -> Tensor
remainder.Tensor(Tensor self, Tensor other) -> Tensor
remainder.Scalar(Tensor self, Scalar other) -> Tensor
clamp.Tensor(Tensor self, Tensor? min=None, Tensor? max=None) -> Tensor
pow.Scalar(Scalar self, Tensor exponent) -> Tensor
masked_fill.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor
fill.Scalar(Tensor self, Scalar value) -> Tensor
lift_fresh_copy(Tensor self) -> Tensor
argmin(Tensor self, int? dim=None, bool keepdim=False) -> Tensor
prod(Tensor self, *, ScalarType? dtype=None) -> Tensor
prod.dim_int(Tensor self, int dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor
var.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) -> Tensor
var.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, bool keepdim=False) -> Tensor
any(Tensor self) -> Tensor
_is_all_true(Tensor self) -> Tensor
_is_any_true(Tensor self) -> Tensor
any.dims(Tensor self, int[]? dim=None, bool keepdim=False) -> Tensor
cumsum(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor
_weight_norm_interface_backward(Tensor grad_w, Tensor saved_v, Tensor saved_g, Tensor saved_norms, int dim) -> (Tensor, Tensor)
histc(Tensor self, int bins=100, Scalar min=0, Scalar max=0) -> Tensor
histogram.bin_ct(Tensor self, int bins=100, *, float[]? range=None, Tensor? weight=None, bool density=False) -> (Tensor hist, Tensor bin_edges)
histogram.bins_tensor(Tensor self, Tensor bins, *, Tensor? weight=None, bool density=False) -> (Tensor hist, Tensor bin_edges)
_histogramdd_bin_edges(Tensor self, int[] bins, *, float[]? range=None, Tensor? weight=None, bool density=False) -> Tensor[]
_histogramdd_from_bin_cts(Tensor self, int[] bins, *, float[]? range=None, Tensor? weight=None, bool density=False) -> Tensor
_histogramdd_from_bin_tensors(Tensor self, Tensor[] bins, *, Tensor? weight=None, bool density=False) -> Tensor
max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)
min.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)
max.default(Tensor self) -> Tensor
min.default(Tensor self) -> Tensor
sort(Tensor self, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)
sort.stable(Tensor self, *, bool? stable, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)
topk(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True) -> (Tensor values, Tensor indices)
scatter_reduce.two(Tensor self, int dim, Tensor index, Tensor src, str reduce, *, bool include_self=True) -> Tensor
index_select(Tensor self, int dim, Tensor index) -> Tensor
masked_scatter(Tensor self, Tensor mask, Tensor source) -> Tensor
nonzero(Tensor self) -> Tensor
_local_scalar_dense(Tensor self) -> Scalar
_embedding_bag(Tensor weight, Tensor indices, Tensor offsets, bool scale_grad_by_freq=False, int mode=0, bool sparse=False, Tensor? per_sample_weights=None, bool include_last_offset=False, int padding_idx=-1) -> (Tensor, Tensor, Tensor, Tensor)
empty.memory_format(SymInt[] size, *, ScalarType? dtype=None) -> Tensor
empty_strided(SymInt[] size, SymInt[] stride, *, ScalarType? dtype=None) -> Tensor
empty_permuted(SymInt[] size, int[] physical_layout, *, ScalarType? dtype=None) -> Tensor
sym_size.int(Tensor self, int dim) -> SymInt
sym_stride.int(Tensor self, int dim) -> SymInt
sym_storage_offset(Tensor self) -> SymInt
sym_numel(Tensor self) -> SymInt
sym_is_contiguous(Tensor self) -> SymBool
resize_(Tensor self, SymInt[] size) -> Tensor
as_strided(Tensor self, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) -> Tensor
diagonal(Tensor self, int offset=0, int dim1=0, int dim2=1) -> Tensor
select_scatter(Tensor self, Tensor src, int dim, SymInt index) -> Tensor
squeeze.dim(Tensor self, int dim) -> Tensor
flip(Tensor self, int[] dims) -> Tensor
repeat(Tensor self, SymInt[] repeats) -> Tensor
reflection_pad1d(Tensor self, SymInt[2] padding) -> Tensor
reflection_pad2d(Tensor self, SymInt[4] padding) -> Tensor
reflection_pad3d(Tensor self, SymInt[6] padding) -> Tensor
replication_pad2d(Tensor self, SymInt[4] padding) -> Tensor
replication_pad3d(Tensor self, SymInt[6] padding) -> Tensor
col2im(Tensor self, SymInt[2] output_size, int[2] kernel_size, int[2] dilation, int[2] padding, int[2] stride) -> Tensor
upsample_bilinear2d.vec(Tensor input, SymInt[]? output_size, bool align_corners, float[]? scale_factors) -> Tensor
upsample_nearest2d.vec(Tensor input, SymInt[]? output_size, float[]? scale_factors) -> Tensor
grid_sampler_2d(Tensor input, Tensor grid, int interpolation_mode, int padding_mode, bool align_corners) -> Tensor
grid_sampler_3d(Tensor input, Tensor grid, int interpolation_mode, int padding_mode, bool align_corners) -> Tensor
_adaptive_avg_pool2d(Tensor self, SymInt[2] output_size) -> Tensor
adaptive_max_pool2d(Tensor self, int[2] output_size) -> (Tensor, Tensor)
adaptive_max_pool3d(Tensor self, int[3] output_size) -> (Tensor, Tensor)
i0(Tensor self) -> Tensor
hypot(Tensor self, Tensor other) -> Tensor
logaddexp(Tensor self, Tensor other) -> Tensor
copysign.Tensor(Tensor self, Tensor other) -> Tensor
copysign.Scalar(Tensor self, Scalar other) -> Tensor
heaviside(Tensor self, Tensor values) -> Tensor
logcumsumexp(Tensor self, int dim) -> Tensor
bucketize.Tensor(Tensor self, Tensor boundaries, *, bool out_int32=False, bool right=False) -> Tensor
searchsorted.Tensor(Tensor sorted_sequence, Tensor self, *, bool out_int32=False, bool right=False, str? side=None, Tensor? sorter=None) -> Tensor
kthvalue(Tensor self, SymInt k, int dim=-1, bool keepdim=False) -> (Tensor values, Tensor indices)
median.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)
median(Tensor self) -> Tensor
nanmedian.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)
nanmedian(Tensor self) -> Tensor
erfinv(Tensor self) -> Tensor
erfc(Tensor self) -> Tensor
lgamma(Tensor self) -> Tensor
digamma(Tensor self) -> Tensor
polygamma(int n, Tensor self) -> Tensor
special_i0e(Tensor self) -> Tensor
special_i1(Tensor self) -> Tensor
special_i1e(Tensor self) -> Tensor
special_erfcx(Tensor self) -> Tensor
special_ndtri(Tensor self) -> Tensor
special_bessel_j0(Tensor self) -> Tensor
special_bessel_j1(Tensor self) -> Tensor
special_bessel_y0(Tensor self) -> Tensor
special_bessel_y1(Tensor self) -> Tensor
special_modified_bessel_i0(Tensor self) -> Tensor
special_modified_bessel_i1(Tensor self) -> Tensor
special_modified_bessel_k0(Tensor self) -> Tensor
special_modified_bessel_k1(Tensor self) -> Tensor
special_scaled_modified_bessel_k0(Tensor x) -> Tensor
special_scaled_modified_bessel_k1(Tensor x) -> Tensor
special_spherical_bessel_j0(Tensor x) -> Tensor
special_zeta(Tensor self, Tensor other) -> Tensor
igamma(Tensor self, Tensor other) -> Tensor
igammac(Tensor self, Tensor other) -> Tensor
special_airy_ai(Tensor x) -> Tensor
special_chebyshev_polynomial_t(Tensor x, Tensor n) -> Tensor
special_chebyshev_polynomial_u(Tensor x, Tensor n) -> Tensor
special_chebyshev_polynomial_v(Tensor x, Tensor n) -> Tensor
special_chebyshev_polynomial_w(Tensor x, Tensor n) -> Tensor
special_shifted_chebyshev_polynomial_t(Tensor x, Tensor n) -> Tensor
special_shifted_chebyshev_polynomial_u(Tensor x, Tensor n) -> Tensor
special_shifted_chebyshev_polynomial_v(Tensor x, Tensor n) -> Tensor
special_shifted_chebyshev_polynomial_w(Tensor x, Tensor n) -> Tensor
special_hermite_polynomial_h(Tensor x, Tensor n) -> Tensor
special_hermite_polynomial_he(Tensor x, Tensor n) -> Tensor
special_laguerre_polynomial_l(Tensor x, Tensor n) -> Tensor
special_legendre_polynomial_p(Tensor x, Tensor n) -> Tensor
exp2(Tensor self) -> Tensor
ldexp.Tensor(Tensor self, Tensor other) -> Tensor
nextafter(Tensor self, Tensor other) -> Tensor
frexp.Tensor(Tensor self) -> (Tensor mantissa, Tensor exponent)
gcd(Tensor self, Tensor other) -> Tensor
signbit(Tensor self) -> Tensor
cummin(Tensor self, int dim) -> (Tensor values, Tensor indices)
cummax(Tensor self, int dim) -> (Tensor values, Tensor indices)
__lshift__.Scalar(Tensor self, Scalar other) -> Tensor
__rshift__.Scalar(Tensor self, Scalar other) -> Tensor
adaptive_max_pool2d_backward(Tensor grad_output, Tensor self, Tensor indices) -> Tensor
adaptive_max_pool3d_backward(Tensor grad_output, Tensor self, Tensor indices) -> Tensor
_trilinear(Tensor i1, Tensor i2, Tensor i3, int[] expand1, int[] expand2, int[] expand3, int[] sumdim, int unroll_dim=1) -> Tensor
_adaptive_avg_pool2d_backward(Tensor grad_output, Tensor self) -> Tensor
_adaptive_avg_pool3d(Tensor self, SymInt[3] output_size) -> Tensor
adaptive_avg_pool1d(Tensor self, int[1] output_size) -> Tensor
avg_pool1d(Tensor self, int[1] kernel_size, int[1] stride=[], int[1] padding=[0], bool ceil_mode=False, bool count_include_pad=True) -> Tensor
avg_pool3d(Tensor self, int[3] kernel_size, int[3] stride=[], int[3] padding=0, bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor
max_pool3d_with_indices(Tensor self, int[3] kernel_size, int[3] stride=[], int[3] padding=0, int[3] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)
native_group_norm(Tensor input, Tensor? weight, Tensor? bias, SymInt N, SymInt C, SymInt HxW, int group, float eps) -> (Tensor, Tensor, Tensor)
native_group_norm_backward(Tensor grad_out, Tensor input, Tensor mean, Tensor rstd, Tensor? weight, SymInt N, SymInt C, SymInt HxW, int group, bool[3] output_mask) -> (Tensor, Tensor, Tensor)
_native_batch_norm_legit(Tensor input, Tensor? weight, Tensor? bias, Tensor running_mean, Tensor running_var, bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor)
_native_batch_norm_legit.no_stats(Tensor input, Tensor? weight, Tensor? bias, bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor)
_pdist_forward(Tensor self, float p=2.) -> Tensor
_cdist_forward(Tensor x1, Tensor x2, float p, int? compute_mode) -> Tensor
_fft_r2c(Tensor self, int[] dim, int normalization, bool onesided) -> Tensor
_fft_c2r(Tensor self, int[] dim, int normalization, SymInt last_dim_size) -> Tensor
rand(SymInt[] size, *, ScalarType? dtype=None) -> Tensor
randn(SymInt[] size, *, ScalarType? dtype=None) -> Tensor
rand_like(Tensor self, *, ScalarType? dtype=None) -> Tensor
randn_like(Tensor self, *, ScalarType? dtype=None) -> Tensor
randint.low(SymInt low, SymInt high, SymInt[] size, *, ScalarType? dtype=None) -> Tensor
randint.default(SymInt high, SymInt[] size, *, ScalarType? dtype=None) -> Tensor
randint_like(Tensor self, SymInt high, *, ScalarType? dtype=None) -> Tensor
randperm(SymInt n, *, ScalarType? dtype=None) -> Tensor
normal_functional(Tensor self, float mean=0., float std=1.) -> Tensor
normal.Tensor_float(Tensor mean, float std=1.) -> Tensor
normal.float_Tensor(float mean, Tensor std) -> Tensor
normal.Tensor_Tensor(Tensor mean, Tensor std) -> Tensor
normal.float_float(float mean, float std, SymInt[] size, *, ScalarType? dtype=None) -> Tensor
uniform(Tensor self, float from=0., float to=1.) -> Tensor
bernoulli.p(Tensor self, float p) -> Tensor
bernoulli.Tensor(Tensor self, Tensor p) -> Tensor
exponential(Tensor self, float lambd=1.) -> Tensor
cumprod(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor
masked_scatter_backward(Tensor grad_output, Tensor mask, SymInt[] sizes) -> Tensor
diagonal_scatter(Tensor self, Tensor src, int offset=0, int dim1=0, int dim2=1) -> Tensor
as_strided_scatter(Tensor self, Tensor src, SymInt[] size, SymInt[] stride, SymInt? storage_offset=None) -> Tensor
unfold(Tensor self, int dimension, int size, int step) -> Tensor
new_empty_strided(Tensor self, SymInt[] size, SymInt[] stride, *, ScalarType? dtype=None) -> Tensor
_pdist_backward(Tensor grad, Tensor self, float p, Tensor pdist) -> Tensor
_cdist_backward(Tensor grad, Tensor x1, Tensor x2, float p, Tensor cdist) -> Tensor
_embedding_bag_backward(Tensor grad, Tensor indices, Tensor offsets, Tensor offset2bag, Tensor bag_size, Tensor maximum_indices, SymInt num_weights, bool scale_grad_by_freq, int mode, bool sparse, Tensor? per_sample_weights, int padding_idx=-1) -> Tensor
replication_pad1d_backward(Tensor grad_output, Tensor self, SymInt[2] padding) -> Tensor
replication_pad2d_backward(Tensor grad_output, Tensor self, SymInt[4] padding) -> Tensor
replication_pad3d_backward(Tensor grad_output, Tensor self, SymInt[6] padding) -> Tensor
grid_sampler_2d_backward(Tensor grad_output, Tensor input, Tensor grid, int interpolation_mode, int padding_mode, bool align_corners, bool[2] output_mask) -> (Tensor, Tensor)
grid_sampler_3d_backward(Tensor grad_output, Tensor input, Tensor grid, int interpolation_mode, int padding_mode, bool align_corners, bool[2] output_mask) -> (Tensor, Tensor)
avg_pool3d_backward(Tensor grad_output, Tensor self, int[3] kernel_size, int[3] stride, int[3] padding, bool ceil_mode, bool count_include_pad, int? divisor_override) -> Tensor
max_pool3d_with_indices_backward(Tensor grad_output, Tensor self, int[3] kernel_size, int[3] stride, int[3] padding, int[3] dilation, bool ceil_mode, Tensor indices) -> Tensor
_adaptive_avg_pool3d_backward(Tensor grad_output, Tensor self) -> Tensor
_linalg_check_errors(Tensor info, str api_name, *, bool is_matrix) -> ()
linalg_inv_ex(Tensor A, *, bool check_errors=False) -> (Tensor inverse, Tensor info)
_linalg_solve_ex(Tensor A, Tensor B, *, bool left=True, bool check_errors=False) -> (Tensor result, Tensor LU, Tensor pivots, Tensor info)
_linalg_det(Tensor A) -> (Tensor result, Tensor LU, Tensor pivots)
_linalg_slogdet(Tensor A) -> (Tensor sign, Tensor logabsdet, Tensor LU, Tensor pivots)
linalg_lu_factor_ex(Tensor A, *, bool pivot=True, bool check_errors=False) -> (Tensor LU, Tensor pivots, Tensor info)
linalg_lu(Tensor A, *, bool pivot=True) -> (Tensor P, Tensor L, Tensor U)
lu_unpack(Tensor LU_data, Tensor LU_pivots, bool unpack_data=True, bool unpack_pivots=True) -> (Tensor P, Tensor L, Tensor U)
linalg_lu_solve(Tensor LU, Tensor pivots, Tensor B, *, bool left=True, bool adjoint=False) -> Tensor
linalg_cholesky_ex(Tensor self, *, bool upper=False, bool check_errors=False) -> (Tensor L, Tensor info)
cholesky(Tensor self, bool upper=False) -> Tensor
cholesky_solve(Tensor self, Tensor input2, bool upper=False) -> Tensor
cholesky_inverse(Tensor self, bool upper=False) -> Tensor
linalg_solve_triangular(Tensor self, Tensor B, *, bool upper, bool left=True, bool unitriangular=False) -> Tensor
triangular_solve(Tensor self, Tensor A, bool upper=True, bool transpose=False, bool unitriangular=False) -> (Tensor solution, Tensor cloned_coefficient)
linalg_qr(Tensor A, str mode="reduced") -> (Tensor Q, Tensor R)
_linalg_svd(Tensor A, bool full_matrices=False, bool compute_uv=True, *, str? driver=None) -> (Tensor U, Tensor S, Tensor Vh)
_linalg_eigh(Tensor A, str UPLO="L", bool compute_v=True) -> (Tensor eigenvalues, Tensor eigenvectors)
linalg_pinv.atol_rtol_tensor(Tensor self, *, Tensor? atol=None, Tensor? rtol=None, bool hermitian=False) -> Tensor
linalg_matrix_exp(Tensor self) -> Tensor
mode(Tensor self, int dim=-1, bool keepdim=False) -> (Tensor values, Tensor indices)
"""

_ARG = re.compile(r"^(?P<type>[\w\[\]\d?]+)\s+(?P<name>\w+)(?:=(?P<default>.+))?$")
_TENSOR_KINDS = {"Tensor": "tensor", "Tensor?": "optional", "Tensor[]": "variadic", "Tensor?[]": "variadic"}


RANDOM_SCHEMAS = frozenset({
    "native_dropout.default", "rand.default", "randn.default", "rand_like.default",
    "randn_like.default", "randint.low", "randint.default", "randint_like.default",
    "randperm.default", "normal_functional.default", "normal.Tensor_float", "normal.float_Tensor",
    "normal.Tensor_Tensor", "normal.float_float", "uniform.default", "bernoulli.p", "bernoulli.Tensor",
    "exponential.default",
})
"""Ops that draw random numbers: their kernels take the executor's generator
as `rng`, and they are not Pure (two draws must never be merged)."""


def py_name(arg_name: str) -> str:
    """The kernel parameter for a schema argument: Python keywords (`from`) get a `_`."""
    return arg_name + "_" if keyword.iskeyword(arg_name) else arg_name


@dataclass(frozen=True)
class Arg:
    name: str
    type: str  # the schema type, e.g. "int[2]", "Scalar?"
    kind: str  # tensor | optional | variadic | property
    has_default: bool
    default: str | None

    @property
    def base(self) -> str:
        """The property type without size and `?`: int, float, bool, int[], ..."""
        t = re.sub(r"\[\d+\]", "[]", self.type.rstrip("?"))
        return t.replace("SymInt", "int")

    @property
    def optional(self) -> bool:
        return self.type.endswith("?")


@dataclass(frozen=True)
class Schema:
    name: str  # "add.Tensor"
    args: tuple[Arg, ...]
    num_results: int  # -1: a variadic list of tensors

    @property
    def operands(self) -> tuple[Arg, ...]:
        return tuple(a for a in self.args if a.kind != "property")

    @property
    def properties(self) -> tuple[Arg, ...]:
        return tuple(a for a in self.args if a.kind == "property")


def _split_args(text: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        depth += ch in "[("
        depth -= ch in "])"
        cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def parse_schema(line: str) -> Schema:
    m = re.match(r"^([\w.]+)\((.*)\)\s*->\s*(.+)$", line.strip())
    if not m:
        raise ValueError(f"bad schema line: {line!r}")
    name, arg_text, ret = m.groups()
    if "." not in name:
        name += ".default"
    args = []
    for piece in _split_args(arg_text):
        if piece == "*":
            continue
        am = _ARG.match(piece)
        if not am:
            raise ValueError(f"bad argument {piece!r} in {line!r}")
        t = am["type"]
        kind = _TENSOR_KINDS.get(t, "property")
        args.append(Arg(am["name"], t, kind, am["default"] is not None, am["default"]))
    ret = ret.strip()
    if ret == "Tensor[]":
        n = -1
    elif ret.startswith("("):
        n = len(_split_args(ret[1:-1]))
    else:
        n = 1
    return Schema(name, tuple(args), n)


def schema_name(line: str) -> str:
    """The name of a schema line's op, as `parse_schema` gives it (`add.Tensor`, `relu.default`)."""
    name = line.partition("(")[0].strip()
    return name if "." in name else name + ".default"


class SchemaTable(Mapping[str, Schema]):
    """The schemas by op name, each parsed on first use: a tool reading a few
    ops (`tilefx-opt` on a one-op file) parses their lines, not all ~350."""

    def __init__(self, text: str) -> None:
        self._lines = {schema_name(line): line for line in text.strip().splitlines()}
        self._parsed: dict[str, Schema] = {}

    def __getitem__(self, name: str) -> Schema:
        found = self._parsed.get(name)
        if found is None:
            found = self._parsed[name] = parse_schema(self._lines[name])
        return found

    def __iter__(self) -> Iterator[str]:
        return iter(self._lines)

    def __len__(self) -> int:
        return len(self._lines)

    def __contains__(self, name: object) -> bool:
        return name in self._lines


ATEN_SCHEMAS = SchemaTable(SCHEMAS)
