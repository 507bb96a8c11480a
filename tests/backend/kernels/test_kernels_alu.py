"""The kernel tables of backend/kernels/alu.py: every row names an op of the
ATen schema, its kernel takes the schema's arguments as a written function
would, and every row's kernel equals torch.ops.aten on a sample of each dtype
its rule covers (float32 over the domains of the transcendental functions,
float16, int64, bool, 0-d tensors, Python scalars)."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

from test_kernels import F16, F32, I64, check, r, rb, reseed, ri, s, _inputs_seeded_per_test  # noqa: F401 (the fixture)
from tilefx.backend.kernels import KERNELS, alu
from tilefx.dialects.aten_schema import ATEN_SCHEMAS, SCHEMAS

reseed(7)

TABLES = {
    "SAME_UNARY": alu.SAME_UNARY, "FLOAT_UNARY": alu.FLOAT_UNARY, "ROUNDING": alu.ROUNDING,
    "BINARY": alu.BINARY, "FLOAT_BINARY": alu.FLOAT_BINARY, "COMPARE": alu.COMPARE, "AS_NUMPY": alu.AS_NUMPY,
}
ALPHA_ROWS = [f"{op}.{overload}" for op in alu.ALPHA for overload in ("Tensor", "Scalar")]
ROWS = sorted([name for table in TABLES.values() for name in table] + ALPHA_ROWS)
RULE = {name: rule for rule, table in TABLES.items() for name in table} | {n: "ALPHA" for n in ALPHA_ROWS}


def test_every_table_has_a_rule():
    assert [table for table, _ in alu.RULES] == list(TABLES.values())


def test_every_row_names_a_schema_op_and_is_its_kernel():
    assert len(ROWS) == len(set(ROWS)), "a row in two tables"
    assert set(alu.KERNELS) == set(ROWS)
    for name in ROWS:
        assert name in ATEN_SCHEMAS, name
        assert KERNELS[name] is alu.KERNELS[name], name


def _schema_line(name: str) -> str:
    base, overload = name.split(".")
    head = base if overload == "default" else name
    (line,) = [x for x in SCHEMAS.strip().splitlines() if x.startswith(head + "(")]
    return line


@pytest.mark.parametrize("name", ROWS)
def test_row_kernel_takes_the_schema_arguments(name):
    """Names in schema order, keyword-only exactly after the schema's `*`,
    required unless the schema has a default: what a function written for
    the op would accept."""
    args = re.match(r"^[\w.]+\((.*)\)\s*->", _schema_line(name))[1].split(", ")
    keyword_only = args.index("*") if "*" in args else len(args)
    params = list(inspect.signature(KERNELS[name]).parameters.values())
    expected = [a.name for a in ATEN_SCHEMAS[name].args]
    assert [p.name for p in params] == expected
    for i, (p, arg) in enumerate(zip(params, ATEN_SCHEMAS[name].args)):
        kind = p.KEYWORD_ONLY if i >= keyword_only else p.POSITIONAL_OR_KEYWORD
        assert p.kind == kind, (p.name, p.kind)
        assert (p.default is p.empty) == (not arg.has_default), p.name


def test_a_row_naming_no_schema_op_is_an_error(monkeypatch):
    monkeypatch.setattr(alu, "KERNELS", {})
    monkeypatch.setattr(alu, "RULES", (({"absolute.default": np.abs}, alu._same_unary),))
    with pytest.raises(ValueError, match="absolute.default.* names no op of dialects/aten_schema.py"):
        alu._make_kernels()


def test_a_row_of_an_op_with_defaults_is_an_error(monkeypatch):
    monkeypatch.setattr(alu, "KERNELS", {})
    monkeypatch.setattr(alu, "RULES", (({"leaky_relu.default": np.abs}, alu._same_unary),))
    with pytest.raises(ValueError, match="leaky_relu.default: defaults for negative_slope"):
        alu._make_kernels()


def test_a_row_whose_arguments_have_no_template_is_an_error(monkeypatch):
    monkeypatch.setattr(alu, "KERNELS", {})
    monkeypatch.setattr(alu, "RULES", (({"masked_scatter.default": np.where}, alu._same_unary),))
    with pytest.raises(ValueError, match="masked_scatter.default: no template for the arguments self, mask, source"):
        alu._make_kernels()


# ---------------------------------------------------------------------------
# every row against ATen
# ---------------------------------------------------------------------------

# the dtypes a sample leaves out are those ATen's CPU kernels do not take
INTEGER_ONLY = ("bitwise_", "gcd.")  # no float kernel
BOOL_PAIRS = ("bitwise_and.", "bitwise_or.", "bitwise_xor.")  # of INTEGER_ONLY, the ones with a bool kernel
FLOAT_ONLY = ("nextafter.", "hypot.", "logaddexp.", "tanh_backward.", "sigmoid_backward.")  # no integer kernel
BOOL_UNARY = ("FLOAT_UNARY", "AS_NUMPY")  # the unary rules whose ops all have a bool kernel
# cephes series in float64 as well: no exact reference (tests/kernel_tolerance.py)
CEPHES = {f"special_{op}.default" for op in (
    "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1",
    "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
    "spherical_bessel_j0", "airy_ai")}
NO_HALF = CEPHES | {"special_bessel_j0.default", "special_erfcx.default", "special_ndtri.default"}


def _spread(n: int = 6) -> np.ndarray:
    """float32 in (-4, 4) over the domains of the inverse and logarithmic
    functions: (-1, 0), (0, 1), (1, 2) and beyond."""
    u = (0.05 + 0.9 * np.random.default_rng(n).random(n)).astype(F32)
    return np.concatenate([-3 * u, -u, u, 1 + u, 3 * u + 1]).reshape(5, n)


def _unary_samples(name):
    if name.startswith(INTEGER_ONLY):
        return [ri(4, 5), ri(6, dtype=np.dtype("int32")), rb(5)]
    x = _spread()
    return [x, s(0.75), ri(5, lo=1)] + ([] if name in NO_HALF else [x.astype(F16)]) + \
        ([rb(4)] if RULE[name] in BOOL_UNARY else [])


def _binary_samples(name):
    """(self, other) pairs: broadcasting, mixed dtypes, 0-d, Python scalars
    for the `Scalar other` overloads."""
    schema = ATEN_SCHEMAS[name]
    scalar_other = schema.args[1].kind == "property"
    if name.startswith(INTEGER_ONLY):
        pairs = [(ri(3, 4, lo=-9), ri(4, lo=0, hi=5)), (ri(5, dtype=np.dtype("int32")), s(2, I64))]
        scalars = [(ri(3, 4, lo=-9), 3)]
        if name.startswith(BOOL_PAIRS):
            pairs, scalars = pairs + [(rb(4), rb(4))], scalars + [(rb(4), True)]
    elif name.startswith(("special_", "igamma")) and "polynomial" not in name:
        pairs = [((np.abs(r(3, 4)) * 3 + 1.1).astype(F32), (np.abs(r(4)) + 0.2).astype(F32))]
        scalars = []
    elif "polynomial" in name:
        pairs = [((r(4, 6) * 1.2).astype(F32), (np.arange(24).reshape(4, 6) % 9 - 1).astype(F32)),
                 ((r(5) * 0.9).astype(F32), ri(5, lo=0, hi=6))]
        scalars = []
    else:
        x = _spread()
        pos = np.abs(x) + np.float32(0.5)  # powers and divisions away from 0
        pairs = [(x, pos[:, :1]), (x.astype(F16), pos.astype(F16)), (s(1.5), x), (x, s(2.0, np.dtype("float64"))),
                 (x.astype(F16), s(0.5))]
        scalars = [(x, 2), (x, 0.75), (x.astype(F16), 1.5)]
        if not name.startswith(FLOAT_ONLY):
            pairs += [(ri(3, 4, lo=-9), ri(4, lo=1, hi=4)), (ri(3, 4, lo=-9), x[:3, :4]), (ri(4, lo=1), s(3, I64))]
            scalars += [(ri(3, 4, lo=-9), 3), (ri(3, 4, lo=-9), 2.5)]
    return scalars if scalar_other else pairs


def _cases():
    for name in ROWS:
        tol = {"rtol": 1e-5, "atol": 1e-6, "float64_reference": False} if name in CEPHES else {}
        rule = RULE[name]
        if len(ATEN_SCHEMAS[name].args) == 1:
            samples = [(x,) for x in _unary_samples(name)]
        else:
            samples = _binary_samples(name)
        for i, args in enumerate(samples):
            kwargs = [{}, {"alpha": 2}, {"alpha": 0.5}][i % 3] if rule == "ALPHA" and args[0].dtype.kind == "f" \
                else {"alpha": 3} if rule == "ALPHA" and i % 2 else {}
            dtypes = "-".join(a.dtype.name + ("0d" if a.ndim == 0 else "") if isinstance(a, np.ndarray)
                              else type(a).__name__ for a in args)
            yield pytest.param(name, args, kwargs, tol, id=f"{name}-{dtypes}-{i}")


CASES = list(_cases())


@pytest.mark.parametrize("name,args,kwargs,tol", CASES)
def test_row_kernel_matches_aten(name, args, kwargs, tol):
    check(name, *args, **kwargs, **tol)


def test_no_family_module_wraps_one_numpy_call_under_a_table_rule():
    """A kernel that is `return rule(fn, *its arguments)` for a rule of the
    tables belongs in the table, not in a function of its own."""
    import ast
    import pathlib

    rules = {"_same_unary", "_float_unary", "_binary", "_compare"}
    wrappers = []
    for path in sorted(pathlib.Path(alu.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.FunctionDef) and any(
                    isinstance(d, ast.Call) and getattr(d.func, "id", "") == "_kernel" for d in node.decorator_list)):
                continue
            body = [b for b in node.body if not (isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant))]
            if len(body) == 1 and isinstance(body[0], ast.Return) and isinstance(body[0].value, ast.Call):
                call = body[0].value
                params = [a.arg for a in node.args.args + node.args.kwonlyargs]
                if getattr(call.func, "id", "") in rules and [getattr(a, "id", None) for a in call.args[1:]] == params:
                    wrappers.append(f"{path.name}:{node.name}")
    assert not wrappers, wrappers
