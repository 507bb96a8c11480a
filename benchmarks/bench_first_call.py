"""The first call of a script, each round in a fresh process.

    python benchmarks/bench_first_call.py [ROUNDS] [--case plain|tutorial|both] [--before TREE]

Each round starts a new interpreter that times, in order: `import torch`,
`import poptorch` (tilefx under PopTorch's name) on top of it, building the
CNN of Graphcore's tutorial "PopTorch Parallel Execution Using Pipelining"
with its loss, `trainingModel` with AdamW, and the model's first call, which traces and compiles it, then
runs one step. Cases:

- `plain`: the tutorial's network on one IPU, micro-batch 40, as
  `tests/models.py` has it (the README's first-compile figure);
- `tutorial`: the tutorial as written: blocks B1..B4 as pipeline stages on
  four IPUs, deviceIterations 10 x gradientAccumulation 10, optimizer state
  off chip, OutputMode.All.

The rounds alternate between the cases (and the `--before` tree, e.g. an
older commit's `git archive`), so a loaded machine weighs on all alike, and
the median, minimum and maximum of each phase are printed, wall and CPU time,
then the CPU time from the end of `import torch` to the first call's results
("after torch") and its ratio to the same process's `import torch`, which a
loaded machine slows about as much.
tilefx's modules are byte-compiled first, as an installed package's are: a
checkout run with PYTHONDONTWRITEBYTECODE=1 otherwise compiles every module
from source in every process.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import pathlib
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent

SCRIPT = r"""
import json, sys, time
clock = lambda: (time.perf_counter(), time.process_time())
marks = [clock()]
import torch
marks.append(clock())
import poptorch
marks.append(clock())
from torch import nn

class ConvLayer(nn.Module):
    def __init__(self, in_channels, num_filters, kernel_size, pool_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, num_filters, kernel_size=kernel_size)
        self.pool = nn.MaxPool2d(kernel_size=pool_size)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.pool(self.conv(x)))

class Network(nn.Module):
    def __init__(self, blocks):
        super().__init__()
        self.blocks = blocks
        self.layer1 = ConvLayer(1, 10, 5, 2)
        self.layer2 = ConvLayer(10, 20, 5, 2)
        self.layer3 = nn.Linear(320, 256)
        self.layer3_act = nn.ReLU()
        self.layer4 = nn.Linear(256, 10)

    def block(self, name):
        import contextlib
        return poptorch.Block(name) if self.blocks else contextlib.nullcontext()

    def forward(self, x):
        with self.block("B1"):
            x = self.layer1(x)
        with self.block("B2"):
            x = self.layer2(x)
        with self.block("B3"):
            x = x.view(-1, 320)
            x = self.layer3_act(self.layer3(x))
        with self.block("B4"):
            x = self.layer4(x)
        return x

class TrainingModelWithLoss(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.loss = nn.CrossEntropyLoss()

    def forward(self, args, labels=None):
        output = self.model(args)
        with self.model.block("B4"):
            loss = self.loss(output, labels)
        return output, loss

tutorial = sys.argv[1] == "tutorial"
torch.manual_seed(0)
model = TrainingModelWithLoss(Network(blocks=tutorial))
opts = poptorch.Options()
batch = 40
if tutorial:
    opts.deviceIterations(10)
    opts.Training.gradientAccumulation(10)
    opts.setExecutionStrategy(poptorch.PipelinedExecution(
        poptorch.Stage("B1"), poptorch.Stage("B2"), poptorch.Stage("B3"), poptorch.Stage("B4")))
    opts.TensorLocations.setOptimizerLocation(poptorch.TensorLocationSettings().useOnChipStorage(False))
    opts.outputMode(poptorch.OutputMode.All)
    batch *= 100
x, y = torch.randn(batch, 1, 28, 28), torch.randint(0, 10, (batch,))
marks.append(clock())
training = poptorch.trainingModel(model, opts, optimizer=poptorch.optim.AdamW(model.parameters(), lr=1e-3))
marks.append(clock())
out, loss = training(x, y)
marks.append(clock())
training(x, y)
marks.append(clock())
print(json.dumps({  # each phase's seconds, in the order of PHASES
    "wall": [b[0] - a[0] for a, b in zip(marks, marks[1:])],
    "cpu": [b[1] - a[1] for a, b in zip(marks, marks[1:])],
    "modules": len(sys.modules), "dynamo": "torch._dynamo" in sys.modules,
    "loss": float(loss.mean())}))
"""

# the phases SCRIPT marks, in order
PHASES = ["import torch", "import poptorch", "model", "trainingModel", "first call", "second call"]
AFTER_TORCH = ["import poptorch", "model", "trainingModel", "first call"]


def run(case: str, tree: str) -> dict:
    env = dict(os.environ, PYTHONPATH=tree)
    out = subprocess.run([sys.executable, "-c", SCRIPT, case], env=env, capture_output=True,
                         text=True, cwd=tree)
    if out.returncode:
        raise SystemExit(f"{case} in {tree} failed:\n{out.stderr[-3000:]}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    if len(r["wall"]) != len(PHASES):
        raise SystemExit(f"{case} in {tree}: {len(r['wall'])} phases timed, expected {PHASES}")
    return r | {k: dict(zip(PHASES, r[k])) for k in ("wall", "cpu")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("rounds", type=int, nargs="?", default=7)
    ap.add_argument("--case", choices=("plain", "tutorial", "both"), default="both")
    ap.add_argument("--before", help="a tilefx source tree to time as well")
    ap.add_argument("--json", help="also write every round's numbers here")
    args = ap.parse_args()
    trees = {"": str(ROOT)} | ({" (before)": os.path.abspath(args.before)} if args.before else {})
    for tree in trees.values():
        compileall.compile_dir(os.path.join(tree, "tilefx"), quiet=1)
    cases = ["plain", "tutorial"] if args.case == "both" else [args.case]
    rows: dict[str, list[dict]] = {f"{c}{label}": [] for c in cases for label in trees}
    for _ in range(args.rounds):
        for c in cases:
            for label, tree in trees.items():
                rows[f"{c}{label}"].append(run(c, tree))
    print(f"{args.rounds} fresh processes per case; median [min - max] seconds, wall / CPU; "
          f"load average {os.getloadavg()[0]:.2f}")
    for key, rs in rows.items():
        print(f"\n{key}: losses {sorted({round(r['loss'], 6) for r in rs})}, "
              f"{rs[0]['modules']} modules, torch._dynamo loaded: {any(r['dynamo'] for r in rs)}")
        for phase in PHASES:
            wall = [r["wall"][phase] for r in rs]
            cpu = [r["cpu"][phase] for r in rs]
            print(f"  {phase:16s} {statistics.median(wall):6.3f} [{min(wall):.3f} - {max(wall):.3f}]"
                  f"  CPU {statistics.median(cpu):6.3f} [{min(cpu):.3f} - {max(cpu):.3f}]")
        # everything after `import torch` up to the first call's results, and its ratio
        # to that process's own `import torch` (a load on the machine slows both alike)
        after = [sum(r["cpu"][p] for p in AFTER_TORCH) for r in rs]
        ratio = [a / r["cpu"]["import torch"] for a, r in zip(after, rs)]
        print(f"  {'after torch':16s} CPU {statistics.median(after):6.3f} [{min(after):.3f} - {max(after):.3f}]"
              f"  x import torch {statistics.median(ratio):.2f} [{min(ratio):.2f} - {max(ratio):.2f}]")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
