// teeny.onnx:fold — elementwise arithmetic on constants, computed at import: the shape
// arithmetic exporters write (PyTorch's `size(0) * 2`, a LayerNormalization's expanded form) and
// any node whose inputs are all known, so that teeny's graph only holds what depends on the inputs.
//
//   auto sum = fold_binary(BinaryOp::add, a, b, limit);   // NumPy broadcasting; one dtype, kept
//   auto neg = fold_unary(UnaryOp::neg, a);
//
// Floats are computed in double and rounded once to their dtype; integers exactly, an overflow or
// a division by zero being an error (ONNX leaves them undefined; teeny does not guess).
module;
#include <cmath>

#include "math/unary.hpp"
export module teeny.onnx:fold;
import teeny.std;
import teeny.core;
import teeny.graph;
import teeny.runtime;

export namespace teeny::onnx {

/// `op` applied to every element of a constant (same dtype and shape).
Result<Tensor> fold_unary(UnaryOp op, const Tensor& a);
/// `op` of two constants of one dtype, broadcast as NumPy does; a result of more than
/// `max_elements` is refused before it is allocated.
Result<Tensor> fold_binary(BinaryOp op, const Tensor& a, const Tensor& b, std::int64_t max_elements);
/// `op` of two vectors of dims known at import (one of size 1 broadcasts), as shape arithmetic on
/// symbolic dims needs it (`batch * 4`, `4*batch / 2`): each result a number times at most one
/// symbol; a symbol plus a number, or a product of two symbols, is refused.
Result<std::vector<Dim>> fold_dims(BinaryOp op, const std::vector<Dim>& a, const std::vector<Dim>& b);
/// The shape two concrete shapes broadcast to: teeny.core's broadcast_shapes, bound.
Result<ConcreteShape> broadcast_concrete(const ConcreteShape& a, const ConcreteShape& b);

/// Element offsets into a tensor of `shape` for each element of `out`, which `shape` broadcasts
/// to (size-1 and missing leading dims repeat).
std::vector<std::int64_t> broadcast_offsets(const ConcreteShape& shape, const ConcreteShape& out);

}  // namespace teeny::onnx

namespace teeny::onnx {

std::vector<std::int64_t> broadcast_offsets(const ConcreteShape& shape, const ConcreteShape& out) {
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(out.numel()));
  const std::size_t lead = out.rank() - shape.rank();
  std::vector<std::int64_t> strides(out.rank(), 0);
  std::int64_t step = 1;
  for (std::size_t k = shape.rank(); k-- > 0;) {
    strides[lead + k] = shape[k] == 1 ? 0 : step;
    step *= shape[k];
  }
  std::vector<std::int64_t> index(out.rank(), 0);
  std::int64_t at = 0;
  for (std::size_t i = 0; i < offsets.size(); ++i) {
    offsets[i] = at;
    for (std::size_t k = out.rank(); k-- > 0;) {
      at += strides[k];
      if (++index[k] < out[k]) break;
      at -= strides[k] * out[k];
      index[k] = 0;
    }
  }
  return offsets;
}

