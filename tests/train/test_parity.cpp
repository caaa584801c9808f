// Training parity with PyTorch 1.13 (tests/fixtures/train, written by tools/make_parity_fixtures.py):
// the same initial weights and the same Fashion-MNIST batches, 20 optimizer steps; each step's
// loss and learning rate, the final parameters and buffers, and eval-mode logits after training
// against PyTorch's. Skipped (with a message) when Debian's dataset-fashion-mnist is not installed.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

import teeny;

#include "models.hpp"
#include "support/fixtures.hpp"

namespace {
constexpr const char* kData = "/usr/share/datasets/fashion-mnist";
constexpr std::int64_t kBatch = 32;
constexpr std::int64_t kSteps = 20;

template <class T>
const T* data_of(const teeny::SafetensorsEntry* e) {
  REQUIRE(e != nullptr);
  return reinterpret_cast<const T*>(e->data.data());
}

// The file's `<prefix><key>` tensors under their state_dict keys, loaded strictly into the model.
void load_state(teeny::CpuModel& model, const teeny::SafetensorsFile& init, const std::string& prefix) {
  std::vector<teeny::TensorRef> refs;
  for (const auto& e : init.entries()) {
    const std::string_view name = e.name;
    if (name.starts_with(prefix)) refs.push_back({name.substr(prefix.size()), e.dtype, e.shape, e.data});
  }
  auto loaded = model.load_weights(refs);  // in memory: the file's little-endian bytes, as this host's
  REQUIRE_MESSAGE(loaded, (loaded ? "" : loaded.error().to_string()));
}

struct Tolerance {
  double atol = 1e-4;
  std::vector<std::string> noisy{};  // keys PyTorch's own rounding decides (see the fixture README)
  double noisy_atol = 0.02;
  double logits_atol = 1e-4;
};

template <class Opt>
void run_parity(const std::string& run, teeny::Result<teeny::Graph> graph, const Tolerance& tol,
                std::function<teeny::Result<Opt>(std::span<const teeny::Parameter<float>>)> make_optimizer,
                std::function<void(Opt&, std::int64_t)> schedule = {}) {
  if (!std::filesystem::exists(kData)) {
    MESSAGE("skipped: " << kData << " is not installed (Debian package dataset-fashion-mnist)");
    return;
  }
  CAPTURE(run);
  auto fixture = teeny::SafetensorsFile::open(fixtures::path("train/" + run + ".safetensors"));
  REQUIRE(fixture);
  auto init_file = teeny::SafetensorsFile::open(fixtures::path("train/" + fixture->metadata().at("init_file")));
  REQUIRE(init_file);
  auto train = teeny::load_fashion_mnist(kData, teeny::DatasetSplit::train);
  auto test = teeny::load_fashion_mnist(kData, teeny::DatasetSplit::test);
  REQUIRE(train);
  REQUIRE(test);

  REQUIRE(graph);
  auto model = teeny::load_cpu_for_training(*graph, {{"batch", kBatch}});
  REQUIRE(model);
  load_state(*model, *init_file, "init.");
  auto params = teeny::trainable_parameters<float>(*model);
  REQUIRE(params);
  auto optimizer = make_optimizer(*params);
  REQUIRE(optimizer);

  const auto* batches = data_of<std::int64_t>(fixture->find("batches"));
  const auto* losses = data_of<double>(fixture->find("loss"));
  const auto* lrs = data_of<double>(fixture->find("lr"));
  const std::size_t image_bytes = 28 * 28 * sizeof(float);
  std::vector<float> images(static_cast<std::size_t>(kBatch) * 28 * 28);
  std::vector<std::int64_t> labels(kBatch);
  const auto train_images = std::span(train->images.data(), train->images.bytes());
  const auto train_labels = std::span(train->labels.data(), train->labels.bytes());
  for (std::int64_t step = 0; step < kSteps; ++step) {
    CAPTURE(step);
    const std::span<const std::int64_t> indices(batches + step * kBatch, kBatch);
    REQUIRE(teeny::gather_rows(train_images, image_bytes, indices, std::as_writable_bytes(std::span(images))));
    REQUIRE(teeny::gather_rows(train_labels, sizeof(std::int64_t), indices, std::as_writable_bytes(std::span(labels))));
    if (schedule) schedule(*optimizer, step);
    CHECK(optimizer->lr(0) == doctest::Approx(lrs[step]).epsilon(1e-12));
    const teeny::TensorRef in[] = {teeny::TensorRef::of<float>("x", images, {kBatch, 1, 28, 28})};
    REQUIRE(model->forward(in));
    auto logits = model->output("logits");
    auto grad = model->output_grad("logits");
    REQUIRE(logits);
    REQUIRE(grad);
    auto loss = teeny::cross_entropy<float>(
        *logits->as<const float>(), teeny::TensorView<const std::int64_t>(labels.data(), {kBatch}), *grad->as<float>());
    REQUIRE(loss);
    CHECK(*loss == doctest::Approx(losses[step]).epsilon(1e-4));
    REQUIRE(model->backward());
    optimizer->step();
    model->zero_grad();
  }

  // Parameters and buffers after 20 steps.
  for (const teeny::TensorRef& p : model->parameters()) {
    const std::string key(p.name);
    CAPTURE(key);
    const teeny::SafetensorsEntry* want = fixture->find("final." + key);
    REQUIRE(want != nullptr);
    REQUIRE(want->shape == p.shape);
    if (p.dtype == teeny::DType::i64) {
      CHECK(p.view<std::int64_t>()->span()[0] == *data_of<std::int64_t>(want));
      continue;
    }
    bool noisy = false;
    for (const auto& k : tol.noisy) noisy = noisy || k == key;
    const double atol = noisy ? tol.noisy_atol : tol.atol;
    const auto got = p.view<float>()->span();
    const auto* expected = data_of<float>(want);
    double worst = 0;
    for (std::int64_t i = 0; i < p.shape.numel(); ++i) worst = std::max(worst, std::abs(double(got[i]) - expected[i]));
    CAPTURE(worst);
    CHECK(worst <= atol);
    if (noisy) MESSAGE(run << " " << key << ": max |teeny - PyTorch| = " << worst << " (rounding noise, see above)");
  }

  // Eval-mode logits (running statistics) on 64 test images.
  model->set_training(false);
  const auto* eval_indices = data_of<std::int64_t>(fixture->find("eval.indices"));
  std::vector<float> eval_images(64 * 28 * 28);
  REQUIRE(teeny::gather_rows(std::span(test->images.data(), test->images.bytes()), image_bytes,
                             std::span(eval_indices, 64), std::as_writable_bytes(std::span(eval_images))));
  const teeny::TensorRef eval_in[] = {teeny::TensorRef::of<float>("x", eval_images, {64, 1, 28, 28})};
  REQUIRE(model->forward(eval_in));
  auto logits = model->output("logits");
  REQUIRE(logits);
  auto expected = fixture->find("eval.logits");
  REQUIRE(expected != nullptr);
  auto want = teeny::Tensor::zeros(teeny::DType::f32, expected->shape);
  REQUIRE(want);
  std::memcpy(want->data(), expected->data.data(), want->bytes());
  fixtures::check_close(*logits, *want, 0.0, tol.logits_atol);

  // The eval phase itself, free of that noise: PyTorch's final state gives PyTorch's logits.
  load_state(*model, *fixture, "final.");
  REQUIRE(model->forward(eval_in));
  logits = model->output("logits");
  REQUIRE(logits);
  fixtures::check_close(*logits, *want, 1e-4, 1e-5);
}
}  // namespace

