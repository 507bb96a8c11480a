"""Resumable training: periodic checkpoints, and a restarted run that goes on
from the last one to the weights an uninterrupted run ends with, bit for bit.

    training = poptorch.ResumableTraining(trainer, loader, "ckpt/", every_n_steps=50, epochs=3)
    for x, y in training:          # resumes from ckpt/ when it holds this job's checkpoint
        trainer(x, y)

Under ``torchrun --max-restarts N`` a process that dies makes torchrun end
and restart the whole group; each restarted process finds the checkpoints
in the directory and continues from the newest step that every process
wrote (docs/distributed.md, "Resuming").

What a checkpoint holds, per process (a run continues bit for bit only when
all of it comes back):

* the training model's state as its device holds it
  (`PoplarExecutor.training_state`: weights, buffers, optimizer state,
  weight-update count, automatic loss scaling statistics, and the random
  streams of the replicas' random ops);
* the host's random streams (torch, numpy's global one, Python's
  ``random``) twice: where the current epoch began, so that the loader's
  order and its workers' seeds come back, and where the run stopped;
* the loader's own shuffling generators (its ``generator``, and the shard
  permutation of a distributed ``poptorch.DataLoader``) where the epoch
  began, and the position: the epoch and the batches taken in it.

Why the state is taken where it is: a checkpoint is written when the loop
asks for the batch after step s, so everything of step s (the training
call, what the user's code drew from the host's streams) is in it and
nothing of step s + 1. A restarted run rebuilds the epoch's iterator from
the epoch's first states, takes the s' batches already trained (their
content is thrown away), then puts back the stopping states before it
takes the next batch: the batches that follow, and the random draws, are
the uninterrupted run's.

The file is data, never code: a zip of a manifest (the SHA-256 and size of
each part, and an HMAC-SHA256 of the manifest under the user's key of the
executable cache, driver/executable_cache.py), a JSON part checked field by
field and a safetensors part; sizes are checked against the caps of
tilefx/limits.py before anything is read; the file must belong to this user
and be writable by no one else. It is written to a temporary file, synced,
then renamed, so a process killed while writing leaves the previous
checkpoint whole. The directory is the one the program names; a file's
content never names a path.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import os
import random
import re
import stat
import time
import zipfile

import numpy as np
import torch

from tilefx import limits
from tilefx.driver import archive, executable_cache
from tilefx.api.rendezvous import job_id, job_name
from tilefx.errors import Error

FORMAT = "tilefx-checkpoint"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
META = "checkpoint.json"
ARRAYS = "arrays.safetensors"
PARTS = (META, ARRAYS)
KEEP = 2  # own checkpoints kept: the newest may be one step ahead of another process's
_NAME = re.compile(r"process-(\d{1,6})-of-(\d{1,6})\.step-(\d{1,12})\.tilefx-ckpt")


def _file_name(rank: int, size: int, step: int) -> str:
    return f"process-{rank}-of-{size}.step-{step:09d}.tilefx-ckpt"


# -- the host's random streams and the loader's shuffling ---------------------------

def host_random_state(loader) -> tuple[dict[str, np.ndarray], dict]:
    """torch's, numpy's and Python's global streams, and the loader's
    shuffling generators, as arrays and JSON."""
    arrays = {"torch": torch.get_rng_state().numpy().copy()}
    _, keys, pos, has_gauss, gauss = np.random.get_state()
    arrays["numpy"] = np.asarray(keys, dtype=np.uint32)
    version, words, gauss_next = random.getstate()
    arrays["python"] = np.asarray(words, dtype=np.uint32)
    meta = {"numpy": [int(pos), int(has_gauss), float(gauss)], "python": [int(version), gauss_next]}
    gen = getattr(loader, "generator", None)
    if isinstance(gen, torch.Generator):
        arrays["loader_generator"] = gen.get_state().numpy().copy()
    shuffle = getattr(getattr(loader, "dataset", None), "shuffle_state", None)
    if shuffle is not None:
        arrays["loader_shuffle"] = shuffle.numpy().copy()
    return arrays, meta


def set_host_random_state(loader, arrays: dict[str, np.ndarray], meta: dict, where: str) -> None:
    """Put back what `host_random_state` took, each part checked first."""
    now, _ = host_random_state(loader)
    gen = getattr(loader, "generator", None)
    dataset = getattr(loader, "dataset", None)
    if isinstance(gen, torch.Generator) != ("loader_generator" in arrays):
        raise Error(f"{where}: the loader's generator does not match the checkpoint's (another loader)")
    expected = dict(now, loader_shuffle=torch.Generator().get_state().numpy())
    for name, array in arrays.items():
        want = expected.get(name)
        if want is None or array.shape != want.shape or array.dtype != want.dtype:
            raise Error(f"{where}: the {name} random state is not one this host's generators take")
    for name in ("torch", "numpy", "python"):
        if name not in arrays:
            raise Error(f"{where}: the {name} random state is missing")
    pos, has_gauss, gauss = _numbers(meta.get("numpy"), 3, where, "numpy")
    version, gauss_next = _numbers(meta.get("python"), 2, where, "python", optional_last=True)
    if not (0 <= pos <= 624 and has_gauss in (0, 1) and version == 3 and arrays["python"][-1] <= 624):
        raise Error(f"{where}: the numpy or Python random state is out of range")
    try:
        torch.set_rng_state(torch.from_numpy(arrays["torch"].copy()))
        np.random.set_state(("MT19937", arrays["numpy"].copy(), pos, has_gauss, float(gauss)))
        random.setstate((version, tuple(int(w) for w in arrays["python"]), gauss_next))
        if isinstance(gen, torch.Generator):
            gen.set_state(torch.from_numpy(arrays["loader_generator"].copy()))
    except (RuntimeError, ValueError, TypeError) as e:
        raise Error(f"{where}: a random state is not valid: {e}") from None
    if hasattr(dataset, "shuffle_state"):  # None: the first epoch's order, from the seed
        shuffle = arrays.get("loader_shuffle")
        dataset.shuffle_state = None if shuffle is None else torch.from_numpy(shuffle.copy())


def _numbers(value, count: int, where: str, what: str, optional_last: bool = False) -> list:
    ok = isinstance(value, list) and len(value) == count and all(
        type(v) in (int, float) or (optional_last and i == count - 1 and v is None) for i, v in enumerate(value))
    if not ok:
        raise Error(f"{where}: the {what} random state is malformed")
    return [int(v) if type(v) is int else v for v in value]


# -- the file ------------------------------------------------------------------------

def _signed_manifest(parts: dict[str, bytes]) -> bytes:
    manifest = {"format": FORMAT, "format_version": FORMAT_VERSION, "tilefx_version": archive.tilefx_version(),
                "parts": {n: {"sha256": archive.sha256(b), "size": len(b)} for n, b in parts.items()}}
    body = json.dumps(manifest, sort_keys=True)
    manifest["hmac"] = executable_cache.user_mac(body.encode())
    return json.dumps(manifest, sort_keys=True).encode()


def write_file(path: str, meta: dict, arrays: dict[str, np.ndarray]) -> None:
    """`meta` and `arrays` to `path`, atomically (temporary file, fsync, rename)."""
    parts = {META: json.dumps(meta, sort_keys=True).encode(), ARRAYS: archive.tensors_bytes(arrays)}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr(MANIFEST, _signed_manifest(parts))
        for n, b in parts.items():
            z.writestr(n, b)
    try:
        archive.write_atomically(path, buf.getvalue())
    except OSError as e:
        raise Error(f"cannot write the checkpoint {path}: {e.strerror or e}") from None


def read_file(path: str) -> tuple[dict, dict[str, np.ndarray]]:
    """The verified JSON and arrays of a checkpoint file: this user's, within
    the caps, whole, signed with this user's key, its JSON as the schema says."""
    why = executable_cache.not_private(path)
    if why:
        raise Error(f"{path}: the checkpoint is {why}; a checkpoint must be this user's own file")
    limits.EXECUTABLE_BYTES.check(os.path.getsize(path), f"{path}: the checkpoint file")
    try:
        with zipfile.ZipFile(path) as z:
            infos = {i.filename: i for i in z.infolist()}
            if len(infos) != len(z.infolist()) or set(infos) != {MANIFEST, *PARTS}:
                raise Error(f"{path}: not a tilefx checkpoint (its parts must be {MANIFEST}, {', '.join(PARTS)})")
            for n in (MANIFEST, META):
                limits.EXECUTABLE_JSON_BYTES.check(infos[n].file_size, f"{path}: {n}")
            limits.EXECUTABLE_BYTES.check(sum(i.file_size for i in infos.values()), path)
            if infos[ARRAYS].file_size > limits.RATIO_FREE_BYTES:
                limits.EXECUTABLE_RATIO.check(infos[ARRAYS].file_size // max(os.path.getsize(path), 1), path)
            manifest = limits.load_json(z.read(MANIFEST), f"{path}: {MANIFEST}")
            listed = _check_manifest(manifest, path)
            parts = {}
            for n in PARTS:
                if infos[n].file_size != listed[n]["size"]:
                    raise Error(f"{path}: part {n} has {infos[n].file_size} bytes, the manifest says "
                                f"{listed[n]['size']}")
                parts[n] = z.read(n)
                if archive.sha256(parts[n]) != listed[n]["sha256"]:
                    raise Error(f"{path}: part {n} is corrupted: its SHA-256 differs from the manifest's")
    except Error:
        raise
    except archive.ZIP_ERRORS as e:
        raise Error(f"{path}: not a tilefx checkpoint, or truncated ({type(e).__name__}: {e})") from None
    meta = check_meta(limits.load_json(parts[META], f"{path}: {META}"), path)
    arrays = archive.tensors_from(parts[ARRAYS], f"{path}: {ARRAYS}")
    return meta, arrays


def _check_manifest(manifest, path: str) -> dict:
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or \
            manifest.get("format_version") != FORMAT_VERSION:
        raise Error(f"{path}: not a tilefx checkpoint of format version {FORMAT_VERSION}")
    if manifest.get("tilefx_version") != archive.tilefx_version():
        raise Error(f"{path}: written by tilefx {str(manifest.get('tilefx_version'))[:40]}, this is tilefx "
                    f"{archive.tilefx_version()}: the versions must match exactly")
    if set(manifest) != {"format", "format_version", "tilefx_version", "parts", "hmac"}:
        raise Error(f"{path}: the manifest must hold exactly format, format_version, tilefx_version, parts, hmac")
    mac = manifest.pop("hmac")
    want = executable_cache.user_mac(json.dumps(manifest, sort_keys=True).encode())
    if not isinstance(mac, str) or not hmac.compare_digest(mac, want):
        raise Error(f"{path}: the checkpoint's HMAC does not match: it was not written by this user's tilefx, "
                    "or was changed since")
    listed = manifest["parts"]
    if not isinstance(listed, dict) or set(listed) != set(PARTS) or not all(
            isinstance(v, dict) and set(v) == {"sha256", "size"} and isinstance(v["sha256"], str)
            and type(v["size"]) is int for v in listed.values()):
        raise Error(f"{path}: the manifest must list the parts {', '.join(PARTS)} with their sha256 and size")
    return listed


def _int(value, where: str, what: str, low: int = 0, high: int = 1 << 62) -> int:
    if type(value) is not int or not low <= value <= high:
        raise Error(f"{where}: {what} must be an integer in [{low}, {high}], got {str(value)[:40]}")
    return value


_META_KEYS = {"job", "process", "processes", "fingerprint", "step", "epoch", "batch", "executor", "host",
              "epoch_host"}


def check_meta(meta, where: str) -> dict:
    """The checkpoint's JSON, every field typed and bounded."""
    if not isinstance(meta, dict) or set(meta) != _META_KEYS:
        raise Error(f"{where}: {META} must hold exactly the fields {', '.join(sorted(_META_KEYS))}")
    if not isinstance(meta["job"], str) or len(meta["job"]) > 4096:
        raise Error(f"{where}: job must be a text")
    if not isinstance(meta["fingerprint"], str) or not re.fullmatch(r"[0-9a-f]{64}", meta["fingerprint"]):
        raise Error(f"{where}: fingerprint must be a SHA-256 in hex")
    size = _int(meta["processes"], where, "processes", 1, 1 << 16)
    _int(meta["process"], where, "process", 0, size - 1)
    for k in ("step", "epoch", "batch"):
        _int(meta[k], where, k)
    ex = meta["executor"]
    if not isinstance(ex, dict) or set(ex) != {"weight_updates", "loss_scaling", "rng", "replica_rngs"}:
        raise Error(f"{where}: executor must hold weight_updates, loss_scaling, rng and replica_rngs")
    _int(ex["weight_updates"], where, "executor.weight_updates")
    als = ex["loss_scaling"]
    if not (isinstance(als, list) and len(als) == 4 and type(als[0]) is float and np.isfinite(als[0])
            and als[0] > 0 and all(type(v) is int and 0 <= v < 1 << 62 for v in als[1:])):
        raise Error(f"{where}: executor.loss_scaling must be [factor > 0, updates, upper, lower]")
    if not isinstance(ex["replica_rngs"], list) or len(ex["replica_rngs"]) > 1 << 16:
        raise Error(f"{where}: executor.replica_rngs must be a list")
    for k in ("host", "epoch_host"):
        if not isinstance(meta[k], dict) or set(meta[k]) != {"numpy", "python"}:
            raise Error(f"{where}: {k} must hold the numpy and python random states")
    return meta


# -- the loop ------------------------------------------------------------------------

class ResumableTraining:
    """Iterate over `loader` for `epochs` epochs, training with `trainer` in
    the loop's body; every `every_n_steps` steps (training calls) and at the
    end, write this process's checkpoint into `directory`. When `directory`
    already holds a checkpoint of this job, continue from it: the trainer
    gets its weights, optimizer state and random streams back, and the
    iteration starts where the checkpoint was taken. The loop's body makes
    one training call per batch (a step). A tilefx extension
    (docs/distributed.md, "Resuming")."""

    def __init__(self, trainer, loader, directory, every_n_steps: int = 100, epochs: int = 1) -> None:
        from tilefx.api.executor import PoplarExecutor

        if not isinstance(trainer, PoplarExecutor):
            raise Error(f"ResumableTraining: trainer must be a poptorch.trainingModel, got {type(trainer).__name__}")
        if not isinstance(directory, (str, os.PathLike)) or not os.fspath(directory):
            raise Error(f"ResumableTraining: directory must be a path, got {type(directory).__name__}")
        for name, value in (("every_n_steps", every_n_steps), ("epochs", epochs)):
            if type(value) is not int or value < 1:
                raise Error(f"ResumableTraining: {name} must be an integer >= 1, got {value!r}")
        self.trainer, self.loader = trainer, loader
        self.directory = os.path.abspath(os.fspath(directory))
        self.every_n_steps, self.epochs = every_n_steps, epochs
        d = trainer.options.Distributed
        self.rank, self.size = d.process_id, d.num_processes
        self.job = job_id()
        self.step = 0  # training calls so far
        self.epoch = 0
        self.resumed_from: str | None = None  # the file the run continued from
        self._saved = -1  # the step of the newest checkpoint written or resumed from
        self._epoch_start: tuple[dict, dict] | None = None  # the host's random states as the epoch began

    # -- iteration -------------------------------------------------------------
    def __iter__(self):
        _own_directory(self.directory)
        found = self._newest()
        epoch, taken, host = 0, 0, None
        if found is not None:
            meta, arrays = found
            self._restore(meta, arrays)
            epoch, taken, self.step = meta["epoch"], meta["batch"], meta["step"]
            self._saved = self.step
            host = (meta, arrays)
        while epoch < self.epochs:
            self.epoch = epoch
            if host is not None:  # the epoch as it began, then the batches already trained
                meta, arrays = host
                set_host_random_state(self.loader, _sub(arrays, "epoch_host/"), meta["epoch_host"], self.resumed_from)
                self._epoch_start = host_random_state(self.loader)
                batches = iter(self.loader)
                for _ in range(taken):
                    if next(batches, _END) is _END:
                        break
                set_host_random_state(self.loader, _sub(arrays, "host/"), meta["host"], self.resumed_from)
                host = None
            else:
                self._epoch_start = host_random_state(self.loader)
                batches, taken = iter(self.loader), 0
            while True:
                if self.step and self.step % self.every_n_steps == 0 and self.step != self._saved:
                    self._save(epoch, taken)
                batch = next(batches, _END)
                if batch is _END:
                    break
                taken += 1
                self.step += 1
                yield batch
            epoch, taken = epoch + 1, 0
        self.epoch = epoch
        if self.step != self._saved and self.trainer.isCompiled():
            self._save(epoch, 0)

    # -- resuming --------------------------------------------------------------
    def _newest(self):
        """The newest step every process wrote, this process's file of it
        read and verified; None when there is none (a fresh start)."""
        steps: dict[int, set[int]] = {}
        for name in os.listdir(self.directory):
            m = _NAME.fullmatch(name)
            if m is None:
                continue
            rank, size, step = (int(g) for g in m.groups())
            if size != self.size:
                raise Error(f"{self.directory}: holds checkpoints of {size} process(es) ({name}); this run has "
                            f"{self.size}: resume with as many processes, or choose another directory")
            steps.setdefault(step, set()).add(rank)
        complete = [s for s, ranks in steps.items() if ranks >= set(range(self.size))]
        step = max(complete, default=None)
        if step is None:
            return None
        path = os.path.join(self.directory, _file_name(self.rank, self.size, step))
        meta, arrays = read_file(path)
        if meta["job"] != self.job:
            raise Error(f"{path}: a checkpoint of job {job_name(meta['job'])}; this process is of job "
                        f"{job_name(self.job)} (TILEFX_JOB_ID, else torchrun's --rdzv-id): run it as that job "
                        "to resume it, or choose another directory")
        if (meta["process"], meta["processes"], meta["step"]) != (self.rank, self.size, step):
            raise Error(f"{path}: its content (process {meta['process']} of {meta['processes']}, step "
                        f"{meta['step']}) does not match its name")
        self.resumed_from = path
        return meta, arrays

    def _agree(self, step: int) -> None:
        """Every process resumes from the same step (the directory is one they
        share); an Error when they found different ones."""
        import torch.distributed as dist

        if self.size == 1 or not dist.is_available() or not dist.is_initialized():
            return
        mine = torch.tensor([step], dtype=torch.int64)
        seen = [torch.empty_like(mine) for _ in range(self.size)]
        dist.all_gather(seen, mine)
        values = [int(t.item()) for t in seen]
        if len(set(values)) > 1:
            raise Error(f"process {self.rank} of {self.size}: the processes found different checkpoints in "
                        f"{self.directory} (" + ", ".join(f"process {p}: step {v}" for p, v in enumerate(values))
                        + "); the checkpoint directory must be one all the processes share")

    def _restore(self, meta: dict, arrays: dict[str, np.ndarray]) -> None:
        where = self.resumed_from
        trainer = self.trainer
        if not trainer.isCompiled():  # compiled for the loader's batches; the draws it made are undone
            before = host_random_state(self.loader)
            first = next(iter(self.loader), _END)
            if first is _END:
                raise Error("ResumableTraining: the loader gives no batch")
            if isinstance(first, dict):
                trainer.compile(**first)
            else:
                trainer.compile(*first) if isinstance(first, (tuple, list)) else trainer.compile(first)
            set_host_random_state(self.loader, *before, "the loader's state before the compile")
        self._agree(meta["step"])  # (the compile joined the other processes)
        state = _sub(arrays, "model/")
        if meta["fingerprint"] != self._fingerprint(trainer.training_state()[0]):
            raise Error(f"{where}: a checkpoint of this job but of another model, optimizer or options (or "
                        "process count): choose another directory for the new run")
        trainer.restore_training_state(state, meta["executor"], where)

    # -- saving ----------------------------------------------------------------
    def _save(self, epoch: int, taken: int) -> None:
        arrays, ex_meta = self.trainer.training_state()
        out = {f"model/{k}": v for k, v in arrays.items()}
        host, host_meta = host_random_state(self.loader)
        out.update({f"host/{k}": v for k, v in host.items()})
        first, first_meta = self._epoch_start
        out.update({f"epoch_host/{k}": v for k, v in first.items()})
        meta = {"job": self.job, "process": self.rank, "processes": self.size,
                "fingerprint": self._fingerprint(arrays), "step": self.step, "epoch": epoch, "batch": taken,
                "executor": ex_meta, "host": host_meta, "epoch_host": first_meta}
        write_file(os.path.join(self.directory, _file_name(self.rank, self.size, self.step)), meta, out)
        self._saved = self.step
        self._prune()

    def _prune(self) -> None:
        """Keep this process's newest KEEP checkpoints (another process may be
        one behind); remove its temporary files a killed writer left."""
        own = []
        now = time.time()
        for name in os.listdir(self.directory):
            path = os.path.join(self.directory, name)
            m = _NAME.fullmatch(name)
            if m and (int(m.group(1)), int(m.group(2))) == (self.rank, self.size):
                own.append((int(m.group(3)), path))
            elif name.endswith(".tmp"):
                executable_cache.remove_if_stale(path, now)
        for _, path in sorted(own)[:-KEEP]:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def _fingerprint(self, arrays: dict[str, np.ndarray]) -> str:
        """What must not change between a run and its resumption: the options
        the processes agree on, the state's names, shapes and dtypes, this
        process's place."""
        from tilefx.api.distributed import describe_options

        options = {k: v for k, v in describe_options(self.trainer.options).items()
                   if k != "Distributed.timeout_seconds"}
        text = json.dumps({"options": options, "process": [self.rank, self.size],
                           "state": [(k, list(v.shape), str(v.dtype)) for k, v in sorted(arrays.items())]},
                          sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()


_END = object()


def _sub(arrays: dict[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    return {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}


def _own_directory(directory: str) -> None:
    """The checkpoint directory: made private (0700) if new; an existing one
    must be this user's and writable by no one else (a checkpoint is loaded
    from it, so no one else may put files there)."""
    try:
        if not os.path.isdir(directory):
            os.makedirs(directory, mode=0o700, exist_ok=True)
            os.chmod(directory, 0o700)  # (makedirs' mode is masked by the umask)
        st = os.stat(directory)
    except OSError as e:
        raise Error(f"cannot create the checkpoint directory {directory}: {e.strerror or e}") from None
    if st.st_uid != os.getuid():
        raise Error(f"the checkpoint directory {directory} belongs to uid {st.st_uid}, not this user "
                    f"({os.getuid()})")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise Error(f"the checkpoint directory {directory} is writable by other users (chmod go-w)")
