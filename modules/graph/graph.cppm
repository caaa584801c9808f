// teeny.graph:graph — a validated run-time graph: a Dag of (op, output type) nodes named like
// PyTorch modules, its inputs in declaration order, its named outputs, and the parameters its ops
// own (keys `{node}.{slot}`, PyTorch state_dict keys).
//
//   Graph g = *std::move(builder).build();
//   g.find("fc1");                       // std::optional<NodeId>
//   g.type(*g.find("fc1"));              // f32[batch, 512]
//   g.parameters()[0].key == "fc1.weight";  g.parameter_count() == 669706;
//   std::puts(g.summary().c_str());      // one line per node, then totals
module;
#include <cstdint>
export module teeny.graph:graph;
import teeny.std;
import teeny.core;
import :tensor_type;
import :op;

export namespace teeny {

/// What a graph's Dag holds per node: the op and the type of its output.
struct GraphNode {
  GraphOp op;
  TensorType type;
  friend bool operator==(const GraphNode&, const GraphNode&) = default;
};

/// A graph output: the name forward() returns it under, and the node producing it.
struct NamedOutput {
  std::string name;
  NodeId node = 0;
  friend bool operator==(const NamedOutput&, const NamedOutput&) = default;
};

/// One parameter or buffer of a graph.
struct ParamInfo {
  std::string key;  // "{node}.{slot}": "fc1.weight"
  NodeId node = 0;
  std::string slot;
  Shape shape;
  DType dtype = DType::f32;
  bool trainable = true;
  friend bool operator==(const ParamInfo&, const ParamInfo&) = default;
};

/// A run-time graph whose every node type agrees with its op and inputs (see from()).
class Graph {
 public:
  using Node = Dag<GraphNode>::Node;

  /// Validates and wraps a Dag: every node's type must be what its op infers from its inputs, the
  /// Dag acyclic, and the outputs at least one, uniquely named, naming existing nodes. The
  /// graph inputs are the Input nodes in node order. GraphBuilder::build() ends here.
  static Result<Graph> from(Dag<GraphNode> dag, std::vector<NamedOutput> outputs);

  const Dag<GraphNode>& dag() const { return dag_; }
  std::size_t size() const { return dag_.size(); }
  /// The Dag node: `.op.op` the op, `.op.type` its output type, `.inputs`, `.name`.
  const Node& node(NodeId id) const { return dag_[id]; }
  const GraphOp& op(NodeId id) const { return dag_[id].op.op; }
  const TensorType& type(NodeId id) const { return dag_[id].op.type; }
  const std::string& name(NodeId id) const { return dag_[id].name; }
  /// The nodes feeding `id`, in operand-slot order.
  std::span<const NodeId> operands(NodeId id) const { return dag_[id].inputs; }
  /// The types of those nodes (what the op's infer and params see).
  std::vector<TensorType> operand_types(NodeId id) const;
  std::optional<NodeId> find(std::string_view name) const { return dag_.find(name); }

  /// The Input nodes, in declaration order.
  std::span<const NodeId> inputs() const { return inputs_; }
  std::span<const NamedOutput> outputs() const { return outputs_; }
  /// The node producing the output called `name`.
  std::optional<NodeId> output(std::string_view name) const;

  /// Every parameter and buffer, in node order and per node in state_dict order.
  std::vector<ParamInfo> parameters() const;
  /// Elements of the trainable parameters (PyTorch's sum(p.numel() for p in model.parameters())).
  std::int64_t parameter_count() const;
  /// Elements of the non-trainable buffers (running statistics, ...).
  std::int64_t buffer_count() const;

  /// A table with one line per node (name, op with attributes, inputs, output type, params),
  /// then the outputs and the totals.
  std::string summary() const;

 private:
  Graph(Dag<GraphNode> dag, std::vector<NodeId> inputs, std::vector<NamedOutput> outputs)
      : dag_(std::move(dag)), inputs_(std::move(inputs)), outputs_(std::move(outputs)) {}

  Dag<GraphNode> dag_;
  std::vector<NodeId> inputs_;
  std::vector<NamedOutput> outputs_;
};

}  // namespace teeny

