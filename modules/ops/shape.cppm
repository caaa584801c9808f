// teeny.ops:shape — ops that move data without arithmetic: reshape (Flatten, Reshape), permute
// (Transpose, Permute), slice (Slice, Split / chunk pieces), concat, pad, nearest upsampling,
// cast (Tensor.to), and weights broadcast into a value (Weight). Their index rules and
// conversions are kernels/math/shape.hpp. Each has a backward in training builds (a cast only to a
// floating dtype).
module;
#include "math/shape.hpp"
export module teeny.ops:shape;
import teeny.std;
import teeny.core;
import teeny.graph;
import teeny.model;
import :common;

export namespace teeny {

template <Element T>
struct CopyArgs {
  TensorView<const T> x;
  TensorView<T> y;  // same element count, contiguous
  auto fields() const { return std::tie(x, y); }
};

/// Flatten / Reshape: the same elements in row-major order under a new shape.
template <Element T>
struct reshape_op {
  using Args = CopyArgs<T>;
  OpOutput out;

  std::string_view name() const { return "reshape"; }
  bool output_may_alias_input() const { return true; }  // the same elements in the same order
  const Shape& output_shape() const { return out.shape; }
  DType output_dtype() const { return dtype_of<T>; }
  KernelInstance kernel() const { return kernel_instance<"copy", "copy_backward", T>(); }
  std::size_t n_activation_inputs() const { return 1; }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const { return {}; }
  Result<Args> pack_args(const OpBindings& b) const {
    auto x = input_view<const T>(b, 0);
    auto y = output_view<T>(b);
    if (auto e = first_error(x, y)) return *e;
    if (x->numel() != y->numel()) {
      return fail(Errc::shape_mismatch, "reshape of ", x->shape, " into ", y->shape, " changes the element count");
    }
    return Args{*x, *y};
  }
  Dim3 block() const { return {256, 1, 1}; }
  Dim3 grid(const ConcreteShape& y) const { return {ceil_div(y.numel(), 256), 1, 1}; }

#if TEENY_TRAINING
  using BackwardArgs = InputGradArgs<Args, T>;  // dx += dy, element for element
  Result<BackwardArgs> pack_backward_args(const BackwardBindings& b) const { return pack_input_grad<T>(*this, b); }
  Dim3 backward_grid(std::span<const ConcreteShape>, const ConcreteShape& y) const { return grid(y); }
#endif
};
static_assert(RuntimeOp<reshape_op<float>>);
#if TEENY_TRAINING
static_assert(BackwardOp<reshape_op<float>>);
#endif

template <Element T>
struct StridedCopyArgs {
  TensorView<const T> x;  // read through its strides (a permuted or sliced view of the input)
  TensorView<T> y;        // same shape, written through its strides (a concat writes a slab of y)
  auto fields() const { return std::tie(x, y); }
};

/// Weight: the parameter "value" copied into the output, broadcast to its shape (value read with
/// stride 0 along the dims it is repeated on). Its backward sums dy over those dims into the
/// parameter's gradient.
template <FloatElement T>
struct weight_op {
  using Args = StridedCopyArgs<T>;
  Weight attrs;
  OpOutput out;

