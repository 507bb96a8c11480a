import os
import zlib

import pytest

# Test files by kind (pyproject.toml registers the markers; `pytest -m "not slow"`
# or `-m "not integration"` selects the quick unit tests of the layers).
# integration: a whole model or program through a surface users call (the
# PopTorch API, a PopART session, torch.compile, the command-line tools,
# processes over torch.distributed), against eager PyTorch or onnxruntime.
INTEGRATION = {
    "test_bert_example.py", "test_checkpoint.py", "test_cold_start.py", "test_dataloader.py",
    "test_distributed.py", "test_distributed_jobs.py", "test_driver.py", "test_example.py", "test_export.py",
    "test_hf_flows.py", "test_hf_generate.py", "test_hf_models.py", "test_inference.py",
    "test_onnx_frontend.py", "test_pipeline_schedules.py", "test_popart.py", "test_popart_conventions.py",
    "test_popart_devices.py", "test_popart_state.py", "test_strategies.py", "test_tools.py",
    "test_torch_compile.py", "test_training.py",
}
# slow: files whose tests start processes or compile and train whole models
# (BERT, the Hugging Face families, the core-ATen sweep, the fuzz properties).
SLOW = {
    "test_bert_example.py", "test_checkpoint.py", "test_cold_start.py", "test_core_ops_models.py",
    "test_distributed.py", "test_distributed_jobs.py", "test_example.py", "test_fuzz.py", "test_hf_flows.py",
    "test_hf_generate.py", "test_hf_models.py",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        name = os.path.basename(str(item.fspath))
        if name in INTEGRATION:
            item.add_marker(pytest.mark.integration)
        if name in SLOW:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True, scope="session")
def _cache_key_outside_home(tmp_path_factory):
    """The executable cache's per-user key (driver/executable_cache.py) of the
    test run: in a temporary folder, not the user's ~/.config."""
    if "TILEFX_CACHE_KEY_FILE" not in os.environ:
        os.environ["TILEFX_CACHE_KEY_FILE"] = str(tmp_path_factory.mktemp("cache-key") / "key")


@pytest.fixture(autouse=True)
def _steady_kernel_threads(request, monkeypatch):
    """Within a test the kernel threads stay what they were as it began.

    The executor drops to one thread while the machine's load exceeds its
    cores (backend/kernels/tuning.py), and a product or a reduction on one
    thread may round otherwise than on two (a small model's training step:
    up to 9e-8). Two runs a test compares bit for bit could straddle a change
    of the load (test_optimizers' resume test did once, at a load of 8).
    The cap TILEFX_BLAS_THREADS fixes the count the rule gives now. Tests of
    the rule itself are marked `load_rule` and read the load."""
    from tilefx.backend.kernels import tuning

    if request.node.get_closest_marker("load_rule") or os.environ.get(tuning.BLAS_THREADS_ENV):
        yield
        return
    import torch

    tuning.forget_machine_reading()
    monkeypatch.setenv(tuning.BLAS_THREADS_ENV, str(tuning.blas_cores(own_threads=torch.get_num_threads())))
    tuning.forget_machine_reading()
    yield
    tuning.forget_machine_reading()  # the next test reads its own (monkeypatch restores the variable)


def pytest_configure(config):
    """pytest-randomly shuffles the order; it would also reseed `random`
    and numpy from the run's seed as each test starts and as its body runs,
    over `_seeded_per_test`'s per-test seeds: those must win, so that a
    test's data are the same on every run (as `--randomly-dont-reset-seed`)."""
    if hasattr(config.option, "randomly_reset_seed"):
        config.option.randomly_reset_seed = False


@pytest.fixture(autouse=True)
def _seeded_per_test(request):
    """Python's, numpy's and torch's global generators start each test from
    a seed of the test's own name, so what a test draws (a layer's initial
    weights, torch.randn, np.random.rand) does not depend on the tests run
    before it in the same worker: the order is shuffled on every run
    (pytest-randomly; `--randomly-seed=N` repeats one, `-p no:randomly`
    keeps the file order) and workers take different tests each time.
    A test file's own generator (a module-level `RNG`) starts from the same
    seed for the same reason."""
    import random

    import numpy as np
    import torch

    seed = zlib.crc32(request.node.nodeid.encode())
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if isinstance(getattr(request.module, "RNG", None), np.random.Generator):
        request.module.RNG = np.random.default_rng(seed)
    yield
