// RUN: kiln-opt %s -split-input-file -verify-diagnostics
// Every kgraph verifier error, one case each.

// A constant must be dense.
func.func @constant_sparse() {
  // expected-error @+1 {{value must be dense elements}}
  %0 = kgraph.constant sparse<[[0, 0]], [1.0]> : tensor<2x2xf32>
  return
}

// -----

// Element types outside the kgraph set are refused.
func.func @bad_element_type(%a: tensor<4xf64>) {
  // expected-error @+1 {{must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float or 32-bit signless integer or 64-bit signless integer values}}
  %0 = kgraph.neg %a : tensor<4xf64>
  return
}

// -----

// Shapes must be static.
func.func @dynamic_shape(%a: tensor<?xf32>) {
  // expected-error @+1 {{must be statically shaped tensor}}
  %0 = kgraph.exp %a : tensor<?xf32>
  return
}

// -----

// iota produces at least one dimension.
func.func @iota_rank0() {
  // expected-error @+1 {{result must have rank >= 1}}
  %0 = kgraph.iota {dim = 0} : tensor<i64>
  return
}

// -----

func.func @iota_dim() {
  // expected-error @+1 {{iota dim 2 is out of range for rank 2}}
  %0 = kgraph.iota {dim = 2} : tensor<4x4xi64>
  return
}

// -----

// Binary operands broadcast with NumPy rules.
func.func @broadcast_mismatch(%a: tensor<4x8xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{operand shapes [4, 8] and [3] are not broadcast-compatible}}
  %0 = kgraph.add %a, %b : tensor<4x8xf32>, tensor<3xf32>
  return
}

// -----

// Binary operands share one element type.
func.func @mixed_types(%a: tensor<4xf32>, %b: tensor<4xbf16>) {
  // expected-error @+1 {{requires the same element type for all operands and results}}
  %0 = "kgraph.mul"(%a, %b) : (tensor<4xf32>, tensor<4xbf16>) -> tensor<4xf32>
  return
}

// -----

// A declared result type must be the inferred one.
func.func @wrong_result_shape(%a: tensor<4xf32>, %b: tensor<4xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<5xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = "kgraph.add"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<5xf32>
  return
}

// -----

func.func @compare_direction(%a: tensor<4xf32>) {
  // expected-error @+1 {{attribute 'direction' failed to satisfy constraint: string attribute one of: eq, ne, lt, le, gt, ge}}
  %0 = kgraph.compare "less", %a, %a : tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @select_types(%c: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xi32>) {
  // expected-error @+1 {{on_true and on_false must have the same element type}}
  %0 = kgraph.select %c, %a, %b : tensor<4xi1>, tensor<4xf32>, tensor<4xi32>
  return
}

// -----

func.func @gelu_approximation(%a: tensor<4xf32>) {
  // expected-error @+1 {{attribute 'approximate' failed to satisfy constraint: string attribute one of: none, tanh}}
  %0 = kgraph.gelu %a {approximate = "fast"} : tensor<4xf32>
  return
}

// -----

func.func @cast_shape(%a: tensor<4xf32>) {
  // expected-error @+1 {{all non-scalar operands/results must have the same shape and base type}}
  %0 = kgraph.cast %a : tensor<4xf32> -> tensor<5xbf16>
  return
}

// -----

func.func @reshape_count(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{cannot reshape 32 elements into 30}}
  %0 = kgraph.reshape %a : tensor<4x8xf32> -> tensor<5x6xf32>
  return
}

// -----

func.func @transpose_length(%a: tensor<4x8xf32>) {
  // expected-error @+2 {{permutation has 3 entries for an input of rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kgraph.transpose %a, [0, 1, 2] : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @transpose_repeat(%a: tensor<4x8xf32>) {
  // expected-error @+2 {{permutation [1, 1] is not a permutation of the input dims}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kgraph.transpose %a, [1, 1] : tensor<4x8xf32> -> tensor<8x8xf32>
  return
}

