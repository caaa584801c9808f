// teeny.train:optimizer — SGD, Adam and AdamW with PyTorch 1.13's update formulas and defaults, over
// parameter groups that each have their own options. All state is allocated when an optimizer is
// created: step() and zero_grad() never allocate.
//
//   auto opt = AdamW<float>::create(weight_decay_groups<float>(model.parameters(), AdamWOptions{.lr = 3e-4}));
//   if (!opt) return std::move(opt).error();
//   opt->zero_grad();  /* forward, loss, backward */  opt->step();
//   auto saved = save_safetensors("opt.safetensors", opt->state_tensors());
//   auto file = SafetensorsFile::open("opt.safetensors");
//   auto loaded = opt->load_state(*file);          // every key, dtype and shape checked; all problems at once
//
// State keys (PyTorch's optimizer.state_dict()["state"] flattened), with i the parameter's index
// counted over the groups in order (group 0's parameters first) as PyTorch numbers them:
//   SGD        state.{i}.momentum_buffer   T, the parameter's shape; only once it exists (momentum
//                                          != 0, after the parameter's first step), as in PyTorch
//   Adam/AdamW state.{i}.step              i64 0-d (PyTorch keeps a float32 tensor; an integer stays exact)
//              state.{i}.exp_avg           T, the parameter's shape
//              state.{i}.exp_avg_sq        T, the parameter's shape
//              state.{i}.max_exp_avg_sq    T, the parameter's shape; only in groups with amsgrad
// The groups' options (lr, ...) are not state: a schedule sets lr from the step count.
// Not supported: PyTorch's maximize, foreach, capturable, differentiable and fused options.
module;
#include <range/v3/view/enumerate.hpp>
#include <range/v3/view/iota.hpp>
#include <range/v3/view/zip.hpp>

#include "math/optimizer.hpp"
export module teeny.train:optimizer;
import teeny.std;
import teeny.core;
import teeny.io;
import :parameter;

export namespace teeny {

/// torch.optim.SGD's options. lr has no default in PyTorch: it must be set.
struct SgdOptions {
  double lr = std::numeric_limits<double>::quiet_NaN();
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;  // L2: weight_decay * param added to the gradient
  bool nesterov = false;    // needs momentum > 0 and dampening 0
};

/// torch.optim.Adam's options; weight_decay adds weight_decay * param to the gradient (L2).
struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool amsgrad = false;
};

/// torch.optim.AdamW's options; weight_decay is decoupled: param *= 1 - lr * weight_decay.
struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
  bool amsgrad = false;
};

/// Parameters that share options (PyTorch's param_groups entry).
template <FloatElement T, class Options>
struct ParamGroup {
  std::vector<Parameter<T>> params;
  Options options;
};

/// The group of PyTorch's usual two a parameter of rank `rank` goes in: 0 for weights (rank >= 2),
/// decayed; 1 for biases and norm weights (rank <= 1), not decayed.
constexpr std::size_t weight_decay_group(std::size_t rank) { return rank <= 1 ? 1 : 0; }

/// PyTorch's usual two groups: group 0 holds the parameters of rank >= 2 (weights) with `options`,
/// group 1 those of rank <= 1 (biases, norm weights) with weight_decay = 0.
template <TrainFloat T, class Options>
std::vector<ParamGroup<T, Options>> weight_decay_groups(std::span<const Parameter<T>> params, const Options& options) {
  std::vector<ParamGroup<T, Options>> groups(2);
  groups[0].options = options;
  groups[1].options = options;
  groups[1].options.weight_decay = 0;
  for (const Parameter<T>& p : params) groups[weight_decay_group(p.value.rank())].params.push_back(p);
  return groups;
}
template <TrainFloat T, class Options>
std::vector<ParamGroup<T, Options>> weight_decay_groups(const std::vector<Parameter<T>>& params,
                                                        const Options& options) {
  return weight_decay_groups(std::span<const Parameter<T>>(params), options);
}

