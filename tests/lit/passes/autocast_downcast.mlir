// RUN: tilefx-opt %s -p 'ipu-autocast{half_float_casting="downcast"}' | filecheck %s
// RUN: tilefx-opt %s -p ipu-autocast | filecheck %s --check-prefix=UP

// FloatDowncastToHalf: the frontend's cast of an fp16 input to fp32 (marked
// ipu.upcast_input) becomes an fp16 copy, the fp32 weight is cast down where
// it meets it, and the user output is fp16. The gradient result keeps fp32.
// Without it (HalfUpcastToFloat, PyTorch's rule) nothing changes.

// CHECK-LABEL: func.func @main
// CHECK-SAME:    -> (tensor<4x2xf16> {tilefx.output = 0 : i64}, tensor<8x2xf32> {tilefx.grad = "w"})
// CHECK:         %x32 = aten._to_copy %x {ipu.upcast_input, dtype = f16} : tensor<4x8xf16> -> tensor<4x8xf16>
// CHECK-NEXT:    %[[W16:.+]] = aten._to_copy %w {dtype = f16} : tensor<8x2xf32> -> tensor<8x2xf16>
// CHECK-NEXT:    %y = aten.mm %x32, %[[W16]] : tensor<4x8xf16>, tensor<8x2xf16> -> tensor<4x2xf16>
// CHECK-NEXT:    %xt = aten.permute %x32 {dims = array<i64: 1, 0>} : tensor<4x8xf16> -> tensor<8x4xf16>
// CHECK-NEXT:    %g = aten.mm %xt, %y : tensor<8x4xf16>, tensor<4x2xf16> -> tensor<8x2xf16>
// CHECK-NEXT:    %[[G32:.+]] = aten._to_copy %g {dtype = f32} : tensor<8x2xf16> -> tensor<8x2xf32>
// CHECK-NEXT:    func.return %y, %[[G32]]

// UP:            %x32 = aten._to_copy %x {ipu.upcast_input, dtype = f32} : tensor<4x8xf16> -> tensor<4x8xf32>
// UP-NEXT:       %y = aten.mm %x32, %w : tensor<4x8xf32>, tensor<8x2xf32> -> tensor<4x2xf32>

func.func @main(%x: tensor<4x8xf16> {tilefx.input = 0 : i64}, %w: tensor<8x2xf32> {tilefx.param = "w"})
    -> (tensor<4x2xf32> {tilefx.output = 0 : i64}, tensor<8x2xf32> {tilefx.grad = "w"}) {
  %x32 = aten._to_copy %x {ipu.upcast_input, dtype = f32} : tensor<4x8xf16> -> tensor<4x8xf32>
  %y = aten.mm %x32, %w : tensor<4x8xf32>, tensor<8x2xf32> -> tensor<4x2xf32>
  %xt = aten.permute %x32 {dims = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
  %g = aten.mm %xt, %y : tensor<8x4xf32>, tensor<4x2xf32> -> tensor<8x2xf32>
  func.return %y, %g : tensor<4x2xf32>, tensor<8x2xf32>
}
