"""``poptorch.DataLoader`` and ``poptorch.AsynchronousDataAccessor``.

``DataLoader`` is a ``torch.utils.data.DataLoader`` whose batches hold the
*combined batch size*::

    batch_size x deviceIterations x (replicationFactor / inputGroupSize)
               x gradientAccumulation

samples: everything one call of a PopTorch model consumes.  The options it
receives are frozen.

``AsynchronousDataAccessor`` loads the batches of any iterable (a dataset or
a data loader) in a separate worker process and hands them to the host in
the same order, ``buffer_size`` batches ahead.  ``DataLoader(...,
mode=DataLoaderMode.Async)`` (or ``AsyncRebatched``) does this transparently
when it is iterated.

Behaviour chosen where PopTorch leaves a choice or where tilefx differs:

* ``drop_last=False`` never produces a batch smaller than the combined batch
  size (the simulated IPU asserts that dim 0 is a multiple of it).  For a
  map-style dataset whose length is not a multiple of ``combinedBatchSize x
  numProcesses`` the constructor raises ``DataLoaderError`` (an ``Error`` and
  an ``AssertionError``), as PopTorch 1.x asserted; PopTorch 2/3 instead
  warns and returns a short last batch.  For an ``IterableDataset`` the
  length is only known at the end, so incomplete batches are dropped with a
  warning when they show up.
* Batches cross the process boundary through shared memory
  (``torch.multiprocessing`` reductions over a pipe) with credit-based flow
  control, so the host receives *fresh* tensors: unlike PopTorch's ring
  buffer, nothing is overwritten by the next iteration and no ``clone()`` is
  needed to keep a batch.
* The worker process is started with ``spawn`` by default (see
  ``_START_METHODS``): like PopTorch, this avoids the hangs that ``fork``
  causes when the parent already runs OpenMP / BLAS / torch threads, at the
  cost of a picklable dataset and an ``if __name__ == "__main__":`` guard in
  scripts.  ``SharingStrategy.Fork`` selects ``fork`` (fast, any dataset,
  use only when the parent has no threads that matter).  Inside the worker,
  a torch DataLoader's own workers (``num_workers``) start with the host's
  start method (``fork`` on Linux), not with the ``spawn`` CPython makes the
  default of a spawned process.
* With ``mode=Async`` / ``AsyncRebatched``, ``shuffle=True`` and no
  ``generator``, the loader draws a generator seed from torch's global RNG at
  construction: the worker process does not share the host's global RNG, so
  this keeps the order reproducible under ``torch.manual_seed``.
"""

from __future__ import annotations

import atexit
import logging
import multiprocessing
import multiprocessing.util  # noqa: F401  (see the atexit note below)
import os
import pickle
import tempfile
import time
import traceback
import weakref
from typing import Any, Dict, Optional

import torch
import torch.multiprocessing as torch_mp
import torch.utils.data

from tilefx.api.enums import DataLoaderMode, SharingStrategy
from tilefx.errors import Error

__all__ = [
    "DataLoader",
    "AsynchronousDataAccessor",
    "DataLoaderError",
    "DataLoaderMode",
    "SharingStrategy",
]

logger = logging.getLogger("tilefx.data")



_SPAWN_HINT = ("the worker is a spawned process: a script that creates the loader must guard "
               "its top level with `if __name__ == \"__main__\":` (and the dataset must be picklable)")

class DataLoaderError(Error, AssertionError):
    """An invalid DataLoader / AsynchronousDataAccessor argument.

    PopTorch asserts in these places, so this is both a ``tilefx.Error``
    (``poptorch.Error``) and an ``AssertionError``.
    """

    def __init__(self, message: str):
        super().__init__(message, type="dataloader")


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise DataLoaderError(message)


def _positive_int(name: str, value: Any, minimum: int = 1) -> int:
    _check(isinstance(value, int) and not isinstance(value, bool)
           and value >= minimum,
           f"{name} must be an int >= {minimum}, got {value!r}")
    return value


# --------------------------------------------------------------------------
# Nested batch structures
# --------------------------------------------------------------------------


