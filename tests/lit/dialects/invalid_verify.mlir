// RUN: not tilefx-opt %s 2>&1 | filecheck %s

// A verifier error on the normal path: exit code 1 and a one-line diagnostic
// on stderr, no traceback. (There is no line:column: xDSL does not keep source
// locations on parsed ops; invalid.mlir shows the op with --verify-diagnostics.)

// CHECK: error: available memory proportion must be in (0, 1], got 1.5
// CHECK-NOT: Traceback
func.func @bad_proportion(%x: tensor<4xf32>) -> tensor<4xf32> {
  %m = ipu.set_available_memory %x {proportion = 1.5 : f64} : tensor<4xf32> -> tensor<4xf32>
  func.return %m : tensor<4xf32>
}
