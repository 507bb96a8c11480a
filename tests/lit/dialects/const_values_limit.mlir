// RUN: not tilefx-opt %s 2>&1 | filecheck %s
// RUN: env TILEFX_MAX_CONSTANT_BYTES=1KiB not tilefx-opt %s 2>&1 | filecheck %s --check-prefix=LOW

// Dense constants are bounded by their declared sizes before the parser builds
// any of them (xDSL expands a splat into one number per element): a 300-byte
// file declaring a 6 GB constant is a located diagnostic, not gigabytes of
// memory. The limit is TILEFX_MAX_CONSTANT_BYTES (docs/security.md); the
// second RUN lowers it so the 2 KiB constant of @small goes over.

// CHECK: const_values_limit.mlir:[[# @LINE + 7]]:{{[0-9]+}}: error: the dense constants declare 6,000,002,048 bytes up to here, more than the limit 67,108,864; if the input is trusted, raise it with the environment variable TILEFX_MAX_CONSTANT_BYTES
// CHECK-NOT: Traceback
// LOW: const_values_limit.mlir:[[# @LINE + 2]]:{{[0-9]+}}: error: the dense constants declare 2,048 bytes up to here, more than the limit 1,024
// LOW-NOT: Traceback
func.func @small(%a: tensor<2xf32>, %c: tensor<512xf32> {tilefx.const = "c", tilefx.value = dense<0.0> : tensor<512xf32>}) -> tensor<2xf32> {
  func.return %a : tensor<2xf32>
}
func.func @huge(%a: tensor<2xf32>, %c: tensor<1500000000xf32> {tilefx.const = "c", tilefx.value = dense<0.0> : tensor<1500000000xf32>}) -> tensor<2xf32> {
  func.return %a : tensor<2xf32>
}
