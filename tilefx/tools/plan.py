"""`tilefx-plan script.py:factory --ipus 16 --global-batch 65536`: the best
configurations of a training model on N IPUs (`tilefx.plan`, docs/planning.md).

`factory` is a function of the script, called without arguments, that
returns `(model, example_inputs)` or `(model, example_inputs, optimizer)`:
the model, one micro-batch of its inputs (a tuple of tensors) and a
`tilefx.optim` optimizer over its parameters. The script is imported as a
module (its `if __name__ == "__main__":` part does not run). Prints the
table of the best configurations and, for the best, its explanation and
the PopTorch code that sets it. Every failure is a one-line `error:` and a
non-zero exit.
"""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import sys
import time

from tilefx.errors import Error


def _load(target: str):
    path, sep, name = target.rpartition(":")
    if not sep or not path or not name:
        raise Error(f"expected script.py:factory, got {target!r}")
    file = pathlib.Path(path)
    if not file.is_file():
        raise Error(f"{path}: no such file")
    spec = importlib.util.spec_from_file_location(f"tilefx_plan_{file.stem}", file)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(file.resolve().parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.pop(0)
    factory = getattr(module, name, None)
    if not callable(factory):
        raise Error(f"{path} has no function {name!r}")
    got = factory()
    if not isinstance(got, tuple) or len(got) not in (2, 3) or not isinstance(got[1], (tuple, list)):
        raise Error(f"{name}() must return (model, example_inputs) or (model, example_inputs, optimizer), "
                    f"example_inputs a tuple")
    model, inputs, *rest = got
    return model, tuple(inputs), (rest[0] if rest else None)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="tilefx-plan", description=__doc__.splitlines()[0])
    ap.add_argument("target", help="script.py:factory")
    ap.add_argument("--ipus", type=int, required=True)
    ap.add_argument("--global-batch", type=int, default=None)
    ap.add_argument("--machine", default=None, help="mk1, mk2 or bow (default: the options' machine, mk2)")
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--workers", type=int, default=None,
                    help="processes costing the configurations (default: the CPUs this process may use)")
    args = ap.parse_args(argv)
    try:
        import tilefx
        from tilefx.planner import table

        model, inputs, optimizer = _load(args.target)
        options = tilefx.Options()
        if args.machine:
            options.setMachine(args.machine)
        start = time.perf_counter()
        cands = tilefx.plan(model, *inputs, ipus=args.ipus, optimizer=optimizer,
                            global_batch=args.global_batch, options=options, workers=args.workers)
        seconds = time.perf_counter() - start
    except Error as e:
        print(f"error: {str(e).splitlines()[0]}", file=sys.stderr)
        return 1
    if not cands:
        print(f"error: no configuration of {args.ipus} IPUs fits (or reaches the global batch)", file=sys.stderr)
        return 1
    print(table(cands, args.top))
    print(f"\n{len(cands)} configurations fit; planned in {seconds:.1f} s\n\nbest:\n{cands[0].explain()}\n")
    print(cands[0].code)
    return 0


if __name__ == "__main__":
    sys.exit(main())
