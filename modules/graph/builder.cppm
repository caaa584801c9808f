// teeny.graph:builder — GraphBuilder, the way to author a run-time graph: one method per op with
// PyTorch's argument names and defaults, sizes read off the inputs where PyTorch's modules take
// them as constructor arguments (Linear's in_features), nodes named like PyTorch module paths.
// This partition declares it and keeps its books (names, failures, build()); the methods that add
// one op each are defined in :builder_ops.
//
//   GraphBuilder b;
//   Value x = b.input("x", DType::f32, {Dim::sym("batch"), 784});
//   Value h = b.relu(b.linear(x, 512).named("fc1"));
//   b.output("logits", b.linear(h, 10).named("fc2"));
//   Result<Graph> g = std::move(b).build();   // parameters fc1.weight, fc1.bias, fc2.weight, ...
//
// Errors are sticky: a failing call (bad shape or attribute, wrong arity, duplicate name, a Value
// not from this builder) records an error naming the node and returns an invalid Value; calls on
// an invalid Value are skipped silently (the recorded error is the cause), and build() returns
// every recorded error at once, one per line, as "node 'fc2' (linear): input f32[batch, 784] ...".
// Unnamed nodes are called `{op}_{n}` ("relu_0", "add_1"), counting per op name from 0.
export module teeny.graph:builder;
import teeny.std;
import teeny.core;
import :tensor_type;
import :custom_op;
import :op;
import :graph;

export namespace teeny {

class GraphBuilder;

/// A handle to a node being built: the result of a GraphBuilder call, passed to the next ones.
/// Invalid when the call that made it failed (or was skipped). Usable while its builder lives and
/// until build(); the id stays meaningful in the built Graph.
class Value {
 public:
  static constexpr NodeId none = std::numeric_limits<NodeId>::max();

  Value() = default;
  bool valid() const { return builder_ != nullptr && node_ != none; }
  /// The node id (the same in the built Graph); `none` when invalid.
  NodeId id() const { return node_; }
  /// Renames the node (e.g. to a PyTorch module path "layer1.0.conv1", so that state_dict keys
  /// "layer1.0.conv1.weight" map onto it); a name in use is an error. Returns *this.
  Value named(std::string name) const;
  /// The node's current name; empty when invalid.
  std::string_view name() const;
  /// The node's output type; nullptr when invalid. Valid until the builder adds another node.
  const TensorType* type() const;

  friend bool operator==(const Value&, const Value&) = default;

 private:
  friend class GraphBuilder;
  Value(GraphBuilder* builder, NodeId node, std::size_t failure) : builder_(builder), node_(node), failure_(failure) {}

  GraphBuilder* builder_ = nullptr;
  NodeId node_ = none;
  std::size_t failure_ = none;  // the recorded error of the call that made this Value, if that call failed
};

// `{}` on members keeps designated initialisers that omit them warning-free (see :concepts).
// NOLINTBEGIN(readability-redundant-member-init)
// Options with PyTorch's defaults, for designated initialisers: b.conv2d(x, 64, 3, {.padding = 1}).

struct Conv1dOptions {
  std::int64_t stride = 1;
  std::int64_t padding = 0;
  std::int64_t dilation = 1;
  std::int64_t groups = 1;
  bool bias = true;
};

struct Conv2dOptions {
  Size2 stride{1, 1};
  Size2 padding{0, 0};
  Size2 dilation{1, 1};
  std::int64_t groups = 1;
  bool bias = true;
};

/// MaxPool2d's options; stride none means the kernel size.
struct Pool2dOptions {
  std::optional<Size2> stride{};
  Size2 padding{0, 0};
  Size2 dilation{1, 1};
  bool ceil_mode = false;
};

struct AvgPool2dOptions {
  std::optional<Size2> stride{};
  Size2 padding{0, 0};
  bool ceil_mode = false;
  bool count_include_pad = true;
  std::optional<std::int64_t> divisor_override{};
};

struct BatchNormOptions {
  double eps = 1e-5;
  std::optional<double> momentum = 0.1;
  bool affine = true;
  bool track_running_stats = true;
};

struct LayerNormOptions {
  double eps = 1e-5;
  bool elementwise_affine = true;
  bool bias = true;
};

struct RMSNormOptions {
  std::optional<double> eps{};  // none: the dtype's epsilon
  bool elementwise_affine = true;
};

struct GroupNormOptions {
  double eps = 1e-5;
  bool affine = true;
};

struct EmbeddingOptions {
  std::optional<std::int64_t> padding_idx{};
  DType dtype = DType::f32;
};

struct AttentionOptions {
  bool causal = false;
  std::optional<double> scale{};  // none: 1/sqrt(E)
};

// NOLINTEND(readability-redundant-member-init)

/// Builds a Graph op by op; see the top of this file. Not copyable or movable: Values point to it.
class GraphBuilder {
 public:
  GraphBuilder() = default;
  GraphBuilder(const GraphBuilder&) = delete;
  GraphBuilder& operator=(const GraphBuilder&) = delete;

