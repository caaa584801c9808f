// teeny.core:dag — a directed acyclic graph of named nodes with ordered operand slots.
//
// Each node lists its inputs in slot order, so `x + x` is one node with inputs {x, x}. Edges are
// added with the node (only to existing nodes) or rewired later with set_input (passes such as
// fusion do that); topological_order() rejects a cycle with an error naming the nodes on it.
//
//   Dag<MyOp> dag;
//   NodeId x = *dag.add(MyOp::input, {}, "x");
//   NodeId y = *dag.add(MyOp::add, {x, x}, "y");      // two slots, one producer
//   auto order = dag.topological_order();             // Result<std::span<const NodeId>>: {x, y}
export module teeny.core:dag;
import teeny.std;
import :error;

export namespace teeny {

using NodeId = std::size_t;

/// Where a node's output is used: by node `consumer`, in operand slot `slot`.
struct Use {
  NodeId consumer;
  std::size_t slot;
  friend bool operator==(const Use&, const Use&) = default;
};

template <class Op>
class Dag {
 public:
  struct Node {
    Op op;
    std::vector<NodeId> inputs;  // operand slots, in order
    std::string name;
  };

  /// Appends a node whose inputs are existing nodes; names must be unique and non-empty.
  Result<NodeId> add(Op op, std::vector<NodeId> inputs, std::string name) {
    if (name.empty()) return fail(Errc::invalid_argument, "a DAG node needs a name (node #", nodes_.size(), ")");
    if (find(name)) return fail(Errc::duplicate, "node name '", name, "' is used twice");
    for (std::size_t slot = 0; slot < inputs.size(); ++slot) {
      if (inputs[slot] >= nodes_.size()) {
        return fail(Errc::out_of_range, "node '", name, "': input slot ", slot, " refers to node #", inputs[slot],
                    ", but only ", nodes_.size(), " nodes exist");
      }
    }
    nodes_.push_back(Node{std::move(op), std::move(inputs), std::move(name)});
    order_.reset();
    return nodes_.size() - 1;
  }

  /// Rewires operand `slot` of `node` to read `source` (may create a cycle; see topological_order).
  Result<void> set_input(NodeId node, std::size_t slot, NodeId source) {
    if (node >= nodes_.size() || source >= nodes_.size()) {
      return fail(Errc::out_of_range, "set_input: node #", node, " or source #", source, " does not exist (",
                  nodes_.size(), " nodes)");
    }
    auto& inputs = nodes_[node].inputs;
    if (slot >= inputs.size()) {
      return fail(Errc::out_of_range, "node '", nodes_[node].name, "' has ", inputs.size(), " input slots, not ",
                  slot + 1);
    }
    inputs[slot] = source;
    order_.reset();
    return ok();
  }

  /// Gives `node` one more operand slot, reading `source` (a fusion that adds an input to an op).
  Result<void> add_input(NodeId node, NodeId source) {
    if (node >= nodes_.size() || source >= nodes_.size()) {
      return fail(Errc::out_of_range, "add_input: node #", node, " or source #", source, " does not exist (",
                  nodes_.size(), " nodes)");
    }
    nodes_[node].inputs.push_back(source);
    order_.reset();
    return ok();
  }

  std::size_t size() const { return nodes_.size(); }
  bool empty() const { return nodes_.empty(); }
  const Node& operator[](NodeId id) const { return nodes_[id]; }
  Node& operator[](NodeId id) { return nodes_[id]; }
  std::span<const Node> nodes() const { return nodes_; }

  std::optional<NodeId> find(std::string_view name) const {
    for (NodeId id = 0; id < nodes_.size(); ++id) {
      if (nodes_[id].name == name) return id;
    }
    return std::nullopt;
  }

  /// Every use of `id`'s output, in (consumer, slot) order. A fan-out lists each use.
  std::vector<Use> uses(NodeId id) const {
    std::vector<Use> out;
    for (NodeId n = 0; n < nodes_.size(); ++n) {
      for (std::size_t slot = 0; slot < nodes_[n].inputs.size(); ++slot) {
        if (nodes_[n].inputs[slot] == id) out.push_back({n, slot});
      }
    }
    return out;
  }

  /// Producers before consumers; among ready nodes the lowest id first, so a DAG built in
  /// order keeps its order. Computed once and kept until the DAG changes.
  Result<std::span<const NodeId>> topological_order() const {
    if (!order_) {
      auto order = compute_order();
      if (!order) return std::move(order).error();
      order_ = std::move(*order);
    }
    return std::span<const NodeId>(*order_);
  }

 private:
  Result<std::vector<NodeId>> compute_order() const {
    const std::size_t n = nodes_.size();
    std::vector<std::size_t> pending(n, 0);  // distinct producers not yet placed
    std::vector<std::vector<NodeId>> consumers(n);
    for (NodeId id = 0; id < n; ++id) {
      std::vector<NodeId> producers = nodes_[id].inputs;
      std::ranges::sort(producers);
      const auto [first, last] = std::ranges::unique(producers);
      producers.erase(first, last);
      pending[id] = producers.size();
      for (NodeId p : producers) consumers[p].push_back(id);
    }
    // Min-heap on id keeps the order stable and deterministic.
    std::vector<NodeId> ready;
    auto later = [](NodeId a, NodeId b) { return a > b; };
    for (NodeId id = 0; id < n; ++id) {
      if (pending[id] == 0) ready.push_back(id);
    }
    std::ranges::make_heap(ready, later);
    std::vector<NodeId> order;
    order.reserve(n);
    while (!ready.empty()) {
      std::ranges::pop_heap(ready, later);
      const NodeId id = ready.back();
      ready.pop_back();
      order.push_back(id);
      for (NodeId c : consumers[id]) {
        if (--pending[c] == 0) {
          ready.push_back(c);
          std::ranges::push_heap(ready, later);
        }
      }
    }
    if (order.size() != n) return cycle_error(pending);
    return order;
  }

  // Walks back from an unplaced node along unplaced inputs until a node repeats: that is a cycle,
  // printed in data-flow order (producer -> consumer).
  Error cycle_error(const std::vector<std::size_t>& pending) const {
    NodeId start = 0;
    while (pending[start] == 0) ++start;
    std::vector<NodeId> path{start};
    std::vector<std::size_t> seen_at(nodes_.size(), nodes_.size());
    seen_at[start] = 0;
    for (;;) {
      NodeId next = start;
      for (NodeId in : nodes_[path.back()].inputs) {
        if (pending[in] != 0) {
          next = in;
          break;
        }
      }
      if (seen_at[next] != nodes_.size()) {
        std::string text;
        for (std::size_t i = path.size(); i-- > seen_at[next];) text += "'" + nodes_[path[i]].name + "' -> ";
        text += "'" + nodes_[path.back()].name + "'";
        return fail(Errc::cycle, "the graph has a cycle: ", text);
      }
      seen_at[next] = path.size();
      path.push_back(next);
    }
  }

  std::vector<Node> nodes_;
  mutable std::optional<std::vector<NodeId>> order_;
};

}  // namespace teeny
