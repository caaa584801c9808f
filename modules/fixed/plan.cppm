// teeny.fixed:plan — the typed model lowered and its memory planned, all at compile time.
//
// The lowering makes the run-time path's decisions (teeny.runtime:standard_lowering, inference),
// node by node in topological order:
//   - a BatchNorm2d right after a Conv2d whose value nothing else reads folds into it;
//   - an add of two values, one computed by a convolution nothing else reads, folds into that
//     convolution as its residual input (the convolution then runs where the add was);
//   - an activation right after a Linear, Conv2d, BatchNorm2d or add whose value nothing else
//     reads becomes its epilogue;
//   - a Flatten is a view of its input's buffer (no step, no copy);
//   - every other node is a step of its own.
// Each step's output gets a buffer in one arena; buffers whose lifetimes (in steps) do not
// overlap share bytes, placed largest first at the lowest offset that fits, as the run-time
// planner places them.
//
//   using plan = StaticPlan<decltype(mlp(x))>;
//   plan::steps;          // node indices in run order: fc1 (+relu), fc2 (+relu), fc3
//   plan::arena_bytes;    // constexpr
module;
#include "math/elementwise.hpp"
export module teeny.fixed:plan;
import teeny.std;
import teeny.core;
import :value;
import :layers;
import :network;

