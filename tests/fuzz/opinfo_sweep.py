"""`make opinfo`: every float32 OpInfo of PyTorch's own operator test
database (`torch.testing._internal.common_methods_invocations.op_db`)
through tilefx's PopTorch API, against eager PyTorch on the CPU.

    python tests/fuzz/opinfo_sweep.py [--samples 3] [--timeout 120] [--seed 0]
        [--ops NAME,PREFIX*,...] [--no-training] [--markdown FILE] [--jsonl FILE]

Each sample (the first --samples of the OpInfo's `sample_inputs`, generated
under a fixed seed) becomes a module whose forward calls the op on its
tensor arguments (the sample's other arguments are constants of the
module). It runs through `tilefx.inferenceModel` and, for ops with
`supports_autograd`, through `tilefx.trainingModel` with the sample's first
floating-point tensor as a parameter: the loss is a fixed weighting of the
(processed) outputs summed, and the parameter's gradient is read back as
the anchored `Gradient___w` and compared with eager autograd. Each
(op, variant, sample, mode) is one of

- `equal`: torch's values, shapes and dtypes (rtol 1e-5 / atol 1e-6, or the
  OpInfo's own float32 tolerance overrides where larger);
- `random`: a random op (eager's results change with the seed, or the
  OpInfo runs it under `wrapper_set_seed`) whose shapes and dtypes are
  eager's; its values are tilefx's own stream;
- `near`: within 100x that tolerance (an order of rounding, not a bug);
- `error`: a `tilefx.Error` (PopTorch's class) with its message;
- `WRONG`: a different value, shape or dtype: a silent wrong result;
- `crash`: any other exception (a traceback from inside), or the worker
  died; `hang`: no answer within --timeout seconds;
- `skip`: eager itself raises, or the op returns no tensor, or (training)
  the loss does not depend on the parameter.

Cases run in a forked worker that has torch, op_db and tilefx imported, as
`make fuzz`; a hang kills it and forks the next. Exit code 1 if any case was
WRONG, crashed or hung.
"""

from __future__ import annotations

import argparse
import collections
import fnmatch
import json
import multiprocessing as mp
import os
import re
import resource
import sys
import time
import traceback

BAD = ("WRONG", "crash", "hang")
CLASSES = ("equal", "random", "near", "error", "WRONG", "crash", "hang", "skip")
TIGHT = {"rtol": 1e-5, "atol": 1e-6}
NEAR_FACTOR = 100


def _float32_ops():
    import torch
    from torch.testing._internal.common_methods_invocations import op_db
    return [op for op in op_db if torch.float32 in op.supported_dtypes("cpu")]


def _tolerance(op) -> dict[str, float]:
    """TIGHT, loosened to the OpInfo's own float32 toleranceOverride where it
    gives one (for any test: the largest)."""
    import torch
    from torch.testing._internal.common_device_type import toleranceOverride
    tol = dict(TIGHT)
    for dec in op.decorators or ():
        for d in getattr(dec, "decorators", (dec,)) or ():
            if isinstance(d, toleranceOverride) and torch.float32 in d.d:
                t = d.d[torch.float32]
                tol["rtol"] = max(tol["rtol"], t.rtol)
                tol["atol"] = max(tol["atol"], t.atol)
    return tol


class _Case:
    """One sample: its tensors (arguments of the module), everything else
    constants, and the way back to the op's (input, args, kwargs)."""

    def __init__(self, sample):
        import torch
        from torch.utils import _pytree as pytree
        leaves, self.spec = pytree.tree_flatten((sample.input, list(sample.args), dict(sample.kwargs)))
        self.leaves = [x.detach().clone() if isinstance(x, torch.Tensor) else x for x in leaves]
        self.tensor_at = [i for i, x in enumerate(self.leaves) if isinstance(x, torch.Tensor)]
        self.process = sample.output_process_fn_grad

    def call(self, fn, tensors, param=None, param_at=None):
        from torch.utils import _pytree as pytree
        leaves = list(self.leaves)
        it = iter(tensors)
        for i in self.tensor_at:
            leaves[i] = param if i == param_at else next(it)
        inp, args, kwargs = pytree.tree_unflatten(leaves, self.spec)
        return fn(inp, *args, **kwargs)

    def tensors(self, skip=None):
        return [self.leaves[i].clone() for i in self.tensor_at if i != skip]


