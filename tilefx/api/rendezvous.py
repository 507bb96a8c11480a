"""Where the processes of one job meet, and how a stranger is kept out.

torch.distributed's ``env://`` rendezvous is a key-value store (a TCPStore)
at ``MASTER_ADDR:MASTER_PORT``, served by process 0 (or, under torchrun, by
its agent). Anyone who reaches that port is taken in: a process of a second
job started on the same port joins the first job's store, and either fills
a place of the first job or waits for peers that never come until the
timeout ends. So tilefx meets the others on the store before it makes the
process group, with three checks, each an Error at once:

* the job: the first process to arrive writes its job's description
  (``tilefx/job``: the job id, its process count, the host and pid of the
  writer); a process of another job id, or of the same id with another
  process count, is refused, naming both jobs. The job id is
  ``TILEFX_JOB_ID``, else torchrun's ``TORCHELASTIC_RUN_ID`` (``--rdzv-id``),
  else unnamed;
* the place: each process claims ``tilefx/rank/<id>`` with an atomic
  compare-and-set; a place another process holds already means two jobs
  (unnamed, or named alike) share the port, and the newcomer is refused,
  naming the holder;
* process 0's port: when it is taken, process 0 reads who holds it (the
  other job's description, if that is a tilefx job) and says so, instead of
  torch's bare ``EADDRINUSE``.

Under torchrun, whose agent keeps its store over the restarts of
``--max-restarts``, the places are claimed per attempt
(``TORCHELASTIC_RESTART_COUNT``), so the restarted processes claim them
again; the job stays at the store's top, where a stranger looks.

Then every process waits for all the places to be claimed, within the
rendezvous timeout (``TILEFX_RENDEZVOUS_TIMEOUT`` seconds, default the
smaller of 300 s and ``Options.Distributed.setTimeout``), and the error
names the processes that never came.
"""

from __future__ import annotations

import datetime
import json
import os
import secrets
import socket

from tilefx.errors import Error

JOB_KEY = "tilefx/job"
RANK_KEY = "tilefx/rank/{}"
# torchrun's agent keeps its store when it restarts the processes
# (--max-restarts): each attempt claims its places afresh
ATTEMPT_PREFIX = "tilefx/attempt{}/"
DEFAULT_RENDEZVOUS_SECONDS = 300.0
PROBE_SECONDS = 5.0  # how long process 0 asks the holder of a taken port who it is


def job_id() -> str:
    """This process's job id: TILEFX_JOB_ID, else torchrun's run id, else ''."""
    return os.environ.get("TILEFX_JOB_ID") or os.environ.get("TORCHELASTIC_RUN_ID") or ""


def job_name(job: str) -> str:
    return repr(job) if job else "<unnamed>"


def rendezvous_timeout(exchange_timeout: float) -> float:
    """Seconds to wait for the others to arrive (TILEFX_RENDEZVOUS_TIMEOUT,
    else the smaller of 300 s and the exchange timeout)."""
    text = os.environ.get("TILEFX_RENDEZVOUS_TIMEOUT")
    if not text:
        return min(DEFAULT_RENDEZVOUS_SECONDS, exchange_timeout)
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not 0 < seconds < float("inf"):
        raise Error(f"TILEFX_RENDEZVOUS_TIMEOUT={text!r} is not a number of seconds > 0")
    return seconds


def _describe(entry: dict) -> str:
    return (f"job {job_name(entry.get('job', ''))} of {entry.get('processes', '?')} process(es), "
            f"first joined by pid {entry.get('pid', '?')} on {entry.get('host', '?')}")


def _decode(raw: bytes) -> dict:
    try:
        value = json.loads(raw.decode("utf-8", "replace")[:4096])
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {"job": "<not a tilefx job>"}


