// Fusion in the standard lowering, end to end on the CPU: a BatchNorm folded into the convolution
// before it and an activation into its producer must compute what the unfused ops compute (a
// direct double-precision reference here), keep loading every parameter by its PyTorch key, and
// stay unfused wherever another reader would see the fused value.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

import teeny;

#include "support/fixtures.hpp"

namespace {
using teeny::GraphBuilder;

// Deterministic pseudo-random doubles in [lo, hi), exactly representable as floats.
struct Noise {
  std::uint32_t seed;
  double operator()(double lo, double hi) {
    seed = seed * 1664525u + 1013904223u;
    return lo + (hi - lo) * static_cast<float>(seed >> 8) / 16777216.0f;
  }
};

// Gives every parameter of `model` random values (running variances positive, num_batches_tracked
// 7), loads them from memory, strictly, and returns them by key.
std::map<std::string, std::vector<double>> load_random_weights(auto& model, std::uint32_t seed) {
  Noise noise{seed};
  std::map<std::string, std::vector<double>> values;
  std::vector<teeny::Tensor> tensors;
  for (const teeny::TensorRef& p : model.parameters()) {
    if (p.dtype == teeny::DType::i64) {
      tensors.push_back(*teeny::Tensor::from<std::int64_t>({7}, p.shape));
      continue;
    }
    const bool variance = p.name.ends_with("running_var");
    std::vector<float> v(static_cast<std::size_t>(p.shape.numel()));
    for (float& x : v) x = static_cast<float>(variance ? noise(0.25, 2.0) : noise(-1.0, 1.0));
    values[std::string(p.name)].assign(v.begin(), v.end());
    tensors.push_back(*teeny::Tensor::from<float>(v, p.shape));
  }
  std::vector<teeny::TensorRef> refs;
  const auto params = model.parameters();
  for (std::size_t i = 0; i < params.size(); ++i) refs.push_back(teeny::TensorRef::of(params[i].name, tensors[i]));
  auto report = model.load_weights(refs);  // strict: every key the model has, nothing else
  REQUIRE_MESSAGE(report, (report ? "" : report.error().to_string()));
  return values;
}

std::vector<std::string> keys_of(const auto& model) {
  std::vector<std::string> keys;
  for (const teeny::TensorRef& p : model.parameters()) keys.emplace_back(p.name);
  std::sort(keys.begin(), keys.end());
  return keys;
}

struct ConvGeometry {
  std::int64_t n, c, h, w, o, kh, kw, stride, pad, groups;
  std::int64_t ho() const { return (h + 2 * pad - kh) / stride + 1; }
  std::int64_t wo() const { return (w + 2 * pad - kw) / stride + 1; }
};

// A direct convolution in double: x [N, C, H, W], w [O, C/groups, kh, kw], bias [O] or empty.
std::vector<double> conv_reference(const ConvGeometry& g, const std::vector<double>& x, const std::vector<double>& w,
                                   const std::vector<double>& bias) {
  const std::int64_t cg = g.c / g.groups, og = g.o / g.groups;
  std::vector<double> y(static_cast<std::size_t>(g.n * g.o * g.ho() * g.wo()));
  std::size_t at = 0;
  for (std::int64_t n = 0; n < g.n; ++n) {
    for (std::int64_t o = 0; o < g.o; ++o) {
      for (std::int64_t oh = 0; oh < g.ho(); ++oh) {
        for (std::int64_t ow = 0; ow < g.wo(); ++ow) {
          double sum = bias.empty() ? 0.0 : bias[o];
          for (std::int64_t c = 0; c < cg; ++c) {
            for (std::int64_t i = 0; i < g.kh; ++i) {
              for (std::int64_t j = 0; j < g.kw; ++j) {
                const std::int64_t ih = oh * g.stride - g.pad + i, iw = ow * g.stride - g.pad + j;
                if (ih < 0 || ih >= g.h || iw < 0 || iw >= g.w) continue;
                const std::int64_t ic = o / og * cg + c;
                sum += x[((n * g.c + ic) * g.h + ih) * g.w + iw] * w[((o * cg + c) * g.kh + i) * g.kw + j];
              }
            }
          }
          y[at++] = sum;
        }
      }
    }
  }
  return y;
}

// Eval-mode batch norm over [N, C, S] with running statistics (weight/bias empty: not affine).
std::vector<double> batch_norm_reference(std::vector<double> y, std::int64_t n, std::int64_t c,
                                         const std::map<std::string, std::vector<double>>& p, const std::string& bn,
                                         bool affine, double eps) {
  const auto s = static_cast<std::int64_t>(y.size()) / (n * c);
  for (std::int64_t i = 0; i < n * c * s; ++i) {
    const std::int64_t ch = i / s % c;
    double v = (y[i] - p.at(bn + ".running_mean")[ch]) / std::sqrt(p.at(bn + ".running_var")[ch] + eps);
    if (affine) v = v * p.at(bn + ".weight")[ch] + p.at(bn + ".bias")[ch];
    y[i] = v;
  }
  return y;
}

std::vector<double> relu(std::vector<double> y) {
  for (double& v : y) v = std::max(v, 0.0);
  return y;
}

// A random input: the values (exact floats in [-2, 2)) for the reference, and the tensor.
struct RandomInput {
  std::vector<double> values;
  teeny::Tensor tensor;
};
RandomInput random_input(const teeny::ConcreteShape& shape, std::uint32_t seed) {
  Noise noise{seed};
  std::vector<float> floats(static_cast<std::size_t>(shape.numel()));
  for (float& v : floats) v = static_cast<float>(noise(-2.0, 2.0));
  auto tensor = teeny::Tensor::from<float>(floats, shape);
  REQUIRE(tensor);
  return {{floats.begin(), floats.end()}, std::move(*tensor)};
}

std::vector<double> bias_or_none(const std::map<std::string, std::vector<double>>& p, const std::string& key) {
  auto it = p.find(key);
  return it == p.end() ? std::vector<double>{} : it->second;
}
}  // namespace

