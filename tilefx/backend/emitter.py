"""The emitter: a function's ops, walked once in program order, each turned into a step.

What each op becomes was decided before the walk, by the analyses of
tilefx/analysis/ (`CompiledFunction.__init__` runs them): the attention and
fusion groups run as one step at their root, a repeated pure op reads its
first's slots, values holding one array share a slot. The walk reads like
the IR it runs:

    func.return          the result slots
    ipu.stage            its body's steps, inline
    ipu.for              a loop step over its body's steps
    ipu.yield, moves, same-value ops, same-shape views, members of a group
                         nothing: their slots are another value's
    a group's root       the group's step (fused ufuncs, attention kernel)
    a view               one numpy call on its operand's slot
    aten.clone           its operand, or a copy where not row-major
    a provided op        a kernel provider's step (ATen's)
    an optimizer update  one batched provider call for all, at the end
    anything else        the numpy kernel table's step

Each step is recorded with the slots it reads and the facts the analyses
after the walk take (liveness, the in-place choices, the values kept as a
provider's tensors: `CompiledFunction._finish`). The step builders here
close over the `CompiledFunction` (its random generator, the arrays donated
for the call, the fused steps' buffers).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import bf16, f16, f32
from xdsl.ir import Operation, SSAValue

from tilefx.analysis.values import MOVE_OPS, RANDOM_OPS, SAME_VALUE_OPS, VIEW_OPS
from tilefx.backend.fused_steps import FUSED_EVAL, chunked_group, fused_props
from tilefx.backend.kernels import FIRST_RESULT_KERNELS, IPU_KERNELS, KERNELS
from tilefx.backend.kernels._common import CHUNK, chunk_size
from tilefx.backend.kernels.ipu import IN_PLACE_OPERANDS
from tilefx.backend.kernels.linalg import SPLIT_GEMM_OPS
from tilefx.backend.kernels.tuning import blas_threads_for
from tilefx.backend.precision_steps import HALF_PARTIAL_OPS, bf16_rounded, round_to_bf16, stochastically_rounded
from tilefx.backend.steps import (
    ExecutionError,
    argument_view_step,
    checked_step,
    clone_step,
    fetcher,
    loop_step,
    named_step,
    operands_lead,
    step_name,
    step_props,
    with_blas_threads,
)
from tilefx.dialects.aten import ATEN_OPS, from_attr, op_name
from tilefx.dialects.aten_schema import py_name
from tilefx.dialects.irutil import numel as _numel
from tilefx.dialects.irutil import shape_of as _dims
from tilefx.runtime import RUNTIME

KERNEL_TABLE: dict[str, Callable[..., Any]] = {
    **{op_name(schema_name): KERNELS[schema_name] for schema_name in ATEN_OPS},
    **IPU_KERNELS,
}
# ops whose later results nothing may read: a kernel computing the first alone
FIRST_RESULT_TABLE = {op_name(s): FIRST_RESULT_KERNELS[s] for s in ATEN_OPS if s in FIRST_RESULT_KERNELS}
# a constant op (no operands, not random) made once per executable, up to this size
CONSTANT_BYTES = 1 << 20


def provided_kernel(op: Operation):
    """The first kernel a provider (RUNTIME.kernel_providers) offers for `op`, or None."""
    for provide in RUNTIME.kernel_providers:
        kernel = provide(op)
        if kernel is not None:
            return kernel
    return None


def runs_on_numpy(group) -> bool:
    """Whether a fusion group runs as one fused step: only where every
    member would otherwise run on numpy's kernels. The fused step evaluates
    numpy's ufuncs chunk by chunk, which saves passes over memory between
    numpy kernels, but a provider's kernel (ATen's: vectorised, on torch's
    threads) beats it: llama's inference (4 x 128 tokens, d 256) measured
    1.27 of eager with its SiLU gates, RMS norms and rotary embeddings fused
    against 1.03 op by op, GPT-2's training 1.05 against 1.00 (benchmarks/RESULTS.md, 2026-11-25).
    Under TILEFX_KERNELS=numpy every chain of FUSIBLE ops is fused."""
    return all(provided_kernel(op) is None for op in group.ops)


def attention_kernel(group) -> Callable | None:
    """The first attention kernel a provider (RUNTIME.attention_providers)
    offers for the group: make(ins, out, keep) building its step."""
    shape = tuple(group.root.results[0].type.get_shape())
    for provider in RUNTIME.attention_providers:
        make = provider(group, shape)
        if make is not None:
            return make
    return None


def only_returned(op: Operation) -> bool:
    """Whether the op's results are only returned by the function it is in
    (so its step may run later, with others of its kind)."""
    return all(use.operation.name == "func.return" for r in op.results for use in r.uses)


def constant_op(op: Operation) -> bool:
    """An ATen op without operands that is not random: its value is the same every call."""
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


def operand_layout(op: Operation, slot) -> list:
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


def _read(layout: list) -> set[int]:
    return {j for x in layout if x is not None for j in (x if isinstance(x, list) else [x])}


@dataclass
class Block:
    """The steps of one block and the slots each reads. `top`: the
    function's own steps (a loop's body is compiled into a block of its own,
    whose steps the loop step runs)."""

    steps: list = field(default_factory=list)
    reads: list[set[int]] = field(default_factory=list)
    top: bool = True

    def add(self, step, reads: set[int]) -> int:
        self.steps.append(step)
        self.reads.append(reads)
        return len(self.steps) - 1


@dataclass
class StepFacts:
    """What the analyses after the walk read about the function's own steps
    (by step index; `CompiledFunction._finish`)."""

    # in-place capable table steps (IN_PLACE_OPERANDS): (step, op, kernel, layout, result slots)
    donatable: list[tuple[int, Operation, Any, list, list[int]]] = field(default_factory=list)
    # provider steps with an in-place form: (step, op, maker, layout, result slot, writable operands)
    elementwise: list[tuple[int, Operation, Any, list[int], int, list[bool]]] = field(default_factory=list)
    view_of: dict[int, int] = field(default_factory=dict)  # a view's slot -> its operand's (memory they may share)
    fresh: set[int] = field(default_factory=set)  # slots of arrays their own step made (provider results)
    # the steps that may leave a provider's tensors in their result slots:
    # step -> (rebuild(keep) -> its step, result slots)
    retype: dict[int, tuple[Callable[[list[bool]], Callable], list[int]]] = field(default_factory=dict)
    passes: dict[int, tuple[int, int]] = field(default_factory=dict)  # steps passing a tensor on: (src, out)
    views: set[int] = field(default_factory=set)  # the view steps (numpy's)
    # optimizer updates run as one provider call per kind: name -> (batched kernel, members)
    batches: dict[str, tuple[Callable, list]] = field(default_factory=dict)


class StepEmitter:
    """Turn each op of a function into its step (the module's docstring).
    Mixed into `CompiledFunction`, which runs the analyses first and sets
    `_slot`, `_attention`, `_fusion`, `_members`, `_repeats` and `_facts`."""

    def _emit_ops(self, ops, block: Block) -> None:
        for op in ops:
            self._emit(op, block)

    def _emit(self, op: Operation, block: Block) -> None:
        name = op.name
        if op in self._repeats.first:  # reads its first's slots (analysis/values.py)
            return
        if isinstance(op, func.ReturnOp):
            self._emit_return(op)
        elif name == "ipu.stage":  # an outlined stage: its body inline
            self._emit_ops(op.regions[0].block.ops, block)
        elif name == "ipu.for":  # poptorch.for_loop: its body's steps, count times
            self._emit_loop(op, block)
        elif name in ("ipu.yield", "tile.sync") or name in MOVE_OPS or name in SAME_VALUE_OPS:
            return  # a yield is read by its loop, or its stage's results are its operands' slots
        elif op in self._fusion.at:
            self._emit_fused(op, block)
        elif op in self._attention.at:
            self._emit_attention(op, block)
        elif op in self._members:  # computed by its group's step, at the root
            return
        elif name in VIEW_OPS and self._slot(op.results[0]) == self._slot(op.operands[0]):
            return  # a view to the operand's own shape: its slot (analysis/values.py)
        elif name in VIEW_OPS and (view := self._view_step(op)) is not None:
            self._emit_view(op, view, block)
        elif name == "aten.clone":
            self._emit_clone(op, block)
        elif (provided := provided_kernel(op)) is not None and name.startswith("aten."):
            self._emit_provided(op, provided, block)
        elif block.top and getattr(provided, "batched", None) is not None and \
                not self.check_types and only_returned(op):
            # optimizer updates: one call of the provider's batched kernel for all
            # (_batched_step), at the end, where every member's operands exist
            self._facts.batches.setdefault(name, (provided.batched, []))[1].append(
                (op, operand_layout(op, self._slot), [self._slot(r) for r in op.results]))
        else:
            self._emit_table(op, provided, block)

    def _emit_batches(self, block: Block) -> None:
        """The optimizer updates' batched steps, one per kind, last: each
        reads every member's operands. Their steps are built after the
        in-place analysis, which decides what each member may write
        (`CompiledFunction._finish`); here they hold their place."""
        for _, members in self._facts.batches.values():
            block.add(None, set().union(*(_read(layout) for _, layout, _ in members)))

    def _emit_return(self, op: Operation) -> None:
        self.result_slots = [self._slot(v) for v in op.operands]
        # results held as float32 that the caller should see as bfloat16
        self.bf16_results = {i for i, v in enumerate(op.operands)
                             if getattr(v.type, "element_type", None) == bf16}

    def _emit_loop(self, op: Operation, block: Block) -> None:
        slot = self._slot
        body = Block(top=False)
        self._emit_ops(op.body.block.ops, body)
        yielded = op.body.block.last_op.operands
        # the loop step reads everything its body reads: nothing it uses is freed early
        block.add(loop_step(op.count.value.data, [slot(a) for a in op.body.block.args],
                            [slot(v) for v in op.operands], [slot(v) for v in yielded],
                            [slot(r) for r in op.results], body.steps),
                  set().union({slot(v) for v in op.operands}, *body.reads, {slot(v) for v in yielded}))

    def _emit_fused(self, op: Operation, block: Block) -> None:
        block.add(*self._fused_step(self._fusion.at[op]))

    def _emit_attention(self, op: Operation, block: Block) -> None:
        g, make = self._attention.at[op]
        ins = [self._slot(v) for v in (g.query, g.key, g.value, g.mask, g.scale_value) if v is not None]
        out = self._slot(op.results[0])
        name = step_name(op, "attention")
        step = named_step(make(ins, out, False), name)
        i = block.add(checked_step(step, op, [out]) if self.check_types else step, set(ins))
        if block.top and not self.check_types:
            self._facts.retype[i] = (lambda keep: named_step(make(ins, out, keep[0]), name), [out])
            self._facts.fresh.add(out)  # the kernel's new tensor

    def _emit_view(self, op: Operation, view, block: Block) -> None:
        src, out = self._slot(op.operands[0]), self._slot(op.results[0])
        argument = block.top and src in self._arg_set and not self.check_types
        if argument:
            # a view of an argument (a weight's transpose): the same as
            # the last call's while the argument is the same object
            view = argument_view_step(op, view, src, out)
        i = block.add(view, {src})
        self._facts.view_of[out] = src
        if argument:
            self._facts.passes[i] = (src, out)  # a tensor's view is a tensor
        if block.top:
            self._facts.views.add(i)

    def _emit_clone(self, op: Operation, block: Block) -> None:
        src, out = self._slot(op.operands[0]), self._slot(op.results[0])
        clone = clone_step(op, provided_kernel(op) or KERNEL_TABLE[op.name], src, out)
        i = block.add(checked_step(clone, op, [out]) if self.check_types else clone, {src})
        self._facts.view_of[out] = src  # row-major: the operand
        if block.top:
            self._facts.passes[i] = (src, out)

    def _emit_provided(self, op: Operation, provided, block: Block) -> None:
        layout = operand_layout(op, self._slot)
        outs = [self._slot(r) for r in op.results]
        step, rebuild = self._provided_step(op, provided, layout, outs)
        if block.top and constant_op(op) and self._precompute(step, op):
            return  # an arange, a fill: made once here, as the numpy kernels' are
        i = block.add(step, _read(layout))
        if not block.top:
            return
        facts = self._facts
        if rebuild is not None:
            facts.retype[i] = (rebuild, outs)
        facts.fresh.update(outs)  # ATen's functional ops return new tensors
        maker = getattr(provided, "in_place", None)
        if maker is not None and not self.check_types and len(outs) == 1 and \
                all(type(x) is int for x in layout):
            writable = [k in maker.operands and v.type == op.results[0].type
                        for k, v in enumerate(op.operands)]
            facts.elementwise.append((i, op, maker, layout, outs[0], writable))

    def _emit_table(self, op: Operation, provided, block: Block) -> None:
        kernel = provided or KERNEL_TABLE.get(op.name)  # an ipu op's provided kernel:
        if kernel is None:                               # the table's signature
            raise ExecutionError(f"no kernel for {op.name}")
        if op.name in FIRST_RESULT_TABLE and not any(r.uses for r in op.results[1:]):
            kernel = FIRST_RESULT_TABLE[op.name]  # e.g. max pooling's unread indices
        layout = operand_layout(op, self._slot)
        outs = [self._slot(r) for r in op.results]
        step = self._step(op, kernel, layout, outs)
        flops = gemm_flops(op)
        if flops is not None:
            # the kernel threads split these (kernels.linalg): BLAS on one thread
            split = op.name in SPLIT_GEMM_OPS and self.kernel_threads > 1
            step = with_blas_threads(step, 1 if split else blas_threads_for(flops))
        if block.top and constant_op(op) and self._precompute(step, op):
            return
        i = block.add(step, _read(layout))
        if op.name in IN_PLACE_OPERANDS and block.top:
            self._facts.donatable.append((i, op, kernel, layout, outs))

    # -- the step builders -------------------------------------------------

    def _step(self, op: Operation, kernel, layout: list, outs: list[int]):
        """A step calling a kernel of the numpy table (or an ipu op's
        provided kernel) with the op's properties as keywords."""
        props = step_props(op)
        schema = getattr(op, "schema", None)
        if schema is not None:
            # an optional property the IR left out is None (`int? divisor_override`);
            # Python keywords among the names (`from`) get a `_`, as in the kernels
            props = {py_name(k): v for k, v in props.items()}
            for a in schema.properties:
                if a.optional and not a.has_default and py_name(a.name) not in props:
                    props[py_name(a.name)] = None
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

        step.__qualname__ = step_name(op)
        if any(getattr(r.type, "element_type", None) == bf16 for r in op.results):
            step = bf16_rounded(step, op, outs)
        if self.check_types:
            return checked_step(step, op, outs)
        return step

    def _view_step(self, op: Operation):
        """A view op as one numpy call on its operand's slot, its result shape
        taken from the IR (views are most of a transformer's ops; this skips
        the kernel table's argument handling)."""
        shape = getattr(op.results[0].type, "get_shape", None)
        if shape is None or len(op.operands) != 1:
            return None
        shape, src, out = tuple(shape()), self._slot(op.operands[0]), self._slot(op.results[0])
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

        step.__qualname__ = step_name(op)
        return checked_step(step, op, [out]) if self.check_types else step

    def _precompute(self, step, op: Operation) -> bool:
        """Run a constant op's step now and keep its value for every call (a
        step less per call: the traced graphs make 0-d constants and fills
        for every scalar of a loss or a scaling). False, and the op stays a
        step, when its kernel fails here (it then fails at run time, with
        the error naming the op) or it yields something other than a small
        enough array."""
        out = self._slot(op.results[0])
        scratch: dict[int, Any] = {}
        try:
            with np.errstate(all="ignore"):
                step(scratch)
        except Exception:  # noqa: BLE001 - reported when the program runs
            return False
        value = scratch.get(out)
        if not isinstance(value, np.ndarray) or value.nbytes > CONSTANT_BYTES:
            return False
        self.constants.append((out, value))
        return True

    def _provided_step(self, op: Operation, kernel, layout: list, outs: list[int]):
        """A step calling a provider's kernel (RUNTIME.kernel_providers), which has
        the op's properties bound already: operands in, results out; and the
        rebuild of it that leaves tensors in the result slots (or None)."""
        fetch = fetcher(layout)
        name = step_name(op)
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

    def _fused_step(self, group):
        """One step for a fusion group, and the slots it reads: its ops as
        numpy ufuncs writing into buffers of this executable. An intermediate
        is overwritten by the op that reads it (its only reader); the group's
        output buffer is reused from call to call unless someone still holds
        it (a caller, a view). A group larger than a cache chunk runs chunk
        by chunk (the same operations on every element, its intermediates in
        cache), the chunks spread over the kernel threads (kernels._common)."""
        slot = self._slot
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

    def _batched_step(self, batched, members, needed: list):
        """One step for several ops of one kind (a weight's optimizer update
        each): the provider's batched kernel takes every member's operands,
        properties and whether it may write them (each member as a single
        step would: `needed`, the argument positions it must have been given,
        or None), and returns each member's results. torch's fused updates
        take lists of tensors: one call for the weights that share their
        hyper-parameters instead of one per weight (the per-call Python was
        ~30 us a weight after the kernels had left the caches cold)."""
        plan = [(fetcher(layout), step_props(op), need, outs)
                for (op, layout, outs), need in zip(members, needed)]
        # bf16 results (held as float32, which the fused kernels take) are
        # rounded as every other step's are (`_step`)
        bf16_outs = [o for op, _, outs in members for o, r in zip(outs, op.results)
                     if getattr(r.type, "element_type", None) == bf16]

        def step(env):
            donated = self._donated
            res = batched([(fetch(env), props, need is not None and need <= donated)
                           for fetch, props, need, _ in plan])
            for (_, _, _, outs), r in zip(plan, res):
                for o, v in zip(outs, r):
                    env[o] = v
            for o in bf16_outs:
                env[o] = round_to_bf16(env[o])

        step.__qualname__ = f"{members[0][0].name} x{len(members)}"
        return step
