"""The `tile` dialect: the device level of the simulated IPU.

`lower-to-device` turns the outlined graph IR into this level, where the
machine is explicit:

- `#tile.linear<start = 0, used = 32, grain = 64>`: a tensor spread evenly
  over `used` consecutive tiles (wrapping around) from `start`;
- `#tile.grid<m = 12, n = 16, k = 6, serial = 2>`: the tile grid of a
  matmul / convolution plan and its serial split of the reduction;
- `#tile.cost<cycles = .., compute = .., exchange = .., sync = .., temp = ..>`:
  what an op costs on the busiest tile (the cost model's answer);
- ops for what moves data or waits: `tile.exchange` (an operand brought to
  the tiles that use it), `tile.sync`, `tile.ipu_copy` (IPU-links),
  `tile.host_in` / `tile.host_out` (host streams) and `tile.remote_load` /
  `tile.remote_store` (streaming memory), `tile.all_gather` (a weight
  sharded over the replicas, gathered for its use).

Every op and attribute prints and parses back; the numbers are unchanged by
this level (data movement ops are identities for the executor).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import IntAttr, IntegerAttr, StringAttr, TensorType
from xdsl.ir import Attribute, Dialect, ParametrizedAttribute
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    VarConstraint,
    base,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
)
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException


class _KeyValueAttr(ParametrizedAttribute):
    """`#tile.X<key = int, ...>` with a fixed list of non-negative int keys."""

    KEYS: ClassVar[tuple[str, ...]] = ()

    def print_parameters(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string(", ".join(f"{k} = {getattr(self, k).data}" for k in self.KEYS))

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        parser.parse_punctuation("<")
        values: dict[str, int] = {}
        while True:
            pos = parser.pos
            key = parser.parse_identifier(f" (one of {', '.join(cls.KEYS)})")
            if key not in cls.KEYS or key in values:
                parser.raise_error(f"unexpected or repeated field {key!r} in #{cls.name}", pos, parser.pos)
            parser.parse_punctuation("=")
            values[key] = parser.parse_integer(allow_boolean=False, allow_negative=False)
            if parser.parse_optional_punctuation(",") is None:
                break
        parser.parse_punctuation(">")
        missing = [k for k in cls.KEYS if k not in values]
        if missing:
            parser.raise_error(f"#{cls.name} needs {', '.join(missing)}")
        return tuple(IntAttr(values[k]) for k in cls.KEYS)

    def verify(self) -> None:
        for k in self.KEYS:
            if getattr(self, k).data < 0:
                raise VerifyException(f"#{self.name}: {k} must be >= 0")

    def get(self) -> dict[str, int]:
        return {k: getattr(self, k).data for k in self.KEYS}


@irdl_attr_definition
class LinearMappingAttr(_KeyValueAttr):
    """A tensor spread evenly over `used` tiles from `start`, in grains of `grain` bytes."""

    name = "tile.linear"
    KEYS = ("start", "used", "grain")
    start: IntAttr
    used: IntAttr
    grain: IntAttr

    def __init__(self, start: int, used: int, grain: int):
        super().__init__(IntAttr(start), IntAttr(used), IntAttr(grain))


@irdl_attr_definition
class GridMappingAttr(_KeyValueAttr):
    """The m x n x k tile grid of a matmul/convolution plan and its serial k-steps."""

    name = "tile.grid"
    KEYS = ("m", "n", "k", "serial")
    m: IntAttr
    n: IntAttr
    k: IntAttr
    serial: IntAttr

    def __init__(self, m: int, n: int, k: int, serial: int):
        super().__init__(IntAttr(m), IntAttr(n), IntAttr(k), IntAttr(serial))


@irdl_attr_definition
class CostAttr(_KeyValueAttr):
    """An op's cost on the busiest tile: cycles = compute + exchange + sync."""

    name = "tile.cost"
    KEYS = ("cycles", "compute", "exchange", "sync", "temp")
    cycles: IntAttr
    compute: IntAttr
    exchange: IntAttr
    sync: IntAttr
    temp: IntAttr

    def __init__(self, cycles: int, compute: int, exchange: int, sync: int, temp: int):
        super().__init__(IntAttr(cycles), IntAttr(compute), IntAttr(exchange), IntAttr(sync), IntAttr(temp))

    def verify(self) -> None:
        super().verify()
        total = self.compute.data + self.exchange.data + self.sync.data
        if self.cycles.data != total:
            raise VerifyException(f"#tile.cost: cycles ({self.cycles.data}) must be compute + exchange + "
                                  f"sync ({total})")


