"""`ipu-assign-stages`: resolve blocks into pipeline stages, IPUs and phases.

Every op's `#ipu.place` names its block (and the IPU given in the
annotation). This pass reads the execution strategy (the module attribute
`ipu.strategy`, set from `Options.setExecutionStrategy`, else the pass
options) and writes `stage`, `ipu` and `phase` into every placement:

- forward pipeline stages: P = 1 + the number of IPU changes along the
  blocks in program order (consecutive blocks on one IPU merge);
- training: the backward of forward stage k is stage 2P-2-k, on the IPU of
  stage k (the last forward stage also runs the first backward step);
- phased: forward phases as given; backward phases mirror them (forward
  0,1,2 gives backward 4,3,2, or 5,4,3 with a separate backward phase).
  A block whose ops carry several IPUs (`Block("0", ipu_id=i)` entered on
  IPU 0 and IPU 2, as PopTorch's phased tests do) keeps each op on its own
  IPU when its Stage sets none: a stage per (Stage, IPU), all in its phase.

It checks PopTorch's rules and reports violations with the numbers:
gradientAccumulation >= 2P-1 (pipelined training), deviceIterations >= P
(pipelined inference), stage ids never decrease along the data flow, a
power-of-two IPU count unless autoRoundNumIPUs, even phases on even IPUs
(parallel phased).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import DictionaryAttr, IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from tilefx.errors import Error
from tilefx.passes import check_option
from tilefx.dialects.ipu import PLACE_KEY, START_BLOCK, PlacementAttr
from tilefx.dialects.irutil import find_func, module_config, place
from tilefx.dialects.names import STAGES_KEY, STRATEGY_KEY


class PlacementError(Error, DiagnosticException):
    """A block/stage/strategy rule is violated (a tilefx.Error and an IR diagnostic)."""

    def __init__(self, message: str):
        Error.__init__(self, message, type="ipu-assign-stages")


@dataclass
class _Block:
    name: str
    ipu: int | None
    first: int  # index of its first forward op
    ipus: set[int] = field(default_factory=set)  # every IPU its forward ops are annotated with


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def reservable_ipus(n: int) -> int:
    """How many IPUs PopTorch reserves for a model using `n`: a power of two
    up to 64, else a multiple of 64 (an IPU-POD's partitions)."""
    if n <= 64:
        return 1 << max(n - 1, 0).bit_length()
    return -(-n // 64) * 64


def ipu_count_error(n: int, context: str = "") -> str | None:
    """PopTorch's message for an IPU count it cannot reserve (None when it can),
    after `context` (how tilefx counted them)."""
    need = reservable_ipus(n)
    if need == n:
        return None
    return (f"{context}The model specifies the use of {n} IPUs, however PopTorch must reserve a "
            f"minimum of {need} in order to allow the model to run, because PopTorch must reserve a "
            f"power of 2 or a multiple of 64 IPUs. Please reconfigure your model to use a different "
            f"number of IPUs or set poptorch.Options().autoRoundNumIPUs(True).")


_KINDS = ("pipelined", "sharded", "serial_phased", "parallel_phased")


def _implicit_note(cfg: dict, num_stages: int) -> str:
    """What to add to a pipelining rule's error when no execution strategy was
    set: the Block / BeginBlock annotations' ipu_id switched pipelining on, as
    PipelinedExecution is PopTorch's default (user guide 4.4.2)."""
    if not cfg.get("implicit"):
        return ""
    return (f". No execution strategy was set, so the model's Block(ipu_id=...) / "
            f"BeginBlock(ipu_id=...) annotations, which place it on {num_stages} pipeline stages, "
            f"switched on PipelinedExecution, PopTorch's default. To run the stages one after "
            f"another without pipelining (no such minimum), set "
            f"opts.setExecutionStrategy(poptorch.ShardedExecution())")


@dataclass(frozen=True)
class AssignStagesPass(ModulePass):
    name = "ipu-assign-stages"

    strategy: str = "pipelined"
    auto_stage: str = "same_as_ipu"
    gradient_accumulation: int = 1
    device_iterations: int = 1
    auto_round_num_ipus: bool = False
    check_ipu_count: bool = True  # False when no devices are reserved (an offline target)

    def __post_init__(self):
        for opt in ("gradient_accumulation", "device_iterations"):
            v = getattr(self, opt)
            check_option(self.name, isinstance(v, int) and not isinstance(v, bool) and v >= 1,
                         f"{opt} must be an integer >= 1, got {v!r}")
        check_option(self.name, self.strategy in _KINDS,
                     f"unknown execution strategy {self.strategy!r} (one of {', '.join(_KINDS)})")
        check_option(self.name, self.auto_stage in ("same_as_ipu", "auto_increment"),
                     f"auto_stage must be same_as_ipu or auto_increment, got {self.auto_stage!r}")

    def _config(self, module: ModuleOp) -> dict:
        cfg = module_config(module, STRATEGY_KEY)
        if cfg is not None:
            return cfg
        return {"kind": self.strategy, "stages": [], "auto_stage": self.auto_stage}

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        main = find_func(op, "main")
        ops = [o for o in main.body.block.ops if not isinstance(o, func.ReturnOp)]
        if any(o.name == "ipu.stage" for o in ops):
            return  # already outlined: the stages are assigned
        cfg = self._config(op)
        kind = cfg.get("kind", "pipelined")
        if kind not in _KINDS:
            raise PlacementError(f"unknown execution strategy {kind!r}")
        training = any(place(o).is_backward for o in ops if place(o) is not None)
        phased = kind.endswith("phased")

        blocks: dict[str, _Block] = {}
        for i, o in enumerate(ops):
            p = place(o)
            if p is None or p.is_backward or not p.block.data:
                continue
            b = p.block.data
            ipu = p.ipu.data if p.ipu.data >= 0 else None
            if b not in blocks:
                blocks[b] = _Block(b, ipu, i)
            elif ipu is not None and blocks[b].ipu is not None and ipu != blocks[b].ipu and not phased:
                # (phased: the ops keep their IPUs, one stage per IPU; see _resolve)
                raise PlacementError(f"block {b!r} is placed on IPU {blocks[b].ipu} and on IPU {ipu}")
            elif ipu is not None and blocks[b].ipu is None:
                blocks[b].ipu = ipu
            if ipu is not None:
                blocks[b].ipus.add(ipu)
        if not blocks:
            named = [b for st in cfg.get("stages") or [] for b in st["blocks"]] + \
                [b for ph in cfg.get("phases") or [] for st in ph["stages"] for b in st["blocks"]]
            if named:
                raise PlacementError(f"the strategy names blocks {sorted(set(named))}, but the model "
                                     "has no Block or BeginBlock annotations")
            self._single_ipu(op, ops)
            return

        # block -> (user stage id, ipu, phase); the blocks whose ops keep their own IPUs
        if not phased and not cfg.get("stages") and cfg.get("auto_stage") == "auto_increment":
            self._check_all_in_blocks(ops)
        where, own_ipus = self._resolve(cfg, kind, list(blocks.values()))

        def ipu_of(p: PlacementAttr) -> int:
            """The IPU of an op of a placed block."""
            b = p.block.data
            return p.ipu.data if b in own_ipus and p.ipu.data >= 0 else where[b][1]

        num_ipus = max([ipu for _, ipu, _ in where.values()] +
                       [i for b in own_ipus for i in blocks[b].ipus]) + 1
        message = ipu_count_error(num_ipus, f"the model's blocks are on IPUs 0-{num_ipus - 1}: ")
        if message is not None and self.check_ipu_count and not self.auto_round_num_ipus:
            raise PlacementError(message)

        # pipeline stages, by (user stage, IPU): pipelined and sharded merge
        # consecutive user stages on the same IPU; phased gives each user stage
        # one per IPU its ops run on (a stage's ops run on one IPU)
        pipe_of: dict[tuple[int, int], int] = {}
        if phased:
            pairs = {(where[b][0], where[b][1]) for b in where}
            pairs |= {(where[p.block.data][0], ipu_of(p)) for p in map(place, ops)
                      if p is not None and not p.is_backward and p.block.data in own_ipus}
            pipe_of = {pair: i for i, pair in enumerate(sorted(pairs))}
        else:
            stage_ipu = {}
            for b, (s, ipu, _) in where.items():
                if stage_ipu.setdefault(s, ipu) != ipu:
                    raise PlacementError(f"stage {s} has blocks on IPU {stage_ipu[s]} and IPU {ipu}")
            p_idx, prev_ipu = -1, None
            for s in sorted(stage_ipu):
                if stage_ipu[s] != prev_ipu:
                    p_idx += 1
                    prev_ipu = stage_ipu[s]
                pipe_of[(s, stage_ipu[s])] = p_idx
        num_fwd = max(pipe_of.values()) + 1

        self._check_data_flow(ops, where, phased=phased)
        num_phases = max(ph for _, _, ph in where.values()) + 1
        if kind == "pipelined" and num_fwd > 1:
            # PopTorch's fill-drain schedule needs every pipeline stage busy once;
            # 1F1B and interleaved 1F1B run any number of micro-batches
            fill_drain = cfg.get("schedule", "FillDrain") == "FillDrain"
            if training and fill_drain and self.gradient_accumulation < 2 * num_fwd - 1:
                need = 2 * num_fwd - 1
                raise PlacementError(
                    f"pipelined training over {num_fwd} forward stages has {need} pipeline stages "
                    f"and needs gradientAccumulation >= {need}, got {self.gradient_accumulation}: "
                    f"poptorch.Options().Training.gradientAccumulation must be greater than or equal "
                    f"to the number of pipeline stages ({need}) when using poptorch.PipelinedExecution. "
                    f"Please note that a model with {num_fwd} pipeline stages in PopTorch will have an "
                    f"additional {need - num_fwd} stages when training. Set "
                    f"opts.Training.gradientAccumulation({need}) or more (each call then takes "
                    f"deviceIterations x replicationFactor x gradientAccumulation micro-batches), "
                    f"or pick a schedule that runs any number of micro-batches: "
                    f"PipelinedExecution(..., schedule=\"1F1B\")" + _implicit_note(cfg, num_fwd))
            if not training and self.device_iterations < num_fwd:
                raise PlacementError(
                    f"pipelined inference over {num_fwd} stages needs deviceIterations >= {num_fwd}, "
                    f"got {self.device_iterations}: poptorch.Options().deviceIterations must be greater "
                    f"than or equal to the number of pipeline stages ({num_fwd}) when using "
                    f"poptorch.PipelinedExecution. Set opts.deviceIterations({num_fwd}) or more"
                    + _implicit_note(cfg, num_fwd))

        def bwd_phase(ph: int) -> int:
            last = num_phases - 1
            return 2 * last - ph + (1 if cfg.get("separate_backward") else 0)

        # write placements; ops without a block follow their users / operands
        resolved: dict[Operation, PlacementAttr] = {}
        separate = bool(cfg.get("separate_backward")) and phased
        for o in ops:
            p = place(o)
            if p is None or not p.block.data:
                continue
            if p.block.data not in where:
                raise PlacementError(f"{o.name} is in block {p.block.data!r}, which has no forward op")
            s, ipu, ph = where[p.block.data]
            if (s, ipu_of(p)) in pipe_of:  # (a backward op annotated with no forward op's IPU keeps the block's)
                ipu = ipu_of(p)
            ps = pipe_of[(s, ipu)]
            if p.is_backward:
                # the last forward stage runs the first backward step, unless phased
                # execution gives the backward its own phase
                stage = (2 * num_fwd - (1 if separate else 2) - ps) if training else ps
                ph = bwd_phase(ph) if kind.endswith("phased") else ph
            else:
                stage = ps
            resolved[o] = p.with_(ipu=ipu, stage=stage, phase=ph)
        # ops without a block (glue code, gradient-accumulation adds, constants):
        # the latest stage among the ops they use; ops that use no placed op
        # (constants, views of weights) float to the earliest stage using them
        floating = []
        for o in ops:
            if o in resolved:
                continue
            known = [resolved[v.owner] for v in o.operands
                     if isinstance(v.owner, Operation) and v.owner in resolved]
            if known:
                resolved[o] = max(known, key=lambda pl: pl.stage.data).with_(direction=_place_dir(o))
            else:
                floating.append(o)
        first_block = next(iter(blocks))
        s0, ipu0, ph0 = where[first_block]
        for o in reversed(floating):
            users = [resolved[u.operation] for r in o.results for u in r.uses
                     if u.operation in resolved]
            if users:
                resolved[o] = min(users, key=lambda pl: pl.stage.data).with_(direction=_place_dir(o))
            else:
                resolved[o] = PlacementAttr(_place_dir(o), first_block, ipu0, pipe_of[(s0, ipu0)], ph0)
        for o, p in resolved.items():
            o.attributes[PLACE_KEY] = p
        if self.auto_round_num_ipus:
            num_ipus = 1 << (num_ipus - 1).bit_length()
        op.attributes[STAGES_KEY] = DictionaryAttr({
            "kind": StringAttr(kind),
            "num_ipus": IntegerAttr(num_ipus, i64),
            "forward_stages": IntegerAttr(num_fwd, i64),
            "pipeline_stages": IntegerAttr(1 + max(p.stage.data for p in resolved.values()), i64),
            "phases": IntegerAttr(1 + max(p.phase.data for p in resolved.values()), i64),
            "training": IntegerAttr(int(training), i64),
        })

    def _single_ipu(self, module: ModuleOp, ops) -> None:
        for o in ops:
            p = place(o) or PlacementAttr(_place_dir(o))
            o.attributes[PLACE_KEY] = p.with_(ipu=0, stage=0, phase=0)
        module.attributes[STAGES_KEY] = DictionaryAttr({
            "kind": StringAttr("single"), "num_ipus": IntegerAttr(1, i64),
            "forward_stages": IntegerAttr(1, i64), "pipeline_stages": IntegerAttr(1, i64),
            "phases": IntegerAttr(1, i64),
            "training": IntegerAttr(int(any((place(o) or PlacementAttr()).is_backward for o in ops)), i64),
        })

    def _resolve(self, cfg: dict, kind: str,
                 blocks: list[_Block]) -> tuple[dict[str, tuple[int, int, int]], set[str]]:
        """Each block's (user stage id, IPU, phase), and the blocks whose ops
        keep the IPUs they are annotated with (phased, a Stage without an
        IPU over a block entered on several: PopTorch's phased tests
        place `Block(f"{phase}", ipu_id=ipu)` on IPUs 0 and 2 of a phase)."""
        where: dict[str, tuple[int, int, int]] = {}
        own_ipus: set[str] = set()
        names = {b.name: b for b in blocks}
        if kind.endswith("phased"):
            phases = cfg.get("phases") or []
            if not phases:
                raise PlacementError(f"{kind} execution needs at least one Phase")
            if START_BLOCK in names:  # ops before the first block join the first stage
                first = phases[0]["stages"][0]
                phases = [{"stages": [{**first, "blocks": [START_BLOCK, *first["blocks"]]},
                                      *phases[0]["stages"][1:]]}, *phases[1:]]
            stage_id = 0
            for ph, phase in enumerate(phases):
                for st in phase["stages"]:
                    for b in st["blocks"]:
                        if b not in names:
                            raise PlacementError(f"Phase {ph} names block {b!r}, which the model "
                                                 f"does not have (blocks: {sorted(names)})")
                        if b in where:
                            raise PlacementError(f"block {b!r} is associated with more than one stage")
                        ipu = st.get("ipu", names[b].ipu)
                        if ipu is None:
                            raise PlacementError(f"block {b!r} in phase {ph} has no IPU: use Phase.ipus(...)")
                        where[b] = (stage_id, ipu, ph)
                        if "ipu" not in st and len(names[b].ipus) > 1:
                            own_ipus.add(b)
                    stage_id += 1
                if kind == "parallel_phased":
                    for st in phase["stages"]:
                        ipus = {st["ipu"]} if "ipu" in st else \
                            {i for b in st["blocks"] for i in (names[b].ipus or {where[b][1]})}
                        wrong = sorted(i for i in ipus if i % 2 != ph % 2)
                        if wrong:
                            raise PlacementError(
                                f"parallel phased execution: phase {ph} is "
                                f"{'even' if ph % 2 == 0 else 'odd'} and must run on "
                                f"{'even' if ph % 2 == 0 else 'odd'} IPUs, but a stage is on IPU {wrong[0]}")
        else:
            stages = cfg.get("stages") or []
            if stages and START_BLOCK in names:  # ops before the first block join stage 0
                stages = [{**stages[0], "blocks": [START_BLOCK, *stages[0]["blocks"]]}, *stages[1:]]
            if stages:
                for s, st in enumerate(stages):
                    for b in st["blocks"]:
                        if b not in names:
                            raise PlacementError(f"Stage {s} names block {b!r}, which the model "
                                                 f"does not have (blocks: {sorted(names)})")
                        if b in where:
                            raise PlacementError(f"block {b!r} is associated with more than one stage")
                        ipu = st.get("ipu", names[b].ipu)
                        where[b] = (s, s if ipu is None else ipu, 0)
            elif cfg.get("auto_stage") == "auto_increment":
                for s, b in enumerate(sorted(blocks, key=lambda x: x.first)):
                    where[b.name] = (s, s if b.ipu is None else b.ipu, 0)
            else:
                for b in blocks:
                    if b.ipu is None:
                        raise PlacementError(
                            f"block {b.name!r} has no ipu_id: with AutoStage.SameAsIpu every block "
                            "needs one (or list the blocks in Stage(...) objects)")
                    where[b.name] = (b.ipu, b.ipu, 0)
        missing = [b.name for b in blocks if b.name not in where]
        if missing:
            raise PlacementError(f"blocks {missing} are not in any Stage or Phase of the strategy")
        return where, own_ipus

    def _check_all_in_blocks(self, ops) -> None:
        """AutoStage.AutoIncrement gives each block the next stage, so an op
        computing on a block's results after the last block ended has no
        stage: PopTorch's "No active Block" (its user guide: declare every
        layer inside a Block). Ops on no placed value (constants, views of
        weights) are not such ops; glue between two blocks follows its operands."""
        placed = [i for i, o in enumerate(ops)
                  if (p := place(o)) is not None and not p.is_backward and p.block.data]
        for o in ops[placed[-1] + 1:]:
            p = place(o)
            if p is None or p.is_backward or p.block.data:
                continue
            for v in o.operands:
                q = place(v.owner) if isinstance(v.owner, Operation) else None
                if q is not None and not q.is_backward and q.block.data:
                    raise PlacementError(
                        f"No active Block: {o.name} uses a value of block {q.block.data!r} after the last "
                        "block ended; with AutoStage.AutoIncrement every op must be inside a Block")

    def _check_data_flow(self, ops, where, phased: bool = False) -> None:
        """A value may only flow to the same or a later stage (pipelined, sharded).
        Phased: to the same or a later phase; the stages of one phase run at once on
        their IPUs and exchange values either way (the guide's f-string example of
        ParallelPhasedExecution, PopTorch user guide, 4.4.1 "Annotations", feeds phase1_ipu1 into
        phase1_ipu0)."""
        key, what = (2, "phase") if phased else (0, "stage")
        for o in ops:
            p = place(o)
            if p is None or p.is_backward or not p.block.data:
                continue
            s = where[p.block.data][key]
            for v in o.operands:
                src = v.owner
                if not isinstance(src, Operation):
                    continue
                q = place(src)
                if q is None or q.is_backward or not q.block.data:
                    continue
                t = where[q.block.data][key]
                if t > s:
                    raise PlacementError(
                        f"{what} ids must not decrease along the data flow: {o.name} in block "
                        f"{p.block.data!r} ({what} {s}) uses a value of {src.name} in block "
                        f"{q.block.data!r} ({what} {t})")


def _place_dir(o: Operation) -> str:
    p = place(o)
    return p.direction.data if p is not None else "fwd"
