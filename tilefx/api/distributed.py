"""Replicas over several processes: a training model's gradient sum on torch.distributed.

PopTorch users scale out with PopRun: several host processes, each driving
``replicationFactor`` replicas of its own (the global replication is that
times ``Options.Distributed.numProcesses``). tilefx does the same with
``torch.distributed`` (the gloo backend, on the CPU): each process runs its
own replicas on its own share of the data, and at every weight update the
processes sum their gradients before the optimizer runs. See
docs/distributed.md for the user's view.

Where the sum happens, and why here. The simulated replicas of one process
run one after another in the executor's host loop (tilefx/api/executor.py,
``_run``), which then adds their accumulators and calls ``@update``. With
several processes that sum takes in the other processes' replicas, in the
global replica order, before the update, with the same scaling (the
optimizer divides by the *global* replication for a mean reduction). Putting it in the IR as an op would only
move the same call behind a hook: the replica sum is not in the IR either,
and the backend must not import torch.

What travels between processes, and when:

* at the first compile of a training model: an all-gather of a hash of the
  options and of what the program depends on (input shapes, parameter and
  buffer shapes, optimizer), with a second all-gather of the values
  themselves when the hashes differ, to name them; then process 0's
  weights, buffers and optimizer state are broadcast (as
  ``DistributedDataParallel`` does at construction; PopRun users did it by
  hand with Horovod), so every process starts from the same point;
* at every training call: an all-gather of a hash of the step count and
  the optimizer's runtime values (setOptimizer) and, after a process copied
  weights from its host, of the weights, so processes out of step fail at
  once, naming what differs;
* at every weight update: the gradient accumulators, summed in the global
  replica order (``ProcessGroup.ordered_sum``: a chain of sends and a
  broadcast, so P processes of R replicas give the bits of one process of
  P x R replicas: a ring all-reduce adds in another order, and Adam turns
  the last-bit differences of near-zero gradients into visible ones), and
  an all-reduce of the automatic loss scaling counts;
* after every call whose model writes buffers (``broadcastBuffers``, the
  default): process 0's buffers (its replica 0's, the global replica 0) to
  every process, so the host sees the same buffers everywhere.

Inference models exchange nothing: each process runs its own replicas, which
also lets one process alone run a validation model.

Where the processes meet, and how a process of another job on the same
port is refused at once, is tilefx/api/rendezvous.py; resuming a run from
checkpoints, tilefx/api/checkpoint.py.

Nothing here unpickles: option values travel as JSON text in uint8 tensors.
A collective that fails (a process exited, a rendezvous that never
completes, a process that stops responding for longer than
``Options.Distributed.setTimeout``) raises ``tilefx.Error`` naming this
process, the operation and the rendezvous.
"""

from __future__ import annotations

import atexit
import datetime
import hashlib
import json
import logging
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from tilefx.errors import Error

log = logging.getLogger("tilefx")

# where the group tilefx made met, and its timeout (for messages)
_rendezvous: str | None = None
_timeout: float | None = None

# Options that may differ between processes: where each writes its logs and
# reports, and the process's own id.
_PER_PROCESS_OPTIONS = frozenset({
    "Distributed.process_id", "log_dir", "profile_dir", "executable_cache_dir",
    "show_compilation_progress_bar", "max_repeat_logs", "log_cycle_count",
})


_OPTIONS_DIFFER = ("the processes were given different options or programs (every process must compile "
                   "the same training model with the same options; found when the model was compiled)")
_STEPS_DIFFER = ("the processes are out of step (every process must make the same training calls with "
                 "the same setOptimizer values and, after copyWeightsToDevice, the same weights; found at "
                 "the start of a training call)")


def _dist():
    import torch.distributed as dist

    if not dist.is_available():
        raise Error("several processes (Options.Distributed.numProcesses > 1) need "
                    "torch.distributed, which this torch build does not have")
    return dist


