// RUN: tilefx-opt %s --split-input-file --verify-diagnostics -p ipu-serialize-matmul | filecheck %s
// RUN: not tilefx-opt %s --split-input-file -p ipu-serialize-matmul 2>&1 | filecheck %s --check-prefix=FIRST

// `ipu-serialize-matmul` lowers poptorch.serializedMatMul(lhs[..., m, k], rhs[k, n], mode, factor)
// to `factor` aten pieces (m = 4, k = 8, n = 12 below):
// input_channels splits m and concatenates, output_channels splits n and
// concatenates, reducing_dim splits k and sums the partial products.
// Every new op keeps the placement of the serialized matmul.

// CHECK-LABEL: func.func @input_channels(
// CHECK-NEXT:    %[[X0:.+]] = aten.slice.Tensor %x {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1>, dim = 0 : i64, start = 0 : i64, end = 2 : i64} : tensor<4x8xf32> -> tensor<2x8xf32>
// CHECK-NEXT:    %[[Y0:.+]] = aten.mm %[[X0]], %w {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1>} : tensor<2x8xf32>, tensor<8x12xf32> -> tensor<2x12xf32>
// CHECK-NEXT:    %[[X1:.+]] = aten.slice.Tensor %x {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1>, dim = 0 : i64, start = 2 : i64, end = 4 : i64} : tensor<4x8xf32> -> tensor<2x8xf32>
// CHECK-NEXT:    %[[Y1:.+]] = aten.mm %[[X1]], %w {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1>} : tensor<2x8xf32>, tensor<8x12xf32> -> tensor<2x12xf32>
// CHECK-NEXT:    %y = aten.cat(%[[Y0]], %[[Y1]]) {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1>, dim = 0 : i64} : (tensor<2x12xf32>, tensor<2x12xf32>) -> tensor<4x12xf32>
// CHECK-NEXT:    %z = aten.relu %y
// CHECK-NEXT:    func.return %z
// CHECK-NOT:     ipu.serialized_matmul

func.func @input_channels(%x: tensor<4x8xf32>, %w: tensor<8x12xf32>) -> tensor<4x12xf32> {
  %y = ipu.serialized_matmul %x, %w {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1>, mode = "input_channels", factor = 2 : i64, keep_precision = false} : tensor<4x8xf32>, tensor<8x12xf32> -> tensor<4x12xf32>
  %z = aten.relu %y {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1>} : tensor<4x12xf32> -> tensor<4x12xf32>
  func.return %z : tensor<4x12xf32>
}

// -----

// CHECK-LABEL: func.func @output_channels(
// CHECK-NEXT:    %[[W0:.+]] = aten.slice.Tensor %w {ipu.place = #ipu.place<fwd>, dim = 1 : i64, start = 0 : i64, end = 3 : i64} : tensor<8x12xf32> -> tensor<8x3xf32>
// CHECK-NEXT:    %[[Y0:.+]] = aten.mm %x, %[[W0]] {ipu.place = #ipu.place<fwd>} : tensor<4x8xf32>, tensor<8x3xf32> -> tensor<4x3xf32>
// CHECK-NEXT:    %[[W1:.+]] = aten.slice.Tensor %w {ipu.place = #ipu.place<fwd>, dim = 1 : i64, start = 3 : i64, end = 6 : i64} : tensor<8x12xf32> -> tensor<8x3xf32>
// CHECK-NEXT:    %[[Y1:.+]] = aten.mm %x, %[[W1]] {{.*}} -> tensor<4x3xf32>
// CHECK-NEXT:    %[[W2:.+]] = aten.slice.Tensor %w {ipu.place = #ipu.place<fwd>, dim = 1 : i64, start = 6 : i64, end = 9 : i64}
// CHECK-NEXT:    %[[Y2:.+]] = aten.mm %x, %[[W2]] {{.*}} -> tensor<4x3xf32>
// CHECK-NEXT:    %[[W3:.+]] = aten.slice.Tensor %w {ipu.place = #ipu.place<fwd>, dim = 1 : i64, start = 9 : i64, end = 12 : i64}
// CHECK-NEXT:    %[[Y3:.+]] = aten.mm %x, %[[W3]] {{.*}} -> tensor<4x3xf32>
// CHECK-NEXT:    %y = aten.cat(%[[Y0]], %[[Y1]], %[[Y2]], %[[Y3]]) {ipu.place = #ipu.place<fwd>, dim = 1 : i64} : (tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x12xf32>
// CHECK-NEXT:    func.return %y