/// What a learning-rate schedule drives: parameter groups with a settable lr and their initial
/// lr. Satisfied by Sgd<T>, Adam<T> and AdamW<T>.
template <class O>
concept Optimizer = requires(O& o, const O& c, std::size_t group, double lr) {
  o.step();
  o.zero_grad();
  { c.n_groups() } -> std::convertible_to<std::size_t>;
  { c.lr(group) } -> std::convertible_to<double>;
  { c.initial_lr(group) } -> std::convertible_to<double>;
  { o.set_lr(group, lr) } -> std::same_as<Result<void>>;
};

/// The parameters of an optimizer in PyTorch's order and each group's options; the base of the
/// optimizers. lr(g) is the group's current lr (a schedule sets it), initial_lr(g) the one it was
/// created with.
template <TrainFloat T, class Options>
class ParamGroups {
 public:
  std::size_t n_groups() const { return options_.size(); }
  const Options& options(std::size_t group) const { return options_[group]; }
  double lr(std::size_t group) const { return options_[group].lr; }
  double initial_lr(std::size_t group) const { return initial_lr_[group]; }
  Result<void> set_lr(std::size_t group, double lr) {
    if (group >= options_.size()) {
      return fail(Errc::out_of_range, "set_lr: group ", group, " of an optimizer with ", options_.size(), " groups");
    }
    if (!(lr >= 0)) return fail(Errc::invalid_argument, "set_lr: invalid learning rate ", lr, " for group ", group);
    options_[group].lr = lr;
    return ok();
  }
  /// Every parameter, group 0's first.
  std::span<const Parameter<T>> parameters() const { return params_; }
  /// The parameters of one group.
  std::span<const Parameter<T>> parameters(std::size_t group) const {
    return std::span<const Parameter<T>>(params_).subspan(begin_[group], begin_[group + 1] - begin_[group]);
  }
  void zero_grad() { teeny::zero_grad(std::span<const Parameter<T>>(params_)); }

 protected:
  /// Takes the groups: checks every parameter and that none is in two groups or none at all.
  Result<void> init(std::vector<ParamGroup<T, Options>> groups, std::string_view who) {
    begin_.push_back(0);
    for (ParamGroup<T, Options>& group : groups) {
      for (Parameter<T>& p : group.params) params_.push_back(std::move(p));
      begin_.push_back(params_.size());
      options_.push_back(group.options);
      initial_lr_.push_back(group.options.lr);
    }
    if (params_.empty()) return fail(Errc::invalid_argument, who, ": got an empty parameter list");
    if (auto r = check_parameters(std::span<const Parameter<T>>(params_), who); !r) return r;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      for (std::size_t j = 0; j < i; ++j) {
        if (params_[i].value.numel() > 0 && params_[i].value.data == params_[j].value.data) {
          return fail(Errc::duplicate, who, ": parameters ", j, " '", params_[j].key, "' and ", i, " '", params_[i].key,
                      "' are the same tensor (a parameter may be in one group only)");
        }
      }
    }
    return ok();
  }
  std::size_t group_of(std::size_t param) const {
    return static_cast<std::size_t>(std::ranges::upper_bound(begin_, param) - begin_.begin()) - 1;
  }

  std::vector<Parameter<T>> params_;
  std::vector<std::size_t> begin_;  // group g holds params_[begin_[g], begin_[g + 1])
  std::vector<Options> options_;
  std::vector<double> initial_lr_;
};

}  // namespace teeny

