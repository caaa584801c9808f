// Pooling kernels over [planes, H, W]: max, average and adaptive average, one output element a
// thread, instantiated per element type as teeny_<op>_<dtype>; and their backward kernels
// (training), one input element a thread gathering the windows that read it, so that overlapping
// windows add without atomics, deterministically. Which inputs a window reads and what an average
// divides by is kernels/math/pool.hpp's, the CPU backend's own.
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

// The max-pool window at output (oh, ow) of plane `in` [h, w]: its maximum by max_pool_wins's rule
// (NaN wins), and where that value is: the first maximum, or the last NaN. The forward keeps the
// value; the backward, the place.
template <class T>
struct MaxWinner {
  compute_t<T> value;
  std::int64_t ih, iw;
};
template <class T>
__device__ MaxWinner<T> max_window(const T* in, std::int64_t h, std::int64_t w, std::int64_t oh, std::int64_t ow,
                                   const math::Window2d& win) {
  using C = compute_t<T>;
  const math::MaxSpan rows = math::max_pool_span(oh, win.kernel_h, win.stride_h, win.pad_h, win.dilation_h, h);
  const math::MaxSpan cols = math::max_pool_span(ow, win.kernel_w, win.stride_w, win.pad_w, win.dilation_w, w);
  MaxWinner<T> best{-C(INFINITY), rows.first, cols.first};
  for (std::int64_t ih = rows.first; ih < rows.end; ih += win.dilation_h) {
    for (std::int64_t iw = cols.first; iw < cols.end; iw += win.dilation_w) {
      const C v = load(in + ih * w + iw);
      if (math::max_pool_wins(best.value, v)) best = {v, ih, iw};
    }
  }
  return best;
}

template <class T>
__device__ void max_pool2d(const DeviceTensor<const T>& x, const DeviceTensor<T>& y, const math::Window2d& win) {
  const std::int64_t n = element_count(y);
  const std::int64_t h = x.shape[1];
  const std::int64_t w = x.shape[2];
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    const PoolSite s = pool_site(y, i);
    store(y.data + i, max_window(x.data + s.plane * h * w, h, w, s.oh, s.ow, win).value);
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

// ---- Backward kernels (training) ----

// Input element i of x [planes, H, W] as (plane, ih, iw).
struct InputSite {
  std::int64_t plane, ih, iw;
};
template <class T>
__device__ InputSite input_site(const DeviceTensor<T>& x, std::int64_t i) {
  const std::int64_t w = x.shape[2];
  const std::int64_t h = x.shape[1];
  return {i / (h * w), (i / w) % h, i % w};
}

// The output positions along one dim whose max-pool window reads input position `in`: those with
// o * stride - pad + k * dilation == in for a tap k, ascending (o falls as k rises).
struct MaxTaps {
  std::int64_t in, kernel, stride, pad, dilation, outputs;
  // The output of tap k, or -1 where no output's tap k lands on `in`.
  __device__ std::int64_t output(std::int64_t k) const {
    const std::int64_t t = in + pad - k * dilation;
    if (t < 0 || t % stride != 0 || t / stride >= outputs) return -1;
    return t / stride;
  }
};

// dx[i] += dy of every window whose winner is x[i]: the first maximum, or the last NaN, as the
// forward (and the CPU's backward) picks it. One thread per input element recomputes the winner of
// each window that reads it.
template <class T>
__device__ void max_pool2d_backward(const DeviceTensor<const T>& x, const math::Window2d& win,
                                    const DeviceTensor<T>& dy, const DeviceTensor<T>& dx) {
  using C = compute_t<T>;
  if (dx.data == nullptr) return;
  const std::int64_t n = element_count(dx);
  const std::int64_t h = x.shape[1];
  const std::int64_t w = x.shape[2];
  const std::int64_t ho = dy.shape[1];
  const std::int64_t wo = dy.shape[2];
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    const InputSite s = input_site(dx, i);
    const T* in = x.data + s.plane * h * w;
    const T* grad = dy.data + s.plane * ho * wo;
    const MaxTaps row_taps{s.ih, win.kernel_h, win.stride_h, win.pad_h, win.dilation_h, ho};
    const MaxTaps col_taps{s.iw, win.kernel_w, win.stride_w, win.pad_w, win.dilation_w, wo};
    C acc = load(dx.data + i);
    for (std::int64_t kh = win.kernel_h - 1; kh >= 0; --kh) {
      const std::int64_t oh = row_taps.output(kh);
      if (oh < 0) continue;
      for (std::int64_t kw = win.kernel_w - 1; kw >= 0; --kw) {
        const std::int64_t ow = col_taps.output(kw);
        if (ow < 0) continue;
        const MaxWinner<T> best = max_window(in, h, w, oh, ow, win);
        if (best.ih == s.ih && best.iw == s.iw) acc += load(grad + oh * wo + ow);
      }
    }
    store(dx.data + i, acc);
  }
}

