#pragma once
// Per-element math of the reductions (sum, mean, amax) and of softmax / log_softmax, shared by the
// CPU backend (clang) and the CUDA kernels (nvcc). Indexing and accumulation order are the
// backends' business; what an element contributes and how a result is finished is defined here.
#include <cmath>
#include <cstdint>

#include "math/host_device.hpp"

namespace teeny::math {

/// The reductions. The order is stable (it indexes tables).
enum class ReduceFn : std::uint8_t { sum, mean, max };

/// The start value of an accumulation: 0, or -inf for max.
template <ReduceFn F, class Acc>
TEENY_HD constexpr Acc reduce_identity() {
  return F == ReduceFn::max ? -Acc(INFINITY) : Acc(0);
}

/// Folds `x` into `acc`. max propagates NaN, as torch.amax does: once NaN, always NaN.
template <ReduceFn F, class Acc>
TEENY_HD inline Acc reduce_step(Acc acc, Acc x) {
  if constexpr (F == ReduceFn::max) {
    return (x > acc || x != x) ? x : acc;
  } else {
    return acc + x;
  }
}

/// The result from the accumulator and the number of elements reduced (a mean of nothing is NaN).
template <ReduceFn F, class Acc>
TEENY_HD inline Acc reduce_finish(Acc acc, std::int64_t count) {
  if constexpr (F == ReduceFn::mean) {
    return count == 0 ? Acc(NAN) : acc / static_cast<Acc>(count);
  } else {
    return acc;
  }
}

/// The running row maximum of a softmax; NaN-propagating so that a NaN row gives NaN, as in PyTorch.
template <class T>
TEENY_HD inline T softmax_max(T running, T x) {
  return reduce_step<ReduceFn::max>(running, x);
}

/// One softmax numerator, exp(x - max): at most 1, so the row sum cannot overflow.
template <class T>
TEENY_HD inline T softmax_exp(T x, T max) {
  using std::exp;
  return exp(x - max);
}

/// log_softmax from the input, the row max and log(sum of softmax_exp over the row).
template <class T>
TEENY_HD inline T log_softmax_value(T x, T max, T log_sum) {
  return (x - max) - log_sum;
}

}  // namespace teeny::math
