"""What PopTorch's executor tells about its program beyond the runner's
(the IR, the profile, the schedule: runner/runner.py): PopTorch's cycle and
latency counters, attachment to the (simulated) device, anchored tensors and
updatable buffers. A mixin of `PoplarExecutor` (api/executor.py), which
holds the state these methods read."""

from __future__ import annotations

import logging

import torch

from tilefx.errors import Error, error_also
from tilefx.lowering.tensor_ids import GRADIENT_PREFIX, UPDATED_PREFIX
from tilefx.runner.host_arrays import to_np
from tilefx.runner.runner import NOT_COMPILED

log = logging.getLogger("tilefx")


class MachineReadouts:
    def getAnchoredTensor(self, short_name: str) -> torch.Tensor:
        """The value an anchored tensor (Options.anchorTensor) had in the last call."""
        held = self.__dict__.get("_tilefx_anchors")
        if held is None:
            if short_name in self._options.anchored_tensors:
                raise Error(f"getAnchoredTensor({short_name!r}): the model has not run yet")
            raise Error(f"getAnchoredTensor: no tensor is anchored as {short_name!r} "
                        "(Options.anchorTensor(short_name, long_name), before the model compiles)")
        return held.get(short_name)

    def getTensorNames(self) -> list[str]:
        """The names of the program's tensors a user can anchor
        (Options.anchorTensor): the parameters, and in training the gradients
        (Gradient___<name>) and updated values (UpdatedVar___<name>) of the
        trained ones. PopTorch asserts the model is compiled."""
        if self._program is None:
            raise error_also(AssertionError)("Model must be compiled before calling getTensorNames",
                                             type="api")
        names = [n for n, _ in self._user_model.named_parameters()]
        if self._training:
            trained = set(self._program.trained)
            names += [f"{prefix}{n}" for prefix in (GRADIENT_PREFIX, UPDATED_PREFIX)
                      for n in names if n in trained]
        return names

    def cycleCount(self) -> int:
        """Cycles of the last run on the simulated IPUs (needs Options.logCycleCount(True))."""
        if not self._options.log_cycle_count:
            raise Error("cycle count logging is disabled: use Options.logCycleCount(True)")
        if not self._has_run:
            raise Error("cycleCount: the model has not run yet")
        return self._profile.total_cycles

    # -- attaching and the performance counters (PopTorch's PoplarExecutor) --

    def isAttachedToDevice(self) -> bool:
        """True once compiled and attached (a call attaches; detachFromDevice detaches)."""
        return self._program is not None and not self._destroyed and self._attached

    def _check_compiled(self) -> None:
        """PopTorch's error for a method that needs the executable
        (detach/attach, copying weights) called before the first compile
        (generate()'s programs count: they are the executor's)."""
        self._check_alive()
        if self._program is None and not self.__dict__.get("_generate_steps"):
            raise Error(NOT_COMPILED)

    def detachFromDevice(self) -> None:
        """Release the (simulated) IPUs, reading the trained weights back to the
        host first, as PopTorch does; the next call attaches again (PopTorch:
        ``if not self._is_attached: self.attachToDevice()``)."""
        self._check_compiled()
        if not self._attached:
            raise Error("Device is not attached")
        if self._training:
            log.debug("Writing weights from IPU to host.")
            self._write_back()
            from tilefx.lowering.optimizers import Optimizer, read_device_state

            if isinstance(self._optimizer, Optimizer) and self._optimizer._executor() is self:
                read_device_state(self._optimizer)  # PopTorch keeps its optimizers' state on the host
        self._attached = False
        log.debug("Detached from device")  # PopTorch's words

    def attachToDevice(self) -> None:
        """Attach to the (simulated) IPUs again after detachFromDevice."""
        self._check_compiled()
        if self._attached:
            raise Error("Device is already attached")
        self._attached = True

    def getPerfCounters(self) -> dict[str, list[list[float]]]:
        """PopTorch's performance counters of the last call, from the machine
        model's timeline: for each input (``input``, ``input_complete``) and each
        output (``output``, ``output_complete``), one time in seconds per
        micro-batch streamed (the reference point is the start of the call).
        Before any run: ``[[]]`` for each key, as PopTorch returns."""
        keys = ("input", "input_complete", "output", "output_complete")
        if self._program is None or not self._has_run:
            return {k: [[]] for k in keys}
        prof = self._profile
        repeats = prof.updates_per_call if self._training else 1

        def times(direction: str, edge: str) -> list[float]:
            steps = sorted((t for t in prof.timeline if t.kind == "host" and t.direction == direction),
                           key=lambda t: t.start)
            return [prof.machine.seconds(r * prof.cycles_per_update + getattr(t, edge))
                    for r in range(repeats) for t in steps]

        counts = {"in": len(self._compiled_inputs), "out": self._program.traced.num_outputs}
        out = {}
        for key, direction, edge in (("input", "in", "start"), ("input_complete", "in", "end"),
                                     ("output", "out", "start"), ("output_complete", "out", "end")):
            values = times(direction, edge)
            out[key] = [list(values) for _ in range(counts[direction])] if values and counts[direction] else [[]]
        return out

    def _latency(self, from_event: str, from_reduce, to_event: str, to_reduce) -> tuple[float, float, float]:
        """(min, max, average) seconds between two counters over the iterations
        of the last call, PopTorch's rule: each output tick closes the group of
        input ticks before it."""
        counters = self.getPerfCounters()
        starts = [from_reduce(col) for col in zip(*counters[from_event])] if counters[from_event][0] else []
        ends = [to_reduce(col) for col in zip(*counters[to_event])] if counters[to_event][0] else []
        if not ends or not starts:
            return (0.0, 0.0, 0.0)
        factor = max(1, len(starts) // len(ends))
        groups = [min(starts[i:i + factor]) for i in range(0, factor * len(ends), factor)]
        durations = [e - b for b, e in zip(groups, ends)]
        return (min(durations), max(durations), sum(durations) / len(durations))

    def getHostIpuLatency(self) -> tuple[float, float, float]:
        """First input requested to last input transferred: (min, max, avg) seconds."""
        return self._latency("input", min, "input_complete", max)

    def getComputeLatency(self) -> tuple[float, float, float]:
        """Last input transferred to last output requested: (min, max, avg) seconds."""
        return self._latency("input_complete", max, "output", max)

    def getIpuHostLatency(self) -> tuple[float, float, float]:
        """First output available to last output on the host: (min, max, avg) seconds."""
        return self._latency("output", min, "output_complete", max)

    def getLatency(self) -> tuple[float, float, float]:
        """Round trip, first input requested to last output on the host: (min, max, avg) seconds."""
        return self._latency("input", min, "output_complete", max)

    def copyNamedBuffersToDevice(self) -> None:
        """Copy the buffers named by Options.updatableNamedBuffers from the
        host model to the device (PopTorch: the others keep the device's
        values)."""
        names = self._options.updatable_named_buffers
        if not names:
            raise Error("copyNamedBuffersToDevice: no buffer is updatable: name the buffers to copy "
                        "with Options.updatableNamedBuffers([...]) before wrapping the model")
        self._check_compiled()
        if self._program is None or self._options.offline_ipu_target:
            return
        named_b = dict(self._user_model.named_buffers(remove_duplicate=False))
        for n in names:
            self._device_buffers[n] = to_np(named_b[n])

    def _check_updatable_buffers(self) -> None:
        """Options.updatableNamedBuffers must name buffers of the model."""
        known = {n for n, _ in self._user_model.named_buffers(remove_duplicate=False)}
        unknown = [n for n in self._options.updatable_named_buffers if n not in known]
        if unknown:
            raise Error(f"updatableNamedBuffers: {unknown[0]!r} is not a buffer of the model "
                        f"(its buffers: {sorted(known) or 'none'})")