export namespace teeny::fixed {

inline constexpr std::size_t no_node = static_cast<std::size_t>(-1);

/// How a node of a typed model is computed.
enum class Role : std::uint8_t {
  input,  // fed by the caller, copied into its buffer by forward
  step,   // computed by a step of its own, into a buffer of its own
  fused,  // computed by another node's step (a folded BatchNorm or add, an activation epilogue)
  view,   // its input's buffer, read with another shape (Flatten)
};

/// The lowering's decision for one node.
struct NodePlan {
  LayerOp op = LayerOp::input;
  Role role = Role::step;
  std::array<std::size_t, 2> inputs{no_node, no_node};  // the nodes it reads, in operand order
  std::size_t n_inputs = 0;
  std::size_t step = no_node;    // the node whose step computes its value (itself for a step); inputs and views: none
  std::size_t buffer = no_node;  // the node whose buffer holds its value
  // For step nodes:
  std::size_t run_at = no_node;    // the node at whose place the step runs (the last one it computes)
  bool activation = false;         // an activation fused as the epilogue
  UnaryFn fn = UnaryFn::relu;      // which
  std::size_t norm = no_node;      // the BatchNorm2d folded in (Conv2d)
  std::size_t residual = no_node;  // the node whose value is added before the epilogue (Conv2d)
  // For nodes that have a buffer (inputs and steps):
  std::size_t bytes = 0;
  std::size_t offset = 0;  // in the arena
};

namespace plan_detail {
template <class V>
constexpr UnaryFn activation_fn() {
  if constexpr (V::layer::op == LayerOp::activation) {
    return V::layer::fn;
  } else {
    return UnaryFn::relu;
  }
}

// The nodes as the lowering sees them: op, operands, size.
template <class Net, class... Ns>
constexpr auto describe(TypeList<Ns...>) {
  std::array<NodePlan, sizeof...(Ns)> nodes{};
  std::size_t i = 0;
  auto one = [&]<class V>(V*) {
    NodePlan& p = nodes[i++];
    p.op = V::layer::op;
    p.bytes = bytes_of<V>;
    p.fn = activation_fn<V>();
    [&]<class L, class... In>(Node<L, In...>*) {
      ((p.inputs[p.n_inputs++] = Net::template index_of<In>), ...);
    }(static_cast<V*>(nullptr));
  };
  (one(static_cast<Ns*>(nullptr)), ...);
  return nodes;
}

constexpr bool takes_epilogue(LayerOp op) {
  return op == LayerOp::linear || op == LayerOp::conv2d || op == LayerOp::batch_norm2d || op == LayerOp::add;
}

// The lowering, in topological order. `uses` counts each node's readers (plus one for the output).
template <std::size_t N>
constexpr std::array<NodePlan, N> lower(std::array<NodePlan, N> nodes, const std::array<std::size_t, N>& uses) {
  // Whether the step of node d may take more work: every value it computes is read exactly once.
  auto foldable = [&](std::size_t d) {
    for (std::size_t j = 0; j < N; ++j) {
      if (nodes[j].step == d && uses[j] != 1) return false;
    }
    return true;
  };
  auto make_step = [&](std::size_t i) {
    nodes[i].role = Role::step;
    nodes[i].step = nodes[i].buffer = nodes[i].run_at = i;
  };
  auto fuse_into = [&](std::size_t i, std::size_t d) {
    nodes[i].role = Role::fused;
    nodes[i].step = nodes[i].buffer = d;
    nodes[d].run_at = i;
  };
  for (std::size_t i = 0; i < N; ++i) {
    NodePlan& node = nodes[i];
    const std::size_t in0 = node.inputs[0];
    switch (node.op) {
      case LayerOp::input:
        node.role = Role::input;
        node.buffer = i;
        continue;
      case LayerOp::flatten:
        node.role = Role::view;
        node.buffer = nodes[in0].buffer;
        continue;
      case LayerOp::batch_norm2d: {
        const std::size_t d = nodes[in0].step;
        if (nodes[in0].op == LayerOp::conv2d && d == in0 && foldable(d) && nodes[d].norm == no_node &&
            !nodes[d].activation) {
          nodes[d].norm = i;
          fuse_into(i, d);
          continue;
        }
        break;
      }
      case LayerOp::add: {
        bool folded = false;
        for (std::size_t slot = 0; slot < 2 && !folded; ++slot) {
          const std::size_t d = nodes[node.inputs[slot]].step;
          const std::size_t other = node.inputs[1 - slot];
          if (d == no_node || nodes[d].op != LayerOp::conv2d || d == nodes[other].step || !foldable(d) ||
              nodes[d].residual != no_node || nodes[d].activation) {
            continue;
          }
          nodes[d].residual = other;
          fuse_into(i, d);
          folded = true;
        }
        if (folded) continue;
        break;
      }
      case LayerOp::activation: {
        const std::size_t d = nodes[in0].step;
        if (d != no_node && takes_epilogue(nodes[d].op) && foldable(d) && !nodes[d].activation) {
          nodes[d].activation = true;
          nodes[d].fn = node.fn;
          fuse_into(i, d);
          continue;
        }
        break;
      }
      default: break;
    }
    make_step(i);
  }
  return nodes;
}

// Step nodes in run order (by run_at), and how many there are.
template <std::size_t N>
constexpr std::size_t count_steps(const std::array<NodePlan, N>& nodes) {
  std::size_t n = 0;
  for (const NodePlan& p : nodes) n += p.role == Role::step ? 1 : 0;
  return n;
}
template <std::size_t S, std::size_t N>
constexpr std::array<std::size_t, S> run_order(const std::array<NodePlan, N>& nodes) {
  std::array<std::size_t, S> order{};
  std::size_t k = 0;
  for (std::size_t at = 0; at < N; ++at) {  // each node index is the run_at of at most one step
    for (std::size_t d = 0; d < N; ++d) {
      if (nodes[d].role == Role::step && nodes[d].run_at == at) order[k++] = d;
    }
  }
  return order;
}

inline constexpr std::size_t arena_alignment = 64;
constexpr std::size_t round_up(std::size_t n) { return (n + arena_alignment - 1) / arena_alignment * arena_alignment; }

// Buffer lifetimes in run positions, then the greedy placement.
template <std::size_t S, std::size_t N>
constexpr std::array<NodePlan, N> place(std::array<NodePlan, N> nodes, const std::array<std::size_t, S>& order,
                                        std::size_t output) {
  std::array<std::size_t, N> first{};
  std::array<std::size_t, N> last{};
  std::array<bool, N> has{};
  for (std::size_t i = 0; i < N; ++i) has[i] = nodes[i].role == Role::input || nodes[i].role == Role::step;
  for (std::size_t k = 0; k < S; ++k) {
    const std::size_t d = order[k];
    first[d] = k;
    last[d] = k;
  }
  auto read = [&](std::size_t value, std::size_t k) {
    const std::size_t b = nodes[value].buffer;
    if (last[b] < k) last[b] = k;
  };
  // Every node a step computes reads its operands at that step (the folded add's other operand too).
  for (std::size_t k = 0; k < S; ++k) {
    for (std::size_t j = 0; j < N; ++j) {
      if (nodes[j].step != order[k]) continue;
      for (std::size_t s = 0; s < nodes[j].n_inputs; ++s) read(nodes[j].inputs[s], k);
    }
  }
  read(output, S);  // the output outlives every step

  std::array<std::size_t, N> by_size{};
  std::size_t m = 0;
  for (std::size_t i = 0; i < N; ++i) {
    if (has[i]) by_size[m++] = i;
  }
  for (std::size_t a = 1; a < m; ++a) {  // stable insertion sort, largest first
    for (std::size_t b = a; b > 0 && nodes[by_size[b]].bytes > nodes[by_size[b - 1]].bytes; --b) {
      const std::size_t t = by_size[b];
      by_size[b] = by_size[b - 1];
      by_size[b - 1] = t;
    }
  }
  std::array<std::size_t, N> placed{};  // sorted by offset
  std::size_t n_placed = 0;
  for (std::size_t a = 0; a < m; ++a) {
    const std::size_t i = by_size[a];
    const std::size_t size = round_up(nodes[i].bytes);
    std::size_t offset = 0;
    for (std::size_t p = 0; p < n_placed; ++p) {
      const std::size_t j = placed[p];
      if (!(first[i] <= last[j] && first[j] <= last[i])) continue;
      if (offset + size <= nodes[j].offset) break;
      const std::size_t end = nodes[j].offset + round_up(nodes[j].bytes);
      if (end > offset) offset = end;
    }
    nodes[i].offset = offset;
    std::size_t at = n_placed++;
    while (at > 0 && nodes[placed[at - 1]].offset > offset) {
      placed[at] = placed[at - 1];
      --at;
    }
    placed[at] = i;
  }
  return nodes;
}
}  // namespace plan_detail

/// A typed model, lowered and planned. Every member is a constant.
template <Value Output>
struct StaticPlan {
  using network = Network<Output>;
  static constexpr std::size_t n_nodes = network::size;

