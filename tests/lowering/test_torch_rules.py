"""torch's result-type rules for the `aten` verifier (lowering/torch_rules.py):
an elementwise op whose operands share one element type and which sets no
property is typed by ATen's CPU kernel on one-element stand-ins instead of its
Python meta function; over that whole domain both give the same result type,
and outside it (or where the kernel rejects) the meta function decides and
words the error."""

from __future__ import annotations

import itertools
import random

import pytest
from xdsl.dialects.builtin import TensorType, f16, f32
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.test_value import create_ssa_value

from tilefx.dialects.aten import create_aten_op
from tilefx.dialects.aten_schema import ATEN_SCHEMAS
from tilefx.dialects.aten_traits import TRAITS, short_name
from tilefx.lowering import torch_rules
from tilefx.lowering.torch_rules import check_result_types, load_torch

from fresh_python import run_python
from repo_paths import REPO

torch = load_torch()
KEYS = tuple(torch_rules.TORCH_DTYPES)
ELEMENTWISE = [n for n, s in ATEN_SCHEMAS.items()
               if TRAITS.get(short_name(n)) is not None and TRAITS[short_name(n)].same_shape]


def _fn(name: str):
    base, overload = name.split(".")
    return getattr(getattr(torch.ops.aten, base), overload)


def _domain(schema):
    """Every signature of the kernel's domain: each element type, each
    optional operand present or not, each pattern of 0-d operands (none, one,
    all), and for f32 a broadcast and an empty operand; no property set."""
    ops = schema.operands
    unset = {"\0" + a.name: None for a in schema.properties if a.optional and not a.has_default}
    for present in itertools.product(*[(True, False) if o.kind == "optional" else (True,) for o in ops]):
        idx = [i for i in range(len(ops)) if present[i]]
        patterns = [{}, *({j: ()} for j in idx), {j: () for j in idx}]
        for key in KEYS:
            extra = [{idx[0]: (1, 4)}, {j: (0, 4) for j in idx}] if key == "f32" else []
            for shapes in patterns + extra:
                yield {**{o.name: (shapes.get(i, (3, 4)), key) if present[i] else None for i, o in enumerate(ops)},
                       **unset}


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_the_kernel_types_elementwise_ops_as_their_meta_function_does(name, capfd):
    schema, fn = ATEN_SCHEMAS[name], _fn(name)
    answered = 0
    for args in _domain(schema):
        found = torch_rules._elementwise_results(schema, fn, args)
        if found is not None:
            assert found == torch_rules._meta_results(schema, fn, args), args
            answered += 1
    # the stand-ins print nothing (ATen's C++ warnings go straight to stderr)
    assert capfd.readouterr().err == ""
    required = [a.name for a in schema.properties if not a.optional and not a.has_default]
    if required or name in torch_rules._META_ONLY:
        assert not answered  # a property set, or a kernel laxer than the meta function
    elif not answered:  # the kernel answers wherever some operand type is valid (clamp needs a bound)
        assert all(torch_rules._meta_results(schema, fn, args)[0] == "error" for args in _domain(schema))


def test_outside_the_domain_the_kernel_and_the_meta_function_differ(capfd):
    """Why the kernel is asked only for one element type and no property: with
    mixed dtypes threshold_backward's meta function keeps the gradient's dtype
    (the kernel promotes); pow of a bool by True is i64 by meta, i1 by the
    kernel; where's kernel takes a uint8 condition its meta function rejects
    (and prints a deprecation warning)."""
    def meta(*shape_dtypes):
        return [torch.empty(s, dtype=d, device="meta") for s, d in shape_dtypes]

    g, x = torch.ones(2, dtype=torch.float32), torch.ones(2, dtype=torch.float64)
    assert torch.ops.aten.threshold_backward(g, x, 0).dtype == torch.float64
    assert torch.ops.aten.threshold_backward(*meta(((2,), torch.float32), ((2,), torch.float64)), 0).dtype \
        == torch.float32
    b = torch.ones(2, dtype=torch.bool)
    assert torch.ops.aten.pow.Tensor_Scalar(b, True).dtype == torch.bool
    assert torch.ops.aten.pow.Tensor_Scalar(*meta(((2,), torch.bool)), True).dtype == torch.int64
    u = torch.ones(2, dtype=torch.uint8)
    assert torch.ops.aten.where.self(u, u, u).dtype == torch.uint8
    assert "uint8 condition" in capfd.readouterr().err  # and warns on stderr
    with pytest.raises(RuntimeError, match="expected predicate to be bool"):
        torch.ops.aten.where.self(*meta(((2,), torch.uint8),) * 3)
    for name, args in [("threshold_backward.default", {"grad_output": ((2,), "f32"), "self": ((2,), "f64"),
                                                       "\0threshold": 0}),
                       ("add.Tensor", {"self": ((2,), "f32"), "other": ((2,), "f16")}),
                       ("where.self", {"condition": ((2,), "i1"), "self": ((2,), "i1"), "other": ((2,), "i1")})]:
        assert torch_rules._elementwise_results(ATEN_SCHEMAS[name], _fn(name), args) is None


