"""Executor speed against PyTorch eager on the same CPU.

For each model, one tilefx step and one PyTorch eager step alternate in one
process (so both see the same machine load), and the ratio of the medians is
printed: tilefx / torch, training step (forward, backward, optimizer) and
inference. Then the cold start from fresh processes: `import torch`,
`import tilefx` on top of it, the first compile of the tutorial CNN (end of
`import tilefx` to a ready executor) and a second one (warm).

    .venv/bin/python benchmarks/bench_speed.py [--steps N] [--only NAME ...] [--no-cold]

torch runs on its default threads (`torch.get_num_threads()`). On a shared
machine the absolute times move between runs; the ratios, measured
alternately, move much less. Results go to benchmarks/RESULTS.md by hand.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import time

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import tilefx  # noqa: E402
from models import EncoderLayer, Transformer, TutorialCNN, WithLoss  # noqa: E402


class MLP(nn.Module):
    """784-1024-1024-10 with ReLU."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                                 nn.Linear(1024, 10))

    def forward(self, x):
        return self.net(x)


class BertLayer(nn.Module):
    """A BERT-base encoder layer: post-norm, d 768, 12 heads, feed-forward 3072, GELU."""

    def __init__(self, d=768, heads=12, ff=3072):
        super().__init__()
        inner = EncoderLayer(d, heads, 0.0)
        self.attn = inner.attn
        self.ln1 = nn.LayerNorm(d)
        self.ff1 = nn.Linear(d, ff)
        self.ff2 = nn.Linear(ff, d)
        self.ln2 = nn.LayerNorm(d)

    def forward(self, x):
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.ff2(nn.functional.gelu(self.ff1(x))))


class BertStack(nn.Module):
    def __init__(self, layers=2, d=768):
        super().__init__()
        self.layers = nn.Sequential(*[BertLayer(d) for _ in range(layers)])
        self.head = nn.Linear(d, 2)

    def forward(self, x):
        return self.head(self.layers(x)[:, 0])


def _sgd(params):
    return (torch.optim.SGD(params, lr=0.01, momentum=0.9),
            lambda p: tilefx.optim.SGD(p, lr=0.01, momentum=0.9))


def _adamw(params):
    return (torch.optim.AdamW(params, lr=1e-3),
            lambda p: tilefx.optim.AdamW(p, lr=1e-3))


def cases():
    """name -> (model factory, inputs, targets, optimizer pair factory)."""
    g = torch.Generator().manual_seed(0)
    cnn_x, cnn_y = torch.randn(40, 1, 28, 28, generator=g), torch.randint(0, 10, (40,), generator=g)
    mlp_x, mlp_y = torch.randn(64, 784, generator=g), torch.randint(0, 10, (64,), generator=g)
    tok = torch.randint(0, 1000, (8, 128), generator=g)
    tgt = torch.randint(0, 1000, (8, 128), generator=g)
    bert_x, bert_y = torch.randn(4, 128, 768, generator=g), torch.randint(0, 2, (4,), generator=g)
    return {
        "cnn-sgd": ("tutorial CNN, micro-batch 40, SGD momentum", TutorialCNN, cnn_x, cnn_y, _sgd),
        "cnn-adamw": ("tutorial CNN, micro-batch 40, AdamW", TutorialCNN, cnn_x, cnn_y, _adamw),
        "mlp": ("MLP 784-1024-1024-10, batch 64, SGD momentum", MLP, mlp_x, mlp_y, _sgd),
        "encoder": ("transformer encoder, 4 layers, d 256, seq 128, batch 8, AdamW",
                    lambda: Transformer(vocab=1000, d=256, heads=4, layers=4, seq=128),
                    tok, tgt, _adamw),
        "bert": ("BERT-base layers (d 768, ff 3072), 2 layers, seq 128, batch 4, AdamW",
                 BertStack, bert_x, bert_y, _adamw),
    }


