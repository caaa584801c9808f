// The GPU benchmarks (issue 11), one program that tools/gpu-check runs on a GPU machine:
//
//   gemm     TFLOP/s of a Linear's GEMM (y = x W^T, M = N = K = 4096, and 1024) per dtype: teeny's
//            launch as a model runs it (cuBLASLt where it loaded, else teeny's kernel), teeny's own
//            kernel (CudaOptions::cublas off), and cuBLAS called directly (cublasGemmEx), all on
//            device buffers, timed with CUDA events over many launches after a warm-up.
//   models   the MLP at batch 64 and ResNet-18 (224 x 224) at batch 1 and 64, through load_cuda
//            with the fixture weights: per forward (input uploaded from pageable host memory,
//            kernels, logits copied back), eager and by CUDA graph replay; median latency and
//            images/s.
//   training (training builds) one AdamW training step of the MLP and of LeNet with batch norm at
//            batch 64, f32, through teeny::cuda::TrainingStep (inputs and labels uploaded, the loss
//            read back): op by op, and replayed as one CUDA graph; median ms and images/s.
//
//   bench-cuda [--json FILE] [--seconds S]
//
// Prints a table; with --json also writes one JSON object per line and measurement. Without a GPU
// it prints why it has nothing to measure and exits 0.
#include <cublas_v2.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

import teeny;

#include "models.hpp"

namespace {

double seconds_per_measure = 1.0;
std::ofstream json;

void record(const std::string& line) {
  if (json.is_open()) json << line << '\n';
}

template <class T>
std::vector<T> random_values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0F, 1.0F);
  std::vector<T> out(n);
  for (T& v : out) v = T(dist(rng));
  return out;
}

template <class T>
teeny::cuda::DeviceBuffer device_copy(const std::vector<T>& host) {
  auto buffer = teeny::cuda::DeviceBuffer::allocate(host.size() * sizeof(T));
  if (!buffer || !buffer->upload(std::as_bytes(std::span(host)))) {
    std::fprintf(stderr, "device allocation failed\n");
    std::exit(1);
  }
  return std::move(*buffer);
}

// Milliseconds per call of `run` (queued on `stream`), from CUDA events around a batch of calls
// sized to fill the measuring time, after a warm-up batch.
template <class Run>
double ms_per_call(const teeny::cuda::Stream& stream, Run&& run) {
  auto start = teeny::cuda::Event::create();
  auto end = teeny::cuda::Event::create();
  if (!start || !end) return -1;
  int calls = 3;
  for (;;) {
    (void)start->record(stream);
    for (int i = 0; i < calls; ++i) run();
    (void)end->record(stream);
    auto ms = teeny::cuda::Event::elapsed_ms(*start, *end);
    if (!ms) return -1;
    if (*ms >= 1000 * seconds_per_measure || calls >= (1 << 20)) return *ms / calls;
    calls = *ms <= 0 ? calls * 16 : std::max(calls * 2, static_cast<int>(calls * 1000 * seconds_per_measure / *ms));
  }
}

cudaDataType_t cuda_type(teeny::DType dtype) {
  switch (dtype) {
    case teeny::DType::f64: return CUDA_R_64F;
    case teeny::DType::f16: return CUDA_R_16F;
    case teeny::DType::bf16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

// y = x W^T through cublasGemmEx: cuBLAS is column-major, so it computes y^T (N x M) = W x^T.
double cublas_ms(cublasHandle_t handle, const teeny::cuda::Stream& stream, teeny::DType dtype, bool tf32,
                 std::int64_t m, std::int64_t n, std::int64_t k, const void* x, const void* w, void* y) {
  if (cublasSetStream(handle, static_cast<cudaStream_t>(stream.handle())) != CUBLAS_STATUS_SUCCESS) return -1;
  const cudaDataType_t type = cuda_type(dtype);
  const bool f64 = dtype == teeny::DType::f64;
  const cublasComputeType_t compute =
      f64 ? CUBLAS_COMPUTE_64F : (tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F);
  const float alpha_f = 1;
  const float beta_f = 0;
  const double alpha_d = 1;
  const double beta_d = 0;
  const void* alpha = f64 ? static_cast<const void*>(&alpha_d) : &alpha_f;
  const void* beta = f64 ? static_cast<const void*>(&beta_d) : &beta_f;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  const double ms = ms_per_call(stream, [&] {
    const cublasStatus_t s =
        cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k),
                     alpha, w, type, static_cast<int>(k), x, type, static_cast<int>(k), beta, y, type,
                     static_cast<int>(n), compute, CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS) status = s;
  });
  return status == CUBLAS_STATUS_SUCCESS ? ms : -1;
}

