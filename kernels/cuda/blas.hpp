#pragma once
// cuBLASLt behind a plain C++ view (no CUDA or cuBLAS types, like runtime.hpp), for the GEMMs of
// Linear and MatMul. The library is loaded at run time (dlopen of libcublasLt.so.13) rather than
// linked, so that programs start, and every other kernel runs, where it is not installed; teeny
// then uses its own GEMM kernels. Every function reports failure as a status and never throws.
#include <cstddef>
#include <cstdint>

namespace teeny::cuda_kernels {

/// Element types of a GEMM: A, B, the bias and D are all of one type. f16 and bf16 compute in f32
/// (tensor cores), f64 in f64, f32 in f32 or, with `tf32`, through TF32 tensor cores.
enum class BlasType : std::uint8_t { f32, f64, f16, bf16 };

/// What cuBLASLt applies to the product as its epilogue: nothing, a bias (one value per column of
/// the row-major D, the same for every row), ReLU, or the bias then ReLU.
enum class BlasEpilogue : std::uint8_t { none, bias, relu, bias_relu };

/// D = epilogue(A' B') in row-major terms, `batch` times, where A' is A [m, k] (stored [k, m] when
/// transpose_a) and B' is B [k, n] (stored [n, k] when transpose_b); D is [m, n]. Each matrix is
/// contiguous and row-major; the batch strides are in elements (0: every batch reads the same
/// matrix). The bias, where the epilogue has one, is [n].
struct GemmDesc {
  BlasType type = BlasType::f32;
  bool tf32 = false;
  std::int64_t m = 0;
  std::int64_t n = 0;
  std::int64_t k = 0;
  bool transpose_a = false;
  bool transpose_b = false;
  std::int64_t batch = 1;
  std::int64_t stride_a = 0;
  std::int64_t stride_b = 0;
  std::int64_t stride_d = 0;
  BlasEpilogue epilogue = BlasEpilogue::none;
};

/// Statuses of the functions below: 0 is success, cuBLAS's own statuses (cublasStatus_t) keep their
/// values, and these two are teeny's.
inline constexpr int blas_not_loaded = -1;    // libcublasLt.so.13 not found, or a symbol missing
inline constexpr int blas_no_algorithm = -2;  // the heuristic offered no algorithm for the GEMM

/// Loads cuBLASLt, once per process (later calls return the first one's result). On failure
/// `why` says what was missing (dlerror's text), and stays valid.
int blas_load(const char*& why) noexcept;

/// A cuBLASLt handle (cublasLtCreate), on the calling thread's current device.
int blas_create(void*& handle) noexcept;
void blas_destroy(void* handle) noexcept;

/// Plans one GEMM: its descriptors, and the algorithm cuBLASLt's heuristic ranks first among those
/// that need at most `workspace_bytes` of workspace. `plan` is then run as often as needed.
int gemm_plan(void*& plan, void* handle, const GemmDesc& desc, std::size_t workspace_bytes) noexcept;
/// Queues a planned GEMM on `stream` (nullptr: the default stream; capturable in a CUDA graph):
/// pointers to device memory, 16-byte aligned (the plan's algorithm may assume so), `bias` null
/// when the epilogue has none.
int gemm_run(const void* plan, void* handle, const void* a, const void* b, const void* bias, void* d, void* workspace,
             std::size_t workspace_bytes, void* stream) noexcept;
void gemm_destroy(void* plan) noexcept;

/// cuBLAS's name and description of a status ("CUBLAS_STATUS_NOT_SUPPORTED: ..."), or teeny's for
/// its own two.
const char* blas_status_name(int status) noexcept;
const char* blas_status_string(int status) noexcept;

}  // namespace teeny::cuda_kernels
