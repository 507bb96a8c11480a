"""The executable cache's store: entries in the executable format
(driver/executable.py) under a key the surface computes from everything
its program depends on, bound to the user who made them. The surface says
where the cache is and what goes in an entry (PopTorch's executor:
runner/executable_cache.py); finding a verified entry and storing one are
here. Imports no torch.

The manifest's SHA-256s prove an entry whole, not who wrote it, and the key
is deterministic: anyone who can write to a shared cache directory could
plant an entry another user's model then loads. So each entry carries an
HMAC-SHA256 of its bytes (`<key>.tilefx.mac`) under a per-user secret kept
outside the cache directory (`~/.config/tilefx/cache-hmac.key`, mode 0600,
or `TILEFX_CACHE_KEY_FILE`), and, as pip's and torch's caches check, an
entry (and its MAC) must belong to this user and be writable by no one else.
An entry that fails any of these is ignored with one warning and the model
is compiled again (and stored over it). The directory is created 0700;
`.tmp` files a killed writer left behind are removed after an hour.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
import stat
import tempfile
import time
from typing import Callable

from tilefx import limits
from tilefx.errors import Error

log = logging.getLogger("tilefx.export")

MAC_SUFFIX = ".mac"
STALE_TMP_SECONDS = 3600
_warned: set[str] = set()


def key_file() -> str:
    explicit = os.environ.get("TILEFX_CACHE_KEY_FILE")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "tilefx", "cache-hmac.key")


def _secret() -> bytes:
    """This user's cache key, made on first use (0600 in a 0700 folder)."""
    path = key_file()
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            if st.st_uid != os.getuid() or st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
                raise Error(f"the executable cache key {path} must belong to this user and be private "
                            "(chmod 600)")
            secret = f.read(64)
        if len(secret) >= 32:
            return secret
    except FileNotFoundError:
        pass
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    secret = secrets.token_bytes(32)
    fd = os.open(path + f".{os.getpid()}.tmp", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(secret)
        f.flush()
        os.fsync(f.fileno())
    try:
        os.link(path + f".{os.getpid()}.tmp", path)  # the first writer's key wins
    except FileExistsError:
        pass
    finally:
        os.unlink(path + f".{os.getpid()}.tmp")
    with open(path, "rb") as f:
        return f.read(64)


def user_mac(data: bytes) -> str:
    return hmac.new(_secret(), data, hashlib.sha256).hexdigest()


def not_private(path: str) -> str | None:
    """Why `path` is not this user's own private file (None when it is)."""
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if st.st_uid != os.getuid():
        return f"owned by uid {st.st_uid}, not this user ({os.getuid()})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "writable by other users"
    return None


def _ignore(path: str, why: str) -> bool:
    if path not in _warned:  # one warning an entry
        _warned.add(path)
        log.warning("executable cache: ignoring %s (%s); compiling again", path, why)
    return False


def verified(path: str) -> bytes | None:
    """The entry's bytes if this user made it, else None (after one warning)."""
    mac_path = path + MAC_SUFFIX
    for p in (path, mac_path):
        if not os.path.exists(p):
            return _ignore(path, "it has no MAC: not made by this user's tilefx") or None
        why = not_private(p)
        if why:
            return _ignore(path, f"{os.path.basename(p)} is {why}") or None
    with open(path, "rb") as f:
        data = f.read(limits.EXECUTABLE_BYTES.value() + 1)
    with open(mac_path, "rb") as f:
        mac = f.read(128).decode("ascii", "replace").strip()
    if not hmac.compare_digest(mac, user_mac(data)):
        return _ignore(path, "its MAC does not match: it was not made by this user, or was changed") or None
    return data


def _make_dir(directory: str) -> None:
    if not os.path.isdir(directory):
        os.makedirs(directory, mode=0o700, exist_ok=True)
        os.chmod(directory, 0o700)  # (makedirs' mode is masked by the umask)


def _clean_stale(directory: str) -> None:
    try:
        names = os.listdir(directory)
    except OSError:
        return
    now = time.time()
    for name in names:
        if name.endswith(".tmp"):
            remove_if_stale(os.path.join(directory, name), now)


def remove_if_stale(path: str, now: float) -> None:
    """Remove a temporary file of this user's that a killed writer left
    (older than STALE_TMP_SECONDS: a live writer renames its file long
    before); shared by the cache and the training checkpoints."""
    try:
        st = os.lstat(path)
        if st.st_uid == os.getuid() and now - st.st_mtime > STALE_TMP_SECONDS:
            os.unlink(path)
    except OSError:
        pass  # another process removed or finished it


def entry_path(directory: str, key: str) -> str:
    return os.path.join(directory, key + ".tilefx")


def cached_entry(directory: str, key: str) -> str | None:
    """The path of the entry under `key` if there is one this user made
    (else None: a miss, or an entry ignored with one warning)."""
    path = entry_path(directory, key)
    if not os.path.isfile(path):
        log.info("executable cache: miss (%s)", path)
        return None
    if verified(path) is None:
        return None
    return path


def ignore_entry(path: str, why: str) -> None:
    """An entry found but not usable (its program is the surface's to read)."""
    log.warning("executable cache: ignoring %s: %s", path, why)


def store_entry(directory: str, key: str, write: Callable[[str], object]) -> None:
    """Store an entry under `key`: `write(path)` writes the executable file,
    then its MAC is written beside it."""
    try:
        _make_dir(directory)
    except OSError as e:
        raise Error(f"cannot create the executable cache {directory}: {e.strerror or e}") from None
    _clean_stale(directory)
    path = entry_path(directory, key)
    for p in (path, path + MAC_SUFFIX):  # another user's entry is replaced, not written through
        if os.path.lexists(p) and not_private(p):
            try:
                os.unlink(p)
            except OSError:
                log.warning("executable cache: cannot replace %s, owned by another user; not stored", p)
                return
    write(path)
    with open(path, "rb") as f:
        mac = user_mac(f.read())
    fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(mac)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path + MAC_SUFFIX)
    _warned.discard(path)
    log.info("executable cache: stored %s", path)


__all__ = ["MAC_SUFFIX", "STALE_TMP_SECONDS", "cached_entry", "entry_path", "ignore_entry", "key_file",
           "not_private", "remove_if_stale", "store_entry", "user_mac", "verified"]
