"""The `aten` dialect: one op per core-ATen op, built from `aten_schema.SCHEMAS`.

Tensor arguments become operands (optional ones are written with their
argument name as a keyword, lists in parentheses), every other argument is a
property kept in the attribute dictionary, e.g.

    %y = aten.convolution %x, %w bias %b {stride = array<i64: 1, 1>, ...}
           : tensor<4x1x28x28xf32>, tensor<10x1x5x5xf32> bias tensor<10xf32>
           -> tensor<4x10x24x24xf32>

Properties convert to and from plain Python values with `to_attr` /
`from_attr`, which the frontend and the executor share.
"""

from __future__ import annotations

import functools
import keyword
import math
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from xdsl.dialects.builtin import (
    BoolAttr,
    ComplexType,
    DenseArrayBase,
    Float16Type,
    Float32Type,
    Float64Type,
    BFloat16Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    Signedness,
    StringAttr,
    TensorType,
    TypeAttribute,
    f16,
    f32,
    f64,
    bf16,
    i1,
    i8,
    i32,
    i64,
)
from xdsl.ir import Attribute, Dialect
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)

from xdsl.traits import Pure

from tilefx.dialects.aten_schema import ATEN_SCHEMAS, RANDOM_SCHEMAS, Arg, Schema
from tilefx.dialects.aten_traits import TRAITS
from tilefx.errors import Error
from tilefx.runtime import RUNTIME

if TYPE_CHECKING:
    import numpy as np

# ---------------------------------------------------------------------------
# element types <-> numpy dtypes

# numpy is imported by the first conversion, not with the dialect: the graph
# passes import the dialect to read IR and most convert no type (with numpy
# imported, `tilefx-opt -p ipu-assign-stages` on a one-op file took 0.59 s, not 0.44 s)
_NP_NAME_OF_TYPE = {"f32": "float32", "f16": "float16", "f64": "float64", "i64": "int64", "i32": "int32",
                    "i8": "int8", "i1": "bool", "i16": "int16", "ui8": "uint8", "c64": "complex64"}


@functools.cache
def _np_of_type() -> dict[str, np.dtype]:
    import numpy as np

    return {k: np.dtype(v) for k, v in _NP_NAME_OF_TYPE.items()}


@functools.cache
def _type_of_np() -> dict[np.dtype, str]:
    return {v: k for k, v in _np_of_type().items()}


_XDSL_TYPES = {"f32": f32, "f16": f16, "f64": f64, "bf16": bf16, "i64": i64, "i32": i32, "i8": i8, "i1": i1,
               "i16": IntegerType(16), "ui8": IntegerType(8, Signedness.UNSIGNED),
               "c64": ComplexType(f32)}


class UnsupportedTypeError(Error, ValueError):
    """An element type tilefx does not compute with (a tilefx.Error and a ValueError)."""


def type_key(t: Attribute) -> str:
    """'f32', 'i64', ... for a builtin element type."""
    if isinstance(t, Float32Type):
        return "f32"
    if isinstance(t, Float16Type):
        return "f16"
    if isinstance(t, Float64Type):
        return "f64"
    if isinstance(t, BFloat16Type):
        return "bf16"
    if isinstance(t, IntegerType):
        unsigned = t.signedness.data == Signedness.UNSIGNED
        return f"{'ui' if unsigned else 'i'}{t.width.data}"
    if isinstance(t, ComplexType) and isinstance(t.element_type, Float32Type):
        return "c64"
    raise UnsupportedTypeError(f"unsupported element type {t}")


def np_dtype(t: Attribute) -> np.dtype:
    """The numpy dtype holding values of an element type. bf16 values are
    held as float32 rounded to bfloat16 precision (numpy has no bfloat16;
    the executor rounds every bf16 result, see docs/ir.md)."""
    key = type_key(t)
    if key == "bf16":
        return _np_of_type()["f32"]
    if key not in _NP_NAME_OF_TYPE:
        raise UnsupportedTypeError(f"element type {key} is not supported (use one of "
                                   f"{', '.join(_NP_NAME_OF_TYPE)})")
    return _np_of_type()[key]


def element_type(dtype: np.dtype | str) -> Attribute:
    import numpy as np

    dt = np.dtype(dtype)
    if dt not in _type_of_np():
        raise ValueError(f"tensors of dtype {dt} have no IR element type")
    return _XDSL_TYPES[_type_of_np()[dt]]


