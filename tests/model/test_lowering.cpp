// Lowering: a toy op set and lowering that split Linear into matmul + bias add, a middleware that
// fuses ReLU into the bias add, and the mapping, names and weight keys they produce.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

import teeny.core;
import teeny.graph;
import teeny.model;

namespace toy {
using teeny::ConcreteShape;
using teeny::Dim3;
using teeny::NodeId;
using teeny::Result;

struct Args {
  teeny::TensorView<const float> x;
  teeny::TensorView<float> y;
  auto fields() const { return std::tie(x, y); }
};

// The runtime part every toy op shares; the ops differ by name and attributes.
template <class Self>
struct base_op {
  using Args = toy::Args;
  teeny::Shape shape;
  const teeny::Shape& output_shape() const { return shape; }
  teeny::DType output_dtype() const { return teeny::DType::f32; }
  teeny::KernelInstance kernel() const { return {{Self::op_kind, Self::op_kind, ""}, std::nullopt}; }
  std::size_t n_activation_inputs() const { return 1; }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const { return {}; }
  Result<Args> pack_args(const teeny::OpBindings&) const { return Args{}; }
  Dim3 block() const { return {}; }
  Dim3 grid(const ConcreteShape&) const { return {}; }
  std::string_view name() const { return Self::op_kind; }
};
struct matmul_op : base_op<matmul_op> {
  static constexpr std::string_view op_kind = "matmul";
};
struct bias_add_op : base_op<bias_add_op> {
  static constexpr std::string_view op_kind = "bias_add";
  bool fused_relu = false;
};
struct relu_op : base_op<relu_op> {
  static constexpr std::string_view op_kind = "relu";
};
struct add_op : base_op<add_op> {
  static constexpr std::string_view op_kind = "add";
  std::size_t n_activation_inputs() const { return 2; }
};
static_assert(teeny::RuntimeOp<matmul_op> && teeny::ExecutableOp<bias_add_op>);

using ops = teeny::OpSet<teeny::InputOp, matmul_op, bias_add_op, relu_op, add_op>;
using context = teeny::LoweringContext<ops>;

/// The base lowering: one graph node -> one DAG node, except Linear -> matmul + bias add.
struct split_lowering {
  using op_set = ops;
  Result<bool> lower_node(context& ctx, NodeId g) const {
    const auto& node = ctx.graph().dag()[g];
    const teeny::Shape& shape = node.op.type.shape;
    if (std::holds_alternative<teeny::Input>(node.op.op)) {
      return ctx.emit(g, teeny::InputOp{node.name, shape, node.op.type.dtype}, {}, node.name).transform(ok);
    }
    if (const auto* linear = std::get_if<teeny::Linear>(&node.op.op)) {
      auto mm = ctx.emit(g, matmul_op{{shape}}, {ctx.input(g, 0)}, node.name + ".matmul");
      if (!mm) return std::move(mm).error();
      if (!linear->bias) return true;
      return ctx.emit(g, bias_add_op{{shape}}, {*mm}, node.name).transform(ok);
    }
    if (std::holds_alternative<teeny::ReLU>(node.op.op)) {
      return ctx.emit(g, relu_op{{shape}}, ctx.inputs(g), node.name).transform(ok);
    }
    if (const auto* binary = std::get_if<teeny::Binary>(&node.op.op); binary && binary->op == teeny::BinaryOp::add) {
      return ctx.emit(g, add_op{{shape}}, ctx.inputs(g), node.name).transform(ok);
    }
    return false;  // not ours
  }
  static bool ok(NodeId) { return true; }
};

/// Middleware: a ReLU right after a bias add used only there becomes the bias add's epilogue.
template <class Base>
struct fuse_relu {
  using op_set = typename Base::op_set;
  Base base;
  const Base* base_lowering() const { return &base; }

  Result<bool> lower_node(context& ctx, NodeId g) const {
    const auto& node = ctx.graph().dag()[g];
    if (std::holds_alternative<teeny::ReLU>(node.op.op)) {
      const NodeId producer = ctx.input(g, 0);
      auto* bias_add = std::get_if<bias_add_op>(&ctx.dag()[producer].op);
      if (bias_add != nullptr && ctx.graph().dag().uses(node.inputs[0]).size() == 1) {
        bias_add->fused_relu = true;
        ctx.alias(g, producer);
        return true;
      }
    }
    return base.lower_node(ctx, g);
  }
};

/// A whole-graph Lowering made of a node lowering.
template <class NodeLowering>
struct whole_graph {
  using op_set = typename NodeLowering::op_set;
  NodeLowering nodes;
  Result<teeny::Lowered<op_set>> lower(const teeny::Graph& graph, teeny::LoweringMode mode) const {
    return teeny::lower_graph(nodes, graph, mode);
  }
};

static_assert(teeny::NodeLowering<split_lowering> && teeny::NodeLowering<fuse_relu<split_lowering>>);
static_assert(teeny::Lowering<whole_graph<fuse_relu<split_lowering>>>);
static_assert(!teeny::Lowering<split_lowering>);  // no whole-graph lower()
}  // namespace toy