namespace teeny {

Result<Graph> Graph::from(Dag<GraphNode> dag, std::vector<NamedOutput> outputs) {
  auto order = dag.topological_order();
  if (!order) return std::move(order).error();
  std::vector<NodeId> inputs;
  for (NodeId id = 0; id < dag.size(); ++id) {
    const Node& n = dag[id];
    std::vector<TensorType> in;
    in.reserve(n.inputs.size());
    for (NodeId p : n.inputs) in.push_back(dag[p].op.type);
    auto type = infer(n.op.op, in);
    const std::string where = cat("node '", n.name, "' (", kind(n.op.op), ")");
    if (!type) return std::move(type).error().context(where);
    if (*type != n.op.type) {
      return fail(Errc::internal, where, ": its type is ", n.op.type, " but its op infers ", *type);
    }
    if (is<Input>(n.op.op)) inputs.push_back(id);
  }
  if (outputs.empty()) return fail(Errc::invalid_argument, "a graph needs at least one output");
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].node >= dag.size()) {
      return fail(Errc::out_of_range, "output '", outputs[i].name, "' refers to node #", outputs[i].node, ", but only ",
                  dag.size(), " nodes exist");
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (outputs[j].name == outputs[i].name) {
        return fail(Errc::duplicate, "output '", outputs[i].name, "' is declared twice");
      }
    }
  }
  return Graph(std::move(dag), std::move(inputs), std::move(outputs));
}

std::vector<TensorType> Graph::operand_types(NodeId id) const {
  std::vector<TensorType> out;
  out.reserve(dag_[id].inputs.size());
  for (NodeId p : dag_[id].inputs) out.push_back(dag_[p].op.type);
  return out;
}

std::optional<NodeId> Graph::output(std::string_view name) const {
  for (const NamedOutput& o : outputs_) {
    if (o.name == name) return o.node;
  }
  return std::nullopt;
}

std::vector<ParamInfo> Graph::parameters() const {
  std::vector<ParamInfo> out;
  for (NodeId id = 0; id < dag_.size(); ++id) {
    for (ParamSpec& p : params_of(op(id), operand_types(id))) {
      out.push_back({name(id) + "." + p.slot, id, p.slot, std::move(p.shape), p.dtype, p.trainable});
    }
  }
  return out;
}

namespace {
// Each parameter has at most 2^56 elements (infer checks), but a graph may have many: the sum
// saturates rather than wrap around.
std::int64_t count_elements(const std::vector<ParamInfo>& params, bool trainable) {
  std::int64_t n = 0;
  for (const ParamInfo& p : params) {
    if (p.trainable == trainable) n = checked_add(n, p.shape.numel().value_or(0)).value_or(INT64_MAX);
  }
  return n;
}
}  // namespace

std::int64_t Graph::parameter_count() const { return count_elements(parameters(), true); }

std::int64_t Graph::buffer_count() const { return count_elements(parameters(), false); }

std::string Graph::summary() const {
  using Row = std::array<std::string, 5>;
  std::vector<Row> rows{{"node", "op", "inputs", "output", "params"}};
  for (NodeId id = 0; id < dag_.size(); ++id) {
    std::string in;
    for (NodeId p : operands(id)) in += (in.empty() ? "" : ", ") + name(p);
    std::string params;
    for (const ParamSpec& p : params_of(op(id), operand_types(id))) {
      params +=
          cat(params.empty() ? "" : ", ", p.slot, " ", TensorType{p.dtype, p.shape}, p.trainable ? "" : " (buffer)");
    }
    rows.push_back({name(id), describe(op(id)), std::move(in), to_string(type(id)), std::move(params)});
  }
  std::array<std::size_t, 5> width{};
  for (const Row& r : rows) {
    for (std::size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  }
  std::string out;
  for (const Row& r : rows) {
    std::string line;
    for (std::size_t c = 0; c < r.size(); ++c) {
      line += r[c];
      if (c + 1 < r.size()) line.append(width[c] - r[c].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  for (const NamedOutput& o : outputs_) out += cat("output '", o.name, "' = ", name(o.node), " ", type(o.node), "\n");
  out += cat(dag_.size(), " nodes, ", parameter_count(), " trainable parameters");
  if (const std::int64_t buffers = buffer_count(); buffers > 0) out += cat(", ", buffers, " buffer elements");
  return out + "\n";
}

}  // namespace teeny
