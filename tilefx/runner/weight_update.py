"""The weight update of a training executor: the optimizer's @update
program and its state, the gradient accumulators a weight update starts
from, and loss scaling (static, and automatic with PopART's histogram
rule). A mixin of the runner's executor (runner/runner.py), reading its
HostSettings."""

from __future__ import annotations

import logging
import numpy as np
import torch
from tilefx.dialects.aten import np_dtype
from tilefx.dialects.irutil import arg_roles, find_func, to_py
from tilefx.dialects.names import OPTIMIZER_KEY
from tilefx.driver import Program
from tilefx.errors import Error
from tilefx.lowering.optimizers import optimizer_config
from tilefx.runner import compile_log
from tilefx.runner.host_arrays import held_alone
from tilefx.runner.serialized import serialized

log = logging.getLogger("tilefx")

_PCG64_KEYS = {"bit_generator", "state", "has_uint32", "uinteger"}


def rng_to_json(state: dict) -> dict:
    """A PCG64 generator's state with its 128-bit words as hex text (JSON
    readers cap the digits of a number)."""
    inner = state["state"]
    return {"bit_generator": state["bit_generator"], "state": f"{inner['state']:x}", "inc": f"{inner['inc']:x}",
            "has_uint32": int(state["has_uint32"]), "uinteger": int(state["uinteger"])}


def rng_from_json(value, where: str) -> dict:
    """The state `rng_to_json` wrote, checked field by field."""
    ok = isinstance(value, dict) and set(value) == _PCG64_KEYS | {"inc"} and value["bit_generator"] == "PCG64"
    try:
        words = [int(value[k], 16) for k in ("state", "inc")] if ok else []
    except (TypeError, ValueError):
        ok = False
    ok = ok and all(isinstance(w, str) and len(w) <= 32 for w in (value["state"], value["inc"])) and \
        value["has_uint32"] in (0, 1) and type(value["uinteger"]) is int and 0 <= value["uinteger"] < 1 << 32
    if not ok:
        raise Error(f"{where}: a random stream's state is not a PCG64 state")
    return {"bit_generator": "PCG64", "state": {"state": words[0], "inc": words[1]},
            "has_uint32": value["has_uint32"], "uinteger": value["uinteger"]}


