// Every convolution algorithm of the CPU backend (CpuOptions::conv), on every instruction set this
// machine has and with 1 and 2 threads, against a direct double-precision convolution: strides,
// padding, dilation, groups, several K blocks, fused ReLU, and shapes that leave partial tiles.
// Winograd F(4x4, 3x3) (forced where it fits: 3x3 stride 1) is held to a looser bound than the GEMM
// methods: its transforms scale values by up to 8 on the way in and out (see kWinogradTolerance).
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "cpu/kernels/gemm.hpp"
#include "support/isa.hpp"

import teeny;

namespace {

using teeny::ConvAlgorithm;
using teeny::cpu::Isa;

// Error bound relative to the sum of |terms| of an output, for Winograd F(4x4, 3x3) in f32: the
// cases below measure up to 3.7e-6 (the GEMM methods: 2.7e-7). F(2x2, 3x3)'s transforms only add
// and subtract (and halve, in the filters'): it measures 1.9e-7 and is held to the GEMM methods'
// bound.
constexpr double kWinogradTolerance = 2e-5;

struct ConvCase {
  const char* name;
  std::int64_t n, c, h, w, o;
  std::array<std::int64_t, 2> kernel, stride, padding, dilation;
  std::int64_t groups;
  bool bias, relu;
};

const ConvCase cases[] = {
    // K = 48 * 9 = 432: two K blocks of the AVX-512 kernels; 20 output channels: a partial row tile.
    {"3x3 pad 1, two K blocks, relu", 2, 48, 11, 13, 20, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true, true},
    {"7x7 stride 2 pad 3 (a ResNet stem)", 1, 3, 23, 21, 16, {7, 7}, {2, 2}, {3, 3}, {1, 1}, 1, true, false},
    {"3x2 strides 3x2, dilation 2x1, 2 groups", 2, 8, 12, 10, 12, {3, 2}, {3, 2}, {0, 2}, {2, 1}, 2, false, true},
    {"1x1 stride 2 (a downsample)", 3, 5, 7, 8, 40, {1, 1}, {2, 2}, {0, 0}, {1, 1}, 1, true, false},
    {"3x3 on 7x7, many channels", 1, 16, 7, 7, 70, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true, true},
    {"5x1 on a narrow map", 2, 4, 40, 3, 5, {5, 1}, {1, 1}, {2, 0}, {1, 1}, 1, true, false},
    // 3x3 stride 1, which Winograd takes: partial tiles at the bottom and right, paddings 0 to 2,
    // uneven ones, tile rows wider than a vector of tiles (75 wide: 19 tiles), groups.
    {"3x3 unpadded on 9x13", 2, 5, 9, 13, 7, {3, 3}, {1, 1}, {0, 0}, {1, 1}, 1, true, true},
    // Unpadded, the outputs a whole number of tiles wide: the last tile reads the row's last input.
    {"3x3 unpadded on 6x10, whole tiles", 1, 3, 6, 10, 5, {3, 3}, {1, 1}, {0, 0}, {1, 1}, 1, true, false},
    {"3x3 pad 2 on 5x6", 1, 3, 5, 6, 9, {3, 3}, {1, 1}, {2, 2}, {1, 1}, 1, true, false},
    {"3x3 pad 1x0, 2 groups, 19 tiles a row", 1, 6, 6, 75, 4, {3, 3}, {1, 1}, {1, 0}, {1, 1}, 2, false, false},
    {"3x3 pad 1 on 3x3, one tile", 3, 17, 3, 3, 33, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true, true},
    // Batch 1 on 2 threads: Winograd splits a map of many tiles by tiles, and a wide layer with few
    // tiles by output channels.
    {"3x3 pad 1, batch 1, 64 tiles", 1, 4, 30, 30, 8, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true, false},
    {"3x3 pad 1, batch 1, 4 tiles, 48 outputs", 1, 64, 6, 6, 48, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true, true},
    // Pixel rows (at most 16 output channels): LeNet's conv2, and rows of more than 16 pixels.
    {"5x5 unpadded, 16 outputs (LeNet's conv2)", 3, 8, 14, 14, 16, {5, 5}, {1, 1}, {0, 0}, {1, 1}, 1, true, true},
    {"3x3 pad 1, 13 outputs, 37-pixel rows", 2, 3, 5, 37, 13, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false, false},
};

// Deterministic values in [-1, 1).
std::vector<float> noise(std::size_t n, std::uint32_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) / 8388608.0f - 1.0f;
  }
  return v;
}

