// teeny.fixed: the typed lowering's decisions, the constexpr memory plan (sizes computed by hand),
// and typed models run on the CPU against the run-time path (same weights, same input: at most
// 1e-6 relative): the MLP and LeNet on the PyTorch fixtures (tests/fixtures/models,
// tools/make_fixtures.py), whose logits they must also match, and a residual CNN on random weights
// (the run-time path's residual networks are checked against PyTorch in
// tests/cpu/test_models_vs_pytorch.cpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

import teeny;

#include "fixed_models.hpp"
#include "models.hpp"
#include "support/allocation_counter.hpp"
#include "support/fixtures.hpp"

namespace {
namespace tf = teeny::fixed;

// ---- the MLP at batch 64 ----
using mlp64 = tf::StaticPlan<decltype(fixed_models::mlp(tf::input<"x", float, 64, 1, 28, 28>()))>;
// x, flatten (a view of x), fc1 (+relu), fc2 (+relu), fc3: three steps.
static_assert(mlp64::n_steps == 3);
static_assert(mlp64::steps == std::array<std::size_t, 3>{2, 4, 6});
static_assert(mlp64::nodes[1].role == tf::Role::view && mlp64::nodes[1].buffer == 0);
static_assert(mlp64::nodes[3].role == tf::Role::fused && mlp64::nodes[2].activation);
static_assert(!mlp64::nodes[6].activation);
// Buffers: x 64*784*4 = 200704 bytes (read by fc1), fc1 64*512*4 = 131072 (live while fc2 runs),
// fc2 131072, fc3 64*10*4 = 2560. Largest first: x at 0; fc1 beside it at 200704; fc2 where x was
// (x is dead once fc1 ran); fc3 after fc2, over fc1's bytes (dead once fc2 ran).
static_assert(mlp64::nodes[0].offset == 0 && mlp64::nodes[2].offset == 200704);
static_assert(mlp64::nodes[4].offset == 0 && mlp64::nodes[6].offset == 131072);
static_assert(mlp64::arena_bytes == 200704 + 131072);
static_assert(mlp64::naive_bytes == 200704 + 2 * 131072 + 2560);

// ---- ResNet basic blocks: what folds where ----
using block_x = decltype(tf::input<"x", float, 2, 64, 8, 8>());
using identity_block = tf::StaticPlan<decltype(fixed_models::basic_block<"layer1.0", 64, 64>(block_x{}))>;
// x, conv1 (+bn1 +relu), conv2 (+bn2, + x as residual, +relu): two steps.
static_assert(identity_block::n_steps == 2);
static_assert(identity_block::nodes[4].norm == 5 && identity_block::nodes[4].residual == 0);
static_assert(identity_block::nodes[4].activation && identity_block::nodes[4].run_at == 7);
using down_block = tf::StaticPlan<decltype(fixed_models::basic_block<"layer2.0", 64, 128, 2>(block_x{}))>;
// Nodes: x, conv1, bn1, relu, conv2, bn2, downsample.0, downsample.1, add, relu. conv2 takes the
// downsample branch as its residual, so it runs after it, where the add was.
static_assert(down_block::n_steps == 3);
static_assert(down_block::steps == std::array<std::size_t, 3>{1, 6, 4});
static_assert(down_block::nodes[4].residual == 7 && down_block::nodes[6].norm == 7);

// ---- an activation after a view, an add nothing can fold ----
constexpr auto unfused(tf::Value auto x) {
  constexpr tf::Linear<"fc", 4, 4> fc;
  auto h = fc(x);
  return tf::relu(tf::add(h, h));  // fc read twice: the add is a step, the relu its epilogue
}
using unfused_plan = tf::StaticPlan<decltype(unfused(tf::input<"x", float, 2, 4>()))>;
static_assert(unfused_plan::n_steps == 2 && unfused_plan::nodes[2].role == tf::Role::step);
static_assert(unfused_plan::nodes[2].activation && !unfused_plan::nodes[1].activation);

// A weight image: zeroed, 64-byte aligned (teeny::Buffer), as bytes.
struct Image {
  teeny::Buffer buffer;
  explicit Image(std::size_t n) {
    auto b = teeny::Buffer::allocate(n);
    REQUIRE(b);
    buffer = std::move(*b);
  }
  std::span<std::byte> span() { return {buffer.data(), buffer.size()}; }
};

// The run-time path's logits for the same graph, weights and input.
std::vector<float> runtime_logits(const teeny::Graph& graph, const fixtures::Model& fx) {
  auto model = teeny::load_cpu(graph, {{"batch", fx.x.shape()[0]}});
  REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
  REQUIRE(model->load_weights(fx.file, {.strict = false}));
  const teeny::TensorRef in[] = {teeny::TensorRef::of("x", fx.x)};
  REQUIRE(model->forward(in));
  auto out = model->output<float>("logits");
  REQUIRE(out);
  return {out->data, out->data + out->numel()};
}

// Loads the typed model M from the fixture's weights, runs it on the fixture's input and checks
// its logits against the run-time path's (1e-6 relative) and PyTorch's (rtol, atol).
template <class M>
void check_typed_model(M& model, const teeny::Graph& graph, const fixtures::Model& fx, double rtol, double atol) {
  Image weights(M::param_bytes);
  auto report = tf::read_weights<typename M::network>(fx.file, weights.span(), {.strict = false});
  REQUIRE_MESSAGE(report, (report ? "" : report.error().to_string()));
  CHECK(report->missing.empty());
  CHECK(report->mismatched.empty());
  CHECK(report->skipped_unexpected == std::vector<std::string>{"in.x", "out.logits"});
  auto x = fx.x.view<float>();
  REQUIRE(x);
  // Load and forward take nothing from the heap: the kernels' memory is the model's own block.
  // (No doctest macro in the counted window: its first message scope allocates.)
  const std::span<const float> input(x->data, static_cast<std::size_t>(x->numel()));
  const std::size_t allocations = test_support::allocation_count();
  auto loaded = model.load(weights.span());
  const bool ran = loaded && model.forward(input) && model.forward(input);
  const std::size_t after = test_support::allocation_count();
  REQUIRE_MESSAGE(loaded, (loaded ? "" : loaded.error().to_string()));
  REQUIRE(ran);
  CHECK(after == allocations);
  const auto out = model.output();

  const std::vector<float> reference = runtime_logits(graph, fx);
  auto pytorch = fx.logits.view<float>();
  REQUIRE(pytorch);
  REQUIRE(out.numel() == pytorch->numel());
  REQUIRE(reference.size() == static_cast<std::size_t>(out.numel()));
  double vs_runtime = 0;
  std::int64_t bad = 0;
  for (std::int64_t i = 0; i < out.numel(); ++i) {
    const double got = out.data[i];
    const double rt = reference[static_cast<std::size_t>(i)];
    vs_runtime = std::max(vs_runtime, std::abs(got - rt) / std::max(std::abs(rt), 1e-30));
    const double want = pytorch->data[i];
    if (!(std::abs(got - want) <= atol + rtol * std::abs(want))) ++bad;
  }
  MESSAGE("typed vs run-time path: max relative difference " << vs_runtime);
  CHECK(vs_runtime <= 1e-6);
  CHECK(bad == 0);
}

teeny::Graph built(teeny::Result<teeny::Graph> graph) {
  REQUIRE_MESSAGE(graph, (graph ? "" : graph.error().to_string()));
  return std::move(*graph);
}

using mlp3 = tf::Model<decltype(fixed_models::mlp(tf::input<"x", float, 3, 1, 28, 28>()))>;
using lenet3 = tf::Model<decltype(fixed_models::lenet(tf::input<"x", float, 3, 1, 28, 28>()))>;
using cnn2 = tf::Model<decltype(fixed_models::residual_cnn(tf::input<"x", float, 2, 3, 32, 32>()))>;
// stem conv1+bn1+relu; layer1.0 conv1+bn1+relu, conv2+bn2+add+relu; layer2.0 the same and its
// downsample conv+bn; avgpool; fc (the flatten is a view).
static_assert(cnn2::plan::n_steps == 1 + 2 + 3 + 1 + 1);

// Weights for every parameter of Net, drawn from a fixed seed: BatchNorm variances in [0.5, 1.5],
// everything else in [-0.5, 0.5]; num_batches_tracked 0.
template <class Net>
struct RandomWeights {
  std::vector<std::vector<float>> values;
  std::vector<std::int64_t> zero{0};
  std::vector<teeny::TensorRef> tensors;
  RandomWeights() {
    std::mt19937 rng(7);
    values.reserve(Net::params.size());  // the tensors borrow these
    for (const tf::ParamSpec& p : Net::params) {
      if (p.dtype == teeny::DType::i64) {
        tensors.push_back(teeny::TensorRef::of<std::int64_t>(p.key, zero, p.shape));
        continue;
      }
      const bool variance = p.key.ends_with("running_var");
      std::uniform_real_distribution<float> dist(variance ? 0.5f : -0.5f, variance ? 1.5f : 0.5f);
      auto& v = values.emplace_back(static_cast<std::size_t>(p.shape.numel()));
      for (float& e : v) e = dist(rng);
      tensors.push_back(teeny::TensorRef::of<float>(p.key, v, p.shape));
    }
  }
};

// ---- two inputs: y = out(relu(image_fc(image) + meta_fc(meta))) ----
constexpr tf::Linear<"image_fc", 8, 6> image_fc;
constexpr tf::Linear<"meta_fc", 4, 6> meta_fc;
constexpr tf::Linear<"out", 6, 3> two_out;
constexpr auto two_inputs(tf::Value auto image, tf::Value auto meta) {
  return two_out(tf::relu(tf::add(image_fc(image), meta_fc(meta))));
}
using two = tf::Model<decltype(two_inputs(tf::input<"image", float, 2, 8>(), tf::input<"meta", float, 2, 4>()))>;
static_assert(two::inputs.size() == 2);
static_assert(two::input_size_of<"image"> == 16 && two::input_size_of<"meta"> == 8);
static_assert(std::same_as<two::input_value_of<"meta">::dims, tf::Dims<2, 4>>);
// Both inputs live through the first step: their buffers do not overlap.
static_assert(two::plan::nodes[two::inputs[0]].offset != two::plan::nodes[two::inputs[1]].offset);

teeny::Graph two_inputs_graph() {
  teeny::GraphBuilder b;
  auto image = b.input("image", teeny::DType::f32, {2, 8});
  auto meta = b.input("meta", teeny::DType::f32, {2, 4});
  auto h = b.relu(b.add(b.linear(image, 6).named("image_fc"), b.linear(meta, 6).named("meta_fc")));
  b.output("y", b.linear(h, 3).named("out"));
  auto graph = std::move(b).build();
  REQUIRE_MESSAGE(graph, (graph ? "" : graph.error().to_string()));
  return std::move(*graph);
}

}  // namespace

