// A training step with a class-label loss: a linear classifier of 4 classes
// on a batch of 8, cross-entropy (log_softmax, nll_loss) and SGD.
func.func @class_step(%x: tensor<8x16xf32> {kgraph.name = "x", kgraph.role = "batch_input"},
                      %y: tensor<8xi32> {kgraph.name = "y", kgraph.role = "batch_input"},
                      %w: tensor<4x16xf32> {kgraph.name = "w", kgraph.role = "parameter"})
    -> (tensor<f32> {kgraph.name = "loss", kgraph.role = "loss"},
        tensor<4x16xf32> {kgraph.aliases = 2 : i64, kgraph.name = "w", kgraph.role = "updated_parameter"}) {
  %logits = kgraph.linear %x, %w : tensor<8x16xf32>, tensor<4x16xf32> -> tensor<8x4xf32>
  %lp = kgraph.log_softmax %logits {dim = 1} : tensor<8x4xf32>
  %loss, %total = kgraph.nll_loss %lp, %y : tensor<8x4xf32>, tensor<8xi32> -> tensor<f32>, tensor<f32>
  %one = kgraph.constant dense<1.0> : tensor<f32>
  %glp = kgraph.nll_loss_backward %one, %lp, %y, %total : tensor<f32>, tensor<8x4xf32>, tensor<8xi32>, tensor<f32> -> tensor<8x4xf32>
  %glogits = kgraph.log_softmax_backward %glp, %lp {dim = 1} : tensor<8x4xf32>
  %gw = kgraph.matmul %glogits, %x {transpose_lhs = true} : tensor<8x4xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %lr = kgraph.constant dense<0.1> : tensor<f32>
  %step = kgraph.mul %gw, %lr : tensor<4x16xf32>, tensor<f32>
  %w2 = kgraph.sub %w, %step : tensor<4x16xf32>, tensor<4x16xf32>
  return %loss, %w2 : tensor<f32>, tensor<4x16xf32>
}
