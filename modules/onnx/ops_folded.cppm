// teeny.onnx:ops_folded — converters of ONNX ops computed at import when their inputs are known
// there: Equal, Less, Greater, LessOrEqual, GreaterOrEqual, Not, Where, ConstantOfShape and Range.
// Exporters use them in shape computations (PyTorch's `expand(n, -1, -1)` becomes
// Where(Equal(shape, -1), 1, shape)). The comparisons and Where with an input computed at run time
// are teeny's Compare and Where (floating constant operands as Weight nodes); the other forms are
// refused with the reason.
module;
#include "onnx/proto.hpp"
export module teeny.onnx:ops_folded;
import teeny.std;
import teeny.core;
import teeny.graph;
import :context;
import :fold;

namespace teeny::onnx::convert {

Error run_time(NodeContext& n) {
  return NodeContext::unsupported(n.node().op_type, " of values computed at run time (teeny folds it only at import, ",
                                  "where its inputs are constants or shapes; a run-time ", n.node().op_type,
                                  " is planned)");
}

// Whether input i is known at import (a constant or a shape value).
bool known(NodeContext& n, std::size_t i) { return n.constant(i) != nullptr || n.shape_value(i) != nullptr; }

enum class Compare : std::uint8_t { equal, less, greater, less_equal, greater_equal };

template <class T>
bool holds(Compare cmp, T a, T b) {
  switch (cmp) {
    case Compare::equal: return a == b;
    case Compare::less: return a < b;
    case Compare::greater: return a > b;
    case Compare::less_equal: return a <= b;
    case Compare::greater_equal: return a >= b;
  }
  return false;
}

// a (cmp) b for two dims; nothing when a symbolic dim makes the answer depend on its size.
std::optional<bool> compare_dims(Compare cmp, const Dim& a, const Dim& b) {
  if (a.is_concrete() && b.is_concrete()) return holds(cmp, a.value, b.value);
  if (a == b) return holds(cmp, 0, 0);
  // A symbolic dim is a size (>= 0): it is greater than, and never equal to, a negative number.
  const Dim& num = a.is_symbolic() ? b : a;
  if (num.is_concrete() && num.value < 0) return a.is_symbolic() ? holds(cmp, 1, 0) : holds(cmp, 0, 1);
  return std::nullopt;
}

}  // namespace teeny::onnx::convert