TEST_CASE("a typed model with two inputs, fed by name, computes what the run-time path computes") {
  const RandomWeights<two::network> weights;
  std::vector<float> image(two::input_size_of<"image">), meta(two::input_size_of<"meta">);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  for (float& v : image) v = value(rng);
  for (float& v : meta) v = value(rng);

  auto typed = std::make_unique<two>();
  REQUIRE(typed->load(weights.tensors));
  // In either order; every input exactly once (the compiler checks the names).
  auto y = typed->forward(tf::feed<"meta">(meta), tf::feed<"image">(image));
  REQUIRE_MESSAGE(y, (y ? "" : y.error().to_string()));

  auto runtime = teeny::load_cpu(two_inputs_graph(), {});
  REQUIRE(runtime);
  REQUIRE(runtime->load_weights(weights.tensors));
  const teeny::TensorRef in[] = {teeny::TensorRef::of<float>("image", image, {2, 8}),
                                 teeny::TensorRef::of<float>("meta", meta, {2, 4})};
  REQUIRE(runtime->forward(in));
  auto reference = runtime->output<float>("y");
  REQUIRE(reference);
  REQUIRE(reference->shape == y->shape);
  for (std::int64_t i = 0; i < y->numel(); ++i) {
    CAPTURE(i);
    CHECK(y->data[i] == doctest::Approx(reference->data[i]).epsilon(1e-6));
  }

  // A feed of the wrong size names the input, and nothing runs.
  std::vector<float> short_meta(7);
  auto wrong = typed->forward(tf::feed<"image">(image), tf::feed<"meta">(short_meta));
  REQUIRE(!wrong);
  CHECK(wrong.error().code() == teeny::Errc::invalid_argument);
  CHECK(wrong.error().message() == "input 'meta' has 7 elements but its shape [2, 4] takes 8");
}

