// teeny.model:lowering — turning a Graph into a DAG of executable ops.
//
// A lowering returns the DAG *and* an explicit mapping graph node -> DAG nodes (the seed assumed
// one DAG node per graph node in order; here one graph node may become several DAG nodes, each
// named by the lowering, and several graph nodes may become one, by fusion).
//
// Lowerings compose per node: a NodeLowering handles the graph nodes it knows and says `false`
// for the others; a middleware is a NodeLowering that handles a few ops and delegates the rest to
// its base lowering. lower_graph drives a NodeLowering over a graph in topological order:
//
//   struct my_lowering {
//     using op_set = OpSet<InputOp, relu_op>;
//     Result<bool> lower_node(LoweringContext<op_set>& ctx, NodeId node) const;   // emit ops
//   };
//   Result<Lowered<my_lowering::op_set>> lowered = lower_graph(my_lowering{}, graph, LoweringMode::inference);
export module teeny.model:lowering;
import teeny.std;
import teeny.core;
import teeny.graph;
import :executable_op;

export namespace teeny {

/// Lowering for inference only, or for training (backward kernels wired up as well).
enum class LoweringMode : std::uint8_t { inference, training };

constexpr std::string_view name(LoweringMode mode) { return mode == LoweringMode::training ? "training" : "inference"; }

/// A lowered graph: the DAG and, for every graph node, the DAG nodes it became.
template <OpSetType Ops>
struct Lowered {
  Dag<Ops> dag;
  /// What the graph was lowered for: a model loaded from a training lowering can run backward.
  LoweringMode mode = LoweringMode::inference;
  /// graph_to_dag[g]: the DAG nodes made for graph node g, the one holding g's value last.
  /// A node fused into another maps to the DAG node that computes it.
  std::vector<std::vector<NodeId>> graph_to_dag;
  /// param_scope[d]: the prefix of DAG node d's weight keys, `{scope}.{slot}`. It is the name of
  /// the graph node the DAG node was made for, so that a graph node split in several DAG nodes
  /// (a Linear into matmul + bias add) still loads `fc1.weight` and `fc1.bias` from a state_dict.
  std::vector<std::string> param_scope;
  /// folded_scopes[d]: the graph nodes folded into DAG node d that bring parameters of their own
  /// (a BatchNorm folded into the Conv before it). The DAG node's slot `{prefix}.{slot}` is then
  /// the state_dict key `{scope}.{slot}`: a folded BatchNorm still loads `layer1.0.bn1.weight`.
  struct FoldedScope {
    std::string prefix;  // the slot prefix the op uses, e.g. "norm"
    std::string scope;   // the folded graph node's name, e.g. "layer1.0.bn1"
  };
  std::vector<std::vector<FoldedScope>> folded_scopes;

  /// The DAG node holding graph node `g`'s value.
  NodeId value_of(NodeId g) const { return graph_to_dag[g].back(); }
  /// The state_dict key of DAG node `d`'s parameter `slot`.
  std::string param_key(NodeId d, std::string_view slot) const {
    if (const auto dot = slot.find('.'); dot != std::string_view::npos && d < folded_scopes.size()) {
      for (const FoldedScope& folded : folded_scopes[d]) {
        if (slot.substr(0, dot) == folded.prefix) return folded.scope + std::string(slot.substr(dot));
      }
    }
    return param_scope[d] + "." + std::string(slot);
  }
};

/// What a node lowering reads and writes: the graph, the DAG under construction and the mapping.
template <OpSetType Ops>
class LoweringContext {
 public:
  LoweringContext(const Graph& graph, LoweringMode mode) : graph_(graph), mode_(mode) {
    lowered_.mode = mode;
    lowered_.graph_to_dag.resize(graph.dag().size());
  }

  const Graph& graph() const { return graph_; }
  LoweringMode mode() const { return mode_; }
  Dag<Ops>& dag() { return lowered_.dag; }
  const Dag<Ops>& dag() const { return lowered_.dag; }

  /// The DAG node holding the value of input `slot` of graph node `g` (already lowered, since
  /// nodes are lowered in topological order).
  NodeId input(NodeId g, std::size_t slot) const { return lowered_.value_of(graph_.dag()[g].inputs[slot]); }

  /// The DAG nodes holding every input of graph node `g`, in slot order.
  std::vector<NodeId> inputs(NodeId g) const {
    std::vector<NodeId> out;
    for (std::size_t slot = 0; slot < graph_.dag()[g].inputs.size(); ++slot) out.push_back(input(g, slot));
    return out;
  }