TEST_CASE("a BatchNorm after a convolution is folded into it and still loads by its own keys") {
  struct Case {
    const char* what;
    ConvGeometry g;
    bool conv_bias, affine;
  };
  const Case cases[] = {
      {"3x3, stride 2, padded, with bias, affine", {2, 4, 9, 9, 8, 3, 3, 2, 1, 1}, true, true},
      {"3x3, no bias, affine (ResNet's)", {1, 3, 12, 10, 16, 3, 3, 1, 1, 1}, false, true},
      {"1x1, no bias, not affine", {2, 8, 5, 5, 6, 1, 1, 1, 0, 1}, false, false},
      {"grouped, with bias, not affine", {1, 6, 7, 7, 9, 3, 3, 1, 1, 3}, true, false},
      {"depthwise, no bias, affine", {2, 5, 8, 8, 5, 3, 3, 1, 1, 5}, false, true},
  };
  for (const Case& c : cases) {
    const std::string what = c.what;
    CAPTURE(what);
    const ConvGeometry& g = c.g;
    const double eps = 1e-3;
    GraphBuilder b;
    auto x = b.input("x", teeny::DType::f32, {g.n, g.c, g.h, g.w});
    auto y =
        b.conv2d(x, g.o, {g.kh, g.kw},
                 {.stride = {g.stride, g.stride}, .padding = {g.pad, g.pad}, .groups = g.groups, .bias = c.conv_bias})
            .named("conv");
    y = b.relu(b.batch_norm2d(y, {.eps = eps, .affine = c.affine}).named("bn"));
    b.output("y", y);
    auto graph = std::move(b).build();
    REQUIRE_MESSAGE(graph, (graph ? "" : graph.error().to_string()));
    for (std::size_t threads : {1, 2}) {
      CAPTURE(threads);
      auto model = teeny::load_cpu(*graph, {}, {.threads = threads});
      REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
      CHECK(model->stats().steps == 1);  // conv + batch norm + relu in one step

      std::vector<std::string> expected{"bn.running_mean", "bn.running_var", "bn.num_batches_tracked", "conv.weight"};
      if (c.conv_bias) expected.push_back("conv.bias");
      if (c.affine) expected.insert(expected.end(), {"bn.weight", "bn.bias"});
      std::sort(expected.begin(), expected.end());
      CHECK(keys_of(*model) == expected);

      const auto p = load_random_weights(*model, 11);
      const RandomInput input = random_input({g.n, g.c, g.h, g.w}, 5);
      const teeny::TensorRef refs[] = {teeny::TensorRef::of("x", input.tensor)};
      REQUIRE(model->forward(refs));
      const auto conv = conv_reference(g, input.values, p.at("conv.weight"), bias_or_none(p, "conv.bias"));
      fixtures::check_near(*model->output("y"), relu(batch_norm_reference(conv, g.n, g.o, p, "bn", c.affine, eps)),
                           1e-5, 1e-5);
    }
  }
}