def meet(rank: int, size: int, addr: str, port: int, timeout: float):
    """The store of this job's rendezvous with this process's place claimed
    and every other process arrived; an Error at once for a stranger's
    port, an Error after the rendezvous timeout for missing processes."""
    import torch.distributed as dist

    me = f"process {rank} of {size}"
    where = f"{addr}:{port}"
    job = job_id()
    wait = rendezvous_timeout(timeout)
    mine = {"job": job, "processes": size, "host": socket.gethostname(), "pid": os.getpid()}
    agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"  # torchrun's agent serves the store
    serve = rank == 0 and not agent
    try:
        store = dist.TCPStore(addr, port, size, serve, datetime.timedelta(seconds=wait),
                              wait_for_workers=False, multi_tenant=True)
    except (RuntimeError, ValueError, OSError) as e:
        if serve and "EADDRINUSE" in str(e):
            raise Error(f"{me} of job {job_name(job)}: cannot serve the rendezvous at {where}: the port "
                        f"is taken by {_holder(addr, port)}. Give each job its own MASTER_PORT") from None
        raise Error(f"{me}: no rendezvous with the other {size - 1} process(es) at {where} within {wait:g} s "
                    f"(TILEFX_RENDEZVOUS_TIMEOUT, at most Options.Distributed.setTimeout): process 0 of job "
                    f"{job_name(job)} never served it; start all {size} processes with the same MASTER_ADDR "
                    f"and MASTER_PORT. ({type(e).__name__}: {str(e)[:300]})") from None
    # the job at the store's top, where a stranger looks; the places per attempt
    places = store if not agent else dist.PrefixStore(
        ATTEMPT_PREFIX.format(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")), store)
    try:
        _claim(store, places, rank, size, mine, me, where)
        _wait_all(places, size, wait, me, where, job)
    except Error:
        raise
    except (RuntimeError, OSError, TimeoutError) as e:  # the store went away (its server exited)
        raise Error(f"{me} of job {job_name(job)}: the rendezvous at {where} failed: "
                    f"({type(e).__name__}: {str(e)[:300]})") from None
    store.set_timeout(datetime.timedelta(seconds=timeout))  # from here on: the exchanges' timeout
    # The process group's keys (each process's gloo address) go under this
    # attempt's prefix too: torchrun's agent keeps its store over restarts,
    # and a restarted process reading a killed attempt's address would wait
    # for a peer that is gone (as torch's own env:// rendezvous prefixes them).
    return places


def _claim(store, places, rank: int, size: int, mine: dict, me: str, where: str) -> None:
    text = json.dumps(mine)
    held = _decode(store.compare_set(JOB_KEY, "", text))
    if held.get("job") != mine["job"] or held.get("processes") != size:
        raise Error(f"{me} of job {job_name(mine['job'])}: the rendezvous at {where} belongs to another "
                    f"job: {_describe(held)}; this process is of job {job_name(mine['job'])} of {size} "
                    "process(es). Give each job its own MASTER_PORT")
    token = json.dumps(dict(mine, token=secrets.token_hex(8)))
    got = places.compare_set(RANK_KEY.format(rank), "", token).decode("utf-8", "replace")
    if got != token:
        other = _decode(got.encode())
        raise Error(f"{me} of job {job_name(mine['job'])}: process {rank}'s place at {where} is taken by pid "
                    f"{other.get('pid', '?')} on {other.get('host', '?')}: two jobs use this MASTER_PORT "
                    "(give each its own port, or a job id: TILEFX_JOB_ID or torchrun --rdzv-id, so the "
                    "second is refused before it takes any place)")


def _wait_all(store, size: int, wait: float, me: str, where: str, job: str) -> None:
    keys = [RANK_KEY.format(r) for r in range(size)]
    try:
        store.wait(keys, datetime.timedelta(seconds=wait))
        return
    except (RuntimeError, OSError) as e:
        if "timeout" not in str(e).lower() and "Timeout" not in type(e).__name__:
            raise
    missing = [r for r, k in enumerate(keys) if not store.check([k])]
    raise Error(f"{me}: no rendezvous with the other {size - 1} process(es) at {where} within {wait:g} s "
                f"(TILEFX_RENDEZVOUS_TIMEOUT, at most Options.Distributed.setTimeout): process(es) "
                f"{', '.join(map(str, missing))} of job {job_name(job)} never came. Start all {size} processes "
                f"(torchrun --nproc-per-node {size} ..., or one configureProcessId(id, {size}) each) with "
                "the same MASTER_ADDR and MASTER_PORT")


def _holder(addr: str, port: int) -> str:
    """Who serves `addr:port`: a tilefx job's description, or another program."""
    import torch.distributed as dist

    try:
        probe = dist.TCPStore(addr, port, 1, False, datetime.timedelta(seconds=PROBE_SECONDS),
                              wait_for_workers=False)
        if probe.check([JOB_KEY]):
            return _describe(_decode(probe.get(JOB_KEY)))
        return "a rendezvous store of no tilefx job (another torch.distributed job, or torchrun's agent)"
    except (RuntimeError, OSError, ValueError):
        return "another program"
