// RUN: kiln-opt %s --ktile-reuse-dead-tiles | FileCheck %s

// An elementwise op writes its result over a source tile of the same type
// that it reads for the last time: the loaded x takes exp(x), the loaded y
// takes e * y, and that tile takes the sum. e is read again after the
// product, so the product does not go over it; the bf16 cast needs a tile
// of its own type.
// CHECK-LABEL: func.func @chain_in_place
// CHECK: %[[X:.*]] = ktile.alloc : memref<128x256xf32, "sbuf">
// CHECK-NEXT: ktile.dma_copy %[[X]], %arg0
// CHECK-NEXT: %[[Y:.*]] = ktile.alloc : memref<128x256xf32, "sbuf">
// CHECK-NEXT: ktile.dma_copy %[[Y]], %arg1
// CHECK-NEXT: ktile.activation %[[X]], %[[X]] {{.*}}func = "exp"
// CHECK-NEXT: ktile.tensor_tensor %[[Y]], %[[X]], %[[Y]] {{.*}}op = "mul"
// CHECK-NEXT: ktile.tensor_tensor %[[Y]], %[[Y]], %[[X]] {{.*}}op = "add"
// CHECK-NEXT: %[[C:.*]] = ktile.alloc : memref<128x256xbf16, "sbuf">
// CHECK-NEXT: ktile.tensor_copy %[[C]], %[[Y]]
// CHECK-NEXT: ktile.dma_copy %{{.*}}, %[[C]]
func.func @chain_in_place(%arg0: memref<128x256xf32, "hbm">, %arg1: memref<128x256xf32, "hbm">) -> memref<128x256xbf16, "hbm"> attributes {ktile.target = "trn1"} {
  %0 = ktile.alloc : memref<128x256xbf16, "hbm">
  %1 = ktile.alloc : memref<128x256xf32, "sbuf">
  ktile.dma_copy %1, %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 256], pstride = 256>} : memref<128x256xf32, "sbuf">, memref<128x256xf32, "hbm">
  %2 = ktile.alloc : memref<128x256xf32, "sbuf">
  ktile.dma_copy %2, %arg1 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 256], pstride = 256>} : memref<128x256xf32, "sbuf">, memref<128x256xf32, "hbm">
  %3 = ktile.alloc : memref<128x256xf32, "sbuf">
  ktile.activation %3, %1 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>, func = "exp", src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>} : memref<128x256xf32, "sbuf">, memref<128x256xf32, "sbuf">
  %4 = ktile.alloc : memref<128x256xf32, "sbuf">
  ktile.tensor_tensor %4, %3, %2 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>, lhs = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>, op = "mul", rhs = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>} : memref<128x256xf32, "sbuf">, memref<128x256xf32, "sbuf">, memref<128x256xf32, "sbuf">
  %5 = ktile.alloc : memref<128x256xf32, "sbuf">
  ktile.tensor_tensor %5, %4, %3 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>, lhs = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>, op = "add", rhs = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>} : memref<128x256xf32, "sbuf">, memref<128x256xf32, "sbuf">, memref<128x256xf32, "sbuf">
  %6 = ktile.alloc : memref<128x256xbf16, "sbuf">
  ktile.tensor_copy %6, %5 {dst = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 256]>, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>} : memref<128x256xbf16, "sbuf">, memref<128x256xf32, "sbuf">
  ktile.dma_copy %0, %6 {dst = #kisa.ap<hbm, bf16, p = 0:128, offset = 0, dims = [1 x 256], pstride = 256>, src = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 256]>} : memref<128x256xbf16, "hbm">, memref<128x256xbf16, "sbuf">
  return %0 : memref<128x256xbf16, "hbm">
}

