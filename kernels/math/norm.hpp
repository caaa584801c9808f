#pragma once
// Per-element math of the normalisation ops (batch, layer, RMS and group norm), shared by the CPU
// and CUDA kernels. Statistics are accumulated in double by the callers (f32 inputs then match
// PyTorch to ~1e-7); these functions turn them into the affine map every element goes through.
#include <cmath>

#include "math/host_device.hpp"

namespace teeny::math {

/// y = x * scale + shift.
template <class T>
struct Affine {
  T scale = T(1);
  T shift = T(0);
};

/// Eval-mode batch norm of one channel as an affine map, as PyTorch folds it:
/// scale = weight / sqrt(var + eps), shift = bias - mean * scale.
TEENY_HD inline Affine<double> batch_norm_affine(double weight, double bias, double mean, double var, double eps) {
  using std::sqrt;
  const double inv_std = 1.0 / sqrt(var + eps);
  return {weight * inv_std, bias - mean * weight * inv_std};
}

/// Normalisation by a mean and a (biased) variance, then the optional per-element weight and bias:
/// y = (x - mean) / sqrt(var + eps) * weight + bias.
TEENY_HD inline Affine<double> normalize_affine(double mean, double var, double eps) {
  using std::sqrt;
  const double inv_std = 1.0 / sqrt(var + eps);
  return {inv_std, -mean * inv_std};
}

/// RMS norm: y = x / sqrt(mean(x^2) + eps) * weight.
TEENY_HD inline double rms_norm_scale(double mean_square, double eps) {
  using std::sqrt;
  return 1.0 / sqrt(mean_square + eps);
}

}  // namespace teeny::math
