"""Options files and JSON defaults: a lark grammar and an evaluator, never exec.

PopTorch's `Options.loadFromFile` runs each line with Python `exec`; tilefx
parses the same syntax (`option.group.setter(args)` chains with literals,
enum members, torch dtypes and the allowed constructors) and applies it
call by call. `POPTORCH_DEFAULT_OPTIONS` JSON goes through the same name
resolution. Loaded lazily by `options.py`.
"""

from __future__ import annotations

import difflib
import functools
import sys
from typing import Any, Callable

import torch

from tilefx.api import enums
from tilefx.api.option_groups import (
    STRATEGY_FACTORIES,
    ConfigFileError,
    TensorLocationSettings,
    _setter_names,
)
from tilefx import limits
from tilefx.errors import Error


# --------------------------------------------------------------------------
# Name resolution shared by config files and JSON defaults
# --------------------------------------------------------------------------


class _ResolveError(Exception):
    pass


_NOT_FOUND = object()

_TORCH_DTYPES = {
    "float": torch.float32,
    "float32": torch.float32,
    "half": torch.float16,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "double": torch.float64,
    "float64": torch.float64,
    "int": torch.int32,
    "int32": torch.int32,
    "long": torch.int64,
    "int64": torch.int64,
    "bool": torch.bool,
}

_BUILTIN_CONSTRUCTORS: dict[str, Callable[..., Any]] = {
    "TensorLocationSettings": TensorLocationSettings,
}


