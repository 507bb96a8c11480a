// RUN: tilefx-opt %s --split-input-file -p ipu-fuse-attention | filecheck %s

// `ipu-fuse-attention` marks scaled dot-product attention: the two batched
// products around a softmax, with the flattening of their operands (expand,
// copy, view), the scale, an additive mask and the zeroing of rows masked
// out entirely, when every intermediate feeds the next member only.
// `ipu.attention = <group>` on each member, `ipu.attention_root` on the op
// whose result is the attention output. The executor runs a group as ATen's
// fused attention kernel, reading q, k (here through its transpose) and v.

// CHECK-LABEL: func.func @heads(
// CHECK:    %kt = aten.permute %k {ipu.attention = 0 : i64
// CHECK-NEXT:    %qe = aten.expand %q {ipu.attention = 0 : i64
// CHECK-NEXT:    %qc = aten.clone %qe {ipu.attention = 0 : i64
// CHECK-NEXT:    %q3 = aten.view %qc {ipu.attention = 0 : i64
// CHECK-NEXT:    %ke = aten.expand %kt {ipu.attention = 0 : i64
// CHECK-NEXT:    %kc = aten.clone %ke {ipu.attention = 0 : i64
// CHECK-NEXT:    %k3 = aten.view %kc {ipu.attention = 0 : i64
// CHECK-NEXT:    %s = aten.bmm %q3, %k3 {ipu.attention = 0 : i64
// CHECK-NEXT:    %s4 = aten.view %s {ipu.attention = 0 : i64
// The scale's constant stays outside: the group reads its value.
// CHECK-NEXT:    %c = aten.scalar_tensor {s = 4.000000e+00 : f64, dtype = f32} : tensor<f32>
// CHECK-NEXT:    %sd = aten.div.Tensor %s4, %c {ipu.attention = 0 : i64}
// CHECK-NEXT:    %p = aten._softmax %sd {ipu.attention = 0 : i64
// CHECK-NEXT:    %pc = aten.clone %p {ipu.attention = 0 : i64}
// CHECK-NEXT:    %pe = aten.expand %pc {ipu.attention = 0 : i64
// CHECK-NEXT:    %p3 = aten.view %pe {ipu.attention = 0 : i64
// CHECK-NEXT:    %ve = aten.expand %v {ipu.attention = 0 : i64
// CHECK-NEXT:    %vc = aten.clone %ve {ipu.attention = 0 : i64}
// CHECK-NEXT:    %v3 = aten.view %vc {ipu.attention = 0 : i64
// CHECK-NEXT:    %o = aten.bmm %p3, %v3 {ipu.attention = 0 : i64}
// CHECK-NEXT:    %o4 = aten.view %o {ipu.attention = 0 : i64, ipu.attention_root
func.func @heads(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %kt = aten.permute %k {dims = array<i64: 0, 1, 3, 2>} : tensor<2x4x8x16xf32> -> tensor<2x4x16x8xf32>
  %qe = aten.expand %q {size = array<i64: 2, 4, 8, 16>} : tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  %qc = aten.clone %qe : tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  %q3 = aten.view %qc {size = array<i64: 8, 8, 16>} : tensor<2x4x8x16xf32> -> tensor<8x8x16xf32>
  %ke = aten.expand %kt {size = array<i64: 2, 4, 16, 8>} : tensor<2x4x16x8xf32> -> tensor<2x4x16x8xf32>
  %kc = aten.clone %ke : tensor<2x4x16x8xf32> -> tensor<2x4x16x8xf32>
  %k3 = aten.view %kc {size = array<i64: 8, 16, 8>} : tensor<2x4x16x8xf32> -> tensor<8x16x8xf32>
  %s = aten.bmm %q3, %k3 : tensor<8x8x16xf32>, tensor<8x16x8xf32> -> tensor<8x8x8xf32>
  %s4 = aten.view %s {size = array<i64: 2, 4, 8, 8>} : tensor<8x8x8xf32> -> tensor<2x4x8x8xf32>
  %c = aten.scalar_tensor {s = 4.0 : f64, dtype = f32} : tensor<f32>
  %sd = aten.div.Tensor %s4, %c : tensor<2x4x8x8xf32>, tensor<f32> -> tensor<2x4x8x8xf32>
  %p = aten._softmax %sd {dim = -1 : i64, half_to_float = false} : tensor<2x4x8x8xf32> -> tensor<2x4x8x8xf32>
  %pc = aten.clone %p : tensor<2x4x8x8xf32> -> tensor<2x4x8x8xf32>
  %pe = aten.expand %pc {size = array<i64: 2, 4, 8, 8>} : tensor<2x4x8x8xf32> -> tensor<2x4x8x8xf32>
  %p3 = aten.view %pe {size = array<i64: 8, 8, 8>} : tensor<2x4x8x8xf32> -> tensor<8x8x8xf32>
  %ve = aten.expand %v {size = array<i64: 2, 4, 8, 16>} : tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  %vc = aten.clone %ve : tensor<2x4x8x16xf32> -> tensor<2x4x8x16xf32>
  %v3 = aten.view %vc {size = array<i64: 8, 8, 16>} : tensor<2x4x8x16xf32> -> tensor<8x8x16xf32>
  %o = aten.bmm %p3, %v3 : tensor<8x8x8xf32>, tensor<8x8x16xf32> -> tensor<8x8x16xf32>
  %o4 = aten.view %o {size = array<i64: 2, 4, 8, 16>} : tensor<8x8x16xf32> -> tensor<2x4x8x16xf32>
  func.return %o4 : tensor<2x4x8x16xf32>
}