namespace {

template <class T>
std::optional<T> integer_op(BinaryOp op, T x, T y) {
  T r{};
  switch (op) {
    case BinaryOp::add: return __builtin_add_overflow(x, y, &r) ? std::nullopt : std::optional<T>(r);
    case BinaryOp::sub: return __builtin_sub_overflow(x, y, &r) ? std::nullopt : std::optional<T>(r);
    case BinaryOp::mul: return __builtin_mul_overflow(x, y, &r) ? std::nullopt : std::optional<T>(r);
    case BinaryOp::div:
      if (y == 0) return std::nullopt;
      if constexpr (std::is_signed_v<T>) {
        if (x == std::numeric_limits<T>::min() && y == T(-1)) return std::nullopt;
      }
      return static_cast<T>(x / y);  // toward zero, as ONNX Runtime's
    case BinaryOp::maximum: return x > y ? x : y;
    case BinaryOp::minimum: return x < y ? x : y;
    case BinaryOp::fmod:
      if (y == 0) return std::nullopt;
      if constexpr (std::is_signed_v<T>) {
        if (y == T(-1)) return T(0);  // min % -1 would trap
      }
      return static_cast<T>(x % y);  // the sign of x, as C's % and ONNX's fmod
    case BinaryOp::pow: {
      if (y < 0) return std::nullopt;
      if (x == 0 || x == 1) return y == 0 ? T(1) : x;
      if constexpr (std::is_signed_v<T>) {
        if (x == T(-1)) return y % 2 == 0 ? T(1) : T(-1);
      }
      T acc = 1;  // |x| >= 2: it overflows within 64 steps
      for (T i = 0; i < y; ++i) {
        if (__builtin_mul_overflow(acc, x, &acc)) return std::nullopt;
      }
      return acc;
    }
    case BinaryOp::count: break;
  }
  return std::nullopt;
}

double float_op(BinaryOp op, double x, double y) {
  switch (op) {
    case BinaryOp::add: return x + y;
    case BinaryOp::sub: return x - y;
    case BinaryOp::mul: return x * y;
    case BinaryOp::div: return x / y;
    case BinaryOp::pow: return std::pow(x, y);
    case BinaryOp::maximum: return std::isnan(x) || std::isnan(y) ? NAN : (x > y ? x : y);
    case BinaryOp::minimum: return std::isnan(x) || std::isnan(y) ? NAN : (x < y ? x : y);
    case BinaryOp::fmod: return std::fmod(x, y);
    case BinaryOp::count: break;
  }
  return NAN;
}

// The function the backends compute for `op` (kernels/math/unary.hpp), in double.
double float_unary(UnaryOp op, double x) {
  const auto [fn, params] = lowering_detail::activation(Unary{op});
  return math::apply_unary<double>(fn, x, params);
}

Result<Dim> dim_op(BinaryOp op, const Dim& x, const Dim& y) {
  const auto refuse = [&] {
    return fail(Errc::unsupported, "shape arithmetic ", to_string(x), " ", name(op), " ", to_string(y),
                " (teeny's dims are a number times at most one symbol)");
  };
  if (x.is_concrete() && y.is_concrete()) {
    const auto r = integer_op<std::int64_t>(op, x.value, y.value);
    if (!r)
      return fail(Errc::out_of_range, name(op), " of the dims ", x.value, " and ", y.value,
                  " overflows or divides by zero");
    return Dim(*r);
  }
  std::int64_t value = 0;
  if (op == BinaryOp::mul && (x.is_concrete() || y.is_concrete())) {
    if (__builtin_mul_overflow(x.value, y.value, &value)) return refuse();
    if (value == 0) return Dim(0);   // zero times a size
    if (value < 0) return refuse();  // a symbolic dim's multiplier is positive
    return Dim::sym(x.is_symbolic() ? x.symbol : y.symbol, value);
  }
  if (op == BinaryOp::div && y.is_concrete() && y.value > 0 && x.value % y.value == 0) {
    return Dim::sym(x.symbol, x.value / y.value);
  }
  if (op == BinaryOp::div && y.is_symbolic() && y.value > 0 && x.symbol == y.symbol && x.value % y.value == 0) {
    return Dim(x.value / y.value);
  }
  return refuse();
}

}  // namespace

Result<std::vector<Dim>> fold_dims(BinaryOp op, const std::vector<Dim>& a, const std::vector<Dim>& b) {
  if (a.size() != b.size() && a.size() != 1 && b.size() != 1) {
    return fail(Errc::shape_mismatch, "shape vectors of ", a.size(), " and ", b.size(), " dims do not broadcast");
  }
  std::vector<Dim> out;  // NumPy's rule: a vector of 0 with one of 1 broadcasts to 0
  const std::size_t count = a.empty() || b.empty() ? 0 : std::max(a.size(), b.size());
  for (std::size_t i = 0; i < count; ++i) {
    auto d = dim_op(op, a[a.size() == 1 ? 0 : i], b[b.size() == 1 ? 0 : i]);
    if (!d) return std::move(d).error();
    out.push_back(std::move(*d));
  }
  return out;
}

