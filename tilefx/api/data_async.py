"""``poptorch.AsynchronousDataAccessor``: batches loaded in a worker process.

The accessor hands the host the batches of any iterable (a dataset or a data
loader) in the same order, up to ``buffer_size`` batches ahead.
``DataLoader(..., mode=DataLoaderMode.Async)`` (or ``AsyncRebatched``) uses
one when it is iterated; docs/data_loading.md says how it behaves.

Design:

* The worker reads the first batch as it starts, before the constructor
  returns (PopTorch sizes its buffers from it): a dataset that cannot produce
  a batch fails at construction with the worker's traceback, not at the
  first ``next()``.  Without ``early_preload`` it then waits for ``iter()``
  before loading more; with it, it fills ``buffer_size`` batches at once.
* How the worker process starts: by default as torch's own DataLoader
  workers start in this program (``multiprocessing``'s start method: ``fork``
  on Linux).  A forked worker shares the dataset with the host copy-on-write
  (no pickle of a 188 MB dataset, no second import of torch, no re-run of
  the user's ``__main__``, so top-level scripts and notebook cells work); it
  limits torch to one thread, as torch's workers do, so the parent's OpenMP
  pool is never used after the fork.  Where the start method is ``spawn``
  (macOS, Windows, or chosen by the user) the dataset is pickled to a
  temporary file.  An explicit ``SharingStrategy`` chooses: ``FileSystem``
  and ``SharedMemory`` spawn (PopTorch's meaning), ``Fork`` forks,
  ``ForkServer`` uses a fork server.
* Batches cross the process boundary through shared memory
  (``torch.multiprocessing`` reductions over a pipe) with credit-based flow
  control, so the host receives *fresh* tensors: unlike PopTorch's ring
  buffer, nothing is overwritten by the next iteration and no ``clone()`` is
  needed to keep a batch.
"""

from __future__ import annotations

import atexit
import logging
import multiprocessing
import multiprocessing.util  # noqa: F401  (see the atexit note below)
import os
import pickle
import sys
import tempfile
import time
import traceback
import weakref
from typing import Optional

import torch
import torch.multiprocessing as torch_mp
import torch.utils.data

from tilefx.api.data_batches import Rebatcher, check, positive_int
from tilefx.api.enums import SharingStrategy
from tilefx.errors import Error

logger = logging.getLogger("tilefx.data")

_SPAWN_HINT = ("the worker is a spawned process: a script that creates the loader must guard "
               "its top level with `if __name__ == \"__main__\":` (and the dataset must be picklable)")

#: multiprocessing start method of each explicit SharingStrategy (PopTorch's
#: meaning: FileSystem and SharedMemory spawn a fresh interpreter).
_START_METHODS = {
    SharingStrategy.SharedMemory: "spawn",
    SharingStrategy.FileSystem: "spawn",
    SharingStrategy.Fork: "fork",
    SharingStrategy.ForkServer: "forkserver",
}

#: Seconds to wait for the worker to load the dataset and its first batch.
_STARTUP_TIMEOUT = 300.0
#: Seconds terminate() waits for a clean exit before killing the worker.
_SHUTDOWN_TIMEOUT = 5.0

# Worker -> host messages: (kind, tag, payload).  ``tag`` = (generation,
# epoch) identifies the pass over the dataset an item belongs to, so that
# items of an abandoned pass are recognised and discarded.
_READY, _ITEM, _EOF, _ERROR, _FATAL = "ready", "item", "eof", "error", "fatal"
# Host -> worker commands.
_START, _CREDIT, _SHUTDOWN = "start", "credit", "shutdown"
_NEW = object()

#: Accessors whose worker may be running (stopped by the atexit hook).
_LIVE_ACCESSORS: "weakref.WeakSet" = weakref.WeakSet()


def _terminate_all() -> None:
    for accessor in list(_LIVE_ACCESSORS):
        try:
            accessor.terminate()
        except Exception:  # pragma: no cover
            pass


# multiprocessing.util (imported above) registered its own exit function,
# which joins every non-daemonic child; atexit runs handlers last-in
# first-out, so this one stops the workers before that join.
atexit.register(_terminate_all)


def host_start_method() -> str:
    """The start method torch's DataLoader workers use in this program."""
    return (multiprocessing.get_start_method(allow_none=True)
            or multiprocessing.get_all_start_methods()[0])


def resolve_start(sharing_strategy: Optional[SharingStrategy]) -> tuple[str, bool]:
    """(start method, pickle the dataset to a file) of a SharingStrategy;
    None: the host's start method, a file only where that is spawn."""
    if sharing_strategy is None:
        method = host_start_method()
        return method, method == "spawn"
    return (_START_METHODS[sharing_strategy],
            sharing_strategy == SharingStrategy.FileSystem)