  // ---- graph interface
  /// A graph input; `name` is what forward() binds it by.
  Value input(std::string name, DType dtype, Shape shape);
  /// Marks `value` as the output called `name` (at least one is required; names are unique).
  void output(std::string name, Value value);
  /// Marks the node called `node` as the output `name`.
  void output(std::string name, std::string_view node);
  /// Adds any op with these inputs (in operand order); an empty name gets the default `{op}_{n}`.
  Value add(GraphOp op, std::vector<Value> inputs, std::string name = {});
  /// The same for one op type: one of teeny's, or one defined outside teeny (held in a CustomOp),
  /// which must be a GraphOpType: check_graph_op says, at compile time, what it misses.
  template <class Op>
    requires(!std::same_as<Op, GraphOp> && !std::same_as<Op, Value>)
  Value add(Op op, std::vector<Value> inputs, std::string name = {}) {
    if constexpr (graph_detail::is_alternative<Op, GraphOp>) {
      return add(GraphOp(std::move(op)), std::move(inputs), std::move(name));
    } else if constexpr (check_graph_op<Op>()) {
      return add(GraphOp(CustomOp(std::move(op))), std::move(inputs), std::move(name));
    } else {
      return {};
    }
  }

  // ---- layers (sizes of the input read off the input, as PyTorch's lazy modules do)
  Value linear(Value x, std::int64_t out_features, bool bias = true);
  Value matmul(Value a, Value b);
  Value conv1d(Value x, std::int64_t out_channels, std::int64_t kernel, Conv1dOptions options = {});
  Value conv2d(Value x, std::int64_t out_channels, Size2 kernel, Conv2dOptions options = {});
  Value max_pool2d(Value x, Size2 kernel, Pool2dOptions options = {});
  Value avg_pool2d(Value x, Size2 kernel, AvgPool2dOptions options = {});
  Value adaptive_avg_pool2d(Value x, Size2 output_size);
  Value batch_norm1d(Value x, BatchNormOptions options = {});
  Value batch_norm2d(Value x, BatchNormOptions options = {});
  Value layer_norm(Value x, std::vector<std::int64_t> normalized_shape, LayerNormOptions options = {});
  Value rms_norm(Value x, std::vector<std::int64_t> normalized_shape, RMSNormOptions options = {});
  Value group_norm(Value x, std::int64_t num_groups, GroupNormOptions options = {});
  Value embedding(Value indices, std::int64_t num_embeddings, std::int64_t embedding_dim,
                  EmbeddingOptions options = {});
  Value dropout(Value x, double p = 0.5);
  /// F.scaled_dot_product_attention(q, k, v).
  Value attention(Value q, Value k, Value v, AttentionOptions options = {});

  // ---- activations
  Value relu(Value x);
  Value leaky_relu(Value x, double negative_slope = 0.01);
  Value threshold(Value x, double threshold, double value);
  Value hardshrink(Value x, double lambd = 0.5);
  Value softshrink(Value x, double lambd = 0.5);
  Value gelu(Value x, GeluApproximate approximate = GeluApproximate::none);
  Value silu(Value x);
  Value sigmoid(Value x);
  Value tanh(Value x);
  Value softplus(Value x, double beta = 1, double threshold = 20);
  Value elu(Value x, double alpha = 1);
  Value hardswish(Value x);
  Value hardsigmoid(Value x);
  Value softmax(Value x, std::int64_t axis = -1);
  Value log_softmax(Value x, std::int64_t axis = -1);

  // ---- arithmetic (broadcasting) and math
  Value add(Value a, Value b);
  Value sub(Value a, Value b);
  Value mul(Value a, Value b);
  Value div(Value a, Value b);
  Value pow(Value a, Value b);
  Value maximum(Value a, Value b);
  Value minimum(Value a, Value b);
  /// torch.fmod: a - trunc(a / b) * b, the sign of a.
  Value fmod(Value a, Value b);
  /// torch.eq, ne, lt, le, gt, ge (bool results, broadcasting).
  Value compare(Value a, CompareOp op, Value b);
  /// torch.where(condition, x, y).
  Value where(Value condition, Value x, Value y);
  Value exp(Value x);
  Value log(Value x);
  Value sqrt(Value x);
  Value abs(Value x);
  Value neg(Value x);
  Value reciprocal(Value x);

