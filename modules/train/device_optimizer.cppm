// teeny.train:device_optimizer — optimizers for a model trained on the GPU (teeny::cuda): PyTorch's
// SGD, Adam and AdamW stepping its parameters where they live, in device memory, with the CPU
// optimizers' per-element updates (kernels/math/optimizer.hpp), and mixed precision: a bf16 or f16
// model's parameters updated through f32 master copies, and loss scaling (GradScaler) for f16.
//
//   auto model = teeny::cuda::load_cuda_for_training<bf16>(graph, {{"batch", 64}});
//   auto opt = teeny::cuda::AdamW<bf16>::create(*model, {.lr = 1e-3});   // f32 master weights
//   ... forward, model->set_output_grad("logits", dlogits), backward, opt->step(), model->zero_grad()
//
// The options are teeny.train's (SgdOptions, AdamOptions, AdamWOptions), applied to every trained
// parameter (PyTorch's default: one group). The state stays on the GPU; saving it, and parameter
// groups, are planned.
module;
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "cuda/params.hpp"
#include "cuda/runtime.hpp"
#include "math/optimizer.hpp"
export module teeny.train:device_optimizer;
import teeny.core;
import teeny.model;
import teeny.ops;
import teeny.runtime;
import teeny.cuda;
import :optimizer;

namespace teeny::cuda::optimizer_detail {

// Launches `entry` over n elements with `params` packed as `List` lays them out (each parameter's
// type checked against the list's), on `stream`.
template <class List, class... P>
Result<void> launch(std::string_view entry, std::int64_t n, void* stream, const P&... params) {
  static_assert(sizeof...(P) == List::count, "one value per kernel parameter");
  static_assert(
      []<std::size_t... I>(std::index_sequence<I...>) {
        return (std::is_same_v<P, typename List::template type<I>> && ...);
      }(std::make_index_sequence<sizeof...(P)>{}),
      "the values have the kernel's parameter types, in order");
  if (n == 0) return ok();
#if TEENY_HAS_CUDA
  const void* kernel = cuda_kernels::find_kernel(std::string(entry).c_str());
  if (kernel == nullptr) return fail(Errc::not_found, "no CUDA kernel ", entry, " is compiled in");
  alignas(List::alignment) std::byte buffer[List::bytes];
  std::size_t index = 0;
  ((std::memcpy(buffer + List::offsets[index++], &params, sizeof params)), ...);
  void* pointers[List::count];
  for (std::size_t i = 0; i < List::count; ++i) pointers[i] = buffer + List::offsets[i];
  constexpr std::int64_t threads = 256;
  const auto blocks = static_cast<std::uint32_t>(std::min<std::int64_t>((n + threads - 1) / threads, 8192));
  if (const int code = cuda_kernels::launch_kernel(kernel, {blocks, 1, 1}, {threads, 1, 1}, pointers, 0, stream)) {
    return cuda_error(code, cat("launching ", entry, " over ", n, " elements"));
  }
  return ok();
#else
  (void)stream;
  return not_compiled_in(cat("launching ", entry));
#endif
}

template <class T>
std::string entry(std::string_view kernel) {
  return cat("teeny_", kernel, "_", name(dtype_of<T>));
}

// Device memory for n values of U, zeroed, or copied from `host`, in order on the model's stream
// (a plain cudaMemcpy would not be ordered before the stream's kernels).
template <class U>
Result<DeviceBuffer> device_values(CudaContext& cuda, std::int64_t n, const std::vector<U>* host = nullptr) {
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(U);
  auto buffer = DeviceBuffer::allocate(bytes);
  if (!buffer) return std::move(buffer).error();
  auto filled = host != nullptr ? cuda.upload(buffer->data(), host->data(), bytes) : cuda.zero(buffer->data(), bytes);
  if (!filled) return std::move(filled).error();
  return std::move(*buffer);
}

}  // namespace teeny::cuda::optimizer_detail

export namespace teeny::cuda {

template <FloatElement T, class Options, bool Decoupled>
class AdamFamily;
template <FloatElement T>
class Sgd;

/// Loss scaling for f16 training (PyTorch's torch.cuda.amp.GradScaler): the loss's gradient is
/// multiplied by scale() before backward, so that small gradients survive f16; the optimizer divides
/// it out, and skips a step whose gradients overflowed, halving the scale; after growth_interval
/// steps without an overflow the scale doubles.
struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  std::int64_t growth_interval = 2000;
};