class WeightUpdates:
    def _grad_scale(self) -> float:
        _, r, _, g = self._factors()
        r *= self._processes()  # the global replication
        return 1.0 / (g * r) if self._host.mean_reduction else 1.0

    def _optimizer_cfg(self, program: Program) -> tuple[dict, dict]:
        """The optimizer's configuration and each weight's parameter group."""
        if self._optimizer is None:  # loaded from an executable file: its compiled configuration
            cfg = to_py(program.module.attributes[OPTIMIZER_KEY])
            group_of = {r["param"]: r.get("group", 0) for r in arg_roles(find_func(program.module, "main"))
                        if "param" in r}
            return cfg, group_of
        cfg, group_of = optimizer_config(self._optimizer, self._param_names())
        cfg["grad_scale"] = self._grad_scale()
        return cfg, group_of

    def _adopt_update(self, program: Program) -> None:
        """Take the compiled @update's optimizer configuration as this
        executor's: what setOptimizer checks constants against, the runtime
        hyper-parameters, the optimizer log."""
        from tilefx.lowering.optimizers import attach, hyper_values

        cfg, group_of = self._optimizer_cfg(program)
        upd = find_func(program.module, "update")
        self._opt_cfg, self._opt_groups = cfg, group_of  # what setOptimizer checks constants against
        self._grad_dtype = next((np_dtype(a.type.element_type).name for a, r in zip(upd.body.block.args,
                                 arg_roles(upd)) if "param" in r), "float32")
        self._optimizer_logged = compile_log.log_optimizer(
            self._optimizer, cfg, group_of, self._grad_dtype, self.__dict__.get("_optimizer_logged"))
        if self._optimizer is not None:  # and the attributes it knows (warn_unexpected_attributes)
            from tilefx.lowering.optimizers import attribute_names

            self._opt_known, self._opt_warned = attribute_names(self._optimizer), set()
        # runtime operands of @update: lr and the variable hyper-parameters, per group
        self._hypers = hyper_values(cfg)
        if self._optimizer is not None:
            attach(self._optimizer, self)

    def _init_opt_state(self) -> None:
        """Create the optimizer state @update takes (zeros, or its `tilefx.init`,
        in the state's accumulation type), then load a state the optimizer was
        given by load_state_dict before compiling."""
        from tilefx.lowering.optimizers import take_pending_state

        if self._program is None:
            return
        upd = find_func(self._program.module, "update")
        for arg, role in zip(upd.body.block.args, arg_roles(upd)):
            name = role.get("state")
            if name is None:
                continue
            dtype = np_dtype(arg.type.element_type)
            cur = self._opt_state.get(name)
            shape = self._groups.state_shape(name, arg.type.get_shape())  # one per group if grouped
            if cur is None or cur.shape != shape:
                self._opt_state[name] = np.full(shape, role.get("init", 0.0), dtype=dtype)
            elif cur.dtype != dtype:
                self._opt_state[name] = cur.astype(dtype)
        self._opt_ready = True
        pending = take_pending_state(self._optimizer) if self._optimizer is not None else None
        if pending is not None:
            log.debug("Writing optimiser state tensors from host to IPU memory.")  # PopTorch's words
            self._load_poptorch_state(pending)

    def optimizer_state_by_weight(self) -> dict | None:
        """The device's optimizer state by weight and kind, as copies:
        {"step", "tensors": {param: {kind: Tensor}}}, None before the first
        compile (PopTorch's form, under PopART's names, is
        `device_optimizer_state`; PopART's sessions read this one)."""
        if not getattr(self, "_opt_ready", False):
            return None
        tensors: dict[str, dict[str, torch.Tensor]] = {}
        for key, value in self._opt_state.items():
            pname, kind = key.rsplit("/", 1)
            tensors.setdefault(pname, {})[kind] = torch.from_numpy(np.array(value, copy=True))
        return {"step": int(self._step), "tensors": tensors}

    def load_optimizer_state_by_weight(self, state: dict) -> None:
        """Write a state of `optimizer_state_by_weight`'s form into the
        device's (each tensor must be one the model keeps, of its shape; the
        update count becomes the state's)."""
        known: dict[str, dict[str, str]] = {}
        for key in self._opt_state:
            pname, kind = key.rsplit("/", 1)
            known.setdefault(pname, {})[kind] = key
        for pname, kinds in state["tensors"].items():
            if pname not in known:
                raise Error(f"load_state_dict: the state has tensors for {pname!r}, which this model "
                            f"does not train with state (known: {sorted(known)})")
            for kind, value in kinds.items():
                key = known[pname].get(kind)
                if key is None:
                    raise Error(f"load_state_dict: unknown state {kind!r} for {pname!r}; this optimizer "
                                f"keeps {sorted(known[pname])}")
                cur = self._opt_state[key]
                arr = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
                if arr.shape != cur.shape:
                    raise Error(f"load_state_dict: {key} has shape {tuple(arr.shape)}, the model "
                                f"expects {tuple(cur.shape)}")
                self._opt_state[key] = arr.astype(cur.dtype, copy=True)
        self._step = int(state["step"])

    # -- the state as PopTorch's optimizer.state_dict() shows it (runner/optim_state.py) --

    # -- what a poptorch.optim optimizer's state_dict / load_state_dict ask
    def device_optimizer_state(self) -> dict | None:
        """The optimizer's state on the device in PopTorch's form (as
        `_poptorch_state`), None before the first compile."""
        return self._poptorch_state()

    def optimizer_state_writes(self) -> int:
        """How many times the device's optimizer state or hyper-parameters
        were written from the host (a copy read before a write is stale)."""
        return self.__dict__.get("_opt_writes", 0)

    def runs_optimizer(self, optimizer) -> bool:
        """Whether `optimizer` is this live executor's."""
        return self._optimizer is optimizer and not self._destroyed

    def write_optimizer_state(self, optimizer, state: dict) -> int | None:
        """Write `state` (PopTorch's form) into the device's optimizer state
        when `optimizer` is this live executor's and the state exists (after
        the first compile): the executor's update count then, else None."""
        if not self.runs_optimizer(optimizer) or self.optimizer_state_by_weight() is None:
            return None
        log.debug("Writing optimiser state tensors from host to IPU memory.")  # PopTorch's words
        self._load_poptorch_state(state)
        return self._step

    def _poptorch_state(self) -> dict | None:
        """{"step", "ipu_state", "ipu_param"} under PopART's names, None
        before the first compile."""
        from tilefx.runner.optim_state import LOSS_SCALE_FACTOR, state_name

        nested = self.optimizer_state_by_weight()
        if nested is None:
            return None
        kind = self._opt_cfg["type"]
        tensors = {state_name(kind, f"{p}/{k}"): t for p, kinds in nested["tensors"].items()
                   for k, t in kinds.items()}
        if self._als_tracked:
            tensors[LOSS_SCALE_FACTOR] = torch.tensor(self._als_factor, dtype=torch.float32)
        return {"step": nested["step"], "ipu_state": tensors, "ipu_param": self._device_params()}

    def _velocity_weights(self) -> set[str]:
        return {key.rsplit("/", 1)[0] for key in self._opt_state}

    def _device_params(self) -> dict[str, torch.Tensor]:
        """The variable hyper-parameters the device holds, PopART's names."""
        from tilefx.runner.optim_state import device_params

        half = bool(self._weights) and all(w.dtype == np.float16 for w in self._weights.values())
        trained = set(self._program.trained) if self._program is not None else set(self._opt_groups)
        groups = {w: g for w, g in self._opt_groups.items() if w in trained}  # PopART's: trained weights
        out = device_params({**self._opt_cfg, "loss_scaling": self._loss_scaling()}, groups,
                            self._hypers, self._velocity_weights(), half)
        out.update({k: v.clone() for k, v in self.__dict__.get("_param_overrides", {}).items()})
        return out

    def _load_poptorch_state(self, state: dict) -> None:
        """Write a state in PopTorch's form (the optimizer's load_state_dict):
        the tensors and hyper-parameters it names; the others keep the
        device's values."""
        from tilefx.runner.optim_state import LOSS_SCALE_FACTOR, operands_from_params, state_name

        kind = self._opt_cfg["type"]
        where = {state_name(kind, key): key.rsplit("/", 1) for key in self._opt_state}
        nested: dict[str, dict] = {}
        for name, value in (state.get("ipu_state") or {}).items():
            if name == LOSS_SCALE_FACTOR and self._als_tracked:
                self._als_factor = float(value)
                continue
            if name not in where:
                raise Error(f"load_state_dict: unknown optimizer state tensor {name!r}; this model keeps "
                            f"{sorted(where) + ([LOSS_SCALE_FACTOR] if self._als_tracked else [])}")
            pname, what = where[name]
            nested.setdefault(pname, {})[what] = value
        step = state.get("step")
        self.load_optimizer_state_by_weight({"step": self._step if step is None else int(step),
                                             "tensors": nested})
        params = state.get("ipu_param") or {}
        if params:
            known = self._device_params()
            unknown = sorted(set(params) - set(known))
            if unknown:
                raise Error(f"load_state_dict: {unknown[0]!r} is not a variable hyper-parameter of the "
                            f"compiled model (ipu_param holds {sorted(known)})")
            merged = {**known, **params}
            changed = {k for k, v in params.items()
                       if np.float32(float(v)) != np.float32(float(known[k]))}
            operands, ls = operands_from_params(self._opt_cfg, self._opt_groups, self._hypers, merged,
                                                changed)
            self._hypers.update({k: v for k, v in operands.items() if k in self._hypers})
            if ls is not None:
                self._ls_device = ls
            overrides = self.__dict__.setdefault("_param_overrides", {})
            overrides.update({k: torch.as_tensor(v, dtype=torch.float32).detach().clone()
                              for k, v in params.items()})

    def _reset_device_params(self) -> None:
        """setOptimizer: the device takes the optimizer's hyper-parameters."""
        self._opt_writes = self.__dict__.get("_opt_writes", 0) + 1  # a state read before is stale
        self.__dict__.pop("_param_overrides", None)
        self.__dict__.pop("_ls_device", None)

    # -- the state a training run continues from (api/checkpoint.py) ---------

    @serialized
    def training_state(self) -> tuple[dict[str, np.ndarray], dict]:
        """What a training run continues from, bit for bit (a tilefx
        extension for checkpoints, api/checkpoint.py): the weights, buffers
        and optimizer state as the device holds them, by name, and as JSON
        the weight-update count, the automatic loss scaling statistics and
        the random streams of the replicas' random ops."""
        if not self._training:
            raise Error("training_state: only a training model (poptorch.trainingModel) has a training state")
        if self._program is None:
            raise Error("training_state: the model is not compiled yet (it compiles at its first call)")
        arrays = {f"weight/{n}": v for n, v in self._weights.items()}
        arrays.update({f"buffer/{n}": np.asarray(v) for n, v in self._device_buffers.items()})
        arrays.update({f"state/{n}": v for n, v in self._opt_state.items()})
        if not self._host.broadcast_buffers:  # each replica keeps its own buffers
            for r, own in enumerate(self.__dict__.get("_replica_buffers") or []):
                arrays.update({f"replica{r}/{n}": np.asarray(v) for n, v in own.items()})
        meta = {"weight_updates": int(self._step),
                "loss_scaling": [float(self._als_factor), int(self._als_updates), int(self._als_upper),
                                 int(self._als_lower)],
                "rng": rng_to_json(self.random_streams.own.bit_generator.state),
                "replica_rngs": [rng_to_json(st) for st in self.random_streams.states()]}
        return {k: np.ascontiguousarray(v) for k, v in arrays.items()}, meta

    @serialized
    def restore_training_state(self, arrays: dict[str, np.ndarray], meta: dict, where: str) -> None:
        """Continue from a `training_state()` of this model (read from
        `where`): every array must match a current one by name, shape and
        dtype, and every stream must be there; then the host's parameters
        and buffers take the restored values (as copyWeightsToHost)."""
        current, _ = self.training_state()
        if set(arrays) != set(current):
            missing, extra = sorted(set(current) - set(arrays)), sorted(set(arrays) - set(current))
            raise Error(f"{where}: the checkpoint does not hold this model's training state (missing "
                        f"{missing[:5]}, unexpected {extra[:5]}): another model, optimizer or options")
        for n, v in arrays.items():
            if v.shape != current[n].shape or v.dtype != current[n].dtype:
                raise Error(f"{where}: {n} is {v.dtype}{list(v.shape)} in the checkpoint, "
                            f"{current[n].dtype}{list(current[n].shape)} in this model")
        rngs = meta["replica_rngs"]
        streams = self.random_streams
        if len(rngs) != len(streams.generators):
            raise Error(f"{where}: the checkpoint has {len(rngs)} replica random streams, this model "
                        f"{len(streams.generators)}")
        streams.own.bit_generator.state = rng_from_json(meta["rng"], where)
        for g, st in zip(streams.generators, rngs):
            if g is not streams.own:
                g.bit_generator.state = rng_from_json(st, where)
        for n, v in arrays.items():
            kind, name = n.split("/", 1)
            value = np.array(v, copy=True)
            if kind == "weight":
                self._weights[name] = value
            elif kind == "buffer":
                self._device_buffers[name] = value
            elif kind == "state":
                self._opt_state[name] = value
            else:
                self._replica_buffers[int(kind.removeprefix("replica"))][name] = value
        self._step = int(meta["weight_updates"])
        factor, updates, upper, lower = meta["loss_scaling"]
        self._als_factor, self._als_updates = float(factor), int(updates)
        self._als_upper, self._als_lower = int(upper), int(lower)
        self._opt_writes = self.__dict__.get("_opt_writes", 0) + 1  # a state read before is stale
        self._write_back()

    # -- running ---------------------------------------------------------

    def _zeroed_accumulators(self, r: int, trained: list[str]) -> dict[str, np.ndarray]:
        """Replica r's gradient accumulators at the start of a weight update:
        a read-only -0.0 of each weight's shape, no memory to zero, for which
        ipu.accumulate's acc + grad is exactly grad (backend/kernels/ipu.py).
        Without grouped weights every replica's are the same, made once per
        program (the callers fill the dict they get: each gets its own)."""
        made = self.__dict__.get("_zero_accs")
        if made is not None and made[0] is trained and not self._groups.grouped:
            return dict(made[1])
        out = {}
        zeros = self.__dict__.setdefault("_neg_zeros", {})  # read-only, so kept from call to call
        for n in trained:
            w = self._groups.weight(self._weights, n, r)  # a grouped weight: the replica's group's
            z = zeros.get(n)
            if z is None or z.shape != w.shape or z.dtype != w.dtype:
                z = zeros[n] = np.broadcast_to(np.array(-0.0, w.dtype), w.shape)
            out[n] = z
        self._zero_accs = (trained, dict(out))
        return out

    def _update(self, total: dict[str, np.ndarray]) -> None:
        """One weight update from the summed gradients (checked for overflow
        first under loss scaling)."""
        self._opt_writes = self.__dict__.get("_opt_writes", 0) + 1  # a state read before is stale
        anchors = self.__dict__.get("_tilefx_anchors")
        if anchors is not None:
            anchors.set_loss_scale(self.loss_scale)  # finalLossScale: the scale this update used
        if self._als_tracked or self._loss_scaling() != 1.0:
            self._loss_scaled_update(total)
        else:
            self._apply_update(total)

    def _apply_update(self, accum: dict[str, np.ndarray]) -> None:
        multi = self._groups.update_counts()
        if multi:  # once per group of a grouped weight
            self._grouped_update(multi, accum)
        else:
            self._update_once(accum)

    def _grouped_update(self, multi: dict[str, int], accum: dict[str, np.ndarray]) -> None:
        """Run @update once per group on that group's slices of the grouped
        weights (`multi`: their group counts; other weights are updated once)."""
        weights, state, step = self._weights, self._opt_state, self._step
        new_w = {n: weights[n].copy() for n in multi}
        owner = {k: k.rsplit("/", 1)[0] for k in state}
        new_s = {k: state[k].copy() for k in state if owner[k] in multi}
        plain_w, plain_s = weights, state
        for i in range(max(multi.values())):
            self._weights = {n: (w[i % multi[n]] if n in multi else w) for n, w in weights.items()}
            self._opt_state = {k: (s[i % multi[owner[k]]] if owner[k] in multi else s)
                               for k, s in state.items()}
            self._step = step
            self._update_once({n: (a[i % multi[n]] if n in multi else a) for n, a in accum.items()})
            for n in multi:
                if i < multi[n]:
                    new_w[n][i] = self._weights[n]
            for k in new_s:
                if i < multi[owner[k]]:
                    new_s[k][i] = self._opt_state[k]
            if i == 0:
                plain_w, plain_s = dict(self._weights), dict(self._opt_state)
        self._weights = {**plain_w, **new_w}
        self._opt_state = {**plain_s, **new_s}

    def _update_once(self, accum: dict[str, np.ndarray]) -> None:
        """One run of @update on every weight."""
        p = self._program
        self._step += 1
        tables = {"param": self._weights, "accum": accum, "state": self._opt_state, "hyper": self._hypers}
        args = [tables[kind][key] if kind != "step" else np.asarray(self._step, dtype=np.float32)
                for kind, key in p.update_args]
        res = p.update(*args, donated=held_alone(args, p.update_donatable))
        for (kind, key), v in zip(p.update_results, res):
            if not isinstance(v, np.ndarray):  # numpy gives a 0-d weight's update as a scalar
                v = np.asarray(v)
            if kind == "param":
                self._weights[key] = v
            elif kind == "state":
                self._opt_state[key] = v

    def _loss_scaled_update(self, total: dict[str, np.ndarray]) -> None:
        """With loss scaling, a weight update whose gradients overflowed is
        skipped (its accumulators are dropped); automatic loss scaling then
        updates its factor from the histogram of the period (PopART's
        automatic loss scaling rule)."""
        finite = all(np.isfinite(g).all() for g in total.values())
        if finite:
            self._apply_update(total)
        else:
            log.info("loss scaling: non-finite gradients at scale %g, update skipped", self.loss_scale)
        if not self._als_tracked:
            return
        self._als_updates += 1
        if self._als_updates % self._host.loss_scaling_period:
            return
        t = 1e-7
        f = t / (1 - t)
        if self._als_upper > f * self._als_lower:
            self._als_factor /= 2.0
        else:
            self._als_factor *= 2.0
        self._als_upper = self._als_lower = 0

    def _loss_scaling(self) -> float:
        device = self.__dict__.get("_ls_device")  # written by load_state_dict's ipu_param
        if device is not None:
            return device
        return float(getattr(self._optimizer, "loss_scaling", 1.0) or 1.0)

    @property
    def loss_scale(self) -> float:
        """The loss scale in use: the optimizer's loss_scaling x the automatic factor."""
        return self._loss_scaling() * getattr(self, "_als_factor", 1.0)

    @property
    def loss_scaling_factor(self) -> float:
        """The automatic loss scaling factor (starts at 1; halves or doubles per period)."""
        return getattr(self, "_als_factor", 1.0)