def tensor_type(shape, dtype) -> TensorType:
    return TensorType(element_type(dtype), list(shape))


# ---------------------------------------------------------------------------
# properties <-> Python values


def to_attr(arg_base: str, value: Any) -> Attribute:
    """Convert a Python value to the attribute kept for a schema argument."""
    if arg_base == "int":
        return IntegerAttr(int(value), i64)
    if arg_base == "float":
        return FloatAttr(float(value), f64)
    if arg_base == "bool":
        return BoolAttr.from_bool(bool(value))
    if arg_base == "str":
        return StringAttr(str(value))
    if arg_base == "ScalarType":
        return value if isinstance(value, TypeAttribute) else element_type(value)
    if arg_base == "Scalar":
        if isinstance(value, bool):
            return BoolAttr.from_bool(value)
        if isinstance(value, int):
            return IntegerAttr(value, i64)
        return FloatAttr(float(value), f64)
    if arg_base == "int[]":
        if isinstance(value, int):
            value = [value]
        return DenseArrayBase.from_list(i64, [int(v) for v in value])
    if arg_base == "float[]":
        return DenseArrayBase.from_list(f64, [float(v) for v in value])
    if arg_base == "bool[]":
        return DenseArrayBase.from_list(i1, [int(bool(v)) for v in value])
    raise ValueError(f"unsupported property kind {arg_base}")


def from_attr(attr: Attribute) -> Any:
    """The plain Python value of a property attribute (numpy dtype for types)."""
    if isinstance(attr, IntegerAttr):
        if attr.type == i1:
            return bool(attr.value.data)
        return int(attr.value.data)
    if isinstance(attr, FloatAttr):
        return float(attr.value.data)
    if isinstance(attr, StringAttr):
        return attr.data
    if isinstance(attr, DenseArrayBase):
        vals = list(attr.get_values())
        if attr.elt_type == i1:
            return [bool(v) for v in vals]
        return [v if isinstance(v, float) and not float(v).is_integer() else int(v) for v in vals]
    if isinstance(attr, TypeAttribute):
        return np_dtype(attr)
    raise ValueError(f"unsupported property attribute {attr}")


# ---------------------------------------------------------------------------
# op classes from the table

_RESERVED = set(dir(IRDLOperation)) | {"name", "result", "results"}


def field_name(arg_name: str) -> str:
    """Python field for a schema argument (`self` and reserved names get `_`)."""
    if arg_name == "self" or keyword.iskeyword(arg_name) or arg_name in _RESERVED:
        return arg_name + "_"
    return arg_name


def op_name(schema_name: str) -> str:
    """`aten.mm` for `mm.default`, `aten.add.Tensor` for `add.Tensor`."""
    return "aten." + schema_name.removesuffix(".default")


def class_name(schema_name: str) -> str:
    base, overload = schema_name.split(".")
    words = "".join(w.capitalize() for w in base.strip("_").split("_"))
    suffix = "" if overload == "default" else "_" + overload
    return f"Aten{words}{suffix}Op"


def _assembly_format(schema: Schema) -> str:
    values, types, optional_values, optional_types = [], [], [], []
    for a in schema.operands:
        f = field_name(a.name)
        if a.kind == "tensor":
            values.append(f"${f}")
            types.append(f"type(${f})")
        elif a.kind == "variadic":
            values.append(f"`(` ${f} `)`")
            types.append(f"`(` type(${f}) `)`")
        else:
            optional_values.append(f"(`{a.name}` ${f}^)?")
            optional_types.append(f"(`{a.name}` type(${f})^)?")
    result = "type($results)" if schema.num_results == -1 else "type(results)"
    if schema.num_results == 0:
        result = "`(` `)`"
    head = " `,` ".join(values)
    tail = " `,` ".join(types)
    if optional_values:
        head = " ".join([head, *optional_values]).strip()
        tail = " ".join([tail, *optional_types]).strip()
    if not head:
        return f"attr-dict `:` {result}"
    return f"{head} attr-dict `:` {tail} `->` {result}"


