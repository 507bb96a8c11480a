"""Bind a Graphcore package name (`poptorch`, `popart`) to tilefx's module for
it, unless the real package is found on the path outside this checkout.

tilefx ships one-file `poptorch` and `popart` packages so that code written
for Graphcore's SDK runs unchanged as its first import. This module is outside
the `tilefx` package on purpose: importing `tilefx` installs import hooks
(`tilefx/__init__.py`) that have no business next to a real PopTorch, so the
stand-ins decide before anything of tilefx is imported.
"""

import importlib
import importlib.machinery
import importlib.util
import os
import sys


def real_spec(name: str, standin_file: str):
    """The spec of a package `name` elsewhere on sys.path than the checkout
    holding `standin_file` (Graphcore's real one), or None."""
    ours = os.path.dirname(os.path.dirname(os.path.abspath(standin_file)))
    path = [p for p in sys.path if isinstance(p, str) and os.path.abspath(p or os.curdir) != ours]
    spec = importlib.machinery.PathFinder.find_spec(name, path)
    if spec is None or spec.origin is None or os.path.abspath(spec.origin) == os.path.abspath(standin_file):
        return None
    return spec


def bind(name: str, standin_file: str, target: str) -> None:
    """Make `sys.modules[name]` the real package if there is one, else tilefx's `target`."""
    spec = real_spec(name, standin_file)
    if spec is not None:
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return
    sys.modules[name] = importlib.import_module(target)