class ProcessGroup:
    """This process's place among the processes of one job, and the collectives
    a training model needs (all of them on torch.distributed's default group)."""

    def __init__(self, options) -> None:
        d = options.Distributed
        self.rank: int = d.process_id
        self.size: int = d.num_processes
        self.rendezvous = rendezvous(options)
        # a collective waits as long as the group was told when it was made
        self.timeout: float = _timeout if _timeout is not None else d.timeout_seconds
        self.weights_reloaded = False  # set by copyWeightsToDevice: compare at the next call

    # -- the collectives -------------------------------------------------
    def check_same(self, values: dict[str, str], problem: str = _OPTIONS_DIFFER,
                   what: str = "the check that all processes compiled the same") -> None:
        """Raise an Error on every process unless all of them pass equal `values`
        (option and program values as text), naming those that differ."""
        text = json.dumps(values, sort_keys=True).encode()
        digest = torch.frombuffer(bytearray(hashlib.sha256(text).digest()), dtype=torch.uint8)
        digests = self._all_gather(digest, what)
        if all(torch.equal(d, digests[0]) for d in digests):
            return
        length = torch.tensor([len(text)], dtype=torch.int64)
        lengths = self._all_gather(length, "the exchange of the options")
        padded = torch.zeros(int(max(t.item() for t in lengths)), dtype=torch.uint8)
        padded[: len(text)] = torch.frombuffer(bytearray(text), dtype=torch.uint8)
        texts = self._all_gather(padded, "the exchange of the options")
        each = [json.loads(bytes(t[: int(n.item())].tolist()).decode()) for t, n in zip(texts, lengths)]
        differ = []
        for key in sorted(set().union(*each)):
            seen = [v.get(key, "<unset>") for v in each]
            if len(set(seen)) > 1:
                differ.append(f"{key}: " + ", ".join(f"process {p} = {_short(s)}" for p, s in enumerate(seen)))
        raise Error(f"process {self.rank} of {self.size}: {problem}: " + "; ".join(differ))

    def check_in_step(self, step: int, hypers: dict[str, Any], loss_scale: float,
                      weights: dict[str, np.ndarray]) -> None:
        """At each training call: every process has made the same number of
        weight updates and uses the same optimizer values (setOptimizer may
        change them after the compile); after any process copied weights from
        its host (copyWeightsToDevice, explicit or the implicit one after
        another executor of the model wrote them), the weights too. One all-gather of a flag and
        one of a hash."""
        what = f"the training call before weight update {step + 1}"
        values = {"weight updates so far": str(step), "loss scale": repr(float(loss_scale))}
        # each value as its own type prints it (float32: its shortest text, 0.05)
        values.update({f"optimizer {k}": str(np.asarray(v)[()]) for k, v in hypers.items()})
        flags = self._all_gather(torch.tensor([int(self.weights_reloaded)]), what)
        self.weights_reloaded = False
        if any(int(f.item()) for f in flags):
            h = hashlib.sha256()
            for name, w in weights.items():
                h.update(name.encode())
                h.update(np.ascontiguousarray(w).tobytes())
            values["weights (copyWeightsToDevice)"] = "sha256 " + h.hexdigest()[:16]
        self.check_same(values, _STEPS_DIFFER, what)

    def ordered_sum(self, replicas: list[dict[str, np.ndarray]], what: str) -> dict[str, np.ndarray]:
        """Every replica's arrays of every process summed one replica at a time in
        the global order (process 0's replicas first), as one process holding all
        the replicas adds them: the same bits, whatever the split. Process p
        receives the partial sum of the processes before it, adds its own
        replicas and passes it on; the last one broadcasts the total. That is an
        all-reduce with a fixed order: the same bytes travel (twice the arrays
        per process), over P hops instead of a ring."""
        dist = _dist()
        by_dtype: dict[np.dtype, list[str]] = {}
        for name, a in replicas[0].items():
            by_dtype.setdefault(np.asarray(a).dtype, []).append(name)
        out: dict[str, np.ndarray] = {}
        for names in by_dtype.values():
            flats = [np.concatenate([np.asarray(acc[n]).reshape(-1) for n in names]) for acc in replicas]
            if self.rank == 0:
                total, rest = flats[0], flats[1:]
            else:
                total, rest = np.empty_like(flats[0]), flats
                self._collective(what, dist.recv, torch.from_numpy(total), src=self.rank - 1)
            for f in rest:
                total = total + f
            if self.rank + 1 < self.size:
                self._collective(what, dist.send, torch.from_numpy(total), dst=self.rank + 1)
            total = np.ascontiguousarray(total)
            self._collective(what, dist.broadcast, torch.from_numpy(total), src=self.size - 1)
            pos = 0
            for n in names:
                shape = np.shape(replicas[0][n])
                size = int(np.prod(shape))
                out[n] = total[pos: pos + size].reshape(shape)
                pos += size
        return {n: out[n] for n in replicas[0]}

    def sum_counts(self, counts: list[int], what: str) -> list[int]:
        """Integers summed over the processes."""
        dist = _dist()
        t = torch.tensor(counts, dtype=torch.int64)
        self._collective(what, dist.all_reduce, t, op=dist.ReduceOp.SUM)
        return [int(v) for v in t.tolist()]

    def broadcast_arrays(self, arrays: dict[str, np.ndarray], what: str) -> dict[str, np.ndarray]:
        """Process 0's arrays on every process (one broadcast of their bytes; the
        names, shapes and dtypes are the same everywhere: check_same saw to it)."""
        dist = _dist()
        items = [(n, np.ascontiguousarray(a)) for n, a in arrays.items()]
        if not items:
            return {}
        raw = np.concatenate([a.reshape(-1).view(np.uint8) for _, a in items])
        self._collective(what, dist.broadcast, torch.from_numpy(raw), src=0)
        out, pos = {}, 0
        for n, a in items:
            out[n] = raw[pos: pos + a.nbytes].view(a.dtype).reshape(a.shape).copy()
            pos += a.nbytes
        return out

    # -- plumbing ----------------------------------------------------------
    def _all_gather(self, t: torch.Tensor, what: str) -> list[torch.Tensor]:
        out = [torch.empty_like(t) for _ in range(self.size)]
        self._collective(what, _dist().all_gather, out, t)
        return out

    def _collective(self, what: str, fn: Callable, *args: Any, **kwargs: Any) -> None:
        try:
            fn(*args, **kwargs)
        except (RuntimeError, OSError, TimeoutError) as e:
            raise Error(f"process {self.rank} of {self.size}: {what} failed: another process exited or "
                        f"did not take part within the timeout ({self.timeout:g} s, "
                        f"Options.Distributed.setTimeout; rendezvous {self.rendezvous}). Every process "
                        f"must run the same calls of its training model. ({type(e).__name__}: "
                        f"{_short(str(e), 300)})") from None


