"""An executable file is data from someone else: its fields are typed and
bounded, host settings are never taken from it and sizes are checked
before anything is read (api/executable_schema.py, docs/security.md)."""

from __future__ import annotations

import json
import os
import time
import zipfile

import pytest
import torch

import tilefx as poptorch
from executable_parts import rewritten


class _Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 3)

    def forward(self, x):
        return torch.relu(self.fc(x))


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    path = tmp_path_factory.mktemp("exe") / "m.poptorch"
    torch.manual_seed(0)
    poptorch.inferenceModel(_Model().eval()).compileAndExport(str(path), torch.ones(2, 6))
    return path


def _edit_json(part, fn):
    def edit(name, data):
        if name != part:
            return data
        value = json.loads(data)
        out = fn(value)
        return out if isinstance(out, bytes) else json.dumps(value).encode()
    return edit


def test_a_host_path_in_the_options_is_refused_and_nothing_written_there(exported, tmp_path):
    evil = tmp_path / "chosen_by_the_file"
    path = rewritten(exported, tmp_path / "x.poptorch",
                    _edit_json("options.json", lambda o: o.__setitem__("profile_dir", str(evil))))
    with pytest.raises(poptorch.Error, match="profile_dir is a setting of the loading host"):
        poptorch.load(path)
    assert not evil.exists()
    for key in ("log_dir", "executable_cache_dir"):
        path = rewritten(exported, tmp_path / f"{key}.poptorch",
                        _edit_json("options.json", lambda o, k=key: o.__setitem__(k, str(evil))))
        with pytest.raises(poptorch.Error, match=f"{key} is a setting of the loading host"):
            poptorch.load(path)
    path = rewritten(exported, tmp_path / "popart.poptorch",
                    _edit_json("options.json", lambda o: o.__setitem__("_Popart", {"logDir": str(evil)})))
    with pytest.raises(poptorch.Error, match="names a path on the host"):
        poptorch.load(path)


def test_the_exported_options_hold_no_host_setting(exported):
    with zipfile.ZipFile(exported) as z:
        options = json.loads(z.read("options.json"))
    assert not set(options) & {"log_dir", "profile_dir", "executable_cache_dir"}


def test_a_huge_replication_factor_is_a_prompt_error_naming_the_limit(exported, tmp_path):
    path = rewritten(exported, tmp_path / "x.poptorch",
                    _edit_json("options.json", lambda o: o.__setitem__("replication_factor", 10**12)))
    start = time.monotonic()
    with pytest.raises(poptorch.Error, match="replication_factor must be <= 256.*IPU-POD256"):
        poptorch.load(path)
    assert time.monotonic() - start < 60  # (a bound on a hang, not a timing)


@pytest.mark.parametrize("part,edit,message", [
    ("options.json", lambda o: o.__setitem__("device_iterations", "4"), "device_iterations: must be an int"),
    ("options.json", lambda o: o.__setitem__("stable_norm", 1), "stable_norm: must be a bool"),
    ("options.json", lambda o: o.__setitem__("no_such_option", 1), "unknown option no_such_option"),
    ("options.json", lambda o: o["Training"].__setitem__("gradient_accumulation", 2**40), "Poplar's 32-bit"),
    ("options.json", lambda o: o.__setitem__("output_mode", {"__enum__": "OutputMode", "name": "Nope"}),
     "unknown enum value"),
    ("options.json", lambda o: o.__setitem__("machine", "mk9"), "unknown machine"),
    ("options.json", lambda o: o.__setitem__("Precision", []), "Precision. must be an object|must be an object"),
    ("executor.json", lambda m: m.__setitem__("num_inputs", "1"), "num_inputs: must be an int"),
    ("executor.json", lambda m: m.pop("params"), "'params' is missing"),
    ("executor.json", lambda m: m.__setitem__("surprise", 1), "unknown field"),
    ("executor.json", lambda m: m.__setitem__("input_dtypes", ["object"]), "input_dtypes: must list"),
    ("executor.json", lambda m: m.__setitem__("input_shapes", [[10**6] * 6]), "TILEFX_MAX_TENSOR_BYTES"),
    ("executor.json", lambda m: m.__setitem__("out_spec", "[1, 2"), "out_spec is not a valid"),
    ("executor.json", lambda m: m.__setitem__("params", ["nope"]), "lacks the weights param/nope"),
    ("executor.json", lambda m: b"[" * 20000 + b"]" * 20000, "nested deeper than"),
    ("executor.json", lambda m: json.dumps({**m, "step": 0}).replace('"step": 0', '"step": ' + "9" * 5001).encode(),
     "number of digits"),
    ("options.json", lambda o: b'{"device_iterations": 1' + b"0" * 5000 + b"}", "number of digits"),
])
def test_mistyped_or_unbounded_fields_are_clear_errors(exported, tmp_path, part, edit, message):
    path = rewritten(exported, tmp_path / "x.poptorch", _edit_json(part, edit))
    with pytest.raises(poptorch.Error, match=message):
        poptorch.load(path)


