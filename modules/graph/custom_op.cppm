// teeny.graph:custom_op — graph ops defined outside teeny, in the user's own code.
//
// GraphOp lists teeny's own ops; its last alternative, CustomOp, holds any other GraphOpType by
// value, so that a graph can carry a user's op without teeny knowing its type. GraphBuilder::add
// wraps such an op, checking it first (check_graph_op: one static_assert per requirement, in
// words), and a lowering middleware finds it again by type with op_if<SwiGLU>(op):
//
//   struct SwiGLU { static constexpr std::string_view kind = "swiglu"; ... };   // a GraphOpType
//   Value y = b.add(SwiGLU{.hidden = 64}, {x}, "ffn");
//   if (const SwiGLU* s = op_if<SwiGLU>(graph.op(id))) ...                       // in a middleware
module;
#include <memory>  // std::make_shared (modules/std.cppm says why it is not there)
export module teeny.graph:custom_op;
import teeny.std;
import teeny.core;
import :tensor_type;
import :concepts;

export namespace teeny {

namespace graph_detail {
template <class>
inline constexpr bool always_false = false;
}  // namespace graph_detail

/// Checks `Op` against GraphOpType one requirement at a time and stops at the first it misses,
/// with a static_assert that says what to write. True when Op is a graph op. The instantiation
/// note under the message ("in instantiation of ... check_graph_op<user::Op>") names the op.
template <class Op>
consteval bool check_graph_op() {
  using graph_detail::always_false;
  if constexpr (!requires { Op::kind; } || !requires { std::string_view(Op::kind); }) {
    static_assert(always_false<Op>,
                  "a graph op needs `static constexpr std::string_view kind`, the name users see (\"swiglu\")");
  } else if constexpr (!requires { Op::arity; } || !std::same_as<std::remove_cv_t<decltype(Op::arity)>, Arity>) {
    static_assert(always_false<Op>, "a graph op needs `static constexpr Arity arity{min, max}`, its input count");
  } else if constexpr (!requires(const Op& op, std::span<const TensorType> in) { op.infer(in); }) {
    static_assert(always_false<Op>,
                  "a graph op needs `Result<TensorType> infer(std::span<const TensorType> inputs) const`, its "
                  "shape and dtype inference");
  } else if constexpr (!requires(const Op& op, std::span<const TensorType> in) {
                         { op.infer(in) } -> std::same_as<Result<TensorType>>;
                       }) {
    static_assert(always_false<Op>,
                  "a graph op's infer(std::span<const TensorType>) must return Result<TensorType> (the output "
                  "type, or an error saying which input does not fit)");
  } else if constexpr (!requires(const Op& op) {
                         { op.attributes() } -> std::convertible_to<std::string>;
                       }) {
    static_assert(always_false<Op>,
                  "a graph op needs `std::string attributes() const`, \"key=value, ...\" for summaries and errors");
  } else if constexpr (requires { &Op::params; } && !GraphOpWithParams<Op>) {
    static_assert(always_false<Op>,
                  "a graph op's params must be `std::vector<ParamSpec> params(std::span<const TensorType> inputs) "
                  "const`, its parameters in state_dict order");
  } else if constexpr (!std::copyable<Op> || !std::equality_comparable<Op>) {
    static_assert(always_false<Op>,
                  "a graph op must be copyable and equality-comparable (add `friend bool operator==(const Op&, "
                  "const Op&) = default;`)");
  } else {
    static_assert(GraphOpType<Op>);
  }
  return GraphOpType<Op>;
}

namespace graph_detail {
// A tag per type, compared by address: CustomOp finds its op's type again without RTTI (teeny
// builds with -fno-rtti).
template <class T>
struct type_tag {
  static constexpr char id = 0;
};

// The interface CustomOp's held op is used through.
struct CustomOpModel {
  virtual ~CustomOpModel() = default;
  virtual const void* type() const = 0;
  virtual const void* get() const = 0;
  virtual std::string_view kind() const = 0;
  virtual Arity arity() const = 0;
  virtual Result<TensorType> infer(std::span<const TensorType> inputs) const = 0;
  virtual std::string attributes() const = 0;
  virtual std::vector<ParamSpec> params(std::span<const TensorType> inputs) const = 0;
  virtual bool equals(const CustomOpModel& other) const = 0;
};

template <GraphOpType Op>
struct CustomOpOf final : CustomOpModel {
  explicit CustomOpOf(Op o) : op(std::move(o)) {}
  const void* type() const override { return &type_tag<Op>::id; }
  const void* get() const override { return &op; }
  std::string_view kind() const override { return teeny::kind(op); }
  Arity arity() const override { return Op::arity; }
  Result<TensorType> infer(std::span<const TensorType> inputs) const override { return op.infer(inputs); }
  std::string attributes() const override { return std::string(op.attributes()); }
  std::vector<ParamSpec> params(std::span<const TensorType> inputs) const override { return params_of(op, inputs); }
  bool equals(const CustomOpModel& other) const override {
    return other.type() == type() && *static_cast<const Op*>(other.get()) == op;
  }
  Op op;
};
}  // namespace graph_detail

/// A graph op from outside teeny, held by value (immutable, so copies share it). It is a
/// GraphOpType itself: its kind(), arity, inference and parameters are its op's.
class CustomOp {
 public:
  /// Sentinels for GraphOpType; kind(CustomOp) and arity(GraphOp) read the held op's own.
  static constexpr std::string_view kind = "custom";
  static constexpr Arity arity{0, Arity::variadic};

  template <class Op>
    requires(!std::same_as<std::remove_cvref_t<Op>, CustomOp>)
  explicit CustomOp(Op op) {
    if constexpr (check_graph_op<Op>()) {
      model_ = std::make_shared<const graph_detail::CustomOpOf<Op>>(std::move(op));
    }
  }

  /// The held op, if it is an `Op`.
  template <class Op>
  const Op* get_if() const {
    return model_->type() == &graph_detail::type_tag<Op>::id ? static_cast<const Op*>(model_->get()) : nullptr;
  }

  /// The held op's kind (GraphOpWithName: what kind(GraphOp) returns).
  std::string_view name() const { return model_->kind(); }
  Arity input_arity() const { return model_->arity(); }
  Result<TensorType> infer(std::span<const TensorType> inputs) const { return model_->infer(inputs); }
  std::string attributes() const { return model_->attributes(); }
  std::vector<ParamSpec> params(std::span<const TensorType> inputs) const { return model_->params(inputs); }

  friend bool operator==(const CustomOp& a, const CustomOp& b) {
    return a.model_ == b.model_ || a.model_->equals(*b.model_);
  }

 private:
  std::shared_ptr<const graph_detail::CustomOpModel> model_;
};
static_assert(GraphOpType<CustomOp> && GraphOpWithName<CustomOp> && GraphOpWithParams<CustomOp>);

}  // namespace teeny
