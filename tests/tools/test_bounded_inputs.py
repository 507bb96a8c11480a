"""Inputs from files are checked before anything they declare is allocated
and fail as diagnostics, never as tracebacks or gigabytes (docs/security.md):
npz arrays for tilefx-run, ONNX graphs for the frontend and PopART."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest

from tilefx.tools import run

_IR = ("func.func @main(%a: tensor<2xf32> {tilefx.input = 0 : i64}) -> tensor<2xf32> {\n"
       "  %0 = aten.relu %a : tensor<2xf32> -> tensor<2xf32>\n"
       "  func.return %0 : tensor<2xf32>\n}\n")


def _npy(shape, dtype="<f4", data=b"") -> bytes:
    """An .npy member whose header declares `shape` (the data may be shorter)."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": dtype, "fortran_order": False, "shape": shape})
    return buf.getvalue() + data


def _tool(tmp_path, capsys, members: dict[str, bytes] | None = None, raw: bytes | None = None):
    (tmp_path / "f.mlir").write_text(_IR)
    path = tmp_path / "in.npz"
    if raw is not None:
        path.write_bytes(raw)
    else:
        with zipfile.ZipFile(path, "w") as z:
            for n, b in members.items():
                z.writestr(n, b)
    code = run.main([str(tmp_path / "f.mlir"), "--inputs", str(path)])
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    return code, err


def test_an_object_array_npz_is_refused_not_unpickled(tmp_path, capsys):
    buf = io.BytesIO()
    np.save(buf, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    code, err = _tool(tmp_path, capsys, {"input0.npy": buf.getvalue()})
    assert code == 1 and "holds Python objects" in err


def test_a_huge_npz_header_is_refused_before_allocating(tmp_path, capsys):
    code, err = _tool(tmp_path, capsys, {"input0.npy": _npy((100000, 100000, 10), data=bytes(64))})
    assert code == 1 and "TILEFX_MAX_TENSOR_BYTES" in err
    code, err = _tool(tmp_path, capsys, {"input0.npy": _npy((1000, 1000), data=bytes(64))})
    assert code == 1 and "declares shape (1000, 1000) float32 (4,000,000 bytes) but holds" in err


def test_a_single_array_or_garbage_is_a_diagnostic(tmp_path, capsys):
    code, err = _tool(tmp_path, capsys, raw=_npy((2,), data=bytes(8)))
    assert code == 1 and "is a single array" in err
    code, err = _tool(tmp_path, capsys, raw=b"PK\x03\x04 not really a zip")
    assert code == 1 and "cannot read --inputs" in err


def test_a_valid_npz_still_runs(tmp_path, capsys):
    buf = io.BytesIO()
    np.save(buf, np.array([-1.0, 2.0], np.float32))
    code, err = _tool(tmp_path, capsys, {"input0.npy": buf.getvalue()})
    assert code == 0, err


# -- ONNX graphs ---------------------------------------------------------------

def _onnx(nodes, inputs=None, outputs=None, inits=()):
    from onnx import TensorProto, helper

    inputs = inputs or [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])]
    outputs = outputs or [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])]
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def _import_error(model) -> str:
    import tilefx
    from tilefx.lowering.from_onnx import import_onnx

    with pytest.raises(tilefx.Error) as info:
        import_onnx(model)
    return str(info.value)


def _weight_without_data():
    from onnx import TensorProto

    w = TensorProto(name="w", data_type=TensorProto.FLOAT)
    w.dims.extend([1000, 2])
    return w


def test_an_onnx_weight_with_dims_and_no_data_is_an_error():
    from onnx import helper

    message = _import_error(_onnx([helper.make_node("Add", ["x", "w"], ["y"])], inits=[_weight_without_data()]))
    assert "initializer 'w' of dims [1000, 2] holds 0 value(s), its dims declare 2000" in message


def test_cycles_and_missing_producers_are_errors_naming_the_node():
    from onnx import helper

    cyclic = _onnx([helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
                    helper.make_node("Relu", ["a"], ["y"])])
    assert "node 0 (Add) reads 'b', which node 1 (Relu) makes after it: the graph has a cycle" in \
        _import_error(cyclic)
    missing = _onnx([helper.make_node("Add", ["x", "nowhere"], ["y"])])
    assert "node 0 (Add) reads 'nowhere', which no node, graph input or initializer makes" in _import_error(missing)
    assert "graph output 'y' is made by no node" in _import_error(_onnx([helper.make_node("Relu", ["x"], ["z"])]))


def test_an_empty_onnx_file_is_said_to_be_empty(tmp_path):
    (tmp_path / "empty.onnx").write_bytes(b"")
    assert "holds no graph" in _import_error(str(tmp_path / "empty.onnx"))


def test_declared_sizes_are_checked_before_allocating():
    from onnx import TensorProto, helper

    big_input = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [100000, 1000000])]
    assert "the input 'x' of shape [100000, 1000000]" in \
        _import_error(_onnx([helper.make_node("Relu", ["x"], ["y"])], inputs=big_input))
    shape = helper.make_tensor("s", TensorProto.INT64, [2], [100000, 1000000])
    huge = _onnx([helper.make_node("ConstantOfShape", ["s"], ["y"])],
                 outputs=[helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits=[shape])
    assert "ConstantOfShape" in (m := _import_error(huge)) and "TILEFX_MAX_TENSOR_BYTES" in m


def test_a_loop_without_a_trip_count_is_an_error():
    from onnx import TensorProto, helper

    info = helper.make_tensor_value_info
    body = helper.make_graph([helper.make_node("Identity", ["c"], ["co"])], "b",
                             [info("i", TensorProto.INT64, []), info("cond", TensorProto.BOOL, []),
                              info("c", TensorProto.FLOAT, [2])],
                             [info("cond", TensorProto.BOOL, []), info("co", TensorProto.FLOAT, [2])])
    forever = _onnx([helper.make_node("Loop", ["", "t", "x"], ["y"], body=body)],
                    inits=[helper.make_tensor("t", TensorProto.BOOL, [], [True])])
    assert "more than the 4096 iterations" in _import_error(forever)


def test_popart_reports_a_bad_graph_as_a_popart_exception():
    from onnx import helper

    from tilefx import popart

    cyclic = _onnx([helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
                    helper.make_node("Relu", ["a"], ["y"])])
    with pytest.raises(popart.popart_exception, match="has a cycle"):
        popart.InferenceSession(cyclic, popart.DataFlow(1, {"y": popart.AnchorReturnType("ALL")}),
                                popart.DeviceManager().createCpuDevice()).prepareDevice()
    with pytest.raises(popart.popart_exception):
        popart.InferenceSession(b"", popart.DataFlow(1, {"y": popart.AnchorReturnType("ALL")}),
                                popart.DeviceManager().createCpuDevice()).prepareDevice()
