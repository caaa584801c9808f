// cuBLASLt through kernels/cuda/blas.hpp: loading it (or the reason it did not load), status names,
// the plans refused before any GPU work, and, on a GPU, GEMMs in every type, transpose, epilogue
// and batch layout against a double-precision reference computed here, eagerly and replayed from a
// CUDA graph. Only the plain headers: no CUDA types, and no teeny module.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda/blas.hpp"
#include "cuda/runtime.hpp"
#include "math/half.hpp"

#if TEENY_HAS_CUDA

namespace {

namespace ck = teeny::cuda_kernels;

// cublasStatus_t values the tests expect (the header keeps cuBLAS's own numbers).
constexpr int not_initialized = 1;  // CUBLAS_STATUS_NOT_INITIALIZED
constexpr int invalid_value = 7;    // CUBLAS_STATUS_INVALID_VALUE

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// doctest prints a `const char*` message as a pointer: these make strings of them.
std::string blas_text(int status) {
  return std::string(ck::blas_status_name(status)) + ": " + ck::blas_status_string(status);
}
std::string cuda_text(int code) { return std::string(ck::error_name(code)) + ": " + ck::error_string(code); }

bool loaded() {
  const char* why = nullptr;
  return ck::blas_load(why) == 0;
}

}  // namespace

TEST_CASE("cuda blas: cuBLASLt loads once, or says why it did not") {
  const char* why = nullptr;
  const int status = ck::blas_load(why);
  REQUIRE(why != nullptr);
  if (status != 0) {
    CHECK(status == ck::blas_not_loaded);
    CHECK(std::strlen(why) > 0);
    CHECK(contains(ck::blas_status_string(status), why));  // the reason travels with the status
  }
  // Where the CUDA toolkit installed it, the loader finds it (its lib64 is in the ld cache).
  std::error_code error;
  if (std::filesystem::exists("/usr/local/cuda/lib64/libcublasLt.so.13", error)) {
    CHECK_MESSAGE(status == 0, std::string(why));
  }
  // Later calls give the first one's answer.
  const char* again = nullptr;
  CHECK(ck::blas_load(again) == status);
  CHECK(again == why);
}

TEST_CASE("cuda blas: statuses have cuBLAS's names and words, and teeny's two their own") {
  CHECK(std::string(ck::blas_status_name(0)) == "CUBLAS_STATUS_SUCCESS");
  CHECK(std::string(ck::blas_status_name(invalid_value)) == "CUBLAS_STATUS_INVALID_VALUE");
  CHECK(std::string(ck::blas_status_name(not_initialized)) == "CUBLAS_STATUS_NOT_INITIALIZED");
  CHECK(std::strlen(ck::blas_status_string(0)) > 0);
  CHECK(std::strlen(ck::blas_status_string(invalid_value)) > 0);
  CHECK(std::string(ck::blas_status_name(ck::blas_not_loaded)) == "blas_not_loaded");
  CHECK(contains(ck::blas_status_string(ck::blas_not_loaded), "cuBLASLt not loaded"));
  CHECK(std::string(ck::blas_status_name(ck::blas_no_algorithm)) == "blas_no_algorithm");
  CHECK(contains(ck::blas_status_string(ck::blas_no_algorithm), "no algorithm"));
  CHECK(std::strlen(ck::blas_status_name(12345)) > 0);  // unknown, but still a string
}

