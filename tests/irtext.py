"""Parse and print IR text with every tilefx dialect (shared by the IR tests)."""

from io import StringIO

from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser
from xdsl.printer import Printer

from tilefx.passes.pipelines import graph_context


def parse(text: str, name: str = "<test>") -> ModuleOp:
    module = Parser(graph_context(), text, name).parse_module()
    module.verify()
    return module


def show(module: ModuleOp, generic: bool = False) -> str:
    out = StringIO()
    Printer(stream=out, print_generic_format=generic).print_op(module)
    return out.getvalue()
