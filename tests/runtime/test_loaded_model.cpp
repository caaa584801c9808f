// The loaded model end to end on the CPU: the MLP against PyTorch, the execution plan (arena,
// allocation-free forward, plans per batch size) and the errors users meet.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

import teeny;

#include "models.hpp"
#include "support/allocation_counter.hpp"
#include "support/fixtures.hpp"

namespace {
// The MLP of examples/models.hpp (flatten -> fc1 -> relu -> fc2 -> relu -> fc3).
teeny::Graph mlp() {
  auto graph = models::mlp();
  REQUIRE(graph);
  return std::move(*graph);
}

struct MlpFixture {
  teeny::SafetensorsFile file = *teeny::SafetensorsFile::open(fixtures::path("models/mlp.safetensors"));
  teeny::Tensor x = *file.read("in.x");
  teeny::Tensor logits = *file.read("out.logits");
};
}  // namespace

TEST_CASE("MLP 784-512-512-10 loads a PyTorch state_dict and reproduces its logits") {
  MlpFixture fx;
  const teeny::Graph graph = mlp();
  auto model = teeny::load_cpu(graph, {{"batch", 3}});
  REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
  auto report = model->load_weights(fx.file, {.strict = false});
  REQUIRE(report);
  CHECK(report->loaded.size() == 6);
  CHECK(report->missing.empty());
  CHECK(report->skipped_unexpected == std::vector<std::string>{"in.x", "out.logits"});

  const teeny::TensorRef input[] = {teeny::TensorRef::of("x", fx.x)};
  REQUIRE(model->forward(input));
  fixtures::check_close(*model->output("logits"), fx.logits);

  // Two ReLUs fused into their Linears: three GEMM steps, nothing else.
  CHECK(model->stats().steps == 4);  // flatten, fc1+relu, fc2+relu, fc3
  CHECK(model->stats().parameter_count == 669706);
}

TEST_CASE("the loaded model is a teeny::Model: named tensors in, named tensors out") {
  MlpFixture fx;
  auto model = teeny::load_cpu(mlp(), {{"batch", 3}});
  REQUIRE(model);
  REQUIRE(model->load_weights(fx.file, {.strict = false}));
  std::vector<teeny::NamedTensor> inputs;
  inputs.push_back({"x", std::move(fx.x)});
  auto outputs = model->forward(std::move(inputs));
  REQUIRE(outputs);
  REQUIRE(outputs->size() == 1);
  CHECK((*outputs)[0].name == "logits");
  const teeny::Tensor& logits = (*outputs)[0].tensor;
  fixtures::check_close({const_cast<std::byte*>(logits.data()), logits.dtype(), logits.shape(), 0}, fx.logits);
}

TEST_CASE("strict loading reports every missing or unexpected key at once") {
  MlpFixture fx;
  auto model = teeny::load_cpu(mlp(), {{"batch", 1}});
  REQUIRE(model);
  auto strict = model->load_weights(fx.file);  // strict: in.x and out.logits are unexpected
  REQUIRE_FALSE(strict);
  CHECK(strict.error().message().find("in.x") != std::string::npos);
  CHECK(strict.error().message().find("out.logits") != std::string::npos);
}

TEST_CASE("forward allocates nothing once the plan for the input's shape exists") {
  MlpFixture fx;
  auto model = teeny::load_cpu(mlp(), {{"batch", 3}}, {.threads = 2});
  REQUIRE(model);
  REQUIRE(model->load_weights(fx.file, {.strict = false}));
  const teeny::TensorRef input[] = {teeny::TensorRef::of("x", fx.x)};
  REQUIRE(model->forward(input));  // warm: thread-pool scratch grows on first use
  const std::size_t before = test_support::allocation_count();
  for (int i = 0; i < 10; ++i) REQUIRE(model->forward(input));
  const std::size_t after = test_support::allocation_count();
  CHECK(after - before == 0);
  fixtures::check_close(*model->output("logits"), fx.logits);
}

TEST_CASE("the arena reuses memory by liveness") {
  auto model = teeny::load_cpu(mlp(), {{"batch", 64}});
  REQUIRE(model);
  const teeny::PlanStats stats = model->stats();
  // x (64*784 floats), flatten, fc1, fc2 (64*512 each), logits (64*10): at most three live at once.
  const std::size_t floats = 4;
  CHECK(stats.naive_arena_bytes == floats * (64 * 784 * 2 + 64 * 512 * 2 + 64 * 10));
  CHECK(stats.arena_bytes < stats.naive_arena_bytes);
  CHECK(stats.arena_bytes <= floats * (64 * 784 * 2 + 64 * 10) + 3 * 64);
}

