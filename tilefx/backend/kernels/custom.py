"""Custom ops registered from Python (PopTorch's C++ custom ops, in numpy).

`register(name, domain, domain_version, forward, shape=None, grad=None)`
puts an op in `REGISTRY`; `ipu.custom_op` runs it by (name, domain,
version) with its inputs as numpy arrays and its attributes as keywords. A
gradient is itself an op, `<name>Grad` in the same domain, taking the output
gradients then the forward inputs and returning one gradient per input.
The registry holds Python callables only in this process: IR text names an
op, it never carries code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tilefx.errors import Error


@dataclass(frozen=True)
class CustomOpDef:
    name: str
    domain: str
    domain_version: int
    forward: Callable[..., object]
    shape: Callable[..., object] | None = None  # input shapes/dtypes -> output (shape, dtype) list
    grad: Callable[..., object] | None = None

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.name, self.domain, self.domain_version)


REGISTRY: dict[tuple[str, str, int], CustomOpDef] = {}


def register(op: CustomOpDef) -> None:
    REGISTRY[op.key] = op
    if op.grad is not None:
        REGISTRY[(op.name + "Grad", op.domain, op.domain_version)] = CustomOpDef(
            op.name + "Grad", op.domain, op.domain_version, op.grad)


def lookup(name: str, domain: str, domain_version: int) -> CustomOpDef:
    op = REGISTRY.get((name, domain, int(domain_version)))
    if op is None:
        known = ", ".join(f"{n} ({d} v{v})" for n, d, v in sorted(REGISTRY)) or "none"
        raise Error(f"custom_op: no op {name!r} in domain {domain!r} version {domain_version} is "
                    f"registered (registered: {known}); register it with "
                    "tilefx.register_custom_op", type="custom_op")
    return op


def run(inputs, op_name: str, domain: str, domain_version: int, op_attributes=None):
    """Run a registered op; results are always a list of arrays."""
    op = lookup(op_name, domain, domain_version)
    attrs = dict(op_attributes or {})
    res = op.forward(*[np.asarray(x) for x in inputs], **attrs)
    outs = list(res) if isinstance(res, (list, tuple)) else [res]
    return [np.asarray(o) for o in outs]
