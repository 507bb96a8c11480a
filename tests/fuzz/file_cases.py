"""Fuzz cases for the files a user receives (docs/security.md): executables
for poptorch.load, npz inputs for tilefx-run, ONNX models for the frontend
and PopART's sessions. Each case mutates a valid seed and reports whether
only a documented error class escaped: "accepted", "diagnostic" or "crash"
(any other exception, with its traceback). tests/fuzz/test_fuzz_files.py runs a
few of each; `make fuzz` many (tests/fuzz/campaign.py)."""

from __future__ import annotations

import functools
import hashlib
import io
import json
import os
import random
import traceback
import zipfile

_JSON_VALUES = [None, True, 0, -1, 1, 2**31, 10**12, 1e308, float("nan"), "", "x" * 300, [], {}, [[1]],
                {"__enum__": "OutputMode", "name": "All"}, {"__dtype__": "float16"}, {"__repr__": "x"},
                "../../etc", "/tmp/elsewhere"]


@functools.lru_cache(maxsize=1)
def executable_seed() -> bytes:
    """A small exported inference executable."""
    import tempfile

    import torch

    import tilefx as poptorch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "seed.poptorch")
        poptorch.inferenceModel(model).compileAndExport(path, torch.ones(2, 4))
        with open(path, "rb") as f:
            return f.read()


def _mutate_json(value, rng: random.Random, depth: int = 0):
    if isinstance(value, dict) and value and rng.random() < 0.8:
        key = rng.choice(sorted(value))
        out = dict(value)
        choice = rng.random()
        if choice < 0.15:
            del out[key]
        elif choice < 0.3:
            out[rng.choice(["profile_dir", "log_dir", "surprise", key + "_"])] = rng.choice(_JSON_VALUES)
        else:
            out[key] = _mutate_json(value[key], rng, depth + 1)
        return out
    if isinstance(value, list) and value and rng.random() < 0.7:
        out = list(value)
        i = rng.randrange(len(out))
        out[i] = _mutate_json(out[i], rng, depth + 1)
        return out
    return rng.choice(_JSON_VALUES)


def mutate_executable(data: bytes, rng: random.Random) -> bytes:
    """A mutant of an executable: a JSON field changed with the manifest made
    to match (so the schema is what must refuse it), a part's bytes flipped,
    a part dropped or duplicated, or the archive's bytes cut or flipped."""
    kind = rng.random()
    if kind < 0.2:
        out = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            out[rng.randrange(len(out))] = rng.randrange(256)
        return bytes(out[:rng.randint(1, len(out))] if rng.random() < 0.3 else out)
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        parts = {n: z.read(n) for n in z.namelist()}
    manifest = json.loads(parts.pop("manifest.json"))
    name = rng.choice(sorted(parts))
    if name.endswith(".json") and kind < 0.8:
        parts[name] = json.dumps(_mutate_json(json.loads(parts[name]), rng)).encode()
    elif kind < 0.9:
        blob = bytearray(parts[name])
        for _ in range(rng.randint(1, 4)):
            if blob:
                blob[rng.randrange(len(blob))] = rng.randrange(256)
        parts[name] = bytes(blob)
    else:
        parts.pop(name)
    manifest["parts"] = {n: {"sha256": hashlib.sha256(b).hexdigest(), "size": len(b)} for n, b in parts.items()}
    if rng.random() < 0.1:
        manifest = _mutate_json(manifest, rng)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as w:
        w.writestr("manifest.json", json.dumps(manifest))
        for n, b in parts.items():
            w.writestr(n, b)
    return buf.getvalue()


def _outcome(fn, errors) -> tuple[str, str]:
    try:
        fn()
        return "accepted", ""
    except errors as e:
        return "diagnostic", str(e)[:500]
    except BaseException:  # noqa: BLE001 - what the fuzz looks for
        return "crash", traceback.format_exc()[-3000:]


def run_executable_case(data: bytes, workdir: str) -> dict[str, str]:
    """poptorch.load (and a call) on the mutant: a result or a poptorch.Error;
    nothing written outside `workdir` (no profile or log directory taken
    from the file)."""
    import torch

    import tilefx as poptorch

    path = os.path.join(workdir, "case.poptorch")
    with open(path, "wb") as f:
        f.write(data)
    before = set(os.listdir(workdir))
    outcome, detail = _outcome(lambda: poptorch.load(path)(torch.ones(2, 4)), poptorch.Error)
    if set(os.listdir(workdir)) - before:
        outcome, detail = "crash", f"loading wrote {sorted(set(os.listdir(workdir)) - before)}"
    return {"load": outcome, "load_detail": detail}


