"""Sizing a 1-billion-parameter GPT for an IPU-POD64 without running it.

A GPT-like decoder (24 layers, d_model 1792, 14 heads, sequence 1024,
vocabulary 32,000, untied output head: 1.04 billion parameters) is built on
the meta device, so its weights take no memory, and compiled for an offline
IPU target: 16 IPUs pipelined (the embedding alone on IPU 0, the head alone
on IPU 15, the layers two or one per IPU between) x replicationFactor 4 = 64
IPUs, gradient accumulation 64, fp16 weights and activations, fp16 gradient
accumulators, recomputation checkpoints at every layer's output, AdamW with
fp32 state off-chip (streaming memory), static loss scaling. The 1F1B
pipeline schedule and an available memory proportion of 0.2 leave IPU 1's
busiest tile at 591,726 B of 638,976; PopTorch's FillDrain (which stashes
twice the layer outputs) needs 611,670 B and a proportion of 0.3 621,824
(the 2026-11-28 runs; when this benchmark was written, neither fitted: 667
and 647 KB, before later changes to the memory plan). `--processes N`
sizes N PopRun processes x 4 replicas each (N = 4: an IPU-POD256, its racks
joined by GW-Links).

Nothing runs and nothing is copied per replica: the profile is the machine
model's prediction. The script prints the compile time, the peak host
memory of the process (resource.getrusage), the per-IPU memory and the
throughput the profile predicts, including the per-process host traffic and
the gradient all-reduce over IPU-Links and GW-Links (docs/sizing.md).

    .venv/bin/python benchmarks/bench_pod64_sizing.py [--machine mk2|bow] [--processes N]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import tilefx as poptorch  # noqa: E402


class DecoderLayer(nn.Module):
    """Pre-norm causal self-attention and a 4x GELU feed-forward (GPT-2's layer)."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        self.heads = heads

    def forward(self, x):
        B, T, D = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(D, dim=-1)
        q, k, v = (t.reshape(B, T, h, D // h).transpose(1, 2) for t in (q, k, v))
        a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(B, T, D))
        return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab: int, d: int, heads: int, layers: int, seq: int):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq, d)
        self.layers = nn.ModuleList(DecoderLayer(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids, labels):
        T = ids.shape[1]
        x = self.tok(ids) + self.pos(torch.arange(T, device=ids.device))
        # recompute each layer's activations in its backward: only the layer
        # outputs are stashed for the micro-batches in flight
        x = poptorch.recomputationCheckpoint(x)
        for layer in self.layers:
            x = poptorch.recomputationCheckpoint(layer(x))
        logits = self.head(self.ln(x))
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(),
                                           labels.reshape(-1))
        return poptorch.identity_loss(loss, reduction="none")


