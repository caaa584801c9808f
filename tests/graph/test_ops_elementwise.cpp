// Inference of the elementwise family: activations, broadcasting arithmetic, unary math and dropout
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

TEST_CASE("compare broadcasts to a bool result; where takes a bool condition and two values of one dtype") {
  CHECK(*run(Compare{CompareOp::lt}, {f32({batch, 1, 4}), f32({3, 1})}) == typed(DType::boolean, {batch, 3, 4}));
  CHECK(describe(Compare{CompareOp::ge}) == "ge()");
  CHECK(error_of(Compare{}, {f32({2}), i64({2})}) ==
        "inputs have different dtypes: f32[2] and i64[2] (cast one of them first)");
  CHECK(*run(Where{}, {typed(DType::boolean, {4, 1}), f32({2, 1, 3}), f32({3})}) == f32({2, 4, 3}));
  CHECK(error_of(Where{}, {f32({3}), f32({3}), f32({3})}) == "condition f32[3] is f32, not bool (compare, or cast it)");
  CHECK_CONTAINS(error_of(Where{}, {typed(DType::boolean, {3}), f32({3}), typed(DType::f64, {3})}), "different dtypes");
  CHECK_CONTAINS(error_of(Where{}, {typed(DType::boolean, {2}), f32({3}), f32({3})}), "broadcast");
}

TEST_CASE("activations keep the type and reject integer inputs, naming the dtype") {
  const std::vector<GraphOp> activations{ReLU{},      LeakyReLU{},  GELU{},       SiLU{},      Sigmoid{},
                                         Tanh{},      Softplus{},   ELU{},        Hardswish{}, Hardsigmoid{},
                                         Threshold{}, Hardshrink{}, Softshrink{}, Softmax{},   LogSoftmax{}};
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
  CHECK(describe(Threshold{0.5, -2}) == "threshold(threshold=0.5, value=-2)");
  CHECK(error_of(Softshrink{-1}, {f32({3})}) == "lambd must be at least 0, got -1");
  CHECK(describe(GELU{GeluApproximate::tanh}) == "gelu(approximate=tanh)");
  CHECK(describe(Softplus{}) == "softplus(beta=1, threshold=20)");
  CHECK(describe(ELU{}) == "elu(alpha=1)");
  CHECK(describe(LogSoftmax{1}) == "log_softmax(axis=1)");
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

TEST_CASE("dropout is the identity with p in [0, 1]") {
  CHECK(*run(Dropout{}, {f32({batch, 10})}) == f32({batch, 10}));
  CHECK(describe(Dropout{}) == "dropout(p=0.5)");
  CHECK(error_of(Dropout{1.5}, {f32({2})}) == "dropout probability must be between 0 and 1, got 1.5");
}
