"""`import poptorch` without Graphcore's PopTorch installed: tilefx itself.

tilefx ships this package so that code written for PopTorch runs unchanged
(`import poptorch`, `from poptorch.options import Options`): importing it
binds the name `poptorch` to the `tilefx` module, and tilefx's meta-path alias
resolves `poptorch.<submodule>` (tilefx/__init__.py, `_Aliases`).

A real PopTorch found on the path outside this directory still wins, as
with the alias alone: this module then loads it under its own name.
"""

import _tilefx_standin

_tilefx_standin.bind(__name__, __file__, "tilefx")
