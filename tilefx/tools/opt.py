"""`tilefx-opt FILE [-p PIPELINE]`: xDSL's opt driver with tilefx's dialects
and passes (plus xDSL's canonicalize, cse, dce, ...). FILE may be IR text or
an ONNX model (`model.onnx`, or `--frontend onnx`), imported by the ONNX frontend.

Every failure is a diagnostic on stderr and a non-zero exit, never a
traceback: IR errors as `file:line:col: error: ...` with the source line (exit
1), a bad pipeline or pass option as one `error:` line (exit 1), an error
inside a pass naming the pass and the op (exit 1), and anything unforeseen as
`error: internal error ...` (exit 2, a bug to report)."""

from __future__ import annotations

from tilefx.gcpause import gc_paused, no_collection_at_exit

# Start-up makes objects that all live to the end (xDSL's classes, the
# dialects, the parsed IR): with the collector paused no collection walks them
# (tilefx/gcpause.py), a few per cent of tilefx-opt's start-up on a one-op file.
with gc_paused():
    import argparse
    import sys
    from typing import IO

    from xdsl.dialects.builtin import ModuleOp
    from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException, VerifyException
    from xdsl.xdsl_opt_main import xDSLOptMain

    from tilefx.dialects.context import OpByOpContext
    from tilefx.dialects.source import LocatedModule, decode, parse_ir
    from tilefx.errors import Error
    from tilefx.tools.universe import DIALECTS, OP_LOOKUPS, PASSES

EXIT_DIAGNOSTIC = 1
EXIT_INTERNAL = 2

# xDSL's generic passes that work on tilefx's IR, listed in --help after tilefx's own
GENERIC_PASSES = ("canonicalize", "cse", "dce")
# the output targets for tilefx's IR (xDSL's others emit assembly for other machines)
OWN_TARGETS = ("mlir",)


class PassFailure(Error):
    """An error raised inside a pass, with the pass's name and the op."""


def op_in_traceback(tb) -> object | None:
    """The innermost `Operation` a failing frame was working on (its local `op`,
    else any local operation), so an error inside a pass can name it."""
    from xdsl.ir import Operation

    found = None
    while tb is not None:
        f_locals = tb.tb_frame.f_locals
        cands = [f_locals.get("op")] + list(f_locals.values())
        for v in cands:
            if isinstance(v, Operation) and not isinstance(v, ModuleOp):
                found = v
                break
        tb = tb.tb_next
    return found


def _describe(e: BaseException) -> str:
    text = " ".join(str(e).split("\n\n")[0].split())
    plain = isinstance(e, (Error, DiagnosticException, VerifyException))
    return text if plain else f"{type(e).__name__}: {text}"