def rendezvous(options) -> str:
    """Join torch.distributed's default process group (or check the one the
    program made) as `options.Distributed` says; returns where the processes
    met, for messages. Once joined, a later call only checks."""
    global _rendezvous, _timeout
    d = options.Distributed
    rank, size, timeout = d.process_id, d.num_processes, d.timeout_seconds
    dist = _dist()
    if dist.is_initialized():
        world, own = dist.get_world_size(), dist.get_rank()
        if (world, own) != (size, rank):
            raise Error(f"process {rank} of {size} (Options.Distributed): torch.distributed is already "
                        f"initialised as rank {own} of {world}; configure the same process id and "
                        f"count (configureProcessId({own}, {world})) or none")
        return _rendezvous or "the process group the program initialised"
    if not options.Distributed.setup_process_groups:
        raise Error(f"process {rank} of {size}: Options.Distributed.disableProcessGroupsSetup() was "
                    "called but torch.distributed is not initialised: call "
                    "torch.distributed.init_process_group('gloo', ...) before the first training "
                    "call, or let tilefx do it")
    addr = os.environ.get("MASTER_ADDR", "")
    port_text = os.environ.get("MASTER_PORT", "")
    if not addr or not port_text:
        raise Error(f"process {rank} of {size}: no rendezvous: MASTER_ADDR={addr or '<unset>'} and "
                    f"MASTER_PORT={port_text or '<unset>'}; every process needs both, the address and a "
                    f"free port of the host of process 0 (torchrun sets them; by hand on one machine, "
                    f"e.g. MASTER_ADDR=127.0.0.1 MASTER_PORT=29500)")
    try:
        port = int(port_text)
    except ValueError:
        port = -1
    if not 0 < port < 65536:
        raise Error(f"process {rank} of {size}: no rendezvous: MASTER_PORT={port_text!r} is not a TCP "
                    "port (1-65535)")
    where = f"{addr}:{port}"
    log.info("process %d of %d: joining the process group at %s", rank, size, where)
    from tilefx.api.rendezvous import job_id, job_name, meet

    store = meet(rank, size, addr, port, timeout)  # this job's store, every process arrived
    try:
        dist.init_process_group("gloo", store=store, rank=rank, world_size=size,
                                timeout=datetime.timedelta(seconds=timeout))
    except (RuntimeError, ValueError, OSError, TimeoutError) as e:
        raise Error(f"process {rank} of {size} of job {job_name(job_id())}: the process group at {where} "
                    f"failed within {timeout:g} s (Options.Distributed.setTimeout): "
                    f"({type(e).__name__}: {_short(str(e), 300)})") from None
    _rendezvous, _timeout = where, timeout
    atexit.register(_leave)
    return where