  std::string_view name() const { return "weight"; }
  const Shape& output_shape() const { return out.shape; }
  DType output_dtype() const { return dtype_of<T>; }
  KernelInstance kernel() const { return kernel_instance<"strided_copy", "broadcast_add", T>(); }
  std::size_t n_activation_inputs() const { return 0; }
  std::span<const std::string_view> param_names() const {
    static constexpr std::string_view slots[] = {"value"};
    return slots;
  }
  bool param_trainable(std::size_t) const { return attrs.trainable; }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const {
    auto shape = ConcreteShape::from(attrs.value_shape);
    if (!shape) return {};  // the graph op's infer refused it first
    return {*shape};
  }
  Result<Args> pack_args(const OpBindings& b) const {
    auto value = param_view<const T>(b, 0);
    auto y = output_view<T>(b);
    if (auto e = first_error(value, y)) return *e;
    if (auto e = check_broadcast(value->shape, y->shape); !e) return std::move(e).error();
    return Args{broadcast_to(*value, y->shape), *y};
  }
  Dim3 block() const { return {256, 1, 1}; }
  Dim3 grid(const ConcreteShape& y) const { return {ceil_div(y.numel(), 256), 1, 1}; }

#if TEENY_TRAINING
  /// dvalue += dy summed over the broadcast dims: dx is the parameter's gradient, viewed broadcast.
  using BackwardArgs = InputGradArgs<Args, T>;
  Result<BackwardArgs> pack_backward_args(const BackwardBindings& b) const {
    const OpBindings fb = forward_bindings(b);
    auto forward = pack_args(fb);
    auto value = param_view<const T>(fb, 0);
    if (auto e = first_error(forward, value)) return *e;
    BackwardArgs g{*forward, {}, {}};
    if (auto e = first_error(bind_grad_output(b, g.forward.y, g.dy), bind_grad_param(b, 0, *value, g.dx))) return *e;
    if (g.dx.data != nullptr) g.dx = broadcast_to(g.dx, g.forward.y.shape);
    return g;
  }
  /// One thread per element of the parameter, each summing its terms in order (no atomics).
  Dim3 backward_grid(std::span<const ConcreteShape>, const ConcreteShape&) const {
    std::int64_t n = 1;
    for (const std::int64_t d : attrs.value_shape) n *= d;
    return {ceil_div(std::max<std::int64_t>(n, 1), 256), 1, 1};
  }
#endif

 private:
  static Result<void> check_broadcast(const ConcreteShape& value, const ConcreteShape& y) {
    bool fits = value.rank() <= y.rank();
    for (std::size_t i = 0; fits && i < value.rank(); ++i) {
      const std::int64_t v = value[i];
      fits = v == 1 || v == y[y.rank() - value.rank() + i];
    }
    if (!fits) return fail(Errc::shape_mismatch, "value ", value, " does not broadcast to the output ", y);
    return ok();
  }
};
static_assert(RuntimeOp<weight_op<float>>);
#if TEENY_TRAINING
static_assert(BackwardOp<weight_op<float>>);
#endif

namespace ops_detail {
// `axis` (negative from the end) as an index into a shape of `rank` dims.
inline Result<std::size_t> shape_axis(std::int64_t axis, std::size_t rank, const ConcreteShape& of) {
  const auto r = static_cast<std::int64_t>(rank);
  const std::int64_t a = axis < 0 ? axis + r : axis;
  if (a < 0 || a >= r) return fail(Errc::out_of_range, "axis ", axis, " is out of range for ", of);
  return static_cast<std::size_t>(a);
}
}  // namespace ops_detail

#if TEENY_TRAINING
namespace ops_detail {
// The backward of a strided copy of input `input` into (a slab of) the output, `forward`: dx and dy
// viewed exactly as the forward viewed x and y (the same offsets and strides, on the gradients'
// buffers), so that the kernel adds dy into dx through them.
template <Element T>
Result<InputGradArgs<StridedCopyArgs<T>, T>> strided_copy_grad(const StridedCopyArgs<T>& forward,
                                                               const BackwardBindings& b, std::size_t input) {
  const OpBindings fb = forward_bindings(b);
  auto x = input_view<const T>(fb, input);
  auto y = output_view<T>(fb);
  if (auto e = first_error(x, y)) return *e;
  TensorView<T> dx;
  TensorView<T> dy;
  if (auto e = first_error(bind_grad_input(b, input, *x, dx), bind_grad_output(b, *y, dy))) return *e;
  InputGradArgs<StridedCopyArgs<T>, T> g{forward, {}, {}};
  g.dy = TensorView<T>(dy.data + (forward.y.data - y->data), forward.y.shape, forward.y.strides);
  if (dx.data != nullptr)
    g.dx = TensorView<T>(dx.data + (forward.x.data - x->data), forward.x.shape, forward.x.strides);
  return g;
}
}  // namespace ops_detail
#endif

/// torch.permute (and torch.transpose): output dim i is input dim dims[i] (negative from the end).
template <Element T>
struct permute_op {
  using Args = StridedCopyArgs<T>;
  std::vector<std::int64_t> dims;
  OpOutput out;

