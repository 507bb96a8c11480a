"""DeviceManager and DeviceInfo (seeds/001 section 5.3), on simulated machines.

tilefx has no physical IPUs: every device is the machine model
(tilefx.backend.machine) with a number of IPUs and tiles per IPU.

- `createCpuDevice()`: one simulated IPU (PopART's CPU backend runs the
  graph on the host; here it is the same executor, and the profile is the
  one-IPU machine model).
- `createIpuModelDevice({"numIPUs": n, "tilesPerIPU": t})`: the IPU Model
  with n IPUs of t tiles.
- `createOfflineIPUDevice({"numIPUs": n, "tilesPerIPU": t})`: a device to
  compile for; the simulated machine runs it too.
- `enumerateDevices()`, `acquireAvailableDevice(n)`, `acquireDeviceById(id)`:
  a simulated IPU-POD16 (as `gc-info` lists it): ids 0-15 are single IPUs,
  16-23 pairs, 24-27 groups of four, 28-29 of eight and 30 all sixteen. A
  device holds its IPUs from attach to detach; acquiring IPUs that another
  attached device holds fails as on a real system.
"""

from __future__ import annotations

import enum
import gc
import weakref
from dataclasses import replace

from tilefx.backend.machine import MK2, Machine
from tilefx.popart.errors import popart_exception

POD_IPUS = 16


class DeviceType(enum.Enum):
    IpuModel = "IpuModel"
    Cpu = "Cpu"
    Ipu = "Ipu"
    OfflineIpu = "OfflineIpu"
    Sim = "Sim"


class DeviceConnectionType(enum.Enum):
    Always = "Always"
    OnDemand = "OnDemand"
    Never = "Never"


class SyncPattern(enum.Enum):
    Full = "Full"
    SinglePipeline = "SinglePipeline"
    ReplicaAndLadder = "ReplicaAndLadder"


def _groups() -> list[tuple[int, ...]]:
    out = []
    size = 1
    while size <= POD_IPUS:
        out += [tuple(range(s, s + size)) for s in range(0, POD_IPUS, size)]
        size *= 2
    return out


# (simulated) IPU -> the device attached to it; a device nobody holds any more is
# released, as PopART's DeviceInfo detaches when it is destroyed
_HELD: dict[int, weakref.ref] = {}


def _held() -> set[int]:
    for i in [i for i, ref in _HELD.items() if ref() is None or not ref()._attached]:
        del _HELD[i]
    return set(_HELD)


def _free(ipus) -> bool:
    if not set(ipus) & _held():
        return True
    gc.collect()  # devices only reachable from dropped sessions
    return not set(ipus) & _held()


class DeviceInfo:
    """A (simulated) device: `numIpus`, `tilesPerIPU`, `id`, `type`, attach/detach."""

    def __init__(self, type: DeviceType, num_ipus: int, tiles: int, id: int = 0,
                 ipus: tuple[int, ...] = (), connection: DeviceConnectionType = DeviceConnectionType.Always):
        self.type = type
        self.numIpus = num_ipus
        self.tilesPerIPU = tiles
        self.id = id
        self.ipus = ipus
        self.connectionType = connection
        self._attached = False

    @property
    def machine(self) -> Machine:
        return MK2 if self.tilesPerIPU == MK2.tiles else replace(MK2, tiles=self.tilesPerIPU)

    @property
    def isAttached(self) -> bool:
        return self._attached

    @property
    def version(self) -> str:
        return "ipu2"

    @property
    def driverIds(self) -> list[int]:
        return list(self.ipus)

    def attach(self) -> bool:
        """Take the device's IPUs (False if another device holds one of them)."""
        if self._attached:
            return True
        if not _free(self.ipus):
            return False
        for i in self.ipus:
            _HELD[i] = weakref.ref(self)
        self._attached = True
        return True

    def tryAttachUntilTimeout(self) -> bool:
        return self.attach()

    def detach(self) -> None:
        for i in self.ipus:
            if i in _HELD and _HELD[i]() is self:
                del _HELD[i]
        self._attached = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.detach()
        return False

    def __repr__(self) -> str:
        return (f"Device Type:{self.type.value} Connection Type:{self.connectionType.value} "
                f"Id:{self.id} Version:{self.version} NumIPUs:{self.numIpus} NumTilesPerIPU:{self.tilesPerIPU}")

    __str__ = __repr__


