"""The model's own tensors while tilefx traces it, changed in place on the
user's modules and put back afterwards: plain tensor attributes (and dicts of
tensors) become buffers so the trace treats them as graph constants
(`TensorAttributes`), and parameters, buffers and inputs on the meta device
become fake CPU tensors (`MetaAsFake`).

Its own module because it is the one part of the torch frontend that edits
the model rather than reading the traced graph (`from_torch.py` builds the IR
from the graph and enters these contexts around the trace).
"""

from __future__ import annotations

import torch


class TensorAttributes:
    """Plain tensor attributes of the modules (neither parameters nor buffers)
    are constants of the graph (PopTorch user guide, 4.8 "PyTorch buffers": PopTorch freezes their value
    when it builds the graph, so `self.i += 1` in forward returns the initial
    value plus one at every call). While tracing they are registered as
    non-persistent buffers on copies, so in-place changes trace functionally;
    the lowering turns them into constants and drops their updates. Tensors
    in a plain dict attribute (a cache) are constants the same way, and the
    dict the model holds is never the one the trace writes to."""

    def __init__(self, model: torch.nn.Module):
        self.model = model
        self.found = []  # (module, buffer name, original tensor, qualified name)
        self.dicts = []  # (module, attribute, original dict, {key: buffer name})
        for mname, m in model.named_modules():
            for k, v in list(vars(m).items()):
                if isinstance(v, torch.Tensor) and not isinstance(v, torch.nn.Parameter) and \
                        k not in m._buffers and k not in m._parameters:
                    self.found.append((m, k, v, f"{mname}.{k}" if mname else k))
                elif type(v) is dict and k not in _MODULE_STATE and \
                        all(isinstance(t, torch.Tensor) for t in v.values()):
                    # a cache of tensors (LeViT's attention biases in eval mode): its
                    # tensors are constants too, and what the trace stores in it stays
                    # out of the model
                    keys = {key: f"{k}[{i}]" for i, key in enumerate(v)}
                    self.dicts.append((m, k, v, keys))
                    self.found += [(m, b, v[key], f"{mname}.{b}" if mname else b) for key, b in keys.items()]
        self.values = {qual: v for _, _, v, qual in self.found}

    def __enter__(self):
        for m, k, v, _ in self.found:
            m.__dict__.pop(k, None)
            m.register_buffer(k, v.detach().clone(), persistent=False)
        self._fresh_dicts()
        # the tracer runs forward more than once: each run starts from the model's dicts
        self._hook = self.model.register_forward_pre_hook(lambda m, a: self._fresh_dicts(), prepend=True)
        return self

    def _fresh_dicts(self) -> None:
        for m, k, v, keys in self.dicts:
            m.__dict__[k] = _BufferBackedDict(m, v, keys)

    def __exit__(self, *exc):
        self._hook.remove()
        for m, k, v, _ in self.dicts:
            m.__dict__[k] = v
        for m, k, v, _ in self.found:
            m._buffers.pop(k, None)
            if not any(m is dm and k in keys.values() for dm, _, _, keys in self.dicts):
                m.__dict__[k] = v  # a tensor attribute (a dict's entries went back with the dict)
        return False


_MODULE_STATE = frozenset(vars(torch.nn.Module()))  # _parameters, _buffers, hooks: torch's own


class _BufferBackedDict(dict):
    """A copy of a module's dict of tensors whose entries read the buffers that
    stand for them while tracing (the tracer swaps buffers, not dict entries)."""

    def __init__(self, module: torch.nn.Module, items: dict, keys: dict):
        super().__init__(items)
        self._module, self._keys = module, dict(keys)

    def __getitem__(self, key):
        if key in self._keys:
            return self._module._buffers[self._keys[key]]
        return super().__getitem__(key)

    def get(self, key, default=None):
        return self[key] if key in self else default

    def __setitem__(self, key, value):
        self._keys.pop(key, None)
        super().__setitem__(key, value)

    def values(self):
        return [self[k] for k in self]

    def items(self):
        return [(k, self[k]) for k in self]


class MetaAsFake:
    """Parameters and buffers on the meta device (a model built under
    `torch.device("meta")` for sizing: a 1-billion-parameter model costs no
    memory) are traced as fake CPU tensors of one FakeTensorMode: they meet
    the CPU inputs as CPU tensors would, and the tracer, which finds that mode
    on them, makes the inputs fake in it too. Inputs on the meta device
    (`args`; shapes only, for sizing) become fake CPU tensors of the same
    mode. Nothing is allocated; the original tensors are put back afterwards.
    A model and inputs without meta tensors are left alone."""

    def __init__(self, model: torch.nn.Module, args: tuple = ()):
        self.model = model
        self.args = args
        self.swapped: list[tuple[dict, str, torch.Tensor]] = []
        self.names: list[str] = []
        self._mode = None

    def _fake(self, v: torch.Tensor) -> torch.Tensor:
        from torch._subclasses.fake_tensor import FakeTensorMode

        if self._mode is None:
            self._mode = FakeTensorMode()
        f = self._mode.fake_tensor_converter.from_meta_and_device(self._mode, v.detach(), torch.device("cpu"))
        return torch.nn.Parameter(f, requires_grad=v.requires_grad) if isinstance(v, torch.nn.Parameter) else f

    def __enter__(self):
        fakes: dict[int, torch.Tensor] = {}  # tied tensors stay one tensor
        for mname, m in self.model.named_modules(remove_duplicate=False):
            for table in (m._parameters, m._buffers):
                for k, v in list(table.items()):
                    if v is None or v.device.type != "meta":
                        continue
                    if id(v) not in fakes:
                        fakes[id(v)] = self._fake(v)
                        self.names.append(f"{mname}.{k}" if mname else k)
                    self.swapped.append((table, k, v))
                    table[k] = fakes[id(v)]
        self.args = tuple(self._fake(a) if isinstance(a, torch.Tensor) and a.device.type == "meta" else a
                          for a in self.args)
        return self

    @property
    def fake_mode(self):
        """The FakeTensorMode of the swapped tensors (None: no meta tensors)."""
        return self._mode

    def __exit__(self, *exc):
        for table, k, v in reversed(self.swapped):
            table[k] = v
        self.swapped.clear()
        return False
