// Shape and dtype inference of the norm family (teeny.graph:ops_norm) and its state_dict entries.
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

TEST_CASE("batch_norm: 1d and 2d layouts, PyTorch's five state_dict entries") {
  const BatchNorm bn2{.num_features = 16};
  CHECK(*run(bn2, {f32({batch, 16, 8, 8})}) == f32({batch, 16, 8, 8}));
  CHECK(kind(GraphOp{bn2}) == "batch_norm2d");
  CHECK(BatchNorm::kind == "batch_norm");
  const BatchNorm bn1{.num_features = 16, .spatial_dims = 1};
  CHECK(kind(GraphOp{bn1}) == "batch_norm1d");
  CHECK(*run(bn1, {f32({batch, 16})}) == f32({batch, 16}));
  CHECK(*run(bn1, {f32({batch, 16, 50})}) == f32({batch, 16, 50}));

  const auto params = params_of(bn2, std::vector<TensorType>{f32({1, 16, 4, 4})});
  REQUIRE(params.size() == 5);
  CHECK(params[0] == ParamSpec{"weight", {16}, DType::f32, true});
  CHECK(params[1] == ParamSpec{"bias", {16}, DType::f32, true});
  CHECK(params[2] == ParamSpec{"running_mean", {16}, DType::f32, false});
  CHECK(params[3] == ParamSpec{"running_var", {16}, DType::f32, false});
  CHECK(params[4] == ParamSpec{"num_batches_tracked", {}, DType::i64, false});
  CHECK(params_of(BatchNorm{.num_features = 16, .affine = false}, std::vector<TensorType>{}).size() == 3);
  CHECK(params_of(BatchNorm{.num_features = 16, .track_running_stats = false}, std::vector<TensorType>{}).size() == 2);

  CHECK(error_of(BatchNorm{.num_features = 32}, {f32({batch, 16, 8, 8})}) ==
        "input f32[batch, 16, 8, 8] has 16 channels but num_features is 32");
  CHECK(error_of(bn2, {f32({batch, 16})}) == "expects a [N, C, H, W] input, got f32[batch, 16]");
  CHECK(describe(bn2) ==
        "batch_norm2d(num_features=16, eps=1e-05, momentum=0.1, affine=true, track_running_stats=true)");
}

TEST_CASE("layer_norm, rms_norm and group_norm") {
  const LayerNorm ln{.normalized_shape = {64}};
  CHECK(*run(ln, {f32({batch, 10, 64})}) == f32({batch, 10, 64}));
  CHECK(*run(LayerNorm{.normalized_shape = {10, 64}}, {f32({batch, 10, 64})}) == f32({batch, 10, 64}));
  const std::vector<TensorType> in{f32({2, 64})};
  CHECK(params_of(ln, in) ==
        std::vector<ParamSpec>{{"weight", {64}, DType::f32, true}, {"bias", {64}, DType::f32, true}});
  CHECK(params_of(LayerNorm{.normalized_shape = {64}, .bias = false}, in).size() == 1);
  CHECK(params_of(LayerNorm{.normalized_shape = {64}, .elementwise_affine = false}, in).empty());
  CHECK(error_of(LayerNorm{.normalized_shape = {32}}, {f32({batch, 10, 64})}) ==
        "input f32[batch, 10, 64] does not end in normalized_shape [32]");
  CHECK(error_of(LayerNorm{}, {f32({2, 3})}) == "normalized_shape must not be empty");

  const RMSNorm rms{.normalized_shape = {64}};
  CHECK(*run(rms, {half({batch, 64})}) == half({batch, 64}));
  CHECK(params_of(rms, std::vector<TensorType>{half({1, 64})}) ==
        std::vector<ParamSpec>{{"weight", {64}, DType::f16, true}});
  CHECK(describe(rms) == "rms_norm(normalized_shape=[64], eps=none, elementwise_affine=true)");

  const GroupNorm gn{.num_groups = 4, .num_channels = 32};
  CHECK(*run(gn, {f32({2, 32, 8, 8})}) == f32({2, 32, 8, 8}));
  CHECK(params_of(gn, std::vector<TensorType>{f32({2, 32, 8, 8})}).size() == 2);
  CHECK(error_of(GroupNorm{.num_groups = 3, .num_channels = 32}, {f32({2, 32, 8, 8})}) ==
        "num_groups 3 must divide num_channels 32");
  CHECK(error_of(gn, {f32({2, 16, 8, 8})}) == "input f32[2, 16, 8, 8] has 16 channels but num_channels is 32");
}