TEST_CASE("the typed MLP computes what the run-time path and PyTorch compute") {
  auto model = std::make_unique<mlp3>();
  check_typed_model(*model, built(models::mlp()), fixtures::model("mlp"), 1e-5, 1e-6);
}

TEST_CASE("the typed LeNet computes what the run-time path and PyTorch compute") {
  auto model = std::make_unique<lenet3>();
  check_typed_model(*model, built(models::lenet()), fixtures::model("lenet"), 1e-5, 1e-6);
}

TEST_CASE(
    "a typed residual CNN (folded BatchNorms, residual adds, a downsample branch) computes what the run-time "
    "path computes") {
  const RandomWeights<cnn2::network> weights;
  std::vector<float> x(cnn2::input_size);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
  for (float& v : x) v = pixel(rng);

  // Each convolution algorithm in turn (their memory differs: the plan must hold every one;
  // embedded builds, which leave Winograd out, run it as automatic).
  using teeny::ConvAlgorithm;
  for (const ConvAlgorithm conv :
       {ConvAlgorithm::automatic, ConvAlgorithm::implicit, ConvAlgorithm::im2col, ConvAlgorithm::transposed,
        ConvAlgorithm::winograd, ConvAlgorithm::winograd_2x2, ConvAlgorithm::pixel_rows}) {
    CAPTURE(static_cast<int>(conv));
    auto typed = std::make_unique<cnn2>();
    const std::size_t allocations = test_support::allocation_count();  // load and forward: no heap
    auto loaded = typed->load(weights.tensors, {.conv = conv});
    const bool ran = loaded && typed->forward(x);
    const std::size_t after = test_support::allocation_count();
    REQUIRE_MESSAGE(loaded, (loaded ? "" : loaded.error().to_string()));
    REQUIRE(ran);
    CHECK(after == allocations);
    const auto out = typed->output();

    auto runtime = teeny::load_cpu(built(models::residual_cnn()), {{"batch", 2}}, {.conv = conv});
    REQUIRE_MESSAGE(runtime, (runtime ? "" : runtime.error().to_string()));
    REQUIRE(runtime->load_weights(weights.tensors));  // strict: the typed model's keys are the graph's
    const teeny::TensorRef in[] = {teeny::TensorRef::of<float>("x", x, {2, 3, 32, 32})};
    REQUIRE(runtime->forward(in));
    auto reference = runtime->output<float>("logits");
    REQUIRE(reference);
    REQUIRE(reference->shape == out.shape);
    double worst = 0;
    for (std::int64_t i = 0; i < out.numel(); ++i) {
      worst = std::max(worst, std::abs(static_cast<double>(out.data[i]) - reference->data[i]) /
                                  std::max(std::abs(static_cast<double>(reference->data[i])), 1e-30));
    }
    MESSAGE("typed vs run-time path: max relative difference " << worst);
    CHECK(worst <= 1e-6);
  }
}