class GradScaler {
 public:
  static Result<GradScaler> create(GradScalerOptions options = {}) {
    if (!(options.init_scale > 0) || !(options.growth_factor > 1) ||
        !(options.backoff_factor > 0 && options.backoff_factor < 1) || options.growth_interval < 1) {
      return fail(Errc::invalid_argument, "GradScaler: init_scale > 0, growth_factor > 1, 0 < backoff_factor < 1 ",
                  "and growth_interval >= 1 are needed (got ", options.init_scale, ", ", options.growth_factor, ", ",
                  options.backoff_factor, ", ", options.growth_interval, ")");
    }
    auto found = DeviceBuffer::allocate(sizeof(std::uint32_t));  // zeroed before each check
    if (!found) return std::move(found).error().context("GradScaler");
    GradScaler scaler;
    scaler.options_ = options;
    scaler.scale_ = options.init_scale;
    scaler.found_inf_ = std::move(*found);
    return scaler;
  }
  /// What to multiply the loss's gradient by before backward.
  double scale() const { return scale_; }
  /// Whether the last step was skipped (its gradients overflowed).
  bool skipped_last() const { return skipped_; }

 private:
  template <FloatElement T, class Options, bool Decoupled>
  friend class AdamFamily;
  template <FloatElement T>
  friend class Sgd;

  // Checks every gradient (queued on the model's stream, as everything here): found_inf set where
  // one is not finite.
  Result<void> check(std::span<const ParameterGradient> params, CudaContext& cuda) {
    void* stream = cuda.stream().handle();
    if (auto zeroed = cuda.zero(found_inf_.data(), sizeof(std::uint32_t)); !zeroed) return zeroed;
    for (const ParameterGradient& p : params) {
      Result<void> launched = visit_dtype(p.grad.dtype, [&]<class T>(std::type_identity<T>) -> Result<void> {
        if constexpr (FloatElement<T>) {
          return optimizer_detail::launch<cuda_kernels::NonFiniteParamList<T>>(
              optimizer_detail::entry<T>("non_finite"), p.grad.shape.numel(), stream,
              static_cast<const T*>(p.grad.data), p.grad.shape.numel(), static_cast<std::uint32_t*>(found_inf_.data()));
        } else {
          return fail(Errc::internal, "a gradient of ", p.grad.dtype);
        }
      });
      if (!launched) return std::move(launched).error().context(cat("checking the gradient of '", p.key, "'"));
    }
    return ok();
  }
  const std::uint32_t* found_inf() const { return static_cast<const std::uint32_t*>(found_inf_.data()); }
  // After the step's kernels: reads the flag (waiting for them) and moves the scale.
  Result<void> update(CudaContext& cuda) {
    std::uint32_t found = 0;
    if (auto read = cuda.download(&found, found_inf_.data(), sizeof found); !read) return read;
    skipped_ = found != 0;
    if (skipped_) {
      scale_ *= options_.backoff_factor;
      good_steps_ = 0;
    } else if (++good_steps_ == options_.growth_interval) {
      scale_ *= options_.growth_factor;
      good_steps_ = 0;
    }
    return ok();
  }

  GradScalerOptions options_;
  double scale_ = 1;
  std::int64_t good_steps_ = 0;
  bool skipped_ = false;
  DeviceBuffer found_inf_;
};

/// How a device optimizer keeps a 16-bit model's parameters: through f32 master copies (the
/// default, as mixed-precision training does), or updated in place (pure 16-bit). No effect for f32
/// and f64 models.
struct MasterWeights {
  bool f32_master = true;
};

