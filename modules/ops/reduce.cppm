// teeny.ops:reduce — ops that combine elements along axes: softmax_op (softmax and log_softmax over
// one axis) and reduce_op (sum, mean, amax over a set of axes, keepdim or not). Their math is
// kernels/math/reduce.hpp, shared by the CPU and CUDA kernels.
//
//   softmax_op<float>{.axis = 1, .log = true, .out = {{batch, 10}}};     // torch.log_softmax(x, 1)
//   reduce_op<float>{.fn = ReduceFn::mean, .axes = {0, 2}, .out = ...};   // torch.mean(x, (0, 2))
module;
#include "math/reduce.hpp"
export module teeny.ops:reduce;
import teeny.std;
import teeny.core;
import teeny.model;
import :common;

export namespace teeny {

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
  /// maximum (PyTorch's rule for ties). dy is read broadcast over the reduced dims.
  using BackwardArgs = InputGradArgs<Args, T>;
  Result<BackwardArgs> pack_backward_args(const BackwardBindings& b) const { return pack_input_grad<T>(*this, b); }
  Dim3 backward_grid(std::span<const ConcreteShape> in, const ConcreteShape&) const {
    return {ceil_div(in.empty() ? 1 : in[0].numel(), 256), 1, 1};
  }
#endif
};
static_assert(RuntimeOp<reduce_op<float>>);
#if TEENY_TRAINING
static_assert(BackwardOp<reduce_op<float>>);
#endif

}  // namespace teeny
