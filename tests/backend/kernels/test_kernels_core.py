"""The complete core-ATen op set of torch: enumeration, kernels, gradients.

`test_core_aten_set_is_covered` lists every overload torch tags
`torch.Tag.core` and fails when one has no `aten` op or no kernel, so
coverage cannot silently regress. The cases here (the ops beyond the first
hundred, which tests/backend/kernels/test_kernels.py checks) run each kernel against
`torch.ops.aten` with `check` from tests/backend/kernels/test_kernels.py; random ops are
checked statistically in tests/backend/kernels/test_random_ops.py.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from test_kernels import BOOL, F16, F32, F64, I32, I64, A, check, h, pos, r, rb, ri, s, to_torch, _inputs_seeded_per_test, reseed  # noqa: F401 (the fixture)
from tilefx.backend.kernels import KERNELS
from tilefx.dialects.aten import ATEN_OPS
from tilefx.dialects.aten_schema import ATEN_SCHEMAS, RANDOM_SCHEMAS

reseed(4)  # this module's cases: the same data whatever was imported before

NAN_ALL = np.array([[1.0, np.nan], [3.0, -2.0]], np.float32)
I8, I16, U8 = np.dtype("int8"), np.dtype("int16"), np.dtype("uint8")


def core_overloads() -> list[str]:
    """Every overload of torch.ops.aten tagged core, as `name.overload`."""
    names = []
    # every registered operator (iterating torch.ops.aten sees only the loaded ones)
    packets = sorted({n[len("aten::"):].partition(".")[0] for n in torch._C._dispatch_get_all_op_names()
                      if n.startswith("aten::")})
    for packet_name in packets:
        packet = getattr(torch.ops.aten, packet_name)
        for overload in packet.overloads():
            if torch.Tag.core in getattr(packet, overload).tags:
                names.append(f"{packet_name}.{overload}")
    return sorted(names)


def test_core_aten_set_is_covered():
    core = core_overloads()
    assert len(core) >= 193  # the enumeration itself works (torch 2.13: 193 overloads)
    no_op = [n for n in core if n not in ATEN_OPS]
    no_kernel = [n for n in core if n not in KERNELS]
    assert no_op == [] and no_kernel == [], f"no aten op: {no_op}; no kernel: {no_kernel}"


def test_core_schemas_agree_with_torch():
    """Our table's argument names are torch's (the frontend maps by name)."""
    for name in core_overloads():
        base, overload = name.split(".")
        torch_args = {a.name for a in getattr(getattr(A, base), overload)._schema.arguments}
        ours = {a.name for a in ATEN_SCHEMAS[name].args}
        assert ours <= torch_args, (name, sorted(ours - torch_args))


CASES: list = []


def case(name, *args, tol=None, id=None, **kwargs):
    CASES.append(pytest.param(name, args, kwargs, tol or {}, id=id or name))


_X = r(3, 4) * 2
_U = (r(3, 4) * 0.9).clip(-0.95, 0.95).astype(F32)
for _op in ("cosh", "sinh", "tan", "atan", "asinh", "expm1"):
    case(f"{_op}.default", _X)
    case(f"{_op}.default", h(5), id=f"{_op}-f16")
case("atan.default", ri(5), id="atan-int")
for _op in ("acos", "asin", "atanh"):
    case(f"{_op}.default", _U)
case("acosh.default", pos(3, 4) + 1)
for _op in ("log10", "log1p", "log2"):
    case(f"{_op}.default", pos(3, 4) * 5)
    case(f"{_op}.default", ri(4, lo=1), id=f"{_op}-int")
_R = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.3, -0.7, np.nan], F32)
for _op in ("ceil", "floor", "round", "trunc"):
    case(f"{_op}.default", _R)
    case(f"{_op}.default", ri(4), id=f"{_op}-int")
case("sign.default", np.array([-2.0, 0.0, 3.0, -0.0], F32))
case("sign.default", ri(6), id="sign-int")
case("sign.default", rb(6), id="sign-bool")
_NI = np.array([1.0, np.nan, np.inf, -np.inf, 0.0], F32)
case("isnan.default", _NI)
case("isnan.default", ri(3), id="isnan-int")
case("isinf.default", _NI)
case("isinf.default", h(3), id="isinf-f16")
case("atan2.default", r(3, 4), r(4))
case("atan2.default", ri(3), ri(3), id="atan2-int")
case("atan2.out", r(3, 4), r(3, 4), out=np.zeros((3, 4), F32))
case("hardtanh.default", _X)
case("hardtanh.default", _X, 0.0, 6.0, id="relu6")
case("hardtanh.default", h(5), -0.5, 0.5, id="hardtanh-f16")
_ht = np.array([-1.0, -0.5, 0.0, 1.0, 6.0, 7.0], F32)
case("hardtanh_backward.default", r(6), _ht, 0.0, 6.0)
case("hardtanh_backward.default", r(6), _ht, -1, 1, id="hardtanh_backward-int-bounds")
case("elu.default", _X)
case("elu.default", _X, 0.5, 1.2, 0.8, id="elu-scaled")
case("elu_backward.default", r(3, 4), 1.0, 1.0, 1.0, False, _X)
case("elu_backward.default", r(3, 4), 0.5, 1.2, 0.8, False, _X, id="elu_backward-scaled")
_elu_y = A.elu(torch.from_numpy(_X), 1.5, 1.0507, 1.0).numpy()
case("elu_backward.default", r(3, 4), 1.5, 1.0507, 1.0, True, _elu_y, id="elu_backward-result")
case("bitwise_and.Scalar", ri(5), 3)
case("bitwise_or.Scalar", ri(5), 4)
case("bitwise_xor.Tensor", ri(5), ri(5))
case("bitwise_xor.Tensor", rb(5), rb(5), id="bitwise_xor-bool")
case("bitwise_xor.Scalar", ri(5), 6)
case("bitwise_or.Scalar", rb(4), True, id="bitwise_or.Scalar-bool")
case("logical_or.default", rb(5), rb(5))
case("logical_or.default", r(5), ri(5), id="logical_or-mixed")
case("logical_xor.default", rb(5), rb(5))
_N, _D = ri(3, 4, lo=-9, hi=10), ri(3, 4, lo=1, hi=4) * np.where(rb(3, 4), 1, -1)
for _mode in ("trunc", "floor", None):
    case("div.Tensor_mode", r(3, 4) * 5, r(3, 4), rounding_mode=_mode, id=f"div.Tensor_mode-{_mode}")
    case("div.Tensor_mode", _N, _D, rounding_mode=_mode, id=f"div.Tensor_mode-int-{_mode}")
    case("div.Scalar_mode", r(3, 4) * 5, -1.5, rounding_mode=_mode, id=f"div.Scalar_mode-{_mode}")
    case("div.Scalar_mode", _N, 4, rounding_mode=_mode, id=f"div.Scalar_mode-int-{_mode}")
case("fmod.Tensor", r(3, 4) * 5, r(3, 4))
case("fmod.Tensor", _N, _D, id="fmod-int")
case("fmod.Scalar", r(3, 4) * 5, 1.5)
case("remainder.Tensor", r(3, 4) * 5, r(3, 4))
case("remainder.Tensor", _N, _D, id="remainder-int")
case("remainder.Scalar", r(3, 4) * 5, -1.5)
case("remainder.Scalar", _N, 3, id="remainder.Scalar-int")
case("clamp.Tensor", r(3, 4), r(4) - 0.5, r(3, 1) + 0.5)
case("clamp.Tensor", r(3, 4), None, s(0.1), id="clamp.Tensor-max")
case("clamp.Tensor", ri(3, 4), r(4), id="clamp.Tensor-int-float")
case("pow.Scalar", 2.0, r(3, 4))
case("pow.Scalar", 2, ri(4, lo=0), id="pow.Scalar-int")
case("pow.Scalar", 1.5, ri(4, lo=0), id="pow.Scalar-float-int")
case("masked_fill.Scalar", r(3, 4), rb(3, 4), -1e9)
case("masked_fill.Scalar", r(3, 4), rb(4), 0.5, id="masked_fill-bcast")
case("masked_fill.Scalar", ri(3, 4), rb(3, 4), 7, id="masked_fill-int")
case("fill.Scalar", r(3, 4), 2.5)
case("fill.Scalar", ri(3), 7)
case("lift_fresh_copy.default", r(3, 4))

# reductions, scans, sorting
case("argmin.default", r(3, 4, 5))
case("argmin.default", r(3, 4, 5), 1, True)
case("argmin.default", r(3, 4, 5), None, True, id="argmin-all-keep")
case("prod.default", r(3, 4))
case("prod.default", ri(3, 4, lo=1, hi=3), id="prod-int")
case("prod.default", r(3, 4), dtype=F64)
case("prod.dim_int", r(3, 4, 5), 1)
case("prod.dim_int", r(3, 4, 5), -1, True)
case("var.dim", r(3, 4, 5), [1])
case("var.dim", r(3, 4, 5), [0, 2], False, True)
case("var.dim", r(3, 4, 5), None)
case("var.correction", r(3, 4, 5))
case("var.correction", r(3, 4, 5), [1], correction=0, keepdim=True)
case("any.default", rb(3, 4))
case("any.default", r(3, 4) > 5, id="any-false")
case("_is_all_true.default", rb(3, 4) | True, id="is-all-true")
case("_is_all_true.default", rb(3, 4) & False, id="is-all-true-false")
case("_is_any_true.default", rb(3, 4), id="is-any-true")
case("any.dims", rb(3, 4, 5), [0, 2])
case("any.dims", ri(3, 4, lo=0, hi=2), None, True)
case("cumsum.default", r(3, 4), 1)
case("cumsum.default", r(3, 4), 0, dtype=F64)
case("cumsum.default", ri(3, 4), -1, id="cumsum-int")
case("cumsum.default", rb(5), 0, id="cumsum-bool")
case("cumsum.default", ri(5, dtype=I32), 0, id="cumsum-int32")
case("max.dim", r(3, 4, 5), 1)
case("max.dim", r(3, 4, 5), -1, True)
case("max.dim", NAN := np.array([[1.0, np.nan, 3.0], [2.0, 0.0, 1.0]], F32), 1, id="max.dim-nan")
case("min.dim", r(3, 4, 5), 0)
case("min.dim", ri(3, 4), 1, True, id="min.dim-int")
_perm = _rng = np.random.default_rng(3)
_SORT = _rng.permutation(24).astype(F32).reshape(4, 6)
case("sort.default", _SORT)
case("sort.default", _SORT, 0, True)
case("sort.default", _SORT.astype(I64), -1, True, id="sort-int-desc")
case("sort.default", np.array([3.0, np.nan, 1.0, 2.0], F32), 0, True, id="sort-nan-desc")
case("sort.default", np.array([3.0, np.nan, 1.0, 2.0], F32), id="sort-nan")
_TIES = np.array([[1, 2, 2, 2, 0, 2], [5, 5, 5, 5, 5, 5]], F32)
case("sort.stable", _TIES, stable=True, dim=1, descending=True, id="sort-stable-ties-desc")
case("sort.stable", _TIES, stable=True, dim=1, id="sort-stable-ties")
case("sort.stable", _SORT.astype(I64), stable=True, dim=0, descending=True, id="sort-stable-int")
case("topk.default", _SORT, 3)
case("topk.default", _SORT, 2, 0, False)
case("topk.default", _SORT.astype(I64), 1, -1, True, id="topk-int")

# indexing
_sr_idx = np.array([[0, 1, 0, 2], [2, 2, 1, 0]], I64)
for _red in ("sum", "prod", "mean", "amax", "amin"):
    case("scatter_reduce.two", r(2, 3), 1, _sr_idx, r(2, 4), _red, id=f"scatter_reduce-{_red}")
    case("scatter_reduce.two", r(2, 3), 1, _sr_idx, r(2, 4), _red, include_self=False,
         id=f"scatter_reduce-{_red}-noself")
case("scatter_reduce.two", ri(2, 3), 1, _sr_idx, ri(2, 4), "mean", id="scatter_reduce-mean-int")
case("index_select.default", r(5, 3), 0, np.array([4, 0, 4], I64))
case("index_select.default", r(5, 3), -1, np.array([2], I64))
case("index_select.default", r(5, 3), 1, np.array(1, I64), id="index_select-0d-index")
_mask = rb(3, 4)
case("masked_scatter.default", r(3, 4), _mask, r(12))
case("masked_scatter.default", r(3, 4), rb(4), r(3, 4), id="masked_scatter-bcast")
case("nonzero.default", r(3, 4) > 0)
case("nonzero.default", ri(2, 3, 2, lo=0, hi=2), id="nonzero-3d")
_bag_w = r(10, 3)
_bag_i = np.array([1, 2, 4, 5, 4, 3, 2, 9], I64)
_bag_o = np.array([0, 3, 3, 6], I64)
for _mode in (0, 1, 2):
    case("_embedding_bag.default", _bag_w, _bag_i, _bag_o, False, _mode, id=f"_embedding_bag-mode{_mode}")
case("_embedding_bag.default", _bag_w, _bag_i, _bag_o, False, 0, False, r(8), id="_embedding_bag-psw")
case("_embedding_bag.default", _bag_w, _bag_i, np.array([0, 3, 6, 8], I64), False, 0, False, None, True,
     id="_embedding_bag-last-offset")

# creation and metadata
case("empty.memory_format", [0, 3])
case("empty_strided.default", [0], [1], dtype=I64)
case("empty_permuted.default", [0, 2], [1, 0])

# views and copies
case("as_strided.default", r(4, 5), [3, 3], [5, 1])
case("as_strided.default", r(4, 5), [2, 2, 2], [10, 5, 1], 2, id="as_strided-offset")
case("as_strided.default", r(20), [4, 3], [1, 4], id="as_strided-overlap-transpose")
case("diagonal.default", r(4, 5))
case("diagonal.default", r(4, 5, 3), 1, 0, 1, id="diagonal-offset")
case("diagonal.default", r(4, 5, 3), -1, -1, 0, id="diagonal-neg")
case("select_scatter.default", r(3, 4), r(4), 0, 1)
case("select_scatter.default", r(3, 4), r(3), -1, -1)
case("squeeze.dim", r(3, 1, 4), 1)
case("squeeze.dim", r(3, 1, 4), 0, id="squeeze.dim-noop")
case("squeeze.dim", s(1.0), 0, id="squeeze.dim-0d")
case("flip.default", r(3, 4, 2), [0, -1])
case("flip.default", ri(5), [0])
case("resize_.default", r(3, 4), [2, 5])
case("resize_.default", ri(6), [2, 2], id="resize_-shrink")
case("repeat.default", r(2, 3), [2, 1, 2])
case("repeat.default", r(2, 3), [1, 3])

# padding, resampling, pooling
for _nd, _pad in ((1, [2, 1]), (2, [1, 2, 2, 0]), (3, [1, 1, 0, 2, 1, 0])):
    case(f"reflection_pad{_nd}d.default", r(2, 3, *([4] * _nd)), _pad)
    if _nd > 1:
        case(f"replication_pad{_nd}d.default", r(2, 3, *([4] * _nd)), _pad)
case("reflection_pad2d.default", r(3, 4, 5), [1, 1, 1, 1], id="reflection_pad2d-unbatched")
_cols = r(2, 3 * 2 * 2, 12)
case("col2im.default", _cols, [4, 5], [2, 2], [1, 1], [0, 0], [1, 1])
case("col2im.default", r(2, 3 * 3 * 3, 9), [5, 5], [3, 3], [1, 1], [1, 1], [2, 2], id="col2im-pad-stride")
case("col2im.default", r(2 * 2 * 2, 4), [4, 4], [2, 2], [2, 2], [1, 1], [2, 2], id="col2im-unbatched-dil")
case("upsample_nearest2d.vec", r(2, 3, 4, 5), [8, 7], None)
case("upsample_nearest2d.vec", r(2, 3, 4, 5), None, [2.0, 1.5], id="upsample_nearest-scale")
case("upsample_bilinear2d.vec", r(2, 3, 4, 5), [8, 7], False, None)
case("upsample_bilinear2d.vec", r(2, 3, 4, 5), [8, 7], True, None, id="upsample_bilinear-align")
case("upsample_bilinear2d.vec", r(2, 3, 4, 5), None, False, [2.0, 2.0], id="upsample_bilinear-scale")
case("upsample_bilinear2d.vec", r(1, 2, 6, 6), [3, 4], False, None, id="upsample_bilinear-down")
_grid = (r(2, 3, 4, 2) * 0.8).astype(F32)
_grid[0, 0, 0] = [1.3, -1.4]  # outside
for _interp in (0, 1):
    for _padm in (0, 1, 2):
        for _ac in (False, True):
            case("grid_sampler_2d.default", r(2, 3, 5, 6), _grid, _interp, _padm, _ac,
                 id=f"grid_sampler-i{_interp}-p{_padm}-{'ac' if _ac else 'nac'}")
_grid3 = (r(2, 2, 3, 4, 3) * 0.8).astype(F32)
_grid3[0, 0, 0, 0] = [1.3, -1.4, 0.2]  # outside
for _interp in (0, 1):
    for _padm in (0, 1, 2):
        case("grid_sampler_3d.default", r(2, 3, 4, 5, 6), _grid3, _interp, _padm, _padm == 1,
             id=f"grid_sampler_3d-i{_interp}-p{_padm}")
case("_adaptive_avg_pool2d.default", r(2, 3, 7, 5), [3, 2])
case("_adaptive_avg_pool2d.default", r(3, 6, 6), [1, 1], id="adaptive2d-global-unbatched")
case("_adaptive_avg_pool3d.default", r(2, 3, 5, 4, 6), [2, 3, 2])
case("_adaptive_avg_pool2d_backward.default", r(2, 3, 3, 2), r(2, 3, 7, 5))
case("avg_pool3d.default", r(2, 2, 5, 6, 4), [2, 2, 2])
case("avg_pool3d.default", r(2, 2, 5, 6, 4), [3, 3, 2], [2, 2, 1], [1, 1, 0], True, False,
     id="avg_pool3d-ceil-exclude")
case("avg_pool3d.default", r(2, 5, 6, 4), [2, 2, 2], [1, 1, 1], 0, False, True, 3, id="avg_pool3d-divisor")
case("max_pool3d_with_indices.default", r(2, 2, 5, 6, 4), [2, 2, 2])
case("max_pool3d_with_indices.default", r(2, 2, 5, 6, 4), [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1],
     True, id="max_pool3d-pad-ceil")

# normalization
_gn_x = r(2, 6, 4, 3) * 2 + 1
case("native_group_norm.default", _gn_x, r(6), r(6), 2, 6, 12, 3, 1e-5)
case("native_group_norm.default", _gn_x, None, None, 2, 6, 12, 2, 1e-5, id="group_norm-noaffine")
_gn = A.native_group_norm(torch.from_numpy(_gn_x), None, None, 2, 6, 12, 3, 1e-5)
_gn_w = r(6)
for _mask in ([True, True, True], [True, False, False], [False, True, True]):
    case("native_group_norm_backward.default", r(2, 6, 4, 3), _gn_x, _gn[1].numpy(), _gn[2].numpy(),
         _gn_w, 2, 6, 12, 3, _mask, tol=dict(atol=1e-5),
         id=f"group_norm_backward-{''.join('TF'[not m] for m in _mask)}")
case("native_group_norm_backward.default", r(2, 6, 4, 3), _gn_x, _gn[1].numpy(), _gn[2].numpy(),
     None, 2, 6, 12, 3, [True, False, False], tol=dict(atol=1e-5), id="group_norm_backward-noweight")
_bn_x = r(4, 3, 5) * 2 + 0.5
case("_native_batch_norm_legit.default", _bn_x, r(3), r(3), r(3), pos(3), True, 0.1, 1e-5, tol=dict(atol=1e-5))
case("_native_batch_norm_legit.default", _bn_x, r(3), r(3), r(3), pos(3), False, 0.1, 1e-5,
     id="batch_norm_legit-eval")
case("_native_batch_norm_legit.no_stats", _bn_x, r(3), None, True, 0.1, 1e-5, tol=dict(atol=1e-5))

# distances, FFT
case("_pdist_forward.default", r(5, 3))
case("_pdist_forward.default", r(5, 3), 1.0, id="pdist-p1")
case("_pdist_forward.default", r(5, 3), 3.0, id="pdist-p3")
case("_cdist_forward.default", r(2, 4, 3), r(2, 5, 3), 2.0, None)
case("_cdist_forward.default", r(4, 3), r(5, 3), 1.0, None, id="cdist-p1")
case("_cdist_forward.default", r(4, 3), r(5, 3), float("inf"), None, id="cdist-inf")
case("_fft_r2c.default", r(4, 6), [1], 0, True, tol=dict(atol=1e-5))
case("_fft_r2c.default", r(4, 6), [0, 1], 2, False, tol=dict(atol=1e-5), id="fft_r2c-2d-full")
case("_fft_r2c.default", r(4, 6), [0, 1], 1, True, tol=dict(atol=1e-5), id="fft_r2c-ortho")
_spec = A._fft_r2c(torch.from_numpy(r(4, 6)), [1], 0, True).numpy()
case("_fft_c2r.default", _spec, [1], 2, 6, tol=dict(atol=1e-5))
case("_fft_c2r.default", _spec, [1], 0, 6, tol=dict(atol=1e-5), id="fft_c2r-none")

# dtypes beyond the usual: int8/int16/uint8 keep their dtypes
case("add.Tensor", ri(5, dtype=I8), ri(5, dtype=I8), id="add-int8")
case("mul.Tensor", ri(5, dtype=I16), ri(5, dtype=I8), id="mul-int16-int8")
case("add.Tensor", ri(5, lo=0, dtype=U8), ri(5, lo=0, dtype=U8), id="add-uint8")
case("where.self", rb(5), ri(5, lo=0, dtype=U8), ri(5, lo=0, dtype=U8), id="where-uint8")
case("_to_copy.default", r(5) * 10, dtype=I8, id="_to_copy-int8")
case("_to_copy.default", pos(5) * 10, dtype=U8, id="_to_copy-uint8")
case("sum.dim_IntList", ri(3, 4, dtype=I8), [1], id="sum-int8")
case("cumsum.default", ri(3, 4, lo=0, dtype=U8), 1, id="cumsum-uint8")
_N = r(3, 4, 5)
_N[0, 0, :2] = 0.0
for _ord in (2, 1, 3.5, 0, math.inf, -math.inf):
    case("linalg_vector_norm.default", _N, _ord, [1, 2], id=f"vector_norm-{_ord}")
case("linalg_vector_norm.default", _N, id="vector_norm-all")
case("i0.default", r(3, 4) * 3)
case("i0.default", ri(5), id="i0-int")
case("hypot.default", r(3, 4), r(4))
case("logaddexp.default", r(3, 4), r(4))
case("copysign.Tensor", r(3, 4), r(3, 4))
case("copysign.Scalar", ri(5), -1.0, id="copysign-int-scalar")
case("heaviside.default", np.array([-1.5, 0.0, 2.0, 0.0], F32), np.array([0.5], F32))
case("logcumsumexp.default", r(3, 5) * 4, 1)
case("logcumsumexp.default", h(6), 0, id="logcumsumexp-f16")
_B = np.array([-1.0, 0.0, 0.0, 1.0], F32)
_Q = np.array([[-2.0, 0.0, 0.5], [1.0, 3.0, -1.0]], F32)
case("bucketize.Tensor", _Q, _B)
case("bucketize.Tensor", _Q, _B, out_int32=True, right=True, id="bucketize-right")
case("searchsorted.Tensor", _B, _Q, id="searchsorted")
case("searchsorted.Tensor", np.sort(r(2, 5), -1), r(2, 3), side="right", id="searchsorted-batched")
_S = r(3, 7)
case("kthvalue.default", _S, 3, 1)
case("kthvalue.default", _S, 2, 0, True, id="kthvalue-keepdim")
_S2 = r(4, 6)
_S2[1, 2] = np.nan
case("median.dim", _S2, 1)
case("median.dim", _S, 0, True, id="median-keepdim")
case("median.default", r(3, 5))
case("nanmedian.dim", _S2, 1)
case("nanmedian.default", _S2)
case("histc.default", r(50) * 2, 8, -2.0, 2.0)
case("histc.default", r(40), 5, id="histc-data-range")
_HX = r(60) * 2
_HX[:3] = [np.nan, 5.0, -5.0]
case("histogram.bin_ct", _HX[1:], 7, id="histogram-data-range")
case("histogram.bin_ct", _HX, 5, range=[-1.5, 2.0], weight=pos(60), density=True, id="histogram-weighted-density",
     tol={"rtol": 1e-5, "atol": 1e-6})
case("histogram.bin_ct", np.full(4, 2.0, F32), 3, id="histogram-constant")
case("histogram.bins_tensor", _HX, np.array([-2.0, -0.5, 0.0, 0.1, 3.0], F32), weight=pos(60), id="histogram-edges",
     tol={"rtol": 1e-5, "atol": 1e-6})
_HD = r(7, 5, 2)
case("_histogramdd_bin_edges.default", _HD, bins=[3, 2])
case("_histogramdd_from_bin_cts.default", _HD, bins=[3, 2])
case("_histogramdd_from_bin_cts.default", _HD, weight=pos(7, 5), bins=[4, 3], range=[-1.0, 1.0, 0.0, 2.0], density=True,
     id="histogramdd-weighted-density", tol={"rtol": 1e-5, "atol": 1e-6})
case("_histogramdd_from_bin_tensors.default", _HD, [np.array([-1.0, 0.0, 0.5, 2.0], F32), np.array([-2.0, 0.0, 3.0], F32)],
     weight=pos(7, 5), tol={"rtol": 1e-5, "atol": 1e-6})
for _op in ("erfc", "lgamma", "special_i0e", "special_i1", "special_i1e", "special_bessel_j0", "exp2"):
    case(f"{_op}.default", r(3, 4) * 2, tol={"rtol": 1e-5, "atol": 1e-6})
case("special_erfcx.default", r(3, 4), tol={"rtol": 1e-5, "atol": 1e-6})
for _op in ("bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1", "modified_bessel_k0",
            "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0"):
    # cephes series in float64 as well: no exact reference (tests/kernel_tolerance.py)
    case(f"special_{_op}.default", pos(3, 4) * 6 + 0.01, tol={"rtol": 1e-5, "atol": 1e-6, "float64_reference": False})
case("special_spherical_bessel_j0.default", np.array([0.0, -2.5, 1e-3, 40.0], F32), id="spherical_bessel_j0-0")
case("special_bessel_j1.default", ri(5, lo=-3), id="bessel_j1-int")
case("special_zeta.default", pos(3, 4) * 3 + 1.1, pos(4) + 0.2, tol={"rtol": 1e-5, "atol": 1e-6})
case("igamma.default", pos(3, 4) * 3 + 0.1, pos(3, 4) * 4, tol={"rtol": 1e-5, "atol": 1e-6})
case("igammac.default", pos(3, 4) * 3 + 0.1, pos(4) * 4, tol={"rtol": 1e-5, "atol": 1e-6})
case("special_airy_ai.default", r(3, 4) * 4, tol={"rtol": 1e-5, "atol": 1e-6, "float64_reference": False})
_PX, _PN = (r(4, 6) * 1.2).astype(F32), (np.arange(24).reshape(4, 6) % 9 - 1).astype(F32)
for _op in ("chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
            "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
            "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
            "legendre_polynomial_p"):
    case(f"special_{_op}.default", _PX, _PN, tol={"rtol": 1e-5, "atol": 1e-5})
case("special_legendre_polynomial_p.default", _PX, ri(6, lo=0), id="legendre-int-degree", tol={"rtol": 1e-5, "atol": 1e-5})
case("erfinv.default", _U)
case("digamma.default", pos(3, 4) + 0.3, tol={"rtol": 1e-5, "atol": 1e-5})
case("lgamma.default", ri(5, lo=1), id="lgamma-int")
case("polygamma.default", 1, pos(3, 4) + 0.3, tol={"rtol": 1e-5, "atol": 1e-5})
case("special_ndtri.default", (pos(3, 4) * 0.9 + 0.05).astype(F32), tol={"rtol": 1e-5, "atol": 1e-6})
case("ldexp.Tensor", r(3, 4), ri(3, 4, lo=-3))
case("nextafter.default", r(3, 4), r(3, 4))
case("frexp.Tensor", r(3, 4) * 100)
case("gcd.default", ri(3, 4, lo=-9), ri(4, lo=1))
case("signbit.default", np.array([-1.0, -0.0, 0.0, 2.0, np.nan], F32))
case("cummin.default", np.array([[3.0, 1.0, 2.0, 1.0, 0.5], [np.nan, 1.0, -1.0, -2.0, -2.0]], F32), 1)
case("cummin.default", ri(3, 6), 0, id="cummin-int")
_P = r(2, 3, 7, 5)
_P[0, 0, 1, 1] = np.nan
case("adaptive_max_pool2d.default", _P, [3, 2])
case("adaptive_max_pool2d.default", r(3, 6, 6), [4, 4], id="adaptive_max_pool2d-unbatched")
_AI = torch.ops.aten.adaptive_max_pool2d(torch.from_numpy(r(2, 3, 7, 5)), [3, 2])[1].numpy()
case("adaptive_max_pool2d_backward.default", r(2, 3, 3, 2), r(2, 3, 7, 5), _AI)
_P3 = r(2, 2, 5, 7, 4)
_P3[1, 0, 2, 3, 1] = np.nan
case("adaptive_max_pool3d.default", _P3, [2, 3, 3])
case("adaptive_max_pool3d.default", r(3, 4, 6, 5), [3, 4, 2], id="adaptive_max_pool3d-unbatched")
_AI3 = torch.ops.aten.adaptive_max_pool3d(torch.from_numpy(r(2, 2, 5, 7, 4)), [2, 3, 3])[1].numpy()
case("adaptive_max_pool3d_backward.default", r(2, 2, 2, 3, 3), r(2, 2, 5, 7, 4), _AI3)
case("_trilinear.default", r(4, 5), r(6, 5, 3), r(4, 3), [1, 3], [0], [1, 2], [2, 3],
     tol={"rtol": 1e-5, "atol": 1e-5})
_V, _G = r(6, 4, 3), pos(6, 1, 1) + 0.5
case("_weight_norm_interface_backward.default", r(6, 4, 3), _V, _G,
     np.sqrt((_V.astype(np.float64) ** 2).sum((1, 2), keepdims=True)).astype(F32), 0,
     tol={"rtol": 1e-5, "atol": 1e-6})
case("linalg_vector_norm.default", _N, 2, [-1], True, id="vector_norm-keepdim")
case("linalg_vector_norm.default", h(4, 6), 2, [1], id="vector_norm-f16")
case("linalg_vector_norm.default", _N, 2, [0], dtype=F64, id="vector_norm-f64")

# max()/min() over every element (no dim): floats with NaN, ints, bools
case("max.default", r(3, 4, 5))
case("max.default", NAN_ALL, id="max-nan")
case("min.default", ri(3, 4), id="min-int")
case("min.default", r(3, 4) > 0, id="min-bool")
case("max.default", s(2.5), id="max-0d")

case("cummax.default", np.array([[3.0, 1.0, 3.0, 4.0, 0.5], [-1.0, np.nan, 2.0, 5.0, 5.0]], F32), 1)
case("cummax.default", ri(3, 6), 0, id="cummax-int")
case("cummax.default", s(1.5), 0, id="cummax-0d")
_SH = np.array([[-8, 3, 2 ** 40], [1, -1, 0]], np.int64)
case("__lshift__.Scalar", _SH, 2)
case("__rshift__.Scalar", _SH, 1)
case("__rshift__.Scalar", _SH, 70, id="rshift-past-width")
case("__lshift__.Scalar", _SH, 64, id="lshift-past-width")
case("__lshift__.Scalar", np.array([100, -3], np.int8), 1, id="lshift-int8-wraps")
case("__rshift__.Scalar", np.array([200, 7], np.uint8), 3, id="rshift-uint8")
case("replication_pad1d_backward.default", r(2, 3, 9), r(2, 3, 6), [2, 1])
case("replication_pad1d_backward.default", r(3, 4), r(3, 5), [0, -1], id="replication_pad1d_backward-crop")


@pytest.mark.parametrize("name,args,kwargs,tol", CASES)
def test_kernel_matches_aten(name, args, kwargs, tol):
    check(name, *args, **kwargs, **tol)


def test_every_new_op_has_a_case():
    from test_dense_linalg import CASES as LINALG_CASES
    from test_kernels import CASES as FIRST_CASES

    tested = {p.values[0] for p in CASES + FIRST_CASES + LINALG_CASES} | RANDOM_SCHEMAS | set(SCALAR_RESULT_OPS) | \
        set(NO_RESULT_OPS)
    assert sorted(set(ATEN_SCHEMAS) - tested) == []


# checks: test_assert_async_raises_the_message, test_dense_linalg's test_check_errors_raise_torch_messages
NO_RESULT_OPS = ["_assert_async.msg", "_linalg_check_errors.default"]
SCALAR_RESULT_OPS = ["_local_scalar_dense.default", "sym_size.int", "sym_stride.int",
                     "sym_storage_offset.default", "sym_numel.default", "sym_is_contiguous.default"]


@pytest.mark.parametrize("name, args", [
    ("_local_scalar_dense.default", (s(2.5),)), ("_local_scalar_dense.default", (s(3, I64),)),
    ("sym_size.int", (r(3, 4), 1)), ("sym_size.int", (r(3, 4), -2)), ("sym_stride.int", (r(3, 4, 5), 0)),
    ("sym_stride.int", (r(3, 4, 5), 2)), ("sym_storage_offset.default", (r(3, 4),)),
    ("sym_numel.default", (r(3, 4),)), ("sym_is_contiguous.default", (r(3, 4),)),
])
def test_scalar_result_ops(name, args):
    """ATen returns a Python number; the kernel a 0-d array of the same value."""
    ours = KERNELS[name](args[0], *([] if len(args) == 1 else [args[1]]))
    ref = getattr(getattr(A, name.split(".")[0]), name.split(".")[1])(torch.from_numpy(args[0]), *args[1:])
    assert type(ours) is np.ndarray and ours.ndim == 0 and ours.item() == ref


def test_as_strided_out_of_bounds_is_an_error():
    with pytest.raises(ValueError, match="reach outside"):
        KERNELS["as_strided.default"](r(4), size=[3], stride=[2])


def test_fft_round_trip():
    x = r(3, 8)
    spec = KERNELS["_fft_r2c.default"](x, dim=[1], normalization=0, onesided=True)
    back = KERNELS["_fft_c2r.default"](spec, dim=[1], normalization=2, last_dim_size=8)
    np.testing.assert_allclose(back, x, atol=1e-5)
    assert spec.dtype == np.complex64 and back.dtype == F32


_ = (BOOL, F16, to_torch)
case("adaptive_avg_pool1d.default", r(2, 3, 7), [3])
case("avg_pool1d.default", r(2, 3, 7), [3])
case("avg_pool1d.default", r(2, 3, 8), [3], [2], [1], True, False, id="avg_pool1d-ceil-exclude")

# the backward and helper ops traced training graphs keep
case("cumprod.default", r(3, 4), 1)
case("cumprod.default", ri(3, 4, lo=1, hi=3), 0, id="cumprod-int")
_ms_mask = rb(3, 4)
case("masked_scatter_backward.default", r(3, 4), _ms_mask, [14])
case("masked_scatter_backward.default", r(3, 4), rb(4), [3, 4], id="masked_scatter_backward-bcast")
case("diagonal_scatter.default", r(4, 5), r(4))
case("diagonal_scatter.default", r(4, 5, 3), r(3, 4), 1, 0, 1, id="diagonal_scatter-offset")
case("as_strided_scatter.default", r(4, 5), r(3, 3), [3, 3], [5, 1])
case("as_strided_scatter.default", r(4, 5), r(2, 2), [2, 2], [1, 5], 3, id="as_strided_scatter-offset")
case("unfold.default", r(3, 7), 1, 3, 2)
case("unfold.default", r(5, 2), 0, 2, 1, id="unfold-dim0")
case("new_empty_strided.default", r(2), [0, 3], [3, 1])
_pd_x = r(5, 3)
for _p in (2.0, 1.0, 3.0, float("inf")):
    _pd = A._pdist_forward(torch.from_numpy(_pd_x), _p)
    case("_pdist_backward.default", r(10), _pd_x, _p, _pd.numpy(), tol=dict(atol=1e-5), id=f"_pdist_backward-p{_p}")
_c1, _c2 = r(2, 4, 3), r(2, 5, 3)
for _p in (2.0, 1.0, 3.0):
    _cd = A._cdist_forward(torch.from_numpy(_c1), torch.from_numpy(_c2), _p, None)
    case("_cdist_backward.default", r(2, 4, 5), _c1, _c2, _p, _cd.numpy(), tol=dict(atol=1e-5),
         id=f"_cdist_backward-p{_p}")
for _mode in (0, 1, 2):
    _eb = A._embedding_bag(torch.from_numpy(_bag_w), torch.from_numpy(_bag_i), torch.from_numpy(_bag_o), False, _mode)
    case("_embedding_bag_backward.default", r(4, 3), _bag_i, _bag_o, _eb[1].numpy(), _eb[2].numpy(),
         _eb[3].numpy(), 10, False, _mode, False, None, id=f"_embedding_bag_backward-mode{_mode}")
case("replication_pad2d_backward.default", r(2, 3, 7, 5), r(2, 3, 4, 4), [1, 0, 2, 1])
case("replication_pad3d_backward.default", r(2, 3, 6, 5, 5), r(2, 3, 4, 4, 4), [1, 0, 0, 1, 1, 1])
_gx = r(2, 3, 5, 6)
for _interp in (0, 1):
    for _padm in (0, 1, 2):
        for _ac in (False, True):
            case("grid_sampler_2d_backward.default", r(2, 3, 3, 4), _gx, _grid, _interp, _padm, _ac,
                 [True, _interp == 0], tol=dict(atol=1e-5),
                 id=f"grid_sampler_backward-i{_interp}-p{_padm}-{'ac' if _ac else 'nac'}")
for _interp in (0, 1):
    for _padm in (0, 1, 2):
        case("grid_sampler_3d_backward.default", r(2, 3, 2, 3, 4), r(2, 3, 4, 5, 6), _grid3, _interp, _padm,
             _padm == 2, [True, _interp == 0], tol=dict(atol=1e-5), id=f"grid_sampler_3d_backward-i{_interp}-p{_padm}")
_ap_x = r(2, 2, 5, 6, 4)
_ap_cfgs = [([2, 2, 2], [2, 2, 2], [0, 0, 0], False, True, None),
            ([3, 3, 2], [2, 2, 1], [1, 1, 0], True, False, None),
            ([2, 2, 2], [1, 1, 1], [0, 0, 0], False, True, 3)]
for _i, _cfg in enumerate(_ap_cfgs):
    _ao = A.avg_pool3d(torch.from_numpy(_ap_x), *_cfg)
    case("avg_pool3d_backward.default", r(*_ao.shape), _ap_x, *_cfg, id=f"avg_pool3d_backward-{_i}")
for _i, _cfg in enumerate([([2, 2, 2], [2, 2, 2], [0, 0, 0], [1, 1, 1], False),
                           ([3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1], True)]):
    _mo, _mi = A.max_pool3d_with_indices(torch.from_numpy(_ap_x), *_cfg)
    case("max_pool3d_with_indices_backward.default", r(*_mo.shape), _ap_x, *_cfg, _mi.numpy(),
         id=f"max_pool3d_backward-{_i}")
case("_adaptive_avg_pool3d_backward.default", r(2, 3, 2, 3, 2), r(2, 3, 5, 4, 6))


def test_bf16_rounding_matches_torch():
    """The executor's bf16 rounding is torch's float32 -> bfloat16 conversion."""
    from tilefx.backend.precision_steps import round_to_bf16

    x = np.concatenate([r(2000) * 10 ** _rng.uniform(-30, 30, 2000).astype(F32),
                        np.array([0.0, -0.0, np.inf, -np.inf, 1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8,
                                  3.4e38, 1e-40], F32)]).astype(F32)
    want = torch.from_numpy(x).bfloat16().float().numpy()
    got = round_to_bf16(x)
    np.testing.assert_array_equal(got, want)
    assert np.isnan(round_to_bf16(np.array([np.nan], F32))).all()


# float16 through the new families: computed in float32, rounded once
for _name, _args in [("atan2.default", (h(3, 4), h(3, 4))), ("cumsum.default", (h(3, 4), 1)),
                     ("hardtanh.default", (h(5),)), ("prod.dim_int", (h(3, 4), 1)),
                     ("upsample_bilinear2d.vec", (h(1, 2, 3, 3), [5, 4], False, None)),
                     ("native_group_norm.default", (h(2, 4, 3), None, None, 2, 4, 3, 2, 1e-5)),
                     ("sort.default", (h(3, 5),)), ("index_select.default", (h(4, 3), 0, np.array([3, 1], I64)))]:
    case(_name, *_args, id=f"{_name.split('.')[0]}-f16")


def test_assert_async_raises_the_message():
    kernel = KERNELS["_assert_async.msg"]
    assert kernel(np.array(True), "fine") is None
    with pytest.raises(ValueError, match="Class values must be non-negative"):
        kernel(np.array(False), "one_hot: Class values must be non-negative.")
