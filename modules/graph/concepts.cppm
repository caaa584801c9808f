// teeny.graph:concepts — what a graph op is, and the customization points with their defaults.
//
// A graph op is a plain aggregate of typed attributes (PyTorch's names and defaults) that can say
// what it is called, how many inputs it takes, and what it produces:
//
//   struct Scale {                                         // a minimal user op
//     static constexpr std::string_view kind = "scale";
//     static constexpr Arity arity{1, 1};
//     double factor = 1;
//     Result<TensorType> infer(std::span<const TensorType> in) const { return in[0]; }
//     std::string attributes() const { return "factor=" + std::to_string(factor); }
//     friend bool operator==(const Scale&, const Scale&) = default;
//   };
//   static_assert(GraphOpType<Scale>);
//
// Op structs give every member a default (`{}` where no value fits), so that designated
// initialisers may leave any member out without -Wmissing-designated-field-initializers.
//
// Customization points (free functions that use a member when the op has one):
//   params_of(op, inputs) -> std::vector<ParamSpec>   op.params(inputs), else no parameters
//   kind(op)              -> std::string_view         op.name() (e.g. Binary's "add"), else T::kind
export module teeny.graph:concepts;
import teeny.std;
import teeny.core;
import :tensor_type;

export namespace teeny {

/// A graph op: a copyable, comparable value with
///   static `kind` (a string_view naming the op type, "linear"),
///   static `arity` (an Arity),
///   `infer(inputs) const -> Result<TensorType>`: the output type for input types whose count the
///       caller has checked against `arity`; an error (without node context) when they do not fit,
///   `attributes() const -> std::string`: "in_features=784, out_features=512, bias=true".
/// Satisfied by every alternative of GraphOp (Linear, Conv2d, ReLU, ...).
template <class T>
concept GraphOpType =
    std::copyable<T> && std::equality_comparable<T> && requires(const T& op, std::span<const TensorType> inputs) {
      requires std::convertible_to<decltype(T::kind), std::string_view>;
      requires std::same_as<std::remove_cv_t<decltype(T::arity)>, Arity>;
      { op.infer(inputs) } -> std::same_as<Result<TensorType>>;
      { op.attributes() } -> std::convertible_to<std::string>;
    };

/// A graph op that owns parameters or buffers (Linear: weight, bias), given its input types.
template <class T>
concept GraphOpWithParams = GraphOpType<T> && requires(const T& op, std::span<const TensorType> inputs) {
  { op.params(inputs) } -> std::same_as<std::vector<ParamSpec>>;
};

/// A graph op whose displayed name depends on its attributes (Binary{add} is "add").
template <class T>
concept GraphOpWithName = GraphOpType<T> && requires(const T& op) {
  { op.name() } -> std::convertible_to<std::string_view>;
};

/// The parameters `op` owns for these input types, in state_dict order; none by default.
template <GraphOpType T>
std::vector<ParamSpec> params_of(const T& op, std::span<const TensorType> inputs) {
  if constexpr (GraphOpWithParams<T>) {
    return op.params(inputs);
  } else {
    return {};
  }
}

/// The op's name as users see it (errors, summaries, default node names): `op.name()` for ops
/// named by an attribute (Binary{BinaryOp::add} is "add"), else `T::kind`.
template <GraphOpType T>
std::string_view kind(const T& op) {
  if constexpr (GraphOpWithName<T>) {
    return op.name();
  } else {
    return T::kind;
  }
}

}  // namespace teeny
