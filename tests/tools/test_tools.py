"""tilefx-opt and tilefx-run from the command line, on IR the frontend made."""

import contextlib
import importlib
import io
import subprocess
import sys
from unittest import mock

import numpy as np
import pytest
import torch
from torch import nn

import tilefx
from models import MLP, WithLoss


def _command(*args, input=None):
    """`python -m <tool> args` in a fresh interpreter: the command users type."""
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, input=input,
                          timeout=120)


def _run(module, *args, input=None):
    """What `python -m <tool> args` does (`sys.exit(main())`), in this process:
    exit code, stdout and stderr of the tool's main(). A fresh interpreter per
    call spends seconds importing torch; `_command` runs the real command
    where the entry point itself is what a test checks."""
    main = importlib.import_module(module).main
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
            mock.patch.object(sys, "stdin", io.TextIOWrapper(io.BytesIO((input or "").encode()))):
        try:
            code = main(list(args))
        except SystemExit as e:  # argparse: --help, usage errors
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return subprocess.CompletedProcess([module, *args], code, out.getvalue(), err.getvalue())


def test_opt_round_trips_a_traced_training_graph(tmp_path):
    torch.manual_seed(0)
    m = WithLoss(MLP(), nn.CrossEntropyLoss())
    ex = tilefx.compile(m, torch.randn(4, 12), torch.randint(0, 5, (4,)), training=True,
                        optimizer=tilefx.optim.Adam(m.parameters()))
    src = tmp_path / "import.mlir"
    src.write_text(ex.ir("import"))
    out = _run("tilefx.tools.opt", str(src), "-p", "ipu-training-step{optimizer=\"adam\"},dce")
    assert out.returncode == 0, out.stderr
    assert "ipu.adam" in out.stdout and "ipu.accumulate" in out.stdout
    again = _run("tilefx.tools.opt", input=out.stdout)
    assert again.returncode == 0 and again.stdout == out.stdout


def test_opt_reports_malformed_ir_with_line_and_column(tmp_path):
    bad = tmp_path / "bad.mlir"
    bad.write_text("func.func @f(%a: tensor<2xf32>) -> tensor<2xf32> {\n"
                   "  %0 = aten.relu : tensor<2xf32> -> tensor<2xf32>\n"
                   "  func.return %0 : tensor<2xf32>\n}\n")
    out = _run("tilefx.tools.opt", str(bad))
    assert out.returncode != 0
    assert "Traceback" not in out.stderr
    assert ":2:" in out.stderr  # line 2, with its column


