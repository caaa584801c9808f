// teeny.train losses against PyTorch 1.13 (tests/fixtures/train/losses.safetensors): the loss and
// d loss / d input of every case, in float and double; the errors; no allocation.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <vector>

import teeny.core;
import teeny.io;
import teeny.train;

#include "support/allocation_counter.hpp"
#include "train/train_test_support.hpp"

using teeny::ConcreteShape;
using teeny::Errc;
using teeny::Reduction;
using teeny::Result;
using teeny::Tensor;
using teeny::TensorView;
using namespace train_test;

namespace {

/// Runs `loss(input, target tensor, grad)` on fixture case `c`; checks the loss and the gradient,
/// and that asking for no gradient gives the same loss.
template <class T, class Loss>
void check_case(const teeny::SafetensorsFile& f, const std::string& c, bool class_targets, Loss&& loss) {
  CAPTURE(c);
  const Tensor input = read<T>(f, c + ".input");
  const Tensor target = class_targets ? read<std::int64_t>(f, c + ".target") : read<T>(f, c + ".target");
  Tensor grad = zeros<T>(input.shape());
  const TensorView<const T> x = *input.view<T>();
  auto with_grad = loss(x, target, *grad.view<T>());
  REQUIRE_MESSAGE(with_grad, (with_grad ? "" : with_grad.error().to_string()));
  check_scalar<T>(*with_grad, f, c + ".loss");
  check_close<T>(elements<T>(grad), f, c + ".grad");
  auto without = loss(x, target, TensorView<T>{});
  REQUIRE(without);
  CHECK(*without == *with_grad);
}

template <class T>
TensorView<const std::int64_t> labels(const Tensor& t) {
  return *t.view<std::int64_t>();
}
template <class T>
TensorView<const T> values(const Tensor& t) {
  return *t.view<T>();
}

}  // namespace

TEST_CASE_TEMPLATE("cross_entropy and nll_loss match PyTorch", T, float, double) {
  const auto f = open("losses.safetensors");
  struct Case {
    const char* name;
    teeny::CrossEntropyOptions options;
  };
  const Case ce[] = {
      {"ce_mean", {}},
      {"ce_sum", {.reduction = Reduction::sum}},
      {"ce_ignore", {}},
      {"ce_ignore_sum", {.reduction = Reduction::sum}},
      {"ce_ignore2", {.ignore_index = 2}},
      {"ce_smooth", {.label_smoothing = 0.1}},
      {"ce_smooth_ignore", {.label_smoothing = 0.2}},
      {"ce_smooth_ignore_sum", {.reduction = Reduction::sum, .label_smoothing = 0.2}},
      {"ce_large", {}},
  };
  for (const Case& k : ce) {
    check_case<T>(f, k.name, true, [&](TensorView<const T> x, const Tensor& t, TensorView<T> g) {
      return teeny::cross_entropy<T>(x, labels<T>(t), g, k.options);
    });
  }
  check_case<T>(f, "nll_mean", true, [](TensorView<const T> x, const Tensor& t, TensorView<T> g) {
    return teeny::nll_loss<T>(x, labels<T>(t), g);
  });
  check_case<T>(f, "nll_sum", true, [](TensorView<const T> x, const Tensor& t, TensorView<T> g) {
    return teeny::nll_loss<T>(x, labels<T>(t), g, {.reduction = Reduction::sum});
  });
  check_case<T>(f, "nll_ignore", true, [](TensorView<const T> x, const Tensor& t, TensorView<T> g) {
    return teeny::nll_loss<T>(x, labels<T>(t), g);
  });
}

