// RUN: tilefx-opt %s -p ipu-autocast | filecheck %s
// RUN: tilefx-opt %s -p 'ipu-autocast,ipu-auto-stage{num-ipus=2 auto-recomputation=0 host-io=false},ipu-assign-stages{gradient-accumulation=3},ipu-outline-stages' | filecheck %s --check-prefix=STAGES

// A cast ipu-autocast puts before an op lives with that op; one before
// @main's return (a gradient an fp16 matmul computed, given back its fp32
// type) lives with the op that made the value, here the backward matmul of
// layer 1. Without a placement it would count as a forward op of the first
// stage reading a value of the last backward stage, which ipu-auto-stage
// and ipu-assign-stages cannot order.

// CHECK-LABEL: func.func @main
// CHECK:         %gw1 = aten.mm %{{.+}}, %{{.+}} {ipu.place = #ipu.place<bwd>, ipu.autocast = true} : tensor<64x32xf16>, tensor<32x64xf16> -> tensor<64x64xf16>
// CHECK-NEXT:    %[[G32:.+]] = aten._to_copy %gw1 {ipu.place = #ipu.place<bwd>, dtype = f32} : tensor<64x64xf16> -> tensor<64x64xf32>
// CHECK-NEXT:    func.return %loss, %[[G32]], %gw2

// The cast runs in the backward stage of the layer (stage 2 on IPU 0), after
// its matmul; the stages are in order.

// STAGES-LABEL: func.func @main
// STAGES:         ipu.stage {{.*}}stage = 2 : i64, ipu = 0 : i64{{.*}}direction = "bwd"
// STAGES:           %gw1 = aten.mm {{.*}} -> tensor<64x64xf16>
// STAGES-NEXT:      %[[G32:.+]] = aten._to_copy %gw1 {ipu.place = #ipu.place<bwd, block = "stage0", ipu = 0, stage = 2, phase = 0>, dtype = f32}
// STAGES-NEXT:      ipu.yield %gw2, %[[G32]]

func.func @main(%w1: tensor<64x64xf32> {tilefx.param = "w1"}, %w2: tensor<64x64xf32> {tilefx.param = "w2"}, %x: tensor<32x64xf32> {tilefx.input = 0 : i64})
    -> (tensor<f32> {tilefx.output = 0 : i64, tilefx.loss}, tensor<64x64xf32> {tilefx.grad = "w1"}, tensor<64x64xf32> {tilefx.grad = "w2"}) {
  %h1 = aten.mm %x, %w1 {ipu.place = #ipu.place<fwd>} : tensor<32x64xf32>, tensor<64x64xf32> -> tensor<32x64xf32>
  %a1 = aten.relu %h1 {ipu.place = #ipu.place<fwd>} : tensor<32x64xf32> -> tensor<32x64xf32>
  %h2 = aten.mm %a1, %w2 {ipu.place = #ipu.place<fwd>} : tensor<32x64xf32>, tensor<64x64xf32> -> tensor<32x64xf32>
  %a2 = aten.relu %h2 {ipu.place = #ipu.place<fwd>} : tensor<32x64xf32> -> tensor<32x64xf32>
  %loss = aten.sum %a2 {ipu.place = #ipu.place<fwd>} : tensor<32x64xf32> -> tensor<f32>
  %seed = aten.full {ipu.place = #ipu.place<bwd>, size = array<i64: 32, 64>, fill_value = 1.0 : f64, dtype = f32} : tensor<32x64xf32>
  %gh2 = aten.threshold_backward %seed, %a2 {ipu.place = #ipu.place<bwd>, threshold = 0.0 : f64} : tensor<32x64xf32>, tensor<32x64xf32> -> tensor<32x64xf32>
  %a1t = aten.permute %a1 {ipu.place = #ipu.place<bwd>, dims = array<i64: 1, 0>} : tensor<32x64xf32> -> tensor<64x32xf32>
  %gw2 = aten.mm %a1t, %gh2 {ipu.place = #ipu.place<bwd>} : tensor<64x32xf32>, tensor<32x64xf32> -> tensor<64x64xf32>
  %w2t = aten.permute %w2 {ipu.place = #ipu.place<bwd>, dims = array<i64: 1, 0>} : tensor<64x64xf32> -> tensor<64x64xf32>
  %ga1 = aten.mm %gh2, %w2t {ipu.place = #ipu.place<bwd>} : tensor<32x64xf32>, tensor<64x64xf32> -> tensor<32x64xf32>
  %gh1 = aten.threshold_backward %ga1, %a1 {ipu.place = #ipu.place<bwd>, threshold = 0.0 : f64} : tensor<32x64xf32>, tensor<32x64xf32> -> tensor<32x64xf32>
  %xt = aten.permute %x {ipu.place = #ipu.place<bwd>, dims = array<i64: 1, 0>} : tensor<32x64xf32> -> tensor<64x32xf32>
  %gw1 = aten.mm %xt, %gh1 {ipu.place = #ipu.place<bwd>, ipu.autocast = true} : tensor<64x32xf32>, tensor<32x64xf32> -> tensor<64x64xf32>
  func.return %loss, %gw1, %gw2 : tensor<f32>, tensor<64x64xf32>, tensor<64x64xf32>
}