def _flatten(obj: Any) -> tuple[list, Any]:
    """Leaves and a spec of a tensor / tuple / list / dict structure."""
    if isinstance(obj, torch.Tensor):
        return [obj], "T"
    if isinstance(obj, (tuple, list)):
        leaves, specs = [], []
        for item in obj:
            sub_leaves, sub_spec = _flatten(item)
            leaves.extend(sub_leaves)
            specs.append(sub_spec)
        return leaves, (type(obj), tuple(specs))
    if isinstance(obj, dict):
        leaves, specs = [], []
        keys = tuple(obj.keys())
        for key in keys:
            sub_leaves, sub_spec = _flatten(obj[key])
            leaves.extend(sub_leaves)
            specs.append(sub_spec)
        return leaves, (dict, keys, tuple(specs))
    return [obj], "L"


def _unflatten(leaves: list, spec: Any) -> Any:
    it = iter(leaves)

    def build(s):
        if s in ("T", "L"):
            return next(it)
        if s[0] is dict:
            return {k: build(sub) for k, sub in zip(s[1], s[2])}
        items = [build(sub) for sub in s[1]]
        if s[0] is tuple or s[0] is list:
            return s[0](items)
        try:  # namedtuple and other tuple subclasses
            return s[0](*items)
        except TypeError:
            return s[0](items)

    return build(spec)


def _leading_size(batch: Any) -> Optional[int]:
    """dim 0 of the first tensor of a batch (None if it has no tensor)."""
    leaves, _ = _flatten(batch)
    for leaf in leaves:
        if isinstance(leaf, torch.Tensor) and leaf.dim() > 0:
            return int(leaf.shape[0])
    return None


# --------------------------------------------------------------------------
# Distributed partitioning
# --------------------------------------------------------------------------


class _DistributedSubset(torch.utils.data.Dataset):
    """This process's shard of a map-style dataset.

    Every process gets the same number of whole combined batches: process
    ``p`` of ``P`` reads ``per_proc = step * (N // (step * P))`` elements
    starting at ``p * per_proc``.  With ``shuffle`` the indices are first
    permuted over the *whole* dataset with a generator seeded from
    ``Options.randomSeed`` (identical in every process), a new permutation
    for each epoch, so the shards stay disjoint and every element is
    eventually used.  The permutation lives in shared memory so that
    persistent DataLoader workers see each new epoch's order.
    """

    def __init__(self, dataset, process_id: int, num_processes: int,
                 step: int, seed: Optional[int]):
        self._dataset = dataset
        num_elts = len(dataset)
        per_proc = step * (num_elts // (step * num_processes))
        self._offset = process_id * per_proc
        self._length = per_proc
        self._seed = seed
        self._generator_state: Optional[torch.Tensor] = None
        self._permutation: Optional[torch.Tensor] = None

    def reshuffle(self) -> None:
        generator = torch.Generator()
        if self._generator_state is None:
            generator.manual_seed(int(self._seed))
        else:
            generator.set_state(self._generator_state)
        perm = torch.randperm(len(self._dataset), generator=generator)
        if self._permutation is None:
            self._permutation = perm.share_memory_()
        else:
            self._permutation.copy_(perm)
        self._generator_state = generator.get_state()

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index: int):
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError(f"index {index} out of range for a shard of "
                             f"{self._length} elements")
        global_index = index + self._offset
        if self._permutation is not None:
            global_index = int(self._permutation[global_index])
        return self._dataset[global_index]


# --------------------------------------------------------------------------
# DataLoader
# --------------------------------------------------------------------------


