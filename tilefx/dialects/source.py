"""IR text to a verified module, with every diagnostic at file:line:column.

xDSL parses forward references without checking dominance, keeps no source
position on parsed ops and verifies without one, reports undecodable bytes by
offset, and its string-literal regex backtracks exponentially on an
unterminated string. `parse_ir` closes those gaps for the tools (and anyone
reading IR text): it decodes strictly with a line:column for bad bytes, lexes
strings in linear time, records where each op starts, checks that every use
is dominated by its definition, and verifies each op with its position.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from xdsl.context import Context
from xdsl.dialects.builtin import DictionaryAttr, FloatAttr, ModuleOp, StringAttr
from xdsl.ir import Block, BlockArgument, Operation, OpResult
from xdsl.parser import Parser
from xdsl.utils.exceptions import DiagnosticException, ParseError, VerifyException
from xdsl.utils.lexer import Input, Span
from xdsl.utils.mlir_lexer import MLIRLexer

from tilefx.dialects.names import (AUTO_STAGE_KEY, AVAILABLE_MEMORY_KEY, CONST_VALUE_KEY,
                                   PARTIALS_TYPE_KEY,
                                   OPTIMIZER_KEY, PLACE_KEY, STAGES_KEY, STRATEGY_KEY, TILE_COST_KEY,
                                   TILE_MAPPING_KEY)
from tilefx import limits
from tilefx.errors import Error

# The same language as xDSL's `"(?:[^"\\\n\v\f]+|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"`,
# with possessive quantifiers: the alternatives start with different characters,
# so never backtracking changes no match and keeps lexing linear.
MLIRLexer._unescaped_characters_regex = re.compile(
    r'"(?:[^"\\\n\v\f]++|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*+"')


# MLIR's limit on integer widths; xDSL has none and computes 2**width bounds
# (an `i9223372036854775807` would take all memory)
MAX_INT_WIDTH = 16777215
_INT_TYPE = re.compile(r"(?:(?<=[\d?]x)|(?<![\w%@^#.$-]))[su]?i(\d+)\b")
# a dense attribute and its declared type: `dense<...> : tensor<4x8xf32>`
_DENSE = re.compile(r"\bdense<(?:[^<>]|<[^<>]*>)*>\s*:\s*(?:tensor|vector)<([^<>]*)>")
_ELEMENT_BITS = re.compile(r"^(?:[su]?i|f|bf)(\d+)$")


def _declared_bytes(shape_and_type: str) -> int:
    """The bytes a dense attribute of this type holds (`4x8xf32`: 128), from
    its declared shape alone; 0 for a shape not written out."""
    *dims, element = shape_and_type.replace(" ", "").split("x")
    if not all(d.isdigit() and len(d) < 20 for d in dims):
        return 0
    m = _ELEMENT_BITS.match(element)
    bits = int(m.group(1)) if m and len(m.group(1)) < 9 else 8
    count = 1
    for d in dims:
        count *= int(d)
    return count * max(bits // 8, 1)


def check_constant_bytes(text: str, filename: str, line_offset: int = 0) -> None:
    """The dense constants a text declares, together within
    limits.IR_CONSTANT_BYTES, checked from their declared types before the
    parser builds any of them (xDSL expands a splat into one Python number
    per element): a diagnostic at the constant that goes over."""
    cap = limits.IR_CONSTANT_BYTES.value()
    total = 0
    for m in _DENSE.finditer(text):
        total += _declared_bytes(m.group(1))
        if total > cap:
            span = Span(m.start(), m.end(), Input(text, filename), line_offset)
            raise diagnostic_at(span, f"the dense constants declare {total:,} bytes up to here, more than "
                                f"the limit {cap:,}; if the input is trusted, raise it with the environment "
                                f"variable {limits.IR_CONSTANT_BYTES.env}")


class IRDiagnostic(Error):
    """An error in IR text: `location` is file:line:column, `context` the
    source line with a caret under the offending place."""

    def __init__(self, message: str, location: str, context: str = ""):
        super().__init__(message, type="ir", location=location)
        self.context = context

    def __str__(self) -> str:
        head = f"{self.location}: error: {self.message}"
        return f"{head}\n{self.context}" if self.context else head


def _one_line(text: str) -> str:
    return " ".join(str(text).split()) or "error"


def diagnostic_at(span: Span, message: str) -> IRDiagnostic:
    """The diagnostic for `message` at `span` (location plus a caret line)."""
    context = span.print_with_context().split("\n", 1)[1].rstrip("\n")
    return IRDiagnostic(_one_line(message), str(span.get_location()), context)


def from_parse_error(e: ParseError, line_offset: int = 0) -> IRDiagnostic:
    span = dataclasses.replace(e.span, line_offset=line_offset) if line_offset else e.span
    return diagnostic_at(span, e.msg)


def decode(data: bytes, filename: str) -> str:
    """UTF-8 text, or an IRDiagnostic at the line and column of the first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise IRDiagnostic(f"invalid UTF-8 byte 0x{data[e.start]:02x}", f"{filename}:{line}:{col}") from None


