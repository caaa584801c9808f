// The trainable model (training builds): what a training load refuses, the training and eval
// phases (BatchNorm statistics, dropout), gradient accumulation and zero_grad, and a training
// step that allocates nothing once warmed up. Values are checked against references computed
// here in double.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

import teeny;

#include "models.hpp"
#include "support/allocation_counter.hpp"

namespace {
using teeny::DType;
using teeny::GraphBuilder;

std::vector<float> random_values(std::int64_t n, std::uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

void fill(const teeny::TensorBinding& t, const std::vector<float>& values) {
  REQUIRE(static_cast<std::size_t>(t.shape.numel()) == values.size());
  std::memcpy(t.data, values.data(), values.size() * sizeof(float));
}

const float* floats(const teeny::TensorBinding& t) { return static_cast<const float*>(t.data); }
}  // namespace

TEST_CASE("a training load refuses a parameter whose gradient would stop at an op without backward") {
  // Every op of the standard set has a backward, but a cast to an integer dtype passes no gradient
  // (as in PyTorch): a parameter that reaches the loss only through one would never train.
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {2, 4});
  auto h = b.linear(x, 6).named("fc");
  auto t = b.cast(b.cast(h, DType::i32).named("quantize"), DType::f32);
  b.output("y", b.linear(t, 3).named("head"));
  auto graph = std::move(b).build();
  REQUIRE(graph);
  auto model = teeny::load_cpu_for_training(*graph, {});
  REQUIRE_FALSE(model);
  CHECK(model.error().code() == teeny::Errc::unsupported);
  const std::string message = model.error().to_string();
  CAPTURE(message);
  CHECK(message.find("node 'quantize' (cast)") != std::string::npos);
  CHECK(message.find("no backward") != std::string::npos);

  // The same op where no trained parameter is before it is fine: no gradient has to pass.
  GraphBuilder c;
  auto x2 = c.input("x", DType::f32, {2, 2});
  c.output("y", c.linear(c.cast(c.cast(x2, DType::i32), DType::f32), 3).named("head"));
  auto graph2 = std::move(c).build();
  REQUIRE(graph2);
  auto frozen = teeny::load_cpu_for_training(*graph2, {});
  REQUIRE(frozen);
  // An output no trained parameter comes before has no gradient to write: a clear error, not a
  // buffer that is not there.
  GraphBuilder d;
  auto x3 = d.input("x", DType::f32, {2, 4});
  d.output("y", d.linear(x3, 3).named("head"));
  d.output("z", d.relu(x3));
  auto graph3 = std::move(d).build();
  REQUIRE(graph3);
  auto two = teeny::load_cpu_for_training(*graph3, {});
  REQUIRE(two);
  const std::vector<float> xs(8, 1.0f);
  const teeny::TensorRef in[] = {teeny::TensorRef::of<float>("x", xs, {2, 4})};
  REQUIRE(two->forward(in));
  CHECK(two->output_grad("y"));
  auto none = two->output_grad("z");
  REQUIRE_FALSE(none);
  CHECK(none.error().to_string().find("no gradient flows back from output 'z'") != std::string::npos);
}

TEST_CASE("an inference model refuses training calls with a clear error") {
  auto graph = models::mlp();
  REQUIRE(graph);
  auto model = teeny::load_cpu(*graph, {{"batch", 2}});
  REQUIRE(model);
  CHECK_FALSE(model->trainable());
  auto ran = model->backward();
  REQUIRE_FALSE(ran);
  CHECK(ran.error().to_string().find("lowered for inference") != std::string::npos);
  CHECK_FALSE(model->output_grad("logits"));
}

