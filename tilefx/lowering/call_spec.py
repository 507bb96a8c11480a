"""How the arguments of a call reach the graph (PopTorch's input conventions).

A call is bound to the signature of the model's `forward` (positional,
keyword and default arguments, `*args`, `**kwargs`) and flattened as a
pytree: nested tuples, lists, dicts (and named tuples, ...) are walked and
`None` is structure, not a value. Every tensor leaf becomes a graph input,
split along its batch dimension by the batching factors; every other leaf
(numbers, strings, dtypes) is compiled into the graph as a constant, as
PopTorch does. A later call must therefore have the same structure, the same
tensor shapes and dtypes and the same non-tensor values, or it is an error
that names the argument (PopTorch's "Value mismatch ... the inputs passed at
runtime don't match the inputs used to compile the model").

Defaults are bound as if passed, so `f(x)` and `f(x, flag=False)` are the
same call when False is the default. A default that is a tensor
(`def forward(self, x, y=torch.ones(3))`) is an input like a passed tensor,
as in PopTorch (its argument parser appends the default to the inputs): a
later call passing `y` runs the same executable with the new value, and the
default is split by the batching factors as any input is.
"""

from __future__ import annotations

import inspect
import re
import weakref
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils import _pytree as pytree

from tilefx.errors import Error
from tilefx.dialects.names import UPCAST_INPUT_META_KEY

_RECOMPILE = ("; non-tensor arguments and shapes are compiled into the graph: recompile for "
              "new inputs (call destroy() on the model and call it again, or wrap the model again)")


@dataclass
class CallSpec:
    """The structure of one call: its pytree, its non-tensor leaves, and a
    readable name for every leaf (`x`, `batch['ids']`, `pair[1]`)."""

    spec: pytree.TreeSpec
    leaves: list[Any]  # non-tensor values; tensor leaves as None
    is_tensor: list[bool]
    names: list[str]
    # the names of the last positional arguments, passed by keyword when the
    # call is rebuilt (the spec keeps the positional form: a lazily compiled
    # forward's signature, `*args` before its first call, may change under it)
    keywords: tuple[str, ...] = ()
    # this call's transformers cache objects (opened into the leaves above), in
    # the order `top_caches` finds them: their state after the call is written
    # back into them (`restore_caches`); not part of what a later call must match
    caches: list = field(default_factory=list, compare=False, repr=False)

    @property
    def num_tensors(self) -> int:
        return sum(self.is_tensor)

    def tensor_names(self) -> list[str]:
        return [n for n, t in zip(self.names, self.is_tensor) if t]

    def rebuild(self, tensors) -> tuple[tuple, dict]:
        """(args, kwargs) for `forward`, with `tensors` at the tensor leaves."""
        it = iter(tensors)
        leaves = [next(it) if t else v for v, t in zip(self.leaves, self.is_tensor)]
        args, kwargs = pytree.tree_unflatten(leaves, self.spec)
        n = len(args) - len(self.keywords)
        return tuple(args[:n]), {**dict(zip(self.keywords, args[n:])), **kwargs}

    def check_same(self, other: CallSpec, tensors: list[torch.Tensor],
                   compiled: list[tuple[tuple, torch.dtype]] | None) -> None:
        """Raise an Error naming the first argument of `other` (a later call
        with these tensors) that differs from this call, compiled for tensors
        of these (shape, dtype); `compiled` None: the structure and the
        non-tensor values only (an executable file's call: its executor
        checks the tensors against the program)."""
        if other.spec != self.spec:
            raise Error(f"the arguments do not have the structure the model was compiled for: "
                        f"{_difference(self, other)}expected {_describe(self)} but got "
                        f"{_describe(other)}{_RECOMPILE}")
        ti = 0
        for name, is_t, their_t, mine, theirs in zip(self.names, self.is_tensor, other.is_tensor,
                                                     self.leaves, other.leaves):
            if is_t != their_t:
                expected = "a Tensor" if is_t else _shown(mine)
                got = "a Tensor" if their_t else _shown(theirs)
                raise Error(f"Type mismatch for {name}: expected {expected} but got {got}{_RECOMPILE}")
            if is_t and compiled is not None:
                x, (shape, dtype) = tensors[ti], compiled[ti]
                ti += 1
                # PopTorch's words, which users (and their tests) know
                if tuple(x.shape) != tuple(shape):
                    raise Error(f"Shape mismatch for {name}: expected {torch.Size(shape)} but got "
                                f"{torch.Size(x.shape)}{_RECOMPILE}")
                if x.dtype != dtype:
                    raise Error(f"Data type mismatch for {name}: expected {dtype} but got "
                                f"{x.dtype}{_RECOMPILE}")
            elif not is_t and not _same_value(mine, theirs):
                raise Error(f"Value mismatch for {name}: expected {_shown(mine)} but got {_shown(theirs)}"
                            f"{_RECOMPILE}")