def _leave() -> None:
    dist = _dist()
    if dist.is_initialized():
        try:
            dist.destroy_process_group()
        except (RuntimeError, OSError):  # a peer already gone: nothing left to tidy
            pass


def join_training_model(options, input_shapes: list[tuple], input_dtypes: list, weights: dict,
                        buffers: dict, opt_state: dict, opt_cfg: dict) -> ProcessGroup:
    """Join the other processes for a training model just compiled under
    `options`: check they compiled the same program with the same options,
    and give every process process 0's weights, buffers and optimizer state
    (written into `weights`, `buffers` and `opt_state`)."""
    group = ProcessGroup(options)
    values = describe_options(options)
    values["model.inputs"] = str([(tuple(s), str(d)) for s, d in zip(input_shapes, input_dtypes)])
    values["model.parameters"] = str([(n, w.shape, str(w.dtype)) for n, w in weights.items()])
    values["model.buffers"] = str([(n, np.shape(b)) for n, b in buffers.items()])
    # the optimizer by its hyper-parameters (grad_scale follows from the options)
    _flatten("optimizer", {k: v for k, v in opt_cfg.items() if k != "grad_scale"}, values)
    group.check_same(values)
    homes = {"w": weights, "b": buffers, "s": opt_state}
    start = group.broadcast_arrays({f"{kind}/{name}": value for kind, home in homes.items()
                                    for name, value in home.items()},
                                   "the broadcast of process 0's weights")
    for key, value in start.items():
        kind, name = key.split("/", 1)
        homes[kind][name] = value
    return group


def describe_options(options) -> dict[str, str]:
    """Every option that must agree between processes, as text by its path."""
    out: dict[str, str] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict) and prefix in ("", "Precision", "Training", "Jit", "Distributed",
                                                  "TensorLocations"):
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
            return
        if prefix in _PER_PROCESS_OPTIONS:
            return
        if hasattr(value, "op_sets"):  # an autocast Policy: its op sets, not its address
            value = {k: sorted(v) for k, v in value.op_sets().items()}
        from tilefx.api.options import _format_value

        out[prefix] = _format_value(value)

    walk("", options.toDict())
    return out


def _flatten(prefix: str, value: Any, out: dict[str, str]) -> None:
    """Nested dicts and lists as one text value per leaf, keyed by its path, so
    that a message names the one value that differs."""
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{prefix}.{k}", v, out)
    elif isinstance(value, (list, tuple)) and any(isinstance(v, (dict, list, tuple)) for v in value):
        for i, v in enumerate(value):
            _flatten(f"{prefix}[{i}]", v, out)
    else:
        out[prefix] = repr(value)


def _short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