TEST_CASE("backward needs a forward first; gradients accumulate until zero_grad") {
  auto graph = models::mlp();
  REQUIRE(graph);
  auto model = teeny::load_cpu_for_training(*graph, {{"batch", 3}});
  REQUIRE(model);
  CHECK_FALSE(model->backward());  // no forward yet
  for (auto& p : model->parameter_gradients()) {
    fill(p.value, random_values(p.value.shape.numel(), 7, 0.05f));
  }
  const auto x = random_values(3 * 784, 3);
  const teeny::TensorRef in[] = {teeny::TensorRef::of<float>("x", x, {3, 1, 28, 28})};
  const auto r = random_values(30, 5);
  auto step = [&] {
    REQUIRE(model->forward(in));
    auto dy = model->output_grad("logits");
    REQUIRE(dy);
    fill(*dy, r);
    REQUIRE(model->backward());
  };
  step();
  auto params = model->parameter_gradients();
  REQUIRE(params.size() == 6);
  CHECK(params[0].key == "fc1.weight");
  std::vector<float> once(floats(params[5].grad), floats(params[5].grad) + 10);
  step();
  for (std::size_t i = 0; i < 10; ++i) CHECK(floats(params[5].grad)[i] == doctest::Approx(2 * once[i]).epsilon(1e-5));
  // fc3's bias gradient is the column sum of dL/dlogits: r summed over the batch.
  for (std::size_t j = 0; j < 10; ++j) CHECK(once[j] == doctest::Approx(r[j] + r[10 + j] + r[20 + j]).epsilon(1e-5));
  model->zero_grad();
  for (const auto& p : model->parameter_gradients()) {
    for (std::int64_t i = 0; i < p.grad.shape.numel(); ++i) REQUIRE(floats(p.grad)[i] == 0.0f);
  }
}

// An optimizer step changes the weights in place; every convolution method keeps a prepared copy
// (packed, or Winograd's transformed filters) that must follow. After a step the trainable model's
// forward must equal a fresh inference model's loaded with the new weights.
TEST_CASE("after an optimizer step every convolution method computes with the new weights") {
  using teeny::ConvAlgorithm;
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {2, 3, 9, 10});
  b.output("y", b.relu(b.conv2d(x, 8, 3, {.padding = 1}).named("conv")));  // 3x3 stride 1: Winograd fits
  auto graph = std::move(b).build();
  REQUIRE(graph);
  const auto input = random_values(2 * 3 * 9 * 10, 11);
  const teeny::TensorRef in[] = {teeny::TensorRef::of<float>("x", input, {2, 3, 9, 10})};
  for (const ConvAlgorithm conv : {ConvAlgorithm::implicit, ConvAlgorithm::im2col, ConvAlgorithm::transposed,
                                   ConvAlgorithm::winograd, ConvAlgorithm::winograd_2x2, ConvAlgorithm::pixel_rows}) {
    CAPTURE(static_cast<int>(conv));
    auto model = teeny::load_cpu_for_training(*graph, {}, {.conv = conv});
    REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
    const auto w = random_values(8 * 3 * 9, 12, 0.3f);
    const auto bias = random_values(8, 13);
    const teeny::TensorRef weights[] = {teeny::TensorRef::of<float>("conv.weight", w, {8, 3, 3, 3}),
                                        teeny::TensorRef::of<float>("conv.bias", bias, {8})};
    REQUIRE(model->load_weights(weights));
    auto params = teeny::trainable_parameters<float>(*model);
    REQUIRE(params);
    auto sgd = teeny::Sgd<float>::create(*params, {.lr = 0.5});
    REQUIRE(sgd);
    REQUIRE(model->forward(in));
    auto dy = model->output_grad("y");
    REQUIRE(dy);
    fill(*dy, random_values(dy->shape.numel(), 14));
    REQUIRE(model->backward());
    sgd->step();
    REQUIRE(model->forward(in));
    auto got = model->output<float>("y");
    REQUIRE(got);

    auto fresh = teeny::load_cpu(*graph, {}, {.conv = conv});
    REQUIRE(fresh);
    REQUIRE(fresh->load_weights(model->parameters()));
    REQUIRE(fresh->forward(in));
    auto want = fresh->output<float>("y");
    REQUIRE(want);
    double changed = 0;
    for (const teeny::TensorRef& p : model->parameters()) {
      if (p.name != "conv.weight") continue;
      const auto now = p.view<float>()->span();
      for (std::size_t i = 0; i < w.size(); ++i) changed = std::max(changed, std::abs(double(now[i]) - w[i]));
    }
    CHECK(changed > 1e-3);  // the step moved the weights
    std::int64_t bad = 0;
    for (std::int64_t i = 0; i < want->numel(); ++i) {
      if (!(std::abs(got->data[i] - want->data[i]) <= 1e-6 * std::abs(want->data[i]) + 1e-6)) ++bad;
    }
    CHECK(bad == 0);
  }
}

