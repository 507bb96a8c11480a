"""The names of the IR's attributes and keys, each spelled once.

Every layer above the dialects (lowering, passes, backend, api, tools) refers
to these constants, never to the strings, so a key can be found and renamed in
one place.

Function-level roles (`tilefx.*`): the argument and result attributes that say
what a value of @main or @update is to the executor (a parameter bound by
name, a user input by position, a gradient, an optimizer state, ...).

Op and module attributes of the `ipu` dialect (`ipu.*`): placement, memory
proportion, strategy, optimizer, autocast, stage summary.

Frontend annotation keys: what the PopTorch API stamps on traced nodes
(`node.meta["custom"]`) for the torch lowering to turn into `ipu.place` and
`ipu.autocast`.
"""

# -- roles of @main / @update arguments and results ---------------------------
ROLE_PREFIX = "tilefx."
PARAM_KEY = "tilefx.param"  # a weight, bound by its qualified name
BUFFER_KEY = "tilefx.buffer"  # a module buffer (argument) or its new value (result)
INPUT_KEY = "tilefx.input"  # the n-th user input
CONST_KEY = "tilefx.const"  # a constant tensor lifted from the model
CONST_VALUE_KEY = "tilefx.value"  # a constant's value (a `dense` attribute): data, not a role
OUTPUT_KEY = "tilefx.output"  # the n-th user output
MUTATED_INPUT_KEY = "tilefx.mutated_input"  # the new value of the n-th user input (in-place, out=)
LOSS_KEY = "tilefx.loss"  # marks the output that is the loss
GRAD_KEY = "tilefx.grad"  # the gradient of a named parameter
ACCUM_KEY = "tilefx.accum"  # a gradient accumulator of a named parameter
HYPER_KEY = "tilefx.hyper"  # a variable optimizer hyper-parameter ("lr/0", ...)
STEP_KEY = "tilefx.step"  # the optimizer step counter
STATE_KEY = "tilefx.state"  # an optimizer state tensor ("w/exp_avg", ...)
INIT_KEY = "tilefx.init"  # the initial value of an optimizer state
GROUP_KEY = "tilefx.group"  # the optimizer parameter group of a parameter
ALS_UPPER_KEY = "tilefx.als_upper"  # automatic loss scaling: upper-bin count
LOSS_SEED_KEY = "tilefx.loss_seed"  # op attribute: the backward's seed (dloss = 1)

# -- ipu dialect attributes on ops and the module -----------------------------
PLACE_KEY = "ipu.place"  # #ipu.place<...> on every op
AVAILABLE_MEMORY_KEY = "ipu.available_memory"  # per-op memory proportion
PARTIALS_TYPE_KEY = "ipu.partials_type"  # "half" / "float": a matmul's or convolution's partials (ipu-partials-type)
STRATEGY_KEY = "ipu.strategy"  # the execution strategy, module level
OPTIMIZER_KEY = "ipu.optimizer"  # the optimizer configuration, module level
AUTOCAST_KEY = "ipu.autocast"  # per-op: inside an autocast region (bool)
UPCAST_INPUT_KEY = "ipu.upcast_input"  # per-op: the frontend's cast of a float16 input to float32
STAGES_KEY = "ipu.stages"  # the stage summary left by ipu-assign-stages
ALS_TRACKED_KEY = "ipu.als_tracked_elements"  # loss scaling: tracked gradient size
FUSE_KEY = "ipu.fuse"  # per-op: its elementwise fusion group (ipu-fuse-elementwise)
FUSE_ROOT_KEY = "ipu.fuse_root"  # per-op: the member whose result leaves the group
ATTENTION_KEY = "ipu.attention"  # per-op: its attention group (ipu-fuse-attention)
ATTENTION_ROOT_KEY = "ipu.attention_root"  # per-op: the member whose result is the attention output
AUTO_STAGE_KEY = "ipu.auto_stage"  # ipu-auto-stage's report: cut points, stage cycles and memory

# -- tile dialect attributes on ops (lower-to-device) -------------------------
TILE_MAPPING_KEY = "tile.mapping"  # #tile.linear / #tile.grid: where an op's result lives
TILE_COST_KEY = "tile.cost"  # #tile.cost: what an op costs on its busiest tile

# -- annotation keys the API stamps on traced torch nodes ---------------------
BLOCK_META_KEY = "tilefx.block"
IPU_META_KEY = "tilefx.ipu"
AUTOCAST_META_KEY = "tilefx.autocast"
UPCAST_INPUT_META_KEY = "tilefx.upcast_input"

# -- PopART's annotation attributes on ONNX nodes (Builder.virtualGraph, ...) --
ONNX_IPU_ATTR = "__ipu_number"
ONNX_PIPELINE_STAGE_ATTR = "__pipeline_stage"
ONNX_EXECUTION_PHASE_ATTR = "__execution_phase"
ONNX_AVAILABLE_MEMORY_ATTR = "__available_memory_proportion"
ONNX_SERIALIZE_MODE_ATTR = "__serialize_matmul_mode"
ONNX_SERIALIZE_FACTOR_ATTR = "__serialize_matmul_factor"
ONNX_PARTIALS_TYPE_ATTR = "__partials_type"
NAME_KEY = "ipu.name"  # per-op: module path and NameScope, PopTorch's op name ("enc/fc/mm")
MULTICONV_KEY = "ipu.multiconv"  # per-op: the poptorch.MultiConv group of a convolution
MULTICONV_META_KEY = "tilefx.multiconv"
MODULE_META_KEY = "tilefx.module"
ATTRIBUTES_KEY = "ipu.attributes"  # per-op: a poptorch.Attribute context's attributes (PopART's, e.g. __outline)
ATTRIBUTES_META_KEY = "tilefx.attributes"
LOC_META_KEY = "tilefx.loc"  # the user's "file:line" of a traced node
