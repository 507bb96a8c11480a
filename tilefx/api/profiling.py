"""`poptorch.profiling`: PopVision System Analyser tracepoints (PVTI channels).

`Channel(name).tracepoint(label)` times a block of host code;
`Channel(name).instrument(obj, "method", ...)` times every call of those
methods. tilefx records the events in memory (`events()`) and, when
`PVTI_OPTIONS='{"enable":"true"}'` is set, writes them at exit as a Chrome
trace (`tilefx.pvti.json`, open it in Perfetto) in PVTI_OPTIONS' "directory"
(default: the working directory). Compilation phases are traced on the
"tilefx" channel.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import threading
import time

from tilefx.errors import Error

_events: list[dict] = []
_lock = threading.Lock()
_T0 = time.perf_counter()


def _options() -> dict:
    raw = os.environ.get("PVTI_OPTIONS")
    if not raw:
        return {}
    try:
        opts = json.loads(raw)
    except json.JSONDecodeError as e:
        raise Error(f"PVTI_OPTIONS is not valid JSON: {e}", type="options") from None
    if not isinstance(opts, dict):
        raise Error("PVTI_OPTIONS must hold a JSON object such as {\"enable\": \"true\"}", type="options")
    return opts


class Channel:
    """A named group of tracepoints (a row in the trace)."""

    def __init__(self, name: str):
        if not isinstance(name, str) or not name:
            raise Error(f"Channel: the name must be a non-empty string, got {name!r}")
        self.name = name

    @contextlib.contextmanager
    def tracepoint(self, name: str):
        """Time the block as one event called `name` on this channel."""
        if not isinstance(name, str):
            raise Error(f"tracepoint: the name must be a string, got {name!r}")
        start = time.perf_counter()
        try:
            yield
        finally:
            record(self.name, name, start, time.perf_counter())

    def instrument(self, obj, *methods: str):
        """Wrap `obj`'s methods so every call is a tracepoint named
        "<class>.<method>"; returns `obj`."""
        for m in methods:
            fn = getattr(obj, m, None)
            if not callable(fn):
                raise Error(f"instrument: {type(obj).__name__} has no method {m!r}")

            def wrapped(*args, __fn=fn, __label=f"{type(obj).__name__}.{m}", **kwargs):
                with self.tracepoint(__label):
                    return __fn(*args, **kwargs)

            functools.update_wrapper(wrapped, fn)
            setattr(obj, m, wrapped)
        return obj


def record(channel: str, name: str, start: float, end: float) -> None:
    """One event (perf_counter times)."""
    with _lock:
        _events.append({"channel": channel, "name": name, "start_us": (start - _T0) * 1e6,
                        "duration_us": (end - start) * 1e6, "thread": threading.get_ident()})


def events() -> list[dict]:
    """The events recorded so far (channel, name, start and duration in µs)."""
    with _lock:
        return list(_events)


def chrome_trace() -> dict:
    return {"traceEvents": [{"name": e["name"], "cat": e["channel"], "ph": "X", "ts": e["start_us"],
                             "dur": e["duration_us"], "pid": os.getpid(), "tid": e["channel"]}
                            for e in events()]}


@atexit.register
def _write_at_exit() -> None:
    try:
        opts = _options()
    except Error:
        return
    if str(opts.get("enable", "")).lower() != "true" or not _events:
        return
    directory = opts.get("directory", ".")
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "tilefx.pvti.json"), "w") as f:
        json.dump(chrome_trace(), f)