TEST_CASE("training parity with PyTorch: MLP, SGD with momentum and weight decay") {
  run_parity<teeny::Sgd<float>>("mlp_sgd", models::mlp(), {}, [](std::span<const teeny::Parameter<float>> p) {
    return teeny::Sgd<float>::create(p, {.lr = 0.05, .momentum = 0.9, .weight_decay = 5e-4});
  });
}

TEST_CASE("training parity with PyTorch: MLP, AdamW") {
  run_parity<teeny::AdamW<float>>("mlp_adamw", models::mlp(), {}, [](std::span<const teeny::Parameter<float>> p) {
    return teeny::AdamW<float>::create(p, {.lr = 1e-3, .weight_decay = 1e-2});
  });
}

TEST_CASE("training parity with PyTorch: LeNet with BatchNorm, AdamW and a cosine schedule") {
  // The conv biases feed training-mode BatchNorm, so their true gradient is zero and both sides
  // step on rounding noise (scaled up by Adam); the running means track them, and eval-mode logits
  // read both (bias - running mean), so they inherit a few 1e-3 of that noise.
  const Tolerance tol{.atol = 1e-4,
                      .noisy = {"conv1.bias", "conv2.bias", "bn1.running_mean", "bn2.running_mean"},
                      .noisy_atol = 0.02,
                      .logits_atol = 1e-2};
  run_parity<teeny::AdamW<float>>(
      "lenet_bn_adamw", models::lenet_bn(), tol,
      [](std::span<const teeny::Parameter<float>> p) {
        return teeny::AdamW<float>::create(p, {.lr = 2e-3, .weight_decay = 1e-2});
      },
      [](teeny::AdamW<float>& opt, std::int64_t step) {
        REQUIRE(teeny::CosineAnnealingLR{.t_max = 20}.apply(opt, step));
      });
}
