// RUN: kiln-opt %s --kgraph-plan-matmul-operands | FileCheck %s
// RUN: kiln-opt %s --kgraph-plan-matmul-operands=conv-input-copies=false | FileCheck %s --check-prefix=NOCOPY

// A linear layer in bf16: the casts of the f32 input and weight are the
// product's loads, and the f32 cast of the product its PSUM evacuation.
// CHECK-LABEL: func.func @bf16_linear
// CHECK: %[[X:.*]] = kgraph.cast %arg0 {kgraph.fold = "loads"}
// CHECK: %[[W:.*]] = kgraph.cast %arg1 {kgraph.fold = "loads"}
// CHECK: %[[P:.*]] = kgraph.matmul %[[X]], %[[W]] :
// CHECK: kgraph.cast %[[P]] {kgraph.fold = "evacuation"}
func.func @bf16_linear(%x: tensor<128x256xf32>, %w: tensor<256x64xf32>) -> tensor<128x64xf32> {
  %xb = kgraph.cast %x : tensor<128x256xf32> -> tensor<128x256xbf16>
  %wb = kgraph.cast %w : tensor<256x64xf32> -> tensor<256x64xbf16>
  %p = kgraph.matmul %xb, %wb : tensor<128x256xbf16>, tensor<256x64xbf16> -> tensor<128x64xbf16>
  %y = kgraph.cast %p : tensor<128x64xbf16> -> tensor<128x64xf32>
  return %y : tensor<128x64xf32>
}

// A cast something besides a matmul reads, and an f32 cast in a fusion
// group, stay where they are.
// CHECK-LABEL: func.func @casts_that_stay
// CHECK: kgraph.cast %arg0 :
// CHECK: kgraph.cast %{{.*}} {kgraph.fusion = 0 : i64}
// CHECK-NOT: kgraph.fold
// CHECK: return
func.func @casts_that_stay(%x: tensor<128x256xf32>, %w: tensor<256x64xbf16>) -> (tensor<128x64xf32>, tensor<128x256xbf16>) {
  %xb = kgraph.cast %x : tensor<128x256xf32> -> tensor<128x256xbf16>
  %p = kgraph.matmul %xb, %w : tensor<128x256xbf16>, tensor<256x64xbf16> -> tensor<128x64xbf16>
  %y = kgraph.cast %p {kgraph.fusion = 0 : i64} : tensor<128x64xbf16> -> tensor<128x64xf32>
  %r = kgraph.relu %y {kgraph.fusion = 0 : i64} : tensor<128x64xf32>
  return %r, %xb : tensor<128x64xf32>, tensor<128x256xbf16>
}

// A group that ends in a bf16 cast whose f32 input nothing else reads
// stores the bf16 value: the cast stays in its group.
// CHECK-LABEL: func.func @group_stores_narrowed
// CHECK: kgraph.cast %{{.*}} {kgraph.fusion = 3 : i64}
// CHECK-NOT: kgraph.fold
func.func @group_stores_narrowed(%x: tensor<128x256xf32>, %w: tensor<256x64xbf16>) -> tensor<128x64xbf16> {
  %r = kgraph.relu %x {kgraph.fusion = 3 : i64} : tensor<128x256xf32>
  %rb = kgraph.cast %r {kgraph.fusion = 3 : i64} : tensor<128x256xf32> -> tensor<128x256xbf16>
  %p = kgraph.matmul %rb, %w : tensor<128x256xbf16>, tensor<256x64xbf16> -> tensor<128x64xbf16>
  return %p : tensor<128x64xbf16>
}

