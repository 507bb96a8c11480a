"""Logging levels (setLogLevel, POPTORCH_LOG_LEVEL), the compilation progress
bar and source locations on ops and errors (seeds/000 4.11.1)."""

from __future__ import annotations

import logging
import os

import pytest
import torch

import tilefx as poptorch
from tilefx.api import logs


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x).relu()  # LINE_OF_RELU


@pytest.fixture
def records():
    got: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record):
            got.append(record)

    h = Keep(level=1)
    old = logs.root.level
    logs.root.addHandler(h)
    yield got
    logs.root.removeHandler(h)
    logs.root.setLevel(old)


def test_levels_select_phases_passes_and_ir(records):
    opts = poptorch.Options().showCompilationProgressBar(False)
    poptorch.setLogLevel("INFO")
    poptorch.inferenceModel(_Net(), opts)(torch.ones(2, 4))
    info = [r.getMessage() for r in records if r.levelno == logging.INFO]
    assert any("traced the model in" in m for m in info) and any("compiled in" in m for m in info)
    assert not any(r.levelno < logging.INFO for r in records)
    records.clear()
    poptorch.setLogLevel("TRACE")
    poptorch.inferenceModel(_Net(), opts)(torch.ones(2, 4))
    msgs = [r.getMessage() for r in records]
    assert any(m.startswith("pass ipu-outline-stages: ") and " ops -> " in m for m in msgs)  # DEBUG
    assert any(m.startswith("IR after ipu-outline-stages:\nbuiltin.module") for m in msgs)  # TRACE
    records.clear()
    poptorch.setLogLevel("OFF")
    poptorch.inferenceModel(_Net(), opts)(torch.ones(2, 4))
    assert records == []
    # PopTorch's levels and its words (its misc_test): 0-4 are TRACE to ERR
    with pytest.raises(ValueError, match="Unknown log level: LOUD. Valid values are DEBUG, ERR, INFO, "
                                         "OFF, TRACE and WARN"):
        poptorch.setLogLevel("LOUD")
    with pytest.raises(ValueError, match="Invalid log level integer"):
        poptorch.setLogLevel(5)
    poptorch.setLogLevel(4)
    assert logs.root.level == logging.ERROR
    poptorch.setLogLevel(0)
    assert logs.root.level == logs.TRACE


def test_environment_level_and_progress_bar(monkeypatch, capsys):
    old = logs.root.level
    try:
        monkeypatch.setenv("POPTORCH_LOG_LEVEL", "DEBUG")
        logs._from_env()  # what importing tilefx does
        assert logs.root.level == logging.DEBUG
        monkeypatch.setenv("POPTORCH_LOG_LEVEL", "INFO")
        logs._from_env()
        poptorch.inferenceModel(torch.nn.Linear(4, 4))(torch.ones(2, 4))
        assert "Graph compilation: 100%" in capsys.readouterr().err
        poptorch.inferenceModel(torch.nn.Linear(4, 4), poptorch.Options().showCompilationProgressBar(False))(
            torch.ones(2, 4))
        assert "Graph compilation" not in capsys.readouterr().err
        monkeypatch.setenv("POPTORCH_LOG_LEVEL", "LOUD")
        with pytest.raises(poptorch.Error, match="POPTORCH_LOG_LEVEL"):
            logs._from_env()
    finally:
        logs.root.setLevel(old)


def test_ops_and_errors_carry_the_users_source_line():
    ex = poptorch.inferenceModel(_Net(), poptorch.Options().showCompilationProgressBar(False))
    ex(torch.ones(2, 4))
    line = next(i for i, t in enumerate(open(__file__).read().splitlines(), 1) if "LINE_OF_RELU" in t
                and "next(" not in t)
    assert f'aten.relu' in ex.ir("import") and f'{os.path.basename(__file__)}":{line}:0)' in \
        ex.ir("import", locations=True)

    class Bad(torch.nn.Module):
        def forward(self, x):
            return torch.geqrf(x)[0]  # LINE_OF_BAD

    with pytest.raises(poptorch.Error) as info:
        poptorch.inferenceModel(Bad())(torch.ones(2, 2))
    bad = next(i for i, t in enumerate(open(__file__).read().splitlines(), 1) if "LINE_OF_BAD" in t
               and "next(" not in t)
    assert info.value.location == f"{__file__}:{bad}"


def _line_of(tag: str) -> str:
    line = next(i for i, t in enumerate(open(__file__).read().splitlines(), 1)
                if t.rstrip().endswith(f"# {tag}"))
    return f"{__file__}:{line}"


class _ShapeMismatch(torch.nn.Module):
    def forward(self, x):
        return x @ torch.ones(3, 3)  # LOC_SHAPE


class _DataDependentShape(torch.nn.Module):
    def forward(self, x):
        return x[x > 0]  # LOC_NONZERO


class _DataDependentBranch(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # LOC_BRANCH
            return x * 2
        return x * 3


class _Complex(torch.nn.Module):
    def forward(self, x):
        return torch.fft.fft(x).real  # LOC_COMPLEX


class _BadBlock(torch.nn.Module):
    def forward(self, x):
        with poptorch.Block(ipu_id=-1):  # LOC_BLOCK
            return x + 1


@pytest.mark.parametrize("model, x, tag", [
    (_ShapeMismatch(), torch.ones(2, 4), "LOC_SHAPE"),
    (_DataDependentShape(), torch.randn(5), "LOC_NONZERO"),
    (_DataDependentBranch(), torch.ones(3), "LOC_BRANCH"),
    (_Complex(), torch.ones(3, 4), "LOC_COMPLEX"),
    (_BadBlock(), torch.ones(3), "LOC_BLOCK"),
], ids=["shape", "nonzero", "branch", "complex", "tilefx_call"])
def test_tracing_errors_locate_the_users_line(model, x, tag):
    """seeds/000 4.3.3: `location` is where the exception was raised: the
    user's file:line, the one the message names when it names one."""
    with pytest.raises(poptorch.Error) as info:
        poptorch.inferenceModel(model, poptorch.Options().showCompilationProgressBar(False))(x)
    assert info.value.location == _line_of(tag)
    assert _line_of(tag) in str(info.value)