namespace optimizer_detail {
// A trained parameter as a device optimizer holds it: the model's parameter and gradient, its
// master copy (16-bit models) and state.
struct Slot {
  ParameterGradient param;
  DeviceBuffer master;
  DeviceBuffer first;   // Adam's exp_avg, SGD's momentum buffer
  DeviceBuffer second;  // Adam's exp_avg_sq
  DeviceBuffer max_second;
  std::int64_t step = 0;
  bool has_buffer = false;  // SGD: the momentum buffer holds a step's
};

template <FloatElement T, class Model>
Result<std::vector<Slot>> make_slots(Model& model, MasterWeights master, int state_buffers, bool amsgrad) {
  using U = cuda_kernels::update_t<T>;
  std::vector<Slot> slots;
  const bool masters = master.f32_master && !std::is_same_v<U, T>;
  std::vector<TensorRef> host;
  if (masters) {
    if (auto downloaded = model.download_parameters(); !downloaded) return std::move(downloaded).error();
    host = model.parameters();
  }
  for (const ParameterGradient& p : model.device_parameter_gradients()) {
    if (p.value.dtype != dtype_of<T>) {
      return fail(Errc::dtype_mismatch, "parameter '", p.key, "' is ", p.value.dtype, ", not the optimizer's ",
                  dtype_of<T>);
    }
    Slot slot{p, {}, {}, {}, {}, 0, false};
    const std::int64_t n = p.value.shape.numel();
    if (masters) {
      std::vector<U> values(static_cast<std::size_t>(n));
      for (const TensorRef& h : host) {
        if (h.name != p.key) continue;
        const T* data = reinterpret_cast<const T*>(h.data.data());
        for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<U>(static_cast<float>(data[i]));
      }
      auto copy = device_values<U>(model.backend(), n, &values);
      if (!copy) return std::move(copy).error().context(cat("master copy of '", p.key, "'"));
      slot.master = std::move(*copy);
    }
    DeviceBuffer* state[] = {&slot.first, &slot.second, &slot.max_second};
    for (int s = 0; s < state_buffers + (amsgrad ? 1 : 0); ++s) {
      auto buffer = device_values<U>(model.backend(), n);
      if (!buffer) return std::move(buffer).error().context(cat("optimizer state of '", p.key, "'"));
      *state[s] = std::move(*buffer);
    }
    slots.push_back(std::move(slot));
  }
  if (slots.empty()) return fail(Errc::invalid_argument, "the model has no trained parameters");
  return slots;
}
}  // namespace optimizer_detail

/// torch.optim.Adam (Decoupled false) and AdamW (true) over a GPU model's trained parameters: one
/// launch per parameter per step, on the model's stream, with the CPU's Adam(W) update.
template <FloatElement T, class Options, bool Decoupled>
class AdamFamily {
 public:
  static constexpr std::string_view name = Decoupled ? "AdamW" : "Adam";

  static Result<AdamFamily> create(CudaModelOf<T>& model, const Options& options = {}, MasterWeights master = {}) {
    if (auto valid = teeny::AdamFamily<float, Options, Decoupled>::validate(options); !valid) {
      return std::move(valid).error();
    }
    auto slots = optimizer_detail::make_slots<T>(model, master, 2, options.amsgrad);
    if (!slots) return std::move(slots).error().context(name);
    AdamFamily opt;
    opt.model_ = &model;
    opt.options_ = options;
    opt.initial_lr_ = options.lr;
    opt.slots_ = std::move(*slots);
    return opt;
  }

  /// One step over every parameter (queued); with a scaler, its gradients are unscaled, and the
  /// step skipped (and the scale backed off) when one overflowed.
  Result<void> step(GradScaler* scaler = nullptr) {
    using U = cuda_kernels::update_t<T>;
    void* stream = model_->backend().stream().handle();
    std::vector<ParameterGradient> params;
    for (const auto& s : slots_) params.push_back(s.param);
    if (scaler != nullptr) {
      if (auto checked = scaler->check(params, model_->backend()); !checked) return checked;
    }
    const U multiplier = scaler != nullptr ? static_cast<U>(1.0 / scaler->scale()) : U{1};
    const std::uint32_t* found_inf = scaler != nullptr ? scaler->found_inf() : nullptr;
    for (auto& s : slots_) {
      s.step += 1;
      const auto scalars = math::make_adam_step<U>(options_.lr, options_.beta1, options_.beta2, options_.eps,
                                                   options_.weight_decay, Decoupled, s.step);
      auto launched = optimizer_detail::launch<cuda_kernels::AdamParamList<T>>(
          optimizer_detail::entry<T>("adam"), s.param.value.shape.numel(), stream, static_cast<T*>(s.param.value.data),
          static_cast<const T*>(s.param.grad.data), static_cast<U*>(s.master.data()), static_cast<U*>(s.first.data()),
          static_cast<U*>(s.second.data()), static_cast<U*>(s.max_second.data()), scalars, s.param.value.shape.numel(),
          multiplier, found_inf);
      if (!launched) return std::move(launched).error().context(cat(name, " step of '", s.param.key, "'"));
    }
    if (scaler == nullptr) return ok();
    auto updated = scaler->update(model_->backend());
    // A skipped step is one PyTorch's scaler does not take: the step counts stay.
    if (updated && scaler->skipped_last()) {
      for (auto& s : slots_) s.step -= 1;
    }
    return updated;
  }