def _suggest(name: str, candidates) -> str:
    close = difflib.get_close_matches(name, sorted(candidates), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _is_root(cls: type) -> bool:
    """Whether `cls` is the Options class (holding its groups by name), not
    one of the groups."""
    return any("_GROUP_CLASSES" in vars(c) for c in cls.__mro__)


def _resolve_group(cls: type, name: str) -> type:
    groups = cls._GROUP_CLASSES if _is_root(cls) else None
    if groups is not None and name in groups:
        return groups[name]
    if groups is not None:
        raise _ResolveError(
            f"unknown option group {name!r}"
            f"{_suggest(name, groups)}; groups are "
            + ", ".join(sorted(groups)))
    raise _ResolveError(f"{cls.__name__} has no option group {name!r}")


def _resolve_setter(cls: type, name: str) -> None:
    names = _setter_names(cls)
    if name not in names:
        where = "Options" if _is_root(cls) else cls.__name__
        raise _ResolveError(f"{name!r} is not an option setter of {where}"
                            f"{_suggest(name, names)}")


def _strip_module_prefix(parts: list[str]) -> list[str]:
    if parts and parts[0] in ("poptorch", "tilefx"):
        parts = parts[1:]
        if parts[:2] == ["api", "enums"]:
            parts = parts[2:]
        elif parts[:1] == ["enums"]:
            parts = parts[1:]
    elif parts[:1] == ["enums"]:
        parts = parts[1:]
    return parts


def _resolve_ref(parts: list[str]) -> Any:
    """An enum member or torch dtype named by dotted ``parts``."""
    if len(parts) == 2 and parts[0] == "torch":
        return _TORCH_DTYPES.get(parts[1], _NOT_FOUND)
    rest = _strip_module_prefix(parts)
    if len(rest) == 2 and rest[0] in enums.ENUM_TYPES:
        members = enums.ENUM_TYPES[rest[0]].__members__
        if rest[1] in members:
            return members[rest[1]]
    return _NOT_FOUND


def _resolve_constructor(parts: list[str]) -> Callable[..., Any]:
    from tilefx.api.strategies import CONSTRUCTORS  # the guide's, without a prior import

    rest = _strip_module_prefix(parts) if len(parts) > 1 else parts
    name = ".".join(parts)
    if len(rest) == 1:
        if rest[0] in _BUILTIN_CONSTRUCTORS:
            return _BUILTIN_CONSTRUCTORS[rest[0]]
        if rest[0] in STRATEGY_FACTORIES:
            return STRATEGY_FACTORIES[rest[0]]
        if rest[0] in CONSTRUCTORS:
            return CONSTRUCTORS[rest[0]]
    allowed = sorted(set(_BUILTIN_CONSTRUCTORS) | set(STRATEGY_FACTORIES) | set(CONSTRUCTORS))
    raise _ResolveError(f"calling {name!r} is not allowed; allowed "
                        f"constructors: {', '.join(allowed) or '(none)'}")


def _json_value(value: Any) -> Any:
    if isinstance(value, str):
        parts = value.split(".")
        if len(parts) >= 2 and all(p.isidentifier() for p in parts):
            resolved = _resolve_ref(parts)
            if resolved is not _NOT_FOUND:
                return resolved
        return value
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    return value


# --------------------------------------------------------------------------
# Config files: a lark grammar, no exec
# --------------------------------------------------------------------------

_CONFIG_GRAMMAR = r"""
start: chain
chain: step ("." step)*
step: NAME                                  -> attr_step
    | NAME call_args                        -> call_step
call_args: "(" [arglist] ")"
arglist: arg ("," arg)* [","]
?arg: value
    | NAME "=" value                        -> kwarg
?value: SIGNED_INT                          -> int_lit
      | SIGNED_FLOAT                        -> float_lit
      | STRING                              -> str_lit
      | "True"                              -> true
      | "False"                             -> false
      | "None"                              -> none
      | "[" [value ("," value)* [","]] "]"  -> list_lit
      | "(" ")"                             -> empty_tuple
      | "(" value ")"                       -> paren
      | "(" value "," ")"                   -> tuple_lit
      | "(" value ("," value)+ [","] ")"    -> tuple_lit
      | "{" [pair ("," pair)* [","]] "}"    -> dict_lit
      | dotted                              -> ref
      | dotted call_args ("." NAME call_args)*  -> ctor
pair: value ":" value
dotted: NAME ("." NAME)*
STRING: /'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"/
COMMENT: /#[^\n]*/
%import common.CNAME -> NAME
%import common.SIGNED_INT
%import common.SIGNED_FLOAT
%import common.WS_INLINE
%ignore WS_INLINE
%ignore COMMENT
"""


@functools.lru_cache(maxsize=1)
def _config_parser():
    import lark  # only needed for config files

    return lark.Lark(_CONFIG_GRAMMAR, parser="lalr", propagate_positions=True)


_ESCAPES = {
    "\\": "\\", "'": "'", '"': '"', "n": "\n", "t": "\t", "r": "\r",
    "0": "\0", "a": "\a", "b": "\b", "f": "\f", "v": "\v",
}


def _unescape(token: str) -> str:
    body = token[1:-1]
    out = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1]  # the grammar guarantees a character follows
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif nxt in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[nxt]
            digits = body[i + 2:i + 2 + width]
            if len(digits) != width or not all(
                    c in "0123456789abcdefABCDEF" for c in digits):
                raise ValueError(f"invalid \\{nxt} escape")
            if int(digits, 16) > sys.maxunicode:  # as Python's own parser says
                raise ValueError(f"\\{nxt}{digits} is beyond the last code point "
                                 f"(U+{sys.maxunicode:X})")
            out.append(chr(int(digits, 16)))
            i += 2 + width
        else:
            out.append("\\" + nxt)
            i += 2
    return "".join(out)


class _LineError(Exception):
    def __init__(self, column: int, detail: str):
        super().__init__(detail)
        self.column = column
        self.detail = detail


def _column(node: Any) -> int:
    column = getattr(node, "column", None)
    if column is None:
        meta = getattr(node, "meta", None)
        column = getattr(meta, "column", None) if meta is not None else None
    return column or 1


class _Call:
    """One setter call of a config line: where it is and what it passes."""

    def __init__(self, name: str, column: int, args: list, kwargs: dict):
        self.name = name
        self.column = column
        self.args = args
        self.kwargs = kwargs


class _Command:
    def __init__(self, filename: str, lineno: int, text: str, steps: list):
        self.filename = filename
        self.lineno = lineno
        self.text = text
        self.steps = steps  # ("group", name, column) or ("call", _Call)