class AsyncSource:
    """What a data source tells the accessor about itself (a
    ``poptorch.DataLoader`` overrides these)."""

    def _check_accessor_source(self) -> None:
        """Raise if this source may not be wrapped in an accessor."""

    def _accessor_length(self, rebatched_size: Optional[int]) -> Optional[int]:
        """len() of the accessor's batches (None: the generic rule)."""
        return None

    def _enter_worker(self) -> None:
        """Called on the worker's copy before it is iterated."""

    def _rebatched_drop_last(self) -> bool:
        return True


def _worker_main(source, data_conn, cmd_conn, host_ends, config) -> None:
    """Entry point of the worker process."""
    for conn in host_ends:  # inherited copies (fork): keep only ours
        try:
            conn.close()
        except OSError:
            pass
    try:
        _worker_loop(source, data_conn, cmd_conn, config)
    except (KeyboardInterrupt, BrokenPipeError, EOFError):
        # Ctrl-C reaches the whole process group, and a dead host closes
        # the pipes: leave quietly.
        pass
    finally:
        try:
            data_conn.close()
            cmd_conn.close()
        except OSError:
            pass


def _worker_loop(source, data_conn, cmd_conn, config) -> None:
    parent_pid = os.getppid()
    if config["forked"]:
        # As torch's DataLoader workers do: the parent's OpenMP pool does not
        # survive a fork, so this process computes on one thread.
        torch.set_num_threads(1)
    # A process started by the "spawn" context makes "spawn" its default start
    # method (CPython's Process._bootstrap), so a torch DataLoader with
    # num_workers=16 iterated here would spawn 16 interpreters, each importing
    # torch, tilefx and the user's script again.  Its workers start as they
    # would on the host.
    if multiprocessing.get_start_method(allow_none=True) != config["start_method"]:
        multiprocessing.set_start_method(config["start_method"], force=True)
    try:
        kind, obj = source
        if kind == "file":
            with open(obj, "rb") as f:
                obj = pickle.load(f)
        dataset = obj
        if isinstance(dataset, AsyncSource):
            dataset._enter_worker()
    except BaseException as e:  # noqa: BLE001
        _fatal(data_conn, e)
        return

    rebatcher = (Rebatcher(config["rebatched_size"])
                 if config["rebatched_size"] else None)
    drop_last = config["rebatched_drop_last"]
    # A dataset yields samples; a DataLoader (or any other iterable) yields
    # batches.
    samples = isinstance(dataset, torch.utils.data.Dataset)
    load_indefinitely = config["load_indefinitely"]
    poll_interval = max(config["miss_sleep_time_in_ms"] / 1000.0, 0.05)
    # Messages of the current pass ready to go; each costs a credit (a free
    # slot of the host's buffer).
    outbox: list = []
    state = {"tag": None, "iterator": None}  # iterator None: idle

    def begin(tag):
        state["tag"], state["iterator"] = tag, _NEW
        if rebatcher is not None:
            rebatcher.reset()

    def advance():
        tag = state["tag"]
        if state["iterator"] is _NEW:
            state["iterator"] = _iterate(dataset)
        try:
            item = next(state["iterator"])
        except StopIteration:
            if rebatcher is not None:
                rest = rebatcher.flush()
                if rest is not None and not drop_last:
                    outbox.append((_ITEM, tag, rest))
            outbox.append((_EOF, tag, None))
            if load_indefinitely:
                # Prefetch the next pass: the host will most likely ask for it.
                begin((tag[0], tag[1] + 1))
            else:
                state["iterator"] = None
            return
        if rebatcher is None:
            outbox.append((_ITEM, tag, item))
            return
        if samples:  # one sample: make it a batch of 1
            item = torch.utils.data.default_collate([item])
        outbox.extend((_ITEM, tag, b) for b in rebatcher.add(item))

    # The first batch, before the host's constructor returns.
    credits = config["buffer_size"] if config["early_preload"] else 1
    begin((0, 0))
    try:
        while not outbox:
            advance()
    except BaseException as e:  # noqa: BLE001
        _fatal(data_conn, e)
        return
    data_conn.send((_READY, None, os.getpid()))

    while True:
        busy = state["iterator"] is not None or bool(outbox)
        # Handle the commands; block for one when there is nothing to do.
        while True:
            if cmd_conn.poll(0 if busy and credits > 0 else poll_interval):
                cmd = cmd_conn.recv()
                if cmd[0] == _SHUTDOWN:
                    return
                if cmd[0] == _CREDIT:
                    credits += cmd[1]
                elif cmd[0] == _START:
                    outbox.clear()
                    begin((cmd[1], 0))
                busy = state["iterator"] is not None or bool(outbox)
                continue
            if busy and credits > 0:
                break
            if os.getppid() != parent_pid:  # orphaned
                return
        if outbox:
            data_conn.send(outbox.pop(0))
            credits -= 1
            continue
        try:
            advance()
        except Exception as e:  # noqa: BLE001 - reported to the host
            outbox.append((_ERROR, state["tag"], _describe(e)))
            state["iterator"] = None


