// Inference of activations, softmax, broadcasting arithmetic, unary math and reductions
// (teeny.graph:ops_elementwise).
#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

import teeny.graph;

#include "graph/support.hpp"

using namespace graph_test;

TEST_CASE("activations keep the type and reject integer inputs, naming the dtype") {
  const std::vector<GraphOp> activations{ReLU{},     LeakyReLU{}, GELU{},      SiLU{},    Sigmoid{},   Tanh{},
                                         Softplus{}, ELU{},       Hardswish{}, Softmax{}, LogSoftmax{}};
  for (const GraphOp& op : activations) {
    CAPTURE(describe(op));
    CHECK(*run(op, {f32({batch, 10})}) == f32({batch, 10}));
    CHECK(*run(op, {half({3})}) == half({3}));
    CHECK(error_of(op, {i64({batch, 10})}) ==
          "input i64[batch, 10] is i64, but this op needs a floating-point dtype (f16, bf16, f32 or f64)");
    CHECK(error_of(op, {f32({1}), f32({1})}) == "expects 1 input, got 2");
  }
  CHECK(describe(ReLU{}) == "relu()");
  CHECK(describe(LeakyReLU{}) == "leaky_relu(negative_slope=0.01)");
  CHECK(describe(GELU{GeluApproximate::tanh}) == "gelu(approximate=tanh)");
  CHECK(describe(Softplus{}) == "softplus(beta=1, threshold=20)");
  CHECK(describe(ELU{}) == "elu(alpha=1)");
  CHECK(describe(LogSoftmax{1}) == "log_softmax(axis=1)");
}

TEST_CASE("softmax checks its axis against the input rank") {
  CHECK(*run(Softmax{1}, {f32({2, 3})}) == f32({2, 3}));
  CHECK(*run(Softmax{-2}, {f32({2, 3})}) == f32({2, 3}));
  CHECK(error_of(Softmax{2}, {f32({2, 3})}) == "axis 2 is out of range for rank 2 (valid: -2..1)");
  CHECK(*run(Softmax{0}, {f32({})}) == f32({}));  // a scalar accepts 0 and -1, as in PyTorch
}

TEST_CASE("binary ops broadcast like PyTorch and need one dtype") {
  const Binary add{BinaryOp::add};
  CHECK(*run(add, {f32({2, 1, 4}), f32({3, 1})}) == f32({2, 3, 4}));
  CHECK(*run(add, {f32({batch, 10}), f32({10})}) == f32({batch, 10}));
  CHECK(*run(Binary{BinaryOp::mul}, {f32({batch, 1}), f32({1, 5})}) == f32({batch, 5}));
  CHECK(*run(Binary{BinaryOp::maximum}, {f32({}), f32({4})}) == f32({4}));
  CHECK(*run(add, {i64({3}), i64({3})}) == i64({3}));
  CHECK(*run(Binary{BinaryOp::pow}, {typed(DType::i32, {3}), typed(DType::i32, {1})}) == typed(DType::i32, {3}));

  CHECK(error_of(add, {f32({2, 3}), f32({4, 3})}) == "shapes [2, 3] and [4, 3] do not broadcast: dim 0 is 2 vs 4");
  CHECK(error_of(add, {f32({batch, 3}), f32({2, 3})}) ==
        "shapes [batch, 3] and [2, 3] do not broadcast: dim 0 is batch vs 2");
  CHECK(error_of(add, {f32({3}), i64({3})}) ==
        "inputs have different dtypes: f32[3] and i64[3] (cast one of them first)");
  CHECK_CONTAINS(error_of(Binary{BinaryOp::div}, {typed(DType::i32, {3}), typed(DType::i32, {3})}),
                 "div of i32 tensors is not supported");
  CHECK_CONTAINS(error_of(add, {typed(DType::boolean, {3}), typed(DType::boolean, {3})}), "is bool");

  CHECK(kind(GraphOp{add}) == "add");
  CHECK(Binary::kind == "binary");
  CHECK(describe(Binary{BinaryOp::minimum}) == "minimum()");
}

TEST_CASE("unary math: exp/log/sqrt/reciprocal need floats, abs/neg any number") {
  CHECK(*run(Unary{UnaryOp::exp}, {f32({batch, 4})}) == f32({batch, 4}));
  CHECK(*run(Unary{UnaryOp::abs}, {i64({4})}) == i64({4}));
  CHECK(*run(Unary{UnaryOp::neg}, {typed(DType::i8, {4})}) == typed(DType::i8, {4}));
  CHECK_CONTAINS(error_of(Unary{UnaryOp::sqrt}, {i64({4})}), "is i64, but this op needs a floating-point dtype");
  CHECK_CONTAINS(error_of(Unary{UnaryOp::neg}, {typed(DType::boolean, {4})}), "bool");
  CHECK(kind(GraphOp{Unary{UnaryOp::reciprocal}}) == "reciprocal");
}

TEST_CASE("reductions drop or keep axes; sum of integers is i64") {
  CHECK(*run(Reduce{ReduceOp::sum}, {f32({2, 3, 4})}) == f32({}));
  CHECK(*run(Reduce{ReduceOp::sum, {}, true}, {f32({2, 3, 4})}) == f32({1, 1, 1}));
  CHECK(*run(Reduce{ReduceOp::mean, {1}}, {f32({batch, 10, 64})}) == f32({batch, 64}));
  CHECK(*run(Reduce{ReduceOp::max, {-1}, true}, {f32({batch, 10, 64})}) == f32({batch, 10, 1}));
  CHECK(*run(Reduce{ReduceOp::sum, {0, 2}}, {f32({2, 3, 4})}) == f32({3}));
  CHECK(*run(Reduce{ReduceOp::sum, {1}}, {typed(DType::i32, {2, 3})}) == i64({2}));
  CHECK(*run(Reduce{ReduceOp::max, {1}}, {typed(DType::i32, {2, 3})}) == typed(DType::i32, {2}));

  CHECK(error_of(Reduce{ReduceOp::sum, {1, -2}}, {f32({2, 3, 4})}) == "axis 1 appears twice in axes [1, -2]");
  CHECK(error_of(Reduce{ReduceOp::sum, {3}}, {f32({2, 3, 4})}) == "axis 3 is out of range for rank 3 (valid: -3..2)");
  CHECK_CONTAINS(error_of(Reduce{ReduceOp::mean}, {i64({2})}), "i64");
  CHECK(describe(Reduce{ReduceOp::mean, {1}}) == "mean(axes=[1], keepdim=false)");
}
