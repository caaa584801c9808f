#pragma once
// The optimizers' per-element updates, PyTorch 1.13's _single_tensor_sgd and _single_tensor_adam(w),
// shared by the CPU optimizers (teeny.train) and the CUDA optimizer kernels. What depends only on
// the step and the options is worked out once per parameter (in double, as PyTorch does it in
// Python: make_adam_step) and passed in the type the update computes in.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "math/host_device.hpp"

namespace teeny::math {

/// SGD's scalars: weight decay (L2, added to the gradient), momentum, 1 - dampening, -lr.
template <class T>
struct SgdStep {
  T weight_decay;
  T momentum;
  T keep;
  T neg_lr;
  bool decay;     // weight_decay != 0
  bool nesterov;  // needs momentum (and no dampening)
};

/// One element of SGD: d = g (+ weight_decay p); with a momentum buffer, buf = momentum buf + keep d
/// (buf = d at the parameter's first step: has_buffer false), then d = d + momentum buf (nesterov)
/// or buf; p += -lr d.
template <class T>
TEENY_HD inline void sgd_update(T& value, std::type_identity_t<T> grad, std::type_identity_t<T>* buffer,
                                bool has_buffer, const SgdStep<T>& s) {
  T d = grad;
  if (s.decay) d = d + s.weight_decay * value;
  if (buffer != nullptr) {
    *buffer = has_buffer ? *buffer * s.momentum + s.keep * d : d;
    d = s.nesterov ? d + s.momentum * *buffer : *buffer;
  }
  value = value + s.neg_lr * d;
}

/// Adam's and AdamW's scalars at one step.
template <class T>
struct AdamStep {
  T beta1;
  T beta2;
  T one_minus_beta1;
  T one_minus_beta2;
  T weight_decay;  // Adam's L2
  T decay;         // AdamW's 1 - lr * weight_decay
  T eps;
  T neg_step_size;          // -lr / (1 - beta1^step)
  T bias_correction2_sqrt;  // sqrt(1 - beta2^step)
  bool decoupled;           // AdamW: p *= decay; else Adam: g += weight_decay p (when l2)
  bool l2;
};

/// The scalars of step `step` (1 for a parameter's first), worked out in double as PyTorch does.
template <class T>
AdamStep<T> make_adam_step(double lr, double beta1, double beta2, double eps, double weight_decay, bool decoupled,
                           std::int64_t step) {
  const auto k = static_cast<double>(step);
  const double bias_correction1 = 1 - std::pow(beta1, k);
  const double bias_correction2 = 1 - std::pow(beta2, k);
  return {static_cast<T>(beta1),
          static_cast<T>(beta2),
          static_cast<T>(1 - beta1),
          static_cast<T>(1 - beta2),
          static_cast<T>(weight_decay),
          static_cast<T>(1 - lr * weight_decay),
          static_cast<T>(eps),
          static_cast<T>(-(lr / bias_correction1)),
          static_cast<T>(std::sqrt(bias_correction2)),
          decoupled,
          !decoupled && weight_decay != 0};
}

/// One element of Adam(W): m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2 (amsgrad:
/// v_max = max(v_max, v), NaN propagating as torch.maximum does, is what the denominator uses);
/// p += -step_size m / (sqrt(v) / sqrt(1 - beta2^step) + eps). `sqrt` is the caller's square root
/// (the CPU's vectorises; the GPU's is the device's).
template <class T, class Sqrt>
TEENY_HD inline void adam_update(T& value, std::type_identity_t<T> grad, T& m, T& v, std::type_identity_t<T>* v_max,
                                 const AdamStep<T>& s, Sqrt sqrt) {
  T g = grad;
  if (s.decoupled) {
    value = value * s.decay;
  } else if (s.l2) {
    g = g + s.weight_decay * value;
  }
  m = m * s.beta1 + s.one_minus_beta1 * g;
  v = v * s.beta2 + s.one_minus_beta2 * g * g;
  T second = v;
  if (v_max != nullptr) {
    if (v != v || v > *v_max) *v_max = v;  // v != v: NaN
    second = *v_max;
  }
  const T denominator = sqrt(second) / s.bias_correction2_sqrt + s.eps;
  value = value + s.neg_step_size * m / denominator;
}

}  // namespace teeny::math
