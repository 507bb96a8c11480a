"""Fuzz cases for tilefx's tools and API: seed corpora, mutations, and one
function per target that runs a case in-process and names its outcome.

Shared by the hypothesis properties (tests/fuzz/test_fuzz.py, part of `make test`)
and the long campaign (tests/fuzz/campaign.py, `make fuzz`).

Outcomes:
  accepted    the tool exited 0 (for IR: the output parses and verifies again)
  diagnostic  a clean error: exit 1 and an `error:` line (IR errors at file:line:col)
  unlocated   an IR diagnostic without file:line:col (counted as a failure)
  crash       a traceback, exit 2 (internal error), or an exception out of the API
  hang        no answer within the per-case timeout (the campaign's workers)
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import re
import traceback

import numpy as np

LOCATED = re.compile(r"^\S.*:\d+:\d+: error: ", re.M)

# --------------------------------------------------------------------------
# seed corpora


def ir_seeds() -> list[str]:
    """IR the frontend makes for small models: graph and import level,
    inference and training (an MLP with a loss, a CNN with pooling)."""
    import torch
    from torch import nn

    import tilefx

    torch.manual_seed(0)

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(6, 5), nn.Linear(5, 3)

        def forward(self, x, target):
            y = self.fc2(torch.relu(self.fc1(x)))
            return nn.functional.cross_entropy(y, target)

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 2, 3)
            self.bn = nn.BatchNorm2d(2)
            self.fc = nn.Linear(2 * 3 * 3, 4)

        def forward(self, image):
            y = nn.functional.max_pool2d(torch.relu(self.bn(self.conv(image))), 2)
            return torch.log_softmax(self.fc(y.flatten(1)), dim=1)

    out = []
    mlp = MLP()
    ex = tilefx.compile(mlp, torch.randn(4, 6), torch.randint(0, 3, (4,)), training=True,
                        optimizer=tilefx.optim.SGD(mlp.parameters(), lr=0.1, momentum=0.9))
    out += [ex.ir("import"), ex.ir("graph")]
    cnn = CNN().eval()
    ex = tilefx.compile(cnn, torch.randn(2, 1, 8, 8))
    out += [ex.ir("import"), ex.ir("graph")]
    return out


OPTION_SEED_LINES = [
    "deviceIterations(4)", "replicationFactor(1)", "enableSyntheticData(True)",
    "setExecutionStrategy(poptorch.ShardedExecution())",
    "setExecutionStrategy(PipelinedExecution(poptorch.AutoStage.AutoIncrement))",
    "Training.gradientAccumulation(8)",
    "Training.accumulationAndReplicationReductionType(poptorch.ReductionType.Sum)",
    "outputMode(OutputMode.EveryN, output_return_period=2)",
    "Precision.setPartialsType(torch.float16)",
    'setAvailableMemoryProportion({"IPU0": 0.25, "IPU1": 1e-1})',
    "randomSeed(+7)", "logDir('/tmp/it\\'s')", 'anchorTensor("x", "y", None, 1)',
    "TensorLocations.setOptimizerLocation(poptorch.TensorLocationSettings().useOnChipStorage(False))",
    "TensorLocations.numIOTiles(64)", '_Popart.set("tupleValue", (1, 2.5, (3,), ()))',
    "Jit.traceModel(False)", "# a comment", "enableProfiling('profile')  # inline comment",
    "useIpuModel(True)", "autoRoundNumIPUs(True)", "setExecutionStrategy(poptorch.SerialPhasedExecution(poptorch.Phase(poptorch.Stage('a'))))",
]
# what an attacker would write: none of it may run (the sentinel file stays absent)
INJECTIONS = [
    "__import__('os').system('touch {sentinel}')", "open('{sentinel}', 'w')",
    "exec(\"open('{sentinel}','w')\")", "eval('1')", "deviceIterations(__import__('os').getpid())",
    "setExecutionStrategy(os.system('touch {sentinel}'))", "logDir(open('{sentinel}','w').name)",
    "deviceIterations(1).__class__.__init__.__globals__['os'].system('touch {sentinel}')",
    "randomSeed((lambda: 1)())", "Training.__dict__.update({{}})", "().__class__.__bases__[0]",
    "deviceIterations(*[1])", "deviceIterations(**{{'device_iterations': 1}})",
    "import os", "deviceIterations(1); open('{sentinel}','w')",
]

# --------------------------------------------------------------------------
# mutations (text level: what a typo, a bad edit or an attacker makes)

_INTERESTING_INTS = ["0", "-1", "1", "2", "3", "7", "64", "65536", "4294967296",
                     "9223372036854775807", "-9223372036854775808", "18446744073709551616"]
_TYPES = ["f32", "f16", "bf16", "f64", "i64", "i32", "i8", "i1", "i0", "i7", "ui8", "index",
          "complex<f32>", "none"]
_CHARS = list('"{}<>()[]%:,=^#@!\\x-.') + ["\n", "\u00e9", "\x00", "//", "loc(", "-> ", "    "]


def mutate_ir(text: str, rng: random.Random, ops: list[str] | None = None) -> str:
    """One to three random edits of `text`."""
    for _ in range(rng.randint(1, 3)):
        text = _IR_MUTATORS[rng.randrange(len(_IR_MUTATORS))](text, rng, ops or [])
    return text


def _lines(text, rng, ops):
    lines = text.split("\n")
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    k = rng.randrange(4)
    if k == 0:
        del lines[i]
    elif k == 1:
        lines.insert(j, lines[i])
    elif k == 2:
        lines[i], lines[j] = lines[j], lines[i]
    else:
        lines.insert(j, lines.pop(i))
    return "\n".join(lines)


def _number(text, rng, ops):
    spans = [m.span() for m in re.finditer(r"-?\d+(\.\d+)?(e[-+]?\d+)?", text)]
    if not spans:
        return text
    a, b = rng.choice(spans)
    new = rng.choice(_INTERESTING_INTS + [str(rng.randint(-3, 40)), "0.0", "-1.5", "1e309", "nan"])
    return text[:a] + new + text[b:]


def _dim(text, rng, ops):
    spans = [m.span(1) for m in re.finditer(r"tensor<([0-9x]*)(?:f|i|b)", text)]
    if not spans:
        return text
    a, b = rng.choice(spans)
    dims = [d for d in text[a:b].split("x") if d]
    k = rng.randrange(4)
    if k == 0 and dims:
        dims[rng.randrange(len(dims))] = rng.choice(["0", "1", "2", "3", "5", "?", "100000000"])
    elif k == 1 and dims:
        del dims[rng.randrange(len(dims))]
    elif k == 2:
        dims.insert(rng.randint(0, len(dims)), rng.choice(["1", "2", "4"]))
    else:
        rng.shuffle(dims)
    return text[:a] + "".join(d + "x" for d in dims) + text[b:]


def _etype(text, rng, ops):
    spans = [m.span(1) for m in re.finditer(r"[x<](f16|f32|f64|bf16|i64|i32|i8|i1)>", text)]
    if not spans:
        return text
    a, b = rng.choice(spans)
    return text[:a] + rng.choice(_TYPES) + text[b:]


def _ssa(text, rng, ops):
    spans = [m.span() for m in re.finditer(r"%[\w.$-]+(:\d+)?(#\d+)?", text)]
    if len(spans) < 2:
        return text
    a, b = rng.choice(spans)
    c, d = rng.choice(spans)
    return text[:a] + text[c:d] + text[b:]


def _opname(text, rng, ops):
    spans = [m.span() for m in re.finditer(r"\b(aten|ipu)\.[\w.]+", text)]
    if not spans or not ops:
        return text
    a, b = rng.choice(spans)
    return text[:a] + rng.choice(ops) + text[b:]


def _attr(text, rng, ops):
    spans = [m.span(1) for m in re.finditer(r"(?:dims|stride|padding|dilation|kernel_size|size|dim|"
                                            r"output_padding|groups|normalized_shape|split_sizes|pad)"
                                            r" = ([^,}]+)", text)]
    if not spans:
        return text
    a, b = rng.choice(spans)
    new = rng.choice(["array<i64: 0, 0>", "array<i64: -1>", "array<i64: 1, 4294967296>",
                      "array<i64>", "array<i64: 0>", "array<i64: 3, 2, 1, 0>", "5 : i64",
                      "-7 : i64", "0 : i64", "true", "\"x\"", "1.5 : f64", "array<i1: true>"])
    return text[:a] + new + text[b:]


def _char(text, rng, ops):
    i = rng.randrange(len(text) + 1)
    k = rng.randrange(3)
    if k == 0:
        return text[:i] + rng.choice(_CHARS) + text[i:]
    if k == 1:
        return text[:i] + text[i + rng.randint(1, 8):]
    return text[:i]  # truncated


_IR_MUTATORS = [_lines, _number, _dim, _dim, _etype, _ssa, _opname, _attr, _attr, _char]


def mutate_options(lines: list[str], rng: random.Random, sentinel: str) -> str:
    """An options file: a few seed lines, some of them edited or injected."""
    out = [rng.choice(OPTION_SEED_LINES) for _ in range(rng.randint(1, 5))]
    for _ in range(rng.randint(0, 3)):
        i = rng.randrange(len(out))
        k = rng.randrange(5)
        if k == 0:
            out[i] = rng.choice(INJECTIONS).format(sentinel=sentinel)
        elif k == 1:
            out[i] = _char(out[i], rng, [])
        elif k == 2:
            out[i] = _number(out[i], rng, []) if re.search(r"\d", out[i]) else out[i] + "("
        elif k == 3:
            name = re.match(r"[\w.]*", out[i]).group(0)
            out[i] = name + "(" + rng.choice(["", "None", "'x'", "-1", "[1, 2]", "{}", "1e400",
                                              "True, False", "x=1", "((((((((1))))))))"]) + ")"
        else:
            out[i] = out[i] * rng.randint(2, 3)
    return "\n".join(out) + rng.choice(["", "\n"])


# --------------------------------------------------------------------------
# running a case


def call_tool(main, argv: list[str]) -> tuple[object, str]:
    """(exit code or "crash", stderr) of a tool's main() run in-process."""
    err, out = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            rc = main(argv)
    except SystemExit as e:  # argparse
        rc = e.code if isinstance(e.code, int) else 1
    except BaseException:  # noqa: BLE001 - a crash is what we count
        return "crash", err.getvalue() + traceback.format_exc()
    return rc, err.getvalue() + out.getvalue()


