// RUN: tilefx-opt %s -p 'ipu-training-step,ipu-loss-scaling' | filecheck %s --check-prefixes=CHECK,STATIC
// RUN: tilefx-opt %s -p 'ipu-training-step,ipu-loss-scaling{automatic=true}' | filecheck %s --check-prefixes=CHECK,ALS
// RUN: tilefx-opt %s -p 'ipu-training-step,ipu-loss-scaling{automatic=true}' | tilefx-opt | filecheck %s --check-prefixes=CHECK,ALS

// loss = mean(x @ w) in fp16: the loss seed is scaled (in fp16) by the runtime
// scale, every gradient is unscaled as it is accumulated, and with automatic
// loss scaling each fp16 gradient reports how many elements are >= 0.125 x 65504.

// CHECK-LABEL: func.func @main(
// CHECK-SAME:    %[[SCALE:[^:]+]]: tensor<f32> {tilefx.hyper = "loss_scaling"})
// ALS-SAME:      tensor<i64> {tilefx.als_upper}
// CHECK:         %seed = aten.full {{.*}}tilefx.loss_seed
// CHECK-NEXT:    %[[S16:.+]] = aten._to_copy %[[SCALE]] {{.*}}dtype = f16} : tensor<f32> -> tensor<f16>
// CHECK-NEXT:    %[[SEED:.+]] = aten.mul.Tensor %seed, %[[S16]] {{.*}}: tensor<f16>, tensor<f16> -> tensor<f16>
// ALS:           %[[ABS:.+]] = aten.abs %gw
// ALS-NEXT:      %[[BIG:.+]] = aten.ge.Scalar %[[ABS]] {{.*}}other = 8.188000e+03 : f64} : tensor<4x2xf16> -> tensor<4x2xi1>
// ALS-NEXT:      %[[COUNT:.+]] = aten.sum %[[BIG]] {{.*}}dtype = i64} : tensor<4x2xi1> -> tensor<i64>
// CHECK:         %[[INV:.+]] = aten.reciprocal %[[SCALE]]
// CHECK-NEXT:    %[[UNSCALED:.+]] = aten.mul.Tensor %gw, %[[INV]] {{.*}}: tensor<4x2xf16>, tensor<f32> -> tensor<4x2xf16>
// CHECK-NEXT:    %{{.+}} = ipu.accumulate %{{.+}}, %[[UNSCALED]]
// ALS:           func.return {{.*}}%[[COUNT]]
// STATIC-NOT:    tilefx.als_upper

func.func @main(%w: tensor<4x2xf16> {tilefx.param = "w"}, %x: tensor<3x4xf16> {tilefx.input = 0 : i64}) -> (tensor<f16> {tilefx.output = 0 : i64, tilefx.loss}, tensor<4x2xf16> {tilefx.grad = "w"}) {
  %y = aten.mm %x, %w {ipu.place = #ipu.place<fwd>} : tensor<3x4xf16>, tensor<4x2xf16> -> tensor<3x2xf16>
  %loss = aten.mean %y {ipu.place = #ipu.place<fwd>} : tensor<3x2xf16> -> tensor<f16>
  %seed = aten.full {ipu.place = #ipu.place<bwd>, tilefx.loss_seed, size = array<i64>, fill_value = 1.0 : f64, dtype = f16} : tensor<f16>
  %e = aten.expand %seed {ipu.place = #ipu.place<bwd>, size = array<i64: 3, 2>} : tensor<f16> -> tensor<3x2xf16>
  %d = aten.div.Scalar %e {ipu.place = #ipu.place<bwd>, other = 6 : i64} : tensor<3x2xf16> -> tensor<3x2xf16>
  %xt = aten.permute %x {ipu.place = #ipu.place<bwd>, dims = array<i64: 1, 0>} : tensor<3x4xf16> -> tensor<4x3xf16>
  %gw = aten.mm %xt, %d {ipu.place = #ipu.place<bwd>} : tensor<4x3xf16>, tensor<3x2xf16> -> tensor<4x2xf16>
  func.return %loss, %gw : tensor<f16>, tensor<4x2xf16>
}