@functools.lru_cache(maxsize=1)
def onnx_seed() -> bytes:
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    w = helper.make_tensor("w", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])
    nodes = [helper.make_node("Add", ["x", "w"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("Mul", ["b", "x"], ["y"])]
    graph = helper.make_graph(nodes, "g", [x], [y], initializer=[w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def mutate_onnx(data: bytes, rng: random.Random) -> bytes:
    """A mutant ONNX model: a node's input renamed (missing producers,
    cycles), a dim or a weight's data changed, nodes reordered or dropped,
    or the bytes flipped or cut."""
    import onnx

    if rng.random() < 0.2:
        out = bytearray(data)
        for _ in range(rng.randint(1, 6)):
            out[rng.randrange(len(out))] = rng.randrange(256)
        return bytes(out[:rng.randint(0, len(out))] if rng.random() < 0.3 else out)
    m = onnx.load_model_from_string(data)
    g = m.graph
    kind = rng.randrange(5)
    if kind == 0:
        node = rng.choice(g.node)
        node.input[rng.randrange(len(node.input))] = rng.choice(["a", "b", "y", "nowhere", "w", ""])
    elif kind == 1:
        nodes = list(g.node)
        rng.shuffle(nodes)
        del g.node[:]
        g.node.extend(nodes[:rng.randint(0, len(nodes))])
    elif kind == 2:
        dim = rng.choice(list(g.input[0].type.tensor_type.shape.dim))
        dim.dim_value = rng.choice([0, 1, 7, 10**6, 10**11])
    elif kind == 3:
        w = g.initializer[0]
        w.dims[0] = rng.choice([0, 2, 4, 10**6, 10**11])
        if rng.random() < 0.5:
            del w.float_data[:]
    else:
        node = rng.choice(g.node)
        node.op_type = rng.choice(["ConstantOfShape", "Loop", "Expand", "Tile", "Range", "Nope"])
    return m.SerializeToString()


def run_onnx_case(data: bytes, workdir: str) -> dict[str, str]:
    """The frontend and a PopART InferenceSession on the mutant: a result, a
    tilefx.Error (the frontend) or a popart_exception (PopART)."""
    import numpy as np

    import tilefx
    from tilefx import popart
    from tilefx.lowering.from_onnx import import_onnx

    frontend = _outcome(lambda: import_onnx(data), tilefx.Error)

    def session():
        s = popart.InferenceSession(data, popart.DataFlow(1, {"y": popart.AnchorReturnType("ALL")}),
                                    popart.DeviceManager().createCpuDevice())
        s.prepareDevice()
        anchors = s.initAnchorArrays()
        s.run(popart.PyStepIO({"x": np.ones((2, 3), np.float32)}, anchors))

    session_outcome = _outcome(session, popart.popart_exception)
    return {"onnx": frontend[0], "onnx_detail": frontend[1], "popart": session_outcome[0],
            "popart_detail": session_outcome[1]}


def run_npz_case(data: bytes, workdir: str) -> dict[str, str]:
    """tilefx-run on a mutated npz: exit 0 or 1 with a diagnostic, never 2
    (internal error) nor a traceback."""
    import contextlib

    from tilefx.tools import run

    ir = os.path.join(workdir, "f.mlir")
    with open(ir, "w") as f:
        f.write("func.func @main(%a: tensor<2xf32> {tilefx.input = 0 : i64}) -> tensor<2xf32> {\n"
                "  %0 = aten.relu %a : tensor<2xf32> -> tensor<2xf32>\n  func.return %0 : tensor<2xf32>\n}\n")
    path = os.path.join(workdir, "in.npz")
    with open(path, "wb") as f:
        f.write(data)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            rc = run.main([ir, "--inputs", path])
    except BaseException:  # noqa: BLE001
        return {"npz": "crash", "npz_detail": traceback.format_exc()[-3000:]}
    text = err.getvalue()
    bad = rc not in (0, 1) or "Traceback" in text or "internal error" in text
    return {"npz": "crash" if bad else ("accepted" if rc == 0 else "diagnostic"), "npz_detail": text[-2000:]}


def npz_seed() -> bytes:
    import numpy as np

    buf = io.BytesIO()
    np.savez(buf, input0=np.array([1.0, -2.0], np.float32))
    return buf.getvalue()


def mutate_npz(data: bytes, rng: random.Random) -> bytes:
    """A mutant npz: its .npy header's shape or dtype rewritten (huge, object,
    negative), or its bytes flipped or cut."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        member = z.read("input0.npy")
    if rng.random() < 0.6:
        header_end = member.index(b"\n") + 1
        header = member[10:header_end].decode("latin1")
        header = header.replace("(2,)", rng.choice(["(100000, 100000, 10)", "(-1,)", "(3,)", "()", "(2, 0)"])) \
            if rng.random() < 0.6 else header.replace("'<f4'", rng.choice(["'|O'", "'<f8'", "'V8'", "'<i4'"]))
        header = header.ljust(len(member[10:header_end]) - 1)[:len(member[10:header_end]) - 1] + "\n"
        member = member[:10] + header.encode("latin1") + member[header_end:]
    else:
        out = bytearray(member)
        for _ in range(rng.randint(1, 6)):
            out[rng.randrange(len(out))] = rng.randrange(256)
        member = bytes(out[:rng.randint(1, len(out))])
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as w:
        w.writestr("input0.npy", member)
    return buf.getvalue()
