"""Zip archives of hashed parts, as the executable file (api/export.py) and
the training checkpoint (api/checkpoint.py) write them: the tilefx version a
manifest names, each part's SHA-256, tensors as safetensors (never pickled),
the errors a malformed archive raises, and the atomic write."""

from __future__ import annotations

import hashlib
import os
import struct
import tempfile
import zipfile
import zlib

import numpy as np

from tilefx.errors import Error

# the errors zipfile and its decompressors raise for a malformed archive
# (an encrypted entry is a RuntimeError, an unknown compression method a
# NotImplementedError)
ZIP_ERRORS = (zipfile.BadZipFile, OSError, EOFError, KeyError, ValueError, NotImplementedError,
              RuntimeError, zlib.error, struct.error, OverflowError)


def tilefx_version() -> str:
    """The version a manifest records (files are read by the same version only)."""
    import tilefx

    return tilefx.__version__


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tensors_bytes(tensors: dict[str, np.ndarray]) -> bytes:
    from safetensors.numpy import save

    return save({k: np.ascontiguousarray(v) for k, v in tensors.items()})


def tensors_from(data: bytes, part: str) -> dict[str, np.ndarray]:
    from safetensors.numpy import load

    try:
        return load(data)
    except Exception as e:  # safetensors reports its own format errors
        raise Error(f"{part} is not a valid safetensors file: {e}") from None


def write_atomically(path: str, data: bytes) -> None:
    """`data` to `path` through a temporary file in its directory, synced and
    renamed, so readers never see a half-written file (OSError on failure,
    the temporary file removed)."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())  # the data is on disk before its name is
        os.replace(tmp, path)
        tmp = None
        fsync_directory(directory)
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def fsync_directory(directory: str) -> None:
    """The rename itself on disk (POSIX: a directory's entries are synced
    through the directory); not every file system can open a directory."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
