// teeny.cuda:optimizer — optimizers for a model trained on the GPU (teeny::cuda): PyTorch's
// SGD, Adam and AdamW stepping its parameters where they live, in device memory, with the CPU
// optimizers' per-element updates (kernels/math/optimizer.hpp), and mixed precision: a bf16 or f16
// model's parameters updated through f32 master copies, and loss scaling (GradScaler) for f16.
// (One coherent thing at about 700 lines: three optimizers over one shared state and launch path.)
//
//   auto model = teeny::cuda::load_cuda_for_training<bf16>(graph, {{"batch", 64}});
//   auto opt = teeny::cuda::AdamW<bf16>::create(*model, {.lr = 1e-3});   // f32 master weights
//   ... forward, model->set_output_grad("logits", dlogits), backward, opt->step(), model->zero_grad()
//
// The options are teeny.train's (SgdOptions, AdamOptions, AdamWOptions), for every trained
// parameter (one group, PyTorch's default) or per parameter group (DeviceParamGroup, by key;
// weight_decay_groups makes PyTorch's usual pair). The state lives on the GPU; state_tensors()
// copies it out under teeny.train's keys (a checkpoint) and load_state() puts it back.
module;
#include "cuda/params.hpp"
#include "cuda/runtime.hpp"
#include "math/optimizer.hpp"
export module teeny.cuda:optimizer;
import teeny.std;
import teeny.core;
import teeny.model;
import teeny.ops;
import teeny.io;
import teeny.runtime;
import teeny.train;
import :device;
import :context;
import :launch;
import :cuda_model;

namespace teeny::cuda::device_detail {

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

}  // namespace teeny::cuda::device_detail

export namespace teeny::cuda {

template <FloatElement T>
class DeviceOptimizer;

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
  template <FloatElement T>
  friend class DeviceOptimizer;

