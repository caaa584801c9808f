// teeny.runtime:standard_lowering — Graph -> Dag<standard_ops<T>> (or an extension of it), for
// inference or training.
//
// standard_node_lowering<T> maps each graph op to its executable op, keeping every attribute. Four
// middlewares fuse on top of it, each delegating what it does not fuse to its base:
// fold_batch_norm<Base> folds an eval-mode BatchNorm into the convolution before it (the weights
// are scaled at load), fold_residual_add<Base> folds a residual add into the convolution that
// computes one of its operands, fold_max_pool<Base> folds a 2-D max pool into the convolution
// before it (its kernel pools each image's output while it is in cache), and
// fuse_activations<Base> folds an activation into the Linear, Conv, BatchNorm or elementwise
// binary op before it (one pass with bias + activation). standard_lowering<T> is the five
// together, as a whole-graph Lowering. Lowered for training, the folds stand aside (BatchNorm runs
// on batch statistics, a residual add and a max pool keep their own backward), dropouts become
// dropout_op, and only activations whose derivative follows from their output fuse.
//
// A user with ops of their own extends it instead of rewriting it: standard_lowering<T, Ops,
// Middlewares...> emits into the extended op set Ops, with the user's middlewares on top.
//
//   auto lowered = standard_lowering<float>{}.lower(graph, LoweringMode::inference);
//   using my_ops = extend_ops<standard_ops<float>, swiglu_op<float>>;
//   auto mine = standard_lowering<float, my_ops, lower_swiglu>{}.lower(graph, LoweringMode::inference);
module;
#include "math/gradient.hpp"
export module teeny.runtime:standard_lowering;
import teeny.std;
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

// The activations: every graph op that lowers to unary_op, with the function it computes. These
// overloads are the one list; ActivationGraphOp and activation_of follow from them.
using Activation = std::pair<UnaryFn, UnaryParams>;
inline Activation activation(const ReLU&) { return {UnaryFn::relu, {}}; }
inline Activation activation(const LeakyReLU& a) { return {UnaryFn::leaky_relu, {a.negative_slope, 0}}; }
inline Activation activation(const Threshold& t) { return {UnaryFn::threshold, {t.threshold, t.value}}; }
inline Activation activation(const Hardshrink& h) { return {UnaryFn::hardshrink, {h.lambd, 0}}; }
inline Activation activation(const Softshrink& s) { return {UnaryFn::softshrink, {s.lambd, 0}}; }
inline Activation activation(const GELU& a) {
  return {a.approximate == GeluApproximate::tanh ? UnaryFn::gelu_tanh : UnaryFn::gelu_erf, {}};
}
inline Activation activation(const SiLU&) { return {UnaryFn::silu, {}}; }
inline Activation activation(const Sigmoid&) { return {UnaryFn::sigmoid, {}}; }
inline Activation activation(const Tanh&) { return {UnaryFn::tanh, {}}; }
inline Activation activation(const Softplus& a) { return {UnaryFn::softplus, {a.beta, a.threshold}}; }
inline Activation activation(const ELU& a) { return {UnaryFn::elu, {a.alpha, 0}}; }
inline Activation activation(const Hardswish&) { return {UnaryFn::hardswish, {}}; }
inline Activation activation(const Hardsigmoid&) { return {UnaryFn::hardsigmoid, {}}; }
inline Activation activation(const Unary& u) {
  switch (u.op) {
    case UnaryOp::exp: return {UnaryFn::exp, {}};
    case UnaryOp::log: return {UnaryFn::log, {}};
    case UnaryOp::sqrt: return {UnaryFn::sqrt, {}};
    case UnaryOp::abs: return {UnaryFn::abs, {}};
    case UnaryOp::neg: return {UnaryFn::neg, {}};
    case UnaryOp::reciprocal: return {UnaryFn::reciprocal, {}};
    case UnaryOp::erf: return {UnaryFn::erf, {}};
    case UnaryOp::sin: return {UnaryFn::sin, {}};
    case UnaryOp::cos: return {UnaryFn::cos, {}};
    case UnaryOp::tan: return {UnaryFn::tan, {}};
    case UnaryOp::asin: return {UnaryFn::asin, {}};
    case UnaryOp::acos: return {UnaryFn::acos, {}};
    case UnaryOp::atan: return {UnaryFn::atan, {}};
    case UnaryOp::sinh: return {UnaryFn::sinh, {}};
    case UnaryOp::cosh: return {UnaryFn::cosh, {}};
    case UnaryOp::asinh: return {UnaryFn::asinh, {}};
    case UnaryOp::acosh: return {UnaryFn::acosh, {}};
    case UnaryOp::atanh: return {UnaryFn::atanh, {}};
    case UnaryOp::floor: return {UnaryFn::floor, {}};
    case UnaryOp::ceil: return {UnaryFn::ceil, {}};
    case UnaryOp::round: return {UnaryFn::round, {}};
    case UnaryOp::sign: return {UnaryFn::sign, {}};
    case UnaryOp::count: break;
  }
  return {UnaryFn::exp, {}};  // not reached: Unary's op is one of the above
}