class _LocatingParser(Parser):
    """Records the span where each op starts (results included)."""

    def __init__(self, *args: Any, **kw: Any):
        super().__init__(*args, **kw)
        self.op_spans: dict[int, tuple[Operation, Span]] = {}

    def parse_operation(self) -> Operation:
        start = self._current_token.span
        op = super().parse_operation()
        self.op_spans[id(op)] = (op, start)
        return op


class LocatedModule:
    """A parsed module and where its ops came from (for later diagnostics)."""

    def __init__(self, module: ModuleOp, spans: dict[int, tuple[Operation, Span]], input: Input,
                 line_offset: int = 0):
        self.module, self._spans, self._input = module, spans, input
        self._line_offset = line_offset

    def span_of(self, op: Operation | None) -> Span:
        """Where `op` (or, for ops a pass made, its nearest parsed ancestor) starts."""
        while op is not None:
            found = self._spans.get(id(op))
            if found is not None and found[0] is op:
                return dataclasses.replace(found[1], line_offset=self._line_offset)
            op = op.parent_op()
        return Span(0, 0, self._input, self._line_offset)

    def error(self, op: Operation | None, message: str) -> IRDiagnostic:
        return diagnostic_at(self.span_of(op), message)

    def verify(self) -> None:
        """Check dominance, then verify; the first failure at its op's position."""
        check_dominance(self.module, self.error)
        check_attribute_names(self.module, self.error)
        check_known_attributes(self.module, self.error)
        check_const_values(self.module, self.error)
        try:
            self.module.verify()
        except (VerifyException, DiagnosticException, ValueError) as e:
            raise self.error(_failing_op(self.module), str(e).split("\n\n")[0]) from None


def _failing_op(module: ModuleOp) -> Operation | None:
    """The innermost op whose own verifier fails (xDSL does not say which)."""
    failing = None
    for op in module.walk():
        try:
            op.verify(verify_nested_ops=False)
        except Exception:  # noqa: BLE001 - any failure marks the op
            failing = op
            break
    return failing


def check_attribute_names(module: ModuleOp, error) -> None:
    """Attribute names are ASCII, as MLIR's bare identifiers: xDSL's lexer also
    takes other letters, but prints such a name as an escaped string that its
    own parser then refuses (found by `make fuzz`), so the program would not
    read back."""
    for op in module.walk():
        for name in (*op.attributes, *op.properties):
            if not name.isascii():
                raise error(op, f"attribute name {name!r} is not ASCII (MLIR identifiers are ASCII; "
                                "use a quoted ASCII name)")


def _placement(v) -> str | None:
    from tilefx.dialects.ipu import PlacementAttr

    return None if isinstance(v, PlacementAttr) else "an #ipu.place<...> placement"


def _proportion(v) -> str | None:
    from tilefx.dialects.ipu import is_proportion

    ok = isinstance(v, FloatAttr) and is_proportion(v.value.data)
    return None if ok else "a float proportion in (0, 1]"


def _mapping(v) -> str | None:
    from tilefx.dialects.tile import GridMappingAttr, LinearMappingAttr

    return None if isinstance(v, (LinearMappingAttr, GridMappingAttr)) else "a #tile.linear or #tile.grid mapping"


def _cost(v) -> str | None:
    from tilefx.dialects.tile import CostAttr

    return None if isinstance(v, CostAttr) else "a #tile.cost"


# The discardable attributes the passes, the cost model and the executor read
# on every op, with what each must be (MLIR has a dialect hook for these;
# xDSL has none, so the tools check them here).
def _partials(v) -> str | None:
    return None if isinstance(v, StringAttr) and v.data in ("half", "float") else '"half" or "float"'


OP_ATTRIBUTES = {PLACE_KEY: _placement, AVAILABLE_MEMORY_KEY: _proportion,
                 TILE_MAPPING_KEY: _mapping, TILE_COST_KEY: _cost, PARTIALS_TYPE_KEY: _partials}
# module attributes the passes read as dictionaries
MODULE_DICTIONARIES = (STRATEGY_KEY, OPTIMIZER_KEY, STAGES_KEY, AUTO_STAGE_KEY)


