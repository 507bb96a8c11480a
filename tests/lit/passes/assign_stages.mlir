// RUN: tilefx-opt %s --split-input-file --verify-diagnostics -p 'ipu-assign-stages{gradient-accumulation=7 device-iterations=2}' | filecheck %s --check-prefixes=CHECK,SAME
// RUN: tilefx-opt %s --split-input-file --verify-diagnostics -p 'ipu-assign-stages{gradient-accumulation=7 device-iterations=2 auto-stage="auto_increment"}' | filecheck %s --check-prefixes=CHECK,AUTO

// `ipu-assign-stages` writes stage, IPU and phase into every `#ipu.place`.
// Both RUNs use gradientAccumulation 7 (= 2P-1 for the 4-stage model, the
// smallest allowed) and deviceIterations 2 (= P for the 2-stage inference
// model). The first RUN uses the default AutoStage.SameAsIpu, the second
// AutoStage.AutoIncrement; both give the same result whenever the blocks
// carry IPU ids in increasing order or the module names an explicit
// `ipu.strategy`. --verify-diagnostics keeps going after a chunk's error.

// (a) SameAsIpu, four blocks on IPUs 0..3, training: P = 4 forward stages,
// 2P-1 = 7 pipeline stages. The backward of forward stage k is stage 6-k on
// the IPU of stage k; B4's backward shares stage 3 with its forward.
// (e) %g has no block: it takes the latest stage among its operands (B2's,
// stage 1, not B1's stage 0). The constant %c (no placement at all) takes the
// stage of its earliest user (B3, stage 2); the backward seed (`bwd`, no
// block) that of its only user, B4's backward (stage 3), and stays `bwd`.
// (g) the module gets the `ipu.stages` summary.

// CHECK-LABEL: builtin.module attributes {ipu.stages = {kind = "pipelined", num_ipus = 4 : i64, forward_stages = 4 : i64, pipeline_stages = 7 : i64, phases = 1 : i64, training = 1 : i64}} {
// CHECK-NEXT:    func.func @main(
// CHECK-NEXT:    %h1 = aten.mm %x, %w1 {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0, stage = 0, phase = 0>}
// CHECK-NEXT:    %a1 = aten.relu %h1 {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0, stage = 0, phase = 0>}
// CHECK-NEXT:    %h2 = aten.mm %a1, %w2 {ipu.place = #ipu.place<fwd, block = "B2", ipu = 1, stage = 1, phase = 0>}
// CHECK-NEXT:    %c = aten.full {ipu.place = #ipu.place<fwd, block = "B3", ipu = 2, stage = 2, phase = 0>, size = array<i64: 2, 4>
// CHECK-NEXT:    %g = aten.mul.Tensor %a1, %h2 {ipu.place = #ipu.place<fwd, block = "B2", ipu = 1, stage = 1, phase = 0>}
// CHECK-NEXT:    %h3 = aten.mul.Tensor %g, %c {ipu.place = #ipu.place<fwd, block = "B3", ipu = 2, stage = 2, phase = 0>}
// CHECK-NEXT:    %y = aten.mul.Tensor %h3, %c {ipu.place = #ipu.place<fwd, block = "B4", ipu = 3, stage = 3, phase = 0>}
// CHECK-NEXT:    %loss = aten.sum %y {ipu.place = #ipu.place<fwd, block = "B4", ipu = 3, stage = 3, phase = 0>}
// CHECK-NEXT:    %seed = aten.full {ipu.place = #ipu.place<bwd, block = "B4", ipu = 3, stage = 3, phase = 0>, size = array<i64: 2, 4>
// CHECK-NEXT:    %gy = aten.mul.Tensor %seed, %c {ipu.place = #ipu.place<bwd, block = "B4", ipu = 3, stage = 3, phase = 0>}
// CHECK-NEXT:    %gg = aten.mul.Tensor %gy, %c {ipu.place = #ipu.place<bwd, block = "B3", ipu = 2, stage = 4, phase = 0>}
// CHECK-NEXT:    %gh2 = aten.mul.Tensor %gg, %a1 {ipu.place = #ipu.place<bwd, block = "B2", ipu = 1, stage = 5, phase = 0>}
// CHECK-NEXT:    %a1t = aten.permute %a1 {ipu.place = #ipu.place<bwd, block = "B2", ipu = 1, stage = 5, phase = 0>
// CHECK-NEXT:    %gw2 = aten.mm %a1t, %gh2 {ipu.place = #ipu.place<bwd, block = "B2", ipu = 1, stage = 5, phase = 0>}
// CHECK-NEXT:    %gh1 = aten.threshold_backward %gh2, %a1 {ipu.place = #ipu.place<bwd, block = "B1", ipu = 0, stage = 6, phase = 0>
// CHECK-NEXT:    %xt = aten.permute %x {ipu.place = #ipu.place<bwd, block = "B1", ipu = 0, stage = 6, phase = 0>
// CHECK-NEXT:    %gw1 = aten.mm %xt, %gh1 {ipu.place = #ipu.place<bwd, block = "B1", ipu = 0, stage = 6, phase = 0>}
// CHECK-NEXT:    func.return %loss, %gw1, %gw2

