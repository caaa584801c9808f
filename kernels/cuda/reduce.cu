// Reduction kernels: softmax / log_softmax along one dim, sum / mean / amax / prod over a set of
// dims, cumsum, hardmax, argmax / argmin, and the negative log-likelihood loss, instantiated per
// element type as teeny_<op>_<dtype>; and their backward kernels (training),
// teeny_<op>_backward_<dtype>. Sums accumulate in double, as the CPU kernels do; the per-element
// rules (NaN propagation, a mean of nothing, ties, ignored targets) are kernels/math/reduce.hpp's.
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
    case math::ReduceFn::prod: reduce_with<math::ReduceFn::prod>(x, y, reduced); break;
  }
}

// One thread a line: a running sum in double, from the end when `reverse`, each sum without its
// own element when `exclusive`; written to `out`, or added to it (the backward's dx +=).
template <class T>
__device__ void scan_lines(const T* in, T* out, std::int64_t outer, std::int64_t n, std::int64_t inner, bool exclusive,
                           bool reverse, bool add) {
  const std::int64_t lines = outer * inner;
  for (std::int64_t line = first_index(); line < lines; line += grid_stride()) {
    const std::int64_t base = (line / inner) * n * inner + line % inner;
    double sum = 0;
    for (std::int64_t k = 0; k < n; ++k) {
      const std::int64_t i = base + (reverse ? n - 1 - k : k) * inner;
      const double before = sum;
      sum += static_cast<double>(load(in + i));
      const auto v = static_cast<compute_t<T>>(exclusive ? before : sum);
      store(out + i, add ? load(out + i) + v : v);
    }
  }
}

// One thread a line: 1 at its first maximum (NaN counts as one, as for argmax), 0 elsewhere.
template <class T>
__device__ void hardmax(const DeviceTensor<const T>& x, const DeviceTensor<T>& y, std::int64_t outer, std::int64_t n,
                        std::int64_t inner) {
  const std::int64_t lines = outer * inner;
  for (std::int64_t line = first_index(); line < lines; line += grid_stride()) {
    const std::int64_t base = (line / inner) * n * inner + line % inner;
    std::int64_t best = 0;
    for (std::int64_t i = 1; i < n; ++i) {
      if (math::arg_replaces(load(x.data + base + i * inner), load(x.data + base + best * inner), false, false)) {
        best = i;
      }
    }
    for (std::int64_t i = 0; i < n; ++i) store(y.data + base + i * inner, compute_t<T>(i == best ? 1.0f : 0.0f));
  }
}

// One thread a line along the axis, as the CPU: the index of the first (last) extreme.
template <class T>
__device__ void arg_reduce(const DeviceTensor<const T>& x, const DeviceTensor<std::int64_t>& y, std::int64_t outer,
                           std::int64_t n, std::int64_t inner, bool min, bool last) {
  const std::int64_t lines = outer * inner;
  for (std::int64_t line = first_index(); line < lines; line += grid_stride()) {
    const T* in = x.data + (line / inner) * n * inner + line % inner;
    std::int64_t best = 0;
    for (std::int64_t i = 1; i < n; ++i) {
      if (math::arg_replaces(load(in + i * inner), load(in + best * inner), min, last)) best = i;
    }
    y.data[line] = best;
  }
}

// Term i of a negative log-likelihood (i = n * inner + d): its weight (math::nll_weight's rules)
// and, when it reads the input, the input's offset.
struct NllTerm {
  double weight;
  bool read;
  std::int64_t offset;
};
template <class T>
__device__ NllTerm nll_term(const DeviceTensor<const T>& weight, const void* target, DTypeCode target_dtype,
                            std::int64_t classes, std::int64_t inner, bool ignoring, std::int64_t ignore_index,
                            std::int64_t i) {
  bool fits = false;
  const std::int64_t t = index_at(target, target_dtype, i, fits);
  const bool in_range = fits && t >= 0 && t < classes;
  const bool ignored = fits && ignoring && t == ignore_index;
  const double class_weight = !in_range                ? 0.0
                              : weight.data != nullptr ? static_cast<double>(load(weight.data + t))
                                                       : 1.0;
  const double w = math::nll_weight(ignored, in_range, class_weight);
  return {w, in_range && !ignored, ((i / inner) * classes + (in_range ? t : 0)) * inner + i % inner};
}

