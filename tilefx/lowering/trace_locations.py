"""Where a traced op or a tracing failure comes from in the user's code, and
the `tilefx.Error` a tracing failure becomes (PopTorch user guide, "Error
handling", 4.3: the exception's location is where it was raised).

The trace (`from_torch.py`) names each unsupported op by its module path and
the user's line that made it; a failure inside torch's tracing machinery is
reported at the model's own line, not torch's, and a data-dependent question
(`.item()`, a shape from values) names the ATen op that asked it.
"""

from __future__ import annotations

import contextlib
import logging

from tilefx.dialects.names import LOC_META_KEY, MODULE_META_KEY
from tilefx.errors import Error, set_text


def module_of(node) -> str:
    stack = node.meta.get("nn_module_stack") or node.meta.get("fwd_nn_module_stack") or {}
    if not stack:
        where = (node.meta.get("custom") or {}).get(MODULE_META_KEY) or "<top level>"
    else:
        path, cls = list(stack.values())[-1]
        cls_name = cls if isinstance(cls, str) else getattr(cls, "__name__", str(cls))
        where = f"{_clean_path(path) or '<root>'} ({cls_name.rsplit('.', 1)[-1]})"
    line = user_line(node.meta.get("stack_trace") or "")
    return f"{where}{', at ' + line if line else ''}"


def _clean_path(path: str) -> str:
    """`L['self'].encoder.layer[3]` or `encoder.layer.3` -> `encoder.layer.3`."""
    import re

    path = re.sub(r"^L\['self'\]\.?", "", path or "")
    path = re.sub(r"\._modules\['([^']+)'\]", r".\1", path)
    return re.sub(r"\[(\d+)\]", r".\1", path).strip(".")


_LIBRARY_DIRS = ("/torch/", "/tilefx/", "/site-packages/", "/dist-packages/", "<frozen")
_TOOL_DIRS = ("/torch/", "/tilefx/", "<frozen", "/contextlib.py", "/functools.py")  # never the model's line


def _user_frame(stack_trace: str) -> tuple[str, str]:
    """The last `File "...", line N` of a traceback that is the user's code (not
    torch, tilefx or an installed library) as ("path:N", its source line).
    Without one (a model from a library, e.g. transformers), the library's last
    line; ("", "") when there is none."""
    import re

    best = library = ("", "")
    lines = stack_trace.splitlines()
    for i, text in enumerate(lines):
        m = re.match(r'\s*File "([^"]+)", line (\d+)', text)
        if not m or m[1].startswith("<") or any(d in m[1] for d in _TOOL_DIRS):
            continue  # generated code (`<string>`, `<eval_with_key>`) is nobody's line
        src = lines[i + 1].strip() if i + 1 < len(lines) else ""
        where = (f"{m[1]}:{m[2]}", src)
        if any(d in m[1] for d in _LIBRARY_DIRS):
            library = where
        else:
            best = where
    return best if best[0] else library


def user_line(stack_trace: str) -> str:
    """`path:N: source` of `_user_frame` ("" when there is none)."""
    where, src = _user_frame(stack_trace)
    return where + (f": {src}" if src and where else "")


def located(err: Error, location: str) -> Error:
    """`err` with `location` (PopTorch user guide, 4.3.3 "Application and other errors": where the exception
    was raised)
    unless it has one; named in its text too when the message does not say it."""
    if location and not getattr(err, "location", ""):
        err.location = location
        if location not in str(err):
            set_text(err, f"{err} (at {location})")
    return err


def location_of(node) -> str:
    """The user's "file:line" that made `node` (empty when unknown)."""
    return (node.meta.get("custom") or {}).get(LOC_META_KEY, "")


class _DropMetaFailureLog(logging.Filter):
    """Drops the record torch's fake tensors log (with the whole stack) when an op's shape
    function rejects its operands: the same exception reaches `trace`, which reports it
    as a `tilefx.Error` naming the module and line, so the user saw the error twice, the
    first time as a page of torch internals on stderr."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("failed while attempting to run meta")


@contextlib.contextmanager
def quiet_meta_failures():
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    flt = _DropMetaFailureLog()
    logger.addFilter(flt)
    try:
        yield
    finally:
        logger.removeFilter(flt)


def traceback_line(e: BaseException) -> str:
    import traceback

    line = user_line("".join(traceback.format_tb(e.__traceback__)))
    return f", at {line}" if line else ""


def traceback_location(e: BaseException) -> str:
    """The user's "file:line" in `e`'s traceback (the one `traceback_line` names)."""
    import traceback

    return _user_frame("".join(traceback.format_tb(e.__traceback__)))[0]


def data_dependent(e: BaseException, module: str) -> Error | None:
    """A tracing failure on a value- or shape-from-data question, as an Error
    naming the ATen op, the module and the user's line; None for other failures."""
    from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    inner: BaseException | None = e
    while inner is not None:
        if isinstance(inner, DynamicOutputShapeException):
            what = "its output shape depends on the values of its input"
            break
        if isinstance(inner, (DataDependentOutputException, GuardOnDataDependentSymNode)):
            what = ("it reads a tensor's value on the host (.item(), bool(), int() or Python "
                    "control flow on a tensor)")
            break
        inner = inner.__cause__ or inner.__context__
    else:
        return None
    func = getattr(inner, "func", None)
    op = f"aten::{str(func).removeprefix('aten.')}" if func is not None else "aten::_local_scalar_dense"
    return Error(f"unsupported data-dependent operation {op} in module {module}"
                 f"{traceback_line(e)}: {what}; the IPU needs static shapes and a graph "
                 "that does not depend on tensor values", type="frontend")