// A ReLU'd activation that a convolution and its weight gradient read as
// bf16 and something else as f32: the group stores the bf16 copy beside the
// f32 value (the cast stays in the group), unless the driver asks for no
// copies, after an HBM overflow. Read by a matmul, the cast is its loads.
// CHECK-LABEL: func.func @conv_input_copy
// CHECK: %[[C:.*]] = kgraph.cast %{{.*}} {kgraph.fusion = 2 : i64}
// CHECK: kgraph.conv %[[C]]
// CHECK-LABEL: func.func @matmul_input_loads
// CHECK: kgraph.cast %{{.*}} {kgraph.fold = "loads"}
// NOCOPY-LABEL: func.func @conv_input_copy
// NOCOPY: kgraph.cast %{{.*}} {kgraph.fold = "loads"}
func.func @conv_input_copy(%x: tensor<2x4x6x6xf32>, %w: tensor<4x4x3x3xbf16>, %g: tensor<2x4x6x6xbf16>) -> (tensor<2x4x6x6xf32>, tensor<2x4x6x6xbf16>, tensor<4x4x3x3xbf16>) {
  %r = kgraph.relu %x {kgraph.fusion = 2 : i64} : tensor<2x4x6x6xf32>
  %rb = kgraph.cast %r {kgraph.fusion = 2 : i64} : tensor<2x4x6x6xf32> -> tensor<2x4x6x6xbf16>
  %y = kgraph.conv %rb, %w {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : tensor<2x4x6x6xbf16>, tensor<4x4x3x3xbf16> -> tensor<2x4x6x6xbf16>
  %dw = kgraph.conv_weight_grad %g, %rb {stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : tensor<2x4x6x6xbf16>, tensor<2x4x6x6xbf16> -> tensor<4x4x3x3xbf16>
  return %r, %y, %dw : tensor<2x4x6x6xf32>, tensor<2x4x6x6xbf16>, tensor<4x4x3x3xbf16>
}
func.func @matmul_input_loads(%x: tensor<128x256xf32>, %w: tensor<256x64xbf16>) -> (tensor<128x256xf32>, tensor<128x64xbf16>) {
  %r = kgraph.relu %x {kgraph.fusion = 2 : i64} : tensor<128x256xf32>
  %rb = kgraph.cast %r {kgraph.fusion = 2 : i64} : tensor<128x256xf32> -> tensor<128x256xbf16>
  %p = kgraph.matmul %rb, %w : tensor<128x256xbf16>, tensor<256x64xbf16> -> tensor<128x64xbf16>
  return %r, %p : tensor<128x256xf32>, tensor<128x64xbf16>
}

// An embedding's gradient: the one-hot matrix, its group and the iota row
// are computed on chip by the product, and leave their fusion group.
// CHECK-LABEL: func.func @one_hot
// CHECK: kgraph.iota {dim = 0 : i64, kgraph.fold = "on_chip"}
// CHECK: kgraph.reshape %arg0 :
// CHECK: kgraph.reshape %{{.*}} {kgraph.fold = "on_chip"}
// CHECK: kgraph.broadcast %{{.*}} {kgraph.fold = "on_chip"}
// CHECK: kgraph.compare "eq", %{{.*}}, %{{.*}} {kgraph.fold = "on_chip"}
// CHECK: kgraph.cast %{{.*}} {kgraph.fold = "on_chip"}
// CHECK-NOT: kgraph.fusion
func.func @one_hot(%ids: tensor<300xi64>, %g: tensor<300x72xf32>) -> tensor<1000x72xf32> {
  %iota = kgraph.iota {dim = 0 : i64} : tensor<1000xi64>
  %col = kgraph.reshape %ids : tensor<300xi64> -> tensor<300x1xi64>
  %colb = kgraph.broadcast %col : tensor<300x1xi64> -> tensor<300x1000xi64>
  %row = kgraph.reshape %iota : tensor<1000xi64> -> tensor<1x1000xi64>
  %rowb = kgraph.broadcast %row : tensor<1x1000xi64> -> tensor<300x1000xi64>
  %eq = kgraph.compare "eq", %colb, %rowb {kgraph.fusion = 1 : i64} : tensor<300x1000xi64>, tensor<300x1000xi64>
  %hot = kgraph.cast %eq {kgraph.fusion = 1 : i64} : tensor<300x1000xi1> -> tensor<300x1000xf32>
  %dw = kgraph.matmul %hot, %g {transpose_lhs = true} : tensor<300x1000xf32>, tensor<300x72xf32> -> tensor<1000x72xf32>
  return %dw : tensor<1000x72xf32>
}

// Read along M (an index_select), the matrix is computed by its loop nest.
// CHECK-LABEL: func.func @one_hot_along_m
// CHECK-NOT: kgraph.fold
// CHECK: return
func.func @one_hot_along_m(%ids: tensor<300xi64>, %t: tensor<1000x72xf32>) -> tensor<300x72xf32> {
  %iota = kgraph.iota {dim = 0 : i64} : tensor<1000xi64>
  %col = kgraph.reshape %ids : tensor<300xi64> -> tensor<300x1xi64>
  %colb = kgraph.broadcast %col : tensor<300x1xi64> -> tensor<300x1000xi64>
  %row = kgraph.reshape %iota : tensor<1000xi64> -> tensor<1x1000xi64>
  %rowb = kgraph.broadcast %row : tensor<1x1000xi64> -> tensor<300x1000xi64>
  %eq = kgraph.compare "eq", %colb, %rowb {kgraph.fusion = 1 : i64} : tensor<300x1000xi64>, tensor<300x1000xi64>
  %hot = kgraph.cast %eq {kgraph.fusion = 1 : i64} : tensor<300x1000xi1> -> tensor<300x1000xf32>
  %rows = kgraph.matmul %hot, %t : tensor<300x1000xf32>, tensor<1000x72xf32> -> tensor<300x72xf32>
  return %rows : tensor<300x72xf32>
}

// An f32 value only bf16 operands read, through views (a fused QKV
// projection's slices), is stored in bf16 by the group that computes it;
// one that is also returned is not.
// CHECK-LABEL: func.func @narrowed_projection
// CHECK: kgraph.add %arg0, %arg1 {kgraph.fusion = 0 : i64, kgraph.narrowed = array<i64: 0>}
// CHECK: kgraph.mul %arg0, %arg1 {kgraph.fusion = 0 : i64} :
func.func @narrowed_projection(%p: tensor<128x256xf32>, %b: tensor<128x256xf32>, %w: tensor<128x64xbf16>) -> (tensor<128x64xf32>, tensor<128x64xf32>, tensor<128x256xf32>) {
  %qkv = kgraph.add %p, %b {kgraph.fusion = 0 : i64} : tensor<128x256xf32>, tensor<128x256xf32>
  %other = kgraph.mul %p, %b {kgraph.fusion = 0 : i64} : tensor<128x256xf32>, tensor<128x256xf32>
  %q = kgraph.slice %qkv {start = array<i64: 0, 0>, limit = array<i64: 128, 128>, stride = array<i64: 1, 1>} : tensor<128x256xf32> -> tensor<128x128xf32>
  %qt = kgraph.transpose %q, [1, 0] : tensor<128x128xf32> -> tensor<128x128xf32>
  %qb = kgraph.cast %qt : tensor<128x128xf32> -> tensor<128x128xbf16>
  %y = kgraph.matmul %qb, %w : tensor<128x128xbf16>, tensor<128x64xbf16> -> tensor<128x64xbf16>
  %yf = kgraph.cast %y : tensor<128x64xbf16> -> tensor<128x64xf32>
  %ob = kgraph.cast %other : tensor<128x256xf32> -> tensor<128x256xbf16>
  %ws = kgraph.concat %w, %w {dim = 0} : (tensor<128x64xbf16>, tensor<128x64xbf16>) -> tensor<256x64xbf16>
  %z = kgraph.matmul %ob, %ws : tensor<128x256xbf16>, tensor<256x64xbf16> -> tensor<128x64xbf16>
  %zf = kgraph.cast %z : tensor<128x64xbf16> -> tensor<128x64xf32>
  return %yf, %zf, %other : tensor<128x64xf32>, tensor<128x64xf32>, tensor<128x256xf32>
}
