"""The import direction of docs/architecture.md: each layer imports only from
its own layer or the ones below, so a newcomer can read the data flow from
the folders and no layer is pulled in by one beneath it. Function-level
(lazy) imports count too."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent / "tilefx"

# lowest first; a module may import from its own rank or lower ones
LAYERS = {
    "errors": 0,
    "gcpause": 0,
    "limits": 0,
    "dialects": 1,
    "passes": 2,
    "backend": 3,
    "lowering": 4,
    "api": 5,
    "popart": 5,
    "tools": 5,
    "__init__": 6,
}
# the machine model: the backend modules that analyse the graph IR (hardware
# constants, per-op costs, schedules) without executing it. They sit between
# the dialects and the passes, so passes that plan from costs (ipu-auto-stage)
# may consult them; they import only the base and the dialects.
MACHINE_MODEL = {"backend.machine": 1.5, "backend.costs": 1.5, "backend.schedule": 1.5, "backend.locations": 1.5}
LAYERS.update(MACHINE_MODEL)
# the layers that must not depend on torch: the IR, the passes and the executor
TORCH_FREE = {"errors", "gcpause", "limits", "dialects", "passes", "backend", *MACHINE_MODEL}


def _layer(path: pathlib.Path) -> str:
    rel = path.relative_to(ROOT)
    module = ".".join(rel.with_suffix("").parts)
    if module in MACHINE_MODEL:
        return module
    return rel.parts[0].removesuffix(".py") if len(rel.parts) > 1 else rel.stem


def _target(parts: list[str]) -> str:
    """The layer of an imported tilefx module (`tilefx.backend.costs` ->
    backend.costs, `tilefx.backend.profile` -> backend)."""
    module = ".".join(parts[1:3])
    return module if module in MACHINE_MODEL else parts[1]


def _imports(path: pathlib.Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
            if node.module == "tilefx":  # `from tilefx import api`
                out += [(node.lineno, f"tilefx.{a.name}") for a in node.names]
    return out


MODULES = sorted(ROOT.rglob("*.py"))


def test_every_folder_has_a_layer():
    assert {_layer(p) for p in MODULES} <= set(LAYERS)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_run_down_the_layers(path):
    here = _layer(path)
    wrong = []
    for line, name in _imports(path):
        parts = name.split(".")
        if parts[0] == "torch" and here in TORCH_FREE:
            wrong.append(f"line {line}: {name} (the {here} layer must not import torch)")
        if parts[0] != "tilefx" or len(parts) < 2:
            continue
        there = _target(parts)
        if there in LAYERS and LAYERS[there] > LAYERS[here]:
            wrong.append(f"line {line}: {name} (layer {there} is above {here})")
    assert not wrong, f"{path.relative_to(ROOT)} imports upwards:\n" + "\n".join(wrong)