def _tensor_leaves(out):
    import torch
    from torch.utils import _pytree as pytree
    return [x for x in pytree.tree_leaves(out) if isinstance(x, torch.Tensor)]


def _module(op_fn, case, param_at=None, training=False):
    import torch
    from torch import nn
    import tilefx

    class OpModule(nn.Module):
        def __init__(self):
            super().__init__()
            if param_at is not None:
                self.w = nn.Parameter(case.leaves[param_at].clone())

        def forward(self, *tensors):
            w = self.w if param_at is not None else None
            out = case.call(op_fn, tensors, w, param_at)
            if not training:
                return tuple(_tensor_leaves(out))
            out = _tensor_leaves(case.process(out))
            loss = None
            for y in out:
                if y.is_floating_point() and y.requires_grad:
                    probe = torch.sin(torch.arange(y.numel(), dtype=y.dtype) + 1).reshape(y.shape)
                    term = (y * probe).sum()
                    loss = term if loss is None else loss + term
            if loss is None:  # no differentiable output: a constant the sweep skips
                return torch.zeros(())
            return tilefx.identity_loss(loss, reduction="none")

    return OpModule()


def _compare(got, want, tol, random) -> tuple[str, str]:
    """(class, detail) of tilefx's tensors against eager's."""
    import torch
    if len(got) != len(want):
        return "WRONG", f"{len(got)} outputs, eager has {len(want)}"
    worst, detail = "equal", ""
    for k, (g, w) in enumerate(zip(got, want)):
        if not isinstance(g, torch.Tensor):
            return "WRONG", f"output {k} is a {type(g).__name__}"
        if g.shape != w.shape or g.dtype != w.dtype:
            return "WRONG", f"output {k}: {g.dtype}{list(g.shape)}, eager {w.dtype}{list(w.shape)}"
        if random:
            continue
        try:
            torch.testing.assert_close(g, w, equal_nan=True, **tol)
        except AssertionError as e:
            loose = {k2: v * NEAR_FACTOR for k2, v in tol.items()}
            try:
                torch.testing.assert_close(g, w, equal_nan=True, **loose)
                worst, detail = "near", f"output {k}: " + " ".join(str(e).split("\n")[1:4])
            except AssertionError:
                return "WRONG", f"output {k}: " + " ".join(str(e).split("\n")[1:4])
    return worst, detail


def _exception(e: BaseException) -> tuple[str, str]:
    import tilefx
    text = " ".join(str(e).split())[:300]
    # a kernel's Python exception behind an Error ("aten.x failed at run time: TypeError: ...")
    # is tilefx's bug, not a message for the user (torch's RuntimeErrors, e.g. a singular matrix, are)
    internal = re.search(r"internal error|failed at run time: (?!RuntimeError)\w+Error", text)
    if isinstance(e, tilefx.Error) and not internal:
        return "error", text
    tb = traceback.extract_tb(e.__traceback__)
    where = f"{os.path.relpath(tb[-1].filename)}:{tb[-1].lineno}" if tb else "?"
    return "crash", f"{type(e).__name__} at {where}: {text}"


def _is_random(op_fn, case) -> bool:
    """Eager's results change with the seed, or the OpInfo runs the op under
    `wrapper_set_seed` (PyTorch's mark of a random op, whose eager results
    that fixed seed makes repeatable but not tilefx's stream)."""
    import torch
    if "wrapper_set_seed" in getattr(getattr(op_fn, "__code__", None), "co_names", ()):
        return True
    outs = []
    for seed in range(4):
        torch.manual_seed(seed)
        outs.append(_tensor_leaves(case.call(op_fn, case.tensors())))
    return any(not torch.equal(a, b) for other in outs[1:] for a, b in zip(outs[0], other)
               if a.shape == b.shape and not a.isnan().any())


