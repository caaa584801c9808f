// teeny.ops:common — what the standard executable ops share: the fused epilogue, typed access to
// bindings with errors that say which operand was wrong, and the output every op records.
module;
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "math/elementwise.hpp"
#include "math/window.hpp"
export module teeny.ops:common;
import teeny.core;
import teeny.model;

export namespace teeny {

using math::BinaryFn;
using math::UnaryFn;
using math::UnaryParams;
using math::Window2d;  // kernel, stride, padding, dilation of a convolution or pooling window

/// An activation applied to an op's output in the same pass (bias + ReLU fused into a GEMM).
struct Epilogue {
  bool active = false;
  UnaryFn fn = UnaryFn::relu;
  UnaryParams params{};
  friend constexpr bool operator==(const Epilogue&, const Epilogue&) = default;
};

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

/// The first error among several results, if any: `if (auto e = first_error(x, w, y)) return *e;`
template <class... R>
std::optional<Error> first_error(const R&... results) {
  std::optional<Error> error;
  ((!error && !results.has_value() ? (error = results.error(), 0) : 0), ...);
  return error;
}

}  // namespace teeny
