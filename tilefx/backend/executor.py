"""Compile a `func.func` once into a flat list of numpy closures; run it many times.

Like torch.fx's Interpreter, each step reads like the op it runs: fetch the
operand slots, call the kernel from the one table, store the results. The
executor knows nothing of torch, and nothing of any particular kernel.
Compiling a function is three phases:

1. the analyses of the IR (tilefx/analysis/): the attention groups a kernel
   provider runs as one kernel, the chains of float32 elementwise ops that
   run as one fused step, the repeated pure ops computed once, the slot of
   each value (values holding one array share one);
2. the emitter (backend/emitter.py): one walk over the ops, each turned into
   its step, with the slots it reads;
3. the analyses of the steps: each intermediate dropped after the step that
   reads it last (analysis/liveness.py); an optimizer update or gradient
   accumulation (kernels.ipu.IN_PLACE_OPERANDS) writing into its argument
   arrays when the caller donates them for the call (`donated=`: arrays only
   it holds, such as the weights) and no other step reads them, an
   elementwise step writing over an operand dying at it
   (analysis/in_place.py); the values left as a provider's tensors between
   its steps (analysis/kept.py).

The step closures that are not an op's kernel call (an argument's view, a
clone, a loop, a type-checked step) are in backend/steps.py.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.ir import Operation

from tilefx.analysis.attention import AttentionGroups, attention_plan
from tilefx.analysis.fusion import FusionGroups, fusion_plan
from tilefx.analysis.in_place import DonationRule, donation_rule, overwritable
from tilefx.analysis.kept import NONE_KEPT, kept_values
from tilefx.analysis.liveness import liveness
from tilefx.analysis.values import value_slots
from tilefx.backend.emitter import (
    KERNEL_TABLE,
    Block,
    StepEmitter,
    StepFacts,
    attention_kernel,
    runs_on_numpy,
)
from tilefx.backend.kernels._common import ignore_fp_errors, restore_fp_errors, set_kernel_threads
from tilefx.backend.kernels.ipu import IN_PLACE_OPERANDS
from tilefx.backend.kernels.tuning import blas_cores, configure_process, restore_blas_threads
from tilefx.backend.steps import ExecutionError, named_step, step_name, viewed_chain
from tilefx.runtime import RUNTIME

# The plugins' hooks, read from the process's registry (tilefx/runtime.py;
# the backend knows nothing of torch, lowering/aten_kernels.py AtenKernels
# has ATen's kernels):
# - RUNTIME.kernel_providers may supply a kernel for an op instead of the
#   numpy table's, or return None: for an aten op a kernel(*operand groups)
#   with the properties bound, returning the result (or the list of
#   results); for an ipu op a kernel with the table kernel's signature;
# - RUNTIME.attention_providers may supply the kernel of an attention group
#   (analysis/attention.py): hook(group, result shape) -> make(ins, out,
#   keep) building the step from the slots of q, k, v, the mask and the
#   run-time scale (those the group has), or None, when the members run op by op;
# - RUNTIME.call_hooks run as each call starts; each returns a function that
#   undoes what it set for the call, or None (the ATen kernels' thread count).
_NONE_DONATED: frozenset[int] = frozenset()
_NO_ATTENTION = AttentionGroups({}, frozenset())
_NO_FUSION = FusionGroups({}, frozenset())


class CompiledFunction(StepEmitter):
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
        self._running = threading.Lock()  # one call at a time: the buffers are per executable
        self._donated: frozenset[int] = frozenset()  # argument positions given up for this call
        self.buffers: list[np.ndarray | None] = []  # the fused steps' outputs, reused when free
        self._buffer_shapes: list[tuple[int, ...]] = []
        # values of ops without operands (0-d constants, fills), made once
        # here and put in every call's slots: (slot, value); never written
        self.constants: list[tuple[int, Any]] = []
        self.result_slots: list[int] = []
        self.bf16_results: set[int] = set()

        # 1. the analyses of the IR
        self._attention = attention_plan(fn, attention_kernel) \
            if fuse and RUNTIME.attention_providers else _NO_ATTENTION
        self._fusion = fusion_plan(fn, self._attention.members, runs_on_numpy) if fuse else _NO_FUSION
        self._members = self._attention.members | self._fusion.members
        # (hand-written IR, checked step by step, computes every op it holds)
        slots = value_slots(fn, self._members, repeats=not check_types)
        self._repeats = slots.repeats
        self._slot = slots.of.__getitem__
        self.num_slots = slots.count
        self.arg_slots = [self._slot(a) for a in fn.body.block.args]
        self._arg_set = frozenset(self.arg_slots)

        # 2. the emitter: one walk over the ops
        self._facts = StepFacts()
        block = Block()
        self._emit_ops(fn.body.block.ops, block)
        self._emit_batches(block)
        self.steps: list[Callable[[list], None]] = block.steps
        self.reads: list[set[int]] = block.reads  # the slots each step reads (for liveness)

        # 3. the analyses of the steps
        self._finish()
        # the IR is not held past compiling: the steps close over slots and kernels only
        del self._facts, self._slot, self._attention, self._fusion, self._members, self._repeats, self._arg_set

    def _finish(self) -> None:
        """Liveness, the in-place choices and the values kept as a provider's
        tensors, from the steps' reads; the steps they change rebuilt."""
        facts = self._facts
        # held, so the ids stay theirs; with the arrays a constant views (a
        # caller must not get a view of them either: runner/host_arrays.py's fresh_outputs)
        self.constant_ids = frozenset(id(a) for _, v in self.constants for a in viewed_chain(v))
        keep = set(self.result_slots) | set(self.arg_slots)
        live = liveness(self.reads, keep)
        self.dead = live.dead
        donation = donation_rule(self.reads, live.last, self.arg_slots, self.result_slots)
        self._compile_in_place(facts.donatable, donation)
        written = overwritable([(i, layout, writable) for i, _, _, layout, _, writable in facts.elementwise],
                               facts.view_of, facts.fresh, live.last, keep)
        retype = facts.retype
        for i, op, maker, layout, out, _ in facts.elementwise:
            if i in written:
                name = step_name(op) + " (in place)"
                self.steps[i] = named_step(maker(layout, out, written[i]), name)
                retype[i] = (lambda keep, maker=maker, layout=layout, out=out, k=written[i], name=name:
                             named_step(maker(layout, out, k, keep[0]), name), [out])
        self._keep_tensors(retype, facts.passes)
        self._aten_only = not self.check_types and all(
            i in retype or i in facts.passes or i in facts.views for i in range(len(self.steps)))
        at = len(self.steps) - len(facts.batches)
        for i, (batched, members) in enumerate(facts.batches.values(), start=at):
            needed = [donation.needed(_written(op, layout), i) for op, layout, _ in members]
            self.steps[i] = self._batched_step(batched, members, needed)

    def _keep_tensors(self, retype: dict, passes: dict[int, tuple[int, int]]) -> None:
        """Let a provider's results stay its own tensors where only its direct
        steps read them (analysis/kept.py). `tensor_slots`: those slots; the
        function's results among them are turned into numpy arrays as it
        returns, unless the caller asks for tensors (`__call__(tensors=True)`).
        `tensor_args`: the argument positions a caller may pass a tensor in."""
        kept = NONE_KEPT if self.check_types else kept_values(
            self.reads, {i: outs for i, (_, outs) in retype.items()}, passes, self.arg_slots, self.result_slots)
        self.tensor_slots: frozenset[int] = kept.slots
        self.tensor_args: frozenset[int] = kept.args
        self._tensor_results: tuple[int, ...] = kept.results
        for i, (rebuild, outs) in retype.items():
            keep = [o in kept.slots for o in outs]
            if any(keep):
                self.steps[i] = named_step(rebuild(keep), self.steps[i].__qualname__)

    def _compile_in_place(self, candidates, donation: DonationRule) -> None:
        """Give each in-place capable step a second form that overwrites its
        operands, used when the caller donated every one of them."""
        for i, op, kernel, layout, outs in candidates:
            needed = donation.needed(_written(op, layout), i)
            if needed is None:
                continue
            fresh, own = self.steps[i], self._step(op, partial(kernel, inplace=True), layout, outs)

            def step(env, fresh=fresh, own=own, needed=needed):
                (own if needed <= self._donated else fresh)(env)

            step.__qualname__ = fresh.__qualname__ + " (in place when donated)"
            self.steps[i] = step

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


def _written(op: Operation, layout: list) -> list:
    """The slots an in-place capable op (IN_PLACE_OPERANDS) would write."""
    return [layout[k] for k in IN_PLACE_OPERANDS.get(op.name, ())
            if k < len(layout) and layout[k] is not None]


def compile_function(fn: func.FuncOp, rng: np.random.Generator | None = None) -> CompiledFunction:
    return CompiledFunction(fn, rng)


__all__ = ["CompiledFunction", "compile_function", "KERNEL_TABLE", "Sequence"]