def broadcast_shape(shapes: list[tuple[int, ...]]) -> tuple[int, ...] | None:
    """The broadcast of `shapes` (numpy's and torch's rule); None if they do not broadcast."""
    out: list[int] = []
    for dims in zip(*[(1,) * (max(map(len, shapes)) - len(s)) + tuple(s) for s in shapes]):
        sizes = {d for d in dims if d != 1}
        if len(sizes) > 1:
            return None
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def _verify_elementwise(self) -> None:
    from xdsl.utils.exceptions import VerifyException

    shapes = [tuple(v.type.get_shape()) for v in self.operands]
    want = broadcast_shape(shapes) if shapes else None
    got = tuple(self.results[0].type.get_shape())
    if shapes and want is None:
        raise VerifyException(f"{self.name}: operand shapes {shapes} do not broadcast")
    if want is not None and got != want:
        raise VerifyException(f"{self.name}: result shape {list(got)} should be {list(want)} "
                              f"(the broadcast of its operands {[list(s) for s in shapes]})")


# Every aten op's result types follow from its operands and properties by
# torch's own rules. The dialect cannot import torch: the lowering layer's
# `TorchRules` plugin (`tilefx.lowering.torch_rules`, run on meta tensors)
# holds the check, and the frontends, surfaces and tools install it in the
# process's registry (tilefx/runtime.py). Without it only the elementwise
# broadcast check above runs.
def _verify(self) -> None:
    traits = TRAITS.get(self.schema.name.removesuffix(".default"))
    if traits is not None and traits.same_shape:  # a result of its operands' broadcast shape (op traits)
        _verify_elementwise(self)
    for rule in RUNTIME.result_type_rules:
        rule(self)


def _lazy_assembly_format(fmt: str) -> tuple[Any, Any]:
    """`parse` and `print` of a declarative assembly format, compiled on first
    use: exactly what xdsl generates for `assembly_format = fmt`, but xdsl
    compiles the format when the class is defined, and compiling ~240 of them
    made the first `import` of this dialect cost a good part of a cold model
    compile, which prints and parses no aten op."""
    program = None

    def compiled(cls: type[IRDLOperation]):
        nonlocal program
        if program is None:
            from xdsl.irdl.declarative_assembly_format import FormatProgram

            program = FormatProgram.from_str(fmt, cls.get_irdl_definition())
        return program

    @classmethod
    def parse(cls, parser):
        return compiled(cls).parse(parser, cls)

    def print_(self, printer):
        return compiled(type(self)).print(printer, self)

    return parse, print_


def _make_op(schema: Schema) -> type[IRDLOperation]:
    ns: dict[str, Any] = {"name": op_name(schema.name)}
    n_var = 0
    for a in schema.args:
        f = field_name(a.name)
        if a.kind == "tensor":
            ns[f] = operand_def(TensorType)
        elif a.kind == "optional":
            ns[f] = opt_operand_def(TensorType)
            n_var += 1
        elif a.kind == "variadic":
            ns[f] = var_operand_def(TensorType)
            n_var += 1
        elif a.optional or a.has_default:
            ns[f] = opt_prop_def(Attribute, prop_name=a.name)
        else:
            ns[f] = prop_def(Attribute, prop_name=a.name)
    if schema.num_results == -1:
        ns["results_"] = var_result_def(TensorType)
    elif schema.num_results == 1:
        ns["result"] = result_def(TensorType)
    else:
        for i in range(schema.num_results):
            ns[f"result{i}"] = result_def(TensorType)
    if schema.name not in RANDOM_SCHEMAS and schema.num_results != 0:  # no result: a check, kept
        ns["traits"] = traits_def(Pure())
    options: list[Any] = [ParsePropInAttrDict()]
    if n_var > 1:
        options.append(AttrSizedOperandSegments(as_property=True))
    ns["irdl_options"] = tuple(options)
    ns["parse"], ns["print"] = _lazy_assembly_format(_assembly_format(schema).replace("$results", "$results_"))
    ns["__doc__"] = f"aten::{schema.name}: one node of the traced ATen graph."
    ns["verify_"] = _verify
    cls = irdl_op_definition(type(class_name(schema.name), (IRDLOperation,), ns))
    cls.schema = schema  # type: ignore[attr-defined]
    return cls