std::int64_t out_size(std::int64_t in, std::int64_t k, std::int64_t s, std::int64_t p, std::int64_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

// The direct convolution in double, and per output the sum of |terms| (to scale the tolerance).
void reference(const ConvCase& cc, const std::vector<float>& x, const std::vector<float>& w,
               const std::vector<float>& b, std::vector<double>& y, std::vector<double>& magnitude) {
  const std::int64_t ho = out_size(cc.h, cc.kernel[0], cc.stride[0], cc.padding[0], cc.dilation[0]);
  const std::int64_t wo = out_size(cc.w, cc.kernel[1], cc.stride[1], cc.padding[1], cc.dilation[1]);
  const std::int64_t cg = cc.c / cc.groups, og = cc.o / cc.groups;
  y.assign(static_cast<std::size_t>(cc.n * cc.o * ho * wo), 0.0);
  magnitude.assign(y.size(), 0.0);
  for (std::int64_t n = 0; n < cc.n; ++n) {
    for (std::int64_t o = 0; o < cc.o; ++o) {
      for (std::int64_t oh = 0; oh < ho; ++oh) {
        for (std::int64_t ow = 0; ow < wo; ++ow) {
          double sum = cc.bias ? b[o] : 0.0;
          double mag = std::abs(sum);
          for (std::int64_t c = 0; c < cg; ++c) {
            for (std::int64_t i = 0; i < cc.kernel[0]; ++i) {
              for (std::int64_t j = 0; j < cc.kernel[1]; ++j) {
                const std::int64_t ih = oh * cc.stride[0] - cc.padding[0] + i * cc.dilation[0];
                const std::int64_t iw = ow * cc.stride[1] - cc.padding[1] + j * cc.dilation[1];
                if (ih < 0 || ih >= cc.h || iw < 0 || iw >= cc.w) continue;
                const double term = double{x[((n * cc.c + o / og * cg + c) * cc.h + ih) * cc.w + iw]} *
                                    w[((o * cg + c) * cc.kernel[0] + i) * cc.kernel[1] + j];
                sum += term;
                mag += std::abs(term);
              }
            }
          }
          const auto at = static_cast<std::size_t>(((n * cc.o + o) * ho + oh) * wo + ow);
          y[at] = cc.relu ? std::max(sum, 0.0) : sum;
          magnitude[at] = mag;
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("every convolution algorithm, instruction set and thread count matches a direct convolution") {
  const test_support::IsaGuard restore_isa;
  for (const ConvCase& cc : cases) {
    CAPTURE(cc.name);
    const std::vector<float> x = noise(static_cast<std::size_t>(cc.n * cc.c * cc.h * cc.w), 1);
    const std::int64_t fan_in = cc.c / cc.groups * cc.kernel[0] * cc.kernel[1];
    const std::vector<float> w = noise(static_cast<std::size_t>(cc.o * fan_in), 2);
    const std::vector<float> b = noise(static_cast<std::size_t>(cc.o), 3);
    std::vector<double> expected, magnitude;
    reference(cc, x, w, b, expected, magnitude);

    teeny::GraphBuilder builder;
    auto in = builder.input("x", teeny::DType::f32, {cc.n, cc.c, cc.h, cc.w});
    auto y = builder
                 .conv2d(in, cc.o, {cc.kernel[0], cc.kernel[1]},
                         {.stride = {cc.stride[0], cc.stride[1]},
                          .padding = {cc.padding[0], cc.padding[1]},
                          .dilation = {cc.dilation[0], cc.dilation[1]},
                          .groups = cc.groups,
                          .bias = cc.bias})
                 .named("conv");
    builder.output("y", cc.relu ? builder.relu(y) : y);
    auto graph = std::move(builder).build();
    REQUIRE_MESSAGE(graph, (graph ? "" : graph.error().to_string()));

    std::vector<teeny::TensorRef> params = {
        teeny::TensorRef::of<float>("conv.weight", w, {cc.o, cc.c / cc.groups, cc.kernel[0], cc.kernel[1]})};
    if (cc.bias) params.push_back(teeny::TensorRef::of<float>("conv.bias", b, {cc.o}));

    for (const Isa isa : test_support::available_isas()) {
      CAPTURE(teeny::cpu::isa_name(isa));
      teeny::cpu::set_isa(isa);
      for (const ConvAlgorithm algorithm :
           {ConvAlgorithm::automatic, ConvAlgorithm::implicit, ConvAlgorithm::im2col, ConvAlgorithm::transposed,
            ConvAlgorithm::winograd, ConvAlgorithm::winograd_2x2, ConvAlgorithm::pixel_rows}) {
        CAPTURE(static_cast<int>(algorithm));
        // Two threads twice: these convolutions are too small to be spread by default
        // (CpuOptions::conv_macs_per_thread), and spread over both threads with 0.
        const struct {
          std::size_t threads;
          std::int64_t macs_per_thread;
        } pools[] = {
            {1, teeny::CpuOptions{}.conv_macs_per_thread}, {2, teeny::CpuOptions{}.conv_macs_per_thread}, {2, 0}};
        for (const auto& pool : pools) {
          CAPTURE(pool.threads);
          CAPTURE(pool.macs_per_thread);
          auto model = teeny::load_cpu(
              *graph, {}, {.threads = pool.threads, .conv = algorithm, .conv_macs_per_thread = pool.macs_per_thread});
          REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
          REQUIRE(model->load_weights(params));  // strict: exactly the conv's parameters
          const teeny::TensorRef inputs[] = {teeny::TensorRef::of<float>("x", x, {cc.n, cc.c, cc.h, cc.w})};
          REQUIRE(model->forward(inputs));
          auto got = model->output<float>("y");
          REQUIRE(got);
          REQUIRE(got->numel() == static_cast<std::int64_t>(expected.size()));
          // automatic may pick Winograd too
          const bool winograd_fits = cc.kernel == std::array<std::int64_t, 2>{3, 3} &&
                                     cc.stride == std::array<std::int64_t, 2>{1, 1} &&
                                     cc.dilation == std::array<std::int64_t, 2>{1, 1};
          const bool may_be_winograd =
              winograd_fits && (algorithm == ConvAlgorithm::winograd || algorithm == ConvAlgorithm::automatic);
          const double tolerance = may_be_winograd ? kWinogradTolerance : 1e-5;
          std::int64_t bad = 0, first_bad = -1;
          double worst = 0;
          for (std::size_t i = 0; i < expected.size(); ++i) {
            if (!(std::abs(got->data[i] - expected[i]) <= tolerance * magnitude[i] + 1e-6)) {
              if (first_bad < 0) first_bad = static_cast<std::int64_t>(i);
              ++bad;
            }
            worst = std::max(worst, std::abs(got->data[i] - expected[i]) / (magnitude[i] + 1e-30));
          }
          INFO("first mismatch at element " << first_bad << " (" << bad << " of " << expected.size()
                                            << " differ); worst error / magnitude " << worst);
          CHECK(bad == 0);
        }
      }
    }
  }
}

namespace {
// Loads `graph` (input "x", a convolution "conv" without bias, output "y") on the CPU with
// `options` and the weight given, runs it on `x` and returns "y".
std::vector<float> run_conv(const teeny::Graph& graph, const teeny::CpuOptions& options,
                            const std::vector<float>& weight, const teeny::ConcreteShape& weight_shape,
                            const std::vector<float>& x, const teeny::ConcreteShape& x_shape) {
  auto model = teeny::load_cpu(graph, {}, options);
  REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
  const teeny::TensorRef params[] = {teeny::TensorRef::of<float>("conv.weight", weight, weight_shape)};
  REQUIRE(model->load_weights(params));
  const teeny::TensorRef inputs[] = {teeny::TensorRef::of<float>("x", x, x_shape)};
  REQUIRE(model->forward(inputs));
  auto got = model->output<float>("y");
  REQUIRE(got);
  return {got->data, got->data + got->numel()};
}

// How many of `got`'s outputs are further from `expected` than 1e-5 of their `scale` (the sum of
// |terms| of a direct convolution) plus 1e-6.
std::int64_t outside_tolerance(const float* got, const std::vector<double>& expected,
                               const std::vector<double>& scale) {
  std::int64_t bad = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (!(std::abs(got[i] - expected[i]) <= 1e-5 * scale[i] + 1e-6)) ++bad;
  }
  return bad;
}
}  // namespace

// Wide layers whose transformed filters outgrow the cache run all their tiles in one block, so that
// the filters are read once rather than once per block (winograd_block): 384 channels, 36 tiles of
// F(4x4, 3x3) would be cut into blocks of 32 tiles (two blocks) by the cache budget alone. Checked
// on a sample of output channels against a direct convolution in double.
TEST_CASE("Winograd in one block for wide layers with large transformed filters matches a direct convolution") {
  CHECK(teeny::winograd_block(384, 384, 36, 36) == 36);   // merged: one block of all 36 tiles
  CHECK(teeny::winograd_block(128, 128, 392, 36) == 64);  // ResNet-18's layer2 at batch 8: seven blocks
  const std::int64_t c = 384, o = 384, h = 24, w = 24;
  const std::vector<float> x = noise(static_cast<std::size_t>(c * h * w), 4);
  const std::vector<float> weight = noise(static_cast<std::size_t>(o * c * 9), 5);
  teeny::GraphBuilder builder;
  auto in = builder.input("x", teeny::DType::f32, {1, c, h, w});
  builder.output("y", builder.conv2d(in, o, {3, 3}, {.padding = {1, 1}, .bias = false}).named("conv"));
  auto graph = std::move(builder).build();
  REQUIRE_MESSAGE(graph, (graph ? "" : graph.error().to_string()));
  for (const std::size_t threads : {1, 2}) {
    CAPTURE(threads);
    const std::vector<float> got =
        run_conv(*graph, {.threads = threads, .conv = ConvAlgorithm::winograd}, weight, {o, c, 3, 3}, x, {1, c, h, w});
    REQUIRE(std::ssize(got) == o * h * w);
    std::int64_t bad = 0;
    for (const std::int64_t oc : {0, 11, 190, 383}) {
      for (std::int64_t oh = 0; oh < h; ++oh) {
        for (std::int64_t ow = 0; ow < w; ++ow) {
          double sum = 0, magnitude = 0;
          for (std::int64_t ic = 0; ic < c; ++ic) {
            for (std::int64_t i = 0; i < 3; ++i) {
              for (std::int64_t j = 0; j < 3; ++j) {
                const std::int64_t ih = oh - 1 + i, iw = ow - 1 + j;
                if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
                const double term = double{x[static_cast<std::size_t>((ic * h + ih) * w + iw)]} *
                                    weight[static_cast<std::size_t>(((oc * c + ic) * 3 + i) * 3 + j)];
                sum += term;
                magnitude += std::abs(term);
              }
            }
          }
          const float value = got[static_cast<std::size_t>((oc * h + oh) * w + ow)];
          if (!(std::abs(value - sum) <= kWinogradTolerance * magnitude + 1e-6)) ++bad;
        }
      }
    }
    CHECK(bad == 0);
  }
}

// ReLU keeps a NaN, as PyTorch's does: every output whose window reads a NaN input is NaN, with
// the activation applied in the Winograd output transform (no residual) as in the GEMM epilogue.
TEST_CASE("a NaN input gives NaN outputs through a convolution and its ReLU, whatever the algorithm") {
  const std::int64_t c = 4, o = 8, h = 9, w = 9;
  std::vector<float> x = noise(static_cast<std::size_t>(c * h * w), 6);
  x[static_cast<std::size_t>((1 * h + 4) * w + 4)] = std::numeric_limits<float>::quiet_NaN();  // channel 1, (4, 4)
  const std::vector<float> weight = noise(static_cast<std::size_t>(o * c * 9), 7);
  teeny::GraphBuilder builder;
  auto in = builder.input("x", teeny::DType::f32, {1, c, h, w});
  builder.output("y", builder.relu(builder.conv2d(in, o, {3, 3}, {.padding = {1, 1}, .bias = false}).named("conv")));
  auto graph = std::move(builder).build();
  REQUIRE_MESSAGE(graph, (graph ? "" : graph.error().to_string()));
  for (const ConvAlgorithm algorithm : {ConvAlgorithm::implicit, ConvAlgorithm::im2col, ConvAlgorithm::winograd,
                                        ConvAlgorithm::winograd_2x2, ConvAlgorithm::pixel_rows}) {
    CAPTURE(static_cast<int>(algorithm));
    const std::vector<float> got =
        run_conv(*graph, {.threads = 1, .conv = algorithm}, weight, {o, c, 3, 3}, x, {1, c, h, w});
    REQUIRE(std::ssize(got) == o * h * w);
    std::int64_t not_nan = 0;
    for (std::int64_t oc = 0; oc < o; ++oc) {
      for (std::int64_t oh = 3; oh <= 5; ++oh) {
        for (std::int64_t ow = 3; ow <= 5; ++ow) {
          if (!std::isnan(got[static_cast<std::size_t>((oc * h + oh) * w + ow)])) ++not_nan;
        }
      }
    }
    CHECK(not_nan == 0);
  }
}

// A convolution whose output is max-pooled (2x2, stride 2) in its own kernel, as LeNet's are, with
// the product run by pixel rows, by the implicit GEMM and by im2col: each against the pooled direct
// convolution in double. Batch 4 on two threads (two images each) pools each image from scratch;
// batch 1 (every thread a band of rows) pools band by band.
TEST_CASE("a convolution by pixel rows with a folded max pool matches a direct convolution pooled") {
  const test_support::IsaGuard restore_isa;
  for (const std::int64_t n : {4, 1}) {
    CAPTURE(n);
    const ConvCase cc{"LeNet's conv2", n, 8, 14, 14, 16, {5, 5}, {1, 1}, {0, 0}, {1, 1}, 1, true, true};
    const std::vector<float> x = noise(static_cast<std::size_t>(cc.n * cc.c * cc.h * cc.w), 21);
    const std::vector<float> w = noise(static_cast<std::size_t>(cc.o * cc.c * 25), 22);
    const std::vector<float> b = noise(static_cast<std::size_t>(cc.o), 23);
    std::vector<double> conv, magnitude;
    reference(cc, x, w, b, conv, magnitude);
    // 10 x 10 -> 5 x 5, each the max of its window (ReLU came first), with the largest magnitude
    // of the four for the tolerance.
    std::vector<double> expected, scale;
    for (std::int64_t plane = 0; plane < cc.n * cc.o; ++plane) {
      for (std::int64_t r = 0; r < 5; ++r) {
        for (std::int64_t c = 0; c < 5; ++c) {
          double best = -1e300, mag = 0;
          for (std::int64_t i = 0; i < 2; ++i) {
            for (std::int64_t j = 0; j < 2; ++j) {
              const auto at = static_cast<std::size_t>(plane * 100 + (2 * r + i) * 10 + 2 * c + j);
              best = std::max(best, conv[at]);
              mag = std::max(mag, magnitude[at]);
            }
          }
          expected.push_back(best);
          scale.push_back(mag);
        }
      }
    }
    teeny::GraphBuilder builder;
    auto in = builder.input("x", teeny::DType::f32, {cc.n, cc.c, cc.h, cc.w});
    auto y = builder.relu(builder.conv2d(in, cc.o, {5, 5}).named("conv"));
    builder.output("y", builder.max_pool2d(y, {2, 2}));
    auto graph = std::move(builder).build();
    REQUIRE_MESSAGE(graph, (graph ? "" : graph.error().to_string()));
    const teeny::TensorRef params[] = {teeny::TensorRef::of<float>("conv.weight", w, {cc.o, cc.c, 5, 5}),
                                       teeny::TensorRef::of<float>("conv.bias", b, {cc.o})};
    for (const Isa isa : test_support::available_isas()) {
      CAPTURE(teeny::cpu::isa_name(isa));
      teeny::cpu::set_isa(isa);
      for (const ConvAlgorithm algorithm :
           {ConvAlgorithm::pixel_rows, ConvAlgorithm::implicit, ConvAlgorithm::im2col}) {
        CAPTURE(static_cast<int>(algorithm));
        auto model = teeny::load_cpu(*graph, {}, {.threads = 2, .conv = algorithm, .conv_macs_per_thread = 0});
        REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
        REQUIRE(model->load_weights(params));
        const teeny::TensorRef inputs[] = {teeny::TensorRef::of<float>("x", x, {cc.n, cc.c, cc.h, cc.w})};
        REQUIRE(model->forward(inputs));
        auto got = model->output<float>("y");
        REQUIRE(got);
        REQUIRE(got->numel() == std::ssize(expected));
        CHECK(outside_tolerance(got->data, expected, scale) == 0);
      }
    }
  }
}

// A model planned with pixel rows (AVX-512) still runs right when the instruction set is lowered
// after it was loaded: the product then runs as plain loops.
TEST_CASE("a convolution planned with pixel rows runs right after the instruction set changes") {
  const test_support::IsaGuard restore_isa;
  if (teeny::cpu::set_isa(Isa::avx512) != Isa::avx512) return;  // nothing planned with pixel rows here
  const ConvCase cc{"16 outputs", 2, 3, 7, 9, 16, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true, true};
  const std::vector<float> x = noise(static_cast<std::size_t>(cc.n * cc.c * cc.h * cc.w), 31);
  const std::vector<float> w = noise(static_cast<std::size_t>(cc.o * cc.c * 9), 32);
  const std::vector<float> b = noise(static_cast<std::size_t>(cc.o), 33);
  std::vector<double> expected, magnitude;
  reference(cc, x, w, b, expected, magnitude);
  teeny::GraphBuilder builder;
  auto in = builder.input("x", teeny::DType::f32, {cc.n, cc.c, cc.h, cc.w});
  builder.output("y", builder.relu(builder.conv2d(in, cc.o, {3, 3}, {.padding = {1, 1}}).named("conv")));
  auto graph = std::move(builder).build();
  REQUIRE_MESSAGE(graph, (graph ? "" : graph.error().to_string()));
  auto model = teeny::load_cpu(*graph, {}, {.conv = ConvAlgorithm::pixel_rows});
  REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
  const teeny::TensorRef params[] = {teeny::TensorRef::of<float>("conv.weight", w, {cc.o, cc.c, 3, 3}),
                                     teeny::TensorRef::of<float>("conv.bias", b, {cc.o})};
  REQUIRE(model->load_weights(params));
  teeny::cpu::set_isa(Isa::portable);
  const teeny::TensorRef inputs[] = {teeny::TensorRef::of<float>("x", x, {cc.n, cc.c, cc.h, cc.w})};
  REQUIRE(model->forward(inputs));
  auto got = model->output<float>("y");
  REQUIRE(got);
  REQUIRE(got->numel() == std::ssize(expected));
  CHECK(outside_tolerance(got->data, expected, magnitude) == 0);
}