// One Linear launch as teeny runs it in a model (prepare once, run per call) on `cuda`.
template <class T>
double teeny_ms(teeny::cuda::CudaContext& cuda, std::int64_t m, std::int64_t n, std::int64_t k, const void* x,
                const void* w, void* y, std::string& engine) {
  teeny::linear_op<T> op;
  op.attrs = {.in_features = k, .out_features = n, .bias = false};
  op.out = {teeny::Shape(teeny::ConcreteShape{m, n}), teeny::dtype_of<T>};
  const teeny::TensorBinding inputs[] = {{const_cast<void*>(x), teeny::dtype_of<T>, {m, k}, 0}};
  const teeny::TensorBinding params[] = {{const_cast<void*>(w), teeny::dtype_of<T>, {n, k}, 0}};
  auto args = op.pack_args({inputs, params, {y, teeny::dtype_of<T>, {m, n}, 0}});
  if (!args) return -1;
  const teeny::LaunchSite site{"gemm", 0, op.grid({m, n}), op.block()};
  auto state = prepare_kernel(op, *args, cuda, site);
  if (!state) {
    std::fprintf(stderr, "teeny GEMM: %s\n", state.error().to_string().c_str());
    return -1;
  }
  engine = cuda.gemm_engine();
  const double ms = ms_per_call(cuda.stream(), [&] { run_kernel(op, *args, *state, cuda); });
  return cuda.take_error() ? ms : -1;
}

template <class T>
void bench_gemm(std::int64_t size, bool tf32, cublasHandle_t handle) {
  const std::int64_t m = size;
  const std::int64_t n = size;
  const std::int64_t k = size;
  const auto count = static_cast<std::size_t>(size * size);
  const auto x = device_copy(random_values<T>(count, 1));
  const auto w = device_copy(random_values<T>(count, 2));
  auto y = device_copy(std::vector<T>(count));
  const double flop = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const std::string dtype = tf32 ? "tf32" : std::string(teeny::name(teeny::dtype_of<T>));

  auto with_blas = teeny::cuda::CudaContext::create({.allow_tf32 = tf32});
  auto own = teeny::cuda::CudaContext::create({.cublas = false});
  if (!with_blas || !own) return;
  std::string engine;
  std::string own_engine;
  const double teeny = teeny_ms<T>(*with_blas, m, n, k, x.data(), w.data(), y.data(), engine);
  const double own_kernel = tf32 ? -1 : teeny_ms<T>(*own, m, n, k, x.data(), w.data(), y.data(), own_engine);
  const double direct =
      cublas_ms(handle, with_blas->stream(), teeny::dtype_of<T>, tf32, m, n, k, x.data(), w.data(), y.data());
  const auto tflops = [&](double ms) { return ms > 0 ? flop / (ms * 1e-3) / 1e12 : 0.0; };
  std::printf("| %-5s | %5lld | %8.1f (%s) | %8.1f | %8.1f | %5.2f |\n", dtype.c_str(), static_cast<long long>(size),
              tflops(teeny), engine.c_str(), tflops(own_kernel), tflops(direct),
              direct > 0 && teeny > 0 ? direct / teeny : 0.0);
  record(teeny::cat(R"({"bench":"gemm","dtype":")", dtype, R"(","size":)", size, R"(,"teeny_tflops":)", tflops(teeny),
                    R"(,"engine":")", engine, R"(","teeny_kernel_tflops":)", tflops(own_kernel), R"(,"cublas_tflops":)",
                    tflops(direct), "}"));
}