def _relu(result):
    t = TensorType(f32, [4])
    return create_aten_op("relu.default", {"self": create_ssa_value(t)}, {}, [TensorType(result, [4])])


def test_the_verifier_words_errors_as_torchs_rule_gives_them():
    check_result_types(_relu(f32))
    with pytest.raises(VerifyException, match=r"aten.relu: result 0 is tensor<4xf16>, torch's rule for these "
                                              r"operands and properties gives tensor<4xf32>"):
        check_result_types(_relu(f16))
    # a clamp with neither bound: the kernel rejects it in its own words
    # (RuntimeError: torch.clamp: At least one of 'min' or 'max' must not be None);
    # the verifier reports the meta function's error
    t = TensorType(f32, [4])
    op = create_aten_op("clamp.default", {"self": create_ssa_value(t)}, {}, [t])
    with pytest.raises(VerifyException, match="aten.clamp: torch rejects these operands and properties: "
                                              "ValueError: clamp called but both min and max are none"):
        check_result_types(op)


# -- stand-ins with relabelled sizes --------------------------------------------------

def T(*shape, key="f32"):
    return (tuple(shape), key)


I64 = "i64"
# valid signatures of each op of STAND_INS: operands (shape, key), properties by name
EXAMPLES: dict[str, list[dict]] = {
    "mm": [{"self": T(5, 7), "mat2": T(7, 3)}, {"self": T(1, 7), "mat2": T(7, 7)}],
    "addmm": [{"self": T(3), "mat1": T(5, 7), "mat2": T(7, 3)}, {"self": T(5, 1), "mat1": T(5, 7), "mat2": T(7, 3),
                                                                "\0beta": 0.5, "\0alpha": 2}],
    "bmm": [{"self": T(4, 5, 7), "mat2": T(4, 7, 3)}],
    "_softmax": [{"self": T(4, 5, 7), "\0dim": -1, "\0half_to_float": False},
                 {"self": T(3, 5), "\0dim": 0, "\0half_to_float": False}],
    "_log_softmax": [{"self": T(4, 5, 7), "\0dim": 1, "\0half_to_float": False}],
    "sum.dim_IntList": [{"self": T(4, 5, 7), "\0dim": [1], "\0keepdim": False, "\0dtype": None},
                        {"self": T(4, 5, 7), "\0dim": [0, -1], "\0keepdim": True, "\0dtype": "f64"}],
    "sum": [{"self": T(4, 5), "\0dtype": None}],
    "mean": [{"self": T(4, 5), "\0dtype": None}],
    "mean.dim": [{"self": T(4, 5, 7), "\0dim": [-1], "\0keepdim": True, "\0dtype": None},
                 {"self": T(4, 5, 7), "\0dim": None, "\0keepdim": False, "\0dtype": None}],
    "prod": [{"self": T(4, 5), "\0dtype": None}],
    "prod.dim_int": [{"self": T(4, 5), "\0dim": 1, "\0keepdim": True, "\0dtype": None}],
    "amax": [{"self": T(4, 5, 7), "\0dim": [1, 2], "\0keepdim": False}],
    "amin": [{"self": T(4, 5, 7), "\0dim": [0], "\0keepdim": True}],
    "argmax": [{"self": T(4, 5), "\0dim": 1, "\0keepdim": False}, {"self": T(4, 5), "\0dim": None}],
    "argmin": [{"self": T(4, 5), "\0dim": 0, "\0keepdim": True}],
    "any": [{"self": T(4, 5, key="i1")}],
    "any.dim": [{"self": T(4, 5, key="i1"), "\0dim": 1, "\0keepdim": False}],
    "any.dims": [{"self": T(4, 5, key="i1"), "\0dim": [0, 1], "\0keepdim": True}],
    "max.dim": [{"self": T(4, 5), "\0dim": 1, "\0keepdim": False}],
    "min.dim": [{"self": T(4, 5), "\0dim": 0, "\0keepdim": True}],
    "max": [{"self": T(4, 5)}],
    "min": [{"self": T(4, 5)}],
    "linalg_vector_norm": [{"self": T(4, 5), "\0ord": 2, "\0dim": [1], "\0keepdim": False, "\0dtype": None}],
    "cumsum": [{"self": T(4, 5), "\0dim": 1, "\0dtype": None}],
    "cumprod": [{"self": T(4, 5), "\0dim": 0, "\0dtype": None}],
    "logcumsumexp": [{"self": T(4, 5), "\0dim": 1}],
    "cummax": [{"self": T(4, 5), "\0dim": 1}],
    "cummin": [{"self": T(4, 5), "\0dim": 0}],
    "sort": [{"self": T(4, 5), "\0dim": -1, "\0descending": False}],
    "sort.stable": [{"self": T(4, 5), "\0stable": True, "\0dim": 0, "\0descending": True}],
    "median": [{"self": T(4, 5)}],
    "median.dim": [{"self": T(4, 5), "\0dim": 1, "\0keepdim": False}],
    "nanmedian": [{"self": T(4, 5)}],
    "nanmedian.dim": [{"self": T(4, 5), "\0dim": 0, "\0keepdim": True}],
    "mode": [{"self": T(4, 5), "\0dim": -1, "\0keepdim": False}],
    "flip": [{"self": T(4, 5, 7), "\0dims": [0, 2]}],
    "embedding": [{"weight": T(11, 5), "indices": T(4, 7, key=I64)},
                  {"weight": T(11, 5), "indices": T(4, key="i32"), "\0padding_idx": 3}],
    "index_select": [{"self": T(11, 5), "\0dim": 0, "index": T(7, key=I64)}],
    "gather": [{"self": T(11, 5), "\0dim": 0, "index": T(7, 3, key=I64)}],
    "scatter.src": [{"self": T(11, 5), "\0dim": 0, "index": T(7, 3, key=I64), "src": T(7, 4)}],
    "scatter.value": [{"self": T(11, 5), "\0dim": 1, "index": T(7, 3, key=I64), "\0value": 2.0}],
    "scatter_add": [{"self": T(11, 5), "\0dim": 0, "index": T(7, 3, key=I64), "src": T(7, 4)}],
    "scatter_reduce.two": [{"self": T(11, 5), "\0dim": 0, "index": T(7, 3, key=I64), "src": T(7, 4),
                            "\0reduce": "amax", "\0include_self": True}],
    "scalar_tensor": [{"\0s": 2.5, "\0dtype": None}, {"\0s": 3, "\0dtype": "i32"}],
    "native_layer_norm": [{"input": T(4, 5, 7), "\0normalized_shape": [7], "weight": T(7), "bias": T(7),
                           "\0eps": 1e-5},
                          {"input": T(4, 5, 7), "\0normalized_shape": [5, 7], "weight": None, "bias": None,
                           "\0eps": 1e-5}],
    "topk": [{"self": T(4, 9), "\0k": 3, "\0dim": -1, "\0largest": True, "\0sorted": True}],
    "kthvalue": [{"self": T(4, 9), "\0k": 9, "\0dim": 1, "\0keepdim": False}],
    "histc": [{"self": T(4, 9), "\0bins": 10, "\0min": 0, "\0max": 1}],
    "full": [{"\0size": [4, 9], "\0fill_value": 1.5, "\0dtype": None}, {"\0size": [3], "\0fill_value": 2,
                                                                     "\0dtype": "f16"}],
    "cat": [{"tensors": [T(4, 5), T(4, 7)], "\0dim": 1}, {"tensors": [T(4, 5), T(6, 5), T(1, 5)], "\0dim": -2},
            {"tensors": [T(4, 5), T(0)], "\0dim": 0}],
    "constant_pad_nd": [{"self": T(4, 5, 7), "\0pad": [1, 2], "\0value": 0},
                        {"self": T(4, 5, 7), "\0pad": [1, -2, 0, 3], "\0value": 1.5}],
    "convolution": [
        {"input": T(2, 3, 17, 13), "weight": T(8, 3, 3, 5), "bias": T(8), "\0stride": [2, 1], "\0padding": [1, 2],
         "\0dilation": [1, 2], "\0transposed": False, "\0output_padding": [0, 0], "\0groups": 1},
        {"input": T(2, 6, 9), "weight": T(4, 3, 3), "bias": None, "\0stride": [1], "\0padding": [0],
         "\0dilation": [1], "\0transposed": False, "\0output_padding": [0], "\0groups": 2},
        {"input": T(2, 3, 9, 9), "weight": T(3, 8, 3, 3), "bias": T(8), "\0stride": [2, 2], "\0padding": [1, 1],
         "\0dilation": [1, 1], "\0transposed": True, "\0output_padding": [1, 0], "\0groups": 1}],
    "max_pool2d_with_indices": [{"self": T(2, 3, 17, 13), "\0kernel_size": [3, 2], "\0stride": [2, 2],
                                 "\0padding": [1, 0], "\0dilation": [1, 1], "\0ceil_mode": True}],
    "avg_pool2d": [{"self": T(3, 17, 13), "\0kernel_size": [3, 3], "\0stride": [2, 2], "\0padding": [1, 1],
                    "\0ceil_mode": False, "\0count_include_pad": True, "\0divisor_override": None}],
    "_adaptive_avg_pool2d": [{"self": T(2, 3, 17, 13), "\0output_size": [4, 5]}],
    "adaptive_max_pool2d": [{"self": T(2, 3, 17, 13), "\0output_size": [4, 5]}],
    "max_pool3d_with_indices": [{"self": T(2, 3, 9, 7, 5), "\0kernel_size": [3, 2, 2], "\0stride": [2, 2, 1],
                                 "\0padding": [1, 0, 0], "\0dilation": [1, 1, 1], "\0ceil_mode": False}],
    "avg_pool3d": [{"self": T(2, 3, 9, 7, 5), "\0kernel_size": [3, 2, 2], "\0stride": [2, 2, 1],
                    "\0padding": [1, 0, 0], "\0ceil_mode": False, "\0count_include_pad": True,
                    "\0divisor_override": None}],
    "_adaptive_avg_pool3d": [{"self": T(2, 3, 9, 7, 5), "\0output_size": [4, 3, 2]}],
    "adaptive_max_pool3d": [{"self": T(2, 3, 9, 7, 5), "\0output_size": [4, 3, 2]}],
}


