// RUN: tilefx-opt %s --split-input-file -p lower-to-device | filecheck %s --check-prefixes=CHECK,ONCHIP
// RUN: tilefx-opt %s --split-input-file -p 'lower-to-device{machine="mk2" optimizer-off-chip=true}' | filecheck %s --check-prefixes=CHECK,OFFCHIP
// Round trip: the device IR parses back and prints the same (custom and generic form).
// RUN: tilefx-opt %s --split-input-file -p lower-to-device | tilefx-opt --split-input-file | filecheck %s --check-prefixes=CHECK,ONCHIP
// RUN: tilefx-opt %s --split-input-file -p 'lower-to-device{optimizer-off-chip=true}' --print-op-generic | tilefx-opt --split-input-file | filecheck %s --check-prefixes=CHECK,OFFCHIP

// `lower-to-device` turns outlined graph IR (after ipu-outline-stages) into the
// device level: host streams around @main, an exchange per matmul operand, a
// tile mapping and cost on every compute op followed by its sync, IPU-link
// copies, and, with the optimizer state off chip, streaming-memory loads and
// stores of that state in @update.

// (a) A two-stage pipelined training step (ipu-assign-stages{gradient-accumulation=3},
// ipu-training-step{optimizer="adam"}, ipu-outline-stages on a two-block MLP,
// trimmed). %x is used by stages 0 and 2: it is streamed in once, before
// stage 0, and both stages read the streamed value. The outputs %y and %loss
// are streamed out before the return; the accumulators stay on the device.

// CHECK-LABEL: func.func @main(
// CHECK-NEXT:    %[[X:[0-9]+]] = tile.host_in %x {cycles = 7 : i64} : tensor<4x8xf32>
// CHECK-NEXT:    %s0 = ipu.stage {stage = 0 : i64, ipu = 0 : i64, phase = 0 : i64, direction = "fwd"} -> tensor<4x16xf32> {
// 4x8 @ 8x16 on a 4 x 16 x 1 grid: each tile receives a row of %x and a column of %w1 (8 floats).
// CHECK-NEXT:      %[[X_EX:[0-9]+]] = tile.exchange %[[X]] {tile.mapping = #tile.grid<m = 4, n = 16, k = 1, serial = 1>, ipu.place = #ipu.place<fwd, block = "B1", ipu = 0, stage = 0, phase = 0>, bytes = 32 : i64, cycles = 8 : i64} : tensor<4x8xf32>
// A weight is laid out for its matmul plan: each tile already holds its share of the
// column it needs, so 3/4 of the column (24 of 32 bytes) moves.
// CHECK-NEXT:      %[[W1_EX:[0-9]+]] = tile.exchange %w1 {tile.mapping = #tile.grid<m = 4, n = 16, k = 1, serial = 1>, ipu.place = #ipu.place<fwd, block = "B1", ipu = 0, stage = 0, phase = 0>, bytes = 24 : i64, cycles = 6 : i64} : tensor<8x16xf32>
// CHECK-NEXT:      %h1 = aten.mm %[[X_EX]], %[[W1_EX]] {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0, stage = 0, phase = 0>, tile.cost = #tile.cost<cycles = 156, compute = 2, exchange = 14, sync = 140, temp = 56>, tile.mapping = #tile.grid<m = 4, n = 16, k = 1, serial = 1>} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT:      tile.sync {ipus = 1 : i64, cycles = 40 : i64}
// 256 bytes in grains of 64: 4 tiles from tile 0; the next linear mapping starts at tile 4.
// CHECK-NEXT:      %a1 = aten.relu %h1 {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0, stage = 0, phase = 0>, tile.cost = #tile.cost<{{[^>]+}}>, tile.mapping = #tile.linear<start = 0, used = 4, grain = 64>} : tensor<4x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT:      tile.sync {ipus = 1 : i64, cycles = 40 : i64}
// CHECK-NEXT:      ipu.yield %a1 : tensor<4x16xf32>
// CHECK-NEXT:    }