TEST_CASE("BatchNorm in training: batch statistics, PyTorch's running-stat update, eval on running stats") {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {4, 3});
  b.output("y", b.batch_norm1d(b.linear(x, 2).named("fc"), {.momentum = 0.25}).named("bn"));
  auto graph = std::move(b).build();
  REQUIRE(graph);
  auto model = teeny::load_cpu_for_training(*graph, {});
  REQUIRE(model);
  // fc: weight [[1, 0, 0], [0, 2, 0]], bias [0, 1]: h = (x0, 2 x1 + 1).
  auto params = model->parameter_gradients();
  fill(params[0].value, {1, 0, 0, 0, 2, 0});
  fill(params[1].value, {0, 1});
  const std::vector<float> xs = {1, 2, 0, 2, -1, 0, 4, 0, 0, -3, 5, 0};
  const teeny::TensorRef in[] = {teeny::TensorRef::of<float>("x", xs, {4, 3})};
  REQUIRE(model->forward(in));
  // Channel 0: h = 1, 2, 4, -3: mean 1, biased var 6.5, unbiased 26/3.
  const double inv_std = 1.0 / std::sqrt(6.5 + 1e-5);
  auto y = model->output("y");
  REQUIRE(y);
  CHECK(floats(*y)[0] == doctest::Approx((1 - 1) * inv_std).epsilon(1e-5));
  CHECK(floats(*y)[2] == doctest::Approx((2 - 1) * inv_std).epsilon(1e-5));
  CHECK(floats(*y)[6] == doctest::Approx((-3 - 1) * inv_std).epsilon(1e-5));
  const auto all = model->parameters();  // buffers too
  REQUIRE(all[4].name == "bn.running_mean");
  const auto running_mean = all[4].view<float>()->span();
  const auto running_var = all[5].view<float>()->span();
  const auto batches = all[6].view<std::int64_t>()->span();
  CHECK(running_mean[0] == doctest::Approx(0.25 * 1.0).epsilon(1e-6));
  CHECK(running_var[0] == doctest::Approx(0.75 * 1.0 + 0.25 * 26.0 / 3.0).epsilon(1e-6));
  CHECK(batches[0] == 1);

  // Eval: the running statistics, and nothing updated.
  model->set_training(false);
  REQUIRE(model->forward(in));
  y = model->output("y");
  const double eval_scale = 1.0 / std::sqrt(running_var[0] + 1e-5);
  CHECK(floats(*y)[0] == doctest::Approx((1 - running_mean[0]) * eval_scale).epsilon(1e-5));
  CHECK(batches[0] == 1);
}

TEST_CASE("BatchNorm refuses a training batch of one value per channel, naming the node") {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {teeny::Dim::sym("batch"), 3});
  b.output("y", b.batch_norm1d(b.linear(x, 2).named("fc")).named("bn"));
  auto graph = std::move(b).build();
  REQUIRE(graph);
  auto refused = teeny::load_cpu_for_training(*graph, {{"batch", 1}});
  REQUIRE_FALSE(refused);
  const std::string message = refused.error().to_string();
  CAPTURE(message);
  CHECK(message.find("'bn'") != std::string::npos);
  CHECK(message.find("more than one value per channel") != std::string::npos);
  CHECK(message.find("[1, 2]") != std::string::npos);
  CHECK(teeny::load_cpu_for_training(*graph, {{"batch", 2}}));  // two values: statistics
  CHECK(teeny::load_cpu(*graph, {{"batch", 1}}));               // inference: the running ones
}

