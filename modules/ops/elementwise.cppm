// teeny.ops:elementwise — unary functions (activations, exp/log/...) and broadcasting binary ops.
// Their per-element math is kernels/math/elementwise.hpp, shared by the CPU and CUDA kernels.
module;
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <tuple>
#include <vector>
export module teeny.ops:elementwise;
import teeny.core;
import teeny.model;
import :common;

export namespace teeny {

template <FloatElement T>
struct UnaryArgs {
  TensorView<const T> x;
  TensorView<T> y;  // same shape as x
  UnaryFn fn;
  UnaryParams params;
  auto fields() const { return std::tie(x, y, fn, params); }
};

/// y = fn(x), elementwise: every activation and unary math function.
template <FloatElement T>
struct unary_op {
  using Args = UnaryArgs<T>;
  UnaryFn fn = UnaryFn::relu;
  UnaryParams params{};
  OpOutput out;

  std::string_view name() const { return "unary"; }
  const Shape& output_shape() const { return out.shape; }
  DType output_dtype() const { return dtype_of<T>; }
  KernelInstance kernel() const { return {{"unary", "teeny_unary", ""}, std::nullopt}; }
  std::size_t n_activation_inputs() const { return 1; }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const { return {}; }
  Result<Args> pack_args(const OpBindings& b) const {
    auto x = input_view<const T>(b, 0);
    auto y = output_view<T>(b);
    if (auto e = first_error(x, y)) return *e;
    return Args{*x, *y, fn, params};
  }
  Dim3 block() const { return {256, 1, 1}; }
  Dim3 grid(const ConcreteShape& y) const { return {ceil_div(y.numel(), 256), 1, 1}; }
};
static_assert(RuntimeOp<unary_op<float>>);

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

template <FloatElement T>
struct BinaryArgs {
  TensorView<const T> a;  // broadcast to y's shape (stride 0 on broadcast dims)
  TensorView<const T> b;
  TensorView<T> y;
  BinaryFn fn;
  Epilogue epilogue;
  auto fields() const { return std::tie(a, b, y, fn, epilogue); }
};

/// y = act(fn(a, b)) with NumPy/PyTorch broadcasting; the activation (a residual block's ReLU
/// after its add) is fused by the lowering.
template <FloatElement T>
struct binary_op {
  using Args = BinaryArgs<T>;
  BinaryFn fn = BinaryFn::add;
  OpOutput out;
  Epilogue epilogue{};

  std::string_view name() const { return "binary"; }
  const Shape& output_shape() const { return out.shape; }
  DType output_dtype() const { return dtype_of<T>; }
  KernelInstance kernel() const { return {{"binary", "teeny_binary", ""}, std::nullopt}; }
  std::size_t n_activation_inputs() const { return 2; }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const { return {}; }
  Result<Args> pack_args(const OpBindings& bindings) const {
    auto a = input_view<const T>(bindings, 0);
    auto b = input_view<const T>(bindings, 1);
    auto y = output_view<T>(bindings);
    if (auto e = first_error(a, b, y)) return *e;
    return Args{broadcast_to(*a, y->shape), broadcast_to(*b, y->shape), *y, fn, epilogue};
  }
  Dim3 block() const { return {256, 1, 1}; }
  Dim3 grid(const ConcreteShape& y) const { return {ceil_div(y.numel(), 256), 1, 1}; }
};
static_assert(RuntimeOp<binary_op<float>>);

}  // namespace teeny