// CHECK-NEXT:    %y_out, %loss_out, %ga1_out, %acc2_out = ipu.stage {stage = 1 : i64, ipu = 1 : i64, phase = 0 : i64, direction = "fwd+bwd"}
// CHECK-NEXT:      %[[A1_1:[a-z0-9_]+]] = tile.ipu_copy %s0 {ipu.place = #ipu.place<fwd, block = "B2", ipu = 1, stage = 1, phase = 0>, src = 0 : i64, dst = 1 : i64, cycles = 22 : i64} : tensor<4x16xf32>
// CHECK-NEXT:      %[[A1_EX:[0-9]+]] = tile.exchange %[[A1_1]] {{{.*}}, bytes = 64 : i64, cycles = 16 : i64} : tensor<4x16xf32>
// CHECK-NEXT:      %[[W2_EX:[0-9]+]] = tile.exchange %w2 {{{.*}}, bytes = 48 : i64, cycles = 12 : i64} : tensor<16x4xf32>
// CHECK-NEXT:      %y = aten.mm %[[A1_EX]], %[[W2_EX]] {{{.*}}, tile.cost = #tile.cost<cycles = {{[0-9]+}}, compute = {{[0-9]+}}, exchange = 28, sync = {{[0-9]+}}, temp = {{[0-9]+}}>, tile.mapping = #tile.grid<m = 4, n = 4, k = 1, serial = 1>}
// CHECK-NEXT:      tile.sync {ipus = 1 : i64, cycles = 40 : i64}
// CHECK-NEXT:      %loss = aten.sum %y {{{.*}}, tile.cost = #tile.cost<{{[^>]+}}>, tile.mapping = #tile.linear<start = 4, used = 1, grain = 64>}
// CHECK-NEXT:      tile.sync
// CHECK-NEXT:      %seed = aten.full {{{.*}}, tile.cost = #tile.cost<{{[^>]+}}>, tile.mapping = #tile.linear<start = 5, used = 1, grain = 64>,
// CHECK-NEXT:      tile.sync
// Views get neither a cost nor a mapping nor a sync.
// CHECK-NEXT:      %a1t = aten.permute %[[A1_1]] {ipu.place = #ipu.place<bwd, block = "B2", ipu = 1, stage = 1, phase = 0>, dims = array<i64: 1, 0>} : tensor<4x16xf32> -> tensor<16x4xf32>
// CHECK-NEXT:      %[[A1T_EX:[0-9]+]] = tile.exchange %a1t {{{.*}}, bytes = 16 : i64, cycles = 4 : i64} : tensor<16x4xf32>
// CHECK-NEXT:      %[[SEED_EX:[0-9]+]] = tile.exchange %seed {{{.*}}, bytes = 16 : i64, cycles = 4 : i64} : tensor<4x4xf32>
// CHECK-NEXT:      %gw2 = aten.mm %[[A1T_EX]], %[[SEED_EX]] {{{.*}}, tile.cost = #tile.cost<{{[^>]+}}>, tile.mapping = #tile.grid<m = 16, n = 4, k = 1, serial = 1>}
// CHECK-NEXT:      tile.sync
// CHECK-NEXT:      %w2t = aten.permute %w2
// Each matmul gets its own exchange of a shared operand.
// CHECK-NEXT:      %[[SEED_EX2:[0-9]+]] = tile.exchange %seed {{{.*}}, bytes = 16 : i64, cycles = 4 : i64} : tensor<4x4xf32>
// CHECK-NEXT:      %[[W2T_EX:[0-9]+]] = tile.exchange %w2t {{{.*}}, bytes = 12 : i64, cycles = 3 : i64} : tensor<4x16xf32>
// CHECK-NEXT:      %ga1 = aten.mm %[[SEED_EX2]], %[[W2T_EX]] {{{.*}}, tile.mapping = #tile.grid<m = 4, n = 16, k = 1, serial = 1>}
// CHECK-NEXT:      tile.sync
// CHECK-NEXT:      %acc2_next = ipu.accumulate %acc2, %gw2 {{{.*}}, tile.cost = #tile.cost<{{[^>]+}}>, tile.mapping = #tile.linear<start = 6, used = 4, grain = 64>}
// CHECK-NEXT:      tile.sync
// CHECK-NEXT:      ipu.yield %y, %loss, %ga1, %acc2_next
// CHECK-NEXT:    }

