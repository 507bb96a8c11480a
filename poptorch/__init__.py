"""`import poptorch` without Graphcore's PopTorch installed: tilefx itself.

tilefx ships this package so that code written for PopTorch runs unchanged
(`import poptorch`, `from poptorch.options import Options`): importing it
binds the name `poptorch` to the `tilefx` module, and tilefx's meta-path
alias resolves `poptorch.<submodule>` (tilefx/__init__.py, `_Aliases`).

A real PopTorch found on the path outside this directory still wins, as
with the alias alone: this module then loads it under its own name.
"""

import importlib.machinery
import importlib.util
import os
import sys


def _real_poptorch():
    """The spec of a `poptorch` elsewhere on sys.path (a real PopTorch), or None."""
    ours = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = [p for p in sys.path if isinstance(p, str) and os.path.abspath(p or os.curdir) != ours]
    spec = importlib.machinery.PathFinder.find_spec(__name__, path)
    if spec is None or spec.origin is None or os.path.abspath(spec.origin) == os.path.abspath(__file__):
        return None
    return spec


def _bind() -> None:
    spec = _real_poptorch()
    if spec is not None:
        module = importlib.util.module_from_spec(spec)
        sys.modules[__name__] = module
        spec.loader.exec_module(module)
        return
    import tilefx

    sys.modules[__name__] = tilefx


_bind()
