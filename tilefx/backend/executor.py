"""Compile a `func.func` once into a flat list of numpy closures; run it many times.

Like torch.fx's Interpreter, each step reads like the op it runs: fetch the
operand slots, call the kernel from the one table, store the results. The
executor knows nothing of torch, and nothing of any particular kernel:

- a matmul-like op (`gemm_flops`) runs with numpy's BLAS on the threads its
  size pays for (kernels/tuning.py), chosen once here;
- chains of float32 elementwise ops (passes/fuse_elementwise.py) run as one
  step of in-place ufuncs into buffers owned by the executable and reused
  from call to call when nothing else holds them;
- each intermediate is dropped after the step that reads it last;
- an optimizer update or gradient accumulation (kernels.ipu.IN_PLACE_OPERANDS)
  writes into its argument arrays when the caller donates them for the call
  (`donated=`: arrays only it holds, such as the weights) and no other op of
  the function reads them.

The step closures that are not an op's kernel call (an argument's view, a
clone, a loop, a type-checked step) are in backend/steps.py.
"""

from __future__ import annotations

import sys
import threading
from functools import partial
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import bf16, f16, f32
from xdsl.ir import Operation, SSAValue

from tilefx.backend.kernels import FIRST_RESULT_KERNELS, IPU_KERNELS, KERNELS
from tilefx.backend.kernels._common import (
    CHUNK,
    chunk_size,
    ignore_fp_errors,
    restore_fp_errors,
    set_kernel_threads,
)
from tilefx.backend.fused_steps import FUSED_EVAL, chunked_group, fused_props
from tilefx.backend.in_place import overwritable
from tilefx.backend.kernels.ipu import IN_PLACE_OPERANDS
from tilefx.backend.kernels.linalg import SPLIT_GEMM_OPS
from tilefx.backend.precision_steps import (
    HALF_PARTIAL_OPS,
    bf16_rounded,
    round_to_bf16,
    stochastically_rounded,
)
from tilefx.backend.kernels.tuning import (
    blas_cores,
    blas_threads_for,
    configure_process,
    restore_blas_threads,
)
from tilefx.dialects.aten import ATEN_OPS, from_attr, op_name
from tilefx.dialects.aten_schema import py_name
from tilefx.dialects.aten_traits import ops_where
from tilefx.dialects.ipu import PLACE_KEY
from tilefx.dialects.irutil import numel as _numel
from tilefx.dialects.irutil import shape_of as _dims
from tilefx.backend.steps import (
    ExecutionError,
    argument_view_step,
    checked_step,
    clone_step,
    fetcher,
    loop_step,
    named_step,
    operands_lead,
    step_props,
    viewed_chain,
    with_blas_threads,
)
from tilefx.passes.fuse_attention import AttentionGroup, attention_groups
from tilefx.passes.fuse_elementwise import fusion_groups
from tilefx.runtime import RUNTIME

KERNEL_TABLE: dict[str, Callable[..., Any]] = {
    **{op_name(schema_name): KERNELS[schema_name] for schema_name in ATEN_OPS},
    **IPU_KERNELS,
}
# ops whose later results nothing may read: a kernel computing the first alone
FIRST_RESULT_TABLE = {op_name(s): FIRST_RESULT_KERNELS[s] for s in ATEN_OPS if s in FIRST_RESULT_KERNELS}
RANDOM_OPS = frozenset(op_name(n) for n in ops_where(random=True))
# The plugins' hooks, read from the process's registry (tilefx/runtime.py;
# the backend knows nothing of torch, lowering/aten_kernels.py AtenKernels
# has ATen's kernels):
# - RUNTIME.kernel_providers may supply a kernel for an op instead of the
#   numpy table's, or return None: for an aten op a kernel(*operand groups)
#   with the properties bound, returning the result (or the list of
#   results); for an ipu op a kernel with the table kernel's signature;
# - RUNTIME.attention_providers may supply the kernel of an attention group
#   (passes/fuse_attention.py): hook(group, result shape) -> make(ins, out,
#   keep) building the step from the slots of q, k, v, the mask and the
#   run-time scale (those the group has), or None, when the members run op by op;
# - RUNTIME.call_hooks run as each call starts; each returns a function that
#   undoes what it set for the call, or None (the ATen kernels' thread count).
_NONE_DONATED: frozenset[int] = frozenset()
MOVE_OPS = {"ipu.copy", "tile.exchange", "tile.ipu_copy", "tile.host_in", "tile.host_out",
            "tile.remote_load", "tile.remote_store", "tile.all_gather"}


# ops whose result is their operand's value: a slot shared with it (values
# are never written once made; an in-place form only takes a donated
# argument that no other step reads)
SAME_VALUE_OPS = frozenset(op_name(n) for n in ops_where(same_value=True))
# views computed from the result type (CompiledFunction._view_step)
VIEW_OPS = frozenset(op_name(n) for n in ops_where(view_step=True))
# a constant op (no operands, not random) made once per executable, up to this size
CONSTANT_BYTES = 1 << 20


