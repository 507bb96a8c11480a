// RUN: tilefx-opt %s -p 'ipu-available-memory{per-ipu=0.75 ipus=1}' | filecheck %s --check-prefixes=CHECK,DEFAULT
// RUN: tilefx-opt %s -p 'ipu-available-memory{default-proportion=0.5 per-ipu=0.75 ipus=1}' | filecheck %s --check-prefixes=CHECK,OTHER
// RUN: not tilefx-opt %s -p 'ipu-available-memory{per-ipu=1.5 ipus=0}' 2>&1 | filecheck %s --check-prefix=TOOBIG
// RUN: not tilefx-opt %s -p 'ipu-available-memory{per-ipu=0.5,0.5 ipus=1,3}' 2>&1 | filecheck %s --check-prefix=UNUSED
// RUN: not tilefx-opt %s -p 'ipu-available-memory{per-ipu=0.5,0.5 ipus=1}' 2>&1 | filecheck %s --check-prefix=COUNT

// `ipus` names the IPU of each `per-ipu` proportion, as
// Options.setAvailableMemoryProportion does ({"IPU1": 0.75}): IPU 1 gets
// 0.75, IPU 0 (not named) the default. Each IPU named must be one the model
// runs on, and each proportion is in (0, 1].

// CHECK-LABEL: func.func @options(
// DEFAULT-NEXT:  %a = aten.mm %x, %w {ipu.place = #ipu.place<fwd, ipu = 0>, ipu.available_memory = 6.000000e-01 : f64}
// OTHER-NEXT:    %a = aten.mm %x, %w {ipu.place = #ipu.place<fwd, ipu = 0>, ipu.available_memory = 5.000000e-01 : f64}
// CHECK-NEXT:    %b = aten.mm %a, %w {ipu.place = #ipu.place<fwd, ipu = 1>, ipu.available_memory = 7.500000e-01 : f64}

// TOOBIG: available memory proportion must be in (0, 1], got 1.5 (IPU0)
// UNUSED: setAvailableMemoryProportion names IPU3, but the model runs on IPU0, IPU1 only
// COUNT: ipu-available-memory: ipus names 1 IPU(s) for 2 per-ipu proportion(s)

func.func @options(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %a = aten.mm %x, %w {ipu.place = #ipu.place<fwd, ipu = 0>} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %b = aten.mm %a, %w {ipu.place = #ipu.place<fwd, ipu = 1>} : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  func.return %b : tensor<4x8xf32>
}
