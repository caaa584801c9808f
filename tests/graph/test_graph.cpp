// Graph: parameters (state_dict keys), counts, summary, accessors and validation in Graph::from.
#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

import teeny.graph;

#include "graph/support.hpp"

using namespace graph_test;

namespace {
Graph mlp() {
  GraphBuilder b;
  const Value x = b.input("x", DType::f32, {batch, 784});
  Value h = b.relu(b.linear(x, 512).named("fc1"));
  h = b.relu(b.linear(h, 512).named("fc2"));
  b.output("logits", b.linear(h, 10).named("fc3"));
  auto g = std::move(b).build();
  REQUIRE(g);
  return std::move(*g);
}

std::string line_of(const std::string& text, std::string_view start) {
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t end = text.find('\n', at);
    const std::string line = text.substr(at, end - at);
    if (line.starts_with(start)) return line;
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return {};
}
}  // namespace

TEST_CASE("graph: the MLP 784-512-512-10 has PyTorch's keys and 669706 parameters") {
  const Graph g = mlp();
  const auto params = g.parameters();
  REQUIRE(params.size() == 6);
  const std::vector<std::pair<std::string, Shape>> expected{{"fc1.weight", {512, 784}}, {"fc1.bias", {512}},
                                                            {"fc2.weight", {512, 512}}, {"fc2.bias", {512}},
                                                            {"fc3.weight", {10, 512}},  {"fc3.bias", {10}}};
  for (std::size_t i = 0; i < params.size(); ++i) {
    CHECK(params[i].key == expected[i].first);
    CHECK(params[i].shape == expected[i].second);
    CHECK(params[i].dtype == DType::f32);
    CHECK(params[i].trainable);
  }
  CHECK(g.find("fc1") == params[0].node);
  CHECK(params[0].slot == "weight");
  CHECK(g.parameter_count() == 669706);
  CHECK(g.buffer_count() == 0);
}

TEST_CASE("graph: batch norm owns PyTorch's five entries, three of them buffers") {
  GraphBuilder b;
  const Value x = b.input("x", DType::f32, {batch, 16, 8, 8});
  b.output("y", b.batch_norm2d(x).named("layer1.0.bn1"));
  auto g = std::move(b).build();
  REQUIRE(g);
  const auto params = g->parameters();
  REQUIRE(params.size() == 5);
  CHECK(params[0].key == "layer1.0.bn1.weight");
  CHECK(params[1].key == "layer1.0.bn1.bias");
  CHECK(params[2].key == "layer1.0.bn1.running_mean");
  CHECK(params[3].key == "layer1.0.bn1.running_var");
  CHECK(params[4].key == "layer1.0.bn1.num_batches_tracked");
  CHECK(params[4].dtype == DType::i64);
  CHECK(params[4].shape == Shape{});
  CHECK(params[0].trainable);
  CHECK_FALSE(params[2].trainable);
  CHECK_FALSE(params[4].trainable);
  CHECK(g->parameter_count() == 32);
  CHECK(g->buffer_count() == 33);
  const std::string summary = g->summary();
  CHECK_CONTAINS(summary, "running_mean f32[16] (buffer)");
  CHECK_CONTAINS(summary, "num_batches_tracked i64[] (buffer)");
  CHECK_CONTAINS(summary, "2 nodes, 32 trainable parameters, 33 buffer elements");
}