def _opts(options: dict | None, what: str) -> tuple[int, int]:
    options = dict(options or {})
    unknown = set(options) - {"numIPUs", "tilesPerIPU", "ipuVersion", "syncPattern", "compileIPUCode"}
    if unknown:
        raise popart_exception(f"{what}: unknown option(s) {sorted(unknown)}")
    n = int(options.get("numIPUs", 1))
    t = int(options.get("tilesPerIPU", MK2.tiles))
    if n < 1 or t < 1:
        raise popart_exception(f"{what}: numIPUs and tilesPerIPU must be positive (got {n}, {t})")
    if t > MK2.tiles:
        raise popart_exception(f"{what}: tilesPerIPU {t} exceeds the {MK2.tiles} tiles of an IPU")
    return n, t


class DeviceManager:
    """Creates and acquires (simulated) devices."""

    def createCpuDevice(self) -> DeviceInfo:
        return DeviceInfo(DeviceType.Cpu, 1, MK2.tiles)

    def createIpuModelDevice(self, options: dict | None = None) -> DeviceInfo:
        n, t = _opts(options, "createIpuModelDevice")
        return DeviceInfo(DeviceType.IpuModel, n, t)

    def createSimDevice(self, options: dict | None = None) -> DeviceInfo:
        n, t = _opts(options, "createSimDevice")
        return DeviceInfo(DeviceType.Sim, n, t)

    def createOfflineIPUDevice(self, options: dict | None = None) -> DeviceInfo:
        n, t = _opts(options, "createOfflineIPUDevice")
        return DeviceInfo(DeviceType.OfflineIpu, n, t)

    def enumerateDevices(self, pattern: SyncPattern = SyncPattern.Full, numIpus: int = 1,
                         deviceType: DeviceType = DeviceType.Ipu, connectionType=DeviceConnectionType.Always,
                         tilesPerIPU: int = 0) -> list[DeviceInfo]:
        tiles = tilesPerIPU or MK2.tiles
        return [DeviceInfo(DeviceType.Ipu, len(g), tiles, i, g, connectionType)
                for i, g in enumerate(_groups())]

    def acquireAvailableDevice(self, numIpus: int = 1, tilesPerIpu: int = 0,
                               pattern: SyncPattern = SyncPattern.Full,
                               connectionType: DeviceConnectionType = DeviceConnectionType.Always,
                               selectionCriterion=None) -> DeviceInfo:
        if numIpus < 1 or numIpus & (numIpus - 1) or numIpus > POD_IPUS:
            raise popart_exception(f"acquireAvailableDevice: cannot acquire {numIpus} IPUs: the simulated "
                                   f"system has {POD_IPUS} IPUs in groups of a power of two")
        for dev in self.enumerateDevices(numIpus=numIpus, connectionType=connectionType,
                                         tilesPerIPU=tilesPerIpu):
            if dev.numIpus == numIpus and _free(dev.ipus):
                if connectionType == DeviceConnectionType.Always:
                    dev.attach()
                return dev
        raise popart_exception(f"acquireAvailableDevice: no device with {numIpus} free IPU(s): "
                               f"IPUs {sorted(_held())} are attached to other devices")

    def acquireDeviceById(self, id: int, pattern: SyncPattern = SyncPattern.Full,
                          connectionType: DeviceConnectionType = DeviceConnectionType.Always) -> DeviceInfo:
        devices = self.enumerateDevices(connectionType=connectionType)
        if not 0 <= id < len(devices):
            raise popart_exception(f"acquireDeviceById: no device {id}: the simulated IPU-POD{POD_IPUS} "
                                   f"has devices 0 to {len(devices) - 1}")
        dev = devices[id]
        if connectionType == DeviceConnectionType.Always and not dev.attach():
            raise popart_exception(f"acquireDeviceById: device {id} (IPUs {list(dev.ipus)}) is in use")
        return dev