// Median of per-forward wall times (forward, then the logits copied out, which waits).
template <class Model>
double median_forward_ms(Model& model, std::span<const teeny::TensorRef> input, std::vector<float>& logits) {
  std::vector<double> times;
  const auto start_all = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i) {  // warm-up (and, replayed, the capture)
    if (!model.forward(input) || !model.copy_output("logits", std::as_writable_bytes(std::span(logits)))) return -1;
  }
  while (times.size() < 5 ||
         std::chrono::duration<double>(std::chrono::steady_clock::now() - start_all).count() < seconds_per_measure) {
    const auto start = std::chrono::steady_clock::now();
    if (!model.forward(input)) return -1;
    if (!model.copy_output("logits", std::as_writable_bytes(std::span(logits)))) return -1;
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2), times.end());
  return times[times.size() / 2];
}

void bench_model(const char* name, teeny::Result<teeny::Graph> graph, std::int64_t batch, std::int64_t channels,
                 std::int64_t image) {
  if (!graph) return;
  auto model = teeny::cuda::load_cuda(*graph, {{"batch", batch}});
  if (!model) {
    std::printf("| %-8s | %5lld | skipped: %s |\n", name, static_cast<long long>(batch),
                model.error().to_string().c_str());
    return;
  }
  // The fixtures of the tree it runs in where TEENY_FIXTURES_DIR says (tools/gpu-check sets it).
  const char* moved = std::getenv("TEENY_FIXTURES_DIR");  // NOLINT(concurrency-mt-unsafe): read before any thread
  const std::string fixtures = moved != nullptr ? moved : TEENY_FIXTURES_DIR;
  auto file = teeny::SafetensorsFile::open(fixtures + "/models/" + name + ".safetensors");
  if (file) (void)model->load_weights(*file, {.strict = false});
  const std::vector<float> x = random_values<float>(static_cast<std::size_t>(batch * channels * image * image), 3);
  const teeny::TensorRef input[] = {teeny::TensorRef::of<float>("x", x, {batch, channels, image, image})};
  std::vector<float> logits(static_cast<std::size_t>(batch * 10));
  if (std::string_view(name) == "resnet18") logits.resize(static_cast<std::size_t>(batch * 1000));
  const double eager = median_forward_ms(*model, input, logits);
  if (!model->set_graph_replay(true)) return;
  const double replay = median_forward_ms(*model, input, logits);
  const auto per_second = [&](double ms) { return ms > 0 ? static_cast<double>(batch) / (ms * 1e-3) : 0.0; };
  const auto& cuda = model->backend();
  std::printf("| %-8s | %5lld | %9.3f | %9.3f | %10.0f | %10.0f | %s | %s |\n", name, static_cast<long long>(batch),
              eager, replay, per_second(eager), per_second(replay), cuda.gemm_engine().c_str(),
              cuda.conv_engine().c_str());
  record(teeny::cat(R"({"bench":"model","model":")", name, R"(","batch":)", batch, R"(,"eager_ms":)", eager,
                    R"(,"replay_ms":)", replay, R"(,"gemm_engine":")", cuda.gemm_engine(), R"(","conv_engine":")",
                    cuda.conv_engine(), "\"}"));
}

