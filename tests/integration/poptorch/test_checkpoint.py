"""Resumable training (poptorch.ResumableTraining, api/checkpoint.py): a run
killed at a step and started again ends with the weights of a run never
interrupted, bit for bit, in one process and in two under torchrun
--max-restarts; a checkpoint is loaded only when it is this user's, whole,
signed with this user's key, of this job and of this model."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from checkpoint_train import EPOCHS, EVERY, train

import tilefx as poptorch
from tilefx.api import checkpoint

from repo_paths import REPO, TESTS

HERE, ROOT = TESTS, REPO  # the helper scripts' folder, the checkout
SCRIPT = os.path.join(HERE, "checkpoint_train.py")
STEPS = 12 * EPOCHS  # 96 samples in combined batches of 8
RUN_TIMEOUT = 400  # seconds for one launch: generous on a loaded 2-core machine


def _env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TORCHELASTIC_", "OMPI_COMM_WORLD_", "MASTER_", "TILEFX_JOB_ID"))
           and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env["PYTHONPATH"] = os.pathsep.join([ROOT, HERE, env.get("PYTHONPATH", "")])
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "TILEFX_BLAS_THREADS"):
        env[var] = "1"  # the same kernels in every run, whatever the load
    env.update(extra)
    return env


def _launch(cmd: list[str], **extra: str) -> str:
    proc = subprocess.Popen(cmd, env=_env(**extra), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        log = proc.communicate(timeout=RUN_TIMEOUT)[0]
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail(f"{cmd[:4]} did not finish within {RUN_TIMEOUT} s:\n{proc.communicate()[0][-3000:]}")
    assert proc.returncode == 0, log[-4000:]
    return log


def _weights(path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as f:
        return dict(f)


def _assert_same(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


# -- resuming ----------------------------------------------------------------------

def test_a_run_that_stops_resumes_to_the_same_weights(tmp_path):
    """In one process: a run that leaves its loop after step 8, then a new
    run on the same directory, against a run never stopped."""
    whole, full = train(str(tmp_path / "whole"))
    assert full.step == STEPS and full.resumed_from is None
    stopped, part = train(str(tmp_path / "stopped"), stop_at=8)
    assert part.step == 8
    assert any(w.shape and not np.array_equal(w, whole[k]) for k, w in stopped.items())
    resumed, again = train(str(tmp_path / "stopped"))
    assert os.path.basename(again.resumed_from) == f"process-0-of-1.step-{6:09d}.tilefx-ckpt"
    assert again.step == STEPS
    _assert_same(resumed, whole)
    # the newest two checkpoints are kept: the last one is the end of the run
    kept = sorted(os.listdir(tmp_path / "stopped"))
    assert kept == [f"process-0-of-1.step-{s:09d}.tilefx-ckpt" for s in (STEPS - STEPS % EVERY - EVERY, STEPS)]
    # a finished run started again trains no more
    done, finished = train(str(tmp_path / "stopped"))
    assert finished.step == STEPS
    _assert_same(done, whole)


def test_a_killed_writers_temporary_file_is_removed_when_stale(tmp_path):
    """A checkpoint's temporary file left by a killed writer goes at the next
    prune once older than the cache's stale age; a fresh one (a writer at
    work) stays."""
    import time

    from tilefx.driver import executable_cache

    directory = tmp_path / "ckpt"
    directory.mkdir(mode=0o700)
    stale, fresh = directory / "a.tilefx-ckpt.tmp", directory / "b.tilefx-ckpt.tmp"
    stale.write_bytes(b"x")
    fresh.write_bytes(b"y")
    old = time.time() - 2 * executable_cache.STALE_TMP_SECONDS
    os.utime(stale, (old, old))
    train(str(directory))
    assert not stale.exists() and fresh.exists()


def test_a_killed_process_resumes_to_the_same_weights(tmp_path):
    """One process killed with SIGKILL right after step 7 (the first epoch)
    or 16 (the second), before that step's checkpoint, and started again:
    the uninterrupted run's weights."""
    kills = (7, 16)
    runs = [[str(tmp_path / "whole"), str(tmp_path / "whole.npz"), None, 1]]
    for k in kills:
        runs += [[str(tmp_path / f"killed{k}"), str(tmp_path / f"killed{k}.npz"), k, 1]] * 2
    log = _launch([sys.executable, SCRIPT, "--runs", json.dumps(runs)])
    assert re.findall(r"^exit (-?\d+)$", log, re.M) == ["0"] + [str(-signal.SIGKILL), "0"] * len(kills), log[-3000:]
    whole = _weights(tmp_path / "whole.npz")
    for k in kills:
        resumed = (k - 1) // EVERY * EVERY  # the checkpoint of a step is written as the next one starts
        assert f"resumed from: process-0-of-1.step-{resumed:09d}.tilefx-ckpt" in log, log[-3000:]
        _assert_same(_weights(tmp_path / f"killed{k}.npz"), whole)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_torchrun_restarts_a_killed_process_group_to_the_same_weights(tmp_path):
    """Two processes under torchrun --max-restarts 1 (6 steps an epoch each):
    process 1 is killed with SIGKILL after step 11 (the second epoch, a new
    shard permutation); torchrun restarts both, which resume from step 9 and
    end with the weights of two processes never interrupted (forked from one
    launcher, which spares a torchrun start)."""
    whole = [[str(tmp_path / "whole"), str(tmp_path / "whole.npz"), None, 2]]
    assert re.findall(r"^exit (-?\d+)$", _launch([sys.executable, SCRIPT, "--runs", json.dumps(whole)]),
                      re.M) == ["0", "0"]
    log = _launch([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--max-restarts", "1",
                   "--master-port", str(_free_port()), SCRIPT, str(tmp_path / "killed"),
                   str(tmp_path / "killed.npz"), "11"], TILEFX_JOB_ID="killed")
    assert "resumed from: process-0-of-2.step-000000009.tilefx-ckpt" in log, log[-4000:]
    assert "process 1: SIGKILL after step 11" in log, log[-4000:]
    _assert_same(_weights(tmp_path / "killed.npz"), _weights(tmp_path / "whole.npz"))
    assert sorted(os.listdir(tmp_path / "killed")) == sorted(
        f"process-{r}-of-2.step-{s:09d}.tilefx-ckpt" for r in range(2) for s in (9, 12))


