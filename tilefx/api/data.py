"""``poptorch.DataLoader``: batches of the size one call of a model consumes.

``DataLoader`` is a ``torch.utils.data.DataLoader`` whose batches hold the
*combined batch size*::

    batch_size x deviceIterations x (replicationFactor / inputGroupSize)
               x gradientAccumulation

samples: everything one call of a PopTorch model consumes.  The options it
receives are frozen.  With a ``batch_sampler`` each batch joins that many
consecutive micro-batches of the sampler (each made by ``collate_fn``).
``mode=DataLoaderMode.Async`` (or ``AsyncRebatched``) loads the batches in an
``AsynchronousDataAccessor`` worker process (``data_async.py``) when the loader
is iterated.  docs/data_loading.md describes the behaviour; in short:

* ``drop_last=False`` keeps the last, shorter batch, as PopTorch does (a
  warning says so for a map-style dataset at construction); with several
  processes and ``auto_distributed_partitioning`` every process must see
  the same number of whole batches, so there it raises instead.
* With ``mode=Async`` / ``AsyncRebatched``, ``shuffle=True`` and no
  ``generator``, the loader draws a generator seed from torch's global RNG at
  construction: the worker process does not share the host's global RNG, so
  this keeps the order reproducible under ``torch.manual_seed``.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Dict, Optional

import torch
import torch.utils.data

from tilefx.api.data_async import AsynchronousDataAccessor, AsyncSource
from tilefx.api.data_batches import DataLoaderError, check, concatenate, positive_int
from tilefx.api.enums import DataLoaderMode, SharingStrategy

__all__ = [
    "DataLoader",
    "AsynchronousDataAccessor",
    "DataLoaderError",
    "DataLoaderMode",
    "SharingStrategy",
]

logger = logging.getLogger("tilefx.data")


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

    @property
    def shuffle_state(self) -> Optional[torch.Tensor]:
        """The state the next epoch's permutation starts from (None: the
        first epoch's, from the seed): what a checkpoint keeps of the order
        (api/checkpoint.py)."""
        return self._generator_state

    @shuffle_state.setter
    def shuffle_state(self, state: Optional[torch.Tensor]) -> None:
        self._generator_state = state

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
# Batch samplers: micro-batches joined into combined batches
# --------------------------------------------------------------------------


class _GroupedBatchSampler(torch.utils.data.Sampler):
    """Groups of ``factor`` consecutive index lists of a batch sampler (the
    micro-batches of one combined batch); a shorter last group is kept
    unless ``drop_last``."""

    def __init__(self, batch_sampler, factor: int, drop_last: bool):
        super().__init__()
        self.batch_sampler = batch_sampler
        self.factor = factor
        self.drop_last = drop_last

    def __iter__(self):
        group: list = []
        for indices in self.batch_sampler:
            group.append(list(indices))
            if len(group) == self.factor:
                yield group
                group = []
        if group and not self.drop_last:
            yield group

    def __len__(self) -> int:
        count = len(self.batch_sampler)
        if self.drop_last:
            return count // self.factor
        return -(-count // self.factor)


class _MiniBatchGroups(torch.utils.data.Dataset):
    """Reads a group of index lists as one combined batch: each list made
    into a micro-batch by the user's ``collate_fn``, the micro-batches joined
    row-wise into the same structure.  Runs where torch's DataLoader fetches
    (in its workers when ``num_workers > 0``)."""

    def __init__(self, dataset, collate_fn):
        self.dataset = dataset
        self.collate_fn = collate_fn

    def __len__(self) -> int:
        return len(self.dataset)

    def _samples(self, indices: list) -> list:
        getitems = getattr(self.dataset, "__getitems__", None)
        if getitems:
            return getitems(indices)
        return [self.dataset[i] for i in indices]

    def __getitem__(self, group: list):
        return concatenate([self.collate_fn(self._samples(indices))
                            for indices in group],
                           "Joining the micro-batches of a batch_sampler")


def _capped_workers(num_workers: int) -> int:
    """An Async loader's torch workers, at most one per CPU this process may
    use.  Torch dispatches a batch to every worker at once, so on 2 CPUs 16
    workers share them and the first batch comes when nearly all are done
    (the pipelining tutorial's first batch: ~8 s instead of ~1.8 s on a
    loaded 2-core machine).  A map-style dataset's batches and their order
    do not depend on the number of workers (torch yields them in sampler
    order); an iterable dataset's do, so it is never capped."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        cpus = os.cpu_count() or 1
    if num_workers > cpus:
        logger.warning("DataLoader: num_workers=%d capped to %d, the CPUs "
                       "this process may use (docs/data_loading.md)",
                       num_workers, cpus)
        return cpus
    return num_workers