TEST_CASE("cuda blas: plans are refused before any GPU work: bad shapes, no handle, no library") {
  ck::GemmDesc good;
  good.m = 3;
  good.n = 4;
  good.k = 5;
  int sentinel = 0;
  void* plan = &sentinel;
  if (!loaded()) {
    CHECK(ck::gemm_plan(plan, nullptr, good, 0) == ck::blas_not_loaded);
    CHECK(plan == nullptr);
    void* handle = &sentinel;
    CHECK(ck::blas_create(handle) == ck::blas_not_loaded);
    CHECK(handle == nullptr);
    CHECK(ck::gemm_run(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0, nullptr) ==
          ck::blas_not_loaded);
    return;
  }
  CHECK(ck::gemm_plan(plan, nullptr, good, 0) == not_initialized);
  CHECK(plan == nullptr);
  // The description is checked first: these are invalid with or without a handle.
  const auto refused = [&](ck::GemmDesc desc) {
    plan = &sentinel;
    CHECK(ck::gemm_plan(plan, nullptr, desc, 0) == invalid_value);
    CHECK(plan == nullptr);
  };
  for (const std::int64_t bad : {0, -1}) {
    ck::GemmDesc d = good;
    d.m = bad;
    refused(d);
    d = good;
    d.n = bad;
    refused(d);
    d = good;
    d.k = bad;
    refused(d);
    d = good;
    d.batch = bad;
    refused(d);
  }
  ck::GemmDesc d = good;
  d.batch = std::int64_t{1} << 31;  // past cuBLASLt's int32 batch count
  refused(d);
  d = good;
  d.batch = 2;
  d.stride_a = -1;
  refused(d);
  d = good;
  d.batch = 2;
  d.stride_d = 11;  // the two D [3, 4] would overlap
  refused(d);
  d.stride_d = 0;  // every batch writing one D
  refused(d);
  d.stride_d = 12;
  d.stride_a = 0;  // while A and B may be shared by every batch
  d.stride_b = 0;
  CHECK(ck::gemm_plan(plan, nullptr, d, 0) == not_initialized);
  // Running needs a handle and a plan; null ones are no-ops to destroy.
  CHECK(ck::gemm_run(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 0, nullptr) == not_initialized);
  ck::gemm_destroy(nullptr);
  ck::blas_destroy(nullptr);

  int count = 0;
  if (ck::device_count(count) != 0 || count == 0) {
    // No GPU: a handle is refused with cuBLAS's status for it.
    void* handle = &sentinel;
    const int status = ck::blas_create(handle);
    std::printf("no GPU: blas_create gives %s\n", blas_text(status).c_str());
    CHECK(status != 0);
    CHECK(handle == nullptr);
  }
}

namespace {

// Host values of each element type, and the conversions through double.
template <class T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    return static_cast<T>(v);
  } else {
    return T(static_cast<float>(v));
  }
}
template <class T>
double to_double(T v) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    return static_cast<double>(v);
  } else {
    return static_cast<double>(static_cast<float>(v));
  }
}

// One GEMM's shape: the batch strides are the packed size plus a gap (elements no batch reads,
// filled with a value that would show if one did), or 0 for an operand every batch shares.
struct Shape {
  std::int64_t m, n, k, batch;
  bool share_a, share_b;
  std::int64_t gap_a, gap_b, gap_d;
};

struct TypeCase {
  ck::BlasType type;
  bool tf32;
  const char* name;
  double tolerance;  // of |D - reference|, relative to the largest |reference|
};

constexpr double gap_value = 64.0;   // exact in every type
constexpr double d_sentinel = -3.5;  // D's gaps must keep it

// Device buffers for one GEMM, freed on scope exit.
struct DeviceBuffers {
  std::vector<void*> buffers;
  DeviceBuffers() = default;
  DeviceBuffers(const DeviceBuffers&) = delete;
  DeviceBuffers& operator=(const DeviceBuffers&) = delete;
  ~DeviceBuffers() {
    for (void* p : buffers) ck::device_free(p);
  }
  template <class T>
  void* upload(const std::vector<T>& host) {
    void* p = nullptr;
    const int e = ck::device_allocate(p, host.size() * sizeof(T));
    REQUIRE_MESSAGE(e == 0, cuda_text(e));
    buffers.push_back(p);
    const int c = ck::copy_to_device(p, host.data(), host.size() * sizeof(T));
    REQUIRE_MESSAGE(c == 0, cuda_text(c));
    return p;
  }
};

// Inputs for `shape` (rounded to T, as the GPU sees them) and the reference D computed from them
// in double, following blas.hpp's row-major definition directly.
template <class T>
struct Problem {
  std::int64_t stride_a = 0, stride_b = 0, stride_d = 0;
  std::vector<T> a, b, bias, d_init;
  std::vector<double> want;  // D [batch, m, n], packed
  double scale = 0.0;        // the largest |want|