def _fatal(data_conn, exc: BaseException) -> None:
    """Report a failure to start: on the worker's stderr (as PopTorch's
    worker prints it) and to the host, which raises it."""
    text = _describe(exc)
    try:
        print(text, file=sys.stderr, flush=True)
    except (OSError, ValueError):  # pragma: no cover - no stderr
        pass
    data_conn.send((_FATAL, None, text))


def _iterate(dataset):
    """iter(dataset); a map-style dataset is read by index up to len()."""
    if isinstance(dataset, torch.utils.data.Dataset) and \
            not isinstance(dataset, torch.utils.data.IterableDataset) and \
            not hasattr(dataset, "__iter__") and hasattr(dataset, "__len__"):
        return (dataset[i] for i in range(len(dataset)))
    return iter(dataset)


def _describe(exc: BaseException) -> str:
    return "".join(traceback.format_exception(type(exc), exc,
                                              exc.__traceback__)).rstrip()
class AsynchronousDataAccessor:
    """Load the batches of ``dataset`` in a worker process.

    Iterating the accessor yields the same batches, in the same order, as
    iterating ``dataset`` (any Python iterable: a ``poptorch.DataLoader``,
    a torch DataLoader, a dataset); the worker keeps up to ``buffer_size``
    batches ready ahead of the host.  Tensors travel through shared memory.

    :param buffer_size: number of batches the worker may load ahead.
    :param miss_sleep_time_in_ms: how long the idle worker waits for a
        command before checking that the host is still alive (at least 50
        ms; it wakes up at once when the host consumes a batch).
    :param load_indefinitely: when a pass over the dataset ends, start
        loading the next one at once (otherwise wait for ``iter()``).
    :param early_preload: start loading when the worker starts, before the
        first ``iter()``.
    :param sharing_strategy: how the worker process is created and gets the
        dataset: None (default) as torch's DataLoader workers start in this
        program (``fork`` on Linux: no pickling; where that is ``spawn``,
        the dataset is pickled to a temporary file); ``FileSystem``
        (``spawn``, the dataset pickled to a temporary file),
        ``SharedMemory`` (``spawn``, pickled through a pipe, tensors moved to
        shared memory), ``Fork`` (``fork``: no pickling) or ``ForkServer``.
    :param rebatched_size: if set, return batches of exactly this many rows,
        made from the (smaller or larger) batches of ``dataset`` (from its
        samples if it is a ``torch.utils.data.Dataset``); the rows left at
        the end of a pass are dropped, or returned as one shorter batch if
        ``dataset`` is a ``poptorch.DataLoader`` with ``drop_last=False``.

    The worker stops with ``terminate()``, at the end of a ``with`` block,
    when the accessor is garbage collected, or at interpreter exit.
    """

    def __init__(self,
                 dataset,
                 buffer_size: int = 3,
                 miss_sleep_time_in_ms: float = 0.1,
                 load_indefinitely: bool = True,
                 early_preload: bool = False,
                 sharing_strategy: Optional[SharingStrategy] = None,
                 rebatched_size: Optional[int] = None):
        self._process = None
        self._forked = False
        self._data_conn = None
        self._cmd_conn = None
        if isinstance(dataset, AsyncSource):
            dataset._check_accessor_source()
        positive_int("buffer_size", buffer_size)
        check(isinstance(miss_sleep_time_in_ms, (int, float))
              and miss_sleep_time_in_ms >= 0,
              f"miss_sleep_time_in_ms must be >= 0, got "
              f"{miss_sleep_time_in_ms!r}")
        check(sharing_strategy is None or
              isinstance(sharing_strategy, SharingStrategy),
              f"sharing_strategy must be a poptorch.SharingStrategy, got "
              f"{sharing_strategy!r}")
        if rebatched_size is not None:
            positive_int("rebatched_size", rebatched_size)
        self._dataset = dataset
        self.rebatched_size = rebatched_size
        self.load_indefinitely = bool(load_indefinitely)
        self._buffer_size = buffer_size
        # Host-side view of the worker: which pass we read and its state.
        self._generation = 0
        self._tag = (0, 0)
        # The worker starts the first pass as it starts (see _worker_loop).
        self._state = "prefetching"
        self._topped_up = bool(early_preload)
        self._consumed = False
        self._terminated = False

        config = {
            "buffer_size": buffer_size,
            "miss_sleep_time_in_ms": float(miss_sleep_time_in_ms),
            "load_indefinitely": self.load_indefinitely,
            "early_preload": bool(early_preload),
            "rebatched_size": rebatched_size,
            "rebatched_drop_last": (dataset._rebatched_drop_last()
                                    if isinstance(dataset, AsyncSource)
                                    else True),
            # the host's start method, for the worker's own processes
            "start_method": host_start_method(),
        }
        self._start_worker(sharing_strategy, config)
        _LIVE_ACCESSORS.add(self)

    # -- worker management --------------------------------------------------
    def _start_worker(self, sharing_strategy, config) -> None:
        method, to_file = resolve_start(sharing_strategy)
        config["forked"] = self._forked = method == "fork"
        ctx = torch_mp.get_context(method)
        data_recv, data_send = ctx.Pipe(duplex=False)
        cmd_recv, cmd_send = ctx.Pipe(duplex=False)
        self._data_conn, self._cmd_conn = data_recv, cmd_send
        tmp_path = None
        try:
            if to_file:
                fd, tmp_path = tempfile.mkstemp(prefix="tilefx-dataset-",
                                                suffix=".pkl")
                with os.fdopen(fd, "wb") as f:
                    try:
                        pickle.dump(self._dataset, f,
                                    protocol=pickle.HIGHEST_PROTOCOL)
                    except Exception as e:
                        raise Error(self._pickle_message(e)) from e
                source = ("file", tmp_path)
            else:
                source = ("object", self._dataset)
            # Not a daemon: the worker may itself start torch DataLoader
            # workers (num_workers > 0), which daemons may not do.  terminate()
            # and the atexit hook stop it.
            process = ctx.Process(
                target=_worker_main,
                args=(source, data_send, cmd_recv, (data_recv, cmd_send),
                      config),
                name="tilefx-AsynchronousDataAccessor", daemon=False)
            try:
                process.start()
            except Exception as e:
                if isinstance(e, (pickle.PicklingError, TypeError,
                                  AttributeError)):
                    raise Error(self._pickle_message(e)) from e
                raise
            self._process = process
            data_send.close()
            cmd_recv.close()
            self._wait_ready()
        except BaseException:
            self.terminate()
            raise
        finally:
            if tmp_path is not None:
                try:
                    os.unlink(tmp_path)
                except OSError:
                    pass

    @staticmethod
    def _pickle_message(exc: BaseException) -> str:
        return (f"AsynchronousDataAccessor could not pickle the dataset for "
                f"its worker process ({type(exc).__name__}: {exc}); make it "
                "picklable (no lambdas or local classes) or use "
                "sharing_strategy=poptorch.SharingStrategy.Fork")

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + _STARTUP_TIMEOUT
        while True:
            if self._data_conn.poll(0.05):
                try:
                    kind, _, payload = self._data_conn.recv()
                except EOFError:
                    kind, payload = None, None
                if kind == _READY:
                    self.worker_pid = payload
                    logger.debug("AsynchronousDataAccessor worker process: %d",
                                 payload)
                    return
                if kind == _FATAL:
                    raise Error("AsynchronousDataAccessor worker thread "
                                f"failed to start:\n{payload}")
                raise Error("AsynchronousDataAccessor worker thread failed to "
                            f"start (exit code {self._process.exitcode}){self._hint()}")
            if not self._process.is_alive():
                raise Error("AsynchronousDataAccessor worker thread failed to "
                            f"start (exit code {self._process.exitcode}; see "
                            f"above){self._hint()}")
            if time.monotonic() > deadline:
                raise Error("AsynchronousDataAccessor worker did not start "
                            f"within {_STARTUP_TIMEOUT:.0f} s")

    def _hint(self) -> str:
        return "" if self._forked else f"; {_SPAWN_HINT}"

    def _send(self, *command) -> None:
        try:
            self._cmd_conn.send(command)
        except (BrokenPipeError, OSError) as e:
            raise Error("AsynchronousDataAccessor worker is not running "
                        f"(exit code {self._process.exitcode})") from e

    def _receive(self):
        while True:
            if self._data_conn.poll(0.05):
                try:
                    return self._data_conn.recv()
                except EOFError:
                    pass
            elif self._process.is_alive():
                continue
            self._process.join(1.0)
            raise Error("AsynchronousDataAccessor worker process died "
                        f"(exit code {self._process.exitcode})")

    def terminate(self) -> None:
        """Stop the worker process (idempotent)."""
        self.__dict__["_terminated"] = True
        process = self.__dict__.get("_process")
        data_conn = self.__dict__.get("_data_conn")
        cmd_conn = self.__dict__.get("_cmd_conn")
        self._process = self._data_conn = self._cmd_conn = None
        try:
            _LIVE_ACCESSORS.discard(self)
        except Exception:  # pragma: no cover - interpreter shutdown
            pass
        if process is not None:
            if process.exitcode is None and cmd_conn is not None:
                try:
                    cmd_conn.send((_SHUTDOWN,))
                except (BrokenPipeError, OSError):
                    pass
            deadline = time.monotonic() + _SHUTDOWN_TIMEOUT
            while process.exitcode is None and time.monotonic() < deadline:
                # Drain (without unpickling) so that a worker blocked on a
                # full pipe can see the shutdown command.
                try:
                    while data_conn is not None and data_conn.poll(0):
                        data_conn.recv_bytes()
                except (EOFError, OSError):
                    pass
                process.join(0.02)
            if process.exitcode is None:
                process.terminate()
                process.join(1.0)
            if process.exitcode is None:  # pragma: no cover
                process.kill()
                process.join()
            try:
                process.close()
            except (ValueError, AttributeError):  # pragma: no cover
                pass
        for conn in (data_conn, cmd_conn):
            if conn is not None:
                try:
                    conn.close()
                except OSError:
                    pass

    def __del__(self):
        try:
            self.terminate()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass

    def __enter__(self) -> "AsynchronousDataAccessor":
        return self

    def __exit__(self, *exc) -> None:
        self.terminate()

    def __getstate__(self):
        raise TypeError("An AsynchronousDataAccessor cannot be pickled")

    # -- iteration ----------------------------------------------------------
    def __len__(self) -> int:
        if isinstance(self._dataset, AsyncSource):
            length = self._dataset._accessor_length(self.rebatched_size)
            if length is not None:
                return length
        length = len(self._dataset)
        if self.rebatched_size:
            batch_size = getattr(self._dataset, "batch_size", None) or 1
            length = length * batch_size // self.rebatched_size
        return length

    def __iter__(self) -> "_Pass":
        if self._terminated or self._process is None:
            raise Error("This AsynchronousDataAccessor has been terminated")
        if self._state == "prefetching" or (self._state == "active"
                                            and not self._consumed):
            pass  # the worker is already producing the pass we want
        elif self._state == "done" and self.load_indefinitely:
            # The worker went on with the next pass by itself.
            self._tag = (self._tag[0], self._tag[1] + 1)
        else:
            self._generation += 1
            self._tag = (self._generation, 0)
            self._send(_START, self._generation)
        if not self._topped_up:
            # The worker loaded one batch ahead at start: now fill the buffer.
            self._topped_up = True
            self._send(_CREDIT, self._buffer_size - 1)
        self._state = "active"
        self._consumed = False
        return _Pass(self)

    def __next__(self):
        if self._terminated or self._process is None:
            raise Error("This AsynchronousDataAccessor has been terminated")
        if self._state in ("idle", "prefetching"):
            self.__iter__()
        if self._state != "active":
            raise StopIteration
        while True:
            kind, tag, payload = self._receive()
            self._send(_CREDIT, 1)
            if tag != self._tag:
                continue  # left over from an abandoned pass
            if kind == _ITEM:
                self._consumed = True
                return payload
            if kind == _EOF:
                self._state = "done"
                raise StopIteration
            if kind == _ERROR:
                self._state = "idle"
                raise Error("AsynchronousDataAccessor: the dataset raised an "
                            f"exception in the worker process:\n{payload}")


class _Pass:
    """What ``iter(accessor)`` returns: the pass it started.  ``iter()`` of
    it is itself, so a ``for`` loop over a started iterator continues it
    (Python's iterator protocol) instead of starting a new pass."""

    def __init__(self, accessor: AsynchronousDataAccessor):
        self._accessor = accessor
        self._tag = accessor._tag

    def __iter__(self) -> "_Pass":
        return self

    def __len__(self) -> int:
        return len(self._accessor)

    def __next__(self):
        accessor = self._accessor
        if not accessor._terminated and (accessor._tag != self._tag
                                         or accessor._state != "active"):
            raise StopIteration  # a newer pass started, or this one ended
        return accessor.__next__()
