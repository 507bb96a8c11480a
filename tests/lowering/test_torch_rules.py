"""torch's result-type rules for the `aten` verifier (lowering/torch_rules.py):
an elementwise op whose operands share one element type and which sets no
property is typed by ATen's CPU kernel on one-element stand-ins instead of its
Python meta function; over that whole domain both give the same result type,
and outside it (or where the kernel rejects) the meta function decides and
words the error."""

from __future__ import annotations

import itertools

import pytest
from xdsl.dialects.builtin import TensorType, f16, f32
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.test_value import create_ssa_value

from tilefx.dialects.aten import create_aten_op
from tilefx.dialects.aten_schema import ATEN_SCHEMAS
from tilefx.dialects.aten_traits import TRAITS, short_name
from tilefx.lowering import torch_rules
from tilefx.lowering.torch_rules import check_result_types, load_torch

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