  Problem(const Shape& s, bool ta, bool tb, ck::BlasEpilogue epilogue, std::mt19937& rng) {
    std::uniform_real_distribution<double> dist(-1.0, 1.0);
    stride_a = s.share_a ? 0 : s.m * s.k + s.gap_a;
    stride_b = s.share_b ? 0 : s.k * s.n + s.gap_b;
    stride_d = s.m * s.n + s.gap_d;
    a.assign(static_cast<std::size_t>((s.batch - 1) * stride_a + s.m * s.k), from_double<T>(gap_value));
    b.assign(static_cast<std::size_t>((s.batch - 1) * stride_b + s.k * s.n), from_double<T>(gap_value));
    d_init.assign(static_cast<std::size_t>((s.batch - 1) * stride_d + s.m * s.n), from_double<T>(d_sentinel));
    bias.resize(static_cast<std::size_t>(s.n));
    const auto fill = [&](std::vector<T>& v, std::int64_t stride, std::int64_t size) {
      for (std::int64_t bi = 0; bi < (stride == 0 ? 1 : s.batch); ++bi) {
        for (std::int64_t i = 0; i < size; ++i)
          v[static_cast<std::size_t>(bi * stride + i)] = from_double<T>(dist(rng));
      }
    };
    fill(a, stride_a, s.m * s.k);
    fill(b, stride_b, s.k * s.n);
    for (T& x : bias) x = from_double<T>(dist(rng));
    const bool with_bias = epilogue == ck::BlasEpilogue::bias || epilogue == ck::BlasEpilogue::bias_relu;
    const bool with_relu = epilogue == ck::BlasEpilogue::relu || epilogue == ck::BlasEpilogue::bias_relu;
    want.resize(static_cast<std::size_t>(s.batch * s.m * s.n));
    for (std::int64_t bi = 0; bi < s.batch; ++bi) {
      for (std::int64_t i = 0; i < s.m; ++i) {
        for (std::int64_t j = 0; j < s.n; ++j) {
          double sum = 0.0;
          for (std::int64_t p = 0; p < s.k; ++p) {
            // A' [m, k] is A stored [m, k], or [k, m] when transposed; B' [k, n] likewise.
            const std::int64_t ai = bi * stride_a + (ta ? p * s.m + i : i * s.k + p);
            const std::int64_t bj = bi * stride_b + (tb ? j * s.k + p : p * s.n + j);
            sum += to_double(a[static_cast<std::size_t>(ai)]) * to_double(b[static_cast<std::size_t>(bj)]);
          }
          if (with_bias) sum += to_double(bias[static_cast<std::size_t>(j)]);
          if (with_relu) sum = std::max(sum, 0.0);
          want[static_cast<std::size_t>((bi * s.m + i) * s.n + j)] = sum;
          scale = std::max(scale, std::abs(sum));
        }
      }
    }
    if (scale == 0.0) scale = 1.0;  // all clamped by ReLU: compare absolutely
  }

  // Counts the elements of `got` (D as downloaded, gaps included) off the reference, and the gap
  // elements changed; describes the first.
  std::int64_t mismatches(const Shape& s, const std::vector<T>& got, double tolerance, std::string& first) const {
    std::int64_t bad = 0;
    std::vector<bool> inside(got.size(), false);
    for (std::int64_t bi = 0; bi < s.batch; ++bi) {
      for (std::int64_t i = 0; i < s.m * s.n; ++i) {
        const auto at = static_cast<std::size_t>(bi * stride_d + i);
        inside[at] = true;
        const double w = want[static_cast<std::size_t>(bi * s.m * s.n + i)];
        const double g = to_double(got[at]);
        if (!(std::abs(g - w) <= tolerance * scale)) {
          if (bad++ == 0) {
            first = "batch " + std::to_string(bi) + " row " + std::to_string(i / s.n) + " col " +
                    std::to_string(i % s.n) + ": got " + std::to_string(g) + ", want " + std::to_string(w) +
                    " (largest |D| " + std::to_string(scale) + ")";
          }
        }
      }
    }
    for (std::size_t at = 0; at < got.size(); ++at) {
      if (!inside[at] && to_double(got[at]) != d_sentinel) {
        if (bad++ == 0) first = "D's gap element " + std::to_string(at) + " was written";
      }
    }
    return bad;
  }
};

constexpr std::size_t workspace_bytes = std::size_t{32} << 20;

