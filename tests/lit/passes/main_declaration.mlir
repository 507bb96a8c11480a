// RUN: not tilefx-opt %s -p ipu-assign-stages 2>&1 | filecheck %s
// RUN: not tilefx-opt %s -p ipu-outline-stages 2>&1 | filecheck %s
// RUN: not tilefx-opt %s -p ipu-training-step 2>&1 | filecheck %s
// RUN: not tilefx-opt %s -p ipu-loss-scaling 2>&1 | filecheck %s
// RUN: not tilefx-opt %s -p ipu-autocast 2>&1 | filecheck %s
// RUN: not tilefx-opt %s -p ipu-recompute 2>&1 | filecheck %s
// RUN: not tilefx-opt %s -p lower-to-device 2>&1 | filecheck %s

// The passes that transform @main, given a @main that is only a declaration
// (no body): a diagnostic naming the function, exit 1. Each failed inside
// before ('block' property of Region ..., an internal error, exit 2).

// CHECK: main_declaration.mlir:[[# @LINE + 3]]:1: error: function @main has no body (a declaration): tilefx runs and transforms functions of one block
// CHECK-NOT: internal error
// CHECK-NOT: Traceback
func.func private @main(tensor<4xf32>) -> tensor<4xf32>
