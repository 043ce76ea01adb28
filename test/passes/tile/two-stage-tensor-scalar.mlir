// RUN: kiln-opt %s --ktile-fuse-tensor-scalars | FileCheck %s
func.func @two_stages(%arg0: memref<256x768xf32, "hbm">, %arg1: memref<1xf32, "hbm">) -> memref<256x768xf32, "hbm"> attributes {ktile.target = "trn1"} {
  %0 = ktile.alloc : memref<256x768xf32, "hbm">
  %1 = ktile.alloc : memref<128x1536xf32, "sbuf">
  ktile.dma_copy %1, %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1536]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 1536], pstride = 1536>} : memref<128x1536xf32, "sbuf">, memref<256x768xf32, "hbm">
  %2 = ktile.alloc : memref<128x1xf32, "sbuf">
  ktile.dma_copy %2, %arg1 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 1]>} : memref<128x1xf32, "sbuf">, memref<1xf32, "hbm">
  %3 = ktile.alloc : memref<128x1536xf32, "sbuf">
  ktile.tensor_scalar %3, %1, %2 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1536]>, op0 = "div", scalar0 = 0.000000e+00 : f64, scalar_operands = 1 : i64, scalars = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1]>, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1536]>} : memref<128x1536xf32, "sbuf">, memref<128x1536xf32, "sbuf">, memref<128x1xf32, "sbuf">
  %4 = ktile.alloc : memref<128x1536xf32, "sbuf">
  ktile.tensor_scalar %4, %3 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1536]>, op0 = "add", scalar0 = 9.9999999392252903E-9 : f64, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1536]>} : memref<128x1536xf32, "sbuf">, memref<128x1536xf32, "sbuf">
  ktile.dma_copy %0, %4 {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 1536], pstride = 1536>, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1536]>} : memref<256x768xf32, "hbm">, memref<128x1536xf32, "sbuf">
  return %0 : memref<256x768xf32, "hbm">
}

// Two tensor_scalars through an f32 tile that only the second reads are one
// instruction with two ALU stages, (src op0 s0) op1 s1: here AdamW's
// denominator, v / c + eps, with c a runtime scalar (a per-partition scalar
// for the first stage, scalar_operands = 1).
// CHECK-LABEL: func.func @two_stages
// CHECK: ktile.tensor_scalar %{{.*}}, %{{.*}}, %{{.*}} {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1536]>, op0 = "div", op1 = "add", scalar0 = 0.000000e+00 : f64, scalar1 = 9.9999999392252903E-9 : f64, scalar_operands = 1 : i64
// CHECK-NOT: ktile.tensor_scalar
// CHECK: return
func.func @second_per_partition(%arg0: memref<256x768xf32, "hbm">, %arg1: memref<1xf32, "hbm">) -> memref<256x768xf32, "hbm"> attributes {ktile.target = "trn1"} {
  %0 = ktile.alloc : memref<256x768xf32, "hbm">
  %1 = ktile.alloc : memref<128x1536xf32, "sbuf">
  ktile.dma_copy %1, %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1536]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 1536], pstride = 1536>} : memref<128x1536xf32, "sbuf">, memref<256x768xf32, "hbm">
  %2 = ktile.alloc : memref<128x1xf32, "sbuf">
  ktile.dma_copy %2, %arg1 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 1]>} : memref<128x1xf32, "sbuf">, memref<1xf32, "hbm">
  %3 = ktile.alloc : memref<128x1536xf32, "sbuf">
  ktile.tensor_scalar %3, %1 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1536]>, op0 = "mul", scalar0 = 2.000000e+00 : f64, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1536]>} : memref<128x1536xf32, "sbuf">, memref<128x1536xf32, "sbuf">
  %4 = ktile.alloc : memref<128x1536xf32, "sbuf">
  ktile.tensor_scalar %4, %3, %2 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1536]>, op0 = "add", scalar0 = 0.000000e+00 : f64, scalar_operands = 1 : i64, scalars = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1]>, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1536]>} : memref<128x1536xf32, "sbuf">, memref<128x1536xf32, "sbuf">, memref<128x1xf32, "sbuf">
  ktile.dma_copy %0, %4 {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 1536], pstride = 1536>, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1536]>} : memref<256x768xf32, "hbm">, memref<128x1536xf32, "sbuf">
  return %0 : memref<256x768xf32, "hbm">
}