// How an optimizer's state is checked and loaded (exported for teeny.cuda's device optimizers,
// which load theirs the same way; not for users).
export namespace teeny::optimizer_detail {

/// A state tensor an optimizer expects when loading: its key, dtype, shape and destination.
struct Slot {
  std::string_view key;
  DType dtype = DType::f32;
  ConcreteShape shape;
  std::span<std::byte> destination;
  bool optional = false;    // SGD's momentum buffer, which exists only after a first step
  bool* given = nullptr;    // set to whether it was loaded
  bool step_count = false;  // an i64 that must be >= 0
};

/// Matches named tensors to slots; any unexpected, missing, duplicated, mis-typed or mis-shaped key
/// (or a negative step count) is reported in one error and nothing is written.
inline Result<void> load_slots(std::string_view who, std::span<Slot> slots, std::span<const TensorRef> tensors) {
  std::map<std::string_view, std::size_t> index;
  for (std::size_t s = 0; s < slots.size(); ++s) index.emplace(slots[s].key, s);
  std::vector<const TensorRef*> found(slots.size(), nullptr);
  std::vector<std::string> problems;
  Errc code = Errc::invalid_argument;
  auto problem = [&](Errc c, std::string text) {
    if (problems.empty()) code = c;
    problems.push_back(std::move(text));
  };
  for (const TensorRef& t : tensors) {
    auto it = index.find(t.name);
    if (it == index.end()) {
      problem(Errc::not_found, cat("unexpected: '", t.name, "' (", t.dtype, " ", t.shape, ")"));
      continue;
    }
    const Slot& slot = slots[it->second];
    if (found[it->second] != nullptr) {
      problem(Errc::duplicate, cat("'", t.name, "' given twice"));
      continue;
    }
    found[it->second] = &t;
    if (t.dtype != slot.dtype || t.shape != slot.shape) {
      problem(t.dtype != slot.dtype ? Errc::dtype_mismatch : Errc::shape_mismatch,
              cat("'", t.name, "': got ", t.dtype, " ", t.shape, " but the optimizer expects ", slot.dtype, " ",
                  slot.shape));
    } else if (t.data.size() != slot.destination.size()) {
      problem(Errc::invalid_argument,
              cat("'", t.name, "': ", t.data.size(), " bytes of data for ", slot.destination.size(), " expected"));
    } else if (slot.step_count) {
      std::int64_t step = 0;
      std::memcpy(&step, t.data.data(), sizeof step);
      if (step < 0) problem(Errc::invalid_argument, cat("'", t.name, "' is ", step, " (a step count is >= 0)"));
    }
  }
  for (std::size_t s = 0; s < slots.size(); ++s) {
    if (found[s] == nullptr && !slots[s].optional) {
      problem(Errc::not_found, cat("missing: '", slots[s].key, "' (", slots[s].dtype, " ", slots[s].shape, ")"));
    }
  }
  if (!problems.empty()) {
    std::string message = cat(who, ": cannot load the optimizer state (", problems.size(),
                              problems.size() == 1 ? " problem):" : " problems):");
    for (const std::string& p : problems) message += "\n  " + p;
    return Error(code, std::move(message));
  }
  for (std::size_t s = 0; s < slots.size(); ++s) {
    if (found[s] != nullptr && !slots[s].destination.empty()) {
      std::memcpy(slots[s].destination.data(), found[s]->data.data(), slots[s].destination.size());
    }
    if (slots[s].given != nullptr) *slots[s].given = found[s] != nullptr;
  }
  return ok();
}

/// A safetensors file's tensors as named tensors (its data is little-endian, as on every host teeny
/// loads optimizer state on).
inline Result<std::vector<TensorRef>> refs_of(const SafetensorsFile& file) {
  if constexpr (std::endian::native != std::endian::little) {
    return fail(Errc::unsupported, "loading optimizer state needs a little-endian host");
  }
  std::vector<TensorRef> refs;
  for (const SafetensorsEntry& e : file.entries()) refs.push_back({e.name, e.dtype, e.shape, e.data});
  return refs;
}

inline std::span<std::byte> bytes_of(Tensor& t) { return {t.data(), t.bytes()}; }
inline std::span<const std::byte> bytes_of(const Tensor& t) { return {t.data(), t.bytes()}; }

inline Result<void> check_lr(double lr) {
  if (!(lr >= 0)) {
    return fail(Errc::invalid_argument, "invalid learning rate ", lr,
                std::isnan(lr) ? " (set lr: it has no default)" : "");
  }
  return ok();
}

}  // namespace teeny::optimizer_detail

export namespace teeny {

/// torch.optim.SGD (1.13, _single_tensor_sgd): d = g + weight_decay * p; with momentum
/// buf = momentum * buf + (1 - dampening) * d (buf = d at a parameter's first step), then
/// d = d + momentum * buf (nesterov) or d = buf; p -= lr * d.
template <TrainFloat T>
class Sgd : public ParamGroups<T, SgdOptions> {
 public:
  static constexpr std::string_view name = "SGD";

