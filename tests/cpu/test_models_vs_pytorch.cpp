// Whole CNNs on the CPU against PyTorch: LeNet and ResNet-18 built with the builder under the
// PyTorch modules' names, their state_dicts loaded strictly from tests/fixtures/models (made by
// tools/make_fixtures.py, which also stores the input in.x and PyTorch's out.logits), run at 1 and
// 2 threads and at larger batches (the fixture images repeated), allocation-free after the first
// forward. (The MLP is checked in tests/runtime/test_loaded_model.cpp.)
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

import teeny;

#include "models.hpp"
#include "support/allocation_counter.hpp"
#include "support/fixtures.hpp"

namespace {

// The graph, or the test stops with the builder's error.
teeny::Graph built(teeny::Result<teeny::Graph> graph) {
  REQUIRE_MESSAGE(graph, (graph ? "" : graph.error().to_string()));
  return std::move(*graph);
}
teeny::Graph lenet() { return built(models::lenet()); }
teeny::Graph resnet18() { return built(models::resnet18(64)); }  // the fixture's 64x64 input

struct Errors {
  double abs = 0;
  double rel = 0;        // |a - e| / |e| over elements with |e| >= 1e-3
  std::int64_t bad = 0;  // elements with |a - e| > atol + rtol * |e|
};

// How `actual` (`expected` repeated along dim 0) differs from `expected`.
Errors errors(const teeny::TensorBinding& actual, const teeny::Tensor& expected, double rtol, double atol) {
  REQUIRE(actual.shape.numel() % expected.numel() == 0);
  const auto* got = static_cast<const float*>(actual.data);
  auto want = expected.view<float>();
  REQUIRE(want);
  Errors e;
  for (std::int64_t i = 0; i < actual.shape.numel(); ++i) {
    const double w = want->data[i % expected.numel()];
    const double d = std::abs(static_cast<double>(got[i]) - w);
    e.abs = std::max(e.abs, d);
    if (std::abs(w) >= 1e-3) e.rel = std::max(e.rel, d / std::abs(w));
    if (!(d <= atol + rtol * std::abs(w))) ++e.bad;
  }
  return e;
}

// Loads `graph` for batch `times` * the fixture's, with the fixture's weights (strictly: the only
// keys left over are the input and output), runs the fixture's input repeated `times` and checks
// every copy of the logits against PyTorch's; returns the largest errors.
Errors run_against_pytorch(const teeny::Graph& graph, const fixtures::Model& fx, std::size_t threads,
                           std::int64_t times, double rtol, double atol, std::size_t expected_steps,
                           teeny::ConvAlgorithm conv = teeny::ConvAlgorithm::automatic) {
  CAPTURE(threads);
  CAPTURE(times);
  const teeny::Tensor x = fixtures::repeated(fx.x, times);
  auto model = teeny::load_cpu(graph, {{"batch", x.shape()[0]}}, {.threads = threads, .conv = conv});
  REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
  auto report = model->load_weights(fx.file, {.strict = false});
  REQUIRE_MESSAGE(report, (report ? "" : report.error().to_string()));
  CHECK(report->missing.empty());
  CHECK(report->mismatched.empty());
  CHECK(report->skipped_unexpected == std::vector<std::string>{"in.x", "out.logits"});
  CHECK(model->stats().steps == expected_steps);

  const teeny::TensorRef in[] = {teeny::TensorRef::of("x", x)};
  auto ran = model->forward(in);
  REQUIRE_MESSAGE(ran, (ran ? "" : ran.error().to_string()));
  const std::size_t allocations = test_support::allocation_count();
  REQUIRE(model->forward(in));  // again: nothing is allocated per forward
  CHECK(test_support::allocation_count() == allocations);

  auto out = model->output("logits");
  REQUIRE(out);
  const Errors e = errors(*out, fx.logits, rtol, atol);
  CHECK(e.bad == 0);
  return e;
}
}  // namespace

