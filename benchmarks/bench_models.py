"""Hugging Face model families (the tiny configs of tests/hf_families.py)
through tilefx: cold and warm compile seconds, then the time of one training
step (forward, backward, SGD) and one inference step on the simulated IPU
next to PyTorch eager on the CPU doing the same, measured alternately in one
process (tilefx, PyTorch, tilefx, ...) so load on the machine hits both.
PyTorch runs on one thread by default, as tilefx's numpy kernels do (on a
shared 2-core machine torch's second thread spins: 10x slower steps).

    .venv/bin/python benchmarks/bench_models.py [--repeats N] [--families bert,gpt2,...]

"Cold" is the first compile of a family in the process (torch's tracing
caches for its ops are empty), "warm" a second compile of a fresh wrapper of
the same model. Step times are medians over the repeats.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
import tilefx  # noqa: E402
from hf_families import FAMILIES  # noqa: E402


def _time(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def bench(name: str, repeats: int) -> dict:
    fam = FAMILIES[name]
    x_train, x_eval = fam.example(training=True), fam.example(training=False)

    model = fam.model().train()
    cold = _time(lambda: tilefx.trainingModel(
        model, optimizer=torch.optim.SGD(model.parameters(), lr=1e-3)).compile(*x_train))
    train_ipu = tilefx.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=1e-3))
    warm = _time(lambda: train_ipu.compile(*x_train))
    ref = fam.model().train()
    ref_opt = torch.optim.SGD(ref.parameters(), lr=1e-3)

    def torch_train():
        ref_opt.zero_grad()
        ref(*x_train).backward()
        ref_opt.step()

    inf_model = fam.model().eval()
    inf_ipu = tilefx.inferenceModel(inf_model)
    inf_ipu.compile(*x_eval)

    def torch_infer():
        with torch.no_grad():
            inf_model(*x_eval)

    train_ipu(*x_train), torch_train(), inf_ipu(*x_eval), torch_infer()  # first runs
    t_ipu, t_pt, i_ipu, i_pt = [], [], [], []
    for _ in range(repeats):  # alternating
        t_ipu.append(_time(lambda: train_ipu(*x_train)))
        t_pt.append(_time(torch_train))
        i_ipu.append(_time(lambda: inf_ipu(*x_eval)))
        i_pt.append(_time(torch_infer))
    med = statistics.median
    return {"family": name, "cold": cold, "warm": warm,
            "train_ipu": med(t_ipu), "train_pt": med(t_pt),
            "infer_ipu": med(i_ipu), "infer_pt": med(i_pt),
            "ops": len(list(train_ipu._program.module.walk()))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--torch-threads", type=int, default=1,
                    help="PyTorch's intra-op threads (tilefx's numpy kernels run on one)")
    args = ap.parse_args()
    torch.set_num_threads(args.torch_threads)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {args.torch_threads} thread(s); {args.repeats} repeats, medians")
    rows = []
    print("| family | IR ops (training) | cold compile s | warm compile s | training step ms: tilefx / PyTorch (ratio) "
          "| inference step ms: tilefx / PyTorch (ratio) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in args.families.split(","):
        r = bench(name, args.repeats)
        rows.append(r)
        print(f"| {name} | {r['ops']:,} | {r['cold']:.2f} | {r['warm']:.2f} | "
              f"{1e3 * r['train_ipu']:.1f} / {1e3 * r['train_pt']:.1f} ({r['train_ipu'] / r['train_pt']:.2f}x) | "
              f"{1e3 * r['infer_ipu']:.1f} / {1e3 * r['infer_pt']:.1f} ({r['infer_ipu'] / r['infer_pt']:.2f}x) |",
              flush=True)


if __name__ == "__main__":
    main()