  std::string_view name() const { return "permute"; }
  const Shape& output_shape() const { return out.shape; }
  DType output_dtype() const { return dtype_of<T>; }
  KernelInstance kernel() const { return kernel_instance<"strided_copy", "strided_add", T>(); }
  std::size_t n_activation_inputs() const { return 1; }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const { return {}; }
  Result<Args> pack_args(const OpBindings& b) const {
    auto x = input_view<const T>(b, 0);
    auto y = output_view<T>(b);
    if (auto e = first_error(x, y)) return *e;
    if (dims.size() != x->rank()) {
      return fail(Errc::shape_mismatch, "permutation of ", dims.size(), " dims for input ", x->shape);
    }
    TensorView<const T> view = *x;
    for (std::size_t i = 0; i < dims.size(); ++i) {
      auto d = ops_detail::shape_axis(dims[i], x->rank(), x->shape);
      if (!d) return std::move(d).error();
      view.shape[i] = x->shape[*d];
      view.strides[i] = x->strides[*d];
    }
    if (view.shape != y->shape) {
      return fail(Errc::shape_mismatch, "input ", x->shape, " permuted is ", view.shape, ", not the output ", y->shape);
    }
    return Args{view, *y};
  }
  Dim3 block() const { return {256, 1, 1}; }
  Dim3 grid(const ConcreteShape& y) const { return {ceil_div(y.numel(), 256), 1, 1}; }

#if TEENY_TRAINING
  using BackwardArgs = InputGradArgs<Args, T>;  // dx += dy through the forward's strides
  Result<BackwardArgs> pack_backward_args(const BackwardBindings& b) const {
    auto forward = pack_args(forward_bindings(b));
    if (!forward) return std::move(forward).error();
    return ops_detail::strided_copy_grad<T>(*forward, b, 0);
  }
  Dim3 backward_grid(std::span<const ConcreteShape>, const ConcreteShape& y) const { return grid(y); }
#endif
};
static_assert(RuntimeOp<permute_op<float>>);
#if TEENY_TRAINING
static_assert(BackwardOp<permute_op<float>>);
#endif

/// x[start::step] along `axis`, as many elements as the output holds: a Slice, or one piece of a
/// Split / chunk. start counts from the end when negative and clamps to the dim, as in Python.
template <Element T>
struct slice_op {
  using Args = StridedCopyArgs<T>;
  std::int64_t axis = 0;
  std::int64_t start = 0;
  std::int64_t step = 1;
  OpOutput out;

