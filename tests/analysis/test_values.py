"""analysis/values.py: which values share one slot, and which pure ops repeat an earlier one."""

from xdsl.parser import Parser

from tilefx.analysis.values import same_array, same_shape_view, value_slots
from tilefx.passes.pipelines import graph_context
from tilefx.passes.training_step import find_func

NO_MEMBERS: frozenset = frozenset()


def _fn(body: str, args: str = "%x: tensor<4x8xf32>", results: str = "tensor<4x8xf32>"):
    text = f"func.func @main({args}) -> ({results}) {{\n{body}\n}}"
    return find_func(Parser(graph_context(), text).parse_module(), "main")


def _by_name(fn):
    """The ops of fn (nested ones too) by their first result's name, else by op name."""
    out = {}
    for op in fn.walk():
        key = op.results[0].name_hint if op.results and op.results[0].name_hint else op.name
        out[key] = op
    return out


def _slots(fn, members=NO_MEMBERS):
    slots = value_slots(fn, members)
    return slots, slots.repeats


def test_moves_same_value_ops_and_same_shape_views_share_their_operands_slot():
    fn = _fn("""
  %a = aten.alias %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %c = ipu.copy %a {src = 0 : i64, dst = 1 : i64} : tensor<4x8xf32>
  %e = aten.expand %c {size = array<i64: 4, 8>} : tensor<4x8xf32> -> tensor<4x8xf32>
  %v = aten.view %e {size = array<i64: 8, 4>} : tensor<4x8xf32> -> tensor<8x4xf32>
  %r = aten.relu %v : tensor<8x4xf32> -> tensor<8x4xf32>
  func.return %r, %e : tensor<8x4xf32>, tensor<4x8xf32>""", results="tensor<8x4xf32>, tensor<4x8xf32>")
    slots, _ = _slots(fn)
    ops = _by_name(fn)
    x = fn.body.block.args[0]
    assert slots.of[x] == 0
    for name in ("a", "c", "e"):
        assert slots.of[ops[name].results[0]] == slots.of[x], name
    # a view to another shape is a step of its own: a slot of its own
    assert len({slots.of[x], slots.of[ops["v"].results[0]], slots.of[ops["r"].results[0]]}) == 3
    assert slots.count == 3


def test_a_same_shape_view_inside_a_group_keeps_its_own_slot():
    fn = _fn("""
  %e = aten.expand %x {size = array<i64: 4, 8>} : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %e : tensor<4x8xf32>""")
    e = _by_name(fn)["e"]
    assert same_shape_view(e)
    assert same_array(e, NO_MEMBERS) == [(e.results[0], e.operands[0])]
    assert same_array(e, frozenset({e})) == []  # its group's step computes it
    slots, _ = _slots(fn, frozenset({e}))
    assert slots.of[e.results[0]] != slots.of[fn.body.block.args[0]]


def test_a_permute_that_reorders_is_no_same_shape_view():
    fn = _fn("""
  %p = aten.permute %x {dims = array<i64: 1, 0>} : tensor<4x4xf32> -> tensor<4x4xf32>
  %q = aten.permute %x {dims = array<i64: 0, 1>} : tensor<4x4xf32> -> tensor<4x4xf32>
  func.return %p, %q : tensor<4x4xf32>, tensor<4x4xf32>""", "%x: tensor<4x4xf32>", "tensor<4x4xf32>, tensor<4x4xf32>")
    ops = _by_name(fn)
    assert not same_shape_view(ops["p"]) and same_shape_view(ops["q"])


def test_a_stages_results_are_the_values_it_yields():
    fn = _fn("""
  %s0 = ipu.stage {stage = 0 : i64, ipu = 0 : i64, phase = 0 : i64, direction = "fwd"} -> tensor<4x8xf32> {
    %r = aten.relu %x : tensor<4x8xf32> -> tensor<4x8xf32>
    ipu.yield %r : tensor<4x8xf32>
  }
  %n = aten.neg %s0 : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %n : tensor<4x8xf32>""")
    slots, _ = _slots(fn)
    ops = _by_name(fn)
    assert slots.of[ops["s0"].results[0]] == slots.of[ops["r"].results[0]]
    assert slots.count == 3  # x, r (= s0), n


