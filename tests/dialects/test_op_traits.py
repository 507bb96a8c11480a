"""Op traits (tilefx/dialects/aten_traits.py): every op of the ATen schema
has decided traits, one column per concern, and the machine model, the
fusion, the in-place selection, the executor and the verifier read them."""

from __future__ import annotations

import warnings

import pytest

from tilefx.dialects import aten_traits
from tilefx.dialects.aten_schema import ATEN_SCHEMAS, RANDOM_SCHEMAS
from tilefx.dialects.aten_traits import TRAITS, ops_where, short_name, traits


def test_every_schema_op_has_decided_traits():
    undecided = sorted(short_name(s) for s in ATEN_SCHEMAS if short_name(s) not in TRAITS)
    assert not undecided, f"ops of the schema without traits (dialects/aten_traits.py): {undecided}"
    assert set(TRAITS) == {short_name(s) for s in ATEN_SCHEMAS}


def test_each_op_has_one_cost_kind_and_its_flops():
    seen: dict[str, str] = {}
    for kind, text in aten_traits._COST.items():
        for n in text.split():
            assert n not in seen, f"{n} is costed both as {seen[n]} and as {kind}"
            assert n in TRAITS, f"{n} ({kind}) is no op of the schema"
            seen[n] = kind
    flops = [n for text in aten_traits._FLOPS.values() for n in text.split()]
    assert len(flops) == len(set(flops)), "an op with two flop counts"
    for n, t in TRAITS.items():
        # an elementwise op or a row reduction has its operations per element; no other op reads them
        assert (t.flops is not None) == (t.cost in ("elementwise", "row_reduction")), n
        assert t.flops is None or t.flops >= 1


def test_columns_agree_with_each_other():
    assert {short_name(s) for s in RANDOM_SCHEMAS} == ops_where(random=True)
    fusible = ops_where(fusible=True)
    assert fusible and all(TRAITS[n].cost == "elementwise" and TRAITS[n].same_shape for n in fusible)
    assert ops_where(scalar_operand=True) <= fusible
    assert all(TRAITS[n].in_place for n in ("relu", "add.Tensor", "mul.Tensor", "sub.Tensor", "div.Tensor", "neg"))
    assert all(n in fusible for n in TRAITS if TRAITS[n].in_place)  # memory-bound elementwise ops
    assert not any(TRAITS[n].random for n in fusible | ops_where(cost="view"))
    assert ops_where(same_value=True) == {"alias", "lift_fresh_copy"}


def test_lookup_by_any_spelling():
    assert traits("aten.add.Tensor") is traits("add.Tensor") is TRAITS["add.Tensor"]
    assert traits("relu.default") is traits("aten.relu") is TRAITS["relu"]
    assert traits("ipu.sgd") is None


def test_the_consumers_read_the_traits():
    from tilefx.analysis import values
    from tilefx.backend import costs
    from tilefx.lowering.aten_kernels import IN_PLACE_FORMS
    from tilefx.analysis.fusion import FUSIBLE

    assert costs.VIEW_OPS == ops_where(cost="view") and costs.GATHER_OPS == ops_where(cost="gather")
    assert costs.ROW_REDUCTIONS["_softmax"] == TRAITS["_softmax"].flops
    assert FUSIBLE == {f"aten.{n}" for n in ops_where(fusible=True)}
    assert values.VIEW_OPS == {f"aten.{n}" for n in ops_where(view_step=True)}
    assert IN_PLACE_FORMS["add.Tensor"] == ("add_", "Tensor", (0, 1))
    assert IN_PLACE_FORMS["relu.default"] == ("relu_", "default", (0,))
    from tilefx.lowering.decompositions import KEPT_WHOLE
    from tilefx.passes.available_memory import MEMORY_OPS

    assert set(KEPT_WHOLE) == {"native_layer_norm_backward", "_softmax_backward_data", "_log_softmax_backward_data",
                               "gelu_backward", "threshold_backward", "nll_loss_forward", "nll_loss_backward",
                               "logaddexp"}

    assert MEMORY_OPS == {"aten.mm", "aten.bmm", "aten.addmm", "aten.convolution", "aten.convolution_backward",
                          "aten.embedding", "aten.embedding_dense_backward", "aten.index.Tensor",
                          "aten.index_put", "aten.gather", "ipu.serialized_matmul"}


class _Op:
    def __init__(self, name: str):
        self.name = name


def test_elementwise_costs_come_from_the_traits():
    from tilefx.backend.costs import _elementwise_flops

    assert _elementwise_flops(_Op("aten.exp")) == 4 and _elementwise_flops(_Op("aten.gelu")) == 10
    assert _elementwise_flops(_Op("aten.add.Tensor")) == 1  # decided: one operation
    assert _elementwise_flops(_Op("aten.special_hermite_polynomial_h")) == 32


def test_an_op_of_unknown_cost_is_said_not_silent():
    from tilefx.backend.costs import _elementwise_flops

    with pytest.warns(UserWarning, match="no cost for ipu.made_up_op"):
        assert _elementwise_flops(_Op("ipu.made_up_op")) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per op
        _elementwise_flops(_Op("ipu.made_up_op"))


def test_the_verifier_reads_the_same_shape_column():
    from irtext import parse
    from xdsl.utils.exceptions import VerifyException

    assert TRAITS["add.Tensor"].same_shape and not TRAITS["mm"].same_shape
    bad = ("func.func @f(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<3x3xf32> {\n"
           "  %c = aten.add.Tensor %a, %b {alpha = 1 : i64} : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<3x3xf32>\n"
           "  func.return %c : tensor<3x3xf32>\n}\n")
    with pytest.raises(VerifyException):
        parse(bad)


def test_every_column_names_ops_of_the_schema():
    for column in ("_SAME_SHAPE", "_FUSIBLE", "_SCALAR_OPERAND", "_VIEW_STEP", "_SAME_VALUE", "_MEMORY_PLANNED",
                   "_KEPT_WHOLE"):
        unknown = set(getattr(aten_traits, column).split()) - set(TRAITS)
        assert not unknown, f"{column} names ops the schema does not have: {sorted(unknown)}"
    assert set(aten_traits._IN_PLACE) <= set(TRAITS)