  std::string_view name() const { return "slice"; }
  const Shape& output_shape() const { return out.shape; }
  DType output_dtype() const { return dtype_of<T>; }
  KernelInstance kernel() const { return kernel_instance<"strided_copy", "strided_add", T>(); }
  std::size_t n_activation_inputs() const { return 1; }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const { return {}; }
  Result<Args> pack_args(const OpBindings& b) const {
    auto x = input_view<const T>(b, 0);
    auto y = output_view<T>(b);
    if (auto e = first_error(x, y)) return *e;
    auto a = ops_detail::shape_axis(axis, x->rank(), x->shape);
    if (!a) return std::move(a).error();
    const std::int64_t n = x->shape[*a];
    std::int64_t first = start < 0 ? start + n : start;
    first = first < 0 ? 0 : (first > n ? n : first);
    const std::int64_t count = y->rank() == x->rank() ? y->shape[*a] : -1;
    if (step < 1 || count < 0 || (count > 0 && first + (count - 1) * step >= n)) {
      return fail(Errc::shape_mismatch, "slice [", first, "::", step, "] of dim ", *a, " of input ", x->shape,
                  " cannot fill the output ", y->shape);
    }
    TensorView<const T> view = *x;
    if (count > 0) view.data += first * x->strides[*a];
    view.strides[*a] *= step;
    view.shape[*a] = count;
    if (view.shape != y->shape) {
      return fail(Errc::shape_mismatch, "a slice of input ", x->shape, " along dim ", *a, " is not the output ",
                  y->shape);
    }
    return Args{view, *y};
  }
  Dim3 block() const { return {256, 1, 1}; }
  Dim3 grid(const ConcreteShape& y) const { return {ceil_div(y.numel(), 256), 1, 1}; }

#if TEENY_TRAINING
  using BackwardArgs = InputGradArgs<Args, T>;  // dx += dy through the forward's strides
  Result<BackwardArgs> pack_backward_args(const BackwardBindings& b) const {
    auto forward = pack_args(forward_bindings(b));
    if (!forward) return std::move(forward).error();
    return ops_detail::strided_copy_grad<T>(*forward, b, 0);
  }
  Dim3 backward_grid(std::span<const ConcreteShape>, const ConcreteShape& y) const { return grid(y); }
#endif
};
static_assert(RuntimeOp<slice_op<float>>);
#if TEENY_TRAINING
static_assert(BackwardOp<slice_op<float>>);
#endif

/// torch.cat along `axis` of `inputs` tensors: one launch per input, each copying it into its slab
/// of the output (so the argument list stays fixed whatever the number of inputs).
template <Element T>
struct concat_op {
  using Args = StridedCopyArgs<T>;
  std::int64_t axis = 0;
  std::size_t inputs = 1;
  OpOutput out;

  std::string_view name() const { return "concat"; }
  const Shape& output_shape() const { return out.shape; }
  DType output_dtype() const { return dtype_of<T>; }
  KernelInstance kernel() const { return kernel_instance<"strided_copy", "strided_add", T>(); }
  std::size_t n_activation_inputs() const { return inputs; }
  std::size_t n_launches() const { return inputs; }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const { return {}; }
  Result<Args> pack_args(const OpBindings& b) const { return pack_args_for_launch(0, b); }
  Result<Args> pack_args_for_launch(std::size_t launch, const OpBindings& b) const {
    auto x = input_view<const T>(b, launch);
    auto y = output_view<T>(b);
    if (auto e = first_error(x, y)) return *e;
    auto a = ops_detail::shape_axis(axis, y->rank(), y->shape);
    if (!a) return std::move(a).error();
    std::int64_t offset = 0;  // where this input's slab starts along the axis
    for (std::size_t i = 0; i < launch; ++i) offset += b.inputs[i].shape.rank() > *a ? b.inputs[i].shape[*a] : 0;
    TensorView<T> slab = *y;
    slab.shape = x->shape;
    bool fits = x->rank() == y->rank() && offset + x->shape[*a] <= y->shape[*a];
    for (std::size_t d = 0; fits && d < y->rank(); ++d) fits = d == *a || x->shape[d] == y->shape[d];
    if (!fits) {
      return fail(Errc::shape_mismatch, "input ", launch, " ", x->shape, " does not fit the output ", y->shape,
                  " at offset ", offset, " of dim ", *a);
    }
    if (x->numel() > 0) slab.data += offset * y->strides[*a];
    return Args{*x, slab};
  }
  Dim3 block() const { return {256, 1, 1}; }
  Dim3 grid(const ConcreteShape& y) const { return {ceil_div(y.numel(), 256), 1, 1}; }
  Dim3 grid_for_launch(std::size_t launch, std::span<const ConcreteShape> in, const ConcreteShape& y) const {
    return {ceil_div(launch < in.size() ? in[launch].numel() : y.numel(), 256), 1, 1};
  }

#if TEENY_TRAINING
  // One backward launch per input, as forward: dx_i += the slab of dy input i was copied into.
  using BackwardArgs = InputGradArgs<Args, T>;
  std::size_t n_backward_launches() const { return inputs; }
  Result<BackwardArgs> pack_backward_args(const BackwardBindings& b) const {
    return pack_backward_args_for_launch(0, b);
  }
  Result<BackwardArgs> pack_backward_args_for_launch(std::size_t launch, const BackwardBindings& b) const {
    auto forward = pack_args_for_launch(launch, forward_bindings(b));
    if (!forward) return std::move(forward).error();
    return ops_detail::strided_copy_grad<T>(*forward, b, launch);
  }
  Dim3 backward_grid(std::span<const ConcreteShape> in, const ConcreteShape& y) const {
    return grid_for_launch(0, in, y);
  }
  Dim3 backward_grid_for_launch(std::size_t launch, std::span<const ConcreteShape> in, const ConcreteShape& y) const {
    return grid_for_launch(launch, in, y);
  }
#endif
};
static_assert(RuntimeOp<concat_op<float>>);
#if TEENY_TRAINING
static_assert(BackwardOp<concat_op<float>>);
#endif

using math::PadKind;

/// The kernels' fill rule for a graph's pad mode.
constexpr PadKind pad_kind(PadMode mode) {
  switch (mode) {
    case PadMode::constant: return PadKind::constant;
    case PadMode::reflect: return PadKind::reflect;
    case PadMode::replicate: return PadKind::replicate;
    case PadMode::count: break;  // not a mode
  }
  return PadKind::constant;
}

template <Element T>
struct PadArgs {
  TensorView<const T> x;
  TensorView<T> y;                              // contiguous
  std::array<std::int64_t, max_rank> before{};  // padded in front of each dim (negative: cropped)
  PadKind kind = PadKind::constant;
  T value{};  // constant mode's fill
  auto fields() const { return std::tie(x, y, before, kind, value); }
};

/// F.pad: constant (with value; negative pads crop), reflect or replicate. `attrs.pads` lists
/// (before, after) pairs from the last dim, as F.pad does.
template <Element T>
struct pad_op {
  using Args = PadArgs<T>;
  Pad attrs;
  OpOutput out;