// none: a thread a term. sum and mean: one block (the grid's first), each thread summing a
// strided share of the terms and weights in double, then block_sum: the same order every run.
template <class T>
__device__ void nll_loss(const DeviceTensor<const T>& x, const void* target, DTypeCode target_dtype,
                         const DeviceTensor<const T>& weight, const DeviceTensor<T>& y, std::int64_t n,
                         std::int64_t classes, std::int64_t inner, bool ignoring, std::int64_t ignore_index,
                         math::LossMode mode) {
  const std::int64_t terms = n * inner;
  if (mode == math::LossMode::none) {
    for (std::int64_t i = first_index(); i < terms; i += grid_stride()) {
      const NllTerm term = nll_term(weight, target, target_dtype, classes, inner, ignoring, ignore_index, i);
      const double v = term.read ? static_cast<double>(load(x.data + term.offset)) : 0.0;
      store(y.data + i, static_cast<compute_t<T>>(-term.weight * v));
    }
    return;
  }
  if (blockIdx.x != 0) return;
  double sum = 0;
  double weights = 0;
  for (std::int64_t i = threadIdx.x; i < terms; i += blockDim.x) {
    const NllTerm term = nll_term(weight, target, target_dtype, classes, inner, ignoring, ignore_index, i);
    const double v = term.read ? static_cast<double>(load(x.data + term.offset)) : 0.0;
    sum += -term.weight * v;
    weights += term.weight;
  }
  sum = block_sum(sum);
  weights = block_sum(weights);
  if (threadIdx.x == 0) store(y.data, static_cast<compute_t<T>>(math::nll_finish(sum, weights, mode)));
}

// ---- Backward kernels (training) ----

// One thread a line along the softmax dim, as the forward: softmax needs sum(dy * y) over it,
// log_softmax sum(dy), both accumulated in double as the CPU does; then
// softmax: dx += y * (dy - sum), log_softmax: dx += dy - exp(y) * sum.
template <class T>
__device__ void softmax_backward(const DeviceTensor<T>& y, std::int64_t outer, std::int64_t n, std::int64_t inner,
                                 bool log, const DeviceTensor<T>& dy, const DeviceTensor<T>& dx) {
  using C = compute_t<T>;
  if (dx.data == nullptr) return;
  const std::int64_t lines = outer * inner;
  for (std::int64_t line = first_index(); line < lines; line += grid_stride()) {
    const std::int64_t base = (line / inner) * n * inner + line % inner;
    const T* out = y.data + base;
    const T* grad = dy.data + base;
    T* dxl = dx.data + base;
    double sum = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const C g = load(grad + i * inner);
      sum += static_cast<double>(log ? g : g * load(out + i * inner));
    }
    const auto s = static_cast<C>(sum);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int64_t k = i * inner;
      const C g = load(grad + k);
      const C v = load(out + k);
      using std::exp;
      store(dxl + k, load(dxl + k) + (log ? g - exp(v) * s : v * (g - s)));
    }
  }
}

// The offset in `t` (y or dy: x's rank, size 1 on the reduced dims) of the output that x's
// element i (row-major) reduces into: its coordinates but the reduced ones (bit d of `reduced`).
template <class T, class U>
__device__ std::int64_t output_offset(const DeviceTensor<T>& x, const DeviceTensor<U>& t, std::uint32_t reduced,
                                      std::int64_t i) {
  std::int64_t offset = 0;
  for (int d = x.rank - 1; d >= 0; --d) {
    if ((reduced & (1u << d)) == 0) offset += (i % x.shape[d]) * t.strides[d];
    i /= x.shape[d];
  }
  return offset;
}

