// Extending teeny from outside: a graph op teeny does not know travels through the builder and the
// graph as a CustomOp, the standard lowering refuses it by name unless a middleware lowers it, and
// a lowered DAG whose node operands disagree with the op's n_activation_inputs is refused at load.
// (tests/consumer/ runs the whole path from a project of its own: ops, kernels, backward.)
#include <doctest/doctest.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

import teeny;

namespace {

// A graph op with one attribute and one parameter, defined here as a user would.
struct Scale {
  static constexpr std::string_view kind = "scale";
  static constexpr teeny::Arity arity{1, 1};
  double factor = 1;
  bool learned = false;

  teeny::Result<teeny::TensorType> infer(std::span<const teeny::TensorType> inputs) const {
    if (inputs[0].shape.rank() == 0)
      return teeny::fail(teeny::Errc::shape_mismatch, "input ", inputs[0], " is a scalar");
    return inputs[0];
  }
  std::vector<teeny::ParamSpec> params(std::span<const teeny::TensorType> inputs) const {
    if (!learned) return {};
    return {{"gain", {inputs[0].shape.back()}, inputs[0].dtype}};
  }
  std::string attributes() const { return "factor=" + std::to_string(factor).substr(0, 3); }
  friend bool operator==(const Scale&, const Scale&) = default;
};

}  // namespace

TEST_CASE("a graph op defined outside teeny is a CustomOp node like any other") {
  teeny::GraphBuilder b;
  teeny::Value x = b.input("x", teeny::DType::f32, {teeny::Dim::sym("batch"), 4});
  teeny::Value s = b.add(Scale{.factor = 2, .learned = true}, {x}, "gain");
  teeny::Value t = b.add(Scale{.factor = 3}, {b.relu(s)});
  b.output("y", t);
  auto graph = std::move(b).build();
  REQUIRE_MESSAGE(graph, (graph ? "" : graph.error().to_string()));

  const teeny::GraphOp& op = graph->op(s.id());
  CHECK(teeny::is<teeny::CustomOp>(op));
  CHECK(teeny::is<Scale>(op));
  CHECK(!teeny::is<teeny::Linear>(op));
  REQUIRE(teeny::op_if<Scale>(op) != nullptr);
  CHECK(teeny::op_if<Scale>(op)->factor == 2);
  CHECK(teeny::op_if<teeny::ReLU>(op) == nullptr);
  CHECK(teeny::kind(op) == "scale");
  CHECK(teeny::describe(op) == "scale(factor=2.0)");
  CHECK(teeny::arity(op) == teeny::Arity{1, 1});
  CHECK(graph->name(t.id()) == "scale_0");  // default names count per op kind

  // Parameters: keys `{node}.{slot}` as for teeny's ops.
  REQUIRE(graph->parameters().size() == 1);
  CHECK(graph->parameters()[0].key == "gain.gain");
  CHECK(graph->parameters()[0].shape == teeny::Shape{4});

  // Equality compares the held ops (graphs compare node by node).
  const teeny::GraphOp two = teeny::CustomOp(Scale{.factor = 2});
  const bool same = two == teeny::GraphOp(teeny::CustomOp(Scale{.factor = 2}));
  const bool other_factor = two == teeny::GraphOp(teeny::CustomOp(Scale{.factor = 3}));
  const bool other_op = two == teeny::GraphOp(teeny::ReLU{});
  CHECK(same);
  CHECK(!other_factor);
  CHECK(!other_op);
}

TEST_CASE("a custom op's inference and arity errors name the node and the op") {
  teeny::GraphBuilder b;
  teeny::Value scalar = b.input("s", teeny::DType::f32, {});
  teeny::Value x = b.input("x", teeny::DType::f32, {3});
  b.output("a", b.add(Scale{}, {scalar}, "on_scalar"));
  b.output("b", b.add(Scale{}, {x, x}, "two_inputs"));
  auto graph = std::move(b).build();
  REQUIRE(!graph);
  const std::string message = graph.error().to_string();
  CHECK(message.find("node 'on_scalar' (scale): input f32[] is a scalar") != std::string::npos);
  CHECK(message.find("node 'two_inputs' (scale): expects 1 input, got 2") != std::string::npos);
}

TEST_CASE("the standard lowering refuses a custom op no middleware lowers, naming node and op") {
  teeny::GraphBuilder b;
  b.output("y", b.add(Scale{}, {b.input("x", teeny::DType::f32, {2, 3})}, "gain"));
  auto graph = std::move(b).build();
  REQUIRE(graph);
  auto model = teeny::load_cpu(*graph, {});
  REQUIRE(!model);
  CHECK(model.error().to_string() ==
        "unsupported: node 'gain' (scale): op 'scale' is defined outside teeny and no middleware of this lowering "
        "lowers it (give standard_lowering one: see docs/custom-ops.md)");
}

TEST_CASE("a lowered DAG whose node has fewer operands than its op reads is refused at load") {
  teeny::GraphBuilder b;
  teeny::Value x = b.input("x", teeny::DType::f32, {2, 3});
  b.output("y", b.add(x, x));
  auto graph = std::move(b).build();
  REQUIRE(graph);
  // A lowering that forgot the second operand of the add.
  teeny::Lowered<teeny::standard_ops<float>> lowered;
  const teeny::OpOutput out{{2, 3}, teeny::DType::f32};
  REQUIRE(lowered.dag.add(teeny::InputOp{"x", {2, 3}, teeny::DType::f32}, {}, "x"));
  REQUIRE(lowered.dag.add(teeny::binary_op<float>{teeny::BinaryFn::add, out}, {0}, "add_0"));
  lowered.graph_to_dag = {{0}, {1}};
  lowered.param_scope = {"x", "add_0"};
  lowered.folded_scopes.resize(2);
  auto model = teeny::CpuModel::load(*graph, std::move(lowered), teeny::CpuContext{}, {});
  REQUIRE(!model);
  CHECK(model.error().to_string() ==
        "invalid argument: node 'add_0' (binary) reads 2 activation input(s) (its n_activation_inputs), but the "
        "lowered DAG gives it 1");
}

// The standard lowering, with or without middlewares, is what the loaders take: a Lowering.
static_assert(teeny::Lowering<teeny::standard_lowering<float>>);
static_assert(teeny::NodeLowering<teeny::standard_node_chain<double>>);
static_assert(std::same_as<teeny::extend_ops<teeny::standard_ops<float>>, teeny::standard_ops<float>>);