def alternate(fa, fb, steps: int) -> tuple[float, float]:
    """Median seconds of fa and fb, run alternately after one warm-up each."""
    fa(), fb()
    ta, tb = [], []
    for i in range(steps):
        for f, ts in ((fa, ta), (fb, tb)) if i % 2 == 0 else ((fb, tb), (fa, ta)):
            t0 = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t0)
    return statistics.median(ta), statistics.median(tb)


def bench_case(key: str, steps: int) -> dict:
    title, make, x, y, optims = cases()[key]
    torch.manual_seed(0)
    base = make()
    # training: the same start on both sides
    ours_model = WithLoss(copy.deepcopy(base), nn.CrossEntropyLoss())
    ref_model = WithLoss(copy.deepcopy(base), nn.CrossEntropyLoss())
    ref_opt, make_ours = optims(ref_model.parameters())
    trainer = tilefx.trainingModel(ours_model, optimizer=make_ours(ours_model.parameters()))
    trainer.compile(x, y)

    def torch_train():
        ref_opt.zero_grad()
        ref_model(x, y)[1].backward()
        ref_opt.step()

    t_train, r_train = alternate(lambda: trainer(x, y), torch_train, steps)
    trainer.destroy()

    inf_model = copy.deepcopy(base).eval()
    ref_inf = copy.deepcopy(base).eval()
    infer = tilefx.inferenceModel(inf_model)
    infer.compile(x)

    def torch_infer():
        with torch.no_grad():
            ref_inf(x)

    t_inf, r_inf = alternate(lambda: infer(x), torch_infer, steps)
    return {"model": title, "train_ms": 1e3 * t_train, "torch_train_ms": 1e3 * r_train,
            "infer_ms": 1e3 * t_inf, "torch_infer_ms": 1e3 * r_inf}


def ablate_fusion(key: str, steps: int) -> tuple[float, float]:
    """Training step with the executor's elementwise fusion on and off,
    alternating in one process (the same weights and optimizer state path)."""
    from tilefx.backend.executor import CompiledFunction
    from tilefx.passes.training_step import find_func

    title, make, x, y, optims = cases()[key]
    torch.manual_seed(0)
    base = make()
    runs = []
    for fuse in (True, False):
        m = WithLoss(copy.deepcopy(base), nn.CrossEntropyLoss())
        tr = tilefx.trainingModel(m, optimizer=optims(m.parameters())[1](m.parameters()))
        tr.compile(x, y)
        prog = tr._program
        prog.main = CompiledFunction(find_func(prog.module, "main"), tr.random_streams.own, fuse=fuse)
        runs.append(tr)
    on, off = alternate(lambda: runs[0](x, y), lambda: runs[1](x, y), steps)
    return 1e3 * on, 1e3 * off


COLD_SCRIPT = r"""
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
import torch
t1, c1 = time.perf_counter(), time.process_time()
import tilefx
t2, c2 = time.perf_counter(), time.process_time()
sys.path.insert(0, sys.argv[1])
from models import TutorialCNN, WithLoss
from torch import nn
x, y = torch.randn(40, 1, 28, 28), torch.randint(0, 10, (40,))
times, cpu = [], []
for _ in range(2):
    m = WithLoss(TutorialCNN(), nn.CrossEntropyLoss())
    t, c = time.perf_counter(), time.process_time()
    ex = tilefx.trainingModel(m, optimizer=tilefx.optim.AdamW(m.parameters(), lr=1e-3))
    ex.compile(x, y)
    times.append(time.perf_counter() - t)
    cpu.append(time.process_time() - c)
print(json.dumps({"import_torch": t1 - t0, "import_tilefx": t2 - t1, "import_torch_cpu": c1 - c0,
                  "import_tilefx_cpu": c2 - c1, "cold_compile": times[0],
                  "warm_compile": times[1], "cold_compile_cpu": cpu[0], "warm_compile_cpu": cpu[1],
                  "dynamo_loaded": "torch._dynamo" in sys.modules}))
"""