  // ---- reductions over `axes` (empty: all)
  Value sum(Value x, std::vector<std::int64_t> axes = {}, bool keepdim = false);
  Value mean(Value x, std::vector<std::int64_t> axes = {}, bool keepdim = false);
  /// torch.amax (the values only).
  Value max(Value x, std::vector<std::int64_t> axes = {}, bool keepdim = false);
  /// torch.prod.
  Value prod(Value x, std::vector<std::int64_t> axes = {}, bool keepdim = false);
  /// torch.argmax / torch.argmin along `axis` (i64 indices; ties: the first, or the last with
  /// select_last_index).
  Value argmax(Value x, std::int64_t axis, bool keepdim = false, bool select_last_index = false);
  Value argmin(Value x, std::int64_t axis, bool keepdim = false, bool select_last_index = false);
  /// torch.cumsum along `axis`; `exclusive` and `reverse` as ONNX's CumSum.
  Value cumsum(Value x, std::int64_t axis, bool exclusive = false, bool reverse = false);
  /// ONNX's Hardmax: the one-hot of each line's first maximum along `axis`.
  Value hardmax(Value x, std::int64_t axis = -1);

  // ---- losses
  /// F.nll_loss(input [N, C, d...], target [N, d...], weight [C], reduction, ignore_index (none:
  /// every target counts)). (teeny.train's nll_loss is the training loop's loss, outside the graph.)
  Value nll_loss(Value input, Value target, std::optional<Value> weight = std::nullopt,
                 LossReduction reduction = LossReduction::mean, std::optional<std::int64_t> ignore_index = -100);

  // ---- shape ops
  Value flatten(Value x, std::int64_t start_dim = 1, std::int64_t end_dim = -1);
  Value reshape(Value x, std::vector<Dim> shape);
  Value transpose(Value x, std::int64_t dim0, std::int64_t dim1);
  Value permute(Value x, std::vector<std::int64_t> dims);
  /// torch.cat.
  Value concat(std::vector<Value> xs, std::int64_t axis = 0);
  /// torch.split(x, sizes, axis): one Value per piece.
  std::vector<Value> split(Value x, const std::vector<std::int64_t>& sizes, std::int64_t axis = 0);
  /// torch.chunk: pieces of ceil(size / chunks), the last smaller; there may be fewer than
  /// `chunks` (chunk of 5 into 4 gives sizes 2, 2, 1). On failure, `chunks` invalid Values. More
  /// than max_chunks is an error (each piece is a node), with max_chunks invalid Values.
  std::vector<Value> chunk(Value x, std::int64_t chunks, std::int64_t axis = 0);
  static constexpr std::int64_t max_chunks = std::int64_t{1} << 16;
  /// x[start:end:step] along `axis`.
  Value slice(Value x, std::int64_t axis, std::optional<std::int64_t> start = std::nullopt,
              std::optional<std::int64_t> end = std::nullopt, std::int64_t step = 1);
  /// F.pad; `pads` from the last dim: {left, right, top, bottom, ...}.
  Value pad(Value x, std::vector<std::int64_t> pads, PadMode mode = PadMode::constant, double value = 0);
  /// Nearest-neighbour upsampling of [N, C, H, W].
  Value upsample(Value x, double scale);
  Value upsample(Value x, double scale_h, double scale_w);
  Value cast(Value x, DType dtype);
  /// Weights used as a value (Weight): its parameter "value" [value_shape] broadcast to `shape`
  /// (empty: value_shape), e.g. a class token expanded to a symbolic batch.
  Value weight(DType dtype, std::vector<std::int64_t> value_shape, std::vector<Dim> shape = {}, bool trainable = true);

  // ---- state
  /// Whether nothing has failed so far.
  bool ok() const { return failures_.empty(); }
  /// The type of `v`'s node; nullptr when `v` is invalid or not from this builder. Valid until the
  /// next node is added (the nodes may move): copy what is needed across an add.
  const TensorType* type_of(Value v) const;
  /// The graph, or every recorded error in one Error (messages one per line, the first's code).
  Result<Graph> build() &&;

 private:
  friend class Value;

  // Adds one of teeny's own graph ops: every builder method goes through here, so an op struct left
  // out of GraphOp is a compile error naming it, not a CustomOp that no lowering knows.
  template <class Op>
  Value add_standard(Op op, std::vector<Value> inputs, std::string name = {}) {
    static_assert(graph_detail::is_alternative<Op, GraphOp>,
                  "a graph op of teeny's must be an alternative of GraphOp (modules/graph/op.cppm): add it on "
                  "its family's line, before CustomOp");
    return add(GraphOp(std::move(op)), std::move(inputs), std::move(name));
  }