# -- what a checkpoint must be ---------------------------------------------------------

@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """A directory with the checkpoints of steps 3 and 6 of a run left after step 7."""
    d = tmp_path_factory.mktemp("written") / "ckpt"
    train(str(d), stop_at=7)
    return d


@pytest.fixture
def copy(written, tmp_path):
    """A private copy of `written`, and the path of its newest checkpoint."""
    d = tmp_path / "ckpt"
    d.mkdir(mode=0o700)
    for name in os.listdir(written):
        (d / name).write_bytes((written / name).read_bytes())
        os.chmod(d / name, 0o600)
    return d, d / f"process-0-of-1.step-{6:09d}.tilefx-ckpt"


def _rewrite(path, change_meta=None, change_part=None, manifest: str = "signed") -> None:
    """Rewrite a checkpoint with its JSON or a part changed; its manifest
    made again and signed with this user's key ("signed"), made again with
    the old signature ("old-hmac"), or kept ("old")."""
    with zipfile.ZipFile(path) as z:
        old = json.loads(z.read(checkpoint.MANIFEST))
        parts = {n: z.read(n) for n in checkpoint.PARTS}
    if change_meta is not None:
        meta = json.loads(parts[checkpoint.META])
        change_meta(meta)
        parts[checkpoint.META] = json.dumps(meta).encode()
    if change_part is not None:
        change_part(parts)
    new = json.loads(checkpoint._signed_manifest(parts)) if manifest != "old" else old
    if manifest == "old-hmac":
        new["hmac"] = old["hmac"]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(checkpoint.MANIFEST, json.dumps(new))
        for n, b in parts.items():
            z.writestr(n, b)
    path.write_bytes(buf.getvalue())


def test_resuming_reads_back_what_it_wrote(copy):
    d, newest = copy
    meta, arrays = checkpoint.read_file(str(newest))
    assert (meta["step"], meta["epoch"], meta["batch"], meta["processes"]) == (6, 0, 6, 1)
    assert {k.split("/", 1)[0] for k in arrays} == {"model", "host", "epoch_host"}
    assert arrays["model/weight/fc1.weight"].shape == (16, 6)


def test_a_changed_checkpoint_is_refused(copy):
    d, newest = copy
    _rewrite(newest, change_meta=lambda m: m.update(step=6000), manifest="old-hmac")  # without the key
    with pytest.raises(poptorch.Error, match="HMAC does not match: it was not written by this user"):
        train(str(d))


def test_a_checkpoint_signed_with_another_key_is_refused(copy, tmp_path, monkeypatch):
    d, newest = copy
    monkeypatch.setenv("TILEFX_CACHE_KEY_FILE", str(tmp_path / "another-users-key"))
    _rewrite(newest)  # signed with the other key
    monkeypatch.undo()
    with pytest.raises(poptorch.Error, match="HMAC does not match"):
        train(str(d))


