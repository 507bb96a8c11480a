"""The plugin registry (tilefx/runtime.py): the verifier's rules and the
executor's kernel providers are the hooks of a registry object callers
install plugins into, never module-level lists and never filled as a side
effect of an import; tilefx-opt installs torch's rules only for IR with
`aten` ops, and imports no torch (nor numpy) for IR without them."""

from __future__ import annotations

import ast
import json
import pathlib
import subprocess
import sys

import pytest

from tilefx.runtime import RUNTIME, Plugin, Runtime

from repo_paths import REPO

ROOT = pathlib.Path(REPO)
HOOKS = ("result_type_rules", "kernel_providers", "attention_providers", "call_hooks")

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


_REPORT = ("import json, sys; from tilefx.runtime import RUNTIME; "
           "print(json.dumps({'torch': 'torch' in sys.modules, 'installed': list(RUNTIME.installed()), "
           "'executor': 'tilefx.backend.executor' in sys.modules, 'numpy': 'numpy' in sys.modules}))")


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
    assert got == {"torch": False, "installed": [], "executor": False, "numpy": False}


def test_opt_on_aten_ir_installs_torchs_rules_only(tmp_path):
    got = _opt(tmp_path, ATEN)
    assert got["installed"] == ["torch-rules"] and got["torch"] and not got["executor"]


def test_opt_on_elementwise_aten_ir_loads_no_symbolic_shapes(tmp_path):
    """An elementwise op is typed by ATen's CPU kernel (lowering/torch_rules.py):
    no meta function runs, so neither sympy nor torch's symbolic shapes nor its
    compiler are imported (half of the start-up on `aten` IR)."""
    path = tmp_path / "in.mlir"
    path.write_text(ATEN)
    got = _run("import io, contextlib, json, sys; from tilefx.tools.opt import main\n"
               f"with contextlib.redirect_stdout(io.StringIO()): rc = main([{str(path)!r}])\n"
               "assert rc == 0, rc\n"
               "print(json.dumps(sorted(m for m in ('sympy', 'torch.fx.experimental.symbolic_shapes', "
               "'torch._dynamo', 'torch._inductor') if m in sys.modules) + ['torch' in sys.modules]))")
    assert got == [True]


def test_the_verifier_imports_torch_with_the_collector_paused():
    """torch's import (~250,000 objects) runs no collection: each would walk
    every live object, xDSL's included (tilefx/gcpause.py); the collector is
    on again after."""
    got = _run("import gc, json, sys\n"
               "import xdsl.dialects.builtin\n"
               "from tilefx.lowering.torch_rules import load_torch\n"
               "runs = []\n"
               "gc.callbacks.append(lambda phase, info: runs.append(info['generation']) if phase == 'start' else None)\n"
               "assert 'torch' not in sys.modules\n"
               "load_torch()\n"
               "gc.callbacks.clear()\n"
               "print(json.dumps({'collections': len(runs), 'enabled': gc.isenabled(), 'torch': 'torch' in sys.modules}))")
    assert got == {"collections": 0, "enabled": True, "torch": True}


def _rule(op):
    return None


def _provide(op):
    return None


class _Probe(Plugin):
    name = "test-probe"
    result_type_rules = (_rule,)
    kernel_providers = (_provide,)


def test_install_adds_each_plugin_once_to_its_registry_only():
    registry = Runtime()
    registry.install(_Probe(), _Probe())
    assert registry.result_type_rules == (_rule,) and registry.kernel_providers == (_provide,)
    assert registry.installed() == ("test-probe",)
    assert _rule not in RUNTIME.result_type_rules and "test-probe" not in RUNTIME.installed()


def test_the_verifier_runs_the_registrys_rules(monkeypatch):
    from tilefx.dialects.aten import create_aten_op
    from xdsl.dialects.builtin import TensorType, f32
    from xdsl.utils.exceptions import VerifyException
    from xdsl.utils.test_value import create_ssa_value

    seen = []

    def reject(op):
        seen.append(op.name)
        raise VerifyException("rejected by the probe")

    class Rejects(Plugin):
        name = "test-rejects"
        result_type_rules = (reject,)

    t = TensorType(f32, [4])
    op = create_aten_op("relu.default", {"self": create_ssa_value(t)}, {}, [t])
    registry = Runtime()
    registry.install(Rejects())
    monkeypatch.setattr("tilefx.dialects.aten.RUNTIME", registry)  # the registry the verifier reads
    with pytest.raises(VerifyException, match="rejected by the probe"):
        op.verify()
    assert seen == ["aten.relu"]


@pytest.mark.parametrize("module", ["tilefx.dialects.aten", "tilefx.backend.executor"])
def test_no_module_keeps_hook_lists_of_its_own(module):
    """The hooks live in the registry object only: the dialect and the
    executor keep no list of them that a plugin (or an import) could fill."""
    import importlib

    mod = importlib.import_module(module)
    lists = [name for name, v in vars(mod).items() if isinstance(v, list) and name.isupper()
             and any(h in name.lower() for h in ("rule", "provider", "hook"))]
    assert not lists, lists


def test_only_the_registry_sets_its_hooks():
    """No module but tilefx/runtime.py assigns a registry's hook attributes."""
    changed = []
    for path in sorted((ROOT / "tilefx").rglob("*.py")):
        if path == ROOT / "tilefx" / "runtime.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
            for t in targets:
                if isinstance(t, ast.Attribute) and t.attr in HOOKS:
                    changed.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not changed, changed
