"""Options files, POPTORCH_DEFAULT_OPTIONS and option values are bounded:
each cap a located diagnostic (tilefx/limits.py, docs/security.md)."""

from __future__ import annotations

import pytest

import tilefx as poptorch
from tilefx.api.options import ConfigFileError


def _load(tmp_path, text: str, name="opts.txt"):
    path = tmp_path / name
    path.write_text(text)
    return poptorch.Options().loadFromFile(str(path))


@pytest.mark.parametrize("call,limit", [
    ("replicationFactor(1000000000000)", r"replicationFactor must be <= 256 \(the IPUs of the largest IPU system"),
    ("deviceIterations(4294967296)", r"deviceIterations must be <= 4294967295 \(Poplar's 32-bit repeat count\)"),
    ("Training.gradientAccumulation(10**2)", "unexpected"),
    ("Training.gradientAccumulation(99999999999)", "Poplar's 32-bit repeat count"),
    ("Distributed.configureProcessId(0, 100000)", "num_processes must be <= 256"),
    ("inputReplicaGrouping(1000)", "input_group_size must be <= 256"),
])
def test_counts_beyond_any_ipu_system_are_errors_naming_the_limit(tmp_path, call, limit):
    with pytest.raises(ConfigFileError, match=limit) as info:
        _load(tmp_path, "# a comment\n" + call + "\n")
    assert info.value.lineno == 2


def test_the_setters_themselves_name_the_limit():
    with pytest.raises(poptorch.Error, match="<= 256 .*IPU-POD256"):
        poptorch.Options().replicationFactor(10**12)
    assert poptorch.Options().replicationFactor(256).replication_factor == 256


def test_deep_nesting_is_located_not_a_recursion_error(tmp_path):
    line = "setAvailableMemoryProportion(" + "[" * 20000 + "]" * 20000 + ")"
    with pytest.raises(ConfigFileError, match="nested deeper than 64 levels.*TILEFX_MAX_NESTING_DEPTH") as info:
        _load(tmp_path, "deviceIterations(1)\n" + line)
    assert (info.value.lineno, info.value.column) == (2, 29 + 64)  # the 65th bracket


def test_huge_integers_are_located_not_a_value_error(tmp_path):
    with pytest.raises(ConfigFileError, match="an integer of 5001 digits.*TILEFX_MAX_INTEGER_DIGITS") as info:
        _load(tmp_path, "deviceIterations(" + "7" * 5001 + ")")
    assert (info.value.lineno, info.value.column) == (1, 18)


def test_an_escape_beyond_unicode_is_located_not_an_overflow(tmp_path):
    with pytest.raises(ConfigFileError, match=r"\\UFFFFFFFF is beyond the last code point") as info:
        _load(tmp_path, "modelName('\\UFFFFFFFF')")
    assert info.value.column == 11
    assert _load(tmp_path, "modelName('\\U0001F600')").model_name == "\U0001F600"


def test_an_oversized_file_is_refused_before_it_is_read(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEFX_MAX_OPTIONS_BYTES", "1KiB")
    with pytest.raises(ConfigFileError, match="more than the limit 1,024.*TILEFX_MAX_OPTIONS_BYTES") as info:
        _load(tmp_path, "deviceIterations(1)" + " " * 2000)
    assert (info.value.lineno, info.value.column) == (1, 1)
    monkeypatch.setenv("TILEFX_MAX_OPTIONS_BYTES", "1MiB")
    assert _load(tmp_path, "deviceIterations(2)" + " " * 2000).device_iterations == 2


@pytest.mark.parametrize("text,message", [
    ('{"replicationFactor": 1000000000000}', "replicationFactor must be <= 256"),
    ('{"deviceIterations": ' + "1" * 5001 + "}", "number of digits"),
    ('{"a": ' + "[" * 20000 + "]" * 20000 + "}", "nested deeper than 64"),
    ('{"modelName": "' + "x" * (2 << 20) + '"}', "TILEFX_MAX_OPTIONS_BYTES"),
])
def test_default_options_from_the_environment_are_bounded(monkeypatch, text, message):
    monkeypatch.setenv("POPTORCH_DEFAULT_OPTIONS", text)
    with pytest.raises(poptorch.Error, match=message):
        poptorch.Options()