def _only_returned(op: Operation) -> bool:
    """Whether the op's results are only returned by the function it is in
    (so its step may run later, with others of its kind)."""
    return all(use.operation.name == "func.return" for r in op.results for use in r.uses)


def _same_shape_view(op: Operation) -> bool:
    """A view whose result is its operand unchanged: an expand or view to
    the operand's own shape, a permute that keeps the order (the traced
    matmuls expand every batched operand, mostly to the shape it has)."""
    src, res = op.operands[0].type, op.results[0].type
    if not hasattr(src, "get_shape") or not hasattr(res, "get_shape") or \
            tuple(src.get_shape()) != tuple(res.get_shape()) or src != res:
        return False
    if op.name == "aten.permute":
        dims = [int(d) for d in step_props(op)["dims"]]
        return dims == sorted(dims) and all(d >= 0 for d in dims)
    return True


def _repeat_key(op: Operation, slot) -> tuple | None:
    """What a pure ATen op computes, for finding a repeat of it in the same
    function: its name, operand slots, properties and result types. Traced
    models repeat work per layer: each layer turns the same boolean mask
    into the same additive one (`where`), a SiLU's backward computes its
    forward's sigmoid again, fills and scalars recur; llama's inference had
    46 such ops, its training step 73. The IR keeps them (the machine model
    costs what the graph holds); the executor computes each once. None for
    what must run every time or has a step of its own kind: random ops,
    ops writing operands (IN_PLACE_OPERANDS), views, copies, moves."""
    name = op.name
    if not name.startswith("aten.") or not op.results or op.regions or name in RANDOM_OPS or \
            name in IN_PLACE_OPERANDS or name in VIEW_OPS or name in SAME_VALUE_OPS or \
            name == "aten.clone":
        return None
    props = tuple(sorted(op.properties.items()))  # xDSL's attributes: hashable, equal by value
    try:
        hash(props)
    except TypeError:
        return None
    return (name, tuple(slot(v) for v in op.operands), props, tuple(r.type for r in op.results))


def _constant_op(op: Operation) -> bool:
    return (not op.operands and not op.regions and len(op.results) == 1
            and op.name.startswith("aten.") and op.name not in RANDOM_OPS)


def gemm_flops(op: Operation) -> int | None:
    """2 M N K of the largest single BLAS call the op's kernel makes, None for
    ops that do not call BLAS. (bmm and grouped convolutions make one call per
    batch entry or group; the convolutions one per whole batch, by im2col.)"""
    name = op.name.removeprefix("aten.")
    ins, outs = list(op.operands), list(op.results)
    try:
        if name in ("mm", "bmm", "addmm", "baddbmm", "matmul", "linear"):
            a = ins[1] if name in ("addmm", "baddbmm") else ins[0]
            k = _dims(a)[-1] if _dims(a) else 1
            out = _dims(outs[0])
            return 2 * k * _numel(out[-2:])
        if name in ("convolution", "convolution_backward"):
            g = op.properties.get("groups")
            groups = int(from_attr(g)) if g is not None else 1
            y = _dims(outs[0]) if name == "convolution" else _dims(ins[0])
            w = _dims(ins[1]) if name == "convolution" else _dims(ins[2])
            return 2 * _numel((y[0],) + y[2:]) * _numel(w) // groups
        if name == "sum.dim_IntList":  # a product with ones over the trailing axes (kernels.reductions)
            return 2 * _numel(_dims(ins[0]))
        if op.name == "ipu.serialized_matmul":
            return 2 * _numel(_dims(ins[0])) * _dims(ins[1])[-1] // int(op.factor.value.data)
    except (IndexError, TypeError, ValueError, AttributeError):
        return None  # types without shapes (hand-written IR): leave the pool alone
    return None


def _operand_layout(op: Operation, slot) -> list:
    """Per operand group: a slot, None (absent optional) or a list of slots."""
    defs = type(op).get_irdl_definition().operands if hasattr(type(op), "get_irdl_definition") else None
    if defs is None:
        return [slot(v) for v in op.operands]
    from xdsl.irdl import OptOperandDef, VarOperandDef

    layout = []
    for (name, d) in defs:
        vals = getattr(op, name)
        if isinstance(d, OptOperandDef):
            layout.append(None if vals is None else slot(vals))
        elif isinstance(d, VarOperandDef):
            layout.append([slot(v) for v in vals])
        else:
            layout.append(slot(vals))
    return layout


