// RUN: tilefx-opt %s --split-input-file --verify-diagnostics -p ipu-available-memory | filecheck %s --check-prefixes=CHECK,DEFAULT
// RUN: tilefx-opt %s --split-input-file --verify-diagnostics -p 'ipu-available-memory{default-proportion=0.5 per-ipu=0.1,0.25}' | filecheck %s --check-prefixes=CHECK,PERIPU
// RUN: tilefx-opt %s --split-input-file --verify-diagnostics -p 'ipu-available-memory,ipu-serialize-matmul' | filecheck %s --check-prefix=SERIAL
// RUN: tilefx-opt %s --split-input-file --verify-diagnostics -p 'ipu-serialize-matmul,ipu-available-memory' | filecheck %s --check-prefix=SERIAL
// RUN: not tilefx-opt %s --split-input-file -p 'ipu-available-memory{default-proportion=0}' 2>&1 | filecheck %s --check-prefix=ZERO
// RUN: not tilefx-opt %s --split-input-file -p 'ipu-available-memory{per-ipu=0.5,1.5}' 2>&1 | filecheck %s --check-prefix=TOOBIG

// `ipu-available-memory` writes `ipu.available_memory` on every op that plans
// temporaries (matmul, conv, embedding, gather/index): the proportion of an
// `ipu.set_available_memory` on its result (the set op disappears), else the
// proportion of its IPU, else the default (0.6). Other ops are untouched.

// ZERO: error: available memory proportion must be in (0, 1], got 0.0 (default_proportion)
// TOOBIG: error: available memory proportion must be in (0, 1], got 1.5 (per_ipu[1])

// CHECK-LABEL: func.func @main(
// CHECK-NEXT:    %h = aten.mm %x, %w {ipu.place = #ipu.place<fwd, block = "B0", ipu = 0>, ipu.available_memory = 3.000000e-01 : f64} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %r = aten.relu %h {ipu.place = #ipu.place<fwd, block = "B0", ipu = 0>} : tensor<4x8xf32> -> tensor<4x8xf32>

// a traced nn.Linear on a 3-D input: set_available_memory sees through the views
// CHECK-NEXT:    %x2 = aten.view %x3 {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1>, size = array<i64: 4, 8>}
// CHECK-NEXT:    %l = aten.addmm %b, %x2, %w {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1>, ipu.available_memory = 2.000000e-01 : f64}
// CHECK-NEXT:    %l3 = aten.view %l {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1>, size = array<i64: 2, 2, 8>}

// DEFAULT-NEXT:  %c = aten.convolution %img, %k {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1>, ipu.available_memory = 6.000000e-01 : f64,
// DEFAULT-NEXT:  %e = aten.embedding %table, %ids {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1>, ipu.available_memory = 6.000000e-01 : f64}
// DEFAULT-NEXT:  %g = aten.gather %x, %gi {ipu.place = #ipu.place<fwd, block = "B0", ipu = 0>, ipu.available_memory = 6.000000e-01 : f64, dim = 1 : i64}
// DEFAULT-NEXT:  %i = aten.index.Tensor %x, (%rows) {ipu.available_memory = 6.000000e-01 : f64}
// DEFAULT-NEXT:  %gw = aten.mm %xt, %r {ipu.place = #ipu.place<bwd, block = "B0", ipu = 0>, ipu.available_memory = 6.000000e-01 : f64}
// DEFAULT-NEXT:  %kept = aten.mm %x, %w {ipu.available_memory = 9.000000e-01 : f64}

// PERIPU-NEXT:   %c = aten.convolution %img, %k {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1>, ipu.available_memory = 2.500000e-01 : f64,
// PERIPU-NEXT:   %e = aten.embedding %table, %ids {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1>, ipu.available_memory = 2.500000e-01 : f64}
// PERIPU-NEXT:   %g = aten.gather %x, %gi {ipu.place = #ipu.place<fwd, block = "B0", ipu = 0>, ipu.available_memory = 1.000000e-01 : f64, dim = 1 : i64}
// PERIPU-NEXT:   %i = aten.index.Tensor %x, (%rows) {ipu.available_memory = 5.000000e-01 : f64}
// PERIPU-NEXT:   %gw = aten.mm %xt, %r {ipu.place = #ipu.place<bwd, block = "B0", ipu = 0>, ipu.available_memory = 1.000000e-01 : f64}
// PERIPU-NEXT:   %kept = aten.mm %x, %w {ipu.available_memory = 9.000000e-01 : f64}

// CHECK-NEXT:    func.return %r, %l3, %c, %e, %g, %i, %gw, %kept :
// CHECK-NOT:     ipu.set_available_memory

