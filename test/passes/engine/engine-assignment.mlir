// RUN: kiln-opt %s --convert-ktile-to-kisa | FileCheck %s

// Engine assignment. Two tensor_tensor ops and four tensor_scalar ops read
// one loaded tile. VectorE and GpSimd share an SBUF port on trn1, so their
// SBUF-only instructions run one at a time, and the scheduler puts the
// tensor_tensors on GpSimd (1.4 GHz against VectorE's 1.12). The public NKI
// ISA runs tensor_scalar on ScalarE as well, which has its own port: the
// product by a constant, the comparison and the product by a per-partition
// scalar go there. Integer work has no ScalarE form and stays on the shared
// port.
// CHECK: kisa.dma_copy {dst = #kisa.ap<sbuf
// CHECK-DAG: kisa.tensor_tensor {{{.*}}engine = "gpsimd", {{.*}}op = "add"
// CHECK-DAG: kisa.tensor_tensor {{{.*}}engine = "gpsimd", {{.*}}op = "mul"
// CHECK-DAG: kisa.tensor_scalar {{{.*}}engine = "scalar", op0 = "mul", {{.*}}scalar0 = 3.000000e+00
// CHECK-DAG: kisa.tensor_scalar {{{.*}}engine = "scalar", op0 = "ge"
// CHECK-DAG: kisa.tensor_scalar {{{.*}}engine = "scalar", op0 = "mul", {{.*}}scalar_operands = 1 : i64, scalars = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 1]>
// CHECK-DAG: kisa.tensor_scalar {{{.*}}engine = "gpsimd", op0 = "add", {{.*}}src = #kisa.ap<sbuf, i32
// CHECK-NOT: engine = "vector"
module {
  func.func @engines(%arg0: memref<8x128xf32, "hbm">, %arg1: memref<8x128xi32, "hbm">) -> (memref<8x128xf32, "hbm">, memref<8x128xi32, "hbm">) attributes {ktile.argument_addresses = array<i64: 0, 4096>, ktile.hbm_bytes = 20480 : i64} {
    %0 = ktile.alloc {address = 8192 : i64} : memref<8x128xf32, "hbm">
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
    %6 = ktile.alloc {address = 2560 : i64} : memref<8x128xf32, "sbuf">
    ktile.tensor_scalar %6, %1, %1 {dst = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>, op0 = "mul", scalar0 = 0.0 : f64, scalar_operands = 1 : i64, scalars = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 1]>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "sbuf">, memref<8x128xf32, "sbuf">, memref<8x128xf32, "sbuf">
    ktile.dma_copy %0, %2 {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "hbm">, memref<8x128xf32, "sbuf">
    ktile.dma_copy %0, %3 {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "hbm">, memref<8x128xf32, "sbuf">
    ktile.dma_copy %0, %4 {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "hbm">, memref<8x128xf32, "sbuf">
    ktile.dma_copy %0, %5 {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "hbm">, memref<8x128xf32, "sbuf">
    ktile.dma_copy %0, %6 {dst = #kisa.ap<hbm, f32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>, src = #kisa.ap<sbuf, f32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xf32, "hbm">, memref<8x128xf32, "sbuf">
    %7 = ktile.alloc {address = 16384 : i64} : memref<8x128xi32, "hbm">
    %8 = ktile.alloc {address = 3072 : i64} : memref<8x128xi32, "sbuf">
    ktile.dma_copy %8, %arg1 {dst = #kisa.ap<sbuf, i32, p = 0:8, offset = 0, dims = [1 x 128]>, src = #kisa.ap<hbm, i32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>} : memref<8x128xi32, "sbuf">, memref<8x128xi32, "hbm">
    %9 = ktile.alloc {address = 3584 : i64} : memref<8x128xi32, "sbuf">
    ktile.tensor_scalar %9, %8 {dst = #kisa.ap<sbuf, i32, p = 0:8, offset = 0, dims = [1 x 128]>, op0 = "add", scalar0 = 1.0 : f64, src = #kisa.ap<sbuf, i32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xi32, "sbuf">, memref<8x128xi32, "sbuf">
    ktile.dma_copy %7, %9 {dst = #kisa.ap<hbm, i32, p = 0:8, offset = 0, dims = [1 x 128], pstride = 128>, src = #kisa.ap<sbuf, i32, p = 0:8, offset = 0, dims = [1 x 128]>} : memref<8x128xi32, "hbm">, memref<8x128xi32, "sbuf">
    return %0, %7 : memref<8x128xf32, "hbm">, memref<8x128xi32, "hbm">
  }
}
