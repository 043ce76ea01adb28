// RUN: kiln-opt %s -split-input-file -verify-diagnostics
// The plan attributes the dialect verifies (see "Plan attributes" in its
// description), one bad case each.

func.func @fusion_not_elementwise(%a: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{is in a fusion group (kgraph.fusion) but is not elementwise}}
  %0 = kgraph.matmul %a, %a {kgraph.fusion = 0 : i64} : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

func.func @fusion_not_a_number(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{has kgraph.fusion that is not a group number (a non-negative i64)}}
  %0 = kgraph.neg %a {kgraph.fusion = "one"} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @fold_unknown(%a: tensor<4xf32>) -> tensor<4xbf16> {
  // expected-error @+1 {{has kgraph.fold that is not one of: loads, evacuation, on_chip}}
  %0 = kgraph.cast %a {kgraph.fold = "somewhere"} : tensor<4xf32> -> tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

func.func @fold_not_a_cast(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{folds into a matmul (kgraph.fold = "loads") but is not a cast}}
  %0 = kgraph.neg %a {kgraph.fold = "loads"} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @evacuation_of_no_product(%a: tensor<4xbf16>) -> tensor<4xf32> {
  // expected-error @+1 {{folds into a product's evacuation but does not read a matmul's result alone}}
  %0 = kgraph.cast %a {kgraph.fold = "evacuation"} : tensor<4xbf16> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @loads_read_elsewhere(%a: tensor<4x4xf32>) -> tensor<4x4xbf16> {
  // expected-error @+1 {{folds into matmul loads but is read by 'kgraph.neg'}}
  %0 = kgraph.cast %a {kgraph.fold = "loads"} : tensor<4x4xf32> -> tensor<4x4xbf16>
  %1 = kgraph.neg %0 : tensor<4x4xbf16>
  return %1 : tensor<4x4xbf16>
}

// -----

func.func @unknown_plan_attribute(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{has an unknown kgraph attribute 'kgraph.fussion'}}
  %0 = kgraph.neg %a {kgraph.fussion = 0 : i64} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @narrowed_not_f32(%a: tensor<4xbf16>) -> tensor<4xbf16> {
  // expected-error @+1 {{has kgraph.narrowed listing result 0, which is not an f32 result}}
  %0 = kgraph.neg %a {kgraph.narrowed = array<i64: 0>} : tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

func.func @sum_beside_no_product(%o: tensor<1x4xf32>, %a: tensor<4x4xf32>) -> tensor<1x4xf32> {
  // expected-error @+1 {{is a row sum beside product 3, which no earlier matmul is}}
  %0 = kgraph.matmul %o, %a {kgraph.sum_beside = 3 : i64} : tensor<1x4xf32>, tensor<4x4xf32> -> tensor<1x4xf32>
  return %0 : tensor<1x4xf32>
}

// -----

func.func @product_label_on_add(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{has kgraph.product but is not a matmul or a convolution}}
  %0 = kgraph.add %a, %a {kgraph.product = 0 : i64} : tensor<4xf32>, tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @channel_sum_beside_other_product(%x: tensor<2x3x5x5xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<4x1x1x1xf32> {
  %y = kgraph.conv %x, %w {kgraph.product = 0 : i64, stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : tensor<2x3x5x5xf32>, tensor<4x3x3x3xf32> -> tensor<2x4x5x5xf32>
  %t = kgraph.transpose %y, [1, 0, 2, 3] : tensor<2x4x5x5xf32> -> tensor<4x2x5x5xf32>
  // expected-error @+1 {{is not a per-channel sum of the output of the convolution labelled 1}}
  %s = kgraph.reduce_sum %t, [1, 2, 3] {keepdim = true, kgraph.sum_beside = 1 : i64} : tensor<4x2x5x5xf32> -> tensor<4x1x1x1xf32>
  return %s : tensor<4x1x1x1xf32>
}

// -----

func.func @channel_sum_over_rows(%x: tensor<2x3x5x5xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<4x2x1x1xf32> {
  %y = kgraph.conv %x, %w {kgraph.product = 0 : i64, stride = array<i64: 1, 1>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : tensor<2x3x5x5xf32>, tensor<4x3x3x3xf32> -> tensor<2x4x5x5xf32>
  %t = kgraph.transpose %y, [1, 0, 2, 3] : tensor<2x4x5x5xf32> -> tensor<4x2x5x5xf32>
  // expected-error @+1 {{is not a per-channel sum of the output of the convolution labelled 0}}
  %s = kgraph.reduce_sum %t, [2, 3] {keepdim = true, kgraph.sum_beside = 0 : i64} : tensor<4x2x5x5xf32> -> tensor<4x2x1x1xf32>
  return %s : tensor<4x2x1x1xf32>
}

// -----

func.func @row_chain_not_in_table(%a: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{names row chain 0, which the function's kgraph.row_chains lacks}}
  %0 = kgraph.neg %a {kgraph.row_chain = 0 : i64} : tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

// expected-error @+1 {{has kgraph.row_chains that is not a list of {from = i64, shape = array<i64: ...>}}}
func.func @row_chain_table_malformed(%a: tensor<4x4xf32>) -> tensor<4x4xf32> attributes {kgraph.row_chains = [{from = 1 : i64}]} {
  return %a : tensor<4x4xf32>
}

// -----

func.func @early_for_no_product(%a: tensor<4x4xf32>) -> tensor<16xf32> {
  // expected-error @+1 {{is lowered early for product 2, which no matmul is}}
  %0 = kgraph.reshape %a {kgraph.early_for = array<i64: 2>} : tensor<4x4xf32> -> tensor<16xf32>
  return %0 : tensor<16xf32>
}

// -----

func.func @epilogue_on_add(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{has kgraph.epilogue but is not a matmul or a convolution}}
  %0 = kgraph.add %a, %a {kgraph.epilogue = 0 : i64} : tensor<4xf32>, tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @in_place_wrong_type(%a: tensor<4xf32>, %b: tensor<8xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{is planned in place in argument 1, which is not an argument of its result's type}}
  %0 = kgraph.neg %a {kgraph.in_place = array<i64: 1>} : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @into_slices_out_of_range(%a: tensor<4xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{has kgraph.into_slices that is not a list of the concat's inputs}}
  %0 = kgraph.concat %a, %a {dim = 0, kgraph.into_slices = array<i64: 2>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