func.func @main(%w1: tensor<4x4xf32> {tilefx.param = "w1"}, %w2: tensor<4x4xf32> {tilefx.param = "w2"}, %x: tensor<2x4xf32> {tilefx.input = 0 : i64})
    -> (tensor<f32> {tilefx.output = 0 : i64, tilefx.loss}, tensor<4x4xf32> {tilefx.grad = "w1"}, tensor<4x4xf32> {tilefx.grad = "w2"}) {
  %h1 = aten.mm %x, %w1 {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0>} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %a1 = aten.relu %h1 {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0>} : tensor<2x4xf32> -> tensor<2x4xf32>
  %h2 = aten.mm %a1, %w2 {ipu.place = #ipu.place<fwd, block = "B2", ipu = 1>} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %c = aten.full {size = array<i64: 2, 4>, fill_value = 5.0e-01 : f64, dtype = f32} : tensor<2x4xf32>
  %g = aten.mul.Tensor %a1, %h2 {ipu.place = #ipu.place<fwd>} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %h3 = aten.mul.Tensor %g, %c {ipu.place = #ipu.place<fwd, block = "B3", ipu = 2>} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %y = aten.mul.Tensor %h3, %c {ipu.place = #ipu.place<fwd, block = "B4", ipu = 3>} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %loss = aten.sum %y {ipu.place = #ipu.place<fwd, block = "B4", ipu = 3>} : tensor<2x4xf32> -> tensor<f32>
  %seed = aten.full {ipu.place = #ipu.place<bwd>, size = array<i64: 2, 4>, fill_value = 1.0 : f64, dtype = f32} : tensor<2x4xf32>
  %gy = aten.mul.Tensor %seed, %c {ipu.place = #ipu.place<bwd, block = "B4", ipu = 3>} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %gg = aten.mul.Tensor %gy, %c {ipu.place = #ipu.place<bwd, block = "B3", ipu = 2>} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %gh2 = aten.mul.Tensor %gg, %a1 {ipu.place = #ipu.place<bwd, block = "B2", ipu = 1>} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %a1t = aten.permute %a1 {ipu.place = #ipu.place<bwd, block = "B2", ipu = 1>, dims = array<i64: 1, 0>} : tensor<2x4xf32> -> tensor<4x2xf32>
  %gw2 = aten.mm %a1t, %gh2 {ipu.place = #ipu.place<bwd, block = "B2", ipu = 1>} : tensor<4x2xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
  %gh1 = aten.threshold_backward %gh2, %a1 {ipu.place = #ipu.place<bwd, block = "B1", ipu = 0>, threshold = 0.0 : f64} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %xt = aten.permute %x {ipu.place = #ipu.place<bwd, block = "B1", ipu = 0>, dims = array<i64: 1, 0>} : tensor<2x4xf32> -> tensor<4x2xf32>
  %gw1 = aten.mm %xt, %gh1 {ipu.place = #ipu.place<bwd, block = "B1", ipu = 0>} : tensor<4x2xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
  func.return %loss, %gw1, %gw2 : tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// -----
// (b) Blocks without IPU ids. SameAsIpu needs an id on every block; with
// AutoIncrement block k (in program order) becomes stage k on IPU k.

// SAME: block 'B1' has no ipu_id: with AutoStage.SameAsIpu every block needs one
// SAME-NOT: builtin.module

// AUTO-LABEL: builtin.module attributes {ipu.stages = {kind = "pipelined", num_ipus = 2 : i64, forward_stages = 2 : i64, pipeline_stages = 3 : i64, phases = 1 : i64, training = 1 : i64}} {
// AUTO:         %h = aten.mm %x, %w1 {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0, stage = 0, phase = 0>}
// AUTO-NEXT:    %a = aten.relu %h {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0, stage = 0, phase = 0>}
// AUTO-NEXT:    %y = aten.mm %a, %w2 {ipu.place = #ipu.place<fwd, block = "B2", ipu = 1, stage = 1, phase = 0>}
// AUTO-NEXT:    %loss = aten.sum %y {ipu.place = #ipu.place<fwd, block = "B2", ipu = 1, stage = 1, phase = 0>}
// AUTO-NEXT:    %gy = aten.relu %a {ipu.place = #ipu.place<bwd, block = "B2", ipu = 1, stage = 1, phase = 0>}
// AUTO-NEXT:    %gh = aten.threshold_backward %gy, %a {ipu.place = #ipu.place<bwd, block = "B1", ipu = 0, stage = 2, phase = 0>
// AUTO-NEXT:    func.return

func.func @main(%w1: tensor<4x4xf32> {tilefx.param = "w1"}, %w2: tensor<4x4xf32> {tilefx.param = "w2"}, %x: tensor<2x4xf32> {tilefx.input = 0 : i64})
    -> (tensor<f32> {tilefx.output = 0 : i64, tilefx.loss}, tensor<2x4xf32> {tilefx.grad = "w1"}) {
  %h = aten.mm %x, %w1 {ipu.place = #ipu.place<fwd, block = "B1">} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %a = aten.relu %h {ipu.place = #ipu.place<fwd, block = "B1">} : tensor<2x4xf32> -> tensor<2x4xf32>
  %y = aten.mm %a, %w2 {ipu.place = #ipu.place<fwd, block = "B2">} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %loss = aten.sum %y {ipu.place = #ipu.place<fwd, block = "B2">} : tensor<2x4xf32> -> tensor<f32>
  %gy = aten.relu %a {ipu.place = #ipu.place<bwd, block = "B2">} : tensor<2x4xf32> -> tensor<2x4xf32>
  %gh = aten.threshold_backward %gy, %a {ipu.place = #ipu.place<bwd, block = "B1">, threshold = 0.0 : f64} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  func.return %loss, %gh : tensor<f32>, tensor<2x4xf32>
}

// -----
// (c) An explicit strategy (`Options.setExecutionStrategy(PipelinedExecution(
// Stage("B1", "B2").ipu(0), Stage("B3").ipu(1)))`) overrides the pass
// options: B1 and B2 share stage 0; the ops before the first block
// (`__start__`) join stage 0.

// CHECK-LABEL: builtin.module attributes {ipu.strategy = {{.*}}, ipu.stages = {kind = "pipelined", num_ipus = 2 : i64, forward_stages = 2 : i64, pipeline_stages = 3 : i64, phases = 1 : i64, training = 1 : i64}} {
// CHECK:         %x0 = aten.relu %x {ipu.place = #ipu.place<fwd, block = "__start__", ipu = 0, stage = 0, phase = 0>}
// CHECK-NEXT:    %h1 = aten.mm %x0, %w1 {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0, stage = 0, phase = 0>}
// CHECK-NEXT:    %a1 = aten.relu %h1 {ipu.place = #ipu.place<fwd, block = "B2", ipu = 0, stage = 0, phase = 0>}
// CHECK-NEXT:    %y = aten.mm %a1, %w2 {ipu.place = #ipu.place<fwd, block = "B3", ipu = 1, stage = 1, phase = 0>}
// CHECK-NEXT:    %loss = aten.sum %y {ipu.place = #ipu.place<fwd, block = "B3", ipu = 1, stage = 1, phase = 0>}
// CHECK-NEXT:    %seed = aten.full {ipu.place = #ipu.place<bwd, block = "B3", ipu = 1, stage = 1, phase = 0>
// CHECK-NEXT:    %a1t = aten.permute %a1 {ipu.place = #ipu.place<bwd, block = "B3", ipu = 1, stage = 1, phase = 0>
// CHECK-NEXT:    %gw2 = aten.mm %a1t, %seed {ipu.place = #ipu.place<bwd, block = "B3", ipu = 1, stage = 1, phase = 0>}
// CHECK-NEXT:    %w2t = aten.permute %w2 {ipu.place = #ipu.place<bwd, block = "B3", ipu = 1, stage = 1, phase = 0>
// CHECK-NEXT:    %ga1 = aten.mm %seed, %w2t {ipu.place = #ipu.place<bwd, block = "B3", ipu = 1, stage = 1, phase = 0>}
// CHECK-NEXT:    %gh1 = aten.threshold_backward %ga1, %a1 {ipu.place = #ipu.place<bwd, block = "B2", ipu = 0, stage = 2, phase = 0>
// CHECK-NEXT:    %x0t = aten.permute %x0 {ipu.place = #ipu.place<bwd, block = "B1", ipu = 0, stage = 2, phase = 0>
// CHECK-NEXT:    %gw1 = aten.mm %x0t, %gh1 {ipu.place = #ipu.place<bwd, block = "B1", ipu = 0, stage = 2, phase = 0>}

module attributes {ipu.strategy = {kind = "pipelined", auto_stage = "same_as_ipu", stages = [{blocks = ["B1", "B2"], ipu = 0 : i64}, {blocks = ["B3"], ipu = 1 : i64}]}} {
  func.func @main(%w1: tensor<4x4xf32> {tilefx.param = "w1"}, %w2: tensor<4x4xf32> {tilefx.param = "w2"}, %x: tensor<2x4xf32> {tilefx.input = 0 : i64})
      -> (tensor<f32> {tilefx.output = 0 : i64, tilefx.loss}, tensor<4x4xf32> {tilefx.grad = "w1"}, tensor<4x4xf32> {tilefx.grad = "w2"}) {
    %x0 = aten.relu %x {ipu.place = #ipu.place<fwd, block = "__start__">} : tensor<2x4xf32> -> tensor<2x4xf32>
    %h1 = aten.mm %x0, %w1 {ipu.place = #ipu.place<fwd, block = "B1">} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    %a1 = aten.relu %h1 {ipu.place = #ipu.place<fwd, block = "B2">} : tensor<2x4xf32> -> tensor<2x4xf32>
    %y = aten.mm %a1, %w2 {ipu.place = #ipu.place<fwd, block = "B3">} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    %loss = aten.sum %y {ipu.place = #ipu.place<fwd, block = "B3">} : tensor<2x4xf32> -> tensor<f32>
    %seed = aten.full {ipu.place = #ipu.place<bwd>, size = array<i64: 2, 4>, fill_value = 1.0 : f64, dtype = f32} : tensor<2x4xf32>
    %a1t = aten.permute %a1 {ipu.place = #ipu.place<bwd, block = "B3">, dims = array<i64: 1, 0>} : tensor<2x4xf32> -> tensor<4x2xf32>
    %gw2 = aten.mm %a1t, %seed {ipu.place = #ipu.place<bwd, block = "B3">} : tensor<4x2xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
    %w2t = aten.permute %w2 {ipu.place = #ipu.place<bwd, block = "B3">, dims = array<i64: 1, 0>} : tensor<4x4xf32> -> tensor<4x4xf32>
    %ga1 = aten.mm %seed, %w2t {ipu.place = #ipu.place<bwd, block = "B3">} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    %gh1 = aten.threshold_backward %ga1, %a1 {ipu.place = #ipu.place<bwd, block = "B2">, threshold = 0.0 : f64} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
    %x0t = aten.permute %x0 {ipu.place = #ipu.place<bwd, block = "B1">, dims = array<i64: 1, 0>} : tensor<2x4xf32> -> tensor<4x2xf32>
    %gw1 = aten.mm %x0t, %gh1 {ipu.place = #ipu.place<bwd, block = "B1">} : tensor<4x2xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
    func.return %loss, %gw1, %gw2 : tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>
  }
}

// -----
// (c') Consecutive Stages on the same IPU merge into one pipeline stage:
// Stage("B1").ipu(0), Stage("B2").ipu(0), Stage("B3").ipu(1) gives the same
// two forward stages as above.

// CHECK-LABEL: builtin.module attributes {ipu.strategy = {{.*}}, ipu.stages = {kind = "pipelined", num_ipus = 2 : i64, forward_stages = 2 : i64, pipeline_stages = 3 : i64, phases = 1 : i64, training = 1 : i64}} {
// CHECK:         %h1 = aten.mm %x, %w1 {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0, stage = 0, phase = 0>}
// CHECK-NEXT:    %a1 = aten.relu %h1 {ipu.place = #ipu.place<fwd, block = "B2", ipu = 0, stage = 0, phase = 0>}
// CHECK-NEXT:    %y = aten.mm %a1, %w2 {ipu.place = #ipu.place<fwd, block = "B3", ipu = 1, stage = 1, phase = 0>}
// CHECK-NEXT:    %gy = aten.relu %y {ipu.place = #ipu.place<bwd, block = "B3", ipu = 1, stage = 1, phase = 0>}
// CHECK-NEXT:    %gh = aten.threshold_backward %gy, %a1 {ipu.place = #ipu.place<bwd, block = "B2", ipu = 0, stage = 2, phase = 0>
// CHECK-NEXT:    %gx = aten.mul.Tensor %gh, %h1 {ipu.place = #ipu.place<bwd, block = "B1", ipu = 0, stage = 2, phase = 0>}

module attributes {ipu.strategy = {kind = "pipelined", stages = [{blocks = ["B1"], ipu = 0 : i64}, {blocks = ["B2"], ipu = 0 : i64}, {blocks = ["B3"], ipu = 1 : i64}]}} {
  func.func @main(%w1: tensor<4x4xf32> {tilefx.param = "w1"}, %w2: tensor<4x4xf32> {tilefx.param = "w2"}, %x: tensor<2x4xf32> {tilefx.input = 0 : i64})
      -> (tensor<2x4xf32> {tilefx.output = 0 : i64, tilefx.loss}, tensor<2x4xf32> {tilefx.grad = "w1"}) {
    %h1 = aten.mm %x, %w1 {ipu.place = #ipu.place<fwd, block = "B1">} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    %a1 = aten.relu %h1 {ipu.place = #ipu.place<fwd, block = "B2">} : tensor<2x4xf32> -> tensor<2x4xf32>
    %y = aten.mm %a1, %w2 {ipu.place = #ipu.place<fwd, block = "B3">} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    %gy = aten.relu %y {ipu.place = #ipu.place<bwd, block = "B3">} : tensor<2x4xf32> -> tensor<2x4xf32>
    %gh = aten.threshold_backward %gy, %a1 {ipu.place = #ipu.place<bwd, block = "B2">, threshold = 0.0 : f64} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
    %gx = aten.mul.Tensor %gh, %h1 {ipu.place = #ipu.place<bwd, block = "B1">} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
    func.return %y, %gx : tensor<2x4xf32>, tensor<2x4xf32>
  }
}

// -----
// (d) Serial phased execution, one stage per phase: forward phases 0, 1, 2;
// the backward phases mirror them (B3: 2, B2: 3, B1: 4), the last phase
// running forward and backward. Phased stages never merge (B1 and B3 are
// both on IPU 0), and gradientAccumulation is not checked.

// CHECK-LABEL: builtin.module attributes {ipu.strategy = {{.*}}, ipu.stages = {kind = "serial_phased", num_ipus = 2 : i64, forward_stages = 3 : i64,
// CHECK:         %x0 = aten.relu %x {ipu.place = #ipu.place<fwd, block = "__start__", ipu = 0, stage = 0, phase = 0>}
// CHECK-NEXT:    %h1 = aten.mm %x0, %w1 {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0, stage = 0, phase = 0>}
// CHECK-NEXT:    %a1 = aten.relu %h1 {ipu.place = #ipu.place<fwd, block = "B2", ipu = 1, stage = 1, phase = 1>}
// CHECK-NEXT:    %y = aten.mm %a1, %w2 {ipu.place = #ipu.place<fwd, block = "B3", ipu = 0, stage = 2, phase = 2>}
// CHECK-NEXT:    %loss = aten.sum %y {ipu.place = #ipu.place<fwd, block = "B3", ipu = 0, stage = 2, phase = 2>}
// CHECK-NEXT:    %seed = aten.full {ipu.place = #ipu.place<bwd, block = "B3", ipu = 0, stage = 2, phase = 2>
// CHECK-NEXT:    %a1t = aten.permute %a1 {ipu.place = #ipu.place<bwd, block = "B3", ipu = 0, stage = 2, phase = 2>
// CHECK-NEXT:    %gw2 = aten.mm %a1t, %seed {ipu.place = #ipu.place<bwd, block = "B3", ipu = 0, stage = 2, phase = 2>}
// CHECK-NEXT:    %gh1 = aten.threshold_backward %seed, %a1 {ipu.place = #ipu.place<bwd, block = "B2", ipu = 1, stage = 3, phase = 3>
// CHECK-NEXT:    %x0t = aten.permute %x0 {ipu.place = #ipu.place<bwd, block = "B1", ipu = 0, stage = 4, phase = 4>
// CHECK-NEXT:    %gw1 = aten.mm %x0t, %gh1 {ipu.place = #ipu.place<bwd, block = "B1", ipu = 0, stage = 4, phase = 4>}

module attributes {ipu.strategy = {kind = "serial_phased", phases = [{stages = [{blocks = ["B1"], ipu = 0 : i64}]}, {stages = [{blocks = ["B2"], ipu = 1 : i64}]}, {stages = [{blocks = ["B3"], ipu = 0 : i64}]}], separate_backward = false, liveness = "AlwaysLive"}} {
  func.func @main(%w1: tensor<4x4xf32> {tilefx.param = "w1"}, %w2: tensor<4x4xf32> {tilefx.param = "w2"}, %x: tensor<2x4xf32> {tilefx.input = 0 : i64})
      -> (tensor<f32> {tilefx.output = 0 : i64, tilefx.loss}, tensor<4x4xf32> {tilefx.grad = "w1"}) {
    %x0 = aten.relu %x {ipu.place = #ipu.place<fwd, block = "__start__">} : tensor<2x4xf32> -> tensor<2x4xf32>
    %h1 = aten.mm %x0, %w1 {ipu.place = #ipu.place<fwd, block = "B1">} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    %a1 = aten.relu %h1 {ipu.place = #ipu.place<fwd, block = "B2">} : tensor<2x4xf32> -> tensor<2x4xf32>
    %y = aten.mm %a1, %w2 {ipu.place = #ipu.place<fwd, block = "B3">} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    %loss = aten.sum %y {ipu.place = #ipu.place<fwd, block = "B3">} : tensor<2x4xf32> -> tensor<f32>
    %seed = aten.full {ipu.place = #ipu.place<bwd>, size = array<i64: 2, 4>, fill_value = 1.0 : f64, dtype = f32} : tensor<2x4xf32>
    %a1t = aten.permute %a1 {ipu.place = #ipu.place<bwd, block = "B3">, dims = array<i64: 1, 0>} : tensor<2x4xf32> -> tensor<4x2xf32>
    %gw2 = aten.mm %a1t, %seed {ipu.place = #ipu.place<bwd, block = "B3">} : tensor<4x2xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
    %gh1 = aten.threshold_backward %seed, %a1 {ipu.place = #ipu.place<bwd, block = "B2">, threshold = 0.0 : f64} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
    %x0t = aten.permute %x0 {ipu.place = #ipu.place<bwd, block = "B1">, dims = array<i64: 1, 0>} : tensor<2x4xf32> -> tensor<4x2xf32>
    %gw1 = aten.mm %x0t, %gh1 {ipu.place = #ipu.place<bwd, block = "B1">} : tensor<4x2xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
    func.return %loss, %gw1 : tensor<f32>, tensor<4x4xf32>
  }
}

// -----
// (d') The same with separate_backward = true: the backward phases are one
// later (B3: 3, B2: 4, B1: 5), so the last forward phase and the first
// backward phase are distinct.

// CHECK-LABEL: builtin.module attributes {ipu.strategy = {{.*}}, ipu.stages = {kind = "serial_phased", num_ipus = 2 : i64, forward_stages = 3 : i64,
// CHECK:         %x0 = aten.relu %x {ipu.place = #ipu.place<fwd, block = "__start__", ipu = 0, {{.*}}phase = 0>}
// CHECK-NEXT:    %h1 = aten.mm %x0, %w1 {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0, {{.*}}phase = 0>}
// CHECK-NEXT:    %a1 = aten.relu %h1 {ipu.place = #ipu.place<fwd, block = "B2", ipu = 1, {{.*}}phase = 1>}
// CHECK-NEXT:    %y = aten.mm %a1, %w2 {ipu.place = #ipu.place<fwd, block = "B3", ipu = 0, {{.*}}phase = 2>}
// CHECK-NEXT:    %loss = aten.sum %y {ipu.place = #ipu.place<fwd, block = "B3", ipu = 0, {{.*}}phase = 2>}
// CHECK-NEXT:    %seed = aten.full {ipu.place = #ipu.place<bwd, block = "B3", ipu = 0, {{.*}}phase = 3>
// CHECK-NEXT:    %a1t = aten.permute %a1 {ipu.place = #ipu.place<bwd, block = "B3", ipu = 0, {{.*}}phase = 3>
// CHECK-NEXT:    %gw2 = aten.mm %a1t, %seed {ipu.place = #ipu.place<bwd, block = "B3", ipu = 0, {{.*}}phase = 3>}
// CHECK-NEXT:    %gh1 = aten.threshold_backward %seed, %a1 {ipu.place = #ipu.place<bwd, block = "B2", ipu = 1, {{.*}}phase = 4>
// CHECK-NEXT:    %x0t = aten.permute %x0 {ipu.place = #ipu.place<bwd, block = "B1", ipu = 0, {{.*}}phase = 5>
// CHECK-NEXT:    %gw1 = aten.mm %x0t, %gh1 {ipu.place = #ipu.place<bwd, block = "B1", ipu = 0, {{.*}}phase = 5>}

module attributes {ipu.strategy = {kind = "serial_phased", phases = [{stages = [{blocks = ["B1"], ipu = 0 : i64}]}, {stages = [{blocks = ["B2"], ipu = 1 : i64}]}, {stages = [{blocks = ["B3"], ipu = 0 : i64}]}], separate_backward = true, liveness = "AlwaysLive"}} {
  func.func @main(%w1: tensor<4x4xf32> {tilefx.param = "w1"}, %w2: tensor<4x4xf32> {tilefx.param = "w2"}, %x: tensor<2x4xf32> {tilefx.input = 0 : i64})
      -> (tensor<f32> {tilefx.output = 0 : i64, tilefx.loss}, tensor<4x4xf32> {tilefx.grad = "w1"}) {
    %x0 = aten.relu %x {ipu.place = #ipu.place<fwd, block = "__start__">} : tensor<2x4xf32> -> tensor<2x4xf32>
    %h1 = aten.mm %x0, %w1 {ipu.place = #ipu.place<fwd, block = "B1">} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    %a1 = aten.relu %h1 {ipu.place = #ipu.place<fwd, block = "B2">} : tensor<2x4xf32> -> tensor<2x4xf32>
    %y = aten.mm %a1, %w2 {ipu.place = #ipu.place<fwd, block = "B3">} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
    %loss = aten.sum %y {ipu.place = #ipu.place<fwd, block = "B3">} : tensor<2x4xf32> -> tensor<f32>
    %seed = aten.full {ipu.place = #ipu.place<bwd>, size = array<i64: 2, 4>, fill_value = 1.0 : f64, dtype = f32} : tensor<2x4xf32>
    %a1t = aten.permute %a1 {ipu.place = #ipu.place<bwd, block = "B3">, dims = array<i64: 1, 0>} : tensor<2x4xf32> -> tensor<4x2xf32>
    %gw2 = aten.mm %a1t, %seed {ipu.place = #ipu.place<bwd, block = "B3">} : tensor<4x2xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
    %gh1 = aten.threshold_backward %seed, %a1 {ipu.place = #ipu.place<bwd, block = "B2">, threshold = 0.0 : f64} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
    %x0t = aten.permute %x0 {ipu.place = #ipu.place<bwd, block = "B1">, dims = array<i64: 1, 0>} : tensor<2x4xf32> -> tensor<4x2xf32>
    %gw1 = aten.mm %x0t, %gh1 {ipu.place = #ipu.place<bwd, block = "B1">} : tensor<4x2xf32>, tensor<2x4xf32> -> tensor<4x4xf32>
    func.return %loss, %gw1 : tensor<f32>, tensor<4x4xf32>
  }
}

// -----
// (d'') Parallel phased, Stages without an IPU over blocks entered on two
// IPUs (PopTorch's phased tests: `Block(f"{phase}", ipu_id=ipu)`): each op
// keeps its IPU, one stage per (Stage, IPU) in its phase; a backward op keeps
// its annotated IPU too (B1's on IPU 2: the backward of stage 1, 2*4-2-1 = 5).

// CHECK-LABEL: builtin.module attributes {ipu.strategy = {{.*}}, ipu.stages = {kind = "parallel_phased", num_ipus = 4 : i64, forward_stages = 4 : i64, pipeline_stages = 6 : i64, phases = 3 : i64, training = 1 : i64}} {
// CHECK:         %a = aten.relu %x {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0, stage = 0, phase = 0>}
// CHECK-NEXT:    %b = aten.relu %x {ipu.place = #ipu.place<fwd, block = "B1", ipu = 2, stage = 1, phase = 0>}
// CHECK-NEXT:    %c = aten.mul.Tensor %a, %b {ipu.place = #ipu.place<fwd, block = "B2", ipu = 1, stage = 2, phase = 1>}
// CHECK-NEXT:    %d = aten.mul.Tensor %b, %a {ipu.place = #ipu.place<fwd, block = "B2", ipu = 3, stage = 3, phase = 1>}
// CHECK-NEXT:    %loss = aten.sum %d {ipu.place = #ipu.place<fwd, block = "B2", ipu = 3, stage = 3, phase = 1>}
// CHECK-NEXT:    %g = aten.relu %c {ipu.place = #ipu.place<bwd, block = "B1", ipu = 2, stage = 5, phase = 2>}

module attributes {ipu.strategy = {kind = "parallel_phased", phases = [{stages = [{blocks = ["B1"]}]}, {stages = [{blocks = ["B2"]}]}], separate_backward = false, liveness = "AlwaysLive"}} {
  func.func @main(%x: tensor<2x4xf32> {tilefx.input = 0 : i64}) -> (tensor<f32> {tilefx.output = 0 : i64, tilefx.loss}, tensor<2x4xf32> {tilefx.output = 1 : i64}) {
    %a = aten.relu %x {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0>} : tensor<2x4xf32> -> tensor<2x4xf32>
    %b = aten.relu %x {ipu.place = #ipu.place<fwd, block = "B1", ipu = 2>} : tensor<2x4xf32> -> tensor<2x4xf32>
    %c = aten.mul.Tensor %a, %b {ipu.place = #ipu.place<fwd, block = "B2", ipu = 1>} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
    %d = aten.mul.Tensor %b, %a {ipu.place = #ipu.place<fwd, block = "B2", ipu = 3>} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
    %loss = aten.sum %d {ipu.place = #ipu.place<fwd, block = "B2", ipu = 3>} : tensor<2x4xf32> -> tensor<f32>
    %g = aten.relu %c {ipu.place = #ipu.place<bwd, block = "B1", ipu = 2>} : tensor<2x4xf32> -> tensor<2x4xf32>
    func.return %loss, %g : tensor<f32>, tensor<2x4xf32>
  }
}

// -----
// (f) Inference (no `bwd` op) over 2 stages with deviceIterations = 2: no
// backward stages. Glue %o (no placement at all) follows its latest operand
// (stage 1); constant %k its only user (stage 1); the unused constant %u
// falls back to the first block.

// CHECK-LABEL: builtin.module attributes {ipu.stages = {kind = "pipelined", num_ipus = 2 : i64, forward_stages = 2 : i64, pipeline_stages = 2 : i64, phases = 1 : i64, training = 0 : i64}} {
// CHECK:         %h = aten.mm %x, %w1 {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0, stage = 0, phase = 0>}
// CHECK-NEXT:    %a = aten.relu %h {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0, stage = 0, phase = 0>}
// CHECK-NEXT:    %k = aten.full {ipu.place = #ipu.place<fwd, block = "B2", ipu = 1, stage = 1, phase = 0>
// CHECK-NEXT:    %u = aten.full {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0, stage = 0, phase = 0>
// CHECK-NEXT:    %y = aten.mm %a, %w2 {ipu.place = #ipu.place<fwd, block = "B2", ipu = 1, stage = 1, phase = 0>}
// CHECK-NEXT:    %m = aten.mul.Tensor %y, %k {ipu.place = #ipu.place<fwd, block = "B2", ipu = 1, stage = 1, phase = 0>}
// CHECK-NEXT:    %o = aten.mul.Tensor %a, %m {ipu.place = #ipu.place<fwd, block = "B2", ipu = 1, stage = 1, phase = 0>}
// CHECK-NEXT:    func.return %m, %o
// CHECK-NOT:     bwd

func.func @main(%w1: tensor<4x4xf32> {tilefx.param = "w1"}, %w2: tensor<4x4xf32> {tilefx.param = "w2"}, %x: tensor<2x4xf32> {tilefx.input = 0 : i64})
    -> (tensor<2x4xf32> {tilefx.output = 0 : i64}, tensor<2x4xf32> {tilefx.output = 1 : i64}) {
  %h = aten.mm %x, %w1 {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0>} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %a = aten.relu %h {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0>} : tensor<2x4xf32> -> tensor<2x4xf32>
  %k = aten.full {size = array<i64: 2, 4>, fill_value = 2.0 : f64, dtype = f32} : tensor<2x4xf32>
  %u = aten.full {size = array<i64: 2, 4>, fill_value = 0.0 : f64, dtype = f32} : tensor<2x4xf32>
  %y = aten.mm %a, %w2 {ipu.place = #ipu.place<fwd, block = "B2", ipu = 1>} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %m = aten.mul.Tensor %y, %k {ipu.place = #ipu.place<fwd, block = "B2", ipu = 1>} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %o = aten.mul.Tensor %a, %m : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  func.return %m, %o : tensor<2x4xf32>, tensor<2x4xf32>
}
