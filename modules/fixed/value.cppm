// teeny.fixed:value — the typed values a compile-time model is written with. A value is an empty
// object whose type says everything: the layer that computes it, the values it reads, its element
// type and its shape. Writing the model is calling layers on values; the compiler infers every
// shape and rejects every mismatch, and nothing happens at run time.
//
//   auto x = input<"x", float, 64, 1, 28, 28>();   // Node<Input<"x">, ...>
//   auto h = flatten(x);                             // decltype(h)::dims is Dims<64, 784>
//   static_assert(std::same_as<decltype(h)::dims, Dims<64, 784>>);
export module teeny.fixed:value;
import teeny.std;
import teeny.core;
import :name;

export namespace teeny::fixed {

/// A shape known at compile time.
template <std::int64_t... D>
struct Dims {
  static constexpr std::size_t rank = sizeof...(D);
  static constexpr std::array<std::int64_t, rank> array{D...};
  static constexpr std::int64_t numel = (std::int64_t{1} * ... * D);
  static constexpr ConcreteShape shape() { return ConcreteShape{D...}; }
};

namespace value_detail {
template <auto Array, class Index>
struct dims_from;
template <auto Array, std::size_t... I>
struct dims_from<Array, std::index_sequence<I...>> {
  using type = Dims<Array[I]...>;
};
}  // namespace value_detail

/// The Dims of a constexpr std::array<std::int64_t, N> (layers compute their output shapes as arrays).
template <auto Array>
using dims_from = typename value_detail::dims_from<Array, std::make_index_sequence<Array.size()>>::type;

/// The element types a typed model computes in (those of the CPU kernels).
template <class T>
concept Real = std::same_as<T, float> || std::same_as<T, double>;

/// What a layer computes: how the lowering turns its node into an executable op.
enum class LayerOp : std::uint8_t {
  input,
  linear,
  conv2d,
  batch_norm2d,
  group_norm,
  activation,
  max_pool2d,
  avg_pool2d,
  adaptive_avg_pool2d,
  flatten,
  add,
  custom,  // an op defined outside teeny (teeny.fixed:custom)
};

/// A model's input: its name (the key of the tensor fed to it), element type and shape.
template <Name N, Real T, class D>
struct Input {
  static constexpr auto name = N;
  static constexpr std::string_view kind = "input";
  static constexpr LayerOp op = LayerOp::input;
};

/// A value: computed by `Layer` from the values `Inputs` (none for an Input).
/// Layer::output<Inputs...> gives the element type and Dims.
template <class Layer, class... Inputs>
struct Node;

template <Name N, Real T, std::int64_t... D>
struct Node<Input<N, T, Dims<D...>>> {
  using layer = Input<N, T, Dims<D...>>;
  using element = T;
  using dims = Dims<D...>;
};

template <class Layer, class... Inputs>
struct Node {
  using layer = Layer;
  using element = typename Layer::template output<Inputs...>::element;
  using dims = typename Layer::template output<Inputs...>::dims;
};

namespace value_detail {
template <class V>
inline constexpr bool is_node = false;
template <class Layer, class... Inputs>
inline constexpr bool is_node<Node<Layer, Inputs...>> = true;
}  // namespace value_detail

/// A typed value.
template <class V>
concept Value = value_detail::is_node<std::remove_cvref_t<V>>;

/// The values a node reads, as a type list.
template <class... T>
struct TypeList {
  static constexpr std::size_t size = sizeof...(T);
};
template <class V>
struct inputs_of;
template <class Layer, class... Inputs>
struct inputs_of<Node<Layer, Inputs...>> {
  using type = TypeList<Inputs...>;
};

/// A model input: `input<"x", float, 64, 1, 28, 28>()`.
template <Name N, Real T, std::int64_t... D>
  requires(sizeof...(D) <= max_rank && ((D > 0) && ...))
constexpr Node<Input<N, T, Dims<D...>>> input() {
  return {};
}

/// Bytes of a value's tensor.
template <Value V>
inline constexpr std::size_t bytes_of = static_cast<std::size_t>(V::dims::numel) * sizeof(typename V::element);

}  // namespace teeny::fixed
