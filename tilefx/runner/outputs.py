"""A call's outputs as the user gets them: the output mode applied over
device iterations, gradient accumulation and replicas (PopTorch user guide, "Efficient data batching"),
the model's own structure rebuilt (dicts, nesting, Python values,
bfloat16), anchored gradients set aside (the surface's anchors object, as
PopTorch's api/anchors.py), and results handed back without a copy where
nothing else holds their memory. A mixin of the executor; `output_items`,
the one place an output mode picks a call's arrays."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
import numpy as np
import torch
from tilefx.driver import Program
from tilefx.errors import Error
from tilefx.runner.host_arrays import join


@dataclass(frozen=True)
class CallPlan:
    """What the executor's call reads of a compiled Program, worked out once
    per program (`plan_of`): whether the one-micro-batch call
    (the runner's `_run_one`, runner/running.py) covers it, and how its outputs come back."""

    # main's arguments and results are what `_run_one` fills and reads (not
    # loss scaling statistics, nor writes into the caller's inputs)
    one_replica: bool
    # the model returns one tensor, as the IR holds it (not bfloat16):
    # `_structured` hands it back as it is
    one_plain_output: bool
    # the model returns a plain tuple of tensors (an output and its loss),
    # each an output result in order: `_structured` would rebuild it as is
    tuple_output: bool
    # main's arguments as `_run_one` fills them: (kind, key, whether it passes
    # a tensor: main's `tensor_args`, read only by ATen's direct steps). Only
    # for an inference program, whose results come back as they are
    # (`tensors=True`): an argument returned as a result is then the very
    # object passed, which `fresh_outputs` copies; converted to a new array it
    # would pass for fresh and alias the input or the weight.
    lean_args: tuple[tuple[str, Any, bool], ...]

    @staticmethod
    def of(p: Program) -> CallPlan:
        spec, n, bf16 = p.traced.out_spec, p.traced.num_outputs, p.main.bf16_results
        return CallPlan(
            one_replica=all(k in ("param", "buffer", "input", "const", "hyper", "accum") for k, _ in p.main_args)
            and all(k in ("output", "buffer", "accum") for k, _ in p.main_results),
            one_plain_output=len(p.out_index) == 1 and n == 1 and not p.traced.out_consts and not bf16
            and (spec is None or spec.num_leaves == 1 and spec.is_leaf()),
            tuple_output=spec is not None and spec.type is tuple and spec.num_leaves == n
            and all(spec.child(i).is_leaf() for i in range(spec.num_children))
            and not p.traced.out_consts and not bf16 and p.out_ids == list(range(n)),
            lean_args=tuple((kind, key, p.outputs_only and i in p.main.tensor_args)
                            for i, (kind, key) in enumerate(p.main_args)))


def plan_of(p: Program) -> CallPlan:
    """`p`'s CallPlan (worked out at its first call, then kept on it)."""
    plan = p.call_plan
    if plan is None:
        plan = p.call_plan = CallPlan.of(p)
    return plan


def output_items(outputs, k: int, mode: str, period: int, D: int, G: int, R: int) -> tuple[list, list[int]]:
    """The arrays of result `k` of outputs[d][g][r] an output mode
    (runner/settings.py OUTPUT_MODES) returns, in order, and the leading
    dimensions they stand for: every micro-batch's ("all"), every
    `period`-th device iteration's ("every_n"), each replica's last
    ("final") or sum ("sum")."""
    if mode == "all":
        return [outputs[d][g][r][k] for d in range(D) for g in range(G) for r in range(R)], [D, G, R]
    if mode == "every_n":
        return [outputs[d][g][r][k] for d in range(period - 1, D, period)
                for g in range(G) for r in range(R)], [D // period, G, R]
    if mode == "final":
        return [outputs[D - 1][G - 1][r][k] for r in range(R)], [R]
    if mode == "sum":
        return [np.sum([outputs[d][g][r][k] for d in range(D) for g in range(G)], axis=0)
                .astype(np.asarray(outputs[0][0][r][k]).dtype) for r in range(R)], [R]
    raise Error(f"unsupported output mode {mode}")


def stacked(items: list, dims: list[int]) -> np.ndarray:
    """`output_items`' arrays in PopART's anchor layout: stacked under the
    leading `dims` that are not 1."""
    lead = [d for d in dims if d != 1]
    arr = np.stack([np.asarray(v) for v in items]) if len(items) > 1 else np.asarray(items[0])
    return np.array(arr.reshape(lead + list(np.shape(items[0]))), order="C")


class Outputs:
    def _collect(self, outputs, out_ids: list[int], fresh: set[int] = frozenset()):
        """Apply the output mode to outputs[d][g][r][k] (PopTorch user guide, "Efficient data batching").
        A single array whose id is in `fresh` becomes the output tensor as it
        is (see fresh_outputs); any other is copied."""
        D, R, _, G = self._factors()
        mode = self._host.output_mode
        results = []
        n_model = self._num_model_outputs()
        held = self.__dict__.get("_tilefx_anchors")
        for k in range(len(out_ids)):
            if out_ids[k] >= n_model:  # an anchored gradient, in its own mode and PopART's layout
                if held is None or len(held.gradients) != self._program.traced.anchor_outputs:
                    results.append(None)  # (an executable loaded without its anchors)
                    continue
                for short, a_mode, period in held.gradient_modes(out_ids[k] - n_model):
                    items, dims = output_items(outputs, k, a_mode, period, D, G, R)
                    held.memory[short] = torch.from_numpy(stacked(items, dims))
                results.append(None)  # set aside above, per anchor (_structured skips it)
                continue
            items, _ = output_items(outputs, k, mode, self._host.output_return_period, D, G, R)
            if len(items) == 1 and id(items[0]) in fresh:
                results.append(torch.from_numpy(items[0]))
            else:
                results.append(torch.from_numpy(np.array(join(items), order="C")))
        return self._structured(results, out_ids)

    def _structured(self, results: list[torch.Tensor], out_ids: list[int]):
        """The output tensors (one per output result, in order) as the model
        returned them: bfloat16 where the IR says so, with the model's
        non-tensor outputs, in its pytree structure."""
        if plan_of(self._program).one_plain_output:
            return results[0]
        out_index = self._program.out_index
        bf16 = self._program.main.bf16_results
        if bf16:
            results = [t.to(torch.bfloat16) if i in bf16 else t for i, t in zip(out_index, results)]
        n_model = self._num_model_outputs()
        if n_model < self._program.traced.num_outputs:  # the anchored gradients go aside
            held = self.__dict__.get("_tilefx_anchors")
            if held is not None and len(held.gradients) == self._program.traced.anchor_outputs:
                grads = [r for i, r in zip(out_ids, results) if i >= n_model]
                if all(g is not None for g in grads):  # one micro-batch (_run_one): every mode's layout
                    held.set_gradients([torch.as_tensor(g) for g in grads])
            results, out_ids = zip(*[(r, i) for i, r in zip(out_ids, results) if i < n_model]) or ((), ())
        leaves: list[Any] = [None] * n_model
        for i, r in zip(out_ids, results):
            leaves[i] = r
        for i, v in self._program.traced.out_consts.items():
            leaves[i] = v  # None and Python values the model returned
        results = leaves
        spec = self._program.traced.out_spec  # the model's own structure: dicts, nesting
        if spec is not None and spec.num_leaves == len(results):
            return torch.utils._pytree.tree_unflatten(results, spec)
        return results[0] if len(results) == 1 else tuple(results)

    def _num_model_outputs(self) -> int:
        """The model's own outputs (main returns anchored gradients after them)."""
        traced = self._program.traced
        return traced.num_outputs - traced.anchor_outputs

    def _anchor_weights(self, kind: str) -> None:
        """The weights anchored by name ("value": as the step starts) or as
        UpdatedVar___ ("updated": after its update), for getAnchoredTensor."""
        groups = self._groups
        self._tilefx_anchors.set_weights(kind, self._weights,
                                         lambda n, w: groups.to_host(n, w) if n in groups.names else w,
                                         self._user_model)
