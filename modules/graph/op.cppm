// teeny.graph:op — GraphOp, the single list of graph ops, and the operations every graph op
// supports, dispatched with std::visit (a new alternative that misses a requirement of
// GraphOpType fails the static_assert below, naming it).
//
//   GraphOp op = Linear{.in_features = 784, .out_features = 512};
//   kind(op) == "linear";  arity(op).max == 1;
//   describe(op) == "linear(in_features=784, out_features=512, bias=true)";
//   kind(GraphOp{Binary{BinaryOp::add}}) == "add";  describe(...) == "add()"   // Binary::kind is "binary"
//   infer(op, input_types)  -> Result<TensorType>            // checks the arity first
module;
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>
export module teeny.graph:op;
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

export namespace teeny {

/// Every op a run-time graph can hold. Adding an op: define it in its family's partition
/// (graph/ops_<family>.cppm) with a static_assert(GraphOpType<...>) after it, list it here, and give
/// GraphBuilder a method for it (docs/adding-an-op.md).
using GraphOp = std::variant<
    // Each line ends with the family of its ops: the partition graph/ops_<family>.cppm defines
    // them. New alternatives go at the end.
    Input, Cast, Flatten, Reshape, Transpose, Permute, Concat, Split, Slice, Pad, Upsample,  // shape
    Linear, MatMul,                                                                          // linear
    Conv1d, Conv2d,                                                                          // conv
    MaxPool2d, AvgPool2d, AdaptiveAvgPool2d,                                                 // pool
    BatchNorm, LayerNorm, RMSNorm, GroupNorm,                                                // norm
    Embedding,                                                                               // sequence
    Dropout,                                                                                 // elementwise
    Attention,                                                                               // sequence
    ReLU, LeakyReLU, GELU, SiLU, Sigmoid, Tanh, Softplus, ELU, Hardswish,                    // elementwise
    Softmax, LogSoftmax,                                                                     // reduce
    Binary, Unary,                                                                           // elementwise
    Reduce>;                                                                                 // reduce

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

/// Whether `op` holds an `Op` (is<Input>(op)).
template <class Op>
bool is(const GraphOp& op) {
  return std::holds_alternative<Op>(op);
}

}  // namespace teeny

namespace teeny {

std::string_view kind(const GraphOp& op) {
  return std::visit([](const auto& o) { return kind(o); }, op);
}

Arity arity(const GraphOp& op) {
  return std::visit([](const auto& o) { return std::remove_cvref_t<decltype(o)>::arity; }, op);
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
  return std::visit([&](const auto& o) { return o.infer(inputs); }, op);
}

std::vector<ParamSpec> params_of(const GraphOp& op, std::span<const TensorType> inputs) {
  return std::visit([&](const auto& o) { return params_of(o, inputs); }, op);
}

}  // namespace teeny