// -----

func.func @broadcast_shape(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{cannot broadcast [4, 8] to [4, 9]}}
  %0 = kgraph.broadcast %a : tensor<4x8xf32> -> tensor<4x9xf32>
  return
}

// -----

func.func @slice_entries(%a: tensor<4x8xf32>) {
  // expected-error @+2 {{start, limit and stride need one entry per dim (rank 2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kgraph.slice %a {start = array<i64: 0>, limit = array<i64: 4>, stride = array<i64: 1>} : tensor<4x8xf32> -> tensor<4xf32>
  return
}

// -----

func.func @slice_bounds(%a: tensor<4x8xf32>) {
  // expected-error @+2 {{slice [0:9:1] is invalid for dim 1 of size 8}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kgraph.slice %a {start = array<i64: 0, 0>, limit = array<i64: 4, 9>, stride = array<i64: 1, 1>} : tensor<4x8xf32> -> tensor<4x9xf32>
  return
}

// -----

func.func @concat_empty() {
  // expected-error @+1 {{expected 1 or more operands, but found 0}}
  %0 = "kgraph.concat"() {dim = 0 : i64} : () -> tensor<4xf32>
  return
}

// -----

func.func @concat_dim(%a: tensor<4xf32>) {
  // expected-error @+2 {{concat dim 1 is out of range for rank 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kgraph.concat %a, %a {dim = 1} : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @concat_rank(%a: tensor<4xf32>, %b: tensor<4x1xf32>) {
  // expected-error @+2 {{all concat inputs must have the same rank}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kgraph.concat %a, %b {dim = 0} : (tensor<4xf32>, tensor<4x1xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @concat_other_dim(%a: tensor<4x2xf32>, %b: tensor<4x3xf32>) {
  // expected-error @+2 {{concat inputs differ in dim 1, which is not the concat dim}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kgraph.concat %a, %b {dim = 0} : (tensor<4x2xf32>, tensor<4x3xf32>) -> tensor<8x2xf32>
  return
}

// -----

func.func @gather_rank(%a: tensor<4x8xf32>, %i: tensor<4xi64>) {
  // expected-error @+2 {{gather index must have the input's rank}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kgraph.gather %a, %i {dim = 1} : tensor<4x8xf32>, tensor<4xi64> -> tensor<4xf32>
  return
}

// -----

func.func @gather_dim(%a: tensor<4x8xf32>, %i: tensor<4x2xi64>) {
  // expected-error @+2 {{gather dim 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kgraph.gather %a, %i {dim = 2} : tensor<4x8xf32>, tensor<4x2xi64> -> tensor<4x2xf32>
  return
}

// -----

func.func @gather_index_size(%a: tensor<4x8xf32>, %i: tensor<5x2xi64>) {
  // expected-error @+2 {{gather index is larger than the input in dim 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kgraph.gather %a, %i {dim = 1} : tensor<4x8xf32>, tensor<5x2xi64> -> tensor<5x2xf32>
  return
}

// -----

func.func @gather_index_type(%a: tensor<4x8xf32>, %i: tensor<4x2xf32>) {
  // expected-error @+1 {{operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = kgraph.gather %a, %i {dim = 1} : tensor<4x8xf32>, tensor<4x2xf32> -> tensor<4x2xf32>
  return
}

// -----

func.func @scatter_source_type(%a: tensor<4x8xf32>, %i: tensor<4x2xi64>, %s: tensor<4x2xi32>) {
  // expected-error @+2 {{scatter_add source must have the input's element type}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kgraph.scatter_add %a, %i, %s {dim = 1} : tensor<4x8xf32>, tensor<4x2xi64>, tensor<4x2xi32> -> tensor<4x8xf32>
  return
}

// -----