// -----

// torch's decomposition of `F.scaled_dot_product_attention` with a mask:
// q and k^T each scaled by sqrt(scale), the mask added, and rows that are
// -inf throughout set to 0 after the softmax (as the fused kernel does).
// Every op of it is a member; the mask is read.

// CHECK-LABEL: func.func @masked(
// CHECK-COUNT-25: {ipu.attention = 0 : i64
// CHECK-NEXT:    %o4 = aten.view %o {ipu.attention = 0 : i64, ipu.attention_root
func.func @masked(%q: tensor<2x2x8x8xf32>, %k: tensor<2x2x8x8xf32>, %v: tensor<2x2x8x8xf32>, %m: tensor<2x1x8x8xf32>) -> tensor<2x2x8x8xf32> {
  %qs = aten.mul.Scalar %q {other = 0.5 : f64} : tensor<2x2x8x8xf32> -> tensor<2x2x8x8xf32>
  %kt = aten.permute %k {dims = array<i64: 0, 1, 3, 2>} : tensor<2x2x8x8xf32> -> tensor<2x2x8x8xf32>
  %ks = aten.mul.Scalar %kt {other = 0.5 : f64} : tensor<2x2x8x8xf32> -> tensor<2x2x8x8xf32>
  %qe = aten.expand %qs {size = array<i64: 2, 2, 8, 8>} : tensor<2x2x8x8xf32> -> tensor<2x2x8x8xf32>
  %qc = aten.clone %qe : tensor<2x2x8x8xf32> -> tensor<2x2x8x8xf32>
  %q3 = aten.view %qc {size = array<i64: 4, 8, 8>} : tensor<2x2x8x8xf32> -> tensor<4x8x8xf32>
  %ke = aten.expand %ks {size = array<i64: 2, 2, 8, 8>} : tensor<2x2x8x8xf32> -> tensor<2x2x8x8xf32>
  %kc = aten.clone %ke : tensor<2x2x8x8xf32> -> tensor<2x2x8x8xf32>
  %k3 = aten.view %kc {size = array<i64: 4, 8, 8>} : tensor<2x2x8x8xf32> -> tensor<4x8x8xf32>
  %s = aten.bmm %q3, %k3 : tensor<4x8x8xf32>, tensor<4x8x8xf32> -> tensor<4x8x8xf32>
  %s4 = aten.view %s {size = array<i64: 2, 2, 8, 8>} : tensor<4x8x8xf32> -> tensor<2x2x8x8xf32>
  %x = aten.add.Tensor %s4, %m : tensor<2x2x8x8xf32>, tensor<2x1x8x8xf32> -> tensor<2x2x8x8xf32>
  %p = aten._softmax %x {dim = -1 : i64, half_to_float = false} : tensor<2x2x8x8xf32> -> tensor<2x2x8x8xf32>
  %e = aten.eq.Scalar %x {other = 0xfff0000000000000 : f64} : tensor<2x2x8x8xf32> -> tensor<2x2x8x8xi1>
  %n = aten.logical_not %e : tensor<2x2x8x8xi1> -> tensor<2x2x8x8xi1>
  %a = aten.any.dim %n {dim = -1 : i64, keepdim = true} : tensor<2x2x8x8xi1> -> tensor<2x2x8x1xi1>
  %r = aten.logical_not %a : tensor<2x2x8x1xi1> -> tensor<2x2x8x1xi1>
  %z = aten.full_like %p {fill_value = 0 : i64} : tensor<2x2x8x8xf32> -> tensor<2x2x8x8xf32>
  %w = aten.where.self %r, %z, %p : tensor<2x2x8x1xi1>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32> -> tensor<2x2x8x8xf32>
  %we = aten.expand %w {size = array<i64: 2, 2, 8, 8>} : tensor<2x2x8x8xf32> -> tensor<2x2x8x8xf32>
  %p3 = aten.view %we {size = array<i64: 4, 8, 8>} : tensor<2x2x8x8xf32> -> tensor<4x8x8xf32>
  %ve = aten.expand %v {size = array<i64: 2, 2, 8, 8>} : tensor<2x2x8x8xf32> -> tensor<2x2x8x8xf32>
  %vc = aten.clone %ve : tensor<2x2x8x8xf32> -> tensor<2x2x8x8xf32>
  %v3 = aten.view %vc {size = array<i64: 4, 8, 8>} : tensor<2x2x8x8xf32> -> tensor<4x8x8xf32>
  %o = aten.bmm %p3, %v3 : tensor<4x8x8xf32>, tensor<4x8x8xf32> -> tensor<4x8x8xf32>
  %o4 = aten.view %o {size = array<i64: 2, 2, 8, 8>} : tensor<4x8x8xf32> -> tensor<2x2x8x8xf32>
  func.return %o4 : tensor<2x2x8x8xf32>
}

