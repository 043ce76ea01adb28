// RUN: kiln-opt %s --kgraph-plan-tiles --convert-kgraph-to-ktile --ktile-fuse-tensor-scalars --ktile-reuse-dead-tiles | FileCheck %s

// AdamW's second-moment term, (1 - beta2) g g, as PyTorch's trace writes it,
// (g * c) * g: one ScalarE activation squares g * sqrt(c) (sqrt(0.001) =
// 0.0316...), instead of a tensor_scalar and a tensor_tensor on the SBUF
// port VectorE and GpSimd share. Then v * beta2 and the sum.
// CHECK-LABEL: func.func @scaled_then_squared
// CHECK-NOT: ktile.tensor_tensor {{.*}}op = "mul"
// CHECK: ktile.activation %{{[0-9]+}}, %{{[0-9]+}} {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1536]>, func = "square", scale = 0.0316227{{[0-9]*}} : f64
// CHECK-NOT: ktile.tensor_tensor {{.*}}op = "mul"
// CHECK: ktile.tensor_tensor {{.*}}op = "add"
// CHECK: return
func.func @scaled_then_squared(%g: tensor<256x768xf32>, %v: tensor<256x768xf32>) -> tensor<256x768xf32> {
  %c = kgraph.constant dense<1.0e-03> : tensor<f32>
  %beta2 = kgraph.constant dense<0.999> : tensor<f32>
  %kept = kgraph.mul %v, %beta2 {kgraph.fusion = 1 : i64} : tensor<256x768xf32>, tensor<f32>
  %scaled = kgraph.mul %g, %c {kgraph.fusion = 1 : i64} : tensor<256x768xf32>, tensor<f32>
  %added = kgraph.mul %scaled, %g {kgraph.fusion = 1 : i64} : tensor<256x768xf32>, tensor<256x768xf32>
  %v2 = kgraph.add %kept, %added {kgraph.fusion = 1 : i64} : tensor<256x768xf32>, tensor<256x768xf32>
  return %v2 : tensor<256x768xf32>
}

// The builder's order, (g * g) * c, is the same activation.
// CHECK-LABEL: func.func @squared_then_scaled
// CHECK: ktile.activation {{.*}}func = "square", scale = 0.0316227{{[0-9]*}} : f64
// CHECK-NOT: ktile.tensor_tensor {{.*}}op = "mul"
// CHECK-NOT: ktile.tensor_scalar
// CHECK: return
func.func @squared_then_scaled(%g: tensor<256x768xf32>) -> tensor<256x768xf32> {
  %c = kgraph.constant dense<1.0e-03> : tensor<f32>
  %squares = kgraph.mul %g, %g {kgraph.fusion = 1 : i64} : tensor<256x768xf32>, tensor<256x768xf32>
  %added = kgraph.mul %squares, %c {kgraph.fusion = 1 : i64} : tensor<256x768xf32>, tensor<f32>
  return %added : tensor<256x768xf32>
}

// Not when the scaled value is read again (it is computed anyway), nor for
// a negative constant (no square root), nor for a runtime scalar (not known
// when compiling): a tensor_tensor multiplies.
// CHECK-LABEL: func.func @scaled_kept
// CHECK: ktile.tensor_tensor {{.*}}op = "mul"
// CHECK-LABEL: func.func @negative
// CHECK: ktile.tensor_tensor {{.*}}op = "mul"
// CHECK-LABEL: func.func @runtime_scalar
// CHECK: ktile.tensor_tensor {{.*}}op = "mul"
func.func @scaled_kept(%g: tensor<256x768xf32>) -> (tensor<256x768xf32>, tensor<256x768xf32>) {
  %c = kgraph.constant dense<1.0e-03> : tensor<f32>
  %scaled = kgraph.mul %g, %c {kgraph.fusion = 1 : i64} : tensor<256x768xf32>, tensor<f32>
  %added = kgraph.mul %scaled, %g {kgraph.fusion = 1 : i64} : tensor<256x768xf32>, tensor<256x768xf32>
  return %added, %scaled : tensor<256x768xf32>, tensor<256x768xf32>
}
func.func @negative(%g: tensor<256x768xf32>) -> tensor<256x768xf32> {
  %c = kgraph.constant dense<-1.0e-03> : tensor<f32>
  %scaled = kgraph.mul %g, %c {kgraph.fusion = 1 : i64} : tensor<256x768xf32>, tensor<f32>
  %added = kgraph.mul %scaled, %g {kgraph.fusion = 1 : i64} : tensor<256x768xf32>, tensor<256x768xf32>
  return %added : tensor<256x768xf32>
}
func.func @runtime_scalar(%g: tensor<256x768xf32>, %c: tensor<f32>) -> tensor<256x768xf32> {
  %scaled = kgraph.mul %g, %c {kgraph.fusion = 1 : i64} : tensor<256x768xf32>, tensor<f32>
  %added = kgraph.mul %scaled, %g {kgraph.fusion = 1 : i64} : tensor<256x768xf32>, tensor<256x768xf32>
  return %added : tensor<256x768xf32>
}
