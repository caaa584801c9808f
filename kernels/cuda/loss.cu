// Loss kernels for training on the GPU: cross-entropy from logits and the squared error (MSE),
// with the per-sample and per-element math of kernels/math/loss.hpp (the CPU losses' own).
// Sums are in double and in a fixed order, so a loss is the same every run: cross-entropy writes
// each row's term (one thread a row, as teeny's softmax kernel), the squared error each block's
// sum (a fixed grid, a tree in shared memory), and the host adds them up in order. The scalars are
// read from device memory (a captured step replays with each step's). Instantiated per element
// type as teeny_<kernel>_<dtype>.
#include <cuda_runtime.h>

#include <cmath>

#include "cuda/device_tensor.cuh"
#include "cuda/registry.hpp"
#include "math/loss.hpp"

namespace teeny::cuda_kernels {
namespace {

template <class T>
__device__ void cross_entropy(const T* logits, const std::int64_t* targets, T* grad, double* row_losses,
                              std::int64_t rows, std::int64_t classes, const math::CrossEntropyStep* step) {
  const math::CrossEntropyStep s = *step;
  for (std::int64_t r = first_index(); r < rows; r += grid_stride()) {
    const T* row = logits + r * classes;
    T* g = grad + r * classes;
    const std::int64_t t = targets[r];
    if (t == s.ignore_index) {
      for (std::int64_t c = 0; c < classes; ++c) store(g + c, compute_t<T>(0));
      row_losses[r] = 0;
      continue;
    }
    // As the CPU's: the max (a NaN never replaces it), then the shifted sum of exponentials.
    double top = -INFINITY;
    for (std::int64_t c = 0; c < classes; ++c) {
      const auto x = static_cast<double>(load(row + c));
      top = top < x ? x : top;
    }
    double sum_exp = 0;
    double sum_logits = 0;
    for (std::int64_t c = 0; c < classes; ++c) {
      const auto x = static_cast<double>(load(row + c));
      sum_exp += exp(x - top);
      sum_logits += x;
    }
    const double log_sum = top + log(sum_exp);
    row_losses[r] =
        math::cross_entropy_term(log_sum, sum_logits, static_cast<double>(load(row + t)), classes, s.smoothing);
    for (std::int64_t c = 0; c < classes; ++c) {
      const double slope = math::cross_entropy_slope(static_cast<double>(load(row + c)), log_sum, c == t, classes,
                                                     s.smoothing, s.denominator);
      store(g + c, static_cast<compute_t<T>>(slope * s.multiplier));
    }
  }
}

// The block size the squared-error kernel is launched with (its shared-memory tree).
constexpr int kSumThreads = 256;

template <class T>
__device__ void squared_error(const T* x, const T* y, T* grad, double* partials, std::int64_t n,
                              const double* multiplier_at) {
  __shared__ double sums[kSumThreads];
  const double multiplier = *multiplier_at;
  double sum = 0;
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    const math::TermSlope e = math::squared_error(static_cast<double>(load(x + i)), static_cast<double>(load(y + i)));
    sum += e.term;
    store(grad + i, static_cast<compute_t<T>>(e.slope * multiplier));
  }
  sums[threadIdx.x] = sum;
  __syncthreads();
  for (int half = kSumThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) sums[threadIdx.x] += sums[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = sums[0];
}

}  // namespace
}  // namespace teeny::cuda_kernels

#define TEENY_LOSS_ENTRIES(T, suffix)                                                                                  \
  extern "C" __global__ void teeny_cross_entropy_##suffix(const T* logits, const std::int64_t* targets, T* grad,       \
                                                          double* row_losses, std::int64_t rows, std::int64_t classes, \
                                                          const teeny::math::CrossEntropyStep* step) {                 \
    teeny::cuda_kernels::cross_entropy<T>(logits, targets, grad, row_losses, rows, classes, step);                     \
  }                                                                                                                    \
  extern "C" __global__ void __launch_bounds__(teeny::cuda_kernels::kSumThreads) teeny_squared_error_##suffix(         \
      const T* x, const T* y, T* grad, double* partials, std::int64_t n, const double* multiplier) {                   \
    teeny::cuda_kernels::squared_error<T>(x, y, grad, partials, n, multiplier);                                        \
  }                                                                                                                    \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::CrossEntropyParamList<T>,                       \
                                                  decltype(teeny_cross_entropy_##suffix)>);                            \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::SquaredErrorParamList<T>,                       \
                                                  decltype(teeny_squared_error_##suffix)>);
TEENY_CUDA_FOR_EACH_FLOAT(TEENY_LOSS_ENTRIES)
#undef TEENY_LOSS_ENTRIES

namespace teeny::cuda_kernels {

KernelTable loss_kernels() noexcept {
#define TEENY_LOSS_ENTRY(T, suffix) \
  TEENY_KERNEL_ENTRY(teeny_cross_entropy_##suffix), TEENY_KERNEL_ENTRY(teeny_squared_error_##suffix),
  static const KernelEntry entries[] = {TEENY_CUDA_FOR_EACH_FLOAT(TEENY_LOSS_ENTRY)};
#undef TEENY_LOSS_ENTRY
  return table_of(entries);
}

}  // namespace teeny::cuda_kernels
