"""InferenceSession / TrainingSession, DataFlow, StepIO, SessionOptions (PopART user guide, 5 "Executing
graphs").

A session compiles its ONNX model with the ONNX frontend (lowering/from_onnx)
under a CompileConfig of its own options (`_compile_config`) and runs it
with the HostSettings of its DataFlow and options (`_host_settings`) on the
runner's executor beneath both surfaces (runner/runner.py `Runner`, over
the graph as a torch module): the same passes, numpy executor, host loop
and machine model as PopTorch's. PopART's loop maps onto the driver's:

    batchesPerStep       -> device_iterations
    accumulationFactor   -> gradient_accumulation (training)
    replicatedGraphCount -> replication_factor
    virtualGraph / pipelineStage / executionPhase -> stages, phases (driver/strategy.py)

Buffers have PopART's shapes: an input is [batchesPerStep, accumulationFactor,
replicas, *tensor shape] and an anchor [batchesPerStep (or batchesPerStep / N
for EVERYN), accumulationFactor, replicas, *shape] for ALL/EVERYN and
[replicas, *shape] for FINAL/SUM, with the size-1 dimensions of the leading
three dropped. Any tensor of the graph can be an anchor: it is an extra
output of the traced graph.
"""

from __future__ import annotations

import enum
import os
from typing import ClassVar, Mapping

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from tilefx.dialects.names import (
    ONNX_EXECUTION_PHASE_ATTR,
    ONNX_IPU_ATTR,
    ONNX_PIPELINE_STAGE_ATTR,
)
from tilefx.driver import DEFAULT_STRATEGY, CompileConfig
from tilefx.driver import strategy as strategies
from tilefx.errors import Error
from tilefx.lowering.from_onnx import OnnxModule, load_model
from tilefx.lowering.ipu_torch_ops import identity_loss
from tilefx.lowering.tracing_state import GradientOutputs
from tilefx.popart.builder import ReductionType, TensorInfo, popart_typed, tensor_infos
from tilefx.popart.dataflow import (
    ACCUM_PREFIX,
    GRADIENT_PREFIX,
    AnchorReturnType,
    AnchorReturnTypeId,
    DataFlow,
    PyStepIO,
    PyStepIOCallback,
    PyWeightsIO,
    _check_contiguous,
)
from tilefx.popart.devices import DeviceInfo
from tilefx.popart.errors import (
    OutOfMemoryException,
    popart_exception,
    popart_runtime_error,
)
from tilefx.popart.logger import getLogger
from tilefx.popart.optimizers import Optimizer
from tilefx.popart.patterns import check_patterns
from tilefx.popart.report import Report
from tilefx.popart.state import (
    executor_optimizer_state,
    optimizer_state_initializers,
    rng_state_words,
    set_rng_state_words,
    split_optimizer_state,
    unused_state,
)
from tilefx.runner.runner import Runner
from tilefx.runner.settings import HostSettings

_session_log = getLogger("session")
_devicex_log = getLogger("devicex")


# -- SessionOptions ---------------------------------------------------------
class VirtualGraphMode(enum.Enum):
    Off = "Off"
    Manual = "Manual"
    Auto = "Auto"
    ExecutionPhases = "ExecutionPhases"


class SyntheticDataMode(enum.Enum):
    Off = "Off"
    Zeros = "Zeros"
    RandomNormal = "RandomNormal"


class AccumulateOuterFragmentSchedule(enum.IntEnum):
    """PopART's schedule of the accumulate-outer fragment (the optimizer step after gradient
    accumulation). Downstream libraries pass it as an int to a session option
    (optimum-graphcore's `IPUConfig._to_options`:
    `int(popart.AccumulateOuterFragmentSchedule.OverlapMemoryOptimized)`); the values are PopART's. The
    option is accepted and has no effect on the
    simulated machine's numbers."""

    Scheduler = 0
    Serial = 1
    OverlapCycleOptimized = 2
    OverlapMemoryOptimized = 3


class SubgraphCopyingStrategy(enum.IntEnum):
    """PopART's strategy for copying outlined subgraph inputs and outputs, passed as an int
    by downstream libraries (`int(popart.SubgraphCopyingStrategy.JustInTime)`, optimum-graphcore's
    `IPUConfig._to_options`);
    PopART's values, no effect on the simulated numbers."""

    OnEnterAndExit = 0
    JustInTime = 1


class _ExecutionPhaseSettings:
    def __init__(self):
        self.phases = 0
        self.stages = 2


