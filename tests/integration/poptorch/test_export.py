"""Precompilation and executable caching (PopTorch user guide, 4.10 "Precompilation and caching"):
compileAndExport,
poptorch.load(edit_opts_fn), loadExecutable, the executable cache; files are
verified, never unpickled."""

from __future__ import annotations

import copy
import json
import logging
import os
import zipfile

import pytest
import torch

import tilefx as poptorch
from tilefx.driver import executable as file_format


class ExampleModelWithLoss(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(10, 10)
        self.bn = torch.nn.BatchNorm1d(10)
        self.loss = torch.nn.MSELoss()

    def forward(self, x, target=None):
        fc = self.bn(self.fc(x))
        if self.training:
            return fc, self.loss(fc, target)
        return fc


def _data():
    g = torch.Generator().manual_seed(1)
    return torch.randn(4, 10, generator=g), torch.randn(4, 10, generator=g)


def test_export_then_load_continues_training_exactly(tmp_path):
    torch.manual_seed(0)
    x, t = _data()
    model = ExampleModelWithLoss()
    trained = poptorch.trainingModel(model, optimizer=poptorch.optim.Adam(model.parameters(), lr=0.01))
    trained(x, t)
    path = tmp_path / "training.poptorch"
    trained.compileAndExport(str(path), x, t)
    seen = []
    loaded = poptorch.load(str(path), edit_opts_fn=lambda o: seen.append(o.device_iterations))
    assert seen == [1]
    for _ in range(2):  # the same weights, Adam state and step: the same next steps
        a, b = trained(x, t), loaded(x, t)
        for u, v in zip(a, b):
            torch.testing.assert_close(u, v, rtol=0, atol=0)
    loaded.copyWeightsToHost()
    trained.copyWeightsToHost()
    torch.testing.assert_close(loaded.model.fc.weight, model.fc.weight, rtol=0, atol=0)
    torch.testing.assert_close(loaded.model.bn.running_mean, model.bn.running_mean, rtol=0, atol=0)
    with zipfile.ZipFile(path) as z:  # plain parts only: text IR, JSON, safetensors
        assert sorted(z.namelist()) == sorted(file_format.PARTS + (file_format.MANIFEST,))
        manifest = json.loads(z.read(file_format.MANIFEST))
        assert manifest["tilefx_version"] == poptorch.__version__
        assert "func.func @update" in z.read("graph.mlir").decode()


def test_an_executable_compiled_offline_loads_and_trains_like_torch(tmp_path):
    """The guide's precompilation story (PopTorch user guide, 4.10.2 "Precompilation"): compile with
    useOfflineIpuTarget on a machine without an IPU, export, then poptorch.load the
    file elsewhere and run it. The offline target describes the compiling machine:
    load used to keep it, so the loaded model refused to run."""
    torch.manual_seed(0)
    x, t = _data()
    model = ExampleModelWithLoss()
    reference = ExampleModelWithLoss()
    reference.load_state_dict(model.state_dict())
    opts = poptorch.Options()
    opts.useOfflineIpuTarget(poptorch.ipuHardwareVersion())
    offline = poptorch.trainingModel(model, opts, poptorch.optim.SGD(model.parameters(), lr=0.1))
    path = tmp_path / "offline.poptorch"
    offline.compileAndExport(str(path), x, t)
    with pytest.raises(poptorch.Error, match="offline IPU target"):
        offline(x, t)  # the compiling machine still cannot run it
    with pytest.raises(AssertionError, match="Trying to run a model on an offline device"):
        offline(x, t)  # PopTorch's class and words
    loaded = poptorch.load(str(path))
    assert not loaded.options.offline_ipu_target
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    for _ in range(2):
        out, loss = loaded(x, t)
        optimizer.zero_grad()
        want_out, want_loss = reference(x, t)
        want_loss.backward()
        optimizer.step()
        torch.testing.assert_close(loss, want_loss.detach(), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(out, want_out.detach(), rtol=1e-5, atol=1e-6)
    loaded.copyWeightsToHost()
    torch.testing.assert_close(loaded.model.fc.weight, reference.fc.weight.detach(), rtol=1e-5, atol=1e-6)
    # edit_opts_fn still decides: it sees the options after the offline target is dropped
    still = poptorch.load(str(path), edit_opts_fn=lambda o: o.useOfflineIpuTarget())
    with pytest.raises(poptorch.Error, match="offline IPU target"):
        still(x, t)


def test_load_applies_only_run_time_options_from_edit_opts_fn(tmp_path, caplog):
    """PopTorch user guide, 4.10.2 "Precompilation": "only run-time options will be applied; all others will
    be ignored". deviceIterations(5) on an executable compiled with 1 is ignored
    (with a warning naming it) instead of failing at the call; the IPU id and the
    seed are taken."""
    torch.manual_seed(0)
    x, _ = _data()
    model = ExampleModelWithLoss().eval()
    path = tmp_path / "inference.poptorch"
    poptorch.inferenceModel(model).compileAndExport(str(path), x)

    def edit(opts):
        opts.deviceIterations(5).useIpuId(1).randomSeed(7)
        opts.Training.gradientAccumulation(3)

    with caplog.at_level(logging.WARNING, logger="tilefx"):  # tilefx's records reach the root
        loaded = poptorch.load(str(path), edit_opts_fn=edit)
        ignored = caplog.text
        caplog.clear()
        poptorch.load(str(path), edit_opts_fn=lambda o: o.useIpuId(1))
        assert "compile-time" not in caplog.text  # a run-time edit only: nothing to say
    assert "ignored: Training.gradient_accumulation, device_iterations" in ignored
    opts = loaded.options
    assert (opts.device_iterations, opts.Training.gradient_accumulation) == (1, 1)
    assert (opts.ipu_id, opts.random_seed) == (1, 7)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), model(x), rtol=1e-5, atol=1e-6)