TEST_CASE("another batch size gets its own plan; results agree row by row") {
  MlpFixture fx;
  auto model = teeny::load_cpu(mlp(), {{"batch", 3}});
  REQUIRE(model);
  REQUIRE(model->load_weights(fx.file, {.strict = false}));
  // Run the first image alone: batch 1 builds a second plan with the same parameters.
  auto one = teeny::Tensor::zeros(teeny::DType::f32, {1, 1, 28, 28});
  REQUIRE(one);
  std::copy_n(fx.x.data(), one->bytes(), one->data());
  const teeny::TensorRef input[] = {teeny::TensorRef::of("x", *one)};
  REQUIRE(model->forward(input));
  auto row = model->output("logits");
  REQUIRE(row);
  CHECK(row->shape == teeny::ConcreteShape{1, 10});
  auto first = teeny::Tensor::from<float>(std::span<const float>(fx.logits.view<float>()->data, 10), {1, 10});
  fixtures::check_close(*row, *first);
}

TEST_CASE("input errors name the input, the expected and the actual shape or dtype") {
  auto model = teeny::load_cpu(mlp(), {{"batch", 2}});
  REQUIRE(model);
  auto wrong_shape = teeny::Tensor::zeros(teeny::DType::f32, {2, 1, 28, 27});
  const teeny::TensorRef bad[] = {teeny::TensorRef::of("x", *wrong_shape)};
  auto r = model->forward(bad);
  REQUIRE_FALSE(r);
  CHECK(r.error().message() == "input 'x': expected shape [batch, 1, 28, 28], got [2, 1, 28, 27]");

  auto doubles = teeny::Tensor::zeros(teeny::DType::f64, {2, 1, 28, 28});
  const teeny::TensorRef wrong_dtype[] = {teeny::TensorRef::of("x", *doubles)};
  auto d = model->forward(wrong_dtype);
  REQUIRE_FALSE(d);
  CHECK(d.error().message() == "input 'x' is f64 but the model takes f32");

  auto fine = teeny::Tensor::zeros(teeny::DType::f32, {2, 1, 28, 28});
  const teeny::TensorRef unknown[] = {teeny::TensorRef::of("image", *fine)};
  auto u = model->forward(unknown);
  REQUIRE_FALSE(u);
  CHECK(u.error().message() == "the model has no input 'image' (inputs: 'x')");
  CHECK_FALSE(model->output("probabilities"));
}

TEST_CASE("weights round-trip through save_weights") {
  MlpFixture fx;
  auto model = teeny::load_cpu(mlp(), {{"batch", 3}});
  REQUIRE(model);
  REQUIRE(model->load_weights(fx.file, {.strict = false}));
  const std::string path = std::string(TEENY_BUILD_DIR) + "/mlp_roundtrip.safetensors";
  REQUIRE(model->save_weights(path));
  auto saved = teeny::SafetensorsFile::open(path);
  REQUIRE(saved);
  auto reloaded = teeny::load_cpu(mlp(), {{"batch", 3}});
  REQUIRE(reloaded);
  REQUIRE(reloaded->load_weights(*saved));  // strict: exactly the six parameters
  const teeny::TensorRef input[] = {teeny::TensorRef::of("x", fx.x)};
  REQUIRE(reloaded->forward(input));
  fixtures::check_close(*reloaded->output("logits"), fx.logits);
  std::remove(path.c_str());
}

TEST_CASE("profiling times every step by name, allocates nothing per forward and switches off") {
  MlpFixture fx;
  auto model = teeny::load_cpu(mlp(), {{"batch", 3}});
  REQUIRE(model);
  REQUIRE(model->load_weights(fx.file, {.strict = false}));
  CHECK(model->profile().empty());  // off by default
  const teeny::TensorRef input[] = {teeny::TensorRef::of("x", fx.x)};

  model->set_profiling(true);
  REQUIRE(model->forward(input));
  const std::size_t allocations = test_support::allocation_count();
  REQUIRE(model->forward(input));
  CHECK(test_support::allocation_count() == allocations);
  CHECK(model->profiled_forwards() == 2);
  const auto steps = model->profile();
  std::vector<std::string> names;
  for (const auto& s : steps) names.push_back(s.node + ":" + s.op);
  // The input runs nothing and is left out; the ReLUs are fused into fc1 and fc2.
  CHECK(names == std::vector<std::string>{"flatten_0:reshape", "fc1:linear", "fc2:linear", "fc3:linear"});
  for (const auto& s : steps) CHECK(s.nanoseconds > 0);

  model->set_profiling(false);
  REQUIRE(model->forward(input));
  CHECK(model->profile().empty());
  CHECK(model->profiled_forwards() == 0);
}