// The outputs [begin, end) along one dim whose average-pool window sums input position `in`: the
// windows [o * stride - pad, + kernel) that reach it, each checked against avg_pool_span.
struct AvgOutputs {
  std::int64_t begin, end;
};
__device__ inline AvgOutputs avg_pool_outputs(std::int64_t in, std::int64_t kernel, std::int64_t stride,
                                              std::int64_t pad, std::int64_t outputs) {
  const std::int64_t last = (in + pad) / stride;  // in + pad >= 0
  const std::int64_t reach = in + pad - kernel;   // a window starting at or before it ends before in
  const std::int64_t first = reach < 0 ? 0 : reach / stride + 1;
  return {first, last + 1 < outputs ? last + 1 : outputs};
}

// dx[i] += dy / divisor of every window that sums x[i], one thread per input element.
template <class T>
__device__ void avg_pool2d_backward(const math::Window2d& win, bool count_include_pad, std::int64_t divisor_override,
                                    const DeviceTensor<T>& dy, const DeviceTensor<T>& dx) {
  using C = compute_t<T>;
  if (dx.data == nullptr) return;
  const std::int64_t n = element_count(dx);
  const std::int64_t h = dx.shape[1];
  const std::int64_t w = dx.shape[2];
  const std::int64_t ho = dy.shape[1];
  const std::int64_t wo = dy.shape[2];
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    const InputSite s = input_site(dx, i);
    const T* grad = dy.data + s.plane * ho * wo;
    const AvgOutputs out_rows = avg_pool_outputs(s.ih, win.kernel_h, win.stride_h, win.pad_h, ho);
    const AvgOutputs out_cols = avg_pool_outputs(s.iw, win.kernel_w, win.stride_w, win.pad_w, wo);
    C acc = load(dx.data + i);
    for (std::int64_t oh = out_rows.begin; oh < out_rows.end; ++oh) {
      const math::AvgSpan rows = math::avg_pool_span(oh, win.kernel_h, win.stride_h, win.pad_h, h);
      if (s.ih < rows.begin || s.ih >= rows.end) continue;
      for (std::int64_t ow = out_cols.begin; ow < out_cols.end; ++ow) {
        const math::AvgSpan cols = math::avg_pool_span(ow, win.kernel_w, win.stride_w, win.pad_w, w);
        if (s.iw < cols.begin || s.iw >= cols.end) continue;
        const std::int64_t divisor = math::avg_pool_divisor(rows, cols, count_include_pad, divisor_override);
        acc += load(grad + oh * wo + ow) / static_cast<C>(divisor);
      }
    }
    store(dx.data + i, acc);
  }
}

// dx[i] += dy / the region's size of every adaptive region that holds x[i], one thread per input
// element. The regions holding input position `in` of `size` are the outputs [adaptive_begin(in,
// outputs, size), adaptive_end(in, outputs, size)), the rule turned around (as PyTorch's backward
// finds them); each is checked against its region anyway.
template <class T>
__device__ void adaptive_avg_pool2d_backward(const DeviceTensor<T>& dy, const DeviceTensor<T>& dx) {
  using C = compute_t<T>;
  if (dx.data == nullptr) return;
  const std::int64_t n = element_count(dx);
  const std::int64_t h = dx.shape[1];
  const std::int64_t w = dx.shape[2];
  const std::int64_t ho = dy.shape[1];
  const std::int64_t wo = dy.shape[2];
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    const InputSite s = input_site(dx, i);
    const T* grad = dy.data + s.plane * ho * wo;
    const std::int64_t oh0 = math::adaptive_begin(s.ih, ho, h);
    const std::int64_t oh1 = math::adaptive_end(s.ih, ho, h);
    const std::int64_t ow0 = math::adaptive_begin(s.iw, wo, w);
    const std::int64_t ow1 = math::adaptive_end(s.iw, wo, w);
    C acc = load(dx.data + i);
    for (std::int64_t oh = oh0; oh < oh1 && oh < ho; ++oh) {
      const std::int64_t h0 = math::adaptive_begin(oh, h, ho);
      const std::int64_t h1 = math::adaptive_end(oh, h, ho);
      if (s.ih < h0 || s.ih >= h1) continue;
      for (std::int64_t ow = ow0; ow < ow1 && ow < wo; ++ow) {
        const std::int64_t w0 = math::adaptive_begin(ow, w, wo);
        const std::int64_t w1 = math::adaptive_end(ow, w, wo);
        if (s.iw < w0 || s.iw >= w1) continue;
        // As the CPU: dy divided by the region's height, then its width.
        acc += load(grad + oh * wo + ow) / static_cast<C>(h1 - h0) / static_cast<C>(w1 - w0);
      }
    }
    store(dx.data + i, acc);
  }
}

}  // namespace
}  // namespace teeny::cuda_kernels

