// RUN: tilefx-opt %s | filecheck %s
// RUN: tilefx-opt %s | tilefx-opt | filecheck %s
// RUN: tilefx-opt %s --print-op-generic | tilefx-opt | filecheck %s

// The CTC loss and its gradient (nn.CTCLoss / PopART's ctcloss in a static
// shape: the loss per batch item), printed and parsed back.
// CHECK-LABEL: func.func @ctc_loss
// CHECK-NEXT:    %loss = ipu.ctc_loss %lp, %t, %il, %tl {blank = 0 : i64, zero_infinity = false} : tensor<5x2x4xf32>, tensor<2x3xi64>, tensor<2xi64>, tensor<2xi64> -> tensor<2xf32>
// CHECK-NEXT:    %g = ipu.ctc_loss_grad %loss, %lp, %t, %il, %tl {blank = 0 : i64, zero_infinity = true} : tensor<2xf32>, tensor<5x2x4xf32>, tensor<2x3xi64>, tensor<2xi64>, tensor<2xi64> -> tensor<5x2x4xf32>
func.func @ctc_loss(%lp: tensor<5x2x4xf32>, %t: tensor<2x3xi64>, %il: tensor<2xi64>, %tl: tensor<2xi64>) -> tensor<5x2x4xf32> {
  %loss = ipu.ctc_loss %lp, %t, %il, %tl {blank = 0 : i64, zero_infinity = false} : tensor<5x2x4xf32>, tensor<2x3xi64>, tensor<2xi64>, tensor<2xi64> -> tensor<2xf32>
  %g = ipu.ctc_loss_grad %loss, %lp, %t, %il, %tl {blank = 0 : i64, zero_infinity = true} : tensor<2xf32>, tensor<5x2x4xf32>, tensor<2x3xi64>, tensor<2xi64>, tensor<2xi64> -> tensor<5x2x4xf32>
  func.return %g : tensor<5x2x4xf32>
}
