#pragma once
// cuDNN behind a plain C++ view (no CUDA or cuDNN types, like blas.hpp), for the convolutions of
// the conv op. The library is loaded at run time (dlopen of libcudnn.so.9, which loads its own
// parts) rather than linked, so that programs start, and teeny's own convolution kernel runs, where
// it is not installed. Every function reports failure as a status and never throws.
#include <cstddef>
#include <cstdint>

namespace teeny::cuda_kernels {

/// Element types of a convolution: x, the filter and y are all of one type. f16 and bf16 compute
/// in f32 (tensor cores), f64 in f64, f32 in f32 or, with `tf32`, through TF32 tensor cores.
enum class DnnType : std::uint8_t { f32, f64, f16, bf16 };

/// y = cross-correlation of x with the filter, PyTorch's Conv2d without bias: x [n, c, h, w],
/// filter [o, c / groups, kernel_h, kernel_w] and y [n, o, out_h, out_w], each contiguous (NCHW).
/// out_h and out_w are the caller's; the plan checks them against cuDNN's.
struct ConvDesc {
  DnnType type = DnnType::f32;
  bool tf32 = false;
  std::int64_t n = 0, c = 0, h = 0, w = 0;
  std::int64_t o = 0, kernel_h = 0, kernel_w = 0;
  std::int64_t pad_h = 0, pad_w = 0;
  std::int64_t stride_h = 1, stride_w = 1;
  std::int64_t dilation_h = 1, dilation_w = 1;
  std::int64_t groups = 1;
  std::int64_t out_h = 0, out_w = 0;
};

/// Statuses of the functions below: 0 is success, cuDNN's own statuses (cudnnStatus_t) keep their
/// values, and these two are teeny's.
inline constexpr int dnn_not_loaded = -1;    // libcudnn.so.9 not found, or a symbol missing
inline constexpr int dnn_no_algorithm = -2;  // no algorithm for the convolution fits the workspace
                                             // and the precision asked for

/// Loads cuDNN, once per process (later calls return the first one's result). On failure `why`
/// says what was missing (dlerror's text), and stays valid.
int dnn_load(const char*& why) noexcept;

/// A cuDNN handle (cudnnCreate), on the calling thread's current device.
int dnn_create(void*& handle) noexcept;
void dnn_destroy(void* handle) noexcept;

/// Plans one convolution: its descriptors, and the fastest algorithm by cuDNN's heuristic among
/// the deterministic ones that need at most `workspace_bytes` and keep the precision asked for
/// (no TF32 for f32 unless `tf32`). `plan` is then run as often as needed.
int conv_plan(void*& plan, void* handle, const ConvDesc& desc, std::size_t workspace_bytes) noexcept;
/// The algorithm a plan chose, cuDNN's name for it ("CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM").
const char* conv_algorithm_name(const void* plan) noexcept;
/// Queues a planned convolution on `stream` (nullptr: the default stream; capturable in a CUDA
/// graph): pointers to device memory, 16-byte aligned.
int conv_run(const void* plan, void* handle, const void* x, const void* filter, void* y, void* workspace,
             std::size_t workspace_bytes, void* stream) noexcept;
void conv_destroy(void* plan) noexcept;

/// cuDNN's name of a status ("CUDNN_STATUS_NOT_SUPPORTED"), or teeny's for its own two; and what
/// it means.
const char* dnn_status_name(int status) noexcept;
const char* dnn_status_string(int status) noexcept;

}  // namespace teeny::cuda_kernels
