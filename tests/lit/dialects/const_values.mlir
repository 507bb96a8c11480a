// RUN: tilefx-opt %s | tilefx-opt | filecheck %s
// RUN: xdsl-opt %s | filecheck %s
// RUN: tilefx-opt %s -p 'ipu-assign-stages,ipu-outline-stages,lower-to-device' | xdsl-opt | filecheck %s --check-prefix=DEVICE

// A lifted constant (`tilefx.const`) carries its value on its argument as
// `tilefx.value`, a builtin dense attribute of the argument's type, in every
// form xDSL prints: a list (up to 100 elements), a splat, MLIR's hex form
// (more than 100), i1 as true/false, bf16. A float constant holding inf or
// NaN carries its bit pattern in the same-width integer type (xDSL 0.74 reads
// the hex float literal it prints for inf back as an integer). The values
// print back unchanged through tilefx-opt and stock xdsl-opt, and the passes
// down to the device level keep them (tilefx-run binds them, docs/ir.md).

// CHECK-LABEL: func.func @main(
// CHECK-SAME: %x: tensor<2x3xf32> {tilefx.input = 0 : i64}
// CHECK-SAME: %mask: tensor<2x3xf32> {tilefx.const = "mask", tilefx.value = dense<{{\[}}[0, -8388608, 0], [0, 0, 2143289344]]> : tensor<2x3xi32>}
// CHECK-SAME: %bias: tensor<3xf32> {tilefx.const = "bias", tilefx.value = dense<[1.500000e+00, -2.000000e+00, 0.333333343]> : tensor<3xf32>}
// CHECK-SAME: %h0: tensor<2x3xf32> {tilefx.const = "h0", tilefx.value = dense<0.000000e+00> : tensor<2x3xf32>}
// CHECK-SAME: %keep: tensor<3xi1> {tilefx.const = "keep", tilefx.value = dense<[true, false, true]> : tensor<3xi1>}
// CHECK-SAME: %order: tensor<3xi64> {tilefx.const = "order", tilefx.value = dense<[2, 0, 1]> : tensor<3xi64>}
// CHECK-SAME: %scale: tensor<3xbf16> {tilefx.const = "scale", tilefx.value = dense<[1.500000e+00, 2.250000e+00, 1.000980e-01]> : tensor<3xbf16>}
// CHECK-SAME: %table: tensor<8x13xi8> {tilefx.const = "table", tilefx.value = dense<"0x000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F202122232425262728292A2B2C2D2E2F303132333435363738393A3B3C3D3E3F404142434445464748494A4B4C4D4E4F505152535455565758595A5B5C5D5E5F6061626364656667"> : tensor<8x13xi8>}

// DEVICE-LABEL: func.func @main(
// DEVICE-SAME: %mask: tensor<2x3xf32> {tilefx.const = "mask", tilefx.value = dense<{{\[}}[0, -8388608, 0], [0, 0, 2143289344]]> : tensor<2x3xi32>, tile.mapping = #tile.linear<
// DEVICE-SAME: %h0: tensor<2x3xf32> {tilefx.const = "h0", tilefx.value = dense<0.000000e+00> : tensor<2x3xf32>, tile.mapping = #tile.linear<
// DEVICE-SAME: %table: tensor<8x13xi8> {tilefx.const = "table", tilefx.value = dense<"0x000102
// DEVICE: tile.host_in %x

func.func @main(%x: tensor<2x3xf32> {tilefx.input = 0 : i64},
    %mask: tensor<2x3xf32> {tilefx.const = "mask", tilefx.value = dense<[[0, -8388608, 0], [0, 0, 2143289344]]> : tensor<2x3xi32>},
    %bias: tensor<3xf32> {tilefx.const = "bias", tilefx.value = dense<[1.5, -2.0, 0.333333343]> : tensor<3xf32>},
    %h0: tensor<2x3xf32> {tilefx.const = "h0", tilefx.value = dense<0.0> : tensor<2x3xf32>},
    %keep: tensor<3xi1> {tilefx.const = "keep", tilefx.value = dense<[true, false, true]> : tensor<3xi1>},
    %order: tensor<3xi64> {tilefx.const = "order", tilefx.value = dense<[2, 0, 1]> : tensor<3xi64>},
    %scale: tensor<3xbf16> {tilefx.const = "scale", tilefx.value = dense<[1.5, 2.25, 0.1]> : tensor<3xbf16>},
    %table: tensor<8x13xi8> {tilefx.const = "table", tilefx.value = dense<"0x000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F202122232425262728292A2B2C2D2E2F303132333435363738393A3B3C3D3E3F404142434445464748494A4B4C4D4E4F505152535455565758595A5B5C5D5E5F6061626364656667"> : tensor<8x13xi8>})
    -> (tensor<2x3xf32> {tilefx.output = 0 : i64}) {
  %0 = aten.add.Tensor %x, %mask {ipu.place = #ipu.place<fwd>} : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %1 = aten.add.Tensor %0, %h0 {ipu.place = #ipu.place<fwd>} : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %2 = aten.add.Tensor %1, %bias {ipu.place = #ipu.place<fwd>} : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  func.return %2 : tensor<2x3xf32>
}
