// Every standard op on the CPU against PyTorch: each case builds the op with the builder, loads
// the fixture's parameters by their PyTorch keys (op.weight, ...), runs the fixture's inputs and
// compares with PyTorch's output (tests/fixtures/ops, made by tools/make_fixtures.py).
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

import teeny;

#include "support/fixtures.hpp"

namespace {
using teeny::GraphBuilder;
using teeny::Value;
using Build = std::function<Value(GraphBuilder&, std::vector<Value>&)>;

struct OpCase {
  std::string_view name;
  std::vector<std::string_view> inputs;  // fixture inputs, in operand order
  Build build;
};

Build unary(Value (GraphBuilder::*method)(Value)) {
  return [method](GraphBuilder& b, std::vector<Value>& in) { return (b.*method)(in[0]); };
}
Build binary(Value (GraphBuilder::*method)(Value, Value)) {
  return [method](GraphBuilder& b, std::vector<Value>& in) { return (b.*method)(in[0], in[1]); };
}

std::vector<OpCase> cases() {
  std::vector<OpCase> list = {
      {"linear", {"x"}, [](GraphBuilder& b, auto& in) { return b.linear(in[0], 5); }},
      {"linear_no_bias", {"x"}, [](GraphBuilder& b, auto& in) { return b.linear(in[0], 5, false); }},
      {"linear_3d", {"x"}, [](GraphBuilder& b, auto& in) { return b.linear(in[0], 5); }},
      {"linear_1d", {"x"}, [](GraphBuilder& b, auto& in) { return b.linear(in[0], 5); }},
      // parameters stored as F64 / F16 / BF16 convert to f32 on load
      {"linear_params_f64", {"x"}, [](GraphBuilder& b, auto& in) { return b.linear(in[0], 5); }},
      {"linear_params_f16", {"x"}, [](GraphBuilder& b, auto& in) { return b.linear(in[0], 5); }},
      {"linear_params_bf16", {"x"}, [](GraphBuilder& b, auto& in) { return b.linear(in[0], 5); }},
      {"dropout", {"x"}, [](GraphBuilder& b, auto& in) { return b.dropout(in[0], 0.3); }},
      {"dropout_p1", {"x"}, [](GraphBuilder& b, auto& in) { return b.dropout(in[0], 1.0); }},
      {"relu", {"x"}, unary(&GraphBuilder::relu)},
      {"leaky_relu", {"x"}, [](GraphBuilder& b, auto& in) { return b.leaky_relu(in[0]); }},
      {"leaky_relu_0_2", {"x"}, [](GraphBuilder& b, auto& in) { return b.leaky_relu(in[0], 0.2); }},
      {"gelu", {"x"}, [](GraphBuilder& b, auto& in) { return b.gelu(in[0]); }},
      {"gelu_tanh", {"x"}, [](GraphBuilder& b, auto& in) { return b.gelu(in[0], teeny::GeluApproximate::tanh); }},
      {"silu", {"x"}, unary(&GraphBuilder::silu)},
      {"sigmoid", {"x"}, unary(&GraphBuilder::sigmoid)},
      {"tanh", {"x"}, unary(&GraphBuilder::tanh)},
      {"softplus", {"x"}, [](GraphBuilder& b, auto& in) { return b.softplus(in[0]); }},
      {"softplus_beta2_threshold5", {"x"}, [](GraphBuilder& b, auto& in) { return b.softplus(in[0], 2.0, 5.0); }},
      {"elu", {"x"}, [](GraphBuilder& b, auto& in) { return b.elu(in[0]); }},
      {"elu_alpha0_5", {"x"}, [](GraphBuilder& b, auto& in) { return b.elu(in[0], 0.5); }},
      {"hardswish", {"x"}, unary(&GraphBuilder::hardswish)},
      {"exp", {"x"}, unary(&GraphBuilder::exp)},
      {"log", {"x"}, unary(&GraphBuilder::log)},
      {"sqrt", {"x"}, unary(&GraphBuilder::sqrt)},
      {"abs", {"x"}, unary(&GraphBuilder::abs)},
      {"neg", {"x"}, unary(&GraphBuilder::neg)},
      {"reciprocal", {"x"}, unary(&GraphBuilder::reciprocal)},
      {"flatten_default", {"x"}, [](GraphBuilder& b, auto& in) { return b.flatten(in[0]); }},
      {"flatten_start0", {"x"}, [](GraphBuilder& b, auto& in) { return b.flatten(in[0], 0); }},
      {"flatten_1_2", {"x"}, [](GraphBuilder& b, auto& in) { return b.flatten(in[0], 1, 2); }},
      {"flatten_neg", {"x"}, [](GraphBuilder& b, auto& in) { return b.flatten(in[0], -3, -2); }},
      {"reshape", {"x"}, [](GraphBuilder& b, auto& in) { return b.reshape(in[0], {4, 6}); }},
      {"reshape_infer", {"x"}, [](GraphBuilder& b, auto& in) { return b.reshape(in[0], {4, -1}); }},
      {"reshape_infer_middle", {"x"}, [](GraphBuilder& b, auto& in) { return b.reshape(in[0], {2, -1, 2}); }},
      {"reshape_flat", {"x"}, [](GraphBuilder& b, auto& in) { return b.reshape(in[0], {-1}); }},
      {"maximum_nan", {"a", "b"}, binary(&GraphBuilder::maximum)},
      {"minimum_nan", {"a", "b"}, binary(&GraphBuilder::minimum)},
      {"pow_negative_base_integer_exponent", {"a", "b"}, binary(&GraphBuilder::pow)},
      {"pow_square_root", {"a", "b"}, binary(&GraphBuilder::pow)},
  };
  for (std::string_view name : {"matmul_1d_1d", "matmul_2d_1d", "matmul_1d_2d", "matmul_2d_2d", "matmul_1d_3d",
                                "matmul_3d_1d", "matmul_3d_2d", "matmul_batched_broadcast",
                                "matmul_batched_broadcast_both"}) {
    list.push_back({name, {"a", "b"}, binary(&GraphBuilder::matmul)});
  }
  const std::pair<std::string_view, Value (GraphBuilder::*)(Value, Value)> binaries[] = {
      {"add", &GraphBuilder::add},         {"sub", &GraphBuilder::sub},
      {"mul", &GraphBuilder::mul},         {"div", &GraphBuilder::div},
      {"pow", &GraphBuilder::pow},         {"maximum", &GraphBuilder::maximum},
      {"minimum", &GraphBuilder::minimum},
  };
  static std::vector<std::string> names;  // the case names must outlive the list
  names.clear();
  names.reserve(7 * 5);
  for (const auto& [op, method] : binaries) {
    for (std::string_view shape : {"_bcast", "_vec", "_scalar", "_both", "_lhs_bcast"}) {
      names.push_back(std::string(op) + std::string(shape));
      list.push_back({names.back(), {"a", "b"}, binary(method)});
    }
  }
  return list;
}

void run_case(const OpCase& c) {
  CAPTURE(c.name);
  auto file = teeny::SafetensorsFile::open(fixtures::path("ops/" + std::string(c.name) + ".safetensors"));
  REQUIRE_MESSAGE(file, (file ? "" : file.error().to_string()));

  GraphBuilder b;
  std::vector<Value> inputs;
  std::vector<teeny::Tensor> input_tensors;
  for (std::string_view name : c.inputs) {
    auto tensor = file->read("in." + std::string(name));
    REQUIRE(tensor);
    inputs.push_back(b.input(std::string(name), tensor->dtype(), teeny::Shape(tensor->shape())));
    input_tensors.push_back(std::move(*tensor));
  }
  b.output("out", c.build(b, inputs).named("op"));
  auto graph = std::move(b).build();
  REQUIRE_MESSAGE(graph, (graph ? "" : graph.error().to_string()));

  auto model = teeny::load_cpu(*graph, {});
  REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
  auto report = model->load_weights(*file, {.strict = false});  // the file also holds in.* and out
  REQUIRE_MESSAGE(report, (report ? "" : report.error().to_string()));
  CHECK(report->missing.empty());
  CHECK(report->mismatched.empty());

  std::vector<teeny::TensorRef> refs;
  for (std::size_t i = 0; i < inputs.size(); ++i) refs.push_back(teeny::TensorRef::of(c.inputs[i], input_tensors[i]));
  auto ran = model->forward(refs);
  REQUIRE_MESSAGE(ran, (ran ? "" : ran.error().to_string()));
  auto expected = file->read("out");
  REQUIRE(expected);
  auto actual = model->output("out");
  REQUIRE(actual);
  fixtures::check_close(*actual, *expected);
}
}  // namespace

TEST_CASE("CPU ops match PyTorch (tests/fixtures/ops)") {
  for (const OpCase& c : cases()) {
    SUBCASE(std::string(c.name).c_str()) { run_case(c); }
  }
}