// CHECK-NEXT:    %acc1_out = ipu.stage {stage = 2 : i64, ipu = 0 : i64, phase = 0 : i64, direction = "bwd"}
// CHECK-NEXT:      %[[GA1_0:[a-z0-9_]+]] = tile.ipu_copy %ga1_out {ipu.place = #ipu.place<bwd, block = "B1", ipu = 0, stage = 2, phase = 0>, src = 1 : i64, dst = 0 : i64, cycles = 22 : i64} : tensor<4x16xf32>
// %s0 is on this IPU already: no copy.
// CHECK-NEXT:      %gh1 = aten.threshold_backward %[[GA1_0]], %s0 {{{.*}}, tile.cost = #tile.cost<{{[^>]+}}>, tile.mapping = #tile.linear<start = 10, used = 4, grain = 64>,
// CHECK-NEXT:      tile.sync
// CHECK-NEXT:      %xt = aten.permute %[[X]]
// CHECK-NEXT:      %[[XT_EX:[0-9]+]] = tile.exchange %xt {{{.*}}, bytes = 16 : i64, cycles = 4 : i64} : tensor<8x4xf32>
// CHECK-NEXT:      %[[GH1_EX:[0-9]+]] = tile.exchange %gh1 {{{.*}}, bytes = 16 : i64, cycles = 4 : i64} : tensor<4x16xf32>
// CHECK-NEXT:      %gw1 = aten.mm %[[XT_EX]], %[[GH1_EX]] {{{.*}}, tile.mapping = #tile.grid<m = 8, n = 16, k = 1, serial = 1>}
// CHECK-NEXT:      tile.sync
// CHECK-NEXT:      %acc1_next = ipu.accumulate %acc1, %gw1 {{{.*}}, tile.mapping = #tile.linear<start = 14, used = 8, grain = 64>}
// CHECK-NEXT:      tile.sync
// CHECK-NEXT:      ipu.yield %acc1_next
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[Y_OUT:[0-9]+]] = tile.host_out %y_out {cycles = 4 : i64} : tensor<4x4xf32>
// CHECK-NEXT:    %[[LOSS_OUT:[0-9]+]] = tile.host_out %loss_out {cycles = 1 : i64} : tensor<f32>
// CHECK-NEXT:    func.return %[[Y_OUT]], %[[LOSS_OUT]], %acc1_out, %acc2_out : tensor<4x4xf32>, tensor<f32>, tensor<8x16xf32>, tensor<16x4xf32>
// CHECK-NEXT:  }

// @update: the Adam steps get a cost, a linear mapping and a sync. On chip
// (the default) nothing moves; off chip each optimizer state argument is
// loaded from streaming memory before the first op and each new state is
// stored back before the return (the weights stay on chip).

// CHECK-LABEL: func.func @update(
// ONCHIP-NEXT:   %n1, %n1_1, %n1_2 = ipu.adam %w1, %g1, %m1, %v1 step %step lr %lr {ipu.place = #ipu.place<bwd>, tile.cost = #tile.cost<{{[^>]+}}>, tile.mapping = #tile.linear<start = 0, used = 24, grain = 64>,
// ONCHIP-NEXT:   tile.sync {ipus = 1 : i64, cycles = 40 : i64}
// ONCHIP-NEXT:   %n2, %n2_1, %n2_2 = ipu.adam %w2, %g2, %m2, %v2 step %step lr %lr {ipu.place = #ipu.place<bwd>, tile.cost = #tile.cost<{{[^>]+}}>, tile.mapping = #tile.linear<start = 24, used = 12, grain = 64>,
// ONCHIP-NEXT:   tile.sync {ipus = 1 : i64, cycles = 40 : i64}
// ONCHIP-NEXT:   func.return %n1, %n1_1, %n1_2, %n2, %n2_1, %n2_2 :
// ONCHIP-NOT:    tile.remote_

