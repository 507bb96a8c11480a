// RUN: not tilefx-opt %s 2>&1 | filecheck %s

// A verifier error on the normal path: exit code 1 and a one-line diagnostic
// at the op's line and column on stderr, no traceback (invalid.mlir shows the
// op with --verify-diagnostics).

// CHECK: invalid_verify.mlir:10:3: error: available memory proportion must be in (0, 1], got 1.5
// CHECK-NOT: Traceback
func.func @bad_proportion(%x: tensor<4xf32>) -> tensor<4xf32> {
  %m = ipu.set_available_memory %x {proportion = 1.5 : f64} : tensor<4xf32> -> tensor<4xf32>
  func.return %m : tensor<4xf32>
}
