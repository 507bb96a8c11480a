"""analysis/attention.py and analysis/fusion.py: the groups the executor runs
as one step, as `attention_plan` and `fusion_plan` keep them."""

from xdsl.parser import Parser

from tilefx.analysis.attention import attention_groups, attention_plan
from tilefx.analysis.fusion import fusion_groups, fusion_plan
from tilefx.passes.pipelines import graph_context
from tilefx.passes.training_step import find_func

# attention over (6, 5, 4) queries with a mask, then a chain of three
# elementwise ops on the output (a fusion group) and one more product
IR = """
func.func @main(%q: tensor<6x5x4xf32>, %kt: tensor<6x4x7xf32>, %v: tensor<6x7x4xf32>, %m: tensor<5x7xf32>) -> tensor<6x5x4xf32> {
  %s = aten.bmm %q, %kt : tensor<6x5x4xf32>, tensor<6x4x7xf32> -> tensor<6x5x7xf32>
  %sc = aten.mul.Scalar %s {other = 0.5 : f64} : tensor<6x5x7xf32> -> tensor<6x5x7xf32>
  %x = aten.add.Tensor %sc, %m : tensor<6x5x7xf32>, tensor<5x7xf32> -> tensor<6x5x7xf32>
  %p = aten._softmax %x {dim = -1 : i64, half_to_float = false} : tensor<6x5x7xf32> -> tensor<6x5x7xf32>
  %o = aten.bmm %p, %v : tensor<6x5x7xf32>, tensor<6x7x4xf32> -> tensor<6x5x4xf32>
  %a = aten.neg %o : tensor<6x5x4xf32> -> tensor<6x5x4xf32>
  %b = aten.relu %a : tensor<6x5x4xf32> -> tensor<6x5x4xf32>
  %c = aten.mul.Tensor %b, %q : tensor<6x5x4xf32>, tensor<6x5x4xf32> -> tensor<6x5x4xf32>
  func.return %c : tensor<6x5x4xf32>
}
"""


def _fn():
    return find_func(Parser(graph_context(), IR).parse_module(), "main")


def _names(ops) -> list[str]:
    return [op.name for op in ops]


def test_attention_plan_keeps_the_groups_a_kernel_takes():
    fn = _fn()
    (g,) = attention_groups(fn)
    assert _names(g.ops) == ["aten.bmm", "aten.mul.Scalar", "aten.add.Tensor", "aten._softmax", "aten.bmm"]
    assert g.scale == 0.5 and g.mask is not None and g.check_rows
    seen = []
    plan = attention_plan(fn, lambda group: seen.append(group) or "kernel")
    assert seen == [g]
    assert plan.at == {g.root: (g, "kernel")} and plan.members == frozenset(g.ops)
    none = attention_plan(fn, lambda group: None)  # no provider's kernel: op by op
    assert none.at == {} and none.members == frozenset()


def test_fusion_plan_keeps_the_groups_run_fused_outside_attention():
    fn = _fn()
    scale, chain = fusion_groups(fn)
    assert _names(scale.ops) == ["aten.mul.Scalar", "aten.add.Tensor"]  # the attention's scale and mask
    assert _names(chain.ops) == ["aten.neg", "aten.relu", "aten.mul.Tensor"]
    plan = fusion_plan(fn, frozenset(), lambda group: group == chain)
    assert plan.at == {chain.root: chain} and plan.members == frozenset(chain.ops)
    # a chain a provider's kernels run op by op is not fused
    assert fusion_plan(fn, frozenset(), lambda group: False).members == frozenset()
    # ops of another group (the attention's scale) are left out
    attention = attention_plan(fn, lambda group: "kernel")
    assert set(fusion_plan(fn, attention.members, lambda group: True).at) == {chain.root}
    neg = chain.ops[0]
    plan = fusion_plan(fn, attention.members | {neg}, lambda group: True)
    assert _names(plan.at[chain.root].ops) == ["aten.relu", "aten.mul.Tensor"]