def test_a_corrupted_part_is_refused(copy):
    d, newest = copy

    def flip(parts):
        b = bytearray(parts[checkpoint.ARRAYS])
        b[-1] ^= 1
        parts[checkpoint.ARRAYS] = bytes(b)

    _rewrite(newest, change_part=flip, manifest="old")  # the manifest keeps the old SHA-256
    with pytest.raises(poptorch.Error, match="arrays.safetensors is corrupted"):
        train(str(d))
    newest.write_bytes(b"PK\x03\x04 not a zip")
    os.chmod(newest, 0o600)
    with pytest.raises(poptorch.Error, match="not a tilefx checkpoint, or truncated"):
        train(str(d))


@pytest.mark.parametrize("change, message", [
    (lambda m: m.update(step=-1), "step must be an integer in"),
    (lambda m: m.update(job=5), "job must be a text"),
    (lambda m: m.update(extra=1), "must hold exactly the fields"),
    (lambda m: m["executor"].update(loss_scaling=[float("inf"), 0, 0, 0]), "loss_scaling must be"),
    (lambda m: m["executor"].update(rng={"bit_generator": "MT19937"}), "not a PCG64 state"),
    (lambda m: m["host"].update(numpy=["x", 0, 0.0]), "numpy random state is malformed"),
    (lambda m: m.update(process=3), "process must be an integer in"),
])
def test_a_signed_checkpoint_with_bad_fields_is_refused(copy, change, message):
    """Fields are checked even under this user's signature (a bug or an
    older tilefx must not make a run continue from nonsense)."""
    d, newest = copy
    _rewrite(newest, change_meta=change)
    with pytest.raises(poptorch.Error, match=message):
        train(str(d))


def test_a_checkpoint_of_another_job_is_refused(copy, monkeypatch):
    d, _ = copy
    monkeypatch.setenv("TILEFX_JOB_ID", "nightly")
    with pytest.raises(poptorch.Error, match=r"a checkpoint of job <unnamed>; this process is of job 'nightly'"):
        train(str(d))


def test_a_checkpoint_of_another_model_is_refused(copy):
    d, _ = copy
    with pytest.raises(poptorch.Error, match="a checkpoint of this job but of another model, optimizer or options"):
        train(str(d), seed=43)  # another Options.randomSeed


def test_checkpoints_of_another_process_count_are_refused(copy):
    d, newest = copy
    os.rename(newest, d / f"process-0-of-2.step-{6:09d}.tilefx-ckpt")
    with pytest.raises(poptorch.Error, match=r"holds checkpoints of 2 process\(es\) .*; this run has 1"):
        train(str(d))


def test_files_and_directories_of_others_are_refused(copy):
    d, newest = copy
    os.chmod(newest, 0o620)
    with pytest.raises(poptorch.Error, match="the checkpoint is writable by other users"):
        train(str(d))
    os.chmod(newest, 0o600)
    if os.getuid() == 0:  # (only root can give a file away)
        os.chown(newest, 4321, -1)
        with pytest.raises(poptorch.Error, match=r"the checkpoint is owned by uid 4321"):
            train(str(d))
        os.chown(newest, 0, -1)
    os.chmod(d, 0o777)
    with pytest.raises(poptorch.Error, match="the checkpoint directory .* is writable by other users"):
        train(str(d))


def test_the_size_caps_apply(copy, monkeypatch):
    d, _ = copy
    monkeypatch.setenv("TILEFX_MAX_EXECUTABLE_BYTES", "1KiB")
    with pytest.raises(poptorch.Error, match="TILEFX_MAX_EXECUTABLE_BYTES"):
        train(str(d))


def test_arguments_are_checked(tmp_path):
    import torch

    model = torch.nn.Linear(2, 2)
    trainer = poptorch.trainingModel(model, poptorch.Options(), torch.optim.SGD(model.parameters(), lr=0.1))
    for kwargs, message in [({"every_n_steps": 0}, "every_n_steps must be an integer >= 1"),
                            ({"epochs": "2"}, "epochs must be an integer >= 1"),
                            ({"directory": None}, "directory must be a path")]:
        args = {"trainer": trainer, "loader": [], "directory": str(tmp_path), **kwargs}
        with pytest.raises(poptorch.Error, match=message):
            poptorch.ResumableTraining(**args)
    with pytest.raises(poptorch.Error, match="trainer must be a poptorch.trainingModel, got Linear"):
        poptorch.ResumableTraining(model, [], str(tmp_path))