  struct PendingNode {
    GraphOp op;
    TensorType type;
    std::vector<NodeId> inputs;
    std::string name;
  };
  // A recorded error; "node '<node>' (<op>): " is prepended at build(), so that a failed Value
  // renamed afterwards (b.linear(x, 10).named("fc2")) reports under its final name.
  struct Failure {
    Error error;
    std::string node;  // empty: the message carries its own context
    std::string op;
    bool renamable = true;
  };

  // Whether `v` was made by this builder (and not before build() emptied it).
  bool owns(const Value& v) const { return v.builder_ == this && (v.node_ == Value::none || v.node_ < nodes_.size()); }
  std::string default_name(std::string_view op);
  Value record(Error error, std::string node, std::string_view op, bool renamable = true);
  void record(Error error);
  std::optional<Value> unusable(std::span<const Value> inputs, std::string_view op, std::string name);
  std::optional<Value> read_dim(Value x, std::int64_t axis, std::string_view op, std::string_view attribute,
                                std::int64_t& size);
  void rename(const Value& v, std::string name);
  void add_output(std::string name, NodeId node);

  std::vector<PendingNode> nodes_;
  std::map<std::string, NodeId, std::less<>> names_;
  std::map<std::string, std::size_t, std::less<>> counters_;
  std::vector<NamedOutput> outputs_;
  std::size_t output_calls_ = 0;
  std::vector<Failure> failures_;
};

}  // namespace teeny

namespace teeny {

// ---- Value

Value Value::named(std::string name) const {
  if (builder_ != nullptr) builder_->rename(*this, std::move(name));
  return *this;
}

std::string_view Value::name() const {
  return builder_ != nullptr && builder_->type_of(*this) != nullptr ? std::string_view(builder_->nodes_[node_].name)
                                                                    : "";
}

const TensorType* Value::type() const { return builder_ != nullptr ? builder_->type_of(*this) : nullptr; }

// ---- bookkeeping

std::string GraphBuilder::default_name(std::string_view op) {
  auto it = counters_.find(op);
  if (it == counters_.end()) it = counters_.emplace(std::string(op), 0).first;
  for (;;) {
    std::string candidate = cat(op, "_", it->second++);
    if (!names_.contains(candidate)) return candidate;
  }
}

Value GraphBuilder::record(Error error, std::string node, std::string_view op, bool renamable) {
  failures_.push_back({std::move(error), std::move(node), std::string(op), renamable});
  return Value(this, Value::none, failures_.size() - 1);
}

void GraphBuilder::record(Error error) { failures_.push_back({std::move(error), {}, {}, false}); }

// An invalid Value when the inputs cannot be used: silently when one failed before (that failure
// is the cause), with a recorded error when one is not from this builder.
std::optional<Value> GraphBuilder::unusable(std::span<const Value> inputs, std::string_view op, std::string name) {
  for (const Value& v : inputs) {
    if (v.builder_ == this && v.node_ == Value::none) return Value(this, Value::none, Value::none);
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!owns(inputs[i])) {
      if (name.empty()) name = default_name(op);
      return record(fail(Errc::invalid_argument, "input ", i,
                         " is not a value of this builder (default-constructed, or from another GraphBuilder)"),
                    std::move(name), op);
    }
  }
  return std::nullopt;
}

// For an attribute read off the input (Linear's in_features): sets `size` to dim `axis` (negative:
// from the end) of x when x has that dim and it is concrete. When x is unusable or lacks the dim,
// `size` stays as it is and the op's own checks report the problem; a symbolic dim is an error.
std::optional<Value> GraphBuilder::read_dim(Value x, std::int64_t axis, std::string_view op, std::string_view attribute,
                                            std::int64_t& size) {
  const TensorType* t = type_of(x);
  if (t == nullptr) return std::nullopt;
  const auto rank = static_cast<std::int64_t>(t->shape.rank());
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return std::nullopt;
  const Dim& d = t->shape[static_cast<std::size_t>(axis)];
  if (d.is_concrete()) {
    size = d.value;
    return std::nullopt;
  }
  return record(fail(Errc::shape_mismatch, op, " reads ", attribute, " from dim ", axis, " of its input ", *t,
                     ", which is symbolic ('", to_string(d), "')"),
                default_name(op), op);
}

