//===- CompilerTest.cpp - compiled steps match the reference interpreter --===//

#include "test/compiler/driver/Differential.h"
#include "test/compiler/driver/RandomGraphs.h"

#include "compiler/builder/GraphBuilder.h"
#include "compiler/builder/Optimizers.h"
#include "compiler/driver/Compiler.h"
#include "compiler/graph/GraphConversion.h"
#include "compiler/target/TargetDescription.h"
#include "dialects/kgraph/KGraphDialect.h"
#include "examples/cpp/MlpStep.h"
#include "runtime/artifact/Artifact.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <functional>

using namespace kiln;
using namespace kiln::testing;

namespace {

using Build = std::function<void(GraphBuilder &)>;

proto::Graph buildGraph(mlir::MLIRContext &context, const Build &build) {
  GraphBuilder b(context, "step");
  build(b);
  auto graph = b.finishGraph();
  if (!graph) {
    ADD_FAILURE() << llvm::toString(graph.takeError());
    return {};
  }
  return *graph;
}

void expectMatches(const proto::Graph &graph, DiffOptions options = {}) {
  auto report = compileAndCompare(graph, options);
  ASSERT_TRUE(static_cast<bool>(report)) << llvm::toString(report.takeError());
  EXPECT_EQ(report->hazards, 0u) << report->worst;
  EXPECT_LE(report->worstExcess, 1.0) << report->worst;
}

struct OpCase {
  const char *name;
  Build build;
  Range range{-1.0, 1.0};
  bool matmul = false;
};

Tensor in(GraphBuilder &b, const char *name, llvm::ArrayRef<int64_t> shape,
          proto::DType dtype = proto::F32) {
  return b.input(name, dtype, shape, proto::BATCH_INPUT);
}
void out(GraphBuilder &b, Tensor t, const char *name = "out") {
  b.output(name, t, proto::METRIC);
}
/// `lhs . rhs` as auto-cast writes it, its casts explicit so that the
/// reference rounds where the device does.
Tensor bf16Product(GraphBuilder &b, Tensor lhs, Tensor rhs) {
  Tensor narrowLhs = b.cast(lhs, proto::BF16);
  Tensor narrowRhs = b.cast(rhs, proto::BF16);
  return b.cast(b.matmul(narrowLhs, narrowRhs), proto::F32);
}

/// A layer norm's input gradient as the traced BERT step has it: the input
/// gradient of the next linear layer plus the residual stream's, dY, times
/// gamma and times the saved normalized input (the product's epilogue
/// group), then the two row sums of those and the one group after them.
/// Outputs "dx"; returns dY [200, 768] and xhat [2, 100, 768].
std::pair<Tensor, Tensor> layerNormBackwardAsTraced(GraphBuilder &b) {
  Tensor xhat = in(b, "xhat", {2, 100, 768}), rstd = in(b, "rstd", {2, 100, 1});
  Tensor dx = b.matmul(in(b, "g", {200, 64}), in(b, "w", {64, 768}));
  Tensor residual = b.reshape(in(b, "residual", {2, 100, 768}), {200, 768});
  Tensor dy = b.add(dx, residual);
  Tensor dyw = b.mul(dy, in(b, "gamma", {768}));
  Tensor dywx = b.mul(dyw, b.reshape(xhat, {200, 768}));
  Tensor rows = b.reshape(dyw, {2, 100, 768});
  Tensor a = b.mul(b.reduceSum(rows, {2}, true), b.scalar(1.0 / 768));
  Tensor c = b.mul(b.reduceSum(b.reshape(dywx, {2, 100, 768}), {2}, true),
                   b.scalar(1.0 / 768));
  out(b, b.mul(rstd, b.sub(b.sub(rows, a), b.mul(xhat, c))), "dx");
  return {dy, xhat};
}

/// One graph per op of the kgraph op set, at shapes that are not multiples
/// of 128.
std::vector<OpCase> opCases() {
  using B = GraphBuilder;
  std::vector<OpCase> cases;
  auto unary = [&](const char *name, Tensor (B::*fn)(Tensor), Range r) {
    cases.push_back({name,
                     [fn](B &b) { out(b, (b.*fn)(in(b, "x", {129, 200}))); },
                     r});
  };
  unary("neg", &B::neg, {});
  unary("abs", &B::abs, {});
  unary("sign", &B::sign, {});
  unary("exp", &B::exp, {});
  unary("log", &B::log, {0.1, 4.0});
  unary("log1p", &B::log1p, {0.0, 3.0});
  unary("sqrt", &B::sqrt, {0.1, 4.0});
  unary("rsqrt", &B::rsqrt, {0.1, 4.0});
  unary("reciprocal", &B::reciprocal, {0.5, 4.0});
  unary("tanh", &B::tanh, {});
  unary("sigmoid", &B::sigmoid, {});
  unary("relu", &B::relu, {});
  unary("erf", &B::erf, {});
  unary("sin", &B::sin, {});
  unary("cos", &B::cos, {});
  cases.push_back({"gelu", [](B &b) { out(b, b.gelu(in(b, "x", {3, 1000}))); }});
  cases.push_back({"gelu_tanh", [](B &b) {
                     out(b, b.gelu(in(b, "x", {3, 1000}), "tanh"));
                   }});
  auto binary = [&](const char *name, Tensor (B::*fn)(Tensor, Tensor),
                    Range r) {
    cases.push_back({name,
                     [fn](B &b) {
                       out(b, (b.*fn)(in(b, "x", {127, 65}), in(b, "y", {65})));
                     },
                     r});
  };
  binary("add", &B::add, {});
  binary("sub", &B::sub, {});
  binary("mul", &B::mul, {});
  binary("div", &B::div, {0.5, 2.0});
  binary("pow", &B::pow, {0.5, 2.0});
  binary("max", &B::max, {});
  binary("min", &B::min, {});
  cases.push_back({"logical", [](B &b) {
                     Tensor x = in(b, "x", {5, 7}), y = in(b, "y", {5, 7});
                     Tensor zero = b.scalar(0.0);
                     Tensor p = b.compare("gt", x, b.broadcast(zero, {5, 7}));
                     Tensor q = b.compare("lt", y, b.broadcast(zero, {5, 7}));
                     out(b, b.cast(b.logicalOr(b.logicalAnd(p, q),
                                               b.logicalNot(p)),
                                   proto::F32));
                   }});
  cases.push_back({"compare_select", [](B &b) {
                     Tensor x = in(b, "x", {33, 130}), y = in(b, "y", {33, 130});
                     out(b, b.select(b.compare("ge", x, y), x, b.neg(y)));
                   }});
  cases.push_back({"cast_int", [](B &b) {
                     Tensor x = in(b, "x", {9, 11});
                     out(b, b.cast(b.cast(b.mul(x, b.scalar(10.0)), proto::I64),
                                   proto::F32));
                   }});
  cases.push_back({"cast_bf16", [](B &b) {
                     out(b, b.cast(in(b, "x", {64, 300}), proto::BF16));
                   }});
  cases.push_back({"reshape_transpose", [](B &b) {
                     Tensor x = in(b, "x", {6, 10, 7});
                     Tensor t = b.transpose(x, {2, 0, 1});
                     out(b, b.reshape(b.exp(t), {7, 60}));
                   }});
  // Attention's head merge: short innermost rows, so the loop nest's free
  // axis spans two dimensions (and more than 128 rows of them), with a
  // bias broadcast along one of them.
  cases.push_back({"merge_heads", [](B &b) {
                     Tensor x = in(b, "x", {2, 3, 130, 20});
                     Tensor t = b.transpose(x, {0, 2, 1, 3});
                     Tensor bias = in(b, "bias", {3, 1});
                     out(b, b.reshape(b.add(t, bias), {260, 60}));
                   }});
  // And splitting them out of a slice of a fused projection: the reshape of
  // the strided slice is a view, the transposed copy has S on partitions.
  cases.push_back({"split_heads", [](B &b) {
                     Tensor x = in(b, "x", {260, 150});
                     Tensor q = b.slice(x, {0, 60}, {260, 120}, {1, 1});
                     Tensor h = b.reshape(q, {2, 130, 3, 20});
                     out(b, b.exp(b.transpose(h, {0, 2, 1, 3})));
                   }});
  cases.push_back({"broadcast_slice_concat", [](B &b) {
                     Tensor x = in(b, "x", {1, 40}), y = in(b, "y", {20, 50});
                     Tensor s = b.slice(y, {2, 5}, {20, 45}, {3, 1});
                     Tensor bx = b.broadcast(x, {6, 40});
                     out(b, b.concat({bx, b.mul(s, s)}, 0));
                   }});
  cases.push_back({"iota", [](B &b) {
                     Tensor x = in(b, "x", {4, 129});
                     out(b, b.add(x, b.cast(b.iota({4, 129}, 1), proto::F32)));
                   }});
  cases.push_back({"reductions", [](B &b) {
                     Tensor x = in(b, "x", {3, 129, 50});
                     out(b, b.reduceSum(x, {2}), "sum");
                     out(b, b.reduceMean(x, {0}), "mean");
                     out(b, b.reduceMax(x, {1}), "max");
                     out(b, b.reduceMin(x, {0, 2}, true), "min");
                     out(b, b.argmax(x, 1), "argmax");
                   }});
  // Products scaled by a power of two, the scaling moved to the smaller
  // input (kgraph canonicalization): scores Q . K^T / 8 over 1024 keys
  // computed as (Q / 8) . K^T, and a scaled gradient times V as the
  // gradient times V / 8.
  cases.push_back({"power_of_two_scaled_products", [](B &b) {
                     Tensor scores = b.matmul(in(b, "q", {2, 1024, 16}),
                                              in(b, "k", {2, 16, 1024}));
                     out(b, b.div(scores, b.scalar(8.0)), "scores");
                     Tensor g = b.div(in(b, "g", {2, 1024, 1024}), b.scalar(8.0));
                     out(b, b.matmul(g, in(b, "v", {2, 1024, 16})), "dq");
                   },
                   {-1.0, 1.0},
                   /*matmul=*/true});
  // Whole-tensor reductions: 300 x 2000 elements spread over 125
  // partitions of 4800 (two chunks each, whose partials combine) and
  // gather on one partition through a transpose; 64 elements fold on one
  // partition.
  cases.push_back({"whole_tensor_reductions", [](B &b) {
                     Tensor x = in(b, "x", {300, 2000});
                     out(b, b.reduceSum(b.mul(x, x), {0, 1}), "sum_of_squares");
                     out(b, b.reduceMax(x, {0, 1}), "max");
                     out(b, b.reduceMin(x, {0, 1}, true), "min");
                     out(b, b.reduceSum(in(b, "y", {64}), {0}), "short_sum");
                   }});
  // Reductions of group values computed by the group's loop nest: over
  // two row blocks (128 + 72 rows) and two column chunks (5000 columns),
  // through a reshape that keeps the reduced elements trailing, on a
  // layout with two dimensions on the free axis (heads split: each
  // partition folds four runs of 40, one per head, whose results lie 130
  // apart); a reshape that splits the rows
  // differently leaves its reduction to run on its own.
  cases.push_back({"fused_reductions", [](B &b) {
                     Tensor x = in(b, "x", {200, 5000});
                     Tensor y = b.add(b.mul(x, x), x);
                     out(b, b.reduceSum(y, {1}), "sum");
                     Tensor e = b.exp(x);
                     out(b, b.reduceMax(b.reshape(e, {200, 50, 100}), {1, 2}),
                         "max_via_reshape");
                     out(b, b.reduceMin(b.reshape(e, {400, 2500}), {1}),
                         "min_not_fused");
                     Tensor h = b.transpose(in(b, "h", {2, 130, 4, 40}),
                                            {0, 2, 1, 3});
                     out(b, b.reduceSum(b.exp(h), {3}), "heads_split");
                   }});
  cases.push_back({"matmul", [](B &b) {
                     Tensor x = in(b, "x", {130, 200}), w = in(b, "w", {200, 600});
                     out(b, b.matmul(x, w));
                   },
                   {},
                   true});
  // K so deep that a row tile's stationary slices do not stay in SBUF (the
  // one-hot embedding product): a block of four row tiles still shares
  // each moving slice, and reloads its stationary slices four at a time
  // (65 full slices, then a partial one). The small moving operand stays in
  // SBUF for both row blocks.
  cases.push_back({"matmul_deep_contraction", [](B &b) {
                     Tensor x = in(b, "x", {600, 8400}), w = in(b, "w", {8400, 20});
                     out(b, b.matmul(x, w));
                   },
                   {},
                   true});
  // A weight gradient, x^T . dy: the 1000 x 40 output gradient is loaded
  // once for the two row blocks of the 600-row result.
  cases.push_back({"weight_gradient", [](B &b) {
                     Tensor x = in(b, "x", {1000, 600}), dy = in(b, "dy", {1000, 40});
                     out(b, b.matmul(x, dy, true, false));
                   },
                   {},
                   true});
  cases.push_back({"matmul_transposed_batched", [](B &b) {
                     Tensor x = in(b, "x", {3, 40, 129}), w = in(b, "w", {3, 70, 129});
                     out(b, b.matmul(x, w, false, true));
                     Tensor z = in(b, "z", {40, 5});
                     out(b, b.matmul(x, z, true, false), "t");
                   },
                   {},
                   true});
  // Attention's per-head products with heads transposed out of [B, S, H, d]
  // inputs: six heads go four and two to a group, each group one DMA per
  // operand (K innermost for q and k: transposed on TensorE) and one store.
  // A rank-2 operand is loaded once for the whole group.
  cases.push_back({"attention_products", [](B &b) {
                     Tensor q = b.transpose(in(b, "q", {2, 50, 6, 16}), {0, 2, 1, 3});
                     Tensor k = b.transpose(in(b, "k", {2, 50, 6, 16}), {0, 2, 1, 3});
                     Tensor v = b.transpose(in(b, "v", {2, 50, 6, 16}), {0, 2, 1, 3});
                     Tensor scores = b.matmul(q, k, false, true);
                     out(b, scores, "scores");
                     out(b, b.matmul(scores, v), "context");
                     out(b, b.matmul(v, in(b, "w", {16, 24})), "shared");
                     // Keys longer than the partitions: 200 rows of k^T.
                     Tensor keys = b.transpose(in(b, "keys", {2, 200, 6, 16}), {0, 2, 1, 3});
                     out(b, b.matmul(q, keys, false, true), "long");
                   },
                   {},
                   true});
  // A bias and a runtime scalar that every row block reads alike: loaded
  // once and kept for all three blocks, the last one partial.
  // Elementwise groups computed on a matmul's output tiles as they leave
  // PSUM (epilogues): a linear layer's bias, GELU and dropout on a product
  // whose sizes are not tile multiples (the random numbers follow the
  // product's row-major index); SGD steps on weight gradients, written
  // over the weight, with the gradient's matmul only when the weight's last
  // read comes before it; a group that also needs a value computed after
  // its matmul runs as its own loop nest; row reductions of epilogue
  // values fold on the output tiles.
  cases.push_back({"matmul_epilogues", [](B &b) {
                     Tensor seed = b.input("seed", proto::I64, {}, proto::RNG_SEED);
                     Tensor x = in(b, "x", {200, 300});
                     Tensor w = b.input("w", proto::F32, {700, 300}, proto::PARAMETER);
                     auto d = b.dropout(b.gelu(b.linear(x, w, in(b, "bias", {700}))),
                                        seed, 0.25);
                     out(b, d.output, "y");
                     // w's gradient comes before its last read (dx): its
                     // update runs after dx, not with the gradient's
                     // matmul, to stay in place; w2's comes after.
                     Tensor dy = in(b, "dy", {200, 700});
                     Tensor dw = b.matmul(dy, x, true, false);
                     out(b, b.matmul(dy, w), "dx");
                     b.output("w", b.sub(w, b.mul(dw, b.scalar(0.01))),
                              proto::UPDATED_PARAMETER, w);
                     Tensor w2 = b.input("w2", proto::F32, {130, 300}, proto::PARAMETER);
                     Tensor dy2 = in(b, "dy2", {200, 130});
                     out(b, b.matmul(dy2, w2), "dx2");
                     Tensor dw2 = b.matmul(dy2, x, true, false);
                     b.output("w2", b.sub(w2, b.mul(dw2, b.scalar(0.01))),
                              proto::UPDATED_PARAMETER, w2);
                     Tensor p = b.matmul(x, in(b, "v", {300, 130}));
                     Tensor late = b.reduceSum(b.exp(p), {1}, true);
                     out(b, b.div(b.exp(p), late), "late");
                     // Row sums and maxima of epilogue values, over two
                     // column tiles (700 = 512 + 188) and two row tiles
                     // (200 = 128 + 72), one through a reshape.
                     Tensor r = b.add(b.matmul(x, in(b, "u", {300, 700})),
                                      in(b, "res", {200, 700}));
                     Tensor sq = b.mul(r, r);
                     out(b, b.reduceSum(sq, {1}, true), "row_sums");
                     out(b, b.reduceMax(b.reshape(sq, {2, 100, 700}), {2}),
                         "row_max");
                     out(b, r, "residual");
                   },
                   {},
                   true});
  cases.push_back({"kept_inputs", [](B &b) {
                     Tensor x = in(b, "x", {300, 70}), bias = in(b, "bias", {70});
                     Tensor s = in(b, "s", {});
                     out(b, b.mul(b.add(x, bias), s));
                     // A contiguous [1000 x 768] goes in column chunks; the
                     // scalars stay loaded across all of them.
                     Tensor y = in(b, "y", {1000, 768}), t = in(b, "t", {});
                     out(b, b.div(b.mul(y, s), t), "scaled");
                   }});
  // Attention's backward concatenates the Q, K and V gradients, each a
  // per-head product seen through a head merge: the products store straight
  // into their slices of the concat, as does an elementwise producer; an
  // input with another use is still copied.
  cases.push_back({"concat_of_heads", [](B &b) {
                     Tensor w = in(b, "w", {2, 3, 20, 16});
                     auto merged = [&](const char *name) {
                       Tensor p = b.matmul(in(b, name, {2, 3, 40, 20}), w);
                       return b.reshape(b.transpose(p, {0, 2, 1, 3}), {2, 40, 48});
                     };
                     Tensor e = b.exp(in(b, "x", {2, 40, 48}));
                     Tensor kept = b.neg(in(b, "y", {2, 40, 48}));
                     out(b, b.concat({merged("q"), merged("k"), e, kept}, 2));
                     out(b, kept, "kept");
                   },
                   {},
                   true});
  cases.push_back({"linear", [](B &b) {
                     Tensor x = in(b, "x", {2, 5, 33}), w = in(b, "w", {17, 33});
                     out(b, b.linear(x, w, in(b, "bias", {17})));
                   },
                   {},
                   true});
  cases.push_back({"softmax_family", [](B &b) {
                     Tensor x = in(b, "x", {7, 300}), g = in(b, "g", {7, 300});
                     Tensor s = b.softmax(x, 1), l = b.logSoftmax(x, 0);
                     out(b, s, "softmax");
                     out(b, l, "log_softmax");
                     out(b, b.softmaxBackward(g, s, 1), "softmax_backward");
                     out(b, b.logSoftmaxBackward(g, l, 0), "log_softmax_backward");
                   }});
  // Attention scores' softmax: rows of 40 go six to a partition (a load
  // of 768 rows), the last 12 rows one to a partition.
  cases.push_back({"attention_softmax", [](B &b) {
                     Tensor x = in(b, "x", {2, 3, 130, 40});
                     out(b, b.softmax(x, 3));
                   }});
  cases.push_back({"layer_norm", [](B &b) {
                     Tensor x = in(b, "x", {4, 9, 96}), g = in(b, "g", {4, 9, 96});
                     Tensor w = in(b, "w", {96}), bias = in(b, "bias", {96});
                     auto ln = b.layerNorm(x, w, bias, 1);
                     out(b, ln.output, "y");
                     auto grads = b.layerNormBackward(g, x, ln.mean, ln.rstd, w, 1);
                     out(b, grads.input, "dx");
                     out(b, grads.weight, "dw");
                     out(b, grads.bias, "db");
                   }});
  cases.push_back({"activation_backwards", [](B &b) {
                     Tensor x = in(b, "x", {50, 70}), g = in(b, "g", {50, 70});
                     out(b, b.geluBackward(g, x), "gelu");
                     out(b, b.geluBackward(g, x, "tanh"), "gelu_tanh");
                     out(b, b.tanhBackward(g, b.tanh(x)), "tanh");
                     out(b, b.sigmoidBackward(g, b.sigmoid(x)), "sigmoid");
                     out(b, b.reluBackward(g, x), "relu");
                   }});
  cases.push_back({"indexing", [](B &b) {
                     Tensor x = in(b, "x", {6, 10});
                     Tensor idx = in(b, "idx", {6, 3}, proto::I64);
                     Tensor rows = in(b, "rows", {4}, proto::I64);
                     out(b, b.gather(x, idx, 1), "gather");
                     out(b, b.scatterAdd(x, idx, in(b, "src", {6, 3}), 1), "scatter");
                     out(b, b.indexSelect(x, rows, 1), "index_select");
                     Tensor w = in(b, "w", {10, 8});
                     out(b, b.embedding(w, idx), "embedding");
                     out(b, b.embeddingBackward(in(b, "g", {6, 3, 8}), idx, 10, 2),
                         "embedding_backward");
                   }});
  // Rows of 100 go six to a partition ([768, 100] seen as [128, 6, 100]):
  // the row statistics are read once per row against its 100 elements,
  // the dropout's random numbers follow the rows across the free axis, and
  // the sums fold each run of 100.
  cases.push_back({"short_rows", [](B &b) {
                     Tensor seed = b.input("seed", proto::I64, {}, proto::RNG_SEED);
                     Tensor x = in(b, "x", {3, 256, 100});
                     Tensor s = b.softmax(x, 2);
                     auto d = b.dropout(s, seed, 0.25);
                     out(b, d.output, "dropped");
                     out(b, b.softmaxBackward(d.output, s, 2), "backward");
                   }});
  // A row statistic (one value per partition) on either side of an op:
  // tensor_scalar with a per-partition scalar, swapped for add, mul,
  // max, min and comparisons, s - x as (x * -1) + s; s / x stays a
  // tensor_tensor.
  cases.push_back({"per_partition_scalars", [](B &b) {
                     Tensor x = in(b, "x", {200, 300});
                     Tensor s = b.reduceMax(x, {1}, true);
                     out(b, b.sub(s, x), "s_minus_x");
                     out(b, b.sub(x, s), "x_minus_s");
                     out(b, b.div(x, s), "x_over_s");
                     out(b, b.div(s, x), "s_over_x");
                     out(b, b.mul(s, x), "s_times_x");
                     out(b, b.max(s, b.neg(x)), "s_max_x");
                     out(b, b.cast(b.compare("lt", b.broadcast(s, {200, 300}),
                                             b.mul(x, b.scalar(2.0))),
                                   proto::F32),
                         "s_lt_x");
                   },
                   {-2.0, 2.0}});
  // A second moment's (x * c) * x and (x * x) * c: one ScalarE square of
  // x * sqrt(c) each; with c < 0 or read again, a tensor_tensor.
  cases.push_back({"scaled_squares",
                   [](B &b) {
                     Tensor x = in(b, "x", {300, 1000});
                     Tensor scaled = b.mul(x, b.scalar(1e-3));
                     out(b, b.mul(scaled, x), "scaled_then_squared");
                     out(b, b.mul(b.mul(x, x), b.scalar(0.25)),
                         "squared_then_scaled");
                     out(b, b.mul(x, b.mul(x, b.scalar(-0.5))), "negative");
                     Tensor kept = b.mul(x, b.scalar(3.0));
                     out(b, b.mul(kept, x), "kept_squared");
                     out(b, kept, "kept");
                   },
                   {-4.0, 4.0}});
  cases.push_back({"nll_loss", [](B &b) {
                     Tensor x = b.logSoftmax(in(b, "x", {5, 10}), 1);
                     Tensor y = in(b, "idx", {5}, proto::I64);
                     auto loss = b.nllLoss(x, y);
                     out(b, loss.loss, "loss");
                     out(b, b.nllLossBackward(b.scalar(1.0), x, y, loss.totalWeight),
                         "grad");
                   }});
  // A checkpointed call (tanh, dropout, exp) whose tanh and dropout mask
  // ops after it read: both are computed again, the mask with the same
  // random numbers.
  cases.push_back({"checkpoint", [](B &b) {
                     Tensor seed = b.input("seed", proto::I64, {}, proto::RNG_SEED);
                     Tensor x = b.checkpoint(in(b, "x", {129, 200}), 0, "input");
                     Tensor h = b.tanh(x);
                     auto d = b.dropout(h, seed, 0.25);
                     Tensor y = b.checkpoint(b.exp(d.output), 0, "output");
                     out(b, y, "y");
                     out(b, b.mul(b.mul(y, h), b.cast(d.mask, proto::F32)), "z");
                   }});
  cases.push_back({"dropout", [](B &b) {
                     Tensor seed = b.input("seed", proto::I64, {}, proto::RNG_SEED);
                     Tensor x = in(b, "x", {129, 200});
                     auto d = b.dropout(x, seed, 0.25);
                     out(b, d.output, "y");
                     out(b, b.cast(d.mask, proto::F32), "mask");
                     // A second stream, on a transposed 3-d view, p not
                     // exact in f32, and the backward's use of the mask.
                     Tensor t = b.transpose(in(b, "t", {9, 96, 4}), {2, 0, 1});
                     auto e = b.dropout(b.exp(t), seed, 0.1, 3);
                     out(b, e.output, "z");
                     Tensor g = in(b, "g", {4, 9, 96});
                     out(b, b.mul(b.mul(g, b.cast(e.mask, proto::F32)),
                                  b.scalar(1.0 / 0.9)),
                         "dz");
                   }});
  // A front end's dropout: the mask of a dropout of ones, scaled, read by
  // the forward's product through a reshape and again after a matmul (the
  // backward): each reader recomputes it in its own group and shape.
  cases.push_back({"recomputed_mask", [](B &b) {
                     Tensor seed = b.input("seed", proto::I64, {}, proto::RNG_SEED);
                     auto d = b.dropout(b.full({4, 64, 96}, 1.0), seed, 0.1, 2);
                     Tensor m = b.div(b.cast(d.mask, proto::F32), b.scalar(0.9));
                     Tensor y = b.mul(in(b, "x", {256, 96}), b.reshape(m, {256, 96}));
                     Tensor h = b.matmul(b.tanh(y), in(b, "w", {96, 96}));
                     out(b, h, "h");
                     Tensor g = b.reshape(b.tanh(h), {4, 64, 96});
                     out(b, b.mul(g, m), "dy");
                   },
                   {-1.0, 1.0},
                   /*matmul=*/true});
  // A linear layer's weight and bias gradients: the bias's sum over rows
  // is computed beside dY^T . x from the same dY tiles. 260 output
  // features leave a partial row tile, 300 rows a partial K slice.
  cases.push_back({"bias_gradient", [](B &b) {
                     Tensor x = in(b, "x", {300, 200});
                     Tensor g = in(b, "g", {300, 260});
                     out(b, b.matmul(b.transpose(g, {1, 0}), x), "dw");
                     out(b, b.reduceSum(g, {0}), "db");
                     Tensor h = in(b, "h", {300, 130});
                     out(b, b.matmul(b.transpose(h, {1, 0}), x), "dw2");
                     out(b, b.reduceSum(b.exp(h), {0}), "not_h");
                   },
                   {-1.0, 1.0},
                   /*matmul=*/true});
  // Embedding lookups by gather DMAs: 300 tokens (a partial block of 128),
  // a table wider than one chunk, and one read through a transpose (row
  // stride 1, column stride 700).
  cases.push_back({"embedding_gather", [](B &b) {
                     Tensor ids = in(b, "idx", {3, 100}, proto::I64);
                     out(b, b.embedding(in(b, "w", {10, 10000}), ids), "wide");
                     Tensor t = b.transpose(in(b, "wt", {40, 10}), {1, 0});
                     out(b, b.exp(b.embedding(t, ids)), "transposed");
                   }});
  // Sums over leading dimensions of group values (a layer norm's weight
  // and bias gradients) computed by the group's loop nest on TensorE: 300
  // rows (a partial row block), 260 columns (a partial 128-column block),
  // one value only the sum reads (not stored) and one also returned.
  cases.push_back({"row_sums_in_loop_nest", [](B &b) {
                     Tensor x = in(b, "x", {3, 100, 260});
                     Tensor y = in(b, "y", {3, 100, 260});
                     out(b, b.reduceSum(b.mul(b.exp(x), y), {0, 1}), "sum");
                     Tensor w = b.tanh(b.add(x, y));
                     out(b, w, "w");
                     out(b, b.reduceSum(w, {0, 1}), "sum_of_returned");
                   },
                   {-1.0, 1.0},
                   /*matmul=*/true});
  // Groups joined across their row reductions in one loop nest: a layer
  // norm over 300 rows (a partial row block) whose mean and reciprocal
  // deviation are returned (row values stored a column per row block); a
  // softmax over rows of 40, six to a partition, returning its max and the
  // log of its sum (a row value an op on row values computes); and rows of
  // 5000, too long for one iteration, where the chain's parts run alone.
  cases.push_back({"row_chains", [](B &b) {
                     Tensor x = in(b, "x", {3, 100, 260});
                     auto ln = b.layerNorm(x, in(b, "w", {260}),
                                           in(b, "bias", {260}), 1);
                     out(b, ln.output, "y");
                     out(b, ln.mean, "mean");
                     out(b, ln.rstd, "rstd");
                     Tensor s = in(b, "s", {2, 3, 130, 40});
                     Tensor m = b.reduceMax(s, {3}, true);
                     Tensor e = b.exp(b.sub(s, m));
                     Tensor z = b.reduceSum(e, {3}, true);
                     out(b, b.div(e, z), "p");
                     out(b, m, "max");
                     out(b, b.log(z), "log_sum");
                     Tensor l = b.exp(in(b, "long", {130, 5000}));
                     out(b, b.div(l, b.reduceSum(l, {1}, true)), "long_p");
                   }});
  // An f32 value that only bf16 matmul operands read, through a slice and
  // reshape (Q out of a fused QKV projection) or a transpose: its group
  // stores it rounded to bf16. Products with the identity keep those bf16
  // values exactly, so a rounding other than the cast's shows.
  cases.push_back({"narrowed_output", [](B &b) {
                     Tensor x = b.exp(in(b, "x", {3, 100, 96}));
                     Tensor eye = b.cast(b.compare("eq", b.iota({48, 48}, 0),
                                                   b.iota({48, 48}, 1)),
                                         proto::BF16);
                     auto half = [&](int64_t from) {
                       return b.reshape(b.slice(x, {0, 0, from},
                                                {3, 100, from + 48}, {1, 1, 1}),
                                        {300, 48});
                     };
                     Tensor q = b.cast(half(0), proto::BF16);
                     out(b, b.cast(b.matmul(q, eye), proto::F32), "q");
                     Tensor k = b.cast(b.transpose(half(48), {1, 0}), proto::BF16);
                     out(b, b.cast(b.matmul(eye, k), proto::F32), "k_t");
                     // Also read in f32 through a view: stays f32.
                     Tensor y = b.exp(in(b, "y", {100, 48}));
                     out(b, b.cast(b.matmul(b.cast(y, proto::BF16), eye),
                                   proto::F32),
                         "y_bf16");
                     out(b, b.neg(b.transpose(y, {1, 0})), "y_f32");
                   }});
  cases.push_back({"all_reduce", [](B &b) {
                     out(b, b.allReduce(b.exp(in(b, "x", {3, 100})), "mean"));
                   }});
  return cases;
}

class OpTest : public ::testing::TestWithParam<size_t> {};

TEST_P(OpTest, MatchesReference) {
  OpCase c = opCases()[GetParam()];
  mlir::MLIRContext context;
  DiffOptions options;
  // A dot product's rounding error scales with the sum of |a_k b_k|, not
  // with the result, which cancellation can make small: f32 accumulation
  // in a different order than the interpreter's is within this.
  options.atol = c.matmul ? 2e-5 : 1e-6;
  options.floats = c.range;
  options.ranges["idx"] = {0.0, 10.0};
  options.ranges["rows"] = {0.0, 10.0};
  options.ranges["seed"] = {0.0, 2147483647.0};
  expectMatches(buildGraph(context, c.build), options);
}

INSTANTIATE_TEST_SUITE_P(EveryOp, OpTest,
                         ::testing::Range<size_t>(0, opCases().size()),
                         [](const ::testing::TestParamInfo<size_t> &info) {
                           return std::string(opCases()[info.param].name);
                         });

/// How many of the artifact's instructions have `opcode`.
size_t countOpcode(const artifact::Artifact &artifact, isa::Opcode opcode) {
  size_t count = 0;
  for (const auto &stream : artifact.streams) {
    for (const isa::Instruction &inst : stream.instructions) {
      count += inst.opcode == opcode;
    }
  }
  return count;
}

/// The MLP training step (examples/cpp), batch 32.
llvm::Expected<proto::Graph> mlpStep(mlir::MLIRContext &context) {
  examples::MlpConfig config;
  config.batch = 32;
  return examples::buildMlpTrainStep(context, config);
}

/// Inputs for the MLP training step: labels among its 10 classes, the first
/// step, a small learning rate and second moments that are non-negative.
DiffOptions mlpStepInputs() {
  DiffOptions options;
  options.ranges["y"] = {0.0, 10.0};
  options.ranges["step"] = {1.0, 1.0};
  options.ranges["lr"] = {0.01, 0.01};
  for (const char *v : {"v_w1", "v_b1", "v_w2", "v_b2"}) {
    options.ranges[v] = {0.0, 0.01};
  }
  return options;
}

TEST(CompilerTest, MlpTrainingStepMatchesReference) {
  mlir::MLIRContext context;
  auto graph = mlpStep(context);
  ASSERT_TRUE(static_cast<bool>(graph)) << llvm::toString(graph.takeError());
  DiffOptions options = mlpStepInputs();
  for (int level : {0, 2}) {
    options.compile.optLevel = level;
    expectMatches(*graph, options);
  }
}

TEST(CompilerTest, DataParallelStepMatchesReference) {
  // Compiled for 4 workers, with tiny buckets and with the default ones,
  // the MLP step's gradients are packed, all-reduced and unpacked as slices
  // seen in each parameter's shape, which the optimizer's update reads (in
  // one loop nest per parameter, kgraph-fuse-elementwise). Simulated alone,
  // each all-reduce averages the worker's own gradient: the results are the
  // reference's.
  mlir::MLIRContext context;
  auto graph = mlpStep(context);
  ASSERT_TRUE(static_cast<bool>(graph)) << llvm::toString(graph.takeError());
  DiffOptions options = mlpStepInputs();
  options.compile.worldSize = 4;
  // Buckets of 4 KiB hold one gradient each (in production order, a bias
  // and the next weight do not fit together), 16 MiB ones all four; the
  // loss is averaged too (the metric, a count, is not a float).
  for (auto [bucketBytes, collectives] :
       {std::pair<int64_t, size_t>{4096, 5}, {int64_t(16) << 20, 2}}) {
    options.compile.bucketBytes = bucketBytes;
    expectMatches(*graph, options);
    auto artifact = compile(*graph, options.compile);
    ASSERT_TRUE(static_cast<bool>(artifact))
        << llvm::toString(artifact.takeError());
    EXPECT_EQ(countOpcode(*artifact, isa::Opcode::Collective), collectives)
        << bucketBytes;
  }
}

TEST(CompilerTest, SpilledProgramsMatchReference) {
  // A matmul whose stationary block (K = 1000 deep) outgrows a lowered SBUF
  // and an elementwise tail: the plan spills tiles to HBM and reloads them,
  // more DMAs run, and the results do not change.
  mlir::MLIRContext context;
  proto::Graph graph = buildGraph(context, [](GraphBuilder &b) {
    Tensor y = b.matmul(in(b, "x", {300, 1000}), in(b, "w", {1000, 200}));
    out(b, b.tanh(b.add(y, in(b, "bias", {200}))));
  });
  DiffOptions options;
  options.atol = 2e-5;
  auto whole = compileAndCompare(graph, options);
  ASSERT_TRUE(static_cast<bool>(whole)) << llvm::toString(whole.takeError());
  for (int64_t bytes : {8192, 6144}) {
    options.compile.sbufBytes = bytes;
    auto spilled = compileAndCompare(graph, options);
    ASSERT_TRUE(static_cast<bool>(spilled))
        << bytes << ": " << llvm::toString(spilled.takeError());
    EXPECT_TRUE(spilled->passed()) << bytes << ": " << spilled->worst;
    EXPECT_GT(spilled->instructions, whole->instructions) << bytes;
  }
  // When the operands of one instruction alone do not fit, the error says
  // so instead of spilling forever.
  options.compile.sbufBytes = 4096;
  auto tooSmall = compileAndCompare(graph, options);
  ASSERT_FALSE(static_cast<bool>(tooSmall));
  EXPECT_NE(llvm::toString(tooSmall.takeError())
                .find("and the same instruction needs them"),
            std::string::npos);
}

TEST(CompilerTest, ConvolutionInputCopiesGiveWayWhenHbmRunsOut) {
  // A ReLU'd activation that a convolution and its weight gradient read in
  // bf16 and ReLU's backward in f32: the plan stores a bf16 copy beside it
  // (more HBM, fewer DMA bytes). With an HBM budget the copy overflows, the
  // compile plans again without it; below that, the error.
  mlir::MLIRContext context;
  proto::Graph graph = buildGraph(context, [](GraphBuilder &b) {
    GraphBuilder::ConvWindow window{{1, 1}, {1, 1}, {1, 1}};
    Tensor x = b.relu(in(b, "a", {4, 64, 14, 14}));
    Tensor w = in(b, "w", {64, 64, 3, 3});
    Tensor g = in(b, "g", {4, 64, 14, 14});
    out(b, b.conv(x, w, Tensor(), window), "y");
    out(b, b.convWeightGrad(g, x, {64, 64, 3, 3}, window), "dw");
    out(b, b.reluBackward(g, x), "dx");
    out(b, x, "relu");
  });
  DiffOptions options;
  options.autoCastBf16(0.25);
  auto copies = compileAndCompare(graph, options);
  ASSERT_TRUE(static_cast<bool>(copies)) << llvm::toString(copies.takeError());
  EXPECT_TRUE(copies->passed()) << copies->worst;

  options.compile.hbmBytes = static_cast<int64_t>(copies->hbmBytes) - 1;
  auto without = compileAndCompare(graph, options);
  ASSERT_TRUE(static_cast<bool>(without))
      << llvm::toString(without.takeError());
  EXPECT_TRUE(without->passed()) << without->worst;
  EXPECT_LT(without->hbmBytes, copies->hbmBytes);

  options.compile.hbmBytes = static_cast<int64_t>(without->hbmBytes) - 1;
  auto tooSmall = compileAndCompare(graph, options);
  ASSERT_FALSE(static_cast<bool>(tooSmall));
  EXPECT_NE(llvm::toString(tooSmall.takeError()).find("--hbm-bytes allows"),
            std::string::npos);
}

TEST(CompilerTest, Bf16MatmulAccumulatesInF32) {
  // What --auto-cast=bf16 makes of a matmul, written out: the reference
  // rounds the inputs and the result to bf16, the compiled step rounds the
  // inputs in its loads and keeps the f32 accumulator, so they differ by at
  // most the result's bf16 rounding.
  mlir::MLIRContext context;
  proto::Graph graph = buildGraph(context, [](GraphBuilder &b) {
    Tensor x = b.cast(in(b, "x", {64, 256}), proto::BF16);
    Tensor w = b.cast(in(b, "w", {256, 96}), proto::BF16);
    out(b, b.cast(b.matmul(x, w), proto::F32));
  });
  DiffOptions options;
  options.rtol = 1.0 / 256;
  options.atol = 1e-4;
  expectMatches(graph, options);
}

TEST(CompilerTest, AutoCastMatmulStaysNearF32) {
  // The same matmul in f32 with --auto-cast=bf16: each product carries up to
  // 2^-8 relative error from its inputs; over K = 256 terms in [-1, 1] the
  // error's deviation is about 0.01, and 0.06 is six of them.
  mlir::MLIRContext context;
  proto::Graph graph = buildGraph(context, [](GraphBuilder &b) {
    out(b, b.matmul(in(b, "x", {64, 256}), in(b, "w", {256, 96})));
  });
  DiffOptions options;
  options.autoCastBf16(0.06);
  expectMatches(graph, options);
  auto artifact = compile(graph, options.compile);
  ASSERT_TRUE(static_cast<bool>(artifact));
  bool bf16Matmul = false;
  for (const artifact::Stream &s : artifact->streams) {
    for (const isa::Instruction &inst : s.instructions) {
      bf16Matmul |= inst.opcode == isa::Opcode::Matmul &&
                    inst.operands[1].dtype == isa::DType::BF16;
    }
  }
  EXPECT_TRUE(bf16Matmul) << "auto-cast did not reach TensorE";
}

TEST(CompilerTest, EmbeddingGradientsComputeTheirOneHotOnChip) {
  // The product one-hot(ids)^T . g computes its one-hot tiles from the ids
  // (test/passes/tile/one-hot-operand.mlir): 300 tokens (a partial K slice),
  // a vocabulary of 1000 (a partial 512-column block and row tile) and a
  // padding row; then ids crowded on 5 rows (sums of ~60 gradient rows),
  // in f32 and with --auto-cast=bf16, where g is rounded to bf16 (2^-9
  // relative per term; over ~60 terms in [-1, 1] a deviation of about
  // 0.01, and 0.06 is six of them) and the one-hot is exact.
  mlir::MLIRContext context;
  proto::Graph graph = buildGraph(context, [](GraphBuilder &b) {
    Tensor ids = in(b, "idx", {3, 100}, proto::I64);
    Tensor g = in(b, "g", {3, 100, 72});
    out(b, b.embeddingBackward(g, ids, 1000, 7), "many_rows");
    Tensor crowded = in(b, "crowded", {3, 100}, proto::I64);
    out(b, b.embeddingBackward(g, crowded, 5, -1), "few_rows");
  });
  DiffOptions options;
  options.ranges["idx"] = {0.0, 1000.0};
  options.ranges["crowded"] = {0.0, 5.0};
  expectMatches(graph, options);
  options.autoCastBf16(0.06);
  expectMatches(graph, options);
}

/// AdamW (weight decay 0.01) on a `rows` x 72 table looked up by [2,
/// `seq`] ids, row 7 the padding row.
proto::Graph tableStep(mlir::MLIRContext &context, int64_t rows, int64_t seq) {
  return buildGraph(context, [&](GraphBuilder &b) {
    Tensor table = b.input("table", proto::F32, {rows, 72}, proto::PARAMETER);
    Tensor ids = in(b, "ids", {2, seq}, proto::I64);
    Tensor g = in(b, "g", {2, seq, 72});
    out(b, b.embedding(table, ids), "rows");
    Tensor lr = b.input("lr", proto::F32, {}, proto::HYPER_PARAMETER);
    Tensor step = b.input("step", proto::F32, {}, proto::HYPER_PARAMETER);
    OptimizerSpec adamw;
    adamw.weightDecay = 0.01;
    addOptimizerUpdate(b, adamw, "table", table,
                       b.embeddingBackward(g, ids, rows, 7), lr, step);
  });
}
/// tableStep's inputs: ids in [0, `idRange`), the third step.
DiffOptions tableStepInputs(double idRange) {
  DiffOptions options;
  options.ranges["ids"] = {0.0, idRange};
  options.ranges["step"] = {3.0, 3.0};
  options.ranges["lr"] = {0.01, 0.01};
  options.ranges["v_table"] = {0.0, 0.01};
  options.compile.optLevel = 2;
  return options;
}

TEST(CompilerTest, EmbeddingTableUpdateSplitsByRowAndMatchesReference) {
  // AdamW on a 1400-row table that 160 tokens pick from (at least eight
  // rows a token, so kgraph-sparse-table-updates splits it: the whole table
  // updated with a zero gradient, the picked rows gathered first, updated
  // with their gradient and scattered back, all in place over the table
  // and its moments). The tokens crowd onto 100 rows, so most rows are
  // picked several times, and one of those is the padding row, whose
  // gradient is zero. The forward lookup must still see the old table.
  mlir::MLIRContext context;
  proto::Graph graph = tableStep(context, 1400, 80);
  DiffOptions options = tableStepInputs(100.0);
  expectMatches(graph, options);
  // The split is what ran: the artifact holds row scatters.
  auto artifact = compile(graph, options.compile);
  ASSERT_TRUE(static_cast<bool>(artifact))
      << llvm::toString(artifact.takeError());
  EXPECT_GT(countOpcode(*artifact, isa::Opcode::DmaScatter), 0u);
}

TEST(CompilerTest, EmbeddingTableUpdateOfAGroupMatchesReference) {
  // The same update compiled for 4 workers, 16 tokens each (a 700-row
  // table has more than eight rows for each of the group's 64): an
  // all-gather collects every worker's indices, each worker computes its
  // gradient at those 64 rows, and an all-reduce averages that, not the
  // dense table's. Simulated alone, a worker finds its own indices in every
  // slot and its own gradient rows as the mean: the reference's step.
  mlir::MLIRContext context;
  proto::Graph graph = tableStep(context, 700, 8);
  DiffOptions options = tableStepInputs(20.0);
  options.compile.worldSize = 4;
  expectMatches(graph, options);
  auto artifact = compile(graph, options.compile);
  ASSERT_TRUE(static_cast<bool>(artifact))
      << llvm::toString(artifact.takeError());
  // One all-gather, and two all-reduces: the gradient in the group's 64
  // rows and the looked-up rows' average (the test's outputs are metrics);
  // none of the dense table's size.
  size_t gathers = 0, reduces = 0;
  for (const auto &stream : artifact->streams) {
    for (const isa::Instruction &inst : stream.instructions) {
      if (inst.opcode != isa::Opcode::Collective) {
        continue;
      }
      bool gather = static_cast<isa::CollectiveKind>(inst.op0) ==
                    isa::CollectiveKind::AllGather;
      gathers += gather;
      reduces += !gather;
      EXPECT_LT(inst.operands[1].freeElements(), 700 * 72);
    }
  }
  EXPECT_EQ(gathers, 1u);
  EXPECT_EQ(reduces, 2u);
  EXPECT_GT(countOpcode(*artifact, isa::Opcode::DmaScatter), 0u);
}

TEST(CompilerTest, WeightsReadTwiceShareOneBf16Copy) {
  // A weight three products read through bf16 casts, as a forward pass
  // (transposed, twice: the two casts merge) and a backward pass (as it is)
  // do: the first product stores the bf16 tiles it loads into a copy of
  // the weight, and the other two read the copy
  // (test/passes/tile/bf16-weight-copies.mlir). 200 x 300: partial tiles
  // both ways, so a copy with a tile missing or misplaced reads as NaN or
  // as other elements. Tolerance as in Bf16MatmulAccumulatesInF32.
  mlir::MLIRContext context;
  proto::Graph graph = buildGraph(context, [](GraphBuilder &b) {
    Tensor w = in(b, "w", {200, 300});
    Tensor wt = b.transpose(w, {1, 0});
    out(b, bf16Product(b, in(b, "x", {64, 300}), wt), "y");
    out(b, bf16Product(b, in(b, "g", {64, 200}), w), "dx");
    out(b, bf16Product(b, in(b, "x2", {16, 300}), wt), "y2");
  });
  DiffOptions options;
  options.rtol = 1.0 / 256;
  options.atol = 1e-4;
  expectMatches(graph, options);
}

/// The backward's softmax gradient from dP = dO . V^T, heads [B, H] of
/// `queries` x `keys`, dO and V `depth` wide.
proto::Graph softmaxGradient(mlir::MLIRContext &context, int64_t batch,
                             int64_t heads, int64_t queries, int64_t keys,
                             int64_t depth) {
  return buildGraph(context, [&](GraphBuilder &b) {
    Tensor dp = b.matmul(in(b, "g", {batch, heads, queries, depth}),
                         in(b, "v", {batch, heads, depth, keys}));
    out(b, b.softmaxBackward(dp, in(b, "p", {batch, heads, queries, keys}), 3),
        "dscores");
  });
}

/// Each attention graph against the interpreter in f32, then with
/// --auto-cast=bf16: a seed for the dropout, probabilities in [0, pMax]
/// (about 1 / keys, as a softmax's), f32 products accumulated in another
/// order, and the bf16 tolerance of AttentionSoftmaxRunsOnItsScoresTiles.
void expectAttentionMatches(llvm::ArrayRef<proto::Graph> graphs,
                            double pMax) {
  DiffOptions options;
  options.ranges["seed"] = {0.0, 2147483647.0};
  options.ranges["p"] = {0.0, pMax};
  options.atol = 2e-5;
  for (const proto::Graph &graph : graphs) {
    expectMatches(graph, options);
  }
  options.autoCastBf16(0.02);
  for (const proto::Graph &graph : graphs) {
    expectMatches(graph, options);
  }
}

TEST(CompilerTest, AttentionSoftmaxRunsOnItsScoresTiles) {
  // Attention's scores Q . K^T, their scaled softmax and dropout; and the
  // backward's softmax gradient from dP = dO . V^T: each softmax is the
  // epilogue of the product that feeds it, four heads side by side in a
  // PSUM tile, their rows folded a head at a time and the dropout's random
  // numbers drawn per head (test/passes/tile/batched-row-chain.mlir).
  // 5 heads (a group of four, then one alone), 40 rows and keys (partial
  // partitions); in f32, then with --auto-cast=bf16, whose scores carry
  // the bf16 rounding of 16-term products (about 2^-9 relative on each
  // term: under 0.01 on a probability, 0.02 with dropout's 4/3). Two
  // graphs: in one, fusion would join the backward's first group to the
  // forward's last, and the chain would read two products. The backward's
  // probabilities are drawn about 1/40, as 40 keys' would be.
  mlir::MLIRContext context;
  // The probabilities of the scaled scores Q . K^T, and them dropped.
  auto attention = [](GraphBuilder &b) {
    Tensor seed = b.input("seed", proto::I64, {}, proto::RNG_SEED);
    Tensor scores =
        b.matmul(in(b, "q", {2, 5, 40, 16}), in(b, "k", {2, 5, 16, 40}));
    Tensor p = b.softmax(b.div(scores, b.scalar(4.0)), 3);
    return std::make_pair(p, b.dropout(p, seed, 0.25).output);
  };
  proto::Graph forward = buildGraph(context, [&](GraphBuilder &b) {
    auto [p, dropped] = attention(b);
    out(b, dropped, "dropped");
    out(b, p, "p");
  });
  // The dropped probabilities read only by products, as attention's
  // context and the value gradient read them: their rows (40 keys) are
  // short, so the epilogue stores them with the heads inside the rows
  // ([B, S, H, S]) and the products read that layout. So does the
  // context product, whose heads the output projection merges.
  proto::Graph products = buildGraph(context, [&](GraphBuilder &b) {
    Tensor dropped = attention(b).second;
    Tensor heads = b.matmul(dropped, in(b, "v", {2, 5, 40, 16}));
    Tensor merged = b.reshape(b.transpose(heads, {0, 2, 1, 3}), {80, 80});
    out(b, b.matmul(merged, in(b, "w", {80, 24})), "projected");
    out(b,
        b.matmul(b.transpose(dropped, {0, 1, 3, 2}),
                 in(b, "g", {2, 5, 40, 16})),
        "dv");
  });
  expectAttentionMatches(
      {forward, products, softmaxGradient(context, 2, 5, 40, 40, 16)}, 0.05);
}

TEST(CompilerTest, SumsOverFewMiddleElementsAddTheirSlices) {
  // Grouped-query attention's key gradient: [B, kv heads, group, S, d]
  // summed over the group, whose slices are long contiguous blocks, adds
  // the slices elementwise (kgraph-assign-layout; in f32 for bf16, rounded
  // once, as the interpreter's sum). A middle dimension of more elements
  // than it adds (17) still moves innermost by a transpose.
  mlir::MLIRContext context;
  auto sums = [](proto::DType dtype) {
    return [dtype](GraphBuilder &b) {
      Tensor g = b.cast(in(b, "g", {1, 3, 8, 130, 40}), dtype);
      out(b, b.cast(b.reduceSum(g, {2}), proto::F32), "grouped");
      Tensor wide = b.cast(in(b, "x", {2, 17, 9, 20}), dtype);
      out(b, b.cast(b.reduceSum(wide, {1}, /*keepdim=*/true), proto::F32),
          "wide");
    };
  };
  DiffOptions options;
  expectMatches(buildGraph(context, sums(proto::F32)), options);
  options.rtol = 1.0 / 128; // one bf16 rounding of the sum
  expectMatches(buildGraph(context, sums(proto::BF16)), options);
}

TEST(CompilerTest, AttentionSoftmaxRunsOnWholeRowsOfLongerScores) {
  // Heads of 256 queries (two row tiles) over 640 keys (two PSUM tiles of
  // 512 and 128 columns): the causal softmax and its dropout, and the
  // backward's softmax gradient, are each the epilogue of their product,
  // on a row block's whole rows gathered in SBUF
  // (test/passes/tile/batched-row-chain.mlir, @long_rows). The mask is
  // built after the product, as a traced step builds it, and computed
  // from positions by the selects; the dropout's counters, the mask's
  // predicate and the stored rows follow each head's rows through the
  // batch. Tolerances as in AttentionSoftmaxRunsOnItsScoresTiles.
  mlir::MLIRContext context;
  proto::Graph forward = buildGraph(context, [](GraphBuilder &b) {
    Tensor seed = b.input("seed", proto::I64, {}, proto::RNG_SEED);
    Tensor scores =
        b.matmul(in(b, "q", {2, 3, 256, 24}), in(b, "k", {2, 3, 24, 640}));
    Tensor rows = b.iota({256, 640}, 0, proto::I32);
    Tensor cols = b.iota({256, 640}, 1, proto::I32);
    Tensor future = b.compare("gt", b.sub(cols, rows),
                              b.full({256, 640}, 384, proto::I32));
    Tensor masked = b.select(future, b.scalar(-1e30),
                             b.div(scores, b.scalar(4.0)));
    Tensor p = b.softmax(masked, 3);
    out(b, p, "p");
    out(b, b.dropout(p, seed, 0.25).output, "dropped");
  });
  expectAttentionMatches(
      {forward, softmaxGradient(context, 2, 3, 256, 640, 24)}, 0.003);
}

TEST(CompilerTest, LongRowSoftmaxSumsItsExponentialsOnScalarE) {
  // A softmax over 1024 keys (a row chain, a row a partition): the
  // exponentials' activation writes each row's sum as it computes them.
  // In f32 the sums have the interpreter's bits; in bf16 they sum the
  // values before their rounding to bf16 and divide by the f32 sum, so the
  // probabilities may differ from the interpreter's (which sums the
  // rounded exponentials and rounds the sum to bf16) by the sum's bf16
  // rounding and then the quotient's: two units in the last place.
  mlir::MLIRContext context;
  auto softmax = [](proto::DType dtype) {
    return [dtype](GraphBuilder &b) {
      Tensor x = b.cast(in(b, "x", {2, 130, 1024}), dtype);
      out(b, b.cast(b.softmax(b.mul(x, b.scalar(4.0, dtype)), 2), proto::F32),
          "p");
    };
  };
  DiffOptions options;
  expectMatches(buildGraph(context, softmax(proto::F32)), options);
  options.rtol = 1.0 / 64;
  expectMatches(buildGraph(context, softmax(proto::BF16)), options);
}

TEST(CompilerTest, MasksSelectInPlaceOnlyOnTheirOwnTiles) {
  // A select whose kept branch its group computes and reads once overwrites
  // that tile: the columns every row keeps stay, those none keeps are a
  // memset, the rest go through affine_select. Over 300 rows (three row
  // tiles a batch element, the last partial): a lower triangle (row - col
  // >= 0, the expression rising with the partition), a diagonal (eq: every
  // column mixed), and a product of one row broadcast over the rows, which
  // every row tile reads and which must stay as it is.
  mlir::MLIRContext context;
  // Each select its own mask, as a traced step builds them.
  auto mask = [](GraphBuilder &b, llvm::StringRef compare) {
    return b.compare(compare, b.iota({300, 300}, 0, proto::I32),
                     b.iota({300, 300}, 1, proto::I32));
  };
  proto::Graph graph = buildGraph(context, [&](GraphBuilder &b) {
    Tensor x = in(b, "x", {2, 300, 300});
    out(b,
        b.exp(b.select(mask(b, "ge"), b.mul(x, b.scalar(2.0)),
                       b.scalar(-1e30))),
        "lower");
    out(b,
        b.select(mask(b, "eq"), b.scalar(0.0), b.add(x, b.scalar(1.0))),
        "off_diagonal");
    Tensor row = b.broadcast(
        b.matmul(in(b, "u", {1, 8}), in(b, "w", {8, 300})), {2, 300, 300});
    out(b, b.exp(b.select(mask(b, "ge"), row, b.scalar(-1e30))), "row_kept");
  });
  DiffOptions options;
  options.atol = 2e-5; // the product's sums in another order
  expectMatches(graph, options);
}

TEST(CompilerTest, CausalMasksAreComputedFromPositions) {
  // A causal mask as PyTorch traces it (key index - query index <= 0 from
  // iotas, selected between true and false, negated) picks -1e30 for the
  // scaled scores of a batched product, in the product's epilogue; and an
  // upper-triangle mask picks 0 (the branch given first) for an input's
  // [3, 100, 100] elements, in a loop nest over the batch with a query a
  // partition (the 100 x 100 elements each view steps through alike split
  // again at the rows). No mask is loaded: affine_select computes it from
  // each element's position.
  mlir::MLIRContext context;
  auto causal = [](GraphBuilder &b, int64_t n) {
    Tensor rows = b.iota({n, n}, 0, proto::I32);
    Tensor cols = b.iota({n, n}, 1, proto::I32);
    Tensor keep = b.select(b.compare("le", b.sub(cols, rows), b.full({n, n}, 0, proto::I32)),
                           b.full({n, n}, 1, proto::I1), b.scalar(0, proto::I1));
    return b.logicalNot(keep);
  };
  proto::Graph graph = buildGraph(context, [&](GraphBuilder &b) {
    Tensor scores =
        b.matmul(in(b, "q", {2, 5, 40, 16}), in(b, "k", {2, 5, 16, 40}));
    Tensor masked = b.select(causal(b, 40), b.scalar(-1e30),
                             b.div(scores, b.scalar(4.0)));
    out(b, b.softmax(masked, 3), "p");
    Tensor x = in(b, "x", {3, 100, 100});
    Tensor upper = b.compare("gt", b.iota({100, 100}, 1, proto::I32),
                             b.iota({100, 100}, 0, proto::I32));
    out(b, b.exp(b.select(upper, b.scalar(0.0), x)), "upper_zeroed");
    // 130 rows of 10 x 10, a row's 100 elements on a partition's free
    // axis: the query index wraps every 10 columns, so the select is ten
    // boxes of 10 columns; the constant is the false branch.
    Tensor small = in(b, "small", {130, 10, 10});
    Tensor lower = b.compare("ge", b.iota({10, 10}, 0, proto::I32),
                             b.iota({10, 10}, 1, proto::I32));
    out(b, b.mul(b.select(lower, small, b.scalar(-2.0)), small), "lower_kept");
    // bf16 iotas round past 256 (300 and 301 are both 300): not affine in
    // the indices, so this mask is loaded, and equal keys stay kept.
    Tensor wide = in(b, "wide", {2, 512, 512});
    Tensor rounded = b.compare("ge", b.iota({512, 512}, 0, proto::BF16),
                               b.iota({512, 512}, 1, proto::BF16));
    out(b, b.select(rounded, wide, b.scalar(0.0)), "rounded_iotas");
  });
  DiffOptions options;
  options.atol = 2e-5; // f32 products accumulated in another order
  expectMatches(graph, options);
  auto artifact = compile(graph, options.compile);
  ASSERT_TRUE(static_cast<bool>(artifact))
      << llvm::toString(artifact.takeError());
  EXPECT_GT(countOpcode(*artifact, isa::Opcode::AffineSelect), 2u);
  options.autoCastBf16(0.01);
  expectMatches(graph, options);
}

TEST(CompilerTest, LayerNormRunsOnItsLinearLayersRows) {
  // A linear layer's bias, dropout and residual add, then a layer norm, as
  // after attention in an encoder layer: the layer norm is a row chain in
  // the product's epilogue, on whole rows (two PSUM banks of 768 columns,
  // a 512 and a 256), the residual stream never stored, the reciprocal
  // deviation gathered a column per row tile
  // (test/passes/tile/epilogue-row-chain.mlir). 200 rows: a partial row
  // tile. In f32, then with --auto-cast=bf16 (the product's 64 terms
  // rounded: about 0.01 on a normalized value, 0.03 where a row's
  // deviation is small).
  mlir::MLIRContext context;
  proto::Graph graph = buildGraph(context, [](GraphBuilder &b) {
    Tensor seed = b.input("seed", proto::I64, {}, proto::RNG_SEED);
    Tensor x = in(b, "x", {2, 100, 64});
    Tensor h = b.linear(x, in(b, "w", {768, 64}), in(b, "bias", {768}));
    Tensor sum =
        b.add(b.dropout(h, seed, 0.1).output, in(b, "residual", {2, 100, 768}));
    auto ln = b.layerNorm(sum, in(b, "gamma", {768}), in(b, "beta", {768}), 1);
    out(b, ln.output, "y");
    out(b, ln.rstd, "rstd");
  });
  // Its backward, as the traced BERT step has it: the two row sums and
  // the one group after them join the product's epilogue, a chain of one
  // group.
  proto::Graph backward = buildGraph(
      context, [](GraphBuilder &b) { layerNormBackwardAsTraced(b); });
  DiffOptions options;
  options.ranges["seed"] = {0.0, 2147483647.0};
  options.ranges["rstd"] = {0.5, 2.0};
  options.atol = 2e-5; // f32 products accumulated in another order
  expectMatches(graph, options);
  options.atol = 1e-4; // and sums over 768 and 200 of them
  expectMatches(backward, options);
  options.autoCastBf16(0.03);
  expectMatches(graph, options);
}

TEST(CompilerTest, LayerNormParameterGradientsSumInTheEpilogue) {
  // A layer norm's backward as the traced BERT step has it (see
  // LayerNormRunsOnItsLinearLayersRows), with its parameters' gradients:
  // the sums over rows of dY (beta's) and of dY * x_hat (gamma's). Both
  // fold on TensorE from the product epilogue's tiles, the second's group
  // joining the epilogue (test/passes/tile/epilogue-column-sums.mlir):
  // dY is never stored nor read back. 200 rows (a partial row tile), 768
  // columns (a 512- and a 256-column span). In f32, then with
  // --auto-cast=bf16, where the sums' loads round each summand to bf16
  // (2^-9 relative: the error is bounded by 2^-9 times the sum of |dY|
  // over 200 rows, about 2 here, and runs to about 0.5; the same as the
  // sums computed on their own).
  mlir::MLIRContext context;
  proto::Graph graph = buildGraph(context, [](GraphBuilder &b) {
    auto [dy, xhat] = layerNormBackwardAsTraced(b);
    out(b, b.reduceSum(b.mul(dy, b.reshape(xhat, {200, 768})), {0}), "dgamma");
    out(b, b.reduceSum(dy, {0}), "dbeta");
  });
  DiffOptions options;
  options.ranges["rstd"] = {0.5, 2.0};
  options.atol = 1e-4; // f32 sums over 768, 64 and 200 terms in any order
  expectMatches(graph, options);
  options.autoCastBf16(1.0);
  expectMatches(graph, options);
}

TEST(CompilerTest, BackwardRecomputesGeluInputFromBf16Product) {
  // A linear layer's bf16 product, its bias and GELU, then the next layer
  // and the GELU's backward, as a traced step has them: the backward's
  // group recomputes the GELU's f32 input from the bf16 product, which the
  // forward epilogue stores instead of the f32 input
  // (test/passes/graph/rematerialize.mlir,
  // test/passes/tile/epilogue-stores-product.mlir). Explicit bf16 casts, so
  // that the reference rounds where the device does. 200 x 300: a partial row
  // tile and column block, whose missing or misplaced tiles would read as NaN
  // or as other elements.
  mlir::MLIRContext context;
  proto::Graph graph = buildGraph(context, [](GraphBuilder &b) {
    auto linear = [&](Tensor x, Tensor w) { return bf16Product(b, x, w); };
    Tensor h = b.add(linear(in(b, "x", {200, 64}), in(b, "w1", {64, 300})),
                     in(b, "bias", {300}));
    Tensor z = linear(b.gelu(h), in(b, "w2", {300, 96}));
    out(b, z, "z");
    // The output gradient after the forward pass, as a loss's is, but not
    // made of z: z's bf16 roundings would flip apart between the device
    // and the reference and swamp the comparison.
    Tensor dz = b.add(in(b, "dz", {200, 96}), b.mul(z, b.scalar(0.0)));
    Tensor dy = linear(dz, in(b, "w2t", {96, 300}));
    out(b, b.geluBackward(dy, h), "dh");
  });
  // A bf16 rounding may flip between the device and the reference where
  // their f32 sums differ in the last bit (another accumulation order, or
  // a compiler contracting the reference's multiply-adds): a flip of one
  // of z's 300 bf16 terms moves it by up to 2^-8 of the term, about 0.02.
  DiffOptions options;
  options.rtol = 1.0 / 128;
  options.atol = 0.05;
  expectMatches(graph, options);

  // The GELU's backward reads an input its own group computes.
  prepareContext(context);
  auto module = graph::importGraph(graph, context);
  ASSERT_TRUE(static_cast<bool>(module));
  ASSERT_FALSE(
      static_cast<bool>(lowerModule(**module, options.compile, Phase::Graph)));
  int recomputed = 0;
  (*module)->walk([&](kgraph::GeluBackwardOp op) {
    auto group = op->getAttrOfType<mlir::IntegerAttr>("kgraph.fusion");
    mlir::Operation *input = op.getOperand(1).getDefiningOp();
    recomputed += group && input && input->getAttr("kgraph.fusion") == group;
  });
  EXPECT_EQ(recomputed, 1);
}

TEST(CompilerTest, LoneReadersOfProductsRunInTheirEpilogues) {
  // Ops that are alone in their fusion group and read a product, as a model
  // kept in bf16 has them: the GELU's backward on the product that computes
  // its output gradient, and a projection's bias add whose sum a later
  // product reads. Each runs on its product's output tiles as they leave
  // PSUM (test/passes/tile/epilogue.mlir), so the only stores to HBM are
  // the step's outputs. 200 x 300: a partial row tile and column block.
  // The bf16 product may round to the other neighbour than the reference's
  // where their f32 sums differ in the last bit (another accumulation
  // order): one bf16 ulp, 2^-8 relative.
  mlir::MLIRContext context;
  proto::Graph graph = buildGraph(context, [](GraphBuilder &b) {
    Tensor da = b.matmul(in(b, "dy", {200, 96}, proto::BF16),
                         in(b, "w", {96, 300}, proto::BF16));
    out(b, b.geluBackward(da, in(b, "z", {200, 300}, proto::BF16)), "dh");
    Tensor q = b.add(b.matmul(in(b, "x", {200, 96}), in(b, "v", {96, 300})),
                     in(b, "bias", {300}));
    out(b, q, "q");
    out(b, b.matmul(q, in(b, "u", {300, 40})), "next");
  });
  DiffOptions options;
  options.rtol = 1.0 / 128;
  options.atol = 1e-4;
  expectMatches(graph, options);

  auto artifact = compile(graph, options.compile);
  ASSERT_TRUE(static_cast<bool>(artifact))
      << llvm::toString(artifact.takeError());
  int64_t stored = 0;
  for (const artifact::Stream &s : artifact->streams) {
    for (const isa::Instruction &inst : s.instructions) {
      const isa::AccessPattern &dst = inst.operands[0];
      if (isa::isTransfer(inst.opcode) && dst.memory == isa::Memory::Hbm) {
        stored += dst.partitions * dst.freeElements() * dst.elementBytes();
      }
    }
  }
  EXPECT_EQ(stored, 200 * 300 * 2 + 200 * 300 * 4 + 200 * 40 * 4)
      << "a product went to HBM and back";
}

TEST(CompilerTest, TwoStageTensorScalarsMatchReference) {
  // Pairs of tensor_scalars joined into one two-stage instruction
  // (test/passes/tile/two-stage-tensor-scalar.mlir): a runtime scalar in
  // the first stage, in the second, and a chain of three, whose first two
  // join. 200 x 300: a partial row block.
  mlir::MLIRContext context;
  proto::Graph graph = buildGraph(context, [](GraphBuilder &b) {
    Tensor x = in(b, "x", {200, 300});
    Tensor s = in(b, "s", {});
    out(b, b.add(b.div(x, s), b.scalar(1e-3)), "first");
    out(b, b.add(b.mul(x, b.scalar(2.0)), s), "second");
    out(b, b.mul(b.sub(b.div(x, s), b.scalar(0.25)), b.scalar(3.0)), "chain");
  });
  DiffOptions options;
  options.ranges["s"] = {0.5, 2.0};
  expectMatches(graph, options);
}

TEST(CompilerTest, ModelFlopsCountTheGraphsOwnProducts) {
  // MFU's numerator: a linear layer (2 x 6 x 8 x 5) and a batched matmul
  // (2 x 3 x 4 x 5 x 6) count; the embedding's one-hot product and its
  // gradient's (what the compiler makes of a row lookup) do not, though
  // they run on TensorE too.
  mlir::MLIRContext context;
  proto::Graph graph = buildGraph(context, [](GraphBuilder &b) {
    Tensor table = in(b, "table", {100, 8});
    Tensor idx = in(b, "idx", {2, 3}, proto::I64);
    Tensor rows = b.embedding(table, idx);
    out(b, b.linear(rows, in(b, "w", {5, 8})), "linear");
    out(b, b.matmul(in(b, "a", {3, 4, 6}), in(b, "c", {3, 6, 5})), "batched");
    out(b, b.embeddingBackward(rows, idx, 100, -1), "grad");
  });
  auto artifact = compile(graph, CompileOptions{});
  ASSERT_TRUE(static_cast<bool>(artifact)) << llvm::toString(artifact.takeError());
  EXPECT_EQ(artifact->manifest.cost().model_flops(),
            2.0 * 6 * 8 * 5 + 2.0 * 3 * 4 * 5 * 6);
}

TEST(CompilerTest, AutoCastConcatOfPartsStaysNearF32) {
  // With --auto-cast=bf16 a concat that only matmuls read is built in
  // bf16 from its parts (a product written as it leaves PSUM, an
  // elementwise value narrowed in its group); the result stays within
  // bf16 rounding of the f32 reference. Each of the K = 192 terms (a
  // product of a part, |p| about 2 or e^x up to 2.7, and a weight in
  // [-1, 1]) carries up to 2^-8 relative error from each rounded input:
  // the sum's error has a deviation of about 0.05, and the largest of
  // 2560 outputs reaches about four of them; 0.3 is six. Parts in the
  // wrong order are off by whole units.
  mlir::MLIRContext context;
  proto::Graph graph = buildGraph(context, [](GraphBuilder &b) {
    Tensor p = b.matmul(in(b, "a", {64, 32}), in(b, "b", {32, 96}));
    Tensor e = b.exp(in(b, "x", {64, 96}));
    Tensor c = b.concat({p, e}, 1);
    out(b, b.matmul(c, in(b, "w", {192, 40})));
  });
  DiffOptions options;
  options.autoCastBf16(0.3);
  expectMatches(graph, options);
}

TEST(CompilerTest, SameGraphGivesByteIdenticalArtifacts) {
  mlir::MLIRContext context;
  auto graph = examples::buildMlpTrainStep(context, examples::MlpConfig{});
  ASSERT_TRUE(static_cast<bool>(graph));
  auto a = compile(*graph, CompileOptions{});
  auto b = compile(*graph, CompileOptions{});
  ASSERT_TRUE(a && b);
  EXPECT_EQ(artifact::writeArtifact(*a), artifact::writeArtifact(*b));
}

TEST(CompilerTest, UnknownTargetIsAnError) {
  mlir::MLIRContext context;
  proto::Graph graph = buildGraph(
      context, [](GraphBuilder &b) { out(b, b.exp(in(b, "x", {4, 4}))); });
  CompileOptions options;
  options.target = "trn9";
  auto artifact = compile(graph, options);
  ASSERT_FALSE(static_cast<bool>(artifact));
  EXPECT_NE(llvm::toString(artifact.takeError()).find("trn9"),
            std::string::npos);
}

TEST(CompilerTest, VariantTargetsCompileForTheirOwnLimits) {
  // kiln-bench-compile --what-if compiles for variants of trn1: each must
  // be found by name by every phase and by the simulator, compute the same
  // numbers, and be modelled with its own limits, not trn1's.
  const char *name = "trn1-test-dma-x4";
  const target::TargetDescription *variant = target::lookupTarget(name);
  if (!variant) {
    target::TargetDescription t = *target::lookupTarget("trn1");
    t.dmaBytesPerSecondPerQueue.value *= 4;
    variant = &target::registerVariant(name, t);
  }
  EXPECT_EQ(variant->name, name);
  EXPECT_EQ(target::lookupTarget(name), variant);
  EXPECT_DOUBLE_EQ(target::lookupTarget("trn1")->dmaBytesPerSecondPerQueue,
                   variant->dmaBytesPerSecondPerQueue / 4);

  mlir::MLIRContext context;
  auto graph = examples::buildMlpTrainStep(context, examples::MlpConfig{});
  ASSERT_TRUE(static_cast<bool>(graph)) << llvm::toString(graph.takeError());
  DiffOptions options = mlpStepInputs();
  auto onTrn1 = compileAndCompare(*graph, options);
  options.compile.target = name;
  auto onVariant = compileAndCompare(*graph, options);
  ASSERT_TRUE(static_cast<bool>(onTrn1)) << llvm::toString(onTrn1.takeError());
  ASSERT_TRUE(static_cast<bool>(onVariant))
      << llvm::toString(onVariant.takeError());
  EXPECT_TRUE(onVariant->passed()) << onVariant->worst;
  // The MLP step is DMA-bound: four times the bandwidth shows.
  EXPECT_LT(onVariant->modelledSeconds, 0.9 * onTrn1->modelledSeconds);
  auto artifact = compile(*graph, options.compile);
  ASSERT_TRUE(static_cast<bool>(artifact));
  EXPECT_EQ(artifact->manifest.target(), name);
}

/// The random-graph tests' seeds, [first, first + count): `count` unless
/// KILN_RANDOM_GRAPHS sets it, from KILN_RANDOM_FIRST_SEED (0).
std::pair<int, int> randomSeeds(int count) {
  int first = 0;
  if (const char *env = std::getenv("KILN_RANDOM_GRAPHS")) {
    count = std::atoi(env);
  }
  if (const char *env = std::getenv("KILN_RANDOM_FIRST_SEED")) {
    first = std::atoi(env);
  }
  return {first, count};
}

/// Seeded random graphs, shapes that are not multiples of 128 included.
/// KILN_RANDOM_GRAPHS sets how many (the `differential-large` target runs
/// twenty thousand) and KILN_RANDOM_FIRST_SEED the first seed (0), to explore
/// graphs the runs before have not.
TEST(CompilerTest, RandomGraphsMatchReference) {
  auto [first, count] = randomSeeds(1500);
  for (int seed = first; seed < first + count; ++seed) {
    mlir::MLIRContext context;
    auto graph = randomGraph(context, seed);
    ASSERT_TRUE(static_cast<bool>(graph)) << "seed " << seed << ": "
                                          << llvm::toString(graph.takeError());
    DiffOptions options;
    options.seed = seed;
    options.compile.optLevel = seed % 3;
    options.rtol = 1e-4; // chains of up to a dozen f32 ops
    options.atol = 5e-5; // matmuls: see OpTest
    auto report = compileAndCompare(*graph, options);
    ASSERT_TRUE(static_cast<bool>(report))
        << "seed " << seed << ": " << llvm::toString(report.takeError());
    ASSERT_TRUE(report->passed()) << "seed " << seed << ": " << report->worst;
  }
}

/// Random graphs as data-parallel steps (randomGraph's gradients), compiled
/// for groups of 2, 4 and 8 with gradient buckets from 256 bytes, smaller
/// than most gradients, to 16 MiB, which holds them all. Packing a bucket,
/// all-reducing it and unpacking its gradients changes no result: simulated
/// alone, a worker's all-reduce averages its own gradients.
TEST(CompilerTest, RandomGraphsAsDataParallelStepsMatchReference) {
  static const int worldSizes[] = {2, 4, 8};
  static const int64_t bucketBytes[] = {256, 1024, 4096, 16384, 65536,
                                        int64_t(16) << 20};
  auto [first, count] = randomSeeds(1000);
  for (int seed = first; seed < first + count; ++seed) {
    mlir::MLIRContext context;
    auto graph = randomGraph(context, seed, /*gradients=*/true);
    ASSERT_TRUE(static_cast<bool>(graph)) << "seed " << seed << ": "
                                          << llvm::toString(graph.takeError());
    DiffOptions options;
    options.seed = seed;
    options.compile.optLevel = seed % 3;
    options.compile.bucketBytes = bucketBytes[(seed / 3) % 6];
    options.compile.worldSize = worldSizes[(seed / 18) % 3];
    options.rtol = 1e-4; // as RandomGraphsMatchReference
    options.atol = 5e-5;
    auto report = compileAndCompare(*graph, options);
    ASSERT_TRUE(static_cast<bool>(report))
        << "seed " << seed << ": " << llvm::toString(report.takeError());
    ASSERT_TRUE(report->passed()) << "seed " << seed << ": " << report->worst;
  }
}

} // namespace
