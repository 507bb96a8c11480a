"""A lifted constant's value in the IR: numpy <-> the builtin `dense` attribute.

A `tilefx.const` argument of @main is bound by name to a tensor the frontend
lifted from the model (a torch tensor attribute, a folded ONNX Constant node).
Its value rides along on the argument as `tilefx.value = dense<...>`, so the
printed IR runs on its own (`tilefx-run` needs no array for it) and survives
print -> parse -> print, also through stock `xdsl-opt`. docs/ir.md says why
an argument attribute and not a constant op.

The attribute holds the bytes of the value in the argument's element type
(xDSL prints up to 100 elements as a list, a splat as one number, more as
MLIR's hex form `dense<"0x...">`). Two notes:

- bf16 values (held as float32 rounded to bf16) are stored as bf16 bytes;
- a float constant holding inf or NaN is stored as its bit pattern in the
  signless integer type of the same width (`tensor<4xi32>` for a
  `tensor<4xf32>` argument): xDSL prints a non-finite float as a hex integer
  literal (`0x7F800000`) but parses that literal back as the integer
  2139095040.0, so the float form would not survive a round trip.
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import (AnyFloat, ArrayAttr, BytesAttr, DenseIntOrFPElementsAttr, DictionaryAttr,
                                   IntegerType, ModuleOp, StringAttr, TensorType)
from xdsl.ir import Attribute

from tilefx.dialects.aten import np_dtype, type_key
from tilefx.dialects.names import CONST_KEY, CONST_VALUE_KEY
from tilefx.errors import Error


def dense_of(value: np.ndarray, type: TensorType) -> DenseIntOrFPElementsAttr | None:
    """The `dense` attribute carrying `value` for an argument of `type`; None for
    element types the IR does not store values of (complex)."""
    key = type_key(type.element_type)
    if key.startswith("c"):
        return None
    shape = tuple(type.get_shape())
    arr = np.asarray(value)
    if arr.shape != shape:
        raise Error(f"a constant of shape {arr.shape} cannot be the value of a {type}")
    if key == "bf16":  # float32 rounded to nearest even, kept as its upper 16 bits
        bits = np.ascontiguousarray(arr, np.float32).view(np.uint32).astype(np.uint64)
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        raw = np.where(np.isnan(arr), 0x7FC0, rounded).astype("<u2").tobytes()  # NaN stays NaN
        finite = bool(np.isfinite(arr).all())
    elif key == "i1":
        raw = np.ascontiguousarray(arr, np.bool_).view(np.uint8).tobytes()
        finite = True
    else:
        held = np.ascontiguousarray(arr, np_dtype(type.element_type).newbyteorder("<"))
        raw = held.tobytes()
        finite = held.dtype.kind != "f" or bool(np.isfinite(held).all())
    stored = type
    if not finite:  # see the module docstring: the bits, as integers of the same width
        stored = TensorType(IntegerType(type.element_type.bitwidth), list(shape))
    return DenseIntOrFPElementsAttr(stored, BytesAttr(raw))


def const_attrs(name: str, value: np.ndarray | None, type: TensorType) -> dict[str, Attribute]:
    """The attributes of a lifted constant's argument: its name and, when the
    frontend has its value (not a tensor on the meta device, of a model built for
    sizing), the value."""
    attrs: dict[str, Attribute] = {CONST_KEY: StringAttr(name)}
    if value is not None and np.shape(value) == tuple(type.get_shape()):
        dense = dense_of(value, type)
        if dense is not None:
            attrs[CONST_VALUE_KEY] = dense
    return attrs


def check_value(attr: Attribute, type: Attribute, where: str) -> None:
    """A clear Error, naming `where`, when `attr` cannot be the value of an
    argument of `type` (the verifier runs it on every `tilefx.value`)."""
    if not isinstance(attr, DenseIntOrFPElementsAttr):
        raise Error(f"{where}: tilefx.value must be a dense elements attribute, got {attr}")
    if not isinstance(type, TensorType):
        raise Error(f"{where}: tilefx.value on an argument of type {type}, which is not a tensor")
    have, shape = attr.get_type(), tuple(type.get_shape())
    et, stored = type.element_type, attr.get_element_type()
    bits_of_float = (isinstance(et, AnyFloat) and isinstance(stored, IntegerType)
                     and stored.width.data == et.bitwidth)
    if tuple(have.get_shape()) != shape or not (stored == et or bits_of_float):
        raise Error(f"{where}: tilefx.value has type {have}, the argument is {type} (the value "
                    "is of the argument's type, or of the same-width integer type for its bits)")


def array_of(attr: Attribute, type: TensorType, where: str) -> np.ndarray:
    """The numpy value (in the executor's dtype for `type`) of the `dense`
    attribute `attr` carried by an argument of `type`; a clear Error, naming
    `where`, when the attribute cannot be that argument's value."""
    check_value(attr, type, where)
    raw, n, shape, et = attr.data.data, math.prod(type.get_shape()), tuple(type.get_shape()), type.element_type
    key = type_key(et)
    if key == "bf16":
        out = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
    elif key == "i1":
        out = np.frombuffer(raw, np.uint8) != 0
    elif key.startswith("c"):
        raise Error(f"{where}: a complex constant's tilefx.value is not read (the frontends reject "
                    "complex numbers): give its array in the .npz")
    else:
        out = np.frombuffer(raw, np_dtype(et).newbyteorder("<")).astype(np_dtype(et))
    if out.size != n:
        raise Error(f"{where}: tilefx.value holds {out.size} elements, the argument {n}")
    return out.reshape(shape)


def attach_values(module: ModuleOp, consts: dict[str, np.ndarray]) -> None:
    """Give every `tilefx.const` argument of `module` named in `consts` its
    value (an executable file keeps constants once, in its tensors, and its IR
    texts without them: see `text_without_values`)."""
    for fn in module.walk():
        if not isinstance(fn, func.FuncOp) or fn.arg_attrs is None:
            continue
        attrs = [dict(a.data) for a in fn.arg_attrs.data]
        changed = False
        for arg, a in zip(fn.body.block.args, attrs):
            name = a.get(CONST_KEY)
            if isinstance(name, StringAttr) and name.data in consts and CONST_VALUE_KEY not in a \
                    and isinstance(arg.type, TensorType):
                value = np.asarray(consts[name.data])
                dense = dense_of(value, arg.type) if value.shape == tuple(arg.type.get_shape()) else None
                if dense is not None:
                    a[CONST_VALUE_KEY] = dense
                    changed = True
        if changed:
            fn.arg_attrs = ArrayAttr([DictionaryAttr(a) for a in attrs])


def text_without_values(module: ModuleOp | str) -> str:
    """`module`'s text with no `tilefx.value`: what an executable file stores
    next to the constants' tensors, so a large constant is written once, not
    three times (the values are put back when the file is loaded). A text
    (the traced IR of a loaded executable) is already without them."""
    if isinstance(module, str):
        return module[:]  # the plain text, whatever str() of the subclass shows
    saved = []
    for fn in module.walk():
        if isinstance(fn, func.FuncOp) and fn.arg_attrs is not None and \
                any(CONST_VALUE_KEY in a.data for a in fn.arg_attrs.data):
            saved.append((fn, fn.arg_attrs))
            fn.arg_attrs = ArrayAttr([DictionaryAttr({k: v for k, v in a.data.items() if k != CONST_VALUE_KEY})
                                      for a in fn.arg_attrs.data])
    try:
        return str(module)
    finally:
        for fn, attrs in saved:
            fn.arg_attrs = attrs
