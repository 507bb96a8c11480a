"""PopTorch's error classes (PopTorch user guide, 4.3 "Error handling"): the base layer every other
layer may import to raise an error users can cause."""

import types


class Error(RuntimeError):
    """An application error: bad options, annotations, IR, shapes or memory.

    Like poptorch.Error it carries `message` (without context), `type` (the
    part of the stack that raised it) and `location`.
    """

    def __init__(self, message: str, type: str = "tilefx", location: str = ""):
        self.message = message
        self.type = type
        self.location = location
        text = message if not location else f"{message} (at {location})"
        super().__init__(text)


class RecoverableError(Error):
    """A transient runtime error; `recovery_action` says what to reset."""

    def __init__(self, message: str, recovery_action: str = "IPU_RESET", **kw):
        super().__init__(message, **kw)
        self.recovery_action = recovery_action


class UnrecoverableError(Error):
    """A runtime error that persists: the (simulated) machine is unusable."""


_ALSO: dict[type, type] = {}
# the attributes of an exception that are the error machinery's, never a field to copy
_NOT_FIELDS = frozenset({"args", "__traceback__", "__context__", "__cause__", "__suppress_context__",
                         "__notes__", "__dict__", "__weakref__", "with_traceback", "add_note",
                         "message", "type", "location", "_text"})


def _combined_str(self) -> str:
    """The text of an Error that is also a built-in class: kept apart from
    the args, which are the original exception's (`wrapping`)."""
    text = self.__dict__.get("_text")
    return text if text is not None else BaseException.__str__(self)


def error_also(kind: type) -> type:
    """An Error class that is also a `kind` (the exception a model's own code
    raised while tracing, e.g. a ValueError from poptorch.for_loop's argument
    checks or a TypeError from a call): users catching either class see it,
    as they would with PopTorch, which lets such exceptions through. Only
    Python's built-in classes are combined (a user's class may have a __str__
    that reads attributes its own __init__ sets, which the Error's does not);
    Error alone otherwise, or when the two cannot be combined (a built-in
    with a constructor of its own, such as ExceptionGroup). `wrapping` makes
    one that keeps the original's fields."""
    if not isinstance(kind, type) or not issubclass(kind, Exception) or issubclass(Error, kind) or \
            kind.__module__ != "builtins":
        return Error
    cls = _ALSO.get(kind)
    if cls is None:
        try:
            cls = type("Error", (Error, kind), {"__module__": __name__, "__str__": _combined_str,
                                                "__doc__": f"An Error that is also a {kind.__name__}."})
            cls("a message", type="frontend")  # built as error_also's callers build it
        except TypeError:  # an instance lay-out conflict, or a constructor of its own (ExceptionGroup)
            cls = Error
        _ALSO[kind] = cls
    return cls


def wrapping(original: BaseException, message: str, **kw) -> Error:
    """The Error that reports a model's own exception `original` with
    `message`: an `error_also(type(original))` that keeps the built-in's
    fields, so code catching the built-in reads them as it would from the
    original: its args (a KeyError's key is `args[0]`), the attributes
    Python keeps in slots (an OSError's `errno`, `strerror`, `filename`;
    an AttributeError's `name`; a UnicodeError's `start`, ...) and those in
    its __dict__. Its text is `message` (str() and `message`)."""
    cls = error_also(type(original))
    err = cls(message, **kw)
    if cls is Error:
        return err
    err._text = BaseException.__str__(err)
    err.args = original.args
    for klass in type(original).__mro__:
        if klass is BaseException or klass is object:
            break
        for name, attr in vars(klass).items():
            if name in _NOT_FIELDS or not isinstance(attr, (types.MemberDescriptorType, types.GetSetDescriptorType)):
                continue
            try:
                setattr(err, name, getattr(original, name))
            except (AttributeError, TypeError, ValueError):  # a read-only or derived field
                pass
    for name, value in vars(original).items():
        if name not in _NOT_FIELDS:
            err.__dict__[name] = value
    return err


def set_text(err: Error, text: str) -> None:
    """Make `err` say `text` (in its args, or beside them for a `wrapping`
    Error, whose args are the original exception's)."""
    if "_text" in err.__dict__:
        err._text = text
    else:
        err.args = (text, *err.args[1:])
