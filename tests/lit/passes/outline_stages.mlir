// RUN: tilefx-opt %s --split-input-file -p 'ipu-assign-stages{gradient-accumulation=7 device-iterations=2},ipu-outline-stages' | filecheck %s
// Round trip: the outlined IR parses back and prints the same.
// RUN: tilefx-opt %s --split-input-file -p 'ipu-assign-stages{gradient-accumulation=7 device-iterations=2},ipu-outline-stages' | tilefx-opt --split-input-file | filecheck %s
// Outlining again leaves the outlined IR alone.
// RUN: tilefx-opt %s --split-input-file -p 'ipu-assign-stages{gradient-accumulation=7 device-iterations=2},ipu-outline-stages' | tilefx-opt --split-input-file -p ipu-outline-stages | filecheck %s
// Without stages, outlining fails.
// RUN: not tilefx-opt %s --split-input-file -p ipu-outline-stages 2>&1 | filecheck %s --check-prefix=NOSTAGE

// NOSTAGE: error: aten.mm has no stage: run ipu-assign-stages first
// NOSTAGE-NOT: ipu.stage

// `ipu-outline-stages` puts each pipeline stage's ops into one `ipu.stage`
// region, in stage order, with an `ipu.copy` (one per value and stage) for
// each value computed on another IPU; the values later stages or the return
// use leave through `ipu.yield`.

// Four forward stages on IPUs 0..3, backward stages 3..6 on IPUs 3..0.
// Stage 3 runs B4's forward and backward ("fwd+bwd"). Values on the same IPU
// (%a1 of stage 0 in stage 6, %c of stage 2 in stage 4) need no copy; %c,
// used twice in stage 3, is copied once.

// CHECK-LABEL: builtin.module attributes {ipu.stages = {kind = "pipelined", num_ipus = 4 : i64, forward_stages = 4 : i64, pipeline_stages = 7 : i64, phases = 1 : i64, training = 1 : i64}} {
// CHECK-NEXT:    func.func @main(%w1: tensor<4x4xf32> {tilefx.param = "w1"}, %w2: tensor<4x4xf32> {tilefx.param = "w2"}, %x: tensor<2x4xf32> {tilefx.input = 0 : i64})

// CHECK-NEXT:    %[[S0:[0-9]+]] = ipu.stage {stage = 0 : i64, ipu = 0 : i64, phase = 0 : i64, direction = "fwd"} -> tensor<2x4xf32> {
// CHECK-NEXT:      %h1 = aten.mm %x, %w1 {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0, stage = 0, phase = 0>}
// CHECK-NEXT:      %a1 = aten.relu %h1
// CHECK-NEXT:      ipu.yield %a1 : tensor<2x4xf32>
// CHECK-NEXT:    }

// CHECK-NEXT:    %[[S1:[0-9]+]] = ipu.stage {stage = 1 : i64, ipu = 1 : i64, phase = 0 : i64, direction = "fwd"} -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[A1_1:[0-9]+]] = ipu.copy %[[S0]] {ipu.place = #ipu.place<fwd, block = "B2", ipu = 1, stage = 1, phase = 0>, src = 0 : i64, dst = 1 : i64} : tensor<2x4xf32>
// CHECK-NEXT:      %h2 = aten.mm %[[A1_1]], %w2
// CHECK-NEXT:      %g = aten.mul.Tensor %[[A1_1]], %h2 {ipu.place = #ipu.place<fwd, block = "B2", ipu = 1, stage = 1, phase = 0>}
// CHECK-NEXT:      ipu.yield %g : tensor<2x4xf32>
// CHECK-NEXT:    }