def test_a_loaded_executable_checks_its_inputs(tmp_path):
    """An executable loaded from a file refuses inputs of other shapes,
    dtypes or counts than it was compiled for (a tilefx.Error naming them,
    not a kernel's failure or rows silently dropped), including a batch
    another wrapper's options would split; a second tensor is the model's
    `target`, which the compiled call left out."""
    torch.manual_seed(0)
    x, _ = _data()
    model = ExampleModelWithLoss().eval()
    path = tmp_path / "inference.poptorch"
    poptorch.inferenceModel(model).compileAndExport(str(path), x)
    loaded = poptorch.load(str(path))
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), model(x), rtol=1e-5, atol=1e-6)
    for bad, what in ((x[:, :5], r"\(\d+, 5\)"), (torch.cat([x, x]), "compiled for"),
                      (x.double(), "float64"), (x.long(), "int64")):
        with pytest.raises(poptorch.Error, match=what):
            loaded(bad)
    with pytest.raises(poptorch.Error, match="Type mismatch for target: expected None"):
        loaded(x, x)
    other = poptorch.inferenceModel(model, poptorch.Options().deviceIterations(2))
    other.loadExecutable(str(path))
    with pytest.raises(poptorch.Error, match="deviceIterations"):
        other(torch.cat([x, x[:1]]))


class _KeywordModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, batch, mask=None, scale=2.0):
        return self.fc(batch["x"]) * scale + batch["y"] + (0 if mask is None else mask)


