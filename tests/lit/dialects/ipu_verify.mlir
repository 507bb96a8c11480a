// RUN: tilefx-opt %s --split-input-file --verify-diagnostics | filecheck %s
// RUN: not tilefx-opt %s 2>&1 | filecheck %s --check-prefix=STDERR

// Hand-edited ipu ops whose types, shapes or ids are wrong: each is a
// verifier error (before, each was accepted and either ran to a result of the
// wrong type or failed inside the executor with no location).

// The first error ends a run without --split-input-file: file:line:col, exit 1.
// STDERR: ipu_verify.mlir:[[# @LINE + 4]]:3: error: ipu.nop: the result type tensor<5xf32> must be the input type tensor<4xf32>
// STDERR-NEXT: %0 = ipu.nop %x : tensor<4xf32> -> tensor<5xf32>
// STDERR-NOT: Traceback
func.func @nop_changes_type(%x: tensor<4xf32>) -> tensor<5xf32> {
  %0 = ipu.nop %x : tensor<4xf32> -> tensor<5xf32>
  func.return %0 : tensor<5xf32>
}
// CHECK: ipu.nop: the result type tensor<5xf32> must be the input type tensor<4xf32>

// -----

func.func @print_tensor_changes_dtype(%x: tensor<4xf32>) -> tensor<4xi64> {
  %0 = ipu.print_tensor %x {title = "t"} : tensor<4xf32> -> tensor<4xi64>
  func.return %0 : tensor<4xi64>
}
// CHECK: ipu.print_tensor: the result type tensor<4xi64> must be the input type tensor<4xf32>

// -----

