"""The plugin registry (tilefx/backend/runtime.py): the verifier's rules and
the executor's kernel providers change only when a caller installs a plugin,
never as a side effect of an import; tilefx-opt installs torch's rules only
for IR with `aten` ops, and imports no torch for IR without them."""

from __future__ import annotations

import ast
import json
import pathlib
import subprocess
import sys

from tilefx.backend import runtime

from repo_paths import REPO

ROOT = pathlib.Path(REPO)
HOOK_LISTS = {"KERNEL_PROVIDERS", "ATTENTION_PROVIDERS", "CALL_HOOKS", "RESULT_TYPE_RULES"}

IPU_ONLY = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = ipu.nop %x : tensor<4xf32> -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
"""
ATEN = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = aten.relu %x : tensor<4xf32> -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
"""


def _run(code: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


_REPORT = ("import json, sys; from tilefx.backend import runtime; "
           "print(json.dumps({'torch': 'torch' in sys.modules, 'installed': list(runtime.installed()), "
           "'executor': 'tilefx.backend.executor' in sys.modules}))")


def test_importing_the_lowering_installs_nothing():
    got = _run("import tilefx.lowering.aten_kernels, tilefx.lowering.torch_rules; " + _REPORT)
    assert got["installed"] == []


def _opt(tmp_path, text: str) -> dict:
    path = tmp_path / "in.mlir"
    path.write_text(text)
    return _run("import io, contextlib; from tilefx.tools.opt import main\n"
                f"with contextlib.redirect_stdout(io.StringIO()): rc = main([{str(path)!r}])\n"
                "assert rc == 0, rc\n" + _REPORT)


def test_opt_on_ir_without_aten_ops_imports_no_torch(tmp_path):
    got = _opt(tmp_path, IPU_ONLY)
    assert got == {"torch": False, "installed": [], "executor": False}


def test_opt_on_aten_ir_installs_torchs_rules_only(tmp_path):
    got = _opt(tmp_path, ATEN)
    assert got["installed"] == ["torch-rules"] and got["torch"] and not got["executor"]


def test_install_adds_each_plugin_once():
    from tilefx.backend import executor
    from tilefx.dialects.aten import RESULT_TYPE_RULES

    def rule(op):
        return None

    def provide(op):
        return None

    class Probe(runtime.Plugin):
        name = "test-probe"
        result_type_rules = (rule,)
        kernel_providers = (provide,)

    try:
        runtime.install(Probe(), Probe())
        assert RESULT_TYPE_RULES.count(rule) == 1 and executor.KERNEL_PROVIDERS.count(provide) == 1
        assert "test-probe" in runtime.installed()
    finally:
        RESULT_TYPE_RULES.remove(rule)
        executor.KERNEL_PROVIDERS.remove(provide)
        runtime._INSTALLED.pop("test-probe", None)


def test_only_the_registry_changes_the_hook_lists():
    changed = []
    for path in sorted((ROOT / "tilefx").rglob("*.py")):
        if path.name == "runtime.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in ("append", "extend", "insert", "remove") and \
                    getattr(node.func.value, "id", getattr(node.func.value, "attr", None)) in HOOK_LISTS:
                changed.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not changed, changed
