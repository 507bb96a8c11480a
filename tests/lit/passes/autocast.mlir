// RUN: tilefx-opt %s -p ipu-autocast | filecheck %s
// RUN: tilefx-opt %s -p 'ipu-autocast{fp16="aten.relu" fp32="aten.mm"}' | filecheck %s --check-prefix=CUSTOM

// Only ops marked ipu.autocast = true are typed by the policy. With the
// default policy the matmul runs in and returns fp16 (as torch.autocast);
// relu, not in the policy, follows its operand into fp16; the unmarked
// matmul stays fp32. These results have no tilefx.output role, so they get
// their old type back at the return.

// CHECK-LABEL: func.func @main
// CHECK-SAME:    -> (tensor<4x2xf32>, tensor<4x2xf32>)
// CHECK:         %[[X16:.+]] = aten._to_copy %x {{.*}}dtype = f16} : tensor<4x8xf32> -> tensor<4x8xf16>
// CHECK-NEXT:    %[[W16:.+]] = aten._to_copy %w {{.*}}dtype = f16} : tensor<8x2xf32> -> tensor<8x2xf16>
// CHECK-NEXT:    %[[Y16:.+]] = aten.mm %[[X16]], %[[W16]] {ipu.autocast = true{{.*}}} : tensor<4x8xf16>, tensor<8x2xf16> -> tensor<4x2xf16>
// CHECK-NEXT:    %r = aten.relu %[[Y16]] {ipu.autocast = true} : tensor<4x2xf16> -> tensor<4x2xf16>
// CHECK-NEXT:    %z = aten.mm %x, %w : tensor<4x8xf32>, tensor<8x2xf32> -> tensor<4x2xf32>
// CHECK-NEXT:    %[[R:.+]] = aten._to_copy %r {{.*}}dtype = f32} : tensor<4x2xf16> -> tensor<4x2xf32>
// CHECK-NEXT:    func.return %[[R]], %z : tensor<4x2xf32>, tensor<4x2xf32>

// An fp32 op returns fp32; an fp16 op after it casts its operand down.
// CUSTOM:        %y = aten.mm %x, %w {ipu.autocast = true} : tensor<4x8xf32>, tensor<8x2xf32> -> tensor<4x2xf32>
// CUSTOM-NEXT:   %[[Y16:.+]] = aten._to_copy %y {{.*}}dtype = f16} : tensor<4x2xf32> -> tensor<4x2xf16>
// CUSTOM-NEXT:   %r = aten.relu %[[Y16]] {ipu.autocast = true} : tensor<4x2xf16> -> tensor<4x2xf16>

func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x2xf32>) -> (tensor<4x2xf32>, tensor<4x2xf32>) {
  %y = aten.mm %x, %w {ipu.autocast = true} : tensor<4x8xf32>, tensor<8x2xf32> -> tensor<4x2xf32>
  %r = aten.relu %y {ipu.autocast = true} : tensor<4x2xf32> -> tensor<4x2xf32>
  %z = aten.mm %x, %w : tensor<4x8xf32>, tensor<8x2xf32> -> tensor<4x2xf32>
  func.return %r, %z : tensor<4x2xf32>, tensor<4x2xf32>
}
