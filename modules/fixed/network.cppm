// teeny.fixed:network — what the compiler knows about a typed model from its output value alone:
// every node in dependency order (a node read twice is one node), how often each is read, the
// model's inputs, and its parameters with their state_dict keys, shapes and places in one weight
// buffer. All of it is constexpr.
//
//   auto x = input<"x", float, 64, 1, 28, 28>();
//   using mlp = Network<decltype(fc3(relu(fc2(relu(fc1(flatten(x)))))))>;
//   mlp::size == 7;  mlp::params[0].key == "fc1.weight";  mlp::param_bytes == ...
export module teeny.fixed:network;
import teeny.std;
import teeny.core;
import :name;
import :value;
import :layers;

export namespace teeny::fixed {

namespace network_detail {
template <class List, class T>
inline constexpr bool contains = false;
template <class... Ts, class T>
inline constexpr bool contains<TypeList<Ts...>, T> = (std::is_same_v<Ts, T> || ...);

template <class List, class T>
struct push_unique;
template <class... Ts, class T>
struct push_unique<TypeList<Ts...>, T> {
  using type = std::conditional_t<contains<TypeList<Ts...>, T>, TypeList<Ts...>, TypeList<Ts..., T>>;
};

// Post-order walk: a node comes after everything it reads.
template <class Visited, class... Vs>
struct visit_all {
  using type = Visited;
};
template <class Visited, class V>
struct visit_node;
template <class Visited, class V, class... Rest>
struct visit_all<Visited, V, Rest...> {
  using type = typename visit_all<typename visit_node<Visited, V>::type, Rest...>::type;
};
template <class Visited, class Layer, class... Inputs>
struct visit_node<Visited, Node<Layer, Inputs...>> {
  using type = typename push_unique<typename visit_all<Visited, Inputs...>::type, Node<Layer, Inputs...>>::type;
};

template <class V, class... Ts>
constexpr std::size_t index_in(TypeList<Ts...>) {
  constexpr bool same[] = {std::is_same_v<V, Ts>...};
  for (std::size_t i = 0; i < sizeof...(Ts); ++i) {
    if (same[i]) return i;
  }
  return sizeof...(Ts);
}

// A node's parameters: from its layer and element type (teeny's layers), or from its layer and
// the values it reads (a custom layer's may depend on their shapes).
template <class V>
struct node_params;
template <class L, class... In>
struct node_params<Node<L, In...>> {
  static constexpr auto get() {
    if constexpr (requires { L::template params<typename Node<L, In...>::element>(); }) {
      return L::template params<typename Node<L, In...>::element>();
    } else if constexpr (requires { L::template params_for<In...>(); }) {
      return L::template params_for<In...>();
    } else {
      return std::array<ParamSpec, 0>{};
    }
  }
};

template <std::size_t Count>
struct ParamList {
  std::array<ParamSpec, Count> list{};
  std::size_t size = 0;
  std::string_view clash{};  // the first key two layers give different shapes or dtypes
};

// Every node's parameters, each key once (a layer used at two nodes shares its weights).
template <class... Ns>
constexpr auto collect_params(TypeList<Ns...>) {
  ParamList<(node_params<Ns>::get().size() + ... + 0)> out;
  auto append = [&]<class V>(V*) {
    for (const ParamSpec& p : node_params<V>::get()) {
      bool seen = false;
      for (std::size_t i = 0; i < out.size && !seen; ++i) {
        if (out.list[i].key != p.key) continue;
        seen = true;
        if (out.clash.empty() && (out.list[i].shape != p.shape || out.list[i].dtype != p.dtype)) out.clash = p.key;
      }
      if (!seen) out.list[out.size++] = p;
    }
  };
  (append(static_cast<Ns*>(nullptr)), ...);
  return out;
}
}  // namespace network_detail

/// The nodes of a typed model that computes `Output`, in an order where each comes after the values
/// it reads.
template <Value Output>
using topological_order = typename network_detail::visit_node<TypeList<>, Output>::type;

/// True when no parameter key is given two shapes or dtypes by two layers of one name; the
/// static_assert on it shows the key.
template <Name Key>
inline constexpr bool one_shape_per_key = Key.empty();

namespace network_detail {
// A function template, so that the message shows the key itself.
template <Name Key>
consteval bool check_one_shape_per_key() {
  static_assert(one_shape_per_key<Key>,
                "two layers of the model have the same name but parameters of different shapes or dtypes");
  return true;
}
}  // namespace network_detail

template <Value Output>
struct Network;

template <Value Output>
struct Network {
  using nodes = topological_order<Output>;
  using output = Output;
  static constexpr std::size_t size = nodes::size;

  /// The position of node V in `nodes`.
  template <Value V>
  static constexpr std::size_t index_of = network_detail::index_in<V>(nodes{});

  /// How many times each node is read (by another node's operand slots, plus one for the output).
  static constexpr std::array<std::size_t, size> uses = []<class... Ns>(TypeList<Ns...>) {
    std::array<std::size_t, size> n{};
    (
        []<class L, class... In>(std::array<std::size_t, size>& counts, Node<L, In...>*) {
          ((++counts[network_detail::index_in<In>(nodes{})]), ...);
        }(n, static_cast<Ns*>(nullptr)),
        ...);
    ++n[size - 1];
    return n;
  }(nodes{});

  /// The parameters of every layer, in node order (a layer used at two nodes shares its weights
  /// and is listed once).
  static constexpr auto params = [] {
    constexpr auto all = network_detail::collect_params(nodes{});
    std::array<ParamSpec, all.size> out{};
    for (std::size_t i = 0; i < all.size; ++i) out[i] = all.list[i];
    return out;
  }();
  static constexpr std::string_view clashing_key = network_detail::collect_params(nodes{}).clash;
  static_assert(network_detail::check_one_shape_per_key<name_from<clashing_key.size() + 1>(clashing_key)>());

  /// Offsets of the parameters in one buffer holding them all (each 64-byte aligned, as the
  /// kernels read them), and that buffer's size.
  static constexpr std::size_t param_alignment = 64;
  static constexpr std::array<std::size_t, params.size()> param_offsets = [] {
    std::array<std::size_t, params.size()> offsets{};
    std::size_t at = 0;
    for (std::size_t i = 0; i < params.size(); ++i) {
      offsets[i] = at;
      const auto bytes = static_cast<std::size_t>(params[i].shape.numel()) * size_of(params[i].dtype);
      at += (bytes + param_alignment - 1) / param_alignment * param_alignment;
    }
    return offsets;
  }();
  static constexpr std::size_t param_bytes = [] {
    if constexpr (params.size() == 0) {
      return std::size_t{0};
    } else {
      const ParamSpec& last = params.back();
      const auto bytes = static_cast<std::size_t>(last.shape.numel()) * size_of(last.dtype);
      return param_offsets.back() + (bytes + param_alignment - 1) / param_alignment * param_alignment;
    }
  }();

  /// The index in `params` of the parameter with `key`, or params.size().
  static constexpr std::size_t param_index(std::string_view key) {
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (params[i].key == key) return i;
    }
    return params.size();
  }
};

}  // namespace teeny::fixed