def _replaced(args: dict, name: str, index: int, sig) -> dict:
    """`args` with the `index`-th signature of operand `name` replaced by `sig`."""
    out = dict(args)
    if isinstance(args[name], list):
        out[name] = [sig if i == index else s for i, s in enumerate(args[name])]
    else:
        out[name] = sig
    return out


def _variants(example: dict, rule, rng: random.Random):
    """Signatures around a valid one: its sizes renamed consistently (to
    random sizes, and each to 0, 1 and one more), one size of one operand
    changed (0, 1, one more, one less, twice), an operand of one rank less
    or more, each operand of each element type and all together, each
    integer property changed, each bool property flipped. Most are invalid."""
    yield example
    sigs = [(k, i, s) for k, v in example.items() if not k.startswith("\0") and v is not None
            for i, s in enumerate(v if isinstance(v, list) else [v])]
    size_props = [p for p in rule.sizes if example.get("\0" + p) is not None]

    def prop_sizes(p):
        v = example["\0" + p]
        return v if isinstance(v, list) else [v]

    distinct = sorted({d for _, _, (s, _) in sigs for d in s if d >= 2} |
                      {d for p in size_props for d in prop_sizes(p) if d >= 2})

    def renamed(m: dict) -> dict:
        out = dict(example)
        for k, i, (s, key) in sigs:
            out = _replaced(out, k, i, (tuple(m.get(d, d) for d in s), key))
        for p in size_props:
            v = example["\0" + p]
            out["\0" + p] = [m.get(d, d) for d in v] if isinstance(v, list) else m.get(v, v)
        return out

    for _ in range(6):
        yield renamed({d: rng.choice([0, 1, 2, 3, 5, 8, 13, 64, 100]) for d in distinct})
    for d in distinct:
        for v in (0, 1, d + 1):
            yield renamed({d: v})
    for k, i, (s, key) in sigs:
        for a in range(len(s)):
            for v in sorted({0, 1, s[a] + 1, max(s[a] - 1, 0), 2 * s[a]}):
                yield _replaced(example, k, i, (s[:a] + (v,) + s[a + 1:], key))
        for shape in (s[1:], (2, *s), (1, *s)):
            yield _replaced(example, k, i, (shape, key))
        for other in KEYS:
            yield _replaced(example, k, i, (s, other))
    for other in KEYS:
        out = dict(example)
        for k, i, (s, key) in sigs:
            out = _replaced(out, k, i, (s, other if key == "f32" else key))
        yield out
    for k, v in example.items():
        if not k.startswith("\0") or isinstance(v, bool):
            if isinstance(v, bool):
                yield {**example, k: not v}
        elif isinstance(v, int):
            for other in (v - 1, v + 1, -v - 1, 0, 5, -3):
                yield {**example, k: other}
        elif isinstance(v, list) and v and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            for j in range(len(v)):
                for other in (v[j] - 1, v[j] + 1, 0, -1, 3):
                    yield {**example, k: v[:j] + [other] + v[j + 1:]}
            yield {**example, k: v[:-1]}