TEST_CASE("a BatchNorm1d after a Conv1d is folded too") {
  GraphBuilder b;
  auto x = b.input("x", teeny::DType::f32, {2, 3, 11});
  b.output("y", b.batch_norm1d(b.conv1d(x, 4, 3, {.stride = 2}).named("conv")).named("bn"));
  auto graph = std::move(b).build();
  REQUIRE(graph);
  auto model = teeny::load_cpu(*graph, {});
  REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
  CHECK(model->stats().steps == 1);
  const auto p = load_random_weights(*model, 3);
  const RandomInput input = random_input({2, 3, 11}, 9);
  const teeny::TensorRef refs[] = {teeny::TensorRef::of("x", input.tensor)};
  REQUIRE(model->forward(refs));
  const ConvGeometry g{2, 3, 1, 11, 4, 1, 3, 2, 0, 1};  // a Conv1d is a Conv2d one row high
  const auto conv = conv_reference(g, input.values, p.at("conv.weight"), p.at("conv.bias"));
  fixtures::check_near(*model->output("y"), batch_norm_reference(conv, 2, 4, p, "bn", true, 1e-5), 1e-5, 1e-5);
}

TEST_CASE("a residual add after a convolution is folded into it, its activation after the sum") {
  struct Case {
    const char* what;
    ConvGeometry g;
    teeny::ConvAlgorithm algorithm;
    bool batch_norm;
  };
  using A = teeny::ConvAlgorithm;
  const Case cases[] = {
      {"3x3 padded, implicit (rows cut to Wo)", {2, 4, 9, 9, 4, 3, 3, 1, 1, 1}, A::implicit, true},
      {"3x3 padded, batch 1, implicit (bands)", {1, 8, 12, 12, 8, 3, 3, 1, 1, 1}, A::implicit, true},
      {"3x3 unpadded stride 1, implicit in place", {1, 3, 9, 7, 5, 3, 1, 1, 0, 1}, A::implicit, false},
      {"3x3 padded, im2col", {2, 4, 9, 9, 4, 3, 3, 1, 1, 1}, A::im2col, true},
      {"3x3 padded, batch 1, im2col", {1, 4, 9, 9, 4, 3, 3, 1, 1, 1}, A::im2col, false},
      {"3x3 padded, transposed", {1, 16, 7, 7, 16, 3, 3, 1, 1, 1}, A::transposed, true},
      {"3x3 padded, batch 2, transposed", {2, 16, 7, 7, 16, 3, 3, 1, 1, 1}, A::transposed, true},
      {"3x3 padded, Winograd (partial tiles)", {2, 4, 9, 9, 4, 3, 3, 1, 1, 1}, A::winograd, true},
      {"3x3 padded, batch 1, Winograd", {1, 16, 7, 7, 16, 3, 3, 1, 1, 1}, A::winograd, false},
      {"3x3 padded, Winograd 2x2 (partial tiles)", {2, 4, 9, 9, 4, 3, 3, 1, 1, 1}, A::winograd_2x2, true},
      {"3x3 padded, batch 1, Winograd 2x2", {1, 16, 7, 7, 16, 3, 3, 1, 1, 1}, A::winograd_2x2, true},
      {"1x1, the input as it is", {2, 6, 5, 5, 6, 1, 1, 1, 0, 1}, A::automatic, true},
      {"depthwise", {2, 5, 8, 8, 5, 3, 3, 1, 1, 5}, A::automatic, true},
  };
  for (const Case& c : cases) {
    const std::string what = c.what;
    CAPTURE(what);
    const ConvGeometry& g = c.g;
    for (const bool conv_first : {true, false}) {
      CAPTURE(conv_first);
      GraphBuilder b;
      auto x = b.input("x", teeny::DType::f32, {g.n, g.c, g.h, g.w});
      auto r = b.input("r", teeny::DType::f32, {g.n, g.o, g.ho(), g.wo()});
      auto y = b.conv2d(x, g.o, {g.kh, g.kw},
                        {.stride = {g.stride, g.stride}, .padding = {g.pad, g.pad}, .groups = g.groups, .bias = true})
                   .named("conv");
      if (c.batch_norm) y = b.batch_norm2d(y).named("bn");
      b.output("y", b.relu(conv_first ? b.add(y, r) : b.add(r, y)));
      auto graph = std::move(b).build();
      REQUIRE_MESSAGE(graph, (graph ? "" : graph.error().to_string()));
      for (std::size_t threads : {1, 2}) {
        CAPTURE(threads);
        // conv_macs_per_thread 0: spread over both threads, small as these convolutions are
        auto model = teeny::load_cpu(*graph, {}, {.threads = threads, .conv = c.algorithm, .conv_macs_per_thread = 0});
        REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
        CHECK(model->stats().steps == 1);  // conv (+ batch norm) + add + relu
        const auto p = load_random_weights(*model, 13);
        const RandomInput input = random_input({g.n, g.c, g.h, g.w}, 3);
        const RandomInput res = random_input({g.n, g.o, g.ho(), g.wo()}, 8);
        const teeny::TensorRef refs[] = {teeny::TensorRef::of("x", input.tensor),
                                         teeny::TensorRef::of("r", res.tensor)};
        REQUIRE(model->forward(refs));
        auto expected = conv_reference(g, input.values, p.at("conv.weight"), p.at("conv.bias"));
        if (c.batch_norm) expected = batch_norm_reference(expected, g.n, g.o, p, "bn", true, 1e-5);
        for (std::size_t i = 0; i < expected.size(); ++i) expected[i] += res.values[i];
        fixtures::check_near(*model->output("y"), relu(expected), 1e-5, 1e-5);
      }
    }
  }
}