@pytest.mark.parametrize("training", [False, True])
def test_a_loaded_executable_is_called_as_the_model_was(tmp_path, training):
    """The file records how the compiled call bound its arguments (JSON: the
    pytree structure, the non-tensor values, forward's signature), so the
    executor poptorch.load makes, which has no model code, takes the
    original call: a dict input, a keyword tensor, defaults. Other
    structures or values are PopTorch's mismatch errors; the tensors passed
    flat in order still run (files without a recorded call take only that)."""
    torch.manual_seed(0)
    model = _KeywordModel()
    batch = {"x": torch.randn(2, 4), "y": torch.randn(2, 3)}
    mask = torch.randn(2, 3)
    path = str(tmp_path / "keywords.poptorch")
    if training:
        class WithLoss(torch.nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, batch, mask=None, scale=2.0):
                out = self.inner(batch, mask, scale)
                return out, (out ** 2).mean()

        wrapped = WithLoss(model)
        trained = copy.deepcopy(wrapped)
        poptorch.trainingModel(trained, optimizer=torch.optim.SGD(trained.parameters(), lr=0.1)) \
            .compileAndExport(path, batch, mask=mask)
        with torch.no_grad():
            want = wrapped(batch, mask)[0]
    else:
        poptorch.inferenceModel(model).compileAndExport(path, batch, mask=mask)
        with torch.no_grad():
            want = model(batch, mask=mask)
    loaded = poptorch.load(path)

    def out(r):
        return r[0] if training else r

    if not training:  # (a training call steps the weights: one call to compare)
        torch.testing.assert_close(out(loaded(batch, mask=mask)), want, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(out(loaded(batch, mask, 2.0)), want, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(out(loaded(batch["x"], batch["y"], mask)), want, rtol=1e-5, atol=1e-6)
    else:
        torch.testing.assert_close(out(loaded(batch, mask=mask)), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(poptorch.Error, match="Value mismatch for scale: expected 2.0 but got 3.0"):
        loaded(batch, mask=mask, scale=3.0)
    with pytest.raises(poptorch.Error, match="Type mismatch for mask: expected a Tensor but got None"):
        loaded(batch)
    with pytest.raises(poptorch.Error, match="structure"):
        loaded({"x": batch["x"]}, mask=mask)


class _TensorDefaults(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 3)

    def forward(self, x, y=torch.ones(3), z=torch.full((3,), 0.5, dtype=torch.bfloat16)):
        return self.fc(x) * z.float() + y


def test_a_loaded_executable_binds_the_tensor_defaults_as_inputs(tmp_path):
    """Tensor defaults of forward are inputs of the program (as in PopTorch):
    the file stores their values (a bfloat16 one as float32, with its dtype
    recorded), so poptorch.load's executor, without the model's code, fills
    them in when the call leaves them out and takes new values when passed."""
    torch.manual_seed(0)
    model = _TensorDefaults().eval()
    x, y, z = torch.randn(2, 3), torch.randn(3), torch.randn(3).bfloat16()
    path = str(tmp_path / "defaults.poptorch")
    poptorch.inferenceModel(model).compileAndExport(path, x)
    loaded = poptorch.load(path)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), model(x), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(loaded(x, y), model(x, y), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(loaded(x, z=z), model(x, z=z), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(loaded(x, y, z), model(x, y, z), rtol=1e-5, atol=1e-6)
    with pytest.raises(poptorch.Error, match="input 2 is"):
        loaded(x, z=torch.randn(4).bfloat16())
    # float32 where bfloat16 was compiled (numpy holds both as float32): the
    # file records torch's dtypes
    with pytest.raises(poptorch.Error, match="input 2 is torch.float32; this executable was compiled for "
                                             "torch.bfloat16"):
        loaded(x, z=z.float())


def test_a_tampered_recorded_call_is_a_clear_error(tmp_path):
    """A recorded call that is not what tilefx writes (a leaf of another
    type, a spec pytree cannot read) fails the load naming the file."""
    import hashlib
    import json
    import zipfile

    model = _KeywordModel().eval()
    path = tmp_path / "keywords.poptorch"
    poptorch.inferenceModel(model).compileAndExport(str(path), {"x": torch.randn(2, 4), "y": torch.randn(2, 3)})
    for change in ({"spec": "not a spec"}, {"leaves": [[1, 2]]}, {"signature": [{"name": "x", "kind": "NOPE"}]}):
        with zipfile.ZipFile(path) as z:
            parts = {n: z.read(n) for n in z.namelist()}
        meta = json.loads(parts["executor.json"])
        meta["call"] = {**meta["call"], **change}
        parts["executor.json"] = json.dumps(meta).encode()
        manifest = json.loads(parts["manifest.json"])
        manifest["parts"]["executor.json"] = {"sha256": hashlib.sha256(parts["executor.json"]).hexdigest(),
                                              "size": len(parts["executor.json"])}
        parts["manifest.json"] = json.dumps(manifest).encode()
        bad = tmp_path / "bad.poptorch"
        with zipfile.ZipFile(bad, "w") as z:
            for n, v in parts.items():
                z.writestr(n, v)
        with pytest.raises(poptorch.Error, match="recorded call is malformed"):
            poptorch.load(str(bad))


def test_load_executable_into_a_wrapper_and_export_model_false(tmp_path):
    torch.manual_seed(0)
    x, _ = _data()
    model = ExampleModelWithLoss().eval()
    path = tmp_path / "validation.poptorch"
    poptorch.inferenceModel(model).compileAndExport(str(path), x, export_model=False)
    with pytest.raises(poptorch.Error, match="export_model=False"):
        poptorch.load(str(path))
    again = poptorch.inferenceModel(model)
    again.loadExecutable(str(path))
    assert again.isCompiled()
    torch.testing.assert_close(again(x), model(x), rtol=1e-5, atol=1e-6)
    with pytest.raises(poptorch.Error, match="holds an inference executable"):
        poptorch.trainingModel(ExampleModelWithLoss()).loadExecutable(str(path))


def test_load_executable_into_a_model_of_other_shapes_is_a_clear_error(tmp_path):
    """A wrapper whose parameters have the file's names but other shapes or
    dtypes failed at the first call, deep in a reshape."""
    x, _ = _data()
    path = tmp_path / "validation.poptorch"
    poptorch.inferenceModel(ExampleModelWithLoss().eval()).compileAndExport(str(path), x)
    narrower = ExampleModelWithLoss().eval()
    narrower.fc = torch.nn.Linear(10, 5)
    with pytest.raises(poptorch.Error, match=r"parameter 'fc.weight' is \(10, 10\) float32, the model's "
                                             r"\(5, 10\) float32: it was exported from a different model"):
        poptorch.inferenceModel(narrower).loadExecutable(str(path))
    with pytest.raises(poptorch.Error, match=r"parameter 'fc.weight' is \(10, 10\) float32, the model's "
                                             r"\(10, 10\) float64"):
        poptorch.inferenceModel(ExampleModelWithLoss().eval().double()).loadExecutable(str(path))


def test_truncated_tampered_or_foreign_files_are_clear_errors(tmp_path):
    x, _ = _data()
    path = tmp_path / "m.poptorch"
    poptorch.inferenceModel(ExampleModelWithLoss().eval()).compileAndExport(str(path), x)
    data = path.read_bytes()
    (tmp_path / "trunc").write_bytes(data[: len(data) // 2])
    with pytest.raises(poptorch.Error, match="truncated"):
        poptorch.load(str(tmp_path / "trunc"))
    with zipfile.ZipFile(path) as z, zipfile.ZipFile(tmp_path / "tampered", "w") as w:
        for n in z.namelist():
            b = z.read(n)
            w.writestr(n, b.replace(b"aten.relu", b"aten.tanh") + (b" " if n == "weights.safetensors" else b""))
    with pytest.raises(poptorch.Error, match="part weights.safetensors has .* bytes|corrupted"):
        poptorch.load(str(tmp_path / "tampered"))
    with zipfile.ZipFile(path) as z, zipfile.ZipFile(tmp_path / "newer", "w") as w:
        for n in z.namelist():
            b = z.read(n)
            if n == file_format.MANIFEST:
                m = json.loads(b)
                m["tilefx_version"] = "99.0"
                b = json.dumps(m).encode()
            w.writestr(n, b)
    with pytest.raises(poptorch.Error, match="exported by tilefx 99.0.*must match exactly"):
        poptorch.load(str(tmp_path / "newer"))
    (tmp_path / "pickle").write_bytes(b"\x80\x04K\x01.")
    with pytest.raises(poptorch.Error, match="not a tilefx executable"):
        poptorch.load(str(tmp_path / "pickle"))


def test_executable_cache_hit_skips_tracing(tmp_path, monkeypatch):
    x, _ = _data()
    traced = []
    from tilefx.api import compiling as api_executor  # the compile path traces

    real_trace = api_executor.trace
    monkeypatch.setattr(api_executor, "trace", lambda *a, **k: traced.append(1) or real_trace(*a, **k))
    outs = []
    for _ in range(2):
        torch.manual_seed(0)
        model = ExampleModelWithLoss().eval()
        opts = poptorch.Options().enableExecutableCaching(str(tmp_path / "cache"))
        outs.append(poptorch.inferenceModel(model, opts)(x))
    assert traced == [1]  # the second executor came from the cache
    assert [p.suffix for p in sorted((tmp_path / "cache").iterdir())] == [".tilefx", ".mac"]  # entry, its MAC
    torch.testing.assert_close(outs[0], outs[1], rtol=0, atol=0)
    monkeypatch.setenv("POPTORCH_CACHE_DIR", str(tmp_path / "env_cache"))
    model = ExampleModelWithLoss().eval()
    poptorch.inferenceModel(model)(x[:2])  # other shapes: another key
    assert len([p for p in (tmp_path / "env_cache").iterdir() if p.suffix == ".tilefx"]) == 1


class _Dropped(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(10, 10)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x, target):
        out = self.drop(self.fc(x))
        return out, torch.nn.functional.mse_loss(out, target)


def test_save_writes_a_compiled_model_and_its_random_stream(tmp_path):
    """PopTorch's `executor.save(filename, export_model=True, save_rng_state=True)`
    on a model compiled by its calls: the loaded model continues the weights,
    the optimizer state and (save_rng_state) the dropout stream exactly where
    the saved one stopped; without the state it starts again from the seed."""
    x, t = _data()
    torch.manual_seed(0)
    opts = poptorch.Options().randomSeed(7)
    model = _Dropped()
    trainer = poptorch.trainingModel(model, opts, poptorch.optim.Adam(model.parameters(), lr=0.01))
    with pytest.raises(poptorch.Error, match="has not been compiled"):
        trainer.save(str(tmp_path / "early.poptorch"))
    for _ in range(3):
        trainer(x, t)
    trainer.save(str(tmp_path / "with_rng.poptorch"))
    trainer.save(str(tmp_path / "no_rng.poptorch"), save_rng_state=False)
    with pytest.raises(poptorch.Error, match="save_rng_state must be a bool"):
        trainer.save(str(tmp_path / "bad.poptorch"), save_rng_state="yes")
    want = [trainer(x, t) for _ in range(2)]
    trainer.copyWeightsToHost()
    loaded = poptorch.load(str(tmp_path / "with_rng.poptorch"))
    got = [loaded(x, t) for _ in range(2)]
    for (wo, wl), (go, gl) in zip(want, got):
        torch.testing.assert_close(go, wo, rtol=0, atol=0)
        torch.testing.assert_close(gl, wl, rtol=0, atol=0)
    loaded.copyWeightsToHost()
    torch.testing.assert_close(loaded.model.fc.weight, model.fc.weight, rtol=0, atol=0)
    restarted = poptorch.load(str(tmp_path / "no_rng.poptorch"))
    out, _ = restarted(x, t)
    assert not torch.equal((out == 0), (want[0][0] == 0))  # another dropout mask


def test_compile_and_export_into_a_directory_and_unwritable_paths(tmp_path):
    """PopTorch's compileAndExport(directory, ...) writes one file there (it
    was an IsADirectoryError from os.replace); a path that cannot be written
    is a tilefx.Error naming it, not an OSError from deep inside."""
    x, t = _data()
    model = ExampleModelWithLoss().eval()
    opts = poptorch.Options().useOfflineIpuTarget()
    poptorch.inferenceModel(model, opts).compileAndExport(str(tmp_path), x)
    files = os.listdir(tmp_path)
    assert files == ["model.poptorch"]
    loaded = poptorch.load(str(tmp_path / "model.poptorch"))
    torch.testing.assert_close(loaded(x), model(x), rtol=1e-6, atol=1e-6)
    # the directory itself loads (the file in it), and a path ending in a
    # separator is a directory to make (it was "Not a directory")
    torch.testing.assert_close(poptorch.load(str(tmp_path))(x), model(x), rtol=1e-6, atol=1e-6)
    poptorch.inferenceModel(model, opts).compileAndExport(str(tmp_path / "new" / "sub") + os.sep, x)
    assert os.listdir(tmp_path / "new" / "sub") == ["model.poptorch"]
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    with pytest.raises(poptorch.Error, match="cannot write the executable to .*a_file"):
        poptorch.inferenceModel(model, opts).compileAndExport(str(blocker / "m.poptorch"), x)


def test_constants_are_stored_once_and_the_loaded_ir_carries_them(tmp_path):
    """The IR texts of a file go without the constants' `tilefx.value`s (the values
    are in weights.safetensors, so a large constant is written once); a loaded
    executable puts them back: its IR at every level is the compiled one's, and
    it runs as the model does."""
    from models import WithConstants

    torch.manual_seed(0)
    model = WithConstants().eval()
    x, idx = torch.randn(5, 4), torch.randint(0, 40, (5,))
    compiled = poptorch.inferenceModel(model)
    compiled(x, idx)
    path = str(tmp_path / "consts.popef")
    compiled.save(path)
    with zipfile.ZipFile(path) as z:
        for part in ("graph.mlir", "import.mlir"):
            text = z.read(part).decode()
            assert 'tilefx.const = "table"' in text and "tilefx.value" not in text, part
    loaded = poptorch.load(path)
    for level in ("import", "graph", "device"):
        assert loaded.ir(level) == compiled.ir(level), level
        assert 'tilefx.const = "table", tilefx.value = dense<"0x' in loaded.ir(level)
    assert torch.equal(loaded(x, idx), model(x, idx))
