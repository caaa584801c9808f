// Normalisation kernels: batch norm (the eval phase: running statistics, or the batch's own
// without them), layer norm, RMS norm and group norm, one block a channel, row or group, its
// statistics summed in double over the block as the CPU kernels sum them (two passes: the mean,
// then squared deviations). Instantiated per element type as teeny_<op>_<dtype>; the affine
// forms are kernels/math/norm.hpp's.
#include <cuda_runtime.h>

#include "cuda/device_tensor.cuh"
#include "cuda/registry.hpp"
#include "math/norm.hpp"

namespace teeny::cuda_kernels {
namespace {

struct Moments {
  double mean = 0;
  double var = 0;
};

// Mean and biased variance of `runs` runs of `length` elements, `stride` apart, over the block.
template <class T>
__device__ Moments block_moments(const T* x, std::int64_t runs, std::int64_t length, std::int64_t stride) {
  const std::int64_t count = runs * length;
  if (count == 0) return {};
  double sum = 0;
  for (std::int64_t i = threadIdx.x; i < count; i += blockDim.x)
    sum += static_cast<double>(load(x + (i / length) * stride + i % length));
  const double mean = block_sum(sum) / static_cast<double>(count);
  double squares = 0;
  for (std::int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    const double d = static_cast<double>(load(x + (i / length) * stride + i % length)) - mean;
    squares += d * d;
  }
  return {mean, block_sum(squares) / static_cast<double>(count)};
}

template <class T>
__device__ double value_or(const DeviceTensor<const T>& t, std::int64_t i, double otherwise) {
  return t.data != nullptr ? static_cast<double>(load(t.data + i)) : otherwise;
}

template <class T>
__device__ void batch_norm(const DeviceTensor<const T>& x, const DeviceTensor<const T>& weight,
                           const DeviceTensor<const T>& bias, const DeviceTensor<T>& running_mean,
                           const DeviceTensor<T>& running_var, const DeviceTensor<T>& y, double eps,
                           const math::Epilogue& epilogue) {
  using C = compute_t<T>;
  const std::int64_t n = x.shape[0];
  const std::int64_t channels = x.shape[1];
  const std::int64_t s = x.shape[2];
  for (std::int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
    Moments m;
    if (running_mean.data != nullptr) {
      m = {static_cast<double>(load(running_mean.data + c)), static_cast<double>(load(running_var.data + c))};
    } else {
      m = block_moments(x.data + c * s, n, s, channels * s);
    }
    const auto affine = math::batch_norm_affine(value_or(weight, c, 1.0), value_or(bias, c, 0.0), m.mean, m.var, eps);
    const auto scale = static_cast<C>(affine.scale);
    const auto shift = static_cast<C>(affine.shift);
    for (std::int64_t i = threadIdx.x; i < n * s; i += blockDim.x) {
      const std::int64_t offset = ((i / s) * channels + c) * s + i % s;
      store(y.data + offset, math::apply_epilogue(epilogue, load(x.data + offset) * scale + shift));
    }
  }
}

template <class T>
__device__ void layer_norm(const DeviceTensor<const T>& x, const DeviceTensor<const T>& weight,
                           const DeviceTensor<const T>& bias, const DeviceTensor<T>& y, double eps) {
  using C = compute_t<T>;
  const std::int64_t rows = x.shape[0];
  const std::int64_t d = x.shape[1];
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const Moments m = block_moments(x.data + r * d, 1, d, d);
    const auto norm = math::normalize_affine(m.mean, m.var, eps);
    for (std::int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      C v = load(x.data + r * d + i) * static_cast<C>(norm.scale) + static_cast<C>(norm.shift);
      if (weight.data != nullptr) v = v * load(weight.data + i) + (bias.data != nullptr ? load(bias.data + i) : C(0));
      store(y.data + r * d + i, v);
    }
  }
}

template <class T>
__device__ void rms_norm(const DeviceTensor<const T>& x, const DeviceTensor<const T>& weight, const DeviceTensor<T>& y,
                         double eps) {
  using C = compute_t<T>;
  const std::int64_t rows = x.shape[0];
  const std::int64_t d = x.shape[1];
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    double squares = 0;
    for (std::int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      const double v = static_cast<double>(load(x.data + r * d + i));
      squares += v * v;
    }
    squares = block_sum(squares);
    const auto scale = static_cast<C>(math::rms_norm_scale(d == 0 ? 0.0 : squares / static_cast<double>(d), eps));
    for (std::int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      C v = load(x.data + r * d + i) * scale;
      if (weight.data != nullptr) v = v * load(weight.data + i);
      store(y.data + r * d + i, v);
    }
  }
}