  std::string_view name() const { return "pad"; }
  const Shape& output_shape() const { return out.shape; }
  DType output_dtype() const { return dtype_of<T>; }
  KernelInstance kernel() const { return kernel_instance<"pad", "pad_backward", T>(); }
  std::size_t n_activation_inputs() const { return 1; }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const { return {}; }
  Result<Args> pack_args(const OpBindings& b) const {
    auto x = input_view<const T>(b, 0);
    auto y = output_view<T>(b);
    if (auto e = first_error(x, y)) return *e;
    auto yc = contiguous_as(*y, y->shape, "output");
    if (!yc) return std::move(yc).error();
    const std::size_t rank = x->rank();
    if (attrs.pads.size() % 2 != 0 || attrs.pads.size() / 2 > rank || y->rank() != rank) {
      return fail(Errc::shape_mismatch, "pads of ", attrs.pads.size(), " values for input ", x->shape, " and output ",
                  y->shape);
    }
    Args args{*x, *yc, {}, pad_kind(attrs.mode), convert_element<T>(attrs.value)};
    for (std::size_t i = 0; i < attrs.pads.size() / 2; ++i) args.before[rank - 1 - i] = attrs.pads[2 * i];
    for (std::size_t d = 0; d < rank; ++d) {
      const std::size_t i = rank - 1 - d;  // pair index of dim d
      const std::int64_t after = 2 * i + 1 < attrs.pads.size() ? attrs.pads[2 * i + 1] : 0;
      if (x->shape[d] + args.before[d] + after != y->shape[d]) {
        return fail(Errc::shape_mismatch, "padding input ", x->shape, " does not give the output ", y->shape);
      }
    }
    return args;
  }
  Dim3 block() const { return {256, 1, 1}; }
  Dim3 grid(const ConcreteShape& y) const { return {ceil_div(y.numel(), 256), 1, 1}; }

#if TEENY_TRAINING
  // dx[i] += every dy[o] that read x[i]: one for constant padding (none where it filled or
  // cropped), several at a reflected or replicated border.
  using BackwardArgs = InputGradArgs<Args, T>;
  Result<BackwardArgs> pack_backward_args(const BackwardBindings& b) const { return pack_input_grad<T>(*this, b); }
  Dim3 backward_grid(std::span<const ConcreteShape> in, const ConcreteShape& y) const {
    return grid(in.empty() ? y : in[0]);  // one thread per dx element, gathering its outputs
  }
#endif
};
static_assert(RuntimeOp<pad_op<float>>);
#if TEENY_TRAINING
static_assert(BackwardOp<pad_op<float>>);
#endif

template <FloatElement T>
struct UpsampleArgs {
  TensorView<const T> x;  // [N, C, H, W]
  TensorView<T> y;        // [N, C, OH, OW], contiguous
  float inv_scale_h = 1;  // float(1 / scale), the factor PyTorch's nearest index uses
  float inv_scale_w = 1;
  auto fields() const { return std::tie(x, y, inv_scale_h, inv_scale_w); }
};

/// nn.Upsample(scale_factor=(scale_h, scale_w), mode='nearest') of [N, C, H, W].
template <FloatElement T>
struct upsample_op {
  using Args = UpsampleArgs<T>;
  Upsample attrs;
  OpOutput out;

