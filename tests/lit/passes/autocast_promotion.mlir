// RUN: tilefx-opt %s -p ipu-autocast | filecheck %s
// RUN: tilefx-opt %s -p 'ipu-autocast{half_float_casting="downcast"}' | filecheck %s --check-prefix=DOWN

// The fp16 result of an autocast matmul flows on by PyTorch's promotion:
// with an fp32 bias (a dimensioned tensor) the add computes in fp32, the
// fp16 operand cast up; with an fp32 zero-dimensional scale the mul stays
// fp16 (dimensioned tensors decide); an explicit dtype keeps its type. User
// outputs (tilefx.output) take the new types, a gradient gets its fp32 back.

// CHECK-LABEL: func.func @main
// CHECK-SAME:    -> (tensor<4x2xf32> {tilefx.output = 0 : i64}, tensor<4x2xf16> {tilefx.output = 1 : i64}, tensor<4x2xf32> {tilefx.output = 2 : i64}, tensor<4x2xf32> {tilefx.grad = "w"})
// CHECK:         %[[Y:.+]] = aten.mm {{.*}} -> tensor<4x2xf16>
// CHECK-NEXT:    %[[YUP:.+]] = aten._to_copy %[[Y]] {dtype = f32} : tensor<4x2xf16> -> tensor<4x2xf32>
// CHECK-NEXT:    %a = aten.add.Tensor %[[YUP]], %b : tensor<4x2xf32>, tensor<2xf32> -> tensor<4x2xf32>
// CHECK-NEXT:    %[[S16:.+]] = aten._to_copy %s {dtype = f16} : tensor<f32> -> tensor<f16>
// CHECK-NEXT:    %m = aten.mul.Tensor %[[Y]], %[[S16]] : tensor<4x2xf16>, tensor<f16> -> tensor<4x2xf16>
// CHECK-NEXT:    %c = aten._to_copy %[[Y]] {dtype = f32} : tensor<4x2xf16> -> tensor<4x2xf32>
// CHECK-NEXT:    %[[G:.+]] = aten._to_copy %m {dtype = f32} : tensor<4x2xf16> -> tensor<4x2xf32>
// CHECK-NEXT:    func.return %a, %m, %c, %[[G]]

// FloatDowncastToHalf: fp16 meeting fp32 computes in fp16.
// DOWN:          %[[B16:.+]] = aten._to_copy %b {dtype = f16} : tensor<2xf32> -> tensor<2xf16>
// DOWN-NEXT:     %a = aten.add.Tensor %{{.+}}, %[[B16]] : tensor<4x2xf16>, tensor<2xf16> -> tensor<4x2xf16>

func.func @main(%x: tensor<4x8xf32> {tilefx.input = 0 : i64}, %w: tensor<8x2xf32> {tilefx.param = "w"},
                %b: tensor<2xf32> {tilefx.param = "b"}, %s: tensor<f32> {tilefx.param = "s"})
    -> (tensor<4x2xf32> {tilefx.output = 0 : i64}, tensor<4x2xf32> {tilefx.output = 1 : i64},
        tensor<4x2xf32> {tilefx.output = 2 : i64}, tensor<4x2xf32> {tilefx.grad = "w"}) {
  %y = aten.mm %x, %w {ipu.autocast = true} : tensor<4x8xf32>, tensor<8x2xf32> -> tensor<4x2xf32>
  %a = aten.add.Tensor %y, %b : tensor<4x2xf32>, tensor<2xf32> -> tensor<4x2xf32>
  %m = aten.mul.Tensor %y, %s : tensor<4x2xf32>, tensor<f32> -> tensor<4x2xf32>
  %c = aten._to_copy %y {dtype = f32} : tensor<4x2xf32> -> tensor<4x2xf32>
  func.return %a, %m, %c, %m : tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>
}