// How many elements reduced into the output of x's element i equal `max` (amax's ties): i's kept
// coordinates, every value of the reduced ones.
template <class T>
__device__ std::int64_t max_ties(const DeviceTensor<const T>& x, std::uint32_t reduced, std::int64_t i,
                                 compute_t<T> max) {
  std::int64_t base = 0;  // the kept coordinates' offset, the reduced ones 0
  std::int64_t count = 1;
  for (int d = x.rank - 1; d >= 0; --d) {
    const std::int64_t c = i % x.shape[d];
    i /= x.shape[d];
    if (reduced & (1u << d)) {
      count *= x.shape[d];
    } else {
      base += c * x.strides[d];
    }
  }
  std::int64_t ties = 0;
  for (std::int64_t r = 0; r < count; ++r) {
    std::int64_t offset = base;
    std::int64_t k = r;
    for (int d = x.rank - 1; d >= 0; --d) {
      if ((reduced & (1u << d)) == 0) continue;
      offset += (k % x.shape[d]) * x.strides[d];
      k /= x.shape[d];
    }
    ties += load(x.data + offset) == max ? 1 : 0;
  }
  return ties;
}

// One thread an element of dx (x's shape), reading dy broadcast over the reduced dims. sum:
// dx += dy; mean: dx += dy * (1 / count); amax: dy shared evenly by the elements equal to the
// maximum (PyTorch's rule for ties), as the CPU does.
template <class T>
__device__ void reduce_backward(const DeviceTensor<const T>& x, const DeviceTensor<T>& y, math::ReduceFn fn,
                                std::uint32_t reduced, const DeviceTensor<T>& dy, const DeviceTensor<T>& dx) {
  using C = compute_t<T>;
  if (dx.data == nullptr) return;
  const std::int64_t n = element_count(dx);
  const std::int64_t outputs = element_count(y);
  const std::int64_t count = outputs == 0 ? 1 : n / outputs;
  const C scale = C(1) / static_cast<C>(count);
  const bool contiguous = is_contiguous(dx);
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    const std::int64_t ody = output_offset(x, dy, reduced, i);
    T* grad = dx.data + (contiguous ? i : element_offset(dx, i));
    const C g = load(dy.data + ody);
    switch (fn) {
      case math::ReduceFn::sum: store(grad, load(grad) + g); break;
      case math::ReduceFn::mean: store(grad, load(grad) + g * scale); break;
      case math::ReduceFn::max: {
        const C max = load(y.data + output_offset(x, y, reduced, i));
        if (load(x.data + element_offset(x, i)) != max) break;
        store(grad, load(grad) + g / static_cast<C>(max_ties(x, reduced, i, max)));
        break;
      }
      case math::ReduceFn::prod: break;  // no backward: reduce_op's pack_backward_args refuses it
    }
  }
}

// dx: a thread a term, dx[n, t, d] += -weight[t] * g; dweight: a thread a class, summing
// (-x - loss for mean, else -x) * g over its terms in order; g the term's dy (none) or the loss's,
// divided for mean by the summed weights, which every thread sums itself in target order (a loss
// has few terms; no thread waits for another). The CPU's rules (modules/cpu/reduce.cppm).
template <class T>
__device__ void nll_loss_backward(const DeviceTensor<const T>& x, const void* target, DTypeCode target_dtype,
                                  const DeviceTensor<const T>& weight, const DeviceTensor<T>& y, std::int64_t n,
                                  std::int64_t classes, std::int64_t inner, bool ignoring, std::int64_t ignore_index,
                                  math::LossMode mode, const DeviceTensor<T>& dy, const DeviceTensor<T>& dx,
                                  const DeviceTensor<T>& dweight) {
  const std::int64_t terms = n * inner;
  double scale = 1.0;
  if (mode == math::LossMode::mean) {
    double weights = 0;
    for (std::int64_t i = 0; i < terms; ++i) {
      weights += nll_term(weight, target, target_dtype, classes, inner, ignoring, ignore_index, i).weight;
    }
    scale = 1.0 / weights;
  }
  const auto grad = [&](std::int64_t i) {
    return static_cast<double>(load(dy.data + (mode == math::LossMode::none ? i : 0))) * scale;
  };
  if (dx.data != nullptr) {
    for (std::int64_t i = first_index(); i < terms; i += grid_stride()) {
      const NllTerm term = nll_term(weight, target, target_dtype, classes, inner, ignoring, ignore_index, i);
      if (!term.read) continue;
      store(dx.data + term.offset, load(dx.data + term.offset) + static_cast<compute_t<T>>(-term.weight * grad(i)));
    }
  }
  if (dweight.data == nullptr) return;
  const double loss = mode == math::LossMode::mean ? static_cast<double>(load(y.data)) : 0.0;
  for (std::int64_t c = first_index(); c < classes; c += grid_stride()) {
    double sum = 0;
    for (std::int64_t i = 0; i < terms; ++i) {
      const NllTerm term = nll_term(weight, target, target_dtype, classes, inner, ignoring, ignore_index, i);
      if (term.read && (term.offset / inner) % classes == c) {
        sum += (-static_cast<double>(load(x.data + term.offset)) - loss) * grad(i);
      }
    }
    store(dweight.data + c, load(dweight.data + c) + static_cast<compute_t<T>>(sum));
  }
}

}  // namespace
}  // namespace teeny::cuda_kernels