// A value the group stores after its last op is still to be read when the
// square is computed: the square gets a tile of its own.
// CHECK-LABEL: func.func @stored_value_kept
// CHECK: ktile.activation %[[E:.*]], %[[E]] {{.*}}func = "exp"
// CHECK-NEXT: %[[S:.*]] = ktile.alloc : memref<128x256xf32, "sbuf">
// CHECK-NEXT: ktile.tensor_tensor %[[S]], %[[E]], %[[E]] {{.*}}op = "mul"
// CHECK-NEXT: ktile.dma_copy %{{.*}}, %[[E]]
// CHECK-NEXT: ktile.dma_copy %{{.*}}, %[[S]]
func.func @stored_value_kept(%arg0: memref<128x256xf32, "hbm">) -> (memref<128x256xf32, "hbm">, memref<128x256xf32, "hbm">) attributes {ktile.target = "trn1"} {
  %0 = ktile.alloc : memref<128x256xf32, "hbm">
  %1 = ktile.alloc : memref<128x256xf32, "hbm">
  %2 = ktile.alloc : memref<128x256xf32, "sbuf">
  ktile.dma_copy %2, %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 256], pstride = 256>} : memref<128x256xf32, "sbuf">, memref<128x256xf32, "hbm">
  %3 = ktile.alloc : memref<128x256xf32, "sbuf">
  ktile.activation %3, %2 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>, func = "exp", src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>} : memref<128x256xf32, "sbuf">, memref<128x256xf32, "sbuf">
  %4 = ktile.alloc : memref<128x256xf32, "sbuf">
  ktile.tensor_tensor %4, %3, %3 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>, lhs = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>, op = "mul", rhs = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>} : memref<128x256xf32, "sbuf">, memref<128x256xf32, "sbuf">, memref<128x256xf32, "sbuf">
  ktile.dma_copy %0, %3 {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 256], pstride = 256>, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>} : memref<128x256xf32, "hbm">, memref<128x256xf32, "sbuf">
  ktile.dma_copy %1, %4 {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 256], pstride = 256>, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>} : memref<128x256xf32, "hbm">, memref<128x256xf32, "sbuf">
  return %0, %1 : memref<128x256xf32, "hbm">, memref<128x256xf32, "hbm">
}

// AdamW's second moment: v * beta2 + square(g * sqrt(c)), then its square
// root. The sum is stored, so the root cannot go over it; the squares' tile
// died in the sum, the op the root reads, and the root takes it over.
// CHECK-LABEL: func.func @second_moment_root
// CHECK: ktile.activation %[[T:[0-9]+]], %{{[0-9]+}} {{.*}}func = "square"
// CHECK-NEXT: ktile.tensor_tensor %[[V:[0-9]+]], %[[V]], %[[T]] {{.*}}op = "add"
// CHECK-NEXT: ktile.activation %[[T]], %[[V]] {{.*}}func = "sqrt"
func.func @second_moment_root(%arg0: memref<128x256xbf16, "hbm">, %arg1: memref<128x256xf32, "hbm">) -> (memref<128x256xf32, "hbm">, memref<128x256xf32, "hbm">) attributes {ktile.target = "trn1"} {
  %0 = ktile.alloc : memref<128x256xf32, "hbm">
  %1 = ktile.alloc : memref<128x256xf32, "hbm">
  %2 = ktile.alloc : memref<128x256xbf16, "sbuf">
  ktile.dma_copy %2, %arg0 {dst = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 256]>, src = #kisa.ap<hbm, bf16, p = 0:128, offset = 0, dims = [1 x 256], pstride = 256>} : memref<128x256xbf16, "sbuf">, memref<128x256xbf16, "hbm">
  %3 = ktile.alloc : memref<128x256xf32, "sbuf">
  ktile.dma_copy %3, %arg1 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 256], pstride = 256>} : memref<128x256xf32, "sbuf">, memref<128x256xf32, "hbm">
  %4 = ktile.alloc : memref<128x256xf32, "sbuf">
  ktile.tensor_scalar %4, %3 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>, op0 = "mul", scalar0 = 0.99900001287460327 : f64, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>} : memref<128x256xf32, "sbuf">, memref<128x256xf32, "sbuf">
  %5 = ktile.alloc : memref<128x256xf32, "sbuf">
  ktile.activation %5, %2 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>, func = "square", scale = 0.031622777352684428 : f64, src = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 256]>} : memref<128x256xf32, "sbuf">, memref<128x256xbf16, "sbuf">
  %6 = ktile.alloc : memref<128x256xf32, "sbuf">
  ktile.tensor_tensor %6, %4, %5 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>, lhs = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>, op = "add", rhs = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>} : memref<128x256xf32, "sbuf">, memref<128x256xf32, "sbuf">, memref<128x256xf32, "sbuf">
  %7 = ktile.alloc : memref<128x256xf32, "sbuf">
  ktile.activation %7, %6 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>, func = "sqrt", src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>} : memref<128x256xf32, "sbuf">, memref<128x256xf32, "sbuf">
  ktile.dma_copy %0, %6 {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 256], pstride = 256>, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>} : memref<128x256xf32, "hbm">, memref<128x256xf32, "sbuf">
  ktile.dma_copy %1, %7 {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 256], pstride = 256>, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>} : memref<128x256xf32, "hbm">, memref<128x256xf32, "sbuf">
  return %0, %1 : memref<128x256xf32, "hbm">, memref<128x256xf32, "hbm">
}

