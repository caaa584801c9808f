// teeny.ops:pool — 2-D pooling over the last two dims of [N, C, H, W] or [C, H, W]: max_pool2d_op,
// avg_pool2d_op and adaptive_avg_pool2d_op (torch.nn.MaxPool2d, AvgPool2d, AdaptiveAvgPool2d). The
// window rules (padding, ceil mode, divisors) are kernels/math/pool.hpp, shared by the backends.
export module teeny.ops:pool;
import teeny.std;
import teeny.core;
import teeny.graph;
import teeny.model;
import :common;

export namespace teeny {

namespace ops_detail {
// [planes, H, W]: every (n, c) plane of a [N, C, H, W] or [C, H, W] tensor.
inline ConcreteShape as_planes(const ConcreteShape& s) {
  const std::size_t rank = s.rank();
  return {s.numel() / (s[rank - 2] * s[rank - 1]), s[rank - 2], s[rank - 1]};
}

// x and y of a pooling op, viewed as planes.
template <FloatElement T>
Result<std::pair<TensorView<const T>, TensorView<T>>> pool_views(const OpBindings& b) {
  auto x = input_view<const T>(b, 0);
  auto y = output_view<T>(b);
  if (auto e = first_error(x, y)) return *e;
  auto xp = contiguous_as(*x, as_planes(x->shape), "input");
  auto yp = contiguous_as(*y, as_planes(y->shape), "output");
  if (auto e = first_error(xp, yp)) return *e;
  return std::pair{*xp, *yp};
}
}  // namespace ops_detail

template <FloatElement T>
struct Pool2dArgs {
  TensorView<const T> x;              // [planes, H, W]
  TensorView<T> y;                    // [planes, Ho, Wo]
  Window2d window;                    // unused by adaptive pooling, whose windows follow from the sizes
  bool count_include_pad = true;      // average pooling only
  std::int64_t divisor_override = 0;  // average pooling only; 0: none
  auto fields() const { return std::tie(x, y, window, count_include_pad, divisor_override); }
};

/// torch.nn.MaxPool2d: the padding counts as -inf, NaN propagates.
template <FloatElement T>
struct max_pool2d_op {
  using Args = Pool2dArgs<T>;
  MaxPool2d attrs;
  OpOutput out;

  std::string_view name() const { return "max_pool2d"; }
  const Shape& output_shape() const { return out.shape; }
  DType output_dtype() const { return dtype_of<T>; }
  KernelInstance kernel() const { return kernel_instance<"max_pool2d", "max_pool2d_backward", T>(); }
  std::size_t n_activation_inputs() const { return 1; }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const { return {}; }
  Result<Args> pack_args(const OpBindings& b) const {
    auto views = ops_detail::pool_views<T>(b);
    if (!views) return std::move(views).error();
    const Size2 s = attrs.effective_stride();
    const Window2d window{attrs.kernel.h,   attrs.kernel.w,  s.h, s.w, attrs.padding.h, attrs.padding.w,
                          attrs.dilation.h, attrs.dilation.w};
    return Args{views->first, views->second, window};
  }
  Dim3 block() const { return {256, 1, 1}; }
  Dim3 grid(const ConcreteShape& y) const { return {ceil_div(y.numel(), 256), 1, 1}; }

#if TEENY_TRAINING
  using BackwardArgs = InputGradArgs<Args, T>;  // dx[argmax of each window] += dy (the window's max recomputed from x)
  Result<BackwardArgs> pack_backward_args(const BackwardBindings& b) const { return pack_input_grad<T>(*this, b); }
  /// One thread per input element (each gathers from the windows that read it).
  Dim3 backward_grid(std::span<const ConcreteShape> in, const ConcreteShape&) const {
    return {ceil_div(in.empty() ? 1 : in[0].numel(), 256), 1, 1};
  }
#endif
};
static_assert(RuntimeOp<max_pool2d_op<float>>);
#if TEENY_TRAINING
static_assert(BackwardOp<max_pool2d_op<float>>);
#endif

/// torch.nn.AvgPool2d: zero padding, counted in the divisor or not; divisor_override replaces it.
template <FloatElement T>
struct avg_pool2d_op {
  using Args = Pool2dArgs<T>;
  AvgPool2d attrs;
  OpOutput out;