TEST_CASE_TEMPLATE("regression and binary losses match PyTorch", T, float, double) {
  const auto f = open("losses.safetensors");
  for (const auto& [suffix, reduction] : {std::pair{"mean", Reduction::mean}, std::pair{"sum", Reduction::sum}}) {
    const std::string s = suffix;
    const Reduction r = reduction;
    check_case<T>(f, "mse_" + s, false, [r](TensorView<const T> x, const Tensor& t, TensorView<T> g) {
      return teeny::mse_loss<T>(x, values<T>(t), g, r);
    });
    check_case<T>(f, "l1_" + s, false, [r](TensorView<const T> x, const Tensor& t, TensorView<T> g) {
      return teeny::l1_loss<T>(x, values<T>(t), g, r);
    });
    check_case<T>(f, "smooth_l1_" + s, false, [r](TensorView<const T> x, const Tensor& t, TensorView<T> g) {
      return teeny::smooth_l1_loss<T>(x, values<T>(t), g, {.reduction = r});
    });
    check_case<T>(f, "huber_" + s, false, [r](TensorView<const T> x, const Tensor& t, TensorView<T> g) {
      return teeny::huber_loss<T>(x, values<T>(t), g, {.reduction = r});
    });
    check_case<T>(f, "bce_" + s, false, [r](TensorView<const T> x, const Tensor& t, TensorView<T> g) {
      return teeny::binary_cross_entropy_with_logits<T>(x, values<T>(t), g, {.reduction = r});
    });
  }
  check_case<T>(f, "smooth_l1_beta0_5", false, [](TensorView<const T> x, const Tensor& t, TensorView<T> g) {
    return teeny::smooth_l1_loss<T>(x, values<T>(t), g, {.beta = 0.5});
  });
  check_case<T>(f, "smooth_l1_beta0", false, [](TensorView<const T> x, const Tensor& t, TensorView<T> g) {
    return teeny::smooth_l1_loss<T>(x, values<T>(t), g, {.beta = 0.0});
  });
  check_case<T>(f, "huber_delta0_5", false, [](TensorView<const T> x, const Tensor& t, TensorView<T> g) {
    return teeny::huber_loss<T>(x, values<T>(t), g, {.delta = 0.5});
  });
  check_case<T>(f, "huber_delta2", false, [](TensorView<const T> x, const Tensor& t, TensorView<T> g) {
    return teeny::huber_loss<T>(x, values<T>(t), g, {.delta = 2.0});
  });
  for (const char* c : {"bce_pos_weight", "bce_pos_weight_full"}) {
    const Tensor pos_weight = read<T>(f, std::string(c) + ".pos_weight");
    check_case<T>(f, c, false, [&](TensorView<const T> x, const Tensor& t, TensorView<T> g) {
      return teeny::binary_cross_entropy_with_logits<T>(x, values<T>(t), g, {.pos_weight = values<T>(pos_weight)});
    });
  }
}

TEST_CASE("cross_entropy: every sample ignored gives NaN and a zero gradient, as in PyTorch") {
  const std::vector<double> logits{1, 2, 3, 4};
  const std::vector<std::int64_t> targets{-100, -100};
  std::vector<double> grad(4, 7.0);
  auto loss = teeny::cross_entropy<double>({logits.data(), {2, 2}}, {targets.data(), {2}}, {grad.data(), {2, 2}});
  REQUIRE(loss);
  CHECK(std::isnan(*loss));
  CHECK(grad == std::vector<double>(4, 0.0));
  auto sum =
      teeny::cross_entropy<double>({logits.data(), {2, 2}}, {targets.data(), {2}}, {}, {.reduction = Reduction::sum});
  REQUIRE(sum);
  CHECK(*sum == 0.0);
}

