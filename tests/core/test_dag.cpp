#include <doctest/doctest.h>

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

import teeny.core;

using teeny::Dag;
using teeny::NodeId;

namespace {
enum class Op { input, add, relu };
std::vector<NodeId> to_vector(std::span<const NodeId> s) { return {s.begin(), s.end()}; }
}  // namespace

TEST_CASE("ordered operand slots: x + x has two inputs, fan-out lists every use") {
  Dag<Op> dag;
  const NodeId x = *dag.add(Op::input, {}, "x");
  const NodeId y = *dag.add(Op::add, {x, x}, "y");
  const NodeId z = *dag.add(Op::relu, {y}, "z");
  CHECK(dag[y].inputs == std::vector<NodeId>{x, x});
  CHECK(dag.uses(x) == std::vector<teeny::Use>{{y, 0}, {y, 1}});
  CHECK(dag.uses(z).empty());
  CHECK(dag.find("z") == z);
  CHECK_FALSE(dag.find("w").has_value());
  CHECK(to_vector(*dag.topological_order()) == std::vector<NodeId>{x, y, z});
}

TEST_CASE("adding nodes validates names and inputs") {
  Dag<Op> dag;
  REQUIRE(dag.add(Op::input, {}, "x"));
  auto dup = dag.add(Op::relu, {0}, "x");
  REQUIRE_FALSE(dup);
  CHECK(dup.error().code() == teeny::Errc::duplicate);
  CHECK(dup.error().message() == "node name 'x' is used twice");
  auto dangling = dag.add(Op::relu, {3}, "r");
  REQUIRE_FALSE(dangling);
  CHECK(dangling.error().message() == "node 'r': input slot 0 refers to node #3, but only 1 nodes exist");
  CHECK_FALSE(dag.add(Op::relu, {0}, ""));
}

TEST_CASE("topological order follows rewired edges and is recomputed after a change") {
  Dag<Op> dag;
  const NodeId a = *dag.add(Op::input, {}, "a");
  const NodeId b = *dag.add(Op::relu, {a}, "b");
  const NodeId c = *dag.add(Op::relu, {a}, "c");
  CHECK(to_vector(*dag.topological_order()) == std::vector<NodeId>{a, b, c});
  REQUIRE(dag.set_input(b, 0, c));  // b now reads c: c must come first
  CHECK(to_vector(*dag.topological_order()) == std::vector<NodeId>{a, c, b});
  CHECK_FALSE(dag.set_input(b, 1, a));  // b has one slot
}

TEST_CASE("an added operand slot reads its source, which the order then puts first") {
  Dag<Op> dag;
  const NodeId a = *dag.add(Op::input, {}, "a");
  const NodeId b = *dag.add(Op::relu, {a}, "b");
  const NodeId c = *dag.add(Op::relu, {a}, "c");  // added after b
  CHECK(to_vector(*dag.topological_order()) == std::vector<NodeId>{a, b, c});
  REQUIRE(dag.add_input(b, c));  // b (a folded residual add) now also reads c
  CHECK(dag[b].inputs == std::vector<NodeId>{a, c});
  CHECK(to_vector(*dag.topological_order()) == std::vector<NodeId>{a, c, b});
  CHECK_FALSE(dag.add_input(b, 7));
  CHECK(dag[b].inputs.size() == 2);
}

TEST_CASE("a cycle is an error naming the nodes on it, in data-flow order") {
  Dag<Op> dag;
  const NodeId x = *dag.add(Op::input, {}, "x");
  const NodeId p = *dag.add(Op::relu, {x}, "p");
  const NodeId q = *dag.add(Op::relu, {p}, "q");
  const NodeId r = *dag.add(Op::add, {q, x}, "r");
  REQUIRE(dag.set_input(p, 0, r));  // p <- r <- q <- p
  auto order = dag.topological_order();
  REQUIRE_FALSE(order);
  CHECK(order.error().code() == teeny::Errc::cycle);
  CHECK(order.error().message() == "the graph has a cycle: 'q' -> 'r' -> 'p' -> 'q'");
  REQUIRE(dag.set_input(p, 0, x));
  CHECK(dag.topological_order().has_value());
}
