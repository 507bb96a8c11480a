"""The device state a session saves and restores besides the weights: the
optimizer state (in the ONNX file, as PopART's modelToHost writes it) and the
random generators' state (getRNGState / setRNGState).

Optimizer state. PopART's modelToHost writes each weight w's optimizer state
as extra initializers named by its reserved prefixes, and a TrainingSession
built from that file starts from them instead of fresh state:

    Accl___w    SGD's momentum, SGDAccumulatorAndMomentum.Combined (PopART's
                default): the velocity v x velocity scaling vs with the next
                step's terms folded in, mm v + (1 - dm) wd vs w
    Accl1___w   SGD's velocity x vs, SGDAccumulatorAndMomentum.Separate;
                Adam's / LAMB's first moment
    Accl2___w   Adam's / LAMB's second moment (AdaMax: the infinity norm)
    Step___w    the number of weight updates so far (a float scalar)

tilefx's PopART SGD computes PopART's equations on that state itself
(tilefx/popart/optimizers.py, `ipu.sgd`'s `popart_state`), so the tensors
are PopART's and a file PopART saved mid-training resumes as PopART resumes
it. `Step___w` is written for SGD too (PopART writes none; it reads none
either). A combined state is not written before the first update: a reader
starts it from the weights as PopART does, (1 - dm) wd vs w. A file PopART
wrote, without `Step___w`, resumes SGD past its first step and Adam at step
0 (PopART's default for a missing state tensor). Gradient accumulators
(`Accum___w`) are zero between steps and are not written.

RNG state. PopART returns the hardware generators' state as a list of
uint32 words, each replica's in turn, and takes back a list of the same
length (its message when not). tilefx's random operators draw from one
numpy PCG64 generator per replica: its 128-bit state and increment and its
buffered 32-bit half, ten words a replica.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from tilefx.popart.dataflow import (
    ACCL1_PREFIX,
    ACCL2_PREFIX,
    ACCL_PREFIX,
    OPTIMIZER_STATE_PREFIXES,
    STEP_PREFIX,
)
from tilefx.popart.errors import popart_exception, popart_runtime_error

# the tilefx executor's state kinds (passes/training_step.py) under PopART's names
STATE_PREFIX = {"momentum_buffer": ACCL_PREFIX, "scaled_velocity": ACCL_PREFIX,
                "folded_velocity": ACCL_PREFIX, "velocity": ACCL1_PREFIX,
                "exp_avg": ACCL1_PREFIX, "exp_avg_sq": ACCL2_PREFIX}
# the state kinds of SGD (PopART writes no step for them: a file's state is past its first step)
SGD_KINDS = {"momentum_buffer", "scaled_velocity", "folded_velocity", "velocity"}


def _state_of(name: str, weights: set[str]) -> tuple[str, str] | None:
    """(prefix, weight) when `name` is a state tensor of one of `weights`."""
    for prefix in OPTIMIZER_STATE_PREFIXES:
        if name.startswith(prefix) and name[len(prefix):] in weights:
            return prefix, name[len(prefix):]
    return None


def split_optimizer_state(proto: onnx.ModelProto) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The model without its optimizer state initializers (they are not weights:
    a session never trains them), and those initializers by name."""
    g = proto.graph
    names = {t.name for t in g.initializer}
    state = {t.name for t in g.initializer if _state_of(t.name, names)}
    if not state:
        return proto, {}
    out = onnx.ModelProto()
    out.CopyFrom(proto)
    keep = [t for t in out.graph.initializer if t.name not in state]
    saved = {t.name: numpy_helper.to_array(t).copy() for t in out.graph.initializer if t.name in state}
    del out.graph.initializer[:]
    out.graph.initializer.extend(keep)
    inputs = [i for i in out.graph.input if i.name not in state]  # IR < 4 lists initializers as inputs
    del out.graph.input[:]
    out.graph.input.extend(inputs)
    return out, saved


def optimizer_state_initializers(state: dict | None, onnx_name: dict[str, str]) -> list[onnx.TensorProto]:
    """The executor's optimizer state ({"step", "tensors": {param: {kind: tensor}}})
    as PopART's initializers; `onnx_name` maps the executor's parameter names to
    the weights' ONNX names."""
    if state is None:
        return []
    out = []
    for pname, kinds in state["tensors"].items():
        w = onnx_name.get(pname)
        if w is None:  # the placeholder parameter of a graph without weights
            continue
        for kind, t in kinds.items():
            if kind == "folded_velocity" and int(state["step"]) == 0:
                continue  # not made yet: it starts from the weights (the module docstring)
            prefix = STATE_PREFIX.get(kind)
            if prefix is None:
                raise popart_exception(f"modelToHost: no PopART name for the optimizer state {kind!r} "
                                       f"of {w!r}")
            out.append(numpy_helper.from_array(np.ascontiguousarray(t.numpy()), prefix + w))
        out.append(numpy_helper.from_array(np.asarray(state["step"], np.float32), STEP_PREFIX + w))
    return out