template <class T>
__device__ void group_norm(const DeviceTensor<const T>& x, const DeviceTensor<const T>& weight,
                           const DeviceTensor<const T>& bias, const DeviceTensor<T>& y, std::int64_t groups,
                           double eps) {
  using C = compute_t<T>;
  const std::int64_t channels = x.shape[1];
  const std::int64_t s = x.shape[2];
  const std::int64_t per_group = channels / groups;
  const std::int64_t span = per_group * s;  // a group's channels are contiguous
  const std::int64_t blocks = x.shape[0] * groups;
  for (std::int64_t ng = blockIdx.x; ng < blocks; ng += gridDim.x) {
    const Moments m = block_moments(x.data + ng * span, 1, span, span);
    const auto norm = math::normalize_affine(m.mean, m.var, eps);
    for (std::int64_t i = threadIdx.x; i < span; i += blockDim.x) {
      const std::int64_t c = (ng % groups) * per_group + i / s;
      const double w = value_or(weight, c, 1.0);
      const C scale = static_cast<C>(norm.scale * w);
      const C shift = static_cast<C>(norm.shift * w + value_or(bias, c, 0.0));
      store(y.data + ng * span + i, load(x.data + ng * span + i) * scale + shift);
    }
  }
}

}  // namespace
}  // namespace teeny::cuda_kernels

using teeny::cuda_kernels::DeviceTensor;

#define TEENY_NORM_ENTRIES(T, suffix)                                                                                  \
  extern "C" __global__ void teeny_batch_norm_##suffix(                                                                \
      DeviceTensor<const T> x, DeviceTensor<const T> weight, DeviceTensor<const T> bias, DeviceTensor<T> running_mean, \
      DeviceTensor<T> running_var, DeviceTensor<T> y, double eps, teeny::math::Epilogue epilogue,                      \
      DeviceTensor<std::int64_t>, double) {                                                                            \
    teeny::cuda_kernels::batch_norm<T>(x, weight, bias, running_mean, running_var, y, eps, epilogue);                  \
  }                                                                                                                    \
  extern "C" __global__ void teeny_layer_norm_##suffix(DeviceTensor<const T> x, DeviceTensor<const T> weight,          \
                                                       DeviceTensor<const T> bias, DeviceTensor<T> y, double eps) {    \
    teeny::cuda_kernels::layer_norm<T>(x, weight, bias, y, eps);                                                       \
  }                                                                                                                    \
  extern "C" __global__ void teeny_rms_norm_##suffix(DeviceTensor<const T> x, DeviceTensor<const T> weight,            \
                                                     DeviceTensor<const T>, DeviceTensor<T> y, double eps) {           \
    teeny::cuda_kernels::rms_norm<T>(x, weight, y, eps);                                                               \
  }                                                                                                                    \
  extern "C" __global__ void teeny_group_norm_##suffix(DeviceTensor<const T> x, DeviceTensor<const T> weight,          \
                                                       DeviceTensor<const T> bias, DeviceTensor<T> y,                  \
                                                       std::int64_t groups, double eps) {                              \
    teeny::cuda_kernels::group_norm<T>(x, weight, bias, y, groups, eps);                                               \
  }                                                                                                                    \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::BatchNormParamList<T>,                          \
                                                  decltype(teeny_batch_norm_##suffix)>);                               \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::RowNormParamList<T>,                            \
                                                  decltype(teeny_layer_norm_##suffix)>);                               \
  static_assert(                                                                                                       \
      teeny::cuda_kernels::takes_params<teeny::cuda_kernels::RowNormParamList<T>, decltype(teeny_rms_norm_##suffix)>); \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::GroupNormParamList<T>,                          \
                                                  decltype(teeny_group_norm_##suffix)>);
TEENY_CUDA_FOR_EACH_FLOAT(TEENY_NORM_ENTRIES)
#undef TEENY_NORM_ENTRIES

namespace teeny::cuda_kernels {

KernelTable norm_kernels() noexcept {
#define TEENY_NORM_ENTRY(T, suffix)                                                             \
  {"teeny_batch_norm_" #suffix, reinterpret_cast<const void*>(&teeny_batch_norm_##suffix)},     \
      {"teeny_layer_norm_" #suffix, reinterpret_cast<const void*>(&teeny_layer_norm_##suffix)}, \
      {"teeny_rms_norm_" #suffix, reinterpret_cast<const void*>(&teeny_rms_norm_##suffix)},     \
      {"teeny_group_norm_" #suffix, reinterpret_cast<const void*>(&teeny_group_norm_##suffix)},
  static const KernelEntry entries[] = {TEENY_CUDA_FOR_EACH_FLOAT(TEENY_NORM_ENTRY)};
#undef TEENY_NORM_ENTRY
  return {entries, sizeof entries / sizeof entries[0]};
}

}  // namespace teeny::cuda_kernels
