// teeny.graph:rules — the checks and formulas the op families share: dtype and rank checks,
// attribute checks, dim arithmetic with symbolic dims, PyTorch's sliding-window output size, and
// attribute formatting. Internal to teeny.graph: nothing here is exported.
//
//   window_output(x, 2, {.kernel = 5, .stride = 1, .padding = 2})   // 28 -> 28, as Conv2d(k=5, p=2)
//   mul_dims(Dim::sym("batch"), 784)                                // 784*batch
//   attrs({{"in_features", fmt(in)}, {"bias", fmt(bias)}})          // "in_features=784, bias=true"
module;
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>
export module teeny.graph:rules;
import teeny.core;
import :tensor_type;

namespace teeny::graph_detail {

// ---- dtype and rank -----------------------------------------------------------------------------

Result<void> require_float(const TensorType& t, std::string_view role = "input") {
  if (is_floating(t.dtype)) return ok();
  return fail(Errc::dtype_mismatch, role, " ", t, " is ", name(t.dtype),
              ", but this op needs a floating-point dtype (f16, bf16, f32 or f64)");
}

Result<void> require_numeric(const TensorType& t, std::string_view role = "input") {
  if (t.dtype != DType::boolean) return ok();
  return fail(Errc::dtype_mismatch, role, " ", t, " is bool, but this op needs a numeric dtype");
}

/// `layout` describes the accepted ranks for the message: "[N, C, H, W] or [C, H, W]".
Result<void> require_rank(const TensorType& t, std::size_t lo, std::size_t hi, std::string_view layout) {
  if (t.shape.rank() >= lo && t.shape.rank() <= hi) return ok();
  return fail(Errc::shape_mismatch, "expects a ", layout, " input, got ", t);
}

Result<void> require_same_dtype(const TensorType& a, const TensorType& b) {
  if (a.dtype == b.dtype) return ok();
  return fail(Errc::dtype_mismatch, "inputs have different dtypes: ", a, " and ", b, " (cast one of them first)");
}

/// The size of dim `axis` of `t` when it is concrete; an error naming `what` it is otherwise.
Result<std::int64_t> concrete_dim(const TensorType& t, std::size_t axis, std::string_view what) {
  const Dim& d = t.shape[axis];
  if (d.is_concrete()) return d.value;
  return fail(Errc::shape_mismatch, what, " (dim ", axis, " of input ", t, ") must be a concrete size, not '",
              to_string(d), "'");
}

// ---- attributes ---------------------------------------------------------------------------------

Result<void> check_positive(std::string_view attribute, std::int64_t value) {
  if (value > 0) return ok();
  return fail(Errc::invalid_argument, attribute, " must be positive, got ", value);
}

Result<void> check_non_negative(std::string_view attribute, std::int64_t value) {
  if (value >= 0) return ok();
  return fail(Errc::invalid_argument, attribute, " must be non-negative, got ", value);
}

Result<void> check_positive(std::string_view attribute, const Size2& value) {
  if (value.h > 0 && value.w > 0) return ok();
  return fail(Errc::invalid_argument, attribute, " must be positive, got ", value);
}

Result<void> check_non_negative(std::string_view attribute, const Size2& value) {
  if (value.h >= 0 && value.w >= 0) return ok();
  return fail(Errc::invalid_argument, attribute, " must be non-negative, got ", value);
}

// ---- dim arithmetic ------------------------------------------------------------------------------

/// a * b when it is representable as a Dim (concrete, or multiplier * one symbol).
std::optional<Dim> mul_dims(const Dim& a, const Dim& b) {
  if (a.is_concrete() && b.is_concrete()) return Dim(a.value * b.value);
  if (a.is_symbolic() && b.is_symbolic()) return std::nullopt;
  const Dim& sym = a.is_symbolic() ? a : b;
  const std::int64_t factor = a.is_symbolic() ? b.value : a.value;
  if (factor == 0) return Dim(0);
  return Dim::sym(sym.symbol, sym.value * factor);
}

/// a + b when it is representable as a Dim (both concrete, or multiples of the same symbol).
std::optional<Dim> add_dims(const Dim& a, const Dim& b) {
  if (a.is_concrete() && b.is_concrete()) return Dim(a.value + b.value);
  if (a.is_concrete() && a.value == 0) return b;
  if (b.is_concrete() && b.value == 0) return a;
  if (a.is_symbolic() && b.is_symbolic() && a.symbol == b.symbol) return Dim::sym(a.symbol, a.value + b.value);
  return std::nullopt;
}

/// One spatial axis of a convolution or pooling window (PyTorch's names).
struct Window {
  std::int64_t kernel = 1;
  std::int64_t stride = 1;
  std::int64_t padding = 0;  // on each side
  std::int64_t dilation = 1;
  bool ceil_mode = false;
};

/// The output size along dim `axis` of `x` under window `w`, by PyTorch's formula
///   out = floor_or_ceil((in + 2*padding - dilation*(kernel-1) - 1) / stride) + 1,
/// where in ceil mode the last window must start inside the input or the left padding.
/// A symbolic dim passes through when the window keeps the size (stride 1, "same" padding).
Result<Dim> window_output(const TensorType& x, std::size_t axis, const Window& w) {
  const Dim& in = x.shape[axis];
  const std::int64_t extent = w.dilation * (w.kernel - 1) + 1;
  if (in.is_symbolic()) {
    if (w.stride == 1 && 2 * w.padding == extent - 1) return in;
    return fail(Errc::shape_mismatch, "dim ", axis, " of input ", x, " is symbolic ('", to_string(in),
                "'); a window with kernel ", w.kernel, ", stride ", w.stride, ", padding ", w.padding,
                " changes its size, so it must be concrete");
  }
  const std::int64_t padded = in.value + 2 * w.padding;
  if (padded < extent) {
    return fail(Errc::shape_mismatch, "dim ", axis, " of input ", x, " is ", in.value, " (", padded,
                " with padding), smaller than the kernel extent ", extent, " (kernel ", w.kernel, ", dilation ",
                w.dilation, ")");
  }
  std::int64_t out = (padded - extent + (w.ceil_mode ? w.stride - 1 : 0)) / w.stride + 1;
  if (w.ceil_mode && (out - 1) * w.stride >= in.value + w.padding) --out;
  return Dim(out);
}

// Broadcasts the batch dims (all but the last two) of two operands of a matrix product (MatMul,
// Attention).
Result<Shape> broadcast_batch(const TensorType& a, const Shape& a_shape, const TensorType& b, const Shape& b_shape) {
  const std::vector<Dim> a_batch(a_shape.begin(), a_shape.end() - 2);
  const std::vector<Dim> b_batch(b_shape.begin(), b_shape.end() - 2);
  auto batch = broadcast_shapes(Shape(a_batch), Shape(b_batch));
  if (!batch) {
    return fail(Errc::shape_mismatch, "the batch dims of ", a, " and ", b,
                " do not broadcast: ", batch.error().message());
  }
  return batch;
}

// ---- formatting ----------------------------------------------------------------------------------

std::string fmt(std::int64_t v) { return std::to_string(v); }
std::string fmt(bool v) { return v ? "true" : "false"; }
std::string fmt(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}
std::string fmt(const Size2& v) { return to_string(v); }
std::string fmt(DType v) { return std::string(name(v)); }
std::string fmt(const std::vector<std::int64_t>& v) {
  std::string out = "[";
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}
std::string fmt(const std::vector<Dim>& v) { return to_string(Shape(v)); }
std::string fmt(const std::optional<std::int64_t>& v) { return v ? fmt(*v) : "none"; }
std::string fmt(const std::optional<double>& v) { return v ? fmt(*v) : "none"; }
std::string fmt(const std::optional<Size2>& v) { return v ? fmt(*v) : "none"; }

/// "key=value, key=value".
std::string attrs(std::initializer_list<std::pair<std::string_view, std::string>> items) {
  std::string out;
  for (const auto& [key, value] : items) {
    if (!out.empty()) out += ", ";
    out += key;
    out += '=';
    out += value;
  }
  return out;
}

}  // namespace teeny::graph_detail
