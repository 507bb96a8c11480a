// RUN: tilefx-opt %s --split-input-file --verify-diagnostics -p 'ipu-auto-stage{num-ipus=2 auto-recomputation=0 host-io=false}' | filecheck %s
// RUN: tilefx-opt %s --split-input-file --verify-diagnostics -p 'ipu-auto-stage{num-ipus=2 auto-recomputation=0 host-io=false},ipu-assign-stages{gradient-accumulation=3}' | filecheck %s --check-prefix=STAGES
// RUN: tilefx-opt %s --split-input-file --verify-diagnostics -p 'ipu-auto-stage{num-ipus=2 schedule="1F1B" auto-recomputation=0 host-io=false}' | filecheck %s --check-prefix=ONE
// RUN: tilefx-opt %s --split-input-file --verify-diagnostics -p 'ipu-auto-stage{num-ipus=2}' | filecheck %s --check-prefix=DEFAULT
// RUN: tilefx-opt %s --split-input-file --verify-diagnostics -p 'ipu-auto-stage{num-ipus=2 auto-recomputation=0}' | filecheck %s --check-prefix=HOST

// `ipu-auto-stage` cuts @main into pipeline stages from the machine model
// (mk2 costs at the default available memory proportion 0.6): blocks
// "stage0".."stage{S-1}" on IPUs 0..S-1, the `ipu.strategy` naming them in
// order, and the `ipu.auto_stage` report (cut points, cycles per
// micro-batch and bytes of each stage). The first three RUNs cost the
// stages without recomputation (autoRecomputation None) and with synthetic
// data (no host streams); the fourth with PopTorch's default over two IPUs,
// PopART's Pipeline recomputation, and the host streams; the last without
// recomputation, with the host streams.

// (a) Four equal mm+relu layers, no annotations, training. The first mm
// reads only arguments: it goes with its first user (forward op 0 is %a1).
// The dynamic program balances the stages (cut before %a3: 3277 vs 2446
// cycles per micro-batch); moving the cuts to shorten the fill-drain
// timeline of 2P-1 = 3 micro-batches then puts it before %h4 (forward op 5):
// stage 0 runs three forward matmuls and the backward of layers 1-3, stage 1
// the last matmul, the loss and the backward of layer 4. Backward ops follow
// the layer whose forward values or weights they read (%w3t, %ga2 with w3's
// forward, %gh3 with %h4 that reads %a3), never later than the gradient they
// receive; the seed goes with its user.
// By default stage 0 recomputes its forward in its backward (the last stage,
// which computes the loss, does not): three layers on stage 0 would cost it
// a third matmul more, and the cut goes before %h3 (forward op 3).
// The host streams (the input before stage 0's forward, the loss after
// stage 0's backward, the pipeline's last step: 437 cycles per micro-batch,
// as the profile's timeline has them) make stage 0 the longer one without
// recomputation: the cut goes before %a3 (forward op 4).

// HOST-LABEL: builtin.module attributes {ipu.strategy = {kind = "pipelined", auto_stage = "same_as_ipu", schedule = "FillDrain", stages = [{blocks = ["stage0"], ipu = 0 : i64}, {blocks = ["stage1"], ipu = 1 : i64}]}, ipu.auto_stage = {num_ipus = 2 : i64, stage_ipus = [0 : i64, 1 : i64], cut_positions = [4 : i64], cuts = ["forward op 4 (aten.relu)"]

// DEFAULT-LABEL: builtin.module attributes {ipu.strategy = {kind = "pipelined", auto_stage = "same_as_ipu", schedule = "FillDrain", stages = [{blocks = ["stage0"], ipu = 0 : i64}, {blocks = ["stage1"], ipu = 1 : i64}]}, ipu.auto_stage = {num_ipus = 2 : i64, stage_ipus = [0 : i64, 1 : i64], cut_positions = [3 : i64], cuts = ["forward op 3 (aten.mm)"]