func.func @print_tensor_unknown_float_format(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = ipu.print_tensor %x {format = {float_format = "hex"}} : tensor<4xf32> -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
// CHECK: ipu.print_tensor: float_format must be one of ('auto', 'fixed', 'scientific', 'none')

// -----

func.func @checkpoint_changes_shape(%x: tensor<4xf32>) -> tensor<2x2xf32> {
  %0 = ipu.recomputation_checkpoint %x : tensor<4xf32> -> tensor<2x2xf32>
  func.return %0 : tensor<2x2xf32>
}
// CHECK: ipu.recomputation_checkpoint: the result type tensor<2x2xf32> must be the input type tensor<4xf32>

// -----

func.func @available_memory_changes_type(%x: tensor<4xf32>) -> tensor<8xf32> {
  %0 = ipu.set_available_memory %x {proportion = 0.5 : f64} : tensor<4xf32> -> tensor<8xf32>
  func.return %0 : tensor<8xf32>
}
// CHECK: ipu.set_available_memory: the result type tensor<8xf32> must be the input type tensor<4xf32>

// -----

func.func @loss_not_a_scalar(%x: tensor<4xf32>) -> tensor<3xf32> {
  %0 = ipu.identity_loss %x {reduction = "mean"} : tensor<4xf32> -> tensor<3xf32>
  func.return %0 : tensor<3xf32>
}
// CHECK: ipu.identity_loss: reduction 'mean' of tensor<4xf32> gives tensor<f32>, not tensor<3xf32>

// -----

func.func @loss_none_keeps_shape(%x: tensor<4xf32>) -> tensor<f32> {
  %0 = ipu.identity_loss %x {reduction = "none"} : tensor<4xf32> -> tensor<f32>
  func.return %0 : tensor<f32>
}
// CHECK: ipu.identity_loss: reduction 'none' of tensor<4xf32> gives tensor<4xf32>, not tensor<f32>

// -----

func.func @serialized_matmul_result(%a: tensor<2x4xf32>, %b: tensor<4x6xf32>) -> tensor<2x5xf32> {
  %0 = ipu.serialized_matmul %a, %b {mode = "output_channels", factor = 2 : i64} : tensor<2x4xf32>, tensor<4x6xf32> -> tensor<2x5xf32>
  func.return %0 : tensor<2x5xf32>
}
// CHECK: ipu.serialized_matmul: tensor<2x4xf32> times tensor<4x6xf32> is tensor<2x6xf32>, not tensor<2x5xf32>

// -----

func.func @serialized_matmul_inner(%a: tensor<2x4xf32>, %b: tensor<3x6xf32>) -> tensor<2x6xf32> {
  %0 = ipu.serialized_matmul %a, %b {mode = "output_channels", factor = 2 : i64} : tensor<2x4xf32>, tensor<3x6xf32> -> tensor<2x6xf32>
  func.return %0 : tensor<2x6xf32>
}
// CHECK: ipu.serialized_matmul: expected lhs [..., m, k] and rhs [k, n], got [2, 4] and [3, 6]

// -----

func.func @serialized_matmul_factor(%a: tensor<2x4xf32>, %b: tensor<4x6xf32>) -> tensor<2x6xf32> {
  %0 = ipu.serialized_matmul %a, %b {mode = "output_channels", factor = 4 : i64} : tensor<2x4xf32>, tensor<4x6xf32> -> tensor<2x6xf32>
  func.return %0 : tensor<2x6xf32>
}
// CHECK: ipu.serialized_matmul: factor 4 does not divide the output_channels dimension 6

// -----

func.func @serialized_matmul_dtypes(%a: tensor<2x4xf32>, %b: tensor<4x6xf16>) -> tensor<2x6xf32> {
  %0 = ipu.serialized_matmul %a, %b {mode = "output_channels", factor = 2 : i64} : tensor<2x4xf32>, tensor<4x6xf16> -> tensor<2x6xf32>
  func.return %0 : tensor<2x6xf32>
}
// CHECK: ipu.serialized_matmul: lhs and rhs element types differ (f32, f16)

// -----

func.func @copy_negative_ipu(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = ipu.copy %x {src = -1 : i64, dst = 7 : i64} : tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
// CHECK: ipu.copy: src must be >= 0, got -1

// -----

func.func @dynamic_update_dtype(%x: tensor<4x6xf32>, %u: tensor<4x2xi64>, %s: tensor<1xi64>) -> tensor<4x6xf32> {
  %0 = ipu.dynamic_update %x, %u, %s {dim = 1 : i64, size = 2 : i64} : tensor<4x6xf32>, tensor<4x2xi64>, tensor<1xi64> -> tensor<4x6xf32>
  func.return %0 : tensor<4x6xf32>
}
// CHECK: ipu.dynamic_update: src tensor<4x2xi64> must have the element type of the input tensor<4x6xf32>

// -----

func.func @decoder_lengths(%lp: tensor<5x2x4xf32>, %n: tensor<3xi64>) -> tensor<2x2xf32> {
  %p, %l, %q = ipu.ctc_beam_search_decoder %lp, %n {blank = 0 : i64, beam_width = 4 : i64, top_paths = 2 : i64} : tensor<5x2x4xf32>, tensor<3xi64> -> tensor<2x2xf32>, tensor<2x2xi32>, tensor<2x2x5xi32>
  func.return %p : tensor<2x2xf32>
}
// CHECK: ipu.ctc_beam_search_decoder: lengths must be [B] = [2], got [3]

// -----

// Optimizer updates: the gradient and the states have the weight's shape,
// each new value the type of the value it replaces, lr and step are f32 scalars.

func.func @sgd_grad_shape(%w: tensor<4xf32>, %g: tensor<5xf32>, %lr: tensor<f32>) -> tensor<4xf32> {
  %0 = ipu.sgd %w, %g lr %lr {momentum = 0.0 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = false, grad_scale = 1.0 : f64} : tensor<4xf32>, tensor<5xf32>, tensor<f32> -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
// CHECK: ipu.sgd: grad tensor<5xf32> does not have the shape of the weight tensor<4xf32>

// -----

func.func @sgd_new_weight(%w: tensor<4xf32>, %g: tensor<4xf32>, %lr: tensor<f32>) -> tensor<7xf32> {
  %0 = ipu.sgd %w, %g lr %lr {momentum = 0.0 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = false, grad_scale = 1.0 : f64} : tensor<4xf32>, tensor<4xf32>, tensor<f32> -> tensor<7xf32>
  func.return %0 : tensor<7xf32>
}
// CHECK: ipu.sgd: new_weight is tensor<7xf32>, not the type of weight tensor<4xf32>

// -----

func.func @sgd_lr_not_scalar(%w: tensor<4xf32>, %g: tensor<4xf32>, %lr: tensor<3xf32>) -> tensor<4xf32> {
  %0 = ipu.sgd %w, %g lr %lr {momentum = 0.0 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = false, grad_scale = 1.0 : f64} : tensor<4xf32>, tensor<4xf32>, tensor<3xf32> -> tensor<4xf32>
  func.return %0 : tensor<4xf32>
}
// CHECK: ipu.sgd: lr must be tensor<f32>, got tensor<3xf32>

// -----

func.func @sgd_velocity_type(%w: tensor<4xf32>, %g: tensor<4xf32>, %lr: tensor<f32>, %v: tensor<4xf16>, %t: tensor<f32>) -> tensor<4xf32> {
  %0:2 = ipu.sgd %w, %g lr %lr velocity %v step %t {momentum = 0.9 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = false, grad_scale = 1.0 : f64} : tensor<4xf32>, tensor<4xf32>, tensor<f32> velocity tensor<4xf16> step tensor<f32> -> tensor<4xf32>, tensor<4xf32>
  func.return %0#0 : tensor<4xf32>
}
// CHECK: ipu.sgd: new_velocity is tensor<4xf32>, not the type of velocity tensor<4xf16>

// -----

func.func @adam_state_shape(%w: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<3xf32>, %v: tensor<4xf32>, %t: tensor<f32>, %lr: tensor<f32>) -> tensor<4xf32> {
  %0:3 = ipu.adam %w, %g, %m, %v step %t lr %lr {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, weight_decay = 0.0 : f64, decoupled = false, bias_correction = true, grad_scale = 1.0 : f64} : tensor<4xf32>, tensor<4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<f32>, tensor<f32> -> tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  func.return %0#0 : tensor<4xf32>
}
// CHECK: ipu.adam: exp_avg tensor<3xf32> does not have the shape of the weight tensor<4xf32>

// -----

func.func @adam_step_not_scalar(%w: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>, %t: tensor<2xf32>, %lr: tensor<f32>) -> tensor<4xf32> {
  %0:3 = ipu.adam %w, %g, %m, %v step %t lr %lr {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, weight_decay = 0.0 : f64, decoupled = false, bias_correction = true, grad_scale = 1.0 : f64} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2xf32>, tensor<f32> -> tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  func.return %0#0 : tensor<4xf32>
}
// CHECK: ipu.adam: step must be tensor<f32>, got tensor<2xf32>

// -----

func.func @lamb_state_shape(%w: tensor<4xf32>, %g: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<2x2xf32>, %t: tensor<f32>, %lr: tensor<f32>) -> tensor<4xf32> {
  %0:3 = ipu.lamb %w, %g, %m, %v step %t lr %lr {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-08 : f64, weight_decay = 0.0 : f64, max_weight_norm = 10.0 : f64, bias_correction = true, grad_scale = 1.0 : f64} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2x2xf32> -> tensor<4xf32>, tensor<4xf32>, tensor<2x2xf32>
  func.return %0#0 : tensor<4xf32>
}
// CHECK: ipu.lamb: exp_avg_sq tensor<2x2xf32> does not have the shape of the weight tensor<4xf32>

// -----

func.func @rmsprop_state_shape(%w: tensor<4xf32>, %g: tensor<4xf32>, %s: tensor<9xf32>, %lr: tensor<f32>) -> tensor<4xf32> {
  %0:2 = ipu.rmsprop %w, %g, %s lr %lr {alpha = 0.99 : f64, eps = 1.0e-08 : f64, weight_decay = 0.0 : f64, momentum = 0.0 : f64, centered = false, tf_variant = false, grad_scale = 1.0 : f64} : tensor<4xf32>, tensor<4xf32>, tensor<9xf32> -> tensor<4xf32>, tensor<9xf32>
  func.return %0#0 : tensor<4xf32>
}
// CHECK: ipu.rmsprop: square_avg tensor<9xf32> does not have the shape of the weight tensor<4xf32>

// -----

func.func @clip_grad_shape(%w: tensor<4xf32>, %g: tensor<5xf32>) -> tensor<5xf32> {
  %0 = ipu.clip_grad_norm(%w) grads(%g) {max_norm = 1.0 : f64, grad_scale = 1.0 : f64} : (tensor<4xf32>), (tensor<5xf32>) -> (tensor<5xf32>)
  func.return %0 : tensor<5xf32>
}
// CHECK: clip_grad_norm: gradient tensor<5xf32> does not have the shape of its weight tensor<4xf32>

// -----

// Stages: the body yields the stage's result types; ids are >= 0; the
// direction is one ipu-outline-stages writes.

func.func @stage_yields_two(%x: tensor<4xf32>) -> tensor<4xf32> {
  %s = ipu.stage {stage = 0 : i64, ipu = 0 : i64, phase = 0 : i64, direction = "fwd"} -> tensor<4xf32> {
    %a = aten.relu %x : tensor<4xf32> -> tensor<4xf32>
    ipu.yield %a, %a : tensor<4xf32>, tensor<4xf32>
  }
  func.return %s : tensor<4xf32>
}
// CHECK: ipu.stage: the body must end with an ipu.yield of the stage's result types (tensor<4xf32>), it yields (tensor<4xf32>, tensor<4xf32>)

// -----

func.func @stage_yield_type(%x: tensor<4xf32>) -> tensor<8xf32> {
  %s = ipu.stage {stage = 0 : i64, ipu = 0 : i64, phase = 0 : i64, direction = "fwd"} -> tensor<8xf32> {
    %a = aten.relu %x : tensor<4xf32> -> tensor<4xf32>
    ipu.yield %a : tensor<4xf32>
  }
  func.return %s : tensor<8xf32>
}
// CHECK: ipu.stage: the body must end with an ipu.yield of the stage's result types (tensor<8xf32>), it yields (tensor<4xf32>)

// -----

func.func @stage_negative_id(%x: tensor<4xf32>) -> tensor<4xf32> {
  %s = ipu.stage {stage = -2 : i64, ipu = 0 : i64, phase = 0 : i64, direction = "fwd"} -> tensor<4xf32> {
    %a = aten.relu %x : tensor<4xf32> -> tensor<4xf32>
    ipu.yield %a : tensor<4xf32>
  }
  func.return %s : tensor<4xf32>
}
// CHECK: ipu.stage: stage must be >= 0, got -2

// -----

func.func @stage_direction(%x: tensor<4xf32>) -> tensor<4xf32> {
  %s = ipu.stage {stage = 0 : i64, ipu = 0 : i64, phase = 0 : i64, direction = "up"} -> tensor<4xf32> {
    %a = aten.relu %x : tensor<4xf32> -> tensor<4xf32>
    ipu.yield %a : tensor<4xf32>
  }
  func.return %s : tensor<4xf32>
}
// CHECK: ipu.stage: direction must be one of ('fwd', 'bwd', 'fwd+bwd'), got 'up'

// -----

// A loop body reads nothing from above: loop-invariant values are passed as invariants.
func.func @for_reads_from_above(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = ipu.for(%x) invariants() {count = 2 : i64} : (tensor<4xf32>), () -> (tensor<4xf32>) {
  ^bb0(%a: tensor<4xf32>):
    %b = aten.add.Tensor %a, %x : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
    ipu.yield %b : tensor<4xf32>
  }
  func.return %0 : tensor<4xf32>
}
// CHECK: Operation using value defined out of its IsolatedFromAbove parent
