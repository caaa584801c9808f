// The op cases (tests/ops/cases.hpp) on the CPU: every op of standard_ops has one; each runs in f32
// as it does in f64 (the f32 kernels' vector paths against the f64 reference, on the same rounded
// inputs); and in training builds each op's backward gives what central finite differences of its
// forward give, in f64. The same table drives the CUDA checks (tests/cuda/test_kernels.cpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "ops/cases.hpp"

using namespace op_harness;  // NOLINT(google-build-using-namespace): the harness, in every case

namespace {

// A type's name for messages, without RTTI: read off the compiler's signature of this function.
template <class T>
std::string_view type_name() {
  const std::string_view signature = __PRETTY_FUNCTION__;  // "... type_name() [T = teeny::unary_op<double>]"
  const std::size_t start = signature.find("T = ") + 4;
  return signature.substr(start, signature.rfind(']') - start);
}

template <class Op, class... Ops>
constexpr std::size_t index_in(std::type_identity<std::variant<Ops...>> /*set*/) {
  std::size_t i = 0;
  (void)((!std::is_same_v<Op, Ops> && (++i, true)) && ...);
  return i;
}

using Ops = teeny::standard_ops<double>;

template <class Case>
using op_of = decltype(std::declval<const Case&>().make.template operator()<double>());

double largest(const std::vector<double>& values) {
  double m = 1;
  for (double v : values) m = std::max(m, std::abs(v));
  return m;
}

}  // namespace

TEST_CASE("op cases: every op of standard_ops has a case in tests/ops/cases.hpp") {
  std::vector<bool> covered(std::variant_size_v<Ops>, false);
  std::size_t cases = 0;
  for_each_op_case([&](const auto& c) {
    ++cases;
    covered[index_in<op_of<std::remove_cvref_t<decltype(c)>>>(std::type_identity<Ops>{})] = true;
  });
  MESSAGE(cases << " op cases");
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    const auto check = [&]<class Op>(std::size_t i) {
      if constexpr (!std::is_same_v<Op, teeny::InputOp>) {  // the model's inputs: no kernel
        CAPTURE(type_name<Op>());
        CHECK_MESSAGE(covered[i], "an op of standard_ops has no case in tests/ops/cases.hpp");
      }
    };
    (check.template operator()<std::variant_alternative_t<I, Ops>>(I), ...);
  }(std::make_index_sequence<std::variant_size_v<Ops>>{});
}

TEST_CASE("op cases: the CPU kernels give in f32 what they give in f64") {
  for_each_op_case([](const auto& c) {
    CAPTURE(c.name);
    const auto op = c.make.template operator()<float>();
    const Operands rounded = rounded_for<float>(op, c.operands);
    const std::vector<double> want = run_on_cpu<double>(c.make, rounded, c.out, c.phase);
    const std::vector<double> got = run_on_cpu<float>(c.make, rounded, c.out, c.phase);
    REQUIRE(got.size() == want.size());
    const double scale = largest(want);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (!(std::abs(got[i] - want[i]) <= c.tolerance.f32 * scale) && bad++ == 0) {
        MESSAGE("first mismatch at " << i << ": f32 " << got[i] << ", f64 " << want[i]);
      }
    }
    CHECK(bad == 0);
  });
}

#if TEENY_TRAINING
namespace {

// d(sum dy * y)/d(value) by central differences, at up to 16 of the tensor's elements (spread over
// it), against the backward's gradient there. The step is small enough that no case's input sits
// within it of a kink; the rounding of the loss over the step stays near 1e-9 of the gradient.
template <class Case, class Field>
void check_by_differences(const Case& c, const HostTensor& dy, const std::vector<HostTensor>& analytic, Field field,
                          const char* what) {
  constexpr double step = 1e-6;
  const auto loss = [&](const Operands& operands) {
    const std::vector<double> y = run_on_cpu<double>(c.make, operands, c.out, c.backward_phase);
    double sum = 0;
    for (std::size_t i = 0; i < y.size(); ++i) sum += dy.values[i] * y[i];
    return sum;
  };
  for (std::size_t t = 0; t < analytic.size(); ++t) {
    const std::vector<double>& grad = analytic[t].values;
    if (grad.empty()) continue;  // not a gradient the op gives (indices, a buffer)
    CAPTURE(what);
    CAPTURE(t);
    const double scale = largest(grad);
    const std::size_t n = grad.size();
    const std::size_t samples = std::min<std::size_t>(n, 16);
    for (std::size_t k = 0; k < samples; ++k) {
      const std::size_t i = k * n / samples;
      Operands up = c.operands;
      Operands down = c.operands;
      field(up)[t].values[i] += step;
      field(down)[t].values[i] -= step;
      const double numeric = (loss(up) - loss(down)) / (2 * step);
      CAPTURE(i);
      CHECK(std::abs(numeric - grad[i]) <= 1e-6 * scale);
    }
  }
}

}  // namespace

TEST_CASE("op cases: each CPU backward gives what finite differences of its forward give (f64)") {
  for_each_op_case([](const auto& c) {
    using Op = op_of<std::remove_cvref_t<decltype(c)>>;
    if constexpr (teeny::BackwardOp<Op>) {
      CAPTURE(c.name);
      if (!c.backward) {  // the op must refuse its backward, not compute a wrong one
        CHECK_FALSE(backward_packs(c.make, c.operands, c.out));
        return;
      }
      if (!c.smooth) return;
      const auto op = c.make.template operator()<double>();
      // Gradients start at zero, so what the backward leaves is the gradient itself.
      Gradients start = random_gradients(op, c.operands, c.out, 1000);
      for (auto* grads : {&start.inputs, &start.params}) {
        for (HostTensor& g : *grads) std::fill(g.values.begin(), g.values.end(), 0.0);
      }
      const Gradients got = run_backward_on_cpu(c.make, c.operands, c.out, start, c.backward_phase);
      check_by_differences(c, start.dy, got.inputs, [](Operands& o) -> auto& { return o.inputs; }, "input");
      check_by_differences(c, start.dy, got.params, [](Operands& o) -> auto& { return o.params; }, "parameter");
    }
  });
}
#endif
