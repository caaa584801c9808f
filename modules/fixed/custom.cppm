// teeny.fixed:custom — an op teeny does not define (docs/custom-ops.md) as a layer of a typed model.
// The layer's op is a value of the user's graph op type, given as a template argument, with what
// the compiler needs beyond what the run-time graph asks of it: the output shape for concrete input
// shapes (constexpr, so that a mismatch stops the build), the parameter slots and their shapes, and
// the executable op it lowers to. That executable op and its CPU kernel are the run-time path's
// own, checked by the same concepts (check_graph_op, check_executable_op, check_kernel).
//
//   struct SwiGLU {   // the graph op of docs/custom-ops.md, plus:
//     constexpr tf::Inferred infer_shape(std::span<const teeny::ConcreteShape> inputs) const;
//     constexpr std::array<tf::ParamSlot, 2> param_slots(std::span<const teeny::ConcreteShape> inputs) const;
//     template <class T> swiglu_op<T> lower(const teeny::OpOutput& out) const;
//   };
//   constexpr tf::Custom<"ffn", SwiGLU{.in_features = 8, .hidden = 12}> ffn;
//   auto y = ffn(h);   // [4, 8] -> [4, 12]; parameters ffn.w1.weight, ffn.w3.weight
export module teeny.fixed:custom;
import teeny.std;
import teeny.core;
import teeny.graph;
import teeny.model;
import teeny.ops;
import teeny.cpu;
import :name;
import :value;
import :layers;

export namespace teeny::fixed {

/// What a custom op's infer_shape says about concrete input shapes: the output shape, or why the
/// inputs do not fit (a string literal; not empty means refused, and the compiler prints it).
struct Inferred {
  ConcreteShape shape{};
  std::string_view error{};
};

/// One parameter of a custom op: its slot, the key after the layer's name ("w1.weight", as the
/// executable op's param_names() and the graph op's params() name it), and its shape.
struct ParamSlot {
  std::string_view slot;
  ConcreteShape shape;
};

/// True when a custom op's infer_shape accepted the inputs; the static_assert on it shows the
/// layer, the op's kind, the op's reason and the shapes it got.
template <Name Layer, Name Kind, Name Why, class... Got>
inline constexpr bool custom_op_accepts = Why.empty();

namespace custom_detail {
template <class>
inline constexpr bool always_false = false;

template <class Op>
concept InfersShape = requires(const Op& op, std::span<const ConcreteShape> inputs) {
  { op.infer_shape(inputs) } -> std::same_as<Inferred>;
};
template <class Op>
concept HasParamSlots = requires(const Op& op, std::span<const ConcreteShape> inputs) { op.param_slots(inputs); };
template <class Op, class T>
concept Lowers = requires(const Op& op, const OpOutput& out) { op.template lower<T>(out); };
template <class Op, class T>
concept StatesMemory = requires(const Op& op, std::span<const ConcreteShape> inputs) {
  { op.template memory<T>(inputs) } -> std::same_as<KernelMemory>;
};

template <class Op, class T>
using lowered_t =
    std::remove_cvref_t<decltype(std::declval<const Op&>().template lower<T>(std::declval<const OpOutput&>()))>;

// What a custom layer's op must have, one requirement at a time, each failure a message saying
// what to write; the note under it ("in instantiation of ... check_custom_op<ffn::SwiGLU, float>")
// names the op.
template <class Op, class T>
consteval bool check_custom_op() {
  if constexpr (!check_graph_op<Op>()) {
    return false;
  } else if constexpr (!InfersShape<Op>) {
    static_assert(always_false<Op>,
                  "a custom layer's op needs `constexpr teeny::fixed::Inferred infer_shape(std::span<const "
                  "teeny::ConcreteShape> inputs) const`: its output shape for concrete input shapes, or why they "
                  "do not fit");
    return false;
  } else if constexpr (GraphOpWithParams<Op> && !HasParamSlots<Op>) {
    static_assert(always_false<Op>,
                  "a custom layer's op with parameters needs `constexpr std::array<teeny::fixed::ParamSlot, K> "
                  "param_slots(std::span<const teeny::ConcreteShape> inputs) const`: each parameter's slot and "
                  "shape, as params() names them");
    return false;
  } else if constexpr (!Lowers<Op, T>) {
    static_assert(always_false<Op>,
                  "a custom layer's op needs `template <class T> auto lower(const teeny::OpOutput& out) const`: the "
                  "executable op for element type T, as a lowering middleware makes it");
    return false;
  } else {
    return check_executable_op<lowered_t<Op, T>>() && check_kernel<CpuContext, lowered_t<Op, T>>();
  }
}

// A function template, so that the message shows the names and shapes themselves.
template <Name Layer, Name Kind, Name Why, class... Got>
consteval bool check_accepts() {
  static_assert(custom_op_accepts<Layer, Kind, Why, Got...>, "custom layer: its op's infer_shape refused the inputs");
  return true;
}

template <class... X>
struct first;
template <class X, class... Rest>
struct first<X, Rest...> {
  using type = X;
};
template <class... X>
using first_t = typename first<X...>::type;
}  // namespace custom_detail

/// An op defined outside teeny as a layer named N (its parameters' keys are "N.<slot>"): Op is a
/// value of the user's graph op type, which has the members shown at the top of this file, and
/// may have `template <class T> constexpr KernelMemory memory(std::span<const ConcreteShape>
/// inputs) const`, what its prepare_kernel takes from the CPU context's Memory (none when absent:
/// a kernel that takes more than its layer plans fails the typed model's load, saying so).
/// Takes one or two inputs of one element type; its output has the inputs' element type. The
/// executable op is made with an empty OpOutput::shape (a typed model allocates nothing): its
/// pack_args must take shapes from the bindings, as teeny's own ops do.
template <Name N, auto Op>
struct Custom {
  using op_type = std::remove_cvref_t<decltype(Op)>;
  static constexpr auto name = N;
  static constexpr std::string_view kind = op_type::kind;
  static constexpr LayerOp op = LayerOp::custom;
  static constexpr op_type definition = Op;