func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>, %x3: tensor<2x2x8xf32>,
                %img: tensor<1x1x5x5xf32>, %k: tensor<2x1x3x3xf32>, %table: tensor<10x8xf32>,
                %ids: tensor<4xi64>, %gi: tensor<4x2xi64>, %rows: tensor<3xi64>, %xt: tensor<8x4xf32>)
    -> (tensor<4x8xf32>, tensor<2x2x8xf32>, tensor<1x2x3x3xf32>, tensor<4x8xf32>, tensor<4x2xf32>,
        tensor<3x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>) {
  %h = aten.mm %x, %w {ipu.place = #ipu.place<fwd, block = "B0", ipu = 0>} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %hs = ipu.set_available_memory %h {ipu.place = #ipu.place<fwd, block = "B0", ipu = 0>, proportion = 0.3 : f64} : tensor<4x8xf32> -> tensor<4x8xf32>
  %r = aten.relu %hs {ipu.place = #ipu.place<fwd, block = "B0", ipu = 0>} : tensor<4x8xf32> -> tensor<4x8xf32>
  %x2 = aten.view %x3 {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1>, size = array<i64: 4, 8>} : tensor<2x2x8xf32> -> tensor<4x8xf32>
  %l = aten.addmm %b, %x2, %w {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1>} : tensor<8xf32>, tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %l3 = aten.view %l {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1>, size = array<i64: 2, 2, 8>} : tensor<4x8xf32> -> tensor<2x2x8xf32>
  %ls = ipu.set_available_memory %l3 {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1>, proportion = 0.2 : f64} : tensor<2x2x8xf32> -> tensor<2x2x8xf32>
  %c = aten.convolution %img, %k {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1>, stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, transposed = false, output_padding = array<i64: 0, 0>, groups = 1 : i64} : tensor<1x1x5x5xf32>, tensor<2x1x3x3xf32> -> tensor<1x2x3x3xf32>
  %e = aten.embedding %table, %ids {ipu.place = #ipu.place<fwd, block = "B1", ipu = 1>} : tensor<10x8xf32>, tensor<4xi64> -> tensor<4x8xf32>
  %g = aten.gather %x, %gi {ipu.place = #ipu.place<fwd, block = "B0", ipu = 0>, dim = 1 : i64} : tensor<4x8xf32>, tensor<4x2xi64> -> tensor<4x2xf32>
  %i = aten.index.Tensor %x, (%rows) : tensor<4x8xf32>, (tensor<3xi64>) -> tensor<3x8xf32>
  %gw = aten.mm %xt, %r {ipu.place = #ipu.place<bwd, block = "B0", ipu = 0>} : tensor<8x4xf32>, tensor<4x8xf32> -> tensor<8x8xf32>
  %kept = aten.mm %x, %w {ipu.available_memory = 0.9 : f64} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  func.return %r, %ls, %c, %e, %g, %i, %gw, %kept : tensor<4x8xf32>, tensor<2x2x8xf32>, tensor<1x2x3x3xf32>, tensor<4x8xf32>, tensor<4x2xf32>, tensor<3x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>
}

// -----
// With a serialized matmul the result does not depend on the pass order:
// before serialization the proportion lands on ipu.serialized_matmul and is
// copied to its pieces; after, set_available_memory sees through the
// aten.cat to every piece.

// SERIAL-LABEL: func.func @serialized(
// SERIAL-NEXT:    aten.slice.Tensor %x
// SERIAL-NEXT:    aten.mm {{.*}}ipu.available_memory = 1.500000e-01 : f64}
// SERIAL-NEXT:    aten.slice.Tensor %x
// SERIAL-NEXT:    aten.mm {{.*}}ipu.available_memory = 1.500000e-01 : f64}
// SERIAL-NEXT:    %y = aten.cat({{.*}}) {ipu.place = #ipu.place<fwd>, dim = 0 : i64} :
// SERIAL-NEXT:    %z = aten.mm %y, %v {ipu.place = #ipu.place<fwd>, ipu.available_memory = 6.000000e-01 : f64}
// SERIAL-NEXT:    func.return %z

func.func @serialized(%x: tensor<4x8xf32>, %w: tensor<8x12xf32>, %v: tensor<12x2xf32>) -> tensor<4x2xf32> {
  %y = ipu.serialized_matmul %x, %w {ipu.place = #ipu.place<fwd>, mode = "input_channels", factor = 2 : i64} : tensor<4x8xf32>, tensor<8x12xf32> -> tensor<4x12xf32>
  %ys = ipu.set_available_memory %y {ipu.place = #ipu.place<fwd>, proportion = 0.15 : f64} : tensor<4x12xf32> -> tensor<4x12xf32>
  %z = aten.mm %ys, %v {ipu.place = #ipu.place<fwd>} : tensor<4x12xf32>, tensor<12x2xf32> -> tensor<4x2xf32>
  func.return %z : tensor<4x2xf32>
}

// -----
// set_available_memory on a tensor no matmul/conv/embedding/gather produces:
// nothing to tune, so it is dropped (with a warning naming aten.relu), as
// PopTorch accepts it.

// CHECK-LABEL: func.func @not_a_matmul(
// CHECK-NEXT:    %r = aten.relu %x
// CHECK-NEXT:    func.return %r

func.func @not_a_matmul(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = aten.relu %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %s = ipu.set_available_memory %r {proportion = 0.3 : f64} : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %s : tensor<4x8xf32>
}

// -----

// CHECK: available memory proportion must be in (0, 1], got 0.0

func.func @bad_set(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %a = aten.mm %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %s = ipu.set_available_memory %a {proportion = 0.0 : f64} : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %s : tensor<4x8xf32>
}