  /// One entry per node of network::nodes.
  static constexpr std::array<NodePlan, n_nodes> nodes_lowered =
      plan_detail::lower(plan_detail::describe<network>(typename network::nodes{}), network::uses);
  static constexpr std::size_t n_steps = plan_detail::count_steps(nodes_lowered);
  /// The step nodes in the order they run.
  static constexpr std::array<std::size_t, n_steps> steps = plan_detail::run_order<n_steps>(nodes_lowered);
  /// With each buffer's arena offset.
  static constexpr std::array<NodePlan, n_nodes> nodes = plan_detail::place(nodes_lowered, steps, n_nodes - 1);

  /// The activation arena: every input and step output, placed by lifetime.
  static constexpr std::size_t arena_bytes = [] {
    std::size_t end = 0;
    for (const NodePlan& p : nodes) {
      if ((p.role == Role::input || p.role == Role::step) && p.offset + plan_detail::round_up(p.bytes) > end) {
        end = p.offset + plan_detail::round_up(p.bytes);
      }
    }
    return end;
  }();
  /// What one buffer per value would take (without reuse).
  static constexpr std::size_t naive_bytes = [] {
    std::size_t total = 0;
    for (const NodePlan& p : nodes) {
      if (p.role == Role::input || p.role == Role::step) total += plan_detail::round_up(p.bytes);
    }
    return total;
  }();
  static constexpr std::size_t arena_alignment = plan_detail::arena_alignment;

  /// The arena offset of node i's value (its buffer's, for fused nodes and views).
  static constexpr std::size_t offset_of(std::size_t i) { return nodes[nodes[i].buffer].offset; }
};

}  // namespace teeny::fixed
