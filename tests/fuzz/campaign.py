"""`make fuzz`: a long fuzz campaign over tilefx-opt, tilefx-run and the
options-file reader, with counts per outcome.

    python tests/fuzz/campaign.py [--ir 10000] [--options 1000] [--files 300] [--timeout 60] [--seed 0]

Cases run in a forked worker that already imported tilefx and torch (so a
case costs milliseconds, not an interpreter start); a case that does not
answer within --timeout seconds is a hang: the worker is killed and a new one
forked. Each worker has an address-space limit so a mutant asking for a huge
tensor fails fast instead of swapping the machine. Failing cases (crash,
hang, unlocated) are written to --out (default fuzz-failures/) to reproduce.
Exit code 1 when any case crashed, hung or gave an unlocated IR diagnostic.
"""

from __future__ import annotations

import argparse
import collections
import json
import multiprocessing as mp
import os
import random
import resource
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
import cases  # noqa: E402
import file_cases  # noqa: E402

# the file kinds (tests/fuzz/file_cases.py): seed, mutator, case runner
FILE_KINDS = {
    "executable": (file_cases.executable_seed, file_cases.mutate_executable, file_cases.run_executable_case),
    "npz": (file_cases.npz_seed, file_cases.mutate_npz, file_cases.run_npz_case),
    "onnx": (file_cases.onnx_seed, file_cases.mutate_onnx, file_cases.run_onnx_case),
}

BAD = ("crash", "hang", "unlocated")
# the step a kind of case reports first (its outcome when the worker dies or hangs)
_STEP = {"options": "options", "executable": "load", "npz": "npz", "onnx": "onnx"}


def _worker(conn, memory_limit: int) -> None:
    if memory_limit:
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    workdir = tempfile.mkdtemp(prefix="tilefx-fuzz-")
    sentinel = os.path.join(workdir, "SENTINEL")
    while True:
        kind, text = conn.recv()
        if kind in FILE_KINDS:
            conn.send(FILE_KINDS[kind][2](text, workdir))
        elif kind == "ir":
            conn.send(cases.run_ir_case(text, workdir))
        else:
            conn.send(cases.run_options_case(text.replace("{sentinel}", sentinel), workdir, sentinel))


class Pool:
    """One forked worker; a timeout kills it and forks the next."""

    def __init__(self, timeout: float, memory_limit: int):
        self.timeout, self.memory_limit = timeout, memory_limit
        self.proc = None
        self._start()

    def _start(self):
        ctx = mp.get_context("fork")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child, self.memory_limit), daemon=True)
        self.proc.start()

    def run(self, kind: str, text: str) -> dict[str, str]:
        self.conn.send((kind, text))
        if self.conn.poll(self.timeout):
            try:
                return self.conn.recv()
            except EOFError:
                pass
            self._restart()
            return {_STEP.get(kind, "opt"): "crash", "detail": "the worker died"}
        self._restart()
        return {_STEP.get(kind, "opt"): "hang"}

    def _restart(self):
        self.proc.kill()
        self.proc.join()
        self._start()

    def close(self):
        self.proc.kill()
        self.proc.join()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ir", type=int, default=10000, help="IR mutants")
    ap.add_argument("--options", type=int, default=1000, help="options files")
    ap.add_argument("--files", type=int, default=300,
                    help="mutants of each received file kind (executable, npz, ONNX)")
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="seconds per case (a loaded 2-core machine needs ~15 s for the slowest)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--memory-limit-gb", type=float, default=6.0)
    ap.add_argument("--out", default="fuzz-failures")
    ap.add_argument("--progress", type=int, default=500, help="print counts every N cases")
    args = ap.parse_args(argv)

    # the cases compile models: their INFO lines and progress bars would bury the counts
    os.environ.setdefault("POPTORCH_LOG_LEVEL", "WARN")
    import tilefx  # noqa: F401  (the workers fork with everything imported)

    rng = random.Random(args.seed)
    t0 = time.time()
    seeds = cases.ir_seeds()
    ops = cases.aten_op_names()
    pool = Pool(args.timeout, int(args.memory_limit_gb * (1 << 30)))
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    os.makedirs(args.out, exist_ok=True)
    failures = 0

    def record(kind: str, i: int, text: str, res: dict[str, str]):
        nonlocal failures
        for step in ("opt", "run", "options", "load", "npz", "onnx", "popart"):
            if step in res:
                counts[step][res[step]] += 1
                if res[step] in BAD:
                    failures += 1
                    name = os.path.join(args.out, f"{kind}-{i}-{step}-{res[step]}")
                    if isinstance(text, bytes):
                        with open(name + ".bin", "wb") as f:
                            f.write(text)
                    else:
                        with open(name + (".mlir" if kind == "ir" else ".conf"), "w",
                                  encoding="utf-8", errors="surrogatepass") as f:
                            f.write(text)
                    with open(name + ".txt", "w") as f:
                        f.write(json.dumps(res, indent=1))

    def report(done: str):
        print(f"[{time.time() - t0:7.0f} s] {done}: " + "; ".join(
            f"{step}: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items()))
            for step, c in counts.items()), flush=True)

    try:
        for kind, (seed, mutate, _) in FILE_KINDS.items():
            data = seed()
            for i in range(args.files):
                case = mutate(data, rng)
                record(kind, i, case, pool.run(kind, case))
            report(f"{args.files} {kind} mutants")
        for i in range(args.options):
            text = cases.mutate_options(cases.OPTION_SEED_LINES, rng, "{sentinel}")
            record("options", i, text, pool.run("options", text))
            if i + 1 == args.options:
                report(f"{i + 1} option files")
        for i in range(args.ir):
            text = cases.mutate_ir(rng.choice(seeds), rng, ops)
            record("ir", i, text, pool.run("ir", text))
            if (i + 1) % args.progress == 0:
                report(f"{i + 1} IR mutants")
    finally:
        pool.close()
    report(f"done ({args.ir} IR mutants, {args.options} option files, {args.files} of each received file "
           f"kind, timeout {args.timeout} s)")
    print(f"failing cases: {failures} (in {args.out}/)" if failures else "no crash, hang or unlocated diagnostic")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
