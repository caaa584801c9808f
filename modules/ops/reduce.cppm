// teeny.ops:reduce — ops that combine elements along axes: softmax_op (softmax and log_softmax over
// one axis), reduce_op (sum, mean, amax, prod over a set of axes, keepdim or not), cumsum_op,
// hardmax_op, arg_reduce_op (argmax, argmin) and nll_loss_op (F.nll_loss). Their math is
// kernels/math/reduce.hpp, shared by the CPU and CUDA kernels.
//
//   softmax_op<float>{.axis = 1, .log = true, .out = {{batch, 10}}};     // torch.log_softmax(x, 1)
//   reduce_op<float>{.fn = ReduceFn::mean, .axes = {0, 2}, .out = ...};   // torch.mean(x, (0, 2))
module;
#include "math/reduce.hpp"
export module teeny.ops:reduce;
import teeny.std;
import teeny.core;
import teeny.graph;
import teeny.model;
import :common;

export namespace teeny {

using math::LossMode;
using math::ReduceFn;

template <FloatElement T>
struct SoftmaxArgs {
  TensorView<const T> x;  // contiguous, read as [outer, n, inner] with the softmax over n
  TensorView<T> y;        // same shape
  std::int64_t outer = 1;
  std::int64_t n = 1;
  std::int64_t inner = 1;
  bool log = false;  // log_softmax
  auto fields() const { return std::tie(x, y, outer, n, inner, log); }
};

/// torch.softmax / torch.log_softmax along `axis` (negative from the end), max-subtracted.
template <FloatElement T>
struct softmax_op {
  using Args = SoftmaxArgs<T>;
  std::int64_t axis = -1;
  bool log = false;
  OpOutput out;

  std::string_view name() const { return log ? "log_softmax" : "softmax"; }
  const Shape& output_shape() const { return out.shape; }
  DType output_dtype() const { return dtype_of<T>; }
  KernelInstance kernel() const { return kernel_instance<"softmax", "softmax_backward", T>(); }
  std::size_t n_activation_inputs() const { return 1; }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const { return {}; }
  Result<Args> pack_args(const OpBindings& b) const {
    auto x = input_view<const T>(b, 0);
    auto y = output_view<T>(b);
    if (auto e = first_error(x, y)) return *e;
    auto xc = contiguous_as(*x, x->shape, "input");
    auto yc = contiguous_as(*y, x->shape, "output");
    if (auto e = first_error(xc, yc)) return *e;
    // A scalar is a softmax over one element (PyTorch accepts axis 0 and -1 for it).
    const auto rank = static_cast<std::int64_t>(x->rank());
    const std::int64_t a = axis < 0 ? axis + (rank == 0 ? 1 : rank) : axis;
    if (a < 0 || a >= (rank == 0 ? 1 : rank)) {
      return fail(Errc::out_of_range, "axis ", axis, " is out of range for input ", x->shape);
    }
    Args args{*xc, *yc, 1, 1, 1, log};
    for (std::int64_t d = 0; d < rank; ++d) {
      const std::int64_t size = x->shape[static_cast<std::size_t>(d)];
      if (d < a) args.outer *= size;
      if (d == a) args.n = size;
      if (d > a) args.inner *= size;
    }
    return args;
  }
  Dim3 block() const { return {256, 1, 1}; }
  /// One thread a softmax row: every element but those along the axis.
  Dim3 grid(const ConcreteShape& y) const {
    const auto rank = static_cast<std::int64_t>(y.rank());
    const std::int64_t a = axis < 0 ? axis + rank : axis;
    const std::int64_t n = (a >= 0 && a < rank) ? y[static_cast<std::size_t>(a)] : 1;
    return {ceil_div(n == 0 ? 0 : y.numel() / n, 256), 1, 1};
  }

#if TEENY_TRAINING
  /// softmax: dx += y * (dy - sum(dy * y)); log_softmax: dx += dy - exp(y) * sum(dy), per row.
  using BackwardArgs = InputGradArgs<Args, T>;
  Result<BackwardArgs> pack_backward_args(const BackwardBindings& b) const { return pack_input_grad<T>(*this, b); }
  Dim3 backward_grid(std::span<const ConcreteShape>, const ConcreteShape& y) const { return grid(y); }
#endif
};
static_assert(RuntimeOp<softmax_op<float>>);
#if TEENY_TRAINING
static_assert(BackwardOp<softmax_op<float>>);
#endif

template <FloatElement T>
struct ReduceArgs {
  TensorView<const T> x;  // as bound
  TensorView<T> y;        // contiguous, with x's rank: reduced dims have size 1 (keepdim's shape)
  ReduceFn fn = ReduceFn::sum;
  std::uint32_t reduced = 0;  // bit d set: dim d is reduced
  auto fields() const { return std::tie(x, y, fn, reduced); }
};

/// torch.sum / torch.mean / torch.amax over `axes` (empty: all), keepdim or not. Accumulates in
/// double, so long reductions keep f32 precision.
template <FloatElement T>
struct reduce_op {
  using Args = ReduceArgs<T>;
  ReduceFn fn = ReduceFn::sum;
  std::vector<std::int64_t> axes;
  bool keepdim = false;
  OpOutput out;