// CHECK-NEXT:    %[[C:[0-9]+]], %[[H3:[0-9]+]] = ipu.stage {stage = 2 : i64, ipu = 2 : i64, phase = 0 : i64, direction = "fwd"} -> tensor<2x4xf32>, tensor<2x4xf32> {
// CHECK-NEXT:      %[[G_2:[0-9]+]] = ipu.copy %[[S1]] {ipu.place = {{.*}}>, src = 1 : i64, dst = 2 : i64} : tensor<2x4xf32>
// CHECK-NEXT:      %c = aten.full {ipu.place = #ipu.place<fwd, block = "B3", ipu = 2, stage = 2, phase = 0>
// CHECK-NEXT:      %h3 = aten.mul.Tensor %[[G_2]], %c
// CHECK-NEXT:      ipu.yield %c, %h3 : tensor<2x4xf32>, tensor<2x4xf32>
// CHECK-NEXT:    }

// CHECK-NEXT:    %[[LOSS:[0-9]+]], %[[GY:[0-9]+]] = ipu.stage {stage = 3 : i64, ipu = 3 : i64, phase = 0 : i64, direction = "fwd+bwd"} -> tensor<f32>, tensor<2x4xf32> {
// CHECK-DAG:       %[[C_3:[0-9]+]] = ipu.copy %[[C]] {ipu.place = {{.*}}>, src = 2 : i64, dst = 3 : i64} : tensor<2x4xf32>
// CHECK-DAG:       %[[H3_3:[0-9]+]] = ipu.copy %[[H3]] {ipu.place = {{.*}}>, src = 2 : i64, dst = 3 : i64} : tensor<2x4xf32>
// CHECK:           %y = aten.mul.Tensor %[[H3_3]], %[[C_3]]
// CHECK-NEXT:      %loss = aten.sum %y
// CHECK-NEXT:      %seed = aten.full {ipu.place = #ipu.place<bwd, block = "B4", ipu = 3, stage = 3, phase = 0>
// CHECK-NEXT:      %gy = aten.mul.Tensor %seed, %[[C_3]]
// CHECK-NEXT:      ipu.yield %loss, %gy : tensor<f32>, tensor<2x4xf32>
// CHECK-NEXT:    }

// CHECK-NEXT:    %[[GG:[0-9]+]] = ipu.stage {stage = 4 : i64, ipu = 2 : i64, phase = 0 : i64, direction = "bwd"} -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[GY_2:[0-9]+]] = ipu.copy %[[GY]] {ipu.place = #ipu.place<bwd, block = "B3", ipu = 2, stage = 4, phase = 0>, src = 3 : i64, dst = 2 : i64} : tensor<2x4xf32>
// CHECK-NEXT:      %gg = aten.mul.Tensor %[[GY_2]], %[[C]]
// CHECK-NEXT:      ipu.yield %gg : tensor<2x4xf32>
// CHECK-NEXT:    }

// CHECK-NEXT:    %[[GH2:[0-9]+]], %[[GW2:[0-9]+]] = ipu.stage {stage = 5 : i64, ipu = 1 : i64, phase = 0 : i64, direction = "bwd"} -> tensor<2x4xf32>, tensor<4x4xf32> {
// CHECK-DAG:       %[[A1_5:[0-9]+]] = ipu.copy %[[S0]] {ipu.place = {{.*}}>, src = 0 : i64, dst = 1 : i64} : tensor<2x4xf32>
// CHECK-DAG:       %[[GG_5:[0-9]+]] = ipu.copy %[[GG]] {ipu.place = {{.*}}>, src = 2 : i64, dst = 1 : i64} : tensor<2x4xf32>
// CHECK:           %gh2 = aten.mul.Tensor %[[GG_5]], %[[A1_5]]
// CHECK-NEXT:      %a1t = aten.permute %[[A1_5]]
// CHECK-NEXT:      %gw2 = aten.mm %a1t, %gh2
// CHECK-NEXT:      ipu.yield %gh2, %gw2 : tensor<2x4xf32>, tensor<4x4xf32>
// CHECK-NEXT:    }