def _same_value(a, b) -> bool:
    """Whether a later call's non-tensor argument is the compiled one: of the
    same type and equal, numpy arrays by shape, dtype and elements (their
    `==` is elementwise, with no truth value); values whose `==` fails are
    the same only as the same object."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    shape, dtype = getattr(a, "shape", None), getattr(a, "dtype", None)
    if shape is not None and dtype is not None and hasattr(a, "__array__"):  # numpy arrays and scalars
        import numpy as np

        if shape != b.shape or dtype != b.dtype:
            return False
        try:
            return bool(np.array_equal(a, b, equal_nan=dtype.kind in "fc"))
        except (TypeError, ValueError):
            return False
    try:
        return bool(a == b)
    except (TypeError, ValueError, RuntimeError):
        return False


def _shown(v) -> str:
    """A non-tensor argument in a message: an array of more than a few
    elements by its type, shape and dtype (its repr may be thousands of
    numbers), anything else by a repr of at most a line."""
    shape, dtype = getattr(v, "shape", None), getattr(v, "dtype", None)
    if shape is not None and dtype is not None and getattr(v, "size", 0) > 8:
        return f"a {type(v).__module__}.{type(v).__qualname__} of shape {tuple(shape)} and dtype {dtype}"
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."


# The non-tensor values an executable file can record exactly (JSON keeps
# their types): anything else makes the call unrecorded (`call_to_json`).
_JSON_SCALARS = (type(None), bool, int, float, str)
_KINDS = {k.name: k for k in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                              inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.KEYWORD_ONLY,
                              inspect.Parameter.VAR_KEYWORD)}


def call_to_json(call: CallSpec, forward) -> dict | None:
    """The structure of a compiled call as plain JSON, for an executable file
    (api/export.py): the pytree spec, the non-tensor values, the leaves'
    names, and `forward`'s signature, so that an executor loaded without the
    model's Python code binds a call as the original did (keywords, nested
    inputs, defaults). None where the call or the signature holds a value
    JSON cannot carry with its type (a dtype, a tuple default, a named tuple
    of a class pytree cannot name): such a file takes its inputs flat."""
    if any(not t and type(v) not in _JSON_SCALARS for v, t in zip(call.leaves, call.is_tensor)):
        return None
    try:
        spec = pytree.treespec_dumps(call.spec)
    except Exception:  # noqa: BLE001 - a node type pytree cannot serialize
        return None
    params = None
    try:
        sig = _signature(forward)
    except (TypeError, ValueError):
        sig = None
    if sig is not None:
        params = []
        for p in sig.parameters.values():
            entry: dict[str, Any] = {"name": p.name, "kind": p.kind.name}
            if isinstance(p.default, torch.Tensor):
                # an input like a passed tensor (bind_call); its value is stored
                # with the weights (`tensor_defaults`), its dtype named here
                entry["tensor_default"] = True
                entry["default_dtype"] = str(p.default.dtype).removeprefix("torch.")
            elif p.default is not inspect.Parameter.empty:
                if type(p.default) not in _JSON_SCALARS:
                    return None
                entry["default"] = p.default
            params.append(entry)
    return {"spec": spec, "leaves": [None if t else v for v, t in zip(call.leaves, call.is_tensor)],
            "is_tensor": list(call.is_tensor), "names": list(call.names),
            "keywords": list(call.keywords), "signature": params}


def tensor_defaults(forward) -> dict[str, torch.Tensor]:
    """`forward`'s tensor defaults by parameter name: an executable file stores
    their values, since a loaded executor binds them as inputs (`call_from_json`)."""
    try:
        sig = _signature(forward)
    except (TypeError, ValueError):
        return {}
    return {n: p.default for n, p in sig.parameters.items() if isinstance(p.default, torch.Tensor)}


def call_from_json(data, where: str, defaults: dict | None = None) -> tuple[CallSpec, inspect.Signature | None]:
    """`call_to_json`'s record back (an Error naming `where` if it is malformed),
    with the tensor defaults the file stores (`defaults`: numpy arrays by
    parameter name). A tensor default the file does not store (a file
    written before tensor defaults were inputs, whose program has it
    compiled in) leaves its parameter without a default."""
    def bad(what: str) -> Error:
        return Error(f"{where}: the recorded call is malformed ({what})")

    if not isinstance(data, dict):
        raise bad("not an object")
    leaves, is_tensor, names, keywords = (data.get(k) for k in ("leaves", "is_tensor", "names", "keywords"))
    if not (isinstance(leaves, list) and isinstance(is_tensor, list) and isinstance(names, list)
            and isinstance(keywords, list) and len(leaves) == len(is_tensor) == len(names)):
        raise bad("leaves, is_tensor and names must be lists of one length")
    if not all(type(t) is bool for t in is_tensor) or not all(type(v) in _JSON_SCALARS for v in leaves) \
            or not all(isinstance(n, str) for n in (*names, *keywords)):
        raise bad("a leaf of the wrong type")
    try:
        spec = pytree.treespec_loads(data.get("spec"))
    except Exception as e:  # noqa: BLE001 - pytree's own errors for a bad spec
        raise bad(f"spec: {e}") from None
    if spec.num_leaves != len(leaves):
        raise bad("the spec's leaves and the values differ in number")
    sig = None
    params = data.get("signature")
    if params is not None:
        if not isinstance(params, list):
            raise bad("signature")
        out = []
        try:
            for p in params:
                kind = _KINDS[p["kind"]]
                if p.get("tensor_default"):
                    default = _tensor_default(p, (defaults or {}).get(p["name"]), bad)
                elif "default" in p:
                    if type(p["default"]) not in _JSON_SCALARS:
                        raise bad(f"default of {p['name']!r}")
                    default = p["default"]
                else:
                    default = inspect.Parameter.empty
                out.append(inspect.Parameter(p["name"], kind, default=default))
            sig = inspect.Signature(out)
        except (KeyError, TypeError, ValueError) as e:
            raise bad(f"signature: {e}") from None
    return CallSpec(spec, leaves, is_tensor, names, tuple(keywords)), sig


def _tensor_default(entry: dict, value, bad):
    """A recorded tensor default as a tensor of its recorded dtype (bfloat16
    is stored as float32, which numpy has), or `empty` when not stored."""
    if value is None:
        return inspect.Parameter.empty
    dtype = getattr(torch, str(entry.get("default_dtype", "")), None)
    if not isinstance(dtype, torch.dtype):
        raise bad(f"dtype of the default of {entry['name']!r}")
    return torch.from_numpy(value.copy()).to(dtype)


def _top_names(c: CallSpec) -> list[str]:
    """The call's argument names (`pair` for the leaves `pair[0]`, `pair[1]`)."""
    out: list[str] = []
    for n in c.names:
        top = n if n.startswith("*") else n.split("[", 1)[0]
        if top not in out:
            out.append(top)
    return out


