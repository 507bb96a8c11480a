// RUN: tilefx-opt %s --split-input-file --verify-diagnostics | filecheck %s
// RUN: not tilefx-opt %s 2>&1 | filecheck %s --check-prefix=STDERR

// Malformed CTC operands. (tilefx-opt does not read MLIR's expected-error
// annotations: the messages are checked with FileCheck.)

// STDERR: ipu_ctc_invalid.mlir:[[# @LINE + 4]]:3: error: ipu.ctc_loss: input_lengths must be [2], got [3]
// STDERR-NOT: Traceback
func.func @bad_lengths(%lp: tensor<5x2x4xf32>, %t: tensor<2x3xi64>, %il: tensor<3xi64>, %tl: tensor<2xi64>) -> tensor<2xf32> {
  // CHECK: ipu.ctc_loss: input_lengths must be [2], got [3]
  %loss = ipu.ctc_loss %lp, %t, %il, %tl {blank = 0 : i64, zero_infinity = false} : tensor<5x2x4xf32>, tensor<2x3xi64>, tensor<3xi64>, tensor<2xi64> -> tensor<2xf32>
  func.return %loss : tensor<2xf32>
}

// -----

func.func @bad_blank(%lp: tensor<5x2x4xf32>, %t: tensor<2x3xi64>, %il: tensor<2xi64>, %tl: tensor<2xi64>) -> tensor<2xf32> {
  // CHECK: ipu.ctc_loss: blank 4 is not a class of 4
  %loss = ipu.ctc_loss %lp, %t, %il, %tl {blank = 4 : i64, zero_infinity = false} : tensor<5x2x4xf32>, tensor<2x3xi64>, tensor<2xi64>, tensor<2xi64> -> tensor<2xf32>
  func.return %loss : tensor<2xf32>
}
