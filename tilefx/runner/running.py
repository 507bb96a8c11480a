"""The host loop of an executor's call: each device iteration,
accumulation step and replica runs `@main` on its micro-batch, the update
runs once per weight update, and the weights come back to the host. A mixin
of the runner's executor (runner/runner.py), reading the
program's CompileConfig and the executor's HostSettings."""

from __future__ import annotations

import logging

import numpy as np

import torch

from tilefx.runner.host_arrays import (copied, copy_into, fresh_outputs, held_alone, input_np, same_memory, to_np,
                                      weight_tensor)
from tilefx.runner.module_snapshot import ModuleSnapshot
from tilefx.runner.outputs import plan_of

log = logging.getLogger("tilefx")


class CallPath:
    """The host loop of an executor's call."""

    def _upcast_inputs(self, inputs: list[torch.Tensor]) -> frozenset[int]:
        """The fp16 inputs cast to fp32 as they enter the graph: only with
        FloatDowncastToHalf, where ipu-autocast undoes these casts and casts the
        fp32 weights and inputs they meet down instead. By default
        (HalfUpcastToFloat) an fp16 input keeps its dtype and the tracer
        promotes it where an op meets it with fp32 (lowering/mixed_precision.py)."""
        if not self._config.downcast_half:
            return frozenset()
        half = frozenset(i for i, x in enumerate(inputs) if x.dtype == torch.float16)
        # "PopTorch ... will cast all inputs to float16" (PopTorch user guide, earlier releases, "Half /
        # float16 support"): an fp32 input meeting an fp16 one is cast down as an fp32 weight is
        floats = {p.dtype for p in self._user_model.parameters() if p.is_floating_point()}
        floats |= {x.dtype for x in inputs}
        if not half or torch.float32 not in floats:
            return frozenset()
        return half

    def _replica_input(self, r: int, r_in: int) -> int:
        _, R, gsize, _ = self._factors()
        if gsize == 1:
            return r
        if self._host.input_group_orthogonal:
            return r % r_in
        return r // gsize

    def _run(self, inputs: list[torch.Tensor]):
        """A call in general: iterations, accumulation, replicas (`__call__`
        sends one micro-batch on one replica to `_run_one`)."""
        p = self._program
        D, R, gsize, G = self._factors()
        r_in = R // gsize
        xs = [input_np(x).reshape((D, G, r_in) + shape) for x, shape in zip(inputs, p.input_shapes)]
        # broadcastBuffers (default): every replica starts from the host's buffers;
        # broadcastBuffers(False): each replica keeps its own from call to call
        own = getattr(self, "_replica_buffers", None)
        if self._dist is not None:  # the other processes are at the same step, with the same values
            self._dist.check_in_step(self._step, self._hypers, self.loss_scale, self._weights)
        if self._host.broadcast_buffers or own is None or len(own) != R:
            buffers = [dict(self._device_buffers) for _ in range(R)]
        else:
            buffers = [dict(b) for b in own]
        trained = p.trained
        streams = self.random_streams.generators
        mutated: dict[int, np.ndarray] = {}
        outputs: list[list[list[list[np.ndarray]]]] = []
        out_index = p.out_index
        fresh: set[int] = set()  # ids of output arrays only the caller will hold
        held = self.__dict__.get("_tilefx_anchors")  # weights anchored by name / UpdatedVar___
        taken = {kind: [] for kind in held.weight_kinds()} if held is not None else {}
        read = lambda name, r: self._groups.weight(self._weights, name, r)  # noqa: E731
        for d in range(D):
            if "value" in taken:
                taken["value"].append(held.take_weights("value", read, R))
            accs = [self._zeroed_accumulators(r, trained) for r in range(R)]
            als_counts = (self._als_upper, self._als_lower)
            per_g = []
            for g in range(G):
                per_r = []
                for r in range(R):
                    ri = self._replica_input(r, r_in)
                    args = []
                    for kind, key in p.main_args:
                        if kind == "param":
                            args.append(self._groups.weight(self._weights, key, r))
                        elif kind == "buffer":
                            args.append(buffers[r][key])
                        elif kind == "input":
                            args.append(xs[key][d, g, ri])
                        elif kind == "const":
                            args.append(self._consts[key])
                        elif kind == "hyper":
                            args.append(np.asarray(self.loss_scale, dtype=np.float32))
                        else:
                            args.append(accs[r][key])
                    p.main.rng = streams[r % len(streams)]
                    res = p.main(*args, donated=held_alone(args, p.main_donatable))
                    for (kind, key), v in zip(p.main_results, res):
                        if kind == "buffer":
                            buffers[r][key] = v
                        elif kind == "mutated_input":  # written back to the caller's tensor below
                            mutated.setdefault(key, to_np(inputs[key]).reshape(xs[key].shape))[d, g, ri] = v
                        elif kind == "accum":
                            accs[r][key] = v
                        elif kind == "als_upper":
                            self._als_upper += int(v)
                            self._als_lower += self._als_tracked - int(v)
                    per_r.append([res[i] for i in out_index])
                    fresh.update(fresh_outputs(args, res, p.main_results, p.main.constant_ids))
                    del args, res  # the weights are the executor's alone again (held_alone)
                per_g.append(per_r)
            outputs.append(per_g)
            if self._training and p.update is not None:
                if self._dist is None:
                    total = self._groups.reduce(accs, trained)  # within a group for grouped weights
                else:  # with the other processes' replicas, added in the same order
                    total = self._dist.ordered_sum(accs, f"the gradient sum of weight update {self._step + 1}")
                    if self._als_tracked:
                        up, low = self._dist.sum_counts(
                            [self._als_upper - als_counts[0], self._als_lower - als_counts[1]],
                            f"the loss scaling statistics of weight update {self._step + 1}")
                        self._als_upper, self._als_lower = als_counts[0] + up, als_counts[1] + low
                self._update(total)
            if "updated" in taken and self._training:
                taken["updated"].append(held.take_weights("updated", read, R))
        for kind, per_iteration in taken.items():
            if per_iteration:
                held.set_weights_per_iteration(kind, per_iteration, G, R, self._user_model)
        for key, value in mutated.items():  # in-place / out= writes to user inputs (as PopTorch)
            with torch.no_grad():
                inputs[key].copy_(torch.from_numpy(value.reshape(inputs[key].shape)))
        self._device_buffers = buffers[0]  # the host sees replica 0's buffers
        if self._dist is not None and self._host.broadcast_buffers and \
                any(kind == "buffer" for kind, _ in p.main_results):  # the global replica 0's
            self._device_buffers = self._dist.broadcast_arrays(self._device_buffers,
                                                               "the broadcast of process 0's buffers")
        self._replica_buffers = buffers
        return self._collect(outputs, p.out_ids, fresh)

    def _run_one(self, inputs: list[torch.Tensor]):
        """`_run` for one micro-batch on one replica, the common case: the
        same steps without the loops over iterations, accumulation and
        replicas. Each line of Python here runs once per call, after the
        program's kernels have left the caches cold: the general loops cost
        ~0.2 ms a call on the MLP (benchmarks/RESULTS.md, 2026-11-24)."""
        p = self._program
        plan = plan_of(p)
        trained = p.trained
        accs = self._zeroed_accumulators(0, trained) if trained else None
        weights = self._weights
        buffers = self._device_buffers
        # In an inference program, an argument only ATen's direct steps read
        # goes in as a tensor (CallPlan.lean_args): the input itself, a weight's
        # tensor kept from call to call while the array is the same. One
        # conversion instead of one per reading step. (Not in training: an
        # update may write a weight in place only while nothing else holds
        # it, held_alone.)
        held = self._weight_tensors
        args = []
        for kind, key, as_tensor in plan.lean_args:
            if kind == "param":
                w = weights[key]
                if as_tensor:
                    h = held.get(key)
                    if h is None or h[0] is not w:  # (each flags test was ~1.5 us cold)
                        h = held[key] = (w, weight_tensor(w))
                    w = h[1]
                args.append(w)
            elif kind == "input":
                t = inputs[key]
                args.append((t.detach() if t.requires_grad else t) if as_tensor and t.layout is torch.strided
                            else input_np(t))
            elif kind == "buffer":
                args.append(buffers[key])
            elif kind == "const":
                args.append(self._consts[key])
            elif kind == "hyper":
                args.append(np.asarray(self.loss_scale, dtype=np.float32))
            else:
                args.append(accs[key])
        main = p.main
        main.rng = self.random_streams.generators[0]
        w = None  # the last weight is args' alone (held_alone counts)
        # (nothing donated: the accumulators of one micro-batch are the read-only
        # zeros of _zeroed_accumulators, which held_alone never gives up)
        res = main(*args, tensors=p.outputs_only)
        if p.outputs_only and plan.one_plain_output:
            # an inference model returning one tensor, most often an ATen step's
            # own (main's tensors): fresh_outputs' test for it, without its lists
            v = res[0]
            if type(v) is torch.Tensor and v._base is None and v.is_contiguous():
                for a in args:
                    if a is v:
                        return copied(v)
                return v
        fresh = fresh_outputs(args, res, p.main_results, main.constant_ids)
        if p.outputs_only:
            outputs = res
        else:
            outputs = []
            buffers = dict(buffers)
            for (kind, key), v in zip(p.main_results, res):
                if kind == "output":
                    outputs.append(v)
                elif kind == "buffer":
                    buffers[key] = v
                else:  # accum (CallPlan.one_replica)
                    accs[key] = v
            self._device_buffers = buffers
            self._replica_buffers = [buffers]
        del args, res  # the weights are the executor's alone again (held_alone)
        if self._training and p.update is not None:
            self._update(accs if accs is not None else {})
        from_numpy = torch.from_numpy
        results = [(v if type(v) is torch.Tensor else from_numpy(v)) if id(v) in fresh else copied(v)
                   for v in outputs]
        if plan.one_plain_output:
            return results[0]
        return tuple(results) if plan.tuple_output else self._structured(results, p.out_ids)

    def _write_back(self, snap: ModuleSnapshot | None = None) -> None:
        """Write the executor's weights and buffers into the torch module.
        `snap`: the module's snapshot, when the caller has just checked it."""
        if snap is None:
            snap = self._snapshot()
        named_p, named_b = snap.named_p, snap.named_b
        # a training executor's weights are mostly the parameters' own memory
        # (copyWeightsToDevice): only what did not update in place is copied
        grouped = self._groups.names
        aliased = self._aliased
        for n, w in self._weights.items():
            t = named_p[n]
            if n in grouped:  # VariableRetrievalMode: one value per group or per replica
                w = self._groups.to_host(n, w)
                if tuple(t.shape) != w.shape:
                    t.data = torch.from_numpy(np.array(w))
                    continue
            a = aliased.get(n)
            if a is not None and a[0]() is w and a[1] is t and t.data_ptr() == a[2] and t.shape == a[3] \
                    and t.is_contiguous():
                continue  # updated in place, in the parameter's own memory
            if not same_memory(t, w):  # an update that did not run in place
                copy_into(t, w)
        for n, b in self._device_buffers.items():
            copy_into(named_b[n], np.asarray(b))
        self._host_version = HostVersion.mark(self._host_tensors(named_p, named_b))
        self._host_seen = (snap, HostVersion.counter)


class HostVersion:
    """Counts writes of executors into the torch parameters and buffers, so
    every other executor sharing a tensor reloads it before its next run
    (the implicit weight sync between a training and an inference model)."""

    counter = 0

    @classmethod
    def latest(cls, tensors) -> int:
        return max((getattr(t, "_tilefx_written", 0) for t in tensors), default=0)

    @classmethod
    def mark(cls, tensors) -> int:
        cls.counter += 1
        for t in tensors:
            t._tilefx_written = cls.counter
        return cls.counter
