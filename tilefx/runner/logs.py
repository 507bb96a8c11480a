"""tilefx's logging, PopTorch's (PopTorch user guide, 4.11.1 "Logging level"), on Python's `logging`.

Every tilefx logger sits under "tilefx" ("tilefx.compile", "tilefx.passes",
"tilefx.export", ...). `setLogLevel` and `POPTORCH_LOG_LEVEL` (or
`TILEFX_LOG_LEVEL`) take PopTorch's levels: TRACE (and TRACE_ALL), DEBUG,
INFO (the default), WARN, ERR, OFF. INFO gives one line per compilation
(what was made, in how long, how full the tiles are), DEBUG the compilation
phases with their timings, every graph pass with the op counts before and
after, the profile table and the facts PopTorch logs at DEBUG (options set,
the optimizer's settings, where each op runs), TRACE the IR after each pass.
Messages go to the `sys.stderr` of the moment as `[tilefx] [level] ...`.

`CompileProgress` draws the compilation progress bar (tqdm, as PopTorch's
"Graph compilation: 100%|...|") when the surface shows one
(`Options.showCompilationProgressBar`, on by default), INFO messages are
enabled and stderr is a terminal.
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


class StderrHandler(logging.StreamHandler):
    """Writes to the `sys.stderr` of the moment, not the one present when tilefx
    was imported: a redirect made later (pytest's capture, `contextlib.redirect_stderr`,
    a notebook's cell output) receives the records. Still a `StreamHandler` on
    stderr, so tqdm's `logging_redirect_tqdm` recognises and swaps it while a
    progress bar is drawn."""

    def __init__(self):
        logging.Handler.__init__(self)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value):  # StreamHandler.setStream: the stream is always the current stderr
        pass


_handler = StderrHandler()
_handler.setFormatter(logging.Formatter("[tilefx] [%(levelname)s] %(message)s"))
for _old in [h for h in root.handlers if type(h).__name__ == StderrHandler.__name__]:
    root.removeHandler(_old)  # a reloaded module replaces its handler, never doubles it
root.addHandler(_handler)
# The records also reach the Python root logger, as PopTorch's "poptorch::python"
# logger's do: pytest's caplog and a user's own logging configuration see them.
root.propagate = True


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


def _user_bar_open() -> bool:
    """A tqdm bar of the user's own is being drawn (a training loop's)."""
    from tqdm import tqdm

    return any(not getattr(b, "disable", False) for b in list(getattr(tqdm, "_instances", ())))


def compile_summary(profile, module, replicas: int) -> str:
    """What one compilation made, for its one INFO line: the forward stages
    (those the user placed), on how many IPUs (and replicas) under which
    strategy, and the fullest tile's peak memory as a share of the tile
    (the machine model's plan, backend/profile.py)."""
    from tilefx.dialects.irutil import to_py
    from tilefx.dialects.names import STAGES_KEY

    stages = to_py(module.attributes[STAGES_KEY])["forward_stages"] if STAGES_KEY in module.attributes else 1
    ipus = profile.num_ipus
    text = f"{stages} stage{'s' * (stages != 1)} on {ipus} IPU{'s' * (ipus != 1)}"
    if replicas > 1:
        text += f" x {replicas} replicas"
    if ipus > 1:
        text += f" ({profile.strategy.replace('_', ' ')})"
    if profile.memory:
        peak = max(int(m.peak.max()) for m in profile.memory.values())
        text += f", peak {100 * peak / profile.machine.bytes_per_tile:.0f}% of tile memory"
    return text


class CompileProgress:
    """The phases of one compilation: `mark(what, share)` after each logs it at
    DEBUG with its time and moves the bar by `share` (of 100); `close(summary)`
    logs the one INFO line of the compilation; `abort()` ends the bar of a
    compilation that failed (then it stays short).

    The bar (tqdm, PopTorch's "Graph compilation: 100%|...|") is drawn only on
    a terminal: redirected to a file or a pipe, its redraws would be dozens of
    carriage-return frames. Inside a user's own tqdm loop the user's bar stays
    the only one. While a bar is drawn, tilefx's records go through tqdm's own
    logging redirect (`tqdm.contrib.logging`), which prints each record above
    the bars, never into a bar's line."""

    def __init__(self, name: str, show_bar: bool = True, record=None, after=None):
        """`record(channel, name, start, end)`: each phase, as the surface's
        profiling channels take it; `after()`: run once the compilation
        succeeded (PopTorch's post-compile hooks)."""
        self.name = name
        self.log = logging.getLogger("tilefx.compile")
        self.t0 = self.last = time.perf_counter()
        self.bar = None
        self.redirect = None
        self.record = record
        self.after = after
        wanted = show_bar and self.log.isEnabledFor(logging.INFO)
        if not wanted:
            return
        tty = getattr(sys.stderr, "isatty", None)
        user_bar = _user_bar_open()
        if (tty is not None and tty()) or user_bar:
            from tqdm.contrib.logging import logging_redirect_tqdm

            self.redirect = logging_redirect_tqdm([root])  # log lines above the bars, not through them
            self.redirect.__enter__()
        if tty is not None and tty() and not user_bar:
            from tqdm import tqdm

            self.bar = tqdm(total=100, desc="Graph compilation", file=sys.stderr, leave=True,
                            bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}]")

    def mark(self, what: str, share: int) -> None:
        now = time.perf_counter()
        self.log.debug("%s: %s in %.3f s", self.name, what, now - self.last)
        if self.record is not None:
            self.record("tilefx", f"{self.name}: {what}", self.last, now)
        self.last = now
        if self.bar is not None:
            self.bar.update(min(share, self.bar.total - self.bar.n))

    def close(self, summary: str = "", cached: bool = False) -> None:
        """The compilation succeeded: end the bar, log the one INFO line
        ("compiled Net (training) in 3.8 s: 3 stages on 2 IPUs (pipelined),
        peak 87% of tile memory"), run `after`."""
        if self.bar is not None:
            self.bar.update(self.bar.total - self.bar.n)
            self.bar.close()
            self.bar = None
        # while the redirect holds: above a user's bar, never into its line
        self.log.info("%s %s%s in %.1f s%s", "loaded" if cached else "compiled", self.name,
                      " from the executable cache" if cached else "", time.perf_counter() - self.t0,
                      f": {summary}" if summary else "")
        self._end()
        if self.after is not None:
            self.after()

    def abort(self) -> None:
        """The compilation failed: end the bar where it is."""
        self._end()

    def _end(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        if self.redirect is not None:
            self.redirect.__exit__(None, None, None)
            self.redirect = None

    def __del__(self):  # a compilation that failed half-way
        if getattr(self, "bar", None) is not None or getattr(self, "redirect", None) is not None:
            self._end()
