// teeny.train:parameter — a trainable parameter (its key, value and gradient, owned by the model)
// and what is done to all gradients at once: zero_grad and clip_grad_norm (PyTorch's
// torch.nn.utils.clip_grad_norm_).
//
//   std::span<Parameter<float>> params = model.parameters();
//   auto total = clip_grad_norm(params, 1.0);            // Result<double>: the norm before clipping
//   zero_grad(params);
export module teeny.train:parameter;
import teeny.std;
import teeny.core;

export namespace teeny {

/// A float type training computes in: float or double (f16/bf16 are storage types only).
/// Satisfied by float and double.
template <class T>
concept TrainFloat = FloatElement<T> && std::floating_point<T>;

/// One trainable tensor. The model owns value's and grad's memory; both are contiguous and of
/// the same shape. backward accumulates into grad.
template <FloatElement T>
struct Parameter {
  std::string key;      // the PyTorch state_dict key, e.g. "fc1.weight"
  TensorView<T> value;  // contiguous
  TensorView<T> grad;   // same shape, contiguous
};

/// Checks what the training functions rely on: each value and grad non-null (unless empty),
/// contiguous and of equal shape, keys unique. `who` opens the message ("SGD").
template <FloatElement T>
Result<void> check_parameters(std::span<const Parameter<T>> params, std::string_view who) {
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Parameter<T>& p = params[i];
    auto where = [&] { return cat(who, ": parameter ", i, " '", p.key, "'"); };
    if (p.value.shape != p.grad.shape) {
      return fail(Errc::shape_mismatch, "its value is ", p.value.shape, " but its grad is ", p.grad.shape)
          .context(where());
    }
    if (!p.value.is_contiguous() || !p.grad.is_contiguous()) {
      return fail(Errc::unsupported, "value and grad must be contiguous").context(where());
    }
    if (p.value.numel() > 0 && (p.value.data == nullptr || p.grad.data == nullptr)) {
      return fail(Errc::invalid_argument, "value or grad has no data (shape ", p.value.shape, ")").context(where());
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (params[j].key == p.key) {
        return fail(Errc::duplicate, "parameters ", j, " and ", i, " are both named '", p.key, "'").context(who);
      }
    }
  }
  return ok();
}

/// Sets every gradient to zero (a grad without data is skipped).
template <TrainFloat T>
void zero_grad(std::span<const Parameter<T>> params) {
  for (const Parameter<T>& p : params) {
    if (p.grad.data == nullptr) continue;
    for (T& g : p.grad.span()) g = T(0);
  }
}
template <TrainFloat T>
void zero_grad(std::span<Parameter<T>> params) {
  zero_grad(std::span<const Parameter<T>>(params));
}

/// torch.nn.utils.clip_grad_norm_: the norm of all gradients taken together (norm_type p > 0, or
/// infinity for the largest |g|); when it exceeds max_norm every gradient is multiplied by
/// max_norm / (norm + 1e-6). Like PyTorch, the gradients are multiplied by the coefficient clamped
/// to 1 even when no clipping is needed, and a non-finite norm is only an error when asked (it
/// otherwise makes every gradient NaN, as in PyTorch). Returns the norm before clipping.
/// norm_type 0 or negative is refused (PyTorch's p = 0 counts non-zero norms, never useful here).
template <TrainFloat T>
Result<double> clip_grad_norm(std::span<const Parameter<T>> params, double max_norm, double norm_type = 2.0,
                              bool error_if_nonfinite = false) {
  if (!(norm_type > 0)) {
    return fail(Errc::invalid_argument, "clip_grad_norm: norm_type must be > 0 or infinity, got ", norm_type);
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (!params[i].grad.is_contiguous() || (params[i].grad.data == nullptr && params[i].grad.numel() > 0)) {
      return fail(Errc::invalid_argument, "clip_grad_norm: the grad ", params[i].grad.shape, " of parameter ", i, " '",
                  params[i].key, "' is not contiguous or has no data");
    }
  }
  if (params.empty()) return 0.0;
  double total = 0;
  if (std::isinf(norm_type)) {
    // max |g|, NaN-propagating like torch.max.
    for (const Parameter<T>& p : params) {
      for (T g : p.grad.span()) {
        const double a = std::abs(static_cast<double>(g));
        if (std::isnan(a) || a > total) total = a;
        if (std::isnan(total)) break;
      }
    }
  } else {
    double sum = 0;
    for (const Parameter<T>& p : params) {
      for (T g : p.grad.span()) {
        const double a = std::abs(static_cast<double>(g));
        sum += norm_type == 2.0 ? a * a : (norm_type == 1.0 ? a : std::pow(a, norm_type));
      }
    }
    total = norm_type == 2.0 ? std::sqrt(sum) : (norm_type == 1.0 ? sum : std::pow(sum, 1.0 / norm_type));
  }
  if (error_if_nonfinite && !std::isfinite(total)) {
    return fail(Errc::invalid_argument, "clip_grad_norm: the total norm of order ", norm_type, " of the gradients of ",
                params.size(), " parameters is non-finite (", total, "), so they cannot be clipped");
  }
  const double coef = max_norm / (total + 1e-6);
  const T clamped = static_cast<T>(std::isnan(coef) ? coef : std::min(coef, 1.0));
  for (const Parameter<T>& p : params) {
    for (T& g : p.grad.span()) g *= clamped;
  }
  return total;
}
template <TrainFloat T>
Result<double> clip_grad_norm(std::span<Parameter<T>> params, double max_norm, double norm_type = 2.0,
                              bool error_if_nonfinite = false) {
  return clip_grad_norm(std::span<const Parameter<T>>(params), max_norm, norm_type, error_if_nonfinite);
}

}  // namespace teeny
