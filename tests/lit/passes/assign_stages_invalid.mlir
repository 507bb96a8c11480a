// RUN: tilefx-opt %s --split-input-file --verify-diagnostics -p 'ipu-assign-stages{gradient-accumulation=3 device-iterations=3}' | filecheck %s
// RUN: tilefx-opt %s --split-input-file --verify-diagnostics -p 'ipu-assign-stages{gradient-accumulation=3 device-iterations=3 auto-round-num-ipus=true}' | filecheck %s --check-prefix=ROUND
// RUN: not tilefx-opt %s --split-input-file -p 'ipu-assign-stages{gradient-accumulation=3 device-iterations=3}' 2>&1 | filecheck %s --check-prefix=FIRST
// RUN: not tilefx-opt %s --split-input-file -p 'ipu-assign-stages{strategy="sequential"}' 2>&1 | filecheck %s --check-prefix=KIND

// Violations of PopTorch's placement rules. Each chunk breaks one rule;
// --verify-diagnostics prints each chunk's diagnostic on stdout and goes on.
// Without it, tilefx-opt stops at the first error: `error: <message>` on
// stderr, exit code 1 (FIRST, KIND).

// KIND: error: ipu-assign-stages: unknown execution strategy 'sequential'

// Pipelined training over 4 forward stages (IPUs 0..3) has 2*4-1 = 7
// pipeline stages and needs gradientAccumulation >= 7.

// CHECK: pipelined training over 4 forward stages has 7 pipeline stages and needs gradientAccumulation >= 7, got 3
// ROUND: pipelined training over 4 forward stages has 7 pipeline stages and needs gradientAccumulation >= 7, got 3
// FIRST: error: pipelined training over 4 forward stages has 7 pipeline stages and needs gradientAccumulation >= 7, got 3
// FIRST-NOT: builtin.module
// FIRST-NOT: error:

