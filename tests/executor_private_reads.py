"""Count the reads of the executors' private state from other modules.

`Runner` (tilefx/runner/runner.py, with its mixins in the runner's
compiling.py, running.py, weight_update.py, outputs.py and executable.py)
is the executor beneath both surfaces, `PoplarExecutor`
(tilefx/api/executor.py, with PopTorch's mixins in api/compiling.py,
api/readouts.py and api/executable.py) PopTorch's wrapper over it; what
other modules take from them should go through their public methods or the
compiler driver, not their private attributes. This script lists every `x._name` (or
`x.__dict__.get("_name")`, `x.__dict__["_name"]`, `getattr(x, "_name")`)
outside those modules where `_name` is a private attribute or method the
class defines
(assigned as `self._name` or defined as a method in one of them), and `x` is
not the module's own `self` (a name another class shares counts too: the
count is an upper bound, to bring to 0). Run it from the repository root:

    python tests/executor_private_reads.py [--list]
"""

from __future__ import annotations

import ast
import pathlib
import sys
from collections import Counter

ROOT = pathlib.Path(__file__).resolve().parent.parent / "tilefx"
CLASS_MODULES = ("runner/runner.py", "runner/compiling.py", "runner/running.py", "runner/weight_update.py",
                 "runner/outputs.py", "runner/executable.py", "api/executor.py", "api/compiling.py",
                 "api/readouts.py", "api/executable.py")
CLASS_NAMES = {"Runner", "CompilePath", "CallPath", "WeightUpdates", "Outputs", "ExecutableFiles", "PoplarExecutor",
               "PopTorchCompiling", "MachineReadouts", "PopTorchFiles"}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_names() -> set[str]:
    """The private attributes and methods of PoplarExecutor and its mixins."""
    names: set[str] = set()
    for rel in CLASS_MODULES:
        tree = ast.parse((ROOT / rel).read_text())
        for cls in tree.body:
            if not (isinstance(cls, ast.ClassDef) and cls.name in CLASS_NAMES):
                continue
            for node in cls.body:  # class-level fields
                targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
                names |= {t.id for t in targets if isinstance(t, ast.Name) and _private(t.id)}
            for node in ast.walk(cls):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _private(node.name):
                    names.add(node.name)
                elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                      and isinstance(node.value, ast.Name) and node.value.id == "self" and _private(node.attr)):
                    names.add(node.attr)
                elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "__setattr__":
                    # object.__setattr__(self, "_name", value)
                    for arg in node.args[1:2]:
                        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and _private(arg.value):
                            names.add(arg.value)
    return names


def private_reads() -> list[tuple[str, int, str]]:
    """(module, line, attribute) of each read from outside the class's modules."""
    names = private_names()
    out = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if rel in CLASS_MODULES:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and node.attr in names
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
                out.append((rel, node.lineno, node.attr))
            elif (name := _named_by_string(node)) in names:
                out.append((rel, node.lineno, name))
    return out


def _named_by_string(node: ast.AST) -> str | None:
    """The attribute `x.__dict__.get("_name")`, `x.__dict__["_name"]`,
    `getattr(x, "_name")` or `setattr(x, "_name", v)` reaches, `x` not `self`."""
    def other(obj: ast.AST) -> bool:
        return not (isinstance(obj, ast.Name) and obj.id in ("self", "cls"))

    def const(arg: ast.AST) -> str | None:
        return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None

    if isinstance(node, ast.Call) and node.args:
        f = node.func
        if isinstance(f, ast.Name) and f.id in ("getattr", "setattr", "hasattr", "delattr") and len(node.args) > 1 \
                and other(node.args[0]):
            return const(node.args[1])
        if (isinstance(f, ast.Attribute) and f.attr in ("get", "pop", "setdefault")
                and isinstance(f.value, ast.Attribute) and f.value.attr == "__dict__" and other(f.value.value)):
            return const(node.args[0])
    if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute)
            and node.value.attr == "__dict__" and other(node.value.value)):
        return const(node.slice)
    return None


def main(argv: list[str]) -> int:
    reads = private_reads()
    if "--list" in argv:
        for rel, line, attr in reads:
            print(f"{rel}:{line}: ._{attr.lstrip('_')}")
    for rel, n in Counter(r[0] for r in reads).most_common():
        print(f"{n:5d}  {rel}")
    print(f"{len(reads):5d}  reads of PoplarExecutor's private state from {len({r[0] for r in reads})} modules")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
