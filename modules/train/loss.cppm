// teeny.train:loss — PyTorch 1.13's losses (torch.nn.functional) with their gradients. Each returns
// the loss, accumulated in double, and when `grad` is given (a view of the input's shape) it
// overwrites grad with d loss / d input. Shapes are checked and every error names the loss and the
// shapes; nothing is written on an error. No heap allocation, except for an error's message.
//
//   auto loss = cross_entropy<float>(logits, labels, logits_grad, {.label_smoothing = 0.1});
//   if (!loss) return std::move(loss).error();
//   auto l2 = mse_loss<double>(prediction, target);                 // loss only, no gradient
//
// T is deduced from views of const elements; otherwise name it (`mse_loss<float>(...)`).
// Class weights (PyTorch's `weight` argument) are not supported; targets are class indices
// (not probabilities) and logits are [N, C] (no extra spatial dims).
module;
#include "math/loss.hpp"
export module teeny.train:loss;
import teeny.std;
import teeny.core;
import :parameter;

export namespace teeny {

/// How per-element (or per-sample) losses combine; PyTorch's default is mean.
enum class Reduction : std::uint8_t { mean, sum };

struct CrossEntropyOptions {
  Reduction reduction = Reduction::mean;
  std::int64_t ignore_index = -100;  // samples with this target count for nothing (and not in the mean)
  double label_smoothing = 0.0;      // in [0, 1]
};

struct NllLossOptions {
  Reduction reduction = Reduction::mean;
  std::int64_t ignore_index = -100;
};

struct SmoothL1Options {
  Reduction reduction = Reduction::mean;
  double beta = 1.0;  // >= 0; 0 is the L1 loss
};

struct HuberOptions {
  Reduction reduction = Reduction::mean;
  double delta = 1.0;  // > 0
};

template <TrainFloat T>
struct BceWithLogitsOptions {
  Reduction reduction = Reduction::mean;
  /// Weight of the positive term: none (empty), the input's shape, or [C] for the input's last dim C.
  TensorView<const T> pos_weight{};
};

}  // namespace teeny

// The losses' checks and per-sample math (exported for teeny.cuda's device losses, which check
// their inputs the same way; not for users).
export namespace teeny::loss_detail {

/// A grad view asked for: anything but a default-constructed (null, rank-0) view.
template <class T>
bool wanted(const TensorView<T>& grad) {
  return grad.data != nullptr || grad.rank() != 0;
}

template <class A, class B>
Result<void> same_shape(std::string_view loss, std::string_view a_name, const TensorView<A>& a, std::string_view b_name,
                        const TensorView<B>& b) {
  if (a.shape != b.shape) {
    return fail(Errc::shape_mismatch, loss, ": ", a_name, " ", a.shape, " and ", b_name, " ", b.shape,
                " must have the same shape");
  }
  return ok();
}

template <class T>
Result<void> contiguous(std::string_view loss, std::string_view name, const TensorView<T>& v) {
  if (!v.is_contiguous()) return fail(Errc::unsupported, loss, ": ", name, " ", v.shape, " must be contiguous");
  return ok();
}

template <class T>
Result<void> has_data(std::string_view loss, std::string_view name, const TensorView<T>& v) {
  if (v.data == nullptr && v.numel() > 0) {
    return fail(Errc::invalid_argument, loss, ": ", name, " ", v.shape, " has no data (null pointer)");
  }
  return ok();
}

/// The checks of every elementwise loss: input, target (and grad) of one shape, contiguous.
template <TrainFloat T>
Result<void> check_pointwise(std::string_view loss, TensorView<const T> input, TensorView<const T> target,
                             TensorView<T> grad) {
  if (auto r = same_shape(loss, "input", input, "target", target); !r) return r;
  if (wanted(grad)) {
    if (auto r = same_shape(loss, "input", input, "grad", grad); !r) return r;
    if (auto r = contiguous(loss, "grad", grad); !r) return r;
    if (auto r = has_data(loss, "grad", grad); !r) return r;
  }
  if (auto r = has_data(loss, "input", input); !r) return r;
  if (auto r = has_data(loss, "target", target); !r) return r;
  if (auto r = contiguous(loss, "input", input); !r) return r;
  return contiguous(loss, "target", target);
}

/// Sums f(i, x, y) -> {loss, d loss / d x} over the elements and reduces; writes the gradient.
template <TrainFloat T, class F>
double pointwise(TensorView<const T> input, TensorView<const T> target, TensorView<T> grad, Reduction reduction,
                 F&& f) {
  const std::int64_t n = input.numel();
  const double scale = reduction == Reduction::mean ? 1.0 / static_cast<double>(n) : 1.0;
  const bool write = wanted(grad);
  double total = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto [loss, slope] = f(i, static_cast<double>(input.data[i]), static_cast<double>(target.data[i]));
    total += loss;
    if (write) grad.data[i] = static_cast<T>(slope * scale);
  }
  return reduction == Reduction::mean ? total / static_cast<double>(n) : total;
}