func.func @scatter_rank(%a: tensor<4x8xf32>, %i: tensor<4xi64>, %s: tensor<4xf32>) {
  // expected-error @+2 {{scatter_add index and source must have the input's rank}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kgraph.scatter_add %a, %i, %s {dim = 1} : tensor<4x8xf32>, tensor<4xi64>, tensor<4xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @scatter_dim(%a: tensor<4x8xf32>, %i: tensor<4x2xi64>, %s: tensor<4x2xf32>) {
  // expected-error @+2 {{scatter_add dim -1 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kgraph.scatter_add %a, %i, %s {dim = -1} : tensor<4x8xf32>, tensor<4x2xi64>, tensor<4x2xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @scatter_index_size(%a: tensor<4x8xf32>, %i: tensor<4x3xi64>, %s: tensor<4x2xf32>) {
  // expected-error @+2 {{scatter_add index is too large in dim 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kgraph.scatter_add %a, %i, %s {dim = 1} : tensor<4x8xf32>, tensor<4x3xi64>, tensor<4x2xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @index_select_rank(%a: tensor<4x8xf32>, %i: tensor<2x2xi64>) {
  // expected-error @+2 {{index_select index must have rank 0 or 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kgraph.index_select %a, %i {dim = 1} : tensor<4x8xf32>, tensor<2x2xi64> -> tensor<4x4xf32>
  return
}

// -----

func.func @index_select_dim(%a: tensor<4x8xf32>, %i: tensor<2xi64>) {
  // expected-error @+2 {{index_select dim 3 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kgraph.index_select %a, %i {dim = 3} : tensor<4x8xf32>, tensor<2xi64> -> tensor<4x2xf32>
  return
}

// -----

func.func @embedding_rank(%w: tensor<10xf32>, %i: tensor<2xi64>) {
  // expected-error @+2 {{embedding weight must have rank 2 [V, D]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kgraph.embedding %w, %i : tensor<10xf32>, tensor<2xi64> -> tensor<2x10xf32>
  return
}

// -----

func.func @embedding_backward_shape(%g: tensor<2x16xf32>, %i: tensor<3xi64>) {
  // expected-error @+2 {{embedding_backward grad_output must be indices' shape plus the embedding dim}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kgraph.embedding_backward %g, %i {num_weights = 10} : tensor<2x16xf32>, tensor<3xi64> -> tensor<10x16xf32>
  return
}

// -----

func.func @embedding_backward_negative_rows(%g: tensor<2x16xf32>, %i: tensor<2xi64>) {
  // expected-error @+2 {{embedding_backward num_weights must be positive}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kgraph.embedding_backward %g, %i {num_weights = -3} : tensor<2x16xf32>, tensor<2xi64> -> tensor<3x16xf32>
  return
}

// -----

func.func @embedding_backward_rows(%g: tensor<2x16xf32>, %i: tensor<2xi64>) {
  // expected-error @+2 {{embedding_backward num_weights must be positive}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kgraph.embedding_backward %g, %i {num_weights = 0} : tensor<2x16xf32>, tensor<2xi64> -> tensor<0x16xf32>
  return
}

// -----

