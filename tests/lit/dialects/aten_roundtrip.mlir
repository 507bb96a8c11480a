// RUN: tilefx-opt %s | filecheck %s
// RUN: tilefx-opt %s | tilefx-opt | filecheck %s
// RUN: tilefx-opt %s --print-op-generic | tilefx-opt | filecheck %s

// Every op of the aten dialect in its custom syntax. The input is hand-written;
// the CHECK lines are what tilefx-opt prints (floats normalised, attributes
// before properties). tests/dialects/test_roundtrip.py fails when an op is missing here.

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
// CHECK-NEXT:    %bshr = aten.bitwise_right_shift.Tensor %i, %j : tensor<4x8xi64>, tensor<4x8xi64> -> tensor<4x8xi64>
// CHECK-NEXT:    %bshl = aten.bitwise_left_shift.Tensor %i, %j : tensor<4x8xi64>, tensor<4x8xi64> -> tensor<4x8xi64>
// CHECK-NEXT:    %bshr_s = aten.bitwise_right_shift.Tensor_Scalar %i {other = 3 : i64} : tensor<4x8xi64> -> tensor<4x8xi64>
// CHECK-NEXT:    %bshl_s = aten.bitwise_left_shift.Tensor_Scalar %i {other = 2 : i64} : tensor<4x8xi64> -> tensor<4x8xi64>
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
  %bshr = aten.bitwise_right_shift.Tensor %i, %j : tensor<4x8xi64>, tensor<4x8xi64> -> tensor<4x8xi64>
  %bshl = aten.bitwise_left_shift.Tensor %i, %j : tensor<4x8xi64>, tensor<4x8xi64> -> tensor<4x8xi64>
  %bshr_s = aten.bitwise_right_shift.Tensor_Scalar %i {other = 3 : i64} : tensor<4x8xi64> -> tensor<4x8xi64>
  %bshl_s = aten.bitwise_left_shift.Tensor_Scalar %i {other = 2 : i64} : tensor<4x8xi64> -> tensor<4x8xi64>
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
// CHECK-NEXT:    %norm = aten.linalg_vector_norm %x {ord = 2 : i64, dim = array<i64: 1>, keepdim = false} : tensor<4x8xf32> -> tensor<4xf32>
// CHECK-NEXT:    %all = aten.any %m : tensor<4x8xi1> -> tensor<i1>
// CHECK-NEXT:    aten._assert_async.msg %all {assert_msg = "every mask element is set"} : tensor<i1> -> ()
// CHECK-NEXT:    %x3 = aten.view %x {size = array<i64: 1, 4, 8>} : tensor<4x8xf32> -> tensor<1x4x8xf32>
// CHECK-NEXT:    %amp, %amp_1 = aten.adaptive_max_pool2d %x3 {output_size = array<i64: 2, 3>} : tensor<1x4x8xf32> -> tensor<1x2x3xf32>, tensor<1x2x3xi64>
// CHECK-NEXT:    %amp_bwd = aten.adaptive_max_pool2d_backward %amp, %x3, %amp_1 : tensor<1x2x3xf32>, tensor<1x4x8xf32>, tensor<1x2x3xi64> -> tensor<1x4x8xf32>
// CHECK-NEXT:    %x4 = aten.view %x {size = array<i64: 1, 2, 2, 8>} : tensor<4x8xf32> -> tensor<1x2x2x8xf32>
// CHECK-NEXT:    %amp3, %amp3_1 = aten.adaptive_max_pool3d %x4 {output_size = array<i64: 1, 2, 3>} : tensor<1x2x2x8xf32> -> tensor<1x1x2x3xf32>, tensor<1x1x2x3xi64>
// CHECK-NEXT:    %amp3_bwd = aten.adaptive_max_pool3d_backward %amp3, %x4, %amp3_1 : tensor<1x1x2x3xf32>, tensor<1x2x2x8xf32>, tensor<1x1x2x3xi64> -> tensor<1x2x2x8xf32>
// CHECK-NEXT:    %tri = aten._trilinear %x, %x, %x {expand1 = array<i64>, expand2 = array<i64>, expand3 = array<i64>, sumdim = array<i64: 1>, unroll_dim = 1 : i64} : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4xf32>
// CHECK-NEXT:    %wn, %wn_1 = aten._weight_norm_interface_backward %x, %x, %amax, %amax {dim = 0 : i64} : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32> -> tensor<4x8xf32>, tensor<4x1xf32>
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
  %norm = aten.linalg_vector_norm %x {ord = 2 : i64, dim = array<i64: 1>, keepdim = false} : tensor<4x8xf32> -> tensor<4xf32>
  %all = aten.any %m : tensor<4x8xi1> -> tensor<i1>
  aten._assert_async.msg %all {assert_msg = "every mask element is set"} : tensor<i1> -> ()
  %x3 = aten.view %x {size = array<i64: 1, 4, 8>} : tensor<4x8xf32> -> tensor<1x4x8xf32>
  %amp:2 = aten.adaptive_max_pool2d %x3 {output_size = array<i64: 2, 3>} : tensor<1x4x8xf32> -> tensor<1x2x3xf32>, tensor<1x2x3xi64>
  %amp_bwd = aten.adaptive_max_pool2d_backward %amp#0, %x3, %amp#1 : tensor<1x2x3xf32>, tensor<1x4x8xf32>, tensor<1x2x3xi64> -> tensor<1x4x8xf32>
  %x4 = aten.view %x {size = array<i64: 1, 2, 2, 8>} : tensor<4x8xf32> -> tensor<1x2x2x8xf32>
  %amp3:2 = aten.adaptive_max_pool3d %x4 {output_size = array<i64: 1, 2, 3>} : tensor<1x2x2x8xf32> -> tensor<1x1x2x3xf32>, tensor<1x1x2x3xi64>
  %amp3_bwd = aten.adaptive_max_pool3d_backward %amp3#0, %x4, %amp3#1 : tensor<1x1x2x3xf32>, tensor<1x2x2x8xf32>, tensor<1x1x2x3xi64> -> tensor<1x2x2x8xf32>
  %tri = aten._trilinear %x, %x, %x {expand1 = array<i64>, expand2 = array<i64>, expand3 = array<i64>, sumdim = array<i64: 1>, unroll_dim = 1 : i64} : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4xf32>
  %wn:2 = aten._weight_norm_interface_backward %x, %x, %amax, %amax {dim = 0 : i64} : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32> -> tensor<4x8xf32>, tensor<4x1xf32>
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
func.func @activation_backward(%g: tensor<4x8xf32>, %x: tensor<4x8xf32>, %out: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %gelu_bwd = aten.gelu_backward %g, %x {approximate = "none"} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %sigmoid_bwd = aten.sigmoid_backward %g, %out : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %tanh_bwd = aten.tanh_backward %g, %out : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %threshold_bwd = aten.threshold_backward %g, %x {threshold = 0 : i64} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %softmax_bwd = aten._softmax_backward_data %g, %out {dim = 1 : i64, input_dtype = f32} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %log_softmax_bwd = aten._log_softmax_backward_data %g, %out {dim = 1 : i64, input_dtype = f32} : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %log_softmax_bwd : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @nll_loss(
// CHECK-SAME:  %logp: tensor<4x8xf32>, %t: tensor<4xi64>, %w: tensor<8xf32>, %g: tensor<f32>) -> tensor<4x8xf32> {
// CHECK-NEXT:    %loss, %total = aten.nll_loss_forward %logp, %t weight %w {reduction = 1 : i64, ignore_index = -100 : i64} : tensor<4x8xf32>, tensor<4xi64> weight tensor<8xf32> -> tensor<f32>, tensor<f32>
// CHECK-NEXT:    %grad = aten.nll_loss_backward %g, %logp, %t, %total weight %w {reduction = 1 : i64, ignore_index = -100 : i64} : tensor<f32>, tensor<4x8xf32>, tensor<4xi64>, tensor<f32> weight tensor<8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    func.return %grad : tensor<4x8xf32>
// CHECK-NEXT:    }
func.func @nll_loss(%logp: tensor<4x8xf32>, %t: tensor<4xi64>, %w: tensor<8xf32>, %g: tensor<f32>) -> tensor<4x8xf32> {
  %loss, %total = aten.nll_loss_forward %logp, %t weight %w {reduction = 1 : i64, ignore_index = -100 : i64} : tensor<4x8xf32>, tensor<4xi64> weight tensor<8xf32> -> tensor<f32>, tensor<f32>
  %grad = aten.nll_loss_backward %g, %logp, %t, %total weight %w {reduction = 1 : i64, ignore_index = -100 : i64} : tensor<f32>, tensor<4x8xf32>, tensor<4xi64>, tensor<f32> weight tensor<8xf32> -> tensor<4x8xf32>
  func.return %grad : tensor<4x8xf32>
}

// The ops beyond the first hundred (the rest of the core-ATen set, random ops, the
// backward and helper ops traced graphs keep); generated from the kernel test cases.
// CHECK-LABEL: func.func @model_families(
// CHECK-SAME:  %x: tensor<4x8xf32>, %g: tensor<1x8xf32>, %n: tensor<1x8xf32>) -> tensor<4x1xf32> {
// CHECK-NEXT:    %norm = aten.linalg_vector_norm %x {ord = 2 : i64, dim = array<i64: 1>, keepdim = true} : tensor<4x8xf32> -> tensor<4x1xf32>
// CHECK-NEXT:    %norm_all = aten.linalg_vector_norm %x {ord = 1.500000e+00 : f64, keepdim = false} : tensor<4x8xf32> -> tensor<f32>
// CHECK-NEXT:    %gv, %gg = aten._weight_norm_interface_backward %x, %x, %g, %n {dim = 1 : i64} : tensor<4x8xf32>, tensor<4x8xf32>, tensor<1x8xf32>, tensor<1x8xf32> -> tensor<4x8xf32>, tensor<1x8xf32>
// CHECK-NEXT:    %hist = aten.histc %x {bins = 4 : i64, min = 0 : i64, max = 3 : i64} : tensor<4x8xf32> -> tensor<4xf32>
// CHECK-NEXT:    func.return %norm : tensor<4x1xf32>
func.func @model_families(%x: tensor<4x8xf32>, %g: tensor<1x8xf32>, %n: tensor<1x8xf32>) -> tensor<4x1xf32> {
  %norm = aten.linalg_vector_norm %x {ord = 2 : i64, dim = array<i64: 1>, keepdim = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  %norm_all = aten.linalg_vector_norm %x {ord = 1.5 : f64, keepdim = false} : tensor<4x8xf32> -> tensor<f32>
  %gv, %gg = aten._weight_norm_interface_backward %x, %x, %g, %n {dim = 1 : i64} : tensor<4x8xf32>, tensor<4x8xf32>, tensor<1x8xf32>, tensor<1x8xf32> -> tensor<4x8xf32>, tensor<1x8xf32>
  %hist = aten.histc %x {bins = 4 : i64, min = 0 : i64, max = 3 : i64} : tensor<4x8xf32> -> tensor<4xf32>
  func.return %norm : tensor<4x1xf32>
}

// CHECK-LABEL:   func.func @core_ops(
// CHECK-SAME:  %acos_self: tensor<3x4xf32>, %acosh_self: tensor<3x4xf32>, %asin_self: tensor<3x4xf32>, %asinh_self: tensor<3x4xf32>, %atan_self: tensor<3x4xf32>, %atanh_self: tensor<3x4xf32>, %atan2_self: tensor<3x4xf32>, %atan2_other: tensor<4xf32>, %atan2_out_self: tensor<3x4xf32>, %atan2_out_other: tensor<3x4xf32>, %atan2_out_out: tensor<3x4xf32>, %ceil_self: tensor<9xf32>, %cosh_self: tensor<3x4xf32>, %expm1_self: tensor<3x4xf32>, %floor_self: tensor<9xf32>, %log10_self: tensor<3x4xf32>, %log1p_self: tensor<3x4xf32>, %log2_self: tensor<3x4xf32>, %round_self: tensor<9xf32>, %sign_self: tensor<4xf32>, %sinh_self: tensor<3x4xf32>, %tan_self: tensor<3x4xf32>, %trunc_self: tensor<9xf32>, %isnan_self: tensor<5xf32>, %isinf_self: tensor<5xf32>, %hardtanh_self: tensor<3x4xf32>, %hardtanh_backward_grad_output: tensor<6xf32>, %hardtanh_backward_self: tensor<6xf32>, %elu_self: tensor<3x4xf32>, %elu_backward_grad_output: tensor<3x4xf32>, %elu_backward_self_or_result: tensor<3x4xf32>, %bitwise_and_Scalar_self: tensor<5xi64>, %bitwise_or_Scalar_self: tensor<5xi64>, %bitwise_xor_Tensor_self: tensor<5xi64>, %bitwise_xor_Tensor_other: tensor<5xi64>, %bitwise_xor_Scalar_self: tensor<5xi64>, %logical_or_self: tensor<5xi1>, %logical_or_other: tensor<5xi1>, %logical_xor_self: tensor<5xi1>, %logical_xor_other: tensor<5xi1>, %div_Tensor_mode_self: tensor<3x4xf32>, %div_Tensor_mode_other: tensor<3x4xf32>, %div_Scalar_mode_self: tensor<3x4xf32>, %fmod_Tensor_self: tensor<3x4xf32>, %fmod_Tensor_other: tensor<3x4xf32>, %fmod_Scalar_self: tensor<3x4xf32>, %remainder_Tensor_self: tensor<3x4xf32>, %remainder_Tensor_other: tensor<3x4xf32>, %remainder_Scalar_self: tensor<3x4xf32>, %clamp_Tensor_self: tensor<3x4xf32>, %clamp_Tensor_min: tensor<4xf32>, %clamp_Tensor_max: tensor<3x1xf32>, %pow_Scalar_exponent: tensor<3x4xf32>, %masked_fill_Scalar_self: tensor<3x4xf32>, %masked_fill_Scalar_mask: tensor<3x4xi1>, %fill_Scalar_self: tensor<3x4xf32>, %lift_fresh_copy_self: tensor<3x4xf32>, %argmin_self: tensor<3x4x5xf32>, %prod_self: tensor<3x4xf32>, %prod_dim_int_self: tensor<3x4x5xf32>, %var_dim_self: tensor<3x4x5xf32>, %var_correction_self: tensor<3x4x5xf32>, %any_self: tensor<3x4xi1>, %any_dims_self: tensor<3x4x5xi1>, %cumsum_self: tensor<3x4xf32>, %max_dim_self: tensor<3x4x5xf32>, %min_dim_self: tensor<3x4x5xf32>, %sort_self: tensor<4x6xf32>, %topk_self: tensor<4x6xf32>, %scatter_reduce_two_self: tensor<2x3xf32>, %scatter_reduce_two_index: tensor<2x4xi64>, %scatter_reduce_two_src: tensor<2x4xf32>, %index_select_self: tensor<5x3xf32>, %index_select_index: tensor<3xi64>, %masked_scatter_self: tensor<3x4xf32>, %masked_scatter_mask: tensor<3x4xi1>, %masked_scatter_source: tensor<12xf32>, %nonzero_self: tensor<3x4xi1>, %local_scalar_dense_self: tensor<f32>, %embedding_bag_weight: tensor<10x3xf32>, %embedding_bag_indices: tensor<8xi64>, %embedding_bag_offsets: tensor<4xi64>, %sym_size_int_self: tensor<3x4xf32>, %sym_stride_int_self: tensor<3x4xf32>, %sym_storage_offset_self: tensor<3x4xf32>, %sym_numel_self: tensor<3x4xf32>, %sym_is_contiguous_self: tensor<3x4xf32>, %resize_self: tensor<3x4xf32>, %as_strided_self: tensor<4x5xf32>, %diagonal_self: tensor<4x5xf32>, %select_scatter_self: tensor<3x4xf32>, %select_scatter_src: tensor<4xf32>, %squeeze_dim_self: tensor<3x1x4xf32>, %flip_self: tensor<3x4x2xf32>, %repeat_self: tensor<2x3xf32>, %reflection_pad1d_self: tensor<2x3x4xf32>, %reflection_pad2d_self: tensor<2x3x4x4xf32>, %reflection_pad3d_self: tensor<2x3x4x4x4xf32>, %replication_pad2d_self: tensor<2x3x4x4xf32>, %replication_pad3d_self: tensor<2x3x4x4x4xf32>, %col2im_self: tensor<2x12x12xf32>, %upsample_bilinear2d_vec_input: tensor<2x3x4x5xf32>, %upsample_nearest2d_vec_input: tensor<2x3x4x5xf32>, %grid_sampler_2d_input: tensor<2x3x5x6xf32>, %grid_sampler_2d_grid: tensor<2x3x4x2xf32>, %adaptive_avg_pool2d_self: tensor<2x3x7x5xf32>, %adaptive_avg_pool2d_backward_grad_output: tensor<2x3x3x2xf32>, %adaptive_avg_pool2d_backward_self: tensor<2x3x7x5xf32>, %adaptive_avg_pool3d_self: tensor<2x3x5x4x6xf32>, %adaptive_avg_pool1d_self: tensor<2x3x7xf32>, %avg_pool1d_self: tensor<2x3x7xf32>, %avg_pool3d_self: tensor<2x2x5x6x4xf32>, %max_pool3d_with_indices_self: tensor<2x2x5x6x4xf32>, %native_group_norm_input: tensor<2x6x4x3xf32>, %native_group_norm_weight: tensor<6xf32>, %native_group_norm_bias: tensor<6xf32>, %native_group_norm_backward_grad_out: tensor<2x6x4x3xf32>, %native_group_norm_backward_input: tensor<2x6x4x3xf32>, %native_group_norm_backward_mean: tensor<2x3xf32>, %native_group_norm_backward_rstd: tensor<2x3xf32>, %native_group_norm_backward_weight: tensor<6xf32>, %native_batch_norm_legit_input: tensor<4x3x5xf32>, %native_batch_norm_legit_weight: tensor<3xf32>, %native_batch_norm_legit_bias: tensor<3xf32>, %native_batch_norm_legit_running_mean: tensor<3xf32>, %native_batch_norm_legit_running_var: tensor<3xf32>, %native_batch_norm_legit_no_stats_input: tensor<4x3x5xf32>, %native_batch_norm_legit_no_stats_weight: tensor<3xf32>, %pdist_forward_self: tensor<5x3xf32>, %cdist_forward_x1: tensor<2x4x3xf32>, %cdist_forward_x2: tensor<2x5x3xf32>, %fft_r2c_self: tensor<4x6xf32>, %fft_c2r_self: tensor<4x4xcomplex<f32>>, %rand_like_self: tensor<2x3xf32>, %randn_like_self: tensor<2x3xf32>, %randint_like_self: tensor<2x3xi64>, %normal_functional_self: tensor<2x3xf32>, %normal_Tensor_float_mean: tensor<2x3xf32>, %normal_float_Tensor_std: tensor<2x3xf32>, %normal_Tensor_Tensor_mean: tensor<2x3xf32>, %normal_Tensor_Tensor_std: tensor<2x3xf32>, %uniform_self: tensor<2x3xf32>, %bernoulli_p_self: tensor<2x3xf32>, %bernoulli_Tensor_self: tensor<2x3xf32>, %bernoulli_Tensor_p: tensor<2x3xf32>, %exponential_self: tensor<2x3xf32>, %cumprod_self: tensor<3x4xf32>, %masked_scatter_backward_grad_output: tensor<3x4xf32>, %masked_scatter_backward_mask: tensor<3x4xi1>, %diagonal_scatter_self: tensor<4x5xf32>, %diagonal_scatter_src: tensor<4xf32>, %as_strided_scatter_self: tensor<4x5xf32>, %as_strided_scatter_src: tensor<3x3xf32>, %unfold_self: tensor<3x7xf32>, %new_empty_strided_self: tensor<2xf32>, %pdist_backward_grad: tensor<10xf32>, %pdist_backward_self: tensor<5x3xf32>, %pdist_backward_pdist: tensor<10xf32>, %cdist_backward_grad: tensor<2x4x5xf32>, %cdist_backward_x1: tensor<2x4x3xf32>, %cdist_backward_x2: tensor<2x5x3xf32>, %cdist_backward_cdist: tensor<2x4x5xf32>, %embedding_bag_backward_grad: tensor<4x3xf32>, %embedding_bag_backward_indices: tensor<8xi64>, %embedding_bag_backward_offsets: tensor<4xi64>, %embedding_bag_backward_offset2bag: tensor<0xi64>, %embedding_bag_backward_bag_size: tensor<4xi64>, %embedding_bag_backward_maximum_indices: tensor<4xi64>, %replication_pad2d_backward_grad_output: tensor<2x3x7x5xf32>, %replication_pad2d_backward_self: tensor<2x3x4x4xf32>, %replication_pad3d_backward_grad_output: tensor<2x3x6x5x5xf32>, %replication_pad3d_backward_self: tensor<2x3x4x4x4xf32>, %grid_sampler_2d_backward_grad_output: tensor<2x3x3x4xf32>, %grid_sampler_2d_backward_input: tensor<2x3x5x6xf32>, %grid_sampler_2d_backward_grid: tensor<2x3x4x2xf32>, %avg_pool3d_backward_grad_output: tensor<2x2x2x3x2xf32>, %avg_pool3d_backward_self: tensor<2x2x5x6x4xf32>, %max_pool3d_with_indices_backward_grad_output: tensor<2x2x2x3x2xf32>, %max_pool3d_with_indices_backward_self: tensor<2x2x5x6x4xf32>, %max_pool3d_with_indices_backward_indices: tensor<2x2x2x3x2xi64>, %adaptive_avg_pool3d_backward_grad_output: tensor<2x3x2x3x2xf32>, %adaptive_avg_pool3d_backward_self: tensor<2x3x5x4x6xf32>) {
// CHECK-NEXT:      %acos = aten.acos %acos_self : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %acosh = aten.acosh %acosh_self : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %asin = aten.asin %asin_self : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %asinh = aten.asinh %asinh_self : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %atan = aten.atan %atan_self : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %atanh = aten.atanh %atanh_self : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %atan2 = aten.atan2 %atan2_self, %atan2_other : tensor<3x4xf32>, tensor<4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %atan2_out = aten.atan2.out %atan2_out_self, %atan2_out_other, %atan2_out_out : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %ceil = aten.ceil %ceil_self : tensor<9xf32> -> tensor<9xf32>
// CHECK-NEXT:      %cosh = aten.cosh %cosh_self : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %expm1 = aten.expm1 %expm1_self : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %floor = aten.floor %floor_self : tensor<9xf32> -> tensor<9xf32>
// CHECK-NEXT:      %log10 = aten.log10 %log10_self : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %log1p = aten.log1p %log1p_self : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %log2 = aten.log2 %log2_self : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %round = aten.round %round_self : tensor<9xf32> -> tensor<9xf32>
// CHECK-NEXT:      %sign = aten.sign %sign_self : tensor<4xf32> -> tensor<4xf32>
// CHECK-NEXT:      %sinh = aten.sinh %sinh_self : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %tan = aten.tan %tan_self : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %trunc = aten.trunc %trunc_self : tensor<9xf32> -> tensor<9xf32>
// CHECK-NEXT:      %isnan = aten.isnan %isnan_self : tensor<5xf32> -> tensor<5xi1>
// CHECK-NEXT:      %isinf = aten.isinf %isinf_self : tensor<5xf32> -> tensor<5xi1>
// CHECK-NEXT:      %hardtanh = aten.hardtanh %hardtanh_self : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %hardtanh_backward = aten.hardtanh_backward %hardtanh_backward_grad_output, %hardtanh_backward_self {min_val = 0.000000e+00 : f64, max_val = 6.000000e+00 : f64} : tensor<6xf32>, tensor<6xf32> -> tensor<6xf32>
// CHECK-NEXT:      %elu = aten.elu %elu_self : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %elu_backward = aten.elu_backward %elu_backward_grad_output, %elu_backward_self_or_result {alpha = 1.000000e+00 : f64, scale = 1.000000e+00 : f64, input_scale = 1.000000e+00 : f64, is_result = false} : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %bitwise_and_Scalar = aten.bitwise_and.Scalar %bitwise_and_Scalar_self {other = 3 : i64} : tensor<5xi64> -> tensor<5xi64>
// CHECK-NEXT:      %bitwise_or_Scalar = aten.bitwise_or.Scalar %bitwise_or_Scalar_self {other = 4 : i64} : tensor<5xi64> -> tensor<5xi64>
// CHECK-NEXT:      %bitwise_xor_Tensor = aten.bitwise_xor.Tensor %bitwise_xor_Tensor_self, %bitwise_xor_Tensor_other : tensor<5xi64>, tensor<5xi64> -> tensor<5xi64>
// CHECK-NEXT:      %bitwise_xor_Scalar = aten.bitwise_xor.Scalar %bitwise_xor_Scalar_self {other = 6 : i64} : tensor<5xi64> -> tensor<5xi64>
// CHECK-NEXT:      %logical_or = aten.logical_or %logical_or_self, %logical_or_other : tensor<5xi1>, tensor<5xi1> -> tensor<5xi1>
// CHECK-NEXT:      %logical_xor = aten.logical_xor %logical_xor_self, %logical_xor_other : tensor<5xi1>, tensor<5xi1> -> tensor<5xi1>
// CHECK-NEXT:      %div_Tensor_mode = aten.div.Tensor_mode %div_Tensor_mode_self, %div_Tensor_mode_other {rounding_mode = "trunc"} : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %div_Scalar_mode = aten.div.Scalar_mode %div_Scalar_mode_self {other = -1.500000e+00 : f64, rounding_mode = "trunc"} : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %fmod_Tensor = aten.fmod.Tensor %fmod_Tensor_self, %fmod_Tensor_other : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %fmod_Scalar = aten.fmod.Scalar %fmod_Scalar_self {other = 1.500000e+00 : f64} : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %remainder_Tensor = aten.remainder.Tensor %remainder_Tensor_self, %remainder_Tensor_other : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %remainder_Scalar = aten.remainder.Scalar %remainder_Scalar_self {other = -1.500000e+00 : f64} : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %clamp_Tensor = aten.clamp.Tensor %clamp_Tensor_self min %clamp_Tensor_min max %clamp_Tensor_max : tensor<3x4xf32> min tensor<4xf32> max tensor<3x1xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %pow_Scalar = aten.pow.Scalar %pow_Scalar_exponent {self = 2.000000e+00 : f64} : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %masked_fill_Scalar = aten.masked_fill.Scalar %masked_fill_Scalar_self, %masked_fill_Scalar_mask {value = -1.000000e+09 : f64} : tensor<3x4xf32>, tensor<3x4xi1> -> tensor<3x4xf32>
// CHECK-NEXT:      %fill_Scalar = aten.fill.Scalar %fill_Scalar_self {value = 2.500000e+00 : f64} : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %lift_fresh_copy = aten.lift_fresh_copy %lift_fresh_copy_self : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %argmin = aten.argmin %argmin_self : tensor<3x4x5xf32> -> tensor<i64>
// CHECK-NEXT:      %prod = aten.prod %prod_self : tensor<3x4xf32> -> tensor<f32>
// CHECK-NEXT:      %prod_dim_int = aten.prod.dim_int %prod_dim_int_self {dim = 1 : i64} : tensor<3x4x5xf32> -> tensor<3x5xf32>
// CHECK-NEXT:      %var_dim = aten.var.dim %var_dim_self {dim = array<i64: 1>} : tensor<3x4x5xf32> -> tensor<3x5xf32>
// CHECK-NEXT:      %var_correction = aten.var.correction %var_correction_self : tensor<3x4x5xf32> -> tensor<f32>
// CHECK-NEXT:      %any = aten.any %any_self : tensor<3x4xi1> -> tensor<i1>
// CHECK-NEXT:      %any_dims = aten.any.dims %any_dims_self {dim = array<i64: 0, 2>} : tensor<3x4x5xi1> -> tensor<4xi1>
// CHECK-NEXT:      %cumsum = aten.cumsum %cumsum_self {dim = 1 : i64} : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %max_dim, %max_dim_1 = aten.max.dim %max_dim_self {dim = 1 : i64} : tensor<3x4x5xf32> -> tensor<3x5xf32>, tensor<3x5xi64>
// CHECK-NEXT:      %min_dim, %min_dim_1 = aten.min.dim %min_dim_self {dim = 0 : i64} : tensor<3x4x5xf32> -> tensor<4x5xf32>, tensor<4x5xi64>
// CHECK-NEXT:      %sort, %sort_1 = aten.sort %sort_self : tensor<4x6xf32> -> tensor<4x6xf32>, tensor<4x6xi64>
// CHECK-NEXT:      %sort_stable, %sort_stable_1 = aten.sort.stable %sort_self {stable = true, dim = 1 : i64, descending = true} : tensor<4x6xf32> -> tensor<4x6xf32>, tensor<4x6xi64>
// CHECK-NEXT:      %topk, %topk_1 = aten.topk %topk_self {k = 3 : i64} : tensor<4x6xf32> -> tensor<4x3xf32>, tensor<4x3xi64>
// CHECK-NEXT:      %scatter_reduce_two = aten.scatter_reduce.two %scatter_reduce_two_self, %scatter_reduce_two_index, %scatter_reduce_two_src {dim = 1 : i64, reduce = "sum"} : tensor<2x3xf32>, tensor<2x4xi64>, tensor<2x4xf32> -> tensor<2x3xf32>
// CHECK-NEXT:      %index_select = aten.index_select %index_select_self, %index_select_index {dim = 0 : i64} : tensor<5x3xf32>, tensor<3xi64> -> tensor<3x3xf32>
// CHECK-NEXT:      %masked_scatter = aten.masked_scatter %masked_scatter_self, %masked_scatter_mask, %masked_scatter_source : tensor<3x4xf32>, tensor<3x4xi1>, tensor<12xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %nonzero = aten.nonzero %nonzero_self : tensor<3x4xi1> -> tensor<6x2xi64>
// CHECK-NEXT:      %local_scalar_dense = aten._local_scalar_dense %local_scalar_dense_self : tensor<f32> -> tensor<f32>
// CHECK-NEXT:      %embedding_bag, %embedding_bag_1, %embedding_bag_2, %embedding_bag_3 = aten._embedding_bag %embedding_bag_weight, %embedding_bag_indices, %embedding_bag_offsets {scale_grad_by_freq = false, mode = 0 : i64} : tensor<10x3xf32>, tensor<8xi64>, tensor<4xi64> -> tensor<4x3xf32>, tensor<0xi64>, tensor<4xi64>, tensor<0xi64>
// CHECK-NEXT:      %empty_memory_format = aten.empty.memory_format {size = array<i64: 0, 3>} : tensor<0x3xf32>
// CHECK-NEXT:      %empty_strided = aten.empty_strided {size = array<i64: 0>, stride = array<i64: 1>, dtype = i64} : tensor<0xi64>
// CHECK-NEXT:      %empty_permuted = aten.empty_permuted {size = array<i64: 0, 2>, physical_layout = array<i64: 1, 0>} : tensor<0x2xf32>
// CHECK-NEXT:      %sym_size_int = aten.sym_size.int %sym_size_int_self {dim = 1 : i64} : tensor<3x4xf32> -> tensor<i64>
// CHECK-NEXT:      %sym_stride_int = aten.sym_stride.int %sym_stride_int_self {dim = 0 : i64} : tensor<3x4xf32> -> tensor<i64>
// CHECK-NEXT:      %sym_storage_offset = aten.sym_storage_offset %sym_storage_offset_self : tensor<3x4xf32> -> tensor<i64>
// CHECK-NEXT:      %sym_numel = aten.sym_numel %sym_numel_self : tensor<3x4xf32> -> tensor<i64>
// CHECK-NEXT:      %sym_is_contiguous = aten.sym_is_contiguous %sym_is_contiguous_self : tensor<3x4xf32> -> tensor<i1>
// CHECK-NEXT:      %resize = aten.resize_ %resize_self {size = array<i64: 2, 5>} : tensor<3x4xf32> -> tensor<2x5xf32>
// CHECK-NEXT:      %as_strided = aten.as_strided %as_strided_self {size = array<i64: 3, 3>, stride = array<i64: 5, 1>} : tensor<4x5xf32> -> tensor<3x3xf32>
// CHECK-NEXT:      %diagonal = aten.diagonal %diagonal_self : tensor<4x5xf32> -> tensor<4xf32>
// CHECK-NEXT:      %select_scatter = aten.select_scatter %select_scatter_self, %select_scatter_src {dim = 0 : i64, index = 1 : i64} : tensor<3x4xf32>, tensor<4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %squeeze_dim = aten.squeeze.dim %squeeze_dim_self {dim = 1 : i64} : tensor<3x1x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %flip = aten.flip %flip_self {dims = array<i64: 0, -1>} : tensor<3x4x2xf32> -> tensor<3x4x2xf32>
// CHECK-NEXT:      %repeat = aten.repeat %repeat_self {repeats = array<i64: 2, 1, 2>} : tensor<2x3xf32> -> tensor<2x2x6xf32>
// CHECK-NEXT:      %reflection_pad1d = aten.reflection_pad1d %reflection_pad1d_self {padding = array<i64: 2, 1>} : tensor<2x3x4xf32> -> tensor<2x3x7xf32>
// CHECK-NEXT:      %reflection_pad2d = aten.reflection_pad2d %reflection_pad2d_self {padding = array<i64: 1, 2, 2, 0>} : tensor<2x3x4x4xf32> -> tensor<2x3x6x7xf32>
// CHECK-NEXT:      %reflection_pad3d = aten.reflection_pad3d %reflection_pad3d_self {padding = array<i64: 1, 1, 0, 2, 1, 0>} : tensor<2x3x4x4x4xf32> -> tensor<2x3x5x6x6xf32>
// CHECK-NEXT:      %replication_pad2d = aten.replication_pad2d %replication_pad2d_self {padding = array<i64: 1, 2, 2, 0>} : tensor<2x3x4x4xf32> -> tensor<2x3x6x7xf32>
// CHECK-NEXT:      %replication_pad3d = aten.replication_pad3d %replication_pad3d_self {padding = array<i64: 1, 1, 0, 2, 1, 0>} : tensor<2x3x4x4x4xf32> -> tensor<2x3x5x6x6xf32>
// CHECK-NEXT:      %col2im = aten.col2im %col2im_self {output_size = array<i64: 4, 5>, kernel_size = array<i64: 2, 2>, dilation = array<i64: 1, 1>, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : tensor<2x12x12xf32> -> tensor<2x3x4x5xf32>
// CHECK-NEXT:      %upsample_bilinear2d_vec = aten.upsample_bilinear2d.vec %upsample_bilinear2d_vec_input {output_size = array<i64: 8, 7>, align_corners = false} : tensor<2x3x4x5xf32> -> tensor<2x3x8x7xf32>
// CHECK-NEXT:      %upsample_nearest2d_vec = aten.upsample_nearest2d.vec %upsample_nearest2d_vec_input {output_size = array<i64: 8, 7>} : tensor<2x3x4x5xf32> -> tensor<2x3x8x7xf32>
// CHECK-NEXT:      %grid_sampler_2d = aten.grid_sampler_2d %grid_sampler_2d_input, %grid_sampler_2d_grid {interpolation_mode = 0 : i64, padding_mode = 0 : i64, align_corners = false} : tensor<2x3x5x6xf32>, tensor<2x3x4x2xf32> -> tensor<2x3x3x4xf32>
// CHECK-NEXT:      %adaptive_avg_pool2d = aten._adaptive_avg_pool2d %adaptive_avg_pool2d_self {output_size = array<i64: 3, 2>} : tensor<2x3x7x5xf32> -> tensor<2x3x3x2xf32>
// CHECK-NEXT:      %adaptive_avg_pool2d_backward = aten._adaptive_avg_pool2d_backward %adaptive_avg_pool2d_backward_grad_output, %adaptive_avg_pool2d_backward_self : tensor<2x3x3x2xf32>, tensor<2x3x7x5xf32> -> tensor<2x3x7x5xf32>
// CHECK-NEXT:      %adaptive_avg_pool3d = aten._adaptive_avg_pool3d %adaptive_avg_pool3d_self {output_size = array<i64: 2, 3, 2>} : tensor<2x3x5x4x6xf32> -> tensor<2x3x2x3x2xf32>
// CHECK-NEXT:      %adaptive_avg_pool1d = aten.adaptive_avg_pool1d %adaptive_avg_pool1d_self {output_size = array<i64: 3>} : tensor<2x3x7xf32> -> tensor<2x3x3xf32>
// CHECK-NEXT:      %avg_pool1d = aten.avg_pool1d %avg_pool1d_self {kernel_size = array<i64: 3>} : tensor<2x3x7xf32> -> tensor<2x3x2xf32>
// CHECK-NEXT:      %avg_pool3d = aten.avg_pool3d %avg_pool3d_self {kernel_size = array<i64: 2, 2, 2>} : tensor<2x2x5x6x4xf32> -> tensor<2x2x2x3x2xf32>
// CHECK-NEXT:      %max_pool3d_with_indices, %max_pool3d_with_indices_1 = aten.max_pool3d_with_indices %max_pool3d_with_indices_self {kernel_size = array<i64: 2, 2, 2>} : tensor<2x2x5x6x4xf32> -> tensor<2x2x2x3x2xf32>, tensor<2x2x2x3x2xi64>
// CHECK-NEXT:      %native_group_norm, %native_group_norm_1, %native_group_norm_2 = aten.native_group_norm %native_group_norm_input weight %native_group_norm_weight bias %native_group_norm_bias {N = 2 : i64, C = 6 : i64, HxW = 12 : i64, group = 3 : i64, eps = 1.000000e-05 : f64} : tensor<2x6x4x3xf32> weight tensor<6xf32> bias tensor<6xf32> -> tensor<2x6x4x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
// CHECK-NEXT:      %native_group_norm_backward, %native_group_norm_backward_1, %native_group_norm_backward_2 = aten.native_group_norm_backward %native_group_norm_backward_grad_out, %native_group_norm_backward_input, %native_group_norm_backward_mean, %native_group_norm_backward_rstd weight %native_group_norm_backward_weight {N = 2 : i64, C = 6 : i64, HxW = 12 : i64, group = 3 : i64, output_mask = array<i1: true, true, true>} : tensor<2x6x4x3xf32>, tensor<2x6x4x3xf32>, tensor<2x3xf32>, tensor<2x3xf32> weight tensor<6xf32> -> tensor<2x6x4x3xf32>, tensor<6xf32>, tensor<6xf32>
// CHECK-NEXT:      %native_batch_norm_legit, %native_batch_norm_legit_1, %native_batch_norm_legit_2 = aten._native_batch_norm_legit %native_batch_norm_legit_input, %native_batch_norm_legit_running_mean, %native_batch_norm_legit_running_var weight %native_batch_norm_legit_weight bias %native_batch_norm_legit_bias {training = true, momentum = 1.000000e-01 : f64, eps = 1.000000e-05 : f64} : tensor<4x3x5xf32>, tensor<3xf32>, tensor<3xf32> weight tensor<3xf32> bias tensor<3xf32> -> tensor<4x3x5xf32>, tensor<3xf32>, tensor<3xf32>
// CHECK-NEXT:      %native_batch_norm_legit_no_stats, %native_batch_norm_legit_no_stats_1, %native_batch_norm_legit_no_stats_2 = aten._native_batch_norm_legit.no_stats %native_batch_norm_legit_no_stats_input weight %native_batch_norm_legit_no_stats_weight {training = true, momentum = 1.000000e-01 : f64, eps = 1.000000e-05 : f64} : tensor<4x3x5xf32> weight tensor<3xf32> -> tensor<4x3x5xf32>, tensor<3xf32>, tensor<3xf32>
// CHECK-NEXT:      %pdist_forward = aten._pdist_forward %pdist_forward_self : tensor<5x3xf32> -> tensor<10xf32>
// CHECK-NEXT:      %cdist_forward = aten._cdist_forward %cdist_forward_x1, %cdist_forward_x2 {p = 2.000000e+00 : f64} : tensor<2x4x3xf32>, tensor<2x5x3xf32> -> tensor<2x4x5xf32>
// CHECK-NEXT:      %fft_r2c = aten._fft_r2c %fft_r2c_self {dim = array<i64: 1>, normalization = 0 : i64, onesided = true} : tensor<4x6xf32> -> tensor<4x4xcomplex<f32>>
// CHECK-NEXT:      %fft_c2r = aten._fft_c2r %fft_c2r_self {dim = array<i64: 1>, normalization = 2 : i64, last_dim_size = 6 : i64} : tensor<4x4xcomplex<f32>> -> tensor<4x6xf32>
// CHECK-NEXT:      %rand = aten.rand {size = array<i64: 2, 3>} : tensor<2x3xf32>
// CHECK-NEXT:      %randn = aten.randn {size = array<i64: 2, 3>, dtype = f32} : tensor<2x3xf32>
// CHECK-NEXT:      %rand_like = aten.rand_like %rand_like_self : tensor<2x3xf32> -> tensor<2x3xf32>
// CHECK-NEXT:      %randn_like = aten.randn_like %randn_like_self : tensor<2x3xf32> -> tensor<2x3xf32>
// CHECK-NEXT:      %randint_low = aten.randint.low {low = 0 : i64, high = 5 : i64, size = array<i64: 4>} : tensor<4xi64>
// CHECK-NEXT:      %randint = aten.randint {high = 5 : i64, size = array<i64: 4>} : tensor<4xi64>
// CHECK-NEXT:      %randint_like = aten.randint_like %randint_like_self {high = 7 : i64} : tensor<2x3xi64> -> tensor<2x3xi64>
// CHECK-NEXT:      %randperm = aten.randperm {n = 6 : i64} : tensor<6xi64>
// CHECK-NEXT:      %normal_functional = aten.normal_functional %normal_functional_self {mean = 5.000000e-01 : f64, std = 2.000000e+00 : f64} : tensor<2x3xf32> -> tensor<2x3xf32>
// CHECK-NEXT:      %normal_Tensor_float = aten.normal.Tensor_float %normal_Tensor_float_mean {std = 2.000000e+00 : f64} : tensor<2x3xf32> -> tensor<2x3xf32>
// CHECK-NEXT:      %normal_float_Tensor = aten.normal.float_Tensor %normal_float_Tensor_std {mean = 5.000000e-01 : f64} : tensor<2x3xf32> -> tensor<2x3xf32>
// CHECK-NEXT:      %normal_Tensor_Tensor = aten.normal.Tensor_Tensor %normal_Tensor_Tensor_mean, %normal_Tensor_Tensor_std : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
// CHECK-NEXT:      %uniform = aten.uniform %uniform_self {from = -1.000000e+00 : f64, to = 1.000000e+00 : f64} : tensor<2x3xf32> -> tensor<2x3xf32>
// CHECK-NEXT:      %bernoulli_p = aten.bernoulli.p %bernoulli_p_self {p = 3.000000e-01 : f64} : tensor<2x3xf32> -> tensor<2x3xf32>
// CHECK-NEXT:      %bernoulli_Tensor = aten.bernoulli.Tensor %bernoulli_Tensor_self, %bernoulli_Tensor_p : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
// CHECK-NEXT:      %exponential = aten.exponential %exponential_self {lambd = 2.000000e+00 : f64} : tensor<2x3xf32> -> tensor<2x3xf32>
// CHECK-NEXT:      %cumprod = aten.cumprod %cumprod_self {dim = 1 : i64} : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:      %masked_scatter_backward = aten.masked_scatter_backward %masked_scatter_backward_grad_output, %masked_scatter_backward_mask {sizes = array<i64: 14>} : tensor<3x4xf32>, tensor<3x4xi1> -> tensor<14xf32>
// CHECK-NEXT:      %diagonal_scatter = aten.diagonal_scatter %diagonal_scatter_self, %diagonal_scatter_src : tensor<4x5xf32>, tensor<4xf32> -> tensor<4x5xf32>
// CHECK-NEXT:      %as_strided_scatter = aten.as_strided_scatter %as_strided_scatter_self, %as_strided_scatter_src {size = array<i64: 3, 3>, stride = array<i64: 5, 1>} : tensor<4x5xf32>, tensor<3x3xf32> -> tensor<4x5xf32>
// CHECK-NEXT:      %unfold = aten.unfold %unfold_self {dimension = 1 : i64, size = 3 : i64, step = 2 : i64} : tensor<3x7xf32> -> tensor<3x3x3xf32>
// CHECK-NEXT:      %new_empty_strided = aten.new_empty_strided %new_empty_strided_self {size = array<i64: 0, 3>, stride = array<i64: 3, 1>} : tensor<2xf32> -> tensor<0x3xf32>
// CHECK-NEXT:      %pdist_backward = aten._pdist_backward %pdist_backward_grad, %pdist_backward_self, %pdist_backward_pdist {p = 2.000000e+00 : f64} : tensor<10xf32>, tensor<5x3xf32>, tensor<10xf32> -> tensor<5x3xf32>
// CHECK-NEXT:      %cdist_backward = aten._cdist_backward %cdist_backward_grad, %cdist_backward_x1, %cdist_backward_x2, %cdist_backward_cdist {p = 2.000000e+00 : f64} : tensor<2x4x5xf32>, tensor<2x4x3xf32>, tensor<2x5x3xf32>, tensor<2x4x5xf32> -> tensor<2x4x3xf32>
// CHECK-NEXT:      %embedding_bag_backward = aten._embedding_bag_backward %embedding_bag_backward_grad, %embedding_bag_backward_indices, %embedding_bag_backward_offsets, %embedding_bag_backward_offset2bag, %embedding_bag_backward_bag_size, %embedding_bag_backward_maximum_indices {num_weights = 10 : i64, scale_grad_by_freq = false, mode = 0 : i64, sparse = false} : tensor<4x3xf32>, tensor<8xi64>, tensor<4xi64>, tensor<0xi64>, tensor<4xi64>, tensor<4xi64> -> tensor<10x3xf32>
// CHECK-NEXT:      %replication_pad2d_backward = aten.replication_pad2d_backward %replication_pad2d_backward_grad_output, %replication_pad2d_backward_self {padding = array<i64: 1, 0, 2, 1>} : tensor<2x3x7x5xf32>, tensor<2x3x4x4xf32> -> tensor<2x3x4x4xf32>
// CHECK-NEXT:      %replication_pad3d_backward = aten.replication_pad3d_backward %replication_pad3d_backward_grad_output, %replication_pad3d_backward_self {padding = array<i64: 1, 0, 0, 1, 1, 1>} : tensor<2x3x6x5x5xf32>, tensor<2x3x4x4x4xf32> -> tensor<2x3x4x4x4xf32>
// CHECK-NEXT:      %grid_sampler_2d_backward, %grid_sampler_2d_backward_1 = aten.grid_sampler_2d_backward %grid_sampler_2d_backward_grad_output, %grid_sampler_2d_backward_input, %grid_sampler_2d_backward_grid {interpolation_mode = 0 : i64, padding_mode = 0 : i64, align_corners = false, output_mask = array<i1: true, true>} : tensor<2x3x3x4xf32>, tensor<2x3x5x6xf32>, tensor<2x3x4x2xf32> -> tensor<2x3x5x6xf32>, tensor<2x3x4x2xf32>
// CHECK-NEXT:      %avg_pool3d_backward = aten.avg_pool3d_backward %avg_pool3d_backward_grad_output, %avg_pool3d_backward_self {kernel_size = array<i64: 2, 2, 2>, stride = array<i64: 2, 2, 2>, padding = array<i64: 0, 0, 0>, ceil_mode = false, count_include_pad = true} : tensor<2x2x2x3x2xf32>, tensor<2x2x5x6x4xf32> -> tensor<2x2x5x6x4xf32>
// CHECK-NEXT:      %max_pool3d_with_indices_backward = aten.max_pool3d_with_indices_backward %max_pool3d_with_indices_backward_grad_output, %max_pool3d_with_indices_backward_self, %max_pool3d_with_indices_backward_indices {kernel_size = array<i64: 2, 2, 2>, stride = array<i64: 2, 2, 2>, padding = array<i64: 0, 0, 0>, dilation = array<i64: 1, 1, 1>, ceil_mode = false} : tensor<2x2x2x3x2xf32>, tensor<2x2x5x6x4xf32>, tensor<2x2x2x3x2xi64> -> tensor<2x2x5x6x4xf32>
// CHECK-NEXT:      %adaptive_avg_pool3d_backward = aten._adaptive_avg_pool3d_backward %adaptive_avg_pool3d_backward_grad_output, %adaptive_avg_pool3d_backward_self : tensor<2x3x2x3x2xf32>, tensor<2x3x5x4x6xf32> -> tensor<2x3x5x4x6xf32>
// CHECK-NEXT:      func.return
// CHECK-NEXT:    }
func.func @core_ops(%acos_self: tensor<3x4xf32>, %acosh_self: tensor<3x4xf32>, %asin_self: tensor<3x4xf32>, %asinh_self: tensor<3x4xf32>, %atan_self: tensor<3x4xf32>, %atanh_self: tensor<3x4xf32>, %atan2_self: tensor<3x4xf32>, %atan2_other: tensor<4xf32>, %atan2_out_self: tensor<3x4xf32>, %atan2_out_other: tensor<3x4xf32>, %atan2_out_out: tensor<3x4xf32>, %ceil_self: tensor<9xf32>, %cosh_self: tensor<3x4xf32>, %expm1_self: tensor<3x4xf32>, %floor_self: tensor<9xf32>, %log10_self: tensor<3x4xf32>, %log1p_self: tensor<3x4xf32>, %log2_self: tensor<3x4xf32>, %round_self: tensor<9xf32>, %sign_self: tensor<4xf32>, %sinh_self: tensor<3x4xf32>, %tan_self: tensor<3x4xf32>, %trunc_self: tensor<9xf32>, %isnan_self: tensor<5xf32>, %isinf_self: tensor<5xf32>, %hardtanh_self: tensor<3x4xf32>, %hardtanh_backward_grad_output: tensor<6xf32>, %hardtanh_backward_self: tensor<6xf32>, %elu_self: tensor<3x4xf32>, %elu_backward_grad_output: tensor<3x4xf32>, %elu_backward_self_or_result: tensor<3x4xf32>, %bitwise_and_Scalar_self: tensor<5xi64>, %bitwise_or_Scalar_self: tensor<5xi64>, %bitwise_xor_Tensor_self: tensor<5xi64>, %bitwise_xor_Tensor_other: tensor<5xi64>, %bitwise_xor_Scalar_self: tensor<5xi64>, %logical_or_self: tensor<5xi1>, %logical_or_other: tensor<5xi1>, %logical_xor_self: tensor<5xi1>, %logical_xor_other: tensor<5xi1>, %div_Tensor_mode_self: tensor<3x4xf32>, %div_Tensor_mode_other: tensor<3x4xf32>, %div_Scalar_mode_self: tensor<3x4xf32>, %fmod_Tensor_self: tensor<3x4xf32>, %fmod_Tensor_other: tensor<3x4xf32>, %fmod_Scalar_self: tensor<3x4xf32>, %remainder_Tensor_self: tensor<3x4xf32>, %remainder_Tensor_other: tensor<3x4xf32>, %remainder_Scalar_self: tensor<3x4xf32>, %clamp_Tensor_self: tensor<3x4xf32>, %clamp_Tensor_min: tensor<4xf32>, %clamp_Tensor_max: tensor<3x1xf32>, %pow_Scalar_exponent: tensor<3x4xf32>, %masked_fill_Scalar_self: tensor<3x4xf32>, %masked_fill_Scalar_mask: tensor<3x4xi1>, %fill_Scalar_self: tensor<3x4xf32>, %lift_fresh_copy_self: tensor<3x4xf32>, %argmin_self: tensor<3x4x5xf32>, %prod_self: tensor<3x4xf32>, %prod_dim_int_self: tensor<3x4x5xf32>, %var_dim_self: tensor<3x4x5xf32>, %var_correction_self: tensor<3x4x5xf32>, %any_self: tensor<3x4xi1>, %any_dims_self: tensor<3x4x5xi1>, %cumsum_self: tensor<3x4xf32>, %max_dim_self: tensor<3x4x5xf32>, %min_dim_self: tensor<3x4x5xf32>, %sort_self: tensor<4x6xf32>, %topk_self: tensor<4x6xf32>, %scatter_reduce_two_self: tensor<2x3xf32>, %scatter_reduce_two_index: tensor<2x4xi64>, %scatter_reduce_two_src: tensor<2x4xf32>, %index_select_self: tensor<5x3xf32>, %index_select_index: tensor<3xi64>, %masked_scatter_self: tensor<3x4xf32>, %masked_scatter_mask: tensor<3x4xi1>, %masked_scatter_source: tensor<12xf32>, %nonzero_self: tensor<3x4xi1>, %local_scalar_dense_self: tensor<f32>, %embedding_bag_weight: tensor<10x3xf32>, %embedding_bag_indices: tensor<8xi64>, %embedding_bag_offsets: tensor<4xi64>, %sym_size_int_self: tensor<3x4xf32>, %sym_stride_int_self: tensor<3x4xf32>, %sym_storage_offset_self: tensor<3x4xf32>, %sym_numel_self: tensor<3x4xf32>, %sym_is_contiguous_self: tensor<3x4xf32>, %resize_self: tensor<3x4xf32>, %as_strided_self: tensor<4x5xf32>, %diagonal_self: tensor<4x5xf32>, %select_scatter_self: tensor<3x4xf32>, %select_scatter_src: tensor<4xf32>, %squeeze_dim_self: tensor<3x1x4xf32>, %flip_self: tensor<3x4x2xf32>, %repeat_self: tensor<2x3xf32>, %reflection_pad1d_self: tensor<2x3x4xf32>, %reflection_pad2d_self: tensor<2x3x4x4xf32>, %reflection_pad3d_self: tensor<2x3x4x4x4xf32>, %replication_pad2d_self: tensor<2x3x4x4xf32>, %replication_pad3d_self: tensor<2x3x4x4x4xf32>, %col2im_self: tensor<2x12x12xf32>, %upsample_bilinear2d_vec_input: tensor<2x3x4x5xf32>, %upsample_nearest2d_vec_input: tensor<2x3x4x5xf32>, %grid_sampler_2d_input: tensor<2x3x5x6xf32>, %grid_sampler_2d_grid: tensor<2x3x4x2xf32>, %adaptive_avg_pool2d_self: tensor<2x3x7x5xf32>, %adaptive_avg_pool2d_backward_grad_output: tensor<2x3x3x2xf32>, %adaptive_avg_pool2d_backward_self: tensor<2x3x7x5xf32>, %adaptive_avg_pool3d_self: tensor<2x3x5x4x6xf32>, %adaptive_avg_pool1d_self: tensor<2x3x7xf32>, %avg_pool1d_self: tensor<2x3x7xf32>, %avg_pool3d_self: tensor<2x2x5x6x4xf32>, %max_pool3d_with_indices_self: tensor<2x2x5x6x4xf32>, %native_group_norm_input: tensor<2x6x4x3xf32>, %native_group_norm_weight: tensor<6xf32>, %native_group_norm_bias: tensor<6xf32>, %native_group_norm_backward_grad_out: tensor<2x6x4x3xf32>, %native_group_norm_backward_input: tensor<2x6x4x3xf32>, %native_group_norm_backward_mean: tensor<2x3xf32>, %native_group_norm_backward_rstd: tensor<2x3xf32>, %native_group_norm_backward_weight: tensor<6xf32>, %native_batch_norm_legit_input: tensor<4x3x5xf32>, %native_batch_norm_legit_weight: tensor<3xf32>, %native_batch_norm_legit_bias: tensor<3xf32>, %native_batch_norm_legit_running_mean: tensor<3xf32>, %native_batch_norm_legit_running_var: tensor<3xf32>, %native_batch_norm_legit_no_stats_input: tensor<4x3x5xf32>, %native_batch_norm_legit_no_stats_weight: tensor<3xf32>, %pdist_forward_self: tensor<5x3xf32>, %cdist_forward_x1: tensor<2x4x3xf32>, %cdist_forward_x2: tensor<2x5x3xf32>, %fft_r2c_self: tensor<4x6xf32>, %fft_c2r_self: tensor<4x4xcomplex<f32>>, %rand_like_self: tensor<2x3xf32>, %randn_like_self: tensor<2x3xf32>, %randint_like_self: tensor<2x3xi64>, %normal_functional_self: tensor<2x3xf32>, %normal_Tensor_float_mean: tensor<2x3xf32>, %normal_float_Tensor_std: tensor<2x3xf32>, %normal_Tensor_Tensor_mean: tensor<2x3xf32>, %normal_Tensor_Tensor_std: tensor<2x3xf32>, %uniform_self: tensor<2x3xf32>, %bernoulli_p_self: tensor<2x3xf32>, %bernoulli_Tensor_self: tensor<2x3xf32>, %bernoulli_Tensor_p: tensor<2x3xf32>, %exponential_self: tensor<2x3xf32>, %cumprod_self: tensor<3x4xf32>, %masked_scatter_backward_grad_output: tensor<3x4xf32>, %masked_scatter_backward_mask: tensor<3x4xi1>, %diagonal_scatter_self: tensor<4x5xf32>, %diagonal_scatter_src: tensor<4xf32>, %as_strided_scatter_self: tensor<4x5xf32>, %as_strided_scatter_src: tensor<3x3xf32>, %unfold_self: tensor<3x7xf32>, %new_empty_strided_self: tensor<2xf32>, %pdist_backward_grad: tensor<10xf32>, %pdist_backward_self: tensor<5x3xf32>, %pdist_backward_pdist: tensor<10xf32>, %cdist_backward_grad: tensor<2x4x5xf32>, %cdist_backward_x1: tensor<2x4x3xf32>, %cdist_backward_x2: tensor<2x5x3xf32>, %cdist_backward_cdist: tensor<2x4x5xf32>, %embedding_bag_backward_grad: tensor<4x3xf32>, %embedding_bag_backward_indices: tensor<8xi64>, %embedding_bag_backward_offsets: tensor<4xi64>, %embedding_bag_backward_offset2bag: tensor<0xi64>, %embedding_bag_backward_bag_size: tensor<4xi64>, %embedding_bag_backward_maximum_indices: tensor<4xi64>, %replication_pad2d_backward_grad_output: tensor<2x3x7x5xf32>, %replication_pad2d_backward_self: tensor<2x3x4x4xf32>, %replication_pad3d_backward_grad_output: tensor<2x3x6x5x5xf32>, %replication_pad3d_backward_self: tensor<2x3x4x4x4xf32>, %grid_sampler_2d_backward_grad_output: tensor<2x3x3x4xf32>, %grid_sampler_2d_backward_input: tensor<2x3x5x6xf32>, %grid_sampler_2d_backward_grid: tensor<2x3x4x2xf32>, %avg_pool3d_backward_grad_output: tensor<2x2x2x3x2xf32>, %avg_pool3d_backward_self: tensor<2x2x5x6x4xf32>, %max_pool3d_with_indices_backward_grad_output: tensor<2x2x2x3x2xf32>, %max_pool3d_with_indices_backward_self: tensor<2x2x5x6x4xf32>, %max_pool3d_with_indices_backward_indices: tensor<2x2x2x3x2xi64>, %adaptive_avg_pool3d_backward_grad_output: tensor<2x3x2x3x2xf32>, %adaptive_avg_pool3d_backward_self: tensor<2x3x5x4x6xf32>) {
  %acos = aten.acos %acos_self : tensor<3x4xf32> -> tensor<3x4xf32>
  %acosh = aten.acosh %acosh_self : tensor<3x4xf32> -> tensor<3x4xf32>
  %asin = aten.asin %asin_self : tensor<3x4xf32> -> tensor<3x4xf32>
  %asinh = aten.asinh %asinh_self : tensor<3x4xf32> -> tensor<3x4xf32>
  %atan = aten.atan %atan_self : tensor<3x4xf32> -> tensor<3x4xf32>
  %atanh = aten.atanh %atanh_self : tensor<3x4xf32> -> tensor<3x4xf32>
  %atan2 = aten.atan2 %atan2_self, %atan2_other : tensor<3x4xf32>, tensor<4xf32> -> tensor<3x4xf32>
  %atan2_out = aten.atan2.out %atan2_out_self, %atan2_out_other, %atan2_out_out : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  %ceil = aten.ceil %ceil_self : tensor<9xf32> -> tensor<9xf32>
  %cosh = aten.cosh %cosh_self : tensor<3x4xf32> -> tensor<3x4xf32>
  %expm1 = aten.expm1 %expm1_self : tensor<3x4xf32> -> tensor<3x4xf32>
  %floor = aten.floor %floor_self : tensor<9xf32> -> tensor<9xf32>
  %log10 = aten.log10 %log10_self : tensor<3x4xf32> -> tensor<3x4xf32>
  %log1p = aten.log1p %log1p_self : tensor<3x4xf32> -> tensor<3x4xf32>
  %log2 = aten.log2 %log2_self : tensor<3x4xf32> -> tensor<3x4xf32>
  %round = aten.round %round_self : tensor<9xf32> -> tensor<9xf32>
  %sign = aten.sign %sign_self : tensor<4xf32> -> tensor<4xf32>
  %sinh = aten.sinh %sinh_self : tensor<3x4xf32> -> tensor<3x4xf32>
  %tan = aten.tan %tan_self : tensor<3x4xf32> -> tensor<3x4xf32>
  %trunc = aten.trunc %trunc_self : tensor<9xf32> -> tensor<9xf32>
  %isnan = aten.isnan %isnan_self : tensor<5xf32> -> tensor<5xi1>
  %isinf = aten.isinf %isinf_self : tensor<5xf32> -> tensor<5xi1>
  %hardtanh = aten.hardtanh %hardtanh_self : tensor<3x4xf32> -> tensor<3x4xf32>
  %hardtanh_backward = aten.hardtanh_backward %hardtanh_backward_grad_output, %hardtanh_backward_self {min_val = 0.000000e+00 : f64, max_val = 6.000000e+00 : f64} : tensor<6xf32>, tensor<6xf32> -> tensor<6xf32>
  %elu = aten.elu %elu_self : tensor<3x4xf32> -> tensor<3x4xf32>
  %elu_backward = aten.elu_backward %elu_backward_grad_output, %elu_backward_self_or_result {alpha = 1.000000e+00 : f64, scale = 1.000000e+00 : f64, input_scale = 1.000000e+00 : f64, is_result = false} : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  %bitwise_and_Scalar = aten.bitwise_and.Scalar %bitwise_and_Scalar_self {other = 3 : i64} : tensor<5xi64> -> tensor<5xi64>
  %bitwise_or_Scalar = aten.bitwise_or.Scalar %bitwise_or_Scalar_self {other = 4 : i64} : tensor<5xi64> -> tensor<5xi64>
  %bitwise_xor_Tensor = aten.bitwise_xor.Tensor %bitwise_xor_Tensor_self, %bitwise_xor_Tensor_other : tensor<5xi64>, tensor<5xi64> -> tensor<5xi64>
  %bitwise_xor_Scalar = aten.bitwise_xor.Scalar %bitwise_xor_Scalar_self {other = 6 : i64} : tensor<5xi64> -> tensor<5xi64>
  %logical_or = aten.logical_or %logical_or_self, %logical_or_other : tensor<5xi1>, tensor<5xi1> -> tensor<5xi1>
  %logical_xor = aten.logical_xor %logical_xor_self, %logical_xor_other : tensor<5xi1>, tensor<5xi1> -> tensor<5xi1>
  %div_Tensor_mode = aten.div.Tensor_mode %div_Tensor_mode_self, %div_Tensor_mode_other {rounding_mode = "trunc"} : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  %div_Scalar_mode = aten.div.Scalar_mode %div_Scalar_mode_self {other = -1.500000e+00 : f64, rounding_mode = "trunc"} : tensor<3x4xf32> -> tensor<3x4xf32>
  %fmod_Tensor = aten.fmod.Tensor %fmod_Tensor_self, %fmod_Tensor_other : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  %fmod_Scalar = aten.fmod.Scalar %fmod_Scalar_self {other = 1.500000e+00 : f64} : tensor<3x4xf32> -> tensor<3x4xf32>
  %remainder_Tensor = aten.remainder.Tensor %remainder_Tensor_self, %remainder_Tensor_other : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  %remainder_Scalar = aten.remainder.Scalar %remainder_Scalar_self {other = -1.500000e+00 : f64} : tensor<3x4xf32> -> tensor<3x4xf32>
  %clamp_Tensor = aten.clamp.Tensor %clamp_Tensor_self min %clamp_Tensor_min max %clamp_Tensor_max : tensor<3x4xf32> min tensor<4xf32> max tensor<3x1xf32> -> tensor<3x4xf32>
  %pow_Scalar = aten.pow.Scalar %pow_Scalar_exponent {self = 2.000000e+00 : f64} : tensor<3x4xf32> -> tensor<3x4xf32>
  %masked_fill_Scalar = aten.masked_fill.Scalar %masked_fill_Scalar_self, %masked_fill_Scalar_mask {value = -1.000000e+09 : f64} : tensor<3x4xf32>, tensor<3x4xi1> -> tensor<3x4xf32>
  %fill_Scalar = aten.fill.Scalar %fill_Scalar_self {value = 2.500000e+00 : f64} : tensor<3x4xf32> -> tensor<3x4xf32>
  %lift_fresh_copy = aten.lift_fresh_copy %lift_fresh_copy_self : tensor<3x4xf32> -> tensor<3x4xf32>
  %argmin = aten.argmin %argmin_self : tensor<3x4x5xf32> -> tensor<i64>
  %prod = aten.prod %prod_self : tensor<3x4xf32> -> tensor<f32>
  %prod_dim_int = aten.prod.dim_int %prod_dim_int_self {dim = 1 : i64} : tensor<3x4x5xf32> -> tensor<3x5xf32>
  %var_dim = aten.var.dim %var_dim_self {dim = array<i64: 1>} : tensor<3x4x5xf32> -> tensor<3x5xf32>
  %var_correction = aten.var.correction %var_correction_self : tensor<3x4x5xf32> -> tensor<f32>
  %any = aten.any %any_self : tensor<3x4xi1> -> tensor<i1>
  %any_dims = aten.any.dims %any_dims_self {dim = array<i64: 0, 2>} : tensor<3x4x5xi1> -> tensor<4xi1>
  %cumsum = aten.cumsum %cumsum_self {dim = 1 : i64} : tensor<3x4xf32> -> tensor<3x4xf32>
  %max_dim, %max_dim_1 = aten.max.dim %max_dim_self {dim = 1 : i64} : tensor<3x4x5xf32> -> tensor<3x5xf32>, tensor<3x5xi64>
  %min_dim, %min_dim_1 = aten.min.dim %min_dim_self {dim = 0 : i64} : tensor<3x4x5xf32> -> tensor<4x5xf32>, tensor<4x5xi64>
  %sort, %sort_1 = aten.sort %sort_self : tensor<4x6xf32> -> tensor<4x6xf32>, tensor<4x6xi64>
  %sort_stable, %sort_stable_1 = aten.sort.stable %sort_self {stable = true, dim = 1 : i64, descending = true} : tensor<4x6xf32> -> tensor<4x6xf32>, tensor<4x6xi64>
  %topk, %topk_1 = aten.topk %topk_self {k = 3 : i64} : tensor<4x6xf32> -> tensor<4x3xf32>, tensor<4x3xi64>
  %scatter_reduce_two = aten.scatter_reduce.two %scatter_reduce_two_self, %scatter_reduce_two_index, %scatter_reduce_two_src {dim = 1 : i64, reduce = "sum"} : tensor<2x3xf32>, tensor<2x4xi64>, tensor<2x4xf32> -> tensor<2x3xf32>
  %index_select = aten.index_select %index_select_self, %index_select_index {dim = 0 : i64} : tensor<5x3xf32>, tensor<3xi64> -> tensor<3x3xf32>
  %masked_scatter = aten.masked_scatter %masked_scatter_self, %masked_scatter_mask, %masked_scatter_source : tensor<3x4xf32>, tensor<3x4xi1>, tensor<12xf32> -> tensor<3x4xf32>
  %nonzero = aten.nonzero %nonzero_self : tensor<3x4xi1> -> tensor<6x2xi64>
  %local_scalar_dense = aten._local_scalar_dense %local_scalar_dense_self : tensor<f32> -> tensor<f32>
  %embedding_bag, %embedding_bag_1, %embedding_bag_2, %embedding_bag_3 = aten._embedding_bag %embedding_bag_weight, %embedding_bag_indices, %embedding_bag_offsets {scale_grad_by_freq = false, mode = 0 : i64} : tensor<10x3xf32>, tensor<8xi64>, tensor<4xi64> -> tensor<4x3xf32>, tensor<0xi64>, tensor<4xi64>, tensor<0xi64>
  %empty_memory_format = aten.empty.memory_format {size = array<i64: 0, 3>} : tensor<0x3xf32>
  %empty_strided = aten.empty_strided {size = array<i64: 0>, stride = array<i64: 1>, dtype = i64} : tensor<0xi64>
  %empty_permuted = aten.empty_permuted {size = array<i64: 0, 2>, physical_layout = array<i64: 1, 0>} : tensor<0x2xf32>
  %sym_size_int = aten.sym_size.int %sym_size_int_self {dim = 1 : i64} : tensor<3x4xf32> -> tensor<i64>
  %sym_stride_int = aten.sym_stride.int %sym_stride_int_self {dim = 0 : i64} : tensor<3x4xf32> -> tensor<i64>
  %sym_storage_offset = aten.sym_storage_offset %sym_storage_offset_self : tensor<3x4xf32> -> tensor<i64>
  %sym_numel = aten.sym_numel %sym_numel_self : tensor<3x4xf32> -> tensor<i64>
  %sym_is_contiguous = aten.sym_is_contiguous %sym_is_contiguous_self : tensor<3x4xf32> -> tensor<i1>
  %resize = aten.resize_ %resize_self {size = array<i64: 2, 5>} : tensor<3x4xf32> -> tensor<2x5xf32>
  %as_strided = aten.as_strided %as_strided_self {size = array<i64: 3, 3>, stride = array<i64: 5, 1>} : tensor<4x5xf32> -> tensor<3x3xf32>
  %diagonal = aten.diagonal %diagonal_self : tensor<4x5xf32> -> tensor<4xf32>
  %select_scatter = aten.select_scatter %select_scatter_self, %select_scatter_src {dim = 0 : i64, index = 1 : i64} : tensor<3x4xf32>, tensor<4xf32> -> tensor<3x4xf32>
  %squeeze_dim = aten.squeeze.dim %squeeze_dim_self {dim = 1 : i64} : tensor<3x1x4xf32> -> tensor<3x4xf32>
  %flip = aten.flip %flip_self {dims = array<i64: 0, -1>} : tensor<3x4x2xf32> -> tensor<3x4x2xf32>
  %repeat = aten.repeat %repeat_self {repeats = array<i64: 2, 1, 2>} : tensor<2x3xf32> -> tensor<2x2x6xf32>
  %reflection_pad1d = aten.reflection_pad1d %reflection_pad1d_self {padding = array<i64: 2, 1>} : tensor<2x3x4xf32> -> tensor<2x3x7xf32>
  %reflection_pad2d = aten.reflection_pad2d %reflection_pad2d_self {padding = array<i64: 1, 2, 2, 0>} : tensor<2x3x4x4xf32> -> tensor<2x3x6x7xf32>
  %reflection_pad3d = aten.reflection_pad3d %reflection_pad3d_self {padding = array<i64: 1, 1, 0, 2, 1, 0>} : tensor<2x3x4x4x4xf32> -> tensor<2x3x5x6x6xf32>
  %replication_pad2d = aten.replication_pad2d %replication_pad2d_self {padding = array<i64: 1, 2, 2, 0>} : tensor<2x3x4x4xf32> -> tensor<2x3x6x7xf32>
  %replication_pad3d = aten.replication_pad3d %replication_pad3d_self {padding = array<i64: 1, 1, 0, 2, 1, 0>} : tensor<2x3x4x4x4xf32> -> tensor<2x3x5x6x6xf32>
  %col2im = aten.col2im %col2im_self {output_size = array<i64: 4, 5>, kernel_size = array<i64: 2, 2>, dilation = array<i64: 1, 1>, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : tensor<2x12x12xf32> -> tensor<2x3x4x5xf32>
  %upsample_bilinear2d_vec = aten.upsample_bilinear2d.vec %upsample_bilinear2d_vec_input {output_size = array<i64: 8, 7>, align_corners = false} : tensor<2x3x4x5xf32> -> tensor<2x3x8x7xf32>
  %upsample_nearest2d_vec = aten.upsample_nearest2d.vec %upsample_nearest2d_vec_input {output_size = array<i64: 8, 7>} : tensor<2x3x4x5xf32> -> tensor<2x3x8x7xf32>
  %grid_sampler_2d = aten.grid_sampler_2d %grid_sampler_2d_input, %grid_sampler_2d_grid {interpolation_mode = 0 : i64, padding_mode = 0 : i64, align_corners = false} : tensor<2x3x5x6xf32>, tensor<2x3x4x2xf32> -> tensor<2x3x3x4xf32>
  %adaptive_avg_pool2d = aten._adaptive_avg_pool2d %adaptive_avg_pool2d_self {output_size = array<i64: 3, 2>} : tensor<2x3x7x5xf32> -> tensor<2x3x3x2xf32>
  %adaptive_avg_pool2d_backward = aten._adaptive_avg_pool2d_backward %adaptive_avg_pool2d_backward_grad_output, %adaptive_avg_pool2d_backward_self : tensor<2x3x3x2xf32>, tensor<2x3x7x5xf32> -> tensor<2x3x7x5xf32>
  %adaptive_avg_pool3d = aten._adaptive_avg_pool3d %adaptive_avg_pool3d_self {output_size = array<i64: 2, 3, 2>} : tensor<2x3x5x4x6xf32> -> tensor<2x3x2x3x2xf32>
  %adaptive_avg_pool1d = aten.adaptive_avg_pool1d %adaptive_avg_pool1d_self {output_size = array<i64: 3>} : tensor<2x3x7xf32> -> tensor<2x3x3xf32>
  %avg_pool1d = aten.avg_pool1d %avg_pool1d_self {kernel_size = array<i64: 3>} : tensor<2x3x7xf32> -> tensor<2x3x2xf32>
  %avg_pool3d = aten.avg_pool3d %avg_pool3d_self {kernel_size = array<i64: 2, 2, 2>} : tensor<2x2x5x6x4xf32> -> tensor<2x2x2x3x2xf32>
  %max_pool3d_with_indices, %max_pool3d_with_indices_1 = aten.max_pool3d_with_indices %max_pool3d_with_indices_self {kernel_size = array<i64: 2, 2, 2>} : tensor<2x2x5x6x4xf32> -> tensor<2x2x2x3x2xf32>, tensor<2x2x2x3x2xi64>
  %native_group_norm, %native_group_norm_1, %native_group_norm_2 = aten.native_group_norm %native_group_norm_input weight %native_group_norm_weight bias %native_group_norm_bias {N = 2 : i64, C = 6 : i64, HxW = 12 : i64, group = 3 : i64, eps = 1.000000e-05 : f64} : tensor<2x6x4x3xf32> weight tensor<6xf32> bias tensor<6xf32> -> tensor<2x6x4x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
  %native_group_norm_backward, %native_group_norm_backward_1, %native_group_norm_backward_2 = aten.native_group_norm_backward %native_group_norm_backward_grad_out, %native_group_norm_backward_input, %native_group_norm_backward_mean, %native_group_norm_backward_rstd weight %native_group_norm_backward_weight {N = 2 : i64, C = 6 : i64, HxW = 12 : i64, group = 3 : i64, output_mask = array<i1: true, true, true>} : tensor<2x6x4x3xf32>, tensor<2x6x4x3xf32>, tensor<2x3xf32>, tensor<2x3xf32> weight tensor<6xf32> -> tensor<2x6x4x3xf32>, tensor<6xf32>, tensor<6xf32>
  %native_batch_norm_legit, %native_batch_norm_legit_1, %native_batch_norm_legit_2 = aten._native_batch_norm_legit %native_batch_norm_legit_input, %native_batch_norm_legit_running_mean, %native_batch_norm_legit_running_var weight %native_batch_norm_legit_weight bias %native_batch_norm_legit_bias {training = true, momentum = 1.000000e-01 : f64, eps = 1.000000e-05 : f64} : tensor<4x3x5xf32>, tensor<3xf32>, tensor<3xf32> weight tensor<3xf32> bias tensor<3xf32> -> tensor<4x3x5xf32>, tensor<3xf32>, tensor<3xf32>
  %native_batch_norm_legit_no_stats, %native_batch_norm_legit_no_stats_1, %native_batch_norm_legit_no_stats_2 = aten._native_batch_norm_legit.no_stats %native_batch_norm_legit_no_stats_input weight %native_batch_norm_legit_no_stats_weight {training = true, momentum = 1.000000e-01 : f64, eps = 1.000000e-05 : f64} : tensor<4x3x5xf32> weight tensor<3xf32> -> tensor<4x3x5xf32>, tensor<3xf32>, tensor<3xf32>
  %pdist_forward = aten._pdist_forward %pdist_forward_self : tensor<5x3xf32> -> tensor<10xf32>
  %cdist_forward = aten._cdist_forward %cdist_forward_x1, %cdist_forward_x2 {p = 2.000000e+00 : f64} : tensor<2x4x3xf32>, tensor<2x5x3xf32> -> tensor<2x4x5xf32>
  %fft_r2c = aten._fft_r2c %fft_r2c_self {dim = array<i64: 1>, normalization = 0 : i64, onesided = true} : tensor<4x6xf32> -> tensor<4x4xcomplex<f32>>
  %fft_c2r = aten._fft_c2r %fft_c2r_self {dim = array<i64: 1>, normalization = 2 : i64, last_dim_size = 6 : i64} : tensor<4x4xcomplex<f32>> -> tensor<4x6xf32>
  %rand = aten.rand {size = array<i64: 2, 3>} : tensor<2x3xf32>
  %randn = aten.randn {size = array<i64: 2, 3>, dtype = f32} : tensor<2x3xf32>
  %rand_like = aten.rand_like %rand_like_self : tensor<2x3xf32> -> tensor<2x3xf32>
  %randn_like = aten.randn_like %randn_like_self : tensor<2x3xf32> -> tensor<2x3xf32>
  %randint_low = aten.randint.low {low = 0 : i64, high = 5 : i64, size = array<i64: 4>} : tensor<4xi64>
  %randint = aten.randint {high = 5 : i64, size = array<i64: 4>} : tensor<4xi64>
  %randint_like = aten.randint_like %randint_like_self {high = 7 : i64} : tensor<2x3xi64> -> tensor<2x3xi64>
  %randperm = aten.randperm {n = 6 : i64} : tensor<6xi64>
  %normal_functional = aten.normal_functional %normal_functional_self {mean = 5.000000e-01 : f64, std = 2.000000e+00 : f64} : tensor<2x3xf32> -> tensor<2x3xf32>
  %normal_Tensor_float = aten.normal.Tensor_float %normal_Tensor_float_mean {std = 2.000000e+00 : f64} : tensor<2x3xf32> -> tensor<2x3xf32>
  %normal_float_Tensor = aten.normal.float_Tensor %normal_float_Tensor_std {mean = 5.000000e-01 : f64} : tensor<2x3xf32> -> tensor<2x3xf32>
  %normal_Tensor_Tensor = aten.normal.Tensor_Tensor %normal_Tensor_Tensor_mean, %normal_Tensor_Tensor_std : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %uniform = aten.uniform %uniform_self {from = -1.000000e+00 : f64, to = 1.000000e+00 : f64} : tensor<2x3xf32> -> tensor<2x3xf32>
  %bernoulli_p = aten.bernoulli.p %bernoulli_p_self {p = 3.000000e-01 : f64} : tensor<2x3xf32> -> tensor<2x3xf32>
  %bernoulli_Tensor = aten.bernoulli.Tensor %bernoulli_Tensor_self, %bernoulli_Tensor_p : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %exponential = aten.exponential %exponential_self {lambd = 2.000000e+00 : f64} : tensor<2x3xf32> -> tensor<2x3xf32>
  %cumprod = aten.cumprod %cumprod_self {dim = 1 : i64} : tensor<3x4xf32> -> tensor<3x4xf32>
  %masked_scatter_backward = aten.masked_scatter_backward %masked_scatter_backward_grad_output, %masked_scatter_backward_mask {sizes = array<i64: 14>} : tensor<3x4xf32>, tensor<3x4xi1> -> tensor<14xf32>
  %diagonal_scatter = aten.diagonal_scatter %diagonal_scatter_self, %diagonal_scatter_src : tensor<4x5xf32>, tensor<4xf32> -> tensor<4x5xf32>
  %as_strided_scatter = aten.as_strided_scatter %as_strided_scatter_self, %as_strided_scatter_src {size = array<i64: 3, 3>, stride = array<i64: 5, 1>} : tensor<4x5xf32>, tensor<3x3xf32> -> tensor<4x5xf32>
  %unfold = aten.unfold %unfold_self {dimension = 1 : i64, size = 3 : i64, step = 2 : i64} : tensor<3x7xf32> -> tensor<3x3x3xf32>
  %new_empty_strided = aten.new_empty_strided %new_empty_strided_self {size = array<i64: 0, 3>, stride = array<i64: 3, 1>} : tensor<2xf32> -> tensor<0x3xf32>
  %pdist_backward = aten._pdist_backward %pdist_backward_grad, %pdist_backward_self, %pdist_backward_pdist {p = 2.000000e+00 : f64} : tensor<10xf32>, tensor<5x3xf32>, tensor<10xf32> -> tensor<5x3xf32>
  %cdist_backward = aten._cdist_backward %cdist_backward_grad, %cdist_backward_x1, %cdist_backward_x2, %cdist_backward_cdist {p = 2.000000e+00 : f64} : tensor<2x4x5xf32>, tensor<2x4x3xf32>, tensor<2x5x3xf32>, tensor<2x4x5xf32> -> tensor<2x4x3xf32>
  %embedding_bag_backward = aten._embedding_bag_backward %embedding_bag_backward_grad, %embedding_bag_backward_indices, %embedding_bag_backward_offsets, %embedding_bag_backward_offset2bag, %embedding_bag_backward_bag_size, %embedding_bag_backward_maximum_indices {num_weights = 10 : i64, scale_grad_by_freq = false, mode = 0 : i64, sparse = false} : tensor<4x3xf32>, tensor<8xi64>, tensor<4xi64>, tensor<0xi64>, tensor<4xi64>, tensor<4xi64> -> tensor<10x3xf32>
  %replication_pad2d_backward = aten.replication_pad2d_backward %replication_pad2d_backward_grad_output, %replication_pad2d_backward_self {padding = array<i64: 1, 0, 2, 1>} : tensor<2x3x7x5xf32>, tensor<2x3x4x4xf32> -> tensor<2x3x4x4xf32>
  %replication_pad3d_backward = aten.replication_pad3d_backward %replication_pad3d_backward_grad_output, %replication_pad3d_backward_self {padding = array<i64: 1, 0, 0, 1, 1, 1>} : tensor<2x3x6x5x5xf32>, tensor<2x3x4x4x4xf32> -> tensor<2x3x4x4x4xf32>
  %grid_sampler_2d_backward, %grid_sampler_2d_backward_1 = aten.grid_sampler_2d_backward %grid_sampler_2d_backward_grad_output, %grid_sampler_2d_backward_input, %grid_sampler_2d_backward_grid {interpolation_mode = 0 : i64, padding_mode = 0 : i64, align_corners = false, output_mask = array<i1: true, true>} : tensor<2x3x3x4xf32>, tensor<2x3x5x6xf32>, tensor<2x3x4x2xf32> -> tensor<2x3x5x6xf32>, tensor<2x3x4x2xf32>
  %avg_pool3d_backward = aten.avg_pool3d_backward %avg_pool3d_backward_grad_output, %avg_pool3d_backward_self {kernel_size = array<i64: 2, 2, 2>, stride = array<i64: 2, 2, 2>, padding = array<i64: 0, 0, 0>, ceil_mode = false, count_include_pad = true} : tensor<2x2x2x3x2xf32>, tensor<2x2x5x6x4xf32> -> tensor<2x2x5x6x4xf32>
  %max_pool3d_with_indices_backward = aten.max_pool3d_with_indices_backward %max_pool3d_with_indices_backward_grad_output, %max_pool3d_with_indices_backward_self, %max_pool3d_with_indices_backward_indices {kernel_size = array<i64: 2, 2, 2>, stride = array<i64: 2, 2, 2>, padding = array<i64: 0, 0, 0>, dilation = array<i64: 1, 1, 1>, ceil_mode = false} : tensor<2x2x2x3x2xf32>, tensor<2x2x5x6x4xf32>, tensor<2x2x2x3x2xi64> -> tensor<2x2x5x6x4xf32>
  %adaptive_avg_pool3d_backward = aten._adaptive_avg_pool3d_backward %adaptive_avg_pool3d_backward_grad_output, %adaptive_avg_pool3d_backward_self : tensor<2x3x2x3x2xf32>, tensor<2x3x5x4x6xf32> -> tensor<2x3x5x4x6xf32>
  func.return
}

// Ops outside the core set that models call (backend/kernels/special.py, ...).
// CHECK-LABEL: func.func @special(
// CHECK-NEXT:    %i0 = aten.i0 %x : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %hypot = aten.hypot %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %logaddexp = aten.logaddexp %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %copysign = aten.copysign.Tensor %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %copysign_s = aten.copysign.Scalar %x {other = -1.000000e+00 : f64} : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %heaviside = aten.heaviside %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %lcse = aten.logcumsumexp %x {dim = 1 : i64} : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %bucket = aten.bucketize.Tensor %x, %b {out_int32 = false, right = false} : tensor<3x4xf32>, tensor<4xf32> -> tensor<3x4xi64>
// CHECK-NEXT:    %ss = aten.searchsorted.Tensor %b, %x {right = true} : tensor<4xf32>, tensor<3x4xf32> -> tensor<3x4xi64>
// CHECK-NEXT:    %kth, %kth_1 = aten.kthvalue %x {k = 2 : i64, dim = 1 : i64} : tensor<3x4xf32> -> tensor<3xf32>, tensor<3xi64>
// CHECK-NEXT:    %med, %med_1 = aten.median.dim %x {dim = 0 : i64, keepdim = true} : tensor<3x4xf32> -> tensor<1x4xf32>, tensor<1x4xi64>
// CHECK-NEXT:    %med_all = aten.median %x : tensor<3x4xf32> -> tensor<f32>
// CHECK-NEXT:    %nmed, %nmed_1 = aten.nanmedian.dim %x {dim = 1 : i64} : tensor<3x4xf32> -> tensor<3xf32>, tensor<3xi64>
// CHECK-NEXT:    %nmed_all = aten.nanmedian %x : tensor<3x4xf32> -> tensor<f32>
// CHECK-NEXT:    %hist = aten.histc %x {bins = 5 : i64, min = -2.000000e+00 : f64, max = 2.000000e+00 : f64} : tensor<3x4xf32> -> tensor<5xf32>
// CHECK-NEXT:    %erfinv = aten.erfinv %x : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %erfc = aten.erfc %x : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %lgamma = aten.lgamma %x : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %digamma = aten.digamma %x : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %polygamma = aten.polygamma %x {n = 1 : i64} : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %i0e = aten.special_i0e %x : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %i1 = aten.special_i1 %x : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %i1e = aten.special_i1e %x : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %erfcx = aten.special_erfcx %x : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %ndtri = aten.special_ndtri %x : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %j0 = aten.special_bessel_j0 %x : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %exp2 = aten.exp2 %x : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %ldexp = aten.ldexp.Tensor %x, %e : tensor<3x4xf32>, tensor<3x4xi64> -> tensor<3x4xf32>
// CHECK-NEXT:    %nextafter = aten.nextafter %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %frexp, %frexp_1 = aten.frexp.Tensor %x : tensor<3x4xf32> -> tensor<3x4xf32>, tensor<3x4xi32>
// CHECK-NEXT:    %gcd = aten.gcd %e, %e : tensor<3x4xi64>, tensor<3x4xi64> -> tensor<3x4xi64>
// CHECK-NEXT:    %signbit = aten.signbit %x : tensor<3x4xf32> -> tensor<3x4xi1>
// CHECK-NEXT:    %cummin, %cummin_1 = aten.cummin %x {dim = 1 : i64} : tensor<3x4xf32> -> tensor<3x4xf32>, tensor<3x4xi64>
// CHECK-NEXT:    func.return %cummin : tensor<3x4xf32>
// CHECK-NEXT:    }
func.func @special(%x: tensor<3x4xf32>, %y: tensor<3x4xf32>, %e: tensor<3x4xi64>, %b: tensor<4xf32>) -> tensor<3x4xf32> {
  %i0 = aten.i0 %x : tensor<3x4xf32> -> tensor<3x4xf32>
  %hypot = aten.hypot %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  %logaddexp = aten.logaddexp %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  %copysign = aten.copysign.Tensor %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  %copysign_s = aten.copysign.Scalar %x {other = -1.000000e+00 : f64} : tensor<3x4xf32> -> tensor<3x4xf32>
  %heaviside = aten.heaviside %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  %lcse = aten.logcumsumexp %x {dim = 1 : i64} : tensor<3x4xf32> -> tensor<3x4xf32>
  %bucket = aten.bucketize.Tensor %x, %b {out_int32 = false, right = false} : tensor<3x4xf32>, tensor<4xf32> -> tensor<3x4xi64>
  %ss = aten.searchsorted.Tensor %b, %x {right = true} : tensor<4xf32>, tensor<3x4xf32> -> tensor<3x4xi64>
  %kth:2 = aten.kthvalue %x {k = 2 : i64, dim = 1 : i64} : tensor<3x4xf32> -> tensor<3xf32>, tensor<3xi64>
  %med:2 = aten.median.dim %x {dim = 0 : i64, keepdim = true} : tensor<3x4xf32> -> tensor<1x4xf32>, tensor<1x4xi64>
  %med_all = aten.median %x : tensor<3x4xf32> -> tensor<f32>
  %nmed:2 = aten.nanmedian.dim %x {dim = 1 : i64} : tensor<3x4xf32> -> tensor<3xf32>, tensor<3xi64>
  %nmed_all = aten.nanmedian %x : tensor<3x4xf32> -> tensor<f32>
  %hist = aten.histc %x {bins = 5 : i64, min = -2.000000e+00 : f64, max = 2.000000e+00 : f64} : tensor<3x4xf32> -> tensor<5xf32>
  %erfinv = aten.erfinv %x : tensor<3x4xf32> -> tensor<3x4xf32>
  %erfc = aten.erfc %x : tensor<3x4xf32> -> tensor<3x4xf32>
  %lgamma = aten.lgamma %x : tensor<3x4xf32> -> tensor<3x4xf32>
  %digamma = aten.digamma %x : tensor<3x4xf32> -> tensor<3x4xf32>
  %polygamma = aten.polygamma %x {n = 1 : i64} : tensor<3x4xf32> -> tensor<3x4xf32>
  %i0e = aten.special_i0e %x : tensor<3x4xf32> -> tensor<3x4xf32>
  %i1 = aten.special_i1 %x : tensor<3x4xf32> -> tensor<3x4xf32>
  %i1e = aten.special_i1e %x : tensor<3x4xf32> -> tensor<3x4xf32>
  %erfcx = aten.special_erfcx %x : tensor<3x4xf32> -> tensor<3x4xf32>
  %ndtri = aten.special_ndtri %x : tensor<3x4xf32> -> tensor<3x4xf32>
  %j0 = aten.special_bessel_j0 %x : tensor<3x4xf32> -> tensor<3x4xf32>
  %exp2 = aten.exp2 %x : tensor<3x4xf32> -> tensor<3x4xf32>
  %ldexp = aten.ldexp.Tensor %x, %e : tensor<3x4xf32>, tensor<3x4xi64> -> tensor<3x4xf32>
  %nextafter = aten.nextafter %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  %frexp:2 = aten.frexp.Tensor %x : tensor<3x4xf32> -> tensor<3x4xf32>, tensor<3x4xi32>
  %gcd = aten.gcd %e, %e : tensor<3x4xi64>, tensor<3x4xi64> -> tensor<3x4xi64>
  %signbit = aten.signbit %x : tensor<3x4xf32> -> tensor<3x4xi1>
  %cummin:2 = aten.cummin %x {dim = 1 : i64} : tensor<3x4xf32> -> tensor<3x4xf32>, tensor<3x4xi64>
  func.return %cummin#0 : tensor<3x4xf32>
}

// Dense linear algebra (torch.linalg) and mode.
// ops added by the ops-fixes branch
// CHECK-LABEL: func.func @ops_fixes(%x: tensor<4x8xf32>, %i: tensor<4x8xi64>, %g: tensor<2x3x9xf32>, %s: tensor<2x3x6xf32>) -> tensor<f32> {
// CHECK-NEXT:      %max_all = aten.max %x : tensor<4x8xf32> -> tensor<f32>
// CHECK-NEXT:      %min_all = aten.min %i : tensor<4x8xi64> -> tensor<i64>
// CHECK-NEXT:      %cummax, %cummax_1 = aten.cummax %x {dim = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>, tensor<4x8xi64>
// CHECK-NEXT:      %lshift = aten.__lshift__.Scalar %i {other = 2 : i64} : tensor<4x8xi64> -> tensor<4x8xi64>
// CHECK-NEXT:      %rshift = aten.__rshift__.Scalar %i {other = 1 : i64} : tensor<4x8xi64> -> tensor<4x8xi64>
// CHECK-NEXT:      %rpad1d_bw = aten.replication_pad1d_backward %g, %s {padding = array<i64: 2, 1>} : tensor<2x3x9xf32>, tensor<2x3x6xf32> -> tensor<2x3x6xf32>
// CHECK-NEXT:      func.return %max_all : tensor<f32>
// CHECK-NEXT:    }

func.func @ops_fixes(%x: tensor<4x8xf32>, %i: tensor<4x8xi64>, %g: tensor<2x3x9xf32>, %s: tensor<2x3x6xf32>) -> tensor<f32> {
  %max_all = aten.max %x : tensor<4x8xf32> -> tensor<f32>
  %min_all = aten.min %i : tensor<4x8xi64> -> tensor<i64>
  %cummax:2 = aten.cummax %x {dim = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>, tensor<4x8xi64>
  %lshift = aten.__lshift__.Scalar %i {other = 2 : i64} : tensor<4x8xi64> -> tensor<4x8xi64>
  %rshift = aten.__rshift__.Scalar %i {other = 1 : i64} : tensor<4x8xi64> -> tensor<4x8xi64>
  %rpad1d_bw = aten.replication_pad1d_backward %g, %s {padding = array<i64: 2, 1>} : tensor<2x3x9xf32>, tensor<2x3x6xf32> -> tensor<2x3x6xf32>
  func.return %max_all : tensor<f32>
}

// CHECK-LABEL: func.func @dense_linalg(
// CHECK-SAME:  %a: tensor<2x3x3xf32>, %b: tensor<2x3x2xf32>, %r: tensor<2x4x3xf64>, %v: tensor<3x5xf32>) -> tensor<2x3x3xf32>
// CHECK-NEXT:    %inv, %inv_1 = aten.linalg_inv_ex %a : tensor<2x3x3xf32> -> tensor<2x3x3xf32>, tensor<2xi32>
// CHECK-NEXT:    aten._linalg_check_errors %inv_1 {api_name = "linalg.inv", is_matrix = false} : tensor<2xi32> -> ()
// CHECK-NEXT:    %solve, %solve_1, %solve_2, %solve_3 = aten._linalg_solve_ex %a, %b {left = true} : tensor<2x3x3xf32>, tensor<2x3x2xf32> -> tensor<2x3x2xf32>, tensor<2x3x3xf32>, tensor<2x3xi32>, tensor<2xi32>
// CHECK-NEXT:    %det, %det_1, %det_2 = aten._linalg_det %a : tensor<2x3x3xf32> -> tensor<2xf32>, tensor<2x3x3xf32>, tensor<2x3xi32>
// CHECK-NEXT:    %sld, %sld_1, %sld_2, %sld_3 = aten._linalg_slogdet %a : tensor<2x3x3xf32> -> tensor<2xf32>, tensor<2xf32>, tensor<2x3x3xf32>, tensor<2x3xi32>
// CHECK-NEXT:    %luf, %luf_1, %luf_2 = aten.linalg_lu_factor_ex %r {pivot = true, check_errors = false} : tensor<2x4x3xf64> -> tensor<2x4x3xf64>, tensor<2x3xi32>, tensor<2xi32>
// CHECK-NEXT:    %lu, %lu_1, %lu_2 = aten.linalg_lu %r : tensor<2x4x3xf64> -> tensor<2x4x4xf64>, tensor<2x4x3xf64>, tensor<2x3x3xf64>
// CHECK-NEXT:    %unp, %unp_1, %unp_2 = aten.lu_unpack %luf, %luf_1 {unpack_data = true, unpack_pivots = true} : tensor<2x4x3xf64>, tensor<2x3xi32> -> tensor<2x4x4xf64>, tensor<2x4x3xf64>, tensor<2x3x3xf64>
// CHECK-NEXT:    %lus = aten.linalg_lu_solve %solve_1, %solve_2, %b {adjoint = true} : tensor<2x3x3xf32>, tensor<2x3xi32>, tensor<2x3x2xf32> -> tensor<2x3x2xf32>
// CHECK-NEXT:    %chol, %chol_1 = aten.linalg_cholesky_ex %a {upper = false} : tensor<2x3x3xf32> -> tensor<2x3x3xf32>, tensor<2xi32>
// CHECK-NEXT:    %cholu = aten.cholesky %a {upper = true} : tensor<2x3x3xf32> -> tensor<2x3x3xf32>
// CHECK-NEXT:    %chs = aten.cholesky_solve %b, %chol : tensor<2x3x2xf32>, tensor<2x3x3xf32> -> tensor<2x3x2xf32>
// CHECK-NEXT:    %chi = aten.cholesky_inverse %chol {upper = false} : tensor<2x3x3xf32> -> tensor<2x3x3xf32>
// CHECK-NEXT:    %tri = aten.linalg_solve_triangular %chol, %b {upper = false, left = true} : tensor<2x3x3xf32>, tensor<2x3x2xf32> -> tensor<2x3x2xf32>
// CHECK-NEXT:    %trs, %trs_1 = aten.triangular_solve %b, %chol {upper = false} : tensor<2x3x2xf32>, tensor<2x3x3xf32> -> tensor<2x3x2xf32>, tensor<2x3x3xf32>
// CHECK-NEXT:    %qr, %qr_1 = aten.linalg_qr %r {mode = "complete"} : tensor<2x4x3xf64> -> tensor<2x4x4xf64>, tensor<2x4x3xf64>
// CHECK-NEXT:    %svd, %svd_1, %svd_2 = aten._linalg_svd %r {full_matrices = false, compute_uv = true} : tensor<2x4x3xf64> -> tensor<2x4x3xf64>, tensor<2x3xf64>, tensor<2x3x3xf64>
// CHECK-NEXT:    %eigh, %eigh_1 = aten._linalg_eigh %a {UPLO = "U", compute_v = true} : tensor<2x3x3xf32> -> tensor<2x3xf32>, tensor<2x3x3xf32>
// CHECK-NEXT:    %pinv = aten.linalg_pinv.atol_rtol_tensor %r {hermitian = false} : tensor<2x4x3xf64> -> tensor<2x3x4xf64>
// CHECK-NEXT:    %exp = aten.linalg_matrix_exp %a : tensor<2x3x3xf32> -> tensor<2x3x3xf32>
// CHECK-NEXT:    %mode, %mode_1 = aten.mode %v {dim = -1 : i64, keepdim = false} : tensor<3x5xf32> -> tensor<3xf32>, tensor<3xi64>
// CHECK-NEXT:    func.return %exp : tensor<2x3x3xf32>
// CHECK-NEXT:    }

func.func @dense_linalg(%a: tensor<2x3x3xf32>, %b: tensor<2x3x2xf32>, %r: tensor<2x4x3xf64>, %v: tensor<3x5xf32>) -> tensor<2x3x3xf32> {
  %inv:2 = aten.linalg_inv_ex %a : tensor<2x3x3xf32> -> tensor<2x3x3xf32>, tensor<2xi32>
  aten._linalg_check_errors %inv#1 {api_name = "linalg.inv", is_matrix = false} : tensor<2xi32> -> ()
  %solve:4 = aten._linalg_solve_ex %a, %b {left = true} : tensor<2x3x3xf32>, tensor<2x3x2xf32> -> tensor<2x3x2xf32>, tensor<2x3x3xf32>, tensor<2x3xi32>, tensor<2xi32>
  %det:3 = aten._linalg_det %a : tensor<2x3x3xf32> -> tensor<2xf32>, tensor<2x3x3xf32>, tensor<2x3xi32>
  %sld:4 = aten._linalg_slogdet %a : tensor<2x3x3xf32> -> tensor<2xf32>, tensor<2xf32>, tensor<2x3x3xf32>, tensor<2x3xi32>
  %luf:3 = aten.linalg_lu_factor_ex %r {pivot = true, check_errors = false} : tensor<2x4x3xf64> -> tensor<2x4x3xf64>, tensor<2x3xi32>, tensor<2xi32>
  %lu:3 = aten.linalg_lu %r : tensor<2x4x3xf64> -> tensor<2x4x4xf64>, tensor<2x4x3xf64>, tensor<2x3x3xf64>
  %unp:3 = aten.lu_unpack %luf#0, %luf#1 {unpack_data = true, unpack_pivots = true} : tensor<2x4x3xf64>, tensor<2x3xi32> -> tensor<2x4x4xf64>, tensor<2x4x3xf64>, tensor<2x3x3xf64>
  %lus = aten.linalg_lu_solve %solve#1, %solve#2, %b {adjoint = true} : tensor<2x3x3xf32>, tensor<2x3xi32>, tensor<2x3x2xf32> -> tensor<2x3x2xf32>
  %chol:2 = aten.linalg_cholesky_ex %a {upper = false} : tensor<2x3x3xf32> -> tensor<2x3x3xf32>, tensor<2xi32>
  %cholu = aten.cholesky %a {upper = true} : tensor<2x3x3xf32> -> tensor<2x3x3xf32>
  %chs = aten.cholesky_solve %b, %chol#0 : tensor<2x3x2xf32>, tensor<2x3x3xf32> -> tensor<2x3x2xf32>
  %chi = aten.cholesky_inverse %chol#0 {upper = false} : tensor<2x3x3xf32> -> tensor<2x3x3xf32>
  %tri = aten.linalg_solve_triangular %chol#0, %b {upper = false, left = true} : tensor<2x3x3xf32>, tensor<2x3x2xf32> -> tensor<2x3x2xf32>
  %trs:2 = aten.triangular_solve %b, %chol#0 {upper = false} : tensor<2x3x2xf32>, tensor<2x3x3xf32> -> tensor<2x3x2xf32>, tensor<2x3x3xf32>
  %qr:2 = aten.linalg_qr %r {mode = "complete"} : tensor<2x4x3xf64> -> tensor<2x4x4xf64>, tensor<2x4x3xf64>
  %svd:3 = aten._linalg_svd %r {full_matrices = false, compute_uv = true} : tensor<2x4x3xf64> -> tensor<2x4x3xf64>, tensor<2x3xf64>, tensor<2x3x3xf64>
  %eigh:2 = aten._linalg_eigh %a {UPLO = "U", compute_v = true} : tensor<2x3x3xf32> -> tensor<2x3xf32>, tensor<2x3x3xf32>
  %pinv = aten.linalg_pinv.atol_rtol_tensor %r {hermitian = false} : tensor<2x4x3xf64> -> tensor<2x3x4xf64>
  %exp = aten.linalg_matrix_exp %a : tensor<2x3x3xf32> -> tensor<2x3x3xf32>
  %mode:2 = aten.mode %v {dim = -1 : i64, keepdim = false} : tensor<3x5xf32> -> tensor<3xf32>, tensor<3xi64>
  func.return %exp : tensor<2x3x3xf32>
}

// Ops a review of ~680 op variants found unsupported.
// CHECK-LABEL: func.func @review_ops(%v: tensor<2x3x4x5x6xf32>, %g: tensor<2x3x2x4x3xf32>, %go: tensor<2x3x3x2x4xf32>, %x: tensor<3x4xf32>, %y: tensor<3x4xf32>, %e: tensor<5xf32>, %pts: tensor<6x2xf32>) -> tensor<2x3x3x2x4xf32> {
// CHECK-NEXT:    %gs3 = aten.grid_sampler_3d %v, %g {interpolation_mode = 0 : i64, padding_mode = 1 : i64, align_corners = true} : tensor<2x3x4x5x6xf32>, tensor<2x3x2x4x3xf32> -> tensor<2x3x3x2x4xf32>
// CHECK-NEXT:    %gs3b, %gs3b_1 = aten.grid_sampler_3d_backward %go, %v, %g {interpolation_mode = 0 : i64, padding_mode = 1 : i64, align_corners = true, output_mask = array<i1: true, true>} : tensor<2x3x3x2x4xf32>, tensor<2x3x4x5x6xf32>, tensor<2x3x2x4x3xf32> -> tensor<2x3x4x5x6xf32>, tensor<2x3x2x4x3xf32>
// CHECK-NEXT:    %j1 = aten.special_bessel_j1 %x : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %y0 = aten.special_bessel_y0 %x : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %y1 = aten.special_bessel_y1 %x : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %mi0 = aten.special_modified_bessel_i0 %x : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %mi1 = aten.special_modified_bessel_i1 %x : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %mk0 = aten.special_modified_bessel_k0 %x : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %mk1 = aten.special_modified_bessel_k1 %x : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %sk0 = aten.special_scaled_modified_bessel_k0 %x : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %sk1 = aten.special_scaled_modified_bessel_k1 %x : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %sj0 = aten.special_spherical_bessel_j0 %x : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %zeta = aten.special_zeta %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %igamma = aten.igamma %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %igammac = aten.igammac %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %hist, %hist_1 = aten.histogram.bin_ct %x weight %y {bins = 4 : i64, range = array<f64: -1.000000e+00, 2.000000e+00>, density = true} : tensor<3x4xf32> weight tensor<3x4xf32> -> tensor<4xf32>, tensor<5xf32>
// CHECK-NEXT:    %histe, %histe_1 = aten.histogram.bins_tensor %x, %e {density = false} : tensor<3x4xf32>, tensor<5xf32> -> tensor<4xf32>, tensor<5xf32>
// CHECK-NEXT:    %dde, %dde_1 = aten._histogramdd_bin_edges %pts {bins = array<i64: 3, 2>, density = false} : tensor<6x2xf32> -> tensor<4xf32>, tensor<3xf32>
// CHECK-NEXT:    %ddc = aten._histogramdd_from_bin_cts %pts {bins = array<i64: 3, 2>, range = array<f64: 0.000000e+00, 1.000000e+00, -1.000000e+00, 1.000000e+00>, density = false} : tensor<6x2xf32> -> tensor<3x2xf32>
// CHECK-NEXT:    %ddt = aten._histogramdd_from_bin_tensors %pts, (%e, %dde_1) {density = true} : tensor<6x2xf32>, (tensor<5xf32>, tensor<3xf32>) -> tensor<4x2xf32>
// CHECK-NEXT:    %airy = aten.special_airy_ai %x : tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %p_cpt = aten.special_chebyshev_polynomial_t %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %p_cpu = aten.special_chebyshev_polynomial_u %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %p_cpv = aten.special_chebyshev_polynomial_v %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %p_cpw = aten.special_chebyshev_polynomial_w %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %p_scpt = aten.special_shifted_chebyshev_polynomial_t %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %p_scpu = aten.special_shifted_chebyshev_polynomial_u %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %p_scpv = aten.special_shifted_chebyshev_polynomial_v %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %p_scpw = aten.special_shifted_chebyshev_polynomial_w %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %p_hph = aten.special_hermite_polynomial_h %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %p_hphe = aten.special_hermite_polynomial_he %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %p_lpl = aten.special_laguerre_polynomial_l %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    %p_lpp = aten.special_legendre_polynomial_p %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
// CHECK-NEXT:    func.return %gs3 : tensor<2x3x3x2x4xf32>
// CHECK-NEXT:    }

func.func @review_ops(%v: tensor<2x3x4x5x6xf32>, %g: tensor<2x3x2x4x3xf32>, %go: tensor<2x3x3x2x4xf32>, %x: tensor<3x4xf32>, %y: tensor<3x4xf32>, %e: tensor<5xf32>, %pts: tensor<6x2xf32>) -> tensor<2x3x3x2x4xf32> {
  %gs3 = aten.grid_sampler_3d %v, %g {interpolation_mode = 0 : i64, padding_mode = 1 : i64, align_corners = true} : tensor<2x3x4x5x6xf32>, tensor<2x3x2x4x3xf32> -> tensor<2x3x3x2x4xf32>
  %gs3b:2 = aten.grid_sampler_3d_backward %go, %v, %g {interpolation_mode = 0 : i64, padding_mode = 1 : i64, align_corners = true, output_mask = array<i1: true, true>} : tensor<2x3x3x2x4xf32>, tensor<2x3x4x5x6xf32>, tensor<2x3x2x4x3xf32> -> tensor<2x3x4x5x6xf32>, tensor<2x3x2x4x3xf32>
  %j1 = aten.special_bessel_j1 %x : tensor<3x4xf32> -> tensor<3x4xf32>
  %y0 = aten.special_bessel_y0 %x : tensor<3x4xf32> -> tensor<3x4xf32>
  %y1 = aten.special_bessel_y1 %x : tensor<3x4xf32> -> tensor<3x4xf32>
  %mi0 = aten.special_modified_bessel_i0 %x : tensor<3x4xf32> -> tensor<3x4xf32>
  %mi1 = aten.special_modified_bessel_i1 %x : tensor<3x4xf32> -> tensor<3x4xf32>
  %mk0 = aten.special_modified_bessel_k0 %x : tensor<3x4xf32> -> tensor<3x4xf32>
  %mk1 = aten.special_modified_bessel_k1 %x : tensor<3x4xf32> -> tensor<3x4xf32>
  %sk0 = aten.special_scaled_modified_bessel_k0 %x : tensor<3x4xf32> -> tensor<3x4xf32>
  %sk1 = aten.special_scaled_modified_bessel_k1 %x : tensor<3x4xf32> -> tensor<3x4xf32>
  %sj0 = aten.special_spherical_bessel_j0 %x : tensor<3x4xf32> -> tensor<3x4xf32>
  %zeta = aten.special_zeta %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  %igamma = aten.igamma %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  %igammac = aten.igammac %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  %hist:2 = aten.histogram.bin_ct %x weight %y {bins = 4 : i64, range = array<f64: -1.0, 2.0>, density = true} : tensor<3x4xf32> weight tensor<3x4xf32> -> tensor<4xf32>, tensor<5xf32>
  %histe:2 = aten.histogram.bins_tensor %x, %e {density = false} : tensor<3x4xf32>, tensor<5xf32> -> tensor<4xf32>, tensor<5xf32>
  %dde:2 = aten._histogramdd_bin_edges %pts {bins = array<i64: 3, 2>, density = false} : tensor<6x2xf32> -> tensor<4xf32>, tensor<3xf32>
  %ddc = aten._histogramdd_from_bin_cts %pts {bins = array<i64: 3, 2>, range = array<f64: 0.0, 1.0, -1.0, 1.0>, density = false} : tensor<6x2xf32> -> tensor<3x2xf32>
  %ddt = aten._histogramdd_from_bin_tensors %pts, (%e, %dde#1) {density = true} : tensor<6x2xf32>, (tensor<5xf32>, tensor<3xf32>) -> tensor<4x2xf32>
  %airy = aten.special_airy_ai %x : tensor<3x4xf32> -> tensor<3x4xf32>
  %p_cpt = aten.special_chebyshev_polynomial_t %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  %p_cpu = aten.special_chebyshev_polynomial_u %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  %p_cpv = aten.special_chebyshev_polynomial_v %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  %p_cpw = aten.special_chebyshev_polynomial_w %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  %p_scpt = aten.special_shifted_chebyshev_polynomial_t %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  %p_scpu = aten.special_shifted_chebyshev_polynomial_u %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  %p_scpv = aten.special_shifted_chebyshev_polynomial_v %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  %p_scpw = aten.special_shifted_chebyshev_polynomial_w %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  %p_hph = aten.special_hermite_polynomial_h %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  %p_hphe = aten.special_hermite_polynomial_he %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  %p_lpl = aten.special_laguerre_polynomial_l %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  %p_lpp = aten.special_legendre_polynomial_p %x, %y : tensor<3x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  func.return %gs3 : tensor<2x3x3x2x4xf32>
}

// Ops PopTorch's own tests reach: torch.distributions' argument
// checks and torch.normal(mean, std, size).
// CHECK-LABEL: func.func @poptorch_tests_ops(%m: tensor<3x4xi1>) -> (tensor<i1>, tensor<i1>, tensor<2x3xf32>) {
// CHECK-NEXT:    %all = aten._is_all_true %m : tensor<3x4xi1> -> tensor<i1>
// CHECK-NEXT:    %any = aten._is_any_true %m : tensor<3x4xi1> -> tensor<i1>
// CHECK-NEXT:    %n = aten.normal.float_float {mean = 5.000000e-01 : f64, std = 2.000000e+00 : f64, size = array<i64: 2, 3>} : tensor<2x3xf32>
// CHECK-NEXT:    func.return %all, %any, %n : tensor<i1>, tensor<i1>, tensor<2x3xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:  }
func.func @poptorch_tests_ops(%m: tensor<3x4xi1>) -> (tensor<i1>, tensor<i1>, tensor<2x3xf32>) {
  %all = aten._is_all_true %m : tensor<3x4xi1> -> tensor<i1>
  %any = aten._is_any_true %m : tensor<3x4xi1> -> tensor<i1>
  %n = aten.normal.float_float {mean = 5.000000e-01 : f64, std = 2.000000e+00 : f64, size = array<i64: 2, 3>} : tensor<2x3xf32>
  func.return %all, %any, %n : tensor<i1>, tensor<i1>, tensor<2x3xf32>
}
