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
  CHECK(*run(Reduce{ReduceOp::prod, {1}}, {typed(DType::u8, {2, 3})}) == i64({2}));
  CHECK(*run(Reduce{ReduceOp::prod, {0}, true}, {f32({2, 3})}) == f32({1, 3}));

  CHECK(error_of(Reduce{ReduceOp::sum, {1, -2}}, {f32({2, 3, 4})}) == "axis 1 appears twice in axes [1, -2]");
  CHECK(error_of(Reduce{ReduceOp::sum, {3}}, {f32({2, 3, 4})}) == "axis 3 is out of range for rank 3 (valid: -3..2)");
  CHECK_CONTAINS(error_of(Reduce{ReduceOp::mean}, {i64({2})}), "i64");
  CHECK(describe(Reduce{ReduceOp::mean, {1}}) == "mean(axes=[1], keepdim=false)");
}

TEST_CASE("nll_loss takes [N, C, d...] with integer targets [N, d...] and optional class weights") {
  CHECK(*run(NllLoss{}, {f32({batch, 10}), i64({batch})}) == f32({}));
  CHECK(*run(NllLoss{LossReduction::sum}, {f32({2, 5, 3, 4}), typed(DType::i32, {2, 3, 4})}) == f32({}));
  CHECK(*run(NllLoss{LossReduction::none}, {f32({2, 5, 3}), i64({2, 3}), f32({5})}) == f32({2, 3}));
  CHECK(describe(NllLoss{}) == "nll_loss(reduction=mean, ignore_index=-100)");

  CHECK(error_of(NllLoss{}, {f32({4, 10}), f32({4})}) == "target f32[4] is f32, but class indices must be integers");
  CHECK(error_of(NllLoss{}, {f32({4, 10}), i64({4, 1})}) ==
        "target i64[4, 1] does not fit input f32[4, 10]: expected [N, d...] = [4]");
  CHECK(error_of(NllLoss{}, {f32({4, 10}), i64({4}), f32({9})}) ==
        "weight f32[9] must hold one weight per class: [10]");
  CHECK_CONTAINS(error_of(NllLoss{}, {f32({10}), i64({})}), "[N, C, d...]");
  CHECK_CONTAINS(error_of(NllLoss{}, {i64({4, 10}), i64({4})}), "floating-point");
  CHECK_CONTAINS(error_of(NllLoss{}, {f32({4, 10}), i64({4}), typed(DType::f64, {10})}), "different dtypes");
}

TEST_CASE("cumsum and hardmax keep the input's type; their axis must be in range") {
  CHECK(*run(CumSum{1, true, true}, {f32({batch, 10})}) == f32({batch, 10}));
  CHECK(*run(Hardmax{}, {f32({2, 3, 4})}) == f32({2, 3, 4}));
  CHECK(describe(CumSum{-1}) == "cumsum(axis=-1, exclusive=false, reverse=false)");
  CHECK(error_of(CumSum{2}, {f32({2, 3})}) == "axis 2 is out of range for rank 2 (valid: -2..1)");
  CHECK(error_of(Hardmax{-3}, {f32({2, 3})}) == "axis -3 is out of range for rank 2 (valid: -2..1)");
  CHECK_CONTAINS(error_of(CumSum{}, {i64({2})}), "floating-point");
}

TEST_CASE("argmax and argmin give i64 indices along one axis, keepdim or not") {
  CHECK(*run(ArgReduce{ArgOp::max, 1}, {f32({batch, 10})}) == i64({batch}));
  CHECK(*run(ArgReduce{ArgOp::min, -1, true}, {f32({2, 3, 4})}) == i64({2, 3, 1}));
  CHECK(describe(ArgReduce{ArgOp::min, 1}) == "argmin(axis=1, keepdim=false, select_last_index=false)");
  CHECK(error_of(ArgReduce{ArgOp::max, 2}, {f32({2, 3})}) == "axis 2 is out of range for rank 2 (valid: -2..1)");
  CHECK(error_of(ArgReduce{ArgOp::max, 1}, {f32({2, 0})}) == "argmax over the empty dim 1 of f32[2, 0] has no answer");
  CHECK_CONTAINS(error_of(ArgReduce{}, {i64({2})}), "floating-point");
}
