// teeny::cpu::sgemm against OpenBLAS's cblas_sgemm on the same data, reported as GFLOP/s.
//
//   bench-gemm --benchmark_min_time=2
//
// Square 1024^3 and 2048^3 products (A x B and A x B^T) at 1 and 2 threads, and the MLP layer
// shapes x[M, 784] x W[512, 784]^T for M = 1 and 64, where teeny uses W pre-packed once (as a model
// does at load time) and OpenBLAS reads W as is. `fma_peak` measures the core's FMA limit in the
// same run (12 independent chains of fused multiply-adds in registers, in the instruction set
// teeny's GEMM runs with), so that GEMM figures can be read as a fraction of it; `read_peak` the
// rate one core reads a buffer of a given size, pass after pass (the floor of a forward that
// streams that many bytes of weights).
#include <benchmark/benchmark.h>
#include <cblas.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "cpu/kernels/gemm.hpp"

namespace {

std::vector<float> random_matrix(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

teeny::cpu::ThreadPool& pool_of(std::size_t threads) {
  static std::unique_ptr<teeny::cpu::ThreadPool> pools[9];
  if (!pools[threads]) pools[threads] = std::make_unique<teeny::cpu::ThreadPool>(threads);
  return *pools[threads];
}

void set_flops(benchmark::State& state, std::int64_t m, std::int64_t n, std::int64_t k) {
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// Args: size, threads, trans_b.
void BM_teeny_square(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto threads = static_cast<std::size_t>(state.range(1));
  const bool trans_b = state.range(2) != 0;
  const auto a = random_matrix(n * n, 1), b = random_matrix(n * n, 2);
  std::vector<float> c(n * n);
  auto& pool = pool_of(threads);
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): Google Benchmark's loop
    teeny::cpu::sgemm({n, n, n}, a.data(), n, false, b.data(), n, trans_b, c.data(), n, {}, pool);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, static_cast<std::int64_t>(n), static_cast<std::int64_t>(n), static_cast<std::int64_t>(n));
  state.SetLabel(teeny::cpu::isa_name(teeny::cpu::active_isa()));
}

void BM_openblas_square(benchmark::State& state) {
  const auto n = static_cast<int>(state.range(0));
  const auto nn = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
  openblas_set_num_threads(static_cast<int>(state.range(1)));
  const CBLAS_TRANSPOSE tb = state.range(2) != 0 ? CblasTrans : CblasNoTrans;
  const auto a = random_matrix(nn, 1), b = random_matrix(nn, 2);
  std::vector<float> c(nn);
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): Google Benchmark's loop
    cblas_sgemm(CblasRowMajor, CblasNoTrans, tb, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, static_cast<std::int64_t>(n), static_cast<std::int64_t>(n), static_cast<std::int64_t>(n));
}

// Args: M, threads. y[M, 512] = x[M, 784] W[512, 784]^T + bias, then ReLU, W pre-packed.
void BM_teeny_linear(benchmark::State& state) {
  constexpr std::size_t n = 512, k = 784;
  const auto m = static_cast<std::size_t>(state.range(0));
  auto& pool = pool_of(static_cast<std::size_t>(state.range(1)));
  const auto x = random_matrix(m * k, 3), w = random_matrix(n * k, 4), bias = random_matrix(n, 5);
  const teeny::cpu::PackedMatrix packed = teeny::cpu::pack_b(k, n, w.data(), k, true);
  std::vector<float> y(m * n);
  teeny::cpu::Epilogue epi;
  epi.bias = bias.data();
  epi.activation = teeny::cpu::Activation::relu;
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): Google Benchmark's loop
    teeny::cpu::sgemm({m, n, k}, x.data(), k, false, packed, y.data(), n, epi, pool);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, static_cast<std::int64_t>(m), static_cast<std::int64_t>(n), static_cast<std::int64_t>(k));
}

// The same product without the epilogue (OpenBLAS has none).
void BM_openblas_linear(benchmark::State& state) {
  constexpr int n = 512, k = 784;
  const auto m = static_cast<int>(state.range(0));
  openblas_set_num_threads(static_cast<int>(state.range(1)));
  const auto x = random_matrix(static_cast<std::size_t>(m) * k, 3), w = random_matrix(std::size_t{n} * k, 4);
  std::vector<float> y(static_cast<std::size_t>(m) * n);
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): Google Benchmark's loop
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x.data(), k, w.data(), k, 0.0f, y.data(), n);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, m, n, k);
}

// The FMA limit: kChains independent accumulators (more than FMA latency x units, so the loop is
// bound by throughput), each updated kSteps times per call. The factors come from the caller at
// run time, so the compiler cannot fold a chain that would sit at a fixed point.
constexpr int kChains = 12;
constexpr int kSteps = 1 << 12;

#if defined(__x86_64__)
__attribute__((target("avx512f"))) float fma_chains_avx512(float a_value, float b_value) {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(static_cast<float>(c));
  const __m512 a = _mm512_set1_ps(a_value), b = _mm512_set1_ps(b_value);
  for (int s = 0; s < kSteps; ++s) {
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
  }
  float sum = 0;
  for (int c = 0; c < kChains; ++c) {  // every chain stored, so none can be folded into another
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, acc[c]);
    benchmark::DoNotOptimize(lanes);
    sum += lanes[c % 16];
  }
  return sum;
}

__attribute__((target("avx2,fma"))) float fma_chains_avx2(float a_value, float b_value) {
  __m256 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(static_cast<float>(c));
  const __m256 a = _mm256_set1_ps(a_value), b = _mm256_set1_ps(b_value);
  for (int s = 0; s < kSteps; ++s) {
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
  }
  float sum = 0;
  for (int c = 0; c < kChains; ++c) {  // every chain stored, so none can be folded into another
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, acc[c]);
    benchmark::DoNotOptimize(lanes);
    sum += lanes[c % 8];
  }
  return sum;
}
#endif