// An op that does not read the sum gets a tile of its own: taking over
// the squares' tile would make it wait for the sum.
// CHECK-LABEL: func.func @independent_op_keeps_its_tile
// CHECK: ktile.activation %[[T:[0-9]+]], %{{[0-9]+}} {{.*}}func = "square"
// CHECK-NEXT: ktile.tensor_tensor %[[V:[0-9]+]], %[[V]], %[[T]] {{.*}}op = "add"
// CHECK-NEXT: %[[O:[0-9]+]] = ktile.alloc : memref<128x256xf32, "sbuf">
// CHECK-NEXT: ktile.tensor_scalar %[[O]], %{{[0-9]+}} {{.*}}op0 = "mul"
func.func @independent_op_keeps_its_tile(%arg0: memref<128x256xbf16, "hbm">, %arg1: memref<128x256xf32, "hbm">) -> (memref<128x256xf32, "hbm">, memref<128x256xf32, "hbm">) attributes {ktile.target = "trn1"} {
  %0 = ktile.alloc : memref<128x256xf32, "hbm">
  %1 = ktile.alloc : memref<128x256xf32, "hbm">
  %2 = ktile.alloc : memref<128x256xbf16, "sbuf">
  ktile.dma_copy %2, %arg0 {dst = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 256]>, src = #kisa.ap<hbm, bf16, p = 0:128, offset = 0, dims = [1 x 256], pstride = 256>} : memref<128x256xbf16, "sbuf">, memref<128x256xbf16, "hbm">
  %3 = ktile.alloc : memref<128x256xf32, "sbuf">
  ktile.dma_copy %3, %arg1 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>, src = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 256], pstride = 256>} : memref<128x256xf32, "sbuf">, memref<128x256xf32, "hbm">
  %4 = ktile.alloc : memref<128x256xf32, "sbuf">
  ktile.activation %4, %2 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>, func = "square", scale = 0.031622777352684428 : f64, src = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 256]>} : memref<128x256xf32, "sbuf">, memref<128x256xbf16, "sbuf">
  %5 = ktile.alloc : memref<128x256xf32, "sbuf">
  ktile.tensor_tensor %5, %3, %4 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>, lhs = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>, op = "add", rhs = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>} : memref<128x256xf32, "sbuf">, memref<128x256xf32, "sbuf">, memref<128x256xf32, "sbuf">
  %6 = ktile.alloc : memref<128x256xf32, "sbuf">
  ktile.tensor_scalar %6, %2 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>, op0 = "mul", scalar0 = 2.000000e+00 : f64, src = #kisa.ap<sbuf, bf16, p = 0:128, offset = 0, dims = [1 x 256]>} : memref<128x256xf32, "sbuf">, memref<128x256xbf16, "sbuf">
  ktile.dma_copy %0, %5 {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 256], pstride = 256>, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>} : memref<128x256xf32, "hbm">, memref<128x256xf32, "sbuf">
  ktile.dma_copy %1, %6 {dst = #kisa.ap<hbm, f32, p = 0:128, offset = 0, dims = [1 x 256], pstride = 256>, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>} : memref<128x256xf32, "hbm">, memref<128x256xf32, "sbuf">
  return %0, %1 : memref<128x256xf32, "hbm">, memref<128x256xf32, "hbm">
}
