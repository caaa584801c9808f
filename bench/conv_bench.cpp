// ResNet-18's convolutions one at a time (batch 1), and LeNet's at batch 64, as GFLOP/s: where the
// models' time goes, per layer shape, thread count and convolution algorithm; and ResNet-18's
// stem's 3x3 stride-2 max pool.
//
//   bench-conv                                        # every layer, automatic, 1 and 2 threads
//   bench-conv --benchmark_filter='layer4.*/auto'     # one layer
//   TEENY_BENCH_ALGORITHMS=1 bench-conv               # also each algorithm forced (Winograd where
//                                                     # it fits: 3x3 stride 1)
//   TEENY_BENCH_COLD=1 bench-conv                     # caches flushed before every forward
//
// Each benchmark loads a one-convolution model (conv + ReLU, no bias, as in ResNet-18 after its
// BatchNorm is folded) through the CPU backend, so what is timed is what a model runs: the conv
// step's column making, GEMM and epilogue (`conv1.pooled.b8`: with the stem's max pool folded in,
// as the model runs it). The weights stay zero: the time does not depend on them.
// Cold runs write 64 MiB between forwards (untimed), so that weights and input come from memory
// as they do inside a whole ResNet-18, whose 46 MB of weights do not stay in cache.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

import teeny;

namespace {

struct ConvShape {
  const char* name;
  std::int64_t in, out, image, kernel, stride, padding;
  std::int64_t batch = 1;
  bool pooled = false;  // followed by ResNet's stem max pool (3x3, stride 2, padding 1), folded into it
  double flops() const {
    const std::int64_t o = (image + 2 * padding - kernel) / stride + 1;
    return 2.0 * static_cast<double>(batch * out * o * o) * static_cast<double>(in * kernel * kernel);
  }
};

// ResNet-18's distinct convolutions at 224x224 (per forward: conv1 once, layer1 x4, layerN.0.conv1
// once, layerN 3x3 x3 for N > 1, each downsample once).
const ConvShape shapes[] = {
    {"conv1", 3, 64, 224, 7, 2, 3},
    {"layer1", 64, 64, 56, 3, 1, 1},
    {"layer2.0.conv1", 64, 128, 56, 3, 2, 1},
    {"layer2", 128, 128, 28, 3, 1, 1},
    {"layer2.ds", 64, 128, 56, 1, 2, 0},
    {"layer3.0.conv1", 128, 256, 28, 3, 2, 1},
    {"layer3", 256, 256, 14, 3, 1, 1},
    {"layer3.ds", 128, 256, 28, 1, 2, 0},
    {"layer4.0.conv1", 256, 512, 14, 3, 2, 1},
    {"layer4", 512, 512, 7, 3, 1, 1},
    {"layer4.ds", 256, 512, 14, 1, 2, 0},
    // The stem and the deepest at batch 8, where the methods' costs and the threads' split differ
    // from batch 1's
    {"conv1.b8", 3, 64, 224, 7, 2, 3, 8},
    {"conv1.pooled.b8", 3, 64, 224, 7, 2, 3, 8, true},
    {"layer3.b8", 256, 256, 14, 3, 1, 1, 8},
    {"layer4.0.conv1.b8", 256, 512, 14, 3, 2, 1, 8},
    {"layer4.b8", 512, 512, 7, 3, 1, 1, 8},
    // LeNet's (tools/make_fixtures.py) at batch 64
    {"lenet.conv1", 1, 8, 28, 5, 1, 2, 64},
    {"lenet.conv2", 8, 16, 14, 5, 1, 0, 64},
};

// Evicts the caches: writes a buffer larger than the last-level cache.
void flush_caches() {
  static std::vector<char> buffer(std::size_t{64} << 20);
  for (std::size_t i = 0; i < buffer.size(); i += 64) buffer[i] = static_cast<char>(buffer[i] + 1);
  benchmark::DoNotOptimize(buffer.data());
}

void run_conv(benchmark::State& state, const ConvShape& s, std::size_t threads, teeny::ConvAlgorithm algorithm) {
  teeny::GraphBuilder b;
  auto x = b.input("x", teeny::DType::f32, {s.batch, s.in, s.image, s.image});
  auto y = b.relu(b.conv2d(x, s.out, {s.kernel, s.kernel},
                           {.stride = {s.stride, s.stride}, .padding = {s.padding, s.padding}, .bias = false})
                      .named("conv"));
  b.output("y", s.pooled ? b.max_pool2d(y, 3, {.stride = teeny::Size2{2, 2}, .padding = {1, 1}}) : y);
  auto graph = std::move(b).build();
  auto model = graph ? teeny::load_cpu(*graph, {}, {.threads = threads, .conv = algorithm})
                     : teeny::Result<teeny::CpuModel>(graph.error());
  auto input = teeny::Tensor::zeros(teeny::DType::f32, {s.batch, s.in, s.image, s.image});
  if (!model || !input) {
    state.SkipWithError(model ? "cannot allocate the input" : model.error().to_string().c_str());
    for (auto _ : state) {
    }
    return;
  }
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  for (float& v : input->view<float>()->span()) v = value(rng);
  const teeny::TensorRef in[] = {teeny::TensorRef::of("x", *input)};
  bool ok = static_cast<bool>(model->forward(in));  // warm: scratch grown
  const char* cold_env = std::getenv("TEENY_BENCH_COLD");
  const bool cold = cold_env != nullptr && std::atoi(cold_env) > 0;
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      flush_caches();
      state.ResumeTiming();
    }
    ok = static_cast<bool>(model->forward(in)) && ok;
  }
  if (!ok) state.SkipWithError("forward failed");
  state.counters["GFLOP/s"] = benchmark::Counter(s.flops() / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

// The stem's max pool: [1, 64, 112, 112] -> [1, 64, 56, 56], 3x3 windows at stride 2, padded by 1.
void run_stem_pool(benchmark::State& state, std::size_t threads) {
  teeny::GraphBuilder b;
  auto x = b.input("x", teeny::DType::f32, {1, 64, 112, 112});
  b.output("y", b.max_pool2d(x, 3, {.stride = teeny::Size2{2, 2}, .padding = {1, 1}}));
  auto graph = std::move(b).build();
  auto model =
      graph ? teeny::load_cpu(*graph, {}, {.threads = threads}) : teeny::Result<teeny::CpuModel>(graph.error());
  auto input = teeny::Tensor::zeros(teeny::DType::f32, {1, 64, 112, 112});
  if (!model || !input) {
    state.SkipWithError(model ? "cannot allocate the input" : model.error().to_string().c_str());
    for (auto _ : state) {
    }
    return;
  }
  const teeny::TensorRef in[] = {teeny::TensorRef::of("x", *input)};
  bool ok = static_cast<bool>(model->forward(in));
  for (auto _ : state) ok = static_cast<bool>(model->forward(in)) && ok;
  if (!ok) state.SkipWithError("forward failed");
}

}  // namespace