def _num_positional(c: CallSpec) -> int:
    return c.spec.child(0).num_children


def _difference(mine: CallSpec, theirs: CallSpec) -> str:
    """What differs between two calls' structures, in PopTorch's words
    ("Missing arguments: z."), before the full description."""
    parts = []
    if _num_positional(mine) != _num_positional(theirs):
        parts.append(f"Number of positional arguments mismatch: expected {_num_positional(mine)} "
                     f"arguments but got {_num_positional(theirs)}.")
    a, b = _top_names(mine), _top_names(theirs)
    if missing := [n for n in a if n not in b and not n.startswith("*")]:
        parts.append(f"Missing arguments: {', '.join(missing)}.")
    if extra := [n for n in b if n not in a and not n.startswith("*")]:
        parts.append(f"Unexpected arguments: {', '.join(extra)}.")
    both = [n for n in a if n in b]  # and the keys of a dictionary argument
    if missing := _leaf_keys([n for n in mine.names if n not in theirs.names], both):
        parts.append(f"Missing arguments: {', '.join(missing)}.")
    if extra := _leaf_keys([n for n in theirs.names if n not in mine.names], both):
        parts.append(f"Unexpected arguments: {', '.join(extra)}.")
    return "".join(p + " " for p in parts)


def _leaf_keys(names: list[str], tops: list[str]) -> list[str]:
    """The dictionary keys of these leaf names (`d['x']` -> x) inside arguments in `tops`."""
    keys = []
    for n in names:
        m = re.search(r"\['([^']*)'\]$", n)
        if m and n.split("[", 1)[0] in tops and m.group(1) not in keys:
            keys.append(m.group(1))
    return keys