TEST_CASE("a residual add with another activation, or none, after a folded convolution") {
  const ConvGeometry g{1, 4, 6, 6, 4, 3, 3, 1, 1, 1};
  for (const bool leaky : {true, false}) {
    CAPTURE(leaky);
    GraphBuilder b;
    auto x = b.input("x", teeny::DType::f32, {g.n, g.c, g.h, g.w});
    auto sum = b.add(b.conv2d(x, g.o, 3, {.padding = {1, 1}}).named("conv"), x);
    b.output("y", leaky ? b.leaky_relu(sum, 0.25) : sum);
    auto graph = std::move(b).build();
    REQUIRE(graph);
    auto model = teeny::load_cpu(*graph, {});
    REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
    CHECK(model->stats().steps == 1);
    const auto p = load_random_weights(*model, 5);
    const RandomInput input = random_input({g.n, g.c, g.h, g.w}, 6);
    const teeny::TensorRef refs[] = {teeny::TensorRef::of("x", input.tensor)};
    REQUIRE(model->forward(refs));
    auto expected = conv_reference(g, input.values, p.at("conv.weight"), p.at("conv.bias"));
    for (std::size_t i = 0; i < expected.size(); ++i) {
      expected[i] += input.values[i];
      if (leaky && expected[i] < 0) expected[i] *= 0.25;
    }
    fixtures::check_near(*model->output("y"), expected, 1e-5, 1e-5);
  }
}

namespace {
struct PoolWindow {
  std::int64_t kernel, stride, pad;
  bool ceil;
  // Output size along a dim of `size`, as PyTorch counts it (a ceil-mode window must start
  // inside the input or its left padding).
  std::int64_t out(std::int64_t size) const {
    const std::int64_t span = size + 2 * pad - kernel;
    std::int64_t o = (span + (ceil ? stride - 1 : 0)) / stride + 1;
    if (ceil && (o - 1) * stride >= size + pad) --o;
    return o;
  }
};

// Max pool in double of [planes, h, w], NaN winning; the padding and what a ceil-mode window
// hangs past the input are skipped.
std::vector<double> max_pool_reference(const std::vector<double>& x, std::int64_t planes, std::int64_t h,
                                       std::int64_t w, const PoolWindow& p) {
  const std::int64_t ho = p.out(h), wo = p.out(w);
  std::vector<double> y;
  for (std::int64_t q = 0; q < planes; ++q) {
    for (std::int64_t oh = 0; oh < ho; ++oh) {
      for (std::int64_t ow = 0; ow < wo; ++ow) {
        double m = -INFINITY;
        for (std::int64_t i = 0; i < p.kernel; ++i) {
          for (std::int64_t j = 0; j < p.kernel; ++j) {
            const std::int64_t ih = oh * p.stride - p.pad + i, iw = ow * p.stride - p.pad + j;
            if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
            const double v = x[static_cast<std::size_t>((q * h + ih) * w + iw)];
            if (!std::isnan(m) && (v > m || std::isnan(v))) m = v;
          }
        }
        y.push_back(m);
      }
    }
  }
  return y;
}
}  // namespace