template <class T>
void check_gemm(void* handle, void* workspace, const TypeCase& tc, const Shape& s, bool ta, bool tb,
                ck::BlasEpilogue epilogue, std::mt19937& rng) {
  CAPTURE(tc.name);
  CAPTURE(s.m);
  CAPTURE(s.n);
  CAPTURE(s.k);
  CAPTURE(s.batch);
  CAPTURE(ta);
  CAPTURE(tb);
  CAPTURE(static_cast<int>(epilogue));
  const Problem<T> problem(s, ta, tb, epilogue, rng);
  ck::GemmDesc desc;
  desc.type = tc.type;
  desc.tf32 = tc.tf32;
  desc.m = s.m;
  desc.n = s.n;
  desc.k = s.k;
  desc.transpose_a = ta;
  desc.transpose_b = tb;
  desc.batch = s.batch;
  desc.stride_a = problem.stride_a;
  desc.stride_b = problem.stride_b;
  desc.stride_d = problem.stride_d;
  desc.epilogue = epilogue;
  void* plan = nullptr;
  const int planned = ck::gemm_plan(plan, handle, desc, workspace_bytes);
  REQUIRE_MESSAGE(planned == 0, blas_text(planned));
  DeviceBuffers device;
  void* a = device.upload(problem.a);
  void* b = device.upload(problem.b);
  void* d = device.upload(problem.d_init);
  const bool with_bias = epilogue == ck::BlasEpilogue::bias || epilogue == ck::BlasEpilogue::bias_relu;
  void* bias = with_bias ? device.upload(problem.bias) : nullptr;
  const int ran = ck::gemm_run(plan, handle, a, b, bias, d, workspace, workspace_bytes, nullptr);
  ck::gemm_destroy(plan);
  REQUIRE_MESSAGE(ran == 0, blas_text(ran));
  const int synced = ck::synchronize();
  REQUIRE_MESSAGE(synced == 0, cuda_text(synced));
  std::vector<T> got(problem.d_init.size());
  REQUIRE(ck::copy_to_host(got.data(), d, got.size() * sizeof(T)) == 0);
  std::string first;
  const std::int64_t bad = problem.mismatches(s, got, tc.tolerance, first);
  CHECK_MESSAGE(bad == 0, (std::to_string(bad) + " elements off, first " + first));
}

// A handle and a workspace for the GPU cases.
struct Session {
  void* handle = nullptr;
  void* workspace = nullptr;
  Session() {
    const char* why = nullptr;
    const int status = ck::blas_load(why);
    REQUIRE_MESSAGE(status == 0, std::string(why));
    const int created = ck::blas_create(handle);
    REQUIRE_MESSAGE(created == 0, blas_text(created));
    const int e = ck::device_allocate(workspace, workspace_bytes);
    REQUIRE_MESSAGE(e == 0, cuda_text(e));
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session() {
    ck::device_free(workspace);
    ck::blas_destroy(handle);
  }
};

}  // namespace

TEST_CASE("cuda blas (GPU): GEMMs in every type, transpose, epilogue and batch layout match a host reference" *
          doctest::test_suite("gpu")) {
  const Session session;
  const Shape shapes[] = {
      {37, 19, 23, 1, false, false, 0, 0, 0},
      {1, 1, 1, 1, false, false, 0, 0, 0},
      {64, 48, 32, 1, false, false, 0, 0, 0},
      {37, 19, 23, 3, false, true, 0, 0, 0},  // Linear over a batch: one weight for every batch
      {19, 37, 23, 3, true, false, 0, 5, 3},  // a shared A, gaps between the batches of B and D
      {8, 16, 24, 2, false, false, 7, 0, 0},
  };
  const TypeCase types[] = {
      {ck::BlasType::f64, false, "f64", 1e-12},    {ck::BlasType::f32, false, "f32", 1e-5},
      {ck::BlasType::f32, true, "tf32", 5e-3},     {ck::BlasType::f16, false, "f16", 2e-3},
      {ck::BlasType::bf16, false, "bf16", 1.6e-2},
  };
  const ck::BlasEpilogue epilogues[] = {ck::BlasEpilogue::none, ck::BlasEpilogue::bias, ck::BlasEpilogue::relu,
                                        ck::BlasEpilogue::bias_relu};
  std::mt19937 rng(2024);
  for (const TypeCase& tc : types) {
    for (const Shape& s : shapes) {
      for (const bool ta : {false, true}) {
        for (const bool tb : {false, true}) {
          for (const ck::BlasEpilogue e : epilogues) {
            switch (tc.type) {
              case ck::BlasType::f64:
                check_gemm<double>(session.handle, session.workspace, tc, s, ta, tb, e, rng);
                break;
              case ck::BlasType::f32:
                check_gemm<float>(session.handle, session.workspace, tc, s, ta, tb, e, rng);
                break;
              case ck::BlasType::f16:
                check_gemm<teeny::f16>(session.handle, session.workspace, tc, s, ta, tb, e, rng);
                break;
              case ck::BlasType::bf16:
                check_gemm<teeny::bf16>(session.handle, session.workspace, tc, s, ta, tb, e, rng);
                break;
            }
          }
        }
      }
    }
  }
}

