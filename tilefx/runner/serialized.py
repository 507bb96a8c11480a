"""One executor, one call at a time: the lock its public methods hold."""

from __future__ import annotations

import functools
import threading
import weakref

_LOCKS: "weakref.WeakKeyDictionary[object, threading.RLock]" = weakref.WeakKeyDictionary()
_LOCKS_LOCK = threading.Lock()


def serialized(method):
    """Run `method` holding the executor's lock: a call from a second thread
    while one runs waits for it, so two threads never interleave one
    executor's weights, optimizer state, step or random streams (the same
    thread may nest calls, e.g. compile inside a call)."""
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        lock = _LOCKS.get(self)
        if lock is None:
            with _LOCKS_LOCK:
                lock = _LOCKS.setdefault(self, threading.RLock())
        with lock:
            return method(self, *args, **kwargs)
    return run