// OFFCHIP-NEXT:  %[[M1:[0-9]+]] = tile.remote_load %m1 {tensor = "fc1.weight/exp_avg", cycles = 35 : i64} : tensor<8x16xf32>
// OFFCHIP-NEXT:  %[[V1:[0-9]+]] = tile.remote_load %v1 {tensor = "fc1.weight/exp_avg_sq", cycles = 35 : i64} : tensor<8x16xf32>
// OFFCHIP-NEXT:  %[[M2:[0-9]+]] = tile.remote_load %m2 {tensor = "fc2.weight/exp_avg", cycles = 18 : i64} : tensor<16x4xf32>
// OFFCHIP-NEXT:  %[[V2:[0-9]+]] = tile.remote_load %v2 {tensor = "fc2.weight/exp_avg_sq", cycles = 18 : i64} : tensor<16x4xf32>
// OFFCHIP-NEXT:  %n1, %n1_1, %n1_2 = ipu.adam %w1, %g1, %[[M1]], %[[V1]] step %step lr %lr {ipu.place = #ipu.place<bwd>, tile.cost = #tile.cost<{{[^>]+}}>, tile.mapping = #tile.linear<start = 0, used = 24, grain = 64>,
// OFFCHIP-NEXT:  tile.sync {ipus = 1 : i64, cycles = 40 : i64}
// OFFCHIP-NEXT:  %n2, %n2_1, %n2_2 = ipu.adam %w2, %g2, %[[M2]], %[[V2]] step %step lr %lr {ipu.place = #ipu.place<bwd>, tile.cost = #tile.cost<{{[^>]+}}>, tile.mapping = #tile.linear<start = 24, used = 12, grain = 64>,
// OFFCHIP-NEXT:  tile.sync {ipus = 1 : i64, cycles = 40 : i64}
// OFFCHIP-NEXT:  %[[M1_ST:[0-9]+]] = tile.remote_store %n1_1 {tensor = "fc1.weight/exp_avg", cycles = 35 : i64} : tensor<8x16xf32>
// OFFCHIP-NEXT:  %[[V1_ST:[0-9]+]] = tile.remote_store %n1_2 {tensor = "fc1.weight/exp_avg_sq", cycles = 35 : i64} : tensor<8x16xf32>
// OFFCHIP-NEXT:  %[[M2_ST:[0-9]+]] = tile.remote_store %n2_1 {tensor = "fc2.weight/exp_avg", cycles = 18 : i64} : tensor<16x4xf32>
// OFFCHIP-NEXT:  %[[V2_ST:[0-9]+]] = tile.remote_store %n2_2 {tensor = "fc2.weight/exp_avg_sq", cycles = 18 : i64} : tensor<16x4xf32>
// OFFCHIP-NEXT:  func.return %n1, %[[M1_ST]], %[[V1_ST]], %n2, %[[M2_ST]], %[[V2_ST]] :

// CHECK-NOT:     ipu.copy
// CHECK-NOT:     func.func