inline double sign(double d) { return d > 0 ? 1.0 : (d < 0 ? -1.0 : 0.0); }

/// The checks of the class-index losses: [N, C] scores, [N] targets, each in [0, C) or ignored.
/// (Any float type: teeny::cuda's cross-entropy checks a 16-bit model's logits with it too.)
template <FloatElement T>
Result<void> check_classes(std::string_view loss, std::string_view input_name, TensorView<const T> input,
                           TensorView<const std::int64_t> targets, TensorView<T> grad, const std::int64_t* ignore) {
  if (input.rank() != 2) {
    return fail(Errc::shape_mismatch, loss, ": ", input_name, " must be [N, C], got ", input.shape);
  }
  if (targets.rank() != 1 || targets.shape[0] != input.shape[0]) {
    return fail(Errc::shape_mismatch, loss, ": targets must be [N] = [", input.shape[0], "] for ", input_name, " ",
                input.shape, ", got ", targets.shape);
  }
  if (wanted(grad)) {
    if (auto r = same_shape(loss, input_name, input, "grad", grad); !r) return r;
    if (auto r = has_data(loss, "grad", grad); !r) return r;
  }
  if (auto r = has_data(loss, input_name, input); !r) return r;
  if (auto r = has_data(loss, "targets", targets); !r) return r;
  const std::int64_t classes = input.shape[1];
  for (std::int64_t i = 0; i < targets.shape[0]; ++i) {
    const std::int64_t t = targets(i);
    if (ignore != nullptr && t == *ignore) continue;
    if (t < 0 || t >= classes) {
      return fail(Errc::out_of_range, loss, ": target ", t, " of sample ", i, " is out of range [0, ", classes, ")",
                  ignore != nullptr ? cat(" (ignore_index is ", *ignore, ")") : std::string());
    }
  }
  return ok();
}

}  // namespace teeny::loss_detail

export namespace teeny {

/// F.cross_entropy from logits [N, C] and class indices [N]: log-softmax (max-shifted) then the
/// negative log-likelihood, with label smoothing as PyTorch 1.13 computes it:
/// (1 - s) * nll + s / C * sum_c(-log p_c), both parts averaged over the non-ignored samples for
/// mean. A mean over no sample (all ignored) is NaN, as in PyTorch.
template <TrainFloat T>
Result<double> cross_entropy(TensorView<const T> logits, TensorView<const std::int64_t> targets,
                             TensorView<T> grad = {}, const CrossEntropyOptions& options = {}) {
  const double s = options.label_smoothing;
  if (!(s >= 0.0 && s <= 1.0)) {
    return fail(Errc::invalid_argument, "cross_entropy: label_smoothing must be in [0, 1], got ", s);
  }
  if (auto r = loss_detail::check_classes<T>("cross_entropy", "logits", logits, targets, grad, &options.ignore_index);
      !r) {
    return std::move(r).error();
  }
  const std::int64_t n = logits.shape[0];
  const std::int64_t classes = logits.shape[1];
  std::int64_t counted = 0;
  for (std::int64_t i = 0; i < n; ++i) counted += targets(i) != options.ignore_index ? 1 : 0;
  const double denominator = options.reduction == Reduction::mean ? static_cast<double>(counted) : 1.0;
  const bool write = loss_detail::wanted(grad);
  double total = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t t = targets(i);
    if (t == options.ignore_index) {
      if (write) {
        for (std::int64_t c = 0; c < classes; ++c) grad(i, c) = T(0);
      }
      continue;
    }
    double top = -std::numeric_limits<double>::infinity();
    for (std::int64_t c = 0; c < classes; ++c) top = std::max(top, static_cast<double>(logits(i, c)));
    double sum_exp = 0;
    double sum_logits = 0;
    for (std::int64_t c = 0; c < classes; ++c) {
      sum_exp += std::exp(static_cast<double>(logits(i, c)) - top);
      sum_logits += static_cast<double>(logits(i, c));
    }
    const double log_sum = top + std::log(sum_exp);
    total += math::cross_entropy_term(log_sum, sum_logits, static_cast<double>(logits(i, t)), classes, s);
    if (write) {
      for (std::int64_t c = 0; c < classes; ++c) {
        grad(i, c) = static_cast<T>(
            math::cross_entropy_slope(static_cast<double>(logits(i, c)), log_sum, c == t, classes, s, denominator));
      }
    }
  }
  return total / denominator;
}

