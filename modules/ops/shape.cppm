// teeny.ops:shape — ops that move data without arithmetic: reshape (Flatten, Reshape).
module;
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <tuple>
#include <vector>
export module teeny.ops:shape;
import teeny.core;
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
  const Shape& output_shape() const { return out.shape; }
  DType output_dtype() const { return dtype_of<T>; }
  KernelInstance kernel() const { return {{"reshape", "teeny_copy", ""}, std::nullopt}; }
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
};
static_assert(RuntimeOp<reshape_op<float>>);

}  // namespace teeny
