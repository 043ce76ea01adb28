// RUN: kiln-opt %s --convert-kgraph-to-ktile | FileCheck %s

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
func.func @chain_in_place(%x: tensor<128x256xf32>, %y: tensor<128x256xf32>) -> tensor<128x256xbf16> {
  %e = kgraph.exp %x {kgraph.fusion = 0 : i64} : tensor<128x256xf32>
  %s = kgraph.mul %e, %y {kgraph.fusion = 0 : i64} : tensor<128x256xf32>, tensor<128x256xf32>
  %t = kgraph.add %s, %e {kgraph.fusion = 0 : i64} : tensor<128x256xf32>, tensor<128x256xf32>
  %c = kgraph.cast %t {kgraph.fusion = 0 : i64} : tensor<128x256xf32> -> tensor<128x256xbf16>
  return %c : tensor<128x256xbf16>
}

// A value the group stores after its last op is still to be read when the
// square is computed: the square gets a tile of its own.
// CHECK-LABEL: func.func @stored_value_kept
// CHECK: ktile.activation %[[E:.*]], %[[E]] {{.*}}func = "exp"
// CHECK-NEXT: %[[S:.*]] = ktile.alloc : memref<128x256xf32, "sbuf">
// CHECK-NEXT: ktile.tensor_tensor %[[S]], %[[E]], %[[E]] {{.*}}op = "mul"
// CHECK-NEXT: ktile.dma_copy %{{.*}}, %[[E]]
// CHECK-NEXT: ktile.dma_copy %{{.*}}, %[[S]]
func.func @stored_value_kept(%x: tensor<128x256xf32>) -> (tensor<128x256xf32>, tensor<128x256xf32>) {
  %e = kgraph.exp %x {kgraph.fusion = 0 : i64} : tensor<128x256xf32>
  %s = kgraph.mul %e, %e {kgraph.fusion = 0 : i64} : tensor<128x256xf32>, tensor<128x256xf32>
  return %e, %s : tensor<128x256xf32>, tensor<128x256xf32>
}

// AdamW's second moment: v * beta2 + square(g * sqrt(c)), then its square
// root. The sum is stored, so the root cannot go over it; the squares' tile
// died in the sum, the op the root reads, and the root takes it over.
// CHECK-LABEL: func.func @second_moment_root
// CHECK: ktile.activation %[[T:[0-9]+]], %{{[0-9]+}} {{.*}}func = "square"
// CHECK-NEXT: ktile.tensor_tensor %[[V:[0-9]+]], %[[V]], %[[T]] {{.*}}op = "add"
// CHECK-NEXT: ktile.activation %[[T]], %[[V]] {{.*}}func = "sqrt"
func.func @second_moment_root(%g: tensor<128x256xbf16>, %v: tensor<128x256xf32>) -> (tensor<128x256xf32>, tensor<128x256xf32>) {
  %beta2 = kgraph.constant dense<0.999> : tensor<f32>
  %c = kgraph.constant dense<1.0e-03> : tensor<f32>
  %gf = kgraph.cast %g {kgraph.fusion = 0 : i64} : tensor<128x256xbf16> -> tensor<128x256xf32>
  %kept = kgraph.mul %v, %beta2 {kgraph.fusion = 0 : i64} : tensor<128x256xf32>, tensor<f32>
  %scaled = kgraph.mul %gf, %c {kgraph.fusion = 0 : i64} : tensor<128x256xf32>, tensor<f32>
  %t2 = kgraph.mul %scaled, %gf {kgraph.fusion = 0 : i64} : tensor<128x256xf32>, tensor<128x256xf32>
  %v2 = kgraph.add %kept, %t2 {kgraph.fusion = 0 : i64} : tensor<128x256xf32>, tensor<128x256xf32>
  %root = kgraph.sqrt %v2 {kgraph.fusion = 0 : i64} : tensor<128x256xf32>
  return %v2, %root : tensor<128x256xf32>, tensor<128x256xf32>
}

// An op that does not read the sum gets a tile of its own: taking over
// the squares' tile would make it wait for the sum.
// CHECK-LABEL: func.func @independent_op_keeps_its_tile
// CHECK: ktile.activation %[[T:[0-9]+]], %{{[0-9]+}} {{.*}}func = "square"
// CHECK-NEXT: ktile.tensor_tensor %[[V:[0-9]+]], %[[V]], %[[T]] {{.*}}op = "add"
// CHECK-NEXT: %[[O:[0-9]+]] = ktile.alloc : memref<128x256xf32, "sbuf">
// CHECK-NEXT: ktile.tensor_scalar %[[O]], %{{[0-9]+}} {{.*}}op0 = "mul"
func.func @independent_op_keeps_its_tile(%g: tensor<128x256xbf16>, %v: tensor<128x256xf32>) -> (tensor<128x256xf32>, tensor<128x256xf32>) {
  %c = kgraph.constant dense<1.0e-03> : tensor<f32>
  %two = kgraph.constant dense<2.0> : tensor<f32>
  %gf = kgraph.cast %g {kgraph.fusion = 0 : i64} : tensor<128x256xbf16> -> tensor<128x256xf32>
  %scaled = kgraph.mul %gf, %c {kgraph.fusion = 0 : i64} : tensor<128x256xf32>, tensor<f32>
  %t2 = kgraph.mul %scaled, %gf {kgraph.fusion = 0 : i64} : tensor<128x256xf32>, tensor<128x256xf32>
  %v2 = kgraph.add %v, %t2 {kgraph.fusion = 0 : i64} : tensor<128x256xf32>, tensor<128x256xf32>
  %other = kgraph.mul %gf, %two {kgraph.fusion = 0 : i64} : tensor<128x256xf32>, tensor<f32>
  return %v2, %other : tensor<128x256xf32>, tensor<128x256xf32>
}