/// F.nll_loss from log-probabilities [N, C] and class indices [N].
template <TrainFloat T>
Result<double> nll_loss(TensorView<const T> log_probs, TensorView<const std::int64_t> targets, TensorView<T> grad = {},
                        const NllLossOptions& options = {}) {
  if (auto r = loss_detail::check_classes<T>("nll_loss", "log_probs", log_probs, targets, grad, &options.ignore_index);
      !r) {
    return std::move(r).error();
  }
  const std::int64_t n = log_probs.shape[0];
  const std::int64_t classes = log_probs.shape[1];
  std::int64_t counted = 0;
  for (std::int64_t i = 0; i < n; ++i) counted += targets(i) != options.ignore_index ? 1 : 0;
  const double denominator = options.reduction == Reduction::mean ? static_cast<double>(counted) : 1.0;
  const bool write = loss_detail::wanted(grad);
  double total = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t t = targets(i);
    if (write) {
      for (std::int64_t c = 0; c < classes; ++c) grad(i, c) = T(0);
    }
    if (t == options.ignore_index) continue;
    total -= static_cast<double>(log_probs(i, t));
    if (write) grad(i, t) = static_cast<T>(-1.0 / denominator);
  }
  return total / denominator;
}

/// F.mse_loss: (x - y)^2.
template <TrainFloat T>
Result<double> mse_loss(TensorView<const T> input, TensorView<const T> target, TensorView<T> grad = {},
                        Reduction reduction = Reduction::mean) {
  if (auto r = loss_detail::check_pointwise<T>("mse_loss", input, target, grad); !r) return std::move(r).error();
  return loss_detail::pointwise<T>(input, target, grad, reduction, [](std::int64_t, double x, double y) {
    const math::TermSlope e = math::squared_error(x, y);
    return std::pair{e.term, e.slope};
  });
}

/// F.l1_loss: |x - y| (gradient sign(x - y), 0 where x == y).
template <TrainFloat T>
Result<double> l1_loss(TensorView<const T> input, TensorView<const T> target, TensorView<T> grad = {},
                       Reduction reduction = Reduction::mean) {
  if (auto r = loss_detail::check_pointwise<T>("l1_loss", input, target, grad); !r) return std::move(r).error();
  return loss_detail::pointwise<T>(input, target, grad, reduction, [](std::int64_t, double x, double y) {
    return std::pair{std::abs(x - y), loss_detail::sign(x - y)};
  });
}

/// F.smooth_l1_loss: 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (beta = 0: L1). The
/// gradient is PyTorch's: -1 where d <= -beta, 1 where d >= beta, else d / beta (so -1 at d = 0
/// when beta = 0).
template <TrainFloat T>
Result<double> smooth_l1_loss(TensorView<const T> input, TensorView<const T> target, TensorView<T> grad = {},
                              const SmoothL1Options& options = {}) {
  const double beta = options.beta;
  if (!(beta >= 0)) return fail(Errc::invalid_argument, "smooth_l1_loss: beta must be >= 0, got ", beta);
  if (auto r = loss_detail::check_pointwise<T>("smooth_l1_loss", input, target, grad); !r) {
    return std::move(r).error();
  }
  return loss_detail::pointwise<T>(input, target, grad, options.reduction, [beta](std::int64_t, double x, double y) {
    const double d = x - y;
    const double a = std::abs(d);
    const double loss = a < beta ? 0.5 * d * d / beta : a - 0.5 * beta;
    return std::pair{loss, d <= -beta ? -1.0 : (d >= beta ? 1.0 : d / beta)};
  });
}

