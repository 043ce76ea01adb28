// y = x * w + x (broadcast over rows), total = sum(y).
func.func @affine(%x: tensor<2x2xf32> {kgraph.name = "x", kgraph.role = "batch_input"},
                  %w: tensor<2xf32> {kgraph.name = "w", kgraph.role = "parameter"})
    -> (tensor<2x2xf32> {kgraph.name = "y", kgraph.role = "metric"},
        tensor<f32> {kgraph.name = "total", kgraph.role = "loss"}) {
  %0 = kgraph.mul %x, %w : tensor<2x2xf32>, tensor<2xf32>
  %1 = kgraph.add %0, %x : tensor<2x2xf32>, tensor<2x2xf32>
  %2 = kgraph.reduce_sum %1, [0, 1] : tensor<2x2xf32> -> tensor<f32>
  return %1, %2 : tensor<2x2xf32>, tensor<f32>
}