class SessionOptions:
    """PopART's session options that tilefx implements (others are rejected by name)."""

    _FIELDS: ClassVar[dict] = {
        "enableReplicatedGraphs": False, "replicatedGraphCount": 1,
        "enableGradientAccumulation": False, "accumulationFactor": 1,
        "accumulationAndReplicationReductionType": ReductionType.Sum,
        "virtualGraphMode": VirtualGraphMode.Off, "enablePipelining": False,
        "enableStochasticRounding": False, "engineOptions": None, "reportOptions": None,
        "partialsTypeMatMuls": "", "instrumentWithHardwareCycleCounter": False,
        "syntheticDataMode": SyntheticDataMode.Off, "constantWeights": True,
        "enableOutlining": True, "enableFloatingPointChecks": False, "autoRecomputation": None,
        "executionPhaseSettings": None, "enableEngineCaching": False, "cachePath": "session_cache",
        "logDir": "", "enableLoadAndOffloadRNGState": False, "seed": None,
        "decomposeGradSum": False,
    }

    def __init__(self):
        for k, v in self._FIELDS.items():
            object.__setattr__(self, k, v)
        object.__setattr__(self, "engineOptions", {})
        object.__setattr__(self, "reportOptions", {})
        object.__setattr__(self, "executionPhaseSettings", _ExecutionPhaseSettings())

    # PopART options about scheduling, outlining, code generation and host transfers of the
    # real machine: accepted and kept, with no effect on the simulated machine's numbers
    _NO_EFFECT: ClassVar[frozenset] = frozenset({
        "outlineThreshold", "enableExplicitMainLoops", "useHostCopyOps", "aliasZeroCopy",
        "enablePrefetchDatastreams", "defaultPrefetchBufferingDepth",
        "rearrangeAnchorsOnHost", "rearrangeStreamsOnHost", "enableFullyConnectedPass", "groupHostSync",
        "compileEngine", "hardwareInstrumentations", "explicitRecomputation", "enableNonStableSoftmax",
        "dotChecks", "opxModifyChecking", "opxAliasChecking", "kahnTieBreaker", "swapLimitScheduler", "enableMergeExchange",
        "stashAllTensorsInferencePipeline", "numIOTiles", "enableInplaceAmbiguityChecking",
        "convolutionOptions", "lstmOptions", "matmulOptions", "gclOptions", "customCodelets",
        "enableStableNorm", "disableGradAccumulationTensorStreams", "exportPoplarComputationGraph",
        "exportPoplarVertexGraph", "finalDotOp", "firstDotOp", "timeLimitScheduler",
        "transitiveClosureOptimizationThreshold", "mergeVarUpdate", "mergeVarUpdateMemThreshold",
        "looseThresholdAtPeak", "delayVarUpdates", "scheduleNonWeightUpdateGradientConsumersEarly",
        "separateCallOpPdfs", "subgraphCopyingStrategy", "batchSerializationSettings",
        "accumulateOuterFragmentSettings", "createImplicitPipeliningFwdOnlyProgram",
        "enableConstantFoldingOfMultipleConsumers", "useLoopCandidateCreator",
        "enableSupportedDataTypeCasting", "ensureFp32LossScaleTensor", "enableSerializedMatmuls",
        "enableInplace", "enableReplicatedGraphsRNG", "accumulationTensorLocationSettings",
    })

    def __setattr__(self, name: str, value) -> None:
        if name not in self._FIELDS and name not in self._NO_EFFECT:
            raise AttributeError(f"'SessionOptions' has no option {name!r} supported by tilefx")
        object.__setattr__(self, name, value)

    @property
    def replicas(self) -> int:
        return int(self.replicatedGraphCount) if self.enableReplicatedGraphs else 1

    @property
    def profiling(self) -> bool:
        eng = {k.lower(): str(v).lower() for k, v in (self.engineOptions or {}).items()}
        return eng.get("autoreport.all") == "true" or eng.get("debug.instrument") == "true" or \
            eng.get("autoreport.outputexecutionprofile") == "true"


class InputShapeInfo:
    """Shapes and types of graph inputs the ONNX model leaves dynamic."""

    def __init__(self):
        self._infos: dict[str, TensorInfo] = {}

    def add(self, tensorId: str, tensorInfo: TensorInfo) -> None:
        if not isinstance(tensorInfo, TensorInfo):
            raise popart_exception(f"InputShapeInfo.add: expected a popart.TensorInfo for {tensorId!r}")
        self._infos[tensorId] = tensorInfo

    def has(self, tensorId: str) -> bool:
        return tensorId in self._infos

    def get(self, tensorId: str) -> TensorInfo:
        if tensorId not in self._infos:
            raise popart_exception(f"InputShapeInfo: no shape for {tensorId!r}")
        return self._infos[tensorId]

    def shapes(self) -> dict:
        return {k: (v.shape(), v.np_dtype) for k, v in self._infos.items()}


class _WithLoss(torch.nn.Module):
    """The ONNX module with its loss output marked as the one to minimise."""

    def __init__(self, inner: OnnxModule):
        super().__init__()
        self.inner = inner
        if not any(p.requires_grad for p in inner.parameters()):
            # a graph without weights still trains in PopART (its gradient anchors are
            # the result): an empty parameter lets the training executor exist
            self.no_weights = torch.nn.Parameter(torch.zeros(0))

    def forward(self, *inputs):
        outs = self.inner(*inputs)
        return (identity_loss(outs[0].reshape(()), "none"), *outs[1:])


