"""Tests for tilefx.api.data: poptorch.DataLoader and AsynchronousDataAccessor.

Worker processes: most tests use the default start (as torch's DataLoader
workers start: fork on Linux) or ``SharingStrategy.Fork``; the tests of a
spawned worker (``SharingStrategy.FileSystem``: about 1.5 s each, torch is
imported again) keep their datasets at module level, picklable.  An autouse
fixture checks that no worker process survives a test.
"""

import logging
import multiprocessing
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from tilefx.api.custom_args import ICustomArgParser, registerCustomArgParser
from tilefx.api.data import (
    AsynchronousDataAccessor,
    DataLoader,
    DataLoaderError,
)
from tilefx.api.enums import CommGroupType, DataLoaderMode, SharingStrategy
from tilefx.api.errors import Error
from tilefx.api.options import FROZEN_MESSAGE, Options

FORK = {"sharing_strategy": SharingStrategy.Fork}
ENV_VARS = ("POPTORCH_DEFAULT_OPTIONS", "TILEFX_DEFAULT_OPTIONS",
            "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "WORLD_SIZE", "RANK")


@pytest.fixture(autouse=True)
def _clean_env_and_no_leftover_workers(monkeypatch):
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    yield
    import gc
    gc.collect()  # loaders / accessors dropped by the test terminate here
    workers = [p for p in multiprocessing.active_children()
               if p.name == "tilefx-AsynchronousDataAccessor"]
    assert not workers, f"worker processes left behind: {workers}"


# -- datasets (module level: picklable for the spawned worker) -------------


def tensor_dataset(n, features=3):
    x = torch.arange(n * features, dtype=torch.float32).reshape(n, features)
    return torch.utils.data.TensorDataset(x, torch.arange(n))


class PidDataset(torch.utils.data.Dataset):
    """Each item records the id of the process that loaded it."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        return torch.tensor([index]), torch.tensor([os.getpid()])


class StartMethodDataset(torch.utils.data.Dataset):
    """Each item is the start method of the process that loaded it, as bytes."""

    def __len__(self):
        return 8

    def __getitem__(self, index):
        method = multiprocessing.get_start_method(allow_none=True) or "none"
        return torch.tensor(list(method.ljust(12).encode()))


class Stream(torch.utils.data.IterableDataset):
    def __init__(self, n):
        self.n = n

    def __iter__(self):
        for i in range(self.n):
            yield torch.tensor([float(i)]), torch.tensor(i)

    def __len__(self):
        return self.n


class Failing(torch.utils.data.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, index):
        if index == 5:
            raise ValueError("bad sample 5")
        return torch.tensor([index])


def labels(batches):
    return [b[1].tolist() for b in batches]


def assert_same_batches(got, expected):
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert len(g) == len(e)
        for gt, et in zip(g, e):
            assert torch.equal(gt, et)


# -- combined batch size ---------------------------------------------------


@pytest.mark.parametrize(
    "batch_size, iterations, replicas, group, accumulation, combined",
    [
        (1, 1, 1, 1, 1, 1),
        (4, 1, 1, 1, 1, 4),
        (2, 3, 1, 1, 1, 6),
        (2, 1, 4, 1, 1, 8),
        (2, 1, 4, 2, 1, 4),      # replicas / input group size
        (1, 2, 2, 1, 3, 12),
        (3, 2, 4, 4, 2, 12),
    ])
def test_combined_batch_size(batch_size, iterations, replicas, group,
                             accumulation, combined):
    opts = Options().deviceIterations(iterations).replicationFactor(replicas)
    opts.inputReplicaGrouping(group, CommGroupType.Consecutive)
    opts.Training.gradientAccumulation(accumulation)
    loader = DataLoader(opts, tensor_dataset(4 * combined - 1),
                        batch_size=batch_size)
    assert loader.combinedBatchSize == combined
    assert loader.batch_size == combined
    assert len(loader) == 3
    batches = list(loader)
    assert len(batches) == 3
    assert all(x.shape == (combined, 3) and y.shape == (combined,)
               for x, y in batches)
    # No shuffling: the dataset order.
    assert torch.cat([y for _, y in batches]).tolist() == \
        list(range(3 * combined))


def test_tutorial_style_loader():
    opts = Options()
    opts.deviceIterations(10)
    opts.Training.gradientAccumulation(10)
    loader = DataLoader(opts, tensor_dataset(1000), batch_size=4,
                        shuffle=True)
    assert loader.combinedBatchSize == 400
    assert len(loader) == 2
    assert all(x.shape[0] == 400 for x, _ in loader)


def test_options_frozen_and_defaults():
    opts = Options().deviceIterations(2)
    assert not opts.frozen
    loader = DataLoader(opts, tensor_dataset(8), batch_size=2)
    assert opts.frozen and loader.options is opts
    with pytest.raises(AttributeError, match=FROZEN_MESSAGE):
        opts.deviceIterations(4)
    with pytest.raises(AttributeError, match=FROZEN_MESSAGE):
        opts.Training.gradientAccumulation(2)
    assert not opts.clone().frozen

    default = DataLoader(None, tensor_dataset(8), batch_size=2)
    assert isinstance(default.options, Options) and default.options.frozen
    assert default.combinedBatchSize == 2


def test_bad_arguments():
    with pytest.raises(DataLoaderError, match="poptorch.Options"):
        DataLoader(object(), tensor_dataset(4))
    with pytest.raises(DataLoaderError, match="DataLoaderMode"):
        DataLoader(Options(), tensor_dataset(4), mode="async")
    opts = Options().replicationFactor(2)
    opts.inputReplicaGrouping(4)
    with pytest.raises(DataLoaderError, match="divide the replication"):
        DataLoader(opts, tensor_dataset(8))
    with pytest.raises(DataLoaderError, match="rebatched_worker_size"):
        DataLoader(Options(), tensor_dataset(8), batch_size=2,
                   mode=DataLoaderMode.AsyncRebatched,
                   rebatched_worker_size=3)
    with pytest.raises(DataLoaderError, match="rebatched_size"):
        DataLoader(Options(), tensor_dataset(8), batch_size=2,
                   mode=DataLoaderMode.Async,
                   async_options={"rebatched_size": 2})


def test_kwargs_reach_torch():
    def collate(samples):
        return torch.stack([x for x, _ in samples]).sum()

    loader = DataLoader(Options(), tensor_dataset(4, features=1),
                        batch_size=2, collate_fn=collate)
    assert [b.item() for b in loader] == [1.0, 5.0]


# -- shuffling -------------------------------------------------------------


def test_shuffle_is_deterministic():
    ds = tensor_dataset(24)

    def order(**kw):
        loader = DataLoader(Options().deviceIterations(2), ds, batch_size=2,
                            shuffle=True, **kw)
        return [labels(loader) for _ in range(2)]  # two epochs

    torch.manual_seed(0)
    first = order()
    torch.manual_seed(0)
    assert order() == first
    flat = sum(first[0], [])
    assert sorted(flat) == list(range(24)) and flat != list(range(24))
    assert first[0] != first[1]  # a new order each epoch

    a = order(generator=torch.Generator().manual_seed(7))
    b = order(generator=torch.Generator().manual_seed(7))
    assert a == b


# -- drop_last --------------------------------------------------------------


def test_drop_last_true_drops_incomplete_batch():
    loader = DataLoader(Options().deviceIterations(2), tensor_dataset(11),
                        batch_size=2)
    assert len(loader) == 2
    assert labels(loader) == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_drop_last_false_keeps_the_short_last_batch(caplog):
    # PopTorch returns the partial last batch (and warns for a map-style
    # dataset, whose length is known at construction).
    with caplog.at_level(logging.WARNING, logger="tilefx.data"):
        loader = DataLoader(Options().deviceIterations(2), tensor_dataset(11),
                            batch_size=2, drop_last=False)
    assert "(11) is not divisible by the combined batch size (4)" in caplog.text
    assert len(loader) == 3
    assert labels(loader) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10]]


def test_iterable_dataset_last_batch():
    opts = Options().deviceIterations(2)
    loader = DataLoader(opts, Stream(11), batch_size=2)
    assert len(loader) == 2
    assert labels(loader) == [[0, 1, 2, 3], [4, 5, 6, 7]]

    loader = DataLoader(Options().deviceIterations(2), Stream(11),
                        batch_size=2, drop_last=False)
    assert len(loader) == 3
    assert labels(loader) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10]]


# -- distributed partitioning ----------------------------------------------


def distributed_opts(process_id, num_processes=2, seed=None):
    opts = Options().deviceIterations(2)
    opts.Distributed.configureProcessId(process_id, num_processes)
    if seed is not None:
        opts.randomSeed(seed)
    return opts


def test_distributed_shards():
    ds = tensor_dataset(21)
    shards = [labels(DataLoader(distributed_opts(p), ds, batch_size=2))
              for p in range(2)]
    # 21 // (4 x 2) = 2 combined batches per process.
    assert shards == [[[0, 1, 2, 3], [4, 5, 6, 7]],
                      [[8, 9, 10, 11], [12, 13, 14, 15]]]

    whole = DataLoader(distributed_opts(1), ds, batch_size=2,
                       auto_distributed_partitioning=False)
    assert len(whole) == 5

    with pytest.raises(DataLoaderError, match="divisible"):
        DataLoader(distributed_opts(0), tensor_dataset(20), batch_size=2,
                   drop_last=False)
    with pytest.raises(DataLoaderError, match="IterableDataset"):
        DataLoader(distributed_opts(0), Stream(16), batch_size=2)


def test_distributed_shuffle():
    with pytest.raises(DataLoaderError, match="randomSeed"):
        DataLoader(distributed_opts(0), tensor_dataset(16), batch_size=2,
                   shuffle=True)
    ds = tensor_dataset(16)
    loaders = [DataLoader(distributed_opts(p, seed=3), ds, batch_size=2,
                          shuffle=True) for p in range(2)]
    epochs = [[sum(labels(loader), []) for loader in loaders]
              for _ in range(2)]
    for shard0, shard1 in epochs:
        assert len(shard0) == len(shard1) == 8
        # Disjoint shards of one permutation shared by the processes.
        assert sorted(shard0 + shard1) == list(range(16))
    assert epochs[0] != epochs[1]


# -- Async modes -------------------------------------------------------------


def test_async_mode_matches_sync():
    # Default sharing strategy: as torch's workers start (fork on Linux).
    ds = tensor_dataset(26)

    def loader(mode, **kw):
        opts = Options().deviceIterations(3)
        return DataLoader(opts, ds, batch_size=2, mode=mode, **kw)

    sync = list(loader(DataLoaderMode.Sync))
    async_loader = loader(DataLoaderMode.Async)
    assert len(async_loader) == len(sync) == 4
    assert async_loader.combinedBatchSize == 6
    for _ in range(2):  # two epochs through the same worker
        assert_same_batches(list(async_loader), sync)
    async_loader.terminate()


def test_async_loader_workers_start_as_on_the_host():
    """The spawned accessor process gives its DataLoader workers the host's
    start method (fork on Linux), not the "spawn" CPython leaves as its default:
    16 spawned workers re-import torch, tilefx and the script (the tutorial's
    first pass took ~22 s instead of ~2 s on two cores)."""
    host = multiprocessing.get_start_method(allow_none=True) or multiprocessing.get_all_start_methods()[0]
    loader = DataLoader(Options().deviceIterations(2), StartMethodDataset(), batch_size=2,
                        num_workers=2, mode=DataLoaderMode.Async,
                        async_options={"sharing_strategy": SharingStrategy.FileSystem})
    methods = {bytes(row.tolist()).decode().strip() for batch in loader for row in batch}
    loader.terminate()
    assert methods == {host}


def test_async_rebatched_matches_sync():
    ds = tensor_dataset(26)
    sync = list(DataLoader(Options().deviceIterations(3), ds, batch_size=2))
    for worker_size in (None, 1, 4):
        loader = DataLoader(Options().deviceIterations(3), ds, batch_size=2,
                            mode=DataLoaderMode.AsyncRebatched,
                            rebatched_worker_size=worker_size,
                            async_options=FORK)
        assert len(loader) == 4
        assert_same_batches(list(loader), sync)
        assert_same_batches(list(loader), sync)
        loader.terminate()


def test_async_rebatched_iterable_with_workers():
    # Two DataLoader workers each yield an incomplete last batch; the
    # rebatching worker process joins them into whole combined batches.
    class Sharded(Stream):
        def __iter__(self):
            info = torch.utils.data.get_worker_info()
            for i in range(info.id, self.n, info.num_workers):
                yield torch.tensor([float(i)]), torch.tensor(i)

    loader = DataLoader(Options().deviceIterations(2), Sharded(14),
                        batch_size=2, num_workers=2,
                        mode=DataLoaderMode.AsyncRebatched,
                        rebatched_worker_size=2, async_options=FORK)
    batches = list(loader)
    loader.terminate()
    assert len(batches) == 3 and all(len(y) == 4 for _, y in batches)
    got = sorted(sum(labels(batches), []))
    assert len(set(got)) == 12 and set(got) <= set(range(14))


def test_async_shuffle_reproducible():
    ds = tensor_dataset(16)

    def run():
        loader = DataLoader(Options().deviceIterations(2), ds, batch_size=2,
                            shuffle=True, mode=DataLoaderMode.Async,
                            async_options=FORK)
        order = sum(labels(loader), [])
        loader.terminate()
        return order

    torch.manual_seed(11)
    first = run()
    torch.manual_seed(11)
    assert run() == first
    assert sorted(first) == list(range(16)) and first != list(range(16))


def test_async_loader_cannot_be_wrapped_again():
    loader = DataLoader(Options(), tensor_dataset(4),
                        mode=DataLoaderMode.Async)
    with pytest.raises(DataLoaderError, match="already uses"):
        AsynchronousDataAccessor(loader)


# -- AsynchronousDataAccessor ----------------------------------------------


def test_accessor_loads_in_another_process_two_epochs():
    # A spawned worker, the dataset pickled to a file.
    loader = DataLoader(Options().deviceIterations(2), PidDataset(10),
                        batch_size=2)
    with AsynchronousDataAccessor(loader, buffer_size=2,
                                  sharing_strategy=SharingStrategy.FileSystem) as accessor:
        assert len(accessor) == len(loader) == 2
        for _ in range(2):
            batches = list(accessor)
            assert [b[0].flatten().tolist() for b in batches] == \
                [[0, 1, 2, 3], [4, 5, 6, 7]]
            pids = {int(p) for b in batches for p in b[1]}
            assert pids == {accessor.worker_pid}
            assert os.getpid() not in pids
    with pytest.raises(Error, match="terminated"):
        iter(accessor)


def test_accessor_over_plain_dataset_and_structures():
    class DictData(torch.utils.data.Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return {"x": torch.full((2,), float(i)), "meta": (i, f"s{i}")}

    with AsynchronousDataAccessor(DictData(), **FORK) as accessor:
        items = list(accessor)
    assert len(items) == 5
    assert items[3]["meta"] == (3, "s3")
    assert torch.equal(items[3]["x"], torch.full((2,), 3.0))


def test_accessor_restart_mid_epoch_and_load_indefinitely_false():
    for indefinitely in (True, False):
        with AsynchronousDataAccessor(tensor_dataset(7), buffer_size=2,
                                      load_indefinitely=indefinitely,
                                      **FORK) as accessor:
            it = iter(accessor)
            assert next(it)[1].item() == 0
            assert next(it)[1].item() == 1
            # A new iterator starts again from the beginning.
            assert [y.item() for _, y in accessor] == list(range(7))
            assert [y.item() for _, y in accessor] == list(range(7))
            with pytest.raises(StopIteration):
                next(accessor)


def test_accessor_early_preload_and_rebatch():
    with AsynchronousDataAccessor(tensor_dataset(10), early_preload=True,
                                  rebatched_size=4, **FORK) as accessor:
        assert len(accessor) == 2
        for _ in range(2):
            assert [y.tolist() for _, y in accessor] == \
                [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_accessor_reports_worker_errors():
    with AsynchronousDataAccessor(Failing(), **FORK) as accessor:
        it = iter(accessor)
        assert [next(it).item() for _ in range(5)] == [0, 1, 2, 3, 4]
        with pytest.raises(Error, match="bad sample 5"):
            next(it)


def test_accessor_unpicklable_dataset():
    data = [torch.zeros(1)]
    data.append(lambda: None)
    with pytest.raises(Error, match="SharingStrategy.Fork"):
        AsynchronousDataAccessor(
            data, sharing_strategy=SharingStrategy.FileSystem)
    # Fork does not pickle the dataset: a local (unpicklable) class works.
    class Local(torch.utils.data.Dataset):
        def __len__(self):
            return 2

        def __getitem__(self, i):
            return torch.tensor([float(i)])

    with AsynchronousDataAccessor(Local(), **FORK) as accessor:
        assert [t.tolist() for t in accessor] == [[0.0], [1.0]]


def test_terminate_stops_the_worker():
    accessor = AsynchronousDataAccessor(PidDataset(6), **FORK)
    assert next(iter(accessor))[0].item() == 0
    pid = accessor.worker_pid
    accessor.terminate()
    accessor.terminate()  # idempotent
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(Error, match="terminated"):
        next(accessor)

    loader = DataLoader(Options(), PidDataset(6), batch_size=2,
                        mode=DataLoaderMode.Async, async_options=FORK)
    assert len(list(loader)) == 3
    pid = loader._accessor.worker_pid
    loader.terminate()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert len(list(loader)) == 3  # a new worker
    loader.terminate()


def test_no_hang_at_interpreter_exit(tmp_path):
    script = tmp_path / "leave_worker.py"
    script.write_text(textwrap.dedent("""
        import os, sys, torch
        from tilefx.api.data import AsynchronousDataAccessor
        from tilefx.api.enums import SharingStrategy

        if __name__ == "__main__":
            data = [torch.full((2,), float(i)) for i in range(100)]
            accessor = AsynchronousDataAccessor(
                data, sharing_strategy=SharingStrategy.Fork)
            next(iter(accessor))  # the worker keeps prefetching
            print(accessor.worker_pid, flush=True)
            # exit without terminate()
    """))
    env = dict(os.environ)
    from repo_paths import REPO

    root = REPO
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    result = subprocess.run([sys.executable, str(script)], env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    pid = int(result.stdout.split()[0])
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


# -- batch samplers ------------------------------------------------------------


class Pair:
    """A batch class of its own, read through a registered parser."""

    def __init__(self, data, label):
        self.data, self.label = data, label


class PairParser(ICustomArgParser):
    def yieldTensors(self, struct):
        yield struct.data
        yield struct.label

    def reconstruct(self, original_structure, tensor_iterator):
        return type(original_structure)(*tensor_iterator)


registerCustomArgParser(Pair, PairParser())


def collate_pair(samples):
    return Pair(torch.stack([x for x, _ in samples]),
                torch.stack([y for _, y in samples]))


def pair_labels(batches):
    return [b.label.tolist() for b in batches]


@pytest.mark.parametrize("mode, num_workers", [
    (DataLoaderMode.Sync, 0), (DataLoaderMode.Sync, 2),
    (DataLoaderMode.Async, 0), (DataLoaderMode.AsyncRebatched, 2)])
def test_batch_sampler_micro_batches_join_into_combined_batches(mode, num_workers):
    ds = tensor_dataset(13)
    whole = [list(range(6)), list(range(6, 12))]
    for drop_last, expected in [(True, whole), (False, whole + [[12]])]:
        # micro-batches [0 1 2] [3 4 5] | [6 7 8] [9 10 11] | [12], two per
        # combined batch: drop_last applies to the groups of micro-batches
        sampler = torch.utils.data.BatchSampler(
            torch.utils.data.SequentialSampler(ds), batch_size=3, drop_last=False)
        loader = DataLoader(Options().deviceIterations(2), ds, batch_sampler=sampler,
                            drop_last=drop_last, num_workers=num_workers, mode=mode,
                            collate_fn=collate_pair)
        assert loader.combinedBatchSize == 6
        assert len(loader) == len(expected)
        batches = list(loader)
        loader.terminate()
        assert all(isinstance(b, Pair) for b in batches)
        assert pair_labels(batches) == expected
        assert torch.equal(batches[-1].data, ds.tensors[0][expected[-1]])


def test_batch_sampler_without_len_and_torch_rules():
    class Uneven(torch.utils.data.Sampler):
        """Micro-batches of 1, 2, 3, 1, 2, 3, ... indices; no __len__."""

        def __init__(self, n):
            self.n = n

        def __iter__(self):
            start, size = 0, 1
            while start < self.n:
                yield list(range(start, min(start + size, self.n)))
                start, size = start + size, size % 3 + 1

    loader = DataLoader(Options().deviceIterations(2), tensor_dataset(13),
                        batch_sampler=Uneven(13))
    assert loader.combinedBatchSize is None
    # [0] [1 2] | [3 4 5] [6] | [7 8] [9 10 11] | [12] dropped
    assert labels(loader) == [[0, 1, 2], [3, 4, 5, 6], [7, 8, 9, 10, 11]]
    with pytest.raises(TypeError):
        len(loader)
    sampler = torch.utils.data.BatchSampler(
        torch.utils.data.SequentialSampler(range(4)), batch_size=2, drop_last=False)
    with pytest.raises(ValueError, match="mutually exclusive"):
        DataLoader(Options(), tensor_dataset(4), batch_sampler=sampler, shuffle=True)


def test_async_rebatched_custom_batch_class_and_short_last_batch():
    ds = tensor_dataset(11)
    for drop_last, expected in [(True, [[0, 1, 2, 3], [4, 5, 6, 7]]),
                                (False, [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10]])]:
        loader = DataLoader(Options().deviceIterations(2), ds, batch_size=2,
                            drop_last=drop_last, collate_fn=collate_pair,
                            mode=DataLoaderMode.AsyncRebatched, rebatched_worker_size=3)
        assert len(loader) == len(expected)
        for _ in range(2):
            batches = list(loader)
            assert all(isinstance(b, Pair) for b in batches)
            assert pair_labels(batches) == expected
        loader.terminate()


# -- the accessor's start ------------------------------------------------------


class Broken(torch.utils.data.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, index):
        raise RuntimeError("this dataset is broken")


def test_broken_dataset_fails_at_construction(capfd):
    loader = DataLoader(Options(), Broken(), batch_size=2)
    with pytest.raises(Error, match="worker thread failed to start(.|\n)*this dataset is broken"):
        AsynchronousDataAccessor(loader)
    # The worker prints its traceback too, as PopTorch's does.
    assert "RuntimeError: this dataset is broken" in capfd.readouterr().err


def test_worker_pid_logged(caplog):
    with caplog.at_level(logging.DEBUG, logger="tilefx.data"):
        with AsynchronousDataAccessor(tensor_dataset(4)) as accessor:
            pid = accessor.worker_pid
    assert f"AsynchronousDataAccessor worker process: {pid}" in caplog.text
    assert pid != os.getpid()


class CountingDataset(torch.utils.data.Dataset):
    """Counts the samples read, in shared memory (seen from the host)."""

    def __init__(self, n):
        self.n = n
        self.reads = torch.zeros(1, dtype=torch.int64).share_memory_()

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        self.reads += 1
        return torch.tensor([index])


@pytest.mark.parametrize("early_preload, loaded", [(False, 1), (True, 4)])
def test_first_batch_at_start_and_early_preload(early_preload, loaded):
    import time

    ds = CountingDataset(10)
    with AsynchronousDataAccessor(ds, buffer_size=4, early_preload=early_preload) as accessor:
        time.sleep(0.5)  # what the worker does by itself before iter()
        assert int(ds.reads) == loaded
        assert [int(t) for t in accessor] == list(range(10))


def test_default_worker_shares_the_dataset_without_pickling():
    # A class local to this function cannot be pickled: the default worker
    # starts as torch's DataLoader workers do on Linux (fork) and reads the
    # host's dataset as it is.
    class Local(torch.utils.data.Dataset):
        def __len__(self):
            return 3

        def __getitem__(self, i):
            return torch.tensor([float(i)])

    if multiprocessing.get_all_start_methods()[0] != "fork":
        pytest.skip("the platform starts processes with spawn")
    with AsynchronousDataAccessor(Local()) as accessor:
        assert [t.tolist() for t in accessor] == [[0.0], [1.0], [2.0]]


def test_loop_over_a_started_iterator_continues_it():
    loader = DataLoader(Options().deviceIterations(2), tensor_dataset(12), batch_size=2,
                        mode=DataLoaderMode.Async)
    batches = iter(loader)
    first = next(batches)
    rest = list(batches)  # iter() of an iterator is itself: no new pass
    loader.terminate()
    assert labels([first] + rest) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]


def test_async_workers_capped_to_the_cpus(caplog):
    cpus = len(os.sched_getaffinity(0))
    ds = tensor_dataset(48)
    sync = DataLoader(Options().deviceIterations(2), ds, batch_size=2, shuffle=True,
                      num_workers=cpus + 3, generator=torch.Generator().manual_seed(5))
    assert sync.num_workers == cpus + 3  # torch's own loader: as asked
    with caplog.at_level(logging.WARNING, logger="tilefx.data"):
        loader = DataLoader(Options().deviceIterations(2), ds, batch_size=2, shuffle=True,
                            num_workers=cpus + 3, mode=DataLoaderMode.Async,
                            generator=torch.Generator().manual_seed(5))
    assert loader.num_workers == cpus
    assert f"num_workers={cpus + 3} capped to {cpus}" in caplog.text
    # The same batches in the same order as the uncapped synchronous loader.
    assert labels(loader) == labels(sync)
    loader.terminate()
    # An iterable dataset's batches depend on the workers: never capped.
    stream = DataLoader(Options(), Stream(4), num_workers=cpus + 1, mode=DataLoaderMode.Async,
                        worker_init_fn=lambda _: None)
    assert stream.num_workers == cpus + 1
