// RUN: tilefx-opt %s --split-input-file --parsing-diagnostics --verify-diagnostics | filecheck %s
// RUN: not tilefx-opt %s 2>&1 | filecheck %s --check-prefix=STDERR

// Each case is a chunk of its own, separated by the split marker. Parse errors
// give file:line:column (lines counted from the top of this file); verifier
// errors print the message and the failing op, in generic form, underlined
// (xDSL keeps no source location on parsed ops).

// Without --split-input-file the first error ends the run: exit code 1 and the
// diagnostic on stderr.
// STDERR: invalid.mlir:[[# @LINE + 4]]:27: error: Expected ','
// STDERR-NEXT: %a = aten.add.Tensor %x : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
// STDERR-NEXT: ^
func.func @missing_operand(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = aten.add.Tensor %x : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  func.return %a : tensor<4xf32>
}
// CHECK: invalid.mlir:[[# @LINE - 3]]:27
// CHECK-NEXT: %a = aten.add.Tensor %x : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT: ^
// CHECK-NEXT: Expected ','

// -----

func.func @missing_property(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = aten._softmax %x {dim = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %a : tensor<4x8xf32>
}
// CHECK: property 'half_to_float' expected in operation 'aten._softmax'
// CHECK: %a = "aten._softmax"(%x) <{dim = 1 : i64}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: ^^^^

// -----

func.func @unknown_placement_field(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = aten.relu %x {ipu.place = #ipu.place<fwd, color = 1>} : tensor<4xf32> -> tensor<4xf32>
  func.return %a : tensor<4xf32>
}
// CHECK: invalid.mlir:[[# @LINE - 3]]:50
// CHECK-NEXT: %a = aten.relu %x {ipu.place = #ipu.place<fwd, color = 1>} : tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT: ^^^^^^
// CHECK-NEXT: unknown placement field 'color'

// -----

func.func @bad_direction(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = aten.relu %x {ipu.place = #ipu.place<sideways>} : tensor<4xf32> -> tensor<4xf32>
  func.return %a : tensor<4xf32>
}
// CHECK: invalid.mlir:[[# @LINE - 3]]:45
// CHECK: expected fwd or bwd, got 'sideways'

// -----

func.func @bad_reduction(%x: tensor<4xf32>) -> tensor<f32> {
  %l = ipu.identity_loss %x {reduction = "bogus"} : tensor<4xf32> -> tensor<f32>
  func.return %l : tensor<f32>
}
// CHECK: reduction must be one of ('sum', 'mean', 'none'), got 'bogus'
// CHECK: %l = "ipu.identity_loss"(%x) <{reduction = "bogus"}> : (tensor<4xf32>) -> tensor<f32>
// CHECK-NEXT: ^^^^
// CHECK-NEXT: Operation does not verify: reduction must be one of

// -----

func.func @bad_proportion(%x: tensor<4xf32>) -> tensor<4xf32> {
  %m = ipu.set_available_memory %x {proportion = 1.5 : f64} : tensor<4xf32> -> tensor<4xf32>
  func.return %m : tensor<4xf32>
}
// CHECK: available memory proportion must be in (0, 1], got 1.5
// CHECK: %m = "ipu.set_available_memory"(%x) <{proportion = 1.500000e+00 : f64}> : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: ^^^^

// -----

func.func @bad_serial_mode(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %y = ipu.serialized_matmul %a, %b {mode = "rows", factor = 2 : i64} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  func.return %y : tensor<4x16xf32>
}
// CHECK: mode must be one of ('input_channels', 'reducing_dim', 'output_channels'), got 'rows'

// -----

func.func @momentum_without_velocity(%w: tensor<8xf32>, %g: tensor<8xf32>, %lr: tensor<f32>) -> tensor<8xf32> {
  %n = ipu.sgd %w, %g lr %lr {momentum = 0.9 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = false, grad_scale = 1.0 : f64} : tensor<8xf32>, tensor<8xf32>, tensor<f32> -> tensor<8xf32>
  func.return %n : tensor<8xf32>
}
// CHECK: sgd: momentum != 0 needs a velocity operand

// -----

func.func @bad_popart_state(%w: tensor<8xf32>, %g: tensor<8xf32>, %lr: tensor<f32>, %s: tensor<f32>) -> tensor<8xf32> {
  %n:2 = ipu.sgd %w, %g lr %lr velocity %w step %s {momentum = 0.9 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = false, grad_scale = 1.0 : f64, popart_state = "folded"} : tensor<8xf32>, tensor<8xf32>, tensor<f32> velocity tensor<8xf32> step tensor<f32> -> tensor<8xf32>, tensor<8xf32>
  func.return %n#0 : tensor<8xf32>
}
// CHECK: sgd: popart_state must be one of combined, separate, got 'folded'