builtin.module attributes {ipu.stages = {kind = "pipelined", num_ipus = 2 : i64, forward_stages = 2 : i64, pipeline_stages = 3 : i64, phases = 1 : i64, training = 1 : i64}} {
  func.func @main(%w1: tensor<8x16xf32> {tilefx.param = "fc1.weight"}, %w2: tensor<16x4xf32> {tilefx.param = "fc2.weight"}, %x: tensor<4x8xf32> {tilefx.input = 0 : i64}, %acc1: tensor<8x16xf32> {tilefx.accum = "fc1.weight"}, %acc2: tensor<16x4xf32> {tilefx.accum = "fc2.weight"})
      -> (tensor<4x4xf32> {tilefx.output = 0 : i64}, tensor<f32> {tilefx.output = 1 : i64, tilefx.loss}, tensor<8x16xf32> {tilefx.accum = "fc1.weight"}, tensor<16x4xf32> {tilefx.accum = "fc2.weight"}) {
    %s0 = ipu.stage {stage = 0 : i64, ipu = 0 : i64, phase = 0 : i64, direction = "fwd"} -> tensor<4x16xf32> {
      %h1 = aten.mm %x, %w1 {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0, stage = 0, phase = 0>} : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
      %a1 = aten.relu %h1 {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0, stage = 0, phase = 0>} : tensor<4x16xf32> -> tensor<4x16xf32>
      ipu.yield %a1 : tensor<4x16xf32>
    }
    %y_out, %loss_out, %ga1_out, %acc2_out = ipu.stage {stage = 1 : i64, ipu = 1 : i64, phase = 0 : i64, direction = "fwd+bwd"} -> tensor<4x4xf32>, tensor<f32>, tensor<4x16xf32>, tensor<16x4xf32> {
      %a1_1 = ipu.copy %s0 {ipu.place = #ipu.place<fwd, block = "B2", ipu = 1, stage = 1, phase = 0>, src = 0 : i64, dst = 1 : i64} : tensor<4x16xf32>
      %y = aten.mm %a1_1, %w2 {ipu.place = #ipu.place<fwd, block = "B2", ipu = 1, stage = 1, phase = 0>} : tensor<4x16xf32>, tensor<16x4xf32> -> tensor<4x4xf32>
      %loss = aten.sum %y {ipu.place = #ipu.place<fwd, block = "B2", ipu = 1, stage = 1, phase = 0>} : tensor<4x4xf32> -> tensor<f32>
      %seed = aten.full {ipu.place = #ipu.place<bwd, block = "B2", ipu = 1, stage = 1, phase = 0>, tilefx.loss_seed, size = array<i64: 4, 4>, fill_value = 1.0 : f64, dtype = f32} : tensor<4x4xf32>
      %a1t = aten.permute %a1_1 {ipu.place = #ipu.place<bwd, block = "B2", ipu = 1, stage = 1, phase = 0>, dims = array<i64: 1, 0>} : tensor<4x16xf32> -> tensor<16x4xf32>
      %gw2 = aten.mm %a1t, %seed {ipu.place = #ipu.place<bwd, block = "B2", ipu = 1, stage = 1, phase = 0>} : tensor<16x4xf32>, tensor<4x4xf32> -> tensor<16x4xf32>
      %w2t = aten.permute %w2 {ipu.place = #ipu.place<bwd, block = "B2", ipu = 1, stage = 1, phase = 0>, dims = array<i64: 1, 0>} : tensor<16x4xf32> -> tensor<4x16xf32>
      %ga1 = aten.mm %seed, %w2t {ipu.place = #ipu.place<bwd, block = "B2", ipu = 1, stage = 1, phase = 0>} : tensor<4x4xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
      %acc2_next = ipu.accumulate %acc2, %gw2 {ipu.place = #ipu.place<bwd, block = "B2", ipu = 1, stage = 1, phase = 0>} : tensor<16x4xf32>
      ipu.yield %y, %loss, %ga1, %acc2_next : tensor<4x4xf32>, tensor<f32>, tensor<4x16xf32>, tensor<16x4xf32>
    }
    %acc1_out = ipu.stage {stage = 2 : i64, ipu = 0 : i64, phase = 0 : i64, direction = "bwd"} -> tensor<8x16xf32> {
      %ga1_0 = ipu.copy %ga1_out {ipu.place = #ipu.place<bwd, block = "B1", ipu = 0, stage = 2, phase = 0>, src = 1 : i64, dst = 0 : i64} : tensor<4x16xf32>
      %gh1 = aten.threshold_backward %ga1_0, %s0 {ipu.place = #ipu.place<bwd, block = "B1", ipu = 0, stage = 2, phase = 0>, threshold = 0.0 : f64} : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
      %xt = aten.permute %x {ipu.place = #ipu.place<bwd, block = "B1", ipu = 0, stage = 2, phase = 0>, dims = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
      %gw1 = aten.mm %xt, %gh1 {ipu.place = #ipu.place<bwd, block = "B1", ipu = 0, stage = 2, phase = 0>} : tensor<8x4xf32>, tensor<4x16xf32> -> tensor<8x16xf32>
      %acc1_next = ipu.accumulate %acc1, %gw1 {ipu.place = #ipu.place<bwd, block = "B1", ipu = 0, stage = 2, phase = 0>} : tensor<8x16xf32>
      ipu.yield %acc1_next : tensor<8x16xf32>
    }
    func.return %y_out, %loss_out, %acc1_out, %acc2_out : tensor<4x4xf32>, tensor<f32>, tensor<8x16xf32>, tensor<16x4xf32>
  }
  func.func @update(%w1: tensor<8x16xf32> {tilefx.param = "fc1.weight"}, %w2: tensor<16x4xf32> {tilefx.param = "fc2.weight"}, %g1: tensor<8x16xf32> {tilefx.accum = "fc1.weight"}, %g2: tensor<16x4xf32> {tilefx.accum = "fc2.weight"}, %lr: tensor<f32> {tilefx.hyper = "lr/0"}, %step: tensor<f32> {tilefx.step}, %m1: tensor<8x16xf32> {tilefx.state = "fc1.weight/exp_avg"}, %v1: tensor<8x16xf32> {tilefx.state = "fc1.weight/exp_avg_sq"}, %m2: tensor<16x4xf32> {tilefx.state = "fc2.weight/exp_avg"}, %v2: tensor<16x4xf32> {tilefx.state = "fc2.weight/exp_avg_sq"})
      -> (tensor<8x16xf32> {tilefx.param = "fc1.weight"}, tensor<8x16xf32> {tilefx.state = "fc1.weight/exp_avg"}, tensor<8x16xf32> {tilefx.state = "fc1.weight/exp_avg_sq"}, tensor<16x4xf32> {tilefx.param = "fc2.weight"}, tensor<16x4xf32> {tilefx.state = "fc2.weight/exp_avg"}, tensor<16x4xf32> {tilefx.state = "fc2.weight/exp_avg_sq"}) {
    %n1:3 = ipu.adam %w1, %g1, %m1, %v1 step %step lr %lr {ipu.place = #ipu.place<bwd>, beta1 = 9.0e-01 : f64, beta2 = 9.99e-01 : f64, eps = 1.0e-08 : f64, weight_decay = 0.0 : f64, decoupled = false, bias_correction = true, grad_scale = 1.0 : f64} : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<f32>, tensor<f32> -> tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>
    %n2:3 = ipu.adam %w2, %g2, %m2, %v2 step %step lr %lr {ipu.place = #ipu.place<bwd>, beta1 = 9.0e-01 : f64, beta2 = 9.99e-01 : f64, eps = 1.0e-08 : f64, weight_decay = 0.0 : f64, decoupled = false, bias_correction = true, grad_scale = 1.0 : f64} : tensor<16x4xf32>, tensor<16x4xf32>, tensor<16x4xf32>, tensor<16x4xf32>, tensor<f32>, tensor<f32> -> tensor<16x4xf32>, tensor<16x4xf32>, tensor<16x4xf32>
    func.return %n1#0, %n1#1, %n1#2, %n2#0, %n2#1, %n2#2 : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x4xf32>, tensor<16x4xf32>, tensor<16x4xf32>
  }
}

// -----
// (b) Two-stage inference (ipu-assign-stages{device-iterations=2},
// ipu-outline-stages): a convolution, whose plan is the m x n grid of its
// im2col product (M = 2*8*8 output pixels, K = 3*3*3, N = 4 filters), and an
// addmm, whose exchanges are of its two product operands, not of its bias.
// There is no @update: the off-chip option changes nothing.

// CHECK-LABEL: func.func @main(
// CHECK-NEXT:    %[[IMG:[0-9]+]] = tile.host_in %img {cycles = 82 : i64} : tensor<2x3x8x8xf32>
// CHECK-NEXT:    %act_out = ipu.stage {stage = 0 : i64, ipu = 0 : i64, phase = 0 : i64, direction = "fwd"}
// CHECK-NEXT:      %[[IMG_EX:[0-9]+]] = tile.exchange %[[IMG]] {{{.*}}, bytes = 108 : i64, cycles = 27 : i64} : tensor<2x3x8x8xf32>
// CHECK-NEXT:      %[[W_EX:[0-9]+]] = tile.exchange %w {{{.*}}, bytes = 108 : i64, cycles = 27 : i64} : tensor<4x3x3x3xf32>
// CHECK-NEXT:      %conv = aten.convolution %[[IMG_EX]], %[[W_EX]] bias %b {{{.*}}, tile.cost = #tile.cost<cycles = {{[0-9]+}}, compute = {{[0-9]+}}, exchange = 54, sync = {{[0-9]+}}, temp = {{[0-9]+}}>, tile.mapping = #tile.grid<m = 128, n = 4, k = 1, serial = 1>,
// CHECK-NEXT:      tile.sync {ipus = 1 : i64, cycles = 40 : i64}
// CHECK-NEXT:      %act = aten.relu %conv {{{.*}}, tile.cost = #tile.cost<{{[^>]+}}>, tile.mapping = #tile.linear<start = 0, used = 32, grain = 64>}
// CHECK-NEXT:      tile.sync {ipus = 1 : i64, cycles = 40 : i64}
// CHECK-NEXT:      ipu.yield %act
// CHECK-NEXT:    }
// CHECK-NEXT:    %y_out = ipu.stage {stage = 1 : i64, ipu = 1 : i64, phase = 0 : i64, direction = "fwd"}
// CHECK-NEXT:      %[[ACT_1:[a-z0-9_]+]] = tile.ipu_copy %act_out {ipu.place = #ipu.place<fwd, block = "B2", ipu = 1, stage = 1, phase = 0>, src = 0 : i64, dst = 1 : i64, cycles = 171 : i64} : tensor<2x4x8x8xf32>
// CHECK-NEXT:      %flat = aten.view %[[ACT_1]]
// CHECK-NEXT:      %fwt = aten.permute %fw
// 2x256 @ 256x16 on a 2 x 8 x 64 grid: 4 floats of a row, a 4x2 block of %fwt per tile
// (half of it already there: the weight is laid out for this plan).
// CHECK-NEXT:      %[[FLAT_EX:[0-9]+]] = tile.exchange %flat {{{.*}}, bytes = 16 : i64, cycles = 4 : i64} : tensor<2x256xf32>
// CHECK-NEXT:      %[[FWT_EX:[0-9]+]] = tile.exchange %fwt {{{.*}}, bytes = 16 : i64, cycles = 4 : i64} : tensor<256x16xf32>
// CHECK-NEXT:      %y = aten.addmm %fb, %[[FLAT_EX]], %[[FWT_EX]] {{{.*}}, tile.cost = #tile.cost<{{[^>]+}}>, tile.mapping = #tile.grid<m = 2, n = 8, k = 64, serial = 1>,
// CHECK-NEXT:      tile.sync {ipus = 1 : i64, cycles = 40 : i64}
// CHECK-NEXT:      ipu.yield %y
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[Y:[0-9]+]] = tile.host_out %y_out {cycles = 7 : i64} : tensor<2x16xf32>
// CHECK-NEXT:    func.return %[[Y]] : tensor<2x16xf32>
// CHECK-NEXT:  }
// CHECK-NEXT: }
// CHECK-NOT:     tile.remote_
// CHECK-NOT:     ipu.copy

builtin.module attributes {ipu.stages = {kind = "pipelined", num_ipus = 2 : i64, forward_stages = 2 : i64, pipeline_stages = 2 : i64, phases = 1 : i64, training = 0 : i64}} {
  func.func @main(%w: tensor<4x3x3x3xf32> {tilefx.param = "conv.weight"}, %b: tensor<4xf32> {tilefx.param = "conv.bias"}, %fw: tensor<16x256xf32> {tilefx.param = "fc.weight"}, %fb: tensor<16xf32> {tilefx.param = "fc.bias"}, %img: tensor<2x3x8x8xf32> {tilefx.input = 0 : i64})
      -> (tensor<2x16xf32> {tilefx.output = 0 : i64}) {
    %act_out = ipu.stage {stage = 0 : i64, ipu = 0 : i64, phase = 0 : i64, direction = "fwd"} -> tensor<2x4x8x8xf32> {
      %conv = aten.convolution %img, %w bias %b {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0, stage = 0, phase = 0>, stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, transposed = false, output_padding = array<i64: 0, 0>, groups = 1 : i64} : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32> bias tensor<4xf32> -> tensor<2x4x8x8xf32>
      %act = aten.relu %conv {ipu.place = #ipu.place<fwd, block = "B1", ipu = 0, stage = 0, phase = 0>} : tensor<2x4x8x8xf32> -> tensor<2x4x8x8xf32>
      ipu.yield %act : tensor<2x4x8x8xf32>
    }
    %y_out = ipu.stage {stage = 1 : i64, ipu = 1 : i64, phase = 0 : i64, direction = "fwd"} -> tensor<2x16xf32> {
      %act_1 = ipu.copy %act_out {ipu.place = #ipu.place<fwd, block = "B2", ipu = 1, stage = 1, phase = 0>, src = 0 : i64, dst = 1 : i64} : tensor<2x4x8x8xf32>
      %flat = aten.view %act_1 {ipu.place = #ipu.place<fwd, block = "B2", ipu = 1, stage = 1, phase = 0>, size = array<i64: 2, 256>} : tensor<2x4x8x8xf32> -> tensor<2x256xf32>
      %fwt = aten.permute %fw {ipu.place = #ipu.place<fwd, block = "B2", ipu = 1, stage = 1, phase = 0>, dims = array<i64: 1, 0>} : tensor<16x256xf32> -> tensor<256x16xf32>
      %y = aten.addmm %fb, %flat, %fwt {ipu.place = #ipu.place<fwd, block = "B2", ipu = 1, stage = 1, phase = 0>, beta = 1 : i64, alpha = 1 : i64} : tensor<16xf32>, tensor<2x256xf32>, tensor<256x16xf32> -> tensor<2x16xf32>
      ipu.yield %y : tensor<2x16xf32>
    }
    func.return %y_out : tensor<2x16xf32>
  }
}