TEST_CASE("dropout: active in the training phase with seeded masks, the identity in eval") {
  GraphBuilder b;
  auto x = b.input("x", DType::f32, {64, 32});
  b.output("y", b.dropout(b.linear(x, 32).named("fc"), 0.25));
  auto graph = std::move(b).build();
  REQUIRE(graph);
  auto model = teeny::load_cpu_for_training(*graph, {});
  REQUIRE(model);
  model->set_seed(42);
  const auto xs = random_values(64 * 32, 1);
  for (auto& p : model->parameter_gradients()) fill(p.value, random_values(p.value.shape.numel(), 2));
  const teeny::TensorRef in[] = {teeny::TensorRef::of<float>("x", xs, {64, 32})};

  // Eval first: y is fc's output, h.
  model->set_training(false);
  REQUIRE(model->forward(in));
  auto y = model->output("y");
  std::vector<float> h(floats(*y), floats(*y) + 64 * 32);
  model->set_training(true);
  REQUIRE(model->forward(in));
  y = model->output("y");
  std::int64_t dropped = 0;
  std::vector<bool> kept(h.size());
  for (std::size_t i = 0; i < h.size(); ++i) {
    const float v = floats(*y)[i];
    kept[i] = v != 0.0f;
    dropped += kept[i] ? 0 : 1;
    if (kept[i]) REQUIRE(v == doctest::Approx(h[i] / 0.75f).epsilon(1e-6));
  }
  // 2048 draws at p = 0.25: 512 expected, the standard deviation is 19.6.
  CHECK(dropped > 512 - 100);
  CHECK(dropped < 512 + 100);
  // Backward: the same mask, scaled; fc's bias gradient is its column sum.
  auto dy = model->output_grad("y");
  REQUIRE(dy);
  fill(*dy, std::vector<float>(h.size(), 1.0f));
  model->zero_grad();
  REQUIRE(model->backward());
  const auto params = model->parameter_gradients();
  for (std::size_t j = 0; j < 32; ++j) {
    double want = 0;
    for (std::size_t r = 0; r < 64; ++r) want += kept[r * 32 + j] ? 1.0 / 0.75 : 0.0;
    CHECK(floats(params[1].grad)[j] == doctest::Approx(want).epsilon(1e-5));
  }
  // The next training forward draws a new mask.
  REQUIRE(model->forward(in));
  y = model->output("y");
  std::int64_t changed = 0;
  for (std::size_t i = 0; i < h.size(); ++i) changed += (floats(*y)[i] != 0.0f) != kept[i];
  CHECK(changed > 0);
}

TEST_CASE("embedding backward: rows of dy added to the rows their indices read, none to padding_idx") {
  GraphBuilder b;
  auto ids = b.input("ids", DType::i64, {5});
  b.output("y", b.embedding(ids, 4, 3, {.padding_idx = 0}).named("emb"));
  auto graph = std::move(b).build();
  REQUIRE(graph);
  auto model = teeny::load_cpu_for_training(*graph, {});
  REQUIRE(model);
  const std::vector<std::int64_t> indices = {1, 3, 1, 0, 2};
  const teeny::TensorRef in[] = {{"ids", DType::i64, {5}, std::as_bytes(std::span(indices))}};
  REQUIRE(model->forward(in));
  std::vector<float> dy(15);
  for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = static_cast<float>(i + 1);
  auto grad = model->output_grad("y");
  REQUIRE(grad);
  fill(*grad, dy);
  model->zero_grad();
  REQUIRE(model->backward());
  const auto params = model->parameter_gradients();
  REQUIRE(params.size() == 1);
  const float* dw = floats(params[0].grad);
  const float want[4][3] = {{0, 0, 0}, {1 + 7, 2 + 8, 3 + 9}, {13, 14, 15}, {4, 5, 6}};  // row 0: padding
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 3; ++c) CHECK(dw[r * 3 + c] == want[r][c]);
  }
}

