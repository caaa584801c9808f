// teeny.train schedules and clip_grad_norm against PyTorch 1.13 (tests/fixtures/train/schedules and
// clip.safetensors), zero_grad, and their errors.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <vector>

import teeny.core;
import teeny.io;
import teeny.train;

#include "train/train_test_support.hpp"

using teeny::ConcreteShape;
using teeny::CosineAnnealingLR;
using teeny::Errc;
using teeny::LinearLR;
using teeny::SequentialLR;
using teeny::StepLR;
using teeny::Tensor;
using namespace train_test;

namespace {

/// lr_at(0 .. 29) for base lrs 0.1 and 0.02 against PyTorch's lrs after as many scheduler.step()
/// calls (PyTorch computes them recursively: agreement to 1e-12 relative), and apply() on an
/// optimizer with those two groups.
template <class S>
void check_schedule(const std::string& c, const S& schedule) {
  CAPTURE(c);
  REQUIRE(schedule.validate());
  const auto f = open("schedules.safetensors");
  const double base[2] = {0.1, 0.02};
  OwnedParams<double> p({{2}, {3}});
  auto opt = teeny::Sgd<double>::create({{{p.params[0]}, {.lr = base[0]}}, {{p.params[1]}, {.lr = base[1]}}});
  REQUIRE(opt);
  for (int g = 0; g < 2; ++g) {
    std::vector<double> lrs;
    for (std::int64_t step = 0; step < 30; ++step) lrs.push_back(schedule.lr_at(step, base[g]));
    check_close<double>(lrs, f, c + ".lr." + std::to_string(g), 1e-12, 1e-15);
  }
  REQUIRE(schedule.apply(*opt, 7));
  CHECK(opt->lr(0) == schedule.lr_at(7, 0.1));
  CHECK(opt->lr(1) == schedule.lr_at(7, 0.02));
  CHECK(opt->initial_lr(1) == 0.02);
}

}  // namespace

TEST_CASE("schedules match PyTorch's lr sequences") {
  check_schedule("step", StepLR{.step_size = 3, .gamma = 0.5});
  check_schedule("step_default_gamma", StepLR{.step_size = 4});
  check_schedule("cosine", CosineAnnealingLR{.t_max = 10, .eta_min = 0.001});
  check_schedule("cosine_zero_min", CosineAnnealingLR{.t_max = 7});
  check_schedule("linear", LinearLR{.start_factor = 0.1, .end_factor = 1.0, .total_iters = 4});
  check_schedule("linear_default", LinearLR{});
  check_schedule("linear_decay", LinearLR{.start_factor = 1.0, .end_factor = 0.25, .total_iters = 6});
  check_schedule("warmup_cosine", SequentialLR{{LinearLR{.start_factor = 0.01, .total_iters = 5},
                                                CosineAnnealingLR{.t_max = 20, .eta_min = 1e-4}},
                                               {5}});
  check_schedule("warmup_step_cosine",
                 SequentialLR{{LinearLR{.start_factor = 0.5, .total_iters = 3}, StepLR{.step_size = 2, .gamma = 0.9},
                               CosineAnnealingLR{.t_max = 8}},
                              {3, 10}});
}