  std::string_view name() const { return "avg_pool2d"; }
  const Shape& output_shape() const { return out.shape; }
  DType output_dtype() const { return dtype_of<T>; }
  KernelInstance kernel() const { return kernel_instance<"avg_pool2d", "avg_pool2d_backward", T>(); }
  std::size_t n_activation_inputs() const { return 1; }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const { return {}; }
  Result<Args> pack_args(const OpBindings& b) const {
    auto views = ops_detail::pool_views<T>(b);
    if (!views) return std::move(views).error();
    const Size2 s = attrs.effective_stride();
    const Window2d window{attrs.kernel.h, attrs.kernel.w, s.h, s.w, attrs.padding.h, attrs.padding.w, 1, 1};
    return Args{views->first, views->second, window, attrs.count_include_pad, attrs.divisor_override.value_or(0)};
  }
  Dim3 block() const { return {256, 1, 1}; }
  Dim3 grid(const ConcreteShape& y) const { return {ceil_div(y.numel(), 256), 1, 1}; }

#if TEENY_TRAINING
  using BackwardArgs = InputGradArgs<Args, T>;  // each window's dx += dy / divisor
  Result<BackwardArgs> pack_backward_args(const BackwardBindings& b) const { return pack_input_grad<T>(*this, b); }
  /// One thread per input element (each gathers from the windows that read it).
  Dim3 backward_grid(std::span<const ConcreteShape> in, const ConcreteShape&) const {
    return {ceil_div(in.empty() ? 1 : in[0].numel(), 256), 1, 1};
  }
#endif
};
static_assert(RuntimeOp<avg_pool2d_op<float>>);
#if TEENY_TRAINING
static_assert(BackwardOp<avg_pool2d_op<float>>);
#endif

/// torch.nn.AdaptiveAvgPool2d: output (i, j) averages rows [floor(i*H/Ho), ceil((i+1)*H/Ho)) and
/// the same for columns. The output size is y's.
template <FloatElement T>
struct adaptive_avg_pool2d_op {
  using Args = Pool2dArgs<T>;
  AdaptiveAvgPool2d attrs;
  OpOutput out;

  std::string_view name() const { return "adaptive_avg_pool2d"; }
  const Shape& output_shape() const { return out.shape; }
  DType output_dtype() const { return dtype_of<T>; }
  KernelInstance kernel() const { return kernel_instance<"adaptive_avg_pool2d", "adaptive_avg_pool2d_backward", T>(); }
  std::size_t n_activation_inputs() const { return 1; }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const { return {}; }
  Result<Args> pack_args(const OpBindings& b) const {
    auto views = ops_detail::pool_views<T>(b);
    if (!views) return std::move(views).error();
    return Args{views->first, views->second, Window2d{}};
  }
  Dim3 block() const { return {256, 1, 1}; }
  Dim3 grid(const ConcreteShape& y) const { return {ceil_div(y.numel(), 256), 1, 1}; }

#if TEENY_TRAINING
  using BackwardArgs = InputGradArgs<Args, T>;  // each region's dx += dy / its size
  Result<BackwardArgs> pack_backward_args(const BackwardBindings& b) const { return pack_input_grad<T>(*this, b); }
  /// One thread per input element (each gathers from the windows that read it).
  Dim3 backward_grid(std::span<const ConcreteShape> in, const ConcreteShape&) const {
    return {ceil_div(in.empty() ? 1 : in[0].numel(), 256), 1, 1};
  }
#endif
};
static_assert(RuntimeOp<adaptive_avg_pool2d_op<float>>);
#if TEENY_TRAINING
static_assert(BackwardOp<adaptive_avg_pool2d_op<float>>);
#endif

}  // namespace teeny