def cold(runs: int) -> dict:
    """Medians over `runs` fresh processes. tilefx's modules are byte-compiled
    first, as an installed package's are: a checkout run with
    PYTHONDONTWRITEBYTECODE=1 (as on the shared benchmark machine) otherwise
    compiles all of them from source in every process, ~0.2 s of the cold
    compile that no installed tilefx pays."""
    import compileall

    compileall.compile_dir(os.path.join(HERE, "..", "tilefx"), quiet=1)
    rows = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", COLD_SCRIPT, os.path.join(HERE, "..", "tests")],
                             capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONPATH": os.path.join(HERE, "..") + os.pathsep
                                  + os.environ.get("PYTHONPATH", "")})
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    out = {k: statistics.median(r[k] for r in rows) for k in rows[0] if k != "dynamo_loaded"}
    out["dynamo_loaded"] = any(r["dynamo_loaded"] for r in rows)
    return out


def main():
    ap = argparse.ArgumentParser()
    # 60: at 15 the inference ratios of the encoder and BERT moved by +-0.04
    # from run to run (benchmarks/RESULTS.md, 2026-11-24)
    ap.add_argument("--steps", type=int, default=60, help="alternating steps per measurement")
    ap.add_argument("--only", nargs="*", default=None, help=f"a subset of {list(cases())}")
    ap.add_argument("--cold-runs", type=int, default=3, help="fresh processes for the cold start")
    ap.add_argument("--no-cold", action="store_true")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--torch-threads", type=int, default=None,
                    help="torch.set_num_threads for the reference (default: torch's own)")
    ap.add_argument("--kernels", choices=("aten", "numpy"), default="aten",
                    help="numpy: the numpy kernels for every op (TILEFX_KERNELS=numpy), "
                         "as before 2026-11-24")
    ap.add_argument("--ablate-fusion", action="store_true",
                    help="instead: training step with elementwise fusion on / off")
    args = ap.parse_args()
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    if args.kernels == "numpy":
        os.environ["TILEFX_KERNELS"] = "numpy"
    if args.ablate_fusion:
        for k in args.only or list(cases()):
            on, off = ablate_fusion(k, args.steps)
            print(f"{cases()[k][0]}: fusion on {on:.1f} ms, off {off:.1f} ms, ratio {on / off:.2f}",
                  flush=True)
        return
    keys = list(cases()) if args.only is None else args.only  # `--only` alone: cold start only
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; tilefx kernels: "
          f"{args.kernels}; median of {args.steps} alternating steps; ratio = tilefx / torch")
    print("| model | training step tilefx / torch (ms) | ratio | inference tilefx / torch (ms) | ratio |")
    print("|---|---|---|---|---|")
    results = []
    for k in keys:
        r = bench_case(k, args.steps)
        results.append(r)
        print(f"| {r['model']} | {r['train_ms']:.1f} / {r['torch_train_ms']:.1f} | "
              f"{r['train_ms'] / r['torch_train_ms']:.2f} | {r['infer_ms']:.1f} / "
              f"{r['torch_infer_ms']:.1f} | {r['infer_ms'] / r['torch_infer_ms']:.2f} |", flush=True)
    out = {"speed": results}
    if not args.no_cold:
        c = cold(args.cold_runs)
        out["cold"] = c
        print(f"\ncold start (median of {args.cold_runs} fresh processes): import torch "
              f"{c['import_torch']:.2f} s (CPU {c['import_torch_cpu']:.2f} s), import tilefx on top "
              f"{c['import_tilefx']:.2f} s (CPU {c['import_tilefx_cpu']:.2f} s), "
              f"first compile of the tutorial CNN {c['cold_compile']:.2f} s, second "
              f"{c['warm_compile']:.2f} s (CPU time {c['cold_compile_cpu']:.2f} s / "
              f"{c['warm_compile_cpu']:.2f} s); torch._dynamo loaded: {c['dynamo_loaded']}; "
              f"load average {os.getloadavg()[0]:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