// CHECK-LABEL: builtin.module attributes {ipu.strategy = {kind = "pipelined", auto_stage = "same_as_ipu", schedule = "FillDrain", stages = [{blocks = ["stage0"], ipu = 0 : i64}, {blocks = ["stage1"], ipu = 1 : i64}]}, ipu.auto_stage = {num_ipus = 2 : i64, stage_ipus = [0 : i64, 1 : i64], cut_positions = [5 : i64], cuts = ["forward op 5 (aten.mm)"], stage_cycles = [{{[0-9]+}} : i64, {{[0-9]+}} : i64], stage_bytes = [{{[0-9]+}} : i64, {{[0-9]+}} : i64], schedule = "FillDrain", machine = "mk2"}} {
// CHECK:      %h1 = aten.mm %x, %w1 {ipu.place = #ipu.place<fwd, block = "stage0", ipu = 0>}
// CHECK-NEXT: %a1 = aten.relu %h1 {ipu.place = #ipu.place<fwd, block = "stage0", ipu = 0>}
// CHECK-NEXT: %h2 = aten.mm %a1, %w2 {ipu.place = #ipu.place<fwd, block = "stage0", ipu = 0>}
// CHECK-NEXT: %a2 = aten.relu %h2 {ipu.place = #ipu.place<fwd, block = "stage0", ipu = 0>}
// CHECK-NEXT: %h3 = aten.mm %a2, %w3 {ipu.place = #ipu.place<fwd, block = "stage0", ipu = 0>}
// CHECK-NEXT: %a3 = aten.relu %h3 {ipu.place = #ipu.place<fwd, block = "stage0", ipu = 0>}
// CHECK-NEXT: %h4 = aten.mm %a3, %w4 {ipu.place = #ipu.place<fwd, block = "stage1", ipu = 1>}
// CHECK-NEXT: %loss = aten.sum %h4 {ipu.place = #ipu.place<fwd, block = "stage1", ipu = 1>}
// CHECK-NEXT: %seed = aten.full {ipu.place = #ipu.place<bwd, block = "stage1", ipu = 1>
// CHECK-NEXT: %a3t = aten.permute %a3 {ipu.place = #ipu.place<bwd, block = "stage1", ipu = 1>
// CHECK-NEXT: %gw4 = aten.mm %a3t, %seed {ipu.place = #ipu.place<bwd, block = "stage1", ipu = 1>}
// CHECK-NEXT: %w4t = aten.permute %w4 {ipu.place = #ipu.place<bwd, block = "stage1", ipu = 1>
// CHECK-NEXT: %ga3 = aten.mm %seed, %w4t {ipu.place = #ipu.place<bwd, block = "stage1", ipu = 1>}
// CHECK-NEXT: %gh3 = aten.threshold_backward %ga3, %a3 {ipu.place = #ipu.place<bwd, block = "stage1", ipu = 1>
// CHECK-NEXT: %w3t = aten.permute %w3 {ipu.place = #ipu.place<bwd, block = "stage0", ipu = 0>
// CHECK-NEXT: %ga2 = aten.mm %gh3, %w3t {ipu.place = #ipu.place<bwd, block = "stage0", ipu = 0>}
// CHECK-NEXT: %gh2 = aten.threshold_backward %ga2, %a2 {ipu.place = #ipu.place<bwd, block = "stage0", ipu = 0>
// CHECK:      %gw1 = aten.mm %xt, %gh1 {ipu.place = #ipu.place<bwd, block = "stage0", ipu = 0>}

// (b) Followed by ipu-assign-stages: 2 forward stages, 3 pipeline stages; the
// backward of stage 0 is stage 2 on IPU 0.

// STAGES-LABEL: builtin.module attributes {{.*}}ipu.stages = {kind = "pipelined", num_ipus = 2 : i64, forward_stages = 2 : i64, pipeline_stages = 3 : i64, phases = 1 : i64, training = 1 : i64}
// STAGES:       %h4 = aten.mm %a3, %w4 {ipu.place = #ipu.place<fwd, block = "stage1", ipu = 1, stage = 1, phase = 0>}
// STAGES:       %gw1 = aten.mm %xt, %gh1 {ipu.place = #ipu.place<bwd, block = "stage0", ipu = 0, stage = 2, phase = 0>}

// (c) 1F1B keeps fewer micro-batches of stage 0's activations (2 instead of
// 3) and orders each IPU's steps differently; the cut stays.

