// Reduction kernels: softmax / log_softmax along one dim, and sum / mean / amax over a set of
// dims, instantiated per element type as teeny_<op>_<dtype>. Sums accumulate in double, as the
// CPU kernels do; the per-element rules (NaN propagation, a mean of nothing) are
// kernels/math/reduce.hpp's.
#include <cuda_runtime.h>

#include "cuda/device_tensor.cuh"
#include "cuda/registry.hpp"

namespace teeny::cuda_kernels {
namespace {

// One thread a row: x and y contiguous as [outer, n, inner], the softmax over n (stride inner).
template <class T>
__device__ void softmax(const DeviceTensor<const T>& x, const DeviceTensor<T>& y, std::int64_t outer, std::int64_t n,
                        std::int64_t inner, bool log) {
  using C = compute_t<T>;
  const std::int64_t rows = outer * inner;
  for (std::int64_t r = first_index(); r < rows; r += grid_stride()) {
    const std::int64_t base = (r / inner) * n * inner + r % inner;
    const T* in = x.data + base;
    T* out = y.data + base;
    C max = -C(INFINITY);
    for (std::int64_t i = 0; i < n; ++i) max = math::softmax_max(max, load(in + i * inner));
    double sum = 0;
    for (std::int64_t i = 0; i < n; ++i) sum += static_cast<double>(math::softmax_exp(load(in + i * inner), max));
    if (log) {
      const auto log_sum = static_cast<C>(::log(sum));
      for (std::int64_t i = 0; i < n; ++i)
        store(out + i * inner, math::log_softmax_value(load(in + i * inner), max, log_sum));
    } else {
      const auto inv = static_cast<C>(1.0 / sum);
      for (std::int64_t i = 0; i < n; ++i) store(out + i * inner, math::softmax_exp(load(in + i * inner), max) * inv);
    }
  }
}

// One thread an output element: y has x's rank, size 1 on the reduced dims (bit d of `reduced`).
template <math::ReduceFn F, class T>
__device__ void reduce_with(const DeviceTensor<const T>& x, const DeviceTensor<T>& y, std::uint32_t reduced) {
  const std::int64_t outputs = element_count(y);
  std::int64_t count = 1;
  for (int d = 0; d < x.rank; ++d) {
    if (reduced & (1u << d)) count *= x.shape[d];
  }
  for (std::int64_t o = first_index(); o < outputs; o += grid_stride()) {
    // The first input element of this output: its kept coordinates, 0 on the reduced dims.
    std::int64_t base = 0;
    std::int64_t rest = o;
    for (int d = y.rank - 1; d >= 0; --d) {
      base += (rest % y.shape[d]) * x.strides[d];
      rest /= y.shape[d];
    }
    double acc = math::reduce_identity<F, double>();
    for (std::int64_t r = 0; r < count; ++r) {
      std::int64_t offset = base;
      std::int64_t k = r;
      for (int d = x.rank - 1; d >= 0; --d) {
        if ((reduced & (1u << d)) == 0) continue;
        offset += (k % x.shape[d]) * x.strides[d];
        k /= x.shape[d];
      }
      acc = math::reduce_step<F>(acc, static_cast<double>(load(x.data + offset)));
    }
    store(y.data + o, static_cast<compute_t<T>>(math::reduce_finish<F>(acc, count)));
  }
}

template <class T>
__device__ void reduce(const DeviceTensor<const T>& x, const DeviceTensor<T>& y, math::ReduceFn fn,
                       std::uint32_t reduced) {
  switch (fn) {
    case math::ReduceFn::sum: reduce_with<math::ReduceFn::sum>(x, y, reduced); break;
    case math::ReduceFn::mean: reduce_with<math::ReduceFn::mean>(x, y, reduced); break;
    case math::ReduceFn::max: reduce_with<math::ReduceFn::max>(x, y, reduced); break;
  }
}

}  // namespace
}  // namespace teeny::cuda_kernels

using teeny::cuda_kernels::DeviceTensor;

#define TEENY_REDUCE_ENTRIES(T, suffix)                                                                               \
  extern "C" __global__ void teeny_softmax_##suffix(DeviceTensor<const T> x, DeviceTensor<T> y, std::int64_t outer,   \
                                                    std::int64_t n, std::int64_t inner, bool log) {                   \
    teeny::cuda_kernels::softmax<T>(x, y, outer, n, inner, log);                                                      \
  }                                                                                                                   \
  extern "C" __global__ void teeny_reduce_##suffix(DeviceTensor<const T> x, DeviceTensor<T> y,                        \
                                                   teeny::math::ReduceFn fn, std::uint32_t reduced) {                 \
    teeny::cuda_kernels::reduce<T>(x, y, fn, reduced);                                                                \
  }                                                                                                                   \
  static_assert(                                                                                                      \
      teeny::cuda_kernels::takes_params<teeny::cuda_kernels::SoftmaxParamList<T>, decltype(teeny_softmax_##suffix)>); \
  static_assert(                                                                                                      \
      teeny::cuda_kernels::takes_params<teeny::cuda_kernels::ReduceParamList<T>, decltype(teeny_reduce_##suffix)>);
TEENY_CUDA_FOR_EACH_FLOAT(TEENY_REDUCE_ENTRIES)
#undef TEENY_REDUCE_ENTRIES

namespace teeny::cuda_kernels {

KernelTable reduce_kernels() noexcept {
#define TEENY_REDUCE_ENTRY(T, suffix)                                                 \
  {"teeny_softmax_" #suffix, reinterpret_cast<const void*>(&teeny_softmax_##suffix)}, \
      {"teeny_reduce_" #suffix, reinterpret_cast<const void*>(&teeny_reduce_##suffix)},
  static const KernelEntry entries[] = {TEENY_CUDA_FOR_EACH_FLOAT(TEENY_REDUCE_ENTRY)};
#undef TEENY_REDUCE_ENTRY
  return {entries, sizeof entries / sizeof entries[0]};
}

}  // namespace teeny::cuda_kernels
