// RUN: tilefx-opt %s --split-input-file -p ipu-fuse-elementwise | filecheck %s

// `ipu-fuse-elementwise` marks chains of f32 elementwise ops whose
// intermediates feed exactly one other member: `ipu.fuse = <group>` on each
// member, `ipu.fuse_root` on the one whose result leaves the group.

// CHECK-LABEL: func.func @chain(
// CHECK-NEXT:    %a = aten.mul.Tensor %x, %x {ipu.fuse = 0 : i64}
// CHECK-NEXT:    %c = aten.add.Tensor %a, %b {ipu.fuse = 0 : i64, alpha = 2 : i64}
// CHECK-NEXT:    %d = aten.exp %c {ipu.fuse = 0 : i64}
// CHECK-NEXT:    %e = aten.mul.Tensor %d, %s {ipu.fuse = 0 : i64}
// CHECK-NEXT:    %f = aten.relu %e {ipu.fuse = 0 : i64, ipu.fuse_root}
// The root's result has two users: %g starts no group of its own (one member).
// CHECK-NEXT:    %g = aten.neg %f : tensor<4x8xf32> -> tensor<4x8xf32>
func.func @chain(%x: tensor<4x8xf32>, %b: tensor<8xf32>, %s: tensor<f32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %a = aten.mul.Tensor %x, %x : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %c = aten.add.Tensor %a, %b {alpha = 2 : i64} : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %d = aten.exp %c : tensor<4x8xf32> -> tensor<4x8xf32>
  %e = aten.mul.Tensor %d, %s : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %f = aten.relu %e : tensor<4x8xf32> -> tensor<4x8xf32>
  %g = aten.neg %f : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %f, %g : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// A value with two users ends its group there; both users may start new ones.
// Non-f32 ops (here f16) and ops outside the set (mm) are never members.

// CHECK-LABEL: func.func @shared(
// CHECK-NEXT:    %a = aten.exp %x {ipu.fuse = 0 : i64}
// CHECK-NEXT:    %b = aten.mul.Scalar %a {ipu.fuse = 0 : i64, ipu.fuse_root, other = 2.000000e+00 : f64}
// CHECK-NEXT:    %c = aten.tanh %b {ipu.fuse = 1 : i64}
// CHECK-NEXT:    %d = aten.sigmoid %c {ipu.fuse = 1 : i64, ipu.fuse_root}
// CHECK-NEXT:    %e = aten.sqrt %b {ipu.fuse = 2 : i64}
// CHECK-NEXT:    %f = aten.rsqrt %e {ipu.fuse = 2 : i64, ipu.fuse_root}
// CHECK-NEXT:    %h = aten.exp %y : tensor<3xf16> -> tensor<3xf16>
// CHECK-NEXT:    %i = aten.neg %h : tensor<3xf16> -> tensor<3xf16>
// CHECK-NEXT:    %m = aten.mm %d, %f : tensor<3x3xf32>, tensor<3x3xf32> -> tensor<3x3xf32>
// CHECK-NEXT:    %n = aten.relu %m : tensor<3x3xf32> -> tensor<3x3xf32>
func.func @shared(%x: tensor<3x3xf32>, %y: tensor<3xf16>) -> (tensor<3x3xf32>, tensor<3xf16>) {
  %a = aten.exp %x : tensor<3x3xf32> -> tensor<3x3xf32>
  %b = aten.mul.Scalar %a {other = 2.0 : f64} : tensor<3x3xf32> -> tensor<3x3xf32>
  %c = aten.tanh %b : tensor<3x3xf32> -> tensor<3x3xf32>
  %d = aten.sigmoid %c : tensor<3x3xf32> -> tensor<3x3xf32>
  %e = aten.sqrt %b : tensor<3x3xf32> -> tensor<3x3xf32>
  %f = aten.rsqrt %e : tensor<3x3xf32> -> tensor<3x3xf32>
  %h = aten.exp %y : tensor<3xf16> -> tensor<3xf16>
  %i = aten.neg %h : tensor<3xf16> -> tensor<3xf16>
  %m = aten.mm %d, %f : tensor<3x3xf32>, tensor<3x3xf32> -> tensor<3x3xf32>
  %n = aten.relu %m : tensor<3x3xf32> -> tensor<3x3xf32>
  func.return %n, %i : tensor<3x3xf32>, tensor<3xf16>
}

// -----

// erf is a member, and add/sub/mul/div may take a 0-d operand of another
// real dtype (cast to f32, as the kernel does: a decomposed layer-norm or
// GELU backward); a dimensioned integer operand still keeps an op out.

// CHECK-LABEL: func.func @scalars(
// CHECK-NEXT:    %a = aten.mul.Tensor %x, %n {ipu.fuse = 0 : i64}
// CHECK-NEXT:    %b = aten.erf %a {ipu.fuse = 0 : i64}
// CHECK-NEXT:    %c = aten.div.Tensor %b, %d {ipu.fuse = 0 : i64, ipu.fuse_root}
// CHECK-NEXT:    %e = aten.mul.Tensor %c, %k : tensor<4x8xf32>, tensor<8xi64> -> tensor<4x8xf32>
func.func @scalars(%x: tensor<4x8xf32>, %n: tensor<i64>, %d: tensor<f64>, %k: tensor<8xi64>) -> tensor<4x8xf32> {
  %a = aten.mul.Tensor %x, %n : tensor<4x8xf32>, tensor<i64> -> tensor<4x8xf32>
  %b = aten.erf %a : tensor<4x8xf32> -> tensor<4x8xf32>
  %c = aten.div.Tensor %b, %d : tensor<4x8xf32>, tensor<f64> -> tensor<4x8xf32>
  %e = aten.mul.Tensor %c, %k : tensor<4x8xf32>, tensor<8xi64> -> tensor<4x8xf32>
  func.return %e : tensor<4x8xf32>
}