void GraphBuilder::rename(const Value& v, std::string name) {
  if (!owns(v)) return;
  if (v.node_ == Value::none) {
    if (v.failure_ != Value::none && failures_[v.failure_].renamable) failures_[v.failure_].node = std::move(name);
    return;
  }
  PendingNode& node = nodes_[v.node_];
  if (name == node.name) return;
  const std::string_view op = kind(node.op);
  if (name.empty()) {
    record(fail(Errc::invalid_argument, "cannot rename to an empty name"), node.name, op, false);
    return;
  }
  if (auto it = names_.find(name); it != names_.end()) {
    record(fail(Errc::duplicate, "cannot rename to '", name, "': the name is already used by node #", it->second, " (",
                kind(nodes_[it->second].op), ")"),
           node.name, op, false);
    return;
  }
  names_.erase(node.name);
  names_.emplace(name, v.node_);
  node.name = std::move(name);
}

const TensorType* GraphBuilder::type_of(Value v) const {
  if (!owns(v) || v.node_ == Value::none) return nullptr;
  return &nodes_[v.node_].type;
}

// ---- graph interface

Value GraphBuilder::add(GraphOp op, std::vector<Value> inputs, std::string name) {
  const std::string_view label = kind(op);
  if (auto bad = unusable(inputs, label, name)) return *bad;
  if (name.empty()) {
    name = default_name(label);
  } else if (auto it = names_.find(name); it != names_.end()) {
    Error used = fail(Errc::duplicate, "name '", name, "' is already used by node #", it->second, " (",
                      kind(nodes_[it->second].op), ")");
    return record(std::move(used), std::move(name), label, false);
  }
  std::vector<TensorType> types;
  std::vector<NodeId> ids;
  for (const Value& v : inputs) {
    types.push_back(nodes_[v.node_].type);
    ids.push_back(v.node_);
  }
  auto type = infer(op, types);
  if (!type) return record(std::move(type).error(), std::move(name), label);
  const NodeId id = nodes_.size();
  names_.emplace(name, id);
  nodes_.push_back({std::move(op), std::move(*type), std::move(ids), std::move(name)});
  return Value(this, id, Value::none);
}

Value GraphBuilder::input(std::string name, DType dtype, Shape shape) {
  if (name.empty()) {
    return record(fail(Errc::invalid_argument, "a graph input needs a name"), default_name("input"), "input", false);
  }
  return add_standard(Input{{dtype, std::move(shape)}}, {}, std::move(name));
}

void GraphBuilder::output(std::string name, Value value) {
  ++output_calls_;
  if (value.builder_ == this && value.node_ == Value::none) return;  // its failure is the cause
  if (!owns(value)) {
    record(fail(Errc::invalid_argument, "output '", name,
                "': the value is not from this builder (default-constructed, or from another GraphBuilder)"));
    return;
  }
  add_output(std::move(name), value.node_);
}

void GraphBuilder::output(std::string name, std::string_view node) {
  ++output_calls_;
  auto it = names_.find(node);
  if (it == names_.end()) {
    record(fail(Errc::not_found, "output '", name, "': there is no node named '", node, "'"));
    return;
  }
  add_output(std::move(name), it->second);
}

void GraphBuilder::add_output(std::string name, NodeId node) {
  if (name.empty()) {
    record(fail(Errc::invalid_argument, "an output needs a name (node '", nodes_[node].name, "')"));
    return;
  }
  for (const NamedOutput& o : outputs_) {
    if (o.name == name) {
      record(fail(Errc::duplicate, "output '", name, "' is declared twice (nodes '", nodes_[o.node].name, "' and '",
                  nodes_[node].name, "')"));
      return;
    }
  }
  outputs_.push_back({std::move(name), node});
}

Result<Graph> GraphBuilder::build() && {
  if (output_calls_ == 0) {
    record(fail(Errc::invalid_argument, "a graph needs at least one output: call output(name, value)"));
  }
  if (!failures_.empty()) {
    std::string message;
    for (const Failure& f : failures_) {
      if (!message.empty()) message += '\n';
      if (!f.node.empty()) message += cat("node '", f.node, "' (", f.op, "): ");
      message += f.error.message();
    }
    return Error(failures_.front().error.code(), std::move(message));
  }
  Dag<GraphNode> dag;
  for (PendingNode& n : nodes_) {
    auto id = dag.add(GraphNode{std::move(n.op), std::move(n.type)}, std::move(n.inputs), std::move(n.name));
    if (!id) return fail(Errc::internal, "GraphBuilder produced an invalid DAG: ", id.error().message());
  }
  nodes_.clear();
  names_.clear();
  return Graph::from(std::move(dag), std::move(outputs_));
}

}  // namespace teeny