def test_run_executes_an_inference_graph(tmp_path):
    torch.manual_seed(0)
    model = MLP().eval()
    x = torch.randn(4, 12)
    ex = tilefx.compile(model, x)
    src = tmp_path / "mlp.mlir"
    src.write_text(ex.ir("graph"))
    arrays = {n: p.detach().numpy() for n, p in model.named_parameters()}
    arrays.update({n: b.numpy() for n, b in model.named_buffers()})
    arrays["input0"] = x.numpy()
    np.savez(tmp_path / "in.npz", **arrays)
    out = _command("tilefx.tools.run", str(src), "--inputs", str(tmp_path / "in.npz"),
                   "--output", str(tmp_path / "out.npz"))
    assert out.returncode == 0, out.stderr
    got = np.load(tmp_path / "out.npz")["output0"]
    np.testing.assert_allclose(got, model(x).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_run_reports_a_missing_input(tmp_path):
    src = tmp_path / "f.mlir"
    src.write_text("func.func @main(%a: tensor<2xf32> {tilefx.input = 0 : i64}) -> tensor<2xf32> {\n"
                   "  %0 = aten.relu %a : tensor<2xf32> -> tensor<2xf32>\n"
                   "  func.return %0 : tensor<2xf32>\n}\n")
    np.savez(tmp_path / "in.npz", other=np.zeros(2))
    out = _run("tilefx.tools.run", str(src), "--inputs", str(tmp_path / "in.npz"))
    assert out.returncode != 0 and "input0" in out.stderr and "Traceback" not in out.stderr


WRONG_TYPES = {
    "result shape": ("%0 = aten.relu %a : tensor<2xf32> -> tensor<3xf32>", "tensor<3xf32>",
                     "result shape [3] should be [2]"),
    "operand shapes": ("%0 = aten.add.Tensor %a, %b : tensor<2xf32>, tensor<3xf32> -> tensor<2xf32>",
                       "tensor<2xf32>", "do not broadcast"),
    # not an elementwise op: torch's own rule (its meta function) rejects it at parse time
    "matmul shapes": ("%0 = aten.mm %a2, %b2 : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>",
                      "tensor<2x3xf32>", "f.mlir:2:3: error: aten.mm: torch rejects"),
}


@pytest.mark.parametrize("case", WRONG_TYPES)
def test_run_reports_ir_whose_types_are_wrong(tmp_path, case):
    body, result, message = WRONG_TYPES[case]
    src = tmp_path / "f.mlir"
    src.write_text("func.func @main(%a: tensor<2xf32> {tilefx.input = 0 : i64}, "
                   "%b: tensor<3xf32> {tilefx.input = 1 : i64}, "
                   "%a2: tensor<2x3xf32> {tilefx.input = 2 : i64}, "
                   f"%b2: tensor<2x3xf32> {{tilefx.input = 3 : i64}}) -> {result} {{\n"
                   f"  {body}\n  func.return %0 : {result}\n}}\n")
    np.savez(tmp_path / "in.npz", input0=np.zeros(2, np.float32), input1=np.zeros(3, np.float32),
             input2=np.zeros((2, 3), np.float32), input3=np.zeros((2, 3), np.float32))
    out = _run("tilefx.tools.run", str(src), "--inputs", str(tmp_path / "in.npz"))
    assert out.returncode != 0 and message in out.stderr and "Traceback" not in out.stderr


def test_run_rejects_an_integer_array_for_a_float_argument(tmp_path):
    src = tmp_path / "f.mlir"
    src.write_text("func.func @main(%a: tensor<2xf32> {tilefx.input = 0 : i64}) -> tensor<2xf32> {\n"
                   "  %0 = aten.relu %a : tensor<2xf32> -> tensor<2xf32>\n"
                   "  func.return %0 : tensor<2xf32>\n}\n")
    np.savez(tmp_path / "in.npz", input0=np.zeros(2, np.int64))
    out = _run("tilefx.tools.run", str(src), "--inputs", str(tmp_path / "in.npz"))
    assert out.returncode != 0 and "dtype int64" in out.stderr


def test_run_reports_a_kernel_failure_at_the_op(tmp_path):
    """An op torch's shape rules accept but its kernel refuses (mm of f32 by
    i64) fails at the op's line and column, not as a bare `error:`."""
    src = tmp_path / "f.mlir"
    src.write_text("func.func @main(%a: tensor<2x3xf32> {tilefx.input = 0 : i64}, "
                   "%b: tensor<3x2xi64> {tilefx.input = 1 : i64}) -> tensor<2x2xf32> {\n"
                   "  %0 = aten.mm %a, %b : tensor<2x3xf32>, tensor<3x2xi64> -> tensor<2x2xf32>\n"
                   "  func.return %0 : tensor<2x2xf32>\n}\n")
    np.savez(tmp_path / "in.npz", input0=np.ones((2, 3), np.float32), input1=np.ones((3, 2), np.int64))
    out = _run("tilefx.tools.run", str(src), "--inputs", str(tmp_path / "in.npz"))
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert f"{src}:2:3: error: aten.mm failed on its operands" in out.stderr


def test_run_refuses_two_arguments_bound_to_one_array(tmp_path):
    src = tmp_path / "f.mlir"
    src.write_text("func.func @main(%a: tensor<2xf32> {tilefx.input = 0 : i64}, "
                   "%b: tensor<2xf32> {tilefx.input = 0 : i64}) -> tensor<2xf32> {\n"
                   "  %0 = aten.sub.Tensor %a, %b : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>\n"
                   "  func.return %0 : tensor<2xf32>\n}\n")
    np.savez(tmp_path / "in.npz", input0=np.ones(2, np.float32), arr_0=np.zeros(2, np.float32))
    out = _run("tilefx.tools.run", str(src), "--inputs", str(tmp_path / "in.npz"))
    assert out.returncode == 1 and "arguments 0 and 1 both take the array 'input0'" in out.stderr


def test_run_of_a_round_tripped_training_step_equals_the_in_process_run(tmp_path):
    """A training step's graph IR printed in generic form and read back runs
    under tilefx-run to the numbers the in-process executor gives the IR
    (@main's gradients into the accumulators, then @update). An accumulator
    shares its parameter's name: tilefx-run bound both to the parameter's
    array before accumulators took `accum:<name>`."""
    from irtext import parse
    from tilefx.backend.executor import CompiledFunction
    from tilefx.dialects.irutil import arg_roles, result_roles
    from tilefx.dialects.aten import np_dtype
    from tilefx.dialects.irutil import find_func
    from tilefx.tools.run import arg_key, result_key

    torch.manual_seed(0)
    m = WithLoss(MLP(), nn.CrossEntropyLoss())
    ex = tilefx.compile(m, torch.randn(4, 12), torch.randint(0, 5, (4,)), training=True,
                        optimizer=tilefx.optim.Adam(m.parameters(), lr=1e-2))
    text = ex.ir("graph")
    (tmp_path / "graph.mlir").write_text(text)
    generic = _run("tilefx.tools.opt", str(tmp_path / "graph.mlir"), "--print-op-generic")
    assert generic.returncode == 0, generic.stderr
    src = tmp_path / "generic.mlir"
    src.write_text(generic.stdout)
    module = parse(text)
    rng = np.random.default_rng(0)
    for name in ("main", "update"):
        fn = find_func(module, name)
        arrays = {}
        for i, (a, role) in enumerate(zip(fn.body.block.args, arg_roles(fn))):
            shape, dtype = tuple(a.type.get_shape()), np_dtype(a.type.element_type)
            arrays[arg_key(i, role)] = (rng.integers(0, 5, shape) if dtype.kind == "i" else
                                        rng.random(shape) + 0.5).astype(dtype)
        assert len(arrays) == len(fn.body.block.args)
        want = CompiledFunction(fn, np.random.default_rng(0))(*[a.copy() for a in arrays.values()])
        np.savez(tmp_path / "in.npz", **arrays)
        out = _run("tilefx.tools.run", str(src), "--function", name, "--inputs", str(tmp_path / "in.npz"),
                   "--output", str(tmp_path / "out.npz"))
        assert out.returncode == 0, out.stderr
        got = np.load(tmp_path / "out.npz")
        for i, (w, role) in enumerate(zip(want, result_roles(fn))):
            np.testing.assert_array_equal(got[result_key(i, role)], w, err_msg=f"@{name} {result_key(i, role)}")


@pytest.mark.parametrize("level", ["graph", "device"])
def test_run_takes_lifted_constants_from_the_ir(tmp_path, capsys, level):
    """A model's tensor constants ride in the printed IR (`tilefx.value`): tilefx-run
    runs it on the weights and inputs alone, equal to eager torch; constants take
    no positional array, and an array named like a constant overrides its value."""
    from models import WithConstants

    from tilefx.tools.run import main as run

    torch.manual_seed(0)
    model = WithConstants().eval()
    x, idx = torch.randn(5, 4), torch.randint(0, 40, (5,))
    ex = tilefx.compile(model, x, idx)
    src = tmp_path / "m.mlir"
    src.write_text(ex.ir(level))
    weights = {n: p.detach().numpy() for n, p in model.named_parameters()}
    np.savez(tmp_path / "in.npz", x.numpy(), idx.numpy(), **weights)  # inputs as arr_0, arr_1
    assert run([str(src), "--inputs", str(tmp_path / "in.npz"), "--output", str(tmp_path / "out.npz")]) == 0, \
        capsys.readouterr().err
    with torch.no_grad():
        want = model(x, idx).numpy()
        np.testing.assert_allclose(np.load(tmp_path / "out.npz")["output0"], want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(ex(x, idx).numpy(), want, rtol=1e-5, atol=1e-6)
        np.savez(tmp_path / "in.npz", x=x.numpy(), idx=idx.numpy(), state=np.ones((5, 3), np.float32), **weights)
        assert run([str(src), "--inputs", str(tmp_path / "in.npz"), "--output", str(tmp_path / "out.npz")]) == 0, \
            capsys.readouterr().err
        model.state = torch.ones(5, 3)
        np.testing.assert_allclose(np.load(tmp_path / "out.npz")["output0"], model(x, idx).numpy(),
                                   rtol=1e-5, atol=1e-6)


def test_run_reports_a_constant_value_of_the_wrong_shape(tmp_path, capsys):
    from tilefx.tools.run import main as run

    src = tmp_path / "f.mlir"
    src.write_text('func.func @main(%a: tensor<3xf32> {tilefx.input = 0 : i64}, %c: tensor<3xf32> '
                   '{tilefx.const = "c", tilefx.value = dense<[1.0, 2.0]> : tensor<2xf32>}) -> tensor<3xf32> {\n'
                   "  %0 = aten.add.Tensor %a, %c : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>\n"
                   "  func.return %0 : tensor<3xf32>\n}\n")
    np.savez(tmp_path / "in.npz", a=np.zeros(3, np.float32))
    assert run([str(src), "--inputs", str(tmp_path / "in.npz")]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "argument 1 of @main: tilefx.value has type tensor<2xf32>, the argument is tensor<3xf32>" in err


def test_run_of_an_exported_onnx_lstm_equals_onnxruntime(tmp_path, capsys):
    """torch.onnx.export's LSTM makes its zero initial state with Constant nodes:
    tilefx-opt's IR of the file carries them, so tilefx-run on the file's
    initializers and input equals onnxruntime."""
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    from tilefx.tools.opt import main as opt
    from tilefx.tools.run import main as run

    class Lstm(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTM(6, 8, num_layers=2, batch_first=True)

        def forward(self, x):
            return self.rnn(x)[0]

    torch.manual_seed(0)
    x = torch.randn(3, 5, 6)
    path = tmp_path / "lstm.onnx"
    torch.onnx.export(Lstm().eval(), (x,), str(path), input_names=["x"], dynamo=False)
    assert opt([str(path)]) == 0
    ir = capsys.readouterr().out
    assert 'tilefx.value = dense<0.000000e+00> : tensor<1x3x8xf32>' in ir  # h0, c0 of each layer
    (tmp_path / "lstm.mlir").write_text(ir)
    model = onnx.load(str(path))
    np.savez(tmp_path / "in.npz", x=x.numpy(),
             **{t.name: numpy_helper.to_array(t) for t in model.graph.initializer})
    assert run([str(tmp_path / "lstm.mlir"), "--inputs", str(tmp_path / "in.npz"),
                "--output", str(tmp_path / "out.npz")]) == 0, capsys.readouterr().err
    want = ort.InferenceSession(str(path)).run(None, {"x": x.numpy()})[0]
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["output0"], want, rtol=1e-5, atol=1e-6)


def test_run_of_onnx_constant_nodes_equals_onnxruntime(tmp_path, capsys):
    """Constant nodes of every kind the graph uses at run time (a float mask
    with -inf, int64 Gather indices, a bool condition) become constant arguments
    whose values the IR carries."""
    import onnx
    import onnxruntime as ort
    from onnx import helper, numpy_helper

    from tilefx.tools.opt import main as opt
    from tilefx.tools.run import main as run

    def const(name, value):
        return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value, name))

    f = onnx.TensorProto.FLOAT
    nodes = [const("mask", np.array([[0.0, -np.inf, 0.0, -np.inf]], np.float32)),
             const("order", np.array([3, 1, 0, 2], np.int64)),
             const("keep", np.array([True, False, True, True])),
             helper.make_node("Add", ["x", "mask"], ["masked"]),
             helper.make_node("Softmax", ["masked"], ["p"], axis=1),
             helper.make_node("Gather", ["p", "order"], ["g"], axis=1),
             helper.make_node("Neg", ["g"], ["n"]),
             helper.make_node("Where", ["keep", "g", "n"], ["y"])]
    graph = helper.make_graph(nodes, "consts", [helper.make_tensor_value_info("x", f, [2, 4])],
                              [helper.make_tensor_value_info("y", f, [2, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    assert opt([str(path)]) == 0
    ir = capsys.readouterr().out
    for value in ("dense<[[0, -8388608, 0, -8388608]]> : tensor<1x4xi32>",  # -inf as its bits
                  "dense<[3, 1, 0, 2]> : tensor<4xi64>", "dense<[true, false, true, true]> : tensor<4xi1>"):
        assert f"tilefx.value = {value}" in ir
    (tmp_path / "m.mlir").write_text(ir)
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    assert run([str(tmp_path / "m.mlir"), "--inputs", str(tmp_path / "in.npz"),
                "--output", str(tmp_path / "out.npz")]) == 0, capsys.readouterr().err
    want = ort.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["output0"], want, rtol=1e-5, atol=1e-6)


def test_opt_reads_an_onnx_files_external_data_next_to_it(tmp_path, capsys):
    """torch.onnx.export (the default, dynamo exporter) keeps the weights in
    `model.onnx.data`: tilefx-opt imports the file by its path, so onnx finds
    them, and the IR runs on them equal to onnxruntime."""
    import onnx
    import onnxruntime as ort
    from onnx import helper, numpy_helper

    from tilefx.tools.opt import main as opt
    from tilefx.tools.run import main as run

    f = onnx.TensorProto.FLOAT
    w = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "ext",
                              [helper.make_tensor_value_info("x", f, [2, 3])],
                              [helper.make_tensor_value_info("y", f, [2, 4])],
                              [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path), save_as_external_data=True, location="m.onnx.data", size_threshold=0)
    assert (tmp_path / "m.onnx.data").exists()
    assert opt([str(path)]) == 0, capsys.readouterr().err
    (tmp_path / "m.mlir").write_text(capsys.readouterr().out)
    x = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x, w=w)
    assert run([str(tmp_path / "m.mlir"), "--inputs", str(tmp_path / "in.npz"),
                "--output", str(tmp_path / "out.npz")]) == 0, capsys.readouterr().err
    want = ort.InferenceSession(str(path)).run(None, {"x": x})[0]
    np.testing.assert_allclose(np.load(tmp_path / "out.npz")["output0"], want, rtol=1e-5, atol=1e-6)


def test_constants_of_a_model_on_the_meta_device_carry_no_value():
    """A model built on the meta device (for sizing) has no values: its lifted
    tensor attributes are constants without `tilefx.value` (never zeros posing
    as values); a tensor forward makes still carries its own."""
    from models import WithConstants

    with torch.device("meta"):
        model = WithConstants().eval()
    opts = tilefx.Options()
    opts.useOfflineIpuTarget()
    ex = tilefx.inferenceModel(model, opts)
    ex.compile(torch.empty(5, 4, device="meta"), torch.zeros(5, dtype=torch.int64, device="meta"))
    ir = ex.ir("graph")
    assert '{tilefx.const = "table"}' in ir and '{tilefx.const = "state"}' in ir
    assert '{tilefx.const = "_tensor_constant0", tilefx.value = dense<[2.000000e+00, 3.000000e+00, ' \
           '4.000000e+00]> : tensor<3xf32>}' in ir


def test_opt_help_names_tilefx_passes_and_targets_and_hides_the_rest():
    """--help names tilefx's passes and the IR target, not xDSL's ~100 others
    (riscv, x86, stencil, ...); --all-passes lists those, tilefx's first."""
    from tilefx.tools.universe import PASSES

    out = _command("tilefx.tools.opt", "--help")
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split()).replace("- ", "-")  # argparse wraps at hyphens
    assert all(name in text for name in PASSES)
    for hidden in ("convert-arith-to-riscv", "stencil-unroll", "wgsl", "arm-asm", "x86-asm"):
        assert hidden not in text, hidden
    assert "--all-passes" in text
    listed = _run("tilefx.tools.opt", "--all-passes")
    assert listed.returncode == 0, listed.stderr
    lines = [line.strip() for line in listed.stdout.splitlines()]
    assert lines[1:1 + len(PASSES)] == list(PASSES)
    assert {"convert-arith-to-riscv", "cse", "wgsl", "arm-asm", "mlir"} <= set(lines)
