"""`import popart` without Graphcore's PopART installed: `tilefx.popart`.

tilefx ships this package so that code written for PopART, or libraries that
read PopART's enums next to PopTorch's options (optimum-graphcore's
`IPUConfig._to_options`: `popart.AccumulateOuterFragmentSchedule`,
`popart.SubgraphCopyingStrategy`), run unchanged: importing it binds the name
`popart` to `tilefx.popart` (Builder, sessions, DataFlow, DeviceManager, ...).

A real PopART found on the path outside this directory still wins: this
module then loads it under its own name.
"""

import _tilefx_standin

_tilefx_standin.bind(__name__, __file__, "tilefx.popart")
