// RUN: kiln-opt %s --convert-kgraph-to-ktile | FileCheck %s
func.func @two_stages(%x: tensor<256x768xf32>, %s: tensor<f32>) -> tensor<256x768xf32> {
  %eps = kgraph.constant dense<1.0e-08> : tensor<f32>
  %d = kgraph.div %x, %s {kgraph.fusion = 1 : i64} : tensor<256x768xf32>, tensor<f32>
  %e = kgraph.add %d, %eps {kgraph.fusion = 1 : i64} : tensor<256x768xf32>, tensor<f32>
  return %e : tensor<256x768xf32>
}

// Two tensor_scalars through an f32 tile that only the second reads are one
// instruction with two ALU stages, (src op0 s0) op1 s1: here AdamW's
// denominator, v / c + eps, with c a runtime scalar (a per-partition scalar
// for the first stage, scalar_operands = 1).
// CHECK-LABEL: func.func @two_stages
// CHECK: ktile.tensor_scalar %{{.*}}, %{{.*}}, %{{.*}} {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1536]>, op0 = "div", op1 = "add", scalar0 = 0.000000e+00 : f64, scalar1 = 9.9999999392252903E-9 : f64, scalar_operands = 1 : i64
// CHECK-NOT: ktile.tensor_scalar
// CHECK: return
func.func @second_per_partition(%x: tensor<256x768xf32>, %s: tensor<f32>) -> tensor<256x768xf32> {
  %two = kgraph.constant dense<2.0> : tensor<f32>
  %d = kgraph.mul %x, %two {kgraph.fusion = 1 : i64} : tensor<256x768xf32>, tensor<f32>
  %e = kgraph.add %d, %s {kgraph.fusion = 1 : i64} : tensor<256x768xf32>, tensor<f32>
  return %e : tensor<256x768xf32>
}

// The second stage's per-partition scalar: scalar_operands = 2.
// CHECK-LABEL: func.func @second_per_partition
// CHECK: ktile.tensor_scalar %{{.*}}, %{{.*}}, %{{.*}} {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1536]>, op0 = "mul", op1 = "add", scalar0 = 2.000000e+00 : f64, scalar1 = 0.000000e+00 : f64, scalar_operands = 2 : i64
// CHECK-NOT: ktile.tensor_scalar
// CHECK: return
func.func @both_per_partition(%x: tensor<256x768xf32>, %s: tensor<f32>, %t: tensor<f32>) -> tensor<256x768xf32> {
  %d = kgraph.div %x, %s {kgraph.fusion = 1 : i64} : tensor<256x768xf32>, tensor<f32>
  %e = kgraph.add %d, %t {kgraph.fusion = 1 : i64} : tensor<256x768xf32>, tensor<f32>
  return %e : tensor<256x768xf32>
}
func.func @first_also_stored(%x: tensor<256x768xf32>, %s: tensor<f32>) -> (tensor<256x768xf32>, tensor<256x768xf32>) {
  %eps = kgraph.constant dense<1.0e-08> : tensor<f32>
  %d = kgraph.div %x, %s {kgraph.fusion = 1 : i64} : tensor<256x768xf32>, tensor<f32>
  %e = kgraph.add %d, %eps {kgraph.fusion = 1 : i64} : tensor<256x768xf32>, tensor<f32>
  return %e, %d : tensor<256x768xf32>, tensor<256x768xf32>
}

// An integer source (a comparison of token ids) keeps a second stage with
// a per-partition scalar apart: those apply to floating-point sources only.
// CHECK-LABEL: func.func @integer_source
// CHECK: ktile.tensor_scalar {{.*}}op0 = "lt", scalar0
// CHECK: ktile.tensor_scalar {{.*}}op0 = "mul", scalar0
func.func @integer_source(%ids: tensor<256x768xi64>, %s: tensor<f32>) -> tensor<256x768xf32> {
  %five = kgraph.constant dense<5> : tensor<i64>
  %fiveb = kgraph.broadcast %five : tensor<i64> -> tensor<256x768xi64>
  %lt = kgraph.compare "lt", %ids, %fiveb {kgraph.fusion = 1 : i64} : tensor<256x768xi64>, tensor<256x768xi64>
  %f = kgraph.cast %lt {kgraph.fusion = 1 : i64} : tensor<256x768xi1> -> tensor<256x768xf32>
  %e = kgraph.mul %f, %s {kgraph.fusion = 1 : i64} : tensor<256x768xf32>, tensor<f32>
  return %e : tensor<256x768xf32>
}
