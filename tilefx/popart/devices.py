"""DeviceManager and DeviceInfo (PopART user guide, 5.3 "Selecting a device for execution"), on simulated
machines.

tilefx has no physical IPUs: every device is the machine model
(tilefx.backend.machine) with a number of IPUs and tiles per IPU.

- `createCpuDevice()`: one simulated IPU (PopART's CPU backend runs the
  graph on the host; here it is the same executor, and the profile is the
  one-IPU machine model).
- `createIpuModelDevice({"numIPUs": n, "tilesPerIPU": t})`: the IPU Model
  with n IPUs of t tiles.
- `createOfflineIPUDevice({"numIPUs": n, "tilesPerIPU": t})`: a device to
  compile for; the simulated machine runs it too.
- `enumerateDevices(numIpus=n)` (the devices of n IPUs), `acquireAvailableDevice(n)`,
  `acquireDeviceById(id)` (`tryAcquire...`: None when busy):
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

from tilefx.backend.machine import MK1, MK2, Machine
from tilefx.popart.errors import popart_exception, poplar_exception

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
    for i in [i for i, ref in _HELD.items() if ref() is None or not ref().isAttached]:
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
                 ipus: tuple[int, ...] = (), connection: DeviceConnectionType = DeviceConnectionType.Always,
                 version: str = "ipu2"):
        self.type = type
        self.numIpus = num_ipus
        self.tilesPerIPU = tiles
        self.id = id
        self.ipus = ipus
        self.connectionType = connection
        self._version = version
        self._attached = False

    @property
    def machine(self) -> Machine:
        """The simulated IPU: Mk1 for ipuVersion "ipu1", else Mk2, with the device's tiles."""
        base = MK1 if self._version == "ipu1" else MK2
        return base if self.tilesPerIPU == base.tiles else replace(base, tiles=self.tilesPerIPU)

    @property
    def isAttached(self) -> bool:
        return self._attached

    @property
    def version(self) -> str:
        return self._version

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


def _opts(options: dict | None, what: str, default_tiles: int | None = None) -> tuple[int, int, str]:
    """numIPUs, tilesPerIPU and ipuVersion ("ipu1": Mk1, "ipu2": Mk2, the default) of a device's
    options; tilesPerIPU defaults to the whole IPU (`default_tiles` for the simulator: PopART's 4)."""
    options = dict(options or {})
    unknown = set(options) - {"numIPUs", "tilesPerIPU", "ipuVersion", "syncPattern", "compileIPUCode"}
    if unknown:
        raise popart_exception(f"{what}: unknown option(s) {sorted(unknown)}")
    version = str(options.get("ipuVersion", "ipu2"))
    if version not in ("ipu1", "ipu2"):
        raise popart_exception(f"{what}: ipuVersion must be 'ipu1' or 'ipu2', got {version!r}")
    base = MK1 if version == "ipu1" else MK2
    n = int(options.get("numIPUs", 1))
    t = int(options.get("tilesPerIPU", default_tiles or base.tiles))
    if n < 1 or t < 1:
        raise popart_exception(f"{what}: numIPUs and tilesPerIPU must be positive (got {n}, {t})")
    if t > base.tiles:
        raise popart_exception(f"{what}: tilesPerIPU {t} exceeds the {base.tiles} tiles of an {version} IPU")
    return n, t, version