def test_every_stand_in_op_has_examples():
    assert set(EXAMPLES) == set(torch_rules.STAND_INS)


@pytest.mark.parametrize("short", sorted(EXAMPLES))
def test_the_stand_ins_type_ops_as_their_meta_function_does(short, capfd):
    """Wherever the relabelled stand-ins answer, the meta function gives the
    same result types (over valid and invalid signatures: where it rejects
    them, the stand-ins do not answer); they answer for the valid examples,
    so the verifier does not need the meta function for them; and the kernels
    print nothing."""
    name = short if "." in short else short + ".default"
    schema, fn, rule = ATEN_SCHEMAS[name], _fn(name), torch_rules.STAND_INS[short]
    rng = random.Random(0)
    answered = compared = 0
    for example in EXAMPLES[short]:
        assert torch_rules._stand_in_results(schema, fn, example) is not None, example
        for args in _variants(example, rule, rng):
            found = torch_rules._stand_in_results(schema, fn, args)
            meta = torch_rules._meta_results(schema, fn, args)
            compared += 1
            if found is not None:
                assert found == meta, args
                answered += 1
    assert compared > 40 and answered > 5
    assert capfd.readouterr().err == ""


def test_the_stand_ins_keep_torchs_errors_and_skip_the_large():
    """A signature torch rejects gets the meta function's error through the
    verifier; kept axes too large to run on the CPU go to the meta function."""
    def op(shapes, result):
        return create_aten_op("mm.default", {k: create_ssa_value(TensorType(f32, s)) for k, s in shapes.items()},
                              {}, [TensorType(f32, result)])

    check_result_types(op({"self": [768, 3072], "mat2": [3072, 50257]}, [768, 50257]))
    with pytest.raises(VerifyException, match=r"aten.mm: result 0 is tensor<768x50256xf32>, torch's rule for "
                                              r"these operands and properties gives tensor<768x50257xf32>"):
        check_result_types(op({"self": [768, 3072], "mat2": [3072, 50257]}, [768, 50256]))
    with pytest.raises(VerifyException, match="aten.mm: torch rejects these operands and properties: "
                                              "RuntimeError: a and b must have same reduction dim"):
        check_result_types(op({"self": [768, 3072], "mat2": [3071, 50257]}, [768, 50257]))
    schema, fn = ATEN_SCHEMAS["constant_pad_nd.default"], _fn("constant_pad_nd.default")
    big = {"self": ((2, 3), "f32"), "\0pad": [1 << 30, 0], "\0value": 0}
    assert torch_rules._stand_in_results(schema, fn, big) is None
    assert torch_rules._meta_results(schema, fn, big) == ("ok", [((2, 3 + (1 << 30)), "f32")])