int main(int argc, char** argv) {
  struct Algorithm {
    const char* name;
    teeny::ConvAlgorithm value;
  };
  std::vector<Algorithm> algorithms{{"auto", teeny::ConvAlgorithm::automatic}};
  if (const char* all = std::getenv("TEENY_BENCH_ALGORITHMS"); all != nullptr && std::atoi(all) > 0) {
    algorithms.insert(algorithms.end(), {{"implicit", teeny::ConvAlgorithm::implicit},
                                         {"im2col", teeny::ConvAlgorithm::im2col},
                                         {"transposed", teeny::ConvAlgorithm::transposed},
                                         {"winograd", teeny::ConvAlgorithm::winograd},
                                         {"winograd_2x2", teeny::ConvAlgorithm::winograd_2x2},
                                         {"pixel_rows", teeny::ConvAlgorithm::pixel_rows}});
  }
  for (const ConvShape& s : shapes) {
    for (std::size_t threads : {1, 2}) {
      for (const Algorithm& a : algorithms) {
        const bool winograd_fits = s.kernel == 3 && s.stride == 1;
        const bool winograd =
            a.value == teeny::ConvAlgorithm::winograd || a.value == teeny::ConvAlgorithm::winograd_2x2;
        if (winograd && !winograd_fits) continue;  // it would run as auto
        const std::string name = std::string("conv/") + s.name + "/threads:" + std::to_string(threads) + "/" + a.name;
        benchmark::RegisterBenchmark(
            name.c_str(), [&s, threads, a](benchmark::State& state) { run_conv(state, s, threads, a.value); })
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
      }
    }
  }
  for (std::size_t threads : {1, 2}) {
    const std::string name = "pool/stem/threads:" + std::to_string(threads);
    benchmark::RegisterBenchmark(name.c_str(), [threads](benchmark::State& state) { run_stem_pool(state, threads); })
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