def _classify(rc, stderr: str, need_location: bool) -> str:
    if rc == 0:
        return "accepted"
    if rc == "crash" or rc == 2 or "Traceback" in stderr:
        return "crash"
    if need_location and not LOCATED.search(stderr) and "error: invalid UTF-8" not in stderr:
        return "unlocated"
    return "diagnostic"


def inputs_for(path: str, npz: str, max_elements: int = 1 << 16) -> bool:
    """Write random arrays for @main's arguments of a (verified) IR file;
    False when it has no @main or its arguments are too big to run quickly."""
    from tilefx.dialects.irutil import arg_roles
    from tilefx.dialects.aten import np_dtype
    from tilefx.dialects.irutil import find_func
    from tilefx.dialects.source import parse_ir
    from tilefx.passes.pipelines import graph_context
    from tilefx.tools.run import arg_key

    with open(path) as f:
        module = parse_ir(graph_context(), f.read(), path).module
    try:
        fn = find_func(module, "main")
    except Exception:  # noqa: BLE001 - no @main: nothing to run
        return False
    rng = np.random.default_rng(0)
    arrays = {}
    for i, (a, role) in enumerate(zip(fn.body.block.args, arg_roles(fn))):
        shape = tuple(a.type.get_shape())
        if int(np.prod(shape, dtype=np.float64)) > max_elements:
            return False
        try:
            dt = np_dtype(a.type.element_type)
        except ValueError:  # bf16 and other types no numpy array holds
            return False
        v = rng.standard_normal(shape) if dt.kind == "f" else rng.integers(0, 2, shape)
        arrays[arg_key(i, role)] = np.asarray(v).astype(dt)
    np.savez(npz, **arrays)
    return True


