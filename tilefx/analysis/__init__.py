"""Analyses of the graph IR: what the executor and the passes decide from a
function without changing it.

Each module answers one question with a plain result: which chains run as one
attention kernel (`attention.py`), which elementwise chains run as one fused
step (`fusion.py`), which values share one array and which pure ops repeat
an earlier one (`values.py`), when each value is last read (`liveness.py`),
which steps may write over an operand (`in_place.py`), which values may
stay a kernel provider's tensors (`kept.py`) and which ops of a model's
repeated layers cost what the same op of an earlier identical layer costs
(`repeated_layers.py`, read by `ipu-auto-stage` and the profile), and
what a pass computes once for every copy of one traced module
(`shared_results.py`, which a planner attaches to its copies). The
passes that mark groups on the IR for tilefx-opt (`passes/fuse_*.py`) and
the executor's emitter (`backend/emitter.py`) read them. Nothing here
imports torch or the backend but its machine model (`repeated_layers.py`
costs ops with `backend/costs.py`).
"""
