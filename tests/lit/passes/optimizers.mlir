// RUN: tilefx-opt %s --split-input-file -p 'ipu-training-step{optimizer="lamb" max_grad_norm=1.0}' | filecheck %s
// RUN: tilefx-opt %s --split-input-file -p 'ipu-training-step{optimizer="rmsprop" momentum=0.9}' | filecheck %s --check-prefix=RMS

// @update for RMSprop and LAMB from a hand-written @main (loss = mean(x @ w + b)
// with its two gradients). The first module takes the optimizer from the pass
// options; the other two carry `ipu.optimizer` as the API writes it: the
// hyper-parameters listed in `variable` become @update arguments and operands
// of the update ops, the others properties; the state arguments have the
// accumulation types.

// LAMB from the options, with max_grad_norm: one global clip before the updates.
// CHECK-LABEL: func.func @update(
// CHECK-SAME:    %[[W:[^:]+]]: tensor<4x2xf32> {tilefx.param = "fc.weight"}, %[[B:[^:]+]]: tensor<2xf32> {tilefx.param = "fc.bias"},
// CHECK-SAME:    %[[GW:[^:]+]]: tensor<4x2xf32> {tilefx.accum = "fc.weight"}, %[[GB:[^:]+]]: tensor<2xf32> {tilefx.accum = "fc.bias"},
// CHECK-SAME:    %[[LR:[^:]+]]: tensor<f32> {tilefx.hyper = "lr/0"}, %[[STEP:[^:]+]]: tensor<f32> {tilefx.step},
// CHECK-SAME:    %[[MW:[^:]+]]: tensor<4x2xf32> {tilefx.state = "fc.weight/exp_avg"}, %[[VW:[^:]+]]: tensor<4x2xf32> {tilefx.state = "fc.weight/exp_avg_sq"},
// CHECK-SAME:    %[[MB:[^:]+]]: tensor<2xf32> {tilefx.state = "fc.bias/exp_avg"}, %[[VB:[^:]+]]: tensor<2xf32> {tilefx.state = "fc.bias/exp_avg_sq"})
// CHECK-NEXT:    %[[CW:[^,]+]], %[[CB:[^ ]+]] = ipu.clip_grad_norm(%[[W]], %[[B]]) grads(%[[GW]], %[[GB]]) {ipu.place = #ipu.place<bwd>, grad_scale = 1.000000e+00 : f64, max_norm = 1.000000e+00 : f64} : (tensor<4x2xf32>, tensor<2xf32>), (tensor<4x2xf32>, tensor<2xf32>) -> (tensor<4x2xf32>, tensor<2xf32>)
// CHECK-NEXT:    %[[W1:[^,]+]], %[[MW1:[^,]+]], %[[VW1:[^ ]+]] = ipu.lamb %[[W]], %[[CW]], %[[MW]], %[[VW]] step %[[STEP]] lr %[[LR]] {ipu.place = #ipu.place<bwd>, beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, eps = 1.000000e-08 : f64, weight_decay = 0.000000e+00 : f64, max_weight_norm = 6.550000e+04 : f64, bias_correction = true, grad_scale = 1.000000e+00 : f64} : tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32> -> tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>
// CHECK-NEXT:    %[[B1:[^,]+]], %[[MB1:[^,]+]], %[[VB1:[^ ]+]] = ipu.lamb %[[B]], %[[CB]], %[[MB]], %[[VB]] step %[[STEP]] lr %[[LR]] {{.*}} : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
// CHECK-NEXT:    func.return %[[W1]], %[[MW1]], %[[VW1]], %[[B1]], %[[MB1]], %[[VB1]] :

