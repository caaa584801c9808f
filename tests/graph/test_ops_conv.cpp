// Shape and dtype inference of the conv family (teeny.graph:ops_conv), with PyTorch's formulas.
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

TEST_CASE("conv2d output size follows PyTorch's formula") {
  const Conv2d lenet{.in_channels = 1, .out_channels = 32, .kernel = 5, .padding = 2};
  CHECK(*run(lenet, {f32({batch, 1, 28, 28})}) == f32({batch, 32, 28, 28}));             // 28 + 4 - 5 + 1
  CHECK(*run(Conv2d{3, 64, 3, 2, 1}, {f32({8, 3, 32, 32})}) == f32({8, 64, 16, 16}));    // (32+2-3)/2+1
  CHECK(*run(Conv2d{3, 8, 7, 2, 3}, {f32({1, 3, 224, 224})}) == f32({1, 8, 112, 112}));  // ResNet stem
  CHECK(*run(Conv2d{.in_channels = 1, .out_channels = 1, .kernel = 3, .dilation = 2}, {f32({1, 1, 10, 10})}) ==
        f32({1, 1, 6, 6}));  // (10 - 2*2 - 1) + 1
  CHECK(*run(Conv2d{.in_channels = 1, .out_channels = 4, .kernel = {3, 5}, .padding = {1, 2}}, {f32({1, 1, 10, 20})}) ==
        f32({1, 4, 10, 20}));
  CHECK(*run(Conv2d{3, 16, 3}, {f32({3, 8, 8})}) == f32({16, 6, 6}));  // unbatched
  // A symbolic spatial dim passes through a size-keeping window only.
  const Dim h = Dim::sym("h");
  CHECK(*run(Conv2d{.in_channels = 1, .out_channels = 2, .kernel = 3, .padding = 1}, {f32({1, 1, h, 9})}) ==
        f32({1, 2, h, 9}));
  CHECK_CONTAINS(error_of(Conv2d{1, 2, 3}, {f32({1, 1, h, 9})}), "dim 2 of input f32[1, 1, h, 9] is symbolic");

  const Conv2d grouped{.in_channels = 4, .out_channels = 8, .kernel = 3, .groups = 2};
  const auto params = params_of(grouped, std::vector<TensorType>{f32({1, 4, 5, 5})});
  REQUIRE(params.size() == 2);
  CHECK(params[0].shape == Shape{8, 2, 3, 3});
  CHECK(params[1].shape == Shape{8});
  CHECK(describe(lenet) ==
        "conv2d(in_channels=1, out_channels=32, kernel_size=(5, 5), stride=(1, 1), padding=(2, 2), "
        "dilation=(1, 1), groups=1, bias=true)");
}

TEST_CASE("conv2d rejects bad attributes and shapes, naming them") {
  CHECK(error_of(Conv2d{.in_channels = 4, .out_channels = 8, .kernel = 3, .groups = 3}, {f32({1, 4, 5, 5})}) ==
        "groups 3 must divide in_channels 4");
  CHECK(error_of(Conv2d{.in_channels = 4, .out_channels = 6, .kernel = 3, .groups = 4}, {f32({1, 4, 5, 5})}) ==
        "groups 4 must divide out_channels 6");
  CHECK(error_of(Conv2d{.in_channels = 1, .out_channels = 1, .kernel = 3, .stride = {0, 1}}, {f32({1, 1, 5, 5})}) ==
        "stride must be positive, got (0, 1)");
  CHECK(error_of(Conv2d{1, 1, 3, 1, -1}, {f32({1, 1, 5, 5})}) == "padding must be non-negative, got (-1, -1)");
  CHECK(error_of(Conv2d{1, 32, 5}, {f32({1, 3, 28, 28})}) ==
        "input f32[1, 3, 28, 28] has 3 channels but in_channels is 1");
  CHECK(
      error_of(Conv2d{1, 1, 5}, {f32({1, 1, 3, 3})}) ==
      "dim 2 of input f32[1, 1, 3, 3] is 3 (3 with padding), smaller than the kernel extent 5 (kernel 5, dilation 1)");
  CHECK(error_of(Conv2d{1, 1, 3}, {f32({28, 28})}) == "expects a [N, C, H, W] or [C, H, W] input, got f32[28, 28]");
  CHECK_CONTAINS(error_of(Conv2d{1, 1, 3}, {typed(DType::u8, {1, 1, 8, 8})}), "is u8");
}

TEST_CASE("conv1d works on [N, C, L] with weight [O, C/groups, k]") {
  const Conv1d conv{.in_channels = 16, .out_channels = 32, .kernel = 3, .stride = 2};
  CHECK(*run(conv, {f32({batch, 16, 100})}) == f32({batch, 32, 49}));  // (100 - 3) / 2 + 1
  CHECK(*run(conv, {f32({16, 100})}) == f32({32, 49}));
  CHECK(*run(Conv1d{.in_channels = 4, .out_channels = 4, .kernel = 3, .padding = 2, .dilation = 2}, {f32({1, 4, 7})}) ==
        f32({1, 4, 7}));
  const auto params = params_of(Conv1d{.in_channels = 16, .out_channels = 32, .kernel = 3, .groups = 4},
                                std::vector<TensorType>{f32({1, 16, 10})});
  CHECK(params[0].shape == Shape{32, 4, 3});
  CHECK(error_of(Conv1d{16, 32, 0}, {f32({1, 16, 10})}) == "kernel_size must be positive, got 0");
  CHECK(error_of(conv, {f32({1, 16, 10, 10})}) == "expects a [N, C, L] or [C, L] input, got f32[1, 16, 10, 10]");
}
