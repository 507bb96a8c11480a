// RUN: tilefx-opt %s -p 'ipu-training-step{optimizer="sgd" momentum=0.9}' | filecheck %s --check-prefixes=CHECK,SGD
// RUN: tilefx-opt %s -p 'ipu-training-step{optimizer="adam"}' | filecheck %s --check-prefixes=CHECK,ADAM
// RUN: tilefx-opt %s -p ipu-training-step | filecheck %s --check-prefixes=CHECK,PLAIN

// A joint forward+backward graph as the frontend produces it for
// `loss = mean(fc(x))`: parameters, one user input, the loss output and one
// gradient per parameter.

// CHECK-LABEL: func.func @main(
// CHECK-SAME:    %w: tensor<10x4xf32> {tilefx.param = "fc.weight"}, %b: tensor<10xf32> {tilefx.param = "fc.bias"}, %x: tensor<8x4xf32> {tilefx.input = 0 : i64},
// CHECK-SAME:    %[[ACC_W:.+]]: tensor<10x4xf32> {tilefx.accum = "fc.weight"}, %[[ACC_B:.+]]: tensor<10xf32> {tilefx.accum = "fc.bias"})
// CHECK-SAME:    -> (tensor<f32> {tilefx.output = 0 : i64, tilefx.loss}, tensor<10x4xf32> {tilefx.accum = "fc.weight"}, tensor<10xf32> {tilefx.accum = "fc.bias"})
// CHECK:         %gb = aten.sum.dim_IntList
// CHECK-NEXT:    %[[NEW_W:.+]] = ipu.accumulate %[[ACC_W]], %gw {ipu.place = #ipu.place<bwd, block = "B0", ipu = 0>} : tensor<10x4xf32>
// CHECK-NEXT:    %[[NEW_B:.+]] = ipu.accumulate %[[ACC_B]], %gb {ipu.place = #ipu.place<bwd>} : tensor<10xf32>
// CHECK-NEXT:    func.return %loss, %[[NEW_W]], %[[NEW_B]] : tensor<f32>, tensor<10x4xf32>, tensor<10xf32>
// CHECK-NEXT:  }

// CHECK-LABEL: func.func @update(
// CHECK-SAME:    %[[W:[^:]+]]: tensor<10x4xf32> {tilefx.param = "fc.weight"}, %[[B:[^:]+]]: tensor<10xf32> {tilefx.param = "fc.bias"},
// CHECK-SAME:    %[[GW:[^:]+]]: tensor<10x4xf32> {tilefx.accum = "fc.weight"}, %[[GB:[^:]+]]: tensor<10xf32> {tilefx.accum = "fc.bias"},
// CHECK-SAME:    %[[LR:[^:]+]]: tensor<f32> {tilefx.hyper = "lr/0"}

// SGD-SAME:      %[[STEP:[^:]+]]: tensor<f32> {tilefx.step}, %[[VW:[^:]+]]: tensor<10x4xf32> {tilefx.state = "fc.weight/momentum_buffer"}, %[[VB:[^:]+]]: tensor<10xf32> {tilefx.state = "fc.bias/momentum_buffer"})
// SGD-SAME:      -> (tensor<10x4xf32> {tilefx.param = "fc.weight"}, tensor<10x4xf32> {tilefx.state = "fc.weight/momentum_buffer"}, tensor<10xf32> {tilefx.param = "fc.bias"}, tensor<10xf32> {tilefx.state = "fc.bias/momentum_buffer"})
// SGD-NEXT:      %[[W1:.+]], %[[VW1:.+]] = ipu.sgd %[[W]], %[[GW]] lr %[[LR]] velocity %[[VW]] step %[[STEP]] {ipu.place = #ipu.place<bwd>, momentum = 9.000000e-01 : f64, dampening = 0.000000e+00 : f64, weight_decay = 0.000000e+00 : f64, nesterov = false, grad_scale = 1.000000e+00 : f64} : tensor<10x4xf32>, tensor<10x4xf32>, tensor<f32> velocity tensor<10x4xf32> step tensor<f32> -> tensor<10x4xf32>, tensor<10x4xf32>
// SGD-NEXT:      %[[B1:.+]], %[[VB1:.+]] = ipu.sgd %[[B]], %[[GB]] lr %[[LR]] velocity %[[VB]] step %[[STEP]] {ipu.place = #ipu.place<bwd>, momentum = 9.000000e-01 : f64, dampening = 0.000000e+00 : f64, weight_decay = 0.000000e+00 : f64, nesterov = false, grad_scale = 1.000000e+00 : f64} : tensor<10xf32>, tensor<10xf32>, tensor<f32> velocity tensor<10xf32> step tensor<f32> -> tensor<10xf32>, tensor<10xf32>
// SGD-NEXT:      func.return %[[W1]], %[[VW1]], %[[B1]], %[[VB1]] : tensor<10x4xf32>, tensor<10x4xf32>, tensor<10xf32>, tensor<10xf32>

