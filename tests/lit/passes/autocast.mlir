// RUN: tilefx-opt %s -p ipu-autocast | filecheck %s
// RUN: tilefx-opt %s -p 'ipu-autocast{fp16="aten.relu" fp32="aten.mm"}' | filecheck %s --check-prefix=CUSTOM

// Only ops marked ipu.autocast = true change. With the default policy the
// matmul runs in fp16 between casts; relu and the unmarked matmul stay fp32.

// CHECK-LABEL: func.func @main
// CHECK:         %[[X16:.+]] = aten._to_copy %x {{.*}}dtype = f16} : tensor<4x8xf32> -> tensor<4x8xf16>
// CHECK-NEXT:    %[[W16:.+]] = aten._to_copy %w {{.*}}dtype = f16} : tensor<8x2xf32> -> tensor<8x2xf16>
// CHECK-NEXT:    %[[Y16:.+]] = aten.mm %[[X16]], %[[W16]] {ipu.autocast = true{{.*}}} : tensor<4x8xf16>, tensor<8x2xf16> -> tensor<4x2xf16>
// CHECK-NEXT:    %[[Y:.+]] = aten._to_copy %[[Y16]] {{.*}}dtype = f32} : tensor<4x2xf16> -> tensor<4x2xf32>
// CHECK-NEXT:    %r = aten.relu %[[Y]] {ipu.autocast = true} : tensor<4x2xf32> -> tensor<4x2xf32>
// CHECK-NEXT:    %z = aten.mm %x, %w : tensor<4x8xf32>, tensor<8x2xf32> -> tensor<4x2xf32>

// CUSTOM:        %[[Y:.+]] = aten.mm %x, %w {ipu.autocast = true} : tensor<4x8xf32>, tensor<8x2xf32> -> tensor<4x2xf32>
// CUSTOM-NEXT:   %[[Y16:.+]] = aten._to_copy %[[Y]] {{.*}}dtype = f16} : tensor<4x2xf32> -> tensor<4x2xf16>
// CUSTOM-NEXT:   %[[R16:.+]] = aten.relu %[[Y16]] {ipu.autocast = true} : tensor<4x2xf16> -> tensor<4x2xf16>
// CUSTOM-NEXT:   %{{.+}} = aten._to_copy %[[R16]] {{.*}}dtype = f32} : tensor<4x2xf16> -> tensor<4x2xf32>

func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x2xf32>) -> (tensor<4x2xf32>, tensor<4x2xf32>) {
  %y = aten.mm %x, %w {ipu.autocast = true} : tensor<4x8xf32>, tensor<8x2xf32> -> tensor<4x2xf32>
  %r = aten.relu %y {ipu.autocast = true} : tensor<4x2xf32> -> tensor<4x2xf32>
  %z = aten.mm %x, %w : tensor<4x8xf32>, tensor<8x2xf32> -> tensor<4x2xf32>
  func.return %r, %z : tensor<4x2xf32>, tensor<4x2xf32>
}