  std::string_view name() const { return "upsample"; }
  const Shape& output_shape() const { return out.shape; }
  DType output_dtype() const { return dtype_of<T>; }
  KernelInstance kernel() const { return kernel_instance<"upsample_nearest", "upsample_nearest_backward", T>(); }
  std::size_t n_activation_inputs() const { return 1; }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const { return {}; }
  Result<Args> pack_args(const OpBindings& b) const {
    auto x = input_view<const T>(b, 0);
    auto y = output_view<T>(b);
    if (auto e = first_error(x, y)) return *e;
    auto yc = contiguous_as(*y, y->shape, "output");
    if (!yc) return std::move(yc).error();
    if (x->rank() != 4 || y->rank() != 4 || x->shape[0] != y->shape[0] || x->shape[1] != y->shape[1]) {
      return fail(Errc::shape_mismatch, "upsampling needs [N, C, H, W] in and out, got ", x->shape, " -> ", y->shape);
    }
    return Args{*x, *yc, static_cast<float>(1.0 / attrs.scale_h), static_cast<float>(1.0 / attrs.scale_w)};
  }
  Dim3 block() const { return {256, 1, 1}; }
  Dim3 grid(const ConcreteShape& y) const { return {ceil_div(y.numel(), 256), 1, 1}; }

#if TEENY_TRAINING
  // dx[n, c, h, w] += the dy of every output pixel whose nearest source is (h, w).
  using BackwardArgs = InputGradArgs<Args, T>;
  Result<BackwardArgs> pack_backward_args(const BackwardBindings& b) const { return pack_input_grad<T>(*this, b); }
  Dim3 backward_grid(std::span<const ConcreteShape> in, const ConcreteShape& y) const {
    return grid(in.empty() ? y : in[0]);  // one thread per dx element, gathering its outputs
  }
#endif
};
static_assert(RuntimeOp<upsample_op<float>>);
#if TEENY_TRAINING
static_assert(BackwardOp<upsample_op<float>>);
#endif

/// Cast's arguments are untyped: both dtypes are run-time values (a Cast crosses from or to
/// dtypes other than the op set's T), and the kernel dispatches on the pair.
struct CastArgs {
  const void* x = nullptr;  // n elements of `from`, contiguous
  void* y = nullptr;        // n elements of `to`, contiguous
  std::int64_t n = 0;
  DType from = DType::f32;
  DType to = DType::f32;
  auto fields() const { return std::tie(x, y, n, from, to); }
};

#if TEENY_TRAINING
/// Backward of a cast between floating dtypes: dx += dy converted back to x's dtype. Untyped like
/// CastArgs: dy is of forward.to, dx of forward.from.
struct CastBackwardArgs {
  CastArgs forward;
  const void* dy = nullptr;  // n elements of forward.to, contiguous
  void* dx = nullptr;        // n elements of forward.from, contiguous, or null: no gradient wanted
  auto fields() const { return std::tie(forward, dy, dx); }
};
#endif

/// Tensor.to(dtype) from any dtype to any other (rules: kernels/math/shape.hpp). T is only the op
/// set's compute type: the dtypes are the bindings'.
template <FloatElement T>
struct cast_op {
  using Args = CastArgs;
  DType dtype = DType::f32;
  OpOutput out;

