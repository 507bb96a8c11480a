"""The save/compare command of the identity benchmarks (executor_identity.py,
runner_identity.py): arrays from one tree saved to an .npz file, and compared
bit for bit with another tree's (dtype, shape and raw bytes, so NaNs and
signed zeros count)."""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np


def save_or_compare(run: Callable[[], dict[str, np.ndarray]], usage: str) -> int:
    """`save OUT.npz` or `compare OUT.npz` from sys.argv; the exit status:
    0 when saved or every array equals, 1 when one differs or is in one run
    only, 2 (with `usage` printed) for other arguments."""
    if len(sys.argv) != 3 or sys.argv[1] not in ("save", "compare"):
        print(usage)
        return 2
    got = run()
    if sys.argv[1] == "save":
        np.savez(sys.argv[2], **got)
        print(f"saved {len(got)} arrays to {sys.argv[2]}")
        return 0
    with np.load(sys.argv[2]) as saved:
        want = dict(saved)
    missing = sorted(set(want) ^ set(got))
    differ = [k for k in sorted(want) if k in got and (want[k].dtype != got[k].dtype or want[k].shape != got[k].shape
                                                       or want[k].tobytes() != got[k].tobytes())]
    for k in missing:
        print(f"only in one run: {k}")
    for k in differ:
        print(f"differs: {k}")
    print(f"{len(want)} arrays: {len(differ)} differ, {len(missing)} in one run only")
    return 1 if missing or differ else 0