export namespace teeny::onnx::convert {

// Equal, Less, Greater, LessOrEqual, GreaterOrEqual of two inputs known at import: a bool
// constant, broadcast as NumPy does.
constexpr CompareOp compare_op_of(Compare cmp) {
  switch (cmp) {
    case Compare::equal: return CompareOp::eq;
    case Compare::less: return CompareOp::lt;
    case Compare::greater: return CompareOp::gt;
    case Compare::less_equal: return CompareOp::le;
    case Compare::greater_equal: return CompareOp::ge;
  }
  return CompareOp::count;
}

// Whether any of the node's inputs is a value computed at run time: then the node is too, and its
// floating constant operands are Weight nodes (NodeContext::value).
bool any_run_time(NodeContext& n) {
  for (std::size_t i = 0; i < n.inputs(); ++i) {
    if (!known(n, i)) return true;
  }
  return false;
}

template <Compare Cmp>
Result<void> compare(NodeContext& n) {
  if (any_run_time(n)) {
    auto a = n.value(0);
    if (!a) return std::move(a).error();
    auto b = n.value(1);
    if (!b) return std::move(b).error();
    n.set_output(0, n.builder().add(teeny::Compare{compare_op_of(Cmp)}, {*a, *b}, n.name()));
    return ok();
  }
  if (n.shape_value(0) != nullptr || n.shape_value(1) != nullptr) {
    auto a = n.dims(0);
    if (!a) return std::move(a).error();
    auto b = n.dims(1);
    if (!b) return std::move(b).error();
    if (a->size() != b->size() && a->size() != 1 && b->size() != 1) {
      return fail(Errc::shape_mismatch, "shape vectors of ", a->size(), " and ", b->size(), " dims do not broadcast");
    }
    const std::size_t count = a->empty() || b->empty() ? 0 : std::max(a->size(), b->size());  // 0 with 1 is 0
    std::vector<std::uint8_t> out;
    for (std::size_t i = 0; i < count; ++i) {
      const Dim& x = (*a)[a->size() == 1 ? 0 : i];
      const Dim& y = (*b)[b->size() == 1 ? 0 : i];
      const auto r = compare_dims(Cmp, x, y);
      if (!r) return NodeContext::unsupported("comparing the dims ", to_string(x), " and ", to_string(y));
      out.push_back(*r ? 1 : 0);
    }
    const bool scalar = (n.shape_value(0) ? n.shape_value(0)->scalar : n.constant(0)->shape().rank() == 0) &&
                        (n.shape_value(1) ? n.shape_value(1)->scalar : n.constant(1)->shape().rank() == 0);
    auto t = Tensor::zeros(DType::boolean, scalar ? ConcreteShape{} : ConcreteShape{static_cast<std::int64_t>(count)});
    if (!t) return std::move(t).error();
    for (std::size_t i = 0; i < count; ++i) reinterpret_cast<bool*>(t->data())[i] = out[i] != 0;
    n.set_constant(0, std::move(*t));
    return ok();
  }
  const Tensor& a = *n.constant(0);
  const Tensor& b = *n.constant(1);
  if (a.dtype() != b.dtype()) return fail(Errc::dtype_mismatch, "inputs of ", a.dtype(), " and ", b.dtype());
  auto shape = broadcast_concrete(a.shape(), b.shape());
  if (!shape) return std::move(shape).error();
  if (shape->numel() > n.limits().max_elements) {
    return fail(Errc::out_of_range, "the result ", *shape, " is over the limit of ", n.limits().max_elements,
                " elements");
  }
  auto out = Tensor::zeros(DType::boolean, *shape);
  if (!out) return std::move(out).error();
  const std::vector<std::int64_t> ia = broadcast_offsets(a.shape(), *shape);
  const std::vector<std::int64_t> ib = broadcast_offsets(b.shape(), *shape);
  visit_dtype(a.dtype(), [&]<class T>(std::type_identity<T>) {
    const T* x = reinterpret_cast<const T*>(a.data());
    const T* y = reinterpret_cast<const T*>(b.data());
    bool* z = reinterpret_cast<bool*>(out->data());
    for (std::size_t i = 0; i < ia.size(); ++i) {
      if constexpr (FloatElement<T>) {  // f16 and bf16 compared through double, exactly
        z[i] = holds(Cmp, convert_element<double>(x[ia[i]]), convert_element<double>(y[ib[i]]));
      } else if constexpr (std::is_same_v<T, bool>) {  // a file's bool byte may be any value: nonzero is true
        const auto* u = reinterpret_cast<const std::uint8_t*>(x);
        const auto* v = reinterpret_cast<const std::uint8_t*>(y);
        z[i] = holds(Cmp, u[ia[i]] != 0, v[ib[i]] != 0);
      } else {
        z[i] = holds(Cmp, x[ia[i]], y[ib[i]]);
      }
    }
  });
  n.set_constant(0, std::move(*out));
  return ok();
}

// Not of a bool constant.
inline Result<void> logical_not(NodeContext& n) {
  const Tensor* c = n.constant(0);
  if (c == nullptr) return run_time(n);
  if (c->dtype() != DType::boolean) return fail(Errc::dtype_mismatch, "Not of a ", c->dtype(), " input");
  auto out = copy_of(*c);
  if (!out) return std::move(out).error();
  auto* p = reinterpret_cast<std::uint8_t*>(out->data());  // a file's bool byte may be any value
  for (std::int64_t i = 0; i < out->numel(); ++i) p[i] = p[i] == 0 ? 1 : 0;
  n.set_constant(0, std::move(*out));
  return ok();
}

// Where(condition, x, y) with every input known at import: elementwise selection, broadcast; a
// shape value where x or y is one.
inline Result<void> where(NodeContext& n) {
  if (any_run_time(n)) {
    std::vector<Value> inputs;
    for (std::size_t i = 0; i < 3; ++i) {
      auto v = n.value(i);
      if (!v) return std::move(v).error();
      inputs.push_back(*v);
    }
    n.set_output(0, n.builder().add(teeny::Where{}, std::move(inputs), n.name()));
    return ok();
  }
  if (n.shape_value(0) != nullptr) return NodeContext::unsupported("Where with a shape as its condition");
  const Tensor& cond = *n.constant(0);
  if (cond.dtype() != DType::boolean) return fail(Errc::dtype_mismatch, "the condition is ", cond.dtype());
  const auto* c = reinterpret_cast<const std::uint8_t*>(cond.data());  // nonzero is true
  if (n.shape_value(1) != nullptr || n.shape_value(2) != nullptr) {
    if (cond.shape().rank() > 1) return fail(Errc::shape_mismatch, "a condition of ", cond.shape(), " for a shape");
    auto a = n.dims(1);
    if (!a) return std::move(a).error();
    auto b = n.dims(2);
    if (!b) return std::move(b).error();
    const auto size_c = static_cast<std::size_t>(cond.numel());
    const std::size_t count = std::max({size_c, a->size(), b->size()});
    ShapeValue out;
    for (std::size_t i = 0; i < count; ++i) {
      for (const std::size_t size : {size_c, a->size(), b->size()}) {
        if (size != 1 && size != count) return fail(Errc::shape_mismatch, "Where's inputs do not broadcast");
      }
      out.dims.push_back(c[size_c == 1 ? 0 : i] ? (*a)[a->size() == 1 ? 0 : i] : (*b)[b->size() == 1 ? 0 : i]);
    }
    const auto scalar_of = [&](std::size_t i) {
      return n.shape_value(i) ? n.shape_value(i)->scalar : n.constant(i)->shape().rank() == 0;
    };
    out.scalar = cond.shape().rank() == 0 && scalar_of(1) && scalar_of(2);
    return n.set_shape_value(0, std::move(out));
  }
  const Tensor& a = *n.constant(1);
  const Tensor& b = *n.constant(2);
  if (a.dtype() != b.dtype()) return fail(Errc::dtype_mismatch, "x is ", a.dtype(), " and y ", b.dtype());
  auto ab = broadcast_concrete(a.shape(), b.shape());
  if (!ab) return std::move(ab).error();
  auto shape = broadcast_concrete(cond.shape(), *ab);
  if (!shape) return std::move(shape).error();
  if (shape->numel() > n.limits().max_elements) {
    return fail(Errc::out_of_range, "the result ", *shape, " is over the limit of ", n.limits().max_elements,
                " elements");
  }
  auto out = Tensor::zeros(a.dtype(), *shape);
  if (!out) return std::move(out).error();
  const std::vector<std::int64_t> ic = broadcast_offsets(cond.shape(), *shape);
  const std::vector<std::int64_t> ia = broadcast_offsets(a.shape(), *shape);
  const std::vector<std::int64_t> ib = broadcast_offsets(b.shape(), *shape);
  const std::size_t size = size_of(a.dtype());
  for (std::size_t i = 0; i < ic.size(); ++i) {
    const std::byte* from = c[ic[i]] ? a.data() + ia[i] * size : b.data() + ib[i] * size;
    std::copy(from, from + size, out->data() + i * size);
  }
  n.set_constant(0, std::move(*out));
  return ok();
}

// ConstantOfShape(shape): a constant of those concrete dims, every element the attribute 'value'
// (a one-element tensor; a float 0 by default).
inline Result<void> constant_of_shape(NodeContext& n) {
  if (n.shape_value(0) != nullptr) {
    return NodeContext::unsupported("ConstantOfShape of symbolic dims ", Shape(n.shape_value(0)->dims),
                                    " (a run-time fill is planned)");
  }
  auto dims = n.ints(0);
  if (!dims) return std::move(dims).error();
  auto shape = ConcreteShape::from(*dims);
  if (!shape) return std::move(shape).error();
  if (shape->numel() > n.limits().max_elements) {
    return fail(Errc::out_of_range, "shape ", *shape, " is over the limit of ", n.limits().max_elements, " elements");
  }
  Result<Tensor> value = Tensor::from<float>({0.0F}, ConcreteShape{1});
  if (const proto::Tensor* t = n.tensor_attr("value")) value = n.tensor_of(*t);
  if (!value) return std::move(value).error().context("attribute 'value'");
  if (value->numel() != 1) return fail(Errc::invalid_argument, "attribute 'value' holds ", value->numel(), " elements");
  auto out = Tensor::zeros(value->dtype(), *shape);
  if (!out) return std::move(out).error();
  const std::size_t size = size_of(value->dtype());
  for (std::int64_t i = 0; i < out->numel(); ++i) {
    std::copy(value->data(), value->data() + size, out->data() + static_cast<std::size_t>(i) * size);
  }
  n.set_constant(0, std::move(*out));
  return ok();
}

// Range(start, limit, delta) of scalar constants: ceil((limit - start) / delta) values.
inline Result<void> range(NodeContext& n) {
  const Tensor* s = n.constant(0);
  const Tensor* l = n.constant(1);
  const Tensor* d = n.constant(2);
  if (s == nullptr || l == nullptr || d == nullptr) return run_time(n);
  if (s->dtype() != l->dtype() || s->dtype() != d->dtype() || s->numel() != 1 || l->numel() != 1 || d->numel() != 1) {
    return fail(Errc::invalid_argument, "start, limit and delta are scalars of one dtype");
  }
  Result<Tensor> out = fail(Errc::internal, "");
  visit_dtype(s->dtype(), [&]<class T>(std::type_identity<T>) {
    if constexpr (std::is_same_v<T, bool>) {
      out = fail(Errc::dtype_mismatch, "Range of bool");
    } else {
      const double start = convert_element<double>(*reinterpret_cast<const T*>(s->data()));
      const double limit = convert_element<double>(*reinterpret_cast<const T*>(l->data()));
      const double delta = convert_element<double>(*reinterpret_cast<const T*>(d->data()));
      if (delta == 0 || !std::isfinite(start) || !std::isfinite(limit) || !std::isfinite(delta)) {
        out = fail(Errc::invalid_argument, "Range(", start, ", ", limit, ", ", delta, ")");
        return;
      }
      const double count = std::max(0.0, std::ceil((limit - start) / delta));
      if (count > static_cast<double>(n.limits().max_elements)) {
        out = fail(Errc::out_of_range, "Range of ", count, " elements, over the limit of ", n.limits().max_elements);
        return;
      }
      out = Tensor::zeros(s->dtype(), ConcreteShape{static_cast<std::int64_t>(count)});
      if (!out) return;
      T* p = reinterpret_cast<T*>(out->data());
      const T first = *reinterpret_cast<const T*>(s->data());
      const T step = *reinterpret_cast<const T*>(d->data());
      // start + i * delta in T, as ONNX defines it (integers exactly).
      for (std::int64_t i = 0; i < out->numel(); ++i) {
        if constexpr (FloatElement<T>) {
          p[i] = convert_element<T>(convert_element<double>(first) +
                                    static_cast<double>(i) * convert_element<double>(step));
        } else {  // in int64, checked: the value lies between start and limit, so it fits T
          std::int64_t v = 0;
          if (__builtin_mul_overflow(i, static_cast<std::int64_t>(step), &v) ||
              __builtin_add_overflow(v, static_cast<std::int64_t>(first), &v)) {
            out = fail(Errc::out_of_range, "Range element ", i, " overflows");
            return;
          }
          p[i] = static_cast<T>(v);
        }
      }
    }
  });
  if (!out) return std::move(out).error();
  n.set_constant(0, std::move(*out));
  return ok();
}

}  // namespace teeny::onnx::convert