def reordered_like(compiled: CallSpec, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """`args` and `kwargs` with every dictionary holding the same keys as the
    compiled call's in that call's order (PopTorch: a dictionary's order is
    not part of the call); the others as they are."""
    template = pytree.tree_unflatten(list(compiled.leaves), compiled.spec)

    def walk(value, like):
        if type(value) is dict and isinstance(like, dict) and set(value) == set(like):
            return {k: walk(value[k], like[k]) for k in like}
        if isinstance(value, (list, tuple)) and type(value) in (list, tuple) and \
                isinstance(like, (list, tuple)) and len(value) == len(like):
            return type(value)(walk(v, w) for v, w in zip(value, like))
        return value

    t_args, t_kwargs = template
    n = len(t_args) - len(compiled.keywords)
    like_kwargs = {**dict(zip(compiled.keywords, t_args[n:])), **t_kwargs}
    new_args = tuple(walk(a, t) for a, t in zip(args, t_args)) + tuple(args[len(t_args):])
    new_kwargs = {k: walk(v, like_kwargs[k]) if k in like_kwargs else v for k, v in kwargs.items()}
    return new_args, new_kwargs


def _describe(c: CallSpec) -> str:
    return "(" + ", ".join(f"{n}: {'Tensor' if t else repr(v)}"
                           for n, t, v in zip(c.names, c.is_tensor, c.leaves)) + ")"


def _is_leaf(x) -> bool:
    # tensors are leaves even when a subclass registers itself as a pytree node
    return isinstance(x, torch.Tensor)


# a method's signature without `self`, by its function: inspect.signature takes
# ~0.1-1 ms, which every call of a wrapped model would pay again
_METHOD_SIGNATURES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _signature(forward) -> inspect.Signature:
    fn = getattr(forward, "__func__", None) if inspect.ismethod(forward) else None
    if fn is None:
        return inspect.signature(forward)
    sig = _METHOD_SIGNATURES.get(fn)
    if sig is None:
        sig = _METHOD_SIGNATURES[fn] = inspect.signature(forward)
    return sig


_RENAMES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _deprecated_names(forward) -> list[tuple[str, str]]:
    """(old, new) keyword renames that the decorators around `forward` apply:
    transformers' `deprecate_kwarg(old_name, ..., new_name=...)` (as its closure
    holds them) and its cache rename (`past_key_values`/`cache_params` to
    `cache`). Cached by function."""
    fn = getattr(forward, "__func__", forward)
    try:
        return _RENAMES[fn]
    except (KeyError, TypeError):
        pass
    renames = []
    f, seen = fn, set()
    while f is not None and id(f) not in seen:
        seen.add(id(f))
        code, cells = getattr(f, "__code__", None), getattr(f, "__closure__", None)
        if code is not None and cells and {"old_name", "new_name"} <= set(code.co_freevars):
            free = dict(zip(code.co_freevars, cells))
            try:
                old, new = free["old_name"].cell_contents, free["new_name"].cell_contents
            except ValueError:  # an empty cell
                old = new = None
            if isinstance(old, str) and isinstance(new, str):
                renames.append((old, new))
        f = getattr(f, "__wrapped__", None)
    if getattr(fn, "__module__", "").startswith("transformers."):  # transformers' own rename
        renames += [("past_key_values", "cache"), ("cache_params", "cache")]
    try:
        _RENAMES[fn] = renames
    except TypeError:
        pass
    return renames


def _renamed_keywords(forward, sig: inspect.Signature, kwargs: dict) -> dict:
    """`kwargs` with deprecated keyword names that `forward` renames to one of
    its parameters given their new name. Binding fills the other defaults in
    (`cache=None`), and a deprecation decorator seeing both names keeps the
    new one: a Hugging Face `past_key_values=` cache was silently dropped."""
    if not kwargs:
        return kwargs
    for old, new in _deprecated_names(forward):
        if old in kwargs and old not in sig.parameters and new in sig.parameters and new not in kwargs:
            kwargs = {(new if k == old else k): v for k, v in kwargs.items()}
    return kwargs


def _missing(sig: inspect.Signature, args: tuple, kwargs: dict) -> str:
    """PopTorch's "Mandatory parameter b missing. " for a call that leaves a
    parameter without a default unbound ("" when that is not the problem)."""
    try:
        given = sig.bind_partial(*args, **kwargs).arguments
    except TypeError:
        return ""
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD,
             inspect.Parameter.KEYWORD_ONLY)
    missing = [n for n, p in sig.parameters.items()
               if p.kind in kinds and p.default is inspect.Parameter.empty and n not in given]
    return "".join(f"Mandatory parameter {n} missing. " for n in missing)