func.func @main(%w: tensor<4x4xf32> {tilefx.param = "w"}, %x: tensor<2x4xf32> {tilefx.input = 0 : i64})
    -> (tensor<f32> {tilefx.output = 0 : i64, tilefx.loss}, tensor<2x4xf32> {tilefx.grad = "w"}) {
  %h = aten.mm %x, %w {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0>} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %a = aten.relu %h {ipu.place = #ipu.place<fwd, block = "B2", ipu = 1>} : tensor<2x4xf32> -> tensor<2x4xf32>
  %b = aten.relu %a {ipu.place = #ipu.place<fwd, block = "B3", ipu = 2>} : tensor<2x4xf32> -> tensor<2x4xf32>
  %loss = aten.sum %b {ipu.place = #ipu.place<fwd, block = "B4", ipu = 3>} : tensor<2x4xf32> -> tensor<f32>
  %seed = aten.full {ipu.place = #ipu.place<bwd>, size = array<i64: 2, 4>, fill_value = 1.0 : f64, dtype = f32} : tensor<2x4xf32>
  %gb = aten.threshold_backward %seed, %b {ipu.place = #ipu.place<bwd, block = "B3", ipu = 2>, threshold = 0.0 : f64} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %ga = aten.threshold_backward %gb, %a {ipu.place = #ipu.place<bwd, block = "B2", ipu = 1>, threshold = 0.0 : f64} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  func.return %loss, %ga : tensor<f32>, tensor<2x4xf32>
}

// -----
// Pipelined inference over 4 stages needs deviceIterations >= 4.

// CHECK: pipelined inference over 4 stages needs deviceIterations >= 4, got 3
// ROUND: pipelined inference over 4 stages needs deviceIterations >= 4, got 3

func.func @main(%w: tensor<4x4xf32> {tilefx.param = "w"}, %x: tensor<2x4xf32> {tilefx.input = 0 : i64})
    -> (tensor<f32> {tilefx.output = 0 : i64}) {
  %h = aten.mm %x, %w {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0>} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %a = aten.relu %h {ipu.place = #ipu.place<fwd, block = "B2", ipu = 1>} : tensor<2x4xf32> -> tensor<2x4xf32>
  %b = aten.relu %a {ipu.place = #ipu.place<fwd, block = "B3", ipu = 2>} : tensor<2x4xf32> -> tensor<2x4xf32>
  %y = aten.sum %b {ipu.place = #ipu.place<fwd, block = "B4", ipu = 3>} : tensor<2x4xf32> -> tensor<f32>
  func.return %y : tensor<f32>
}

// -----
// IPUs 0 and 2 make 3 IPUs: not a power of two, unless autoRoundNumIPUs.
// With it the model is 2 forward stages (IPU 0, IPU 2), 3 pipeline stages,
// and gradientAccumulation 3 is enough.

// CHECK: the model's blocks are on IPUs 0-2: The model specifies the use of 3 IPUs, however PopTorch must reserve a minimum of 4 in order to allow the model to run, because PopTorch must reserve a power of 2 or a multiple of 64 IPUs. Please reconfigure your model to use a different number of IPUs or set poptorch.Options().autoRoundNumIPUs(True).
// ROUND-LABEL: builtin.module attributes {ipu.stages = {kind = "pipelined", num_ipus = {{[0-9]+}} : i64, forward_stages = 2 : i64, pipeline_stages = 3 : i64, phases = 1 : i64, training = 1 : i64}} {
// ROUND:         %h = aten.mm %x, %w {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0, stage = 0, phase = 0>}
// ROUND-NEXT:    %y = aten.mm %h, %w {ipu.place = #ipu.place<fwd, block = "B2", ipu = 2, stage = 1, phase = 0>}
// ROUND-NEXT:    %gy = aten.mul.Tensor %y, %h {ipu.place = #ipu.place<bwd, block = "B2", ipu = 2, stage = 1, phase = 0>}
// ROUND-NEXT:    %gh = aten.mul.Tensor %gy, %x {ipu.place = #ipu.place<bwd, block = "B1", ipu = 0, stage = 2, phase = 0>}

func.func @main(%w: tensor<4x4xf32> {tilefx.param = "w"}, %x: tensor<2x4xf32> {tilefx.input = 0 : i64})
    -> (tensor<2x4xf32> {tilefx.output = 0 : i64, tilefx.loss}, tensor<2x4xf32> {tilefx.grad = "w"}) {
  %h = aten.mm %x, %w {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0>} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %y = aten.mm %h, %w {ipu.place = #ipu.place<fwd, block = "B2", ipu = 2>} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %gy = aten.mul.Tensor %y, %h {ipu.place = #ipu.place<bwd, block = "B2", ipu = 2>} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %gh = aten.mul.Tensor %gy, %x {ipu.place = #ipu.place<bwd, block = "B1", ipu = 0>} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  func.return %y, %gh : tensor<2x4xf32>, tensor<2x4xf32>
}

// -----
// SameAsIpu: B1 on IPU 1 is stage 1, B2 on IPU 0 is stage 0, but B2 uses B1.

// CHECK: stage ids must not decrease along the data flow: aten.relu in block 'B2' (stage 0) uses a value of aten.mm in block 'B1' (stage 1)
// ROUND: stage ids must not decrease along the data flow

func.func @main(%w: tensor<4x4xf32> {tilefx.param = "w"}, %x: tensor<2x4xf32> {tilefx.input = 0 : i64})
    -> (tensor<2x4xf32> {tilefx.output = 0 : i64}) {
  %h = aten.mm %x, %w {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1>} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %a = aten.relu %h {ipu.place = #ipu.place<fwd, block = "B2", ipu = 0>} : tensor<2x4xf32> -> tensor<2x4xf32>
  func.return %a : tensor<2x4xf32>
}

// -----
// The same with explicit Stages listing B2 before B1.

// CHECK: stage ids must not decrease along the data flow: aten.relu in block 'B2' (stage 0) uses a value of aten.relu in block 'B1' (stage 1)

module attributes {ipu.strategy = {kind = "pipelined", stages = [{blocks = ["B2"], ipu = 0 : i64}, {blocks = ["B1"], ipu = 1 : i64}]}} {
  func.func @main(%x: tensor<2x4xf32> {tilefx.input = 0 : i64}) -> (tensor<2x4xf32> {tilefx.output = 0 : i64}) {
    %a = aten.relu %x {ipu.place = #ipu.place<fwd, block = "B1">} : tensor<2x4xf32> -> tensor<2x4xf32>
    %b = aten.relu %a {ipu.place = #ipu.place<fwd, block = "B2">} : tensor<2x4xf32> -> tensor<2x4xf32>
    func.return %b : tensor<2x4xf32>
  }
}

// -----
// Parallel phased execution: even phases on even IPUs, odd on odd ones.

// CHECK: parallel phased execution: phase 0 is even and must run on even IPUs, but a stage is on IPU 1

module attributes {ipu.strategy = {kind = "parallel_phased", phases = [{stages = [{blocks = ["B1"], ipu = 1 : i64}]}, {stages = [{blocks = ["B2"], ipu = 0 : i64}]}], separate_backward = false, liveness = "AlwaysLive"}} {
  func.func @main(%x: tensor<2x4xf32> {tilefx.input = 0 : i64}) -> (tensor<2x4xf32> {tilefx.output = 0 : i64}) {
    %a = aten.relu %x {ipu.place = #ipu.place<fwd, block = "B1">} : tensor<2x4xf32> -> tensor<2x4xf32>
    %b = aten.relu %a {ipu.place = #ipu.place<fwd, block = "B2">} : tensor<2x4xf32> -> tensor<2x4xf32>
    func.return %b : tensor<2x4xf32>
  }
}

// -----
// A Stage naming a block the model does not have.

// CHECK: Stage 1 names block 'B9', which the model does not have (blocks: ['B1', 'B2'])

module attributes {ipu.strategy = {kind = "pipelined", stages = [{blocks = ["B1"], ipu = 0 : i64}, {blocks = ["B9"], ipu = 1 : i64}]}} {
  func.func @main(%x: tensor<2x4xf32> {tilefx.input = 0 : i64}) -> (tensor<2x4xf32> {tilefx.output = 0 : i64}) {
    %a = aten.relu %x {ipu.place = #ipu.place<fwd, block = "B1">} : tensor<2x4xf32> -> tensor<2x4xf32>
    %b = aten.relu %a {ipu.place = #ipu.place<fwd, block = "B2">} : tensor<2x4xf32> -> tensor<2x4xf32>
    func.return %b : tensor<2x4xf32>
  }
}

// -----
// A Phase naming a block the model does not have.

// CHECK: Phase 1 names block 'B7', which the model does not have (blocks: ['B1', 'B2'])

module attributes {ipu.strategy = {kind = "serial_phased", phases = [{stages = [{blocks = ["B1"], ipu = 0 : i64}]}, {stages = [{blocks = ["B7"], ipu = 0 : i64}]}]}} {
  func.func @main(%x: tensor<2x4xf32> {tilefx.input = 0 : i64}) -> (tensor<2x4xf32> {tilefx.output = 0 : i64}) {
    %a = aten.relu %x {ipu.place = #ipu.place<fwd, block = "B1">} : tensor<2x4xf32> -> tensor<2x4xf32>
    %b = aten.relu %a {ipu.place = #ipu.place<fwd, block = "B2">} : tensor<2x4xf32> -> tensor<2x4xf32>
    func.return %b : tensor<2x4xf32>
  }
}

// -----
// A block left out of every Stage.

// CHECK: blocks ['B2'] are not in any Stage or Phase of the strategy

module attributes {ipu.strategy = {kind = "pipelined", stages = [{blocks = ["B1"], ipu = 0 : i64}]}} {
  func.func @main(%x: tensor<2x4xf32> {tilefx.input = 0 : i64}) -> (tensor<2x4xf32> {tilefx.output = 0 : i64}) {
    %a = aten.relu %x {ipu.place = #ipu.place<fwd, block = "B1">} : tensor<2x4xf32> -> tensor<2x4xf32>
    %b = aten.relu %a {ipu.place = #ipu.place<fwd, block = "B2">} : tensor<2x4xf32> -> tensor<2x4xf32>
    func.return %b : tensor<2x4xf32>
  }
}

// -----
// Phased execution without any Phase.

// CHECK: serial_phased execution needs at least one Phase

module attributes {ipu.strategy = {kind = "serial_phased", phases = []}} {
  func.func @main(%x: tensor<2x4xf32> {tilefx.input = 0 : i64}) -> (tensor<2x4xf32> {tilefx.output = 0 : i64}) {
    %a = aten.relu %x {ipu.place = #ipu.place<fwd, block = "B1">} : tensor<2x4xf32> -> tensor<2x4xf32>
    func.return %a : tensor<2x4xf32>
  }
}

// -----
// SameAsIpu (the default) needs an IPU id on every block.

// CHECK: block 'B2' has no ipu_id: with AutoStage.SameAsIpu every block needs one (or list the blocks in Stage(...) objects)

func.func @main(%x: tensor<2x4xf32> {tilefx.input = 0 : i64}) -> (tensor<2x4xf32> {tilefx.output = 0 : i64}) {
  %a = aten.relu %x {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0>} : tensor<2x4xf32> -> tensor<2x4xf32>
  %b = aten.relu %a {ipu.place = #ipu.place<fwd, block = "B2">} : tensor<2x4xf32> -> tensor<2x4xf32>
  func.return %b : tensor<2x4xf32>
}

// -----
// One block annotated with two IPUs in a pipeline (phased execution keeps
// each op on its IPU: assign_stages.mlir (d'')).

// CHECK: block 'B1' is placed on IPU 0 and on IPU 1

func.func @main(%x: tensor<2x4xf32> {tilefx.input = 0 : i64}) -> (tensor<2x4xf32> {tilefx.output = 0 : i64}) {
  %a = aten.relu %x {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0>} : tensor<2x4xf32> -> tensor<2x4xf32>
  %b = aten.relu %a {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1>} : tensor<2x4xf32> -> tensor<2x4xf32>
  func.return %b : tensor<2x4xf32>
}

// -----
// One Stage whose blocks sit on two IPUs.

// CHECK: stage 0 has blocks on IPU 0 and IPU 1

module attributes {ipu.strategy = {kind = "pipelined", stages = [{blocks = ["B1", "B2"]}]}} {
  func.func @main(%x: tensor<2x4xf32> {tilefx.input = 0 : i64}) -> (tensor<2x4xf32> {tilefx.output = 0 : i64}) {
    %a = aten.relu %x {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0>} : tensor<2x4xf32> -> tensor<2x4xf32>
    %b = aten.relu %a {ipu.place = #ipu.place<fwd, block = "B2", ipu = 1>} : tensor<2x4xf32> -> tensor<2x4xf32>
    func.return %b : tensor<2x4xf32>
  }
}

// -----
// One block listed in two stages (PopTorch: "associated with more than one stage").

// CHECK: block 'B1' is associated with more than one stage

module attributes {ipu.strategy = {kind = "pipelined", stages = [{blocks = ["B1"], ipu = 0 : i64}, {blocks = ["B1", "B2"], ipu = 1 : i64}]}} {
  func.func @main(%x: tensor<2x4xf32> {tilefx.input = 0 : i64}) -> (tensor<2x4xf32> {tilefx.output = 0 : i64}) {
    %a = aten.relu %x {ipu.place = #ipu.place<fwd, block = "B1">} : tensor<2x4xf32> -> tensor<2x4xf32>
    %b = aten.relu %a {ipu.place = #ipu.place<fwd, block = "B2">} : tensor<2x4xf32> -> tensor<2x4xf32>
    func.return %b : tensor<2x4xf32>
  }
}
