// teeny's latency per forward for whole models on the CPU, weights loaded:
//
//   model      input                 batches   graph
//   mlp        [batch, 1, 28, 28]    1, 64     examples/models.hpp (784-512-512-10)
//   lenet      [batch, 1, 28, 28]    1, 64     examples/models.hpp
//   resnet18   [batch, 3, 224, 224]  1, 8      models::resnet18() (examples/models.hpp)
//
// each at 1 and 2 threads, named `teeny/<model>/batch:<B>/threads:<T>`. The weights are the
// PyTorch fixtures of tests/fixtures/models (resnet18's are stored as BF16 and load as f32).
//
//   bench-models --benchmark_filter='teeny/mlp/' --benchmark_format=json
//
// Besides Google Benchmark's mean time per iteration, every benchmark reports the per-forward
// latency's median (`p50_us`) and minimum (`min_us`) over its timed iterations, and
// `max_err_vs_pytorch`: the largest |teeny - PyTorch| over the fixture's logits (the fixture input
// run through a second model loaded from the same graph), so the graph timed is checked to be the
// PyTorch model. A model the CPU backend cannot lower or load reports "skipped: <the error>".
// bench/run.sh runs these against ONNX Runtime and PyTorch, interleaved.
//
// TEENY_BENCH_PROFILE=N (N > 0) also runs N profiled forwards after each benchmark and prints
// every step's share of the time to stderr (LoadedModel::set_profiling / profile()).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

import teeny;

#include "models.hpp"

