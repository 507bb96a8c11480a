// RUN: tilefx-opt %s | filecheck %s
// RUN: tilefx-opt %s | tilefx-opt | filecheck %s
// RUN: tilefx-opt %s --print-op-generic | tilefx-opt | filecheck %s

// Every op of the ipu dialect and every form of #ipu.place. Unset placement
// fields (block "", -1) are omitted when printed; fields print in the order
// block, ipu, stage, phase. tests/dialects/test_roundtrip.py fails when an op is missing.

// CHECK-LABEL: func.func @placement(
// CHECK-SAME:  %x: tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT:    %fwd = aten.relu %x {ipu.place = #ipu.place<fwd>} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %bwd = aten.relu %x {ipu.place = #ipu.place<bwd>} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %block = aten.relu %x {ipu.place = #ipu.place<fwd, block = "encoder.0">} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %block_ipu = aten.relu %x {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1>} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %block_stage = aten.relu %x {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1, stage = 1>} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %full = aten.relu %x {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1, stage = 1, phase = 0>} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %bwd_full = aten.relu %x {ipu.place = #ipu.place<bwd, block = "B1", ipu = 1, stage = 2, phase = 1>} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %bwd_ipu = aten.relu %x {ipu.place = #ipu.place<bwd, ipu = 3>} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %bwd_stage = aten.relu %x {ipu.place = #ipu.place<bwd, stage = 0>} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %fwd_phase = aten.relu %x {ipu.place = #ipu.place<fwd, phase = 2>} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %fwd_stage_phase = aten.relu %x {ipu.place = #ipu.place<fwd, stage = 1, phase = 1>} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %bwd_block_stage = aten.relu %x {ipu.place = #ipu.place<bwd, block = "B0", stage = 3>} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %reordered = aten.relu %x {ipu.place = #ipu.place<fwd, block = "B2", ipu = 0, stage = 0, phase = 1>} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %unset = aten.relu %x {ipu.place = #ipu.place<fwd>} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %with_props = aten.add.Tensor %x, %x {ipu.place = #ipu.place<fwd, block = "B0", ipu = 0>, alpha = 1 : i64} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    func.return %with_props : tensor<4x8xf32>
// CHECK-NEXT:    }
func.func @placement(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %fwd = aten.relu %x {ipu.place = #ipu.place<fwd>} : tensor<4x8xf32> -> tensor<4x8xf32>
  %bwd = aten.relu %x {ipu.place = #ipu.place<bwd>} : tensor<4x8xf32> -> tensor<4x8xf32>
  %block = aten.relu %x {ipu.place = #ipu.place<fwd, block = "encoder.0">} : tensor<4x8xf32> -> tensor<4x8xf32>
  %block_ipu = aten.relu %x {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1>} : tensor<4x8xf32> -> tensor<4x8xf32>
  %block_stage = aten.relu %x {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1, stage = 1>} : tensor<4x8xf32> -> tensor<4x8xf32>
  %full = aten.relu %x {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1, stage = 1, phase = 0>} : tensor<4x8xf32> -> tensor<4x8xf32>
  %bwd_full = aten.relu %x {ipu.place = #ipu.place<bwd, block = "B1", ipu = 1, stage = 2, phase = 1>} : tensor<4x8xf32> -> tensor<4x8xf32>
  %bwd_ipu = aten.relu %x {ipu.place = #ipu.place<bwd, ipu = 3>} : tensor<4x8xf32> -> tensor<4x8xf32>
  %bwd_stage = aten.relu %x {ipu.place = #ipu.place<bwd, stage = 0>} : tensor<4x8xf32> -> tensor<4x8xf32>
  %fwd_phase = aten.relu %x {ipu.place = #ipu.place<fwd, phase = 2>} : tensor<4x8xf32> -> tensor<4x8xf32>
  %fwd_stage_phase = aten.relu %x {ipu.place = #ipu.place<fwd, stage = 1, phase = 1>} : tensor<4x8xf32> -> tensor<4x8xf32>
  %bwd_block_stage = aten.relu %x {ipu.place = #ipu.place<bwd, block = "B0", stage = 3>} : tensor<4x8xf32> -> tensor<4x8xf32>
  %reordered = aten.relu %x {ipu.place = #ipu.place<fwd, phase = 1, ipu = 0, block = "B2", stage = 0>} : tensor<4x8xf32> -> tensor<4x8xf32>
  %unset = aten.relu %x {ipu.place = #ipu.place<fwd, block = "", ipu = -1, stage = -1, phase = -1>} : tensor<4x8xf32> -> tensor<4x8xf32>
  %with_props = aten.add.Tensor %x, %x {ipu.place = #ipu.place<fwd, block = "B0", ipu = 0>, alpha = 1 : i64} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %with_props : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @helper_ops(
// CHECK-SAME:  %x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<f32> {
// CHECK-NEXT:    %loss_sum = ipu.identity_loss %x {reduction = "sum"} : tensor<4x8xf32> -> tensor<f32>
// CHECK-NEXT:    %loss_mean = ipu.identity_loss %x {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1>, reduction = "mean"} : tensor<4x8xf32> -> tensor<f32>
// CHECK-NEXT:    %loss_none = ipu.identity_loss %x {reduction = "none"} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %nop = ipu.nop %x : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %nop_placed = ipu.nop %x {ipu.place = #ipu.place<bwd>} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %print = ipu.print_tensor %x : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %print_titled = ipu.print_tensor %x {title = "activations"} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %print_fmt = ipu.print_tensor %x {title = "a", format = {digits = 2 : i64, float_format = "scientific", open_bracket = "{"}} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %mem = ipu.set_available_memory %x {proportion = 5.000000e-01 : f64} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %mem_all = ipu.set_available_memory %x {proportion = 1.000000e+00 : f64} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %smm_in = ipu.serialized_matmul %x, %w {mode = "input_channels", factor = 2 : i64} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT:    %smm_red = ipu.serialized_matmul %x, %w {mode = "reducing_dim", factor = 4 : i64, keep_precision = true} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT:    %smm_out = ipu.serialized_matmul %x, %w {mode = "output_channels", factor = 4 : i64, keep_precision = false} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT:    func.return %loss_mean : tensor<f32>
// CHECK-NEXT:    }
func.func @helper_ops(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<f32> {
  %loss_sum = ipu.identity_loss %x {reduction = "sum"} : tensor<4x8xf32> -> tensor<f32>
  %loss_mean = ipu.identity_loss %x {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1>, reduction = "mean"} : tensor<4x8xf32> -> tensor<f32>
  %loss_none = ipu.identity_loss %x {reduction = "none"} : tensor<4x8xf32> -> tensor<4x8xf32>
  %nop = ipu.nop %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %nop_placed = ipu.nop %x {ipu.place = #ipu.place<bwd>} : tensor<4x8xf32> -> tensor<4x8xf32>
  %print = ipu.print_tensor %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %print_titled = ipu.print_tensor %x {title = "activations"} : tensor<4x8xf32> -> tensor<4x8xf32>
  %print_fmt = ipu.print_tensor %x {title = "a", format = {digits = 2 : i64, float_format = "scientific", open_bracket = "{"}} : tensor<4x8xf32> -> tensor<4x8xf32>
  %mem = ipu.set_available_memory %x {proportion = 5.0e-01 : f64} : tensor<4x8xf32> -> tensor<4x8xf32>
  %mem_all = ipu.set_available_memory %x {proportion = 1.0 : f64} : tensor<4x8xf32> -> tensor<4x8xf32>
  %smm_in = ipu.serialized_matmul %x, %w {mode = "input_channels", factor = 2 : i64} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %smm_red = ipu.serialized_matmul %x, %w {mode = "reducing_dim", factor = 4 : i64, keep_precision = true} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %smm_out = ipu.serialized_matmul %x, %w {mode = "output_channels", factor = 4 : i64, keep_precision = false} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  func.return %loss_mean : tensor<f32>
}

// Optimizer updates with variable hyper-parameters (operands after their keyword),
// fp16 state, the combined SGD variant, PopART's SGD state, RMSprop (plain and centered TF variant with
// momentum), LAMB and the global gradient clipping.

// CHECK-LABEL: func.func @optimizers(
// CHECK-SAME:  %w: tensor<8x16xf32>, %g: tensor<8x16xf32>, %h: tensor<8x16xf16>, %lr: tensor<f32>, %step: tensor<f32>, %x: tensor<f32>) -> tensor<8x16xf32> {
// CHECK-NEXT:    %sgd_var, %sgd_var_1 = ipu.sgd %w, %g lr %lr velocity %h step %step momentum %x weight_decay %x {ipu.place = #ipu.place<bwd>, dampening = 0.000000e+00 : f64, nesterov = false, grad_scale = 1.000000e+00 : f64} : tensor<8x16xf32>, tensor<8x16xf32>, tensor<f32> velocity tensor<8x16xf16> step tensor<f32> -> tensor<8x16xf32>, tensor<8x16xf16>
// CHECK-NEXT:    %sgd_comb, %sgd_comb_1 = ipu.sgd %w, %g lr %lr velocity %w step %step velocity_scaling %x {momentum = 9.000000e-01 : f64, dampening = 0.000000e+00 : f64, weight_decay = 0.000000e+00 : f64, nesterov = false, grad_scale = 1.000000e+00 : f64, combined = true} : tensor<8x16xf32>, tensor<8x16xf32>, tensor<f32> velocity tensor<8x16xf32> step tensor<f32> -> tensor<8x16xf32>, tensor<8x16xf32>
// CHECK-NEXT:    %sgd_popart, %sgd_popart_1 = ipu.sgd %w, %g lr %lr velocity %w step %step {momentum = 9.000000e-01 : f64, dampening = 1.000000e-01 : f64, weight_decay = 1.000000e-02 : f64, nesterov = false, grad_scale = 1.000000e+00 : f64, popart_state = "combined", velocity_scaling = 4.000000e+00 : f64} : tensor<8x16xf32>, tensor<8x16xf32>, tensor<f32> velocity tensor<8x16xf32> step tensor<f32> -> tensor<8x16xf32>, tensor<8x16xf32>
// CHECK-NEXT:    %adam_var, %adam_var_1, %adam_var_2 = ipu.adam %w, %g, %h, %w step %step lr %lr beta1 %x beta2 %x eps %x weight_decay %x {decoupled = true, bias_correction = true, grad_scale = 1.000000e+00 : f64} : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf16>, tensor<8x16xf32>, tensor<f32>, tensor<f32> -> tensor<8x16xf32>, tensor<8x16xf16>, tensor<8x16xf32>
// CHECK-NEXT:    %adamax, %adamax_1, %adamax_2 = ipu.adam %w, %g, %w, %w step %step lr %lr {beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, eps = 1.000000e-06 : f64, weight_decay = 0.000000e+00 : f64, decoupled = false, bias_correction = true, grad_scale = 1.000000e+00 : f64, infinity_norm = true} : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<f32>, tensor<f32> -> tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>
// CHECK-NEXT:    %rms, %rms_1 = ipu.rmsprop %w, %g, %w lr %lr {ipu.place = #ipu.place<bwd>, alpha = 9.900000e-01 : f64, eps = 1.000000e-08 : f64, weight_decay = 0.000000e+00 : f64, momentum = 0.000000e+00 : f64, centered = false, tf_variant = false, grad_scale = 1.000000e+00 : f64} : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>, tensor<8x16xf32>
// CHECK-NEXT:    %rms_full, %rms_full_1, %rms_full_2, %rms_full_3 = ipu.rmsprop %w, %g, %h grad_avg %h momentum_buffer %w lr %lr momentum %x centered %x {alpha = 9.900000e-01 : f64, eps = 1.000000e-08 : f64, weight_decay = 0.000000e+00 : f64, tf_variant = true, grad_scale = 2.500000e-01 : f64} : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf16> grad_avg tensor<8x16xf16> momentum_buffer tensor<8x16xf32> -> tensor<8x16xf32>, tensor<8x16xf16> grad_avg tensor<8x16xf16> momentum_buffer tensor<8x16xf32>
// CHECK-NEXT:    %lamb, %lamb_1, %lamb_2 = ipu.lamb %w, %g, %w, %w step %step lr %lr {ipu.place = #ipu.place<bwd>, beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, eps = 1.000000e-08 : f64, weight_decay = 1.000000e-02 : f64, max_weight_norm = 6.550000e+04 : f64, bias_correction = true, grad_scale = 1.000000e+00 : f64} : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>
// CHECK-NEXT:    %lamb_var, %lamb_var_1, %lamb_var_2 = ipu.lamb %w, %g, %h, %h step %step lr %lr weight_decay %x max_weight_norm %x {beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, eps = 1.000000e-06 : f64, bias_correction = false, grad_scale = 1.000000e+00 : f64} : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf16>, tensor<8x16xf16> -> tensor<8x16xf32>, tensor<8x16xf16>, tensor<8x16xf16>
// CHECK-NEXT:    %clip = ipu.clip_grad_norm(%w) grads(%g) {ipu.place = #ipu.place<bwd>, max_norm = 1.000000e+00 : f64, grad_scale = 1.000000e+00 : f64} : (tensor<8x16xf32>), (tensor<8x16xf32>) -> (tensor<8x16xf32>)
// CHECK-NEXT:    %clip2, %clip2_1 = ipu.clip_grad_norm(%w, %w) grads(%g, %h) max_norm %x {grad_scale = 2.500000e-01 : f64} : (tensor<8x16xf32>, tensor<8x16xf32>), (tensor<8x16xf32>, tensor<8x16xf16>) -> (tensor<8x16xf32>, tensor<8x16xf16>)
// CHECK-NEXT:    func.return %lamb : tensor<8x16xf32>
// CHECK-NEXT:  }
func.func @optimizers(%w: tensor<8x16xf32>, %g: tensor<8x16xf32>, %h: tensor<8x16xf16>, %lr: tensor<f32>, %step: tensor<f32>, %x: tensor<f32>) -> tensor<8x16xf32> {
  %sgd_var:2 = ipu.sgd %w, %g lr %lr velocity %h step %step momentum %x weight_decay %x {ipu.place = #ipu.place<bwd>, dampening = 0.0 : f64, nesterov = false, grad_scale = 1.0 : f64} : tensor<8x16xf32>, tensor<8x16xf32>, tensor<f32> velocity tensor<8x16xf16> step tensor<f32> -> tensor<8x16xf32>, tensor<8x16xf16>
  %sgd_comb:2 = ipu.sgd %w, %g lr %lr velocity %w step %step velocity_scaling %x {momentum = 9.0e-01 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = false, grad_scale = 1.0 : f64, combined = true} : tensor<8x16xf32>, tensor<8x16xf32>, tensor<f32> velocity tensor<8x16xf32> step tensor<f32> -> tensor<8x16xf32>, tensor<8x16xf32>
  %sgd_popart:2 = ipu.sgd %w, %g lr %lr velocity %w step %step {momentum = 9.0e-01 : f64, dampening = 0.1 : f64, weight_decay = 0.01 : f64, nesterov = false, grad_scale = 1.0 : f64, popart_state = "combined", velocity_scaling = 4.0 : f64} : tensor<8x16xf32>, tensor<8x16xf32>, tensor<f32> velocity tensor<8x16xf32> step tensor<f32> -> tensor<8x16xf32>, tensor<8x16xf32>
  %adam_var:3 = ipu.adam %w, %g, %h, %w step %step lr %lr beta1 %x beta2 %x eps %x weight_decay %x {decoupled = true, bias_correction = true, grad_scale = 1.0 : f64} : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf16>, tensor<8x16xf32>, tensor<f32>, tensor<f32> -> tensor<8x16xf32>, tensor<8x16xf16>, tensor<8x16xf32>
  %adamax:3 = ipu.adam %w, %g, %w, %w step %step lr %lr {beta1 = 9.0e-01 : f64, beta2 = 9.99e-01 : f64, eps = 1.0e-06 : f64, weight_decay = 0.0 : f64, decoupled = false, bias_correction = true, grad_scale = 1.0 : f64, infinity_norm = true} : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<f32>, tensor<f32> -> tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>
  %rms:2 = ipu.rmsprop %w, %g, %w lr %lr {ipu.place = #ipu.place<bwd>, alpha = 9.9e-01 : f64, eps = 1.0e-08 : f64, weight_decay = 0.0 : f64, momentum = 0.0 : f64, centered = false, tf_variant = false, grad_scale = 1.0 : f64} : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>, tensor<8x16xf32>
  %rms_full:4 = ipu.rmsprop %w, %g, %h grad_avg %h momentum_buffer %w lr %lr momentum %x centered %x {alpha = 9.9e-01 : f64, eps = 1.0e-08 : f64, weight_decay = 0.0 : f64, tf_variant = true, grad_scale = 2.5e-01 : f64} : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf16> grad_avg tensor<8x16xf16> momentum_buffer tensor<8x16xf32> -> tensor<8x16xf32>, tensor<8x16xf16> grad_avg tensor<8x16xf16> momentum_buffer tensor<8x16xf32>
  %lamb:3 = ipu.lamb %w, %g, %w, %w step %step lr %lr {ipu.place = #ipu.place<bwd>, beta1 = 9.0e-01 : f64, beta2 = 9.99e-01 : f64, eps = 1.0e-08 : f64, weight_decay = 1.0e-02 : f64, max_weight_norm = 6.55e+04 : f64, bias_correction = true, grad_scale = 1.0 : f64} : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>
  %lamb_var:3 = ipu.lamb %w, %g, %h, %h step %step lr %lr weight_decay %x max_weight_norm %x {beta1 = 9.0e-01 : f64, beta2 = 9.99e-01 : f64, eps = 1.0e-06 : f64, bias_correction = false, grad_scale = 1.0 : f64} : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf16>, tensor<8x16xf16> -> tensor<8x16xf32>, tensor<8x16xf16>, tensor<8x16xf16>
  %clip = ipu.clip_grad_norm (%w) grads (%g) {ipu.place = #ipu.place<bwd>, max_norm = 1.0 : f64, grad_scale = 1.0 : f64} : (tensor<8x16xf32>), (tensor<8x16xf32>) -> (tensor<8x16xf32>)
  %clip2:2 = ipu.clip_grad_norm (%w, %w) grads (%g, %h) max_norm %x {grad_scale = 2.5e-01 : f64} : (tensor<8x16xf32>, tensor<8x16xf32>), (tensor<8x16xf32>, tensor<8x16xf16>) -> (tensor<8x16xf32>, tensor<8x16xf16>)
  func.return %lamb#0 : tensor<8x16xf32>
}

// Helper ops: dynamic slices with a runtime start, a for loop (carried values,
// then loop invariants), recomputation checkpoints, a Python-registered custom
// op and the CTC beam search decoder.
// CHECK-LABEL: func.func @more_helper_ops(
// CHECK-NEXT:    %a = ipu.dynamic_slice %x, %s {dim = 0 : i64, size = 2 : i64, step = 1 : i64} : tensor<4x8xf32>, tensor<i64> -> tensor<2x8xf32>
// CHECK-NEXT:    %b = ipu.dynamic_update %x, %a, %s {dim = 0 : i64, size = 2 : i64} : tensor<4x8xf32>, tensor<2x8xf32>, tensor<i64> -> tensor<4x8xf32>
// CHECK-NEXT:    %c = ipu.for(%b) invariants(%w) {count = 3 : i64} : (tensor<4x8xf32>), (tensor<8x8xf32>) -> (tensor<4x8xf32>) {
// CHECK-NEXT:    ^{{.*}}(%y: tensor<4x8xf32>, %ww: tensor<8x8xf32>):
// CHECK-NEXT:      %z = aten.mm %y, %ww {ipu.place = #ipu.place<fwd>} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:      ipu.yield %z : tensor<4x8xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    %d = ipu.recomputation_checkpoint %c {ipu.place = #ipu.place<fwd>} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %e, %e_1 = ipu.custom_op(%d, %x) {op_name = "Cube", domain = "com.acme", domain_version = 1 : i64, op_attributes = {alpha = 2.000000e+00 : f64, names = ["a", "b"]}} : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK-NEXT:    %p, %n, %q = ipu.ctc_beam_search_decoder %lp, %l {blank = 0 : i64, beam_width = 4 : i64, top_paths = 3 : i64} : tensor<5x2x4xf32>, tensor<2xi32> -> tensor<2x3xf32>, tensor<2x3xi32>, tensor<2x3x5xi32>
// CHECK-NEXT:    func.return %e : tensor<4x8xf32>
func.func @more_helper_ops(%x: tensor<4x8xf32>, %s: tensor<i64>, %w: tensor<8x8xf32>, %lp: tensor<5x2x4xf32>, %l: tensor<2xi32>) -> tensor<4x8xf32> {
  %a = ipu.dynamic_slice %x, %s {dim = 0 : i64, size = 2 : i64, step = 1 : i64} : tensor<4x8xf32>, tensor<i64> -> tensor<2x8xf32>
  %b = ipu.dynamic_update %x, %a, %s {dim = 0 : i64, size = 2 : i64} : tensor<4x8xf32>, tensor<2x8xf32>, tensor<i64> -> tensor<4x8xf32>
  %c = ipu.for (%b) invariants (%w) {count = 3 : i64} : (tensor<4x8xf32>), (tensor<8x8xf32>) -> (tensor<4x8xf32>) {
  ^bb0(%y: tensor<4x8xf32>, %ww: tensor<8x8xf32>):
    %z = aten.mm %y, %ww {ipu.place = #ipu.place<fwd>} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
    ipu.yield %z : tensor<4x8xf32>
  }
  %d = ipu.recomputation_checkpoint %c {ipu.place = #ipu.place<fwd>} : tensor<4x8xf32> -> tensor<4x8xf32>
  %e:2 = ipu.custom_op (%d, %x) {op_name = "Cube", domain = "com.acme", domain_version = 1 : i64, op_attributes = {alpha = 2.0 : f64, names = ["a", "b"]}} : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  %p, %n, %q = ipu.ctc_beam_search_decoder %lp, %l {blank = 0 : i64, beam_width = 4 : i64, top_paths = 3 : i64} : tensor<5x2x4xf32>, tensor<2xi32> -> tensor<2x3xf32>, tensor<2x3xi32>, tensor<2x3x5xi32>
  func.return %e#0 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @ctc_loss
// CHECK-NEXT:    %loss = ipu.ctc_loss %lp, %t, %il, %tl {blank = 0 : i64, zero_infinity = false} : tensor<5x2x4xf32>, tensor<2x3xi64>, tensor<2xi64>, tensor<2xi64> -> tensor<2xf32>
// CHECK-NEXT:    %g = ipu.ctc_loss_grad %loss, %lp, %t, %il, %tl {blank = 0 : i64, zero_infinity = true} : tensor<2xf32>, tensor<5x2x4xf32>, tensor<2x3xi64>, tensor<2xi64>, tensor<2xi64> -> tensor<5x2x4xf32>
func.func @ctc_loss(%lp: tensor<5x2x4xf32>, %t: tensor<2x3xi64>, %il: tensor<2xi64>, %tl: tensor<2xi64>) -> tensor<5x2x4xf32> {
  %loss = ipu.ctc_loss %lp, %t, %il, %tl {blank = 0 : i64, zero_infinity = false} : tensor<5x2x4xf32>, tensor<2x3xi64>, tensor<2xi64>, tensor<2xi64> -> tensor<2xf32>
  %g = ipu.ctc_loss_grad %loss, %lp, %t, %il, %tl {blank = 0 : i64, zero_infinity = true} : tensor<2xf32>, tensor<5x2x4xf32>, tensor<2x3xi64>, tensor<2xi64>, tensor<2xi64> -> tensor<5x2x4xf32>
  func.return %g : tensor<5x2x4xf32>
}

// CHECK-LABEL: func.func @training(
// CHECK-SAME:  %w: tensor<8x16xf32>, %g: tensor<8x16xf32>, %acc: tensor<8x16xf32>, %lr: tensor<f32>, %step: tensor<f32>, %v: tensor<8x16xf32>, %m: tensor<8x16xf32>, %m2: tensor<8x16xf32>) -> tensor<8x16xf32> {
// CHECK-NEXT:    %acc_next = ipu.accumulate %acc, %g {ipu.place = #ipu.place<bwd, block = "B1", ipu = 1>} : tensor<8x16xf32>
// CHECK-NEXT:    %acc_plain = ipu.accumulate %acc, %g : tensor<8x16xf32>
// CHECK-NEXT:    %sgd = ipu.sgd %w, %acc_next lr %lr {ipu.place = #ipu.place<bwd>, momentum = 0.000000e+00 : f64, dampening = 0.000000e+00 : f64, weight_decay = 0.000000e+00 : f64, nesterov = false, grad_scale = 1.000000e+00 : f64} : tensor<8x16xf32>, tensor<8x16xf32>, tensor<f32> -> tensor<8x16xf32>
// CHECK-NEXT:    %sgd_m, %sgd_m_1 = ipu.sgd %w, %acc_next lr %lr velocity %v step %step {momentum = 9.000000e-01 : f64, dampening = 0.000000e+00 : f64, weight_decay = 1.000000e-04 : f64, nesterov = true, grad_scale = 2.500000e-01 : f64} : tensor<8x16xf32>, tensor<8x16xf32>, tensor<f32> velocity tensor<8x16xf32> step tensor<f32> -> tensor<8x16xf32>, tensor<8x16xf32>
// CHECK-NEXT:    %adam, %adam_1, %adam_2 = ipu.adam %w, %acc_next, %m, %m2 step %step lr %lr {ipu.place = #ipu.place<bwd>, beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, eps = 1.000000e-08 : f64, weight_decay = 0.000000e+00 : f64, decoupled = false, bias_correction = true, grad_scale = 1.000000e+00 : f64} : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<f32>, tensor<f32> -> tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>
// CHECK-NEXT:    %adamw, %adamw_1, %adamw_2 = ipu.adam %w, %acc_next, %m, %m2 step %step lr %lr {beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, eps = 1.000000e-08 : f64, weight_decay = 1.000000e-02 : f64, decoupled = true, bias_correction = false, grad_scale = 1.000000e+00 : f64} : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<f32>, tensor<f32> -> tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>
// CHECK-NEXT:    func.return %adamw : tensor<8x16xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.func @stages(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT:      %s0 = ipu.stage {stage = 0 : i64, ipu = 0 : i64, phase = 0 : i64, direction = "fwd"} -> tensor<4x8xf32> {
// CHECK-NEXT:        %r = aten.relu %x : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:        ipu.yield %r : tensor<4x8xf32>
// CHECK-NEXT:      }
// CHECK-NEXT:      ipu.stage {stage = 1 : i64, ipu = 1 : i64, phase = 0 : i64, direction = "fwd+bwd"} {
// CHECK-NEXT:        %c = ipu.copy %s0 {src = 0 : i64, dst = 1 : i64} : tensor<4x8xf32>
// CHECK-NEXT:        ipu.yield
// CHECK-NEXT:      }
// CHECK-NEXT:      func.return %s0 : tensor<4x8xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    }
func.func @training(%w: tensor<8x16xf32>, %g: tensor<8x16xf32>, %acc: tensor<8x16xf32>, %lr: tensor<f32>, %step: tensor<f32>, %v: tensor<8x16xf32>, %m: tensor<8x16xf32>, %m2: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %acc_next = ipu.accumulate %acc, %g {ipu.place = #ipu.place<bwd, block = "B1", ipu = 1>} : tensor<8x16xf32>
  %acc_plain = ipu.accumulate %acc, %g : tensor<8x16xf32>
  %sgd = ipu.sgd %w, %acc_next lr %lr {ipu.place = #ipu.place<bwd>, momentum = 0.0 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = false, grad_scale = 1.0 : f64} : tensor<8x16xf32>, tensor<8x16xf32>, tensor<f32> -> tensor<8x16xf32>
  %sgd_m:2 = ipu.sgd %w, %acc_next lr %lr velocity %v step %step {momentum = 9.0e-01 : f64, dampening = 0.0 : f64, weight_decay = 1.0e-04 : f64, nesterov = true, grad_scale = 2.5e-01 : f64} : tensor<8x16xf32>, tensor<8x16xf32>, tensor<f32> velocity tensor<8x16xf32> step tensor<f32> -> tensor<8x16xf32>, tensor<8x16xf32>
  %adam:3 = ipu.adam %w, %acc_next, %m, %m2 step %step lr %lr {ipu.place = #ipu.place<bwd>, beta1 = 9.0e-01 : f64, beta2 = 9.99e-01 : f64, eps = 1.0e-08 : f64, weight_decay = 0.0 : f64, decoupled = false, bias_correction = true, grad_scale = 1.0 : f64} : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<f32>, tensor<f32> -> tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>
  %adamw:3 = ipu.adam %w, %acc_next, %m, %m2 step %step lr %lr {beta1 = 9.0e-01 : f64, beta2 = 9.99e-01 : f64, eps = 1.0e-08 : f64, weight_decay = 1.0e-02 : f64, decoupled = true, bias_correction = false, grad_scale = 1.0 : f64} : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<f32>, tensor<f32> -> tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>
  func.return %adamw#0 : tensor<8x16xf32>
}

func.func @stages(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s0 = ipu.stage {stage = 0 : i64, ipu = 0 : i64, phase = 0 : i64, direction = "fwd"} -> tensor<4x8xf32> {
    %r = aten.relu %x : tensor<4x8xf32> -> tensor<4x8xf32>
    ipu.yield %r : tensor<4x8xf32>
  }
  ipu.stage {stage = 1 : i64, ipu = 1 : i64, phase = 0 : i64, direction = "fwd+bwd"} {
    %c = ipu.copy %s0 {src = 0 : i64, dst = 1 : i64} : tensor<4x8xf32>
    ipu.yield
  }
  func.return %s0 : tensor<4x8xf32>
}