# -- the sessions -----------------------------------------------------------
class _Session:
    _training = False

    def __init__(self, fnModel, dataFlow: DataFlow, deviceInfo: DeviceInfo | None = None,
                 inputShapeInfo=None, patterns=None, userOptions: SessionOptions | None = None,
                 name: str = "", loss: str | None = None, optimizer: Optimizer | None = None):
        if not isinstance(dataFlow, DataFlow):
            raise popart_exception(f"dataFlow must be a popart.DataFlow, got {type(dataFlow).__name__}")
        if deviceInfo is None:
            raise popart_exception("a session needs a deviceInfo: use popart.DeviceManager() to create or "
                                   "acquire a (simulated) device")
        if not isinstance(deviceInfo, DeviceInfo):
            raise popart_exception(f"deviceInfo must be a popart.DeviceInfo, got {type(deviceInfo).__name__}")
        self.options = userOptions if userOptions is not None else SessionOptions()
        o = self.options
        # PopART's checks of the accumulation options, with its messages
        if o.enableGradientAccumulation and int(o.accumulationFactor) > 1 and not self._training:
            raise popart_exception("Gradient Accumulation only available when training: an "
                                   "InferenceSession takes enableGradientAccumulation = False")
        if not o.enableGradientAccumulation and int(o.accumulationFactor) > 1:
            raise popart_exception("enableGradientAccumulation is false, but accumulationFactor > 1. Either "
                                   "enable gradient accumulation, or set the accumulation factor to 1")
        self.patterns = check_patterns(patterns)  # recorded: tilefx's passes preserve semantics anyway
        self._dataflow = dataFlow
        self.deviceInfo = deviceInfo
        self.name = name
        try:
            self._proto = load_model(fnModel)
        except Error as e:
            raise popart_exception(e.message) from None
        # PopART's optimizer state initializers (modelToHost's): a TrainingSession starts from them
        self._proto, self._saved_state = split_optimizer_state(self._proto)
        g = self._proto.graph
        inits = {t.name for t in g.initializer}
        known = inits | {i.name for i in g.input} | {o for n in g.node for o in n.output}
        for a in dataFlow.anchors():
            if a.startswith(GRADIENT_PREFIX) and not self._training:
                raise popart_exception(f"anchor {a!r} is a gradient: only a TrainingSession computes "
                                       "gradients")
            if a.startswith(GRADIENT_PREFIX) and a[len(GRADIENT_PREFIX):] not in known:
                raise popart_exception(f"gradient anchor {a!r} must name a tensor of the graph after "
                                       f"{GRADIENT_PREFIX!r} (a weight, an input or an operator's output)")
            if a.startswith(ACCUM_PREFIX) and a not in known:
                if not self._training or self.accumulationFactor < 2:
                    raise popart_exception(f"anchor {a!r} is a gradient accumulator: only a TrainingSession "
                                           "with gradient accumulation (enableGradientAccumulation, "
                                           "accumulationFactor > 1) has one")
                if a[len(ACCUM_PREFIX):] not in inits:
                    raise popart_exception(f"accumulator anchor {a!r} must name a weight (an initializer) "
                                           f"after {ACCUM_PREFIX!r}")
                continue
            if a not in known and not a.startswith(GRADIENT_PREFIX):
                raise popart_exception(f"anchor tensor {a!r} is not in the model: an anchor must name a "
                                       f"tensor of the ONNX graph (graph outputs: "
                                       f"{[o.name for o in g.output]})")
        self._loss = loss
        if self._training:
            if not loss:
                raise popart_exception("TrainingSession needs a loss: the id of the scalar loss tensor")
            if loss not in known:
                raise popart_exception(f"loss tensor {loss!r} is not in the model")
            if not isinstance(optimizer, Optimizer):
                raise popart_exception(f"TrainingSession needs a popart optimizer (SGD, ConstSGD, Adam), "
                                       f"got {type(optimizer).__name__}")
        self._optimizer = optimizer
        if self._training:
            loss_shape = self._loss_shape(loss)
            if int(np.prod(loss_shape)) != 1:  # one element, as PopART: a scalar or e.g. shape [1]
                raise popart_exception(f"the loss {loss!r} has shape {tuple(loss_shape)} (reduce it, e.g. "
                                       "aiGraphcore.identityloss(..., ReductionType.Mean)): it must be a "
                                       "scalar tensor")
        # an accumulator anchor is the running sum of its weight's micro-batch gradients
        self._accums = {a: GRADIENT_PREFIX + a[len(ACCUM_PREFIX):] for a in dataFlow.anchors()
                        if a.startswith(ACCUM_PREFIX) and a not in known}
        grads = list(dict.fromkeys([a for a in dataFlow.anchors() if a.startswith(GRADIENT_PREFIX)]
                                   + list(self._accums.values())))
        # gradients of activations (not weights, not inputs) come from probes (OnnxModule)
        self._probes = [a[len(GRADIENT_PREFIX):] for a in grads
                        if a[len(GRADIENT_PREFIX):] not in inits | {i.name for i in g.input}]
        outputs = ([loss] if self._training else []) + [a for a in dataFlow.anchors()
                                                        if a != loss and a not in grads and a not in self._accums]
        self._grad_anchors = grads  # returned after the outputs, in this order
        self._anchor_index = {a: outputs.index(a) for a in dataFlow.anchors()
                              if a not in grads and a not in self._accums}
        self._anchor_index.update({a: len(outputs) + i for i, a in enumerate(grads)})
        self._anchor_index.update({a: self._anchor_index[g] for a, g in self._accums.items()})
        # Manual / ExecutionPhases: the graph's annotations place the ops; Auto: the machine model
        self._placement = self.options.virtualGraphMode not in (VirtualGraphMode.Off, VirtualGraphMode.Auto)
        try:
            shapes = inputShapeInfo.shapes() if isinstance(inputShapeInfo, InputShapeInfo) else None
            self._module = OnnxModule(self._proto, outputs=outputs, training=self._training,
                                      input_shapes=shapes, gradient_probes=self._probes)
        except Error as e:
            raise popart_exception(e.message) from None
        if not self._placement:
            self._module.proto = _strip_annotations(self._module.proto)
        if not outputs:
            raise popart_exception("User must specify an anchor tensor when doing inference.")
        self._info_cache: dict[str, TensorInfo] = {}
        self._executor = None
        self._executable: str | None = None  # given to loadExecutable
        self._prepared = False
        self._engine_loaded = False
        self._cycles = 0
        self._runs = 0

    def _loss_shape(self, loss: str) -> list[int]:
        shapes = {i.name: i for i in self._proto.graph.input}
        try:
            return tensor_infos(self._proto, [loss], None)[loss].shape() if loss not in shapes else \
                [d.dim_value for d in shapes[loss].type.tensor_type.shape.dim]
        except popart_exception:
            return []  # shapes the session cannot know yet (InputShapeInfo): the tracer checks

    # -- facts -----------------------------------------------------------
    @property
    def dataFlow(self) -> DataFlow:
        return self._dataflow

    @property
    def replicationFactor(self) -> int:
        return self.options.replicas

    @property
    def accumulationFactor(self) -> int:
        o = self.options
        return int(o.accumulationFactor) if self._training and o.enableGradientAccumulation else 1

    def getInfo(self, tensorId: str) -> TensorInfo:
        if tensorId not in self._info_cache:
            for name, (shape, dtype) in self._module.input_info.items():
                self._info_cache[name] = TensorInfo(dtype, shape)
            for name in self._module.weight_names:
                t = self._module.tensor(name)
                self._info_cache[name] = TensorInfo(t.detach().numpy().dtype, list(t.shape))
            if tensorId not in self._info_cache:  # every anchor at once: one evaluation of the graph
                wanted = [a for a in dict.fromkeys(_ungrad(t) for t in [tensorId, *self._dataflow.anchors()])
                          if a not in self._info_cache]
                given = {n: (sh, d) for n, (sh, d) in self._module.input_info.items()}
                if wanted:
                    self._info_cache.update(popart_typed(self._proto, tensor_infos(self._proto, wanted, given)))
            for a in [tensorId, *self._dataflow.anchors()]:  # a gradient: its tensor's shape and type
                if a != _ungrad(a) and _ungrad(a) in self._info_cache:
                    self._info_cache[a] = self._info_cache[_ungrad(a)]
        return self._info_cache[tensorId]

    def _lead(self, art: AnchorReturnType | None) -> list[int]:
        """The leading dimensions of a buffer (None: an input)."""
        bps, af, rf = self._dataflow.batchesPerStep(), self.accumulationFactor, self.replicationFactor
        if art is None or art.id() == AnchorReturnTypeId.All:
            dims = [bps, af, rf]
        elif art.id() == AnchorReturnTypeId.EveryN:
            dims = [bps // art.rp(), af, rf]
        else:
            dims = [rf]
        return [d for d in dims if d != 1]

    def initAnchorArrays(self) -> dict[str, np.ndarray]:
        """Empty arrays of the right shape and type for every anchor."""
        out = {}
        for a in self._dataflow.anchors():
            info = self.getInfo(a)
            out[a] = np.empty(self._lead(self._dataflow.art(a)) + info.shape(), dtype=info.np_dtype)
        return out

    # -- compile ---------------------------------------------------------
    def _compile_config(self) -> CompileConfig:
        """The session's options as the compiler driver's CompileConfig: the one
        place PopART's SessionOptions say what a compilation (and its host loop)
        reads. PopART's loop maps onto the driver's: batchesPerStep ->
        device_iterations, accumulationFactor -> gradient_accumulation,
        replicatedGraphCount -> replication_factor."""
        o = self.options
        if str(o.partialsTypeMatMuls).lower() not in ("", "float", "half"):
            raise popart_exception(f"partialsTypeMatMuls must be 'float' or 'half', got {o.partialsTypeMatMuls!r}")
        return CompileConfig(
            training=self._training,
            machine=self.deviceInfo.machine,
            strategy=self._strategy(),
            half_partials=str(o.partialsTypeMatMuls).lower() == "half",
            stochastic_rounding=bool(o.enableStochasticRounding),
            device_iterations=self._dataflow.batchesPerStep(),
            replication_factor=self.replicationFactor,
            gradient_accumulation=self.accumulationFactor,
            # PopART recomputes nothing unless asked (RecomputationType::None); Pipeline by default is PopTorch's
            auto_recomputation=_enum_int(0 if o.autoRecomputation is None else o.autoRecomputation),
            decompose_grad_sum=bool(o.decomposeGradSum),  # the machine model's memory plan (backend/profile.py)
            seed=None if o.seed is None else int(o.seed))

    def _host_settings(self) -> HostSettings:
        """What the session's host loop reads beyond the CompileConfig: every
        output of every micro-batch returned (the anchors' return types pick
        from them, dataflow.py), the training step's reduction, and the engine
        cache (`enableEngineCaching` in `cachePath`)."""
        return HostSettings(mean_reduction=self._training and self._mean_reduction(),
                            cache_dir=str(self.options.cachePath) if self.options.enableEngineCaching else None)

    def _mean_reduction(self) -> bool:
        """Whether a training step averages its gradients over the micro-batches
        and replicas (ReductionType.Mean), else sums them (Sum, PopART's default)."""
        o = self.options
        red = ReductionType(int(o.accumulationAndReplicationReductionType.value
                                if isinstance(o.accumulationAndReplicationReductionType, enum.Enum)
                                else o.accumulationAndReplicationReductionType))
        if red == ReductionType.NoReduction:
            raise popart_exception("accumulationAndReplicationReductionType must be Sum or Mean")
        return red == ReductionType.Mean

    def _strategy(self) -> Mapping:
        """The execution strategy as CompileConfig.strategy holds it (driver/strategy.py)."""
        kind = "pipelined" if self.options.enablePipelining else "sharded"
        schedule = "FillDrain" if self.options.enablePipelining else None  # PopTorch's pipeline schedule
        if self.options.virtualGraphMode == VirtualGraphMode.Auto:
            # PopART's automatic virtual graphs: the graph split over the device's
            # IPUs per replica, here by the machine model (ipu-auto-stage)
            per_replica = self.deviceInfo.numIpus // max(self.replicationFactor, 1)
            return strategies.staged(kind, [], auto_ipus=per_replica, schedule=schedule) if per_replica > 1 \
                else DEFAULT_STRATEGY
        if not self._placement:
            return DEFAULT_STRATEGY
        stage_ipu, phases = {}, set()
        for n in self._proto.graph.node:
            ann = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
            if ONNX_PIPELINE_STAGE_ATTR in ann:
                stage_ipu.setdefault(int(ann[ONNX_PIPELINE_STAGE_ATTR]), int(ann.get(ONNX_IPU_ATTR, 0)))
            if ONNX_EXECUTION_PHASE_ATTR in ann:
                phases.add(int(ann[ONNX_EXECUTION_PHASE_ATTR]))
        mode = self.options.virtualGraphMode
        if mode == VirtualGraphMode.ExecutionPhases and phases:
            return strategies.phased("serial_phased",
                                     [[strategies.stage([f"phase{p}"], p % 2)] for p in sorted(phases)])
        return strategies.staged(kind, [strategies.stage([f"stage{s}"], i) for s, i in sorted(stage_ipu.items())],
                                 schedule=schedule)

    def prepareDevice(self, loadEngine: bool = True) -> None:
        """Compile the graph for the (simulated) device and load the initial weights."""
        _session_log.trace("Session::prepareDevice")
        if self._prepared:
            return
        dev = self.deviceInfo
        if dev.ipus and not dev.isAttached:
            if dev.connectionType.value != "OnDemand":
                raise popart_exception(f"device {dev.id} is not attached (attach() it, or acquire it again)")
            if not dev.attach():  # DeviceConnectionType.OnDemand: attach when first needed
                raise popart_exception(f"device {dev.id} (IPUs {list(dev.ipus)}) is in use")
        self._compile()
        needed = self._executor.profile.num_ipus * self.replicationFactor
        if needed > self.deviceInfo.numIpus:
            raise popart_exception(f"the model needs {needed} IPU(s) ({self._executor.profile.num_ipus} per "
                                   f"replica x {self.replicationFactor} replicas) but the device has "
                                   f"{self.deviceInfo.numIpus}")
        if self._training:
            self._compiled_optimizer = self._optimizer
            if self._saved_state:
                self._load_optimizer_state(self._saved_state, "TrainingSession")
        self._prepared = True
        if loadEngine:
            self.loadEngineAndConnectStreams()

    def loadEngineAndConnectStreams(self) -> None:
        """Load the compiled program onto the device (prepareDevice(loadEngine=False) leaves
        it to this call, or to the first run)."""
        if not self._prepared:
            raise popart_exception("loadEngineAndConnectStreams: there is no compiled engine: call "
                                   "prepareDevice() first")
        if not self._engine_loaded:
            self._engine_loaded = True
            _devicex_log.info("Engine loaded")

    def _compile(self) -> None:
        """The program: from the executable given to loadExecutable, else traced
        and compiled (through the engine cache when `enableEngineCaching`)."""
        if self._executor is not None:
            return
        model = _WithLoss(self._module) if self._training else self._module
        try:
            config = self._compile_config()
            opt = self._optimizer.to_tilefx(self._params() or {"no_weights": model.no_weights}) \
                if self._training else None
            executor = Runner(model, config, self._host_settings(), optimizer=opt)
            requested, inputs = self._requested_gradients(model)
            if self._executable is not None:
                executor.loadExecutable(self._executable)
            else:
                GradientOutputs.requested = requested
                try:
                    executor.compile(*inputs)
                finally:
                    GradientOutputs.requested = ()
        except popart_exception:
            raise
        except Error as e:
            if "memory" in e.message and ("fit" in e.message or "bytes" in e.message):
                raise OutOfMemoryException(e.message, profile_path=self._oom_report(e.message)) from None
            raise popart_exception(e.message) from None
        self._executor = executor
        _devicex_log.info("Graph compiled")

    def _oom_report(self, summary: str) -> str:
        """PopART writes the graph profile of a program that does not fit to the engine
        options' autoReport.directory; tilefx writes its memory summary there."""
        eng = {k.lower(): v for k, v in (self.options.engineOptions or {}).items()}
        directory = eng.get("autoreport.directory")
        if not directory:
            return ""
        path = os.path.join(str(directory), "out_of_memory.txt")
        try:
            os.makedirs(str(directory), exist_ok=True)
            with open(path, "w") as f:
                f.write(summary + "\n")
        except OSError as e:
            raise popart_exception(f"{summary}\n(cannot write the memory report to {path!r}: {e})") from None
        return path

    def compileAndExport(self, executablePath: str) -> None:
        """Compile the session's graph and write the executable (a file that never
        runs code when loaded: tilefx/driver/executable.py) without preparing the device."""
        _session_log.trace("Session::compileAndExport")
        if not isinstance(executablePath, (str, os.PathLike)) or not str(executablePath):
            raise popart_exception(f"compileAndExport needs a file name, got {executablePath!r}")
        self._compile()
        try:
            self._executor.write_executable(str(executablePath))
        except Error as e:
            raise popart_exception(e.message) from None

    def loadExecutable(self, executablePath: str) -> None:
        """Use an executable written by compileAndExport for this graph: prepareDevice
        then loads it instead of compiling (the session's weights are its own)."""
        from tilefx.driver import executable

        _session_log.trace("Session::loadExecutable")
        if self._executor is not None:
            raise popart_exception("loadExecutable: the session is already compiled")
        try:
            executable.read(str(executablePath))  # checked now: a bad file fails here, not later
        except Error as e:
            raise popart_exception(e.message) from None
        self._executable = str(executablePath)

    def _requested_gradients(self, model: torch.nn.Module) -> tuple[tuple, list[torch.Tensor]]:
        """The gradient anchors as the tracer names them (parameter paths, input
        indices) and the example inputs, those whose gradient is anchored
        requiring it."""
        names = list(self._module.input_info)
        inputs = [torch.from_numpy(np.zeros(self._input_shape(n), _host_dtype(d))) for n, (_, d) in
                  self._module.input_info.items()] + self._probe_inputs()
        for i, name in enumerate(self._probes):
            inputs[len(names) + i].requires_grad_(True)
        requested = []
        param_names = {id(p): n for n, p in model.named_parameters()}
        for a in self._grad_anchors:
            name = a[len(GRADIENT_PREFIX):]
            if name in self._module.path:
                tensor = self._module.tensor(name)
                if id(tensor) not in param_names:
                    raise popart_exception(f"gradient anchor {a!r}: {name!r} is not a trained weight")
                requested.append(param_names[id(tensor)])
                continue
            if name in self._probes:
                requested.append(len(names) + self._probes.index(name))
                continue
            x = inputs[names.index(name)]
            if not x.is_floating_point():
                raise popart_exception(f"gradient anchor {a!r}: input {name!r} is {x.dtype}, not a float "
                                       "tensor: it has no gradient")
            x.requires_grad_(True)
            requested.append(names.index(name))
        return tuple(requested), inputs

    def _probe_inputs(self) -> list[torch.Tensor]:
        """Zeros for the gradient probes of a step: one per micro-batch and replica
        (rank-0 tensors get a length-1 dimension to split along)."""
        bps, af, rf = self._dataflow.batchesPerStep(), self.accumulationFactor, self.replicationFactor
        out = []
        for name in self._probes:
            info = self.getInfo(name)
            if not np.issubdtype(info.np_dtype, np.floating):
                raise popart_exception(f"gradient anchor {GRADIENT_PREFIX + name!r}: {name!r} is "
                                       f"{info.np_dtype}, not a float tensor: it has no gradient")
            shape = info.shape() or [1]
            out.append(torch.zeros([bps * af * rf * shape[0]] + shape[1:], dtype=torch.from_numpy(
                np.zeros(0, info.np_dtype)).dtype))
        return out

    def setRandomSeed(self, seedValue: int) -> None:
        """Seed the random operators (Dropout, RandomNormal, ...) from now on."""
        self._check_prepared("setRandomSeed")
        if isinstance(seedValue, bool) or not isinstance(seedValue, (int, np.integer)) or seedValue < 0:
            raise popart_exception(f"setRandomSeed expects a non-negative int, got {seedValue!r}")
        self._executor.random_streams.reseed(int(seedValue))

    def getRNGState(self) -> list[int]:
        """The random generators' state: uint32 words, each replica's in turn
        (state.py); needs SessionOptions.enableLoadAndOffloadRNGState, as PopART."""
        self._check_rng("getRNGState")
        return rng_state_words(self._executor.random_streams.generators)

    def setRNGState(self, rngState) -> None:
        """Continue the random streams from a getRNGState list (of this session's size)."""
        self._check_rng("setRNGState")
        set_rng_state_words(self._executor.random_streams.generators, rngState)

    def _check_rng(self, what: str) -> None:
        self._check_prepared(what)
        if not self.options.enableLoadAndOffloadRNGState:
            raise popart_exception(f"{what}: set SessionOptions.enableLoadAndOffloadRNGState = True to "
                                   "load and offload the random generators' state")

    def _params(self) -> dict:
        m = self._module
        return {n: m.tensor(n) for n in m.weight_names if isinstance(m.tensor(n), torch.nn.Parameter)}

    def _input_shape(self, name: str) -> list[int]:
        shape = self._module.input_info[name][0] or [1]  # a scalar: one element per batch
        bps, af, rf = self._dataflow.batchesPerStep(), self.accumulationFactor, self.replicationFactor
        return [bps * af * rf * shape[0]] + shape[1:]

    def _check_prepared(self, what: str) -> None:
        if not self._prepared:
            raise popart_exception(f"{what}: the session is not prepared: call prepareDevice() first")

    # -- run -------------------------------------------------------------
    def run(self, stepio, debugName: str = "") -> None:
        """Run batchesPerStep batches: read every input's buffer, write every anchor's."""
        _session_log.trace("Session::run %s", debugName)
        self._check_prepared("run")
        self.loadEngineAndConnectStreams()
        bps, af, rf = self._dataflow.batchesPerStep(), self.accumulationFactor, self.replicationFactor
        tensors = []
        for name, (shape, dtype) in self._module.input_info.items():
            if isinstance(stepio, PyStepIOCallback):
                steps = []
                for _ in range(bps * af * rf):
                    x = stepio.input_callback(name, False)
                    _check_contiguous(x, name, "input")
                    x = np.asarray(x)
                    steps.append(self._check_buffer(name, x, shape, dtype, shape))
                    stepio.input_complete_callback(name)
                buf = np.stack(steps).reshape([bps, af, rf] + shape)
            elif isinstance(stepio, PyStepIO):
                if name not in stepio.inputs:
                    raise popart_runtime_error(
                        f"no input buffer for tensor {name!r}: the step needs one of shape "
                        f"{tuple(self._lead(None) + shape)} ({self._explain()}); the StepIO has "
                        f"{sorted(stepio.inputs)}")
                buf = self._check_buffer(name, np.asarray(stepio.inputs[name]), shape, dtype,
                                         self._lead(None) + shape)
            else:
                raise popart_exception(f"run expects a PyStepIO or PyStepIOCallback, got {type(stepio).__name__}")
            tensors.append(torch.from_numpy(np.array(buf, order="C", dtype=_host_dtype(buf.dtype))
                                            .reshape(self._input_shape(name))))
        if isinstance(stepio, PyStepIO):
            for name in stepio.inputs:
                if name not in self._module.input_info:
                    raise popart_runtime_error(f"the StepIO has a buffer for {name!r}, which is not an "
                                               f"input of the model (inputs: {list(self._module.input_info)})")
            for a in self._dataflow.anchors():
                if a not in stepio.outputs:
                    raise popart_runtime_error(f"no output buffer for anchor {a!r} in the StepIO "
                                               "(use session.initAnchorArrays())")
        try:
            outs = self._executor(*tensors, *self._probe_inputs())
        except Error as e:
            raise popart_runtime_error(e.message) from None
        outs = (outs,) if isinstance(outs, torch.Tensor) else tuple(outs)
        for a in self._dataflow.anchors():
            value = self._anchor_value(a, outs[self._anchor_index[a]].numpy())
            if isinstance(stepio, PyStepIOCallback):
                lead = self._lead(self._dataflow.art(a))
                items = value.reshape([-1] + self.getInfo(a).shape()) if lead else value[None]
                for item in items:
                    dst = stepio.output_callback(a)
                    _check_contiguous(dst, a, "output")
                    np.copyto(dst, item.reshape(np.shape(dst)), casting="unsafe")
                    stepio.output_complete_callback(a)
            else:
                dst = stepio.outputs[a]
                if isinstance(dst, np.ndarray) and dst.shape != value.shape and dst.size == value.size:
                    value = value.reshape(dst.shape)  # PopART checks the number of elements only
                if not isinstance(dst, np.ndarray) or dst.shape != value.shape:
                    raise popart_runtime_error(
                        f"the output buffer of anchor {a!r} has shape {tuple(np.shape(dst))}, expected "
                        f"{tuple(value.shape)} ({value.size} elements; "
                        f"{self._explain(self._dataflow.art(a))})")
                np.copyto(dst, value, casting="unsafe")
        self._runs += 1
        self._cycles = self._executor.profile.total_cycles

    def _explain(self, art: AnchorReturnType | None = None) -> str:
        bps, af, rf = self._dataflow.batchesPerStep(), self.accumulationFactor, self.replicationFactor
        what = "[batchesPerStep, accumulationFactor, replicas, *shape]"
        if art is not None and art.id() == AnchorReturnTypeId.EveryN:
            what = "[batchesPerStep / N, accumulationFactor, replicas, *shape]"
        elif art is not None and art.id() in (AnchorReturnTypeId.Final, AnchorReturnTypeId.Sum):
            what = "[replicas, *shape]"
        return (f"{what} without the size-1 dimensions; batchesPerStep={bps}, accumulationFactor={af}, "
                f"replicas={rf}")

    def _check_buffer(self, name, x, shape, dtype, expected) -> np.ndarray:
        if list(x.shape) != list(expected) and x.size == int(np.prod(expected)):
            # PopART's StepIO checks the number of elements, not the shape: a buffer of
            # the right size is read in order (e.g. size-1 dimensions left out or written out)
            x = x.reshape(expected)
        if list(x.shape) != list(expected):
            raise popart_runtime_error(
                f"input buffer of tensor {name!r} has shape {tuple(x.shape)}, expected {tuple(expected)} "
                f"({int(np.prod(expected))} elements; tensor shape {tuple(shape)}; {self._explain()})")
        if x.dtype != dtype:
            if x.dtype.kind != np.dtype(dtype).kind:
                raise popart_runtime_error(f"input buffer of tensor {name!r} has type {x.dtype}, expected "
                                           f"{np.dtype(dtype)}")
            x = x.astype(dtype)
        return x

    def _anchor_value(self, anchor: str, value: np.ndarray) -> np.ndarray:
        bps, af, rf = self._dataflow.batchesPerStep(), self.accumulationFactor, self.replicationFactor
        shape = self.getInfo(anchor).shape()
        v = value.reshape([bps, af, rf] + shape)
        if anchor in self._accums:
            # the accumulator after each micro-batch: each replica's running sum of its
            # gradients over the accumulation loop (the replicas are reduced after it)
            v = np.cumsum(v, axis=1, dtype=v.dtype)
        art = self._dataflow.art(anchor)
        if art.id() == AnchorReturnTypeId.EveryN:
            # PopART's batch counter counts micro-batches: every N-th of the step's
            # batchesPerStep x accumulationFactor ones, (batchesPerStep / N) x
            # accumulationFactor in all (its anchorreturntype tests: N=2, bps=2,
            # accumulation 2 returns micro-batches 2 and 4)
            v = v.reshape([bps * af, rf] + shape)[art.rp() - 1::art.rp()].reshape(
                [bps // art.rp(), af, rf] + shape)
        elif art.id() == AnchorReturnTypeId.Final:
            v = v[-1, -1]
        elif art.id() == AnchorReturnTypeId.Sum:
            v = v.sum(axis=(0, 1), dtype=v.dtype)
        return v.reshape(self._lead(art) + shape)

    # -- weights ---------------------------------------------------------
    def weightsFromHost(self) -> None:
        """Copy the host's weights to the device."""
        _session_log.trace("Session::weightsFromHost")
        self._check_prepared("weightsFromHost")
        _devicex_log.debug("Writing weights from host")
        self._executor.copyWeightsToDevice()

    def weightsToHost(self) -> None:
        """Copy the device's weights to the host."""
        _session_log.trace("Session::weightsToHost")
        self._check_prepared("weightsToHost")
        _devicex_log.debug("Writing weights to host")
        self._executor.copyWeightsToHost()

    def _weight(self, name: str, what: str) -> torch.Tensor:
        if name not in self._module.path:
            raise popart_exception(f"{what}: {name!r} is not a weight of the model (weights: "
                                   f"{', '.join(self._module.weight_names)})")
        return self._module.tensor(name)

    def readWeights(self, weightsIo: PyWeightsIO) -> None:
        """Copy the host's weights (as of the last weightsToHost) into the PyWeightsIO arrays."""
        for name, dst in weightsIo.weights.items():
            src = self._weight(name, "readWeights").detach().numpy()
            if np.shape(dst) != src.shape:
                raise popart_exception(f"readWeights: the buffer of {name!r} has shape {tuple(np.shape(dst))}, "
                                       f"the weight has shape {src.shape}")
            np.copyto(dst, src, casting="unsafe")

    def writeWeights(self, weightsIo: PyWeightsIO) -> None:
        """Write the PyWeightsIO arrays into the host's weights (weightsFromHost then uploads them)."""
        for name, src in weightsIo.weights.items():
            self._set_host(name, np.asarray(src), "writeWeights")

    def _set_host(self, name: str, value: np.ndarray, what: str) -> None:
        t = self._weight(name, what)
        if tuple(value.shape) != tuple(t.shape):
            raise popart_exception(f"{what}: {name!r} has shape {tuple(value.shape)}, the weight has shape "
                                   f"{tuple(t.shape)}")
        with torch.no_grad():
            t.copy_(torch.from_numpy(np.array(value, dtype=t.detach().numpy().dtype, copy=True, order="C")))

    def _onnx_names(self) -> dict[str, str]:
        """The executor's parameter names -> the weights' ONNX names (a TrainingSession's
        module is _WithLoss, holding the graph as `inner`)."""
        lead = "inner." if self._training else ""
        return {lead + path: name for name, path in self._module.path.items()}

    def _load_optimizer_state(self, saved: dict[str, np.ndarray], what: str) -> None:
        """Start the optimizer from PopART's state initializers (state.py)."""
        names = self._onnx_names()
        template = self._executor.optimizer_state_by_weight()
        if template is None:  # no optimizer state on this executor (it keeps none)
            template = {"step": 0, "tensors": {}}
        try:
            state = executor_optimizer_state(saved, template, names, what)
            if state is not None:
                self._executor.load_optimizer_state_by_weight(state)
        except Error as e:
            raise popart_exception(e.message) from None
        for name in unused_state(saved, state, names):
            _session_log.warn("%s: ignoring the optimizer state %r, which the session's %s optimizer "
                              "does not keep", what, name, self._optimizer.kind())

    def modelToHost(self, fn: str) -> None:
        """Write the ONNX model with the device's current weights to file `fn`, and
        in a TrainingSession the optimizer's state as PopART's initializers
        (Accl___w, Accl1___w, Accl2___w, Step___w: state.py), which a
        TrainingSession built from the file resumes from."""
        _session_log.trace("Session::modelToHost")
        if self._prepared:
            self._executor.copyWeightsToHost()
        model = onnx.ModelProto()
        model.CopyFrom(self._proto)
        for init in model.graph.initializer:
            if init.name in self._module.path:
                arr = self._module.tensor(init.name).detach().numpy()
                init.CopyFrom(numpy_helper.from_array(np.asarray(arr, order="C"), init.name))
        if self._training and self._executor is not None:
            model.graph.initializer.extend(
                optimizer_state_initializers(self._executor.optimizer_state_by_weight(), self._onnx_names()))
        try:
            onnx.save(model, fn)
        except OSError as e:
            raise popart_exception(f"modelToHost: cannot write {fn!r}: {e}") from None

    def resetHostWeights(self, modelProtoOrFilename,
                         ignoreWeightsInModelWithoutCorrespondingHostWeight: bool = False) -> None:
        """Load the weights of an ONNX model (file, bytes or proto) into the host's weights;
        a prepared TrainingSession also takes the optimizer state the file holds
        (modelToHost's Accl___ / Accl1___ / Accl2___ / Step___ initializers), as PopART
        resets every tensor of the model it has."""
        try:
            proto = load_model(modelProtoOrFilename)
        except Error as e:
            raise popart_exception(f"resetHostWeights: {e.message}") from None
        state = {}
        if self._training and self._executor is not None and \
                self._executor.optimizer_state_by_weight() is not None:
            proto, state = split_optimizer_state(proto)  # the session keeps these tensors too
        missing = [i.name for i in proto.graph.initializer if i.name not in self._module.path]
        if missing and not ignoreWeightsInModelWithoutCorrespondingHostWeight:
            # checked before any weight changes; PopART's message first (its reset_host_weights test)
            raise popart_exception(f"resetWeights, no tensor '{missing[0]}' in tensors: the model has a "
                                   "weight this session does not (pass "
                                   "ignoreWeightsInModelWithoutCorrespondingHostWeight=True to skip it)")
        for init in proto.graph.initializer:
            if init.name in self._module.path:
                self._set_host(init.name, numpy_helper.to_array(init), "resetHostWeights")
        if state:
            self._load_optimizer_state(state, "resetHostWeights")

    # -- reports ---------------------------------------------------------
    def getSummaryReport(self, resetProfile: bool = True) -> str:
        self._check_prepared("getSummaryReport")
        p = self._executor.profile
        if self.options.profiling:
            return p.table()
        target = (f"Target: {self.deviceInfo.type.value}, {p.num_ipus} IPU(s) x {self.replicationFactor} "
                  f"replica(s), {p.machine.tiles} tiles per IPU ({p.machine.name}, simulated)")
        lines = [target, "Memory:"]
        for ipu, m in sorted(p.memory.items()):
            lines.append(f"  IPU {ipu}: peak {int(m.peak.max())} bytes on tile {int(m.peak.argmax())} "
                         f"of {p.machine.bytes_per_tile}; total {int(m.peak.sum())} bytes")
        lines.append("Execution profiling not enabled")
        return "\n".join(lines)

    def getReport(self) -> Report:
        """The machine model's report (tilefx's libpva Report): the compilation (target,
        memory) always, the execution (cycles, timeline, per-op costs) only when
        engineOptions enable profiling."""
        self._check_prepared("getReport")
        return Report(self._executor.profile, self.options.profiling, self._runs, self.deviceInfo)

    def getCycleCount(self, id: str = "") -> int:
        """Simulated cycles of the last run (needs instrumentWithHardwareCycleCounter)."""
        if not self.options.instrumentWithHardwareCycleCounter:
            raise popart_exception("getCycleCount: set SessionOptions.instrumentWithHardwareCycleCounter = True")
        if self._runs == 0:
            raise popart_exception("getCycleCount: the session has not run yet")
        return int(self._cycles)

    def getIr(self, level: str = "graph") -> str:
        """tilefx: the compiled IR ("import", "graph" or "device")."""
        self._check_prepared("getIr")
        return self._executor.ir(level)


class InferenceSession(_Session):
    """Runs an ONNX graph forward (PopART user guide, 5 "Executing graphs")."""

    def __init__(self, fnModel, dataFlow, deviceInfo=None, inputShapeInfo=None, patterns=None,
                 userOptions=None, name: str = "inference"):
        super().__init__(fnModel, dataFlow, deviceInfo, inputShapeInfo, patterns, userOptions, name)


class TrainingSession(_Session):
    """Trains an ONNX graph: the gradient of `loss`, applied by `optimizer` every step."""

    _training = True

    def __init__(self, fnModel, dataFlow, loss, optimizer, deviceInfo=None, inputShapeInfo=None,
                 patterns=None, userOptions=None, name: str = "training"):
        super().__init__(fnModel, dataFlow, deviceInfo, inputShapeInfo, patterns, userOptions, name,
                         loss=loss, optimizer=optimizer)

    def updateOptimizerFromHost(self, optimizer: Optimizer) -> None:
        """Use new optimizer values from the next run: only the non-constant ones may change."""
        _session_log.trace("Session::updateOptimizerFromHost")
        if not isinstance(optimizer, Optimizer):
            raise popart_exception(f"updateOptimizerFromHost expects a popart optimizer, got "
                                   f"{type(optimizer).__name__}")
        old = self._optimizer
        if optimizer.kind() != old.kind():
            raise popart_exception(f"updateOptimizerFromHost: the session was built with a {old.kind()} "
                                   f"optimizer and cannot change to {optimizer.kind()}")
        weights = list(self._params())
        if sorted(optimizer._specific) != sorted(old._specific):
            raise popart_exception("updateOptimizerFromHost: the weights with specific values differ from "
                                   f"the session's ({sorted(old._specific)} -> {sorted(optimizer._specific)})")
        before, after = old.constants(weights), optimizer.constants(weights)
        if before != after:
            changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
            raise popart_exception(f"updateOptimizerFromHost: constant hyper-parameter(s) {changed} differ "
                                   f"from the session's ({[before.get(k) for k in changed]} -> "
                                   f"{[after.get(k) for k in changed]}); make them non-constant "
                                   "((value, False)) to change them between runs")
        self._optimizer = optimizer
        if self._prepared:
            try:
                self._executor.setOptimizer(optimizer.to_tilefx(self._params()))
            except Error as e:
                raise popart_exception(f"updateOptimizerFromHost: {e.message}") from None


def _host_dtype(dtype) -> np.dtype:
    """The type an input is fed to the simulated device in: PopART's UINT16 /
    UINT32 inputs (indices, lengths) widen to int64, which holds every value."""
    dtype = np.dtype(dtype)
    return np.dtype(np.int64) if dtype in (np.dtype(np.uint16), np.dtype(np.uint32)) else dtype


def _ungrad(tensor_id: str) -> str:
    """The tensor a gradient (or accumulator) id names (itself if neither)."""
    for prefix in (GRADIENT_PREFIX, ACCUM_PREFIX):
        if tensor_id.startswith(prefix):
            return tensor_id[len(prefix):]
    return tensor_id


def _strip_annotations(proto: onnx.ModelProto) -> onnx.ModelProto:
    """virtualGraphMode Off: the placement annotations are ignored."""
    from tilefx.dialects.names import (
        ONNX_AVAILABLE_MEMORY_ATTR,
        ONNX_SERIALIZE_FACTOR_ATTR,
        ONNX_SERIALIZE_MODE_ATTR,
    )

    from tilefx.lowering.from_onnx import all_nodes

    keep = {ONNX_AVAILABLE_MEMORY_ATTR, ONNX_SERIALIZE_MODE_ATTR, ONNX_SERIALIZE_FACTOR_ATTR}
    out = onnx.ModelProto()
    out.CopyFrom(proto)
    for n in all_nodes(out.graph):  # the nodes of Loop / Scan bodies and If branches too
        drop = [a for a in n.attribute if a.name.startswith("__") and a.name not in keep]
        for a in drop:
            n.attribute.remove(a)
    return out



def _enum_int(value):
    """A PopART enum option given as an int or an int enum as a plain int;
    anything else as it is, for CompileConfig to refuse by name."""
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else value
