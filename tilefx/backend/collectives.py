"""The machine model of a data-parallel run over several processes: the
gradient all-reduce across replicas and each process's host traffic.

A run has P processes (PopRun / PopDist: `Options.Distributed`), each with R
replicas of an I-IPU program, so N = R x P replicas on I x N IPUs. Before
each weight update, IPU k of every replica sums the gradients of the weights
it holds with IPU k of the other replicas (the rings of different k run at
the same time on their own links). The all-reduce is hierarchical, as the
hardware is:

- IPU-Links join the IPUs of an IPU-Machine and the machines of an IPU-POD64
  rack (`Machine.ipu_link_domain_ipus`, 64): the n = min(N, 64 / I) replicas
  of one rack reduce-scatter and all-gather over a ring of IPU-Links,
  2 (n-1)/n x G bytes through each IPU's link (G: the IPU's gradient bytes).
- GW-Links join the racks (IPU-POD128 and beyond): between the reduce-scatter
  and the all-gather, the D = ceil(N / n) racks all-reduce each IPU's 1/n
  share over a ring of GW-Links, 2 (D-1)/D x G/n bytes per IPU, at the
  machine's GW-Link bandwidth shared by its 4 IPUs (2 x 100 Gbps per
  IPU-Machine).
- Every ring step ends in a sync: the machine's sync over the ring's IPUs on
  IPU-Links, a GW-Link latency across racks.

Host traffic: the R replicas of a process stream their inputs and outputs
through that process's host link (one host server's link), so per weight
update a process moves R x micro-batches x (input + output bytes).

Sources and figures: docs/sizing.md; the constants live in `Machine`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tilefx.backend.costs import _bytes
from tilefx.backend.machine import Machine
from tilefx.dialects import irutil


@dataclass(frozen=True)
class AllReduceCost:
    """One IPU's collective across the replicas: the gradient all-reduce, or
    with replicated tensor sharding one of its halves (`kind`)."""

    nbytes: int  # the IPU's gradient (or weight) bytes
    replicas: int  # all replicas, over all processes
    replicas_per_rack: int  # replicas joined by IPU-Links
    racks: int  # IPU-Link domains joined by GW-Links
    ipu_link_cycles: int
    gw_link_cycles: int
    sync_cycles: int
    kind: str = "allreduce"  # allreduce | reducescatter | allgather

    @property
    def cycles(self) -> int:
        return self.ipu_link_cycles + self.gw_link_cycles + self.sync_cycles


# ring passes of each collective: an all-reduce is a reduce-scatter and an
# all-gather, each moving (n-1)/n of the bytes through every IPU's link
_PASSES = {"allreduce": 2, "reducescatter": 1, "allgather": 1}


def all_reduce_cost(nbytes: int, replicas: int, ipus_per_replica: int, machine: Machine,
                    kind: str = "allreduce") -> AllReduceCost:
    """The hierarchical ring all-reduce of `nbytes` held by one IPU of each of
    `replicas` replicas of an `ipus_per_replica`-IPU program (module docstring),
    or one of its two halves (`kind` "reducescatter" or "allgather": replicated
    tensor sharding sums each gradient into one replica's shard, updates the
    shards, then gathers the updated weights; each half costs half the ring
    bytes and ring steps of the all-reduce)."""
    passes = _PASSES[kind]
    per_rack = max(1, min(replicas, machine.ipu_link_domain_ipus // max(ipus_per_replica, 1)))
    racks = math.ceil(replicas / per_rack)
    if replicas <= 1 or nbytes <= 0:
        return AllReduceCost(max(nbytes, 0), max(replicas, 1), per_rack, racks, 0, 0, 0, kind)
    inner = passes * (per_rack - 1) / per_rack * nbytes
    outer = passes * (racks - 1) / racks * (nbytes / per_rack)
    ipu = machine.link_cycles(inner, machine.ipu_link_bytes_per_s) if inner else 0
    gw_share = machine.gw_link_bytes_per_s / machine.ipus_per_machine
    gw = machine.link_cycles(outer, gw_share) if outer else 0
    ring_ipus = per_rack * max(ipus_per_replica, 1)
    sync = passes * (per_rack - 1) * machine.sync_cycles(ring_ipus) + \
        passes * (racks - 1) * math.ceil(machine.gw_link_latency_s * machine.clock_hz)
    return AllReduceCost(nbytes, replicas, per_rack, racks, ipu, gw, sync, kind)


@dataclass(frozen=True)
class HostTraffic:
    """One process's host streams per weight update (training) or call (inference)."""

    bytes_in: int
    bytes_out: int
    cycles: int  # on the process's host link

    @property
    def nbytes(self) -> int:
        return self.bytes_in + self.bytes_out


def host_traffic(in_bytes: int, out_bytes: int, micro_batches: int, replicas: int,
                 machine: Machine) -> HostTraffic:
    """The streams of `replicas` replicas, `micro_batches` each, of `in_bytes`
    in and `out_bytes` out per micro-batch, through one host link."""
    bi = in_bytes * micro_batches * replicas
    bo = out_bytes * micro_batches * replicas
    cyc = machine.link_cycles(bi + bo, machine.host_link_bytes_per_s) if bi + bo else 0
    return HostTraffic(bi, bo, cyc)



def host_stream_bytes(main) -> tuple[int, int]:
    """The bytes per micro-batch a step streams from and to the host: its
    function's inputs and outputs (by their argument and result roles)."""
    in_bytes = sum(_bytes(a) for a, r in zip(main.body.block.args, irutil.arg_roles(main)) if "input" in r)
    ret = main.body.block.last_op
    out_bytes = sum(_bytes(v) for v, r in zip(ret.operands, irutil.result_roles(main)) if "output" in r)
    return in_bytes, out_bytes


def host_stream_cycles(main, machine: Machine, host_io: bool = True) -> tuple[int, int]:
    """The cycles per micro-batch of a step's host streams over the host
    link (`host_stream_bytes`): the inputs into the first stage that reads
    them, the outputs out of the last. `host_io` False: synthetic data
    (PopTorch's `enableSyntheticData`), no streams."""
    if not host_io:
        return 0, 0
    in_bytes, out_bytes = host_stream_bytes(main)
    return (machine.link_cycles(in_bytes, machine.host_link_bytes_per_s) if in_bytes else 0,
            machine.link_cycles(out_bytes, machine.host_link_bytes_per_s) if out_bytes else 0)
