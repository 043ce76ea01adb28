// Graphs survive kgraph MLIR -> .kgraph.pb -> kgraph MLIR unchanged, and the
// canonical hash is the same from either form. Source locations differ
// between the two .mlir files, so only the canonical form is compared there.
// RUN: kiln export %s -o %t.kgraph.pb
// RUN: kiln import %t.kgraph.pb | FileCheck %s
// RUN: kiln import %t.kgraph.pb | kiln-opt | FileCheck %s
// RUN: kiln hash %s > %t.from-mlir
// RUN: kiln hash %t.kgraph.pb > %t.from-pb
// RUN: diff %t.from-mlir %t.from-pb
// RUN: kiln import %t.kgraph.pb -o %t.reimported.mlir
// RUN: kiln export %t.reimported.mlir -o %t.again.kgraph.pb
// RUN: kiln hash %t.again.kgraph.pb > %t.again
// RUN: diff %t.from-mlir %t.again
// Exporting twice gives byte-identical files.
// RUN: kiln export %s -o %t.twice.kgraph.pb
// RUN: cmp %t.kgraph.pb %t.twice.kgraph.pb

// CHECK-LABEL: func.func @step(
// CHECK-SAME: %[[X:.*]]: tensor<2x3xf32> {kgraph.name = "x", kgraph.role = "batch_input"}
// CHECK-SAME: %[[W:.*]]: tensor<4x3xbf16> {kgraph.name = "w", kgraph.role = "parameter"}
// CHECK-SAME: %[[S:.*]]: tensor<i64> {kgraph.name = "seed", kgraph.role = "rng_seed"}
// CHECK-SAME: -> (tensor<f32> {kgraph.name = "loss", kgraph.role = "loss"}, tensor<4x3xbf16> {kgraph.aliases = 1 : i64, kgraph.name = "w", kgraph.role = "updated_parameter"})
func.func @step(%x: tensor<2x3xf32> {kgraph.name = "x", kgraph.role = "batch_input"},
                %w: tensor<4x3xbf16> {kgraph.name = "w", kgraph.role = "parameter"},
                %seed: tensor<i64> {kgraph.name = "seed", kgraph.role = "rng_seed"})
    -> (tensor<f32> {kgraph.name = "loss", kgraph.role = "loss"},
        tensor<4x3xbf16> {kgraph.name = "w", kgraph.role = "updated_parameter", kgraph.aliases = 1 : i64}) {
  // Full, splat, bf16 and i1 constants keep their values.
  // CHECK: kgraph.constant dense<{{\[}}[1.000000e+00, 2.000000e+00, 3.000000e+00], [4.000000e+00, 5.000000e+00, 6.000000e+00]]> : tensor<2x3xf32>
  %c = kgraph.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  // CHECK: kgraph.constant dense<5.000000e-01> : tensor<4x3xbf16>
  %h = kgraph.constant dense<0.5> : tensor<4x3xbf16>
  // CHECK: kgraph.constant dense<[true, false, true]> : tensor<3xi1>
  %m = kgraph.constant dense<[true, false, true]> : tensor<3xi1>
  // CHECK: kgraph.constant dense<[1.000000e+00, 2.500000e+00, -3.000000e+00]> : tensor<3xbf16>
  %b = kgraph.constant dense<[1.0, 2.5, -3.0]> : tensor<3xbf16>
  %0 = kgraph.add %x, %c : tensor<2x3xf32>, tensor<2x3xf32>
  // CHECK: kgraph.gelu %{{.*}} {approximate = "tanh"}
  %1 = kgraph.gelu %0 {approximate = "tanh"} : tensor<2x3xf32>
  // CHECK: kgraph.dropout %{{.*}}, %[[S]] {p = 2.500000e-01 : f64, stream = 3 : i64}
  %2, %mask = kgraph.dropout %1, %seed {p = 0.25, stream = 3} : tensor<2x3xf32>, tensor<i64> -> tensor<2x3xf32>, tensor<2x3xi1>
  %f = kgraph.cast %mask : tensor<2x3xi1> -> tensor<2x3xf32>
  %3 = kgraph.mul %2, %f : tensor<2x3xf32>, tensor<2x3xf32>
  // CHECK: kgraph.reduce_sum %{{.*}}, [0, 1] : tensor<2x3xf32> -> tensor<f32>
  %loss = kgraph.reduce_sum %3, [0, 1] : tensor<2x3xf32> -> tensor<f32>
  %4 = kgraph.select %m, %b, %b : tensor<3xi1>, tensor<3xbf16>, tensor<3xbf16>
  %5 = kgraph.sub %w, %h : tensor<4x3xbf16>, tensor<4x3xbf16>
  %6 = kgraph.add %5, %4 : tensor<4x3xbf16>, tensor<3xbf16>
  // CHECK: return
  return %loss, %6 : tensor<f32>, tensor<4x3xbf16>
}