Result<ConcreteShape> broadcast_concrete(const ConcreteShape& a, const ConcreteShape& b) {
  auto shape = broadcast_shapes(Shape(a), Shape(b));
  if (!shape) return std::move(shape).error();
  return shape->bind({});
}

Result<Tensor> fold_unary(UnaryOp op, const Tensor& a) {
  auto out = Tensor::zeros(a.dtype(), a.shape());
  if (!out) return std::move(out).error();
  Result<void> status = ok();
  visit_dtype(a.dtype(), [&]<class T>(std::type_identity<T>) {
    const T* x = reinterpret_cast<const T*>(a.data());
    T* y = reinterpret_cast<T*>(out->data());
    for (std::int64_t i = 0; i < a.numel(); ++i) {
      if constexpr (FloatElement<T>) {
        y[i] = convert_element<T>(float_unary(op, convert_element<double>(x[i])));
      } else if constexpr (std::is_signed_v<T> && !std::is_same_v<T, bool>) {
        if ((op == UnaryOp::neg || op == UnaryOp::abs) && x[i] != std::numeric_limits<T>::min()) {
          y[i] = op == UnaryOp::neg || x[i] < 0 ? static_cast<T>(-x[i]) : x[i];
        } else {
          status = fail(Errc::unsupported, name(op), " of the ", a.dtype(), " value ", static_cast<std::int64_t>(x[i]));
          return;
        }
      } else {
        status = fail(Errc::unsupported, name(op), " of a ", a.dtype(), " constant");
        return;
      }
    }
  });
  if (!status) return std::move(status).error();
  return out;
}

Result<Tensor> fold_binary(BinaryOp op, const Tensor& a, const Tensor& b, std::int64_t max_elements) {
  if (a.dtype() != b.dtype()) {
    return fail(Errc::dtype_mismatch, name(op), " of ", a.dtype(), " and ", b.dtype(), " (ONNX's takes one dtype)");
  }
  auto shape = broadcast_concrete(a.shape(), b.shape());
  if (!shape) return std::move(shape).error();
  if (shape->numel() > max_elements) {
    return fail(Errc::out_of_range, name(op), " of ", a.shape(), " and ", b.shape(), " makes ", *shape,
                ", over the limit of ", max_elements, " elements");
  }
  auto out = Tensor::zeros(a.dtype(), *shape);
  if (!out) return std::move(out).error();
  const std::vector<std::int64_t> ia = broadcast_offsets(a.shape(), *shape);
  const std::vector<std::int64_t> ib = broadcast_offsets(b.shape(), *shape);
  Result<void> status = ok();
  visit_dtype(a.dtype(), [&]<class T>(std::type_identity<T>) {
    const T* x = reinterpret_cast<const T*>(a.data());
    const T* y = reinterpret_cast<const T*>(b.data());
    T* z = reinterpret_cast<T*>(out->data());
    for (std::size_t i = 0; i < ia.size(); ++i) {
      if constexpr (FloatElement<T>) {
        z[i] = convert_element<T>(float_op(op, convert_element<double>(x[ia[i]]), convert_element<double>(y[ib[i]])));
      } else if constexpr (std::is_same_v<T, bool>) {
        status = fail(Errc::unsupported, name(op), " of bool constants");
        return;
      } else {
        const auto r = integer_op<T>(op, x[ia[i]], y[ib[i]]);
        if (!r) {
          status =
              fail(Errc::out_of_range, name(op), " of the ", a.dtype(), " values ", convert_element<double>(x[ia[i]]),
                   " and ", convert_element<double>(y[ib[i]]), " overflows or divides by zero");
          return;
        }
        z[i] = *r;
      }
    }
  });
  if (!status) return std::move(status).error();
  return out;
}

}  // namespace teeny::onnx
