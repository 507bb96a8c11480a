"""Logging levels (setLogLevel, POPTORCH_LOG_LEVEL), the compilation progress
bar and source locations on ops and errors (PopTorch user guide, 4.11.1 "Logging level")."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import subprocess
import sys

import pytest
import torch

import tilefx as poptorch
from tilefx.runner import logs


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
    # one INFO line per compilation, saying what was made
    info = [r.getMessage() for r in records if r.levelno == logging.INFO]
    assert len(info) == 1, info
    assert re.fullmatch(r"compiled _Net \(inference\) in \d+\.\d s: 1 stage on 1 IPU, peak \d+% of tile "
                        r"memory", info[0]), info
    assert not any(r.levelno < logging.INFO for r in records)
    records.clear()
    poptorch.setLogLevel("TRACE")
    poptorch.inferenceModel(_Net(), opts)(torch.ones(2, 4))
    msgs = [r.getMessage() for r in records]
    assert any("traced the model in" in m for m in msgs)  # the phases: DEBUG
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
        err = capsys.readouterr().err  # captured: not a terminal, so no bar, the INFO line only
        assert "Graph compilation" not in err and "\r" not in err
        assert "[tilefx] [INFO] compiled Linear (inference) in " in err
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
    """PopTorch user guide, 4.3.3 "Application and other errors": `location` is where the exception was
    raised: the
    user's file:line, the one the message names when it names one."""
    with pytest.raises(poptorch.Error) as info:
        poptorch.inferenceModel(model, poptorch.Options().showCompilationProgressBar(False))(x)
    assert info.value.location == _line_of(tag)
    assert _line_of(tag) in str(info.value)


# -- the handler, the one INFO line and the progress bar --------------------------
class _Tty(io.StringIO):
    """A stderr that says it is a terminal (the bar is drawn only on one)."""

    def isatty(self):
        return True


def _compile_into(stream, model=None, opts=None, level="INFO"):
    old = logs.root.level
    poptorch.setLogLevel(level)
    try:
        with contextlib.redirect_stderr(stream):
            poptorch.inferenceModel(model or _Net(), opts or poptorch.Options())(torch.ones(2, 4))
    finally:
        logs.root.setLevel(old)
    return stream.getvalue()


def test_records_reach_the_stderr_of_the_moment_and_the_root_logger(caplog):
    """A redirect made after `import tilefx` receives tilefx's records (as
    PopTorch's), and they propagate to the root logger, where pytest's caplog
    and a user's own logging configuration see them."""
    out = io.StringIO()
    with contextlib.redirect_stderr(out):
        logging.getLogger("tilefx.options").warning("a warning after the redirect")
    assert "[tilefx] [WARNING] a warning after the redirect" in out.getvalue()
    with caplog.at_level(logging.WARNING):
        logging.getLogger("tilefx.data").warning("seen by the root")
    assert "seen by the root" in caplog.text
    assert [h for h in logs.root.handlers if isinstance(h, logs.StderrHandler)] == [logs._handler]


def test_no_bar_when_stderr_is_not_a_terminal():
    err = _compile_into(io.StringIO())
    assert "\r" not in err and "Graph compilation" not in err
    assert err.count("\n") == 1 and "[tilefx] [INFO] compiled _Net (inference) in " in err


def test_bar_on_a_terminal_and_debug_lines_never_inside_it():
    err = _compile_into(_Tty())
    assert "Graph compilation: 100%" in err and "\r" in err  # tqdm's frames, on a terminal only
    # the records are printed above the bar (tqdm's logging redirect), not inside its line
    frames = [f for line in err.split("\n") for f in line.split("\r")]
    assert any(f.startswith("[tilefx] [INFO] compiled _Net (inference) in ") for f in frames)
    assert not any("Graph compilation" in f and "[tilefx]" in f for f in frames)
    err = _compile_into(_Tty(), level="DEBUG")  # the profile table spans several lines
    frames = [f for line in err.split("\n") for f in line.split("\r")]
    table = [f for f in frames if "busy cycles" in f]
    assert table and not any("Graph compilation" in f for f in table)
    assert not any("Graph compilation" in f and ("[tilefx]" in f or "cycles" in f) for f in frames)


def test_no_second_bar_inside_a_users_tqdm_loop():
    """In a user's own tqdm loop the compilation draws no nested bar (no
    cursor-up codes) and its line is written above the user's bar."""
    from tqdm import tqdm

    stream = _Tty()
    with contextlib.redirect_stderr(stream):
        for _ in tqdm(range(1), file=stream, desc="epoch"):
            _compile_into(stream)
    err = stream.getvalue()
    assert "Graph compilation" not in err and "\x1b[A" not in err
    frames = [f for line in err.split("\n") for f in line.split("\r")]
    assert any(f.startswith("[tilefx] [INFO] compiled _Net (inference) in ") for f in frames)