func.func @matmul_rank(%a: tensor<8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+2 {{matmul operands must have rank >= 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kgraph.matmul %a, %b : tensor<8xf32>, tensor<8x4xf32> -> tensor<4xf32>
  return
}

// -----

func.func @matmul_contraction(%a: tensor<2x8xf32>, %b: tensor<7x4xf32>) {
  // expected-error @+2 {{matmul contraction sizes differ: 8 vs 7}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kgraph.matmul %a, %b : tensor<2x8xf32>, tensor<7x4xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<3x2x8xf32>, %b: tensor<2x8x4xf32>) {
  // expected-error @+2 {{matmul batch dims are not broadcast-compatible}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kgraph.matmul %a, %b : tensor<3x2x8xf32>, tensor<2x8x4xf32> -> tensor<3x2x4xf32>
  return
}

// -----

func.func @linear_weight_rank(%x: tensor<2x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+2 {{linear needs input of rank >= 1 and weight [out, in]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kgraph.linear %x, %w : tensor<2x8xf32>, tensor<8xf32> -> tensor<2xf32>
  return
}

// -----

func.func @linear_features(%x: tensor<2x8xf32>, %w: tensor<4x7xf32>) {
  // expected-error @+2 {{linear input features 8 do not match weight [out, in] = [4, 7]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kgraph.linear %x, %w : tensor<2x8xf32>, tensor<4x7xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @linear_bias(%x: tensor<2x8xf32>, %w: tensor<4x8xf32>, %b: tensor<8xf32>) {
  // expected-error @+2 {{linear bias must have shape [out]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kgraph.linear %x, %w, %b : tensor<2x8xf32>, tensor<4x8xf32>, tensor<8xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @reduce_dim(%a: tensor<4x8xf32>) {
  // expected-error @+2 {{reduction dim 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kgraph.reduce_sum %a, [2] : tensor<4x8xf32> -> tensor<4xf32>
  return
}

// -----

func.func @reduce_repeat(%a: tensor<4x8xf32>) {
  // expected-error @+2 {{reduction dim 1 is repeated}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kgraph.reduce_max %a, [1, 1] : tensor<4x8xf32> -> tensor<4xf32>
  return
}

// -----

func.func @reduce_mean_int(%a: tensor<4x8xi32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float values}}
  %0 = kgraph.reduce_mean %a, [1] : tensor<4x8xi32> -> tensor<4xi32>
  return
}

// -----

func.func @argmax_dim(%a: tensor<4x8xf32>) {
  // expected-error @+2 {{reduction dim 5 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kgraph.argmax %a {dim = 5} : tensor<4x8xf32> -> tensor<4xi64>
  return
}

// -----

func.func @softmax_dim(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{softmax dim 2 is out of range for rank 2}}
  %0 = kgraph.softmax %a {dim = 2} : tensor<4x8xf32>
  return
}

// -----

func.func @softmax_backward_dim(%g: tensor<4x8xf32>, %y: tensor<4x8xf32>) {
  // expected-error @+1 {{softmax dim -1 is out of range for rank 2}}
  %0 = kgraph.log_softmax_backward %g, %y {dim = -1} : tensor<4x8xf32>
  return
}

// -----

func.func @layer_norm_rank(%x: tensor<4x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+2 {{layer_norm normalized_rank 3 must be in [1, input rank 2]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:3 = kgraph.layer_norm %x, %w, %w {normalized_rank = 3} : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>
  return
}

// -----

func.func @layer_norm_weight(%x: tensor<4x8xf32>, %w: tensor<4xf32>, %b: tensor<8xf32>) {
  // expected-error @+2 {{layer_norm weight must have the normalized shape [8] and the input's element type}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:3 = kgraph.layer_norm %x, %w, %b {normalized_rank = 1} : tensor<4x8xf32>, tensor<4xf32>, tensor<8xf32> -> tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>
  return
}

// -----

func.func @layer_norm_bias(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xbf16>) {
  // expected-error @+2 {{layer_norm bias must have the normalized shape [8] and the input's element type}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:3 = kgraph.layer_norm %x, %w, %b {normalized_rank = 1} : tensor<4x8xf32>, tensor<8xf32>, tensor<8xbf16> -> tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>
  return
}

// -----

func.func @layer_norm_epsilon(%x: tensor<4x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{attribute 'epsilon' failed to satisfy constraint: 64-bit float attribute a positive number}}
  %0:3 = kgraph.layer_norm %x, %w, %w {normalized_rank = 1, epsilon = 0.0} : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>
  return
}

// -----

func.func @layer_norm_backward_grad(%g: tensor<4x4xf32>, %x: tensor<4x8xf32>, %s: tensor<4x1xf32>, %w: tensor<8xf32>) {
  // expected-error @+2 {{layer_norm_backward grad_output must have the input's type}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:3 = kgraph.layer_norm_backward %g, %x, %s, %s, %w {normalized_rank = 1} : tensor<4x4xf32>, tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>, tensor<8xf32> -> tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  return
}

// -----

func.func @layer_norm_backward_stats(%x: tensor<4x8xf32>, %s: tensor<4xf32>, %w: tensor<8xf32>) {
  // expected-error @+2 {{layer_norm_backward mean and rstd must have type [4, 1]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:3 = kgraph.layer_norm_backward %x, %x, %s, %s, %w {normalized_rank = 1} : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<8xf32> -> tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>
  return
}

// -----

func.func @nll_input_rank(%x: tensor<2x3x4xf32>, %y: tensor<2xi64>) {
  // expected-error @+2 {{nll_loss input must be [N, C] or [C]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = kgraph.nll_loss %x, %y : tensor<2x3x4xf32>, tensor<2xi64> -> tensor<f32>, tensor<f32>
  return
}

// -----

func.func @nll_target(%x: tensor<2x4xf32>, %y: tensor<3xi64>) {
  // expected-error @+2 {{nll_loss target must be [N] for input [N, C] and a scalar for input [C]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = kgraph.nll_loss %x, %y : tensor<2x4xf32>, tensor<3xi64> -> tensor<f32>, tensor<f32>
  return
}

// -----

func.func @nll_reduction(%x: tensor<2x4xf32>, %y: tensor<2xi64>) {
  // expected-error @+1 {{attribute 'reduction' failed to satisfy constraint: string attribute one of: none, mean, sum}}
  %0:2 = kgraph.nll_loss %x, %y {reduction = "avg"} : tensor<2x4xf32>, tensor<2xi64> -> tensor<f32>, tensor<f32>
  return
}

// -----

func.func @nll_backward_grad(%g: tensor<2xf32>, %x: tensor<2x4xf32>, %y: tensor<2xi64>, %t: tensor<f32>) {
  // expected-error @+2 {{nll_loss_backward grad_output must have the loss's type}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = kgraph.nll_loss_backward %g, %x, %y, %t : tensor<2xf32>, tensor<2x4xf32>, tensor<2xi64>, tensor<f32> -> tensor<2x4xf32>
  return
}

// -----

func.func @dropout_p(%x: tensor<4xf32>, %s: tensor<i64>) {
  // expected-error @+1 {{attribute 'p' failed to satisfy constraint: 64-bit float attribute a probability in [0, 1)}}
  %0:2 = kgraph.dropout %x, %s {p = 1.0} : tensor<4xf32>, tensor<i64> -> tensor<4xf32>, tensor<4xi1>
  return
}

// -----

func.func @dropout_seed(%x: tensor<4xf32>, %s: tensor<1xi64>) {
  // expected-error @+1 {{operand #1 must be 0D tensor of 64-bit signless integer values}}
  %0:2 = kgraph.dropout %x, %s {p = 0.5} : tensor<4xf32>, tensor<1xi64> -> tensor<4xf32>, tensor<4xi1>
  return
}

// -----

func.func @all_reduce_kind(%x: tensor<4xf32>) {
  // expected-error @+1 {{attribute 'reduction' failed to satisfy constraint: string attribute one of: sum, mean}}
  %0 = kgraph.all_reduce %x {reduction = "max"} : tensor<4xf32>
  return
}

// -----

func.func @collective_group(%x: tensor<4xf32>) {
  // expected-error @+1 {{attribute 'group' failed to satisfy constraint: string attribute one of: data, tensor}}
  %0 = kgraph.all_reduce %x {group = "pipeline"} : tensor<4xf32>
  return
}

// -----

func.func @all_gather_shape(%x: tensor<4x2xi32>) {
  // expected-error @+1 {{gathers a whole number of its operand 'tensor<4x2xi32>' along the first dimension, not 'tensor<10x2xi32>'}}
  %0 = kgraph.all_gather %x : tensor<4x2xi32> -> tensor<10x2xi32>
  return
}

// -----

func.func @all_gather_type(%x: tensor<4xi32>) {
  // expected-error @+1 {{gathers a whole number of its operand 'tensor<4xi32>' along the first dimension, not 'tensor<8xi64>'}}
  %0 = kgraph.all_gather %x : tensor<4xi32> -> tensor<8xi64>
  return
}

// -----

func.func @reduce_scatter_shape(%x: tensor<10x2xf32>) {
  // expected-error @+1 {{keeps one of a whole number of blocks of rows of 'tensor<10x2xf32>', not 'tensor<4x2xf32>'}}
  %0 = kgraph.reduce_scatter %x {reduction = "mean"} : tensor<10x2xf32> -> tensor<4x2xf32>
  return
}

// -----

func.func @worker_shard_columns(%x: tensor<8x4xf32>) {
  // expected-error @+1 {{takes one of a whole number of blocks of rows of 'tensor<8x4xf32>', not 'tensor<8x1xf32>'}}
  %0 = kgraph.worker_shard %x : tensor<8x4xf32> -> tensor<8x1xf32>
  return
}

// -----

func.func @gradient_of_integers(%x: tensor<4xi64>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float values}}
  %0 = kgraph.gradient %x {parameter = "p.x"} : tensor<4xi64>
  return
}