def _eval_call_args(node: Any) -> tuple[list, dict]:
    args: list = []
    kwargs: dict = {}
    if node is None:
        return args, kwargs
    arglist = [c for c in node.children if c is not None]
    if not arglist:
        return args, kwargs
    for arg in arglist[0].children:
        if arg is None:
            continue
        if getattr(arg, "data", None) == "kwarg":
            name_tok, value_node = arg.children
            name = str(name_tok)
            if name in kwargs:
                raise _LineError(_column(name_tok),
                                 f"keyword argument {name!r} repeated")
            kwargs[name] = _eval_value(value_node)
        else:
            if kwargs:
                raise _LineError(_column(arg), "positional argument follows "
                                 "keyword argument")
            args.append(_eval_value(arg))
    return args, kwargs


def _dotted_parts(node: Any) -> list[str]:
    return [str(t) for t in node.children]


def _eval_value(node: Any) -> Any:
    kind = node.data
    children = [c for c in node.children if c is not None]
    if kind == "int_lit":
        text = str(children[0])
        if len(text.lstrip("+-")) > limits.INTEGER_DIGITS.value():
            raise _LineError(_column(children[0]), f"an integer of {len(text.lstrip('+-'))} digits, more than "
                             f"the limit {limits.INTEGER_DIGITS.value()} (environment variable "
                             f"{limits.INTEGER_DIGITS.env})")
        return int(text)
    if kind == "float_lit":
        return float(str(children[0]))
    if kind == "str_lit":
        try:
            return _unescape(str(children[0]))
        except ValueError as e:
            raise _LineError(_column(children[0]), str(e)) from None
    if kind == "true":
        return True
    if kind == "false":
        return False
    if kind == "none":
        return None
    if kind == "list_lit":
        return [_eval_value(c) for c in children]
    if kind == "empty_tuple":
        return ()
    if kind == "paren":
        return _eval_value(children[0])
    if kind == "tuple_lit":
        return tuple(_eval_value(c) for c in children)
    if kind == "dict_lit":
        out = {}
        for pair in children:
            key_node, value_node = pair.children
            key = _eval_value(key_node)
            try:
                hash(key)
            except TypeError:
                raise _LineError(_column(key_node),
                                 "dictionary keys must be hashable") from None
            out[key] = _eval_value(value_node)
        return out
    if kind == "ref":
        parts = _dotted_parts(children[0])
        value = _resolve_ref(parts)
        if value is _NOT_FOUND:
            raise _LineError(
                _column(children[0]),
                f"{'.'.join(parts)!r} is not an allowed name: arguments may "
                "only be literals, enum members (poptorch.OutputMode.All) and "
                "torch dtypes (torch.float16)")
        return value
    if kind == "ctor":
        return _eval_ctor(children)
    raise _LineError(_column(node), f"unsupported construct {kind!r}")


def _eval_ctor(children: list) -> Any:
    dotted, call_args, *methods = children
    parts = _dotted_parts(dotted)
    try:
        factory = _resolve_constructor(parts)
    except _ResolveError as e:
        raise _LineError(_column(dotted), str(e)) from None
    args, kwargs = _eval_call_args(call_args)
    try:
        obj = factory(*args, **kwargs)
    except (ValueError, TypeError, AssertionError, Error) as e:
        raise _LineError(_column(dotted),
                         f"{'.'.join(parts)}(...) failed: {e}") from e
    # Chained method calls: NAME call_args pairs.
    for i in range(0, len(methods), 2):
        name_tok, method_args = methods[i], methods[i + 1]
        name = str(name_tok)
        if isinstance(obj, TensorLocationSettings):
            allowed = _setter_names(TensorLocationSettings)
        else:
            allowed = frozenset(getattr(type(obj), "_CONFIG_METHODS", ()))
        if name not in allowed:
            raise _LineError(
                _column(name_tok),
                f"method {name!r} of {type(obj).__name__} may not be called "
                f"from a config file{_suggest(name, allowed)}")
        margs, mkwargs = _eval_call_args(method_args)
        try:
            result = getattr(obj, name)(*margs, **mkwargs)
        except (ValueError, TypeError, AssertionError, Error) as e:
            raise _LineError(_column(name_tok),
                             f"{name}(...) failed: {e}") from e
        obj = obj if result is None else result
    return obj