def test_sizes_are_checked_before_anything_is_read(exported, tmp_path, monkeypatch):
    from tilefx import limits

    # a 4 GiB size field on a small part: refused from the archive's directory
    monkeypatch.setenv("TILEFX_MAX_EXECUTABLE_BYTES", "1MiB")
    big = rewritten(exported, tmp_path / "big.poptorch",
                   lambda n, b: b + bytes(2 << 20) if n == "weights.safetensors" else b)
    with pytest.raises(poptorch.Error, match="more than the limit.*TILEFX_MAX_EXECUTABLE_BYTES"):
        poptorch.load(big)
    monkeypatch.setenv("TILEFX_MAX_EXECUTABLE_BYTES", "4GiB")
    # a compression bomb: parts far larger than the file
    monkeypatch.setattr(limits, "RATIO_FREE_BYTES", 0)
    with pytest.raises(poptorch.Error, match="ratio.*TILEFX_MAX_COMPRESSION_RATIO"):
        poptorch.load(big)
    monkeypatch.setenv("TILEFX_MAX_EXECUTABLE_JSON_BYTES", "100")
    with pytest.raises(poptorch.Error, match="manifest.json: the JSON part's size"):
        poptorch.load(str(exported))
    monkeypatch.setenv("TILEFX_MAX_EXECUTABLE_JSON_BYTES", "lots")
    with pytest.raises(poptorch.Error, match="TILEFX_MAX_EXECUTABLE_JSON_BYTES='lots'"):
        poptorch.load(str(exported))


def test_a_raised_limit_admits_the_file(exported, monkeypatch):
    monkeypatch.setenv("TILEFX_MAX_COMPRESSION_RATIO", "100000")
    ex = poptorch.load(str(exported))
    torch.manual_seed(0)
    torch.testing.assert_close(ex(torch.ones(2, 6)), _Model().eval()(torch.ones(2, 6)), rtol=1e-6, atol=1e-6)


def test_duplicate_or_encrypted_entries_are_clear_errors(exported, tmp_path):
    dup = tmp_path / "dup.poptorch"
    with zipfile.ZipFile(exported) as z, zipfile.ZipFile(dup, "w") as w:
        for n in z.namelist():
            w.writestr(n, z.read(n))
        with pytest.warns(UserWarning):
            w.writestr("executor.json", z.read("executor.json"))
    with pytest.raises(poptorch.Error, match="appears twice"):
        poptorch.load(str(dup))
    data = bytearray(exported.read_bytes())
    # the general-purpose flag of every local header and central entry: encrypted
    for sig in (b"PK\x03\x04", b"PK\x01\x02"):
        at = data.find(sig)
        while at >= 0:
            flag = 6 if sig == b"PK\x03\x04" else 8
            data[at + flag] |= 1
            at = data.find(sig, at + 4)
    enc = tmp_path / "enc.poptorch"
    enc.write_bytes(bytes(data))
    with pytest.raises(poptorch.Error, match="not a tilefx executable"):
        poptorch.load(str(enc))
    assert os.path.exists(enc)


# -- the executable cache: entries bound to their creator ------------------------

def _cached_run(cache, x):
    torch.manual_seed(0)
    opts = poptorch.Options().enableExecutableCaching(str(cache))
    return poptorch.inferenceModel(_Model().eval(), opts)(x)


def test_a_planted_cache_entry_is_ignored_with_one_warning(tmp_path, monkeypatch, caplog):
    from tilefx.driver import executable_cache

    monkeypatch.setenv("TILEFX_CACHE_KEY_FILE", str(tmp_path / "home" / "key"))
    cache, x = tmp_path / "cache", torch.ones(2, 6)
    want = _cached_run(cache, x)
    assert oct(os.stat(cache).st_mode & 0o777) == "0o700"
    assert oct(os.stat(tmp_path / "home" / "key").st_mode & 0o777) == "0o600"
    (entry,) = [p for p in cache.iterdir() if p.suffix == ".tilefx"]
    # a stranger's entry under the same key: other weights, a valid manifest, no valid MAC
    import safetensors.numpy as st

    def other_weights(name, data):
        if name != "weights.safetensors":
            return data
        tensors = st.load(data)
        return st.save({k: v + 0.5 for k, v in tensors.items()})

    rewritten(entry, entry, other_weights)
    with caplog.at_level("WARNING", logger="tilefx.export"):
        got = _cached_run(cache, x)
        _cached_run(cache, x)  # stored again over it: no second warning
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    warnings = [r for r in caplog.records if "ignoring" in r.getMessage()]
    assert len(warnings) == 1 and "MAC does not match" in warnings[0].getMessage()
    # a MAC made with another user's key does not verify either
    monkeypatch.setenv("TILEFX_CACHE_KEY_FILE", str(tmp_path / "other" / "key"))
    assert executable_cache.verified(str(entry)) is None


def test_stale_tmp_files_are_removed_and_entries_checked_for_their_owner(tmp_path, monkeypatch):
    from tilefx.driver import executable_cache

    monkeypatch.setenv("TILEFX_CACHE_KEY_FILE", str(tmp_path / "key"))
    cache = tmp_path / "cache"
    cache.mkdir()
    stale, fresh = cache / "old.tmp", cache / "new.tmp"
    stale.write_bytes(b"x")
    fresh.write_bytes(b"x")
    os.utime(stale, (time.time() - 2 * executable_cache.STALE_TMP_SECONDS,) * 2)
    _cached_run(cache, torch.ones(2, 6))
    assert not stale.exists() and fresh.exists()
    (entry,) = [p for p in cache.iterdir() if p.suffix == ".tilefx"]
    os.chmod(entry, 0o666)
    assert "writable by other users" in executable_cache.not_private(str(entry))