TEST_CASE("a typed model refuses weights of the wrong size or alignment, an input of the wrong size, a second load") {
  auto model = std::make_unique<mlp3>();
  auto early = model->forward(std::span<const float>{});
  REQUIRE(!early);
  CHECK(early.error().message() == "the typed model is not loaded (call load first)");

  Image weights(mlp3::param_bytes + 64);
  auto size = model->load(weights.span().first(100));
  REQUIRE(!size);
  CHECK(size.error().code() == teeny::Errc::invalid_argument);
  CHECK(size.error().message() == "weights: 100 bytes, but the model's parameters take " +
                                      std::to_string(mlp3::param_bytes) + " (Network::param_bytes)");
  auto misaligned = model->load(weights.span().subspan(4, mlp3::param_bytes));
  REQUIRE(!misaligned);
  CHECK(misaligned.error().message() == "weights: the buffer must be 64-byte aligned (alignas(64))");

  REQUIRE(model->load(weights.span().first(mlp3::param_bytes)));
  auto again = model->load(weights.span().first(mlp3::param_bytes));
  REQUIRE(!again);
  CHECK(again.error().message() == "the typed model is loaded already");

  std::vector<float> x(mlp3::input_size + 1);
  auto wrong = model->forward(x);
  REQUIRE(!wrong);
  CHECK(wrong.error().message() == "input 'x' has 2353 elements but its shape [3, 1, 28, 28] takes 2352");
  auto right = model->forward(std::span<const float>(x).first(mlp3::input_size));
  REQUIRE(right);
  CHECK(right->shape == teeny::ConcreteShape{3, 10});
  CHECK(std::all_of(right->data, right->data + 30, [](float v) { return v == 0.0f; }));  // zero weights
}