// -----

func.func @gradient_names_its_parameter(%x: tensor<4xf32>) {
  // expected-error @+1 {{requires attribute 'parameter'}}
  %0 = kgraph.gradient %x : tensor<4xf32>
  return
}

// -----

func.func @checkpoint_side(%x: tensor<4xf32>) {
  // expected-error @+1 {{attribute 'side' failed to satisfy constraint: string attribute one of: input, output}}
  %0 = kgraph.checkpoint %x {region = 0, side = "inside"} : tensor<4xf32>
  return
}

// -----

func.func @checkpoint_region(%x: tensor<4xf32>) {
  // expected-error @+1 {{attribute 'region' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  %0 = kgraph.checkpoint %x {region = -1, side = "input"} : tensor<4xf32>
  return
}

// -----

// Convolution: weight channels per group.
func.func @conv_group_channels(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+2 {{conv weight [6, 4, 3, 3] must have 2 input channels per group (input [1, 4, 8, 8], groups 2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = kgraph.conv %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 2} : tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32> -> tensor<1x6x6x6xf32>
  return
}

// -----

// Convolution: groups must divide the channels.
func.func @conv_groups_divide(%x: tensor<1x4x8x8xf32>, %w: tensor<6x1x3x3xf32>) {
  // expected-error @+2 {{conv groups 4 must divide the input channels (4) and the output channels (6)}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = kgraph.conv %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 4} : tensor<1x4x8x8xf32>, tensor<6x1x3x3xf32> -> tensor<1x6x6x6xf32>
  return
}

// -----

// Convolution: one stride per spatial dim.
func.func @conv_stride_entries(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+2 {{conv stride must have 2 entries (one per spatial dim), not 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = kgraph.conv %x, %w {stride = array<i64: 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>} : tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32> -> tensor<1x6x6x6xf32>
  return
}

// -----

// Convolution: the window must fit the padded input.
func.func @conv_window_too_big(%x: tensor<1x1x4x4xf32>, %w: tensor<1x1x3x3xf32>) {
  // expected-error @+2 {{conv window [3, 3] (dilation [2, 2]) does not fit the padded input [1, 1, 4, 4]}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = kgraph.conv %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 2, 2>} : tensor<1x1x4x4xf32>, tensor<1x1x3x3xf32> -> tensor<1x1x1x1xf32>
  return
}

// -----

// Convolution: three spatial dims are not supported.
func.func @conv3d(%x: tensor<1x1x4x4x4xf32>, %w: tensor<1x1x1x1x1xf32>) {
  // expected-error @+2 {{conv takes [N, C, W] or [N, C, H, W] tensors, not [1, 1, 4, 4, 4]}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = kgraph.conv %x, %w {stride = array<i64: 1, 1, 1>, padding = array<i64: 0, 0, 0>, dilation = array<i64: 1, 1, 1>} : tensor<1x1x4x4x4xf32>, tensor<1x1x1x1x1xf32> -> tensor<1x1x4x4x4xf32>
  return
}

// -----

// Convolution: the bias has one entry per output channel.
func.func @conv_bias(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+2 {{conv bias must be [6] of the input's element type}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = kgraph.conv %x, %w, %b {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>} : tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>, tensor<4xf32> -> tensor<1x6x6x6xf32>
  return
}

// -----

// The input gradient's type must give back the output's shape.
func.func @conv_input_grad_shape(%g: tensor<1x6x6x6xf32>, %w: tensor<6x4x3x3xf32>) {
  // expected-error @+1 {{conv_input_grad grad_output [1, 6, 6, 6] must have the forward output's shape [1, 6, 7, 7] and element type}}
  %x = kgraph.conv_input_grad %g, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>} : tensor<1x6x6x6xf32>, tensor<6x4x3x3xf32> -> tensor<1x4x9x9xf32>
  return
}

// -----

// The weight gradient's type fixes the kernel.
func.func @conv_weight_grad_shape(%g: tensor<1x6x6x6xf32>, %x: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{conv_weight_grad grad_output [1, 6, 6, 6] must have the forward output's shape [1, 6, 4, 4] and element type}}
  %w = kgraph.conv_weight_grad %g, %x {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>} : tensor<1x6x6x6xf32>, tensor<1x4x8x8xf32> -> tensor<6x4x5x5xf32>
  return
}

// -----

// Batch norm: per-channel operands.
func.func @batch_norm_channels(%x: tensor<2x3x4x4xf32>, %c: tensor<4xf32>) {
  // expected-error @+1 {{batch_norm per-channel operands must be [3] of the input's element type}}
  %y:5 = kgraph.batch_norm %x, %c, %c, %c, %c {training = true} : tensor<2x3x4x4xf32>, tensor<4xf32>
  return
}

// -----

// Batch norm: training needs two values per channel, as PyTorch says.
func.func @batch_norm_one_value(%x: tensor<1x3x1x1xf32>, %c: tensor<3xf32>) {
  // expected-error @+1 {{'kgraph.batch_norm' op in training needs more than one value per channel, not input [1, 3, 1, 1]}}
  %y:5 = kgraph.batch_norm %x, %c, %c, %c, %c {training = true} : tensor<1x3x1x1xf32>, tensor<3xf32>
  return
}

// -----

// Pooling: padding at most half the kernel.
func.func @pool_padding(%x: tensor<1x1x8x8xf32>) {
  // expected-error @+2 {{max_pool padding [2, 2] must be at most half the kernel [3, 3]}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = kgraph.max_pool %x {kernel = array<i64: 3, 3>, stride = array<i64: 1, 1>, padding = array<i64: 2, 2>, dilation = array<i64: 1, 1>} : tensor<1x1x8x8xf32> -> tensor<1x1x10x10xf32>
  return
}

// -----

// Pooling backward: the gradient has the pooled shape.
func.func @max_pool_backward_grad(%g: tensor<1x1x3x3xf32>, %x: tensor<1x1x8x8xf32>) {
  // expected-error @+1 {{max_pool_backward grad_output [1, 1, 3, 3] must have the forward output's shape [1, 1, 4, 4] and element type}}
  %y = kgraph.max_pool_backward %g, %x {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>} : tensor<1x1x3x3xf32>, tensor<1x1x8x8xf32>
  return
}

// -----

// Average pooling: the divisor is positive (0: the window's size).
func.func @avg_pool_divisor(%x: tensor<1x1x8x8xf32>) {
  // expected-error @+2 {{avg_pool divisor must be positive, or 0 for the window's size}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = kgraph.avg_pool %x {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, divisor = -1} : tensor<1x1x8x8xf32> -> tensor<1x1x4x4xf32>
  return
}
