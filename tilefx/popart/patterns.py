"""PopART's `Patterns`: the graph rewrites a session applies before lowering.

PopART's patterns rewrite its IR (gradient ops into simpler ones, in-placing,
...) without changing what the graph computes. tilefx compiles through its
own passes, so a `Patterns` object is recorded and checked (unknown names are
errors, as in PopART) but does not change results; `str(patterns)` lists what
is enabled, and the level constructors enable the same groups PopART does:
`NoPatterns` none, `Minimal` the gradient rewrites PopART cannot run without,
`Default` those plus the common rewrites and in-placing, `All` every one.
"""

from __future__ import annotations

import enum

from tilefx.popart.errors import popart_exception


class PatternsLevel(enum.Enum):
    NoPatterns = "NoPatterns"
    Minimal = "Minimal"
    Default = "Default"
    All = "All"


# the gradient-op rewrites PopART needs to lower a training graph
_MINIMAL = ("PreUniRepl", "PostNRepl", "SoftMaxGradDirect", "NlllWithSoftMaxGradDirect", "SplitGradOp",
            "SubtractArg1GradOp", "MulArgGradOp", "ReciprocalGradOp", "DivArg0GradOp", "DivArg1GradOp",
            "PowArg0GradOp", "PowArg1GradOp", "SinGradOp", "CosGradOp", "SqrtGradOp", "ExpGradOp",
            "Expm1GradOp", "Log1pGradOp", "LogGradOp", "MatMulOp", "MatMulLhsGradOp", "MatMulRhsGradOp",
            "ConvFlipWeightsGradOp", "InitAccumulate")
_DEFAULT = _MINIMAL + ("OpToIdentity", "NegativeOneScale", "InPlace", "UpdateInplacePrioritiesForIpu",
                       "RandomNormalLikeOpPattern", "RandomUniformLikeOpPattern", "ZerosLikeOpPattern",
                       "DecomposeBinaryConstScalar", "ConvFlipWeightsDoubleFlip")
_ALL = _DEFAULT + ("TiedGather", "TiedGatherAccumulate", "FmodArg0GradOp", "ViewSimplifyPattern",
                   "ExpandCast", "PadSum", "Fuser", "ContiguateIpuCopyIndices", "SumToAdd",
                   "AtanGradOp", "TanToSinOverCos", "LambSerialisedWeight")
_LEVELS = {PatternsLevel.NoPatterns: (), PatternsLevel.Minimal: _MINIMAL,
           PatternsLevel.Default: _DEFAULT, PatternsLevel.All: _ALL}


class Patterns:
    """Which of PopART's patterns are enabled: `Patterns()` (Default),
    `Patterns(PatternsLevel.X)`, or `Patterns(["InPlace", ...])`; each pattern
    is also an attribute (`patterns.InPlace = False`)."""

    def __init__(self, level=PatternsLevel.Default, enableRuntimeAsserts: bool = True):
        if isinstance(level, PatternsLevel):
            enabled = _LEVELS[level]
        elif isinstance(level, (list, tuple)) and all(isinstance(n, str) for n in level):
            enabled = tuple(_check(n) for n in level)
        else:
            raise popart_exception(f"Patterns expects a PatternsLevel or a list of pattern names, got {level!r}")
        object.__setattr__(self, "_enabled", {n: n in enabled for n in _ALL})
        object.__setattr__(self, "_runtime_asserts", bool(enableRuntimeAsserts))

    def enablePattern(self, name: str, enabled: bool) -> Patterns:
        self._enabled[_check(name)] = bool(enabled)
        return self

    def isPatternEnabled(self, name: str) -> bool:
        return self._enabled[_check(name)]

    def enableRuntimeAsserts(self, enabled: bool) -> Patterns:
        object.__setattr__(self, "_runtime_asserts", bool(enabled))
        return self

    @property
    def runtimeAssertsOn(self) -> bool:
        return self._runtime_asserts

    def enableInPlace(self, enabled: bool) -> Patterns:
        return self.enablePattern("InPlace", enabled)

    @property
    def inplaceEnabled(self) -> bool:
        return self._enabled["InPlace"]

    def __getattr__(self, name: str):
        enabled = self.__dict__.get("_enabled", {})
        name = _ALIASES.get(name, name)
        if name in enabled:
            return enabled[name]
        raise AttributeError(f"'Patterns' has no attribute {name!r}")

    def __setattr__(self, name: str, value) -> None:
        name = _ALIASES.get(name, name)
        if name not in self._enabled:
            raise AttributeError(f"'Patterns' has no pattern {name!r} (patterns: {', '.join(_ALL)})")
        self._enabled[name] = bool(value)

    def __str__(self) -> str:
        return "Patterns(" + ", ".join(n for n, on in self._enabled.items() if on) + ")"

    __repr__ = __str__


# PopART's spellings of a few names vary between releases
_ALIASES = {"SoftmaxGradDirect": "SoftMaxGradDirect", "NlllWithSoftmaxGradDirect": "NlllWithSoftMaxGradDirect",
            "MatMulLHSGradOp": "MatMulLhsGradOp", "MatMulRHSGradOp": "MatMulRhsGradOp"}


def _check(name: str) -> str:
    name = _ALIASES.get(name, name)
    if name not in _ALL:
        raise popart_exception(f"unknown pattern {name!r} (patterns: {', '.join(_ALL)})")
    return name


def check_patterns(patterns) -> Patterns:
    """A session's `patterns` argument: None (Default), a Patterns, a level or a list of names."""
    if patterns is None:
        return Patterns()
    if isinstance(patterns, Patterns):
        return patterns
    if isinstance(patterns, (PatternsLevel, list, tuple)):
        return Patterns(patterns)
    raise popart_exception(f"patterns must be a popart.Patterns, got {type(patterns).__name__}")