class DataLoader(torch.utils.data.DataLoader):
    """A ``torch.utils.data.DataLoader`` that batches for a PopTorch model.

    Each batch holds ``combinedBatchSize = batch_size x deviceIterations x
    (replicationFactor / inputGroupSize) x gradientAccumulation`` samples.
    ``batch_size`` is the micro-batch size the model sees.

    :param options: the ``poptorch.Options`` the model uses (None: defaults).
        They are frozen.
    :param dataset: a map-style or iterable dataset.
    :param drop_last: drop the last incomplete combined batch.  With False,
        a map-style dataset must hold a whole number of combined batches
        (x numProcesses) or the constructor raises; incomplete batches of an
        iterable dataset are dropped with a warning.
    :param persistent_workers: reuse the ``num_workers`` workers between
        epochs (default: ``num_workers > 0``).
    :param auto_distributed_partitioning: give each process
        (``options.Distributed``) its own shard of a map-style dataset.
    :param mode: ``DataLoaderMode.Sync``, ``Async`` (iterate through an
        ``AsynchronousDataAccessor``) or ``AsyncRebatched`` (the worker
        process assembles combined batches from batches of
        ``rebatched_worker_size``).
    :param async_options: keyword arguments of the AsynchronousDataAccessor.
    :param rebatched_worker_size: ``AsyncRebatched`` only: the batch size
        the torch DataLoader produces (default: the combined batch size);
        must be <= the combined batch size.
    :param kwargs: passed to ``torch.utils.data.DataLoader``.
    """

    def __init__(self,
                 options,
                 dataset,
                 batch_size: Optional[int] = 1,
                 shuffle: bool = False,
                 num_workers: int = 0,
                 drop_last: bool = True,
                 persistent_workers: Optional[bool] = None,
                 auto_distributed_partitioning: bool = True,
                 mode: DataLoaderMode = DataLoaderMode.Sync,
                 async_options: Optional[Dict[str, Any]] = None,
                 rebatched_worker_size: Optional[int] = None,
                 **kwargs):
        from tilefx.api.options import Options

        if options is None:
            options = Options()
        _check(isinstance(options, Options),
               f"options must be a poptorch.Options, got "
               f"{type(options).__name__}")
        _check(isinstance(mode, DataLoaderMode),
               f"mode must be a poptorch.DataLoaderMode, got {mode!r}")
        if batch_size is not None:
            _positive_int("batch_size", batch_size)
        options._freeze()
        if persistent_workers is None:
            persistent_workers = num_workers > 0

        num_processes = options.Distributed.numProcesses
        process_id = options.Distributed.processId
        _check(options.replication_factor % options.input_group_size == 0,
               f"The input group size ({options.input_group_size}) must "
               f"divide the replication factor "
               f"({options.replication_factor})")
        combined: Optional[int] = None
        if batch_size is not None:
            combined = (batch_size * options.device_iterations *
                        (options.replication_factor //
                         options.input_group_size) *
                        options.Training.gradient_accumulation)
        self._combined_batch_size = combined
        self._options = options
        self._mode = mode
        self._accessor: Optional[AsynchronousDataAccessor] = None
        self._worker_copy = False
        self._user_drop_last = drop_last
        self._is_iterable = isinstance(dataset,
                                       torch.utils.data.IterableDataset)
        self._distributed_shuffle = False

        if self._is_iterable:
            if auto_distributed_partitioning:
                _check(num_processes == 1,
                       "auto_distributed_partitioning is not supported for "
                       "an IterableDataset: with several processes, shard it "
                       "yourself and pass auto_distributed_partitioning="
                       "False")
            if num_workers > 1 and "worker_init_fn" not in kwargs:
                logger.warning(
                    "IterableDataset used with num_workers=%d but no "
                    "worker_init_fn: the DataLoader will return each "
                    "element %d times (see torch.utils.data.IterableDataset)",
                    num_workers, num_workers)
        else:
            num_elts = len(dataset)
            per_step = None if combined is None else combined * num_processes
            if not drop_last and per_step is not None and \
                    num_elts % per_step != 0:
                raise DataLoaderError(
                    f"The number of elements in the dataset ({num_elts}) is "
                    f"not divisible by the number of elements processed per "
                    f"step ({per_step} = combined batch size {combined} x "
                    f"{num_processes} process(es)) and drop_last=False: the "
                    f"last batch would hold {num_elts % per_step} elements. "
                    "Switch to drop_last=True or pad the dataset.")
            if num_processes > 1 and auto_distributed_partitioning:
                _check(combined is not None,
                       "batch_size=None is not allowed when using "
                       "auto_distributed_partitioning")
                if shuffle:
                    _check(options.random_seed is not None,
                           "When using auto_distributed_partitioning you "
                           "must set poptorch.Options.randomSeed() to ensure "
                           "that tensors are in the same order in all "
                           "processes.")
                dataset = _DistributedSubset(
                    dataset, process_id, num_processes, combined,
                    options.random_seed)
                if shuffle:
                    # The subset shuffles the whole dataset itself.
                    self._distributed_shuffle = True
                    shuffle = False

        rebatched_size = None
        torch_batch_size = combined
        torch_drop_last = drop_last
        if self._is_iterable and combined is not None:
            # Incomplete batches are dropped (with a warning) in __iter__.
            torch_drop_last = False
        if mode == DataLoaderMode.AsyncRebatched:
            _check(combined is not None,
                   "DataLoaderMode.AsyncRebatched needs a batch_size")
            rebatched_size = combined
            # The worker process assembles the combined batches and drops
            # the leftovers itself.
            self.rebatched_drop_last = drop_last
            torch_drop_last = False
            if rebatched_worker_size is not None:
                _positive_int("rebatched_worker_size", rebatched_worker_size)
                _check(rebatched_worker_size <= combined,
                       f"The rebatched_worker_size ({rebatched_worker_size}) "
                       f"must be <= to the combined batch size ({combined})")
                torch_batch_size = rebatched_worker_size
        self._rebatched_size = rebatched_size

        if mode != DataLoaderMode.Sync:
            async_options = dict(async_options or {})
            _check("rebatched_size" not in async_options,
                   "You cannot specify rebatched_size in async_options: use "
                   "mode=poptorch.DataLoaderMode.AsyncRebatched (and "
                   "rebatched_worker_size)")
            if shuffle and "generator" not in kwargs and \
                    "sampler" not in kwargs and \
                    "batch_sampler" not in kwargs:
                # The worker process has its own global RNG: draw the seed
                # here so that torch.manual_seed() makes the order
                # reproducible.
                seed = int(torch.empty((), dtype=torch.int64).random_().item())
                generator = torch.Generator()
                generator.manual_seed(seed)
                kwargs["generator"] = generator
        self._async_options = async_options

        super().__init__(dataset,
                         batch_size=torch_batch_size,
                         shuffle=shuffle,
                         num_workers=num_workers,
                         drop_last=torch_drop_last,
                         persistent_workers=persistent_workers,
                         **kwargs)

    # -- PopTorch properties ------------------------------------------------
    @property
    def combinedBatchSize(self) -> Optional[int]:
        """Number of samples in each batch: what one run of the model
        consumes."""
        return self._combined_batch_size

    @property
    def options(self):
        """The (frozen) options this loader was created with."""
        return self._options

    @property
    def mode(self) -> DataLoaderMode:
        return self._mode

    # -- length and iteration -----------------------------------------------
    def __len__(self) -> int:
        combined = self._combined_batch_size
        if combined is not None and (self._rebatched_size is not None
                                     or self._is_iterable):
            # Only whole combined batches are ever produced.
            return len(self.dataset) // combined
        return super().__len__()

    def __iter__(self):
        if self._mode != DataLoaderMode.Sync and not self._worker_copy:
            if self._accessor is None:
                self._building_accessor = True
                try:
                    self._accessor = AsynchronousDataAccessor(
                        self, **self._async_options,
                        rebatched_size=self._rebatched_size)
                finally:
                    self._building_accessor = False
            return iter(self._accessor)
        return self._sync_iter()

    def _sync_iter(self):
        if self._distributed_shuffle:
            self.dataset.reshuffle()
        iterator = super().__iter__()
        if not self._is_iterable or self._combined_batch_size is None or \
                self._rebatched_size is not None:
            return iterator
        return self._whole_batches(iterator)

    def _whole_batches(self, iterator):
        combined = self._combined_batch_size
        dropped = 0
        for batch in iterator:
            size = _leading_size(batch)
            if size is not None and size != combined:
                dropped += size
                continue
            yield batch
        if dropped and not self._user_drop_last:
            logger.warning(
                "DataLoader: dropped %d element(s) of the IterableDataset "
                "that did not fill a combined batch of %d (drop_last=False "
                "cannot produce incomplete batches; use "
                "DataLoaderMode.AsyncRebatched to lose fewer elements with "
                "several workers)", dropped, combined)

    # -- worker process -----------------------------------------------------
    def terminate(self) -> None:
        """Stop the worker process of an Async / AsyncRebatched loader (no
        effect otherwise).  Iterating again starts a new one."""
        accessor = self.__dict__.get("_accessor")
        if accessor is not None:
            accessor.terminate()
            self.__dict__["_accessor"] = None

    def __del__(self):
        try:
            self.terminate()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass

    def __getstate__(self):
        # The worker process gets the loader without its accessor (and
        # marks its copy synchronous, see _worker_loop).
        state = self.__dict__.copy()
        state["_accessor"] = None
        if "_iterator" in state:
            state["_iterator"] = None
        return state


