// RUN: tilefx-opt %s | filecheck %s
// RUN: tilefx-opt %s | tilefx-opt | filecheck %s
// RUN: tilefx-opt %s --print-op-generic | tilefx-opt | filecheck %s

// Every op of the aten dialect in its custom syntax. The input is hand-written;
// the CHECK lines are what tilefx-opt prints (floats normalised, attributes
// before properties). tests/test_roundtrip.py fails when an op is missing here.

// CHECK-LABEL: func.func @elementwise(
// CHECK-SAME:  %x: tensor<4x8xf32>, %y: tensor<4x8xf32>, %m: tensor<4x8xi1>, %n: tensor<4x8xi1>, %i: tensor<4x8xi64>, %j: tensor<4x8xi64>) -> tensor<4x8xf32> {
// CHECK-NEXT:    %abs = aten.abs %x : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %add = aten.add.Tensor %x, %y {alpha = 1 : i64} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %add_noalpha = aten.add.Tensor %x, %y : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %add_s = aten.add.Scalar %x {other = 2.000000e+00 : f64, alpha = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %alias = aten.alias %x : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %band = aten.bitwise_and.Tensor %i, %j : tensor<4x8xi64>, tensor<4x8xi64> -> tensor<4x8xi64>
// CHECK-NEXT:    %bnot = aten.bitwise_not %m : tensor<4x8xi1> -> tensor<4x8xi1>
// CHECK-NEXT:    %bor = aten.bitwise_or.Tensor %i, %j : tensor<4x8xi64>, tensor<4x8xi64> -> tensor<4x8xi64>
// CHECK-NEXT:    %clamp = aten.clamp %x {min = -1.000000e+00 : f64, max = 1.000000e+00 : f64} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %clamp_min = aten.clamp %x {min = 0 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %clone = aten.clone %x : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %copy = aten.copy %x, %clone {non_blocking = false} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %cos = aten.cos %x : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %div = aten.div.Tensor %x, %y : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %div_s = aten.div.Scalar %x {other = 4.000000e+00 : f64} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %eq_s = aten.eq.Scalar %i {other = 0 : i64} : tensor<4x8xi64> -> tensor<4x8xi1>
// CHECK-NEXT:    %eq = aten.eq.Tensor %x, %y : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xi1>
// CHECK-NEXT:    %erf = aten.erf %x : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %exp = aten.exp %x : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %full_like = aten.full_like %x {fill_value = 0.000000e+00 : f64, dtype = f32} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %ge_s = aten.ge.Scalar %x {other = 0.000000e+00 : f64} : tensor<4x8xf32> -> tensor<4x8xi1>
// CHECK-NEXT:    %ge = aten.ge.Tensor %x, %y : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xi1>
// CHECK-NEXT:    %gelu = aten.gelu %x {approximate = "none"} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %gelu_tanh = aten.gelu %x {approximate = "tanh"} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %gt_s = aten.gt.Scalar %x {other = 0.000000e+00 : f64} : tensor<4x8xf32> -> tensor<4x8xi1>
// CHECK-NEXT:    %gt = aten.gt.Tensor %x, %y : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xi1>
// CHECK-NEXT:    %le_s = aten.le.Scalar %x {other = 1.000000e+00 : f64} : tensor<4x8xf32> -> tensor<4x8xi1>
// CHECK-NEXT:    %le = aten.le.Tensor %x, %y : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xi1>
// CHECK-NEXT:    %leaky_relu = aten.leaky_relu %x {negative_slope = 1.000000e-02 : f64} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %log = aten.log %x : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %land = aten.logical_and %m, %n : tensor<4x8xi1>, tensor<4x8xi1> -> tensor<4x8xi1>
// CHECK-NEXT:    %lnot = aten.logical_not %m : tensor<4x8xi1> -> tensor<4x8xi1>
// CHECK-NEXT:    %lt_s = aten.lt.Scalar %i {other = 3 : i64} : tensor<4x8xi64> -> tensor<4x8xi1>
// CHECK-NEXT:    %lt = aten.lt.Tensor %x, %y : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xi1>
// CHECK-NEXT:    %maximum = aten.maximum %x, %y : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %minimum = aten.minimum %x, %y : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %mul = aten.mul.Tensor %x, %y : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %mul_s = aten.mul.Scalar %x {other = 5.000000e-01 : f64} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %ne_s = aten.ne.Scalar %m {other = true} : tensor<4x8xi1> -> tensor<4x8xi1>
// CHECK-NEXT:    %ne = aten.ne.Tensor %i, %j : tensor<4x8xi64>, tensor<4x8xi64> -> tensor<4x8xi1>
// CHECK-NEXT:    %neg = aten.neg %x : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %pow_s = aten.pow.Tensor_Scalar %x {exponent = 2 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %pow = aten.pow.Tensor_Tensor %x, %y : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %reciprocal = aten.reciprocal %x : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %relu = aten.relu %x : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %rsqrt = aten.rsqrt %x : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %sigmoid = aten.sigmoid %x : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %sin = aten.sin %x : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %sqrt = aten.sqrt %x : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %sub = aten.sub.Tensor %x, %y {alpha = 2 : i64} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %sub_s = aten.sub.Scalar %x {other = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %tanh = aten.tanh %x : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %to_copy = aten._to_copy %x {dtype = f16} : tensor<4x8xf32> -> tensor<4x8xf16>
// CHECK-NEXT:    %where = aten.where.self %m, %x, %y : tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    func.return %where : tensor<4x8xf32>
// CHECK-NEXT:    }
func.func @elementwise(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>, %m: tensor<4x8xi1>, %n: tensor<4x8xi1>, %i: tensor<4x8xi64>, %j: tensor<4x8xi64>) -> tensor<4x8xf32> {
  %abs = aten.abs %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %add = aten.add.Tensor %x, %y {alpha = 1 : i64} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %add_noalpha = aten.add.Tensor %x, %y : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %add_s = aten.add.Scalar %x {other = 2.0 : f64, alpha = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
  %alias = aten.alias %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %band = aten.bitwise_and.Tensor %i, %j : tensor<4x8xi64>, tensor<4x8xi64> -> tensor<4x8xi64>
  %bnot = aten.bitwise_not %m : tensor<4x8xi1> -> tensor<4x8xi1>
  %bor = aten.bitwise_or.Tensor %i, %j : tensor<4x8xi64>, tensor<4x8xi64> -> tensor<4x8xi64>
  %clamp = aten.clamp %x {min = -1.0 : f64, max = 1.0 : f64} : tensor<4x8xf32> -> tensor<4x8xf32>
  %clamp_min = aten.clamp %x {min = 0 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
  %clone = aten.clone %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %copy = aten.copy %x, %clone {non_blocking = false} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %cos = aten.cos %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %div = aten.div.Tensor %x, %y : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %div_s = aten.div.Scalar %x {other = 4.0 : f64} : tensor<4x8xf32> -> tensor<4x8xf32>
  %eq_s = aten.eq.Scalar %i {other = 0 : i64} : tensor<4x8xi64> -> tensor<4x8xi1>
  %eq = aten.eq.Tensor %x, %y : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xi1>
  %erf = aten.erf %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %exp = aten.exp %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %full_like = aten.full_like %x {fill_value = 0.0 : f64, dtype = f32} : tensor<4x8xf32> -> tensor<4x8xf32>
  %ge_s = aten.ge.Scalar %x {other = 0.0 : f64} : tensor<4x8xf32> -> tensor<4x8xi1>
  %ge = aten.ge.Tensor %x, %y : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xi1>
  %gelu = aten.gelu %x {approximate = "none"} : tensor<4x8xf32> -> tensor<4x8xf32>
  %gelu_tanh = aten.gelu %x {approximate = "tanh"} : tensor<4x8xf32> -> tensor<4x8xf32>
  %gt_s = aten.gt.Scalar %x {other = 0.0 : f64} : tensor<4x8xf32> -> tensor<4x8xi1>
  %gt = aten.gt.Tensor %x, %y : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xi1>
  %le_s = aten.le.Scalar %x {other = 1.0 : f64} : tensor<4x8xf32> -> tensor<4x8xi1>
  %le = aten.le.Tensor %x, %y : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xi1>
  %leaky_relu = aten.leaky_relu %x {negative_slope = 1.0e-02 : f64} : tensor<4x8xf32> -> tensor<4x8xf32>
  %log = aten.log %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %land = aten.logical_and %m, %n : tensor<4x8xi1>, tensor<4x8xi1> -> tensor<4x8xi1>
  %lnot = aten.logical_not %m : tensor<4x8xi1> -> tensor<4x8xi1>
  %lt_s = aten.lt.Scalar %i {other = 3 : i64} : tensor<4x8xi64> -> tensor<4x8xi1>
  %lt = aten.lt.Tensor %x, %y : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xi1>
  %maximum = aten.maximum %x, %y : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %minimum = aten.minimum %x, %y : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %mul = aten.mul.Tensor %x, %y : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %mul_s = aten.mul.Scalar %x {other = 5.0e-01 : f64} : tensor<4x8xf32> -> tensor<4x8xf32>
  %ne_s = aten.ne.Scalar %m {other = true} : tensor<4x8xi1> -> tensor<4x8xi1>
  %ne = aten.ne.Tensor %i, %j : tensor<4x8xi64>, tensor<4x8xi64> -> tensor<4x8xi1>
  %neg = aten.neg %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %pow_s = aten.pow.Tensor_Scalar %x {exponent = 2 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
  %pow = aten.pow.Tensor_Tensor %x, %y : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %reciprocal = aten.reciprocal %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %relu = aten.relu %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %rsqrt = aten.rsqrt %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %sigmoid = aten.sigmoid %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %sin = aten.sin %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %sqrt = aten.sqrt %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %sub = aten.sub.Tensor %x, %y {alpha = 2 : i64} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %sub_s = aten.sub.Scalar %x {other = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
  %tanh = aten.tanh %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %to_copy = aten._to_copy %x {dtype = f16} : tensor<4x8xf32> -> tensor<4x8xf16>
  %where = aten.where.self %m, %x, %y : tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %where : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @reductions(
// CHECK-SAME:  %x: tensor<4x8xf32>, %m: tensor<4x8xi1>) -> tensor<4x8xf32> {
// CHECK-NEXT:    %amax = aten.amax %x {dim = array<i64: 1>, keepdim = true} : tensor<4x8xf32> -> tensor<4x1xf32>
// CHECK-NEXT:    %amin = aten.amin %x {dim = array<i64: 0>} : tensor<4x8xf32> -> tensor<8xf32>
// CHECK-NEXT:    %any = aten.any.dim %m {dim = 1 : i64, keepdim = false} : tensor<4x8xi1> -> tensor<4xi1>
// CHECK-NEXT:    %argmax = aten.argmax %x {dim = 1 : i64, keepdim = false} : tensor<4x8xf32> -> tensor<4xi64>
// CHECK-NEXT:    %argmax_all = aten.argmax %x : tensor<4x8xf32> -> tensor<i64>
// CHECK-NEXT:    %mean = aten.mean %x : tensor<4x8xf32> -> tensor<f32>
// CHECK-NEXT:    %mean_dim = aten.mean.dim %x {dim = array<i64: 1>, keepdim = true} : tensor<4x8xf32> -> tensor<4x1xf32>
// CHECK-NEXT:    %sum_dim = aten.sum.dim_IntList %x {dim = array<i64: 0>, keepdim = false, dtype = f32} : tensor<4x8xf32> -> tensor<8xf32>
// CHECK-NEXT:    %sum = aten.sum %x : tensor<4x8xf32> -> tensor<f32>
// CHECK-NEXT:    %var_mean, %var_mean_1 = aten.var_mean.correction %x {dim = array<i64: 1>, correction = 0 : i64, keepdim = true} : tensor<4x8xf32> -> tensor<4x1xf32>, tensor<4x1xf32>
// CHECK-NEXT:    %softmax = aten._softmax %x {dim = 1 : i64, half_to_float = false} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %log_softmax = aten._log_softmax %x {dim = -1 : i64, half_to_float = false} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    func.return %log_softmax : tensor<4x8xf32>
// CHECK-NEXT:    }
func.func @reductions(%x: tensor<4x8xf32>, %m: tensor<4x8xi1>) -> tensor<4x8xf32> {
  %amax = aten.amax %x {dim = array<i64: 1>, keepdim = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  %amin = aten.amin %x {dim = array<i64: 0>} : tensor<4x8xf32> -> tensor<8xf32>
  %any = aten.any.dim %m {dim = 1 : i64, keepdim = false} : tensor<4x8xi1> -> tensor<4xi1>
  %argmax = aten.argmax %x {dim = 1 : i64, keepdim = false} : tensor<4x8xf32> -> tensor<4xi64>
  %argmax_all = aten.argmax %x : tensor<4x8xf32> -> tensor<i64>
  %mean = aten.mean %x : tensor<4x8xf32> -> tensor<f32>
  %mean_dim = aten.mean.dim %x {dim = array<i64: 1>, keepdim = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  %sum_dim = aten.sum.dim_IntList %x {dim = array<i64: 0>, keepdim = false, dtype = f32} : tensor<4x8xf32> -> tensor<8xf32>
  %sum = aten.sum %x : tensor<4x8xf32> -> tensor<f32>
  %var_mean:2 = aten.var_mean.correction %x {dim = array<i64: 1>, correction = 0 : i64, keepdim = true} : tensor<4x8xf32> -> tensor<4x1xf32>, tensor<4x1xf32>
  %softmax = aten._softmax %x {dim = 1 : i64, half_to_float = false} : tensor<4x8xf32> -> tensor<4x8xf32>
  %log_softmax = aten._log_softmax %x {dim = -1 : i64, half_to_float = false} : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %log_softmax : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @shapes(
// CHECK-SAME:  %x: tensor<4x8xf32>, %y: tensor<4x8xf32>, %row: tensor<1x8xf32>, %idx: tensor<4x2xi64>, %src: tensor<4x2xf32>, %rows: tensor<3xi64>, %vals: tensor<3x8xf32>, %part: tensor<4x4xf32>) -> tensor<32xf32> {
// CHECK-NEXT:    %cat = aten.cat(%x, %y) {dim = 0 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
// CHECK-NEXT:    %pad = aten.constant_pad_nd %x {pad = array<i64: 1, 1>, value = 0.000000e+00 : f64} : tensor<4x8xf32> -> tensor<4x10xf32>
// CHECK-NEXT:    %expand = aten.expand %row {size = array<i64: 4, 8>} : tensor<1x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %gather = aten.gather %x, %idx {dim = 1 : i64, sparse_grad = false} : tensor<4x8xf32>, tensor<4x2xi64> -> tensor<4x2xf32>
// CHECK-NEXT:    %index = aten.index.Tensor %x, (%rows) : tensor<4x8xf32>, (tensor<3xi64>) -> tensor<3x8xf32>
// CHECK-NEXT:    %index2 = aten.index.Tensor %x, (%rows, %rows) : tensor<4x8xf32>, (tensor<3xi64>, tensor<3xi64>) -> tensor<3xf32>
// CHECK-NEXT:    %index_put = aten.index_put %x, (%rows), %vals {accumulate = true} : tensor<4x8xf32>, (tensor<3xi64>), tensor<3x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %permute = aten.permute %x {dims = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
// CHECK-NEXT:    %scatter_v = aten.scatter.value %x, %idx {dim = 1 : i64, value = 0.000000e+00 : f64} : tensor<4x8xf32>, tensor<4x2xi64> -> tensor<4x8xf32>
// CHECK-NEXT:    %scatter_s = aten.scatter.src %x, %idx, %src {dim = 1 : i64} : tensor<4x8xf32>, tensor<4x2xi64>, tensor<4x2xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %scatter_add = aten.scatter_add %x, %idx, %src {dim = 1 : i64} : tensor<4x8xf32>, tensor<4x2xi64>, tensor<4x2xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %select = aten.select.int %x {dim = 0 : i64, index = 2 : i64} : tensor<4x8xf32> -> tensor<8xf32>
// CHECK-NEXT:    %slice = aten.slice.Tensor %x {dim = 1 : i64, start = 0 : i64, end = 4 : i64, step = 1 : i64} : tensor<4x8xf32> -> tensor<4x4xf32>
// CHECK-NEXT:    %slice_all = aten.slice.Tensor %x : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %slice_scatter = aten.slice_scatter %x, %part {dim = 1 : i64, start = 4 : i64, end = 8 : i64, step = 1 : i64} : tensor<4x8xf32>, tensor<4x4xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %split, %split_1 = aten.split_with_sizes %x {split_sizes = array<i64: 3, 5>, dim = 1 : i64} : tensor<4x8xf32> -> tensor<4x3xf32>, tensor<4x5xf32>
// CHECK-NEXT:    %split1 = aten.split_with_sizes %x {split_sizes = array<i64: 4>} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %squeeze = aten.squeeze.dims %row {dim = array<i64: 0>} : tensor<1x8xf32> -> tensor<8xf32>
// CHECK-NEXT:    %unsqueeze = aten.unsqueeze %x {dim = 0 : i64} : tensor<4x8xf32> -> tensor<1x4x8xf32>
// CHECK-NEXT:    %view = aten.view %x {size = array<i64: 32>} : tensor<4x8xf32> -> tensor<32xf32>
// CHECK-NEXT:    func.return %view : tensor<32xf32>
// CHECK-NEXT:    }
func.func @shapes(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>, %row: tensor<1x8xf32>, %idx: tensor<4x2xi64>, %src: tensor<4x2xf32>, %rows: tensor<3xi64>, %vals: tensor<3x8xf32>, %part: tensor<4x4xf32>) -> tensor<32xf32> {
  %cat = aten.cat (%x, %y) {dim = 0 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %pad = aten.constant_pad_nd %x {pad = array<i64: 1, 1>, value = 0.0 : f64} : tensor<4x8xf32> -> tensor<4x10xf32>
  %expand = aten.expand %row {size = array<i64: 4, 8>} : tensor<1x8xf32> -> tensor<4x8xf32>
  %gather = aten.gather %x, %idx {dim = 1 : i64, sparse_grad = false} : tensor<4x8xf32>, tensor<4x2xi64> -> tensor<4x2xf32>
  %index = aten.index.Tensor %x, (%rows) : tensor<4x8xf32>, (tensor<3xi64>) -> tensor<3x8xf32>
  %index2 = aten.index.Tensor %x, (%rows, %rows) : tensor<4x8xf32>, (tensor<3xi64>, tensor<3xi64>) -> tensor<3xf32>
  %index_put = aten.index_put %x, (%rows), %vals {accumulate = true} : tensor<4x8xf32>, (tensor<3xi64>), tensor<3x8xf32> -> tensor<4x8xf32>
  %permute = aten.permute %x {dims = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
  %scatter_v = aten.scatter.value %x, %idx {dim = 1 : i64, value = 0.0 : f64} : tensor<4x8xf32>, tensor<4x2xi64> -> tensor<4x8xf32>
  %scatter_s = aten.scatter.src %x, %idx, %src {dim = 1 : i64} : tensor<4x8xf32>, tensor<4x2xi64>, tensor<4x2xf32> -> tensor<4x8xf32>
  %scatter_add = aten.scatter_add %x, %idx, %src {dim = 1 : i64} : tensor<4x8xf32>, tensor<4x2xi64>, tensor<4x2xf32> -> tensor<4x8xf32>
  %select = aten.select.int %x {dim = 0 : i64, index = 2 : i64} : tensor<4x8xf32> -> tensor<8xf32>
  %slice = aten.slice.Tensor %x {dim = 1 : i64, start = 0 : i64, end = 4 : i64, step = 1 : i64} : tensor<4x8xf32> -> tensor<4x4xf32>
  %slice_all = aten.slice.Tensor %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %slice_scatter = aten.slice_scatter %x, %part {dim = 1 : i64, start = 4 : i64, end = 8 : i64, step = 1 : i64} : tensor<4x8xf32>, tensor<4x4xf32> -> tensor<4x8xf32>
  %split:2 = aten.split_with_sizes %x {split_sizes = array<i64: 3, 5>, dim = 1 : i64} : tensor<4x8xf32> -> tensor<4x3xf32>, tensor<4x5xf32>
  %split1 = aten.split_with_sizes %x {split_sizes = array<i64: 4>} : tensor<4x8xf32> -> tensor<4x8xf32>
  %squeeze = aten.squeeze.dims %row {dim = array<i64: 0>} : tensor<1x8xf32> -> tensor<8xf32>
  %unsqueeze = aten.unsqueeze %x {dim = 0 : i64} : tensor<4x8xf32> -> tensor<1x4x8xf32>
  %view = aten.view %x {size = array<i64: 32>} : tensor<4x8xf32> -> tensor<32xf32>
  func.return %view : tensor<32xf32>
}

// CHECK-LABEL: func.func @creation(
// CHECK-SAME:  ) -> (tensor<8xi64>, tensor<4x8xf32>, tensor<f32>) {
// CHECK-NEXT:    %arange = aten.arange.start_step {start = 0 : i64, end = 8 : i64, step = 1 : i64, dtype = i64} : tensor<8xi64>
// CHECK-NEXT:    %full = aten.full {size = array<i64: 4, 8>, fill_value = 1.000000e+00 : f64, dtype = f32} : tensor<4x8xf32>
// CHECK-NEXT:    %scalar = aten.scalar_tensor {s = 1.000000e-03 : f64, dtype = f32} : tensor<f32>
// CHECK-NEXT:    func.return %arange, %full, %scalar : tensor<8xi64>, tensor<4x8xf32>, tensor<f32>
// CHECK-NEXT:    }
func.func @creation() -> (tensor<8xi64>, tensor<4x8xf32>, tensor<f32>) {
  %arange = aten.arange.start_step {start = 0 : i64, end = 8 : i64, step = 1 : i64, dtype = i64} : tensor<8xi64>
  %full = aten.full {size = array<i64: 4, 8>, fill_value = 1.0 : f64, dtype = f32} : tensor<4x8xf32>
  %scalar = aten.scalar_tensor {s = 1.0e-03 : f64, dtype = f32} : tensor<f32>
  func.return %arange, %full, %scalar : tensor<8xi64>, tensor<4x8xf32>, tensor<f32>
}

// CHECK-LABEL: func.func @linear(
// CHECK-SAME:  %x: tensor<4x8xf32>, %wt: tensor<8x16xf32>, %b: tensor<16xf32>, %bx: tensor<2x4x8xf32>, %bw: tensor<2x8x16xf32>, %table: tensor<100x8xf32>, %ids: tensor<4x6xi64>, %gemb: tensor<4x6x8xf32>) -> tensor<4x16xf32> {
// CHECK-NEXT:    %mm = aten.mm %x, %wt : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT:    %addmm = aten.addmm %b, %x, %wt {beta = 1 : i64, alpha = 1 : i64} : tensor<16xf32>, tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
// CHECK-NEXT:    %bmm = aten.bmm %bx, %bw : tensor<2x4x8xf32>, tensor<2x8x16xf32> -> tensor<2x4x16xf32>
// CHECK-NEXT:    %emb = aten.embedding %table, %ids {padding_idx = -1 : i64, scale_grad_by_freq = false, sparse = false} : tensor<100x8xf32>, tensor<4x6xi64> -> tensor<4x6x8xf32>
// CHECK-NEXT:    %emb_grad = aten.embedding_dense_backward %gemb, %ids {num_weights = 100 : i64, padding_idx = -1 : i64, scale_grad_by_freq = false} : tensor<4x6x8xf32>, tensor<4x6xi64> -> tensor<100x8xf32>
// CHECK-NEXT:    func.return %mm : tensor<4x16xf32>
// CHECK-NEXT:    }
func.func @linear(%x: tensor<4x8xf32>, %wt: tensor<8x16xf32>, %b: tensor<16xf32>, %bx: tensor<2x4x8xf32>, %bw: tensor<2x8x16xf32>, %table: tensor<100x8xf32>, %ids: tensor<4x6xi64>, %gemb: tensor<4x6x8xf32>) -> tensor<4x16xf32> {
  %mm = aten.mm %x, %wt : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %addmm = aten.addmm %b, %x, %wt {beta = 1 : i64, alpha = 1 : i64} : tensor<16xf32>, tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %bmm = aten.bmm %bx, %bw : tensor<2x4x8xf32>, tensor<2x8x16xf32> -> tensor<2x4x16xf32>
  %emb = aten.embedding %table, %ids {padding_idx = -1 : i64, scale_grad_by_freq = false, sparse = false} : tensor<100x8xf32>, tensor<4x6xi64> -> tensor<4x6x8xf32>
  %emb_grad = aten.embedding_dense_backward %gemb, %ids {num_weights = 100 : i64, padding_idx = -1 : i64, scale_grad_by_freq = false} : tensor<4x6x8xf32>, tensor<4x6xi64> -> tensor<100x8xf32>
  func.return %mm : tensor<4x16xf32>
}

// CHECK-LABEL: func.func @conv(
// CHECK-SAME:  %img: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>, %gout: tensor<2x4x8x8xf32>, %gs2: tensor<2x4x3x3xf32>, %gpool: tensor<2x3x4x4xf32>) -> tensor<2x4x8x8xf32> {
// CHECK-NEXT:    %conv = aten.convolution %img, %w bias %b {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, transposed = false, output_padding = array<i64: 0, 0>, groups = 1 : i64} : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32> bias tensor<4xf32> -> tensor<2x4x8x8xf32>
// CHECK-NEXT:    %conv_nobias = aten.convolution %img, %w {stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, transposed = false, output_padding = array<i64: 0, 0>, groups = 1 : i64} : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<2x4x3x3xf32>
// CHECK-NEXT:    %conv_bwd, %conv_bwd_1, %conv_bwd_2 = aten.convolution_backward %gout, %img, %w {bias_sizes = array<i64: 4>, stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, transposed = false, output_padding = array<i64: 0, 0>, groups = 1 : i64, output_mask = array<i1: true, true, true>} : tensor<2x4x8x8xf32>, tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>
// CHECK-NEXT:    %conv_bwd_w, %conv_bwd_w_1, %conv_bwd_w_2 = aten.convolution_backward %gs2, %img, %w {stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, transposed = false, output_padding = array<i64: 0, 0>, groups = 1 : i64, output_mask = array<i1: false, true, false>} : tensor<2x4x3x3xf32>, tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<0xf32>, tensor<4x3x3x3xf32>, tensor<0xf32>
// CHECK-NEXT:    %avg = aten.avg_pool2d %img {kernel_size = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, ceil_mode = false, count_include_pad = true} : tensor<2x3x8x8xf32> -> tensor<2x3x4x4xf32>
// CHECK-NEXT:    %avg_bwd = aten.avg_pool2d_backward %gpool, %img {kernel_size = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, ceil_mode = false, count_include_pad = true} : tensor<2x3x4x4xf32>, tensor<2x3x8x8xf32> -> tensor<2x3x8x8xf32>
// CHECK-NEXT:    %avg_div = aten.avg_pool2d_backward %gpool, %img {kernel_size = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, ceil_mode = false, count_include_pad = false, divisor_override = 4 : i64} : tensor<2x3x4x4xf32>, tensor<2x3x8x8xf32> -> tensor<2x3x8x8xf32>
// CHECK-NEXT:    %maxpool, %maxpool_1 = aten.max_pool2d_with_indices %img {kernel_size = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, ceil_mode = false} : tensor<2x3x8x8xf32> -> tensor<2x3x4x4xf32>, tensor<2x3x4x4xi64>
// CHECK-NEXT:    %maxpool_bwd = aten.max_pool2d_with_indices_backward %gpool, %img, %maxpool_1 {kernel_size = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, ceil_mode = false} : tensor<2x3x4x4xf32>, tensor<2x3x8x8xf32>, tensor<2x3x4x4xi64> -> tensor<2x3x8x8xf32>
// CHECK-NEXT:    func.return %conv : tensor<2x4x8x8xf32>
// CHECK-NEXT:    }
func.func @conv(%img: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>, %gout: tensor<2x4x8x8xf32>, %gs2: tensor<2x4x3x3xf32>, %gpool: tensor<2x3x4x4xf32>) -> tensor<2x4x8x8xf32> {
  %conv = aten.convolution %img, %w bias %b {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, transposed = false, output_padding = array<i64: 0, 0>, groups = 1 : i64} : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32> bias tensor<4xf32> -> tensor<2x4x8x8xf32>
  %conv_nobias = aten.convolution %img, %w {stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, transposed = false, output_padding = array<i64: 0, 0>, groups = 1 : i64} : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<2x4x3x3xf32>
  %conv_bwd:3 = aten.convolution_backward %gout, %img, %w {bias_sizes = array<i64: 4>, stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>, transposed = false, output_padding = array<i64: 0, 0>, groups = 1 : i64, output_mask = array<i1: true, true, true>} : tensor<2x4x8x8xf32>, tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>
  %conv_bwd_w:3 = aten.convolution_backward %gs2, %img, %w {stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, transposed = false, output_padding = array<i64: 0, 0>, groups = 1 : i64, output_mask = array<i1: false, true, false>} : tensor<2x4x3x3xf32>, tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<0xf32>, tensor<4x3x3x3xf32>, tensor<0xf32>
  %avg = aten.avg_pool2d %img {kernel_size = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, ceil_mode = false, count_include_pad = true} : tensor<2x3x8x8xf32> -> tensor<2x3x4x4xf32>
  %avg_bwd = aten.avg_pool2d_backward %gpool, %img {kernel_size = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, ceil_mode = false, count_include_pad = true} : tensor<2x3x4x4xf32>, tensor<2x3x8x8xf32> -> tensor<2x3x8x8xf32>
  %avg_div = aten.avg_pool2d_backward %gpool, %img {kernel_size = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, ceil_mode = false, count_include_pad = false, divisor_override = 4 : i64} : tensor<2x3x4x4xf32>, tensor<2x3x8x8xf32> -> tensor<2x3x8x8xf32>
  %maxpool:2 = aten.max_pool2d_with_indices %img {kernel_size = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, ceil_mode = false} : tensor<2x3x8x8xf32> -> tensor<2x3x4x4xf32>, tensor<2x3x4x4xi64>
  %maxpool_bwd = aten.max_pool2d_with_indices_backward %gpool, %img, %maxpool#1 {kernel_size = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, ceil_mode = false} : tensor<2x3x4x4xf32>, tensor<2x3x8x8xf32>, tensor<2x3x4x4xi64> -> tensor<2x3x8x8xf32>
  func.return %conv : tensor<2x4x8x8xf32>
}

// CHECK-LABEL: func.func @norm(
// CHECK-SAME:  %h: tensor<4x8xf32>, %gh: tensor<4x8xf32>, %g: tensor<8xf32>, %beta: tensor<8xf32>, %img: tensor<2x3x8x8xf32>, %bng: tensor<3xf32>, %bnb: tensor<3xf32>, %rm: tensor<3xf32>, %rv: tensor<3xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT:    %ln, %ln_1, %ln_2 = aten.native_layer_norm %h weight %g bias %beta {normalized_shape = array<i64: 8>, eps = 1.000000e-05 : f64} : tensor<4x8xf32> weight tensor<8xf32> bias tensor<8xf32> -> tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>
// CHECK-NEXT:    %ln_plain, %ln_plain_1, %ln_plain_2 = aten.native_layer_norm %h {normalized_shape = array<i64: 8>, eps = 1.000000e-05 : f64} : tensor<4x8xf32> -> tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>
// CHECK-NEXT:    %ln_bwd, %ln_bwd_1, %ln_bwd_2 = aten.native_layer_norm_backward %gh, %h, %ln_1, %ln_2 weight %g bias %beta {normalized_shape = array<i64: 8>, output_mask = array<i1: true, true, true>} : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32> weight tensor<8xf32> bias tensor<8xf32> -> tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
// CHECK-NEXT:    %ln_bwd_x, %ln_bwd_x_1, %ln_bwd_x_2 = aten.native_layer_norm_backward %gh, %h, %ln_plain_1, %ln_plain_2 {normalized_shape = array<i64: 8>, output_mask = array<i1: true, false, false>} : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32> -> tensor<4x8xf32>, tensor<0xf32>, tensor<0xf32>
// CHECK-NEXT:    %bn, %bn_1, %bn_2, %bn_3, %bn_4 = aten._native_batch_norm_legit_functional %img, %rm, %rv weight %bng bias %bnb {training = true, momentum = 1.000000e-01 : f64, eps = 1.000000e-05 : f64} : tensor<2x3x8x8xf32>, tensor<3xf32>, tensor<3xf32> weight tensor<3xf32> bias tensor<3xf32> -> tensor<2x3x8x8xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
// CHECK-NEXT:    %bn_eval, %bn_eval_1, %bn_eval_2 = aten._native_batch_norm_legit_no_training %img, %rm, %rv weight %bng bias %bnb {momentum = 1.000000e-01 : f64, eps = 1.000000e-05 : f64} : tensor<2x3x8x8xf32>, tensor<3xf32>, tensor<3xf32> weight tensor<3xf32> bias tensor<3xf32> -> tensor<2x3x8x8xf32>, tensor<0xf32>, tensor<0xf32>
// CHECK-NEXT:    %bn_affine_free, %bn_affine_free_1, %bn_affine_free_2 = aten._native_batch_norm_legit_no_training %img, %rm, %rv {momentum = 1.000000e-01 : f64, eps = 1.000000e-05 : f64} : tensor<2x3x8x8xf32>, tensor<3xf32>, tensor<3xf32> -> tensor<2x3x8x8xf32>, tensor<0xf32>, tensor<0xf32>
// CHECK-NEXT:    %drop, %drop_1 = aten.native_dropout %h {p = 2.000000e-01 : f64, train = true} : tensor<4x8xf32> -> tensor<4x8xf32>, tensor<4x8xi1>
// CHECK-NEXT:    %drop_bwd = aten.native_dropout_backward %gh, %drop_1 {scale = 1.250000e+00 : f64} : tensor<4x8xf32>, tensor<4x8xi1> -> tensor<4x8xf32>
// CHECK-NEXT:    func.return %drop_bwd : tensor<4x8xf32>
// CHECK-NEXT:    }
func.func @norm(%h: tensor<4x8xf32>, %gh: tensor<4x8xf32>, %g: tensor<8xf32>, %beta: tensor<8xf32>, %img: tensor<2x3x8x8xf32>, %bng: tensor<3xf32>, %bnb: tensor<3xf32>, %rm: tensor<3xf32>, %rv: tensor<3xf32>) -> tensor<4x8xf32> {
  %ln:3 = aten.native_layer_norm %h weight %g bias %beta {normalized_shape = array<i64: 8>, eps = 1.0e-05 : f64} : tensor<4x8xf32> weight tensor<8xf32> bias tensor<8xf32> -> tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>
  %ln_plain:3 = aten.native_layer_norm %h {normalized_shape = array<i64: 8>, eps = 1.0e-05 : f64} : tensor<4x8xf32> -> tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>
  %ln_bwd:3 = aten.native_layer_norm_backward %gh, %h, %ln#1, %ln#2 weight %g bias %beta {normalized_shape = array<i64: 8>, output_mask = array<i1: true, true, true>} : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32> weight tensor<8xf32> bias tensor<8xf32> -> tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  %ln_bwd_x:3 = aten.native_layer_norm_backward %gh, %h, %ln_plain#1, %ln_plain#2 {normalized_shape = array<i64: 8>, output_mask = array<i1: true, false, false>} : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32> -> tensor<4x8xf32>, tensor<0xf32>, tensor<0xf32>
  %bn:5 = aten._native_batch_norm_legit_functional %img, %rm, %rv weight %bng bias %bnb {training = true, momentum = 1.0e-01 : f64, eps = 1.0e-05 : f64} : tensor<2x3x8x8xf32>, tensor<3xf32>, tensor<3xf32> weight tensor<3xf32> bias tensor<3xf32> -> tensor<2x3x8x8xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
  %bn_eval:3 = aten._native_batch_norm_legit_no_training %img, %rm, %rv weight %bng bias %bnb {momentum = 1.0e-01 : f64, eps = 1.0e-05 : f64} : tensor<2x3x8x8xf32>, tensor<3xf32>, tensor<3xf32> weight tensor<3xf32> bias tensor<3xf32> -> tensor<2x3x8x8xf32>, tensor<0xf32>, tensor<0xf32>
  %bn_affine_free:3 = aten._native_batch_norm_legit_no_training %img, %rm, %rv {momentum = 1.0e-01 : f64, eps = 1.0e-05 : f64} : tensor<2x3x8x8xf32>, tensor<3xf32>, tensor<3xf32> -> tensor<2x3x8x8xf32>, tensor<0xf32>, tensor<0xf32>
  %drop:2 = aten.native_dropout %h {p = 2.0e-01 : f64, train = true} : tensor<4x8xf32> -> tensor<4x8xf32>, tensor<4x8xi1>
  %drop_bwd = aten.native_dropout_backward %gh, %drop#1 {scale = 1.25 : f64} : tensor<4x8xf32>, tensor<4x8xi1> -> tensor<4x8xf32>
  func.return %drop_bwd : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @activation_backward(
// CHECK-SAME:  %g: tensor<4x8xf32>, %x: tensor<4x8xf32>, %out: tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT:    %gelu_bwd = aten.gelu_backward %g, %x {approximate = "none"} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %sigmoid_bwd = aten.sigmoid_backward %g, %out : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %tanh_bwd = aten.tanh_backward %g, %out : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %threshold_bwd = aten.threshold_backward %g, %x {threshold = 0 : i64} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %softmax_bwd = aten._softmax_backward_data %g, %out {dim = 1 : i64, input_dtype = f32} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %log_softmax_bwd = aten._log_softmax_backward_data %g, %out {dim = 1 : i64, input_dtype = f32} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    func.return %log_softmax_bwd : tensor<4x8xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    }
func.func @activation_backward(%g: tensor<4x8xf32>, %x: tensor<4x8xf32>, %out: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %gelu_bwd = aten.gelu_backward %g, %x {approximate = "none"} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %sigmoid_bwd = aten.sigmoid_backward %g, %out : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %tanh_bwd = aten.tanh_backward %g, %out : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %threshold_bwd = aten.threshold_backward %g, %x {threshold = 0 : i64} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %softmax_bwd = aten._softmax_backward_data %g, %out {dim = 1 : i64, input_dtype = f32} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %log_softmax_bwd = aten._log_softmax_backward_data %g, %out {dim = 1 : i64, input_dtype = f32} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %log_softmax_bwd : tensor<4x8xf32>
}
