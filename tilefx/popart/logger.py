"""PopART's logging (PopART user guide, 5.7 "Turning on execution tracing"): per-module levels, PopART's
format.

    popart.getLogger().setLevel("DEBUG")          # every module
    popart.getLogger("session").setLevel("OFF")   # one module

Lines look like PopART's:
`2022-05-18T12:39:14.459868Z popart:session 90915.90915 T: Session::weightsToHost`.
The default level is OFF; POPART_LOG_LEVEL sets every module's level and
POPART_LOG_DEST ("stdout", "stderr" or a file) where lines go. Built on the
standard `logging` module (logger "popart.<module>").
"""

from __future__ import annotations

import datetime
import logging
import os
import sys
import threading

from tilefx.popart.errors import popart_exception

MODULES = ("popart", "session", "ir", "devicex", "transform", "pattern", "builder", "op", "opx",
           "ces", "python", "none")
LEVELS = {"TRACE": 5, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
          "ERR": logging.ERROR, "CRITICAL": logging.CRITICAL, "OFF": logging.CRITICAL + 10}
_INITIAL = {5: "T", logging.DEBUG: "D", logging.INFO: "I", logging.WARNING: "W", logging.ERROR: "E",
            logging.CRITICAL: "C"}
logging.addLevelName(5, "TRACE")


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ts = datetime.datetime.fromtimestamp(record.created, datetime.UTC)
        stamp = ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        module = record.name.split(".", 1)[1] if "." in record.name else "popart"
        tid = threading.get_native_id() if record.thread == threading.get_ident() else record.thread
        return (f"{stamp} popart:{module} {record.process}.{tid} "
                f"{_INITIAL.get(record.levelno, 'I')}: {record.getMessage()}")


class _StdHandler(logging.StreamHandler):
    """Writes to whatever sys.stdout / sys.stderr is when a line is logged (PopART writes to
    the process's stream: a later redirection, e.g. contextlib.redirect_stderr or a test's
    capture, must see the lines; a stream bound at import would miss them)."""

    def __init__(self, name: str):
        logging.Handler.__init__(self)
        self._name = name
        self._override = None

    @property
    def stream(self):
        return self._override if self._override is not None else getattr(sys, self._name)

    @stream.setter
    def stream(self, value) -> None:  # setStream(s) pins a stream; setStream(None) follows sys again
        self._override = value


def _handler() -> logging.Handler:
    dest = os.environ.get("POPART_LOG_DEST", "stderr")
    if dest in ("stdout", "stderr"):
        h: logging.Handler = _StdHandler(dest)
    else:
        h = logging.FileHandler(dest)
    h.setFormatter(_Formatter())
    return h


_root = logging.getLogger("popart")
_root.propagate = False
_root.addHandler(_handler())


def _level(level: str) -> int:
    key = str(level).upper()
    if key not in LEVELS:
        raise popart_exception(f"unknown log level {level!r}: expected one of {', '.join(LEVELS)}")
    return LEVELS[key]


class Logger:
    """The logger of one PopART module (or, for "popart", of all of them)."""

    def __init__(self, module: str = "popart"):
        if module not in MODULES:
            raise popart_exception(f"unknown logging module {module!r}: expected one of "
                                   f"{', '.join(MODULES)}")
        self.module = module
        self._log = _root if module == "popart" else logging.getLogger(f"popart.{module}")

    def setLevel(self, level: str) -> None:
        lvl = _level(level)
        if self.module == "popart":
            for m in MODULES[1:]:
                logging.getLogger(f"popart.{m}").setLevel(lvl)
        self._log.setLevel(lvl)

    def isEnabledFor(self, level: str) -> bool:
        return self._log.isEnabledFor(_level(level))

    def trace(self, msg: str, *args) -> None:
        self._log.log(5, msg, *args)

    def debug(self, msg: str, *args) -> None:
        self._log.debug(msg, *args)

    def info(self, msg: str, *args) -> None:
        self._log.info(msg, *args)

    def warn(self, msg: str, *args) -> None:
        self._log.warning(msg, *args)

    def err(self, msg: str, *args) -> None:
        self._log.error(msg, *args)

    def critical(self, msg: str, *args) -> None:
        self._log.critical(msg, *args)


def getLogger(module: str = "popart") -> Logger:
    return Logger(module)


Logger("popart").setLevel(os.environ.get("POPART_LOG_LEVEL", "OFF"))