TEST_CASE("LeNet loads a PyTorch state_dict strictly and reproduces its logits") {
  const fixtures::Model fx = fixtures::model("lenet");
  const teeny::Graph graph = lenet();
  // conv1+relu+pool, conv2+relu+pool, flatten, fc1+relu, fc2+relu, fc3: the ReLUs fused, the max
  // pools folded into the convolutions.
  constexpr std::size_t steps = 6;
  for (std::size_t threads : {1, 2}) {
    for (std::int64_t times : {1, 22}) {  // batch 3 and 66
      const Errors e = run_against_pytorch(graph, fx, threads, times, 1e-5, 1e-6, steps);
      MESSAGE("LeNet, batch " << 3 * times << ", " << threads << " thread(s): max |error| " << e.abs
                              << ", max relative error " << e.rel);
    }
  }
}

// ResNet-18's logits go through 20 convolutions with K up to 4608 and BN-scaled sums: a different
// (blocked, FMA) summation order than PyTorch's gives relative differences of a few 1e-6 per layer
// that compound, so the check is 1e-4 relative + 1e-5 absolute (the MESSAGE reports what is seen).
TEST_CASE("ResNet-18 loads a PyTorch state_dict strictly and reproduces its logits") {
  const fixtures::Model fx = fixtures::model("resnet18");
  const teeny::Graph graph = resnet18();
  // Every BatchNorm and residual add folded into the conv before it and every ReLU fused into its
  // producer: stem conv1+bn1+relu+maxpool; 8 blocks of conv1+bn1+relu and conv2+bn2+add+relu, 3
  // downsamples of conv+bn; avgpool, flatten, fc. The folded BatchNorms still load by their own
  // keys (strict).
  constexpr std::size_t steps = 1 + 8 * 2 + 3 + 3;
  for (std::size_t threads : {1, 2}) {
    for (std::int64_t times : {1, 2}) {
      const Errors e = run_against_pytorch(graph, fx, threads, times, 1e-4, 1e-5, steps);
      MESSAGE("ResNet-18, batch " << times << ", " << threads << " thread(s): max |error| " << e.abs
                                  << ", max relative error " << e.rel);
    }
  }
}

// Issue 13's accuracy bound, per convolution method (each forced on every layer it fits; Winograd,
// either tile size, takes the 3x3 stride-1 ones): the logits' largest error within 1e-4 of the
// largest logit.
TEST_CASE("ResNet-18's logits stay within 1e-4 of the largest logit with every convolution method") {
  using teeny::ConvAlgorithm;
  const fixtures::Model fx = fixtures::model("resnet18");
  const teeny::Graph graph = resnet18();
  auto want = fx.logits.view<float>();
  REQUIRE(want);
  double largest = 0;
  for (const float v : want->span()) largest = std::max(largest, std::abs(static_cast<double>(v)));
  REQUIRE(largest > 0);
  const std::pair<ConvAlgorithm, const char*> methods[] = {
      {ConvAlgorithm::automatic, "automatic"},   {ConvAlgorithm::implicit, "implicit"},
      {ConvAlgorithm::im2col, "im2col"},         {ConvAlgorithm::transposed, "transposed"},
      {ConvAlgorithm::winograd, "winograd"},     {ConvAlgorithm::winograd_2x2, "winograd_2x2"},
      {ConvAlgorithm::pixel_rows, "pixel_rows"},
  };
  for (const auto& [method, name] : methods) {
    CAPTURE(name);
    const Errors e = run_against_pytorch(graph, fx, 1, 1, 1e-4, 1e-5, 1 + 8 * 2 + 3 + 3, method);
    MESSAGE("ResNet-18, " << std::string(name) << ": max |error| " << e.abs << " = " << e.abs / largest
                          << " of the largest logit (" << largest << ")");
    CHECK(e.abs <= 1e-4 * largest);
  }
}