  static Result<Sgd> create(std::vector<ParamGroup<T, SgdOptions>> groups) {
    Sgd opt;
    for (auto&& [g, group] : ranges::views::enumerate(groups)) {
      if (auto r = check_options(group.options); !r) return std::move(r).error().context(cat(name, ": group ", g));
    }
    if (auto r = opt.init(std::move(groups), name); !r) return std::move(r).error();
    opt.state_.resize(opt.params_.size());
    for (auto&& [i, p, s] : ranges::views::zip(ranges::views::iota(std::size_t{0}), opt.params_, opt.state_)) {
      s.key = cat("state.", i, ".momentum_buffer");
      if (opt.options_[opt.group_of(i)].momentum == 0) continue;
      auto buffer = Tensor::zeros(dtype_of<T>, p.value.shape);
      if (!buffer) return std::move(buffer).error().context(cat("SGD: momentum buffer of '", p.key, "'"));
      s.buffer = std::move(*buffer);
    }
    return opt;
  }
  static Result<Sgd> create(std::span<const Parameter<T>> params, const SgdOptions& options) {
    return create({ParamGroup<T, SgdOptions>{{params.begin(), params.end()}, options}});
  }

  /// PyTorch's argument checks.
  static Result<void> validate(const SgdOptions& o) { return check_options(o).context(name); }

  void step() {
    for (std::size_t g = 0; g < this->n_groups(); ++g) {
      const SgdOptions& o = this->options_[g];
      const math::SgdStep<T> scalars{
          static_cast<T>(o.weight_decay), static_cast<T>(o.momentum), static_cast<T>(1 - o.dampening),
          static_cast<T>(-o.lr),          o.weight_decay != 0,        o.nesterov};
      const std::size_t b = this->begin_[g];
      const std::size_t n = this->begin_[g + 1] - b;
      for (auto&& [p, s] :
           ranges::views::zip(std::span(this->params_).subspan(b, n), std::span(state_).subspan(b, n))) {
        T* value = p.value.data;
        const T* grad = p.grad.data;
        T* buf = o.momentum != 0 ? reinterpret_cast<T*>(s.buffer.data()) : nullptr;
        const std::int64_t count = p.value.numel();
        for (std::int64_t j = 0; j < count; ++j) {
          math::sgd_update(value[j], grad[j], buf != nullptr ? buf + j : nullptr, s.has_buffer, scalars);
        }
        s.has_buffer = buf != nullptr;
      }
    }
  }

  /// The momentum buffers that exist, borrowed (valid while the optimizer lives, unmoved).
  std::vector<TensorRef> state_tensors() const {
    std::vector<TensorRef> refs;
    for (const State& s : state_) {
      if (s.has_buffer) refs.push_back(TensorRef::of(s.key, s.buffer));
    }
    return refs;
  }
  /// Replaces the state by `tensors` (see the key scheme above): a parameter whose buffer is absent
  /// has none yet. Checked strictly; on an error nothing changes.
  Result<void> load_state(std::span<const TensorRef> tensors) {
    std::vector<optimizer_detail::Slot> slots;
    for (auto&& [i, s] : ranges::views::enumerate(state_)) {
      if (this->options_[this->group_of(i)].momentum == 0) continue;  // no buffer without momentum
      slots.push_back({s.key, dtype_of<T>, this->params_[i].value.shape, optimizer_detail::bytes_of(s.buffer), true,
                       &s.has_buffer});
    }
    return optimizer_detail::load_slots(name, slots, tensors);
  }
  Result<void> load_state(const SafetensorsFile& file) {
    auto refs = optimizer_detail::refs_of(file);
    if (!refs) return std::move(refs).error();
    return load_state(*refs).context(cat("file '", file.path(), "'"));
  }