TEST_CASE("a max pool after a convolution is folded into it, after its activation") {
  // Each image's output pooled from the GEMM's result (2x2 windows at stride 2, one GEMM per
  // image), an implicit GEMM's output made and pooled in bands of rows, or the whole convolution
  // pooled after it by the max pool's kernel: every method, both thread counts, windows that leave
  // rows and columns over, ceil mode and padding. 1024 output channels make bands of 4 rows
  // (pool_band_rows), which keep the rows windows share from one band to the next.
  enum class Act { relu, softplus, none };
  struct Case {
    const char* what;
    ConvGeometry g;
    PoolWindow pool;
    teeny::ConvAlgorithm algorithm;
    Act act;
    bool batch_norm;
  };
  using A = teeny::ConvAlgorithm;
  const Case cases[] = {
      {"LeNet's conv1: 5x5 padded, implicit (rows cut), 2x2",
       {2, 1, 28, 28, 6, 5, 5, 1, 2, 1},
       {2, 2, 0, false},
       A::automatic,
       Act::relu,
       false},
      {"unpadded, implicit in place, odd output (a row and column left over)",
       {3, 3, 11, 13, 5, 3, 3, 1, 0, 1},
       {2, 2, 0, false},
       A::implicit,
       Act::relu,
       true},
      {"im2col, 2x2", {2, 4, 10, 10, 7, 3, 3, 1, 1, 1}, {2, 2, 0, false}, A::im2col, Act::none, false},
      {"1x1, the input as it is, 2x2",
       {2, 6, 8, 6, 4, 1, 1, 1, 0, 1},
       {2, 2, 0, false},
       A::automatic,
       Act::relu,
       false},
      {"2x2 in ceil mode on an odd output",
       {2, 3, 9, 9, 4, 3, 3, 1, 1, 1},
       {2, 2, 0, true},
       A::implicit,
       Act::relu,
       false},
      {"ResNet's stem pool: 3x3, stride 2, padded",
       {2, 3, 16, 16, 8, 7, 7, 2, 3, 1},
       {3, 2, 1, false},
       A::automatic,
       Act::relu,
       true},
      {"transposed, 2x2", {2, 16, 8, 8, 16, 3, 3, 1, 1, 1}, {2, 2, 0, false}, A::transposed, Act::relu, false},
      {"Winograd, 2x2", {2, 4, 9, 9, 4, 3, 3, 1, 1, 1}, {2, 2, 0, false}, A::winograd, Act::relu, true},
      {"Winograd F(2x2), 2x2", {1, 8, 7, 7, 8, 3, 3, 1, 1, 1}, {2, 2, 0, false}, A::winograd_2x2, Act::relu, true},
      {"depthwise, 2x2", {2, 5, 8, 8, 5, 3, 3, 1, 1, 5}, {2, 2, 0, false}, A::automatic, Act::relu, false},
      {"an activation the GEMM does not apply (softplus)",
       {2, 3, 8, 8, 4, 3, 3, 1, 1, 1},
       {2, 2, 0, false},
       A::implicit,
       Act::softplus,
       false},
      {"batch 1 (the GEMM split over threads)",
       {1, 4, 12, 12, 8, 3, 3, 1, 1, 1},
       {2, 2, 0, false},
       A::implicit,
       Act::relu,
       false},
      {"bands of 4 rows, 3x3 at stride 2: a pooled row a band, one row kept; batch 1",
       {1, 2, 20, 30, 1024, 3, 3, 1, 1, 1},
       {3, 2, 1, false},
       A::implicit,
       Act::relu,
       false},
      {"bands of 4 rows, 3x3 at stride 1: two pooled rows a band, two rows kept",
       {2, 1, 15, 30, 1024, 3, 3, 1, 1, 1},
       {3, 1, 1, false},
       A::implicit,
       Act::relu,
       true},
      {"bands of 4 rows, 2x2 at stride 3: rows no window reads, ceil mode",
       {2, 1, 17, 30, 1024, 3, 3, 1, 1, 1},
       {2, 3, 0, true},
       A::implicit,
       Act::none,
       false},
  };
  for (const Case& c : cases) {
    const std::string what = c.what;
    CAPTURE(what);
    const ConvGeometry& g = c.g;
    GraphBuilder b;
    auto x = b.input("x", teeny::DType::f32, {g.n, g.c, g.h, g.w});
    auto y = b.conv2d(x, g.o, {g.kh, g.kw},
                      {.stride = {g.stride, g.stride}, .padding = {g.pad, g.pad}, .groups = g.groups, .bias = true})
                 .named("conv");
    if (c.batch_norm) y = b.batch_norm2d(y).named("bn");
    if (c.act == Act::relu) y = b.relu(y);
    if (c.act == Act::softplus) y = b.softplus(y);
    const teeny::Size2 kernel{c.pool.kernel, c.pool.kernel};
    b.output("y", b.max_pool2d(y, kernel,
                               {.stride = teeny::Size2{c.pool.stride, c.pool.stride},
                                .padding = {c.pool.pad, c.pool.pad},
                                .ceil_mode = c.pool.ceil})
                      .named("pool"));
    auto graph = std::move(b).build();
    REQUIRE_MESSAGE(graph, (graph ? "" : graph.error().to_string()));
    for (std::size_t threads : {1, 2}) {
      CAPTURE(threads);
      auto model = teeny::load_cpu(*graph, {}, {.threads = threads, .conv = c.algorithm, .conv_macs_per_thread = 0});
      REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
      CHECK(model->stats().steps == 1);  // conv (+ batch norm) + activation + pool
      const auto p = load_random_weights(*model, 17);
      const RandomInput input = random_input({g.n, g.c, g.h, g.w}, 12);
      const teeny::TensorRef refs[] = {teeny::TensorRef::of("x", input.tensor)};
      REQUIRE(model->forward(refs));
      auto conv = conv_reference(g, input.values, p.at("conv.weight"), p.at("conv.bias"));
      if (c.batch_norm) conv = batch_norm_reference(conv, g.n, g.o, p, "bn", true, 1e-5);
      if (c.act == Act::relu) conv = relu(conv);
      if (c.act == Act::softplus) {
        for (double& v : conv) v = v > 20 ? v : std::log1p(std::exp(v));
      }
      const auto expected = max_pool_reference(conv, g.n * g.o, g.ho(), g.wo(), c.pool);
      const teeny::ConcreteShape shape{g.n, g.o, c.pool.out(g.ho()), c.pool.out(g.wo())};
      CHECK(model->output("y")->shape == shape);
      fixtures::check_near(*model->output("y"), expected, 1e-5, 1e-5);
    }
  }
}

