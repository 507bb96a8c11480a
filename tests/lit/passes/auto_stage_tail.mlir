// RUN: tilefx-opt %s --verify-diagnostics -p 'ipu-auto-stage{num-ipus=2 tail-block="head"}' | filecheck %s
// RUN: tilefx-opt %s --verify-diagnostics -p 'ipu-auto-stage{num-ipus=2 tail-block="head"},ipu-assign-stages{gradient-accumulation=5}' | filecheck %s --check-prefix=STAGES

// `ipu-auto-stage` with a tail: the ops of block "head" (a block without
// an IPU) and every op after them form one more pipeline stage on IPU 0
// (tail-ipu, 0 by default), after the stages it cuts over the 2 IPUs: the
// placement of a masked-LM head whose weight is tied to the embedding on
// IPU 0. The tail's backward ops (of its block) go with it, and %gh3 with
// %h4 that reads %a3 (as in auto_stage.mlir (a)). The first
// three layers are cut over IPUs 0 and 1 counting the tail's matmul on IPU
// 0: one layer there, two on IPU 1.

// CHECK-LABEL: builtin.module attributes {ipu.strategy = {kind = "pipelined", auto_stage = "same_as_ipu", schedule = "FillDrain", stages = [{blocks = ["stage0"], ipu = 0 : i64}, {blocks = ["stage1"], ipu = 1 : i64}, {blocks = ["stage2"], ipu = 0 : i64}]}, ipu.auto_stage = {num_ipus = 2 : i64, stage_ipus = [0 : i64, 1 : i64, 0 : i64], cut_positions = [1 : i64, 5 : i64], cuts = ["forward op 1 (aten.mm)", "forward op 5 (aten.mm)"]
// CHECK:      %h1 = aten.mm %x, %w1 {ipu.place = #ipu.place<fwd, block = "stage0", ipu = 0>}
// CHECK:      %h2 = aten.mm %a1, %w2 {ipu.place = #ipu.place<fwd, block = "stage1", ipu = 1>}
// CHECK:      %a3 = aten.relu %h3 {ipu.place = #ipu.place<fwd, block = "stage1", ipu = 1>}
// CHECK-NEXT: %h4 = aten.mm %a3, %w4 {ipu.place = #ipu.place<fwd, block = "stage2", ipu = 0>}
// CHECK-NEXT: %loss = aten.sum %h4 {ipu.place = #ipu.place<fwd, block = "stage2", ipu = 0>}
// CHECK-NEXT: %seed = aten.full {ipu.place = #ipu.place<bwd, block = "stage2", ipu = 0>
// CHECK:      %ga3 = aten.mm %seed, %w4t {ipu.place = #ipu.place<bwd, block = "stage2", ipu = 0>}
// CHECK-NEXT: %gh3 = aten.threshold_backward %ga3, %a3 {ipu.place = #ipu.place<bwd, block = "stage2", ipu = 0>
// CHECK-NEXT: %w3t = aten.permute %w3 {ipu.place = #ipu.place<bwd, block = "stage1", ipu = 1>
// CHECK:      %gw1 = aten.mm %xt, %gh1 {ipu.place = #ipu.place<bwd, block = "stage0", ipu = 0>}

// With ipu-assign-stages: 3 forward stages on 2 IPUs, 5 pipeline stages;
// the tail is stage 2 on IPU 0, the backward of stage 0 is stage 4.

// STAGES-LABEL: builtin.module attributes {{.*}}ipu.stages = {kind = "pipelined", num_ipus = 2 : i64, forward_stages = 3 : i64, pipeline_stages = 5 : i64, phases = 1 : i64, training = 1 : i64}
// STAGES:       %h4 = aten.mm %a3, %w4 {ipu.place = #ipu.place<fwd, block = "stage2", ipu = 0, stage = 2, phase = 0>}
// STAGES:       %gw1 = aten.mm %xt, %gh1 {ipu.place = #ipu.place<bwd, block = "stage0", ipu = 0, stage = 4, phase = 0>}

