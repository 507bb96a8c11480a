"""PopTorch's error classes (seeds/000 section 4.3): the base layer every other
layer may import to raise an error users can cause."""


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


def error_also(kind: type) -> type:
    """An Error class that is also a `kind` (the exception a model's own code
    raised while tracing, e.g. a ValueError from poptorch.for_loop's argument
    checks or a TypeError from a call): users catching either class see it,
    as they would with PopTorch, which lets such exceptions through. Only
    Python's built-in classes are combined (a user's class may have a __str__
    that reads attributes its own __init__ sets, which the Error's does not);
    Error alone otherwise, or when the two cannot be combined (exceptions
    with their own layout, such as OSError)."""
    if not isinstance(kind, type) or not issubclass(kind, Exception) or issubclass(Error, kind) or \
            kind.__module__ != "builtins":
        return Error
    cls = _ALSO.get(kind)
    if cls is None:
        try:
            cls = type("Error", (Error, kind), {"__module__": __name__, "__str__": BaseException.__str__,
                                                "__doc__": f"An Error that is also a {kind.__name__}."})
            cls("a message", type="frontend")  # built as error_also's callers build it
        except TypeError:  # an instance lay-out conflict, or a constructor of its own (ExceptionGroup)
            cls = Error
        _ALSO[kind] = cls
    return cls