TEST_CASE("max pool 2x2 backward: the forward's winner gets the gradient (first maximum, last NaN), added to dx") {
  // Two planes of 2 x 4: each holds two 2x2 windows. Plane 0: a clear maximum, then a four-way tie
  // (the first wins). Plane 1: one NaN, then two NaNs (the last wins).
  const float nan = std::nanf("");
  const std::vector<float> x = {1, 5,   2,   2,    //
                                3, 4,   2,   2,    //
                                9, nan, 1,   nan,  //
                                8, 7,   nan, 0};
  const std::vector<float> dy = {10, 20, 30, 40};
  std::vector<float> dx(16, 0.5f);  // a gradient already there: the backward adds to it
  std::vector<float> y(4);
  const teeny::Window2d window{2, 2, 2, 2, 0, 0, 1, 1};
  const teeny::Pool2dArgs<float> forward{{x.data(), {2, 2, 4}}, {y.data(), {2, 1, 2}}, window};
  const teeny::InputGradArgs<teeny::Pool2dArgs<float>, float> args{
      forward, {const_cast<float*>(dy.data()), {2, 1, 2}}, {dx.data(), {2, 2, 4}}};
  teeny::CpuContext cpu;
  teeny::max_pool2d_op<float> op{};
  auto state = teeny::prepare_backward_kernel(op, args, cpu);
  REQUIRE(state);
  teeny::run_backward_kernel(op, args, *state, cpu);
  const std::vector<float> expected = {0.5f, 10.5f, 20.5f, 0.5f,  //
                                       0.5f, 0.5f,  0.5f,  0.5f,  //
                                       0.5f, 30.5f, 0.5f,  0.5f,  //
                                       0.5f, 0.5f,  40.5f, 0.5f};
  for (std::size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(i);
    CHECK(dx[i] == expected[i]);
  }
}

TEST_CASE("cast backward: a gradient through f16 or bf16 is rounded to that dtype on its way back") {
  // y = (x W^T).to(half).to(f32): dL/d(half value) is dy rounded to half, so dW = round(dy)^T x.
  // dy = 1 + 2^-12 is not a half (f16 keeps 10 fraction bits, bf16 7): it rounds to 1.
  for (const DType half : {DType::f16, DType::bf16}) {
    const std::string which(teeny::name(half));
    CAPTURE(which);
    GraphBuilder b;
    auto x = b.input("x", DType::f32, {2, 3});
    b.output("y", b.cast(b.cast(b.linear(x, 4, false).named("fc"), half), DType::f32));
    auto graph = std::move(b).build();
    REQUIRE(graph);
    auto model = teeny::load_cpu_for_training(*graph, {});
    REQUIRE(model);
    const auto params = model->parameter_gradients();
    REQUIRE(params.size() == 1);
    fill(params[0].value, random_values(12, 3, 0.1f));
    const std::vector<float> xs = {1, 2, 3, -1, 0.5f, 4};
    const teeny::TensorRef in[] = {teeny::TensorRef::of<float>("x", xs, {2, 3})};
    REQUIRE(model->forward(in));
    auto dy = model->output_grad("y");
    REQUIRE(dy);
    fill(*dy, std::vector<float>(8, 1.0f + 1.0f / 4096));
    model->zero_grad();
    REQUIRE(model->backward());
    const float* dw = floats(params[0].grad);
    for (int o = 0; o < 4; ++o) {
      for (int i = 0; i < 3; ++i) CHECK(dw[o * 3 + i] == xs[i] + xs[3 + i]);  // exact: small integers and halves
    }
  }
}

TEST_CASE("a training step (forward, output gradient, backward, zero_grad) allocates nothing after the first") {
  auto graph = models::lenet();
  REQUIRE(graph);
  auto model = teeny::load_cpu_for_training(*graph, {{"batch", 8}}, {.threads = 2});
  REQUIRE(model);
  for (auto& p : model->parameter_gradients()) fill(p.value, random_values(p.value.shape.numel(), 9, 0.1f));
  const auto xs = random_values(8 * 784, 4);
  const teeny::TensorRef in[] = {teeny::TensorRef::of<float>("x", xs, {8, 1, 28, 28})};
  const auto r = random_values(80, 6);
  auto step = [&] {
    REQUIRE(model->forward(in));
    auto dy = model->output_grad("logits");
    REQUIRE(dy);
    fill(*dy, r);
    model->zero_grad();
    REQUIRE(model->backward());
  };
  step();
  const std::size_t before = test_support::allocation_count();
  for (int i = 0; i < 3; ++i) step();
  CHECK(test_support::allocation_count() == before);
}