class CompiledFunction:
    """A func.func as a list of steps over integer slots."""

    def __init__(self, fn: func.FuncOp, rng: np.random.Generator | None = None,
                 stochastic_rounding: bool = False, half_partials: bool = False,
                 check_types: bool = False, fuse: bool = True):
        configure_process()
        self.kernel_threads = blas_cores()  # for the chunked kernels (kernels._common)
        self.name = fn.sym_name.data
        self.rng = rng if rng is not None else np.random.default_rng(0)
        self.stochastic_rounding = stochastic_rounding
        self.half_partials = half_partials
        self.check_types = check_types  # hand-written IR (tilefx-run): results must match their types
        slots: dict[SSAValue, int] = {}

        def slot(v: SSAValue) -> int:
            if v not in slots:
                slots[v] = len(slots)
            return slots[v]

        self.arg_slots = [slot(a) for a in fn.body.block.args]
        self.steps: list[Callable[[list], None]] = []
        self.result_slots: list[int] = []
        self.bf16_results: set[int] = set()
        self.reads: list[set[int]] = []  # the slots each step reads (for liveness)
        # chains of f32 elementwise ops run as one step at their root (passes/fuse_elementwise)
        self.buffers: list[np.ndarray | None] = []  # the fused steps' outputs, reused when free
        self._donated: frozenset[int] = frozenset()  # argument positions given up for this call
        in_place: list[tuple[int, Operation, Any, list, list[int]]] = []
        # for the elementwise steps that may overwrite a dying operand (backend/in_place.py)
        elementwise: list[tuple[int, Operation, Any, list[int], int, list[bool]]] = []
        view_of: dict[int, int] = {}  # a view's slot -> its operand's (memory they may share)
        fresh: set[int] = set()  # slots of arrays their step made (provider results)
        # the steps that may leave a provider's tensors in their result slots
        # (_keep_tensors): a direct step's rebuild, by step; a clone's (operand,
        # result) slots, whose result is a tensor when its operand is
        retype: dict[int, tuple[Callable[[list[bool]], Callable], list[int]]] = {}
        passes: dict[int, tuple[int, int]] = {}
        views: set[int] = set()  # the view steps (numpy's)
        self._running = threading.Lock()  # one call at a time: the buffers are per executable
        fused_at: dict[Operation, Any] = {}
        inside: set[Operation] = set()
        # attention as one kernel, where a provider has one (passes/fuse_attention)
        attention_at: dict[Operation, tuple[AttentionGroup, Callable]] = {}
        for g in attention_groups(fn) if fuse and RUNTIME.attention_providers else ():
            make = self._attention_kernel(g)
            if make is not None:
                attention_at[g.root] = (g, make)
                inside.update(g.ops)
        # chains of numpy's elementwise kernels as one step; a chain with a
        # member a provider takes runs op by op on the providers' kernels
        # (_numpy_group)
        for g in fusion_groups(fn, exclude=inside) if fuse else ():
            if _numpy_group(g):
                fused_at[g.root] = g
                inside.update(g.ops)

        def alias(new: SSAValue, old: SSAValue) -> None:
            slots[new] = slot(old)

        arg_slots = frozenset(self.arg_slots)

        # the result slots of each pure ATen op computed so far, by what it computes
        # (_repeat_key): a repeat of it reads them instead of computing them again
        computed: dict[tuple, tuple[list[int], list[bool]]] = {}

        def compile_ops(ops, steps: list, reads: list[set[int]]) -> None:
            """Compile `ops` into `steps`, with the slots each step reads in `reads`."""
            for op in ops:
                if steps is self.steps and not self.check_types and op not in inside and \
                        (key := _repeat_key(op, slot)) is not None:  # (a group's root is inside too)
                    first = computed.get(key)
                    # a multi-result step converts only the results its own op's users read
                    # (direct_multi_step, FIRST_RESULT_TABLE): a repeat reading one the
                    # first left unread computes again (torch.linalg.inv's first call
                    # only checked for errors, the second read the inverse)
                    if first is not None and all(read or not r.uses for r, read in zip(op.results, first[1])):
                        for r, s in zip(op.results, first[0]):
                            slots[r] = s
                        continue
                    if first is None:
                        computed[key] = ([slot(r) for r in op.results], [bool(r.uses) for r in op.results])
                if isinstance(op, func.ReturnOp):
                    self.result_slots = [slot(v) for v in op.operands]
                    # results held as float32 that the caller should see as bfloat16
                    self.bf16_results = {i for i, v in enumerate(op.operands)
                                         if getattr(v.type, "element_type", None) == bf16}
                elif op.name == "ipu.stage":  # an outlined stage: its body inline
                    compile_ops(op.regions[0].block.ops, steps, reads)
                elif op.name == "ipu.for":  # poptorch.for_loop: its body's steps, count times
                    body: list = []
                    body_reads: list[set[int]] = []
                    compile_ops(op.body.block.ops, body, body_reads)
                    # the loop step reads everything its body reads: nothing it uses is freed early
                    reads.append(set().union({slot(v) for v in op.operands}, *body_reads,
                                             {slot(v) for v in op.body.block.last_op.operands}))
                    steps.append(loop_step(op.count.value.data, [slot(a) for a in op.body.block.args],
                                            [slot(v) for v in op.operands],
                                            [slot(v) for v in op.body.block.last_op.operands],
                                            [slot(r) for r in op.results], body))
                elif op.name == "ipu.yield" and op.parent_op().name == "ipu.for":
                    continue  # read by the loop step
                elif op.name == "ipu.yield":  # stage results are the yielded values
                    for r, v in zip(op.parent_op().results, op.operands):
                        alias(r, v)
                elif op.name in MOVE_OPS or op.name in SAME_VALUE_OPS:  # same numbers
                    alias(op.results[0], op.operands[0])
                elif op.name == "tile.sync":
                    continue
                elif op in fused_at:
                    step, group_reads = self._fused_step(fused_at[op], slot)
                    steps.append(step)
                    reads.append(group_reads)
                elif op in attention_at:
                    g, make = attention_at[op]
                    ins = [slot(v) for v in (g.query, g.key, g.value, g.mask, g.scale_value) if v is not None]
                    out = slot(op.results[0])
                    name = f"attention {op.attributes.get(PLACE_KEY) or ''}"
                    step = named_step(make(ins, out, False), name)
                    steps.append(checked_step(step, op, [out]) if self.check_types else step)
                    reads.append(set(ins))
                    if steps is self.steps and not self.check_types:
                        retype[len(steps) - 1] = (
                            lambda keep, make=make, ins=ins, out=out, name=name:
                            named_step(make(ins, out, keep[0]), name), [out])
                        fresh.add(out)  # the kernel's new tensor
                elif op in inside:  # computed by its group's step, at the root
                    continue
                elif op.name in VIEW_OPS and _same_shape_view(op):  # expand to its own shape, ...
                    alias(op.results[0], op.operands[0])
                elif op.name in VIEW_OPS and (view := self._view_step(op, slot)) is not None:
                    src, out = slot(op.operands[0]), slot(op.results[0])
                    if steps is self.steps and src in arg_slots and not self.check_types:
                        # a view of an argument (a weight's transpose): the same as
                        # the last call's while the argument is the same object
                        view = argument_view_step(op, view, src, out)
                        passes[len(steps)] = (src, out)  # a tensor's view is a tensor
                    steps.append(view)
                    reads.append({src})
                    view_of[out] = src
                    if steps is self.steps:
                        views.add(len(steps) - 1)
                elif op.name == "aten.clone":
                    clone = clone_step(op, _provided_kernel(op) or KERNEL_TABLE[op.name],
                                        slot(op.operands[0]), slot(op.results[0]))
                    steps.append(checked_step(clone, op, [slot(op.results[0])]) if self.check_types
                                 else clone)
                    reads.append({slot(op.operands[0])})
                    view_of[slot(op.results[0])] = slot(op.operands[0])  # row-major: the operand
                    if steps is self.steps:
                        passes[len(steps) - 1] = (slot(op.operands[0]), slot(op.results[0]))
                elif (provided := _provided_kernel(op)) is not None and op.name.startswith("aten."):
                    layout = _operand_layout(op, slot)
                    outs = [slot(r) for r in op.results]
                    step, rebuild = self._provided_step(op, provided, layout, outs)
                    if steps is self.steps and _constant_op(op) and self._precompute(step, op, slot):
                        continue  # an arange, a fill: made once here, as the numpy kernels' are
                    steps.append(step)
                    reads.append({j for x in layout if x is not None
                                  for j in (x if isinstance(x, list) else [x])})
                    if steps is self.steps:
                        if rebuild is not None:
                            retype[len(steps) - 1] = (rebuild, outs)
                        fresh.update(outs)  # ATen's functional ops return new tensors
                        maker = getattr(provided, "in_place", None)
                        if maker is not None and not self.check_types and len(outs) == 1 and \
                                all(type(x) is int for x in layout):
                            writable = [k in maker.operands and v.type == op.results[0].type
                                        for k, v in enumerate(op.operands)]
                            elementwise.append((len(steps) - 1, op, maker, layout, outs[0], writable))
                elif steps is self.steps and getattr(provided, "batched", None) is not None and \
                        not self.check_types and _only_returned(op):
                    # optimizer updates: one call of the provider's batched kernel for all
                    # (_batched_step), at the end, where every member's operands exist
                    batches.setdefault(op.name, (provided.batched, []))[1].append(
                        (op, _operand_layout(op, slot), [slot(r) for r in op.results]))
                else:
                    kernel = provided or KERNEL_TABLE.get(op.name)  # an ipu op's provided kernel:
                    if kernel is None:                               # the table's signature
                        raise ExecutionError(f"no kernel for {op.name}")
                    if op.name in FIRST_RESULT_TABLE and not any(r.uses for r in op.results[1:]):
                        kernel = FIRST_RESULT_TABLE[op.name]  # e.g. max pooling's unread indices
                    layout = _operand_layout(op, slot)
                    step = self._step(op, kernel, layout, [slot(r) for r in op.results])
                    if op.name in IN_PLACE_OPERANDS and steps is self.steps:
                        in_place.append((len(steps), op, kernel, layout, [slot(r) for r in op.results]))
                    reads.append({j for x in layout if x is not None
                                  for j in (x if isinstance(x, list) else [x])})
                    flops = gemm_flops(op)
                    if flops is not None:
                        # the kernel threads split these (kernels.linalg): BLAS on one thread
                        split = op.name in SPLIT_GEMM_OPS and self.kernel_threads > 1
                        step = with_blas_threads(step, 1 if split else blas_threads_for(flops))
                    if steps is self.steps and _constant_op(op) and self._precompute(step, op, slot):
                        reads.pop()
                        continue
                    steps.append(step)

        # values of ops without operands (0-d constants, fills), made once
        # here and put in every call's slots: (slot, value); never written
        self.constants: list[tuple[int, Any]] = []
        batches: dict[str, tuple[Callable, list]] = {}
        compile_ops(fn.body.block.ops, self.steps, self.reads)
        for batched, members in batches.values():
            self.steps.append(None)  # placed after the in-place analysis, which needs its reads
            self.reads.append({j for _, layout, _ in members for x in layout if x is not None
                               for j in (x if isinstance(x, list) else [x])})
        self.num_slots = len(slots)
        # held, so the ids stay theirs; with the arrays a constant views (a
        # caller must not get a view of them either: api/host_arrays.py's fresh_outputs)
        self.constant_ids = frozenset(id(a) for _, v in self.constants for a in viewed_chain(v))
        # liveness: drop each intermediate after the step that reads it last, so
        # its memory goes back to the allocator (hot in cache) for the next result
        keep = set(self.result_slots) | set(self.arg_slots)
        last: dict[int, int] = {}
        for i, reads in enumerate(self.reads):
            for j in reads:
                last[j] = i
        dead: list[list[int]] = [[] for _ in self.steps]
        for j, i in last.items():
            if j not in keep:
                dead[i].append(j)
        self.dead = [tuple(d) for d in dead]
        need = self._donation_rule(last)
        self._compile_in_place(in_place, need)
        written = overwritable([(i, layout, writable) for i, _, _, layout, _, writable in elementwise],
                               view_of, fresh, last, keep)
        for i, op, maker, layout, out, _ in elementwise:
            if i in written:
                name = f"{op.name} {op.attributes.get(PLACE_KEY) or ''} (in place)"
                self.steps[i] = named_step(maker(layout, out, written[i]), name)
                retype[i] = (lambda keep, maker=maker, layout=layout, out=out, k=written[i], name=name:
                             named_step(maker(layout, out, k, keep[0]), name), [out])
        self._keep_tensors(retype, passes)
        self._aten_only = not self.check_types and all(
            i in retype or i in passes or i in views for i in range(len(self.steps)))
        at = len(self.steps) - len(batches)
        for i, (batched, members) in enumerate(batches.values(), start=at):
            self.steps[i] = self._batched_step(batched, members, i, need)

    @staticmethod
    def _attention_kernel(g: AttentionGroup) -> Callable | None:
        shape = tuple(g.root.results[0].type.get_shape())
        for provider in RUNTIME.attention_providers:
            make = provider(g, shape)
            if make is not None:
                return make
        return None

    def _keep_tensors(self, retype: dict, passes: dict[int, tuple[int, int]]) -> None:
        """Let a provider's results stay its own tensors where only its direct
        steps read them, instead of a numpy view each step makes and the next
        wraps again (~2 us a step hot, several after a kernel has left the
        caches cold). `tensor_slots`: the slots every reader of which is a
        direct step (`retype`), or a clone (`passes`, a tensor from a tensor)
        whose result is such a slot; the function's results among them are
        turned into numpy arrays as it returns, unless the caller asks for
        tensors (`__call__(tensors=True)`). `tensor_args`: the argument
        positions a caller may pass a tensor in. Views stay numpy's: torch
        makes a view in ~2 us hot and 6-9 in a program (the encoder's 111
        views took 0.72 ms more a call as tensors), numpy in 0.2, so a view's
        operand is an array, and its result wrapped by the step reading it;
        except a view of an argument, made once while the argument is the
        same object (`argument_view_step`, in `passes`): a tensor's view
        for a tensor."""
        self.tensor_slots: frozenset[int] = frozenset()
        self.tensor_args: frozenset[int] = frozenset()
        self._tensor_results: tuple[int, ...] = ()
        if self.check_types or not retype:
            return
        readers: dict[int, list[int]] = {}
        for i, reads in enumerate(self.reads):
            for j in reads:
                readers.setdefault(j, []).append(i)
        made = {o for _, outs in retype.values() for o in outs}
        ok = {j for j, rs in readers.items() if all(i in retype or i in passes for i in rs)}
        ok |= made - set(readers)  # read by nothing here: returned, or dropped
        while True:  # a clone of a tensor is a tensor: its result must be such a slot too
            drop = {src for src, out in passes.values() if src in ok and out not in ok}
            if not drop:
                break
            ok -= drop
        self.tensor_slots = frozenset(ok)
        self.tensor_args = frozenset(k for k, s in enumerate(self.arg_slots) if s in ok)
        self._tensor_results = tuple(k for k, s in enumerate(self.result_slots) if s in ok)
        for i, (rebuild, outs) in retype.items():
            keep = [o in ok for o in outs]
            if any(keep):
                self.steps[i] = named_step(rebuild(keep), self.steps[i].__qualname__)

    def _donation_rule(self, last: dict[int, int]):
        """`need(op, layout, i)`: the argument positions step i must have been
        given up for it to write op's in-place operands (IN_PLACE_OPERANDS),
        or None when it never may: each of them an argument, read by step i
        only, not returned, and no two the same."""
        arg_pos = {s: k for k, s in enumerate(self.arg_slots)}
        readers: dict[int, int] = {}
        for reads in self.reads:
            for j in reads:
                readers[j] = readers.get(j, 0) + 1
        results = set(self.result_slots)

        def need(op: Operation, layout: list, i: int) -> frozenset[int] | None:
            slots = [layout[k] for k in IN_PLACE_OPERANDS.get(op.name, ())
                     if k < len(layout) and layout[k] is not None]
            if not slots or len(set(slots)) != len(slots) or not all(
                    type(j) is int and j in arg_pos and readers.get(j) == 1 and last.get(j) == i
                    and j not in results for j in slots):
                return None
            return frozenset(arg_pos[j] for j in slots)

        return need

    def _compile_in_place(self, candidates, need) -> None:
        """Give each in-place capable step a second form that overwrites its
        operands, used when the caller donated every one of them (`need`)."""
        for i, op, kernel, layout, outs in candidates:
            needed = need(op, layout, i)
            if needed is None:
                continue
            fresh, own = self.steps[i], self._step(op, partial(kernel, inplace=True), layout, outs)

            def step(env, fresh=fresh, own=own, needed=needed):
                (own if needed <= self._donated else fresh)(env)

            step.__qualname__ = fresh.__qualname__ + " (in place when donated)"
            self.steps[i] = step

    def _batched_step(self, batched, members, i: int, need):
        """One step for several ops of one kind (a weight's optimizer update
        each): the provider's batched kernel takes every member's operands,
        properties and whether it may write them (each member as a single
        step would, `need`), and returns each member's results. torch's fused
        updates take lists of tensors: one call for the weights that share
        their hyper-parameters instead of one per weight (the per-call Python
        was ~30 us a weight after the kernels had left the caches cold)."""
        plan = [(fetcher(layout), step_props(op), need(op, layout, i), outs)
                for op, layout, outs in members]
        # bf16 results (held as float32, which the fused kernels take) are
        # rounded as every other step's are (`_step`)
        bf16_outs = [o for op, _, outs in members for o, r in zip(outs, op.results)
                     if getattr(r.type, "element_type", None) == bf16]

        def step(env):
            donated = self._donated
            res = batched([(fetch(env), props, needed is not None and needed <= donated)
                           for fetch, props, needed, _ in plan])
            for (_, _, _, outs), r in zip(plan, res):
                for o, v in zip(outs, r):
                    env[o] = v
            for o in bf16_outs:
                env[o] = round_to_bf16(env[o])

        step.__qualname__ = f"{members[0][0].name} x{len(members)}"
        return step

    def _step(self, op: Operation, kernel, layout: list, outs: list[int]):
        props = step_props(op)
        schema = getattr(op, "schema", None)
        if schema is not None:
            # an optional property the IR left out is None (`int? divisor_override`);
            # Python keywords among the names (`from`) get a `_`, as in the kernels
            props = {py_name(k): v for k, v in props.items()}
            for a in schema.properties:
                if a.optional and not a.has_default and py_name(a.name) not in props:
                    props[py_name(a.name)] = None
        name, place = op.name, op.attributes.get(PLACE_KEY)
        if schema is not None:
            # aten kernels take the schema's arguments by name (tensors and
            # properties interleave in ATen signatures)
            names = [a.name for a in schema.operands]
            base_kernel = kernel

            def kernel(*vals, **kw):
                return base_kernel(**dict(zip(names, vals)), **kw)

            if operands_lead(base_kernel, tuple(names)):
                kernel = base_kernel  # the same call positionally: no dict per call

            if op.name in RANDOM_OPS:  # the generator of this call (`self.rng` may change per replica)
                def kernel(*vals, **kw):
                    return base_kernel(**dict(zip(names, vals)), rng=self.rng, **kw)

            if self.half_partials and op.name in HALF_PARTIAL_OPS and \
                    getattr(op.results[0].type, "element_type", None) == f16:
                kernel = HALF_PARTIAL_OPS[op.name](base_kernel)
            if self.stochastic_rounding and any(
                    getattr(r.type, "element_type", None) == f16 for r in op.results):
                kernel = stochastically_rounded(kernel, self.rng)

        fetch = fetcher(layout)

        variadic = schema is not None and schema.num_results == -1  # a list, even of one
        if not outs and not variadic:  # a check (`_assert_async`): it raises or returns nothing
            def step(env):
                kernel(*fetch(env), **props)
        elif len(outs) == 1 and not variadic:
            out = outs[0]

            def step(env):
                env[out] = kernel(*fetch(env), **props)
        else:
            def step(env):
                res = kernel(*fetch(env), **props)
                for o, r in zip(outs, res):
                    env[o] = r

        step.__qualname__ = f"{name} {place or ''}"
        if any(getattr(r.type, "element_type", None) == bf16 for r in op.results):
            step = bf16_rounded(step, op, outs)
        if self.check_types:
            return checked_step(step, op, outs)
        return step

    def _view_step(self, op: Operation, slot):
        """A view op as one numpy call on its operand's slot, its result shape
        taken from the IR (views are most of a transformer's ops; this skips
        the kernel table's argument handling)."""
        shape = getattr(op.results[0].type, "get_shape", None)
        if shape is None or len(op.operands) != 1:
            return None
        shape, src, out = tuple(shape()), slot(op.operands[0]), slot(op.results[0])
        if op.name == "aten.permute":
            dims = tuple(int(d) for d in step_props(op)["dims"])

            def step(env):
                env[out] = env[src].transpose(dims)
        elif op.name == "aten.expand":
            def step(env):
                env[out] = np.broadcast_to(env[src], shape)
        else:  # view, unsqueeze, squeeze: the same elements in the result's shape
            # the array's own method: np.reshape is a Python wrapper around it,
            # ~1 us hot and several after a kernel has evicted it (169 views a
            # step in the encoder's training graph)
            def step(env):
                a = env[src]
                try:
                    env[out] = a.reshape(shape)
                except AttributeError:  # a Python scalar
                    env[out] = np.reshape(a, shape)

        step.__qualname__ = f"{op.name} {op.attributes.get(PLACE_KEY) or ''}"
        return checked_step(step, op, [out]) if self.check_types else step

    def _precompute(self, step, op: Operation, slot) -> bool:
        """Run a constant op's step now and keep its value for every call (a
        step less per call: the traced graphs make 0-d constants and fills
        for every scalar of a loss or a scaling). False, and the op stays a
        step, when its kernel fails here (it then fails at run time, as
        before) or it yields something other than a small enough array."""
        out = slot(op.results[0])
        scratch: dict[int, Any] = {}
        try:
            with np.errstate(all="ignore"):
                step(scratch)
        except Exception:  # noqa: BLE001 - reported when the program runs, as without this
            return False
        value = scratch.get(out)
        if not isinstance(value, np.ndarray) or value.nbytes > CONSTANT_BYTES:
            return False
        self.constants.append((out, value))
        return True

    def _provided_step(self, op: Operation, kernel, layout: list, outs: list[int]):
        """A step calling a provider's kernel (RUNTIME.kernel_providers), which has
        the op's properties bound already: operands in, results out."""
        fetch = fetcher(layout)
        name = f"{op.name} {op.attributes.get(PLACE_KEY) or ''}"
        direct = getattr(kernel, "direct_step", None)
        if direct is not None and len(outs) == 1 and all(type(x) is int for x in layout):
            # the provider's own step reading and writing the slots: no
            # operand list, no wrapper frames (~3 us of ~10 per small op)
            ins = list(layout)
            step = named_step(direct(ins, outs[0]), name)
            if self.check_types:
                return checked_step(step, op, outs), None
            return step, lambda keep: direct(ins, outs[0], keep[0])
        direct = getattr(kernel, "direct_multi_step", None)
        if direct is not None and len(outs) == len(op.results) > 1 and \
                all(type(x) is int for x in layout):
            ins, used = list(layout), [bool(r.uses) for r in op.results]
            step = named_step(direct(ins, outs, used), name)
            if self.check_types:
                return checked_step(step, op, outs), None
            return step, lambda keep: direct(ins, outs, used, keep)
        if len(outs) == 1 and (getattr(op, "schema", None) is None or op.schema.num_results != -1):
            out = outs[0]

            def step(env):
                env[out] = kernel(*fetch(env))
        else:
            def step(env):
                for o, r in zip(outs, kernel(*fetch(env))):
                    env[o] = r

        step.__qualname__ = name
        return (checked_step(step, op, outs) if self.check_types else step), None

    def _buffer(self, shape: tuple[int, ...]) -> int:
        self.buffers.append(None)
        self._buffer_shapes.append(shape)
        return len(self.buffers) - 1

    def _fused_step(self, group, slot):
        """One step for a fusion group: its ops as numpy ufuncs writing into
        buffers of this executable. An intermediate is overwritten by the op
        that reads it (its only reader); the group's output buffer is reused
        from call to call unless someone still holds it (a caller, a view).
        A group larger than a cache chunk runs chunk by chunk (the same
        operations on every element, its intermediates in cache), the
        chunks spread over the kernel threads (kernels._common)."""
        if not hasattr(self, "_buffer_shapes"):
            self._buffer_shapes: list[tuple[int, ...]] = []
        members = set(group.ops)
        reg: dict[SSAValue, int] = {}
        prog = []
        reads: set[int] = set()
        externals: dict[int, tuple[int, ...]] = {}  # slot -> shape
        for op in group.ops:
            ins = []
            for v in op.operands:
                if v.owner in members:
                    ins.append((True, reg[v]))
                else:
                    ins.append((False, slot(v)))
                    reads.add(slot(v))
                    externals[slot(v)] = tuple(v.type.get_shape())
            shape = tuple(op.results[0].type.get_shape())
            out = next((r for internal, r in ins if internal and self._buffer_shapes[r] == shape),
                       None)
            if out is None:
                out = self._buffer(shape)
            reg[op.results[0]] = out
            prog.append((FUSED_EVAL[op.name], ins, out, fused_props(op)))
        # 0-d operands of another dtype (is_real_scalar): their value as f32, as the kernels cast it
        casts = [s for s, v in ((slot(v), v) for op in group.ops for v in op.operands
                                if v.owner not in members)
                 if getattr(v.type, "element_type", None) != f32]
        used = sorted({o for _, _, o, _ in prog})
        shapes = [self._buffer_shapes[b] for b in used]
        bufs, result, root = self.buffers, slot(group.root.results[0]), reg[group.root.results[0]]
        root_shape = self._buffer_shapes[root]
        name = "fused " + " ".join(op.name.removeprefix("aten.") for op in group.ops)
        f32_ = np.float32

        def inputs(env):
            vals = {s: env[s] for s in externals}
            for s in casts:
                vals[s] = f32_(vals[s])
            return vals

        if _numel(root_shape) > CHUNK:
            step = chunked_group(prog, externals, self._buffer_shapes, root, root_shape, bufs,
                                  result, inputs, chunk_size(_numel(root_shape), self.kernel_threads))
            step.__qualname__ = name
            return step, reads

        def step(env):
            for b, shape in zip(used, shapes):
                if bufs[b] is None or sys.getrefcount(bufs[b]) > 2:  # held elsewhere: a new one
                    bufs[b] = np.empty(shape, f32_)
            vals = inputs(env)
            for fn, ins, out, props in prog:
                fn(*[bufs[r] if internal else vals[r] for internal, r in ins], out=bufs[out],
                   **props)
            env[result] = bufs[root]

        step.__qualname__ = name
        return step, reads

    def __call__(self, *args: np.ndarray, donated: Sequence[int] = (),
                 tensors: bool = False) -> list[np.ndarray]:
        """Run on `args`. `donated`: positions of arguments the caller holds
        alone and gives up for this call (its weights, optimizer state,
        accumulators): optimizer and accumulation steps may write their
        results into them. The results then are those same arrays.
        `tensors`: results a provider's direct step made may be its tensors
        (`_keep_tensors`), else every result is a numpy array. Arguments at
        `tensor_args` may be such tensors."""
        if len(args) != len(self.arg_slots):
            raise ExecutionError(f"@{self.name} takes {len(self.arg_slots)} arguments, got {len(args)}")
        env: list = [None] * self.num_slots
        for s, a in zip(self.arg_slots, args):
            env[s] = a
        for s, v in self.constants:
            env[s] = v
        # overflow to inf/nan is data here (loss scaling looks for it), not an error
        # a function of ATen's steps and numpy's views only (_keep_tensors) does
        # no numpy arithmetic nor BLAS product: no settings of theirs to make
        lean = self._aten_only
        try:
            with self._running:
                if not lean:
                    self._donated = frozenset(donated) if donated else _NONE_DONATED
                    threads = set_kernel_threads(self.kernel_threads)
                    fp = ignore_fp_errors()
                undo = []
                try:
                    for hook in RUNTIME.call_hooks:
                        u = hook()
                        if u is not None:
                            undo.append(u)
                    for step, dead in zip(self.steps, self.dead):
                        try:
                            step(env)
                        except (ValueError, TypeError, IndexError, ArithmeticError, NotImplementedError) as e:
                            # a kernel refusing its operands: the user's data (a class index out of
                            # range, ...) or an unsupported case; name the op, keep numpy's words
                            what = step.__qualname__.split(" ")[0]
                            raise ExecutionError(f"{what} failed at run time: {type(e).__name__}: {e}") from None
                        for j in dead:
                            env[j] = None
                finally:
                    if not lean:
                        set_kernel_threads(threads)
                        restore_fp_errors(fp)
                    for u in undo:
                        u()
        finally:
            if not lean:
                self._donated = _NONE_DONATED
                restore_blas_threads()
        res = [env[s] for s in self.result_slots]
        if self._tensor_results and not tensors:
            for k in self._tensor_results:
                v = res[k]
                if type(v) is not np.ndarray and hasattr(v, "numpy"):
                    res[k] = v.numpy()
        return res


def _numpy_group(group) -> bool:
    """Whether a fusion group runs as one fused step: only where every
    member would otherwise run on numpy's kernels. The fused step evaluates
    numpy's ufuncs chunk by chunk, which saves passes over memory between
    numpy kernels, but a provider's kernel (ATen's: vectorised, on torch's
    threads) beats it: llama's inference (4 x 128 tokens, d 256) measured
    1.27 of eager with its SiLU gates, RMS norms and rotary embeddings fused
    against 1.03 op by op, GPT-2's training 1.05 against 1.00 (benchmarks/RESULTS.md, 2026-11-25).
    Under TILEFX_KERNELS=numpy every chain of FUSIBLE ops is fused."""
    return all(_provided_kernel(op) is None for op in group.ops)


def _provided_kernel(op: Operation):
    """The first kernel a provider offers for `op`, or None."""
    for provide in RUNTIME.kernel_providers:
        kernel = provide(op)
        if kernel is not None:
            return kernel
    return None


def compile_function(fn: func.FuncOp, rng: np.random.Generator | None = None) -> CompiledFunction:
    return CompiledFunction(fn, rng)


__all__ = ["CompiledFunction", "compile_function", "KERNEL_TABLE",
           "Sequence"]