  // Checks every gradient (queued on the model's stream, as everything here) with `non_finite`
  // (teeny_non_finite_<T>): found_inf set where one is not finite.
  template <FloatElement T>
  Result<void> check(std::span<const ParameterGradient> params, const KernelEntry& non_finite, CudaContext& cuda) {
    void* stream = cuda.stream().handle();
    if (auto zeroed = cuda.zero(found_inf_.data(), sizeof(std::uint32_t)); !zeroed) return zeroed;
    for (const ParameterGradient& p : params) {
      auto launched = launch_elements<cuda_kernels::NonFiniteParamList<T>>(
          non_finite, p.grad.shape.numel(), stream, static_cast<const T*>(p.grad.data), p.grad.shape.numel(),
          static_cast<std::uint32_t*>(found_inf_.data()));
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

/// Trained parameters of a GPU model that share options (PyTorch's param_groups entry), by key.
template <class Options>
struct DeviceParamGroup {
  std::vector<std::string> keys;
  Options options;
};

/// PyTorch's usual two groups over a GPU model's trained parameters: group 0 the parameters of
/// rank >= 2 (weights) with `options`, group 1 those of rank <= 1 (biases, norm weights) with
/// weight_decay = 0 (teeny::weight_decay_groups' split).
template <class Model, class Options>
std::vector<DeviceParamGroup<Options>> weight_decay_groups(Model& model, const Options& options) {
  std::vector<DeviceParamGroup<Options>> groups(2);
  groups[0].options = options;
  groups[1].options = options;
  groups[1].options.weight_decay = 0;
  for (const ParameterGradient& p : model.device_parameter_gradients()) {
    groups[weight_decay_group(p.value.shape.rank())].keys.emplace_back(p.key);
  }
  return groups;
}

namespace device_detail {
// A trained parameter as a device optimizer holds it: the model's parameter and gradient, its
// group, its master copy (16-bit models) and state, and the keys its state is saved under.
struct Slot {
  ParameterGradient param;
  std::size_t group = 0;
  DeviceBuffer master;
  DeviceBuffer first;   // Adam's exp_avg, SGD's momentum buffer
  DeviceBuffer second;  // Adam's exp_avg_sq
  DeviceBuffer max_second;
  std::int64_t step = 0;
  bool has_buffer = false;  // SGD: the momentum buffer holds a step's
  std::string prefix;       // "state.{i}.", i counted over the groups in order, as PyTorch numbers them
};

// The model's trained parameters named by `groups`, in their order (group 0's first), each with
// its group's index; an error names a key that is not a trained parameter or is given twice.
template <class Model, class Options>
Result<std::vector<std::pair<ParameterGradient, std::size_t>>> select(
    Model& model, const std::vector<DeviceParamGroup<Options>>& groups) {
  const std::vector<ParameterGradient> trained = model.device_parameter_gradients();
  std::vector<std::pair<ParameterGradient, std::size_t>> out;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    for (const std::string& key : groups[g].keys) {
      const auto found =
          std::find_if(trained.begin(), trained.end(), [&](const ParameterGradient& p) { return p.key == key; });
      if (found == trained.end()) {
        return fail(Errc::not_found, "group ", g, ": '", key, "' is not a trained parameter of the model");
      }
      for (const auto& [p, earlier] : out) {
        if (p.key == key) {
          return fail(Errc::duplicate, "'", key, "' is in group ", earlier, " and group ", g,
                      " (a parameter may be in one group only)");
        }
      }
      out.emplace_back(*found, g);
    }
  }
  if (out.empty()) return fail(Errc::invalid_argument, "got an empty parameter list");
  return out;
}

// A slot for each selected parameter: a master copy for 16-bit T (unless `master` says not) and
// `buffers(group)` zeroed state buffers.
template <FloatElement T, class Model, class Buffers>
Result<std::vector<Slot>> make_slots(Model& model, const std::vector<std::pair<ParameterGradient, std::size_t>>& chosen,
                                     MasterWeights master, Buffers&& buffers) {
  using U = cuda_kernels::update_t<T>;
  std::vector<Slot> slots;
  const bool masters = master.f32_master && !std::is_same_v<U, T>;
  std::vector<TensorRef> host;
  if (masters) {
    if (auto downloaded = model.download_parameters(); !downloaded) return std::move(downloaded).error();
    host = model.parameters();
  }
  for (const auto& [p, group] : chosen) {
    if (p.value.dtype != dtype_of<T>) {
      return fail(Errc::dtype_mismatch, "parameter '", p.key, "' is ", p.value.dtype, ", not the optimizer's ",
                  dtype_of<T>);
    }
    Slot slot{p, group, {}, {}, {}, {}, 0, false, cat("state.", slots.size(), ".")};
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
    for (int s = 0; s < buffers(group); ++s) {
      auto buffer = device_values<U>(model.backend(), n);
      if (!buffer) return std::move(buffer).error().context(cat("optimizer state of '", p.key, "'"));
      *state[s] = std::move(*buffer);
    }
    slots.push_back(std::move(slot));
  }
  return slots;
}

// A device buffer of a slot's state under its key. `given` (optional state, SGD's momentum buffer)
// says whether the buffer holds state yet: saved only then, and set by a load.
struct SavedBuffer {
  std::string key;
  DeviceBuffer* buffer;
  bool* given = nullptr;
};
}  // namespace device_detail

/// What the device optimizers share: the model, its trained parameters (with their master copies
/// and state) in groups, each group's learning rate, the start of a step (the scaler's check of
/// the gradients, the multiplier that unscales them), and saving and loading the state. Kernels
/// are looked up once, at create.
///
/// State keys: teeny.train's optimizers' (PyTorch's optimizer.state_dict()["state"] flattened,
/// i counted over the groups in order), with the state in the update type (f32 for a 16-bit model,
/// f64 for f64); a 16-bit model's master copy adds state.{i}.master (f32, the parameter's shape).
template <FloatElement T>
class DeviceOptimizer {
 public:
  using U = cuda_kernels::update_t<T>;

  /// The Optimizer concept: the groups and the learning rate a schedule sets in each.
  std::size_t n_groups() const { return lr_.size(); }
  double lr(std::size_t group) const { return lr_[group]; }
  double initial_lr(std::size_t group) const { return initial_lr_[group]; }
  Result<void> set_lr(std::size_t group, double lr) {
    if (group >= lr_.size()) {
      return fail(Errc::out_of_range, "set_lr: group ", group, " of an optimizer with ", lr_.size(), " groups");
    }
    if (!(lr >= 0)) return fail(Errc::invalid_argument, "set_lr: invalid learning rate ", lr, " for group ", group);
    lr_[group] = lr;
    return ok();
  }
  /// Zeroes the model's gradients (queued).
  Result<void> zero_grad() { return model_->zero_grad(); }

 protected:
  // What a step's launches take besides each parameter's own: the stream, the gradients'
  // multiplier (device memory: 1 / the scale with a scaler; null without one) and the scaler's
  // overflow flag (null without one).
  struct StepStart {
    void* stream;
    const U* multiplier;
    const std::uint32_t* found_inf;
  };

  DeviceOptimizer() = default;

  // The slots of the parameters `groups` name (master copies for 16-bit T, `buffers(group)` state
  // buffers each) and the kernels: teeny_<update_kernel>_<T>, and the non-finite check a scaler
  // launches.
  // `Step` is what each slot's launch reads from device memory per step (stage_values).
  template <class Step, class Options, class Buffers>
  Result<void> init(CudaModelOf<T>& model, const std::vector<DeviceParamGroup<Options>>& groups,
                    std::string_view update_kernel, MasterWeights master, Buffers&& buffers) {
    auto update = find_kernel_entry<T>(update_kernel);
    if (!update) return std::move(update).error();
    auto non_finite = find_kernel_entry<T>("non_finite");
    if (!non_finite) return std::move(non_finite).error();
    auto chosen = device_detail::select(model, groups);
    if (!chosen) return std::move(chosen).error();
    auto slots = device_detail::make_slots<T>(model, *chosen, master, buffers);
    if (!slots) return std::move(slots).error();
    auto values = DeviceBuffer::allocate(slots->size() * sizeof(Step));
    if (!values) return std::move(values).error().context("the step's values");
    auto multiplier = DeviceBuffer::allocate(sizeof(U));
    if (!multiplier) return std::move(multiplier).error().context("the gradients' multiplier");
    step_values_ = std::move(*values);
    multiplier_ = std::move(*multiplier);
    model_ = &model;
    for (const auto& group : groups) {
      lr_.push_back(group.options.lr);
      initial_lr_.push_back(group.options.lr);
    }
    update_ = std::move(*update);
    non_finite_ = std::move(*non_finite);
    slots_ = std::move(*slots);
    for (const auto& slot : slots_) params_.push_back(slot.param);
    return ok();
  }

  // A step's host part: each slot's `values` (what its launch reads, in slot order) and, with a
  // scaler, the multiplier that unscales the gradients, copied to device memory (queued).
  template <class Step>
  Result<void> stage_values(const std::vector<Step>& values, GradScaler* scaler) {
    CudaContext& cuda = model_->backend();
    if (auto sent = cuda.upload(step_values_.data(), values.data(), values.size() * sizeof(Step)); !sent) {
      return std::move(sent).error().context("staging the step's values");
    }
    if (scaler == nullptr) return ok();
    host_multiplier_ = static_cast<U>(1.0 / scaler->scale());
    return cuda.upload(multiplier_.data(), &host_multiplier_, sizeof(U)).context("staging the gradients' multiplier");
  }
  // Slot i's staged values, where its launch reads them.
  template <class Step>
  const Step* staged(std::size_t i) const {
    return static_cast<const Step*>(step_values_.data()) + i;
  }

  // Checks the gradients with `scaler` (when given; queued) and says what the step's launches take.
  Result<StepStart> start_step(GradScaler* scaler) {
    void* stream = model_->backend().stream().handle();
    if (scaler == nullptr) return StepStart{stream, nullptr, nullptr};
    if (auto checked = scaler->check<T>(params_, non_finite_, model_->backend()); !checked) {
      return std::move(checked).error();
    }
    return StepStart{stream, static_cast<const U*>(multiplier_.data()), scaler->found_inf()};
  }
  // After the step's launches: the scaler reads its flag (waiting for them) and moves its scale.
  // Whether the step was taken.
  Result<bool> finish_step(GradScaler* scaler) {
    if (scaler == nullptr) return true;
    if (auto updated = scaler->update(model_->backend()); !updated) return std::move(updated).error();
    return !scaler->skipped_last();
  }

  // The state of every slot, copied from the device as named host tensors: the step counts when
  // `steps` (Adam's, i64 0-d), then what `named(slot)` lists (each of its parameter's shape, in
  // the update type; an optional buffer only once it holds state). Waits for the queued steps.
  template <class Named>
  Result<std::vector<NamedTensor>> save_state(bool steps, Named&& named) {
    std::vector<NamedTensor> out;
    for (auto& s : slots_) {
      if (!steps) break;
      auto t = Tensor::zeros(DType::i64, ConcreteShape{});
      if (!t) return std::move(t).error();
      std::memcpy(t->data(), &s.step, sizeof s.step);
      out.push_back({s.prefix + "step", std::move(*t)});
    }
    for (auto& s : slots_) {
      for (const device_detail::SavedBuffer& b : named(s)) {
        if (b.given != nullptr && !*b.given) continue;
        auto t = Tensor::zeros(dtype_of<U>, s.param.value.shape);
        if (!t) return std::move(t).error();
        if (t->bytes() > 0) {
          if (auto read = model_->backend().download(t->data(), b.buffer->data(), t->bytes()); !read) {
            return std::move(read).error().context(cat("saving '", b.key, "'"));
          }
        }
        out.push_back({b.key, std::move(*t)});
      }
    }
    return out;
  }

  // Replaces the state by `tensors`, save_state's keys: checked first against every key, dtype and
  // shape (optimizer_detail::load_slots: all problems in one error, nothing written on an error),
  // then each buffer uploaded from host staging.
  template <class Named>
  Result<void> load_saved_state(std::string_view who, std::span<const TensorRef> tensors, bool steps, Named&& named) {
    std::vector<std::string> step_keys;
    std::vector<device_detail::SavedBuffer> buffers;
    std::vector<const ConcreteShape*> shapes;
    for (auto& s : slots_) {
      if (steps) step_keys.push_back(s.prefix + "step");
      for (device_detail::SavedBuffer& b : named(s)) {
        buffers.push_back(std::move(b));
        shapes.push_back(&s.param.value.shape);
      }
    }
    std::vector<optimizer_detail::Slot> slots;
    for (std::size_t i = 0; i < step_keys.size(); ++i) {
      slots.push_back({step_keys[i], DType::i64, ConcreteShape{}, std::as_writable_bytes(std::span(&slots_[i].step, 1)),
                       false, nullptr, true});
    }
    std::vector<Tensor> staging;
    staging.reserve(buffers.size());  // the slots keep views of the staged bytes
    for (std::size_t i = 0; i < buffers.size(); ++i) {
      auto t = Tensor::zeros(dtype_of<U>, *shapes[i]);
      if (!t) return std::move(t).error();
      staging.push_back(std::move(*t));
      slots.push_back({buffers[i].key, dtype_of<U>, *shapes[i], optimizer_detail::bytes_of(staging.back()),
                       buffers[i].given != nullptr, buffers[i].given});
    }
    if (auto loaded = optimizer_detail::load_slots(who, slots, tensors); !loaded) return loaded;
    for (std::size_t i = 0; i < buffers.size(); ++i) {
      if (staging[i].bytes() == 0 || (buffers[i].given != nullptr && !*buffers[i].given)) continue;
      if (auto sent = model_->backend().upload(buffers[i].buffer->data(), staging[i].data(), staging[i].bytes());
          !sent) {
        return std::move(sent).error().context(cat(who, ": loading '", buffers[i].key, "'"));
      }
    }
    return model_->backend().synchronize();  // the staging buffers are freed on return
  }

  // A 16-bit model's master copy, saved with the state.
  static void add_master(device_detail::Slot& s, std::vector<device_detail::SavedBuffer>& out) {
    if (s.master.data() != nullptr) out.push_back({s.prefix + "master", &s.master});
  }

  CudaModelOf<T>* model_ = nullptr;
  std::vector<double> lr_;
  std::vector<double> initial_lr_;
  KernelEntry update_;
  KernelEntry non_finite_;
  std::vector<device_detail::Slot> slots_;
  std::vector<ParameterGradient> params_;  // the slots' parameters, as the scaler's check takes them
  DeviceBuffer step_values_;               // per slot, what its launch reads (stage_values)
  DeviceBuffer multiplier_;                // one U: 1 / the scaler's scale
  U host_multiplier_{1};                   // its host copy, the upload's source
};

/// torch.optim.Adam (Decoupled false) and AdamW (true) over a GPU model's trained parameters: one
/// launch per parameter per step, on the model's stream, with the CPU's Adam(W) update.
template <FloatElement T, class Options, bool Decoupled>
class AdamFamily : public DeviceOptimizer<T> {
 public:
  static constexpr std::string_view name = Decoupled ? "AdamW" : "Adam";
  using U = cuda_kernels::update_t<T>;

  /// Over parameter groups (weight_decay_groups makes PyTorch's usual pair).
  static Result<AdamFamily> create(CudaModelOf<T>& model, std::vector<DeviceParamGroup<Options>> groups,
                                   MasterWeights master = {}) {
    for (std::size_t g = 0; g < groups.size(); ++g) {
      if (auto valid = teeny::AdamFamily<float, Options, Decoupled>::validate(groups[g].options); !valid) {
        return std::move(valid).error().context(cat("group ", g));
      }
    }
    AdamFamily opt;
    opt.options_.reserve(groups.size());
    for (const auto& group : groups) opt.options_.push_back(group.options);
    const auto buffers = [&](std::size_t g) { return groups[g].options.amsgrad ? 3 : 2; };
    if (auto made = opt.template init<Step>(model, groups, "adam", master, buffers); !made) {
      return std::move(made).error().context(name);
    }
    opt.staged_.resize(opt.slots_.size());
    return opt;
  }
  /// Over every trained parameter, in one group.
  static Result<AdamFamily> create(CudaModelOf<T>& model, const Options& options = {}, MasterWeights master = {}) {
    return create(model, all_parameters(model, options), master);
  }

  /// One step over every parameter (queued); with a scaler, its gradients are unscaled, and the
  /// step skipped (and the scale backed off) when one overflowed.
  Result<void> step(GradScaler* scaler = nullptr) {
    if (auto staged = stage(scaler); !staged) return staged;
    if (auto queued = queue(scaler); !queued) return queued;
    return finish(scaler);
  }

  /// step() in its three parts, as a training step captured whole (TrainingStep) takes them:
  /// stage() works out the step's scalars (learning rate, bias corrections) on the host and copies
  /// them to device memory; queue() queues the scaler's check and the updates, which read them
  /// there (so a captured queue() replays with each step's values); finish() then takes the step's
  /// outcome (with a scaler: reads its overflow flag, waiting for the kernels) and counts it.
  Result<void> stage(GradScaler* scaler = nullptr) {
    for (std::size_t i = 0; i < this->slots_.size(); ++i) {
      auto& s = this->slots_[i];
      const Options& o = options_[s.group];
      staged_[i] =
          math::make_adam_step<U>(this->lr_[s.group], o.beta1, o.beta2, o.eps, o.weight_decay, Decoupled, s.step + 1);
    }
    return this->stage_values(staged_, scaler).context(name);
  }
  Result<void> queue(GradScaler* scaler = nullptr) {
    auto start = this->start_step(scaler);
    if (!start) return std::move(start).error().context(name);
    for (std::size_t i = 0; i < this->slots_.size(); ++i) {
      auto& s = this->slots_[i];
      const std::int64_t n = s.param.value.shape.numel();
      auto launched = launch_elements<cuda_kernels::AdamParamList<T>>(
          this->update_, n, start->stream, static_cast<T*>(s.param.value.data),
          static_cast<const T*>(s.param.grad.data), static_cast<U*>(s.master.data()), static_cast<U*>(s.first.data()),
          static_cast<U*>(s.second.data()), static_cast<U*>(s.max_second.data()), this->template staged<Step>(i), n,
          start->multiplier, start->found_inf);
      if (!launched) return std::move(launched).error().context(cat(name, " step of '", s.param.key, "'"));
    }
    return ok();
  }
  Result<void> finish(GradScaler* scaler = nullptr) {
    auto taken = this->finish_step(scaler);
    if (!taken) return std::move(taken).error().context(name);
    // A skipped step is one PyTorch's scaler does not take: the step counts stay.
    if (*taken) {
      for (auto& s : this->slots_) s.step += 1;
    }
    return ok();
  }

  /// The state, copied from the device: state.{i}.step, exp_avg, exp_avg_sq (and max_exp_avg_sq
  /// with amsgrad; master for a 16-bit model's master copy). Waits for the queued steps.
  Result<std::vector<NamedTensor>> state_tensors() {
    return this->save_state(true, [&](device_detail::Slot& s) { return named(s); });
  }
  /// Replaces the state by `tensors`: every key of state_tensors' scheme with its dtype and shape,
  /// and nothing else (checked first: on an error nothing changes).
  Result<void> load_state(std::span<const TensorRef> tensors) {
    return this->load_saved_state(name, tensors, true, [&](device_detail::Slot& s) { return named(s); });
  }
  Result<void> load_state(const SafetensorsFile& file) {
    auto refs = optimizer_detail::refs_of(file);
    if (!refs) return std::move(refs).error();
    return load_state(*refs).context(cat("file '", file.path(), "'"));
  }

 private:
  AdamFamily() = default;
  static std::vector<DeviceParamGroup<Options>> all_parameters(CudaModelOf<T>& model, const Options& options) {
    DeviceParamGroup<Options> group{{}, options};
    for (const ParameterGradient& p : model.device_parameter_gradients()) group.keys.emplace_back(p.key);
    return {std::move(group)};
  }
  // Slot s's state buffers under their keys, then its master copy's.
  std::vector<device_detail::SavedBuffer> named(device_detail::Slot& s) const {
    std::vector<device_detail::SavedBuffer> out{{s.prefix + "exp_avg", &s.first}, {s.prefix + "exp_avg_sq", &s.second}};
    if (options_[s.group].amsgrad) out.push_back({s.prefix + "max_exp_avg_sq", &s.max_second});
    DeviceOptimizer<T>::add_master(s, out);
    return out;
  }
  using Step = math::AdamStep<U>;
  std::vector<Options> options_;  // per group; lr is the base's (set_lr changes it)
  std::vector<Step> staged_;      // per slot: the host's copy of what stage() sent
};

template <FloatElement T>
using Adam = AdamFamily<T, AdamOptions, false>;
template <FloatElement T>
using AdamW = AdamFamily<T, AdamWOptions, true>;

/// torch.optim.SGD over a GPU model's trained parameters, with the CPU's update.
template <FloatElement T>
class Sgd : public DeviceOptimizer<T> {
 public:
  using U = cuda_kernels::update_t<T>;

  /// Over parameter groups (weight_decay_groups makes PyTorch's usual pair).
  static Result<Sgd> create(CudaModelOf<T>& model, std::vector<DeviceParamGroup<SgdOptions>> groups,
                            MasterWeights master = {}) {
    for (std::size_t g = 0; g < groups.size(); ++g) {
      if (auto valid = teeny::Sgd<float>::validate(groups[g].options); !valid) {
        return std::move(valid).error().context(cat("group ", g));
      }
    }
    Sgd opt;
    for (const auto& group : groups) opt.options_.push_back(group.options);
    const auto buffers = [&](std::size_t g) { return groups[g].options.momentum != 0 ? 1 : 0; };
    if (auto made = opt.template init<Step>(model, groups, "sgd", master, buffers); !made) {
      return std::move(made).error().context("SGD");
    }
    opt.staged_.resize(opt.slots_.size());
    return opt;
  }
  /// Over every trained parameter, in one group.
  static Result<Sgd> create(CudaModelOf<T>& model, const SgdOptions& options, MasterWeights master = {}) {
    DeviceParamGroup<SgdOptions> group{{}, options};
    for (const ParameterGradient& p : model.device_parameter_gradients()) group.keys.emplace_back(p.key);
    return create(model, std::vector<DeviceParamGroup<SgdOptions>>{std::move(group)}, master);
  }

  /// One step over every parameter (queued), with a scaler as Adam's.
  Result<void> step(GradScaler* scaler = nullptr) {
    if (auto staged = stage(scaler); !staged) return staged;
    if (auto queued = queue(scaler); !queued) return queued;
    return finish(scaler);
  }

  /// step() in three parts, as Adam's: stage() copies each parameter's scalars (and whether its
  /// momentum buffer holds a step's yet) to device memory, queue() queues the check and the
  /// updates, finish() takes the outcome.
  Result<void> stage(GradScaler* scaler = nullptr) {
    for (std::size_t i = 0; i < this->slots_.size(); ++i) {
      const auto& s = this->slots_[i];
      const SgdOptions& o = options_[s.group];
      staged_[i] = {{static_cast<U>(o.weight_decay), static_cast<U>(o.momentum), static_cast<U>(1 - o.dampening),
                     static_cast<U>(-this->lr_[s.group]), o.weight_decay != 0, o.nesterov},
                    s.has_buffer ? 1U : 0U};
    }
    return this->stage_values(staged_, scaler).context("SGD");
  }
  Result<void> queue(GradScaler* scaler = nullptr) {
    auto start = this->start_step(scaler);
    if (!start) return std::move(start).error().context("SGD");
    for (std::size_t i = 0; i < this->slots_.size(); ++i) {
      auto& s = this->slots_[i];
      const std::int64_t n = s.param.value.shape.numel();
      auto launched = launch_elements<cuda_kernels::SgdParamList<T>>(
          this->update_, n, start->stream, static_cast<T*>(s.param.value.data),
          static_cast<const T*>(s.param.grad.data), static_cast<U*>(s.master.data()), static_cast<U*>(s.first.data()),
          this->template staged<Step>(i), n, start->multiplier, start->found_inf);
      if (!launched) return std::move(launched).error().context(cat("SGD step of '", s.param.key, "'"));
    }
    return ok();
  }
  Result<void> finish(GradScaler* scaler = nullptr) {
    auto taken = this->finish_step(scaler);
    if (!taken) return std::move(taken).error().context("SGD");
    // A skipped step leaves the momentum buffers as they were.
    for (auto& s : this->slots_) s.has_buffer = s.has_buffer || (*taken && s.first.data() != nullptr);
    return ok();
  }

  /// The state, copied from the device: state.{i}.momentum_buffer where it exists (momentum, and a
  /// step taken), and master for a 16-bit model's master copy. Waits for the queued steps.
  Result<std::vector<NamedTensor>> state_tensors() { return this->save_state(false, named); }
  /// Replaces the state by `tensors` (state_tensors' scheme): a parameter whose momentum buffer is
  /// absent has none yet. Checked first: on an error nothing changes.
  Result<void> load_state(std::span<const TensorRef> tensors) {
    return this->load_saved_state("SGD", tensors, false, named);
  }
  Result<void> load_state(const SafetensorsFile& file) {
    auto refs = optimizer_detail::refs_of(file);
    if (!refs) return std::move(refs).error();
    return load_state(*refs).context(cat("file '", file.path(), "'"));
  }

 private:
  Sgd() = default;
  // Slot s's momentum buffer (with momentum; saved once a step has filled it), then its master copy.
  static std::vector<device_detail::SavedBuffer> named(device_detail::Slot& s) {
    std::vector<device_detail::SavedBuffer> out;
    if (s.first.data() != nullptr) out.push_back({s.prefix + "momentum_buffer", &s.first, &s.has_buffer});
    DeviceOptimizer<T>::add_master(s, out);
    return out;
  }
  using Step = cuda_kernels::SgdDeviceStep<U>;
  std::vector<SgdOptions> options_;  // per group; lr is the base's (set_lr changes it)
  std::vector<Step> staged_;         // per slot: the host's copy of what stage() sent
};

}  // namespace teeny::cuda