  /// The Optimizer concept's one group: the learning rate a schedule sets.
  std::size_t n_groups() const { return 1; }
  double lr(std::size_t /*group*/) const { return options_.lr; }
  double initial_lr(std::size_t /*group*/) const { return initial_lr_; }
  Result<void> set_lr(std::size_t group, double lr) {
    if (group != 0) return fail(Errc::out_of_range, "set_lr: group ", group, " of an optimizer with 1 group");
    if (!(lr >= 0)) return fail(Errc::invalid_argument, "set_lr: invalid learning rate ", lr);
    options_.lr = lr;
    return ok();
  }
  /// Zeroes the model's gradients (queued).
  Result<void> zero_grad() { return model_->zero_grad(); }

 private:
  AdamFamily() = default;
  CudaModelOf<T>* model_ = nullptr;
  Options options_;
  double initial_lr_ = 0;
  std::vector<optimizer_detail::Slot> slots_;
};

template <FloatElement T>
using Adam = AdamFamily<T, AdamOptions, false>;
template <FloatElement T>
using AdamW = AdamFamily<T, AdamWOptions, true>;

/// torch.optim.SGD over a GPU model's trained parameters, with the CPU's update.
template <FloatElement T>
class Sgd {
 public:
  static Result<Sgd> create(CudaModelOf<T>& model, const SgdOptions& options, MasterWeights master = {}) {
    if (auto valid = teeny::Sgd<float>::validate(options); !valid) return std::move(valid).error();
    auto slots = optimizer_detail::make_slots<T>(model, master, options.momentum != 0 ? 1 : 0, false);
    if (!slots) return std::move(slots).error().context("SGD");
    Sgd opt;
    opt.model_ = &model;
    opt.options_ = options;
    opt.initial_lr_ = options.lr;
    opt.slots_ = std::move(*slots);
    return opt;
  }

  Result<void> step(GradScaler* scaler = nullptr) {
    using U = cuda_kernels::update_t<T>;
    void* stream = model_->backend().stream().handle();
    std::vector<ParameterGradient> params;
    for (const auto& s : slots_) params.push_back(s.param);
    if (scaler != nullptr) {
      if (auto checked = scaler->check(params, model_->backend()); !checked) return checked;
    }
    const U multiplier = scaler != nullptr ? static_cast<U>(1.0 / scaler->scale()) : U{1};
    const std::uint32_t* found_inf = scaler != nullptr ? scaler->found_inf() : nullptr;
    const math::SgdStep<U> scalars{static_cast<U>(options_.weight_decay),
                                   static_cast<U>(options_.momentum),
                                   static_cast<U>(1 - options_.dampening),
                                   static_cast<U>(-options_.lr),
                                   options_.weight_decay != 0,
                                   options_.nesterov};
    for (auto& s : slots_) {
      auto launched = optimizer_detail::launch<cuda_kernels::SgdParamList<T>>(
          optimizer_detail::entry<T>("sgd"), s.param.value.shape.numel(), stream, static_cast<T*>(s.param.value.data),
          static_cast<const T*>(s.param.grad.data), static_cast<U*>(s.master.data()), static_cast<U*>(s.first.data()),
          static_cast<std::uint32_t>(s.has_buffer ? 1 : 0), scalars, s.param.value.shape.numel(), multiplier,
          found_inf);
      if (!launched) return std::move(launched).error().context(cat("SGD step of '", s.param.key, "'"));
    }
    Result<void> updated = scaler != nullptr ? scaler->update(model_->backend()) : ok();
    // A skipped step leaves the momentum buffers as they were.
    const bool stepped = scaler == nullptr || !scaler->skipped_last();
    for (auto& s : slots_) s.has_buffer = s.has_buffer || (stepped && s.first.data() != nullptr);
    return updated;
  }

  std::size_t n_groups() const { return 1; }
  double lr(std::size_t /*group*/) const { return options_.lr; }
  double initial_lr(std::size_t /*group*/) const { return initial_lr_; }
  Result<void> set_lr(std::size_t group, double lr) {
    if (group != 0) return fail(Errc::out_of_range, "set_lr: group ", group, " of an optimizer with 1 group");
    if (!(lr >= 0)) return fail(Errc::invalid_argument, "set_lr: invalid learning rate ", lr);
    options_.lr = lr;
    return ok();
  }
  Result<void> zero_grad() { return model_->zero_grad(); }

 private:
  Sgd() = default;
  CudaModelOf<T>* model_ = nullptr;
  SgdOptions options_;
  double initial_lr_ = 0;
  std::vector<optimizer_detail::Slot> slots_;
};

}  // namespace teeny::cuda