// The second stage's per-partition scalar: scalar_operands = 2.
// CHECK-LABEL: func.func @second_per_partition
// CHECK: ktile.tensor_scalar %{{.*}}, %{{.*}}, %{{.*}} {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1536]>, op0 = "mul", op1 = "add", scalar0 = 2.000000e+00 : f64, scalar1 = 0.000000e+00 : f64, scalar_operands = 2 : i64
// CHECK-NOT: ktile.tensor_scalar
// CHECK: return
func.func @both_per_partition(%arg0: memref<256x768xf32, "hbm">, %arg1: memref<1xf32, "hbm">, %arg2: memref<1xf32, "hbm">) -> memref<256x768xf32, "hbm"> attributes {ktile.target = "trn1"} {
  %0 = ktile.alloc : memref<256x768xf32, "hbm">
  %1 = ktile.alloc : memref<128x1536xf32, "sbuf">
  ktile.dma_copy %1, %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1536]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 1536], pstride = 1536>} : memref<128x1536xf32, "sbuf">, memref<256x768xf32, "hbm">
  %2 = ktile.alloc : memref<128x1xf32, "sbuf">
  ktile.dma_copy %2, %arg1 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 1]>} : memref<128x1xf32, "sbuf">, memref<1xf32, "hbm">
  %3 = ktile.alloc : memref<128x1xf32, "sbuf">
  ktile.dma_copy %3, %arg2 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 1]>} : memref<128x1xf32, "sbuf">, memref<1xf32, "hbm">
  %4 = ktile.alloc : memref<128x1536xf32, "sbuf">
  ktile.tensor_scalar %4, %1, %2 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1536]>, op0 = "div", scalar0 = 0.000000e+00 : f64, scalar_operands = 1 : i64, scalars = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1]>, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1536]>} : memref<128x1536xf32, "sbuf">, memref<128x1536xf32, "sbuf">, memref<128x1xf32, "sbuf">
  %5 = ktile.alloc : memref<128x1536xf32, "sbuf">
  ktile.tensor_scalar %5, %4, %3 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1536]>, op0 = "add", scalar0 = 0.000000e+00 : f64, scalar_operands = 1 : i64, scalars = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1]>, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1536]>} : memref<128x1536xf32, "sbuf">, memref<128x1536xf32, "sbuf">, memref<128x1xf32, "sbuf">
  ktile.dma_copy %0, %5 {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 1536], pstride = 1536>, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1536]>} : memref<256x768xf32, "hbm">, memref<128x1536xf32, "sbuf">
  return %0 : memref<256x768xf32, "hbm">
}
func.func @first_also_stored(%arg0: memref<256x768xf32, "hbm">, %arg1: memref<1xf32, "hbm">) -> (memref<256x768xf32, "hbm">, memref<256x768xf32, "hbm">) attributes {ktile.target = "trn1"} {
  %0 = ktile.alloc : memref<256x768xf32, "hbm">
  %1 = ktile.alloc : memref<256x768xf32, "hbm">
  %2 = ktile.alloc : memref<128x1536xf32, "sbuf">
  ktile.dma_copy %2, %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1536]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 1536], pstride = 1536>} : memref<128x1536xf32, "sbuf">, memref<256x768xf32, "hbm">
  %3 = ktile.alloc : memref<128x1xf32, "sbuf">
  ktile.dma_copy %3, %arg1 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 1]>} : memref<128x1xf32, "sbuf">, memref<1xf32, "hbm">
  %4 = ktile.alloc : memref<128x1536xf32, "sbuf">
  ktile.tensor_scalar %4, %2, %3 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1536]>, op0 = "div", scalar0 = 0.000000e+00 : f64, scalar_operands = 1 : i64, scalars = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1]>, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1536]>} : memref<128x1536xf32, "sbuf">, memref<128x1536xf32, "sbuf">, memref<128x1xf32, "sbuf">
  %5 = ktile.alloc : memref<128x1536xf32, "sbuf">
  ktile.tensor_scalar %5, %4 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1536]>, op0 = "add", scalar0 = 9.9999999392252903E-9 : f64, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1536]>} : memref<128x1536xf32, "sbuf">, memref<128x1536xf32, "sbuf">
  ktile.dma_copy %0, %4 {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 1536], pstride = 1536>, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1536]>} : memref<256x768xf32, "hbm">, memref<128x1536xf32, "sbuf">
  ktile.dma_copy %1, %5 {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 1536], pstride = 1536>, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1536]>} : memref<256x768xf32, "hbm">, memref<128x1536xf32, "sbuf">
  return %1, %0 : memref<256x768xf32, "hbm">, memref<256x768xf32, "hbm">
}

// An integer source (a comparison of token ids) keeps a second stage with
// a per-partition scalar apart: those apply to floating-point sources only.
// CHECK-LABEL: func.func @integer_source
// CHECK: ktile.tensor_scalar {{.*}}op0 = "lt", scalar0
// CHECK: ktile.tensor_scalar {{.*}}op0 = "mul", scalar0
func.func @integer_source(%arg0: memref<256x768xi32, "hbm">, %arg1: memref<1xf32, "hbm">) -> memref<256x768xf32, "hbm"> attributes {ktile.target = "trn1"} {
  %0 = ktile.alloc : memref<256x768xf32, "hbm">
  %1 = ktile.alloc : memref<128x1536xi32, "sbuf">
  ktile.dma_copy %1, %arg0 {dst = #kisa.ap<sbuf, i32, p = 0:128, offset = 0, dims = [1 x 1536]>, src = #kisa.ap<hbm, i32, p = 0:128, offset = 0, dims = [1 x 1536], pstride = 1536>} : memref<128x1536xi32, "sbuf">, memref<256x768xi32, "hbm">
  %2 = ktile.alloc : memref<128x1xf32, "sbuf">
  ktile.dma_copy %2, %arg1 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 1]>} : memref<128x1xf32, "sbuf">, memref<1xf32, "hbm">
  %3 = ktile.alloc : memref<128x1536xf32, "sbuf">
  ktile.tensor_scalar %3, %1 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1536]>, op0 = "lt", scalar0 = 5.000000e+00 : f64, src = #kisa.ap<sbuf, i32, p = 0:128, offset = 0, dims = [1 x 1536]>} : memref<128x1536xf32, "sbuf">, memref<128x1536xi32, "sbuf">
  %4 = ktile.alloc : memref<128x1536xf32, "sbuf">
  ktile.tensor_scalar %4, %3, %2 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1536]>, op0 = "mul", scalar0 = 0.000000e+00 : f64, scalar_operands = 1 : i64, scalars = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1]>, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1536]>} : memref<128x1536xf32, "sbuf">, memref<128x1536xf32, "sbuf">, memref<128x1xf32, "sbuf">
  ktile.dma_copy %0, %4 {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 1536], pstride = 1536>, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 1536]>} : memref<256x768xf32, "hbm">, memref<128x1536xf32, "sbuf">
  return %0 : memref<256x768xf32, "hbm">
}