// A graph op that lowers to unary_op: one with an activation() above.
template <class Op>
concept ActivationGraphOp = requires(const Op& op) {
  { activation(op) } -> std::same_as<Activation>;
};

// The activation a graph op computes, if it is one.
inline std::optional<Activation> activation_of(const GraphOp& op) {
  return std::visit(
      []<class Op>(const Op& o) -> std::optional<Activation> {
        if constexpr (ActivationGraphOp<Op>) {
          return activation(o);
        } else {
          return std::nullopt;
        }
      },
      op);
}

// Whether an op's input `slot` may have a dtype other than the compute type (Cast: any; Embedding:
// integer indices; NllLoss: integer targets; Where: its bool condition), and whether its output
// may be one (Cast; ArgReduce's i64 indices; Compare's bools; graph inputs, checked by their
// readers).
inline bool reads_any_dtype(const GraphOp& op, std::size_t slot) {
  return std::holds_alternative<Cast>(op) || std::holds_alternative<Embedding>(op) ||
         (std::holds_alternative<NllLoss>(op) && slot == 1) || (std::holds_alternative<Where>(op) && slot == 0);
}
inline bool makes_any_dtype(const GraphOp& op) {
  return std::holds_alternative<Cast>(op) || std::holds_alternative<Input>(op) ||
         std::holds_alternative<ArgReduce>(op) || std::holds_alternative<Compare>(op);
}

// torch.transpose(dim0, dim1) as a permutation of `rank` dims.
inline std::vector<std::int64_t> transpose_dims(const Transpose& t, std::size_t rank) {
  std::vector<std::int64_t> dims;
  for (std::size_t i = 0; i < rank; ++i) dims.push_back(static_cast<std::int64_t>(i));
  const auto r = static_cast<std::int64_t>(rank);
  auto axis = [r](std::int64_t d) { return static_cast<std::size_t>((d % r + r) % r); };
  if (rank > 0) std::swap(dims[axis(t.dim0)], dims[axis(t.dim1)]);
  return dims;
}

// The first element of piece `s.index` along the split axis.
inline std::int64_t split_start(const Split& s) {
  std::int64_t start = 0;
  for (std::int64_t i = 0; i < s.index; ++i) start += s.sizes[static_cast<std::size_t>(i)];
  return start;
}

inline ReduceFn reduce_fn(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return ReduceFn::sum;
    case ReduceOp::mean: return ReduceFn::mean;
    case ReduceOp::max: return ReduceFn::max;
    case ReduceOp::prod: return ReduceFn::prod;
    case ReduceOp::count: break;
  }
  return ReduceFn::sum;  // not reached
}

inline BinaryFn binary_fn(BinaryOp op) {
  switch (op) {
    case BinaryOp::add: return BinaryFn::add;
    case BinaryOp::sub: return BinaryFn::sub;
    case BinaryOp::mul: return BinaryFn::mul;
    case BinaryOp::div: return BinaryFn::div;
    case BinaryOp::pow: return BinaryFn::pow;
    case BinaryOp::maximum: return BinaryFn::maximum;
    case BinaryOp::minimum: return BinaryFn::minimum;
    case BinaryOp::fmod: return BinaryFn::fmod;
    case BinaryOp::count: break;
  }
  return BinaryFn::add;  // not reached
}
}  // namespace lowering_detail