  std::string_view name() const {
    switch (fn) {
      case ReduceFn::sum: return "sum";
      case ReduceFn::mean: return "mean";
      case ReduceFn::max: return "max";
      case ReduceFn::prod: return "prod";
    }
    return "reduce";
  }
  const Shape& output_shape() const { return out.shape; }
  DType output_dtype() const { return dtype_of<T>; }
  KernelInstance kernel() const { return kernel_instance<"reduce", "reduce_backward", T>(); }
  std::size_t n_activation_inputs() const { return 1; }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const { return {}; }
  Result<Args> pack_args(const OpBindings& b) const {
    auto x = input_view<const T>(b, 0);
    auto y = output_view<T>(b);
    if (auto e = first_error(x, y)) return *e;
    const auto rank = static_cast<std::int64_t>(x->rank());
    std::uint32_t reduced = axes.empty() ? (std::uint32_t{1} << rank) - 1 : 0;
    for (std::int64_t a : axes) {
      const std::int64_t d = a < 0 ? a + rank : a;
      if (d < 0 || d >= rank) return fail(Errc::out_of_range, "axis ", a, " is out of range for input ", x->shape);
      reduced |= std::uint32_t{1} << d;
    }
    ConcreteShape kept = x->shape;
    for (std::int64_t d = 0; d < rank; ++d) {
      if ((reduced >> d) & 1u) kept[static_cast<std::size_t>(d)] = 1;
    }
    auto yc = contiguous_as(*y, kept, "output");
    if (!yc) return std::move(yc).error();
    return Args{*x, *yc, fn, reduced};
  }
  Dim3 block() const { return {256, 1, 1}; }
  Dim3 grid(const ConcreteShape& y) const { return {ceil_div(y.numel(), 256), 1, 1}; }

#if TEENY_TRAINING
  /// sum: dx += dy; mean: dx += dy / count; amax: dy shared evenly by the elements equal to the
  /// maximum (PyTorch's rule for ties). dy is read broadcast over the reduced dims. prod has no
  /// backward yet (planned: PyTorch's, which handles zeros without dividing by them).
  using BackwardArgs = InputGradArgs<Args, T>;
  bool has_backward() const { return fn != ReduceFn::prod; }
  Result<BackwardArgs> pack_backward_args(const BackwardBindings& b) const {
    if (fn == ReduceFn::prod) return fail(Errc::unsupported, "prod has no backward in teeny yet (planned)");
    return pack_input_grad<T>(*this, b);
  }
  Dim3 backward_grid(std::span<const ConcreteShape> in, const ConcreteShape&) const {
    return {ceil_div(in.empty() ? 1 : in[0].numel(), 256), 1, 1};
  }
#endif
};
static_assert(RuntimeOp<reduce_op<float>>);
#if TEENY_TRAINING
static_assert(BackwardOp<reduce_op<float>>);
#endif

/// A contiguous tensor read as [outer, n, inner] around one axis: lines of n elements, stride inner.
struct AxisLines {
  std::int64_t outer = 1;
  std::int64_t n = 1;
  std::int64_t inner = 1;
};
/// The lines of `shape` along `axis` (negative from the end); an error naming the input when the
/// axis is out of range.
inline Result<AxisLines> axis_lines(const ConcreteShape& shape, std::int64_t axis) {
  const auto rank = static_cast<std::int64_t>(shape.rank());
  const std::int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) return fail(Errc::out_of_range, "axis ", axis, " is out of range for input ", shape);
  AxisLines lines;
  for (std::int64_t d = 0; d < rank; ++d) {
    const std::int64_t size = shape[static_cast<std::size_t>(d)];
    if (d < a) lines.outer *= size;
    if (d == a) lines.n = size;
    if (d > a) lines.inner *= size;
  }
  return lines;
}

