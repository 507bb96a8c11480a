// RUN: tilefx-opt %s -p ipu-autocast | filecheck %s

// The negative log-likelihood keeps the types it was traced with (torch.autocast
// runs nll_loss in float32): the fp16 log-probabilities of an autocast matmul
// are cast back to fp32 for it, so the loss stays fp32, and the log-softmax
// backward meeting its fp32 gradient and fp16 output computes in fp32.

// CHECK-LABEL: func.func @main
// CHECK:         %[[Y:.+]] = aten.mm {{.*}} -> tensor<4x5xf16>
// CHECK-NEXT:    %logp = aten._log_softmax %[[Y]] {dim = 1 : i64, half_to_float = false} : tensor<4x5xf16> -> tensor<4x5xf16>
// CHECK-NEXT:    %[[LP32:.+]] = aten._to_copy %logp {dtype = f32} : tensor<4x5xf16> -> tensor<4x5xf32>
// CHECK-NEXT:    %loss, %total = aten.nll_loss_forward %[[LP32]], %t {{.*}} -> tensor<f32>, tensor<f32>
// CHECK-NEXT:    %[[LP32B:.+]] = aten._to_copy %logp {dtype = f32} : tensor<4x5xf16> -> tensor<4x5xf32>
// CHECK-NEXT:    %gin = aten.nll_loss_backward %g, %[[LP32B]], %t, %total {{.*}} -> tensor<4x5xf32>
// CHECK:         %glogits = aten._log_softmax_backward_data %gin, %{{.+}} {dim = 1 : i64, input_dtype = f32} : tensor<4x5xf32>, tensor<4x5xf32> -> tensor<4x5xf32>
// CHECK:         func.return %loss, %glogits

func.func @main(%x: tensor<4x8xf32> {tilefx.input = 0 : i64}, %w: tensor<8x5xf32> {tilefx.param = "w"},
                %t: tensor<4xi64> {tilefx.input = 1 : i64}, %g: tensor<f32> {tilefx.param = "g"})
    -> (tensor<f32> {tilefx.output = 0 : i64}, tensor<4x5xf32> {tilefx.grad = "w"}) {
  %y = aten.mm %x, %w {ipu.autocast = true} : tensor<4x8xf32>, tensor<8x5xf32> -> tensor<4x5xf32>
  %logp = aten._log_softmax %y {dim = 1 : i64, half_to_float = false} : tensor<4x5xf32> -> tensor<4x5xf32>
  %loss, %total = aten.nll_loss_forward %logp, %t {reduction = 1 : i64, ignore_index = -100 : i64} : tensor<4x5xf32>, tensor<4xi64> -> tensor<f32>, tensor<f32>
  %gin = aten.nll_loss_backward %g, %logp, %t, %total {reduction = 1 : i64, ignore_index = -100 : i64} : tensor<f32>, tensor<4x5xf32>, tensor<4xi64>, tensor<f32> -> tensor<4x5xf32>
  %glogits = aten._log_softmax_backward_data %gin, %logp {dim = 1 : i64, input_dtype = f32} : tensor<4x5xf32>, tensor<4x5xf32> -> tensor<4x5xf32>
  func.return %loss, %glogits : tensor<f32>, tensor<4x5xf32>
}