TEST_CASE("an activation after a folded max pool stays a step of its own") {
  // conv -> pool -> GELU: the convolution's epilogue would apply it before the pool, and GELU
  // does not commute with max.
  const ConvGeometry g{2, 2, 8, 8, 3, 3, 3, 1, 1, 1};
  GraphBuilder b;
  auto x = b.input("x", teeny::DType::f32, {g.n, g.c, g.h, g.w});
  auto pooled = b.max_pool2d(b.conv2d(x, g.o, 3, {.padding = {1, 1}}).named("conv"), {2, 2});
  b.output("y", b.gelu(pooled));
  auto graph = std::move(b).build();
  REQUIRE(graph);
  auto model = teeny::load_cpu(*graph, {});
  REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
  CHECK(model->stats().steps == 2);  // conv + pool, then GELU
  const auto p = load_random_weights(*model, 23);
  const RandomInput input = random_input({g.n, g.c, g.h, g.w}, 2);
  const teeny::TensorRef refs[] = {teeny::TensorRef::of("x", input.tensor)};
  REQUIRE(model->forward(refs));
  auto y = max_pool_reference(conv_reference(g, input.values, p.at("conv.weight"), p.at("conv.bias")), g.n * g.o,
                              g.ho(), g.wo(), {2, 2, 0, false});
  for (double& v : y) v = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
  fixtures::check_near(*model->output("y"), y, 1e-5, 1e-5);
}