TEST_CASE("a checkpoint resumes training bit for bit: 10 steps, save, load into a fresh model, 10 more") {
  // The demo's MLP with a dropout after each hidden layer: the resumed run must also draw the
  // masks the straight one draws (the checkpoint carries the random state).
  auto graph = [] {
    GraphBuilder b;
    auto h = b.flatten(b.input("x", DType::f32, {teeny::Dim::sym("batch"), 1, 28, 28}));
    h = b.dropout(b.relu(b.linear(h, 512).named("fc1")), 0.2);
    h = b.dropout(b.relu(b.linear(h, 512).named("fc2")), 0.2);
    b.output("logits", b.linear(h, 10).named("fc3"));
    return std::move(b).build();
  }();
  REQUIRE(graph);
  const auto xs = random_values(8 * 784, 11);
  const std::vector<std::int64_t> labels = {3, 1, 4, 1, 5, 9, 2, 6};
  const teeny::TensorRef in[] = {teeny::TensorRef::of<float>("x", xs, {8, 1, 28, 28})};
  const teeny::TensorView<const std::int64_t> targets(labels.data(), {8});
  auto train_steps = [&](teeny::CpuModel& model, teeny::AdamW<float>& opt, int steps) {
    for (int i = 0; i < steps; ++i) {
      REQUIRE(model.forward(in));
      auto logits = model.output<float>("logits");
      auto grad = model.output_grad("logits");
      REQUIRE(teeny::cross_entropy<float>(*logits, targets, *grad->as<float>()));
      REQUIRE(model.backward());
      opt.step();
      model.zero_grad();
    }
  };
  auto fresh = [&](std::uint64_t seed) {
    auto model = teeny::load_cpu_for_training(*graph, {{"batch", 8}});
    REQUIRE(model);
    REQUIRE(teeny::init_parameters(*model, seed));
    model->set_seed(seed);
    return std::move(*model);
  };
  // 20 steps in one go.
  auto straight = fresh(5);
  auto straight_params = teeny::trainable_parameters<float>(straight);
  REQUIRE(straight_params);
  auto straight_opt = teeny::AdamW<float>::create(*straight_params, {.lr = 1e-3});
  REQUIRE(straight_opt);
  train_steps(straight, *straight_opt, 20);

  // 10, a checkpoint, then 10 more in a model made afresh (other initial weights, new optimizer).
  const std::string path = std::string(TEENY_BUILD_DIR) + "/checkpoint_test.safetensors";
  {
    auto first = fresh(5);
    auto params = teeny::trainable_parameters<float>(first);
    auto opt = teeny::AdamW<float>::create(*params, {.lr = 1e-3});
    REQUIRE(opt);
    train_steps(first, *opt, 10);
    REQUIRE(teeny::save_checkpoint(path, first, *opt));
  }
  auto resumed = fresh(99);
  auto params = teeny::trainable_parameters<float>(resumed);
  auto opt = teeny::AdamW<float>::create(*params, {.lr = 1e-3});
  REQUIRE(opt);
  auto loaded = teeny::load_checkpoint(path, resumed, *opt);
  CAPTURE(loaded ? std::string() : loaded.error().to_string());
  REQUIRE(loaded);
  CHECK(resumed.random_state().seed == 5);
  CHECK(resumed.random_state().step == 10);
  train_steps(resumed, *opt, 10);
  for (std::size_t p = 0; p < params->size(); ++p) {
    const auto a = (*straight_params)[p].value.span();
    const auto b = (*params)[p].value.span();
    CAPTURE((*params)[p].key);
    CHECK(std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);
  }

  // A checkpoint of another model is refused, naming what does not match, and changes nothing.
  auto other_graph = models::lenet();
  REQUIRE(other_graph);
  auto other = teeny::load_cpu_for_training(*other_graph, {{"batch", 8}});
  REQUIRE(other);
  auto other_params = teeny::trainable_parameters<float>(*other);
  auto other_opt = teeny::AdamW<float>::create(*other_params, {.lr = 1e-3});
  auto refused = teeny::load_checkpoint(path, *other, *other_opt);
  REQUIRE_FALSE(refused);
  const std::string message = refused.error().to_string();
  CAPTURE(message);
  CHECK(message.find("checkpoint does not match the model: safetensors file '" + path + "': cannot load") !=
        std::string::npos);
  CHECK(message.find("missing: 'conv1.weight'") != std::string::npos);
  CHECK(message.find("'fc1.weight': file has [512, 784] but the model expects [120, 400]") != std::string::npos);
  std::remove(path.c_str());
}