def run_ir_case(text: str, workdir: str) -> dict[str, str]:
    """tilefx-opt on the text, then (when accepted) the output parsed again and
    tilefx-run on it with random inputs. Outcome per step."""
    from tilefx.dialects.source import parse_ir
    from tilefx.passes.pipelines import graph_context
    from tilefx.tools import opt, run

    path = os.path.join(workdir, "case.mlir")
    with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
        f.write(text)
    out = os.path.join(workdir, "out.mlir")
    rc, err = call_tool(opt.main, [path, "-o", out])
    res = {"opt": _classify(rc, err, need_location=True), "opt_detail": err[-2000:]}
    if res["opt"] != "accepted":
        return res
    try:
        with open(out) as f:
            parse_ir(graph_context(), f.read(), out)  # the printed program is valid again
    except Exception as e:  # noqa: BLE001
        return {**res, "opt": "crash", "opt_detail": f"accepted but its output does not verify: {e}"}
    npz = os.path.join(workdir, "in.npz")
    if not inputs_for(path, npz):
        return res
    rc, err = call_tool(run.main, [path, "--inputs", npz])
    return {**res, "run": _classify(rc, err, need_location=False), "run_detail": err[-2000:]}


def run_options_case(text: str, workdir: str, sentinel: str) -> dict[str, str]:
    """Options().loadFromFile on the text: accepted, or a tilefx.Error; and
    nothing in it ever runs (the sentinel file stays absent)."""
    from tilefx import Error, Options

    path = os.path.join(workdir, "case.conf")
    with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
        f.write(text)
    try:
        Options().loadFromFile(path)
        outcome, detail = "accepted", ""
    except Error as e:
        outcome, detail = "diagnostic", str(e)
    except BaseException:  # noqa: BLE001
        outcome, detail = "crash", traceback.format_exc()
    if os.path.exists(sentinel):
        os.remove(sentinel)
        outcome, detail = "crash", "an options file ran code: " + text
    return {"options": outcome, "options_detail": detail[-2000:]}


def aten_op_names() -> list[str]:
    from tilefx.dialects.aten import ATEN_OPS

    return sorted(c.name for c in ATEN_OPS.values())