def run_inference(op, case, tol) -> dict:
    import torch
    import tilefx
    fn = op.op
    try:
        torch.manual_seed(0)
        want = _tensor_leaves(case.call(fn, case.tensors()))
        random = _is_random(fn, case)
    except Exception as e:  # eager refuses the sample: nothing to compare
        return {"class": "skip", "detail": f"eager: {type(e).__name__}: {str(e)[:120]}"}
    if not want:
        return {"class": "skip", "detail": "no tensor output"}
    try:
        model = tilefx.inferenceModel(_module(fn, case))
        got = model(*case.tensors())
        got = list(got) if isinstance(got, (tuple, list)) else [got]
    except Exception as e:
        cls, detail = _exception(e)
        return {"class": cls, "detail": detail}
    cls, detail = _compare(got, want, tol, random)
    return {"class": "random" if random and cls == "equal" else cls, "detail": detail}


def run_training(op, case, tol) -> dict:
    import torch
    import tilefx
    fn = op.op
    param_at = next((i for i in case.tensor_at if case.leaves[i].is_floating_point()
                     and case.leaves[i].numel() > 0), None)
    if param_at is None:
        return {"class": "skip", "detail": "no floating-point tensor to train"}
    try:
        ref = _module(fn, case, param_at, training=True)
        torch.manual_seed(0)
        loss = ref(*case.tensors(param_at))
        if loss is None or not loss.requires_grad:
            return {"class": "skip", "detail": "the loss does not depend on the parameter"}
        loss.backward()
        grad = ref.w.grad
        if grad is None:
            return {"class": "skip", "detail": "no gradient"}
        random = _is_random(fn, case)
    except Exception as e:
        return {"class": "skip", "detail": f"eager: {type(e).__name__}: {str(e)[:120]}"}
    try:
        opts = tilefx.Options()
        opts.anchorTensor("grad", "Gradient___w")
        mod = _module(fn, case, param_at, training=True)
        model = tilefx.trainingModel(mod, opts, optimizer=tilefx.optim.SGD(mod.parameters(), lr=0.0))
        got_loss = model(*case.tensors(param_at))
        got_grad = model.getAnchoredTensor("grad")
    except Exception as e:
        cls, detail = _exception(e)
        return {"class": cls, "detail": detail}
    if random:
        cls, detail = _compare([got_loss.reshape(loss.shape), got_grad], [loss.detach(), grad], tol, True)
        return {"class": "random" if cls == "equal" else cls, "detail": detail}
    cls, detail = _compare([got_loss.reshape(loss.shape), got_grad], [loss.detach(), grad], tol, False)
    return {"class": cls, "detail": detail.replace("output 0", "loss").replace("output 1", "gradient")}


def _worker(conn, memory_limit: int, samples: int, seed: int) -> None:
    import torch
    if memory_limit:
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    torch.set_num_threads(1)
    ops = _float32_ops()
    cached: dict[int, list] = {}
    while True:
        index, k, mode = conn.recv()
        op = ops[index]
        try:
            if index not in cached:
                torch.manual_seed(seed)
                cached.clear()
                gen = op.sample_inputs("cpu", torch.float32, requires_grad=False)
                cached[index] = [_Case(s) for _, s in zip(range(samples), gen)]
            case = cached[index][k]
            tol = _tolerance(op)
            res = (run_training if mode == "training" else run_inference)(op, case, tol)
        except Exception as e:  # the sweep's own failure to build the case
            res = {"class": "skip", "detail": f"sample: {type(e).__name__}: {str(e)[:120]}"}
        conn.send(res)


class Pool:
    """One forked worker; a timeout kills it and forks the next."""

    def __init__(self, timeout, memory_limit, samples, seed):
        self.timeout, self.args = timeout, (memory_limit, samples, seed)
        self._start()

    def _start(self):
        ctx = mp.get_context("fork")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child, *self.args), daemon=True)
        self.proc.start()

    def run(self, index, k, mode) -> dict:
        self.conn.send((index, k, mode))
        if self.conn.poll(self.timeout):
            try:
                return self.conn.recv()
            except EOFError:
                self._restart()
                return {"class": "crash", "detail": f"the worker died (exit code {self.proc.exitcode})"}
        self._restart()
        return {"class": "hang", "detail": f"no answer in {self.timeout:.0f} s"}

    def _restart(self):
        self.proc.kill()
        self.proc.join()
        self._start()

    def close(self):
        self.proc.kill()
        self.proc.join()


