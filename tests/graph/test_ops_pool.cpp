// Shape and dtype inference of the pool family (teeny.graph:ops_pool), with PyTorch's formulas.
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

TEST_CASE("max_pool2d: stride defaults to the kernel, ceil_mode and its last-window rule") {
  CHECK(*run(MaxPool2d{.kernel = 2}, {f32({batch, 32, 28, 28})}) == f32({batch, 32, 14, 14}));
  CHECK(*run(MaxPool2d{.kernel = 3, .stride = 2, .padding = 1}, {f32({1, 64, 112, 112})}) ==
        f32({1, 64, 56, 56}));  // ResNet
  // 5 wide, kernel 2, stride 2: floor gives 2 windows; ceil gives 3 (the last one partial).
  CHECK(*run(MaxPool2d{.kernel = 2}, {f32({1, 1, 5, 5})}) == f32({1, 1, 2, 2}));
  CHECK(*run(MaxPool2d{.kernel = 2, .ceil_mode = true}, {f32({1, 1, 5, 5})}) == f32({1, 1, 3, 3}));
  // 4 wide, kernel 2, stride 3, padding 1: ceil would give 3 windows, but the third would start at
  // 6 - 1 = 5 >= 4 + 1, outside the input and left padding, so PyTorch drops it: 2.
  CHECK(*run(MaxPool2d{.kernel = 2, .stride = 3, .padding = 1, .ceil_mode = true}, {f32({1, 1, 4, 4})}) ==
        f32({1, 1, 2, 2}));
  // 6 wide, kernel 3, stride 2, ceil: (6 - 3 + 1) / 2 + 1 = 3, and the last window starts at 4 < 6.
  CHECK(*run(MaxPool2d{.kernel = 3, .stride = 2, .ceil_mode = true}, {f32({1, 1, 6, 6})}) == f32({1, 1, 3, 3}));
  CHECK(*run(MaxPool2d{.kernel = 3, .stride = 1, .dilation = 2}, {f32({1, 1, 10, 10})}) == f32({1, 1, 6, 6}));
  CHECK(*run(MaxPool2d{.kernel = {2, 1}}, {f32({4, 6, 6})}) == f32({4, 3, 6}));  // unbatched, stride (2, 1)

  CHECK(error_of(MaxPool2d{.kernel = 3, .padding = 2}, {f32({1, 1, 8, 8})}) ==
        "padding (2, 2) must be at most half the kernel size (3, 3)");
  CHECK_CONTAINS(error_of(MaxPool2d{.kernel = 3}, {f32({1, 1, 2, 2})}), "smaller than the kernel extent 3");
  CHECK_CONTAINS(error_of(MaxPool2d{.kernel = 2}, {i64({1, 1, 4, 4})}), "i64");
  CHECK(describe(MaxPool2d{.kernel = 2}) ==
        "max_pool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0), dilation=(1, 1), ceil_mode=false)");
}

TEST_CASE("avg_pool2d and adaptive_avg_pool2d") {
  CHECK(*run(AvgPool2d{.kernel = 3, .stride = 2}, {f32({1, 3, 7, 7})}) == f32({1, 3, 3, 3}));
  CHECK(*run(AvgPool2d{.kernel = 2, .ceil_mode = true}, {f32({1, 3, 5, 5})}) == f32({1, 3, 3, 3}));
  CHECK(*run(AvgPool2d{.kernel = 3, .stride = 1, .padding = 1}, {f32({batch, 3, 5, 5})}) == f32({batch, 3, 5, 5}));
  CHECK(error_of(AvgPool2d{.kernel = 2, .divisor_override = 0}, {f32({1, 1, 4, 4})}) ==
        "divisor_override must not be zero");
  CHECK(describe(AvgPool2d{.kernel = 2, .divisor_override = 3}) ==
        "avg_pool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0), ceil_mode=false, count_include_pad=true, "
        "divisor_override=3)");

  CHECK(*run(AdaptiveAvgPool2d{}, {f32({batch, 512, 7, 7})}) == f32({batch, 512, 1, 1}));
  CHECK(*run(AdaptiveAvgPool2d{{2, 3}}, {f32({1, 8, 9, 9})}) == f32({1, 8, 2, 3}));
  CHECK(error_of(AdaptiveAvgPool2d{0}, {f32({1, 8, 9, 9})}) == "output_size must be positive, got (0, 0)");
}
