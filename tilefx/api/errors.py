"""PopTorch's error classes, re-exported from the base layer (tilefx/errors.py)."""

from tilefx.errors import Error, RecoverableError, UnrecoverableError

__all__ = ["Error", "RecoverableError", "UnrecoverableError"]
