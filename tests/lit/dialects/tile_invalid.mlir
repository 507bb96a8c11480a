// RUN: tilefx-opt %s --split-input-file --parsing-diagnostics --verify-diagnostics | filecheck %s
// RUN: not tilefx-opt %s 2>&1 | filecheck %s --check-prefix=STDERR

// Malformed tile attributes and ops. Each case is a chunk of its own; parse
// errors give file:line:column (lines counted from the top of this file) and
// underline the offending token; verifier errors print the op in generic form.

// Without --split-input-file the first error ends the run with exit code 1.
// A missing field is found at the closing '>': the caret is on the token after it.
// STDERR: tile_invalid.mlir:[[# @LINE + 4]]:70: error: #tile.linear needs grain
// STDERR-NEXT: %a = aten.relu %x {tile.mapping = #tile.linear<start = 0, used = 4>} : tensor<4xf32> -> tensor<4xf32>
// STDERR-NEXT: ^
func.func @missing_field(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = aten.relu %x {tile.mapping = #tile.linear<start = 0, used = 4>} : tensor<4xf32> -> tensor<4xf32>
  func.return %a : tensor<4xf32>
}
// CHECK: tile_invalid.mlir:[[# @LINE - 3]]:70
// CHECK-NEXT: %a = aten.relu %x {tile.mapping = #tile.linear<start = 0, used = 4>} : tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT: ^
// CHECK-NEXT: #tile.linear needs grain

// -----

func.func @missing_fields(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = aten.relu %x {tile.cost = #tile.cost<cycles = 10, sync = 2>} : tensor<4xf32> -> tensor<4xf32>
  func.return %a : tensor<4xf32>
}
// CHECK: tile_invalid.mlir:[[# @LINE - 3]]:67
// CHECK: #tile.cost needs compute, exchange, temp

// -----

func.func @unknown_field(%x: tensor<4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %a = aten.mm %w, %w {tile.mapping = #tile.grid<m = 1, n = 2, color = 3, k = 1, serial = 1>} : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  func.return %a : tensor<4x4xf32>
}
// CHECK: tile_invalid.mlir:[[# @LINE - 3]]:64
// CHECK-NEXT: %a = aten.mm %w, %w {tile.mapping = #tile.grid<m = 1, n = 2, color = 3, k = 1, serial = 1>} : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: ^^^^^^{{$}}
// CHECK-NEXT: unexpected or repeated field 'color' in #tile.grid

// -----

// A field of another tile attribute is unknown too.
func.func @field_of_another_attribute(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = aten.relu %x {tile.mapping = #tile.linear<start = 0, used = 4, serial = 1>} : tensor<4xf32> -> tensor<4xf32>
  func.return %a : tensor<4xf32>
}
// CHECK: tile_invalid.mlir:[[# @LINE - 3]]:71
// CHECK: unexpected or repeated field 'serial' in #tile.linear

// -----

func.func @repeated_field(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = aten.relu %x {tile.cost = #tile.cost<cycles = 1, compute = 1, cycles = 2, exchange = 0, sync = 0, temp = 0>} : tensor<4xf32> -> tensor<4xf32>
  func.return %a : tensor<4xf32>
}
// CHECK: tile_invalid.mlir:[[# @LINE - 3]]:70
// CHECK-NEXT: %a = aten.relu %x {tile.cost = #tile.cost<cycles = 1, compute = 1, cycles = 2, exchange = 0, sync = 0, temp = 0>} : tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT: ^^^^^^^{{$}}
// CHECK-NEXT: unexpected or repeated field 'cycles' in #tile.cost

// -----

func.func @negative_value(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = aten.relu %x {tile.mapping = #tile.linear<start = -1, used = 4, grain = 64>} : tensor<4xf32> -> tensor<4xf32>
  func.return %a : tensor<4xf32>
}
// CHECK: tile_invalid.mlir:[[# @LINE - 3]]:58
// CHECK-NEXT: %a = aten.relu %x {tile.mapping = #tile.linear<start = -1, used = 4, grain = 64>} : tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT: ^{{$}}
// CHECK-NEXT: Expected integer literal

// -----

func.func @negative_cost(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = aten.relu %x {tile.cost = #tile.cost<cycles = 10, compute = 10, exchange = 0, sync = 0, temp = -64>} : tensor<4xf32> -> tensor<4xf32>
  func.return %a : tensor<4xf32>
}
// CHECK: tile_invalid.mlir:[[# @LINE - 3]]:103
// CHECK: Expected integer literal

// -----

func.func @float_value(%x: tensor<4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %a = aten.mm %w, %w {tile.mapping = #tile.grid<m = 1, n = 2.5, k = 1, serial = 1>} : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  func.return %a : tensor<4x4xf32>
}
// CHECK: tile_invalid.mlir:[[# @LINE - 3]]:61
// CHECK-NEXT: %a = aten.mm %w, %w {tile.mapping = #tile.grid<m = 1, n = 2.5, k = 1, serial = 1>} : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: ^^^{{$}}
// CHECK-NEXT: Expected integer literal

// -----

func.func @empty(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = aten.relu %x {tile.mapping = #tile.linear<>} : tensor<4xf32> -> tensor<4xf32>
  func.return %a : tensor<4xf32>
}
// CHECK: tile_invalid.mlir:[[# @LINE - 3]]:50
// CHECK: identifier expected (one of start, used, grain)

// -----

func.func @no_parameters(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = aten.relu %x {tile.mapping = #tile.linear} : tensor<4xf32> -> tensor<4xf32>
  func.return %a : tensor<4xf32>
}
// CHECK: tile_invalid.mlir:[[# @LINE - 3]]:49
// CHECK: Expected '<'

// -----

func.func @trailing_comma(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = aten.relu %x {tile.mapping = #tile.linear<start = 0, used = 4, grain = 64,>} : tensor<4xf32> -> tensor<4xf32>
  func.return %a : tensor<4xf32>
}
// CHECK: tile_invalid.mlir:[[# @LINE - 3]]:82
// CHECK: identifier expected (one of start, used, grain)

// -----

func.func @missing_equals(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = aten.relu %x {tile.mapping = #tile.linear<start 0, used = 4, grain = 64>} : tensor<4xf32> -> tensor<4xf32>
  func.return %a : tensor<4xf32>
}
// CHECK: tile_invalid.mlir:[[# @LINE - 3]]:56
// CHECK: Expected '='

// -----

func.func @missing_comma(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = aten.relu %x {tile.mapping = #tile.linear<start = 0 used = 4, grain = 64>} : tensor<4xf32> -> tensor<4xf32>
  func.return %a : tensor<4xf32>
}
// CHECK: tile_invalid.mlir:[[# @LINE - 3]]:60
// CHECK: Expected '>'

// -----

func.func @unknown_attribute(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = aten.relu %x {tile.mapping = #tile.block<start = 0>} : tensor<4xf32> -> tensor<4xf32>
  func.return %a : tensor<4xf32>
}
// CHECK: tile_invalid.mlir:[[# @LINE - 3]]:48
// CHECK: tile.block

// -----

// Ops: a move keeps the type of its operand.
func.func @move_changes_type(%x: tensor<4xf32>) -> tensor<8xf32> {
  %a = "tile.exchange"(%x) <{bytes = 16 : i64, cycles = 4 : i64}> : (tensor<4xf32>) -> tensor<8xf32>
  func.return %a : tensor<8xf32>
}
// CHECK: attribute tensor<4xf32> expected from variable 'T', but got tensor<8xf32>

// -----

func.func @move_of_a_scalar(%x: f32) -> f32 {
  %a = "tile.host_in"(%x) <{cycles = 1 : i64}> : (f32) -> f32
  func.return %a : f32
}
// CHECK: f32 should be of base attribute tensor

// -----

func.func @missing_cycles(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = tile.exchange %x {bytes = 16 : i64} : tensor<4xf32>
  func.return %a : tensor<4xf32>
}
// CHECK: property 'cycles' expected in operation 'tile.exchange'

// -----

func.func @missing_copy_endpoint(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = tile.ipu_copy %x {src = 0 : i64, cycles = 21 : i64} : tensor<4xf32>
  func.return %a : tensor<4xf32>
}
// CHECK: property 'dst' expected in operation 'tile.ipu_copy'

// -----

func.func @tensor_name_not_a_string(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = tile.remote_load %x {tensor = 3 : i64, cycles = 1 : i64} : tensor<4xf32>
  func.return %a : tensor<4xf32>
}
// CHECK: 3 : i64 should be of base attribute string

// -----

func.func @gather_without_bytes(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = tile.all_gather %x {tensor = "w", cycles = 1 : i64} : tensor<4xf32>
  func.return %a : tensor<4xf32>
}
// CHECK: property 'bytes' expected in operation 'tile.all_gather'

// -----

func.func @gather_negative_bytes(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = tile.all_gather %x {tensor = "w", bytes = -1 : i64, cycles = 1 : i64} : tensor<4xf32>
  func.return %a : tensor<4xf32>
}
// CHECK: tile.all_gather: bytes must be >= 0, got -1

// -----

func.func @sync_without_ipus() {
  tile.sync {cycles = 40 : i64}
  func.return
}
// CHECK: property 'ipus' expected in operation 'tile.sync'

// -----

func.func @sync_kind_not_a_string() {
  tile.sync {ipus = 1 : i64, cycles = 40 : i64, kind = 1 : i64}
  func.return
}
// CHECK: 1 : i64 should be of base attribute string

// -----

// Counts (cycles, bytes, IPU ids) are >= 0.
func.func @negative_cycles(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = tile.exchange %x {bytes = 16 : i64, cycles = -4 : i64} : tensor<4xf32>
  func.return %a : tensor<4xf32>
}
// CHECK: tile.exchange: cycles must be >= 0, got -4

// -----

func.func @negative_bytes(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = tile.exchange %x {bytes = -16 : i64, cycles = 4 : i64} : tensor<4xf32>
  func.return %a : tensor<4xf32>
}
// CHECK: tile.exchange: bytes must be >= 0, got -16

// -----

func.func @negative_host_cycles(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = tile.host_out %x {cycles = -1 : i64} : tensor<4xf32>
  func.return %a : tensor<4xf32>
}
// CHECK: tile.host_out: cycles must be >= 0, got -1

// -----

func.func @copy_from_a_negative_ipu(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = tile.ipu_copy %x {src = -1 : i64, dst = 1 : i64, cycles = 4 : i64} : tensor<4xf32>
  func.return %a : tensor<4xf32>
}
// CHECK: tile.ipu_copy: src must be >= 0, got -1

// -----

func.func @copy_to_itself(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = tile.ipu_copy %x {src = 1 : i64, dst = 1 : i64, cycles = 4 : i64} : tensor<4xf32>
  func.return %a : tensor<4xf32>
}
// CHECK: tile.ipu_copy: src and dst are both IPU 1 (a copy over the IPU-links joins two IPUs)

// -----

func.func @sync_of_no_ipu() {
  tile.sync {ipus = 0 : i64, cycles = 4 : i64}
  func.return
}
// CHECK: tile.sync: ipus must be >= 1, got 0

// -----

func.func @sync_unknown_kind() {
  tile.sync {ipus = 1 : i64, cycles = 4 : i64, kind = "sideways"}
  func.return
}
// CHECK: tile.sync: kind must be one of ('internal', 'external'), got 'sideways'

// -----

func.func @sync_negative_cycles() {
  tile.sync {ipus = 1 : i64, cycles = -40 : i64}
  func.return
}
// CHECK: tile.sync: cycles must be >= 0, got -40

// -----

// An op's cycles are its compute, exchange and sync (the cost model's sum).
func.func @cost_that_does_not_add_up(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = aten.relu %x {tile.cost = #tile.cost<cycles = 1, compute = 10, exchange = 10, sync = 10, temp = 0>} : tensor<4xf32> -> tensor<4xf32>
  func.return %a : tensor<4xf32>
}
// CHECK: #tile.cost: cycles (1) must be compute + exchange + sync (30)