// ONE-LABEL: builtin.module attributes {ipu.strategy = {kind = "pipelined", auto_stage = "same_as_ipu", schedule = "1F1B", {{.*}} cut_positions = [5 : i64]

func.func @main(%w1: tensor<64x64xf32> {tilefx.param = "w1"}, %w2: tensor<64x64xf32> {tilefx.param = "w2"}, %w3: tensor<64x64xf32> {tilefx.param = "w3"}, %w4: tensor<64x64xf32> {tilefx.param = "w4"}, %x: tensor<32x64xf32> {tilefx.input = 0 : i64})
    -> (tensor<f32> {tilefx.output = 0 : i64, tilefx.loss}, tensor<64x64xf32> {tilefx.grad = "w1"}, tensor<64x64xf32> {tilefx.grad = "w4"}) {
  %h1 = aten.mm %x, %w1 {ipu.place = #ipu.place<fwd>} : tensor<32x64xf32>, tensor<64x64xf32> -> tensor<32x64xf32>
  %a1 = aten.relu %h1 {ipu.place = #ipu.place<fwd>} : tensor<32x64xf32> -> tensor<32x64xf32>
  %h2 = aten.mm %a1, %w2 {ipu.place = #ipu.place<fwd>} : tensor<32x64xf32>, tensor<64x64xf32> -> tensor<32x64xf32>
  %a2 = aten.relu %h2 {ipu.place = #ipu.place<fwd>} : tensor<32x64xf32> -> tensor<32x64xf32>
  %h3 = aten.mm %a2, %w3 {ipu.place = #ipu.place<fwd>} : tensor<32x64xf32>, tensor<64x64xf32> -> tensor<32x64xf32>
  %a3 = aten.relu %h3 {ipu.place = #ipu.place<fwd>} : tensor<32x64xf32> -> tensor<32x64xf32>
  %h4 = aten.mm %a3, %w4 {ipu.place = #ipu.place<fwd>} : tensor<32x64xf32>, tensor<64x64xf32> -> tensor<32x64xf32>
  %loss = aten.sum %h4 {ipu.place = #ipu.place<fwd>} : tensor<32x64xf32> -> tensor<f32>
  %seed = aten.full {ipu.place = #ipu.place<bwd>, size = array<i64: 32, 64>, fill_value = 1.0 : f64, dtype = f32} : tensor<32x64xf32>
  %a3t = aten.permute %a3 {ipu.place = #ipu.place<bwd>, dims = array<i64: 1, 0>} : tensor<32x64xf32> -> tensor<64x32xf32>
  %gw4 = aten.mm %a3t, %seed {ipu.place = #ipu.place<bwd>} : tensor<64x32xf32>, tensor<32x64xf32> -> tensor<64x64xf32>
  %w4t = aten.permute %w4 {ipu.place = #ipu.place<bwd>, dims = array<i64: 1, 0>} : tensor<64x64xf32> -> tensor<64x64xf32>
  %ga3 = aten.mm %seed, %w4t {ipu.place = #ipu.place<bwd>} : tensor<32x64xf32>, tensor<64x64xf32> -> tensor<32x64xf32>
  %gh3 = aten.threshold_backward %ga3, %a3 {ipu.place = #ipu.place<bwd>, threshold = 0.0 : f64} : tensor<32x64xf32>, tensor<32x64xf32> -> tensor<32x64xf32>
  %w3t = aten.permute %w3 {ipu.place = #ipu.place<bwd>, dims = array<i64: 1, 0>} : tensor<64x64xf32> -> tensor<64x64xf32>
  %ga2 = aten.mm %gh3, %w3t {ipu.place = #ipu.place<bwd>} : tensor<32x64xf32>, tensor<64x64xf32> -> tensor<32x64xf32>
  %gh2 = aten.threshold_backward %ga2, %a2 {ipu.place = #ipu.place<bwd>, threshold = 0.0 : f64} : tensor<32x64xf32>, tensor<32x64xf32> -> tensor<32x64xf32>
  %w2t = aten.permute %w2 {ipu.place = #ipu.place<bwd>, dims = array<i64: 1, 0>} : tensor<64x64xf32> -> tensor<64x64xf32>
  %ga1 = aten.mm %gh2, %w2t {ipu.place = #ipu.place<bwd>} : tensor<32x64xf32>, tensor<64x64xf32> -> tensor<32x64xf32>
  %gh1 = aten.threshold_backward %ga1, %a1 {ipu.place = #ipu.place<bwd>, threshold = 0.0 : f64} : tensor<32x64xf32>, tensor<32x64xf32> -> tensor<32x64xf32>
  %xt = aten.permute %x {ipu.place = #ipu.place<bwd>, dims = array<i64: 1, 0>} : tensor<32x64xf32> -> tensor<64x32xf32>
  %gw1 = aten.mm %xt, %gh1 {ipu.place = #ipu.place<bwd>} : tensor<64x32xf32>, tensor<32x64xf32> -> tensor<64x64xf32>
  func.return %loss, %gw1, %gw4 : tensor<f32>, tensor<64x64xf32>, tensor<64x64xf32>
}

// -----

// (d) User placements: %h3 is in a block on IPU 1 (so are the ops after it:
// the cut is at or before it), %h1..%h2 in a block without an IPU (never cut
// inside). The best legal cut is just before %h3.

// CHECK-LABEL: ipu.auto_stage = {num_ipus = 2 : i64, stage_ipus = [0 : i64, 1 : i64], cut_positions = [3 : i64], cuts = ["forward op 3 (aten.mm)"]
// CHECK:      %h2 = aten.mm %a1, %w2 {ipu.place = #ipu.place<fwd, block = "stage0", ipu = 0>}
// CHECK-NEXT: %a2 = aten.relu %h2 {ipu.place = #ipu.place<fwd, block = "stage0", ipu = 0>}
// CHECK-NEXT: %h3 = aten.mm %a2, %w3 {ipu.place = #ipu.place<fwd, block = "stage1", ipu = 1>}
// STAGES-LABEL: builtin.module
// ONE-LABEL: builtin.module

func.func @main(%w1: tensor<64x64xf32> {tilefx.param = "w1"}, %w2: tensor<64x64xf32> {tilefx.param = "w2"}, %w3: tensor<64x64xf32> {tilefx.param = "w3"}, %w4: tensor<64x64xf32> {tilefx.param = "w4"}, %x: tensor<32x64xf32> {tilefx.input = 0 : i64})
    -> (tensor<f32> {tilefx.output = 0 : i64, tilefx.loss}, tensor<64x64xf32> {tilefx.grad = "w1"}, tensor<64x64xf32> {tilefx.grad = "w4"}) {
  %h1 = aten.mm %x, %w1 {ipu.place = #ipu.place<fwd, block = "body">} : tensor<32x64xf32>, tensor<64x64xf32> -> tensor<32x64xf32>
  %a1 = aten.relu %h1 {ipu.place = #ipu.place<fwd, block = "body">} : tensor<32x64xf32> -> tensor<32x64xf32>
  %h2 = aten.mm %a1, %w2 {ipu.place = #ipu.place<fwd, block = "body">} : tensor<32x64xf32>, tensor<64x64xf32> -> tensor<32x64xf32>
  %a2 = aten.relu %h2 {ipu.place = #ipu.place<fwd>} : tensor<32x64xf32> -> tensor<32x64xf32>
  %h3 = aten.mm %a2, %w3 {ipu.place = #ipu.place<fwd, block = "head", ipu = 1>} : tensor<32x64xf32>, tensor<64x64xf32> -> tensor<32x64xf32>
  %a3 = aten.relu %h3 {ipu.place = #ipu.place<fwd, block = "head", ipu = 1>} : tensor<32x64xf32> -> tensor<32x64xf32>
  %h4 = aten.mm %a3, %w4 {ipu.place = #ipu.place<fwd>} : tensor<32x64xf32>, tensor<64x64xf32> -> tensor<32x64xf32>
  %loss = aten.sum %h4 {ipu.place = #ipu.place<fwd>} : tensor<32x64xf32> -> tensor<f32>
  %seed = aten.full {ipu.place = #ipu.place<bwd>, size = array<i64: 32, 64>, fill_value = 1.0 : f64, dtype = f32} : tensor<32x64xf32>
  %a3t = aten.permute %a3 {ipu.place = #ipu.place<bwd>, dims = array<i64: 1, 0>} : tensor<32x64xf32> -> tensor<64x32xf32>
  %gw4 = aten.mm %a3t, %seed {ipu.place = #ipu.place<bwd>} : tensor<64x32xf32>, tensor<32x64xf32> -> tensor<64x64xf32>
  %w4t = aten.permute %w4 {ipu.place = #ipu.place<bwd>, dims = array<i64: 1, 0>} : tensor<64x64xf32> -> tensor<64x64xf32>
  %ga3 = aten.mm %seed, %w4t {ipu.place = #ipu.place<bwd>} : tensor<32x64xf32>, tensor<64x64xf32> -> tensor<32x64xf32>
  %gh3 = aten.threshold_backward %ga3, %a3 {ipu.place = #ipu.place<bwd>, threshold = 0.0 : f64} : tensor<32x64xf32>, tensor<32x64xf32> -> tensor<32x64xf32>
  %w3t = aten.permute %w3 {ipu.place = #ipu.place<bwd>, dims = array<i64: 1, 0>} : tensor<64x64xf32> -> tensor<64x64xf32>
  %ga2 = aten.mm %gh3, %w3t {ipu.place = #ipu.place<bwd>} : tensor<32x64xf32>, tensor<64x64xf32> -> tensor<32x64xf32>
  %gh2 = aten.threshold_backward %ga2, %a2 {ipu.place = #ipu.place<bwd>, threshold = 0.0 : f64} : tensor<32x64xf32>, tensor<32x64xf32> -> tensor<32x64xf32>
  %w2t = aten.permute %w2 {ipu.place = #ipu.place<bwd>, dims = array<i64: 1, 0>} : tensor<64x64xf32> -> tensor<64x64xf32>
  %ga1 = aten.mm %gh2, %w2t {ipu.place = #ipu.place<bwd>} : tensor<32x64xf32>, tensor<64x64xf32> -> tensor<32x64xf32>
  %gh1 = aten.threshold_backward %ga1, %a1 {ipu.place = #ipu.place<bwd>, threshold = 0.0 : f64} : tensor<32x64xf32>, tensor<32x64xf32> -> tensor<32x64xf32>
  %xt = aten.permute %x {ipu.place = #ipu.place<bwd>, dims = array<i64: 1, 0>} : tensor<32x64xf32> -> tensor<64x32xf32>
  %gw1 = aten.mm %xt, %gh1 {ipu.place = #ipu.place<bwd>} : tensor<64x32xf32>, tensor<32x64xf32> -> tensor<64x64xf32>
  func.return %loss, %gw1, %gw4 : tensor<f32>, tensor<64x64xf32>, tensor<64x64xf32>
}

// -----

// (e) Placements that go back to an earlier IPU cannot be pipelined.

// CHECK: ipu-auto-stage: no split into 2 stages over 2 IPUs fits: the user placements (IPUs in program order [1, 0]) must not go back to an earlier IPU
// STAGES: ipu-auto-stage: no split into 2 stages over 2 IPUs fits
// ONE: ipu-auto-stage: no split into 2 stages over 2 IPUs fits

func.func @main(%w: tensor<4x4xf32> {tilefx.param = "w"}, %x: tensor<2x4xf32> {tilefx.input = 0 : i64}) -> tensor<f32> {
  %h = aten.mm %x, %w {ipu.place = #ipu.place<fwd>} : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %a = aten.relu %h {ipu.place = #ipu.place<fwd, block = "B", ipu = 1>} : tensor<2x4xf32> -> tensor<2x4xf32>
  %b = aten.relu %a {ipu.place = #ipu.place<fwd, block = "A", ipu = 0>} : tensor<2x4xf32> -> tensor<2x4xf32>
  %loss = aten.sum %b {ipu.place = #ipu.place<fwd>} : tensor<2x4xf32> -> tensor<f32>
  func.return %loss : tensor<f32>
}
