// RUN: tilefx-opt %s -p 'ipu-partials-type{type=half}' | filecheck %s --check-prefixes=CHECK,HALF
// RUN: tilefx-opt %s -p ipu-partials-type | filecheck %s --check-prefixes=CHECK,FLOAT
// RUN: tilefx-opt %s -p 'ipu-partials-type{type=half},ipu-serialize-matmul' | filecheck %s --check-prefix=SERIAL
// RUN: not tilefx-opt %s -p 'ipu-partials-type{type=fp16}' 2>&1 | filecheck %s --check-prefix=BAD

// `ipu-partials-type` writes the partials type (Precision.setPartialsType)
// on every matmul and convolution that has none: the machine model costs each
// op by its own `ipu.partials_type`. A type written on an op is kept; other
// ops get none; a serialized matmul's pieces copy it.

// CHECK-LABEL: func.func @main(
// HALF-NEXT:     %a = aten.mm %x, %w {ipu.partials_type = "half"}
// FLOAT-NEXT:    %a = aten.mm %x, %w {ipu.partials_type = "float"}
// CHECK-NEXT:    %r = aten.relu %a :
// HALF-NEXT:     %l = aten.addmm %b, %r, %w {ipu.partials_type = "half"}
// FLOAT-NEXT:    %l = aten.addmm %b, %r, %w {ipu.partials_type = "float"}
// HALF-NEXT:     %c = aten.convolution %img, %k {ipu.partials_type = "half",
// FLOAT-NEXT:    %c = aten.convolution %img, %k {ipu.partials_type = "float",
// CHECK-NEXT:    %kept = aten.mm %x, %w {ipu.partials_type = "float"}
// CHECK-NEXT:    %s = ipu.serialized_matmul %x, %w2 {ipu.partials_type =

// SERIAL-LABEL: func.func @main(
// SERIAL:        aten.slice.Tensor %x
// SERIAL-NEXT:   aten.mm {{.*}}ipu.partials_type = "half"
// SERIAL-NEXT:   aten.slice.Tensor %x
// SERIAL-NEXT:   aten.mm {{.*}}ipu.partials_type = "half"

// BAD: error: ipu-partials-type: type: 'fp16' is not one of half, float

func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>, %img: tensor<1x1x5x5xf32>,
                %k: tensor<2x1x3x3xf32>, %w2: tensor<8x12xf32>)
    -> (tensor<4x8xf32>, tensor<1x2x3x3xf32>, tensor<4x8xf32>, tensor<4x12xf32>) {
  %a = aten.mm %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %r = aten.relu %a : tensor<4x8xf32> -> tensor<4x8xf32>
  %l = aten.addmm %b, %r, %w : tensor<8xf32>, tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %c = aten.convolution %img, %k {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, transposed = false, output_padding = array<i64: 0, 0>, groups = 1 : i64} : tensor<1x1x5x5xf32>, tensor<2x1x3x3xf32> -> tensor<1x2x3x3xf32>
  %kept = aten.mm %x, %w {ipu.partials_type = "float"} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %s = ipu.serialized_matmul %x, %w2 {mode = "input_channels", factor = 2 : i64} : tensor<4x8xf32>, tensor<8x12xf32> -> tensor<4x12xf32>
  func.return %l, %c, %kept, %s : tensor<4x8xf32>, tensor<1x2x3x3xf32>, tensor<4x8xf32>, tensor<4x12xf32>
}