def _check_nesting(text: str) -> None:
    """Brackets nested at most limits.NESTING_DEPTH deep (outside strings),
    checked before the parser and the recursive evaluator see the line."""
    cap = limits.NESTING_DEPTH.value()
    depth, quote, escaped = 0, None, False
    for column, ch in enumerate(text, start=1):
        if quote is not None:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
            if depth > cap:
                raise _LineError(column, f"nested deeper than {cap} levels (environment variable "
                                 f"{limits.NESTING_DEPTH.env})")
        elif ch in ")]}":
            depth -= 1


def _parse_line(text: str, root: type) -> list:
    import lark

    _check_nesting(text)

    try:
        tree = _config_parser().parse(text)
    except lark.exceptions.UnexpectedCharacters as e:
        raise _LineError(e.column, f"unexpected character "
                         f"{text[e.pos_in_stream]!r}") from None
    except lark.exceptions.UnexpectedEOF:
        raise _LineError(len(text.rstrip()) + 1,
                         "unexpected end of line") from None
    except lark.exceptions.UnexpectedToken as e:
        if e.token.type == "$END":
            raise _LineError(len(text.rstrip()) + 1,
                             "unexpected end of line") from None
        raise _LineError(e.column, f"unexpected {str(e.token)!r}") from None
    except lark.exceptions.UnexpectedInput as e:  # pragma: no cover
        raise _LineError(getattr(e, "column", 1) or 1, "syntax error") from None

    chain = tree.children[0]
    steps = []
    cls: type = root
    for step in chain.children:
        name_tok = step.children[0]
        name = str(name_tok)
        column = _column(name_tok)
        if step.data == "attr_step":
            if name in _setter_names(cls):
                raise _LineError(column, f"{name!r} must be called: a line "
                                 "must call an option setter, for example "
                                 "deviceIterations(4)")
            try:
                cls = _resolve_group(cls, name)
            except _ResolveError as e:
                raise _LineError(column, str(e)) from None
            steps.append(("group", name, column))
        else:
            try:
                _resolve_setter(cls, name)
            except _ResolveError as e:
                raise _LineError(column, str(e)) from None
            args, kwargs = _eval_call_args(step.children[1])
            steps.append(("call", _Call(name, column, args, kwargs)))
    if not steps or steps[-1][0] != "call":
        last_column = steps[-1][2] if steps else 1
        raise _LineError(last_column, "a line must call an option setter, "
                         "for example deviceIterations(4)")
    return steps


def check_text_size(size: int, filename: str) -> None:
    """An options text over limits.OPTIONS_TEXT_BYTES: a ConfigFileError at
    its start, before it is read."""
    cap = limits.OPTIONS_TEXT_BYTES.value()
    if size > cap:
        raise ConfigFileError(f"{size:,} bytes, more than the limit {cap:,} (environment variable "
                              f"{limits.OPTIONS_TEXT_BYTES.env})", filename, 1, 1, "", kind="SizeError")


def _parse_config(text: str, filename: str, root: type) -> list[_Command]:
    """The commands of an options text for `root` (the Options class)."""
    check_text_size(len(text.encode()), filename)
    commands = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            steps = _parse_line(raw, root)
        except _LineError as e:
            raise ConfigFileError(e.detail, filename, lineno, e.column,
                                  stripped, kind="SyntaxError") from None
        commands.append(_Command(filename, lineno, raw, steps))
    return commands


def _apply_commands(options: Any, commands: list[_Command]) -> None:
    for command in commands:
        target: Any = options
        for step in command.steps:
            if step[0] == "group":
                target = getattr(target, step[1])
                continue
            call: _Call = step[1]
            try:
                result = getattr(target, call.name)(*call.args, **call.kwargs)
            except (ValueError, TypeError, AssertionError, Error) as e:
                raise ConfigFileError(
                    f"{call.name}(...) failed: {e}",
                    command.filename,
                    command.lineno, call.column, command.text.strip(),
                    kind=type(e).__name__) from e
            if result is not None:
                target = result