  /// Adds a DAG node made for graph node `g`, named `dag_name` (unique in the DAG; when one graph
  /// node becomes several DAG nodes, name them e.g. "fc1.matmul", "fc1"). Its weight keys keep the
  /// graph node's name as prefix. The last DAG node emitted for `g` holds g's value.
  Result<NodeId> emit(NodeId g, Ops op, std::vector<NodeId> dag_inputs, std::string dag_name) {
    auto id = lowered_.dag.add(std::move(op), std::move(dag_inputs), std::move(dag_name));
    if (id) {
      lowered_.graph_to_dag[g].push_back(*id);
      lowered_.param_scope.push_back(graph_.dag()[g].name);
      lowered_.folded_scopes.emplace_back();
    }
    return id;
  }

  /// Records that graph node `g` is computed by the existing DAG node `dag_node` (fusion).
  void alias(NodeId g, NodeId dag_node) { lowered_.graph_to_dag[g].push_back(dag_node); }

  /// Records that graph node `g` was folded into `dag_node` together with its parameters, which
  /// the op names `{prefix}.{slot}` and which load from `{g's name}.{slot}`.
  void fold(NodeId g, NodeId dag_node, std::string prefix) {
    alias(g, dag_node);
    lowered_.folded_scopes[dag_node].push_back({std::move(prefix), graph_.dag()[g].name});
  }

  /// Whether an op may be folded into `dag_node` so that it computes something else: true when
  /// no graph value it holds is read elsewhere, i.e. every graph node it computes ends there, is
  /// used by exactly one graph node and is not a graph output. (A Dropout's DAG node is its
  /// input's: fusing into it would change what the input's other users read.)
  bool foldable(NodeId dag_node) const {
    for (NodeId g = 0; g < lowered_.graph_to_dag.size(); ++g) {
      const auto& made = lowered_.graph_to_dag[g];
      if (std::find(made.begin(), made.end(), dag_node) == made.end()) continue;
      if (made.back() != dag_node || graph_.dag().uses(g).size() != 1) return false;
      for (const auto& output : graph_.outputs()) {
        if (output.node == g) return false;
      }
    }
    return true;
  }

  bool lowered(NodeId g) const { return !lowered_.graph_to_dag[g].empty(); }
  Lowered<Ops> finish() && { return std::move(lowered_); }

 private:
  const Graph& graph_;
  LoweringMode mode_;
  Lowered<Ops> lowered_;
};

/// A whole-graph lowering into the op set `L::op_set`.
template <class L>
concept Lowering = OpSetType<typename L::op_set> && requires(const L& lowering, const Graph& graph, LoweringMode mode) {
  { lowering.lower(graph, mode) } -> std::same_as<Result<Lowered<typename L::op_set>>>;
};

/// A per-node lowering: emits the DAG nodes for one graph node and returns true, or returns
/// false when the node's op is not its business (a middleware then asks its base).
template <class L>
concept NodeLowering = OpSetType<typename L::op_set> &&
                       requires(const L& lowering, LoweringContext<typename L::op_set>& context, NodeId node) {
                         { lowering.lower_node(context, node) } -> std::same_as<Result<bool>>;
                       };

namespace lowering_detail {
template <class L>
concept HasBase = requires(const L& lowering) { lowering.base_lowering(); };

struct base_lowering_fn {
  // Default: no base (the end of a middleware chain), as in the seed.
  template <class L>
  constexpr auto operator()(const L& lowering) const {
    if constexpr (HasBase<L>) {
      return lowering.base_lowering();
    } else {
      return nullptr;
    }
  }
};
}  // namespace lowering_detail

/// The next lowering of a middleware chain (a pointer), or nullptr at its end.
inline constexpr lowering_detail::base_lowering_fn base_lowering{};

/// Lowers every graph node in topological order with `lowering`. A node nobody handles is an
/// error naming the node, its op and the mode.
template <NodeLowering L>
Result<Lowered<typename L::op_set>> lower_graph(const L& lowering, const Graph& graph, LoweringMode mode) {
  using Ops = typename L::op_set;
  auto order = graph.dag().topological_order();
  if (!order) return std::move(order).error();
  LoweringContext<Ops> context(graph, mode);
  for (NodeId g : *order) {
    if (context.lowered(g)) continue;  // already computed by a fused DAG node
    const auto& node = graph.dag()[g];
    auto handled = lowering.lower_node(context, g);
    if (!handled) return std::move(handled).error().context(cat("node '", node.name, "' (", kind(node.op.op), ")"));
    if (!*handled) {
      return fail(Errc::unsupported, "node '", node.name, "' (", kind(node.op.op), "): op '", kind(node.op.op),
                  "' is not supported by this lowering (", name(mode), " mode)");
    }
    if (!context.lowered(g)) {
      return fail(Errc::internal, "node '", node.name, "' (", kind(node.op.op),
                  "): the lowering reported it handled but emitted no DAG node for it");
    }
  }
  return std::move(context).finish();
}

}  // namespace teeny