def _sample_counts(ops, selected, samples, seed) -> dict[int, int]:
    import torch
    counts = {}
    for i in selected:
        torch.manual_seed(seed)
        try:
            gen = ops[i].sample_inputs("cpu", torch.float32, requires_grad=False)
            counts[i] = sum(1 for _ in zip(range(samples), gen))
        except Exception:
            counts[i] = 0
    return counts


def _markdown(rows, counts, args, elapsed) -> str:
    lines = [f"# OpInfo sweep\n\n`python tests/fuzz/opinfo_sweep.py --samples {args.samples} "
             f"--seed {args.seed}{' --no-training' if args.no_training else ''}"
             f"{' --ops ' + args.ops if args.ops else ''}`, {elapsed / 60:.0f} min\n",
             "| mode | " + " | ".join(CLASSES) + " |", "|---" * (len(CLASSES) + 1) + "|"]
    for mode, c in counts.items():
        lines.append(f"| {mode} | " + " | ".join(str(c.get(k, 0)) for k in CLASSES) + " |")
    for cls in ("WRONG", "crash", "hang", "near", "error"):
        bad = [r for r in rows if r["class"] == cls]
        if bad:
            lines += ["", f"## {cls} ({len(bad)})", ""]
            lines += [f"- `{r['op']}` sample {r['sample']} {r['mode']}: {r['detail']}" for r in bad]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=3, help="samples per op (the first N)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per case")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ops", default="", help="comma-separated op names or fnmatch patterns")
    ap.add_argument("--no-training", action="store_true")
    ap.add_argument("--memory-limit-gb", type=float, default=6.0)
    ap.add_argument("--markdown", default="", help="write the summary here too")
    ap.add_argument("--jsonl", default="", help="write one line per case here")
    args = ap.parse_args(argv)

    os.environ.setdefault("POPTORCH_LOG_LEVEL", "WARN")
    import warnings
    warnings.filterwarnings("ignore")
    ops = _float32_ops()
    import tilefx  # noqa: F401  (the workers fork with everything imported)

    def name(op):
        return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")

    patterns = [p for p in args.ops.split(",") if p]
    selected = [i for i, op in enumerate(ops)
                if not patterns or any(fnmatch.fnmatch(name(op), p) or op.name == p for p in patterns)]
    n_samples = _sample_counts(ops, selected, args.samples, args.seed)
    pool = Pool(args.timeout, int(args.memory_limit_gb * (1 << 30)), args.samples, args.seed)
    counts: dict[str, collections.Counter] = {"inference": collections.Counter()}
    if not args.no_training:
        counts["training"] = collections.Counter()
    rows = []
    out = open(args.jsonl, "w") if args.jsonl else None
    t0 = time.time()
    try:
        for n, i in enumerate(selected):
            op = ops[i]
            modes = ["inference"] + (["training"] if op.supports_autograd and not args.no_training else [])
            for k in range(n_samples[i]):
                for mode in modes:
                    res = pool.run(i, k, mode)
                    row = {"op": name(op), "sample": k, "mode": mode, **res}
                    rows.append(row)
                    counts[mode][res["class"]] += 1
                    if out:
                        out.write(json.dumps(row) + "\n")
                        out.flush()
                    if res["class"] in BAD:
                        print(f"  {row['op']} sample {k} {mode}: {res['class']}: {res['detail']}", flush=True)
            if (n + 1) % 25 == 0:
                print(f"[{time.time() - t0:6.0f} s] {n + 1}/{len(selected)} ops: " + "; ".join(
                    f"{m}: " + ", ".join(f"{c} {v}" for c, v in sorted(cs.items())) for m, cs in counts.items()),
                    flush=True)
    finally:
        pool.close()
        if out:
            out.close()
    text = _markdown(rows, counts, args, time.time() - t0)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    return 1 if any(r["class"] in BAD for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
