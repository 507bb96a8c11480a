// RUN: tilefx-opt %s --split-input-file -p ipu-recompute | filecheck %s
// RUN: tilefx-opt %s --split-input-file -p 'ipu-recompute{auto-recomputation=0}' | filecheck %s --check-prefix=NONE

// PopTorch's default recomputation: a training model pipelined over two
// IPUs (the `ipu.stages` ipu-assign-stages writes) without checkpoints.
// Stage 0's output %a is stage 1's input: stage 1 holds it (an identity
// checkpoint on stage 1, which its forward and backward read: the IPU copy's
// result PopART stashes, not a second copy from IPU 0 for the backward).
// Stage 0 recomputes %h from the argument %x in its backward, placed with
// its backward user. Stage 1 computes the loss: its backward follows
// its forward, so it recomputes nothing (%t is read as it is).
// With autoRecomputation None (0) nothing is recomputed.

// CHECK-LABEL: func.func @main(
// CHECK:         %h = aten.mm %x, %w1 {ipu.place = #ipu.place<fwd, block = "B0", ipu = 0, stage = 0, phase = 0>}
// CHECK-NEXT:    %a = aten.relu %h
// CHECK-NEXT:    %[[IN:.*]] = ipu.recomputation_checkpoint %a {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1, stage = 1, phase = 0>}
// CHECK-NEXT:    %t = aten.tanh %[[IN]]
// CHECK-NEXT:    %loss = aten.sum %t
// CHECK-NEXT:    %g1 = aten.mul.Tensor %seed, %t {ipu.place = #ipu.place<bwd, block = "B1", ipu = 1, stage = 1, phase = 0>}
// CHECK-NEXT:    %g2 = aten.mul.Tensor %g1, %[[IN]] {ipu.place = #ipu.place<bwd, block = "B1", ipu = 1, stage = 1, phase = 0>}
// CHECK-NEXT:    %[[H2:.*]] = aten.mm %x, %w1 {ipu.place = #ipu.place<bwd, block = "B0", ipu = 0, stage = 2, phase = 0>}
// CHECK-NEXT:    %g3 = aten.threshold_backward %g2, %[[H2]] {ipu.place = #ipu.place<bwd, block = "B0", ipu = 0, stage = 2, phase = 0>
// CHECK-NEXT:    func.return

// NONE-LABEL: func.func @main(
// NONE:         %g3 = aten.threshold_backward %g2, %h
// NONE-NEXT:    func.return

builtin.module attributes {ipu.stages = {kind = "pipelined", num_ipus = 2 : i64, forward_stages = 2 : i64, pipeline_stages = 3 : i64, phases = 1 : i64, training = 1 : i64}} {
func.func @main(%x: tensor<4x8xf32>, %w1: tensor<8x8xf32>, %seed: tensor<4x8xf32>) -> (tensor<f32>, tensor<4x8xf32>) {
  %h = aten.mm %x, %w1 {ipu.place = #ipu.place<fwd, block = "B0", ipu = 0, stage = 0, phase = 0>} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %a = aten.relu %h {ipu.place = #ipu.place<fwd, block = "B0", ipu = 0, stage = 0, phase = 0>} : tensor<4x8xf32> -> tensor<4x8xf32>
  %t = aten.tanh %a {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1, stage = 1, phase = 0>} : tensor<4x8xf32> -> tensor<4x8xf32>
  %loss = aten.sum %t {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1, stage = 1, phase = 0>} : tensor<4x8xf32> -> tensor<f32>
  %g1 = aten.mul.Tensor %seed, %t {ipu.place = #ipu.place<bwd, block = "B1", ipu = 1, stage = 1, phase = 0>} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %g2 = aten.mul.Tensor %g1, %a {ipu.place = #ipu.place<bwd, block = "B1", ipu = 1, stage = 1, phase = 0>} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %g3 = aten.threshold_backward %g2, %h {ipu.place = #ipu.place<bwd, block = "B0", ipu = 0, stage = 2, phase = 0>, threshold = 0.0 : f64} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %loss, %g3 : tensor<f32>, tensor<4x8xf32>
}
}

// -----

// The same stages on one IPU (a pipeline over one IPU is no pipeline for
// PopTorch's default): nothing is recomputed without checkpoints.

// CHECK-LABEL: func.func @main(
// CHECK:         %g3 = aten.threshold_backward %g2, %h
// CHECK-NEXT:    func.return

builtin.module attributes {ipu.stages = {kind = "pipelined", num_ipus = 1 : i64, forward_stages = 2 : i64, pipeline_stages = 3 : i64, phases = 1 : i64, training = 1 : i64}} {
func.func @main(%x: tensor<4x8xf32>, %w1: tensor<8x8xf32>, %seed: tensor<4x8xf32>) -> (tensor<f32>, tensor<4x8xf32>) {
  %h = aten.mm %x, %w1 {ipu.place = #ipu.place<fwd, block = "B0", ipu = 0, stage = 0, phase = 0>} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %a = aten.relu %h {ipu.place = #ipu.place<fwd, block = "B0", ipu = 0, stage = 0, phase = 0>} : tensor<4x8xf32> -> tensor<4x8xf32>
  %t = aten.tanh %a {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0, stage = 1, phase = 0>} : tensor<4x8xf32> -> tensor<4x8xf32>
  %loss = aten.sum %t {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0, stage = 1, phase = 0>} : tensor<4x8xf32> -> tensor<f32>
  %g1 = aten.mul.Tensor %seed, %t {ipu.place = #ipu.place<bwd, block = "B1", ipu = 0, stage = 1, phase = 0>} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %g2 = aten.mul.Tensor %g1, %a {ipu.place = #ipu.place<bwd, block = "B1", ipu = 0, stage = 1, phase = 0>} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %g3 = aten.threshold_backward %g2, %h {ipu.place = #ipu.place<bwd, block = "B0", ipu = 0, stage = 2, phase = 0>, threshold = 0.0 : f64} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %loss, %g3 : tensor<f32>, tensor<4x8xf32>
}
}
