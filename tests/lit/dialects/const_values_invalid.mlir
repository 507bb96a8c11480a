// RUN: not tilefx-opt %s 2>&1 | filecheck %s

// A `tilefx.value` that cannot be its argument's value is a diagnostic at its
// function (tilefx-opt and tilefx-run verify it when they parse), not a
// failure when tilefx-run runs the function. (tests/dialects/test_roundtrip.py covers
// the other cases: a wrong element type, an attribute that is not `dense`.)

// CHECK: const_values_invalid.mlir:[[# @LINE + 3]]:1: error: argument 1 of @shape: tilefx.value has type tensor<2xf32>, the argument is tensor<3xf32>
// CHECK-NEXT: func.func @shape(
// CHECK-NOT: Traceback
func.func @shape(%a: tensor<3xf32>, %c: tensor<3xf32> {tilefx.const = "c", tilefx.value = dense<[1.0, 2.0]> : tensor<2xf32>}) -> tensor<3xf32> {
  func.return %a : tensor<3xf32>
}
