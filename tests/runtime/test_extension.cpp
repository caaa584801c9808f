// Extending teeny from outside: a graph op teeny does not know travels through the builder and the
// graph as a CustomOp, the standard lowering refuses it by name unless a middleware lowers it, and
// a lowered DAG whose node operands disagree with the op's n_activation_inputs is refused at load.
// (tests/consumer/ runs the whole path from a project of its own: ops, kernels, backward.)
#include <doctest/doctest.h>

#include <concepts>
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

// An executable op with a CPU kernel (y = x) whose launch has zero threads per block: a geometry
// no GPU could launch, which the load refuses on the CPU too.
struct CopyArgs {
  teeny::TensorView<const float> x;
  teeny::TensorView<float> y;
  auto fields() const { return std::tie(x, y); }
};
struct empty_block_op {
  using Args = CopyArgs;
  teeny::OpOutput out;
  std::string_view name() const { return "copy"; }
  const teeny::Shape& output_shape() const { return out.shape; }
  teeny::DType output_dtype() const { return teeny::DType::f32; }
  teeny::KernelInstance kernel() const { return {{"copy", "copy", ""}, std::nullopt}; }
  std::size_t n_activation_inputs() const { return 1; }
  std::vector<teeny::ConcreteShape> param_shapes(std::span<const teeny::ConcreteShape>,
                                                 const teeny::ConcreteShape&) const {
    return {};
  }
  teeny::Result<Args> pack_args(const teeny::OpBindings& b) const {
    auto x = teeny::input_view<const float>(b, 0);
    auto y = teeny::output_view<float>(b);
    if (auto e = teeny::first_error(x, y)) return *e;
    return Args{*x, *y};
  }
  teeny::Dim3 block() const { return {0, 1, 1}; }
  teeny::Dim3 grid(const teeny::ConcreteShape&) const { return {1, 1, 1}; }
};
teeny::Result<teeny::NoState> prepare_kernel(const empty_block_op&, const CopyArgs&, teeny::CpuContext&) {
  return teeny::NoState{};
}
[[maybe_unused]] void run_kernel(const empty_block_op&, const CopyArgs& a, teeny::NoState&, teeny::CpuContext&) {
  for (std::int64_t i = 0; i < a.y.numel(); ++i) a.y.data[i] = a.x.data[i];
}

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

TEST_CASE("a launch without threads is refused at load, naming the node") {
  teeny::GraphBuilder b;
  b.output("y", b.relu(b.input("x", teeny::DType::f32, {2, 3})));
  auto graph = std::move(b).build();
  REQUIRE(graph);
  // An op set of just the two ops the DAG holds: a LoadedModel over the whole standard set plus one
  // would be instantiated (compiled) for this test alone.
  using ops = teeny::OpSet<teeny::InputOp, empty_block_op>;
  teeny::Lowered<ops> lowered;
  REQUIRE(lowered.dag.add(teeny::InputOp{"x", {2, 3}, teeny::DType::f32}, {}, "x"));
  REQUIRE(lowered.dag.add(empty_block_op{{{2, 3}, teeny::DType::f32}}, {0}, "y"));
  lowered.graph_to_dag = {{0}, {1}};
  lowered.param_scope = {"x", "y"};
  lowered.folded_scopes.resize(2);
  auto model = teeny::LoadedModel<teeny::CpuContext, ops>::load(*graph, std::move(lowered), teeny::CpuContext{}, {});
  REQUIRE(!model);
  CHECK(model.error().to_string() ==
        "internal error: node 'y' (copy): launch 0 has grid (1, 1, 1) and block (0, 1, 1): a launch needs at least "
        "one block of 1 to 1024 threads");
}

// The standard lowering, with or without middlewares, is what the loaders take: a Lowering.
static_assert(teeny::Lowering<teeny::standard_lowering<float>>);
static_assert(teeny::NodeLowering<teeny::standard_node_chain<double>>);
static_assert(std::same_as<teeny::extend_ops<teeny::standard_ops<float>>, teeny::standard_ops<float>>);
