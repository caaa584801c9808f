// teeny.graph:rules — the checks and formulas the op families share: dtype and rank checks,
// attribute checks, dim arithmetic with symbolic dims, PyTorch's sliding-window output size, and
// attribute formatting. Internal to teeny.graph: nothing here is exported.
//
//   window_output(x, 2, {.kernel = 5, .stride = 1, .padding = 2})   // 28 -> 28, as Conv2d(k=5, p=2)
//   mul_dims(Dim::sym("batch"), 784)                                // 784*batch
//   attrs({{"in_features", fmt(in)}, {"bias", fmt(bias)}})          // "in_features=784, bias=true"
export module teeny.graph:rules;
import teeny.std;
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

/// Whether `shape` is one teeny can hold: at most max_rank dims, no negative size, and sizes and
/// symbol multipliers whose product, zeros left out, is at most max_numel. Then every product of
/// its dims (Shape::numel(), in any order) fits int64, and so does any size bound from it later.
bool within_limits(const Shape& shape) {
  if (shape.rank() > max_rank) return false;
  std::int64_t n = 1;
  for (const Dim& d : shape) {
    if (d.value < 0) return false;
    if (d.value == 0) continue;
    auto m = checked_mul(n, d.value);
    if (!m || *m > max_numel) return false;
    n = *m;
  }
  return true;
}

/// a * b, as a Dim: concrete, or multiplier * one symbol. An error when both are symbolic or the
/// product overflows.
Result<Dim> mul_dims(const Dim& a, const Dim& b) {
  auto overflow = [&] { return fail(Errc::out_of_range, "'", to_string(a), "' * '", to_string(b), "' overflows"); };
  if (a.is_symbolic() && b.is_symbolic()) {
    return fail(Errc::shape_mismatch, "the product of '", to_string(a), "' and '", to_string(b),
                "' is not a single symbolic dim");
  }
  auto product = checked_mul(a.value, b.value);
  if (!product) return overflow();
  if (a.is_concrete() && b.is_concrete()) return Dim(*product);
  const Dim& sym = a.is_symbolic() ? a : b;
  if (*product == 0) return Dim(0);
  return Dim::sym(sym.symbol, *product);
}

/// a + b, as a Dim: both concrete, or multiples of the same symbol. An error otherwise or when the
/// sum overflows.
Result<Dim> add_dims(const Dim& a, const Dim& b) {
  if (a.is_concrete() && a.value == 0) return b;
  if (b.is_concrete() && b.value == 0) return a;
  if (a.is_concrete() != b.is_concrete() || a.symbol != b.symbol) {
    return fail(Errc::shape_mismatch, "the sum of '", to_string(a), "' and '", to_string(b),
                "' is not a single symbolic dim");
  }
  auto sum = checked_add(a.value, b.value);
  if (!sum) return fail(Errc::out_of_range, "'", to_string(a), "' + '", to_string(b), "' overflows");
  return a.is_concrete() ? Dim(*sum) : Dim::sym(a.symbol, *sum);
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
  // Attributes are positive (padding non-negative) but may be huge: every step is checked.
  auto too_large = [&] {
    return fail(Errc::out_of_range, "the window on dim ", axis, " of input ", x, " (kernel ", w.kernel, ", stride ",
                w.stride, ", padding ", w.padding, ", dilation ", w.dilation, ") is too large: its size overflows");
  };
  const auto span = checked_mul(w.dilation, w.kernel - 1);
  const auto extent = span ? checked_add(*span, 1) : std::nullopt;
  if (!extent) return too_large();
  if (in.is_symbolic()) {
    if (w.stride == 1 && w.padding <= max_numel && 2 * w.padding == *extent - 1) return in;
    return fail(Errc::shape_mismatch, "dim ", axis, " of input ", x, " is symbolic ('", to_string(in),
                "'); a window with kernel ", w.kernel, ", stride ", w.stride, ", padding ", w.padding,
                " changes its size, so it must be concrete");
  }
  const auto both_sides = checked_mul(2, w.padding);
  const auto padded = both_sides ? checked_add(in.value, *both_sides) : std::nullopt;
  if (!padded) return too_large();
  if (*padded < *extent) {
    return fail(Errc::shape_mismatch, "dim ", axis, " of input ", x, " is ", in.value, " (", *padded,
                " with padding), smaller than the kernel extent ", *extent, " (kernel ", w.kernel, ", dilation ",
                w.dilation, ")");
  }
  // padded - extent >= 0 and stride >= 1: ceil division without forming (padded - extent + stride - 1).
  const std::int64_t room = *padded - *extent;
  std::int64_t out = room / w.stride + (w.ceil_mode && room % w.stride != 0 ? 1 : 0) + 1;
  // In ceil mode the last window must start inside the input or the left padding; out - 1 <= room.
  if (w.ceil_mode) {
    const auto start = checked_mul(out - 1, w.stride);  // overflow: certainly past the input
    if (!start || *start >= in.value + w.padding) --out;
  }
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

// ---- dims given as attributes -------------------------------------------------------------------

/// Dims given as an attribute (normalized_shape, a constant's), as a Shape.
Shape shape_of(const std::vector<std::int64_t>& dims) {
  std::vector<Dim> out(dims.begin(), dims.end());
  return Shape(std::move(out));
}

/// An attribute that gives a tensor's dims: none negative, and a shape teeny can hold.
Result<void> check_dims(std::string_view attribute, const std::vector<std::int64_t>& dims) {
  for (const std::int64_t d : dims) {
    if (d < 0) return fail(Errc::invalid_argument, attribute, " has a negative dim: ", fmt(dims));
  }
  if (dims.size() > max_rank || !within_limits(shape_of(dims))) {
    return fail(Errc::invalid_argument, attribute, " ", fmt(dims), " is not a shape teeny can hold");
  }
  return ok();
}

}  // namespace teeny::graph_detail