/// The arguments of the ops that walk lines along one axis (cumsum, hardmax): x and y contiguous,
/// of one shape, read as [outer, n, inner]; the flags are cumsum's.
template <FloatElement T>
struct AxisLinesArgs {
  TensorView<const T> x;
  TensorView<T> y;
  std::int64_t outer = 1;
  std::int64_t n = 1;
  std::int64_t inner = 1;
  bool exclusive = false;
  bool reverse = false;
  auto fields() const { return std::tie(x, y, outer, n, inner, exclusive, reverse); }
};

namespace ops_detail {
template <class T>
Result<AxisLinesArgs<T>> pack_axis_lines(const OpBindings& b, std::int64_t axis, bool exclusive, bool reverse) {
  auto x = input_view<const T>(b, 0);
  auto y = output_view<T>(b);
  if (auto e = first_error(x, y)) return *e;
  auto lines = axis_lines(x->shape, axis);
  if (!lines) return std::move(lines).error();
  auto xc = contiguous_as(*x, x->shape, "input");
  auto yc = contiguous_as(*y, x->shape, "output");
  if (auto e = first_error(xc, yc)) return *e;
  return AxisLinesArgs<T>{*xc, *yc, lines->outer, lines->n, lines->inner, exclusive, reverse};
}
}  // namespace ops_detail

/// torch.cumsum with ONNX's exclusive and reverse (graph op CumSum). Sums in double along each
/// line, in order, as PyTorch's CPU accumulates floats.
template <FloatElement T>
struct cumsum_op {
  using Args = AxisLinesArgs<T>;
  CumSum attrs;
  OpOutput out;

  std::string_view name() const { return "cumsum"; }
  const Shape& output_shape() const { return out.shape; }
  DType output_dtype() const { return dtype_of<T>; }
  KernelInstance kernel() const { return kernel_instance<"cumsum", "cumsum_backward", T>(); }
  std::size_t n_activation_inputs() const { return 1; }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const { return {}; }
  Result<Args> pack_args(const OpBindings& b) const {
    return ops_detail::pack_axis_lines<T>(b, attrs.axis, attrs.exclusive, attrs.reverse);
  }
  Dim3 block() const { return {256, 1, 1}; }
  /// A thread a line.
  Dim3 grid(const ConcreteShape& y) const {
    auto lines = axis_lines(y, attrs.axis);
    return {ceil_div(lines ? lines->outer * lines->inner : 1, 256), 1, 1};
  }

#if TEENY_TRAINING
  /// dx += the cumsum of dy in the other direction, exclusive as the forward.
  using BackwardArgs = InputGradArgs<Args, T>;
  Result<BackwardArgs> pack_backward_args(const BackwardBindings& b) const { return pack_input_grad<T>(*this, b); }
  Dim3 backward_grid(std::span<const ConcreteShape>, const ConcreteShape& y) const { return grid(y); }
#endif
};
static_assert(RuntimeOp<cumsum_op<float>>);
#if TEENY_TRAINING
static_assert(BackwardOp<cumsum_op<float>>);
#endif

/// ONNX's Hardmax (graph op Hardmax): no backward, as its gradient is 0 wherever it has one.
template <FloatElement T>
struct hardmax_op {
  using Args = AxisLinesArgs<T>;
  Hardmax attrs;
  OpOutput out;

  std::string_view name() const { return "hardmax"; }
  const Shape& output_shape() const { return out.shape; }
  DType output_dtype() const { return dtype_of<T>; }
  KernelInstance kernel() const { return {kernel_ref<"hardmax", T>(), std::nullopt}; }
  std::size_t n_activation_inputs() const { return 1; }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const { return {}; }
  Result<Args> pack_args(const OpBindings& b) const {
    return ops_detail::pack_axis_lines<T>(b, attrs.axis, false, false);
  }
  Dim3 block() const { return {256, 1, 1}; }
  /// A thread a line.
  Dim3 grid(const ConcreteShape& y) const {
    auto lines = axis_lines(y, attrs.axis);
    return {ceil_div(lines ? lines->outer * lines->inner : 1, 256), 1, 1};
  }
};
static_assert(RuntimeOp<hardmax_op<float>>);

