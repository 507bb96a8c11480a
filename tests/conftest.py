import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture(autouse=True, scope="session")
def _cache_key_outside_home(tmp_path_factory):
    """The executable cache's per-user key (api/executable_cache.py) of the
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