def test_a_repeated_pure_op_and_the_ops_reading_it_are_computed_once():
    fn = _fn("""
  %a = aten.sigmoid %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %b = aten.sigmoid %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %c = aten.neg %a : tensor<4x8xf32> -> tensor<4x8xf32>
  %d = aten.neg %b : tensor<4x8xf32> -> tensor<4x8xf32>
  %e = aten.neg %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %s = aten.add.Tensor %c, %d {alpha = 1 : i64} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %t = aten.add.Tensor %s, %e {alpha = 1 : i64} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %t : tensor<4x8xf32>""")
    slots, repeats = _slots(fn)
    ops = _by_name(fn)
    # d repeats c once b is a's repeat: the same op on the same slot
    assert repeats.first == {ops["b"]: ops["a"], ops["d"]: ops["c"]}
    assert slots.of[ops["d"].results[0]] == slots.of[ops["c"].results[0]]
    assert slots.of[ops["e"].results[0]] != slots.of[ops["c"].results[0]]  # neg of another value
    # without repeats (hand-written IR the tools check step by step) every op has its slots
    plain = value_slots(fn, NO_MEMBERS, repeats=False)
    assert plain.repeats.first == {}
    assert plain.count == slots.count + 2


def test_what_is_never_a_repeat():
    """Random ops, ops of a group, ops in a loop's body and ops with other
    properties run every time they appear."""
    fn = _fn("""
  %d1, %m1 = aten.native_dropout %x {p = 2.0e-01 : f64, train = true} : tensor<4x8xf32> -> tensor<4x8xf32>, tensor<4x8xi1>
  %d2, %m2 = aten.native_dropout %x {p = 2.0e-01 : f64, train = true} : tensor<4x8xf32> -> tensor<4x8xf32>, tensor<4x8xi1>
  %g1 = aten.gelu %x {approximate = "none"} : tensor<4x8xf32> -> tensor<4x8xf32>
  %g2 = aten.gelu %x {approximate = "tanh"} : tensor<4x8xf32> -> tensor<4x8xf32>
  %r1 = aten.relu %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %r2 = aten.relu %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %c = ipu.for (%x) invariants (%w) {count = 3 : i64} : (tensor<4x8xf32>), (tensor<8x8xf32>) -> (tensor<4x8xf32>) {
  ^bb0(%y: tensor<4x8xf32>, %ww: tensor<8x8xf32>):
    %z1 = aten.mm %y, %ww : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
    %z2 = aten.mm %y, %ww : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
    %z = aten.add.Tensor %z1, %z2 {alpha = 1 : i64} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
    ipu.yield %z : tensor<4x8xf32>
  }
  func.return %c : tensor<4x8xf32>""", "%x: tensor<4x8xf32>, %w: tensor<8x8xf32>")
    ops = _by_name(fn)
    members = frozenset({ops["r2"]})
    slots, repeats = _slots(fn, members)
    assert repeats.first == {}
    assert _slots(fn)[1].first == {ops["r2"]: ops["r1"]}  # outside the group it is one
    # the loop's body arguments and results have slots of their own
    body = ops["c"].regions[0].block
    assert len({slots.of[a] for a in body.args} | {slots.of[ops["c"].results[0]]}) == 3


def test_a_repeat_reading_a_result_its_first_left_unread_is_computed_again():
    """A multi-result step converts only the results its own users read."""
    fn = _fn("""
  %a, %ai = aten.max.dim %x {dim = 1 : i64, keepdim = false} : tensor<4x8xf32> -> tensor<4xf32>, tensor<4xi64>
  %b, %bi = aten.max.dim %x {dim = 1 : i64, keepdim = false} : tensor<4x8xf32> -> tensor<4xf32>, tensor<4xi64>
  %c, %ci = aten.max.dim %x {dim = 1 : i64, keepdim = false} : tensor<4x8xf32> -> tensor<4xf32>, tensor<4xi64>
  func.return %a, %bi, %c : tensor<4xf32>, tensor<4xi64>, tensor<4xf32>""",
             results="tensor<4xf32>, tensor<4xi64>, tensor<4xf32>")
    ops = _by_name(fn)
    _, repeats = _slots(fn)
    # b reads the indices a left unread: computed; c reads the values only: a's
    assert repeats.first == {ops["c"]: ops["a"]}