 private:
  static Result<void> check_options(const SgdOptions& o) {
    if (auto r = optimizer_detail::check_lr(o.lr); !r) return r;
    if (!(o.momentum >= 0)) return fail(Errc::invalid_argument, "invalid momentum value ", o.momentum);
    if (!(o.weight_decay >= 0)) return fail(Errc::invalid_argument, "invalid weight_decay value ", o.weight_decay);
    if (o.nesterov && (o.momentum <= 0 || o.dampening != 0)) {
      return fail(Errc::invalid_argument, "nesterov momentum requires a momentum and zero dampening (momentum ",
                  o.momentum, ", dampening ", o.dampening, ")");
    }
    return ok();
  }
  struct State {
    std::string key;
    Tensor buffer;  // empty when the group has no momentum
    bool has_buffer = false;
  };
  std::vector<State> state_;
};

/// torch.optim.Adam (Decoupled = false) and AdamW (true), 1.13's _single_tensor_adam(w): per
/// parameter, step += 1; g += weight_decay * p (Adam) or p *= 1 - lr * weight_decay (AdamW);
/// m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2; (amsgrad: vmax = max(vmax, v), used for v);
/// p -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps).
template <TrainFloat T, class Options, bool Decoupled>
class AdamFamily : public ParamGroups<T, Options> {
 public:
  static constexpr std::string_view name = Decoupled ? "AdamW" : "Adam";

  static Result<AdamFamily> create(std::vector<ParamGroup<T, Options>> groups) {
    AdamFamily opt;
    for (auto&& [g, group] : ranges::views::enumerate(groups)) {
      if (auto r = check_options(group.options); !r) return std::move(r).error().context(cat(name, ": group ", g));
    }
    if (auto r = opt.init(std::move(groups), name); !r) return std::move(r).error();
    opt.state_.resize(opt.params_.size());
    for (auto&& [i, p, s] : ranges::views::zip(ranges::views::iota(std::size_t{0}), opt.params_, opt.state_)) {
      const std::string prefix = cat("state.", i, ".");
      s.keys = {prefix + "step", prefix + "exp_avg", prefix + "exp_avg_sq", prefix + "max_exp_avg_sq"};
      const int n_tensors = opt.options_[opt.group_of(i)].amsgrad ? 3 : 2;
      Tensor* tensors[3] = {&s.exp_avg, &s.exp_avg_sq, &s.max_exp_avg_sq};
      for (int k = 0; k < n_tensors; ++k) {
        auto t = Tensor::zeros(dtype_of<T>, p.value.shape);
        if (!t) return std::move(t).error().context(cat(name, ": state of '", p.key, "'"));
        *tensors[k] = std::move(*t);
      }
    }
    return opt;
  }
  static Result<AdamFamily> create(std::span<const Parameter<T>> params, const Options& options = {}) {
    return create({ParamGroup<T, Options>{{params.begin(), params.end()}, options}});
  }

  /// PyTorch's argument checks.
  static Result<void> validate(const Options& o) { return check_options(o).context(name); }

  void step() {
    for (std::size_t g = 0; g < this->n_groups(); ++g) {
      const Options& o = this->options_[g];
      const std::size_t b = this->begin_[g];
      const std::size_t n = this->begin_[g + 1] - b;
      for (auto&& [p, s] :
           ranges::views::zip(std::span(this->params_).subspan(b, n), std::span(state_).subspan(b, n))) {
        s.step += 1;
        const auto scalars = math::make_adam_step<T>(o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, Decoupled, s.step);
        T* __restrict value = p.value.data;
        const T* __restrict grad = p.grad.data;
        T* __restrict m = reinterpret_cast<T*>(s.exp_avg.data());
        T* __restrict v = reinterpret_cast<T*>(s.exp_avg_sq.data());
        T* __restrict v_max = o.amsgrad ? reinterpret_cast<T*>(s.max_exp_avg_sq.data()) : nullptr;
        const std::int64_t count = p.value.numel();
        // The elementwise sqrt is std::sqrt's IEEE result without errno, so that the loop vectorises
        // (one loop per case: without amsgrad's maximum it does).
        const auto sqrt = [](T x) { return __builtin_elementwise_sqrt(x); };
        if (v_max == nullptr) {
          for (std::int64_t j = 0; j < count; ++j)
            math::adam_update(value[j], grad[j], m[j], v[j], nullptr, scalars, sqrt);
        } else {
          for (std::int64_t j = 0; j < count; ++j) {
            math::adam_update(value[j], grad[j], m[j], v[j], v_max + j, scalars, sqrt);
          }
        }
      }
    }
  }