class TilefxOptMain(xDSLOptMain):
    # xDSL's own dialects, passes and targets and tilefx's, named directly:
    # xDSL's default looks up every `xdsl.universe` entry point, reading the
    # metadata of each installed distribution (~0.1 s in torch's environment,
    # on every start). Stock `xdsl-opt` still finds tilefx's through its entry point.
    def register_all_dialects(self):
        from xdsl.dialects import get_all_dialects

        self.ctx = OpByOpContext()  # a one-op file loads one op class, not the ~350 of aten
        for name, factory in {**get_all_dialects(), **DIALECTS}.items():
            self.ctx.register_dialect(name, factory)
        for name, lookup in OP_LOOKUPS.items():
            self.ctx.register_lookup(name, lookup)

    def register_all_passes(self):
        from xdsl.transforms import get_all_passes

        for name, factory in {**get_all_passes(), **PASSES}.items():
            self.register_pass(name, factory)

    def register_all_targets(self):
        from xdsl.targets import get_all_targets

        self.available_targets.update(get_all_targets())

    def register_all_arguments(self, arg_parser):
        """xDSL's arguments, with --help naming tilefx's passes and targets
        (and the few generic passes that apply to its IR) instead of xDSL's
        ~100 others, which `--all-passes` lists."""
        super().register_all_arguments(arg_parser)
        actions = {a.dest: a for a in arg_parser._actions}
        own = ", ".join(PASSES)
        generic = ", ".join(p for p in GENERIC_PASSES if p in self.available_passes)
        actions["passes"].help = (f"comma-separated pass pipeline. tilefx's passes: {own}; "
                                  f"generic: {generic} (--all-passes lists xDSL's others)")
        actions["target"].help = (f"output target: {', '.join(OWN_TARGETS)} (the IR as text; "
                                  "--all-passes lists xDSL's other targets)")
        arg_parser.add_argument("--all-passes", action=_ListAll, nargs=0, driver=self,
                                help="list every pass and target, xDSL's included, and exit")

    def register_all_frontends(self):
        super().register_all_frontends()
        self._located: dict[int, LocatedModule] = {}
        self._line_offset = 0

        xdsl_parse_mlir = self.available_frontends["mlir"]

        def parse_mlir(io: IO[bytes]) -> ModuleOp:
            if self.args.parsing_diagnostics:  # xDSL prints its ParseErrors and goes on
                return xdsl_parse_mlir(io)
            text = decode(io.read(), self.get_input_name())
            # --verify-diagnostics wants xDSL's own printout of a failing op:
            # leave verification to its pipeline callback then.
            located = parse_ir(self.ctx, text, self.get_input_name(), self._line_offset,
                               verify=not self.args.verify_diagnostics)
            self._located[id(located.module)] = located
            return located.module

        self.available_frontends["mlir"] = parse_mlir

        def parse_onnx(io) -> ModuleOp:  # an ONNX file: the ONNX frontend's graph IR
            import os

            from tilefx.lowering.from_onnx import import_onnx

            path = self.args.input_file
            if path and os.path.isfile(path):  # by path: onnx finds external data files next to it
                return import_onnx(path).module
            return import_onnx(io.read()).module

        self.available_frontends["onnx"] = parse_onnx

    def setup_pipeline(self):
        try:
            super().setup_pipeline()
        except (ValueError, TypeError, KeyError) as e:  # an option of the wrong type or name
            raise Error(f"bad pass pipeline {self.args.passes!r}: {_describe(e)}") from None

    def parse_chunk(self, chunk, file_extension: str, start_offset: int = 0):
        self._line_offset = start_offset  # --split-input-file: lines before this chunk
        return super().parse_chunk(chunk, file_extension, start_offset)

    def prepare_input(self):
        try:
            return super().prepare_input()
        except ValueError as e:  # an unknown file extension
            raise Error(f"{e} (use --frontend mlir)") from None

    def apply_passes(self, prog: ModuleOp):
        """Run the pipeline one pass at a time: an error names its pass (and the
        op it was working on), and the IR is verified with locations after each."""
        located = self._located.get(id(prog))
        passes = self.pipeline.passes
        callback = self.pipeline.callback
        if callback is not None:  # verifies (for --verify-diagnostics: xDSL's printout)
            callback(None, prog, passes[0] if passes else None)
        for i, p in enumerate(passes):
            try:
                p.apply(self.ctx, prog)
            except Exception as e:  # noqa: BLE001 - every failure becomes a diagnostic
                if self.args.verify_diagnostics and isinstance(e, DiagnosticException):
                    raise  # xDSL prints it and goes on with the next chunk
                op = op_in_traceback(e.__traceback__)
                desc = _describe(e)
                clean = isinstance(e, (Error, VerifyException, DiagnosticException))
                if op is not None and not clean and op.name not in desc:
                    desc = f"{op.name}: {desc}"  # the pass's own errors name what they need
                if op is not None and located is not None:
                    failure = located.error(op, f"{desc} (in pass {p.name})")
                else:
                    failure = PassFailure(f"{desc} (in pass {p.name})")
                failure.internal = not clean
                raise failure from e
            if located is not None and not (self.args.disable_verify or self.args.verify_diagnostics):
                try:
                    located.verify()
                except Error as e:
                    raise PassFailure(f"after pass {p.name}: {e}") from None
            if callback is not None:
                callback(p, prog, passes[i + 1] if i + 1 < len(passes) else None)


class _ListAll(argparse.Action):
    """`--all-passes`: every registered pass and target, tilefx's first, then exit."""

    def __init__(self, *args, driver, **kwargs):
        super().__init__(*args, **kwargs)
        self.driver = driver

    def __call__(self, parser, namespace, values, option_string=None):
        passes = list(self.driver.available_passes)
        targets = list(self.driver.available_targets)
        own = [p for p in passes if p in PASSES]
        lines = ["tilefx's passes:", *(f"  {p}" for p in own),
                 "xDSL's passes:", *(f"  {p}" for p in passes if p not in PASSES),
                 "targets:", *(f"  {t}" for t in targets if t in OWN_TARGETS),
                 "xDSL's other targets:", *(f"  {t}" for t in targets if t not in OWN_TARGETS)]
        print("\n".join(lines))
        parser.exit(0)


def report(e: BaseException) -> int:
    """Print a user-facing diagnostic for `e`; return the exit code."""
    if isinstance(e, Error) and not getattr(e, "internal", False):
        print(e if str(e).count(": error: ") else f"error: {e}", file=sys.stderr)
        return EXIT_DIAGNOSTIC
    if isinstance(e, (OSError, VerifyException, DiagnosticException, ArgSpecParseError)):
        print(f"error: {_describe(e)}", file=sys.stderr)
        return EXIT_DIAGNOSTIC
    print(f"error: internal error: {_describe(e)} (a tilefx bug; please report it)", file=sys.stderr)
    return EXIT_INTERNAL


def main(argv: list[str] | None = None) -> int:
    """Run tilefx-opt on `argv`, or, without it, as the command (the
    `tilefx-opt` script, `python -m tilefx.tools.opt`) on the command line, in
    a process that ends after it: no collection at its exit (gcpause.py)."""
    if argv is None:
        no_collection_at_exit()
    try:
        try:
            with gc_paused():  # loading the dialects, parsing, the passes (as a compile does: gcpause.py)
                TilefxOptMain(description="tilefx modular optimizer driver", args=argv).run()
        except ArgSpecParseError as e:
            print(f"error: bad pass pipeline: {' '.join(str(e).split())}", file=sys.stderr)
            return EXIT_DIAGNOSTIC
    except (SystemExit, KeyboardInterrupt):
        raise
    except RecursionError as e:
        print(f"error: input nested too deeply ({e})", file=sys.stderr)
        return EXIT_DIAGNOSTIC
    except BaseException as e:  # noqa: BLE001 - the tool never ends in a traceback
        return report(e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