/// One graph node -> its standard executable op (or none: Dropout is the identity at inference).
/// Ops: the op set it emits into, standard_ops<T> or a superset (extend_ops<standard_ops<T>, ...>)
/// whose other ops a middleware above emits. Every GraphOp alternative has its case below, so a
/// new graph op without one does not compile; CustomOp (ops defined outside teeny) is the one
/// deliberately not lowered here.
template <FloatElement T, OpSetType Ops = standard_ops<T>>
struct standard_node_lowering {
  static_assert(contains_ops<Ops, standard_ops<T>>,
                "the standard lowering emits every standard op: extend standard_ops<T> (extend_ops) rather than "
                "replace it");
  using op_set = Ops;

  Result<bool> lower_node(LoweringContext<op_set>& ctx, NodeId g) const {
    using namespace lowering_detail;
    const auto& node = ctx.graph().dag()[g];
    const TensorType& type = node.op.type;
    // Everything computes in T, but for Cast (any dtype in and out) and the integer indices of
    // Embedding and NllLoss. Graph inputs may have any dtype: each reader checks its operands here,
    // before its output, so that the error names the input whose dtype the output follows.
    for (std::size_t slot = 0; slot < node.inputs.size(); ++slot) {
      if (reads_any_dtype(node.op.op, slot)) continue;
      const auto& producer = ctx.graph().dag()[node.inputs[slot]];
      const DType in = producer.op.type.dtype;
      if (in != dtype_of<T>) {
        return fail(Errc::unsupported, "input ", slot, " ('", producer.name, "') is ", in,
                    ", but this lowering computes in ", dtype_of<T>,
                    is_floating(in) ? cat(" (cast it first, or lower for ", in, ")") : std::string(" (cast it first)"));
      }
    }
    if (type.dtype != dtype_of<T> && !makes_any_dtype(node.op.op)) {
      return fail(Errc::unsupported, "its output is ", type.dtype, ", but this lowering computes in ", dtype_of<T>);
    }
    const OpOutput out{type.shape, type.dtype};
    auto emit = [&](op_set op) -> Result<bool> {
      auto id = ctx.emit(g, std::move(op), ctx.inputs(g), node.name);
      if (!id) return std::move(id).error();
      return true;
    };
    return std::visit(
        overloaded{
            [&]<ActivationGraphOp A>(const A&) {
              const auto act = activation_of(node.op.op);
              return emit(unary_op<T>{act->first, act->second, out});
            },
            [&](const Input&) { return emit(InputOp{node.name, type.shape, type.dtype}); },
            [&](const Weight& w) { return emit(weight_op<T>{w, out}); },
            [&](const Linear& l) { return emit(linear_op<T>{l, out}); },
            [&](const MatMul&) { return emit(matmul_op<T>{out}); },
            [&](const Binary& b) -> Result<bool> {
              binary_op<T> op{binary_fn(b.op), out};
              if (b.other) {  // a constant operand, the op's parameter
                auto dims = ConcreteShape::from(*b.other);
                if (!dims) return std::move(dims).error();
                op.other = *dims;
                op.other_first = b.other_first;
              }
              return emit(std::move(op));
            },
            [&](const Flatten&) { return emit(reshape_op<T>{out}); },
            [&](const Reshape&) { return emit(reshape_op<T>{out}); },
            [&](const Conv1d& c) { return emit(conv_op<T>::from(c, out)); },
            [&](const Conv2d& c) { return emit(conv_op<T>::from(c, out)); },
            [&](const MaxPool2d& p) { return emit(max_pool2d_op<T>{p, out}); },
            [&](const AvgPool2d& p) { return emit(avg_pool2d_op<T>{p, out}); },
            [&](const AdaptiveAvgPool2d& p) { return emit(adaptive_avg_pool2d_op<T>{p, out}); },
            [&](const BatchNorm& n) { return emit(batch_norm_op<T>{n, out}); },
            [&](const LayerNorm& n) { return emit(layer_norm_op<T>{n, out}); },
            [&](const RMSNorm& n) { return emit(rms_norm_op<T>{n, out}); },
            [&](const GroupNorm& n) { return emit(group_norm_op<T>{n, out}); },
            [&](const Softmax& s) { return emit(softmax_op<T>{s.axis, false, out}); },
            [&](const LogSoftmax& s) { return emit(softmax_op<T>{s.axis, true, out}); },
            [&](const Reduce& r) { return emit(reduce_op<T>{reduce_fn(r.op), r.axes, r.keepdim, out}); },
            [&](const ArgReduce& a) { return emit(arg_reduce_op<T>{a, out}); },
            [&](const CumSum& c) { return emit(cumsum_op<T>{c, out}); },
            [&](const Compare& c) { return emit(compare_op<T>{static_cast<CompareFn>(c.op), out}); },
            [&](const Where&) { return emit(where_op<T>{out}); },
            [&](const Hardmax& h) { return emit(hardmax_op<T>{h, out}); },
            [&](const NllLoss& l) { return emit(nll_loss_op<T>{l, out, node.inputs.size() == 3}); },
            [&](const Transpose& t) { return emit(permute_op<T>{transpose_dims(t, type.shape.rank()), out}); },
            [&](const Permute& p) { return emit(permute_op<T>{p.dims, out}); },
            [&](const Slice& s) { return emit(slice_op<T>{s.axis, s.start.value_or(0), s.step, out}); },
            [&](const Split& s) { return emit(slice_op<T>{s.axis, split_start(s), 1, out}); },
            [&](const Concat& c) { return emit(concat_op<T>{c.axis, node.inputs.size(), out}); },
            [&](const Pad& p) { return emit(pad_op<T>{p, out}); },
            [&](const Upsample& u) { return emit(upsample_op<T>{u, out}); },
            [&](const Cast& c) { return emit(cast_op<T>{c.dtype, out}); },
            [&](const Embedding& e) { return emit(embedding_op<T>{e, out}); },
            [&](const Attention& a) { return emit(attention_op<T>{a, out}); },
            [&](const Dropout& d) -> Result<bool> {
              if (ctx.mode() == LoweringMode::training) return emit(dropout_op<T>{d, g, out});
              ctx.alias(g, ctx.input(g, 0));  // the identity at inference
              return true;
            },
            [&](const CustomOp& c) -> Result<bool> {
              return fail(Errc::unsupported, "op '", c.name(),
                          "' is defined outside teeny and no middleware of this lowering lowers it (give "
                          "standard_lowering one: see docs/custom-ops.md)");
            },
        },
        node.op.op);
  }
};