using teeny::cuda_kernels::DeviceTensor;

#define TEENY_POOL_ENTRIES(T, suffix)                                                                               \
  extern "C" __global__ void teeny_max_pool2d_##suffix(DeviceTensor<const T> x, DeviceTensor<T> y,                  \
                                                       teeny::math::Window2d window, bool, std::int64_t) {          \
    teeny::cuda_kernels::max_pool2d<T>(x, y, window);                                                               \
  }                                                                                                                 \
  extern "C" __global__ void teeny_avg_pool2d_##suffix(DeviceTensor<const T> x, DeviceTensor<T> y,                  \
                                                       teeny::math::Window2d window, bool count_include_pad,        \
                                                       std::int64_t divisor_override) {                             \
    teeny::cuda_kernels::avg_pool2d<T>(x, y, window, count_include_pad, divisor_override);                          \
  }                                                                                                                 \
  extern "C" __global__ void teeny_adaptive_avg_pool2d_##suffix(DeviceTensor<const T> x, DeviceTensor<T> y,         \
                                                                teeny::math::Window2d, bool, std::int64_t) {        \
    teeny::cuda_kernels::adaptive_avg_pool2d<T>(x, y);                                                              \
  }                                                                                                                 \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::Pool2dParamList<T>,                          \
                                                  decltype(teeny_max_pool2d_##suffix)>);                            \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::Pool2dParamList<T>,                          \
                                                  decltype(teeny_avg_pool2d_##suffix)>);                            \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::Pool2dParamList<T>,                          \
                                                  decltype(teeny_adaptive_avg_pool2d_##suffix)>);                   \
  extern "C" __global__ void teeny_max_pool2d_backward_##suffix(DeviceTensor<const T> x, DeviceTensor<T>,           \
                                                                teeny::math::Window2d window, bool, std::int64_t,   \
                                                                DeviceTensor<T> dy, DeviceTensor<T> dx) {           \
    teeny::cuda_kernels::max_pool2d_backward<T>(x, window, dy, dx);                                                 \
  }                                                                                                                 \
  extern "C" __global__ void teeny_avg_pool2d_backward_##suffix(                                                    \
      DeviceTensor<const T>, DeviceTensor<T>, teeny::math::Window2d window, bool count_include_pad,                 \
      std::int64_t divisor_override, DeviceTensor<T> dy, DeviceTensor<T> dx) {                                      \
    teeny::cuda_kernels::avg_pool2d_backward<T>(window, count_include_pad, divisor_override, dy, dx);               \
  }                                                                                                                 \
  extern "C" __global__ void teeny_adaptive_avg_pool2d_backward_##suffix(DeviceTensor<const T>, DeviceTensor<T>,    \
                                                                         teeny::math::Window2d, bool, std::int64_t, \
                                                                         DeviceTensor<T> dy, DeviceTensor<T> dx) {  \
    teeny::cuda_kernels::adaptive_avg_pool2d_backward<T>(dy, dx);                                                   \
  }                                                                                                                 \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::Pool2dBackwardParamList<T>,                  \
                                                  decltype(teeny_max_pool2d_backward_##suffix)>);                   \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::Pool2dBackwardParamList<T>,                  \
                                                  decltype(teeny_avg_pool2d_backward_##suffix)>);                   \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::Pool2dBackwardParamList<T>,                  \
                                                  decltype(teeny_adaptive_avg_pool2d_backward_##suffix)>);
TEENY_CUDA_FOR_EACH_FLOAT(TEENY_POOL_ENTRIES)
#undef TEENY_POOL_ENTRIES

namespace teeny::cuda_kernels {

KernelTable pool_kernels() noexcept {
#define TEENY_POOL_ENTRY(T, suffix)                                                                                   \
  TEENY_KERNEL_ENTRY(teeny_max_pool2d_##suffix), TEENY_KERNEL_ENTRY(teeny_avg_pool2d_##suffix),                       \
      TEENY_KERNEL_ENTRY(teeny_adaptive_avg_pool2d_##suffix), TEENY_KERNEL_ENTRY(teeny_max_pool2d_backward_##suffix), \
      TEENY_KERNEL_ENTRY(teeny_avg_pool2d_backward_##suffix),                                                         \
      TEENY_KERNEL_ENTRY(teeny_adaptive_avg_pool2d_backward_##suffix),
  static const KernelEntry entries[] = {TEENY_CUDA_FOR_EACH_FLOAT(TEENY_POOL_ENTRY)};
#undef TEENY_POOL_ENTRY
  return table_of(entries);
}

}  // namespace teeny::cuda_kernels