TEST_CASE("graph: summary lists every node with op, inputs, type and params, then totals") {
  const Graph g = mlp();
  const std::string summary = g.summary();
  CAPTURE(summary);
  const std::string header = line_of(summary, "node");
  CHECK_CONTAINS(header, "op");
  CHECK_CONTAINS(header, "inputs");
  CHECK_CONTAINS(header, "params");
  const std::string fc1 = line_of(summary, "fc1 ");
  CHECK_CONTAINS(fc1, "linear(in_features=784, out_features=512, bias=true)");
  CHECK_CONTAINS(fc1, " x ");
  CHECK_CONTAINS(fc1, "f32[batch, 512]");
  CHECK_CONTAINS(fc1, "weight f32[512, 784], bias f32[512]");
  const std::string relu = line_of(summary, "relu_1 ");
  CHECK_CONTAINS(relu, "relu()");
  CHECK_CONTAINS(relu, "fc2");
  CHECK_CONTAINS(line_of(summary, "x "), "input(dtype=f32, shape=[batch, 784])");
  CHECK(line_of(summary, "output") == "output 'logits' = fc3 f32[batch, 10]");
  CHECK_CONTAINS(summary, "6 nodes, 669706 trainable parameters\n");
  // Columns line up: every node line starts its op column at the same offset.
  CHECK(fc1.find("linear(") == relu.find("relu("));
}

TEST_CASE("graph: accessors") {
  const Graph g = mlp();
  CHECK(g.size() == 6);
  CHECK(g.dag().size() == 6);
  REQUIRE(g.inputs().size() == 1);
  CHECK(g.name(g.inputs()[0]) == "x");
  const auto found = g.find("fc2");
  REQUIRE(found.has_value());
  const NodeId fc2 = found.value_or(0);
  CHECK(g.node(fc2).name == "fc2");
  CHECK(std::holds_alternative<Linear>(g.node(fc2).op.op));
  CHECK(g.node(fc2).op.type == f32({batch, 512}));
  CHECK(g.name(g.operands(fc2)[0]) == "relu_0");
  CHECK(g.operand_types(fc2) == std::vector<TensorType>{f32({batch, 512})});
  CHECK(describe(g.op(fc2)) == "linear(in_features=512, out_features=512, bias=true)");
  CHECK_FALSE(g.find("fc4").has_value());
  auto order = g.dag().topological_order();
  REQUIRE(order);
  CHECK(order->size() == 6);
}

TEST_CASE("graph: from() validates types, cycles and outputs") {
  Dag<GraphNode> dag;
  const NodeId x = *dag.add(GraphNode{Input{f32({2, 3})}, f32({2, 3})}, {}, "x");
  const NodeId r = *dag.add(GraphNode{ReLU{}, f32({2, 3})}, {x}, "r");
  const NodeId s = *dag.add(GraphNode{Sigmoid{}, f32({2, 3})}, {r}, "s");
  auto good = Graph::from(dag, {{"y", s}});
  REQUIRE(good);
  CHECK(good->inputs().size() == 1);

  auto no_outputs = Graph::from(dag, {});
  REQUIRE_FALSE(no_outputs);
  CHECK(no_outputs.error().message() == "a graph needs at least one output");
  auto twice = Graph::from(dag, {{"y", s}, {"y", r}});
  REQUIRE_FALSE(twice);
  CHECK(twice.error().code() == Errc::duplicate);
  auto missing = Graph::from(dag, {{"y", 7}});
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code() == Errc::out_of_range);

  Dag<GraphNode> wrong = dag;
  wrong[s].op.type = f32({3, 2});
  auto mistyped = Graph::from(wrong, {{"y", s}});
  REQUIRE_FALSE(mistyped);
  CHECK(mistyped.error().message() == "node 's' (sigmoid): its type is f32[3, 2] but its op infers f32[2, 3]");

  Dag<GraphNode> bad_op = dag;
  bad_op[r].op.op = Linear{4, 4};
  auto invalid = Graph::from(bad_op, {{"y", s}});
  REQUIRE_FALSE(invalid);
  CHECK(invalid.error().message() == "node 'r' (linear): input f32[2, 3] has 3 features but in_features is 4");

  Dag<GraphNode> cyclic = dag;
  REQUIRE(cyclic.set_input(r, 0, s));
  auto cycle = Graph::from(cyclic, {{"y", s}});
  REQUIRE_FALSE(cycle);
  CHECK(cycle.error().code() == Errc::cycle);
}
