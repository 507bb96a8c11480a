"""PopTorch's logging (seeds/000 4.11.1) on Python's `logging`.

Every tilefx logger sits under "tilefx" ("tilefx.compile", "tilefx.passes",
"tilefx.export", ...). `setLogLevel` and `POPTORCH_LOG_LEVEL` (or
`TILEFX_LOG_LEVEL`) take PopTorch's levels: TRACE (and TRACE_ALL), DEBUG,
INFO (the default), WARN, ERR, OFF. INFO gives the compilation phases with
their timings, DEBUG every graph pass with the op counts before and after,
TRACE the IR after each pass. Messages go to stderr as `[tilefx] [level] ...`.

`compile_progress` is the compilation progress bar (tqdm, as PopTorch's
"Graph compilation: 100%|...|"), shown when `Options.showCompilationProgressBar`
is on (the default) and INFO messages are enabled.
"""

from __future__ import annotations

import logging
import os
import sys
import time

from tilefx.errors import Error

TRACE = 5
logging.addLevelName(TRACE, "TRACE")
LEVELS = {"TRACE_ALL": TRACE, "TRACE": TRACE, "DEBUG": logging.DEBUG, "INFO": logging.INFO,
          "WARN": logging.WARNING, "ERR": logging.ERROR, "OFF": logging.CRITICAL + 10}
_INT_LEVELS = ["TRACE", "DEBUG", "INFO", "WARN", "ERR"]  # PopTorch's numeric levels 0..4 (OFF by name)
ENV_VARS = ("POPTORCH_LOG_LEVEL", "TILEFX_LOG_LEVEL")

root = logging.getLogger("tilefx")
_handler = logging.StreamHandler(sys.stderr)
_handler.setFormatter(logging.Formatter("[tilefx] [%(levelname)s] %(message)s"))
if _handler not in root.handlers:
    root.addHandler(_handler)
root.propagate = False


def setLogLevel(level) -> None:
    """Set the level of every tilefx logger: "TRACE", "DEBUG", "INFO", "WARN",
    "ERR" or "OFF" (or PopTorch's numbers 0-4, TRACE to ERR). Bad levels are
    PopTorch's ValueErrors, in its words."""
    valid = "Valid values are DEBUG, ERR, INFO, OFF, TRACE and WARN"
    if isinstance(level, bool) or not isinstance(level, (str, int)):
        raise ValueError(f"Unknown log level: {level!r}. {valid}")
    if isinstance(level, int):
        if not 0 <= level < len(_INT_LEVELS):
            raise ValueError(f"Invalid log level integer: {level} (0 is TRACE ... 4 is ERR; \"OFF\" "
                             "silences the logs)")
        level = _INT_LEVELS[level]
    name = level.upper()
    if name not in LEVELS:
        raise ValueError(f"Unknown log level: {level}. {valid}")
    root.setLevel(LEVELS[name])


def _from_env() -> None:
    for var in ENV_VARS:
        value = os.environ.get(var)
        if value:
            try:
                setLogLevel(value)
            except ValueError as e:
                raise Error(f"{var}: {e}", type="options") from None
            return
    root.setLevel(logging.INFO)


_from_env()


class CompileProgress:
    """The phases of one compilation: `mark(what, share)` after each logs it at
    INFO with its time and moves the tqdm bar by `share` (of 100); `close()`
    ends the bar (also when the compilation failed: then it stays short)."""

    def __init__(self, name: str, options):
        self.name = name
        self.log = logging.getLogger("tilefx.compile")
        self.t0 = self.last = time.perf_counter()
        self.bar = None
        if getattr(options, "show_compilation_progress_bar", True) and self.log.isEnabledFor(logging.INFO):
            from tqdm import tqdm

            from tqdm.contrib.logging import logging_redirect_tqdm

            self.bar = tqdm(total=100, desc="Graph compilation", file=sys.stderr, leave=True,
                            bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}]")
            self.redirect = logging_redirect_tqdm([root])  # log lines above the bar, not through it
            self.redirect.__enter__()

    def mark(self, what: str, share: int) -> None:
        from tilefx.api import profiling

        now = time.perf_counter()
        self.log.info("%s: %s in %.3f s", self.name, what, now - self.last)
        profiling.record("tilefx", f"{self.name}: {what}", self.last, now)
        self.last = now
        if self.bar is not None:
            self.bar.update(min(share, self.bar.total - self.bar.n))

    def close(self) -> None:
        """The compilation succeeded: log its total, end the bar, run the
        post-compile hooks (`registerPostCompileHook`)."""
        from tilefx.api.compat import run_post_compile_hooks

        self.log.info("%s: compiled in %.3f s", self.name, time.perf_counter() - self.t0)
        run_post_compile_hooks()
        if self.bar is not None:
            self.bar.update(self.bar.total - self.bar.n)
            self._end()

    def abort(self) -> None:
        """The compilation failed: end the bar where it is."""
        if self.bar is not None:
            self._end()

    def _end(self) -> None:
        self.redirect.__exit__(None, None, None)
        self.bar.close()
        self.bar = None

    def __del__(self):  # a compilation that failed half-way
        if getattr(self, "bar", None) is not None:
            self._end()