TEST_CASE("losses: errors name the loss, the shapes and the bad value") {
  const std::vector<float> a(12, 0.5f);
  const std::vector<std::int64_t> t{0, 1, 7};
  std::vector<float> g(12);
  const TensorView<const float> logits(a.data(), {3, 4});

  auto out_of_range = teeny::cross_entropy<float>(logits, {t.data(), {3}});
  REQUIRE_FALSE(out_of_range);
  CHECK(out_of_range.error().code() == Errc::out_of_range);
  CHECK(contains(out_of_range.error().message(), "cross_entropy: target 7 of sample 2 is out of range [0, 4)"));
  CHECK(contains(out_of_range.error().message(), "ignore_index is -100"));

  const std::vector<std::int64_t> negative{0, -1, 1};
  auto nll = teeny::nll_loss<float>(logits, {negative.data(), {3}});
  REQUIRE_FALSE(nll);
  CHECK(contains(nll.error().message(), "nll_loss: target -1 of sample 1"));

  auto short_targets = teeny::cross_entropy<float>(logits, {t.data(), {2}});
  REQUIRE_FALSE(short_targets);
  CHECK(short_targets.error().code() == Errc::shape_mismatch);
  CHECK(contains(short_targets.error().message(), "targets must be [N] = [3] for logits [3, 4], got [2]"));

  auto rank = teeny::cross_entropy<float>({a.data(), {12}}, {t.data(), {3}});
  REQUIRE_FALSE(rank);
  CHECK(contains(rank.error().message(), "logits must be [N, C], got [12]"));

  auto bad_grad = teeny::cross_entropy<float>(logits, {t.data(), {3}}, {g.data(), {4, 3}});
  REQUIRE_FALSE(bad_grad);
  CHECK(contains(bad_grad.error().message(), "cross_entropy: logits [3, 4] and grad [4, 3] must have the same shape"));

  const std::vector<std::int64_t> fine{0, 1, 2};
  auto smoothing = teeny::cross_entropy<float>(logits, {fine.data(), {3}}, {}, {.label_smoothing = 1.5});
  REQUIRE_FALSE(smoothing);
  CHECK(smoothing.error().code() == Errc::invalid_argument);
  CHECK(contains(smoothing.error().message(), "label_smoothing must be in [0, 1], got 1.5"));

  auto mse = teeny::mse_loss<float>(logits, {a.data(), {4, 3}});
  REQUIRE_FALSE(mse);
  CHECK(mse.error().code() == Errc::shape_mismatch);
  CHECK(contains(mse.error().message(), "mse_loss: input [3, 4] and target [4, 3] must have the same shape"));

  auto strided = teeny::l1_loss<float>({a.data(), {2, 3}, {6, 1}}, {a.data(), {2, 3}});
  REQUIRE_FALSE(strided);
  CHECK(contains(strided.error().message(), "l1_loss: input [2, 3] must be contiguous"));

  auto beta = teeny::smooth_l1_loss<float>(logits, logits, {}, {.beta = -1});
  REQUIRE_FALSE(beta);
  CHECK(contains(beta.error().message(), "smooth_l1_loss: beta must be >= 0, got -1"));
  auto delta = teeny::huber_loss<float>(logits, logits, {}, {.delta = 0});
  REQUIRE_FALSE(delta);
  CHECK(contains(delta.error().message(), "huber_loss: delta must be > 0, got 0"));

  auto pos_weight = teeny::binary_cross_entropy_with_logits<float>(logits, logits, {}, {.pos_weight = {a.data(), {3}}});
  REQUIRE_FALSE(pos_weight);
  CHECK(contains(pos_weight.error().message(), "pos_weight [3] must be [4] or the input's shape [3, 4]"));
  // Nothing was written on any error.
  CHECK(g == std::vector<float>(12, 0.0f));
}

TEST_CASE_TEMPLATE("argmax_accuracy counts rows whose first largest logit is the target", T, float, double) {
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const std::vector<T> logits{0, 3,   1,  //
                              2, 2,   1,  // a tie: the first wins
                              0, nan, 5, 4, 1, 1};
  const std::vector<std::int64_t> targets{1, 1, 1, 0};
  auto correct = teeny::argmax_accuracy<T>({logits.data(), {4, 3}}, {targets.data(), {4}});
  REQUIRE(correct);
  CHECK(*correct == 3);  // rows 0, 2 (NaN is largest) and 3
  auto bad = teeny::argmax_accuracy<T>({logits.data(), {4, 3}}, {targets.data(), {3}});
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code() == Errc::shape_mismatch);
}

TEST_CASE("losses allocate nothing") {
  std::vector<float> logits(64 * 10);
  for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = static_cast<float>(std::sin(static_cast<double>(i)));
  std::vector<std::int64_t> targets(64);
  for (std::size_t i = 0; i < targets.size(); ++i) targets[i] = static_cast<std::int64_t>(i % 10);
  std::vector<float> grad(logits.size());
  const TensorView<const float> x(logits.data(), {64, 10});
  const std::size_t before = test_support::allocation_count();
  auto ce = teeny::cross_entropy<float>(x, {targets.data(), {64}}, {grad.data(), {64, 10}}, {.label_smoothing = 0.1});
  auto mse = teeny::mse_loss<float>(x, x, {grad.data(), {64, 10}});
  auto bce = teeny::binary_cross_entropy_with_logits<float>(x, x, {grad.data(), {64, 10}});
  auto acc = teeny::argmax_accuracy<float>(x, {targets.data(), {64}});
  CHECK(test_support::allocation_count() - before == 0);
  CHECK((ce && mse && bce && acc));
}

TEST_CASE("losses: a view without data is an error, not a crash") {
  const std::vector<float> a(6, 0.5f);
  const TensorView<const float> x(a.data(), {2, 3});
  auto input = teeny::mse_loss<float>({nullptr, {2, 3}}, x);
  REQUIRE_FALSE(input);
  CHECK(contains(input.error().message(), "mse_loss: input [2, 3] has no data"));
  auto grad = teeny::huber_loss<float>(x, x, {nullptr, {2, 3}});
  REQUIRE_FALSE(grad);
  CHECK(contains(grad.error().message(), "huber_loss: grad [2, 3] has no data"));
  auto targets = teeny::cross_entropy<float>(x, {nullptr, {2}});
  REQUIRE_FALSE(targets);
  CHECK(contains(targets.error().message(), "cross_entropy: targets [2] has no data"));
}