def check_known_attributes(module: ModuleOp, error) -> None:
    """Each op attribute of OP_ATTRIBUTES has its kind (a hand-edited
    `ipu.place = 3` reached the passes, which failed inside); the module's
    configuration attributes are dictionaries."""
    for key in MODULE_DICTIONARIES:
        v = module.attributes.get(key)
        if v is not None and not isinstance(v, DictionaryAttr):
            raise error(module, f"module attribute {key} must be a dictionary, got {v}")
    for op in module.walk():
        for key, check in OP_ATTRIBUTES.items():
            v = op.attributes.get(key)
            want = None if v is None else check(v)
            if want is not None:
                raise error(op, f"{op.name}: attribute {key} must be {want}, got {v}")


def check_const_values(module: ModuleOp, error) -> None:
    """Each argument's `tilefx.value` fits its argument (type and shape), so a
    hand-edited value fails here, at its function, not when tilefx-run runs it."""
    from xdsl.dialects import func

    for fn in module.walk():
        if isinstance(fn, func.FuncOp) and fn.arg_attrs is not None and fn.body.blocks:
            for i, (arg, attrs) in enumerate(zip(fn.body.block.args, fn.arg_attrs.data)):
                value = attrs.data.get(CONST_VALUE_KEY) if isinstance(attrs, DictionaryAttr) else None
                if value is not None:
                    # numpy (~0.2 s to import) only for IR that holds a value
                    from tilefx.dialects.const_value import check_value

                    try:
                        check_value(value, arg.type, f"argument {i} of @{fn.sym_name.data}")
                    except Error as e:
                        raise error(fn, e.message) from None


def check_dominance(module: ModuleOp, error) -> None:
    """Every operand is a block argument of an enclosing block or the result of
    an earlier op in an enclosing block (values of other blocks of the same
    multi-block region are left to the CFG and accepted)."""
    index: dict[int, int] = {}
    for op in module.walk():
        for i, o in enumerate(op.regions):
            for b in o.blocks:
                for j, inner in enumerate(b.ops):
                    index[id(inner)] = j
    for op in module.walk():
        for n, v in enumerate(op.operands):
            if isinstance(v, BlockArgument):
                def_block, def_pos = v.block, -1
            elif isinstance(v, OpResult):
                def_block, def_pos = v.op.parent, index.get(id(v.op))
            else:
                raise error(op, f"operand {n} of {op.name} is not a value")
            user: Operation | None = op
            ok = False
            while user is not None and user.parent is not None:
                blk: Block = user.parent
                if blk is def_block:
                    ok = def_pos is not None and def_pos < index.get(id(user), -1)
                    if not ok:
                        raise error(op, f"operand {n} of {op.name} is used before its definition")
                    break
                if def_block is not None and blk.parent is not None and def_block.parent is blk.parent:
                    ok = True  # another block of the same region: a CFG question
                    break
                user = blk.parent_op()
            if not ok:
                raise error(op, f"operand {n} of {op.name} is not defined in an enclosing scope")


def parse_ir(ctx: Context, text: str, filename: str = "<stdin>", line_offset: int = 0,
             verify: bool = True) -> LocatedModule:
    """Parse and (unless told not to) verify; every failure an IRDiagnostic
    with file:line:column."""
    for m in _INT_TYPE.finditer(text):
        if int(m.group(1)) > MAX_INT_WIDTH:
            span = Span(m.start(), m.end(), Input(text, filename), line_offset)
            raise diagnostic_at(span, f"integer width {m.group(1)} exceeds {MAX_INT_WIDTH}")
    check_constant_bytes(text, filename, line_offset)
    parser = None
    try:
        parser = _LocatingParser(ctx, text, filename)
        module = parser.parse_module()
    except ParseError as e:
        raise from_parse_error(e, line_offset) from None
    except RecursionError:
        raise IRDiagnostic("input nested too deeply", f"{filename}:{line_offset + 1}:1") from None
    except Exception as e:  # noqa: BLE001 - xDSL building an attribute or op from bad text
        if not isinstance(e, (VerifyException, DiagnosticException)):
            e = f"{type(e).__name__}: {e}"
        if parser is None:
            raise IRDiagnostic(_one_line(str(e)), f"{filename}:{line_offset + 1}:1") from None
        span = dataclasses.replace(parser._current_token.span, line_offset=line_offset)
        raise diagnostic_at(span, str(e).split("\n\n")[0]) from None
    located = LocatedModule(module, parser.op_spans, parser.lexer.input, line_offset)
    if verify:
        located.verify()
    else:
        check_dominance(module, located.error)
    return located
