// teeny.fixed:network — what the compiler knows about a typed model from its output value alone:
// every node in dependency order (a node read twice is one node), how often each is read, the
// model's inputs, and its parameters with their state_dict keys, shapes and places in one weight
// buffer. All of it is constexpr.
//
//   auto x = input<"x", float, 64, 1, 28, 28>();
//   using mlp = Network<decltype(fc3(relu(fc2(relu(fc1(flatten(x)))))))>;
//   mlp::size == 7;  mlp::params[0].key == "fc1.weight";  mlp::param_bytes == ...
module;
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>
export module teeny.fixed:network;
import teeny.core;
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

template <class L>
concept HasParams = requires { L::template params<float>(); };

template <class V>
constexpr std::size_t param_count() {
  if constexpr (HasParams<typename V::layer>) {
    return V::layer::template params<typename V::element>().size();
  } else {
    return 0;
  }
}
}  // namespace network_detail

/// The nodes of a typed model that computes `Output`, in an order where each comes after the values
/// it reads.
template <Value Output>
using topological_order = typename network_detail::visit_node<TypeList<>, Output>::type;

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
  static constexpr auto params = []<class... Ns>(TypeList<Ns...>) {
    constexpr std::size_t count = (network_detail::param_count<Ns>() + ... + 0);
    std::array<ParamSpec, count> out{};
    std::size_t k = 0;
    auto append = [&]<class V>(V*) {
      if constexpr (network_detail::HasParams<typename V::layer>) {
        for (const ParamSpec& p : V::layer::template params<typename V::element>()) {
          bool seen = false;
          for (std::size_t i = 0; i < k; ++i) seen = seen || out[i].key == p.key;
          if (!seen) out[k++] = p;
        }
      }
    };
    (append(static_cast<Ns*>(nullptr)), ...);
    return out;
  }(nodes{});

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