/// Middleware: an activation whose only input is an op with an epilogue (Linear, Conv, BatchNorm,
/// binary) used nowhere else (and not a graph output) becomes that op's epilogue; everything else goes to
/// `Base`.
template <class Base>
struct fuse_activations {
  using op_set = typename Base::op_set;
  Base base;
  const Base* base_lowering() const { return &base; }

  Result<bool> lower_node(LoweringContext<op_set>& ctx, NodeId g) const {
    const Graph& graph = ctx.graph();
    const auto& node = graph.dag()[g];
    auto act = lowering_detail::activation_of(node.op.op);
    // For training only activations whose derivative follows from their output fuse: the fused op
    // keeps only the activated output for its backward.
    if (act && ctx.mode() == LoweringMode::training && !math::derivative_from_output(act->first, act->second)) {
      act.reset();
    }
    if (act && node.inputs.size() == 1) {
      const NodeId dag_node = ctx.input(g, 0);
      // No other reader may see the activation: the producer's value, and any other the DAG node
      // holds (a folded BatchNorm's input, or what a Dropout aliases), must be read only here.
      if (ctx.foldable(dag_node)) {
        bool fused = false;  // only ops with an epilogue take the activation
        std::visit(
            [&](auto& op) {
              if constexpr (requires { op.epilogue; }) {
                // Not after a folded max pool: the epilogue comes before the pool.
                bool pooled = false;
                if constexpr (requires { op.pool; }) pooled = op.pool.has_value();
                if (!op.epilogue.active && !pooled) {
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
};

/// Middleware: a BatchNorm that uses its running statistics (eval mode), whose input is a Conv1d
/// or Conv2d read nowhere else (and not a graph output), is folded into that convolution: the
/// conv_op takes the BatchNorm's parameters as `norm.*` slots, loaded from the BatchNorm's keys,
/// and its kernel scales the weights and shifts the bias at load. Everything else goes to `Base`.
template <class Base>
struct fold_batch_norm {
  using op_set = typename Base::op_set;
  Base base;
  const Base* base_lowering() const { return &base; }

  Result<bool> lower_node(LoweringContext<op_set>& ctx, NodeId g) const {
    const auto& node = ctx.graph().dag()[g];
    // Training runs BatchNorm on batch statistics, which no fold can precompute.
    if (ctx.mode() == LoweringMode::training) return base.lower_node(ctx, g);
    const auto* norm = std::get_if<BatchNorm>(&node.op.op);
    // eps > 0: the fold divides by sqrt(var + eps) at load, when the variance may still be zero.
    if (norm != nullptr && norm->track_running_stats && norm->eps > 0 && node.inputs.size() == 1) {
      const auto& producer = ctx.graph().dag()[node.inputs[0]];
      const bool after_conv =
          std::holds_alternative<Conv2d>(producer.op.op) || std::holds_alternative<Conv1d>(producer.op.op);
      const NodeId dag_node = ctx.input(g, 0);
      if (after_conv && ctx.foldable(dag_node)) {
        bool folded = false;
        std::visit(
            [&](auto& op) {
              if constexpr (requires { op.norm; }) {
                // Batched output only: a BatchNorm's channels are dim 1, the conv's only then.
                const bool batched = op.out.shape.rank() == static_cast<std::size_t>(op.spatial_dims) + 2;
                if (!op.norm && !op.epilogue.active && batched && op.attrs.out_channels == norm->num_features) {
                  op.norm = *norm;
                  folded = true;
                }
              }
            },
            ctx.dag()[dag_node].op);
        if (folded) {
          ctx.fold(g, dag_node, "norm");
          return true;
        }
      }
    }
    return base.lower_node(ctx, g);
  }
};

/// Middleware: an elementwise add of two same-shape values, one of them computed by a convolution
/// read nowhere else (after any BatchNorm folded into it), is folded into that convolution as a
/// residual input: ResNet's `out = bn2(conv2(...)); out += identity` becomes one conv step, whose
/// activation (a ReLU after the add, fused next by fuse_activations) comes after the sum.
/// Everything else goes to `Base`.
template <class Base>
struct fold_residual_add {
  using op_set = typename Base::op_set;
  Base base;
  const Base* base_lowering() const { return &base; }

  Result<bool> lower_node(LoweringContext<op_set>& ctx, NodeId g) const {
    const Graph& graph = ctx.graph();
    const auto& node = graph.dag()[g];
    const auto* add = std::get_if<Binary>(&node.op.op);
    // Training keeps the add: the folded convolution has no backward.
    if (ctx.mode() == LoweringMode::training) return base.lower_node(ctx, g);
    if (add == nullptr || add->op != BinaryOp::add || node.inputs.size() != 2) return base.lower_node(ctx, g);
    // No broadcasting: both operands have the sum's shape.
    for (const NodeId in : node.inputs) {
      if (graph.dag()[in].op.type != node.op.type) return base.lower_node(ctx, g);
    }
    for (std::size_t slot = 0; slot < 2; ++slot) {
      const NodeId conv_node = ctx.input(g, slot);
      const NodeId other = ctx.input(g, 1 - slot);
      if (conv_node == other || !ctx.foldable(conv_node)) continue;
      bool folded = false;
      std::visit(
          [&](auto& op) {
            if constexpr (requires { op.residual; }) {
              if (!op.residual && !op.epilogue.active) {
                op.residual = true;
                folded = true;
              }
            }
          },
          ctx.dag()[conv_node].op);
      if (!folded) continue;
      if (auto added = ctx.dag().add_input(conv_node, other); !added) return std::move(added).error();
      ctx.alias(g, conv_node);
      return true;
    }
    return base.lower_node(ctx, g);
  }
};

/// Middleware: a 2-D max pool whose input is a Conv2d read nowhere else (after any BatchNorm and
/// activation folded into it), with no residual add folded in, is folded into that convolution:
/// the conv_op's output becomes the pool's, y = max_pool(act(conv(x))), and its kernel pools each
/// image's output as it makes it (LeNet's `conv -> relu -> max_pool`). Everything else goes to
/// `Base`.
template <class Base>
struct fold_max_pool {
  using op_set = typename Base::op_set;
  Base base;
  const Base* base_lowering() const { return &base; }

  Result<bool> lower_node(LoweringContext<op_set>& ctx, NodeId g) const {
    const auto& node = ctx.graph().dag()[g];
    const auto* pool = std::get_if<MaxPool2d>(&node.op.op);
    // Training keeps the pool: the folded convolution has no backward.
    if (ctx.mode() == LoweringMode::training || pool == nullptr || node.inputs.size() != 1) {
      return base.lower_node(ctx, g);
    }
    const NodeId conv_node = ctx.input(g, 0);
    const Shape& pooled = node.op.type.shape;
    bool folded = false;
    if (ctx.foldable(conv_node)) {
      std::visit(
          [&](auto& op) {
            if constexpr (requires { op.pool, op.residual, op.spatial_dims; }) {
              // Batched 2-D only: [N, C, H, W] in and out.
              const bool batched = op.spatial_dims == 2 && op.out.shape.rank() == 4 && pooled.rank() == 4;
              if (!op.pool && !op.residual && batched) {
                op.pool = *pool;
                op.out = OpOutput{pooled, node.op.type.dtype};
                folded = true;
              }
            }
          },
          ctx.dag()[conv_node].op);
    }
    if (!folded) return base.lower_node(ctx, g);
    ctx.alias(g, conv_node);
    return true;
  }
};

/// A node lowering (a middleware chain) as a whole-graph Lowering.
template <NodeLowering Nodes>
struct graph_lowering {
  using op_set = typename Nodes::op_set;
  Nodes nodes{};

  Result<Lowered<op_set>> lower(const Graph& graph, LoweringMode mode) const {
#if !TEENY_TRAINING
    if (mode == LoweringMode::training) {
      return fail(Errc::unsupported, "this build of teeny has no training support (configure with -Dtraining=true)");
    }
#endif
    return lower_graph(nodes, graph, mode);
  }
};

/// The standard node lowering with its four middlewares: what standard_lowering runs.
template <FloatElement T, OpSetType Ops = standard_ops<T>>
using standard_node_chain =
    fuse_activations<fold_max_pool<fold_residual_add<fold_batch_norm<standard_node_lowering<T, Ops>>>>>;

namespace lowering_detail {
template <class Base, template <class> class... Middlewares>
struct stack {
  using type = Base;
};
template <class Base, template <class> class Outer, template <class> class... Rest>
struct stack<Base, Outer, Rest...> {
  using type = Outer<typename stack<Base, Rest...>::type>;
};
}  // namespace lowering_detail

/// The standard lowering for element type T: standard ops, batch norms and residual adds folded
/// into convolutions and activations fused where they can be. Inference folds and fuses all it
/// can; training (training builds) keeps BatchNorms and residual adds apart, runs dropouts, and
/// fuses only activations whose derivative follows from their output.
///
/// With ops of its own, a user extends it rather than rewriting it: Ops is the extended op set and
/// each Middleware<Base> (outermost first) lowers the user's graph ops and hands every other node
/// to its Base:
///   using my_ops = extend_ops<standard_ops<float>, swiglu_op<float>>;
///   using my_lowering = standard_lowering<float, my_ops, lower_swiglu>;
template <FloatElement T, OpSetType Ops = standard_ops<T>, template <class> class... Middlewares>
struct standard_lowering
    : graph_lowering<typename lowering_detail::stack<standard_node_chain<T, Ops>, Middlewares...>::type> {};

static_assert(Lowering<standard_lowering<float>> && Lowering<standard_lowering<double>>);

}  // namespace teeny