class DeviceManager:
    """Creates and acquires (simulated) devices."""

    def createCpuDevice(self) -> DeviceInfo:
        return DeviceInfo(DeviceType.Cpu, 1, MK2.tiles)

    def __init__(self):
        self.onDemandAttachTimeout = 0

    def setOnDemandAttachTimeout(self, seconds: int) -> None:
        """Recorded: a simulated device attaches at once or not at all (no other process waits)."""
        self.onDemandAttachTimeout = int(seconds)

    def createIpuModelDevice(self, options: dict | None = None) -> DeviceInfo:
        n, t, v = _opts(options, "createIpuModelDevice")
        return DeviceInfo(DeviceType.IpuModel, n, t, version=v)

    def createSimDevice(self, options: dict | None = None) -> DeviceInfo:
        n, t, v = _opts(options, "createSimDevice", default_tiles=4)
        return DeviceInfo(DeviceType.Sim, n, t, version=v)

    def createOfflineIPUDevice(self, options: dict | None = None) -> DeviceInfo:
        n, t, v = _opts(options, "createOfflineIPUDevice")
        return DeviceInfo(DeviceType.OfflineIpu, n, t, version=v)

    def _all(self, connectionType=DeviceConnectionType.Always, tilesPerIPU: int = 0) -> list[DeviceInfo]:
        """Every device of the simulated POD, indexed by id."""
        tiles = tilesPerIPU or MK2.tiles
        return [DeviceInfo(DeviceType.Ipu, len(g), tiles, i, g, connectionType)
                for i, g in enumerate(_groups())]

    def enumerateDevices(self, pattern: SyncPattern = SyncPattern.Full, numIpus: int = 1,
                         deviceType: DeviceType = DeviceType.Ipu, connectionType=DeviceConnectionType.Always,
                         tilesPerIPU: int = 0) -> list[DeviceInfo]:
        """The (simulated) hardware devices of `numIpus` IPUs, as PopART lists them (none of
        another deviceType: IPU Models and CPU devices are created, not enumerated)."""
        if deviceType not in (DeviceType.Ipu, None):
            return []
        return [d for d in self._all(connectionType, tilesPerIPU) if d.numIpus == numIpus]

    def acquireAvailableDevice(self, numIpus: int = 1, tilesPerIpu: int = 0,
                               pattern: SyncPattern = SyncPattern.Full,
                               connectionType: DeviceConnectionType = DeviceConnectionType.Always,
                               selectionCriterion=None) -> DeviceInfo:
        dev = self.tryAcquireAvailableDevice(numIpus, tilesPerIpu, pattern, connectionType, selectionCriterion)
        if dev is None:
            # PopART's message first (its device tests match it)
            why = (f"the simulated system has {POD_IPUS} IPUs in groups of a power of two"
                   if numIpus < 1 or numIpus & (numIpus - 1) or numIpus > POD_IPUS else
                   f"IPUs {sorted(_held())} are attached to other devices")
            raise popart_exception(f"Failed to acquire device with {numIpus} IPUs. Ensure that there are "
                                   f"sufficient IPUs available ({why})")
        return dev

    def tryAcquireAvailableDevice(self, numIpus: int = 1, tilesPerIpu: int = 0,
                                  pattern: SyncPattern = SyncPattern.Full,
                                  connectionType: DeviceConnectionType = DeviceConnectionType.Always,
                                  selectionCriterion=None) -> DeviceInfo | None:
        """As acquireAvailableDevice, but None when no such device is free."""
        for dev in self.enumerateDevices(numIpus=numIpus, connectionType=connectionType,
                                         tilesPerIPU=tilesPerIpu):
            if _free(dev.ipus):
                if connectionType == DeviceConnectionType.Always:
                    dev.attach()
                return dev
        return None

    def acquireDeviceById(self, id: int, pattern: SyncPattern = SyncPattern.Full,
                          connectionType: DeviceConnectionType = DeviceConnectionType.Always) -> DeviceInfo:
        dev = self.tryAcquireDeviceById(id, pattern, connectionType)
        if dev is None:
            raise popart_exception(f"Failed to acquire device with id '{id}' (IPUs "
                                   f"{list(self._all()[id].ipus)} are attached to another device)")
        return dev

    def tryAcquireDeviceById(self, id: int, pattern: SyncPattern = SyncPattern.Full,
                             connectionType: DeviceConnectionType = DeviceConnectionType.Always
                             ) -> DeviceInfo | None:
        """As acquireDeviceById, but None when the device is in use (an unknown id is still
        an error: Poplar's, as PopART passes it on)."""
        devices = self._all(connectionType)
        if isinstance(id, bool) or not isinstance(id, int) or not 0 <= id < len(devices):
            raise poplar_exception(f"No such device set id: '{id}' (the simulated IPU-POD{POD_IPUS} has "
                                   f"devices 0 to {len(devices) - 1})")
        dev = devices[id]
        if connectionType == DeviceConnectionType.Always and not dev.attach():
            return None
        if connectionType != DeviceConnectionType.Always and not _free(dev.ipus):
            return None
        return dev