template <FloatElement T>
struct ArgReduceArgs {
  TensorView<const T> x;       // contiguous, read as [outer, n, inner], the search along n
  TensorView<std::int64_t> y;  // [outer * inner], contiguous
  std::int64_t outer = 1;
  std::int64_t n = 1;
  std::int64_t inner = 1;
  bool min = false;   // argmin
  bool last = false;  // select_last_index
  auto fields() const { return std::tie(x, y, outer, n, inner, min, last); }
};

/// torch.argmax / torch.argmin along one axis (graph op ArgReduce says the rules): i64 indices,
/// no backward (an index has no gradient).
template <FloatElement T>
struct arg_reduce_op {
  using Args = ArgReduceArgs<T>;
  ArgReduce attrs;
  OpOutput out;

  std::string_view name() const { return attrs.name(); }
  const Shape& output_shape() const { return out.shape; }
  DType output_dtype() const { return DType::i64; }
  KernelInstance kernel() const { return {kernel_ref<"arg_reduce", T>(), std::nullopt}; }
  std::size_t n_activation_inputs() const { return 1; }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const { return {}; }
  Result<Args> pack_args(const OpBindings& b) const {
    auto x = input_view<const T>(b, 0);
    auto y = output_view<std::int64_t>(b);
    if (auto e = first_error(x, y)) return *e;
    auto lines = axis_lines(x->shape, attrs.axis);
    if (!lines) return std::move(lines).error();
    Args args{{}, {}, lines->outer, lines->n, lines->inner, attrs.op == ArgOp::min, attrs.select_last_index};
    if (args.n == 0) return fail(Errc::shape_mismatch, name(), " over an empty dim of ", x->shape);
    auto xc = contiguous_as(*x, x->shape, "input");
    auto yc = contiguous_as(*y, {args.outer * args.inner}, "output");
    if (auto e = first_error(xc, yc)) return *e;
    args.x = *xc;
    args.y = *yc;
    return args;
  }
  Dim3 block() const { return {256, 1, 1}; }
  /// A thread an output (a line along the axis).
  Dim3 grid(const ConcreteShape& y) const { return {ceil_div(y.numel(), 256), 1, 1}; }
};
static_assert(RuntimeOp<arg_reduce_op<float>>);

template <FloatElement T>
struct NllLossArgs {
  TensorView<const T> x;         // [n, classes, inner], contiguous
  const void* target = nullptr;  // [n, inner] integers of `target_dtype`, contiguous
  DType target_dtype = DType::i64;
  TensorView<const T> weight;  // [classes], or empty (every weight 1)
  TensorView<T> y;             // [n * inner] (mode none) or [1], contiguous
  std::int64_t n = 0;
  std::int64_t classes = 0;
  std::int64_t inner = 1;
  bool ignoring = false;  // whether ignore_index applies
  std::int64_t ignore_index = 0;
  LossMode mode = LossMode::mean;
  auto fields() const {
    return std::tie(x, target, target_dtype, weight, y, n, classes, inner, ignoring, ignore_index, mode);
  }
};

#if TEENY_TRAINING
template <FloatElement T>
struct NllLossBackwardArgs {
  NllLossArgs<T> forward;
  TensorView<T> dy;       // as y
  TensorView<T> dx;       // as x, or empty
  TensorView<T> dweight;  // as weight, or empty
  auto fields() const { return std::tie(forward, dy, dx, dweight); }
};
#endif

/// F.nll_loss: inputs log-probabilities [N, C, d...], integer targets [N, d...] and optionally
/// class weights [C] (graph op NllLoss says the rules). The sums accumulate in double in target
/// order, so the result is the same on every run and backend.
template <FloatElement T>
struct nll_loss_op {
  using Args = NllLossArgs<T>;
  NllLoss attrs;
  OpOutput out;
  bool weighted = false;  // class weights as input 2

