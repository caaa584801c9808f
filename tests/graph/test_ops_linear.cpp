// Shape and dtype inference of the linear family (teeny.graph:ops_linear), with PyTorch's formulas.
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

TEST_CASE("linear maps the last dim and owns weight [out, in] and bias [out]") {
  const Linear fc{.in_features = 784, .out_features = 512};
  CHECK(*run(fc, {f32({batch, 784})}) == f32({batch, 512}));
  CHECK(*run(fc, {f32({2, 5, 784})}) == f32({2, 5, 512}));
  CHECK(*run(fc, {f32({784})}) == f32({512}));

  const std::vector<TensorType> in{f32({batch, 784})};
  const auto params = params_of(GraphOp{fc}, in);
  REQUIRE(params.size() == 2);
  CHECK(params[0] == ParamSpec{"weight", {512, 784}, DType::f32, true});
  CHECK(params[1] == ParamSpec{"bias", {512}, DType::f32, true});
  CHECK(params_of(Linear{784, 10, false}, in).size() == 1);
  CHECK(describe(fc) == "linear(in_features=784, out_features=512, bias=true)");
  CHECK(kind(GraphOp{fc}) == "linear");

  CHECK(error_of(Linear{512, 10}, {f32({batch, 784})}) ==
        "input f32[batch, 784] has 784 features but in_features is 512");
  const std::string int_input = error_of(fc, {i64({batch, 784})});
  CHECK_CONTAINS(int_input, "i64");
  CHECK_CONTAINS(int_input, "floating-point");
  CHECK_CONTAINS(error_of(fc, {f32({})}), "expects a [..., in_features] input, got f32[]");
  CHECK_CONTAINS(error_of(Linear{784, -1}, {f32({1, 784})}), "out_features must be non-negative, got -1");
}

TEST_CASE("matmul follows torch.matmul: 1-D operands and broadcast batch dims") {
  const MatMul mm;
  CHECK(*run(mm, {f32({3}), f32({3})}) == f32({}));
  CHECK(*run(mm, {f32({2, 3}), f32({3, 4})}) == f32({2, 4}));
  CHECK(*run(mm, {f32({3}), f32({2, 3, 4})}) == f32({2, 4}));
  CHECK(*run(mm, {f32({2, 3, 4}), f32({4})}) == f32({2, 3}));
  CHECK(*run(mm, {f32({5, 1, 2, 3}), f32({4, 3, 6})}) == f32({5, 4, 2, 6}));
  CHECK(*run(mm, {f32({batch, 8, 16}), f32({16, 32})}) == f32({batch, 8, 32}));
  CHECK(*run(mm, {i64({2, 3}), i64({3, 4})}) == i64({2, 4}));

  CHECK(error_of(mm, {f32({2, 3}), f32({4, 5})}) ==
        "cannot multiply f32[2, 3] by f32[4, 5]: 3 (last dim of the first) vs 4 (second-to-last dim of the second)");
  CHECK_CONTAINS(error_of(mm, {f32({2, 3}), f32({4})}), "(the only dim of the second)");
  const std::string batch_error = error_of(mm, {f32({2, 2, 3}), f32({3, 3, 4})});
  CHECK_CONTAINS(batch_error, "the batch dims of f32[2, 2, 3] and f32[3, 3, 4] do not broadcast");
  CHECK_CONTAINS(batch_error, "dim 0 is 2 vs 3");
  CHECK_CONTAINS(error_of(mm, {f32({2, 3}), i64({3, 4})}), "f32[2, 3] and i64[3, 4]");
  CHECK_CONTAINS(error_of(mm, {f32({}), f32({3})}), "at least 1 dim");
  CHECK_CONTAINS(error_of(mm, {f32({3})}), "expects 2 inputs, got 1");
}
