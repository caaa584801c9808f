#pragma once
// Per-element math of the reductions (sum, mean, amax, prod), of softmax / log_softmax and of the
// negative log-likelihood loss, shared by the
// CPU backend (clang) and the CUDA kernels (nvcc). Indexing and accumulation order are the
// backends' business; what an element contributes and how a result is finished is defined here.
#include <cmath>
#include <cstdint>

#include "math/host_device.hpp"

namespace teeny::math {

/// The reductions. The order is stable (it indexes tables).
enum class ReduceFn : std::uint8_t { sum, mean, max, prod };

/// The start value of an accumulation: 0, -inf for max, 1 for prod.
template <ReduceFn F, class Acc>
TEENY_HD constexpr Acc reduce_identity() {
  if constexpr (F == ReduceFn::max) {
    return -Acc(INFINITY);
  } else if constexpr (F == ReduceFn::prod) {
    return Acc(1);
  } else {
    return Acc(0);
  }
}

/// Folds `x` into `acc`. max propagates NaN, as torch.amax does: once NaN, always NaN.
template <ReduceFn F, class Acc>
TEENY_HD inline Acc reduce_step(Acc acc, Acc x) {
  if constexpr (F == ReduceFn::max) {
    return (x > acc || x != x) ? x : acc;
  } else if constexpr (F == ReduceFn::prod) {
    return acc * x;
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

/// Whether `x` replaces `best` as an argmax's (min: argmin's) choice, scanning in index order.
/// Ties keep the first (last: the last). NaN is larger and smaller than any number (PyTorch's
/// argmax and argmin pick it): once chosen, only a later NaN replaces it, and only for `last`.
template <class C>
TEENY_HD inline bool arg_replaces(C x, C best, bool min, bool last) {
  const bool x_nan = x != x;
  if (best != best) return last && x_nan;
  if (x_nan) return true;
  if (min) return last ? !(best < x) : x < best;
  return last ? !(x < best) : best < x;
}

/// How a loss combines its terms: the graph's LossReduction (same values, same order).
enum class LossMode : std::uint8_t { none, mean, sum };

/// The weight of one negative log-likelihood term: `weight_of_target` (the class's weight, 1
/// without weights) for a target in [0, classes), 0 for an ignored one, and NaN for a target
/// outside the classes that is not ignored: a kernel cannot raise as PyTorch does, and NaN makes
/// the loss say so instead of being a wrong number. The kernels read the input at the target only
/// when it is in range (else they pass 0), and the term is -weight * input.
template <class C>
TEENY_HD inline C nll_weight(bool ignored, bool in_range, C weight_of_target) {
  if (ignored) return C(0);
  return in_range ? weight_of_target : C(NAN);
}

/// The reduced loss from the summed terms and the summed weights (a mean over no weight is NaN,
/// as in PyTorch).
TEENY_HD inline double nll_finish(double terms, double weights, LossMode mode) {
  return mode == LossMode::mean ? terms / weights : terms;
}

}  // namespace teeny::math