class _OpClasses(Mapping):
    """Schema name -> op class, each class defined the first time it is asked
    for. Defining all ~320 (xDSL's `irdl_op_definition` each) was ~45 ms of
    a cold compile, which uses a few dozen; enumerating the mapping (the
    dialect, a pass that lists every op) defines the rest."""

    def __init__(self):
        self._classes: dict[str, type[IRDLOperation]] = {}
        self._lock = threading.Lock()  # one class per op, whichever thread asks first

    def __getitem__(self, name: str) -> type[IRDLOperation]:
        cls = self._classes.get(name)
        if cls is None:
            schema = ATEN_SCHEMAS[name]  # KeyError: no such op
            with self._lock:
                cls = self._classes.get(name)
                if cls is None:
                    cls = self._classes[name] = _make_op(schema)
        return cls

    def __contains__(self, name: object) -> bool:
        return name in ATEN_SCHEMAS

    def __iter__(self):
        return iter(ATEN_SCHEMAS)

    def __len__(self) -> int:
        return len(ATEN_SCHEMAS)


ATEN_OPS: Mapping[str, type[IRDLOperation]] = _OpClasses()


def create_aten_op(
    name: str,
    operands: dict[str, Any],
    props: dict[str, Any],
    result_types: list[Attribute],
    attributes: dict[str, Attribute] | None = None,
) -> IRDLOperation:
    """Build `aten.<name>` from operand values by argument name (a value, None
    or a list) and properties as Python values (None: left out)."""
    schema = ATEN_SCHEMAS[name]
    cls = ATEN_OPS[name]
    ops: list[Any] = []
    for a in schema.operands:
        v = operands.get(a.name)
        if a.kind == "tensor":
            if v is None:
                raise ValueError(f"aten.{name}: missing operand {a.name}")
            ops.append(v)
        elif a.kind == "optional":
            ops.append([] if v is None else [v])
        else:
            ops.append(list(v or []))
    properties = {}
    for a in schema.properties:
        if a.name in props and props[a.name] is not None:
            properties[a.name] = to_attr(a.base, props[a.name])
    n_var = sum(a.kind != "tensor" for a in schema.operands)
    if n_var > 1:
        sizes = [1 if a.kind == "tensor" else len(x) for a, x in zip(schema.operands, ops)]
        properties["operandSegmentSizes"] = DenseArrayBase.from_list(i32, sizes)
    if schema.num_results == -1:
        rtypes: list[Any] = [result_types]
    else:
        rtypes = list(result_types)
    return cls.build(
        operands=ops, properties=properties, result_types=rtypes, attributes=attributes or {}
    )


def op_props(op: IRDLOperation) -> dict[str, Any]:
    """The properties of an aten op as Python values (absent ones left out)."""
    return {
        a.name: from_attr(op.properties[a.name])
        for a in op.schema.properties  # type: ignore[attr-defined]
        if a.name in op.properties
    }


def op_operands(op: IRDLOperation) -> list[Any]:
    """Operands grouped like the schema: value, value-or-None, or list."""
    out = []
    for a in op.schema.operands:  # type: ignore[attr-defined]
        v = getattr(op, field_name(a.name))
        if a.kind == "optional":
            out.append(v)
        elif a.kind == "variadic":
            out.append(list(v))
        else:
            out.append(v)
    return out


_SCHEMA_OF_OP: dict[str, str] = {}  # `aten.add.Tensor` -> `add.Tensor`, filled on first use


def op_class_named(name: str) -> type[IRDLOperation] | None:
    """The class of the op called `name` (`aten.add.Tensor`), defining only
    it; None for a name that is no aten op (dialects/context.py)."""
    if not _SCHEMA_OF_OP:
        _SCHEMA_OF_OP.update((op_name(s), s) for s in ATEN_SCHEMAS)
    schema = _SCHEMA_OF_OP.get(name)
    return None if schema is None else ATEN_OPS[schema]


_DIALECT: list[Dialect] = []


def __getattr__(name: str):
    # `ATen`, the dialect (every op class), made when first imported: a compile
    # parses no aten op and needs none of the classes it does not build
    if name == "ATen":
        if not _DIALECT:
            _DIALECT.append(Dialect("aten", list(ATEN_OPS.values()), []))
        return _DIALECT[0]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["ATen", "ATEN_OPS", "op_class_named", "create_aten_op", "op_props", "op_operands", "to_attr", "from_attr",
           "np_dtype", "element_type", "tensor_type", "Arg", "math"]