def layer_ipus(layers: int, ipus: int) -> list[int]:
    """Each layer's IPU: the embedding (tok: 90 M parameters, about two layers'
    worth) alone on the first IPU, the head alone on the last, the layers
    spread evenly over the IPUs between (the earlier ones take the extra)."""
    middle = max(ipus - 2, 1)
    first = 1 if ipus > 2 else 0
    per = [layers // middle + (k < layers % middle) for k in range(middle)]
    return [first + k for k, count in enumerate(per) for _ in range(count)]


def build(args) -> tuple[GPT, poptorch.Options, object]:
    with torch.device("meta"):
        model = GPT(args.vocab, args.d, args.heads, args.layers, args.seq).half()
    ipus = layer_ipus(args.layers, args.ipus)
    poptorch.BeginBlock(model.tok, "embedding", ipu_id=0)
    for i, layer in enumerate(model.layers):
        if i == 0 or ipus[i] != ipus[i - 1]:
            poptorch.BeginBlock(layer, f"layer{i}", ipu_id=ipus[i])
    poptorch.BeginBlock(model.ln, "head", ipu_id=args.ipus - 1)
    opts = poptorch.Options()
    opts.useOfflineIpuTarget(2)
    opts.setMachine(args.machine)
    opts.replicationFactor(args.replicas)
    if args.processes > 1:
        opts.Distributed.configureProcessId(0, args.processes)
    opts.Training.gradientAccumulation(args.accumulation)
    opts.setExecutionStrategy(poptorch.PipelinedExecution(poptorch.AutoStage.SameAsIpu,
                                                          schedule=args.schedule))
    opts.TensorLocations.setOptimizerLocation(poptorch.TensorLocationSettings().useOnChipStorage(False))
    opts.setAvailableMemoryProportion({f"IPU{k}": args.memory_proportion for k in range(args.ipus)})
    optimizer = poptorch.optim.AdamW(model.parameters(), lr=1e-4, loss_scaling=1024.0,
                                     accum_type=torch.float16,
                                     first_order_momentum_accum_type=torch.float32,
                                     second_order_momentum_accum_type=torch.float32)
    return model, opts, optimizer


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--machine", default="mk2")
    ap.add_argument("--processes", type=int, default=1, help="PopRun processes (4 replicas each)")
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--d", type=int, default=1792)
    ap.add_argument("--heads", type=int, default=14)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--ipus", type=int, default=16)
    ap.add_argument("--replicas", type=int, default=4)
    ap.add_argument("--accumulation", type=int, default=64)
    ap.add_argument("--micro-batch", type=int, default=1)
    ap.add_argument("--memory-proportion", type=float, default=0.2,
                    help="available memory proportion of every IPU (matmul temporaries)")
    ap.add_argument("--schedule", default="1F1B",
                    help="pipeline schedule: 1F1B stashes half of FillDrain's activations")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()

    start = time.perf_counter()
    model, opts, optimizer = build(args)
    params = sum(p.numel() for p in model.parameters())
    training = poptorch.trainingModel(model, opts, optimizer=optimizer)
    n = args.replicas * args.accumulation * args.micro_batch
    ids = torch.zeros(n, args.seq, dtype=torch.long)
    labels = torch.zeros(n, args.seq, dtype=torch.long)
    training.compile(ids, labels)
    seconds = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux

    prof = training.profile
    s = prof.summary()
    samples = n  # per process and weight update
    call_s = prof.seconds
    dist = s.get("distributed", {})
    global_samples = samples * max(1, args.processes)
    figures = {
        "model": f"GPT {args.layers} layers, d_model {args.d}, {args.heads} heads, seq {args.seq}, "
                 f"vocab {args.vocab}",
        "parameters": params,
        "machine": prof.machine.name,
        "ipus_per_replica": prof.num_ipus,
        "replicas_per_process": args.replicas,
        "processes": args.processes,
        "total_ipus": prof.num_ipus * args.replicas * args.processes,
        "gradient_accumulation": args.accumulation,
        "compile_seconds": round(seconds, 1),
        "peak_host_rss_gib": round(rss / 2 ** 30, 2),
        "seconds_per_weight_update": call_s,
        "sequences_per_second": global_samples / call_s,
        "tokens_per_second": global_samples * args.seq / call_s,
        "bubble_fraction": s["bubble_fraction"],
        "distributed": dist,
        "per_ipu_peak_tile_bytes": {k: v["peak_tile_bytes"] for k, v in s["memory"].items()},
        "per_ipu_total_bytes": {k: v["total_bytes"] for k, v in s["memory"].items()},
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                 cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip(),
    }
    print(prof.table(top_ops=8))
    print()
    print(f"{figures['model']}: {params / 1e9:.3f} billion parameters (on the meta device)")
    print(f"{prof.num_ipus} IPUs pipelined x {args.replicas} replicas x {args.processes} process(es) = "
          f"{figures['total_ipus']} IPUs ({prof.machine.name}), gradient accumulation {args.accumulation}")
    print(f"compile: {seconds:.1f} s, peak host RSS {rss / 2 ** 30:.2f} GiB")
    print(f"per weight update: {1e3 * call_s:.1f} ms = {figures['sequences_per_second']:.1f} sequences/s "
          f"= {figures['tokens_per_second']:,.0f} tokens/s over all replicas")
    worst = max(s["memory"].items(), key=lambda kv: kv[1]["peak_tile_bytes"])
    print(f"per-IPU memory: busiest tile {worst[1]['peak_tile_bytes']:,} B on IPU {worst[0]} "
          f"(of {prof.machine.bytes_per_tile:,}); totals "
          + ", ".join(f"IPU{k} {v['total_bytes'] / 2 ** 20:.0f} MiB" for k, v in s["memory"].items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1, default=str)


if __name__ == "__main__":
    main()
