// cuBLASLt behind blas.hpp. The library is dlopen'ed, never linked: cublasLt.h is included for its
// types and enums only, and every function is called through a pointer resolved with dlsym.
#include <cublasLt.h>

#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <new>

#include "cuda/blas.hpp"
#include "cuda/runtime_library.hpp"

namespace teeny::cuda_kernels {

namespace {

// The entry points teeny uses, resolved once per process. The library is never dlclose'd: handles
// and plans may outlive any one user of it.
struct Library {
  RuntimeLibrary so{"libcublasLt.so.13", "cuBLASLt"};
  int status = blas_not_loaded;
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtDestroy) destroy = nullptr;
  decltype(&cublasLtGetStatusName) status_name = nullptr;
  decltype(&cublasLtGetStatusString) status_string = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&cublasLtMatrixLayoutSetAttribute) layout_set = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) preference_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) preference_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) preference_set = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
};

Library load() noexcept {
  Library lib;
  const bool resolved =
      lib.so.resolve("cublasLtCreate", lib.create) && lib.so.resolve("cublasLtDestroy", lib.destroy) &&
      lib.so.resolve("cublasLtGetStatusName", lib.status_name) &&
      lib.so.resolve("cublasLtGetStatusString", lib.status_string) &&
      lib.so.resolve("cublasLtMatmulDescCreate", lib.desc_create) &&
      lib.so.resolve("cublasLtMatmulDescDestroy", lib.desc_destroy) &&
      lib.so.resolve("cublasLtMatmulDescSetAttribute", lib.desc_set) &&
      lib.so.resolve("cublasLtMatrixLayoutCreate", lib.layout_create) &&
      lib.so.resolve("cublasLtMatrixLayoutDestroy", lib.layout_destroy) &&
      lib.so.resolve("cublasLtMatrixLayoutSetAttribute", lib.layout_set) &&
      lib.so.resolve("cublasLtMatmulPreferenceCreate", lib.preference_create) &&
      lib.so.resolve("cublasLtMatmulPreferenceDestroy", lib.preference_destroy) &&
      lib.so.resolve("cublasLtMatmulPreferenceSetAttribute", lib.preference_set) &&
      lib.so.resolve("cublasLtMatmulAlgoGetHeuristic", lib.heuristic) && lib.so.resolve("cublasLtMatmul", lib.matmul);
  if (!resolved) {
    // Status stays blas_not_loaded, so no pointer is ever called.
    lib.so.close();
    return lib;
  }
  lib.status = 0;
  return lib;
}

// A function-local static: initialised once, thread-safely, on first use.
const Library& library() noexcept {
  static const Library lib = load();
  return lib;
}

bool has_bias(BlasEpilogue e) noexcept { return e == BlasEpilogue::bias || e == BlasEpilogue::bias_relu; }

// The pointers cuBLASLt reads are assumed 16-byte aligned (cudaMalloc gives 256, teeny's arenas
// 64): the heuristic is told so (its default assumes 256), and gemm_run checks it.
constexpr std::uint32_t min_alignment = 16;
bool aligned(const void* p) noexcept { return reinterpret_cast<std::uintptr_t>(p) % min_alignment == 0; }

// A planned GEMM: the descriptors it owns and the algorithm the heuristic chose.
struct Plan {
  bool f64 = false;  // alpha and beta are doubles (scale type CUDA_R_64F), else floats
  bool bias = false;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr;  // cuBLASLt's A: teeny's B (see build)
  cublasLtMatrixLayout_t b = nullptr;  // cuBLASLt's B: teeny's A
  cublasLtMatrixLayout_t d = nullptr;  // D, and C (beta = 0, C = D)
  cublasLtMatmulAlgo_t algo{};
  // The bias pointer lives in `op`, which gemm_run (given a const plan) sets before each
  // cublasLtMatmul: the descriptor is an object the plan points at, not part of the plan's own
  // bytes, so no const_cast is needed; this mutex keeps concurrent runs of one plan with different
  // biases from racing between setting the pointer and the matmul reading it.
  mutable std::mutex bias_mutex;

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    const Library& lib = library();  // loaded: a plan exists only if it was
    if (d != nullptr) lib.layout_destroy(d);
    if (b != nullptr) lib.layout_destroy(b);
    if (a != nullptr) lib.layout_destroy(a);
    if (op != nullptr) lib.desc_destroy(op);
  }
};

struct Types {
  cudaDataType_t data;
  cublasComputeType_t compute;
  cudaDataType_t scale;
};