TEST_CASE("schedules: bad options are errors naming the schedule and the value") {
  auto message = [](const teeny::Result<void>& r) { return r ? std::string() : r.error().to_string(); };
  CHECK(contains(message(StepLR{}.validate()), "StepLR: step_size must be >= 1, got 0"));
  CHECK(std::isnan(StepLR{}.lr_at(3, 0.1)));  // never a division by zero
  CHECK(contains(message(CosineAnnealingLR{.t_max = -1}.validate()), "t_max must be >= 1, got -1"));
  CHECK(contains(message(LinearLR{.start_factor = 0}.validate()), "LinearLR: start_factor must be in (0, 1], got 0"));
  CHECK(contains(message(LinearLR{.end_factor = 1.5}.validate()), "end_factor must be in [0, 1], got 1.5"));
  CHECK(contains(message(SequentialLR{{StepLR{.step_size = 1}}, {4}}.validate()),
                 "SequentialLR: expects one more schedule than milestones, got 1 schedules and 1 milestones"));
  CHECK(contains(message(SequentialLR{{StepLR{.step_size = 1}, StepLR{}}, {4}}.validate()),
                 "SequentialLR: schedule 1: StepLR: step_size must be >= 1"));
  CHECK(contains(message(SequentialLR{{LinearLR{}, LinearLR{}, LinearLR{}}, {4, 4}}.validate()),
                 "milestones must be increasing and > 0; milestone 1 is 4"));
  CHECK(std::isnan(SequentialLR{}.lr_at(0, 0.1)));

  OwnedParams<float> p({{2}});
  auto opt = teeny::Adam<float>::create(p.span());
  REQUIRE(opt);
  auto r = StepLR{}.apply(*opt, 1);
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == Errc::invalid_argument);
  CHECK(opt->lr(0) == 1e-3);
  CHECK_FALSE(LinearLR{}.apply(*opt, -1));
}

TEST_CASE_TEMPLATE("clip_grad_norm matches torch.nn.utils.clip_grad_norm_", T, float, double) {
  const auto f = open("clip.safetensors");
  struct Case {
    const char* name;
    double max_norm;
    double norm_type;
  };
  const Case cases[] = {{"clip_l2", 1.0, 2.0},
                        {"clip_l2_no_clip", 100.0, 2.0},
                        {"clip_inf", 0.5, std::numeric_limits<double>::infinity()},
                        {"clip_l1_5", 2.0, 1.5},
                        {"clip_l1", 3.0, 1.0}};
  for (const Case& c : cases) {
    CAPTURE(c.name);
    OwnedParams<T> p({{3, 4}, {4}, {2, 3}});
    for (std::size_t i = 0; i < 3; ++i) {
      const Tensor g = read<T>(f, std::string(c.name) + ".grad." + std::to_string(i));
      std::memcpy(p.grads[i].data(), g.data(), g.bytes());
    }
    auto total = teeny::clip_grad_norm(p.span(), c.max_norm, c.norm_type);
    REQUIRE(total);
    check_scalar<T>(*total, f, std::string(c.name) + ".total_norm");
    for (std::size_t i = 0; i < 3; ++i) {
      check_close<T>(elements<T>(p.grads[i]), f, std::string(c.name) + ".clipped." + std::to_string(i));
    }
  }
}

TEST_CASE("clip_grad_norm: non-finite norms and bad norm types") {
  OwnedParams<double> p({{3}});
  elements<double>(p.grads[0])[1] = std::numeric_limits<double>::infinity();
  auto strict = teeny::clip_grad_norm(p.span(), 1.0, 2.0, true);
  REQUIRE_FALSE(strict);
  CHECK(contains(strict.error().message(),
                 "clip_grad_norm: the total norm of order 2 of the gradients of 1 parameters is non-finite (inf)"));
  CHECK(elements<double>(p.grads[0])[1] == std::numeric_limits<double>::infinity());  // untouched
  auto lax = teeny::clip_grad_norm(p.span(), 1.0);  // PyTorch's default: clip anyway, giving NaN
  REQUIRE(lax);
  CHECK(std::isinf(*lax));
  CHECK(std::isnan(elements<double>(p.grads[0])[1]));
  for (double bad : {0.0, -1.0, std::nan("")}) {
    auto r = teeny::clip_grad_norm(p.span(), 1.0, bad);
    REQUIRE_FALSE(r);
    CHECK(contains(r.error().message(), "norm_type must be > 0 or infinity"));
  }
  auto none = teeny::clip_grad_norm(std::span<const teeny::Parameter<double>>{}, 1.0);
  REQUIRE(none);
  CHECK(*none == 0.0);
}