TEST_CASE("an activation after an elementwise binary op runs in the same pass") {
  // Same shapes (a residual add: the flat loop) and a broadcast (the row loop), each large enough
  // to be split over both threads.
  struct Case {
    const char* what;
    teeny::ConcreteShape a, b, y;
  };
  const Case cases[] = {{"residual add", {2, 8, 40, 40}, {2, 8, 40, 40}, {2, 8, 40, 40}},
                        {"broadcast add", {3, 70, 90}, {90}, {3, 70, 90}}};
  for (const Case& c : cases) {
    const std::string what = c.what;
    CAPTURE(what);
    GraphBuilder b;
    auto a = b.input("a", teeny::DType::f32, c.a);
    auto bb = b.input("b", teeny::DType::f32, c.b);
    b.output("relu", b.relu(b.add(a, bb)));
    b.output("leaky", b.leaky_relu(b.sub(a, bb), 0.25));
    auto graph = std::move(b).build();
    REQUIRE_MESSAGE(graph, (graph ? "" : graph.error().to_string()));
    auto model = teeny::load_cpu(*graph, {}, {.threads = 2});
    REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
    CHECK(model->stats().steps == 2);  // add+relu, sub+leaky_relu
    const RandomInput ra = random_input(c.a, 1);
    const RandomInput rb = random_input(c.b, 2);
    const std::vector<double>& xa = ra.values;
    const std::vector<double>& xb = rb.values;
    const teeny::TensorRef refs[] = {teeny::TensorRef::of("a", ra.tensor), teeny::TensorRef::of("b", rb.tensor)};
    REQUIRE(model->forward(refs));
    std::vector<double> relu_sum, leaky_diff;
    for (std::size_t i = 0; i < xa.size(); ++i) {
      const double y = xb[i % xb.size()];  // b broadcasts along the leading dims
      relu_sum.push_back(std::max(xa[i] + y, 0.0));
      const double d = xa[i] - y;
      leaky_diff.push_back(d < 0 ? 0.25 * d : d);
    }
    fixtures::check_near(*model->output("relu"), relu_sum, 1e-6, 0);
    fixtures::check_near(*model->output("leaky"), leaky_diff, 1e-6, 0);
  }
}