namespace {
teeny::Graph mlp_graph() {
  teeny::GraphBuilder b;
  auto x = b.input("x", teeny::DType::f32, {teeny::Dim::sym("batch"), 4});
  auto h = b.relu(b.linear(x, 3).named("fc1")).named("act");
  b.output("y", b.linear(h, 2, false).named("head"));
  auto graph = std::move(b).build();
  REQUIRE(graph);
  return std::move(*graph);
}
std::vector<std::string> dag_names(const teeny::Dag<toy::ops>& dag) {
  std::vector<std::string> names;
  for (const auto& node : dag.nodes()) names.push_back(node.name);
  return names;
}
}  // namespace

TEST_CASE("one graph node may become several named DAG nodes; weights keep the graph node's keys") {
  const teeny::Graph graph = mlp_graph();
  auto lowered = teeny::lower_graph(toy::split_lowering{}, graph, teeny::LoweringMode::inference);
  REQUIRE(lowered);
  CHECK(dag_names(lowered->dag) == std::vector<std::string>{"x", "fc1.matmul", "fc1", "act", "head.matmul"});
  const teeny::NodeId fc1 = *graph.find("fc1");
  CHECK(lowered->graph_to_dag[fc1] == std::vector<teeny::NodeId>{1, 2});
  CHECK(lowered->value_of(fc1) == 2);
  CHECK(lowered->param_key(1, "weight") == "fc1.weight");
  CHECK(lowered->param_key(2, "bias") == "fc1.bias");
  CHECK(lowered->dag[3].inputs == std::vector<teeny::NodeId>{2});  // relu reads the bias add
  CHECK(std::holds_alternative<teeny::InputOp>(lowered->dag[0].op));
  CHECK(teeny::name_of(lowered->dag[1].op) == "matmul");
  CHECK(teeny::output_shape_of(lowered->dag[4].op) == teeny::Shape{teeny::Dim::sym("batch"), 2});
}

TEST_CASE("a middleware fuses what it knows and delegates the rest to its base") {
  const teeny::Graph graph = mlp_graph();
  const toy::whole_graph<toy::fuse_relu<toy::split_lowering>> lowering{};
  CHECK(teeny::base_lowering(lowering.nodes) == &lowering.nodes.base);
  CHECK(teeny::base_lowering(lowering.nodes.base) == nullptr);  // the end of the chain

  auto lowered = lowering.lower(graph, teeny::LoweringMode::inference);
  REQUIRE(lowered);
  CHECK(dag_names(lowered->dag) == std::vector<std::string>{"x", "fc1.matmul", "fc1", "head.matmul"});
  const teeny::NodeId act = *graph.find("act");
  CHECK(lowered->graph_to_dag[act] == std::vector<teeny::NodeId>{2});  // fused into fc1's bias add
  CHECK(std::get<toy::bias_add_op>(lowered->dag[2].op).fused_relu);
  CHECK(lowered->dag[3].inputs == std::vector<teeny::NodeId>{2});
}

TEST_CASE("x + x keeps both operand slots through lowering") {
  teeny::GraphBuilder b;
  auto x = b.input("x", teeny::DType::f32, {3});
  b.output("y", b.add(x, x).named("double"));
  auto graph = std::move(b).build();
  REQUIRE(graph);
  auto lowered = teeny::lower_graph(toy::split_lowering{}, *graph, teeny::LoweringMode::inference);
  REQUIRE(lowered);
  CHECK(lowered->dag[1].inputs == std::vector<teeny::NodeId>{0, 0});
}

TEST_CASE("an op no lowering handles is an error naming the op, the node and the mode") {
  teeny::GraphBuilder b;
  auto x = b.input("x", teeny::DType::f32, {3});
  b.output("y", b.sigmoid(x).named("gate"));
  auto graph = std::move(b).build();
  REQUIRE(graph);
  auto lowered = teeny::lower_graph(toy::split_lowering{}, *graph, teeny::LoweringMode::training);
  REQUIRE_FALSE(lowered);
  CHECK(lowered.error().code() == teeny::Errc::unsupported);
  CHECK(lowered.error().message() ==
        "node 'gate' (sigmoid): op 'sigmoid' is not supported by this lowering (training mode)");
}
