// teeny.train:schedule — learning-rate schedules with PyTorch 1.13's values (torch.optim.lr_scheduler).
// A schedule is a pure function of the step count, `lr_at(step, base_lr)`, where step is the number
// of scheduler.step() calls PyTorch would have made (its last_epoch) and base_lr a group's initial
// lr; `apply(optimizer, step)` sets every group's lr. The closed forms agree with PyTorch's
// recursive (chainable) updates to ~1e-14 relative.
//
//   SequentialLR warm_then_cosine{{LinearLR{.start_factor = 0.01, .total_iters = 5},
//                                  CosineAnnealingLR{.t_max = 95}}, {5}};
//   for (std::int64_t epoch = 0; epoch < 100; ++epoch) {
//     if (auto r = warm_then_cosine.apply(*opt, epoch); !r) return r;
//     /* train one epoch */
//   }
export module teeny.train:schedule;
import teeny.std;
import teeny.core;
import :optimizer;

namespace teeny::schedule_detail {

template <class S, class O>
Result<void> apply(const S& schedule, O& optimizer, std::int64_t step) {
  if (auto r = schedule.validate(); !r) return r;
  if (step < 0) return fail(Errc::invalid_argument, S::name, ": step must be >= 0, got ", step);
  for (std::size_t g = 0; g < optimizer.n_groups(); ++g) {
    if (auto r = optimizer.set_lr(g, schedule.lr_at(step, optimizer.initial_lr(g))); !r) {
      return std::move(r).error().context(S::name);
    }
  }
  return ok();
}

}  // namespace teeny::schedule_detail

export namespace teeny {

/// StepLR: base_lr * gamma^(step / step_size) (integer division).
struct StepLR {
  static constexpr std::string_view name = "StepLR";
  std::int64_t step_size = 0;  // >= 1; PyTorch has no default
  double gamma = 0.1;

  Result<void> validate() const {
    if (step_size < 1) return fail(Errc::invalid_argument, "StepLR: step_size must be >= 1, got ", step_size);
    return ok();
  }
  double lr_at(std::int64_t step, double base_lr) const {
    if (step_size < 1) return std::numeric_limits<double>::quiet_NaN();  // invalid: validate() says why
    return base_lr * std::pow(gamma, static_cast<double>(step / step_size));
  }
  template <Optimizer O>
  Result<void> apply(O& optimizer, std::int64_t step) const {
    return schedule_detail::apply(*this, optimizer, step);
  }
};

/// CosineAnnealingLR: eta_min + (base_lr - eta_min) (1 + cos(pi step / t_max)) / 2; past t_max it
/// rises again (period 2 t_max), as PyTorch's does.
struct CosineAnnealingLR {
  static constexpr std::string_view name = "CosineAnnealingLR";
  std::int64_t t_max = 0;  // >= 1; PyTorch's T_max, no default
  double eta_min = 0;

  Result<void> validate() const {
    if (t_max < 1) return fail(Errc::invalid_argument, "CosineAnnealingLR: t_max must be >= 1, got ", t_max);
    return ok();
  }
  double lr_at(std::int64_t step, double base_lr) const {
    const double angle = std::numbers::pi * static_cast<double>(step) / static_cast<double>(t_max);
    return eta_min + (base_lr - eta_min) * (1 + std::cos(angle)) / 2;
  }
  template <Optimizer O>
  Result<void> apply(O& optimizer, std::int64_t step) const {
    return schedule_detail::apply(*this, optimizer, step);
  }
};

/// LinearLR: base_lr times a factor going linearly from start_factor to end_factor over
/// total_iters steps, then staying at end_factor.
struct LinearLR {
  static constexpr std::string_view name = "LinearLR";
  double start_factor = 1.0 / 3;  // in (0, 1]
  double end_factor = 1.0;        // in [0, 1]
  std::int64_t total_iters = 5;   // >= 1

  Result<void> validate() const {
    if (!(start_factor > 0 && start_factor <= 1)) {
      return fail(Errc::invalid_argument, "LinearLR: start_factor must be in (0, 1], got ", start_factor);
    }
    if (!(end_factor >= 0 && end_factor <= 1)) {
      return fail(Errc::invalid_argument, "LinearLR: end_factor must be in [0, 1], got ", end_factor);
    }
    if (total_iters < 1) return fail(Errc::invalid_argument, "LinearLR: total_iters must be >= 1, got ", total_iters);
    return ok();
  }
  double lr_at(std::int64_t step, double base_lr) const {
    const auto done = static_cast<double>(std::min(step, total_iters));
    return base_lr * (start_factor + (end_factor - start_factor) * done / static_cast<double>(total_iters));
  }
  template <Optimizer O>
  Result<void> apply(O& optimizer, std::int64_t step) const {
    return schedule_detail::apply(*this, optimizer, step);
  }
};

/// One of the schedules SequentialLR chains (the variant is their one list).
using LrSchedule = std::variant<StepLR, CosineAnnealingLR, LinearLR>;

/// SequentialLR: schedules[k] runs from milestones[k - 1] on, restarted at its own step 0 there
/// (PyTorch steps it with step(0), i.e. its closed form at 0), always from the group's initial lr.
struct SequentialLR {
  static constexpr std::string_view name = "SequentialLR";
  std::vector<LrSchedule> schedules;
  std::vector<std::int64_t> milestones;  // one fewer than schedules, increasing, > 0

  Result<void> validate() const {
    if (schedules.empty() || milestones.size() + 1 != schedules.size()) {
      return fail(Errc::invalid_argument, "SequentialLR: expects one more schedule than milestones, got ",
                  schedules.size(), " schedules and ", milestones.size(), " milestones");
    }
    for (std::size_t k = 0; k < milestones.size(); ++k) {
      if (milestones[k] < 1 || (k > 0 && milestones[k] <= milestones[k - 1])) {
        return fail(Errc::invalid_argument, "SequentialLR: milestones must be increasing and > 0; milestone ", k,
                    " is ", milestones[k]);
      }
    }
    for (std::size_t k = 0; k < schedules.size(); ++k) {
      auto r = std::visit([](const auto& s) { return s.validate(); }, schedules[k]);
      if (!r) return std::move(r).error().context(cat("SequentialLR: schedule ", k));
    }
    return ok();
  }
  double lr_at(std::int64_t step, double base_lr) const {
    const auto k = static_cast<std::size_t>(std::ranges::upper_bound(milestones, step) - milestones.begin());
    if (k >= schedules.size()) return std::numeric_limits<double>::quiet_NaN();  // invalid: validate() says why
    const std::int64_t local = k == 0 ? step : step - milestones[k - 1];
    return std::visit([&](const auto& s) { return s.lr_at(local, base_lr); }, schedules[k]);
  }
  template <Optimizer O>
  Result<void> apply(O& optimizer, std::int64_t step) const {
    return schedule_detail::apply(*this, optimizer, step);
  }
};

/// A learning-rate schedule: a checked, pure lr_at(step, base_lr). Satisfied by StepLR,
/// CosineAnnealingLR, LinearLR and SequentialLR.
template <class S>
concept LrScheduler = requires(const S& s, std::int64_t step, double base_lr) {
  { s.validate() } -> std::same_as<Result<void>>;
  { s.lr_at(step, base_lr) } -> std::same_as<double>;
};
static_assert(LrScheduler<StepLR> && LrScheduler<CosineAnnealingLR> && LrScheduler<LinearLR> &&
              LrScheduler<SequentialLR>);

}  // namespace teeny