  /// The op's answer for inputs X...: their shapes, the Inferred, and the output's Dims.
  template <class... X>
  struct inference {
    static constexpr std::array<ConcreteShape, sizeof...(X)> shapes{X::dims::shape()...};
    static constexpr Inferred result = Op.infer_shape(std::span<const ConcreteShape>(shapes));
    static constexpr auto dims_array = [] {
      std::array<std::int64_t, result.shape.rank()> a{};
      for (std::size_t i = 0; i < a.size(); ++i) a[i] = result.shape[i];
      return a;
    }();
  };

  template <class... X>
  struct output {
    using element = typename custom_detail::first_t<X...>::element;
    using dims = dims_from<inference<X...>::dims_array>;
  };

  template <Value... X>
    requires(sizeof...(X) >= 1)
  constexpr Node<Custom, X...> operator()(X...) const {
    using T = typename custom_detail::first_t<X...>::element;
    static_assert(sizeof...(X) <= 2, "a custom layer takes one or two inputs");
    static_assert(op_type::arity.accepts(sizeof...(X)),
                  "a custom layer's op does not take this many inputs (its arity)");
    static_assert((std::is_same_v<typename X::element, T> && ...),
                  "a custom layer's inputs have different element types");
    if constexpr (custom_detail::check_custom_op<op_type, T>()) {
      constexpr std::string_view why = inference<X...>::result.error;
      static_assert(custom_detail::check_accepts<N, name_from<kind.size() + 1>(kind), name_from<why.size() + 1>(why),
                                                 got<typename X::dims>...>());
    }
    return {};
  }

  /// The parameters for inputs X... (Network::params), keys "N.<slot>".
  template <class... X>
  struct param_table {
    using element = typename custom_detail::first_t<X...>::element;
    static constexpr auto slots = [] {
      if constexpr (custom_detail::HasParamSlots<op_type>) {
        return Op.param_slots(std::span<const ConcreteShape>(inference<X...>::shapes));
      } else {
        return std::array<ParamSlot, 0>{};
      }
    }();
    // The keys' characters, one after another.
    static constexpr std::size_t key_chars = [] {
      std::size_t n = 0;
      for (const ParamSlot& s : slots) n += N.size() + 1 + s.slot.size();
      return n;
    }();
    static constexpr std::array<char, key_chars> chars = [] {
      std::array<char, key_chars> out{};
      std::size_t at = 0;
      for (const ParamSlot& s : slots) {
        for (char c : N.view()) out[at++] = c;
        out[at++] = '.';
        for (char c : s.slot) out[at++] = c;
      }
      return out;
    }();
    static constexpr std::array<ParamSpec, slots.size()> specs = [] {
      std::array<ParamSpec, slots.size()> out{};
      std::size_t at = 0;
      for (std::size_t i = 0; i < slots.size(); ++i) {
        const std::size_t length = N.size() + 1 + slots[i].slot.size();
        out[i] = {std::string_view(chars.data() + at, length), slots[i].shape, dtype_of<element>};
        at += length;
      }
      return out;
    }();
  };
  template <class... X>
  static constexpr auto params_for() {
    return param_table<X...>::specs;
  }

  /// What the op's kernel takes from the CPU context's Memory for inputs X...
  template <class T, class... X>
  static constexpr KernelMemory memory() {
    if constexpr (custom_detail::StatesMemory<op_type, T>) {
      return Op.template memory<T>(std::span<const ConcreteShape>(inference<X...>::shapes));
    } else {
      return {};
    }
  }

  /// The executable op for element type T.
  template <class T>
  static auto lower(const OpOutput& out) {
    return Op.template lower<T>(out);
  }
};

}  // namespace teeny::fixed