TEST_CASE("nothing is fused where another reader would see the fused value") {
  const ConvGeometry g{1, 2, 6, 6, 3, 3, 3, 1, 1, 1};
  auto build = [&](auto&& body) {
    GraphBuilder b;
    auto x = b.input("x", teeny::DType::f32, {g.n, g.c, g.h, g.w});
    body(b, b.conv2d(x, g.o, 3, {.padding = {1, 1}}).named("conv"));
    auto graph = std::move(b).build();
    REQUIRE_MESSAGE(graph, (graph ? "" : graph.error().to_string()));
    return std::move(*graph);
  };
  auto run = [&](const teeny::Graph& graph, std::size_t steps, auto&& check) {
    auto model = teeny::load_cpu(graph, {});
    REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
    CHECK(model->stats().steps == steps);
    const auto p = load_random_weights(*model, 21);
    const RandomInput input = random_input({g.n, g.c, g.h, g.w}, 4);
    const teeny::TensorRef refs[] = {teeny::TensorRef::of("x", input.tensor)};
    REQUIRE(model->forward(refs));
    check(*model, p, conv_reference(g, input.values, p.at("conv.weight"), p.at("conv.bias")));
  };

  SUBCASE("the convolution's output is also a graph output") {
    const auto graph = build([](GraphBuilder& b, teeny::Value conv) {
      b.output("conv", conv);
      b.output("y", b.relu(b.batch_norm2d(conv).named("bn")));
    });
    run(graph, 2, [&](auto& model, const auto& p, const std::vector<double>& conv) {
      fixtures::check_near(*model.output("conv"), conv, 1e-5, 1e-5);
      fixtures::check_near(*model.output("y"), relu(batch_norm_reference(conv, g.n, g.o, p, "bn", true, 1e-5)), 1e-5,
                           1e-5);
    });
  }
  SUBCASE("a max pool whose convolution is also a graph output") {
    const auto graph = build([](GraphBuilder& b, teeny::Value conv) {
      b.output("conv", conv);
      b.output("y", b.max_pool2d(conv, {2, 2}));
    });
    run(graph, 2, [&](auto& model, const auto&, const std::vector<double>& conv) {
      fixtures::check_near(*model.output("conv"), conv, 1e-5, 1e-5);
      fixtures::check_near(*model.output("y"), max_pool_reference(conv, g.n * g.o, g.ho(), g.wo(), {2, 2, 0, false}),
                           1e-5, 1e-5);
    });
  }
  SUBCASE("a BatchNorm with batch statistics (track_running_stats = false)") {
    const auto graph = build([](GraphBuilder& b, teeny::Value conv) {
      b.output("y", b.batch_norm2d(conv, {.track_running_stats = false}).named("bn"));
    });
    run(graph, 2, [&](auto& model, const auto& p, const std::vector<double>& conv) {
      // Normalised by each channel's own mean and (biased) variance over the batch and pixels.
      const std::int64_t s = g.ho() * g.wo();
      std::vector<double> y = conv;
      for (std::int64_t ch = 0; ch < g.o; ++ch) {
        double mean = 0, var = 0;
        for (std::int64_t i = 0; i < s; ++i) mean += conv[ch * s + i] / static_cast<double>(s);
        for (std::int64_t i = 0; i < s; ++i) var += (conv[ch * s + i] - mean) * (conv[ch * s + i] - mean) / s;
        for (std::int64_t i = 0; i < s; ++i) {
          y[ch * s + i] =
              (conv[ch * s + i] - mean) / std::sqrt(var + 1e-5) * p.at("bn.weight")[ch] + p.at("bn.bias")[ch];
        }
      }
      fixtures::check_near(*model.output("y"), y, 1e-5, 1e-5);
    });
  }
  SUBCASE("an add that broadcasts, or whose convolution is read elsewhere, or adds it to itself") {
    const auto graph = build([](GraphBuilder& b, teeny::Value conv) {
      auto bias = b.input("bias", teeny::DType::f32, {3, 1, 1});  // per output channel
      b.output("broadcast", b.add(conv, bias));
      b.output("twice", b.add(conv, conv));
    });
    auto model = teeny::load_cpu(graph, {});
    REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
    CHECK(model->stats().steps == 3);  // conv, and both adds on their own
  }
  SUBCASE("a ReLU after a Dropout whose input is read elsewhere") {
    // The Dropout is the identity: its DAG node is the convolution's, which "conv" also reads.
    const auto graph = build([](GraphBuilder& b, teeny::Value conv) {
      b.output("conv", conv);
      b.output("y", b.relu(b.dropout(conv, 0.1)));
    });
    run(graph, 2, [&](auto& model, const auto&, const std::vector<double>& conv) {
      CHECK(std::any_of(conv.begin(), conv.end(), [](double v) { return v < -0.1; }));
      fixtures::check_near(*model.output("conv"), conv, 1e-5, 1e-5);
      fixtures::check_near(*model.output("y"), relu(conv), 1e-5, 1e-5);
    });
  }
}

TEST_CASE("a folded BatchNorm's impossible variance is an error naming the node, not a NaN") {
  GraphBuilder b;
  auto x = b.input("x", teeny::DType::f32, {1, 1, 3, 3});
  b.output("y", b.batch_norm2d(b.conv2d(x, 2, 3).named("conv")).named("bn"));
  auto graph = std::move(b).build();
  REQUIRE(graph);
  auto model = teeny::load_cpu(*graph, {});
  REQUIRE(model);
  const teeny::Tensor weight = *teeny::Tensor::from<float>(std::vector<float>(18, 1.0f), {2, 1, 3, 3});
  const teeny::Tensor two = *teeny::Tensor::from<float>({1.0f, 1.0f}, {2});
  const teeny::Tensor variance = *teeny::Tensor::from<float>({1.0f, -3.0f}, {2});
  const teeny::Tensor count = *teeny::Tensor::from<std::int64_t>({0}, {});
  const teeny::TensorRef refs[] = {teeny::TensorRef::of("conv.weight", weight),
                                   teeny::TensorRef::of("conv.bias", two),
                                   teeny::TensorRef::of("bn.weight", two),
                                   teeny::TensorRef::of("bn.bias", two),
                                   teeny::TensorRef::of("bn.running_mean", two),
                                   teeny::TensorRef::of("bn.running_var", variance),
                                   teeny::TensorRef::of("bn.num_batches_tracked", count)};
  auto loaded = model->load_weights(refs);
  REQUIRE_FALSE(loaded);
  const std::string message = loaded.error().to_string();
  CAPTURE(message);
  CHECK(message.find("node 'conv'") != std::string::npos);
  CHECK(message.find("running_var[1] = -3") != std::string::npos);
}
