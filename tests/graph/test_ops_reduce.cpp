// Inference of softmax and the reductions (teeny.graph:ops_reduce).
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

TEST_CASE("softmax checks its axis against the input rank") {
  CHECK(*run(Softmax{1}, {f32({2, 3})}) == f32({2, 3}));
  CHECK(*run(Softmax{-2}, {f32({2, 3})}) == f32({2, 3}));
  CHECK(error_of(Softmax{2}, {f32({2, 3})}) == "axis 2 is out of range for rank 2 (valid: -2..1)");
  CHECK(*run(Softmax{0}, {f32({})}) == f32({}));  // a scalar accepts 0 and -1, as in PyTorch
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