def _as_is(batch):
    """The collate function of a loader whose dataset makes whole batches."""
    return batch


# --------------------------------------------------------------------------
# DataLoader
# --------------------------------------------------------------------------


class DataLoader(torch.utils.data.DataLoader, AsyncSource):
    """A ``torch.utils.data.DataLoader`` that batches for a PopTorch model.

    Each batch holds ``combinedBatchSize = batch_size x deviceIterations x
    (replicationFactor / inputGroupSize) x gradientAccumulation`` samples.
    ``batch_size`` is the micro-batch size the model sees.

    :param options: the ``poptorch.Options`` the model uses (None: defaults).
        They are frozen.
    :param dataset: a map-style or iterable dataset.
    :param drop_last: drop the last incomplete combined batch (with False it
        is returned, shorter).
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
    :param kwargs: passed to ``torch.utils.data.DataLoader``; a
        ``batch_sampler`` gives the micro-batches (``batch_size``,
        ``shuffle`` and ``sampler`` must then keep their defaults).
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
        check(isinstance(options, Options),
              f"options must be a poptorch.Options, got "
              f"{type(options).__name__}")
        check(isinstance(mode, DataLoaderMode),
              f"mode must be a poptorch.DataLoaderMode, got {mode!r}")
        if batch_size is not None:
            positive_int("batch_size", batch_size)
        options._freeze()
        if persistent_workers is None:
            persistent_workers = num_workers > 0
        batch_sampler = kwargs.pop("batch_sampler", None)
        if batch_sampler is not None and (batch_size != 1 or shuffle or
                                          kwargs.get("sampler") is not None):
            # torch's rule (drop_last is PopTorch's own here: it applies to
            # the combined batches).
            raise ValueError("batch_sampler option is mutually exclusive "
                             "with batch_size, shuffle and sampler")

        num_processes = options.Distributed.numProcesses
        process_id = options.Distributed.processId
        check(options.replication_factor % options.input_group_size == 0,
              f"The input group size ({options.input_group_size}) must "
              f"divide the replication factor "
              f"({options.replication_factor})")
        # Micro-batches per combined batch.
        factor = (options.device_iterations *
                  (options.replication_factor // options.input_group_size) *
                  options.Training.gradient_accumulation)
        if batch_sampler is not None:
            batch_size = getattr(batch_sampler, "batch_size", None)
            if not isinstance(batch_size, int):
                batch_size = None  # the sampler's batches vary
        combined = None if batch_size is None else batch_size * factor
        self._combined_batch_size = combined
        self._options = options
        self._mode = mode
        self._accessor: Optional[AsynchronousDataAccessor] = None
        self._worker_copy = False
        self._user_drop_last = drop_last
        self._is_iterable = isinstance(dataset,
                                       torch.utils.data.IterableDataset)
        self._distributed_shuffle = False
        distributed = num_processes > 1 and auto_distributed_partitioning
        if mode != DataLoaderMode.Sync and not self._is_iterable:
            num_workers = _capped_workers(num_workers)

        if self._is_iterable:
            if auto_distributed_partitioning:
                check(num_processes == 1,
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
        elif batch_sampler is not None:
            check(not distributed,
                  "auto_distributed_partitioning is not supported with a "
                  "batch_sampler: give each process its own batch_sampler "
                  "and pass auto_distributed_partitioning=False")
        else:
            num_elts = len(dataset)
            per_step = None if combined is None else combined * num_processes
            if not drop_last and per_step is not None and \
                    num_elts % per_step != 0:
                check(not distributed,
                      f"The number of elements in the dataset ({num_elts}) "
                      f"is not divisible by the number of elements processed "
                      f"per step ({per_step} = combined batch size "
                      f"{combined} x {num_processes} processes) and "
                      "drop_last=False: every process must run the same "
                      "number of whole batches. Switch to drop_last=True or "
                      "pad the dataset.")
                logger.warning(
                    "The number of elements in the dataset (%d) is not "
                    "divisible by the combined batch size (%d) and "
                    "drop_last=False: the last batch will hold %d elements "
                    "(a model compiled for %d needs drop_last=True)",
                    num_elts, combined, num_elts % per_step, combined)
            if distributed:
                check(combined is not None,
                      "batch_size=None is not allowed when using "
                      "auto_distributed_partitioning")
                if shuffle:
                    check(options.random_seed is not None,
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
        if mode == DataLoaderMode.AsyncRebatched and batch_sampler is None:
            check(combined is not None,
                  "DataLoaderMode.AsyncRebatched needs a batch_size")
            rebatched_size = combined
            # The worker process assembles the combined batches and keeps or
            # drops the last rows itself.
            torch_drop_last = False
            if rebatched_worker_size is not None:
                positive_int("rebatched_worker_size", rebatched_worker_size)
                check(rebatched_worker_size <= combined,
                      f"The rebatched_worker_size ({rebatched_worker_size}) "
                      f"must be <= to the combined batch size ({combined})")
                torch_batch_size = rebatched_worker_size
        # (With a batch_sampler the loader itself makes the combined
        # batches: AsyncRebatched has nothing to rebatch.)
        self._rebatched_size = rebatched_size

        if mode != DataLoaderMode.Sync:
            async_options = dict(async_options or {})
            check("rebatched_size" not in async_options,
                  "You cannot specify rebatched_size in async_options: use "
                  "mode=poptorch.DataLoaderMode.AsyncRebatched (and "
                  "rebatched_worker_size)")
            if shuffle and "generator" not in kwargs and \
                    "sampler" not in kwargs and batch_sampler is None:
                # The worker process has its own global RNG: draw the seed
                # here so that torch.manual_seed() makes the order
                # reproducible.
                seed = int(torch.empty((), dtype=torch.int64).random_().item())
                generator = torch.Generator()
                generator.manual_seed(seed)
                kwargs["generator"] = generator
        self._async_options = async_options

        if batch_sampler is not None:
            collate_fn = kwargs.pop("collate_fn", None) or \
                torch.utils.data.default_collate
            super().__init__(_MiniBatchGroups(dataset, collate_fn),
                             batch_size=None,
                             sampler=_GroupedBatchSampler(
                                 batch_sampler, factor, drop_last),
                             collate_fn=_as_is,
                             num_workers=num_workers,
                             persistent_workers=persistent_workers,
                             **kwargs)
            return
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
        consumes (None if a batch sampler's batches vary)."""
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
        combined = self._rebatched_size
        if combined is not None:
            # Counted in combined batches, not in the worker's batches.
            if self._user_drop_last:
                return len(self.dataset) // combined
            return -(-len(self.dataset) // combined)
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
        if self._distributed_shuffle:
            self.dataset.reshuffle()
        return super().__iter__()

    # -- what the accessor asks (AsyncSource) -------------------------------
    def _check_accessor_source(self) -> None:
        check(self._mode == DataLoaderMode.Sync or self._worker_copy or
              self.__dict__.get("_building_accessor", False),
              "The DataLoader already uses an AsynchronousDataAccessor "
              "internally. Either use the existing one or set "
              "mode=poptorch.DataLoaderMode.Sync in the DataLoader.")

    def _accessor_length(self, rebatched_size: Optional[int]) -> Optional[int]:
        if rebatched_size is None or rebatched_size == self._rebatched_size:
            return len(self)
        return None

    def _enter_worker(self) -> None:
        # Iterate the loader itself, synchronously.
        self.__dict__["_worker_copy"] = True
        self.__dict__["_accessor"] = None

    def _rebatched_drop_last(self) -> bool:
        return self._user_drop_last

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
        # The worker process gets the loader without its accessor.
        state = self.__dict__.copy()
        state["_accessor"] = None
        if "_iterator" in state:
            state["_iterator"] = None
        return state