  /// Every parameter's state, borrowed (valid while the optimizer lives, unmoved).
  std::vector<TensorRef> state_tensors() const {
    std::vector<TensorRef> refs;
    for (auto&& [i, s] : ranges::views::enumerate(state_)) {
      refs.push_back(
          {s.keys[0], DType::i64, ConcreteShape{}, std::as_bytes(std::span<const std::int64_t>(&s.step, 1))});
      refs.push_back(TensorRef::of(s.keys[1], s.exp_avg));
      refs.push_back(TensorRef::of(s.keys[2], s.exp_avg_sq));
      if (this->options_[this->group_of(i)].amsgrad) refs.push_back(TensorRef::of(s.keys[3], s.max_exp_avg_sq));
    }
    return refs;
  }
  /// Replaces the state by `tensors`, which must hold every key of the scheme above with its dtype
  /// and shape, and nothing else. On an error nothing changes.
  Result<void> load_state(std::span<const TensorRef> tensors) {
    std::vector<optimizer_detail::Slot> slots;
    for (auto&& [i, s] : ranges::views::enumerate(state_)) {
      const ConcreteShape& shape = this->params_[i].value.shape;
      slots.push_back({s.keys[0], DType::i64, ConcreteShape{},
                       std::as_writable_bytes(std::span<std::int64_t>(&s.step, 1)), false, nullptr, true});
      slots.push_back({s.keys[1], dtype_of<T>, shape, optimizer_detail::bytes_of(s.exp_avg)});
      slots.push_back({s.keys[2], dtype_of<T>, shape, optimizer_detail::bytes_of(s.exp_avg_sq)});
      if (this->options_[this->group_of(i)].amsgrad) {
        slots.push_back({s.keys[3], dtype_of<T>, shape, optimizer_detail::bytes_of(s.max_exp_avg_sq)});
      }
    }
    return optimizer_detail::load_slots(name, slots, tensors);
  }
  Result<void> load_state(const SafetensorsFile& file) {
    auto refs = optimizer_detail::refs_of(file);
    if (!refs) return std::move(refs).error();
    return load_state(*refs).context(cat("file '", file.path(), "'"));
  }

  /// The number of steps parameter i has taken.
  std::int64_t step_count(std::size_t i) const { return state_[i].step; }

 private:
  static Result<void> check_options(const Options& o) {
    if (auto r = optimizer_detail::check_lr(o.lr); !r) return r;
    if (!(o.eps >= 0)) return fail(Errc::invalid_argument, "invalid epsilon value ", o.eps);
    if (!(o.beta1 >= 0 && o.beta1 < 1))
      return fail(Errc::invalid_argument, "invalid beta parameter at index 0: ", o.beta1);
    if (!(o.beta2 >= 0 && o.beta2 < 1))
      return fail(Errc::invalid_argument, "invalid beta parameter at index 1: ", o.beta2);
    if (!(o.weight_decay >= 0)) return fail(Errc::invalid_argument, "invalid weight_decay value ", o.weight_decay);
    return ok();
  }
  struct State {
    std::array<std::string, 4> keys;  // step, exp_avg, exp_avg_sq, max_exp_avg_sq
    std::int64_t step = 0;
    Tensor exp_avg;
    Tensor exp_avg_sq;
    Tensor max_exp_avg_sq;  // empty unless the group has amsgrad
  };
  std::vector<State> state_;
};

template <TrainFloat T>
using Adam = AdamFamily<T, AdamOptions, false>;
template <TrainFloat T>
using AdamW = AdamFamily<T, AdamWOptions, true>;

static_assert(Optimizer<Sgd<float>> && Optimizer<Adam<double>> && Optimizer<AdamW<float>>);

}  // namespace teeny