  std::string_view name() const { return "nll_loss"; }
  const Shape& output_shape() const { return out.shape; }
  DType output_dtype() const { return dtype_of<T>; }
  KernelInstance kernel() const { return kernel_instance<"nll_loss", "nll_loss_backward", T>(); }
  std::size_t n_activation_inputs() const { return weighted ? 3 : 2; }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const { return {}; }
  Result<Args> pack_args(const OpBindings& b) const {
    auto x = input_view<const T>(b, 0);
    auto y = output_view<T>(b);
    if (auto e = first_error(x, y)) return *e;
    if (b.inputs.size() < 2) return fail(Errc::invalid_argument, "missing input 1 (the target)");
    const TensorBinding& target = b.inputs[1];
    if (!is_integral(target.dtype)) {
      return fail(Errc::dtype_mismatch, "target ", target.shape, " is ", target.dtype, ", not integers");
    }
    if (target.row_stride != 0 && target.row_stride != target.shape.last()) {
      return fail(Errc::unsupported, "target ", target.shape, " is not contiguous");
    }
    if (x->rank() < 2) return fail(Errc::shape_mismatch, "input ", x->shape, " is not [N, C, d...]");
    Args args;
    args.n = x->shape[0];
    args.classes = x->shape[1];
    args.inner = x->numel() / std::max<std::int64_t>(1, args.n * args.classes);
    if (target.shape.numel() != args.n * args.inner) {
      return fail(Errc::shape_mismatch, "target ", target.shape, " does not fit input ", x->shape);
    }
    auto xc = contiguous_as(*x, {args.n, args.classes, args.inner}, "input");
    const std::int64_t outputs = attrs.reduction == LossReduction::none ? args.n * args.inner : 1;
    auto yc = contiguous_as(*y, {outputs}, "output");
    if (auto e = first_error(xc, yc)) return *e;
    args.x = *xc;
    args.y = *yc;
    args.target = target.data;
    args.target_dtype = target.dtype;
    if (weighted) {
      auto w = input_view<const T>(b, 2);
      if (!w) return std::move(w).error();
      auto wc = contiguous_as(*w, {args.classes}, "weight");
      if (!wc) return std::move(wc).error();
      args.weight = *wc;
    }
    args.ignoring = attrs.ignore_index.has_value();
    args.ignore_index = attrs.ignore_index.value_or(0);
    args.mode = static_cast<LossMode>(attrs.reduction);
    return args;
  }
  Dim3 block() const { return {256, 1, 1}; }
  /// none: a thread a term; sum and mean: one block, whose threads sum strided partials that its
  /// first thread adds in order (the same result every run).
  Dim3 grid(const ConcreteShape& y) const {
    return {attrs.reduction == LossReduction::none ? ceil_div(y.numel(), 256) : 1, 1, 1};
  }

#if TEENY_TRAINING
  /// dx[n, t, d] += -weight[t] * g and dweight[t] += -x[n, t, d] * g (mean: (-x - y) * g, the
  /// loss's own y, as the weights also divide), g the term's dy (none) or the loss's, divided by
  /// the summed weights for mean. PyTorch gives the weights no gradient; teeny does, as it is
  /// well defined. The target gets none.
  using BackwardArgs = NllLossBackwardArgs<T>;
  Result<BackwardArgs> pack_backward_args(const BackwardBindings& b) const {
    auto forward = pack_args(forward_bindings(b));
    if (!forward) return std::move(forward).error();
    BackwardArgs g{*forward, {}, {}, {}};
    if (auto e = first_error(bind_grad_output(b, g.forward.y, g.dy), bind_grad_input(b, 0, g.forward.x, g.dx),
                             bind_grad_input(b, 2, g.forward.weight, g.dweight))) {
      return *e;
    }
    return g;
  }
  /// A thread a term (dx) and a thread a class (dweight, summing its terms in order).
  Dim3 backward_grid(std::span<const ConcreteShape> in, const ConcreteShape&) const {
    const std::int64_t terms = in.size() > 1 ? in[1].numel() : 1;
    const std::int64_t classes = !in.empty() && in[0].rank() > 1 ? in[0][1] : 1;
    return {ceil_div(std::max(terms, classes), 128), 1, 1};
  }
#endif
};
static_assert(RuntimeOp<nll_loss_op<float>>);
#if TEENY_TRAINING
static_assert(BackwardOp<nll_loss_op<float>>);
#endif
static_assert(static_cast<int>(LossMode::none) == static_cast<int>(LossReduction::none) &&
                  static_cast<int>(LossMode::mean) == static_cast<int>(LossReduction::mean) &&
                  static_cast<int>(LossMode::sum) == static_cast<int>(LossReduction::sum) && loss_reduction_count == 3,
              "kernels/math/reduce.hpp's LossMode has the graph's LossReduction values in the same order");

}  // namespace teeny