// CHECK-NEXT:    %[[GW1:[0-9]+]] = ipu.stage {stage = 6 : i64, ipu = 0 : i64, phase = 0 : i64, direction = "bwd"} -> tensor<4x4xf32> {
// CHECK-NEXT:      %[[GH2_0:[0-9]+]] = ipu.copy %[[GH2]] {ipu.place = {{.*}}>, src = 1 : i64, dst = 0 : i64} : tensor<2x4xf32>
// CHECK-NEXT:      %gh1 = aten.threshold_backward %[[GH2_0]], %[[S0]]
// CHECK-NEXT:      %xt = aten.permute %x
// CHECK-NEXT:      %gw1 = aten.mm %xt, %gh1
// CHECK-NEXT:      ipu.yield %gw1 : tensor<4x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[LOSS]], %[[GW1]], %[[GW2]] : tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>
// CHECK-NEXT:  }
// CHECK-NEXT: }

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
// Serial phased training: one region per phase (forward 0, 1, 2; backward
// phases 3 and 4 mirror phases 1 and 0), phase 2 running forward and backward.
// B1 and B3 share IPU 0, so stage 4 uses stage 0's %x0 without a copy.

// CHECK-LABEL: builtin.module attributes {ipu.strategy = {{.*}}, ipu.stages = {kind = "serial_phased", num_ipus = 2 : i64, forward_stages = 3 : i64,
// CHECK:         %[[X0:[0-9]+]], %[[H1:[0-9]+]] = ipu.stage {stage = 0 : i64, ipu = 0 : i64, phase = 0 : i64, direction = "fwd"} -> tensor<2x4xf32>, tensor<2x4xf32> {
// CHECK-NEXT:      %x0 = aten.relu %x
// CHECK-NEXT:      %h1 = aten.mm %x0, %w1
// CHECK-NEXT:      ipu.yield %x0, %h1 : tensor<2x4xf32>, tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[A1:[0-9]+]] = ipu.stage {stage = 1 : i64, ipu = 1 : i64, phase = 1 : i64, direction = "fwd"} -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[H1_1:[0-9]+]] = ipu.copy %[[H1]] {ipu.place = #ipu.place<fwd, block = "B2", ipu = 1, stage = 1, phase = 1>, src = 0 : i64, dst = 1 : i64} : tensor<2x4xf32>
// CHECK-NEXT:      %a1 = aten.relu %[[H1_1]]
// CHECK-NEXT:      ipu.yield %a1 : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[LOSS:[0-9]+]], %[[GW2:[0-9]+]], %[[GA1:[0-9]+]] = ipu.stage {stage = 2 : i64, ipu = 0 : i64, phase = 2 : i64, direction = "fwd+bwd"} -> tensor<f32>, tensor<4x4xf32>, tensor<2x4xf32> {
// CHECK-NEXT:      %[[A1_0:[0-9]+]] = ipu.copy %[[A1]] {ipu.place = {{.*}}>, src = 1 : i64, dst = 0 : i64} : tensor<2x4xf32>
// CHECK-NEXT:      %y = aten.mm %[[A1_0]], %w2
// CHECK:           %a1t = aten.permute %[[A1_0]]
// CHECK:           ipu.yield %loss, %gw2, %ga1 : tensor<f32>, tensor<4x4xf32>, tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[GH1:[0-9]+]] = ipu.stage {stage = 3 : i64, ipu = 1 : i64, phase = 3 : i64, direction = "bwd"} -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[GA1_1:[0-9]+]] = ipu.copy %[[GA1]] {ipu.place = {{.*}}>, src = 0 : i64, dst = 1 : i64} : tensor<2x4xf32>
// CHECK-NEXT:      %gh1 = aten.threshold_backward %[[GA1_1]], %[[A1]]
// CHECK-NEXT:      ipu.yield %gh1 : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[GW1:[0-9]+]] = ipu.stage {stage = 4 : i64, ipu = 0 : i64, phase = 4 : i64, direction = "bwd"} -> tensor<4x4xf32> {
// CHECK-NEXT:      %[[GH1_0:[0-9]+]] = ipu.copy %[[GH1]] {ipu.place = {{.*}}>, src = 1 : i64, dst = 0 : i64} : tensor<2x4xf32>
// CHECK-NEXT:      %x0t = aten.permute %[[X0]]
// CHECK-NEXT:      %gw1 = aten.mm %x0t, %[[GH1_0]]
// CHECK-NEXT:      ipu.yield %gw1 : tensor<4x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[LOSS]], %[[GW1]], %[[GW2]] : tensor<f32>, tensor<4x4xf32>, tensor<4x4xf32>