def _check_counts(op: IRDLOperation, *names: str) -> None:
    """Cycles, bytes and IPU ids are counts: >= 0."""
    for n in names:
        v = op.properties[n].value.data
        if v < 0:
            raise VerifyException(f"{op.name}: {n} must be >= 0, got {v}")


class _MoveOp(IRDLOperation):
    """An identity on the numbers that moves a tensor somewhere."""

    T: ClassVar = VarConstraint("T", base(TensorType))
    input = operand_def(T)
    result = result_def(T)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$input attr-dict `:` type($result)"
    COUNTS: ClassVar[tuple[str, ...]] = ("cycles",)

    def verify_(self) -> None:
        _check_counts(self, *self.COUNTS)


@irdl_op_definition
class ExchangeOp(_MoveOp):
    """Bring `input` to the tiles of its consumer's plan (`bytes` received per tile)."""

    name = "tile.exchange"
    COUNTS: ClassVar = ("bytes", "cycles")
    bytes = prop_def(IntegerAttr)
    cycles = prop_def(IntegerAttr)


@irdl_op_definition
class IpuCopyOp(_MoveOp):
    """A copy over the IPU-links from IPU `src` to IPU `dst`."""

    name = "tile.ipu_copy"
    COUNTS: ClassVar = ("src", "dst", "cycles")
    src = prop_def(IntegerAttr)
    dst = prop_def(IntegerAttr)
    cycles = prop_def(IntegerAttr)

    def verify_(self) -> None:
        super().verify_()
        if self.src.value.data == self.dst.value.data:
            raise VerifyException(f"tile.ipu_copy: src and dst are both IPU {self.src.value.data} "
                                  "(a copy over the IPU-links joins two IPUs)")


@irdl_op_definition
class HostInOp(_MoveOp):
    """An input streamed from the host into the IPU."""

    name = "tile.host_in"
    cycles = prop_def(IntegerAttr)


@irdl_op_definition
class HostOutOp(_MoveOp):
    """A result streamed from the IPU to the host."""

    name = "tile.host_out"
    cycles = prop_def(IntegerAttr)


@irdl_op_definition
class RemoteLoadOp(_MoveOp):
    """A tensor kept in streaming memory, loaded for its use."""

    name = "tile.remote_load"
    tensor = prop_def(StringAttr)
    cycles = prop_def(IntegerAttr)


@irdl_op_definition
class RemoteStoreOp(_MoveOp):
    """A tensor stored back to streaming memory after its use."""

    name = "tile.remote_store"
    tensor = prop_def(StringAttr)
    cycles = prop_def(IntegerAttr)


@irdl_op_definition
class AllGatherOp(_MoveOp):
    """A tensor sharded over the replicas (replicated tensor sharding),
    gathered whole for its use: `bytes` is the whole tensor."""

    name = "tile.all_gather"
    COUNTS: ClassVar = ("bytes", "cycles")
    tensor = prop_def(StringAttr)
    bytes = prop_def(IntegerAttr)
    cycles = prop_def(IntegerAttr)


@irdl_op_definition
class SyncOp(IRDLOperation):
    """A BSP synchronisation of the tiles (of `ipus` IPUs); `kind`, when
    given, says whether it stays inside an IPU or spans IPUs."""

    name = "tile.sync"
    ipus = prop_def(IntegerAttr)
    cycles = prop_def(IntegerAttr)
    kind = opt_prop_def(StringAttr)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "attr-dict"

    def verify_(self) -> None:
        _check_counts(self, "cycles")
        if self.ipus.value.data < 1:
            raise VerifyException(f"tile.sync: ipus must be >= 1, got {self.ipus.value.data}")
        if self.kind is not None and self.kind.data not in SYNC_KINDS:
            raise VerifyException(f"tile.sync: kind must be one of {SYNC_KINDS}, got {self.kind.data!r}")


SYNC_KINDS = ("internal", "external")


TILE_OPS = [ExchangeOp, IpuCopyOp, HostInOp, HostOutOp, RemoteLoadOp, RemoteStoreOp, AllGatherOp, SyncOp]
TILE_ATTRS = [LinearMappingAttr, GridMappingAttr, CostAttr]
Tile = Dialect("tile", TILE_OPS, TILE_ATTRS)