TEST_CASE("cuda blas (GPU): a GEMM captured into a CUDA graph replays on the inputs' new values" *
          doctest::test_suite("gpu")) {
  const Session session;
  const Shape s{37, 19, 23, 2, false, true, 0, 0, 0};
  std::mt19937 rng(7);
  const TypeCase tc{ck::BlasType::f32, false, "f32", 1e-5};
  const Problem<float> first(s, false, true, ck::BlasEpilogue::bias_relu, rng);
  const Problem<float> second(s, false, true, ck::BlasEpilogue::bias_relu, rng);
  ck::GemmDesc desc;
  desc.m = s.m;
  desc.n = s.n;
  desc.k = s.k;
  desc.transpose_b = true;
  desc.batch = s.batch;
  desc.stride_a = first.stride_a;
  desc.stride_b = first.stride_b;
  desc.stride_d = first.stride_d;
  desc.epilogue = ck::BlasEpilogue::bias_relu;
  void* plan = nullptr;
  const int planned = ck::gemm_plan(plan, session.handle, desc, workspace_bytes);
  REQUIRE_MESSAGE(planned == 0, blas_text(planned));
  DeviceBuffers device;
  void* a = device.upload(first.a);
  void* b = device.upload(first.b);
  void* bias = device.upload(first.bias);
  void* d = device.upload(first.d_init);
  void* stream = nullptr;
  REQUIRE(ck::stream_create(stream) == 0);
  REQUIRE(ck::stream_begin_capture(stream) == 0);
  const int ran = ck::gemm_run(plan, session.handle, a, b, bias, d, session.workspace, workspace_bytes, stream);
  void* graph = nullptr;
  const int ended = ck::stream_end_capture(stream, graph);
  REQUIRE_MESSAGE(ran == 0, blas_text(ran));
  REQUIRE_MESSAGE(ended == 0, cuda_text(ended));
  void* exec = nullptr;
  REQUIRE(ck::graph_instantiate(exec, graph) == 0);
  for (const Problem<float>* p : {&first, &second}) {
    // The graph reads the same buffers: new values copied into them are what it multiplies.
    REQUIRE(ck::copy_to_device(a, p->a.data(), p->a.size() * sizeof(float)) == 0);
    REQUIRE(ck::copy_to_device(b, p->b.data(), p->b.size() * sizeof(float)) == 0);
    REQUIRE(ck::copy_to_device(bias, p->bias.data(), p->bias.size() * sizeof(float)) == 0);
    REQUIRE(ck::copy_to_device(d, p->d_init.data(), p->d_init.size() * sizeof(float)) == 0);
    REQUIRE(ck::synchronize() == 0);  // the copies may still be landing; the stream does not wait on them
    REQUIRE(ck::graph_launch(exec, stream) == 0);
    REQUIRE(ck::stream_synchronize(stream) == 0);
    std::vector<float> got(p->d_init.size());
    REQUIRE(ck::copy_to_host(got.data(), d, got.size() * sizeof(float)) == 0);
    std::string where;
    const std::int64_t bad = p->mismatches(s, got, tc.tolerance, where);
    CHECK_MESSAGE(bad == 0, (std::to_string(bad) + " elements off, first " + where));
  }
  ck::graph_executable_destroy(exec);
  ck::graph_destroy(graph);
  ck::stream_destroy(stream);
  ck::gemm_destroy(plan);
}

#endif  // TEENY_HAS_CUDA