namespace {

struct ModelSpec {
  const char* name;
  teeny::Result<teeny::Graph> (*graph)(std::int64_t image);
  std::int64_t channels, image, check_image;  // input [batch, channels, image, image]; the fixture's size
};

teeny::Result<teeny::Graph> mlp_graph(std::int64_t) { return models::mlp(); }
teeny::Result<teeny::Graph> lenet_graph(std::int64_t) { return models::lenet(); }

const ModelSpec specs[] = {
    {"mlp", mlp_graph, 1, 28, 28},
    {"lenet", lenet_graph, 1, 28, 28},
    {"resnet18", models::resnet18, 3, 224, 64},
};

std::string fixture_path(const ModelSpec& spec) {
  return std::string(TEENY_FIXTURES_DIR) + "/models/" + spec.name + ".safetensors";
}

// One loaded model, kept while Google Benchmark calls the same benchmark again (it does, to size
// the iteration count) and dropped when another starts, so one thread pool exists at a time.
struct Loaded {
  std::string key;
  std::unique_ptr<teeny::CpuModel> model;
  teeny::Tensor input;
  double max_err = -1;  // vs the fixture's PyTorch logits
  std::string error;    // why it cannot run
};

template <class T>
bool take(teeny::Result<T>& r, std::string& error, const char* what) {
  if (r) return true;
  error = std::string(what) + ": " + r.error().to_string();
  return false;
}

// Loads the model for `threads` with the fixture weights and runs the fixture's input through a
// model of the fixture's size, returning max |teeny - PyTorch|; an empty error when all went well.
double check_against_pytorch(const ModelSpec& spec, const teeny::SafetensorsFile& file, std::string& error) {
  auto graph = spec.graph(spec.check_image);
  if (!take(graph, error, "building the graph")) return -1;
  auto x = file.read("in.x");
  auto expected = file.read("out.logits");
  if (!take(x, error, "reading in.x") || !take(expected, error, "reading out.logits")) return -1;
  auto model = teeny::load_cpu(*graph, {{"batch", x->shape()[0]}});
  if (!take(model, error, "loading")) return -1;
  auto loaded = model->load_weights(file, {.strict = false});
  if (!take(loaded, error, "loading weights")) return -1;
  const teeny::TensorRef in[] = {teeny::TensorRef::of("x", *x)};
  if (auto ran = model->forward(in); !ran) {
    error = "forward: " + ran.error().to_string();
    return -1;
  }
  auto got = model->output<float>("logits");
  if (!take(got, error, "output")) return -1;
  auto want = std::as_const(*expected).view<float>();
  if (!take(want, error, "reading out.logits as f32")) return -1;
  if (got->shape != want->shape) {
    error = "logits are " + teeny::to_string(got->shape) + ", PyTorch's " + teeny::to_string(want->shape);
    return -1;
  }
  double worst = 0;
  for (std::size_t i = 0; i < want->span().size(); ++i) {
    worst = std::max(worst, std::fabs(static_cast<double>(got->span()[i]) - want->span()[i]));
  }
  return worst;
}

Loaded& loaded(const ModelSpec& spec, std::int64_t batch, std::int64_t threads) {
  static Loaded current;
  const std::string key = std::string(spec.name) + "/" + std::to_string(batch) + "/" + std::to_string(threads);
  if (current.key == key) return current;
  current = Loaded{};
  current.key = key;
  auto file = teeny::SafetensorsFile::open(fixture_path(spec));
  if (!take(file, current.error, "opening the weights")) return current;
  current.max_err = check_against_pytorch(spec, *file, current.error);
  if (!current.error.empty()) return current;

  auto graph = spec.graph(spec.image);
  if (!take(graph, current.error, "building the graph")) return current;
  auto model = teeny::load_cpu(*graph, {{"batch", batch}}, {.threads = static_cast<std::size_t>(threads)});
  if (!take(model, current.error, "loading")) return current;
  auto report = model->load_weights(*file, {.strict = false});
  if (!take(report, current.error, "loading weights")) return current;
  if (!report->missing.empty()) {
    current.error = "weights missing from " + fixture_path(spec) + ": " + report->missing.front() + ", ...";
    return current;
  }
  current.model = std::make_unique<teeny::CpuModel>(std::move(*model));

  auto input = teeny::Tensor::zeros(teeny::DType::f32, {batch, spec.channels, spec.image, spec.image});
  if (!take(input, current.error, "allocating the input")) return current;
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
  for (float& v : input->view<float>()->span()) v = pixel(rng);
  current.input = std::move(*input);

  // Warm-up: the first forwards grow the thread pool's scratch and bring the weights into cache.
  const teeny::TensorRef in[] = {teeny::TensorRef::of("x", current.input)};
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  for (int i = 0; i < 3 || std::chrono::steady_clock::now() < until; ++i) {
    if (auto ran = current.model->forward(in); !ran) {
      current.error = "forward: " + ran.error().to_string();
      current.model.reset();
      return current;
    }
  }
  return current;
}

// Runs `forwards` profiled forwards and prints each step's mean time and share, in plan order.
void print_profile(teeny::CpuModel& model, std::span<const teeny::TensorRef> in, int forwards, const std::string& key) {
  model.set_profiling(true);
  for (int i = 0; i < forwards; ++i) (void)model.forward(in);
  const auto steps = model.profile();
  double total = 0;
  for (const auto& s : steps) total += static_cast<double>(s.nanoseconds);
  std::fprintf(stderr, "profile of %s: %.1f us per forward over %d forwards\n", key.c_str(), total / 1e3 / forwards,
               forwards);
  for (const auto& s : steps) {
    const double us = static_cast<double>(s.nanoseconds) / 1e3 / forwards;
    std::fprintf(stderr, "  %9.1f us %5.1f%%  %-24s %s\n", us, 100.0 * static_cast<double>(s.nanoseconds) / total,
                 s.op.c_str(), s.node.c_str());
  }
  model.set_profiling(false);
}

void run_model(benchmark::State& state, const ModelSpec& spec, std::int64_t batch, std::int64_t threads) {
  Loaded& m = loaded(spec, batch, threads);
  if (!m.model) {
    const std::string message = "skipped: " + m.error;
    state.SkipWithError(message.c_str());
    for (auto _ : state) {
    }
    return;
  }
  const teeny::TensorRef in[] = {teeny::TensorRef::of("x", m.input)};
  std::vector<double> samples;
  samples.reserve(1 << 16);
  bool ok = true;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    ok = static_cast<bool>(m.model->forward(in)) && ok;
    const auto stop = std::chrono::steady_clock::now();
    if (samples.size() < samples.capacity())
      samples.push_back(std::chrono::duration<double, std::micro>(stop - start).count());
  }
  if (!ok) state.SkipWithError("forward failed");
  if (const char* env = std::getenv("TEENY_BENCH_PROFILE"); env != nullptr && std::atoi(env) > 0) {
    print_profile(*m.model, in, std::atoi(env), m.key);
  }
  if (!samples.empty()) {
    std::sort(samples.begin(), samples.end());
    state.counters["p50_us"] = samples[samples.size() / 2];
    state.counters["min_us"] = samples.front();
  }
  state.counters["max_err_vs_pytorch"] = m.max_err;
  state.counters["batch"] = static_cast<double>(batch);
  state.counters["threads"] = static_cast<double>(threads);
  state.counters["items_per_second"] =
      benchmark::Counter(static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

int main(int argc, char** argv) {
  struct Config {
    const ModelSpec* spec;
    std::int64_t batch;
  };
  const Config configs[] = {{&specs[0], 1},  {&specs[0], 64}, {&specs[1], 1},
                            {&specs[1], 64}, {&specs[2], 1},  {&specs[2], 8}};
  for (const Config& c : configs) {
    for (std::int64_t threads : {1, 2}) {
      const std::string name = std::string("teeny/") + c.spec->name + "/batch:" + std::to_string(c.batch) +
                               "/threads:" + std::to_string(threads);
      benchmark::RegisterBenchmark(
          name.c_str(), [c, threads](benchmark::State& state) { run_model(state, *c.spec, c.batch, threads); })
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
