// Pooling kernels over [planes, H, W]: max, average and adaptive average, one output element a
// thread, instantiated per element type as teeny_<op>_<dtype>. Which inputs a window reads and
// what an average divides by is kernels/math/pool.hpp's, the CPU backend's own.
#include <cuda_runtime.h>

#include "cuda/device_tensor.cuh"
#include "cuda/registry.hpp"

namespace teeny::cuda_kernels {
namespace {

// Output element i of y [planes, Ho, Wo] as (plane, oh, ow).
struct PoolSite {
  std::int64_t plane, oh, ow;
};
template <class T>
__device__ PoolSite pool_site(const DeviceTensor<T>& y, std::int64_t i) {
  const std::int64_t wo = y.shape[2];
  const std::int64_t ho = y.shape[1];
  return {i / (ho * wo), (i / wo) % ho, i % wo};
}

template <class T>
__device__ void max_pool2d(const DeviceTensor<const T>& x, const DeviceTensor<T>& y, const math::Window2d& win) {
  using C = compute_t<T>;
  const std::int64_t n = element_count(y);
  const std::int64_t h = x.shape[1];
  const std::int64_t w = x.shape[2];
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    const PoolSite s = pool_site(y, i);
    const T* in = x.data + s.plane * h * w;
    const math::MaxSpan rows = math::max_pool_span(s.oh, win.kernel_h, win.stride_h, win.pad_h, win.dilation_h, h);
    const math::MaxSpan cols = math::max_pool_span(s.ow, win.kernel_w, win.stride_w, win.pad_w, win.dilation_w, w);
    C acc = -C(INFINITY);
    for (std::int64_t ih = rows.first; ih < rows.end; ih += win.dilation_h) {
      for (std::int64_t iw = cols.first; iw < cols.end; iw += win.dilation_w) {
        acc = math::max_pool_update(acc, load(in + ih * w + iw));
      }
    }
    store(y.data + i, acc);
  }
}

template <class T>
__device__ void avg_pool2d(const DeviceTensor<const T>& x, const DeviceTensor<T>& y, const math::Window2d& win,
                           bool count_include_pad, std::int64_t divisor_override) {
  using C = compute_t<T>;
  const std::int64_t n = element_count(y);
  const std::int64_t h = x.shape[1];
  const std::int64_t w = x.shape[2];
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    const PoolSite s = pool_site(y, i);
    const T* in = x.data + s.plane * h * w;
    const math::AvgSpan rows = math::avg_pool_span(s.oh, win.kernel_h, win.stride_h, win.pad_h, h);
    const math::AvgSpan cols = math::avg_pool_span(s.ow, win.kernel_w, win.stride_w, win.pad_w, w);
    C sum = C(0);
    for (std::int64_t ih = rows.begin; ih < rows.end; ++ih) {
      for (std::int64_t iw = cols.begin; iw < cols.end; ++iw) sum += load(in + ih * w + iw);
    }
    store(y.data + i, sum / static_cast<C>(math::avg_pool_divisor(rows, cols, count_include_pad, divisor_override)));
  }
}

template <class T>
__device__ void adaptive_avg_pool2d(const DeviceTensor<const T>& x, const DeviceTensor<T>& y) {
  using C = compute_t<T>;
  const std::int64_t n = element_count(y);
  const std::int64_t h = x.shape[1];
  const std::int64_t w = x.shape[2];
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    const PoolSite s = pool_site(y, i);
    const T* in = x.data + s.plane * h * w;
    const std::int64_t h0 = math::adaptive_begin(s.oh, h, y.shape[1]);
    const std::int64_t h1 = math::adaptive_end(s.oh, h, y.shape[1]);
    const std::int64_t w0 = math::adaptive_begin(s.ow, w, y.shape[2]);
    const std::int64_t w1 = math::adaptive_end(s.ow, w, y.shape[2]);
    C sum = C(0);
    for (std::int64_t ih = h0; ih < h1; ++ih) {
      for (std::int64_t iw = w0; iw < w1; ++iw) sum += load(in + ih * w + iw);
    }
    // PyTorch divides by the window's height, then its width.
    store(y.data + i, sum / static_cast<C>(h1 - h0) / static_cast<C>(w1 - w0));
  }
}

}  // namespace
}  // namespace teeny::cuda_kernels

using teeny::cuda_kernels::DeviceTensor;

#define TEENY_POOL_ENTRIES(T, suffix)                                                                        \
  extern "C" __global__ void teeny_max_pool2d_##suffix(DeviceTensor<const T> x, DeviceTensor<T> y,           \
                                                       teeny::math::Window2d window, bool, std::int64_t) {   \
    teeny::cuda_kernels::max_pool2d<T>(x, y, window);                                                        \
  }                                                                                                          \
  extern "C" __global__ void teeny_avg_pool2d_##suffix(DeviceTensor<const T> x, DeviceTensor<T> y,           \
                                                       teeny::math::Window2d window, bool count_include_pad, \
                                                       std::int64_t divisor_override) {                      \
    teeny::cuda_kernels::avg_pool2d<T>(x, y, window, count_include_pad, divisor_override);                   \
  }                                                                                                          \
  extern "C" __global__ void teeny_adaptive_avg_pool2d_##suffix(DeviceTensor<const T> x, DeviceTensor<T> y,  \
                                                                teeny::math::Window2d, bool, std::int64_t) { \
    teeny::cuda_kernels::adaptive_avg_pool2d<T>(x, y);                                                       \
  }                                                                                                          \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::Pool2dParamList<T>,                   \
                                                  decltype(teeny_max_pool2d_##suffix)>);                     \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::Pool2dParamList<T>,                   \
                                                  decltype(teeny_avg_pool2d_##suffix)>);                     \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::Pool2dParamList<T>,                   \
                                                  decltype(teeny_adaptive_avg_pool2d_##suffix)>);
TEENY_CUDA_FOR_EACH_FLOAT(TEENY_POOL_ENTRIES)
#undef TEENY_POOL_ENTRIES

namespace teeny::cuda_kernels {

KernelTable pool_kernels() noexcept {
#define TEENY_POOL_ENTRY(T, suffix)                                                             \
  {"teeny_max_pool2d_" #suffix, reinterpret_cast<const void*>(&teeny_max_pool2d_##suffix)},     \
      {"teeny_avg_pool2d_" #suffix, reinterpret_cast<const void*>(&teeny_avg_pool2d_##suffix)}, \
      {"teeny_adaptive_avg_pool2d_" #suffix, reinterpret_cast<const void*>(&teeny_adaptive_avg_pool2d_##suffix)},
  static const KernelEntry entries[] = {TEENY_CUDA_FOR_EACH_FLOAT(TEENY_POOL_ENTRY)};
#undef TEENY_POOL_ENTRY
  return {entries, sizeof entries / sizeof entries[0]};
}

}  // namespace teeny::cuda_kernels
