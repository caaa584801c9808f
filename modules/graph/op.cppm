// teeny.graph:op — GraphOp, the single list of graph ops, and the operations every graph op
// supports, dispatched with std::visit (a new alternative that misses a requirement of
// GraphOpType fails the static_assert below, naming it).
//
//   GraphOp op = Linear{.in_features = 784, .out_features = 512};
//   kind(op) == "linear";  arity(op).max == 1;
//   describe(op) == "linear(in_features=784, out_features=512, bias=true)";
//   kind(GraphOp{Binary{BinaryOp::add}}) == "add";  describe(...) == "add()"   // Binary::kind is "binary"
//   infer(op, input_types)  -> Result<TensorType>            // checks the arity first
export module teeny.graph:op;
import teeny.std;
import teeny.core;
import :tensor_type;
import :concepts;
import :ops_linear;
import :ops_elementwise;
import :ops_shape;
import :ops_conv;
import :ops_pool;
import :ops_norm;
import :ops_reduce;
import :ops_sequence;
import :custom_op;
import :rules;

export namespace teeny {

/// Every op a run-time graph can hold. Adding an op: define it in its family's partition
/// (graph/ops_<family>.cppm) with a static_assert(GraphOpType<...>) after it, list it here, and give
/// GraphBuilder a method for it (docs/adding-an-op.md). An op defined outside teeny needs none of
/// that: GraphBuilder::add holds it in a CustomOp (docs/custom-ops.md).
using GraphOp = std::variant<
    // Each line ends with the family of its ops: the partition graph/ops_<family>.cppm defines
    // them. New alternatives go before CustomOp, which stays last.
    Input, Weight, Cast, Flatten, Reshape, Transpose, Permute, Concat, Split, Slice, Pad, Upsample,  // shape
    Linear, MatMul,                                                                                  // linear
    Conv1d, Conv2d,                                                                                  // conv
    MaxPool2d, AvgPool2d, AdaptiveAvgPool2d,                                                         // pool
    BatchNorm, LayerNorm, RMSNorm, GroupNorm,                                                        // norm
    Embedding,                                                                                       // sequence
    Dropout,                                                                                         // elementwise
    Attention,                                                                                       // sequence
    ReLU, LeakyReLU, GELU, SiLU, Sigmoid, Tanh, Softplus, ELU, Hardswish, Hardsigmoid,               // elementwise
    Threshold, Hardshrink, Softshrink,                                                               // elementwise
    Softmax, LogSoftmax,                                                                             // reduce
    Binary, Unary, Compare, Where,                                                                   // elementwise
    Reduce, ArgReduce, CumSum, Hardmax, NllLoss,                                                     // reduce
    CustomOp>;  // any op defined outside teeny (graph/custom_op.cppm)

namespace graph_detail {
template <class Variant>
inline constexpr bool all_graph_ops = false;
template <class... Ops>
inline constexpr bool all_graph_ops<std::variant<Ops...>> = (GraphOpType<Ops> && ...);
}  // namespace graph_detail
static_assert(graph_detail::all_graph_ops<GraphOp>, "every alternative of GraphOp must satisfy GraphOpType");

/// The op's name as users see it, also the stem of default node names: "linear", "add" (for
/// Binary{BinaryOp::add}), "batch_norm2d". The op type's own name is `T::kind`.
std::string_view kind(const GraphOp& op);
/// How many inputs the op takes.
Arity arity(const GraphOp& op);
/// "key=value, ..." (empty for ops without attributes).
std::string attributes(const GraphOp& op);
/// "linear(in_features=784, out_features=512, bias=true)".
std::string describe(const GraphOp& op);
/// The output type for these input types; an arity mismatch is an error too.
Result<TensorType> infer(const GraphOp& op, std::span<const TensorType> inputs);
/// The parameters and buffers the op owns for these input types, in state_dict order.
std::vector<ParamSpec> params_of(const GraphOp& op, std::span<const TensorType> inputs);

namespace graph_detail {
template <class Op, class Variant>
inline constexpr bool is_alternative = false;
template <class Op, class... Ops>
inline constexpr bool is_alternative<Op, std::variant<Ops...>> = (std::same_as<Op, Ops> || ...);
}  // namespace graph_detail

/// The `Op` that `op` holds, or nullptr: one of teeny's ops (op_if<Linear>(op)) or a user's op
/// held by CustomOp (op_if<SwiGLU>(op)).
template <class Op>
const Op* op_if(const GraphOp& op) {
  if constexpr (graph_detail::is_alternative<Op, GraphOp>) {
    return std::get_if<Op>(&op);
  } else {
    const auto* custom = std::get_if<CustomOp>(&op);
    return custom != nullptr ? custom->get_if<Op>() : nullptr;
  }
}

/// Whether `op` holds an `Op` (is<Input>(op), is<SwiGLU>(op)).
template <class Op>
bool is(const GraphOp& op) {
  return op_if<Op>(op) != nullptr;
}

}  // namespace teeny

namespace teeny {

std::string_view kind(const GraphOp& op) {
  return std::visit([](const auto& o) { return kind(o); }, op);
}

Arity arity(const GraphOp& op) {
  return std::visit(
      []<class Op>(const Op& o) {
        if constexpr (std::same_as<Op, CustomOp>) {
          return o.input_arity();  // the held op's, not CustomOp's sentinel
        } else {
          return Op::arity;
        }
      },
      op);
}

std::string attributes(const GraphOp& op) {
  return std::visit([](const auto& o) { return std::string(o.attributes()); }, op);
}

std::string describe(const GraphOp& op) { return std::string(kind(op)) + "(" + attributes(op) + ")"; }

Result<TensorType> infer(const GraphOp& op, std::span<const TensorType> inputs) {
  const Arity a = arity(op);
  if (!a.accepts(inputs.size())) {
    return fail(Errc::invalid_argument, "expects ", to_string(a),
                a.min == 1 && (a.max == 1 || a.max == Arity::variadic) ? " input" : " inputs", ", got ", inputs.size());
  }
  auto out = std::visit([&](const auto& o) { return o.infer(inputs); }, op);
  if (!out) return out;
  // Every type and parameter shape a graph holds stays within the limits, so that no later size
  // arithmetic on it (here, at bind, at load) can overflow, whatever attributes an op was given.
  if (!graph_detail::within_limits(out->shape)) {
    return fail(Errc::out_of_range, "the output ", *out, " is too large: more than ", max_rank,
                " dims, a negative size, or more than 2^56 elements");
  }
  for (const ParamSpec& p : params_of(op, inputs)) {
    if (!graph_detail::within_limits(p.shape)) {
      return fail(Errc::out_of_range, "parameter '", p.slot, "' ", TensorType{p.dtype, p.shape},
                  " is too large: a negative size or more than 2^56 elements");
    }
  }
  return out;
}

std::vector<ParamSpec> params_of(const GraphOp& op, std::span<const TensorType> inputs) {
  return std::visit([&](const auto& o) { return params_of(o, inputs); }, op);
}

}  // namespace teeny