def executor_optimizer_state(saved: dict[str, np.ndarray], template: dict,
                             onnx_name: dict[str, str], what: str) -> dict | None:
    """The state to load into an executor whose fresh state is `template` from
    the initializers `saved` (None when none of them is this optimizer's)."""
    tensors: dict[str, dict[str, np.ndarray]] = {}
    steps = {}
    for pname, kinds in template["tensors"].items():
        w = onnx_name.get(pname)
        if w is None:
            continue
        for kind, fresh in kinds.items():
            name = STATE_PREFIX[kind] + w
            if name not in saved:
                continue
            value = saved[name]
            if tuple(value.shape) != tuple(fresh.shape):
                raise popart_exception(f"{what}: the optimizer state {name!r} has shape "
                                       f"{tuple(value.shape)}, the weight {w!r} needs {tuple(fresh.shape)}")
            tensors.setdefault(pname, {})[kind] = value
        if STEP_PREFIX + w in saved and pname in tensors:
            steps[STEP_PREFIX + w] = saved[STEP_PREFIX + w]
    if not tensors:
        return None
    values = {k: float(np.asarray(v).reshape(-1)[0]) if np.asarray(v).size == 1 else None
              for k, v in steps.items()}
    if any(v is None or v < 0 or v != int(v) for v in values.values()):
        raise popart_exception(f"{what}: the step counts {sorted(values)} must be non-negative whole "
                               "scalars")
    if len(set(values.values())) > 1:
        raise popart_exception(f"{what}: the weights' step counts differ ({values}): tilefx updates "
                               "every weight at each step, with one count")
    if values:
        step = int(next(iter(values.values())))
    else:  # PopART's SGD writes no step: its momentum is past the first step; Adam's is 0
        step = 1 if all(k in SGD_KINDS for ks in tensors.values() for k in ks) else 0
    return {"step": step, "tensors": tensors}


def unused_state(saved: dict[str, np.ndarray], loaded: dict | None, onnx_name: dict[str, str]) -> list[str]:
    """The saved state tensors the session's optimizer does not keep (another
    optimizer's: PopART ignores them too)."""
    used = set()
    if loaded is not None:
        for pname, kinds in loaded["tensors"].items():
            used |= {STATE_PREFIX[k] + onnx_name[pname] for k in kinds}
            used.add(STEP_PREFIX + onnx_name[pname])
    return sorted(set(saved) - used)


# -- random generators -------------------------------------------------------
_WORDS = 10  # state (4 words), increment (4), has_uint32, uinteger


def _words(x: int, n: int) -> list[int]:
    return [(x >> (32 * i)) & 0xFFFFFFFF for i in range(n)]


def _int(words: list[int]) -> int:
    return sum(int(w) << (32 * i) for i, w in enumerate(words))


def rng_state_words(generators: list[np.random.Generator]) -> list[int]:
    """Each replica's PCG64 state as uint32 words, the replicas in turn."""
    out = []
    for g in generators:
        s = g.bit_generator.state
        out += _words(s["state"]["state"], 4) + _words(s["state"]["inc"], 4)
        out += [int(s["has_uint32"]), int(s["uinteger"]) & 0xFFFFFFFF]
    return out


def set_rng_state_words(generators: list[np.random.Generator], words) -> None:
    """Write `rng_state_words`' list back (every value a uint32; PopART's size check)."""
    try:
        words = [int(w) for w in words]
    except (TypeError, ValueError):
        raise popart_exception(f"setRNGState expects a list of uint32 values, got {type(words).__name__}") \
            from None
    size = _WORDS * len(generators)
    if len(words) != size:
        raise popart_runtime_error(f"Devicex::setRngStateValue received rngState of size {len(words)}; "
                                   f"was expecting size {size}")
    if any(w < 0 or w > 0xFFFFFFFF for w in words):
        raise popart_exception("setRNGState: every value must be a uint32 (0 to 2**32 - 1)")
    for r, g in enumerate(generators):
        w = words[r * _WORDS:(r + 1) * _WORDS]
        g.bit_generator.state = {"bit_generator": "PCG64",
                                 "state": {"state": _int(w[:4]), "inc": _int(w[4:8])},
                                 "has_uint32": w[8], "uinteger": w[9]}