// RMSprop from the options: torch.optim.RMSprop's defaults, momentum 0.9 (a
// momentum buffer), not centered (no grad_avg), no clip.
// RMS-LABEL:   func.func @update(
// RMS-SAME:      %[[W:[^:]+]]: tensor<4x2xf32> {tilefx.param = "fc.weight"}, %[[B:[^:]+]]: tensor<2xf32> {tilefx.param = "fc.bias"},
// RMS-SAME:      %[[GW:[^:]+]]: tensor<4x2xf32> {tilefx.accum = "fc.weight"}, %[[GB:[^:]+]]: tensor<2xf32> {tilefx.accum = "fc.bias"},
// RMS-SAME:      %[[LR:[^:]+]]: tensor<f32> {tilefx.hyper = "lr/0"},
// RMS-SAME:      %[[SW:[^:]+]]: tensor<4x2xf32> {tilefx.state = "fc.weight/square_avg"}, %[[BW:[^:]+]]: tensor<4x2xf32> {tilefx.state = "fc.weight/momentum_buffer"},
// RMS-SAME:      %[[SB:[^:]+]]: tensor<2xf32> {tilefx.state = "fc.bias/square_avg"}, %[[BB:[^:]+]]: tensor<2xf32> {tilefx.state = "fc.bias/momentum_buffer"})
// RMS-NOT:       ipu.clip_grad_norm
// RMS-NEXT:      %{{[^ ]+}} = ipu.rmsprop %[[W]], %[[GW]], %[[SW]] momentum_buffer %[[BW]] lr %[[LR]] {ipu.place = #ipu.place<bwd>, alpha = 9.900000e-01 : f64, eps = 1.000000e-08 : f64, weight_decay = 0.000000e+00 : f64, momentum = 9.000000e-01 : f64, centered = false, tf_variant = false, grad_scale = 1.000000e+00 : f64} : tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32> momentum_buffer tensor<4x2xf32> -> tensor<4x2xf32>, tensor<4x2xf32> momentum_buffer tensor<4x2xf32>
// RMS-NEXT:      %{{[^ ]+}} = ipu.rmsprop %[[B]], %[[GB]], %[[SB]] momentum_buffer %[[BB]] lr %[[LR]] {{.*}} : tensor<2xf32>, tensor<2xf32>, tensor<2xf32> momentum_buffer tensor<2xf32> -> tensor<2xf32>, tensor<2xf32> momentum_buffer tensor<2xf32>
// RMS-NEXT:      func.return