/// F.huber_loss: 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta).
template <TrainFloat T>
Result<double> huber_loss(TensorView<const T> input, TensorView<const T> target, TensorView<T> grad = {},
                          const HuberOptions& options = {}) {
  const double delta = options.delta;
  if (!(delta > 0)) return fail(Errc::invalid_argument, "huber_loss: delta must be > 0, got ", delta);
  if (auto r = loss_detail::check_pointwise<T>("huber_loss", input, target, grad); !r) return std::move(r).error();
  return loss_detail::pointwise<T>(input, target, grad, options.reduction, [delta](std::int64_t, double x, double y) {
    const double d = x - y;
    const double a = std::abs(d);
    if (a < delta) return std::pair{0.5 * d * d, d};
    return std::pair{delta * (a - 0.5 * delta), delta * loss_detail::sign(d)};
  });
}

/// F.binary_cross_entropy_with_logits: (1 - y) x - w log(sigmoid(x)) with w = 1 + (pos_weight - 1) y,
/// computed stably; the targets y are probabilities (not checked to lie in [0, 1], as in PyTorch).
template <TrainFloat T>
Result<double> binary_cross_entropy_with_logits(TensorView<const T> input, TensorView<const T> target,
                                                TensorView<T> grad = {}, const BceWithLogitsOptions<T>& options = {}) {
  constexpr std::string_view loss = "binary_cross_entropy_with_logits";
  if (auto r = loss_detail::check_pointwise<T>(loss, input, target, grad); !r) return std::move(r).error();
  const TensorView<const T> pw = options.pos_weight;
  const bool weighted = loss_detail::wanted(pw);
  const std::int64_t row = input.shape.last();
  bool per_class = false;
  if (weighted) {
    per_class = pw.rank() == 1 && pw.shape[0] == row && input.shape != pw.shape;
    if (!per_class && pw.shape != input.shape) {
      return fail(Errc::shape_mismatch, loss, ": pos_weight ", pw.shape, " must be [", row, "] or the input's shape ",
                  input.shape);
    }
    if (auto r = loss_detail::contiguous(loss, "pos_weight", pw); !r) return std::move(r).error();
    if (auto r = loss_detail::has_data(loss, "pos_weight", pw); !r) return std::move(r).error();
  }
  return loss_detail::pointwise<T>(input, target, grad, options.reduction, [&](std::int64_t i, double x, double y) {
    const double p = weighted ? static_cast<double>(pw.data[per_class ? i % row : i]) : 1.0;
    const double w = 1.0 + (p - 1.0) * y;
    const double log_sigmoid = std::min(x, 0.0) - std::log1p(std::exp(-std::abs(x)));
    const double sigmoid = x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x));
    return std::pair{(1.0 - y) * x - w * log_sigmoid, w * sigmoid - p * y};
  });
}

/// How many rows of logits [N, C] have their largest value (the first, on ties) at the target
/// class. NaN counts as largest, as in torch.argmax.
template <TrainFloat T>
Result<std::int64_t> argmax_accuracy(TensorView<const T> logits, TensorView<const std::int64_t> targets) {
  if (logits.rank() != 2)
    return fail(Errc::shape_mismatch, "argmax_accuracy: logits must be [N, C], got ", logits.shape);
  if (targets.rank() != 1 || targets.shape[0] != logits.shape[0]) {
    return fail(Errc::shape_mismatch, "argmax_accuracy: targets must be [N] = [", logits.shape[0], "] for logits ",
                logits.shape, ", got ", targets.shape);
  }
  if (auto r = loss_detail::has_data("argmax_accuracy", "logits", logits); !r) return std::move(r).error();
  if (auto r = loss_detail::has_data("argmax_accuracy", "targets", targets); !r) return std::move(r).error();
  std::int64_t correct = 0;
  for (std::int64_t i = 0; i < logits.shape[0]; ++i) {
    std::int64_t best = 0;
    for (std::int64_t c = 1; c < logits.shape[1]; ++c) {
      const T v = logits(i, c);
      const T b = logits(i, best);
      if (!std::isnan(b) && (std::isnan(v) || v > b)) best = c;
    }
    correct += logits.shape[1] > 0 && targets(i) == best ? 1 : 0;
  }
  return correct;
}

}  // namespace teeny