func.func @main(%w1: tensor<64x64xf32> {tilefx.param = "w1"}, %w2: tensor<64x64xf32> {tilefx.param = "w2"}, %w3: tensor<64x64xf32> {tilefx.param = "w3"}, %w4: tensor<64x64xf32> {tilefx.param = "w4"}, %x: tensor<32x64xf32> {tilefx.input = 0 : i64})
    -> (tensor<f32> {tilefx.output = 0 : i64, tilefx.loss}, tensor<64x64xf32> {tilefx.grad = "w1"}, tensor<64x64xf32> {tilefx.grad = "w4"}) {
  %h1 = aten.mm %x, %w1 {ipu.place = #ipu.place<fwd>} : tensor<32x64xf32>, tensor<64x64xf32> -> tensor<32x64xf32>
  %a1 = aten.relu %h1 {ipu.place = #ipu.place<fwd>} : tensor<32x64xf32> -> tensor<32x64xf32>
  %h2 = aten.mm %a1, %w2 {ipu.place = #ipu.place<fwd>} : tensor<32x64xf32>, tensor<64x64xf32> -> tensor<32x64xf32>
  %a2 = aten.relu %h2 {ipu.place = #ipu.place<fwd>} : tensor<32x64xf32> -> tensor<32x64xf32>
  %h3 = aten.mm %a2, %w3 {ipu.place = #ipu.place<fwd>} : tensor<32x64xf32>, tensor<64x64xf32> -> tensor<32x64xf32>
  %a3 = aten.relu %h3 {ipu.place = #ipu.place<fwd>} : tensor<32x64xf32> -> tensor<32x64xf32>
  %h4 = aten.mm %a3, %w4 {ipu.place = #ipu.place<fwd, block = "head">} : tensor<32x64xf32>, tensor<64x64xf32> -> tensor<32x64xf32>
  %loss = aten.sum %h4 {ipu.place = #ipu.place<fwd, block = "head">} : tensor<32x64xf32> -> tensor<f32>
  %seed = aten.full {ipu.place = #ipu.place<bwd, block = "head">, size = array<i64: 32, 64>, fill_value = 1.0 : f64, dtype = f32} : tensor<32x64xf32>
  %a3t = aten.permute %a3 {ipu.place = #ipu.place<bwd, block = "head">, dims = array<i64: 1, 0>} : tensor<32x64xf32> -> tensor<64x32xf32>
  %gw4 = aten.mm %a3t, %seed {ipu.place = #ipu.place<bwd, block = "head">} : tensor<64x32xf32>, tensor<32x64xf32> -> tensor<64x64xf32>
  %w4t = aten.permute %w4 {ipu.place = #ipu.place<bwd, block = "head">, dims = array<i64: 1, 0>} : tensor<64x64xf32> -> tensor<64x64xf32>
  %ga3 = aten.mm %seed, %w4t {ipu.place = #ipu.place<bwd, block = "head">} : tensor<32x64xf32>, tensor<64x64xf32> -> tensor<32x64xf32>
  %gh3 = aten.threshold_backward %ga3, %a3 {ipu.place = #ipu.place<bwd>, threshold = 0.0 : f64} : tensor<32x64xf32>, tensor<32x64xf32> -> tensor<32x64xf32>
  %w3t = aten.permute %w3 {ipu.place = #ipu.place<bwd>, dims = array<i64: 1, 0>} : tensor<64x64xf32> -> tensor<64x64xf32>
  %ga2 = aten.mm %gh3, %w3t {ipu.place = #ipu.place<bwd>} : tensor<32x64xf32>, tensor<64x64xf32> -> tensor<32x64xf32>
  %gh2 = aten.threshold_backward %ga2, %a2 {ipu.place = #ipu.place<bwd>, threshold = 0.0 : f64} : tensor<32x64xf32>, tensor<32x64xf32> -> tensor<32x64xf32>
  %w2t = aten.permute %w2 {ipu.place = #ipu.place<bwd>, dims = array<i64: 1, 0>} : tensor<64x64xf32> -> tensor<64x64xf32>
  %ga1 = aten.mm %gh2, %w2t {ipu.place = #ipu.place<bwd>} : tensor<32x64xf32>, tensor<64x64xf32> -> tensor<32x64xf32>
  %gh1 = aten.threshold_backward %ga1, %a1 {ipu.place = #ipu.place<bwd>, threshold = 0.0 : f64} : tensor<32x64xf32>, tensor<32x64xf32> -> tensor<32x64xf32>
  %xt = aten.permute %x {ipu.place = #ipu.place<bwd>, dims = array<i64: 1, 0>} : tensor<32x64xf32> -> tensor<64x32xf32>
  %gw1 = aten.mm %xt, %gh1 {ipu.place = #ipu.place<bwd>} : tensor<64x32xf32>, tensor<32x64xf32> -> tensor<64x64xf32>
  func.return %loss, %gw1, %gw4 : tensor<f32>, tensor<64x64xf32>, tensor<64x64xf32>
}
