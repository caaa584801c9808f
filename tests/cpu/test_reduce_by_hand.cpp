// nll_loss, argmax / argmin, cumsum, hardmax and prod run by a CPU model, against values worked
// out by hand: the rules PyTorch and ONNX document (ignore_index, class weights, the mean's
// divisor, ties, NaN, exclusive and reverse sums).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

import teeny;

namespace {
using teeny::DType;
using teeny::GraphBuilder;
using teeny::Value;

// Builds the graph `make` returns as output "y" and runs it on `inputs`; the output as doubles.
template <class Make>
std::vector<double> run(Make make, std::vector<teeny::NamedTensor> inputs) {
  GraphBuilder b;
  b.output("y", make(b));
  auto graph = std::move(b).build();
  REQUIRE_MESSAGE(graph, (graph ? "" : graph.error().to_string()));
  auto model = teeny::load_cpu(*graph, {});
  REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
  auto outputs = model->forward(std::move(inputs));
  REQUIRE_MESSAGE(outputs, (outputs ? "" : outputs.error().to_string()));
  const teeny::Tensor& y = (*outputs)[0].tensor;
  std::vector<double> values;
  for (std::int64_t i = 0; i < y.numel(); ++i) {
    if (y.dtype() == DType::i64) {
      values.push_back(static_cast<double>(reinterpret_cast<const std::int64_t*>(y.data())[i]));
    } else {
      values.push_back(reinterpret_cast<const float*>(y.data())[i]);
    }
  }
  return values;
}

teeny::NamedTensor floats(std::string name, std::vector<float> v, teeny::ConcreteShape shape) {
  auto t = teeny::Tensor::from<float>(v, shape);
  REQUIRE(t);
  return {std::move(name), std::move(*t)};
}
teeny::NamedTensor longs(std::string name, std::vector<std::int64_t> v, teeny::ConcreteShape shape) {
  auto t = teeny::Tensor::from<std::int64_t>(v, shape);
  REQUIRE(t);
  return {std::move(name), std::move(*t)};
}

// Log-probabilities of 3 samples over 3 classes, and their targets: the second ignored (-100).
const std::vector<float> log_p = {-0.5F, -1.0F, -2.0F, -0.25F, -3.0F, -1.5F, -4.0F, -0.75F, -1.25F};
const std::vector<std::int64_t> targets = {2, -100, 1};

std::vector<teeny::NamedTensor> loss_inputs(std::vector<std::int64_t> t = targets) {
  std::vector<teeny::NamedTensor> in;
  in.push_back(floats("x", log_p, {3, 3}));
  in.push_back(longs("t", std::move(t), {3}));
  return in;
}
Value loss_graph(GraphBuilder& b, teeny::LossReduction reduction = teeny::LossReduction::mean,
                 std::optional<std::int64_t> ignore_index = -100, std::optional<Value> weight = std::nullopt) {
  return b.nll_loss(b.input("x", DType::f32, {3, 3}), b.input("t", DType::i64, {3}), weight, reduction, ignore_index);
}
}  // namespace

TEST_CASE("nll_loss: an ignored target counts in neither the sum nor the mean's divisor") {
  // Terms: -(-2.0) for sample 0 (class 2), sample 1 ignored, -(-0.75) for sample 2 (class 1).
  const auto none = run([](GraphBuilder& b) { return loss_graph(b, teeny::LossReduction::none); }, loss_inputs());
  CHECK(none == std::vector<double>{2.0, 0.0, 0.75});
  const auto sum = run([](GraphBuilder& b) { return loss_graph(b, teeny::LossReduction::sum); }, loss_inputs());
  CHECK(sum == std::vector<double>{2.75});
  const auto mean = run([](GraphBuilder& b) { return loss_graph(b); }, loss_inputs());
  CHECK(mean[0] == doctest::Approx(2.75 / 2));
}

TEST_CASE("nll_loss: class weights scale each term and the mean divides by their sum") {
  // Weights per class 0.5, 2, 4: terms 4 * 2.0 and 2 * 0.75; divisor 4 + 2 (sample 1 ignored).
  const auto mean = run(
      [](GraphBuilder& b) { return loss_graph(b, teeny::LossReduction::mean, -100, b.input("w", DType::f32, {3})); },
      [] {
        auto in = loss_inputs();
        in.push_back(floats("w", {0.5F, 2.0F, 4.0F}, {3}));
        return in;
      }());
  CHECK(mean[0] == doctest::Approx((8.0 + 1.5) / 6.0));
}