module attributes {ipu.strategy = {kind = "serial_phased", phases = [{stages = [{blocks = ["B1"], ipu = 0 : i64}]}, {stages = [{blocks = ["B2"], ipu = 1 : i64}]}, {stages = [{blocks = ["B3"], ipu = 0 : i64}]}], separate_backward = false, liveness = "AlwaysLive"}} {
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
// Inference over 2 stages: %a is both an output and used twice by stage 1
// (one copy); the constant %k and the glue %o land in stage 1.

// CHECK-LABEL: builtin.module attributes {ipu.stages = {kind = "pipelined", num_ipus = 2 : i64, forward_stages = 2 : i64, pipeline_stages = 2 : i64, phases = 1 : i64, training = 0 : i64}} {
// CHECK:         %[[A:[0-9]+]] = ipu.stage {stage = 0 : i64, ipu = 0 : i64, phase = 0 : i64, direction = "fwd"} -> tensor<2x4xf32> {
// CHECK-NEXT:      %h = aten.mm %x, %w1
// CHECK-NEXT:      %a = aten.relu %h
// CHECK-NEXT:      ipu.yield %a : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[O:[0-9]+]] = ipu.stage {stage = 1 : i64, ipu = 1 : i64, phase = 0 : i64, direction = "fwd"} -> tensor<2x4xf32> {
// CHECK-NEXT:      %[[A_1:[0-9]+]] = ipu.copy %[[A]] {ipu.place = {{.*}}>, src = 0 : i64, dst = 1 : i64} : tensor<2x4xf32>
// CHECK-NEXT:      %k = aten.full {ipu.place = #ipu.place<fwd, block = "B2", ipu = 1, stage = 1, phase = 0>
// CHECK-NEXT:      %y = aten.mm %[[A_1]], %w2
// CHECK-NEXT:      %m = aten.mul.Tensor %y, %k
// CHECK-NEXT:      %o = aten.mul.Tensor %[[A_1]], %m {ipu.place = #ipu.place<fwd, block = "B2", ipu = 1, stage = 1, phase = 0>}
// CHECK-NEXT:      ipu.yield %o : tensor<2x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[A]], %[[O]] : tensor<2x4xf32>, tensor<2x4xf32>
// CHECK-NOT:     ipu.copy

func.func @main(%w1: tensor<4x4xf32> {tilefx.param = "w1"}, %w2: tensor<4x4xf32> {tilefx.param = "w2"}, %x: tensor<2x4xf32> {tilefx.input = 0 : i64})
    -> (tensor<2x4xf32> {tilefx.output = 0 : i64}, tensor<2x4xf32> {tilefx.output = 1 : i64}) {
  %h = aten.mm %x, %w1 {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0>} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %a = aten.relu %h {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0>} : tensor<2x4xf32> -> tensor<2x4xf32>
  %k = aten.full {size = array<i64: 2, 4>, fill_value = 2.0 : f64, dtype = f32} : tensor<2x4xf32>
  %y = aten.mm %a, %w2 {ipu.place = #ipu.place<fwd, block = "B2", ipu = 1>} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %m = aten.mul.Tensor %y, %k {ipu.place = #ipu.place<fwd, block = "B2", ipu = 1>} : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  %o = aten.mul.Tensor %a, %m : tensor<2x4xf32>, tensor<2x4xf32> -> tensor<2x4xf32>
  func.return %a, %o : tensor<2x4xf32>, tensor<2x4xf32>
}