  std::string_view name() const { return "cast"; }
  const Shape& output_shape() const { return out.shape; }
  DType output_dtype() const { return dtype; }
  KernelInstance kernel() const { return kernel_instance<"cast", "cast_backward", T>(); }
  std::size_t n_activation_inputs() const { return 1; }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const { return {}; }
  Result<Args> pack_args(const OpBindings& b) const {
    if (b.inputs.empty()) return fail(Errc::invalid_argument, "missing input 0 (0 bound)");
    const TensorBinding& x = b.inputs[0];
    const TensorBinding& y = b.output;
    auto padded = [](const TensorBinding& t) { return t.row_stride != 0 && t.row_stride != t.shape.last(); };
    if (y.dtype != dtype) {
      return fail(Errc::dtype_mismatch, "output is bound as ", y.dtype, " but the cast makes ", dtype);
    }
    if (padded(x) || padded(y) || x.shape.numel() != y.shape.numel()) {
      return fail(Errc::shape_mismatch, "cast of ", x.shape, " into ", y.shape,
                  " needs contiguous tensors of one size");
    }
    return Args{x.data, y.data, y.shape.numel(), x.dtype, y.dtype};
  }
  Dim3 block() const { return {256, 1, 1}; }
  Dim3 grid(const ConcreteShape& y) const { return {ceil_div(y.numel(), 256), 1, 1}; }

#if TEENY_TRAINING
  using BackwardArgs = CastBackwardArgs;
  /// Only a cast to a floating dtype passes a gradient, as in PyTorch: an integer or bool result is
  /// piecewise constant, so a training load refuses a trained parameter that reaches the loss
  /// only through one rather than silently giving it no gradient.
  bool has_backward() const { return is_floating(dtype); }
  Result<BackwardArgs> pack_backward_args(const BackwardBindings& b) const {
    auto forward = pack_args(forward_bindings(b));
    if (!forward) return std::move(forward).error();
    if (!is_floating(forward->to)) {
      return fail(Errc::unsupported, "a cast to ", forward->to, " passes no gradient");
    }
    const TensorBinding& dy = b.grad_output;
    if (dy.data == nullptr) return fail(Errc::invalid_argument, "the output's gradient is not bound");
    if (dy.dtype != forward->to || dy.shape.numel() != forward->n) {
      return fail(Errc::shape_mismatch, "the gradient of the output is ", dy.dtype, " ", dy.shape,
                  " but the cast makes ", forward->n, " elements of ", forward->to);
    }
    BackwardArgs g{*forward, dy.data, nullptr};
    if (!b.grad_inputs.empty() && b.grad_inputs[0].data != nullptr) {
      const TensorBinding& dx = b.grad_inputs[0];
      if (!is_floating(dx.dtype)) {
        return fail(Errc::unsupported, "a cast from ", forward->from,
                    " cannot pass a gradient to its input, which is not floating point");
      }
      if (dx.dtype != forward->from || dx.shape.numel() != forward->n) {
        return fail(Errc::shape_mismatch, "the gradient of input 0 is ", dx.dtype, " ", dx.shape,
                    " but the cast reads ", forward->n, " elements of ", forward->from);
      }
      g.dx = dx.data;
    }
    return g;
  }
  Dim3 backward_grid(std::span<const ConcreteShape>, const ConcreteShape& y) const { return grid(y); }
#endif
};
static_assert(RuntimeOp<cast_op<float>>);
#if TEENY_TRAINING
static_assert(BackwardOp<cast_op<float>>);
#endif

}  // namespace teeny