TEST_CASE("nll_loss: a target outside the classes that is not ignored makes the loss NaN, not a number") {
  const auto none = run([](GraphBuilder& b) { return loss_graph(b, teeny::LossReduction::none, std::nullopt); },
                        loss_inputs({2, 3, 1}));
  CHECK(none[0] == 2.0);
  CHECK(std::isnan(none[1]));
  const auto mean = run([](GraphBuilder& b) { return loss_graph(b, teeny::LossReduction::mean, std::nullopt); },
                        loss_inputs({2, -100, 1}));  // -100 is a class index here, and out of range
  CHECK(std::isnan(mean[0]));
}

TEST_CASE("argmax and argmin: the first extreme, the last with select_last_index, NaN as the extreme") {
  const float nan = std::nanf("");
  const auto in = [&] {
    std::vector<teeny::NamedTensor> v;
    v.push_back(floats("x", {1, 3, 3, 0, 5, nan, 2, nan, -1, -1, 4, 4}, {3, 4}));
    return v;
  };
  const auto x = [](GraphBuilder& b) { return b.input("x", DType::f32, {3, 4}); };
  CHECK(run([&](GraphBuilder& b) { return b.argmax(x(b), 1); }, in()) == std::vector<double>{1, 1, 2});
  CHECK(run([&](GraphBuilder& b) { return b.argmax(x(b), 1, false, true); }, in()) == std::vector<double>{2, 3, 3});
  CHECK(run([&](GraphBuilder& b) { return b.argmin(x(b), 1); }, in()) == std::vector<double>{3, 1, 0});
  CHECK(run([&](GraphBuilder& b) { return b.argmin(x(b), -1, true, true); }, in()) == std::vector<double>{3, 3, 1});
  CHECK(run([&](GraphBuilder& b) { return b.argmax(x(b), 0); }, in()) == std::vector<double>{1, 1, 2, 1});
}

TEST_CASE("cumsum: inclusive, exclusive, reversed; hardmax: the first maximum of each line") {
  const auto in = [] {
    std::vector<teeny::NamedTensor> v;
    v.push_back(floats("x", {1, 2, 3, 4, 5, 6}, {2, 3}));
    return v;
  };
  const auto x = [](GraphBuilder& b) { return b.input("x", DType::f32, {2, 3}); };
  CHECK(run([&](GraphBuilder& b) { return b.cumsum(x(b), 1); }, in()) == std::vector<double>{1, 3, 6, 4, 9, 15});
  CHECK(run([&](GraphBuilder& b) { return b.cumsum(x(b), 1, true); }, in()) == std::vector<double>{0, 1, 3, 0, 4, 9});
  CHECK(run([&](GraphBuilder& b) { return b.cumsum(x(b), 1, false, true); }, in()) ==
        std::vector<double>{6, 5, 3, 15, 11, 6});
  CHECK(run([&](GraphBuilder& b) { return b.cumsum(x(b), 0, true, true); }, in()) ==
        std::vector<double>{4, 5, 6, 0, 0, 0});
  std::vector<teeny::NamedTensor> ties;
  ties.push_back(floats("x", {1, 3, 3, 2, 0, -1}, {2, 3}));
  CHECK(run([&](GraphBuilder& b) { return b.hardmax(x(b)); }, std::move(ties)) ==
        std::vector<double>{0, 1, 0, 1, 0, 0});
}

TEST_CASE("compare and where: broadcast, and NaN unequal to everything") {
  const float nan = std::nanf("");
  const auto in = [&] {
    std::vector<teeny::NamedTensor> v;
    v.push_back(floats("a", {1, nan, 3}, {3}));
    v.push_back(floats("b", {1, 2}, {2, 1}));
    return v;
  };
  const auto graph = [](teeny::CompareOp op) {
    return [op](GraphBuilder& b) {
      const Value a = b.input("a", DType::f32, {3});
      const Value x = b.input("b", DType::f32, {2, 1});
      return b.where(b.compare(a, op, x), a, x);  // a where the comparison holds, else b
    };
  };
  // Rows compare [1, NaN, 3] with 1, then with 2.
  const auto lt = run(graph(teeny::CompareOp::lt), in());
  CHECK(lt == std::vector<double>{1, 1, 1, 1, 2, 2});
  const auto ne = run(graph(teeny::CompareOp::ne), in());
  CHECK(ne[0] == 1);
  CHECK(std::isnan(ne[1]));  // NaN != 1: a's NaN is chosen
  CHECK(ne[2] == 3);
  CHECK(ne[3] == 1);
  const auto ge = run(graph(teeny::CompareOp::ge), in());
  CHECK(ge == std::vector<double>{1, 1, 3, 2, 2, 3});
}

TEST_CASE("prod multiplies over the reduced axes") {
  std::vector<teeny::NamedTensor> in;
  in.push_back(floats("x", {1, 2, 3, -4, 0.5F, 2}, {2, 3}));
  CHECK(run([](GraphBuilder& b) { return b.prod(b.input("x", DType::f32, {2, 3}), {1}); }, std::move(in)) ==
        std::vector<double>{6, -4});
}