#if TEENY_TRAINING
void bench_training(const char* name, teeny::Result<teeny::Graph> graph, std::int64_t batch, std::int64_t image) {
  if (!graph) return;
  const auto run = [&](bool replay) -> double {
    auto model = teeny::cuda::load_cuda_for_training(*graph, {{"batch", batch}});
    if (!model) return -1;
    if (!model->set_graph_replay(replay)) return -1;  // (the weights as loaded: the time is the same)
    auto opt = teeny::cuda::AdamW<float>::create(*model, {.lr = 1e-3});
    if (!opt) return -1;
    teeny::cuda::CrossEntropyLoss<float> loss;
    teeny::cuda::TrainingStep step(*model, loss, *opt, "logits");
    const std::vector<float> x = random_values<float>(static_cast<std::size_t>(batch * image * image), 5);
    const teeny::TensorRef input[] = {teeny::TensorRef::of<float>("x", x, {batch, 1, image, image})};
    std::vector<std::int64_t> labels(static_cast<std::size_t>(batch));
    for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int64_t>(i % 10);
    std::vector<double> times;
    const auto start_all = std::chrono::steady_clock::now();
    for (int i = 0; i < 3 + 5 || std::chrono::duration<double>(std::chrono::steady_clock::now() - start_all).count() <
                                     seconds_per_measure;
         ++i) {
      const auto start = std::chrono::steady_clock::now();
      if (!step(input, std::span<const std::int64_t>(labels))) return -1;
      if (i >= 3) {  // after the warm-up (and, replayed, the capture)
        times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      }
    }
    std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2), times.end());
    return times[times.size() / 2];
  };
  const double eager = run(false);
  const double replay = run(true);
  const auto per_second = [&](double ms) { return ms > 0 ? static_cast<double>(batch) / (ms * 1e-3) : 0.0; };
  std::printf("| %-8s | %5lld | %9.3f | %9.3f | %10.0f | %10.0f |\n", name, static_cast<long long>(batch), eager,
              replay, per_second(eager), per_second(replay));
  record(teeny::cat(R"({"bench":"training_step","model":")", name, R"(","batch":)", batch, R"(,"eager_ms":)", eager,
                    R"(,"replay_ms":)", replay, "}"));
}
#endif

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--json" && i + 1 < argc) {
      json.open(argv[++i]);
    } else if (arg == "--seconds" && i + 1 < argc) {
      seconds_per_measure = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: bench-cuda [--json FILE] [--seconds S]\n");
      return 2;
    }
  }
  if (teeny::cuda::device_count() == 0) {
    std::printf("SKIP: no GPU to measure (%s)\n", teeny::cuda::no_device_reason().c_str());
    return 0;
  }
  if (auto info = teeny::cuda::device_info(0)) std::printf("GPU: %s\n\n", info->name.c_str());

  cublasHandle_t handle = nullptr;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "cublasCreate failed\n");
    return 1;
  }
  std::printf("GEMM y = x W^T, M = N = K = size, TFLOP/s (teeny: as a model runs it)\n\n");
  std::printf("| dtype | size  | teeny | teeny's kernel | cuBLAS | cuBLAS / teeny time |\n|---|---|---|---|---|---|\n");
  for (const std::int64_t size : {1024, 4096}) {
    bench_gemm<float>(size, false, handle);
    bench_gemm<float>(size, true, handle);
    bench_gemm<teeny::f16>(size, false, handle);
    bench_gemm<teeny::bf16>(size, false, handle);
    bench_gemm<double>(size, false, handle);
  }
  cublasDestroy(handle);

  std::printf("\nModels, f32, per forward (input uploaded, logits copied back), median ms and images/s\n\n");
  std::printf(
      "| model | batch | eager ms | replay ms | eager img/s | replay img/s | GEMMs | convolutions "
      "|\n|---|---|---|---|---|---|---|---|\n");
  bench_model("mlp", models::mlp(), 64, 1, 28);
  bench_model("resnet18", models::resnet18(224), 1, 3, 224);
  bench_model("resnet18", models::resnet18(224), 64, 3, 224);
#if TEENY_TRAINING
  std::printf("\nTraining steps, f32, AdamW, per step (inputs and labels uploaded, loss read back), median ms\n\n");
  std::printf(
      "| model | batch | op-by-op ms | one-graph ms | op-by-op img/s | one-graph img/s |\n|---|---|---|---|---|---|\n");
  bench_training("mlp", models::mlp(), 64, 28);
  bench_training("lenet", models::lenet_bn(), 64, 28);
#endif
  return 0;
}