def _change_arrays(change):
    def apply(parts):
        from safetensors.numpy import load, save

        arrays = load(parts[checkpoint.ARRAYS])
        change(arrays)
        parts[checkpoint.ARRAYS] = save(arrays)
    return apply


@pytest.mark.parametrize("change, message", [
    (lambda a: a.update({"host/torch": a["host/torch"][:100]}), "the torch random state is not one this host"),
    (lambda a: a.update({"epoch_host/extra": np.zeros(3, np.uint8)}), "the extra random state is not one"),
    (lambda a: a.pop("host/python"), "the python random state is missing"),
    (lambda a: a.update({"model/weight/fc1.weight": np.zeros((6, 16), np.float32)}),
     r"weight/fc1.weight is float32\[6, 16\] in the checkpoint, float32\[16, 6\] in this model"),
    (lambda a: a.pop("model/state/fc2.bias/exp_avg"), "does not hold this model's training state"),
])
def test_a_signed_checkpoint_with_bad_arrays_is_refused(copy, change, message):
    d, newest = copy
    _rewrite(newest, change_part=_change_arrays(change))
    with pytest.raises(poptorch.Error, match=message):
        train(str(d))


# -- only tilefx.Error escapes, whatever the bytes ------------------------------------

_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                                  max_size=4), max_leaves=8)
_FUZZ = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                 suppress_health_check=list(HealthCheck))


@_FUZZ
@given(flips=st.lists(st.tuples(st.integers(min_value=0), st.integers(min_value=1, max_value=255)),
                      min_size=1, max_size=4))
def test_changed_bytes_are_an_error_or_nothing(written, tmp_path_factory, flips):
    """Bytes of a checkpoint changed anywhere: reading it raises tilefx.Error
    (or, for bytes no check covers, such as a zip timestamp, reads what was
    written)."""
    source = written / f"process-0-of-1.step-{6:09d}.tilefx-ckpt"
    data = bytearray(source.read_bytes())
    for pos, xor in flips:
        data[pos % len(data)] ^= xor
    path = tmp_path_factory.mktemp("fuzz") / source.name
    path.write_bytes(bytes(data))
    os.chmod(path, 0o600)
    try:
        meta, _ = checkpoint.read_file(str(path))
    except poptorch.Error:
        return
    assert meta == checkpoint.read_file(str(source))[0]


@_FUZZ
@given(path=st.lists(st.sampled_from(["executor", "host", "epoch_host", "numpy", "python", "rng", "loss_scaling",
                                      "replica_rngs", "step", "job", "process", 0, 1]), min_size=1, max_size=3),
       value=_JSON)
def test_signed_fields_of_any_value_are_an_error_or_valid(copy_once, path, value):
    """A field of the JSON replaced by any JSON value, signed with this
    user's key: reading and resuming raise tilefx.Error, never another
    exception."""
    d, newest, original = copy_once
    newest.write_bytes(original)

    def change(meta):
        node = meta
        for key in path[:-1]:
            if isinstance(node, dict) and key in node:
                node = node[key]
            elif isinstance(node, list) and isinstance(key, int) and key < len(node):
                node = node[key]
        if isinstance(node, dict):
            node[path[-1] if isinstance(path[-1], str) else "step"] = value
        elif isinstance(node, list) and node:
            node[path[-1] if isinstance(path[-1], int) and path[-1] < len(node) else 0] = value

    _rewrite(newest, change_meta=change)
    from tilefx.runner.weight_update import rng_from_json

    before = checkpoint.host_random_state([])
    try:
        meta, arrays = checkpoint.read_file(str(newest))
        checkpoint.set_host_random_state([], checkpoint._sub(arrays, "host/"), meta["host"], str(newest))
        for state in [meta["executor"]["rng"], *meta["executor"]["replica_rngs"]]:
            rng_from_json(state, str(newest))
    except poptorch.Error:
        pass
    finally:
        checkpoint.set_host_random_state([], *before, "the test's own state")  # this process's streams as they were


@pytest.fixture(scope="module")
def copy_once(written, tmp_path_factory):
    d = tmp_path_factory.mktemp("signed") / "ckpt"
    d.mkdir(mode=0o700)
    newest = d / f"process-0-of-1.step-{6:09d}.tilefx-ckpt"
    original = (written / newest.name).read_bytes()
    newest.write_bytes(original)
    os.chmod(newest, 0o600)
    return d, newest, original
