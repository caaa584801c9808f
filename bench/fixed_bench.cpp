// The typed MLP (teeny.fixed) against the run-time path (load_cpu) on the same weights and input,
// per forward, one thread, at batch 1 and 64:
//
//   bench-fixed --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
//
// names `typed/mlp/batch:B` and `runtime/mlp/batch:B`. Each reports the per-forward median
// (`p50_us`) besides Google Benchmark's mean; both models are checked to give the same logits first
// (`max_diff`: the largest |typed - run-time| over the batch, expected 0).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

import teeny;

#include "fixed_models.hpp"
#include "models.hpp"

namespace {
namespace tf = teeny::fixed;

template <std::int64_t B>
using typed_mlp = tf::Model<decltype(fixed_models::mlp(tf::input<"x", float, B, 1, 28, 28>()))>;

std::string fixture() { return std::string(TEENY_FIXTURES_DIR) + "/models/mlp.safetensors"; }

// Both models for batch B, loaded from the fixture, and a random input.
template <std::int64_t B>
struct Pair {
  std::unique_ptr<typed_mlp<B>> typed = std::make_unique<typed_mlp<B>>();
  teeny::Buffer image;  // the weights, 64-byte aligned
  std::unique_ptr<teeny::CpuModel> runtime;
  std::vector<float> x = std::vector<float>(typed_mlp<B>::input_size);
  double max_diff = -1;
  std::string error;

  Pair() {
    auto file = teeny::SafetensorsFile::open(fixture());
    auto buffer = teeny::Buffer::allocate(typed_mlp<B>::param_bytes);
    if (!file || !buffer) {
      error = file ? buffer.error().to_string() : file.error().to_string();
      return;
    }
    image = std::move(*buffer);
    std::span<std::byte> weights(image.data(), image.size());
    auto read = tf::read_weights<typename typed_mlp<B>::network>(*file, weights, {.strict = false});
    if (!read) {
      error = read.error().to_string();
      return;
    }
    if (auto loaded = typed->load(weights); !loaded) {
      error = loaded.error().to_string();
      return;
    }
    auto graph = models::mlp();
    auto model = teeny::load_cpu(*graph, {{"batch", B}});
    if (!model || !model->load_weights(*file, {.strict = false})) {
      error = model ? "loading the run-time model's weights" : model.error().to_string();
      return;
    }
    runtime = std::make_unique<teeny::CpuModel>(std::move(*model));
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
    for (float& v : x) v = pixel(rng);
    auto a = typed->forward(x);
    const teeny::TensorRef in[] = {teeny::TensorRef::of<float>("x", x, {B, 1, 28, 28})};
    if (!a || !runtime->forward(in)) {
      error = "forward failed";
      return;
    }
    auto b = runtime->output<float>("logits");
    max_diff = 0;
    for (std::int64_t i = 0; i < a->numel(); ++i) {
      max_diff = std::max(max_diff, std::fabs(static_cast<double>(a->data[i]) - b->data[i]));
    }
  }
};

template <std::int64_t B>
Pair<B>& pair() {
  static Pair<B> p;
  return p;
}

// Times `forward` on the pair's models, or skips when they did not load.
template <class P, class F>
void timed(benchmark::State& state, const P& p, F&& forward) {
  if (!p.error.empty()) {
    state.SkipWithError(p.error.c_str());
    return;
  }
  std::vector<double> samples;
  samples.reserve(1 << 16);
  bool ok = true;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    ok = forward() && ok;
    const auto stop = std::chrono::steady_clock::now();
    if (samples.size() < samples.capacity())
      samples.push_back(std::chrono::duration<double, std::micro>(stop - start).count());
  }
  if (!ok) state.SkipWithError("forward failed");
  if (!samples.empty()) {
    std::sort(samples.begin(), samples.end());
    state.counters["p50_us"] = samples[samples.size() / 2];
  }
  state.counters["max_diff"] = p.max_diff;
}

template <std::int64_t B>
void typed(benchmark::State& state) {
  auto& p = pair<B>();
  timed(state, p, [&] { return static_cast<bool>(p.typed->forward(p.x)); });
}

template <std::int64_t B>
void runtime(benchmark::State& state) {
  auto& p = pair<B>();
  const teeny::TensorRef in[] = {teeny::TensorRef::of<float>("x", p.x, {B, 1, 28, 28})};
  timed(state, p, [&] { return static_cast<bool>(p.runtime->forward(in)); });
}

BENCHMARK(typed<1>)->Name("typed/mlp/batch:1")->UseRealTime();
BENCHMARK(runtime<1>)->Name("runtime/mlp/batch:1")->UseRealTime();
BENCHMARK(typed<64>)->Name("typed/mlp/batch:64")->UseRealTime();
BENCHMARK(runtime<64>)->Name("runtime/mlp/batch:64")->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