def bind_call(forward, args: tuple, kwargs: dict) -> tuple[CallSpec, list[torch.Tensor]]:
    """Bind `args`/`kwargs` to `forward`'s signature and flatten them."""
    try:
        sig = _signature(forward)
    except (TypeError, ValueError):  # no signature: take the call as it is
        sig = None
    if sig is not None:
        kwargs = _renamed_keywords(forward, sig, kwargs)
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise Error(f"{_missing(sig, args, kwargs)}the call does not match "
                        f"{type(getattr(forward, '__self__', forward)).__name__}.forward{sig}: {e}") from None
        for name, p in sig.parameters.items():
            if name not in bound.arguments and p.default is not inspect.Parameter.empty \
                    and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                bound.arguments[name] = p.default
        args, kwargs = bound.args, bound.kwargs
        positional = [n for n, p in sig.parameters.items() if p.kind in (
            inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        # the model gets by keyword what it can take by keyword (as users call
        # Hugging Face models: transformers' config-default decorator reads
        # arguments by position in the function it wraps, and broke XGLM)
        star_used = any(p.kind == inspect.Parameter.VAR_POSITIONAL and bound.arguments.get(n)
                        for n, p in sig.parameters.items())
        keywords = () if star_used else tuple(
            n for n in positional[:len(args)]
            if sig.parameters[n].kind == inspect.Parameter.POSITIONAL_OR_KEYWORD)
        star = next((n for n, p in sig.parameters.items()
                     if p.kind == inspect.Parameter.VAR_POSITIONAL), "args")
    else:
        positional, star, keywords = [], "args", ()
    _open_dict_subclasses((tuple(args), dict(kwargs)))
    _open_caches((tuple(args), dict(kwargs)))
    caches = top_caches((tuple(args), dict(kwargs)))
    with_path, spec = pytree.tree_flatten_with_path((tuple(args), dict(kwargs)), is_leaf=_is_leaf)
    names, leaves, is_tensor, tensors = [], [], [], []
    for path, leaf in with_path:
        top, key, rest = path[0].idx, path[1], path[2:]
        if top == 0:
            i = key.idx
            base = positional[i] if i < len(positional) else f"*{star}[{i - len(positional)}]"
        else:
            base = str(key.key)
        names.append(base + pytree.keystr(rest))
        if isinstance(leaf, torch.Tensor):
            if leaf.is_complex():
                raise Error(f"input {names[-1]} is a complex tensor: complex numbers are not "
                            "supported on the IPU")
            _refuse_sparse(f"input {names[-1]}", leaf)
            leaves.append(None)
            is_tensor.append(True)
            tensors.append(leaf)
        else:
            leaves.append(leaf)
            is_tensor.append(False)
    return CallSpec(spec, leaves, is_tensor, names, keywords, caches), tensors


def _refuse_sparse(what: str, t: torch.Tensor) -> None:
    if t.layout != torch.strided:
        raise Error(f"{what} is a {str(t.layout).removeprefix('torch.')} tensor: the IPU takes dense "
                    "tensors (call .to_dense() on it first)")


def check_dense(model: torch.nn.Module) -> None:
    """A sparse parameter or buffer is refused by name, as a sparse input is
    (its trace failed with torch's 'Sparse CSR tensors do not have strides')."""
    for kind, named in (("parameter", model.named_parameters()), ("buffer", model.named_buffers())):
        for name, t in named:
            _refuse_sparse(f"{kind} {name}", t)


class CallWith(torch.nn.Module):
    """Traces `inner(*args, **kwargs)` from the flat tensor inputs: the call's
    structure and constants are rebuilt inside the trace; the tensors in
    `upcast` (fp16 inputs meeting fp32 weights, with FloatDowncastToHalf) are
    cast to fp32 there, marked so that ipu-autocast makes them fp16 again."""

    def __init__(self, inner: torch.nn.Module, call: CallSpec, upcast: frozenset[int] = frozenset()):
        super().__init__()
        self.inner = inner
        self.call = call
        self.upcast = upcast
        # the caches' states after the call, when the call passes or the model
        # returns transformers caches (set by the trace; see restore_caches)
        self.cache_states: list | None = None

    def forward(self, *tensors):
        with torch.fx.traceback.annotate({UPCAST_INPUT_META_KEY: True}):  # ipu-autocast may undo these
            tensors = [t.float() if i in self.upcast else t for i, t in enumerate(tensors)]
        args, kwargs = self.call.rebuild(tensors)
        out = self.inner(*args, **kwargs)
        # the fresh objects rebuilt for the trace from the call's caches
        caches = top_caches((tuple(args), kwargs)) if self.call.caches else []
        out, made = _plain_outputs(out, caches)
        if not caches and not made:
            return out
        self.cache_states, new = _cache_states(caches + made, {id(t) for t in tensors})
        return out, new


_CONSTANT_TYPES = (torch.Tensor, bool, int, float, complex, str, bytes, type(None), torch.dtype,
                   torch.device, torch.Size)


def _open_dict_subclasses(tree) -> None:
    """Make every dict subclass in `tree` (an OrderedDict subclass a model
    returns, say) a pytree node, so its values are opened as a dict's are and
    it is rebuilt as its own class: PopTorch reads any dict."""
    while True:
        leaves = pytree.tree_leaves(tree, is_leaf=_is_leaf)
        new = {type(x) for x in leaves if isinstance(x, dict) and type(x) not in pytree.SUPPORTED_NODES}
        if not new:
            return
        for cls in new:
            pytree.register_pytree_node(
                cls, lambda d: (list(d.values()), list(d.keys())),
                lambda values, keys, cls=cls: _rebuild_dict(cls, keys, values),
                flatten_with_keys_fn=lambda d: ([(pytree.MappingKey(k), v) for k, v in d.items()],
                                                list(d.keys())),
                serialized_type_name=f"tilefx.dict.{cls.__module__}.{cls.__qualname__}")


def _is_cache_state(x) -> bool:
    """A transformers key/value cache (`Cache` and its subclasses) or one of the
    objects it is made of (its layers), by the module that defines them."""
    return any(c.__module__ == "transformers.cache_utils" for c in type(x).__mro__[:-1])


def _open_caches(tree) -> None:
    """Make every transformers cache object in `tree` (a `past_key_values`
    DynamicCache, an EncoderDecoderCache, their layers) a pytree node: its
    attributes are opened, so its tensors become graph inputs and its other
    attributes compiled-in constants, and it is rebuilt inside the trace as a
    fresh object of its class. (As an opaque constant it kept the object the
    model was traced with: its tensors were baked into the graph and a later
    call with another cache object was a value mismatch.)"""
    while True:
        leaves = pytree.tree_leaves(tree, is_leaf=_is_leaf)
        new = {type(x) for x in leaves if type(x) not in pytree.SUPPORTED_NODES
               and not isinstance(x, torch.Tensor) and _is_cache_state(x) and hasattr(x, "__dict__")}
        if not new:
            return
        for cls in new:
            try:
                pytree.register_pytree_node(
                    cls, _flatten_object, lambda values, keys, cls=cls: _rebuild_object(cls, keys, values),
                    flatten_with_keys_fn=lambda o: ([(pytree.GetAttrKey(k), v) for k, v in _items(o)],
                                                    tuple(k for k, _ in _items(o))),
                    serialized_type_name=f"tilefx.cache.{cls.__module__}.{cls.__qualname__}")
            except ValueError:  # registered meanwhile (transformers' exporter registers caches too)
                pass


def top_caches(tree) -> list:
    """The transformers cache objects in `tree`, outermost only (an
    EncoderDecoderCache, not also the two caches it holds), in pytree order."""
    leaves = pytree.tree_leaves(tree, is_leaf=lambda x: _is_leaf(x) or _is_cache_state(x))
    return [x for x in leaves if not isinstance(x, torch.Tensor) and _is_cache_state(x)]


# In a cache's state after a traced call (CallWith.cache_states): a tensor
# that is still the one passed in (unchanged, or written in place: the executor
# writes such writes into the caller's tensor as for any input), and a tensor
# the call made (a graph output, in order). In the model's outputs, a string
# naming the cache (its index in the states) that stands where the model
# returned it: the graph's outputs hold tensors and plain constants only.
_KEPT = "\x00tilefx:kept-cache-tensor"
_NEW = "\x00tilefx:new-cache-tensor"
_CACHE = "\x00tilefx:cache:"


def _cache_states(caches: list, passed: set[int]) -> tuple[list, list]:
    """Each cache (rebuilt inside the trace) as the forward left it: a list of
    (pytree spec, leaves) with `_KEPT` for tensors passed in and `_NEW` for the
    tensors it made (a DynamicCache's concatenated keys, a StaticCache's lazily
    allocated ones), which come second, in order, to be graph outputs; other
    attributes (flags, sizes, classes) are kept as they are."""
    states, new = [], []
    for cache in caches:
        _open_caches(cache)  # classes first met in the forward (a layer appended to an empty cache)
        leaves, spec = pytree.tree_flatten(cache, is_leaf=_is_leaf)
        kept = []
        for x in leaves:
            if isinstance(x, torch.Tensor):
                if id(x) in passed:
                    x = _KEPT
                else:
                    new.append(x)
                    x = _NEW
            kept.append(x)
        states.append((spec, kept))
    return states, new


def restore_caches(out, caches: list, states: list):
    """Split what a program traced from a call with transformers caches returns
    (the model's outputs, the tensors the caches gained) and do what eager
    does: write each passed cache's new state into the caller's object (a
    DynamicCache grows in place) and return that very object where the model
    returned it; a cache the model made comes back as a new object of its
    class. (Without this a decoding loop that passes one cache object on, as
    generate() does, ran every step against the prompt's cache: wrong tokens,
    no error.)"""
    model_out, new = out
    it = iter(new)
    objects = []
    for i, (spec, leaves) in enumerate(states):
        state = pytree.tree_unflatten([next(it) if isinstance(x, str) and x == _NEW else x for x in leaves], spec)
        objects.append(_merge(caches[i], state) if i < len(caches) else state)
    return pytree.tree_map(lambda x: objects[int(x[len(_CACHE):])] if _is_cache_marker(x) else x, model_out)


def _is_cache_marker(x) -> bool:
    return isinstance(x, str) and x.startswith(_CACHE)


_MISSING = object()


def _merge(old, new):
    """`new` (a cache state rebuilt from a program's results) written into
    `old` (the caller's object), keeping the caller's objects and containers
    where both have them; the value to store where `old` was."""
    if isinstance(new, str) and new == _KEPT:
        return old
    if type(new) is type(old) and not isinstance(new, torch.Tensor) and _is_cache_state(new):
        for k, v in vars(new).items():
            old.__dict__[k] = _merge(old.__dict__.get(k, _MISSING), v)
        return old
    if type(new) in (list, tuple) and type(old) is type(new):
        merged = [_merge(old[i] if i < len(old) else _MISSING, v) for i, v in enumerate(new)]
        if type(old) is list:
            old[:] = merged
            return old
        return tuple(merged)
    if type(new) is dict and type(old) is dict:
        merged = {k: _merge(old.get(k, _MISSING), v) for k, v in new.items()}
        old.clear()
        old.update(merged)
        return old
    return new


def _items(obj) -> list:
    return sorted(vars(obj).items())


def _flatten_object(obj):
    items = _items(obj)
    return [v for _, v in items], tuple(k for k, _ in items)


def _rebuild_object(cls, keys, values):
    obj = cls.__new__(cls)
    obj.__dict__.update(zip(keys, values))
    return obj


def _rebuild_dict(cls, keys, values):
    """`cls` holding these items, or a plain dict when `cls` cannot be made
    from items alone (its __init__ wants more)."""
    try:
        obj = cls(zip(keys, values))
    except Exception:
        obj = None
    return obj if obj is not None and list(obj.keys()) == list(keys) else dict(zip(keys, values))


def _plain_outputs(out, caches: list = ()) -> tuple[Any, list]:
    """The model's outputs with every leaf that is neither a tensor nor a
    Python constant (an object pytree does not know how to open) replaced by
    None, with a warning: the executor returns tensors in the model's
    nesting, and such an object cannot come back from the device. A
    transformers cache the model returns is replaced by a `_CACHE` marker:
    its index in `caches` (those passed in) or, for one the model made, after
    them; returned with the list of those made (restore_caches puts them back)."""
    _open_dict_subclasses(out)
    leaves, spec = pytree.tree_flatten(out, is_leaf=lambda x: _is_leaf(x) or _is_cache_state(x))
    made: list = []
    opaque = []
    for i, leaf in enumerate(leaves):
        if isinstance(leaf, torch.Tensor) or isinstance(leaf, _CONSTANT_TYPES):
            continue
        if _is_cache_state(leaf):
            j = next((j for j, c in enumerate(caches) if c is leaf), None)
            if j is None:
                j = len(caches) + next((k for k, c in enumerate(made) if c is leaf), len(made))
                if j == len(caches) + len(made):
                    made.append(leaf)
            leaves[i] = f"{_CACHE}{j}"
        else:
            opaque.append(i)
    if opaque:
        import logging

        names = sorted({f"{type(leaves[i]).__module__}.{type(leaves[i]).__qualname__}" for i in opaque})
        logging.getLogger("tilefx").warning(
            "the model returns %s, which is not a tensor, a tuple/list/dict or a constant: it comes "
            "back as None", ", ".join(names))
        for i in opaque:
            leaves[i] = None
    return pytree.tree_unflatten(leaves, spec), made