func.func @output_channels(%x: tensor<4x8xf32>, %w: tensor<8x12xf32>) -> tensor<4x12xf32> {
  %y = ipu.serialized_matmul %x, %w {ipu.place = #ipu.place<fwd>, mode = "output_channels", factor = 4 : i64} : tensor<4x8xf32>, tensor<8x12xf32> -> tensor<4x12xf32>
  func.return %y : tensor<4x12xf32>
}

// -----

// CHECK-LABEL: func.func @reducing_dim(
// CHECK-NEXT:    %[[X0:.+]] = aten.slice.Tensor %x {ipu.place = #ipu.place<bwd>, dim = 1 : i64, start = 0 : i64, end = 2 : i64} : tensor<4x8xf32> -> tensor<4x2xf32>
// CHECK-NEXT:    %[[W0:.+]] = aten.slice.Tensor %w {ipu.place = #ipu.place<bwd>, dim = 0 : i64, start = 0 : i64, end = 2 : i64} : tensor<8x12xf32> -> tensor<2x12xf32>
// CHECK-NEXT:    %[[P0:.+]] = aten.mm %[[X0]], %[[W0]] {ipu.place = #ipu.place<bwd>} : tensor<4x2xf32>, tensor<2x12xf32> -> tensor<4x12xf32>
// CHECK-NEXT:    %[[X1:.+]] = aten.slice.Tensor %x {{.*}}start = 2 : i64, end = 4 : i64}
// CHECK-NEXT:    %[[W1:.+]] = aten.slice.Tensor %w {{.*}}start = 2 : i64, end = 4 : i64}
// CHECK-NEXT:    %[[P1:.+]] = aten.mm %[[X1]], %[[W1]]
// CHECK-NEXT:    %[[S1:.+]] = aten.add.Tensor %[[P0]], %[[P1]] {ipu.place = #ipu.place<bwd>} : tensor<4x12xf32>, tensor<4x12xf32> -> tensor<4x12xf32>
// CHECK-NEXT:    %[[X2:.+]] = aten.slice.Tensor %x {{.*}}start = 4 : i64, end = 6 : i64}
// CHECK-NEXT:    %[[W2:.+]] = aten.slice.Tensor %w {{.*}}start = 4 : i64, end = 6 : i64}
// CHECK-NEXT:    %[[P2:.+]] = aten.mm %[[X2]], %[[W2]]
// CHECK-NEXT:    %[[S2:.+]] = aten.add.Tensor %[[S1]], %[[P2]]
// CHECK-NEXT:    %[[X3:.+]] = aten.slice.Tensor %x {{.*}}start = 6 : i64, end = 8 : i64}
// CHECK-NEXT:    %[[W3:.+]] = aten.slice.Tensor %w {{.*}}start = 6 : i64, end = 8 : i64}
// CHECK-NEXT:    %[[P3:.+]] = aten.mm %[[X3]], %[[W3]]
// CHECK-NEXT:    %y = aten.add.Tensor %[[S2]], %[[P3]]
// CHECK-NEXT:    func.return %y

func.func @reducing_dim(%x: tensor<4x8xf32>, %w: tensor<8x12xf32>) -> tensor<4x12xf32> {
  %y = ipu.serialized_matmul %x, %w {ipu.place = #ipu.place<bwd>, mode = "reducing_dim", factor = 4 : i64} : tensor<4x8xf32>, tensor<8x12xf32> -> tensor<4x12xf32>
  func.return %y : tensor<4x12xf32>
}

// -----
// Factor 1 is one plain matmul, whatever the mode.

// CHECK-LABEL: func.func @factor_one(
// CHECK-NEXT:    %a = aten.mm %x, %w {ipu.place = #ipu.place<fwd>} : tensor<4x8xf32>, tensor<8x12xf32> -> tensor<4x12xf32>
// CHECK-NEXT:    %b = aten.mm %x, %w {ipu.place = #ipu.place<fwd>} : tensor<4x8xf32>, tensor<8x12xf32> -> tensor<4x12xf32>
// CHECK-NEXT:    %c = aten.mm %x, %w {ipu.place = #ipu.place<fwd>} : tensor<4x8xf32>, tensor<8x12xf32> -> tensor<4x12xf32>
// CHECK-NEXT:    func.return %a, %b, %c

func.func @factor_one(%x: tensor<4x8xf32>, %w: tensor<8x12xf32>) -> (tensor<4x12xf32>, tensor<4x12xf32>, tensor<4x12xf32>) {
  %a = ipu.serialized_matmul %x, %w {ipu.place = #ipu.place<fwd>, mode = "input_channels", factor = 1 : i64} : tensor<4x8xf32>, tensor<8x12xf32> -> tensor<4x12xf32>
  %b = ipu.serialized_matmul %x, %w {ipu.place = #ipu.place<fwd>, mode = "reducing_dim", factor = 1 : i64} : tensor<4x8xf32>, tensor<8x12xf32> -> tensor<4x12xf32>
  %c = ipu.serialized_matmul %x, %w {ipu.place = #ipu.place<fwd>, mode = "output_channels", factor = 1 : i64} : tensor<4x8xf32>, tensor<8x12xf32> -> tensor<4x12xf32>
  func.return %a, %b, %c : tensor<4x12xf32>, tensor<4x12xf32>, tensor<4x12xf32>
}

// -----
// A batched lhs [b, m, k]: input_channels slices m in every batch and uses
// bmm against rhs expanded to [b, k, n]; the other modes see the rows of
// every batch as one [b*m, k] matrix.

// CHECK-LABEL: func.func @batched(
// CHECK-NEXT:    %[[R:.+]] = aten.expand %w {ipu.place = #ipu.place<fwd>, size = array<i64: 2, 8, 12>} : tensor<8x12xf32> -> tensor<2x8x12xf32>
// CHECK-NEXT:    %[[X0:.+]] = aten.slice.Tensor %x {ipu.place = #ipu.place<fwd>, dim = 1 : i64, start = 0 : i64, end = 1 : i64} : tensor<2x4x8xf32> -> tensor<2x1x8xf32>
// CHECK-NEXT:    %[[Y0:.+]] = aten.bmm %[[X0]], %[[R]] {ipu.place = #ipu.place<fwd>} : tensor<2x1x8xf32>, tensor<2x8x12xf32> -> tensor<2x1x12xf32>
// CHECK-NEXT:    %[[X1:.+]] = aten.slice.Tensor %x {{.*}}start = 1 : i64, end = 2 : i64}
// CHECK-NEXT:    %[[Y1:.+]] = aten.bmm %[[X1]], %[[R]]
// CHECK-NEXT:    %[[X2:.+]] = aten.slice.Tensor %x {{.*}}start = 2 : i64, end = 3 : i64}
// CHECK-NEXT:    %[[Y2:.+]] = aten.bmm %[[X2]], %[[R]]
// CHECK-NEXT:    %[[X3:.+]] = aten.slice.Tensor %x {{.*}}start = 3 : i64, end = 4 : i64}
// CHECK-NEXT:    %[[Y3:.+]] = aten.bmm %[[X3]], %[[R]]
// CHECK-NEXT:    %a = aten.cat(%[[Y0]], %[[Y1]], %[[Y2]], %[[Y3]]) {ipu.place = #ipu.place<fwd>, dim = 1 : i64} : ({{.*}}) -> tensor<2x4x12xf32>

// CHECK-NEXT:    %[[XF:.+]] = aten.view %x {ipu.place = #ipu.place<fwd>, size = array<i64: 8, 8>} : tensor<2x4x8xf32> -> tensor<8x8xf32>
// CHECK-NEXT:    %[[W0:.+]] = aten.slice.Tensor %w {{.*}}dim = 1 : i64, start = 0 : i64, end = 6 : i64}
// CHECK-NEXT:    %[[Y0:.+]] = aten.mm %[[XF]], %[[W0]] {{.*}} -> tensor<8x6xf32>
// CHECK-NEXT:    %[[W1:.+]] = aten.slice.Tensor %w {{.*}}dim = 1 : i64, start = 6 : i64, end = 12 : i64}
// CHECK-NEXT:    %[[Y1:.+]] = aten.mm %[[XF]], %[[W1]] {{.*}} -> tensor<8x6xf32>
// CHECK-NEXT:    %[[C:.+]] = aten.cat(%[[Y0]], %[[Y1]]) {{.*}}dim = 1 : i64} : ({{.*}}) -> tensor<8x12xf32>
// CHECK-NEXT:    %b = aten.view %[[C]] {ipu.place = #ipu.place<fwd>, size = array<i64: 2, 4, 12>} : tensor<8x12xf32> -> tensor<2x4x12xf32>

// CHECK-NEXT:    %[[XF:.+]] = aten.view %x {{.*}}size = array<i64: 8, 8>}
// CHECK-NEXT:    %[[X0:.+]] = aten.slice.Tensor %[[XF]] {{.*}}dim = 1 : i64, start = 0 : i64, end = 4 : i64} : tensor<8x8xf32> -> tensor<8x4xf32>
// CHECK-NEXT:    %[[W0:.+]] = aten.slice.Tensor %w {{.*}}dim = 0 : i64, start = 0 : i64, end = 4 : i64} : tensor<8x12xf32> -> tensor<4x12xf32>
// CHECK-NEXT:    %[[P0:.+]] = aten.mm %[[X0]], %[[W0]] {{.*}} -> tensor<8x12xf32>
// CHECK-NEXT:    %[[X1:.+]] = aten.slice.Tensor %[[XF]] {{.*}}dim = 1 : i64, start = 4 : i64, end = 8 : i64}
// CHECK-NEXT:    %[[W1:.+]] = aten.slice.Tensor %w {{.*}}dim = 0 : i64, start = 4 : i64, end = 8 : i64}
// CHECK-NEXT:    %[[P1:.+]] = aten.mm %[[X1]], %[[W1]]
// CHECK-NEXT:    %[[S:.+]] = aten.add.Tensor %[[P0]], %[[P1]]
// CHECK-NEXT:    %c = aten.view %[[S]] {{.*}}size = array<i64: 2, 4, 12>}

// CHECK-NEXT:    %[[XF:.+]] = aten.view %x {{.*}}size = array<i64: 8, 8>}
// CHECK-NEXT:    %[[Y:.+]] = aten.mm %[[XF]], %w
// CHECK-NEXT:    %d = aten.view %[[Y]] {{.*}}size = array<i64: 2, 4, 12>}
// CHECK-NEXT:    func.return %a, %b, %c, %d

func.func @batched(%x: tensor<2x4x8xf32>, %w: tensor<8x12xf32>) -> (tensor<2x4x12xf32>, tensor<2x4x12xf32>, tensor<2x4x12xf32>, tensor<2x4x12xf32>) {
  %a = ipu.serialized_matmul %x, %w {ipu.place = #ipu.place<fwd>, mode = "input_channels", factor = 4 : i64} : tensor<2x4x8xf32>, tensor<8x12xf32> -> tensor<2x4x12xf32>
  %b = ipu.serialized_matmul %x, %w {ipu.place = #ipu.place<fwd>, mode = "output_channels", factor = 2 : i64} : tensor<2x4x8xf32>, tensor<8x12xf32> -> tensor<2x4x12xf32>
  %c = ipu.serialized_matmul %x, %w {ipu.place = #ipu.place<fwd>, mode = "reducing_dim", factor = 2 : i64} : tensor<2x4x8xf32>, tensor<8x12xf32> -> tensor<2x4x12xf32>
  %d = ipu.serialized_matmul %x, %w {ipu.place = #ipu.place<fwd>, mode = "input_channels", factor = 1 : i64} : tensor<2x4x8xf32>, tensor<8x12xf32> -> tensor<2x4x12xf32>
  func.return %a, %b, %c, %d : tensor<2x4x12xf32>, tensor<2x4x12xf32>, tensor<2x4x12xf32>, tensor<2x4x12xf32>
}

// -----
// Two batch dimensions [3, 2, m, k] in input_channels mode: viewed as [6, m, k] and back.

// CHECK-LABEL: func.func @two_batch_dims(
// CHECK-NEXT:    %[[X:.+]] = aten.view %x {{.*}}size = array<i64: 6, 4, 8>} : tensor<3x2x4x8xf32> -> tensor<6x4x8xf32>
// CHECK-NEXT:    %[[R:.+]] = aten.expand %w {{.*}}size = array<i64: 6, 8, 12>}
// CHECK-NEXT:    %[[X0:.+]] = aten.slice.Tensor %[[X]] {{.*}}dim = 1 : i64, start = 0 : i64, end = 2 : i64} : tensor<6x4x8xf32> -> tensor<6x2x8xf32>
// CHECK-NEXT:    %[[Y0:.+]] = aten.bmm %[[X0]], %[[R]] {{.*}} -> tensor<6x2x12xf32>
// CHECK-NEXT:    %[[X1:.+]] = aten.slice.Tensor %[[X]] {{.*}}dim = 1 : i64, start = 2 : i64, end = 4 : i64}
// CHECK-NEXT:    %[[Y1:.+]] = aten.bmm %[[X1]], %[[R]]
// CHECK-NEXT:    %[[C:.+]] = aten.cat(%[[Y0]], %[[Y1]]) {{.*}}dim = 1 : i64} : ({{.*}}) -> tensor<6x4x12xf32>
// CHECK-NEXT:    %y = aten.view %[[C]] {{.*}}size = array<i64: 3, 2, 4, 12>} : tensor<6x4x12xf32> -> tensor<3x2x4x12xf32>

func.func @two_batch_dims(%x: tensor<3x2x4x8xf32>, %w: tensor<8x12xf32>) -> tensor<3x2x4x12xf32> {
  %y = ipu.serialized_matmul %x, %w {ipu.place = #ipu.place<fwd>, mode = "input_channels", factor = 2 : i64} : tensor<3x2x4x8xf32>, tensor<8x12xf32> -> tensor<3x2x4x12xf32>
  func.return %y : tensor<3x2x4x12xf32>
}

// -----
// An available-memory proportion goes to the matmul pieces only.

// CHECK-LABEL: func.func @memory(
// CHECK-NEXT:    aten.slice.Tensor %x {ipu.place = #ipu.place<fwd>, dim = 0 : i64
// CHECK-NEXT:    aten.mm {{.*}} {ipu.place = #ipu.place<fwd>, ipu.available_memory = 2.500000e-01 : f64}
// CHECK-NEXT:    aten.slice.Tensor %x {ipu.place = #ipu.place<fwd>, dim = 0 : i64
// CHECK-NEXT:    aten.mm {{.*}} {ipu.place = #ipu.place<fwd>, ipu.available_memory = 2.500000e-01 : f64}
// CHECK-NEXT:    %y = aten.cat({{.*}}) {ipu.place = #ipu.place<fwd>, dim = 0 : i64}

func.func @memory(%x: tensor<4x8xf32>, %w: tensor<8x12xf32>) -> tensor<4x12xf32> {
  %y = ipu.serialized_matmul %x, %w {ipu.place = #ipu.place<fwd>, ipu.available_memory = 0.25 : f64, mode = "input_channels", factor = 2 : i64} : tensor<4x8xf32>, tensor<8x12xf32> -> tensor<4x12xf32>
  func.return %y : tensor<4x12xf32>
}

// -----
// A factor that does not divide the split dimension is an error naming both.
// Without --verify-diagnostics tilefx-opt stops at the first one (FIRST).

// CHECK: ipu.serialized_matmul: factor 3 does not divide the input_channels dimension 4
// FIRST: error: ipu.serialized_matmul: factor 3 does not divide the input_channels dimension 4
// FIRST-NOT: error:

func.func @bad_m(%x: tensor<4x8xf32>, %w: tensor<8x12xf32>) -> tensor<4x12xf32> {
  %y = ipu.serialized_matmul %x, %w {mode = "input_channels", factor = 3 : i64} : tensor<4x8xf32>, tensor<8x12xf32> -> tensor<4x12xf32>
  func.return %y : tensor<4x12xf32>
}

// -----

// CHECK: ipu.serialized_matmul: factor 3 does not divide the reducing_dim dimension 8

func.func @bad_k(%x: tensor<2x4x8xf32>, %w: tensor<8x12xf32>) -> tensor<2x4x12xf32> {
  %y = ipu.serialized_matmul %x, %w {mode = "reducing_dim", factor = 3 : i64} : tensor<2x4x8xf32>, tensor<8x12xf32> -> tensor<2x4x12xf32>
  func.return %y : tensor<2x4x12xf32>
}

// -----

// CHECK: ipu.serialized_matmul: factor 8 does not divide the output_channels dimension 12

func.func @bad_n(%x: tensor<4x8xf32>, %w: tensor<8x12xf32>) -> tensor<4x12xf32> {
  %y = ipu.serialized_matmul %x, %w {mode = "output_channels", factor = 8 : i64} : tensor<4x8xf32>, tensor<8x12xf32> -> tensor<4x12xf32>
  func.return %y : tensor<4x12xf32>
}

// -----
// rhs must be [k, n] with the k of lhs.

// CHECK: ipu.serialized_matmul: expected lhs [..., m, k] and rhs [k, n], got [4, 8] and [6, 12]

func.func @bad_shape(%x: tensor<4x8xf32>, %w: tensor<6x12xf32>) -> tensor<4x12xf32> {
  %y = ipu.serialized_matmul %x, %w {mode = "output_channels", factor = 2 : i64} : tensor<4x8xf32>, tensor<6x12xf32> -> tensor<4x12xf32>
  func.return %y : tensor<4x12xf32>
}
