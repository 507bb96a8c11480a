"""The import direction of docs/architecture.md: each layer imports only from
its own layer or the ones below, so a newcomer can read the data flow from
the folders and no layer is pulled in by one beneath it. Function-level
(lazy) imports count too."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent / "tilefx"

# lowest first; a module may import from its own rank or lower ones
LAYERS = {
    "errors": 0,
    "gcpause": 0,
    "limits": 0,
    # the plugin registry the verifier and the executor read (tilefx/runtime.py)
    "runtime": 0,
    "dialects": 1,
    # analyses of the graph IR (tilefx/analysis): what the executor and the
    # marking passes decide from a function without changing it (groups,
    # shared values, repeats, liveness, in-place choices); above the machine
    # model, below the passes that write their results on the IR
    "analysis": 1.7,
    "passes": 2,
    "backend": 3,
    # the compiler driver (tilefx/driver): a CompileConfig and compile(module,
    # config) over the passes, the executor and the machine model; every
    # surface calls it, no frontend needs it
    "driver": 3.5,
    "lowering": 4,
    # the host loop beneath the surfaces (tilefx/runner): what runs a compiled
    # program call after call for PopTorch and PopART alike, from a
    # CompileConfig; torch allowed, no surface's options
    "runner": 4.5,
    "api": 5,
    "popart": 5,
    "tools": 5,
    "planner": 5,
    "__init__": 6,
}
# the machine model: the backend modules that analyse the graph IR (hardware
# constants, per-op costs, schedules) without executing it. They sit between
# the dialects and the passes, so passes that plan from costs (ipu-auto-stage)
# may consult them; they import only the base and the dialects.
MACHINE_MODEL = {f"backend.{m}": 1.5 for m in ("machine", "costs", "slice_plan", "schedule", "locations", "offload",
                                                 "collectives", "memory_model", "validated", "memory_advice")}
LAYERS.update(MACHINE_MODEL)
# the layers that must not depend on torch: the IR, the passes and the executor
TORCH_FREE = {"errors", "gcpause", "limits", "runtime", "dialects", "analysis", "passes", "backend", "driver",
              *MACHINE_MODEL}


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


def test_every_machine_model_file_is_checked():
    """Each module of the machine model (docs/architecture.md) is in
    MACHINE_MODEL, so the layering test holds it to base + dialects."""
    doc = (ROOT.parent / "docs" / "architecture.md").read_text()
    row = next(line for line in doc.splitlines() if line.startswith("| machine model |"))
    named = {f"backend.{n.rsplit('/', 1)[-1].removesuffix('.py')}" for n in row.split("|")[2].replace("`", "").replace(",", " ").split()
             if n.endswith(".py")}
    assert named and named <= set(MACHINE_MODEL), sorted(named - set(MACHINE_MODEL))
    for module in MACHINE_MODEL:
        assert (ROOT / (module.replace(".", "/") + ".py")).exists(), module


def test_the_layer_table_is_in_layer_order():
    """docs/architecture.md's table lists the layers lowest first, as LAYERS
    ranks them (each row named by the first file or folder it holds), and
    names every layer."""
    doc = (ROOT.parent / "docs" / "architecture.md").read_text()
    ranks = []
    for line in doc.splitlines():
        if not line.startswith("| ") or line.startswith("| layer ") or line.startswith("|---"):
            continue
        first = line.split("|")[2].split("`")[1].removeprefix("tilefx/")
        module = first.removesuffix(".py").replace("/", ".").rstrip(".")
        ranks.append(LAYERS[module if module in LAYERS else module.split(".")[0]])
    assert ranks == sorted(ranks), ranks
    assert set(ranks) >= {LAYERS[name] for name in ("driver", "lowering", "runner", "api", "__init__")}


def test_bare_import_of_the_package():
    """`import tilefx` alone (no torch imported first, nothing else set up)
    imports no torch; the PopTorch surface loads it when first named."""
    code = ("import sys, tilefx; before = 'torch' in sys.modules; "
            "assert tilefx.Options and tilefx.inferenceModel; print(before, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True"]


# ---------------------------------------------------------------------------
# the surfaces side by side, and no import loops

SURFACES = ("api", "popart", "tools")


def _surface_imports() -> dict[tuple[str, str], int]:
    found: dict[tuple[str, str], int] = {}
    for path in MODULES:
        here = _layer(path)
        if here not in SURFACES:
            continue
        for _, name in _imports(path):
            parts = name.split(".")
            if parts[0] == "tilefx" and len(parts) > 1 and parts[1] in SURFACES and parts[1] != here:
                key = (str(path.relative_to(ROOT)), name)
                found[key] = found.get(key, 0) + 1
    return found


def test_surfaces_do_not_import_each_other():
    """PopTorch's api/, PopART's popart/ and the tools each stand on the
    layers beneath (PopART's sessions run on the runner's executor, not on
    PopTorch's): none imports another, at module level or in a function."""
    found = _surface_imports()
    assert not found, f"a surface imports another: {found}"


def _module_name(path: pathlib.Path) -> str:
    parts = ("tilefx",) + path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Module -> the tilefx modules it imports (top-level or in a function).
    `from pkg import sub` is an edge to the submodule only; a module's own
    ancestors (run first by Python whatever it imports) are no edges."""
    modules = {_module_name(p): p for p in MODULES}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        out: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                out |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                subs = {f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules}
                out |= subs
                if len(subs) < len(node.names):
                    out.add(base)
        graph[name] = {m for m in out if m in modules and m != name and not name.startswith(m + ".")}
    return graph


def _loops(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    loops: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                loops.append(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return loops


def test_loop_finder_finds_a_loop():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert _loops(graph) == [frozenset({"a", "b", "c"})]
    assert _loops({"a": {"b"}, "b": set()}) == []


def test_no_import_loops():
    """No tilefx module needs another that needs it (module-level and
    function-level imports alike): each can be read, and imported, alone."""
    loops = _loops(_import_graph())
    assert not loops, f"import loops: {[sorted(x) for x in loops]}"


def test_no_module_reads_the_executors_private_state():
    """No module outside PoplarExecutor's own reads its private attributes
    (tests/executor_private_reads.py): the executable file, the checkpoint
    and PopART's sessions go through its public methods and the objects it
    owns (`random_streams`)."""
    from executor_private_reads import private_names, private_reads

    assert {"_options", "_program", "_compile_in_session"} <= private_names()
    reads = private_reads()
    assert not reads, "\n".join(f"{m}:{line}: {a}" for m, line, a in reads)


# modules that take only public names from the rest of tilefx (the executable
# file's loader and writer, the training checkpoint, the executor of steps,
# the driver, the runner's executor): a private name another
# module needs is made public, or reached through a public function
PUBLIC_IMPORTS_ONLY = ("api/checkpoint.py", "api/executable.py", "api/loading.py", "backend/executor.py",
                       "driver/__init__.py", "driver/archive.py", "driver/compiler.py", "driver/config.py",
                       "driver/executable.py", "driver/executable_cache.py", "driver/executable_schema.py",
                       "driver/program.py", "driver/strategy.py", "runner/executable.py",
                       "runner/executable_cache.py", "runner/runner.py")


@pytest.mark.parametrize("rel", PUBLIC_IMPORTS_ONLY)
def test_no_private_names_imported(rel):
    tree = ast.parse((ROOT / rel).read_text())
    private = [f"{n.module}.{a.name}" for n in ast.walk(tree)
               if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("tilefx")
               for a in n.names if a.name.startswith("_") and not a.name.startswith("__")]
    private += [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr.startswith("_")
                and not n.attr.startswith("__") and isinstance(n.value, ast.Name)
                and n.value.id in ("archive", "export", "steps", "ex", "executor")]
    assert not private, f"{rel} reaches private names of other modules: {private}"
