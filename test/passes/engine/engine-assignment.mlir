// RUN: kiln-opt %s --convert-ktile-to-kisa | FileCheck %s

// Engine assignment. Two tensor_tensor ops and two tensor_scalar ops read
// one loaded tile. VectorE and GpSimd share an SBUF port on trn1, so their
// SBUF-only instructions run one at a time, and the scheduler puts them on
// GpSimd (1.4 GHz against VectorE's 1.12). The tensor_scalar product runs on
// ScalarE instead, as an identity activation whose bias is -0.0 (x * s + -0
// keeps the sign of a zero product); the comparison has no such form.
// CHECK: kisa.dma_copy {dst = #kisa.ap<sbuf
// CHECK-NEXT: kisa.activation {bias = -0.000000e+00 : f64, {{.*}}func = "identity", scale = 3.000000e+00 : f64
// CHECK-NEXT: kisa.tensor_tensor {{{.*}}engine = "gpsimd", {{.*}}op = "add"
// CHECK-NEXT: kisa.tensor_tensor {{{.*}}engine = "gpsimd", {{.*}}op = "mul"
// CHECK: kisa.tensor_scalar {{{.*}}engine = "gpsimd", op0 = "ge"
// CHECK-NOT: engine = "vector"
module {
  func.func @engines(%arg0: memref<8x128xf32, "hbm">) -> memref<8x128xf32, "hbm"> attributes {ktile.argument_addresses = array<i64: 0>, ktile.hbm_bytes = 8192 : i64} {
    %0 = ktile.alloc {address = 4096 : i64} : memref<8x128xf32, "hbm">
    %1 = ktile.alloc {address = 0 : i64} : memref<8x128xf32, "sbuf">
    ktile.dma_copy %1, %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, src = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "hbm">
    %2 = ktile.alloc {address = 512 : i64} : memref<8x128xf32, "sbuf">
    ktile.tensor_tensor %2, %1, %1 {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, op = "add", lhs = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, rhs = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "sbuf">, memref<8x128xf32, "sbuf">
    %3 = ktile.alloc {address = 1024 : i64} : memref<8x128xf32, "sbuf">
    ktile.tensor_tensor %3, %1, %1 {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, op = "mul", lhs = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, rhs = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "sbuf">, memref<8x128xf32, "sbuf">
    %4 = ktile.alloc {address = 1536 : i64} : memref<8x128xf32, "sbuf">
    ktile.tensor_scalar %4, %1 {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, op0 = "mul", scalar0 = 3.0 : f64, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "sbuf">
    %5 = ktile.alloc {address = 2048 : i64} : memref<8x128xf32, "sbuf">
    ktile.tensor_scalar %5, %1 {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, op0 = "ge", scalar0 = 3.0 : f64, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "sbuf">
    ktile.dma_copy %0, %2 {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "hbm">, memref<8x128xf32, "sbuf">
    ktile.dma_copy %0, %3 {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "hbm">, memref<8x128xf32, "sbuf">
    ktile.dma_copy %0, %4 {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "hbm">, memref<8x128xf32, "sbuf">
    ktile.dma_copy %0, %5 {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "hbm">, memref<8x128xf32, "sbuf">
    return %0 : memref<8x128xf32, "hbm">
  }
}