func.func @main(%w: tensor<4x2xf32> {tilefx.param = "fc.weight"},
                %b: tensor<2xf32> {tilefx.param = "fc.bias"},
                %x: tensor<3x4xf32> {tilefx.input = 0 : i64})
    -> (tensor<f32> {tilefx.output = 0 : i64, tilefx.loss},
        tensor<4x2xf32> {tilefx.grad = "fc.weight"},
        tensor<2xf32> {tilefx.grad = "fc.bias"}) {
  %xw = aten.mm %x, %w {ipu.place = #ipu.place<fwd>} : tensor<3x4xf32>, tensor<4x2xf32> -> tensor<3x2xf32>
  %y = aten.add.Tensor %xw, %b {ipu.place = #ipu.place<fwd>, alpha = 1 : i64} : tensor<3x2xf32>, tensor<2xf32> -> tensor<3x2xf32>
  %loss = aten.mean %y {ipu.place = #ipu.place<fwd>} : tensor<3x2xf32> -> tensor<f32>
  %seed = aten.full {ipu.place = #ipu.place<bwd>, tilefx.loss_seed, size = array<i64: 3, 2>, fill_value = 0.16666666666666666 : f64, dtype = f32} : tensor<3x2xf32>
  %xt = aten.permute %x {ipu.place = #ipu.place<bwd>, dims = array<i64: 1, 0>} : tensor<3x4xf32> -> tensor<4x3xf32>
  %gw = aten.mm %xt, %seed {ipu.place = #ipu.place<bwd>} : tensor<4x3xf32>, tensor<3x2xf32> -> tensor<4x2xf32>
  %gb = aten.sum.dim_IntList %seed {ipu.place = #ipu.place<bwd>, dim = array<i64: 0>, keepdim = false} : tensor<3x2xf32> -> tensor<2xf32>
  func.return %loss, %gw, %gb : tensor<f32>, tensor<4x2xf32>, tensor<2xf32>
}

// -----

// RMSprop, TensorFlow variant, centered, variable momentum, fp16 gradient
// accumulators and fp16 first-order state: the gradients are cast to fp16
// before they are accumulated; square_avg starts at ones (tilefx.init).
// CHECK-LABEL: func.func @main(
// CHECK-SAME:    %[[ACCW:[^:]+]]: tensor<4x2xf16> {tilefx.accum = "fc.weight"}, %[[ACCB:[^:]+]]: tensor<2xf16> {tilefx.accum = "fc.bias"})
// CHECK:         %[[GW16:[^ ]+]] = aten._to_copy %gw {ipu.place = #ipu.place<bwd>, dtype = f16} : tensor<4x2xf32> -> tensor<4x2xf16>
// CHECK-NEXT:    %{{.+}} = ipu.accumulate %[[ACCW]], %[[GW16]] {ipu.place = #ipu.place<bwd>} : tensor<4x2xf16>
// CHECK-LABEL: func.func @update(
// CHECK-SAME:    %[[W:[^:]+]]: tensor<4x2xf32> {tilefx.param = "fc.weight"}, %[[B:[^:]+]]: tensor<2xf32> {tilefx.param = "fc.bias"},
// CHECK-SAME:    %[[GW:[^:]+]]: tensor<4x2xf16> {tilefx.accum = "fc.weight"}, %[[GB:[^:]+]]: tensor<2xf16> {tilefx.accum = "fc.bias"},
// CHECK-SAME:    %[[LR:[^:]+]]: tensor<f32> {tilefx.hyper = "lr/0"}, %[[MOM:[^:]+]]: tensor<f32> {tilefx.hyper = "momentum/0"},
// CHECK-SAME:    %[[SW:[^:]+]]: tensor<4x2xf32> {tilefx.state = "fc.weight/square_avg", tilefx.init = 1.000000e+00 : f64},
// CHECK-SAME:    %[[AW:[^:]+]]: tensor<4x2xf16> {tilefx.state = "fc.weight/grad_avg"}, %[[BW:[^:]+]]: tensor<4x2xf16> {tilefx.state = "fc.weight/momentum_buffer"},
// CHECK-SAME:    %[[SB:[^:]+]]: tensor<2xf32> {tilefx.state = "fc.bias/square_avg", tilefx.init = 1.000000e+00 : f64},
// CHECK-SAME:    %[[AB:[^:]+]]: tensor<2xf16> {tilefx.state = "fc.bias/grad_avg"}, %[[BB:[^:]+]]: tensor<2xf16> {tilefx.state = "fc.bias/momentum_buffer"})
// CHECK-SAME:    -> (tensor<4x2xf32> {tilefx.param = "fc.weight"}, tensor<4x2xf32> {tilefx.state = "fc.weight/square_avg"}, tensor<4x2xf16> {tilefx.state = "fc.weight/grad_avg"}, tensor<4x2xf16> {tilefx.state = "fc.weight/momentum_buffer"},
// CHECK-NEXT:    %[[W1:[^,]+]], %[[SW1:[^,]+]], %[[AW1:[^,]+]], %[[BW1:[^ ]+]] = ipu.rmsprop %[[W]], %[[GW]], %[[SW]] grad_avg %[[AW]] momentum_buffer %[[BW]] lr %[[LR]] momentum %[[MOM]] {ipu.place = #ipu.place<bwd>, alpha = 9.000000e-01 : f64, eps = 1.000000e-03 : f64, weight_decay = 0.000000e+00 : f64, centered = true, tf_variant = true, grad_scale = 2.500000e-01 : f64} : tensor<4x2xf32>, tensor<4x2xf16>, tensor<4x2xf32> grad_avg tensor<4x2xf16> momentum_buffer tensor<4x2xf16> -> tensor<4x2xf32>, tensor<4x2xf32> grad_avg tensor<4x2xf16> momentum_buffer tensor<4x2xf16>
// CHECK-NEXT:    %[[B1:[^,]+]], %[[SB1:[^,]+]], %[[AB1:[^,]+]], %[[BB1:[^ ]+]] = ipu.rmsprop %[[B]], %[[GB]], %[[SB]] grad_avg %[[AB]] momentum_buffer %[[BB]] lr %[[LR]] momentum %[[MOM]] {{.*}} -> tensor<2xf32>, tensor<2xf32> grad_avg tensor<2xf16> momentum_buffer tensor<2xf16>
// CHECK-NEXT:    func.return %[[W1]], %[[SW1]], %[[AW1]], %[[BW1]], %[[B1]], %[[SB1]], %[[AB1]], %[[BB1]] :

builtin.module attributes {ipu.optimizer = {type = "rmsprop", use_tf_variant = true, accum_type = "float16",
    grad_scale = 2.5e-01 : f64, variable = ["lr", "momentum"],
    first_order_momentum_accum_type = "float16", second_order_momentum_accum_type = "float32",
    groups = [{lr = 1.0e-02 : f64, alpha = 9.0e-01 : f64, eps = 1.0e-03 : f64, weight_decay = 0.0 : f64,
               momentum = 5.0e-01 : f64, centered = true}]}} {
  func.func @main(%w: tensor<4x2xf32> {tilefx.param = "fc.weight"},
                  %b: tensor<2xf32> {tilefx.param = "fc.bias"},
                  %x: tensor<3x4xf32> {tilefx.input = 0 : i64})
      -> (tensor<f32> {tilefx.output = 0 : i64, tilefx.loss},
          tensor<4x2xf32> {tilefx.grad = "fc.weight"},
          tensor<2xf32> {tilefx.grad = "fc.bias"}) {
    %xw = aten.mm %x, %w {ipu.place = #ipu.place<fwd>} : tensor<3x4xf32>, tensor<4x2xf32> -> tensor<3x2xf32>
    %y = aten.add.Tensor %xw, %b {ipu.place = #ipu.place<fwd>, alpha = 1 : i64} : tensor<3x2xf32>, tensor<2xf32> -> tensor<3x2xf32>
    %loss = aten.mean %y {ipu.place = #ipu.place<fwd>} : tensor<3x2xf32> -> tensor<f32>
    %seed = aten.full {ipu.place = #ipu.place<bwd>, tilefx.loss_seed, size = array<i64: 3, 2>, fill_value = 0.16666666666666666 : f64, dtype = f32} : tensor<3x2xf32>
    %xt = aten.permute %x {ipu.place = #ipu.place<bwd>, dims = array<i64: 1, 0>} : tensor<3x4xf32> -> tensor<4x3xf32>
    %gw = aten.mm %xt, %seed {ipu.place = #ipu.place<bwd>} : tensor<4x3xf32>, tensor<3x2xf32> -> tensor<4x2xf32>
    %gb = aten.sum.dim_IntList %seed {ipu.place = #ipu.place<bwd>, dim = array<i64: 0>, keepdim = false} : tensor<3x2xf32> -> tensor<2xf32>
    func.return %loss, %gw, %gb : tensor<f32>, tensor<4x2xf32>, tensor<2xf32>
  }
}

// -----

// LAMB without bias correction, variable weight_decay and max_grad_norm (the
// clip's bound is an argument), max_weight_norm 10, fp16 second-order state.
// CHECK-LABEL: func.func @update(
// CHECK-SAME:    %[[W:[^:]+]]: tensor<4x2xf32> {tilefx.param = "fc.weight"}, %[[B:[^:]+]]: tensor<2xf32> {tilefx.param = "fc.bias"},
// CHECK-SAME:    %[[GW:[^:]+]]: tensor<4x2xf32> {tilefx.accum = "fc.weight"}, %[[GB:[^:]+]]: tensor<2xf32> {tilefx.accum = "fc.bias"},
// CHECK-SAME:    %[[NORM:[^:]+]]: tensor<f32> {tilefx.hyper = "max_grad_norm"}, %[[LR:[^:]+]]: tensor<f32> {tilefx.hyper = "lr/0"},
// CHECK-SAME:    %[[WD:[^:]+]]: tensor<f32> {tilefx.hyper = "weight_decay/0"}, %[[STEP:[^:]+]]: tensor<f32> {tilefx.step},
// CHECK-SAME:    %[[MW:[^:]+]]: tensor<4x2xf32> {tilefx.state = "fc.weight/exp_avg"}, %[[VW:[^:]+]]: tensor<4x2xf16> {tilefx.state = "fc.weight/exp_avg_sq"},
// CHECK-NEXT:    %[[CW:[^,]+]], %[[CB:[^ ]+]] = ipu.clip_grad_norm(%[[W]], %[[B]]) grads(%[[GW]], %[[GB]]) max_norm %[[NORM]] {ipu.place = #ipu.place<bwd>, grad_scale = 1.000000e+00 : f64} :
// CHECK-NEXT:    %{{[^ ]+}} = ipu.lamb %[[W]], %[[CW]], %[[MW]], %[[VW]] step %[[STEP]] lr %[[LR]] weight_decay %[[WD]] {ipu.place = #ipu.place<bwd>, beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, eps = 1.000000e-06 : f64, max_weight_norm = 1.000000e+01 : f64, bias_correction = false, grad_scale = 1.000000e+00 : f64} : tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf16> -> tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf16>
// CHECK-NEXT:    %{{[^ ]+}} = ipu.lamb %[[B]], %[[CB]], {{.*}} weight_decay %[[WD]] {{.*}}
// CHECK-NEXT:    func.return

builtin.module attributes {ipu.optimizer = {type = "lamb", bias_correction = false, grad_scale = 1.0 : f64,
    variable = ["lr", "max_grad_norm", "weight_decay"], max_grad_norm = 1.0 : f64,
    second_order_momentum_accum_type = "float16",
    groups = [{lr = 1.0e-03 : f64, beta1 = 9.0e-01 : f64, beta2 = 9.99e-01 : f64, eps = 1.0e-06 : f64,
               weight_decay = 1.0e-02 : f64, max_weight_norm = 1.0e+01 : f64}]}} {
  func.func @main(%w: tensor<4x2xf32> {tilefx.param = "fc.weight"},
                  %b: tensor<2xf32> {tilefx.param = "fc.bias"},
                  %x: tensor<3x4xf32> {tilefx.input = 0 : i64})
      -> (tensor<f32> {tilefx.output = 0 : i64, tilefx.loss},
          tensor<4x2xf32> {tilefx.grad = "fc.weight"},
          tensor<2xf32> {tilefx.grad = "fc.bias"}) {
    %xw = aten.mm %x, %w {ipu.place = #ipu.place<fwd>} : tensor<3x4xf32>, tensor<4x2xf32> -> tensor<3x2xf32>
    %y = aten.add.Tensor %xw, %b {ipu.place = #ipu.place<fwd>, alpha = 1 : i64} : tensor<3x2xf32>, tensor<2xf32> -> tensor<3x2xf32>
    %loss = aten.mean %y {ipu.place = #ipu.place<fwd>} : tensor<3x2xf32> -> tensor<f32>
    %seed = aten.full {ipu.place = #ipu.place<bwd>, tilefx.loss_seed, size = array<i64: 3, 2>, fill_value = 0.16666666666666666 : f64, dtype = f32} : tensor<3x2xf32>
    %xt = aten.permute %x {ipu.place = #ipu.place<bwd>, dims = array<i64: 1, 0>} : tensor<3x4xf32> -> tensor<4x3xf32>
    %gw = aten.mm %xt, %seed {ipu.place = #ipu.place<bwd>} : tensor<4x3xf32>, tensor<3x2xf32> -> tensor<4x2xf32>
    %gb = aten.sum.dim_IntList %seed {ipu.place = #ipu.place<bwd>, dim = array<i64: 0>, keepdim = false} : tensor<3x2xf32> -> tensor<2xf32>
    func.return %loss, %gw, %gb : tensor<f32>, tensor<4x2xf32>, tensor<2xf32>
  }
}