// -----

// Three dimensions (no heads), a key given transposed (read as it is), a
// mask that comes first in its add, softmax over the last dimension by its
// positive index, and L != S: the root is the second product.

// CHECK-LABEL: func.func @cross(
// CHECK-NEXT:    %s = aten.bmm %q, %kt {ipu.attention = 0 : i64}
// CHECK-NEXT:    %sc = aten.mul.Scalar %s {ipu.attention = 0 : i64
// CHECK-NEXT:    %x = aten.add.Tensor %m, %sc {ipu.attention = 0 : i64}
// CHECK-NEXT:    %p = aten._softmax %x {ipu.attention = 0 : i64
// CHECK-NEXT:    %o = aten.bmm %p, %v {ipu.attention = 0 : i64, ipu.attention_root}
func.func @cross(%q: tensor<6x5x4xf32>, %kt: tensor<6x4x7xf32>, %v: tensor<6x7x4xf32>, %m: tensor<5x7xf32>) -> tensor<6x5x4xf32> {
  %s = aten.bmm %q, %kt : tensor<6x5x4xf32>, tensor<6x4x7xf32> -> tensor<6x5x7xf32>
  %sc = aten.mul.Scalar %s {other = 0.25 : f64} : tensor<6x5x7xf32> -> tensor<6x5x7xf32>
  %x = aten.add.Tensor %m, %sc : tensor<5x7xf32>, tensor<6x5x7xf32> -> tensor<6x5x7xf32>
  %p = aten._softmax %x {dim = 2 : i64, half_to_float = false} : tensor<6x5x7xf32> -> tensor<6x5x7xf32>
  %o = aten.bmm %p, %v : tensor<6x5x7xf32>, tensor<6x7x4xf32> -> tensor<6x5x4xf32>
  func.return %o : tensor<6x5x4xf32>
}

// -----

// Not attention the kernel computes: the probabilities are read elsewhere
// (a training step's backward reads them), v's feature width differs from
// q's, or the softmax is over another dimension.

// CHECK-NOT: ipu.attention
func.func @kept(%q: tensor<6x5x4xf32>, %kt: tensor<6x4x7xf32>, %v: tensor<6x7x4xf32>) -> (tensor<6x5x4xf32>, tensor<6x5x7xf32>) {
  %s = aten.bmm %q, %kt : tensor<6x5x4xf32>, tensor<6x4x7xf32> -> tensor<6x5x7xf32>
  %p = aten._softmax %s {dim = -1 : i64, half_to_float = false} : tensor<6x5x7xf32> -> tensor<6x5x7xf32>
  %o = aten.bmm %p, %v : tensor<6x5x7xf32>, tensor<6x7x4xf32> -> tensor<6x5x4xf32>
  func.return %o, %p : tensor<6x5x4xf32>, tensor<6x5x7xf32>
}

// -----

// CHECK-NOT: ipu.attention
func.func @width(%q: tensor<6x5x4xf32>, %kt: tensor<6x4x7xf32>, %v: tensor<6x7x3xf32>) -> tensor<6x5x3xf32> {
  %s = aten.bmm %q, %kt : tensor<6x5x4xf32>, tensor<6x4x7xf32> -> tensor<6x5x7xf32>
  %p = aten._softmax %s {dim = -1 : i64, half_to_float = false} : tensor<6x5x7xf32> -> tensor<6x5x7xf32>
  %o = aten.bmm %p, %v : tensor<6x5x7xf32>, tensor<6x7x3xf32> -> tensor<6x5x3xf32>
  func.return %o : tensor<6x5x3xf32>
}

// -----

// CHECK-NOT: ipu.attention
func.func @other_dim(%q: tensor<6x5x4xf32>, %kt: tensor<6x4x7xf32>, %v: tensor<6x7x4xf32>) -> tensor<6x5x4xf32> {
  %s = aten.bmm %q, %kt : tensor<6x5x4xf32>, tensor<6x4x7xf32> -> tensor<6x5x7xf32>
  %p = aten._softmax %s {dim = 1 : i64, half_to_float = false} : tensor<6x5x7xf32> -> tensor<6x5x7xf32>
  %o = aten.bmm %p, %v : tensor<6x5x7xf32>, tensor<6x7x4xf32> -> tensor<6x5x4xf32>
  func.return %o : tensor<6x5x4xf32>
}