def test_environment_level_in_a_fresh_process():
    """POPTORCH_LOG_LEVEL as the user guide (4.11.1) sets it: read at import."""
    code = ("import torch, tilefx as poptorch\n"
            "poptorch.inferenceModel(torch.nn.Linear(2, 2))(torch.ones(1, 2))\n")
    env = dict(os.environ, POPTORCH_LOG_LEVEL="DEBUG")
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert "[tilefx] [DEBUG] enablePipelining set to value 0" in run.stderr
    assert "\r" not in run.stderr  # a pipe: no progress bar
    env["POPTORCH_LOG_LEVEL"] = "OFF"
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and run.stderr == "", run.stderr


# -- PopTorch's DEBUG facts: options, placement, the optimizer ---------------------
def _debug_lines(run) -> list[str]:
    got: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            got.append(record.getMessage())

    h = Keep(level=logging.DEBUG)
    old = logs.root.level
    logs.root.addHandler(h)
    poptorch.setLogLevel("DEBUG")
    try:
        run()
    finally:
        logs.root.removeHandler(h)
        logs.root.setLevel(old)
    return got


def _has(lines, *parts) -> bool:
    return any(all(p in line for p in parts) for line in lines)


class _TwoBlocks(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(5, 5)

    def forward(self, x):
        poptorch.Block.useAutoId()
        with poptorch.Block(ipu_id=0):
            x = x * 4
        with poptorch.Block(ipu_id=1):
            x = self.l1(x) * 2
        return x


def test_placement_and_pipelining_lines():
    """Each forward op's PopART tensor id (scope, ONNX name, ":0", "/1" for a
    second of the same name) with the placement the stage passes gave it."""
    opts = poptorch.Options().deviceIterations(2).showCompilationProgressBar(False)
    lines = _debug_lines(lambda: poptorch.inferenceModel(_TwoBlocks(), opts)(torch.ones(4, 5)))
    assert "enablePipelining set to value 1" in lines
    start = lines.index("Graph lowered to PopART {")
    assert lines[start + 1].endswith(" Mul:0 [float32(2, 5), mode(Pipelined), ipu(0), stage(0)]")
    assert _has(lines, " l1/Gemm:0 [float32(2, 5), mode(Pipelined), ipu(1), stage(1)]")
    assert _has(lines, " Mul:0/1 [float32(2, 5), mode(Pipelined), ipu(1), stage(1)]")
    assert "poptorch.Options set device_iterations to value 2" in lines
    assert "poptorch.Options set execution_mode to value 0" in lines
    # one IPU: pipelining stays off; a sharded strategy is execution mode 1
    opts = poptorch.Options().showCompilationProgressBar(False).enableSyntheticData(True)
    opts.setExecutionStrategy(poptorch.ShardedExecution())
    opts._Popart.set("engineOptions", {"debug.allowOutOfMemory": "true"})
    opts._Popart.set("dotChecks", ["FINAL", "ALL"])
    opts._Popart.set("enableOutlining", True)
    lines = _debug_lines(lambda: poptorch.inferenceModel(_Net(), opts)(torch.ones(2, 4)))
    assert "enablePipelining set to value 0" in lines
    assert "poptorch.Options set execution_mode to value 1" in lines
    assert "poptorch.Options set syntheticDataMode to value 2" in lines
    assert "poptorch.Options set engineOptions[debug.allowOutOfMemory] to true" in lines
    assert "poptorch.Options added FINAL to dotChecks" in lines and "poptorch.Options added ALL to dotChecks" in lines
    assert "poptorch.Options set enableOutlining to value true" in lines
    assert _has(lines, " fc/Gemm:0 ", "mode(Sharded), ipu(0), stage(0)")
    assert not _has(lines, "scalar_tensor was lowered")  # constants stay on the host


class _Groups(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(3, 3)
        self.b = torch.nn.Linear(3, 3)

    def forward(self, x):
        y = self.b(self.a(x))
        return y, (y * y).sum()


def test_optimizer_lines_in_popart_words():
    torch.manual_seed(0)
    model = _Groups()
    opt = poptorch.optim.SGD([{"params": model.a.parameters()}, {"params": model.b.parameters(), "lr": 0.5}],
                             lr=0.01, loss_scaling=2.0, use_combined_accum=False)
    ex = poptorch.trainingModel(model, poptorch.Options().showCompilationProgressBar(False), optimizer=opt)
    lines = _debug_lines(lambda: ex(torch.ones(2, 3)))
    # the separate variant scales the velocity by the loss scaling; lr is always variable,
    # the attributes left at their defaults are constant
    assert _has(lines, "Updating graph optimizer with SGD2", "defaultLearningRate=0.01,", "lossScaling=2",
                "defaultVelocityScaling=2", "defaultMomentum=0 (const)", "accumType=float32",
                "firstOrderMomentumAccumType=float32")
    assert _has(lines, "Updating group 0 optimizer with SGD2", "learningRate=0.01,",
                "(tensors affected [a.weight, a.bias])")
    assert _has(lines, "Updating group 1 optimizer with SGD2", "learningRate=0.5,", "[b.weight, b.bias]")
    # an identical optimizer changes nothing and logs nothing; a new lr is logged
    assert not _has(_debug_lines(lambda: ex.setOptimizer(opt)), "optimizer with")
    opt.param_groups[0]["lr"] = 0.25
    lines = _debug_lines(lambda: ex.setOptimizer(opt))
    assert _has(lines, "Updating group 0 optimizer with SGD2", "learningRate=0.25,")


@pytest.mark.parametrize("make, consts", [
    (lambda p: torch.optim.Adam(p, lr=1.0), ["defaultBeta1=0.9 (const)", "defaultEps=1e-08 (const)"]),
    (lambda p: poptorch.optim.Adam(p, lr=1.0, betas=(0.9, 0.999), accum_type=torch.float16,
                                   first_order_momentum_accum_type=torch.float16),
     ["defaultBeta1=0.9,", "accumType=float16", "firstOrderMomentumAccumType=float16",
      "secondOrderMomentumAccumType=float32"]),
], ids=["torch_defaults_const", "given_variable_and_accum_types"])
def test_adam_attributes_const_markers_and_accumulation_types(make, consts):
    torch.manual_seed(0)
    model = _Groups()
    ex = poptorch.trainingModel(model, poptorch.Options().showCompilationProgressBar(False),
                                optimizer=make(model.parameters()))
    lines = _debug_lines(lambda: ex(torch.ones(2, 3)))
    assert _has(lines, "Updating graph optimizer with ADAM", "defaultLearningRate=1,", *consts)


def test_subclassed_optimizer_warns_when_wrapped(caplog):
    """PopTorch warns as the model is wrapped, before any compilation."""
    class MySGD(torch.optim.SGD):
        pass

    model = _Groups()
    with caplog.at_level(logging.WARNING, logger="tilefx"):
        poptorch.trainingModel(model, optimizer=MySGD(model.parameters(), lr=0.1))
    assert "MySGD subclasses the built-in optimizer torch.optim.SGD: Poptorch does not run Python " \
           "optimizer code directly" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tilefx"):
        other = _Groups()
        poptorch.trainingModel(other, optimizer=torch.optim.SGD(other.parameters(), lr=0.1))
    assert "Poptorch does not run" not in caplog.text


def test_weight_transfer_lines():
    torch.manual_seed(0)
    model = _Groups()
    ex = poptorch.trainingModel(model, poptorch.Options().showCompilationProgressBar(False),
                                optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    assert "Writing weights from host to IPU memory." in _debug_lines(lambda: ex(torch.ones(2, 3)))
    assert "Writing weights from IPU to host." in _debug_lines(ex.copyWeightsToHost)
    lines = _debug_lines(ex.detachFromDevice)
    assert "Writing weights from IPU to host." in lines and "Detached from device" in lines


@pytest.mark.parametrize("relaxed", [False, True])
def test_relaxed_attribute_checks_say_it_at_debug(relaxed):
    """Options.relaxOptimizerAttributesChecks: an attribute the compiled
    optimizer does not have is a debug message instead of a warning."""
    torch.manual_seed(0)
    model = _Groups()
    opt = poptorch.optim.SGD(model.parameters(), lr=0.01)
    opts = poptorch.Options().showCompilationProgressBar(False).relaxOptimizerAttributesChecks(relaxed)
    ex = poptorch.trainingModel(model, opts, optimizer=opt)
    ex(torch.ones(2, 3))
    opt.param_groups[0]["initial_lr"] = 0.1
    got: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record):
            got.append(record)

    h = Keep(level=logging.DEBUG)
    old = logs.root.level
    logs.root.addHandler(h)
    poptorch.setLogLevel("DEBUG")
    try:
        ex.setOptimizer(opt)
    finally:
        logs.root.removeHandler(h)
        logs.root.setLevel(old)
    (rec,) = [r for r in got if "Ignoring unexpected group 0 attribute" in r.getMessage()]
    assert rec.levelno == (logging.DEBUG if relaxed else logging.WARNING)


def test_optimizer_state_transfer_lines():
    torch.manual_seed(0)
    model = _Groups()
    opt = poptorch.optim.Adam(model.parameters(), lr=0.01)
    ex = poptorch.trainingModel(model, poptorch.Options().showCompilationProgressBar(False), optimizer=opt)
    assert not _has(_debug_lines(lambda: opt.state_dict()), "optimiser state")  # nothing compiled yet
    ex(torch.ones(2, 3))
    state = {}
    lines = _debug_lines(lambda: state.update(opt.state_dict()))
    assert "Writing optimiser state tensors from IPU to host." in lines
    assert "Writing optimiser state tensors from host to IPU memory." in \
        _debug_lines(lambda: opt.load_state_dict(state))