// One thread at the FMA limit of the instruction set teeny's GEMM runs with.
void BM_fma_peak(benchmark::State& state) {
  const teeny::cpu::Isa isa = teeny::cpu::active_isa();
  float (*chains)(float, float) = nullptr;
  int lanes = 0;
#if defined(__x86_64__)
  if (isa == teeny::cpu::Isa::avx512) {
    chains = fma_chains_avx512;
    lanes = 16;
  } else if (isa == teeny::cpu::Isa::avx2) {
    chains = fma_chains_avx2;
    lanes = 8;
  }
#endif
  if (chains == nullptr) {
    state.SkipWithError("no vector FMA in the instruction set teeny runs with");
    return;
  }
  float a = 0.999f, b = 1e-3f;
  benchmark::DoNotOptimize(a);
  benchmark::DoNotOptimize(b);
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): Google Benchmark's loop
    benchmark::DoNotOptimize(chains(a, b));
  }
  const double flops = 2.0 * kChains * kSteps * lanes;
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(teeny::cpu::isa_name(isa));
}

// The read limit: one thread summing a buffer of `floats` floats with kReadChains vector
// accumulators, pass after pass, each pass in the direction opposite to the last (as a batch-1
// Linear sweeps its weights, see cpu::ColumnOrder), so the floor of a forward that must read that
// many bytes of weights from wherever they stay between forwards.
constexpr std::size_t kReadChains = 8;

#if defined(__x86_64__)
__attribute__((target("avx512f"))) float read_avx512(const float* p, std::size_t floats, bool backward) {
  __m512 acc[kReadChains];
  for (__m512& a : acc) a = _mm512_setzero_ps();
  constexpr std::size_t kStep = std::size_t{16} * kReadChains;
  for (std::size_t i = 0; i + kStep <= floats; i += kStep) {
    const float* q = backward ? p + (floats - kStep - i) : p + i;
    for (std::size_t c = 0; c < kReadChains; ++c) acc[c] = _mm512_add_ps(acc[c], _mm512_load_ps(q + 16 * c));
  }
  for (std::size_t c = 1; c < kReadChains; ++c) acc[0] = _mm512_add_ps(acc[0], acc[c]);
  return _mm512_reduce_add_ps(acc[0]);
}

__attribute__((target("avx2"))) float read_avx2(const float* p, std::size_t floats, bool backward) {
  __m256 acc[kReadChains];
  for (__m256& a : acc) a = _mm256_setzero_ps();
  constexpr std::size_t kStep = std::size_t{8} * kReadChains;
  for (std::size_t i = 0; i + kStep <= floats; i += kStep) {
    const float* q = backward ? p + (floats - kStep - i) : p + i;
    for (std::size_t c = 0; c < kReadChains; ++c) acc[c] = _mm256_add_ps(acc[c], _mm256_load_ps(q + 8 * c));
  }
  for (std::size_t c = 1; c < kReadChains; ++c) acc[0] = _mm256_add_ps(acc[0], acc[c]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc[0]);
  float sum = 0;
  for (const float x : lanes) sum += x;
  return sum;
}
#endif

void BM_read_peak(benchmark::State& state) {
  const teeny::cpu::Isa isa = teeny::cpu::active_isa();
  float (*read)(const float*, std::size_t, bool) = nullptr;
#if defined(__x86_64__)
  if (isa == teeny::cpu::Isa::avx512) read = read_avx512;
  if (isa == teeny::cpu::Isa::avx2) read = read_avx2;
#endif
  if (read == nullptr) {
    state.SkipWithError("no vector loads in the instruction set teeny runs with");
    return;
  }
  const auto floats = static_cast<std::size_t>(state.range(0)) / sizeof(float) / 128 * 128;
  std::unique_ptr<float[], void (*)(float*)> buffer(static_cast<float*>(std::aligned_alloc(64, floats * sizeof(float))),
                                                    [](float* p) { std::free(p); });
  for (std::size_t i = 0; i < floats; ++i) buffer[i] = 1.0f;
  bool backward = false;
  for (auto _ : state) {  // NOLINT(clang-analyzer-deadcode.DeadStores): Google Benchmark's loop
    benchmark::DoNotOptimize(read(buffer.get(), floats, backward));
    backward = !backward;
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(floats * sizeof(float)) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(teeny::cpu::isa_name(isa));
}

void square_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"n", "threads", "trans_b"});
  for (const int n : {1024, 2048}) {
    for (const int threads : {1, 2}) {
      for (const int trans_b : {0, 1}) b->Args({n, threads, trans_b});
    }
  }
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}

void linear_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"m", "threads"});
  for (const int m : {1, 64}) {
    for (const int threads : {1, 2}) b->Args({m, threads});
  }
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
}

BENCHMARK(BM_fma_peak)->UseRealTime();
// 512 KiB and 1 MiB (an L2's share), the MLP 784-512-512-10's 2.68 MB of weights, 8 MiB and
// 64 MiB (past an L3).
BENCHMARK(BM_read_peak)
    ->ArgName("bytes")
    ->Arg(512 << 10)
    ->Arg(1 << 20)
    ->Arg(2678824)
    ->Arg(8 << 20)
    ->Arg(64 << 20)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_teeny_square)->Apply(square_args);
BENCHMARK(BM_openblas_square)->Apply(square_args);
BENCHMARK(BM_teeny_linear)->Apply(linear_args);
BENCHMARK(BM_openblas_linear)->Apply(linear_args);

}  // namespace

BENCHMARK_MAIN();
