// teeny.ops:common — what the standard executable ops share: the fused epilogue, typed access to
// bindings with errors that say which operand was wrong, and the output every op records.
module;
#include "math/elementwise.hpp"
#include "math/pool.hpp"  // Window2d
export module teeny.ops:common;
import teeny.std;
import teeny.core;
import teeny.model;

export namespace teeny {

using math::BinaryFn;
using math::CompareFn;
using math::unary_fn_count;  // how many UnaryFns there are (UnaryFn::count)
using math::UnaryFn;
using math::UnaryParams;
using math::Window2d;  // kernel, stride, padding, dilation of a convolution or pooling window

using math::Epilogue;  // an activation fused into an op's output pass (kernels/math/elementwise.hpp)

/// The symbolic output an executable op records (what ExecutableOp's output_shape/dtype return).
struct OpOutput {
  Shape shape;
  DType dtype = DType::f32;
};

namespace ops_detail {
template <Element T>
Result<TensorView<T>> bound(std::span<const TensorBinding> list, std::size_t i, std::string_view what) {
  if (i >= list.size()) return fail(Errc::invalid_argument, "missing ", what, " ", i, " (", list.size(), " bound)");
  auto view = list[i].as<T>();
  if (!view) return std::move(view).error().context(cat(what, " ", i));
  return view;
}
}  // namespace ops_detail

/// Activation input `i` as a typed view.
template <Element T>
Result<TensorView<T>> input_view(const OpBindings& b, std::size_t i) {
  return ops_detail::bound<T>(b.inputs, i, "input");
}
/// Parameter `i` as a typed view.
template <Element T>
Result<TensorView<T>> param_view(const OpBindings& b, std::size_t i) {
  return ops_detail::bound<T>(b.params, i, "parameter");
}
/// An optional parameter: an empty view when the op has no such slot (a Linear without bias).
template <Element T>
Result<TensorView<T>> optional_param_view(const OpBindings& b, std::size_t i, bool present) {
  if (!present) return TensorView<T>{};
  return param_view<T>(b, i);
}
/// The output as a typed view.
template <Element T>
Result<TensorView<T>> output_view(const OpBindings& b) {
  auto view = b.output.as<T>();
  if (!view) return std::move(view).error().context("output");
  return view;
}

/// `view` read as the contiguous `shape` (same elements, e.g. [C, H, W] as [1, C, H, W]); an error
/// when the bound tensor is strided or the element counts differ.
template <Element T>
Result<TensorView<T>> contiguous_as(const TensorView<T>& view, const ConcreteShape& shape, std::string_view what) {
  if (!view.is_contiguous() || view.numel() != shape.numel()) {
    return fail(Errc::shape_mismatch, what, " ", view.shape, " cannot be read as a contiguous ", shape);
  }
  return TensorView<T>(view.data, shape);
}

/// The backward kernel reference of an op in training builds (none otherwise): a user op names it
/// in kernel() beside its forward.
constexpr std::optional<KernelRef> backward_kernel_ref([[maybe_unused]] std::string_view name,
                                                       [[maybe_unused]] std::string_view entry_point) {
#if TEENY_TRAINING
  return KernelRef{name, entry_point, ""};
#else
  return std::nullopt;
#endif
}

/// The kernels of an op for element type T: forward `Forward` and, in training builds, backward
/// `Backward` ("unary_f32" and "unary_backward_f32"; entry points teeny_unary_f32, ...).
template <KernelFamily Forward, KernelFamily Backward, Element T>
constexpr KernelInstance kernel_instance() {
#if TEENY_TRAINING
  return {kernel_ref<Forward, T>(), kernel_ref<Backward, T>()};
#else
  return {kernel_ref<Forward, T>(), std::nullopt};
#endif
}

/// Refuses the backward of an op whose fused epilogue's derivative does not follow from the
/// activated output, the only thing its kernels keep (e.g. GELU: the training lowering leaves it
/// unfused). Without this check the backward would take the activation's derivative as 1.
inline Result<void> check_epilogue_backward(const Epilogue& e) {
  if (!e.active || math::derivative_from_output(e.fn, e.params)) return ok();
  return fail(Errc::unsupported, "its fused ", math::unary_fn_name(e.fn),
              " epilogue has no backward: the op keeps only the activated output, from which that "
              "function's derivative does not follow (lower the graph for training, which fuses only "
              "activations whose derivative does)");
}

/// `view` read with the output's shape: dims it lacks (on the left) or has as 1 get stride 0.
template <class T>
TensorView<T> broadcast_to(const TensorView<T>& view, const ConcreteShape& shape) {
  ConcreteShape strides = shape;
  const std::size_t offset = shape.rank() - view.rank();
  for (std::size_t i = 0; i < shape.rank(); ++i) {
    strides[i] = (i < offset || view.shape[i - offset] == 1) ? 0 : view.strides[i - offset];
  }
  return TensorView<T>(view.data, shape, strides);
}

/// The first error among several results, if any: `if (auto e = first_error(x, w, y)) return *e;`
template <class... R>
std::optional<Error> first_error(const R&... results) {
  std::optional<Error> error;
  ((!error && !results.has_value() ? (error = results.error(), 0) : 0), ...);
  return error;
}

#if TEENY_TRAINING
/// The forward bindings inside a backward launch's: an op packs its forward arguments from them,
/// so that its backward reads every tensor exactly as its forward did.
inline OpBindings forward_bindings(const BackwardBindings& b) { return {b.inputs, b.params, b.output}; }

namespace ops_detail {
// `grad` viewed with the shape and strides of the forward view `like` (a broadcast operand's
// gradient then has its stride-0 dims too); an empty view when no gradient is wanted.
template <Element T>
Result<void> bind_grad(const TensorBinding& grad, const TensorView<const T>& like, TensorView<T>& out,
                       std::string_view what) {
  out = {};
  if (grad.data == nullptr) return ok();
  if (grad.dtype != dtype_of<T>) {
    return fail(Errc::dtype_mismatch, "the gradient of ", what, " is ", grad.dtype, " but the kernel writes ",
                dtype_of<T>);
  }
  if (like.data == nullptr || grad.shape.numel() != like.shape.numel() ||
      (grad.row_stride != 0 && grad.row_stride != grad.shape.last())) {
    return fail(Errc::shape_mismatch, "the gradient of ", what, " is ", grad.shape, " but the tensor is ", like.shape);
  }
  out = TensorView<T>(static_cast<T*>(grad.data), like.shape, like.strides);
  return ok();
}
}  // namespace ops_detail

/// dL/dy, viewed like the forward output `y`; it must be bound. Kernels may overwrite it (with
/// dL/d(pre-activation) when an activation is fused): nothing reads it after its op's backward.
template <Element T>
Result<void> bind_grad_output(const BackwardBindings& b, const TensorView<T>& y, TensorView<T>& dy) {
  if (b.grad_output.data == nullptr) return fail(Errc::invalid_argument, "the output's gradient is not bound");
  return ops_detail::bind_grad<T>(b.grad_output, y, dy, "the output");
}
/// dL/d(input i), viewed like the forward view `x`: empty when no gradient flows to that input.
template <Element T>
Result<void> bind_grad_input(const BackwardBindings& b, std::size_t i, const TensorView<const T>& x,
                             TensorView<T>& dx) {
  if (i >= b.grad_inputs.size()) {
    dx = {};
    return ok();
  }
  return ops_detail::bind_grad<T>(b.grad_inputs[i], x, dx, cat("input ", i));
}
/// dL/d(parameter i), viewed like the forward view `w`: empty for a parameter without gradient
/// (a running statistic, a frozen weight) or a slot the op does not have.
template <Element T>
Result<void> bind_grad_param(const BackwardBindings& b, std::size_t i, const TensorView<const T>& w,
                             TensorView<T>& dw) {
  if (i >= b.grad_params.size() || w.data == nullptr) {
    dw = {};
    return ok();
  }
  return ops_detail::bind_grad<T>(b.grad_params[i], w, dw, cat("parameter ", i));
}

/// The backward arguments of an op with one activation input (fields x and y in its Args) and no
/// parameter with a gradient: its forward arguments, dL/dy and dL/dx (empty when not wanted).
template <class Forward, Element T>
struct InputGradArgs {
  Forward forward;
  TensorView<T> dy;
  TensorView<T> dx;
  auto fields() const { return std::tie(forward, dy, dx); }
};

/// Packs an InputGradArgs for `op`'s backward.
template <Element T, class Op>
Result<InputGradArgs<typename Op::Args, T>> pack_input_grad(const Op& op, const BackwardBindings& b) {
  auto forward = op.pack_args(forward_bindings(b));
  if (!forward) return std::move(forward).error();
  InputGradArgs<typename Op::Args, T> g{*forward, {}, {}};
  if (auto e = first_error(bind_grad_output(b, g.forward.y, g.dy), bind_grad_input(b, 0, g.forward.x, g.dx))) {
    return *e;
  }
  return g;
}
#endif

}  // namespace teeny
