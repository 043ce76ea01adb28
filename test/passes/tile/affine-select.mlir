// RUN: kiln-opt %s --kgraph-plan-tiles --convert-kgraph-to-ktile | FileCheck %s

// A causal mask as a front end traces it: query index >= key index, from
// broadcast iotas. The select that reads it computes it from each
// element's position with affine_select, so the group does not load it.
// 130 rows of 10 x 10, a row's 100 elements on a partition's free axis:
// the query index wraps every 10 columns, so the select is ten boxes of
// 10 columns, box r keeping key indices up to r (r - free index >= 0).
// The constant is the false branch: it fills.
// CHECK-LABEL: func.func @causal_rows
// CHECK: ktile.dma_copy %[[X:.*]], %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 100]>
// CHECK-NOT: ktile.dma_copy
// CHECK: ktile.affine_select %[[S:.*]], %[[X]] {base = 0 : i64, compare = "ge", dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 10]>, fill = -2.000000e+00 : f64, free_step = -1 : i64, partition_step = 0 : i64, src = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 10]>}
// CHECK-NEXT: ktile.affine_select %[[S]], %[[X]] {base = 1 : i64, compare = "ge", dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 40, dims = [1 x 10]>
// CHECK-COUNT-7: ktile.affine_select %[[S]], %[[X]]
// CHECK-NEXT: ktile.affine_select %[[S]], %[[X]] {base = 9 : i64, compare = "ge", dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 360, dims = [1 x 10]>
// CHECK-NEXT: ktile.alloc
// CHECK-NEXT: ktile.tensor_tensor %{{.*}}, %[[S]], %[[X]] {{.*}}op = "mul"
func.func @causal_rows(%x: tensor<130x10x10xf32> {kgraph.name = "x", kgraph.role = "batch_input"}) -> (tensor<130x10x10xf32> {kgraph.name = "y", kgraph.role = "metric"}) {
  %fill = kgraph.constant dense<-2.000000e+00> : tensor<f32>
  %i = kgraph.iota {dim = 0 : i64} : tensor<10xi32>
  %ic = kgraph.reshape %i : tensor<10xi32> -> tensor<10x1xi32>
  %rows = kgraph.broadcast %ic : tensor<10x1xi32> -> tensor<10x10xi32>
  %ir = kgraph.reshape %i : tensor<10xi32> -> tensor<1x10xi32>
  %cols = kgraph.broadcast %ir : tensor<1x10xi32> -> tensor<10x10xi32>
  %mask = kgraph.compare "ge", %rows, %cols : tensor<10x10xi32>, tensor<10x10xi32>
  %s = kgraph.select %mask, %x, %fill {kgraph.fusion = 0 : i64} : tensor<10x10xi1>, tensor<130x10x10xf32>, tensor<f32>
  %y = kgraph.mul %s, %x {kgraph.fusion = 0 : i64} : tensor<130x10x10xf32>, tensor<130x10x10xf32>
  return %y : tensor<130x10x10xf32>
}

// The mask of a language model's attention, negated (key - query > 0)
// with its constant the true branch, over two heads' [256, 256] scores:
// the select keeps a score where the negation holds (key - query <= 0).
// The heads' 256 x 256 elements merge into one dimension (every view
// steps through them alike), split again at the rows so that the queries,
// not the two heads, go on the partitions: each 128-row tile holds
// queries q0 + p, its first query in the expression's base, -1 a
// partition. The mask, computed once by its own group, is never loaded.
// CHECK-LABEL: func.func @causal_heads
// CHECK: ktile.dma_copy %[[X:.*]], %arg0 {dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>
// CHECK-NOT: ktile.dma_copy
// CHECK: ktile.affine_select %{{.*}}, %[[X]] {base = 0 : i64, compare = "le", dst = #kisa.ap<sbuf, f32, p = 0:128, offset = 0, dims = [1 x 256]>, fill = -1.0000000150474662E+30 : f64, free_step = 1 : i64, partition_step = -1 : i64
// CHECK: ktile.affine_select %{{.*}}, %{{.*}} {base = -128 : i64, compare = "le", {{.*}}free_step = 1 : i64, partition_step = -1 : i64
// CHECK: ktile.affine_select %{{.*}}, %{{.*}} {base = 0 : i64, compare = "le"
// CHECK: ktile.affine_select %{{.*}}, %{{.*}} {base = -128 : i64, compare = "le"
// CHECK-NOT: ktile.affine_select
func.func @causal_heads(%x: tensor<2x256x256xf32> {kgraph.name = "x", kgraph.role = "batch_input"}) -> (tensor<2x256x256xf32> {kgraph.name = "y", kgraph.role = "metric"}) {
  %fill = kgraph.constant dense<-1.000000e+30> : tensor<f32>
  %i = kgraph.iota {dim = 0 : i64} : tensor<256xi32>
  %ic = kgraph.reshape %i : tensor<256xi32> -> tensor<256x1xi32>
  %rows = kgraph.broadcast %ic : tensor<256x1xi32> -> tensor<256x256xi32>
  %ir = kgraph.reshape %i : tensor<256xi32> -> tensor<1x256xi32>
  %cols = kgraph.broadcast %ir : tensor<1x256xi32> -> tensor<256x256xi32>
  %d = kgraph.sub %cols, %rows {kgraph.fusion = 0 : i64} : tensor<256x256xi32>, tensor<256x256xi32>
  %zero = kgraph.constant dense<0> : tensor<256x256xi32>
  %keep = kgraph.compare "le", %d, %zero {kgraph.fusion = 0 : i64} : tensor<256x256xi32>, tensor<256x256xi32>
  %mask = kgraph.not %keep {kgraph.fusion = 0 : i64} : tensor<256x256xi1>
  %s = kgraph.select %mask, %fill, %x {kgraph.fusion = 1 : i64} : tensor<256x256xi1>, tensor<f32>, tensor<2x256x256xf32>
  %e = kgraph.exp %s {kgraph.fusion = 1 : i64} : tensor<2x256x256xf32>
  return %e : tensor<2x256x256xf32>
}