using teeny::cuda_kernels::DeviceTensor;
using teeny::cuda_kernels::DTypeCode;

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
      teeny::cuda_kernels::takes_params<teeny::cuda_kernels::ReduceParamList<T>, decltype(teeny_reduce_##suffix)>);   \
  extern "C" __global__ void teeny_softmax_backward_##suffix(DeviceTensor<const T>, DeviceTensor<T> y,                \
                                                             std::int64_t outer, std::int64_t n, std::int64_t inner,  \
                                                             bool log, DeviceTensor<T> dy, DeviceTensor<T> dx) {      \
    teeny::cuda_kernels::softmax_backward<T>(y, outer, n, inner, log, dy, dx);                                        \
  }                                                                                                                   \
  extern "C" __global__ void teeny_reduce_backward_##suffix(DeviceTensor<const T> x, DeviceTensor<T> y,               \
                                                            teeny::math::ReduceFn fn, std::uint32_t reduced,          \
                                                            DeviceTensor<T> dy, DeviceTensor<T> dx) {                 \
    teeny::cuda_kernels::reduce_backward<T>(x, y, fn, reduced, dy, dx);                                               \
  }                                                                                                                   \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::SoftmaxBackwardParamList<T>,                   \
                                                  decltype(teeny_softmax_backward_##suffix)>);                        \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::ReduceBackwardParamList<T>,                    \
                                                  decltype(teeny_reduce_backward_##suffix)>);
TEENY_CUDA_FOR_EACH_FLOAT(TEENY_REDUCE_ENTRIES)
#undef TEENY_REDUCE_ENTRIES

#define TEENY_LINE_ENTRIES(T, suffix)                                                                                  \
  extern "C" __global__ void teeny_cumsum_##suffix(DeviceTensor<const T> x, DeviceTensor<T> y, std::int64_t outer,     \
                                                   std::int64_t n, std::int64_t inner, bool exclusive, bool reverse) { \
    teeny::cuda_kernels::scan_lines<T>(x.data, y.data, outer, n, inner, exclusive, reverse, false);                    \
  }                                                                                                                    \
  extern "C" __global__ void teeny_cumsum_backward_##suffix(                                                           \
      DeviceTensor<const T>, DeviceTensor<T>, std::int64_t outer, std::int64_t n, std::int64_t inner, bool exclusive,  \
      bool reverse, DeviceTensor<T> dy, DeviceTensor<T> dx) {                                                          \
    if (dx.data != nullptr)                                                                                            \
      teeny::cuda_kernels::scan_lines<T>(dy.data, dx.data, outer, n, inner, exclusive, !reverse, true);                \
  }                                                                                                                    \
  extern "C" __global__ void teeny_hardmax_##suffix(DeviceTensor<const T> x, DeviceTensor<T> y, std::int64_t outer,    \
                                                    std::int64_t n, std::int64_t inner, bool, bool) {                  \
    teeny::cuda_kernels::hardmax<T>(x, y, outer, n, inner);                                                            \
  }                                                                                                                    \
  static_assert(                                                                                                       \
      teeny::cuda_kernels::takes_params<teeny::cuda_kernels::AxisLinesParamList<T>, decltype(teeny_cumsum_##suffix)>); \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::AxisLinesBackwardParamList<T>,                  \
                                                  decltype(teeny_cumsum_backward_##suffix)>);                          \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::AxisLinesParamList<T>,                          \
                                                  decltype(teeny_hardmax_##suffix)>);
TEENY_CUDA_FOR_EACH_FLOAT(TEENY_LINE_ENTRIES)
#undef TEENY_LINE_ENTRIES

#define TEENY_INDEX_ENTRIES(T, suffix)                                                                                 \
  extern "C" __global__ void teeny_arg_reduce_##suffix(DeviceTensor<const T> x, DeviceTensor<std::int64_t> y,          \
                                                       std::int64_t outer, std::int64_t n, std::int64_t inner,         \
                                                       bool min, bool last) {                                          \
    teeny::cuda_kernels::arg_reduce<T>(x, y, outer, n, inner, min, last);                                              \
  }                                                                                                                    \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::ArgReduceParamList<T>,                          \
                                                  decltype(teeny_arg_reduce_##suffix)>);                               \
  extern "C" __global__ void teeny_nll_loss_##suffix(                                                                  \
      DeviceTensor<const T> x, const void* target, DTypeCode target_dtype, DeviceTensor<const T> weight,               \
      DeviceTensor<T> y, std::int64_t n, std::int64_t classes, std::int64_t inner, bool ignoring,                      \
      std::int64_t ignore_index, teeny::math::LossMode mode) {                                                         \
    teeny::cuda_kernels::nll_loss<T>(x, target, target_dtype, weight, y, n, classes, inner, ignoring, ignore_index,    \
                                     mode);                                                                            \
  }                                                                                                                    \
  static_assert(                                                                                                       \
      teeny::cuda_kernels::takes_params<teeny::cuda_kernels::NllLossParamList<T>, decltype(teeny_nll_loss_##suffix)>); \
  extern "C" __global__ void teeny_nll_loss_backward_##suffix(                                                         \
      DeviceTensor<const T> x, const void* target, DTypeCode target_dtype, DeviceTensor<const T> weight,               \
      DeviceTensor<T> y, std::int64_t n, std::int64_t classes, std::int64_t inner, bool ignoring,                      \
      std::int64_t ignore_index, teeny::math::LossMode mode, DeviceTensor<T> dy, DeviceTensor<T> dx,                   \
      DeviceTensor<T> dweight) {                                                                                       \
    teeny::cuda_kernels::nll_loss_backward<T>(x, target, target_dtype, weight, y, n, classes, inner, ignoring,         \
                                              ignore_index, mode, dy, dx, dweight);                                    \
  }                                                                                                                    \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::NllLossBackwardParamList<T>,                    \
                                                  decltype(teeny_nll_loss_backward_##suffix)>);
TEENY_CUDA_FOR_EACH_FLOAT(TEENY_INDEX_ENTRIES)
#undef TEENY_INDEX_ENTRIES

namespace teeny::cuda_kernels {

KernelTable reduce_kernels() noexcept {
#define TEENY_REDUCE_ENTRY(T, suffix)                                                                          \
  TEENY_KERNEL_ENTRY(teeny_softmax_##suffix), TEENY_KERNEL_ENTRY(teeny_reduce_##suffix),                       \
      TEENY_KERNEL_ENTRY(teeny_softmax_backward_##suffix), TEENY_KERNEL_ENTRY(teeny_reduce_backward_##suffix), \
      TEENY_KERNEL_ENTRY(teeny_nll_loss_##suffix), TEENY_KERNEL_ENTRY(teeny_nll_loss_backward_##suffix),       \
      TEENY_KERNEL_ENTRY(teeny_arg_reduce_##suffix), TEENY_KERNEL_ENTRY(teeny_cumsum_##suffix),                \
      TEENY_KERNEL_ENTRY(teeny_cumsum_backward_##suffix), TEENY_KERNEL_ENTRY(teeny_hardmax_##suffix),
  static const KernelEntry entries[] = {TEENY_CUDA_FOR_EACH_FLOAT(TEENY_REDUCE_ENTRY)};
#undef TEENY_REDUCE_ENTRY
  return table_of(entries);
}

}  // namespace teeny::cuda_kernels