// ADAM-SAME:     %[[STEP:[^:]+]]: tensor<f32> {tilefx.step}, %[[MW:[^:]+]]: tensor<10x4xf32> {tilefx.state = "fc.weight/exp_avg"}, %[[VW:[^:]+]]: tensor<10x4xf32> {tilefx.state = "fc.weight/exp_avg_sq"},
// ADAM-SAME:     %[[MB:[^:]+]]: tensor<10xf32> {tilefx.state = "fc.bias/exp_avg"}, %[[VB:[^:]+]]: tensor<10xf32> {tilefx.state = "fc.bias/exp_avg_sq"})
// ADAM-NEXT:     %[[W1:.+]], %[[MW1:.+]], %[[VW1:.+]] = ipu.adam %[[W]], %[[GW]], %[[MW]], %[[VW]] step %[[STEP]] lr %[[LR]] {ipu.place = #ipu.place<bwd>, beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, eps = 1.000000e-08 : f64, weight_decay = 0.000000e+00 : f64, decoupled = false, bias_correction = true, grad_scale = 1.000000e+00 : f64} : tensor<10x4xf32>, tensor<10x4xf32>, tensor<10x4xf32>, tensor<10x4xf32>, tensor<f32>, tensor<f32> -> tensor<10x4xf32>, tensor<10x4xf32>, tensor<10x4xf32>
// ADAM-NEXT:     %[[B1:.+]], %[[MB1:.+]], %[[VB1:.+]] = ipu.adam %[[B]], %[[GB]], %[[MB]], %[[VB]] step %[[STEP]] lr %[[LR]] {ipu.place = #ipu.place<bwd>, beta1 = 9.000000e-01 : f64, beta2 = 9.990000e-01 : f64, eps = 1.000000e-08 : f64, weight_decay = 0.000000e+00 : f64, decoupled = false, bias_correction = true, grad_scale = 1.000000e+00 : f64} : tensor<10xf32>, tensor<10xf32>, tensor<10xf32>, tensor<10xf32>, tensor<f32>, tensor<f32> -> tensor<10xf32>, tensor<10xf32>, tensor<10xf32>
// ADAM-NEXT:     func.return %[[W1]], %[[MW1]], %[[VW1]], %[[B1]], %[[MB1]], %[[VB1]] :

// Without momentum, SGD needs neither velocity nor step count.
// PLAIN-SAME:    ) -> (tensor<10x4xf32> {tilefx.param = "fc.weight"}, tensor<10xf32> {tilefx.param = "fc.bias"})
// PLAIN-NEXT:    %[[W1:.+]] = ipu.sgd %[[W]], %[[GW]] lr %[[LR]] {ipu.place = #ipu.place<bwd>, momentum = 0.000000e+00 : f64, {{.*}}} : tensor<10x4xf32>, tensor<10x4xf32>, tensor<f32> -> tensor<10x4xf32>
// PLAIN-NEXT:    %[[B1:.+]] = ipu.sgd %[[B]], %[[GB]] lr %[[LR]] {ipu.place = #ipu.place<bwd>, momentum = 0.000000e+00 : f64, {{.*}}} : tensor<10xf32>, tensor<10xf32>, tensor<f32> -> tensor<10xf32>
// PLAIN-NEXT:    func.return %[[W1]], %[[B1]] : tensor<10x4xf32>, tensor<10xf32>

// CHECK-NOT:     ipu.accumulate
// CHECK-NOT:     func.func

func.func @main(%w: tensor<10x4xf32> {tilefx.param = "fc.weight"},
                %b: tensor<10xf32> {tilefx.param = "fc.bias"},
                %x: tensor<8x4xf32> {tilefx.input = 0 : i64})
    -> (tensor<f32> {tilefx.output = 0 : i64, tilefx.loss},
        tensor<10x4xf32> {tilefx.grad = "fc.weight"},
        tensor<10xf32> {tilefx.grad = "fc.bias"}) {
  %wt = aten.permute %w {ipu.place = #ipu.place<fwd, block = "B0", ipu = 0>, dims = array<i64: 1, 0>} : tensor<10x4xf32> -> tensor<4x10xf32>
  %y = aten.addmm %b, %x, %wt {ipu.place = #ipu.place<fwd, block = "B0", ipu = 0>} : tensor<10xf32>, tensor<8x4xf32>, tensor<4x10xf32> -> tensor<8x10xf32>
  %loss = aten.mean %y {ipu.place = #ipu.place<fwd>} : tensor<8x10xf32> -> tensor<f32>
  %seed = aten.full {ipu.place = #ipu.place<bwd>, tilefx.loss_seed, size = array<i64: 8, 10>, fill_value = 1.25e-02 : f64, dtype = f32} : tensor<8x10xf32>
  %xt = aten.permute %x {ipu.place = #ipu.place<bwd, block = "B0", ipu = 0>, dims = array<i64: 1, 0>} : tensor<8x4xf32> -> tensor<4x8xf32>
  %gwt = aten.mm %xt, %seed {ipu.place = #ipu.place<bwd, block = "B0", ipu = 0>} : tensor<4x8xf32>, tensor<8x10xf32> -> tensor<4x10xf32>
  %gw = aten.permute %gwt {ipu.place = #ipu.place<bwd, block = "B0", ipu = 0>, dims = array<i64: 1, 0>} : tensor<4x10xf32> -> tensor<10x4xf32>
  %gb = aten.sum.dim_IntList %seed {dim = array<i64: 0>, keepdim = false} : tensor<8x10xf32> -> tensor<10xf32>
  func.return %loss, %gw, %gb : tensor<f32>, tensor<10x4xf32>, tensor<10xf32>
}