// f16 and bf16 accumulate in f32 (with f32 alpha and beta); `tf32` only means something for f32.
Types types_of(const GemmDesc& desc) noexcept {
  switch (desc.type) {
    case BlasType::f64: return {CUDA_R_64F, CUBLAS_COMPUTE_64F, CUDA_R_64F};
    case BlasType::f16: return {CUDA_R_16F, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case BlasType::bf16: return {CUDA_R_16BF, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case BlasType::f32: break;
  }
  return {CUDA_R_32F, desc.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F};
}

cublasLtEpilogue_t epilogue_of(BlasEpilogue e) noexcept {
  switch (e) {
    case BlasEpilogue::bias: return CUBLASLT_EPILOGUE_BIAS;
    case BlasEpilogue::relu: return CUBLASLT_EPILOGUE_RELU;
    case BlasEpilogue::bias_relu: return CUBLASLT_EPILOGUE_RELU_BIAS;
    case BlasEpilogue::none: break;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

bool valid(const GemmDesc& d) noexcept {
  constexpr std::int64_t int32_max = 0x7fffffff;  // cuBLASLt's batch count is an int32_t
  if (d.m < 1 || d.n < 1 || d.k < 1 || d.batch < 1 || d.batch > int32_max) return false;
  if (static_cast<int>(d.type) > static_cast<int>(BlasType::bf16)) return false;
  if (static_cast<int>(d.epilogue) > static_cast<int>(BlasEpilogue::bias_relu)) return false;
  if (d.stride_a < 0 || d.stride_b < 0 || d.stride_d < 0) return false;
  // Batches of D must not overlap (A and B may: stride 0 broadcasts one matrix to every batch).
  return d.batch == 1 || d.stride_d >= d.m * d.n;
}

// A column-major layout `rows` x `cols` with leading dimension `ld`, `batch` of them `stride` apart.
cublasStatus_t make_layout(const Library& lib, cublasLtMatrixLayout_t& layout, cudaDataType_t type, std::int64_t rows,
                           std::int64_t cols, std::int64_t ld, std::int64_t batch, std::int64_t stride) noexcept {
  cublasStatus_t s =
      lib.layout_create(&layout, type, static_cast<std::uint64_t>(rows), static_cast<std::uint64_t>(cols), ld);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  const auto count = static_cast<std::int32_t>(batch);
  s = lib.layout_set(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  const std::int64_t offset = stride;
  return lib.layout_set(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &offset, sizeof offset);
}

template <class T>
cublasStatus_t set(const Library& lib, cublasLtMatmulDesc_t op, cublasLtMatmulDescAttributes_t attribute,
                   const T& value) noexcept {
  return lib.desc_set(op, attribute, &value, sizeof value);
}

template <class T>
cublasStatus_t set(const Library& lib, cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attribute,
                   const T& value) noexcept {
  return lib.preference_set(pref, attribute, &value, sizeof value);
}

// The heuristic's first choice for `plan`'s descriptors, within `workspace_bytes`.
int choose_algorithm(const Library& lib, Plan& plan, cublasLtHandle_t handle, std::size_t workspace_bytes) noexcept {
  cublasLtMatmulPreference_t pref = nullptr;
  cublasStatus_t s = lib.preference_create(&pref);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  const auto max_workspace = static_cast<std::uint64_t>(workspace_bytes);
  s = set(lib, pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, max_workspace);
  for (const cublasLtMatmulPreferenceAttributes_t attribute :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    if (s == CUBLAS_STATUS_SUCCESS) s = set(lib, pref, attribute, min_alignment);
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (s == CUBLAS_STATUS_SUCCESS) {
    s = lib.heuristic(handle, plan.op, plan.a, plan.b, plan.d, plan.d, pref, 1, &result, &found);
  }
  lib.preference_destroy(pref);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  if (found < 1 || result.state != CUBLAS_STATUS_SUCCESS) return blas_no_algorithm;
  plan.algo = result.algo;
  return 0;
}

// Builds `plan`'s descriptors for `desc` and chooses its algorithm.
//
// teeny's matrices are row-major, cuBLASLt's column-major. A row-major R x C array (leading
// dimension C) read column-major is the C x R matrix that is its transpose. So the row-major
// D [m, n] is, to cuBLASLt, D^T (n x m, ld n), and
//   D^T = (A' B')^T = B'^T A'^T,
// a column-major GEMM with M = n, N = m, K = k whose "A" is teeny's B and whose "B" is teeny's A:
// - teeny's B stored [k, n] (ld n) reads as the n x k matrix B'^T: op N, layout n x k, ld n;
//   stored [n, k] (transpose_b, ld k) it reads as the k x n matrix B': op T, layout k x n, ld k.
// - teeny's A stored [m, k] (ld k) reads as the k x m matrix A'^T: op N, layout k x m, ld k;
//   stored [k, m] (transpose_a, ld m) it reads as the m x k matrix A': op T, layout m x k, ld m.
// - D (and C) is n x m, ld n.
// cuBLASLt's bias holds one value per row of its D (n of them), added along each of its m
// columns: one per column of the row-major D, the same for every row, as blas.hpp promises. Its
// batch stride is left 0, so every batch adds the same bias.
int build(const Library& lib, Plan& plan, cublasLtHandle_t handle, const GemmDesc& desc,
          std::size_t workspace_bytes) noexcept {
  const Types t = types_of(desc);
  plan.f64 = desc.type == BlasType::f64;
  plan.bias = has_bias(desc.epilogue);
  cublasStatus_t s = lib.desc_create(&plan.op, t.compute, t.scale);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  const auto op_a = static_cast<std::int32_t>(desc.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N);
  const auto op_b = static_cast<std::int32_t>(desc.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N);
  const auto epilogue = static_cast<std::uint32_t>(epilogue_of(desc.epilogue));
  if ((s = set(lib, plan.op, CUBLASLT_MATMUL_DESC_TRANSA, op_a)) != CUBLAS_STATUS_SUCCESS) return s;
  if ((s = set(lib, plan.op, CUBLASLT_MATMUL_DESC_TRANSB, op_b)) != CUBLAS_STATUS_SUCCESS) return s;
  if ((s = set(lib, plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue)) != CUBLAS_STATUS_SUCCESS) return s;
  if (plan.bias) {
    // The bias is of D's type, which is also cuBLASLt's default for these types (its exceptions are
    // int8 IMMA and fp8 GEMMs): f16 and bf16 biases stay 16-bit though they accumulate in f32, and
    // an f64 GEMM takes an f64 bias. Said explicitly so the plan does not lean on the default.
    const auto bias_type = static_cast<std::int32_t>(t.data);
    if ((s = set(lib, plan.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, bias_type)) != CUBLAS_STATUS_SUCCESS) return s;
  }
  const std::int64_t m = desc.m;
  const std::int64_t n = desc.n;
  const std::int64_t k = desc.k;
  s = desc.transpose_b ? make_layout(lib, plan.a, t.data, k, n, k, desc.batch, desc.stride_b)
                       : make_layout(lib, plan.a, t.data, n, k, n, desc.batch, desc.stride_b);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  s = desc.transpose_a ? make_layout(lib, plan.b, t.data, m, k, m, desc.batch, desc.stride_a)
                       : make_layout(lib, plan.b, t.data, k, m, k, desc.batch, desc.stride_a);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  s = make_layout(lib, plan.d, t.data, n, m, n, desc.batch, desc.stride_d);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  return choose_algorithm(lib, plan, handle, workspace_bytes);
}

struct StatusText {
  int status;
  const char* name;
  const char* text;
};

// cublasStatus_t's names and descriptions as cuBLASLt gives them, for when it could not be loaded.
constexpr StatusText cublas_statuses[] = {
    {CUBLAS_STATUS_SUCCESS, "CUBLAS_STATUS_SUCCESS", "success"},
    {CUBLAS_STATUS_NOT_INITIALIZED, "CUBLAS_STATUS_NOT_INITIALIZED", "the library was not initialized"},
    {CUBLAS_STATUS_ALLOC_FAILED, "CUBLAS_STATUS_ALLOC_FAILED", "the resource allocation failed"},
    {CUBLAS_STATUS_INVALID_VALUE, "CUBLAS_STATUS_INVALID_VALUE",
     "an unsupported value or parameter was passed to the function"},
    {CUBLAS_STATUS_ARCH_MISMATCH, "CUBLAS_STATUS_ARCH_MISMATCH",
     "the function requires an architectural feature absent from the device"},
    {CUBLAS_STATUS_MAPPING_ERROR, "CUBLAS_STATUS_MAPPING_ERROR", "an access to GPU memory space failed"},
    {CUBLAS_STATUS_EXECUTION_FAILED, "CUBLAS_STATUS_EXECUTION_FAILED", "the function failed to launch on the GPU"},
    {CUBLAS_STATUS_INTERNAL_ERROR, "CUBLAS_STATUS_INTERNAL_ERROR", "an internal operation failed"},
    {CUBLAS_STATUS_NOT_SUPPORTED, "CUBLAS_STATUS_NOT_SUPPORTED", "the requested functionality is not supported"},
    {CUBLAS_STATUS_LICENSE_ERROR, "CUBLAS_STATUS_LICENSE_ERROR", "the license check failed"},
};

const StatusText* find_status(int status) noexcept {
  for (const StatusText& s : cublas_statuses) {
    if (s.status == status) return &s;
  }
  return nullptr;
}

}  // namespace

int blas_load(const char*& why) noexcept {
  const Library& lib = library();
  why = lib.so.why();
  return lib.status;
}

int blas_create(void*& handle) noexcept {
  handle = nullptr;
  const Library& lib = library();
  if (lib.status != 0) return blas_not_loaded;
  return make_handle<cublasLtHandle_t>(handle, lib.create);
}

void blas_destroy(void* handle) noexcept {
  const Library& lib = library();
  if (lib.status == 0 && handle != nullptr) lib.destroy(static_cast<cublasLtHandle_t>(handle));
}

int gemm_plan(void*& plan, void* handle, const GemmDesc& desc, std::size_t workspace_bytes) noexcept {
  plan = nullptr;
  const Library& lib = library();
  if (lib.status != 0) return blas_not_loaded;
  if (!valid(desc)) return CUBLAS_STATUS_INVALID_VALUE;
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  return make_plan<Plan>(plan, CUBLAS_STATUS_ALLOC_FAILED, [&](Plan& p) {
    return build(lib, p, static_cast<cublasLtHandle_t>(handle), desc, workspace_bytes);
  });
}

int gemm_run(const void* plan, void* handle, const void* a, const void* b, const void* bias, void* d, void* workspace,
             std::size_t workspace_bytes, void* stream) noexcept {
  const Library& lib = library();
  if (lib.status != 0) return blas_not_loaded;
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (plan == nullptr || a == nullptr || b == nullptr || d == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  const Plan& p = *static_cast<const Plan*>(plan);
  if ((bias != nullptr) != p.bias) return CUBLAS_STATUS_INVALID_VALUE;  // a bias exactly when the epilogue has one
  if (!aligned(a) || !aligned(b) || !aligned(d) || !aligned(bias)) return CUBLAS_STATUS_INVALID_VALUE;
  // Host scalars, read when cublasLtMatmul is called (so a captured graph keeps their values).
  const float alpha32 = 1.0f;
  const float beta32 = 0.0f;
  const double alpha64 = 1.0;
  const double beta64 = 0.0;
  const void* alpha = p.f64 ? static_cast<const void*>(&alpha64) : &alpha32;
  const void* beta = p.f64 ? static_cast<const void*>(&beta64) : &beta32;
  const auto h = static_cast<cublasLtHandle_t>(handle);
  const auto s = static_cast<cudaStream_t>(stream);
  // cuBLASLt's A is teeny's B and its B is teeny's A (see build); C is D, unread as beta is 0.
  if (!p.bias)
    return lib.matmul(h, p.op, alpha, b, p.a, a, p.b, beta, d, p.d, d, p.d, &p.algo, workspace, workspace_bytes, s);
  // cublasLtMatmul reads the bias pointer from the descriptor when called, and a captured graph
  // keeps the pointer it was given then.
  const std::lock_guard<std::mutex> lock(p.bias_mutex);
  const cublasStatus_t set_status = set(lib, p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  if (set_status != CUBLAS_STATUS_SUCCESS) return set_status;
  return lib.matmul(h, p.op, alpha, b, p.a, a, p.b, beta, d, p.d, d, p.d, &p.algo, workspace, workspace_bytes, s);
}

void gemm_destroy(void* plan) noexcept { delete static_cast<Plan*>(plan); }

const char* blas_status_name(int status) noexcept {
  if (status == blas_not_loaded) return "blas_not_loaded";
  if (status == blas_no_algorithm) return "blas_no_algorithm";
  const Library& lib = library();
  if (lib.status == 0) return lib.status_name(static_cast<cublasStatus_t>(status));
  const StatusText* s = find_status(status);
  return s != nullptr ? s->name : "unrecognized status";
}

const char* blas_status_string(int status) noexcept {
  if (status == blas_not_loaded) return library().so.not_loaded();
  if (status == blas_no_algorithm) return "teeny: cuBLASLt's heuristic offered no algorithm for this GEMM";
  const Library& lib = library();
  if (lib.status == 0) return lib.status_string(static_cast<cublasStatus_t>(status));
  const StatusText* s = find_status(status);
  return s != nullptr ? s->text : "unrecognized status";
}

}  // namespace teeny::cuda_kernels
