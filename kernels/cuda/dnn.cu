// cuDNN behind dnn.hpp. The library is dlopen'ed, never linked: cudnn.h is included for its types
// and enums only, and every function is called through a pointer resolved with dlsym. The legacy
// convolution API (descriptors, cudnnConvolutionForward) is the one used: it covers what the conv
// op needs (groups, dilation, asymmetric strides) and is exported by libcudnn.so.9 itself.
#include <cudnn.h>

#include <cstdint>
#include <new>

#include "cuda/dnn.hpp"
#include "cuda/runtime_library.hpp"

namespace teeny::cuda_kernels {

namespace {

// The entry points teeny uses, resolved once per process. The library is never dlclose'd: handles
// and plans may outlive any one user of it.
struct Library {
  RuntimeLibrary so{"libcudnn.so.9", "cuDNN"};
  int status = dnn_not_loaded;
  decltype(&cudnnCreate) create = nullptr;
  decltype(&cudnnDestroy) destroy = nullptr;
  decltype(&cudnnSetStream) set_stream = nullptr;
  decltype(&cudnnGetErrorString) error_string = nullptr;
  decltype(&cudnnCreateTensorDescriptor) tensor_create = nullptr;
  decltype(&cudnnDestroyTensorDescriptor) tensor_destroy = nullptr;
  decltype(&cudnnSetTensor4dDescriptor) tensor_set = nullptr;
  decltype(&cudnnCreateFilterDescriptor) filter_create = nullptr;
  decltype(&cudnnDestroyFilterDescriptor) filter_destroy = nullptr;
  decltype(&cudnnSetFilter4dDescriptor) filter_set = nullptr;
  decltype(&cudnnCreateConvolutionDescriptor) conv_create = nullptr;
  decltype(&cudnnDestroyConvolutionDescriptor) conv_destroy = nullptr;
  decltype(&cudnnSetConvolution2dDescriptor) conv_set = nullptr;
  decltype(&cudnnSetConvolutionGroupCount) conv_set_groups = nullptr;
  decltype(&cudnnSetConvolutionMathType) conv_set_math = nullptr;
  decltype(&cudnnGetConvolution2dForwardOutputDim) output_dim = nullptr;
  decltype(&cudnnGetConvolutionForwardAlgorithmMaxCount) algorithm_count = nullptr;
  decltype(&cudnnGetConvolutionForwardAlgorithm_v7) heuristic = nullptr;
  decltype(&cudnnConvolutionForward) forward = nullptr;
};

Library load() noexcept {
  Library lib;
  const bool resolved = lib.so.resolve("cudnnCreate", lib.create) && lib.so.resolve("cudnnDestroy", lib.destroy) &&
                        lib.so.resolve("cudnnSetStream", lib.set_stream) &&
                        lib.so.resolve("cudnnGetErrorString", lib.error_string) &&
                        lib.so.resolve("cudnnCreateTensorDescriptor", lib.tensor_create) &&
                        lib.so.resolve("cudnnDestroyTensorDescriptor", lib.tensor_destroy) &&
                        lib.so.resolve("cudnnSetTensor4dDescriptor", lib.tensor_set) &&
                        lib.so.resolve("cudnnCreateFilterDescriptor", lib.filter_create) &&
                        lib.so.resolve("cudnnDestroyFilterDescriptor", lib.filter_destroy) &&
                        lib.so.resolve("cudnnSetFilter4dDescriptor", lib.filter_set) &&
                        lib.so.resolve("cudnnCreateConvolutionDescriptor", lib.conv_create) &&
                        lib.so.resolve("cudnnDestroyConvolutionDescriptor", lib.conv_destroy) &&
                        lib.so.resolve("cudnnSetConvolution2dDescriptor", lib.conv_set) &&
                        lib.so.resolve("cudnnSetConvolutionGroupCount", lib.conv_set_groups) &&
                        lib.so.resolve("cudnnSetConvolutionMathType", lib.conv_set_math) &&
                        lib.so.resolve("cudnnGetConvolution2dForwardOutputDim", lib.output_dim) &&
                        lib.so.resolve("cudnnGetConvolutionForwardAlgorithmMaxCount", lib.algorithm_count) &&
                        lib.so.resolve("cudnnGetConvolutionForwardAlgorithm_v7", lib.heuristic) &&
                        lib.so.resolve("cudnnConvolutionForward", lib.forward);
  if (!resolved) {
    // Status stays dnn_not_loaded, so no pointer is ever called.
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

constexpr std::uintptr_t min_alignment = 16;
bool aligned(const void* p) noexcept { return reinterpret_cast<std::uintptr_t>(p) % min_alignment == 0; }

// A planned convolution: the descriptors it owns and the algorithm chosen.
struct Plan {
  bool f64 = false;  // alpha and beta are doubles, else floats (cuDNN's rule for f64 data)
  cudnnTensorDescriptor_t x = nullptr;
  cudnnFilterDescriptor_t filter = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnTensorDescriptor_t y = nullptr;
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  std::size_t workspace = 0;

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    const Library& lib = library();  // loaded: a plan exists only if it was
    if (y != nullptr) lib.tensor_destroy(y);
    if (conv != nullptr) lib.conv_destroy(conv);
    if (filter != nullptr) lib.filter_destroy(filter);
    if (x != nullptr) lib.tensor_destroy(x);
  }
};

struct Types {
  cudnnDataType_t data;
  cudnnDataType_t compute;
};

Types types_of(DnnType type) noexcept {
  switch (type) {
    case DnnType::f64: return {CUDNN_DATA_DOUBLE, CUDNN_DATA_DOUBLE};
    case DnnType::f16: return {CUDNN_DATA_HALF, CUDNN_DATA_FLOAT};
    case DnnType::bf16: return {CUDNN_DATA_BFLOAT16, CUDNN_DATA_FLOAT};
    case DnnType::f32: break;
  }
  return {CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT};
}

// Whether an algorithm's math keeps the precision asked for: f32 without TF32 runs on FMAs only
// (CUDNN_DEFAULT_MATH lets Ampere and later use TF32 for f32); the others take what cuDNN offers.
bool precision_kept(const ConvDesc& d, cudnnMathType_t math) noexcept {
  return d.type != DnnType::f32 || d.tf32 || math == CUDNN_FMA_MATH;
}

bool valid(const ConvDesc& d) noexcept {
  constexpr std::int64_t int32_max = 0x7fffffff;  // the legacy API's dims, and its element counts
  const std::int64_t dims[] = {d.n,        d.c,        d.h,          d.w,          d.o,      d.kernel_h, d.kernel_w,
                               d.stride_h, d.stride_w, d.dilation_h, d.dilation_w, d.groups, d.out_h,    d.out_w};
  for (const std::int64_t v : dims) {
    if (v < 1 || v > int32_max) return false;
  }
  if (d.pad_h < 0 || d.pad_w < 0 || d.pad_h > int32_max || d.pad_w > int32_max) return false;
  if (static_cast<int>(d.type) > static_cast<int>(DnnType::bf16)) return false;
  if (d.c % d.groups != 0 || d.o % d.groups != 0) return false;
  // Element counts: each tensor within int32 (products of values each below 2^31: checked in steps).
  const auto fits = [](std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t e) {
    return a * b <= int32_max && a * b * c <= int32_max && a * b * c * e <= int32_max;
  };
  return fits(d.n, d.c, d.h, d.w) && fits(d.o, d.c / d.groups, d.kernel_h, d.kernel_w) &&
         fits(d.n, d.o, d.out_h, d.out_w);
}

int build(const Library& lib, Plan& plan, cudnnHandle_t handle, const ConvDesc& d,
          std::size_t workspace_bytes) noexcept {
  const Types t = types_of(d.type);
  plan.f64 = d.type == DnnType::f64;
  const auto i = [](std::int64_t v) { return static_cast<int>(v); };
  cudnnStatus_t s = lib.tensor_create(&plan.x);
  if (s == CUDNN_STATUS_SUCCESS) s = lib.tensor_set(plan.x, CUDNN_TENSOR_NCHW, t.data, i(d.n), i(d.c), i(d.h), i(d.w));
  if (s == CUDNN_STATUS_SUCCESS) s = lib.filter_create(&plan.filter);
  if (s == CUDNN_STATUS_SUCCESS) {
    s = lib.filter_set(plan.filter, t.data, CUDNN_TENSOR_NCHW, i(d.o), i(d.c / d.groups), i(d.kernel_h), i(d.kernel_w));
  }
  if (s == CUDNN_STATUS_SUCCESS) s = lib.conv_create(&plan.conv);
  if (s == CUDNN_STATUS_SUCCESS) {
    // PyTorch's convolution is cuDNN's cross-correlation (the filter not flipped).
    s = lib.conv_set(plan.conv, i(d.pad_h), i(d.pad_w), i(d.stride_h), i(d.stride_w), i(d.dilation_h), i(d.dilation_w),
                     CUDNN_CROSS_CORRELATION, t.compute);
  }
  if (s == CUDNN_STATUS_SUCCESS) s = lib.conv_set_groups(plan.conv, i(d.groups));
  const cudnnMathType_t asked = d.type == DnnType::f32 && !d.tf32 ? CUDNN_FMA_MATH
                                : d.type == DnnType::f64          ? CUDNN_DEFAULT_MATH
                                                                  : CUDNN_TENSOR_OP_MATH;
  if (s == CUDNN_STATUS_SUCCESS) s = lib.conv_set_math(plan.conv, asked);
  if (s != CUDNN_STATUS_SUCCESS) return s;
  // The output size cuDNN computes must be the one the caller planned memory for.
  int n = 0, o = 0, h = 0, w = 0;
  s = lib.output_dim(plan.conv, plan.x, plan.filter, &n, &o, &h, &w);
  if (s != CUDNN_STATUS_SUCCESS) return s;
  if (n != d.n || o != d.o || h != d.out_h || w != d.out_w) return CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH;
  s = lib.tensor_create(&plan.y);
  if (s == CUDNN_STATUS_SUCCESS) s = lib.tensor_set(plan.y, CUDNN_TENSOR_NCHW, t.data, n, o, h, w);
  if (s != CUDNN_STATUS_SUCCESS) return s;
  // cuDNN's heuristic ranks every forward algorithm (fastest first, by its model); the first that is
  // deterministic, fits the workspace and keeps the precision is the plan's.
  int count = 0;
  s = lib.algorithm_count(handle, &count);
  if (s != CUDNN_STATUS_SUCCESS) return s;
  constexpr int kMaxAlgorithms = 16;
  cudnnConvolutionFwdAlgoPerf_t results[kMaxAlgorithms];
  int returned = 0;
  s = lib.heuristic(handle, plan.x, plan.filter, plan.conv, plan.y, count < kMaxAlgorithms ? count : kMaxAlgorithms,
                    &returned, results);
  if (s != CUDNN_STATUS_SUCCESS) return s;
  for (int r = 0; r < returned; ++r) {
    const cudnnConvolutionFwdAlgoPerf_t& p = results[r];
    if (p.status != CUDNN_STATUS_SUCCESS || p.memory > workspace_bytes || p.determinism != CUDNN_DETERMINISTIC ||
        !precision_kept(d, p.mathType)) {
      continue;
    }
    // Run with the math type the heuristic ranked the algorithm under, as cuDNN asks.
    s = lib.conv_set_math(plan.conv, p.mathType);
    if (s != CUDNN_STATUS_SUCCESS) return s;
    plan.algo = p.algo;
    plan.workspace = p.memory;
    return 0;
  }
  return dnn_no_algorithm;
}

// cudnnConvolutionFwdAlgo_t's names, by value.
constexpr const char* algorithm_names[] = {
    "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM", "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM",
    "CUDNN_CONVOLUTION_FWD_ALGO_GEMM",          "CUDNN_CONVOLUTION_FWD_ALGO_DIRECT",
    "CUDNN_CONVOLUTION_FWD_ALGO_FFT",           "CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING",
    "CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD",      "CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED",
};

}  // namespace

int dnn_load(const char*& why) noexcept {
  const Library& lib = library();
  why = lib.so.why();
  return lib.status;
}

int dnn_create(void*& handle) noexcept {
  handle = nullptr;
  const Library& lib = library();
  if (lib.status != 0) return dnn_not_loaded;
  return make_handle<cudnnHandle_t>(handle, lib.create);
}

void dnn_destroy(void* handle) noexcept {
  const Library& lib = library();
  if (lib.status == 0 && handle != nullptr) lib.destroy(static_cast<cudnnHandle_t>(handle));
}

int conv_plan(void*& plan, void* handle, const ConvDesc& desc, std::size_t workspace_bytes) noexcept {
  plan = nullptr;
  const Library& lib = library();
  if (lib.status != 0) return dnn_not_loaded;
  if (!valid(desc)) return CUDNN_STATUS_BAD_PARAM;
  if (handle == nullptr) return CUDNN_STATUS_NOT_INITIALIZED;
  return make_plan<Plan>(plan, CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED, [&](Plan& p) {
    return build(lib, p, static_cast<cudnnHandle_t>(handle), desc, workspace_bytes);
  });
}

const char* conv_algorithm_name(const void* plan) noexcept {
  if (plan == nullptr) return "no plan";
  const auto algo = static_cast<int>(static_cast<const Plan*>(plan)->algo);
  constexpr int known = sizeof algorithm_names / sizeof algorithm_names[0];
  return algo >= 0 && algo < known ? algorithm_names[algo] : "an algorithm teeny has no name for";
}

int conv_run(const void* plan, void* handle, const void* x, const void* filter, void* y, void* workspace,
             std::size_t workspace_bytes, void* stream) noexcept {
  const Library& lib = library();
  if (lib.status != 0) return dnn_not_loaded;
  if (handle == nullptr) return CUDNN_STATUS_NOT_INITIALIZED;
  if (plan == nullptr || x == nullptr || filter == nullptr || y == nullptr) return CUDNN_STATUS_BAD_PARAM_NULL_POINTER;
  if (!aligned(x) || !aligned(filter) || !aligned(y)) return CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER;
  const Plan& p = *static_cast<const Plan*>(plan);
  if (p.workspace > workspace_bytes || (p.workspace > 0 && workspace == nullptr)) {
    return CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT;
  }
  const auto h = static_cast<cudnnHandle_t>(handle);
  // The handle queues on the stream set last: set it every time, as handles may be shared.
  cudnnStatus_t s = lib.set_stream(h, static_cast<cudaStream_t>(stream));
  if (s != CUDNN_STATUS_SUCCESS) return s;
  // Host scalars, read when the call is made (so a captured graph keeps their values).
  const float alpha32 = 1.0f;
  const float beta32 = 0.0f;
  const double alpha64 = 1.0;
  const double beta64 = 0.0;
  const void* alpha = p.f64 ? static_cast<const void*>(&alpha64) : &alpha32;
  const void* beta = p.f64 ? static_cast<const void*>(&beta64) : &beta32;
  return lib.forward(h, alpha, p.x, x, p.filter, filter, p.conv, p.algo, workspace, p.workspace, beta, p.y, y);
}

void conv_destroy(void* plan) noexcept { delete static_cast<Plan*>(plan); }

const char* dnn_status_name(int status) noexcept {
  if (status == dnn_not_loaded) return "dnn_not_loaded";
  if (status == dnn_no_algorithm) return "dnn_no_algorithm";
  const Library& lib = library();
  if (lib.status == 0) return lib.error_string(static_cast<cudnnStatus_t>(status));
  return status == 0 ? "CUDNN_STATUS_SUCCESS" : "a cuDNN status (cuDNN is not loaded to name it)";
}

const char* dnn_status_string(int status) noexcept {
  if (status == dnn_not_loaded) return library().so.not_loaded();
  if (status == dnn_no_algorithm) {
    return "teeny: cuDNN offers no deterministic algorithm for this convolution within the workspace and precision";
  }
  // cuDNN 9 groups its statuses by thousands.
  switch (status / 1000) {
    case 0: return status == 0 ? "success" : "unrecognized status";
    case 1: return "cuDNN was not initialized, or a part of it could not be loaded";
    case 2: return "a parameter given to cuDNN was invalid";
    case 3: return "cuDNN does not support this configuration";
    case 4: return "cuDNN failed internally";
    case 5: return "cuDNN's work failed on the GPU";
    default: return "unrecognized status";
  }
}

}  // namespace teeny::cuda_kernels