# --------------------------------------------------------------------------
# AsynchronousDataAccessor
# --------------------------------------------------------------------------

#: multiprocessing start method for each SharingStrategy.  Deliberately
#: ``spawn`` for the default (FileSystem) and for SharedMemory: a fresh
#: interpreter, so no lock or OpenMP thread pool of the parent can be
#: inherited in a bad state (PopTorch's reason too).  ``fork`` only on
#: request (SharingStrategy.Fork).
_START_METHODS = {
    SharingStrategy.SharedMemory: "spawn",
    SharingStrategy.FileSystem: "spawn",
    SharingStrategy.Fork: "fork",
    SharingStrategy.ForkServer: "forkserver",
}

#: Seconds to wait for the worker to load the dataset and report ready.
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


class _Rebatcher:
    """Cuts a stream of batches into batches of exactly ``size`` rows."""

    def __init__(self, size: int):
        self.size = size
        self.pending: Optional[list] = None
        self.spec = None
        self.rows = 0

    def reset(self) -> None:
        self.pending = None
        self.spec = None
        self.rows = 0

    def add(self, batch) -> list:
        leaves, spec = _flatten(batch)
        if not leaves or not all(isinstance(t, torch.Tensor) and t.dim() > 0
                                 for t in leaves):
            raise Error("Rebatching needs batches made only of tensors "
                        "with a batch dimension (a tensor, or a tuple, list "
                        "or dict of tensors)")
        rows = leaves[0].shape[0]
        if any(t.shape[0] != rows for t in leaves):
            raise Error("Rebatching needs every tensor of a batch to have "
                        "the same dim 0, got "
                        f"{[tuple(t.shape) for t in leaves]}")
        if self.spec is None:
            self.spec = spec
        elif spec != self.spec:
            raise Error("Rebatching needs every batch to have the same "
                        "structure")
        if self.pending is None:
            self.pending = list(leaves)
        else:
            self.pending = [torch.cat([p, t]) for p, t in
                            zip(self.pending, leaves)]
        self.rows += rows
        out = []
        while self.rows >= self.size:
            full = [t[:self.size].clone() for t in self.pending]
            self.pending = [t[self.size:] for t in self.pending]
            self.rows -= self.size
            out.append(_unflatten(full, self.spec))
        if self.rows == 0:
            self.pending = None
        return out


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
    # A process started by the "spawn" context makes "spawn" its default start
    # method (CPython's Process._bootstrap), so a torch DataLoader with
    # num_workers=16 iterated here would spawn 16 interpreters, each importing
    # torch, tilefx and the user's script again (~20 s on two cores for the
    # tutorial's loader, against 0.3 s for the same loader on the host). Its
    # workers start as they would on the host: this process is fresh, without
    # the host's threads that made the accessor itself avoid fork.
    if multiprocessing.get_start_method(allow_none=True) != config["start_method"]:
        multiprocessing.set_start_method(config["start_method"], force=True)
    try:
        kind, obj = source
        if kind == "file":
            with open(obj, "rb") as f:
                obj = pickle.load(f)
        dataset = obj
        if isinstance(dataset, DataLoader):
            # Iterate the loader itself, synchronously.  (A pickled copy is
            # already marked by __getstate__; a forked one is not.)
            dataset.__dict__["_worker_copy"] = True
            dataset.__dict__["_accessor"] = None
    except BaseException as e:  # noqa: BLE001
        data_conn.send((_FATAL, None, _describe(e)))
        return

    credits = config["buffer_size"]
    load_indefinitely = config["load_indefinitely"]
    rebatcher = (_Rebatcher(config["rebatched_size"])
                 if config["rebatched_size"] else None)
    drop_last = config["rebatched_drop_last"]
    # A dataset yields samples; a DataLoader (or any other iterable) yields
    # batches.
    samples = isinstance(dataset, torch.utils.data.Dataset)
    poll_interval = max(config["miss_sleep_time_in_ms"] / 1000.0, 0.05)

    tag = None
    iterator = None  # None: idle; _NEW: create on the next step
    ready_out: list = []

    def start(new_tag):
        nonlocal tag, iterator, ready_out
        tag = new_tag
        ready_out = []
        if rebatcher is not None:
            rebatcher.reset()
        iterator = _NEW

    data_conn.send((_READY, None, os.getpid()))
    if config["early_preload"]:
        start((0, 0))

    while True:
        busy = iterator is not None or bool(ready_out)
        # Handle the commands; block for one when there is nothing to do.
        while True:
            if cmd_conn.poll(0 if busy and credits > 0 else poll_interval):
                cmd = cmd_conn.recv()
                if cmd[0] == _SHUTDOWN:
                    return
                if cmd[0] == _CREDIT:
                    credits += 1
                elif cmd[0] == _START:
                    start((cmd[1], 0))
                busy = iterator is not None or bool(ready_out)
                continue
            if busy and credits > 0:
                break
            if os.getppid() != parent_pid:  # orphaned
                return

        if ready_out:
            data_conn.send((_ITEM, tag, ready_out.pop(0)))
            credits -= 1
            continue
        try:
            if iterator is _NEW:
                iterator = _iterate(dataset)
            item = next(iterator)
            if rebatcher is not None:
                if samples:  # one sample: make it a batch of 1
                    item = torch.utils.data.default_collate([item])
                ready_out.extend(rebatcher.add(item))
                continue
        except StopIteration:
            if rebatcher is not None and rebatcher.rows:
                if not drop_last:
                    logger.warning(
                        "AsynchronousDataAccessor: dropped the last %d "
                        "element(s), which do not fill a batch of %d",
                        rebatcher.rows, rebatcher.size)
                rebatcher.reset()
            data_conn.send((_EOF, tag, None))
            credits -= 1
            if load_indefinitely:
                # Prefetch the next pass: the host will most likely ask
                # for it.
                start((tag[0], tag[1] + 1))
            else:
                iterator = None
            continue
        except Exception as e:  # noqa: BLE001 - reported to the host
            data_conn.send((_ERROR, tag, _describe(e)))
            credits -= 1
            iterator = None
            ready_out = []
            continue
        data_conn.send((_ITEM, tag, item))
        credits -= 1


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
        dataset: ``FileSystem`` (default; ``spawn``, the dataset is pickled
        to a temporary file), ``SharedMemory`` (``spawn``, pickled through a
        pipe, tensors moved to shared memory), ``Fork`` (``fork``: no
        pickling) or ``ForkServer``.
    :param rebatched_size: if set, return batches of exactly this many rows,
        made from the (smaller or larger) batches of ``dataset`` (from its
        samples if it is a ``torch.utils.data.Dataset``); leftover rows at
        the end of a pass are dropped.

    The worker stops with ``terminate()``, at the end of a ``with`` block,
    when the accessor is garbage collected, or at interpreter exit.
    """

    def __init__(self,
                 dataset,
                 buffer_size: int = 3,
                 miss_sleep_time_in_ms: float = 0.1,
                 load_indefinitely: bool = True,
                 early_preload: bool = False,
                 sharing_strategy: SharingStrategy = (
                     SharingStrategy.FileSystem),
                 rebatched_size: Optional[int] = None):
        self._process = None
        self._data_conn = None
        self._cmd_conn = None
        if isinstance(dataset, DataLoader):
            _check(dataset._mode == DataLoaderMode.Sync or
                   dataset._worker_copy or
                   dataset.__dict__.get("_building_accessor", False),
                   "The DataLoader already uses an AsynchronousDataAccessor "
                   "internally. Either use the existing one or set "
                   "mode=poptorch.DataLoaderMode.Sync in the DataLoader.")
        _positive_int("buffer_size", buffer_size)
        _check(isinstance(miss_sleep_time_in_ms, (int, float))
               and miss_sleep_time_in_ms >= 0,
               f"miss_sleep_time_in_ms must be >= 0, got "
               f"{miss_sleep_time_in_ms!r}")
        _check(isinstance(sharing_strategy, SharingStrategy),
               f"sharing_strategy must be a poptorch.SharingStrategy, got "
               f"{sharing_strategy!r}")
        if rebatched_size is not None:
            _positive_int("rebatched_size", rebatched_size)
        self._dataset = dataset
        self.rebatched_size = rebatched_size
        self.load_indefinitely = bool(load_indefinitely)
        self._buffer_size = buffer_size
        # Host-side view of the worker: which pass we read and its state.
        self._generation = 0
        self._tag = (0, 0)
        self._state = "prefetching" if early_preload else "idle"
        self._consumed = False
        self._terminated = False

        config = {
            "buffer_size": buffer_size,
            "miss_sleep_time_in_ms": float(miss_sleep_time_in_ms),
            "load_indefinitely": self.load_indefinitely,
            "early_preload": bool(early_preload),
            "rebatched_size": rebatched_size,
            "rebatched_drop_last": bool(getattr(dataset,
                                                "rebatched_drop_last", True)),
            # the host's start method, for the worker's own processes (below)
            "start_method": multiprocessing.get_start_method(allow_none=True)
            or multiprocessing.get_all_start_methods()[0],
        }
        self._start_worker(sharing_strategy, config)
        _LIVE_ACCESSORS.add(self)

    # -- worker management --------------------------------------------------
    def _start_worker(self, sharing_strategy, config) -> None:
        ctx = torch_mp.get_context(_START_METHODS[sharing_strategy])
        data_recv, data_send = ctx.Pipe(duplex=False)
        cmd_recv, cmd_send = ctx.Pipe(duplex=False)
        self._data_conn, self._cmd_conn = data_recv, cmd_send
        tmp_path = None
        try:
            if sharing_strategy == SharingStrategy.FileSystem:
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
                    logger.debug("AsynchronousDataAccessor worker process %d "
                                 "started by %d", payload, os.getpid())
                    return
                if kind == _FATAL:
                    raise Error("AsynchronousDataAccessor worker failed to "
                                f"start:\n{payload}")
                raise Error("AsynchronousDataAccessor worker failed to start "
                            f"(exit code {self._process.exitcode}); {_SPAWN_HINT}")
            if not self._process.is_alive():
                raise Error("AsynchronousDataAccessor worker failed to start "
                            f"(exit code {self._process.exitcode}; see above); {_SPAWN_HINT}")
            if time.monotonic() > deadline:
                raise Error("AsynchronousDataAccessor worker did not start "
                            f"within {_STARTUP_TIMEOUT:.0f} s")

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
        length = len(self._dataset)
        if self.rebatched_size and not (
                isinstance(self._dataset, DataLoader)
                and self._dataset._rebatched_size == self.rebatched_size):
            # An AsyncRebatched DataLoader already counts combined batches.
            batch_size = getattr(self._dataset, "batch_size", None) or 1
            length = length * batch_size // self.rebatched_size
        return length

    def __iter__(self) -> "AsynchronousDataAccessor":
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
        self._state = "active"
        self._consumed = False
        return self

    def __next__(self):
        if self._terminated or self._process is None:
            raise Error("This AsynchronousDataAccessor has been terminated")
        if self._state in ("idle", "prefetching"):
            self.__iter__()
        if self._state != "active":
            raise StopIteration
        while True:
            kind, tag, payload = self._receive()
            self._send(_CREDIT)
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
