#pragma once
// Per-sample and per-element math of the losses that run on both backends: cross-entropy (from
// logits, with label smoothing) and the squared error. teeny.train's CPU losses and the CUDA loss
// kernels (kernels/cuda/loss.cu) call these; how rows are walked and sums accumulated (in double,
// in order) is theirs.
#include <cmath>
#include <cstdint>

#include "math/host_device.hpp"

namespace teeny::math {

/// Cross-entropy's term for one sample with the row's log(sum exp(logits)) (max-shifted), the sum
/// of its logits and its target's logit, as PyTorch 1.13 computes it with label smoothing s:
/// (1 - s) * nll + s / C * sum_c(-log p_c).
TEENY_HD inline double cross_entropy_term(double log_sum, double sum_logits, double target_logit, std::int64_t classes,
                                          double smoothing) {
  const double nll = log_sum - target_logit;
  const double smooth = static_cast<double>(classes) * log_sum - sum_logits;  // sum_c -log p_c
  const double spread = classes > 0 ? smoothing / static_cast<double>(classes) : 0.0;
  return (1.0 - smoothing) * nll + spread * smooth;
}

/// d(term) / d(logit) for one logit of the row, divided by the reduction's denominator (the number
/// of samples counted for a mean, else 1).
TEENY_HD inline double cross_entropy_slope(double logit, double log_sum, bool is_target, std::int64_t classes,
                                           double smoothing, double denominator) {
  const double p = exp(logit - log_sum);
  const double spread = classes > 0 ? smoothing / static_cast<double>(classes) : 0.0;
  return (p - (is_target ? 1.0 - smoothing : 0.0) - spread) / denominator;
}

/// What a cross-entropy kernel launch takes besides its tensors: the target that counts for nothing,
/// the label smoothing, the reduction's denominator, and what each gradient is multiplied by (a
/// loss scale, else 1).
struct CrossEntropyStep {
  std::int64_t ignore_index = -100;
  double smoothing = 0;
  double denominator = 1;
  double multiplier = 1;
};

/// A loss's value at one element and its derivative there.
struct TermSlope {
  double term;
  double slope;
};

/// The squared error (x - y)^2 (F.mse_loss's element) and its slope 2 (x - y).
TEENY_HD inline TermSlope squared_error(double x, double y) {
  const double d = x - y;
  return {d * d, 2.0 * d};
}

}  // namespace teeny::math
