// teeny.runtime:standard_lowering — Graph -> Dag<standard_ops<T>> for inference.
//
// standard_node_lowering<T> maps each graph op to its executable op, keeping every attribute;
// fuse_activations<Base> is a middleware that folds an activation into the Linear before it
// (one GEMM pass with bias + activation) and delegates everything else to its base;
// standard_lowering<T> is the two together, as a whole-graph Lowering.
//
//   auto lowered = standard_lowering<float>{}.lower(graph, LoweringMode::inference);
module;
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>
export module teeny.runtime:standard_lowering;
import teeny.core;
import teeny.graph;
import teeny.model;
import teeny.ops;

export namespace teeny {

namespace lowering_detail {
template <class... F>
struct overloaded : F... {
  using F::operator()...;
};
template <class... F>
overloaded(F...) -> overloaded<F...>;

// The activation a graph op computes, as a unary function, if it is one.
inline std::optional<std::pair<UnaryFn, UnaryParams>> activation_of(const GraphOp& op) {
  using R = std::optional<std::pair<UnaryFn, UnaryParams>>;
  auto f = [](UnaryFn fn, UnaryParams p = {}) { return R(std::pair{fn, p}); };
  return std::visit(overloaded{
                        [&](const ReLU&) { return f(UnaryFn::relu); },
                        [&](const LeakyReLU& a) {
                          return f(UnaryFn::leaky_relu, {static_cast<float>(a.negative_slope), 0});
                        },
                        [&](const GELU& a) {
                          return f(a.approximate == GeluApproximate::tanh ? UnaryFn::gelu_tanh : UnaryFn::gelu_erf);
                        },
                        [&](const SiLU&) { return f(UnaryFn::silu); },
                        [&](const Sigmoid&) { return f(UnaryFn::sigmoid); },
                        [&](const Tanh&) { return f(UnaryFn::tanh); },
                        [&](const Softplus& a) {
                          return f(UnaryFn::softplus, {static_cast<float>(a.beta), static_cast<float>(a.threshold)});
                        },
                        [&](const ELU& a) { return f(UnaryFn::elu, {static_cast<float>(a.alpha), 0}); },
                        [&](const Hardswish&) { return f(UnaryFn::hardswish); },
                        [&](const Unary& u) {
                          constexpr UnaryFn fns[] = {UnaryFn::exp, UnaryFn::log,      UnaryFn::sqrt,
                                                     UnaryFn::abs, UnaryFn::neg, UnaryFn::reciprocal};
                          return f(fns[static_cast<std::size_t>(u.op)]);
                        },
                        [&](const auto&) { return R(); },
                    },
                    op);
}

inline BinaryFn binary_fn(BinaryOp op) {
  constexpr BinaryFn fns[] = {BinaryFn::add, BinaryFn::sub,     BinaryFn::mul,    BinaryFn::div,
                              BinaryFn::pow, BinaryFn::maximum, BinaryFn::minimum};
  return fns[static_cast<std::size_t>(op)];
}
}  // namespace lowering_detail

/// One graph node -> its standard executable op (or none: Dropout is the identity at inference).
template <FloatElement T>
struct standard_node_lowering {
  using op_set = standard_ops<T>;

  Result<bool> lower_node(LoweringContext<op_set>& ctx, NodeId g) const {
    using namespace lowering_detail;
    const auto& node = ctx.graph().dag()[g];
    const TensorType& type = node.op.type;
    if (type.dtype != dtype_of<T>) {
      return fail(Errc::unsupported, "its output is ", type.dtype, ", but this lowering computes in ", dtype_of<T>);
    }
    const OpOutput out{type.shape, type.dtype};
    auto emit = [&](op_set op) -> Result<bool> {
      auto id = ctx.emit(g, std::move(op), ctx.inputs(g), node.name);
      if (!id) return std::move(id).error();
      return true;
    };
    if (auto act = activation_of(node.op.op)) return emit(unary_op<T>{act->first, act->second, out});
    return std::visit(overloaded{
                          [&](const Input&) { return emit(InputOp{node.name, type.shape, type.dtype}); },
                          [&](const Linear& l) { return emit(linear_op<T>{l, out}); },
                          [&](const MatMul&) { return emit(matmul_op<T>{out}); },
                          [&](const Binary& b) { return emit(binary_op<T>{binary_fn(b.op), out}); },
                          [&](const Flatten&) { return emit(reshape_op<T>{out}); },
                          [&](const Reshape&) { return emit(reshape_op<T>{out}); },
                          [&](const Dropout&) -> Result<bool> {
                            ctx.alias(g, ctx.input(g, 0));  // the identity at inference
                            return true;
                          },
                          [&](const auto&) -> Result<bool> { return false; },
                      },
                      node.op.op);
  }
};

/// Middleware: an activation whose only input is a Linear used nowhere else (and not a graph
/// output) becomes that Linear's epilogue; everything else goes to `Base`.
template <class Base>
struct fuse_activations {
  using op_set = typename Base::op_set;
  Base base;
  const Base* base_lowering() const { return &base; }

  Result<bool> lower_node(LoweringContext<op_set>& ctx, NodeId g) const {
    const Graph& graph = ctx.graph();
    const auto& node = graph.dag()[g];
    if (auto act = lowering_detail::activation_of(node.op.op); act && node.inputs.size() == 1) {
      const NodeId producer = node.inputs[0];
      const bool private_value = graph.dag().uses(producer).size() == 1 && !is_output(graph, producer);
      const NodeId dag_node = ctx.input(g, 0);
      // The DAG node must be the producer's own (not one it aliases, as a Dropout does), or
      // another user of that DAG node would see the activation too.
      if (private_value && ctx.dag()[dag_node].name == graph.dag()[producer].name) {
        bool fused = false;  // only ops with an epilogue (linear) take the activation
        std::visit(
            [&](auto& op) {
              if constexpr (requires { op.epilogue; }) {
                if (!op.epilogue.active) {
                  op.epilogue = Epilogue{true, act->first, act->second};
                  fused = true;
                }
              }
            },
            ctx.dag()[dag_node].op);
        if (fused) {
          ctx.alias(g, dag_node);
          return true;
        }
      }
    }
    return base.lower_node(ctx, g);
  }

 private:
  static bool is_output(const Graph& graph, NodeId id) {
    for (const auto& output : graph.outputs()) {
      if (output.node == id) return true;
    }
    return false;
  }
};

/// The standard lowering for element type T: standard ops with activations fused into Linears.
template <FloatElement T>
struct standard_lowering {
  using op_set = standard_ops<T>;
  fuse_activations<standard_node_lowering<T>> nodes{};

  Result<Lowered<op_set>> lower(const Graph& graph, LoweringMode mode) const {
    if (mode != LoweringMode::inference) {
      return fail(Errc::unsupported, "the standard lowering lowers for inference; ", name(mode),
                  " mode needs the training lowering");
    }
    return lower_graph(nodes, graph, mode);
  }
};

}  // namespace teeny
