// RUN: tilefx-opt %s | filecheck %s
// RUN: tilefx-opt %s | tilefx-opt | filecheck %s
// RUN: tilefx-opt %s --print-op-generic | tilefx-opt | filecheck %s

// Every op of the tile dialect and every form of its attributes. The
// attributes print their fields in declaration order whatever the order they
// were written in; ops print their discardable attributes (ipu.place) first,
// then their properties in the order they were written. tests/dialects/test_device_ir.py fails when an op or attribute is
// missing here.

// CHECK-LABEL: func.func @attributes(
// CHECK-SAME:  %x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
// CHECK-NEXT:    %lin = aten.relu %x {tile.mapping = #tile.linear<start = 0, used = 1, grain = 64>} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %lin_wrap = aten.relu %x {tile.mapping = #tile.linear<start = 1471, used = 2, grain = 64>} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %lin_reordered = aten.relu %x {tile.mapping = #tile.linear<start = 3, used = 1472, grain = 8>} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %lin_tight = aten.relu %x {tile.mapping = #tile.linear<start = 0, used = 0, grain = 0>} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %grid = aten.mm %x, %w {tile.mapping = #tile.grid<m = 4, n = 16, k = 1, serial = 1>} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT:    %grid_reordered = aten.mm %x, %w {tile.mapping = #tile.grid<m = 12, n = 16, k = 6, serial = 2>} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT:    %cost = aten.mm %x, %w {tile.cost = #tile.cost<cycles = 158, compute = 2, exchange = 16, sync = 140, temp = 64>} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT:    %cost_zero = aten.mm %x, %w {tile.cost = #tile.cost<cycles = 0, compute = 0, exchange = 0, sync = 0, temp = 0>} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT:    %cost_big = aten.mm %x, %w {tile.cost = #tile.cost<cycles = 123456789012, compute = 123456789000, exchange = 12, sync = 0, temp = 638976>} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT:    %both = aten.mm %x, %w {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0, stage = 0, phase = 0>, tile.cost = #tile.cost<cycles = 176, compute = 4, exchange = 32, sync = 140, temp = 128>, tile.mapping = #tile.grid<m = 4, n = 4, k = 1, serial = 1>} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT:    %nested = aten.relu %x {maps = [#tile.linear<start = 0, used = 4, grain = 64>, #tile.grid<m = 1, n = 2, k = 3, serial = 4>], costs = {a = #tile.cost<cycles = 1, compute = 1, exchange = 0, sync = 0, temp = 0>}} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    func.return %both : tensor<4x16xf32>
// CHECK-NEXT:  }
func.func @attributes(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %lin = aten.relu %x {tile.mapping = #tile.linear<start = 0, used = 1, grain = 64>} : tensor<4x8xf32> -> tensor<4x8xf32>
  %lin_wrap = aten.relu %x {tile.mapping = #tile.linear<start = 1471, used = 2, grain = 64>} : tensor<4x8xf32> -> tensor<4x8xf32>
  %lin_reordered = aten.relu %x {tile.mapping = #tile.linear<grain = 8, used = 1472, start = 3>} : tensor<4x8xf32> -> tensor<4x8xf32>
  %lin_tight = aten.relu %x {tile.mapping = #tile.linear<start=0,used=0,grain=0>} : tensor<4x8xf32> -> tensor<4x8xf32>
  %grid = aten.mm %x, %w {tile.mapping = #tile.grid<m = 4, n = 16, k = 1, serial = 1>} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %grid_reordered = aten.mm %x, %w {tile.mapping = #tile.grid<serial = 2, k = 6, n = 16, m = 12>} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %cost = aten.mm %x, %w {tile.cost = #tile.cost<cycles = 158, compute = 2, exchange = 16, sync = 140, temp = 64>} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %cost_zero = aten.mm %x, %w {tile.cost = #tile.cost<temp = 0, sync = 0, exchange = 0, compute = 0, cycles = 0>} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %cost_big = aten.mm %x, %w {tile.cost = #tile.cost<cycles = 123456789012, compute = 123456789000, exchange = 12, sync = 0, temp = 638976>} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %both = aten.mm %x, %w {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0, stage = 0, phase = 0>, tile.cost = #tile.cost<cycles = 176, compute = 4, exchange = 32, sync = 140, temp = 128>, tile.mapping = #tile.grid<m = 4, n = 4, k = 1, serial = 1>} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %nested = aten.relu %x {maps = [#tile.linear<start = 0, used = 4, grain = 64>, #tile.grid<m = 1, n = 2, k = 3, serial = 4>], costs = {a = #tile.cost<cycles = 1, compute = 1, exchange = 0, sync = 0, temp = 0>}} : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %both : tensor<4x16xf32>
}

// CHECK-LABEL: func.func @moves(
// CHECK-SAME:  %x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %labels: tensor<4xi64>, %h: tensor<2x3xf16>, %s: tensor<f32>) -> (tensor<4x16xf32>, tensor<4xi64>, tensor<2x3xf16>, tensor<f32>) {
// CHECK-NEXT:    %xin = tile.host_in %x {cycles = 3 : i64} : tensor<4x8xf32>
// CHECK-NEXT:    %lin = tile.host_in %labels {ipu.place = #ipu.place<fwd>, cycles = 1 : i64} : tensor<4xi64>
// CHECK-NEXT:    %ex = tile.exchange %xin {bytes = 32 : i64, cycles = 8 : i64} : tensor<4x8xf32>
// CHECK-NEXT:    %ew = tile.exchange %w {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0, stage = 0, phase = 0>, cycles = 8 : i64, bytes = 32 : i64} : tensor<8x16xf32>
// CHECK-NEXT:    %y = aten.mm %ex, %ew {tile.cost = #tile.cost<cycles = 158, compute = 2, exchange = 16, sync = 140, temp = 64>, tile.mapping = #tile.grid<m = 4, n = 16, k = 1, serial = 1>} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT:    tile.sync {ipus = 1 : i64, cycles = 40 : i64}
// CHECK-NEXT:    tile.sync {kind = "external", cycles = 150 : i64, ipus = 4 : i64}
// CHECK-NEXT:    tile.sync {ipu.place = #ipu.place<bwd>, ipus = 2 : i64, cycles = 0 : i64, kind = "internal"}
// CHECK-NEXT:    %y1 = tile.ipu_copy %y {src = 0 : i64, dst = 1 : i64, cycles = 21 : i64} : tensor<4x16xf32>
// CHECK-NEXT:    %y0 = tile.ipu_copy %y1 {ipu.place = #ipu.place<bwd, block = "B1", ipu = 0, stage = 2, phase = 0>, src = 1 : i64, dst = 0 : i64, cycles = 21 : i64} : tensor<4x16xf32>
// CHECK-NEXT:    %hl = tile.remote_load %h {tensor = "fc.weight/exp_avg", cycles = 18 : i64} : tensor<2x3xf16>
// CHECK-NEXT:    %sl = tile.remote_load %s {tensor = "", cycles = 0 : i64} : tensor<f32>
// CHECK-NEXT:    %hs = tile.remote_store %hl {tensor = "fc.weight/exp_avg", cycles = 18 : i64} : tensor<2x3xf16>
// CHECK-NEXT:    %hga = tile.all_gather %hl {tensor = "fc.weight", bytes = 12 : i64, cycles = 57 : i64} : tensor<2x3xf16>
// CHECK-NEXT:    %ss = tile.remote_store %sl {ipu.place = #ipu.place<bwd>, tensor = "step \22quoted\22", cycles = 1 : i64} : tensor<f32>
// CHECK-NEXT:    %yout = tile.host_out %y0 {cycles = 2 : i64} : tensor<4x16xf32>
// CHECK-NEXT:    %lout = tile.host_out %lin {cycles = 9223372036854775807 : i64} : tensor<4xi64>
// CHECK-NEXT:    func.return %yout, %lout, %hs, %ss : tensor<4x16xf32>, tensor<4xi64>, tensor<2x3xf16>, tensor<f32>
// CHECK-NEXT:  }
func.func @moves(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %labels: tensor<4xi64>, %h: tensor<2x3xf16>, %s: tensor<f32>)
    -> (tensor<4x16xf32>, tensor<4xi64>, tensor<2x3xf16>, tensor<f32>) {
  %xin = tile.host_in %x {cycles = 3 : i64} : tensor<4x8xf32>
  %lin = tile.host_in %labels {cycles = 1 : i64, ipu.place = #ipu.place<fwd>} : tensor<4xi64>
  %ex = tile.exchange %xin {bytes = 32 : i64, cycles = 8 : i64} : tensor<4x8xf32>
  %ew = tile.exchange %w {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0, stage = 0, phase = 0>, cycles = 8 : i64, bytes = 32 : i64} : tensor<8x16xf32>
  %y = aten.mm %ex, %ew {tile.cost = #tile.cost<cycles = 158, compute = 2, exchange = 16, sync = 140, temp = 64>, tile.mapping = #tile.grid<m = 4, n = 16, k = 1, serial = 1>} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  tile.sync {ipus = 1 : i64, cycles = 40 : i64}
  tile.sync {kind = "external", cycles = 150 : i64, ipus = 4 : i64}
  tile.sync {ipus = 2 : i64, cycles = 0 : i64, kind = "internal", ipu.place = #ipu.place<bwd>}
  %y1 = tile.ipu_copy %y {src = 0 : i64, dst = 1 : i64, cycles = 21 : i64} : tensor<4x16xf32>
  %y0 = tile.ipu_copy %y1 {ipu.place = #ipu.place<bwd, block = "B1", ipu = 0, stage = 2, phase = 0>, src = 1 : i64, dst = 0 : i64, cycles = 21 : i64} : tensor<4x16xf32>
  %hl = tile.remote_load %h {tensor = "fc.weight/exp_avg", cycles = 18 : i64} : tensor<2x3xf16>
  %sl = tile.remote_load %s {tensor = "", cycles = 0 : i64} : tensor<f32>
  %hs = tile.remote_store %hl {tensor = "fc.weight/exp_avg", cycles = 18 : i64} : tensor<2x3xf16>
  %hga = tile.all_gather %hl {tensor = "fc.weight", bytes = 12 : i64, cycles = 57 : i64} : tensor<2x3xf16>
  %ss = tile.remote_store %sl {tensor = "step \"quoted\"", cycles = 1 : i64, ipu.place = #ipu.place<bwd>} : tensor<f32>
  %yout = tile.host_out %y0 {cycles = 2 : i64} : tensor<4x16xf32>
  %lout = tile.host_out %lin {cycles = 9223372036854775807 : i64} : tensor<4xi64>
  func.return %yout, %lout, %hs, %ss : tensor<4x16xf32>, tensor<4xi64>, tensor<2x3xf16>, tensor<f32>
}

// The device IR of a stage: tile ops inside ipu.stage regions.

// CHECK-LABEL: func.func @staged(
// CHECK-SAME:  %x: tensor<4x8xf32> {tilefx.input = 0 : i64}) -> (tensor<4x8xf32> {tilefx.output = 0 : i64}) {
// CHECK-NEXT:    %xin = tile.host_in %x {cycles = 3 : i64} : tensor<4x8xf32>
// CHECK-NEXT:    %s0 = ipu.stage {stage = 0 : i64, ipu = 0 : i64, phase = 0 : i64, direction = "fwd"} -> tensor<4x8xf32> {
// CHECK-NEXT:      %r = aten.relu %xin {tile.cost = #tile.cost<cycles = 148, compute = 8, exchange = 0, sync = 140, temp = 0>, tile.mapping = #tile.linear<start = 0, used = 2, grain = 64>} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:      tile.sync {ipus = 1 : i64, cycles = 40 : i64}
// CHECK-NEXT:      ipu.yield %r : tensor<4x8xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    %s1 = ipu.stage {stage = 1 : i64, ipu = 1 : i64, phase = 0 : i64, direction = "fwd"} -> tensor<4x8xf32> {
// CHECK-NEXT:      %c = tile.ipu_copy %s0 {src = 0 : i64, dst = 1 : i64, cycles = 21 : i64} : tensor<4x8xf32>
// CHECK-NEXT:      %e = aten.exp %c {tile.cost = #tile.cost<cycles = 160, compute = 20, exchange = 0, sync = 140, temp = 0>, tile.mapping = #tile.linear<start = 2, used = 2, grain = 64>} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:      tile.sync {ipus = 1 : i64, cycles = 40 : i64}
// CHECK-NEXT:      ipu.yield %e : tensor<4x8xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    %out = tile.host_out %s1 {cycles = 3 : i64} : tensor<4x8xf32>
// CHECK-NEXT:    func.return %out : tensor<4x8xf32>
// CHECK-NEXT:  }
// CHECK-NEXT: }
func.func @staged(%x: tensor<4x8xf32> {tilefx.input = 0 : i64}) -> (tensor<4x8xf32> {tilefx.output = 0 : i64}) {
  %xin = tile.host_in %x {cycles = 3 : i64} : tensor<4x8xf32>
  %s0 = ipu.stage {stage = 0 : i64, ipu = 0 : i64, phase = 0 : i64, direction = "fwd"} -> tensor<4x8xf32> {
    %r = aten.relu %xin {tile.cost = #tile.cost<cycles = 148, compute = 8, exchange = 0, sync = 140, temp = 0>, tile.mapping = #tile.linear<start = 0, used = 2, grain = 64>} : tensor<4x8xf32> -> tensor<4x8xf32>
    tile.sync {ipus = 1 : i64, cycles = 40 : i64}
    ipu.yield %r : tensor<4x8xf32>
  }
  %s1 = ipu.stage {stage = 1 : i64, ipu = 1 : i64, phase = 0 : i64, direction = "fwd"} -> tensor<4x8xf32> {
    %c = tile.ipu_copy %s0 {src = 0 : i64, dst = 1 : i64, cycles = 21 : i64} : tensor<4x8xf32>
    %e = aten.exp %c {tile.cost = #tile.cost<cycles = 160, compute = 20, exchange = 0, sync = 140, temp = 0>, tile.mapping = #tile.linear<start = 2, used = 2, grain = 64>} : tensor<4x8xf32> -> tensor<4x8xf32>
    tile.sync {ipus = 1 : i64, cycles = 40 : i64}
    ipu.yield %e : tensor<4x8xf32>
  }
  %out = tile.host_out %s1 {cycles = 3 : i64} : tensor<4x8xf32>
  func.return %out : tensor<4x8xf32>
}
