"""`tilefx-opt FILE [-p PIPELINE]`: xDSL's opt driver with tilefx's dialects
and passes (plus xDSL's canonicalize, cse, dce, ...). FILE may be IR text or
an ONNX model (`model.onnx`, or `--frontend onnx`), imported by the ONNX frontend. Bad IR gives a
diagnostic with line and column on stderr and exit code 1, not a traceback."""

from __future__ import annotations

import sys

from xdsl.utils.exceptions import DiagnosticException, ParseError, VerifyException
from xdsl.xdsl_opt_main import xDSLOptMain

from tilefx.errors import Error
from tilefx.tools.universe import DIALECTS, PASSES


class TilefxOptMain(xDSLOptMain):
    def register_all_dialects(self):
        super().register_all_dialects()
        for name, factory in DIALECTS.items():
            if name not in self.ctx.registered_dialect_names:
                self.ctx.register_dialect(name, factory)

    def register_all_frontends(self):
        super().register_all_frontends()

        def parse_onnx(io) -> ModuleOp:  # noqa: F821  (an ONNX file: the ONNX frontend's graph IR)
            from tilefx.lowering.from_onnx import import_onnx

            return import_onnx(io.read()).module

        self.available_frontends["onnx"] = parse_onnx

    def register_all_passes(self):
        super().register_all_passes()
        for name, factory in PASSES.items():
            if name not in self.available_passes:
                self.register_pass(name, factory)


def report(e: BaseException) -> int:
    """Print a user-facing diagnostic for `e`; return the exit code."""
    print(f"error: {e}" if not isinstance(e, ParseError) else str(e), file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    try:
        TilefxOptMain(description="tilefx modular optimizer driver", args=argv).run()
    except (ParseError, VerifyException, DiagnosticException, Error, ValueError) as e:
        return report(e)
    except FileNotFoundError as e:
        return report(e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
