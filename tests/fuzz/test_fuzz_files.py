"""The short fuzz of the files a user receives (tests/fuzz/file_cases.py;
`make fuzz` runs many more): mutated executables, npz inputs and ONNX
models get a result or a documented error (poptorch.Error, a tilefx-run
diagnostic, popart_exception), never another exception, within a memory
limit (the address space of the process running the cases)."""

from __future__ import annotations

import random
import resource

import pytest

from fuzz import file_cases


@pytest.fixture
def memory_limit():
    """The cases run under an address-space limit: a mutant that declares a
    huge tensor must be refused, not allocated."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = 12 << 30
    resource.setrlimit(resource.RLIMIT_AS, (min(cap, hard) if hard > 0 else cap, hard))
    yield
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _run(mutate, seed, run_case, n, tmp_path, rng_seed):
    rng = random.Random(rng_seed)
    crashes = []
    for i in range(n):
        data = mutate(seed, rng)
        work = tmp_path / f"case{i}"
        work.mkdir()
        res = run_case(data, str(work))
        crashes += [(i, k, res.get(f"{k}_detail", "")) for k, v in res.items() if v == "crash"]
    assert not crashes, crashes[0]


def test_mutated_executables_load_or_fail_with_poptorch_error(tmp_path, memory_limit):
    _run(file_cases.mutate_executable, file_cases.executable_seed(), file_cases.run_executable_case, 25,
         tmp_path, 0)


def test_mutated_npz_inputs_are_diagnostics(tmp_path, memory_limit):
    _run(file_cases.mutate_npz, file_cases.npz_seed(), file_cases.run_npz_case, 25, tmp_path, 1)


def test_mutated_onnx_models_are_errors_of_their_class(tmp_path, memory_limit):
    _run(file_cases.mutate_onnx, file_cases.onnx_seed(), file_cases.run_onnx_case, 12, tmp_path, 2)
