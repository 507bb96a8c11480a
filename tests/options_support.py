"""What the options tests share: a hermetic environment (no option-related
variables, torch's RNG restored) and stand-in execution strategies for
options files."""

import pytest
import torch

from tilefx.api.enums import AutoStage
from tilefx.api.options import STRATEGY_FACTORIES


ENV_VARS = ("POPTORCH_DEFAULT_OPTIONS", "TILEFX_DEFAULT_OPTIONS",
            "POPTORCH_CACHE_DIR", "TILEFX_CACHE_DIR", "OMPI_COMM_WORLD_SIZE",
            "OMPI_COMM_WORLD_RANK", "WORLD_SIZE", "RANK", "TILEFX_DISTRIBUTED_TIMEOUT")


@pytest.fixture(autouse=True)
def _hermetic(monkeypatch):
    """No option-related environment variables; torch RNG restored."""
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    state = torch.get_rng_state()
    yield
    torch.set_rng_state(state)


# Stand-ins for the execution strategies (defined elsewhere in tilefx).
class FakeStrategy:
    def __init__(self, auto_stage=AutoStage.SameAsIpu):
        self.auto_stage = auto_stage

    def __repr__(self):
        return f"{type(self).__name__}({self.auto_stage})"


class ShardedExecution(FakeStrategy):
    pass


class PipelinedExecution(FakeStrategy):
    _CONFIG_METHODS = {"setAutoStage"}

    def setAutoStage(self, auto_stage):
        self.auto_stage = auto_stage
        return self

    def secret(self):  # not whitelisted
        raise RuntimeError("must never be called from a config file")


@pytest.fixture
def strategies(monkeypatch):
    monkeypatch.setitem(STRATEGY_FACTORIES, "ShardedExecution",
                        ShardedExecution)
    monkeypatch.setitem(STRATEGY_FACTORIES, "PipelinedExecution",
                        PipelinedExecution)


def write(tmp_path, text, name="poptorch.conf"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)
