// RUN: tilefx-opt %s -p ipu-recompute | filecheck %s

// Two forward segments split by a checkpoint. The backward reads %h (before
// the checkpoint) and %t (after it): both are recomputed right before their
// first backward user, from the arguments and from the checkpoint %c; the
// checkpoint itself and the arguments are read as they are (kept).

// CHECK-LABEL: func.func @main(
// CHECK:         %h = aten.mm %x, %w {ipu.place = #ipu.place<fwd>}
// CHECK-NEXT:    %r = aten.relu %h {ipu.place = #ipu.place<fwd>}
// CHECK-NEXT:    %c = ipu.recomputation_checkpoint %r
// CHECK-NEXT:    %t = aten.tanh %c {ipu.place = #ipu.place<fwd>}
// CHECK-NEXT:    %[[T2:.*]] = aten.tanh %c {ipu.place = #ipu.place<bwd>}
// CHECK-NEXT:    %g1 = aten.mul.Tensor %t_seed, %[[T2]] {ipu.place = #ipu.place<bwd>}
// CHECK-NEXT:    %g2 = aten.mul.Tensor %g1, %c {ipu.place = #ipu.place<bwd>}
// CHECK-NEXT:    %[[H2:.*]] = aten.mm %x, %w {ipu.place = #ipu.place<bwd>}
// CHECK-NEXT:    %g3 = aten.threshold_backward %g2, %[[H2]] {ipu.place = #ipu.place<bwd>
// CHECK-NEXT:    func.return %t, %g3
func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %t_seed: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %h = aten.mm %x, %w {ipu.place = #ipu.place<fwd>} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %r = aten.relu %h {ipu.place = #ipu.place<fwd>} : tensor<4x8xf32> -> tensor<4x8xf32>
  %c = ipu.recomputation_checkpoint %r {ipu.place = #ipu.place<fwd>} : tensor<4x8xf32> -> tensor<4x8xf32>
  %t = aten.tanh %c {ipu.place = #ipu.place<fwd>} : tensor<4x8xf32> -> tensor<4x8xf32>
  %g1 = aten.mul.Tensor %t_seed, %t {ipu.place = #ipu.place<bwd>} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %g2 = aten.mul.Tensor %g1, %c {ipu.place = #ipu.place<bwd>} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %g3 = aten.threshold_backward %g2, %h {ipu.place = #ipu.place<bwd>, threshold = 0.0 : f64} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %t, %g3 : tensor<4x8xf32>, tensor<4x8xf32>
}