_CLASSES_IR = """
func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %img: tensor<2x3x8x8xf32>, %k: tensor<4x3x3x3xf32>)
    -> (tensor<4x16xf32>, tensor<4x8xf32>, tensor<2x4x8x8xf32>, tensor<8xf32>) {
  %mm = aten.mm %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %sm = aten._softmax %x {dim = 1 : i64, half_to_float = false} : tensor<4x8xf32> -> tensor<4x8xf32>
  %conv = aten.convolution %img, %k {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, transposed = false, output_padding = array<i64: 0, 0>, groups = 1 : i64} : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<2x4x8x8xf32>
  %sum = aten.sum.dim_IntList %x {dim = array<i64: 0>, keepdim = false} : tensor<4x8xf32> -> tensor<8xf32>
  func.return %mm, %sm, %conv, %sum : tensor<4x16xf32>, tensor<4x8xf32>, tensor<2x4x8x8xf32>, tensor<8xf32>
}
"""


def test_tilefx_opt_verifies_matmul_softmax_convolution_and_sum_without_sympy():
    """torch's Python meta functions import sympy on first use (~0.5 s): the
    stand-ins verify these op classes without them."""
    code = ("import io, contextlib, sys, tempfile\n"
            "from tilefx.tools.opt import main\n"
            f"path = tempfile.mktemp(suffix='.mlir'); open(path, 'w').write({_CLASSES_IR!r})\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    rc = main([path])\n"
            "print(rc, 'torch' in sys.modules, 'sympy' in sys.modules)\n")
    assert run_python(code, [REPO]).split() == ["0", "True", "False"]