// -----

// Grouped-query attention: two key/value heads, each repeated for two query
// heads (unsqueeze, expand, copy, view: llama's `repeat_kv`). The repeats are
// members, so the kernel reads %k and %v unrepeated and shares them itself.

// CHECK-LABEL: func.func @grouped(
// CHECK:    %ku = aten.unsqueeze %k {ipu.attention = 0 : i64
// CHECK-NEXT:    %ke5 = aten.expand %ku {ipu.attention = 0 : i64
// CHECK-NEXT:    %kc5 = aten.clone %ke5 {ipu.attention = 0 : i64}
// CHECK-NEXT:    %kr = aten.view %kc5 {ipu.attention = 0 : i64
// CHECK-NEXT:    %vu = aten.unsqueeze %v {ipu.attention = 0 : i64
// CHECK-NEXT:    %ve5 = aten.expand %vu {ipu.attention = 0 : i64
// CHECK-NEXT:    %vc5 = aten.clone %ve5 {ipu.attention = 0 : i64}
// CHECK-NEXT:    %vr = aten.view %vc5 {ipu.attention = 0 : i64
// CHECK:    %o4 = aten.view %o {ipu.attention = 0 : i64, ipu.attention_root
func.func @grouped(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>) -> tensor<1x4x8x16xf32> {
  %ku = aten.unsqueeze %k {dim = 2 : i64} : tensor<1x2x8x16xf32> -> tensor<1x2x1x8x16xf32>
  %ke5 = aten.expand %ku {size = array<i64: 1, 2, 2, 8, 16>} : tensor<1x2x1x8x16xf32> -> tensor<1x2x2x8x16xf32>
  %kc5 = aten.clone %ke5 : tensor<1x2x2x8x16xf32> -> tensor<1x2x2x8x16xf32>
  %kr = aten.view %kc5 {size = array<i64: 1, 4, 8, 16>} : tensor<1x2x2x8x16xf32> -> tensor<1x4x8x16xf32>
  %vu = aten.unsqueeze %v {dim = 2 : i64} : tensor<1x2x8x16xf32> -> tensor<1x2x1x8x16xf32>
  %ve5 = aten.expand %vu {size = array<i64: 1, 2, 2, 8, 16>} : tensor<1x2x1x8x16xf32> -> tensor<1x2x2x8x16xf32>
  %vc5 = aten.clone %ve5 : tensor<1x2x2x8x16xf32> -> tensor<1x2x2x8x16xf32>
  %vr = aten.view %vc5 {size = array<i64: 1, 4, 8, 16>} : tensor<1x2x2x8x16xf32> -> tensor<1x4x8x16xf32>
  %kt = aten.permute %kr {dims = array<i64: 0, 1, 3, 2>} : tensor<1x4x8x16xf32> -> tensor<1x4x16x8xf32>
  %q3 = aten.view %q {size = array<i64: 4, 8, 16>} : tensor<1x4x8x16xf32> -> tensor<4x8x16xf32>
  %k3 = aten.view %kt {size = array<i64: 4, 16, 8>} : tensor<1x4x16x8xf32> -> tensor<4x16x8xf32>
  %s = aten.bmm %q3, %k3 : tensor<4x8x16xf32>, tensor<4x16x8xf32> -> tensor<4x8x8xf32>
  %s4 = aten.view %s {size = array<i64: 1, 4, 8, 8>} : tensor<4x8x8xf32> -> tensor<1x4x8x8xf32>
  %sd = aten.mul.Scalar %s4 {other = 0.25 : f64} : tensor<1x4x8x8xf32> -> tensor<1x4x8x8xf32>
  %p = aten._softmax %sd {dim = -1 : i64, half_to_float = false} : tensor<1x4x8x8xf32> -> tensor<1x4x8x8xf32>
  %p3 = aten.view %p {size = array<i64: 4, 8, 8>} : tensor<1x4x8x8xf32> -> tensor<4x8x8xf32>
  %v3 = aten.view %vr {size = array<i64: 4, 8, 16>} : tensor<1x4x8x16xf32> -> tensor<4x8x16xf32>
  %o = aten.bmm %p3, %v3 : tensor<4x8x8xf32>, tensor<4x8x16xf32> -> tensor<4x8x16xf32>
  %o4 = aten.view %o {size = array<i64: 1, 4, 8, 16>} : tensor<4x8x16xf32> -> tensor<1x4x8x16xf32>
  func.return %o4 : tensor<1x4x8x16xf32>
}
