// teeny.onnx:ops_shape — converters of ONNX's ops that move or name elements without computing:
// Constant, Shape, Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat, and Gather on
// constants. A shape computation whose inputs are all known at import is folded there (PyTorch's
// exports compute reshape targets this way), so its result is a constant.
module;
#include "onnx/proto.hpp"
export module teeny.onnx:ops_shape;
import teeny.std;
import teeny.core;
import teeny.graph;
import :context;
import :tensors;

namespace teeny::onnx::convert {

Result<Tensor> int64_tensor(const std::vector<std::int64_t>& values, ConcreteShape shape) {
  return Tensor::from<std::int64_t>(std::span<const std::int64_t>(values), shape);
}

// Input 0's dims as teeny Dims (a constant's, or a value's declared ones).
Result<std::vector<Dim>> dims_of(NodeContext& n) {
  auto t = n.type(0);
  if (!t) return std::move(t).error();
  return t->shape.dims();
}

// The product of `dims` as one dim (a number times at most one symbol), or nothing.
std::optional<Dim> product_of(const std::vector<Dim>& dims) {
  Dim p = 1;
  for (const Dim& d : dims) {
    if (d.is_symbolic() && p.is_symbolic()) return std::nullopt;
    std::int64_t value = 0;
    if (__builtin_mul_overflow(p.value, d.value, &value)) return std::nullopt;
    p = d.is_symbolic() ? Dim::sym(d.symbol, value) : (p.is_symbolic() ? Dim::sym(p.symbol, value) : Dim(value));
  }
  return p;
}

// Sets output 0 to input 0 with `dims`: folded for a constant (whose dims must then be concrete).
Result<void> reshape_to(NodeContext& n, const std::vector<Dim>& dims) {
  if (const Tensor* c = n.constant(0)) {
    std::vector<std::int64_t> sizes;
    for (const Dim& d : dims) {
      if (!d.is_concrete()) return fail(Errc::internal, "a constant's dims are concrete");
      sizes.push_back(d.value);
    }
    auto t = reshaped(*c, sizes);
    if (!t) return std::move(t).error();
    n.set_constant(0, std::move(*t));
    return ok();
  }
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  n.set_output(0, n.builder().add(Reshape{dims}, {*x}, n.name()));
  return ok();
}

}  // namespace teeny::onnx::convert

export namespace teeny::onnx::convert {

// Constant: its value as an import-time constant (value, value_float(s), value_int(s)).
Result<void> constant(NodeContext& n) {
  if (const proto::Tensor* t = n.tensor_attr("value")) {
    auto tensor = n.tensor_of(*t);
    if (!tensor) return std::move(tensor).error().context("attribute 'value'");
    n.set_constant(0, std::move(*tensor));
    return ok();
  }
  for (const proto::Attribute& a : n.node().attributes) {
    Result<Tensor> t = fail(Errc::internal, "");
    if (a.name == "value_float")
      t = Tensor::from<float>({a.f}, ConcreteShape{});
    else if (a.name == "value_floats")
      t = Tensor::from<float>(std::span<const float>(a.floats),
                              ConcreteShape{static_cast<std::int64_t>(a.floats.size())});
    else if (a.name == "value_int")
      t = int64_tensor({a.i}, ConcreteShape{});
    else if (a.name == "value_ints")
      t = int64_tensor(a.ints, ConcreteShape{static_cast<std::int64_t>(a.ints.size())});
    else
      return NodeContext::unsupported("a Constant given by '", a.name, "'");
    if (!t) return std::move(t).error();
    n.set_constant(0, std::move(*t));
    return ok();
  }
  return fail(Errc::invalid_argument, "a Constant without a value");
}

// Shape: input 0's dims as an i64 constant, or a shape value when some are symbolic (start and
// end from opset 15).
Result<void> shape(NodeContext& n) {
  auto dims = dims_of(n);
  if (!dims) return std::move(dims).error();
  const auto rank = static_cast<std::int64_t>(dims->size());
  const auto clamp = [&](std::int64_t i) { return std::clamp<std::int64_t>(i < 0 ? i + rank : i, 0, rank); };
  const std::int64_t start = clamp(n.attr("start", std::int64_t{0}));
  const std::int64_t end = clamp(n.attr("end", rank));
  // Symbolic dims make a shape value, which the shape computations after it carry along.
  return n.set_shape_value(0, {std::vector<Dim>(dims->begin() + start, dims->begin() + std::max(start, end)), false});
}

// Size: the element count, an int64 scalar (a shape value when it holds a symbolic dim).
Result<void> size(NodeContext& n) {
  auto dims = dims_of(n);
  if (!dims) return std::move(dims).error();
  const std::optional<Dim> count = product_of(*dims);
  if (!count) return NodeContext::unsupported("the Size of ", Shape(*dims), ": a product of two symbolic dims");
  return n.set_shape_value(0, {{*count}, true});
}

// Reshape: the target from a constant; 0 copies the input's dim unless allowzero (opset 14).
Result<void> reshape(NodeContext& n) {
  // Before opset 5 the target is the attribute 'shape'.
  std::vector<Dim> legacy;
  if (n.opset() < 5) {
    for (const std::int64_t d : n.attr("shape", std::vector<std::int64_t>{})) legacy.emplace_back(d);
  }
  // The target: a constant, or a shape value with symbolic dims (PyTorch's x.size(0)).
  auto target = n.opset() < 5 ? Result<std::vector<Dim>>(std::move(legacy)) : n.dims(1);
  if (!target) return std::move(target).error();
  if (const ShapeValue* sv = n.shape_value(0)) {  // a shape vector reshaped: [-1] or [k] keeps it
    const bool vector = target->size() == 1 &&
                        ((*target)[0] == Dim(-1) || (*target)[0] == Dim(static_cast<std::int64_t>(sv->dims.size())));
    if (vector || (target->empty() && sv->dims.size() == 1)) return n.set_shape_value(0, {sv->dims, !vector});
    return NodeContext::unsupported("reshaping a shape value of ", sv->dims.size(), " dims to ", Shape(*target));
  }
  auto dims = dims_of(n);
  if (!dims) return std::move(dims).error();
  const bool allowzero = n.attr("allowzero", std::int64_t{0}) != 0;
  std::vector<Dim> out;
  for (std::size_t i = 0; i < target->size(); ++i) {
    const Dim& t = (*target)[i];
    if (t.is_concrete() && t.value == 0 && !allowzero) {
      if (i >= dims->size()) return fail(Errc::shape_mismatch, "target dim ", i, " copies a dim the input lacks");
      out.push_back((*dims)[i]);
    } else {
      out.push_back(t);
    }
  }
  if (n.constant(0) != nullptr) {  // fold: -1 resolved from the element count
    if (std::ranges::any_of(out, [](const Dim& d) { return d.is_symbolic(); })) {
      return NodeContext::unsupported("reshaping a constant to symbolic dims ", Shape(out));
    }
    std::int64_t known = 1;
    std::optional<std::size_t> unknown;
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (out[i].value == -1) {
        unknown = i;
      } else if (out[i].value < 0 || __builtin_mul_overflow(known, out[i].value, &known)) {
        return fail(Errc::invalid_argument, "cannot reshape ", n.constant(0)->shape(), " to ", Shape(out));
      }
    }
    if (unknown && known != 0) out[*unknown] = n.constant(0)->numel() / known;
  }
  return reshape_to(n, out);
}

// Flatten(axis): [prod(dims before axis), prod(dims from axis)].
Result<void> flatten(NodeContext& n) {
  auto dims = dims_of(n);
  if (!dims) return std::move(dims).error();
  const auto rank = static_cast<std::int64_t>(dims->size());
  std::int64_t axis = n.attr("axis", std::int64_t{1});
  if (axis < 0) axis += rank;
  if (axis < 0 || axis > rank) return fail(Errc::invalid_argument, "axis ", axis, " is outside rank ", rank);
  // The leading product: concrete, or one symbolic dim times a number (a batch dim).
  Dim lead = 1;
  for (std::int64_t i = 0; i < axis; ++i) {
    const Dim& d = (*dims)[static_cast<std::size_t>(i)];
    if (d.is_concrete()) {
      lead.value *= d.value;
    } else if (lead.is_concrete()) {
      lead = Dim::sym(d.symbol, lead.value * d.value);
    } else {
      return NodeContext::unsupported("flattening two symbolic dims into one");
    }
  }
  if (n.constant(0) != nullptr) {
    const std::int64_t rest = lead.value == 0 ? 0 : n.constant(0)->numel() / lead.value;
    return reshape_to(n, {lead, rest});
  }
  return reshape_to(n, {lead, -1});
}

// Squeeze and Unsqueeze: axes as an attribute before opset 13, as input 1 from it.
template <bool Unsqueeze>
Result<void> squeeze(NodeContext& n) {
  std::vector<std::int64_t> axes;
  if (n.opset() >= 13) {
    if (n.has_input(1)) {
      auto a = n.ints(1);
      if (!a) return std::move(a).error();
      axes = std::move(*a);
    }
  } else {
    axes = n.attr("axes", std::vector<std::int64_t>{});
  }
  auto dims = dims_of(n);
  if (!dims) return std::move(dims).error();
  const std::size_t out_rank = Unsqueeze ? dims->size() + axes.size() : dims->size();
  std::vector<bool> marked(out_rank, false);
  for (const std::int64_t a : axes) {
    auto axis = normalize_axis(a, out_rank);
    if (!axis) return std::move(axis).error().context("axes");
    marked[*axis] = true;
  }
  std::vector<Dim> out;
  if constexpr (Unsqueeze) {
    std::size_t next = 0;
    for (std::size_t i = 0; i < out_rank; ++i) out.push_back(marked[i] ? Dim(1) : (*dims)[next++]);
  } else {
    for (std::size_t i = 0; i < dims->size(); ++i) {
      const Dim& d = (*dims)[i];
      const bool one = d.is_concrete() && d.value == 1;
      if (axes.empty() ? one : marked[i]) {
        if (!one) return fail(Errc::shape_mismatch, "axis ", i, " of ", Shape(*dims), " is not 1");
        continue;
      }
      out.push_back(d);
    }
  }
  if (const ShapeValue* sv = n.shape_value(0)) {  // a scalar dim <-> a vector of one
    if (out.size() > 1) return NodeContext::unsupported("a shape value of rank ", out.size());
    return n.set_shape_value(0, {sv->dims, out.empty()});
  }
  return reshape_to(n, out);
}

// Transpose(perm), the dims reversed by default; a constant (a weight stored transposed) is folded.
Result<void> transpose(NodeContext& n) {
  auto xt = n.type(0);
  if (!xt) return std::move(xt).error();
  std::vector<std::int64_t> reversed;
  for (std::size_t i = xt->shape.rank(); i-- > 0;) reversed.push_back(static_cast<std::int64_t>(i));
  const std::vector<std::int64_t> perm = n.attr("perm", reversed);
  if (const Tensor* c = n.constant(0)) {  // a weight stored transposed: folded at import
    auto t = permuted(*c, perm);
    if (!t) return std::move(t).error();
    n.set_constant(0, std::move(*t));
    return ok();
  }
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  n.set_output(0, n.builder().add(Permute{perm}, {*x}, n.name()));
  return ok();
}

// Concat: of values, or folded when every input is a constant of the same dtype.
Result<void> concat(NodeContext& n) {
  const std::int64_t axis = n.attr("axis", std::int64_t{n.opset() < 4 ? 1 : 0});  // 1 by default before opset 4
  bool all_constant = true;
  bool any_shape = false;
  for (std::size_t i = 0; i < n.inputs(); ++i) {
    all_constant = all_constant && n.constant(i) != nullptr;
    any_shape = any_shape || n.shape_value(i) != nullptr;
  }
  if (any_shape) {  // dims known at import, some symbolic: a shape value
    ShapeValue joined;
    for (std::size_t i = 0; i < n.inputs(); ++i) {
      const ShapeValue* sv = n.shape_value(i);
      if ((sv != nullptr && sv->scalar) || (n.constant(i) != nullptr && n.constant(i)->shape().rank() != 1)) {
        return fail(Errc::shape_mismatch, "input ", i, " of a Concat of shapes is not a vector");
      }
      auto dims = n.dims(i);
      if (!dims) return std::move(dims).error();
      joined.dims.insert(joined.dims.end(), dims->begin(), dims->end());
    }
    if (joined.dims.size() > max_rank) return NodeContext::unsupported("a shape of ", joined.dims.size(), " dims");
    return n.set_shape_value(0, std::move(joined));
  }
  if (all_constant && n.inputs() > 0) {
    const Tensor& first = *n.constant(0);
    if (first.shape().rank() != 1)
      return NodeContext::unsupported("folding a Concat of constants of rank ", first.shape().rank());
    std::vector<std::byte> bytes;
    std::int64_t count = 0;
    for (std::size_t i = 0; i < n.inputs(); ++i) {
      const Tensor& t = *n.constant(i);
      if (t.dtype() != first.dtype() || t.shape().rank() != 1) {
        return fail(Errc::dtype_mismatch, "input ", i, " is ", t.dtype(), " ", t.shape(), ", input 0 ", first.dtype(),
                    " ", first.shape());
      }
      bytes.insert(bytes.end(), t.data(), t.data() + t.bytes());
      count += t.numel();
    }
    auto out = Tensor::zeros(first.dtype(), ConcreteShape{count});
    if (!out) return std::move(out).error();
    if (!bytes.empty()) std::memcpy(out->data(), bytes.data(), bytes.size());
    n.set_constant(0, std::move(*out));
    return ok();
  }
  std::vector<Value> xs;
  for (std::size_t i = 0; i < n.inputs(); ++i) {
    auto x = n.value(i);
    if (!x) return std::move(x).error();
    xs.push_back(*x);
  }
  n.set_output(0, n.builder().add(Concat{axis}, std::move(xs), n.name()));
  return ok();
}

// Gather of a run-time value at constant indices (a scalar or a vector): a Slice of one element
// along the axis per index (one Slice for a run of consecutive ones), concatenated; a scalar
// index drops the axis (ViT's x[:, 0]).
Result<void> gather_slices(NodeContext& n, const Tensor& indices, std::int64_t axis_attr) {
  if (indices.shape().rank() > 1)
    return NodeContext::unsupported("Gather at constant indices of rank ", indices.shape().rank());
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  auto xt = n.type(0);
  if (!xt) return std::move(xt).error();
  auto axis = normalize_axis(axis_attr, xt->shape.rank());
  if (!axis) return std::move(axis).error().context("attribute 'axis'");
  const Dim& extent = xt->shape[*axis];
  if (!extent.is_concrete()) return NodeContext::unsupported("Gather along the symbolic dim ", to_string(extent));
  auto at = integers_of(indices);
  if (!at) return std::move(at).error().context("input 1");
  if (at->empty()) return NodeContext::unsupported("Gather of no indices");
  std::vector<std::pair<std::int64_t, std::int64_t>> runs;  // [begin, end) along the axis
  for (std::int64_t i : *at) {
    if (i < -extent.value || i >= extent.value) {
      return fail(Errc::out_of_range, "index ", i, " is outside dim ", *axis, " of ", xt->shape);
    }
    if (i < 0) i += extent.value;
    if (!runs.empty() && runs.back().second == i) {
      ++runs.back().second;
    } else {
      runs.emplace_back(i, i + 1);
    }
  }
  const auto a = static_cast<std::int64_t>(*axis);
  const bool scalar = indices.shape().rank() == 0;
  std::vector<Value> parts;
  for (const auto& [begin, end] : runs) {
    const bool last = runs.size() == 1 && !scalar;
    parts.push_back(n.builder().add(Slice{a, begin, end, 1}, {*x}, last ? n.name() : n.part_name("slice")));
  }
  Value y = parts.size() == 1 ? parts.front()
                              : n.builder().add(Concat{a}, std::move(parts), scalar ? n.part_name("concat") : n.name());
  if (scalar) {
    std::vector<Dim> dims = xt->shape.dims();
    dims.erase(dims.begin() + a);
    y = n.builder().add(Reshape{dims}, {y}, n.name());
  }
  n.set_output(0, y);
  return ok();
}

// DepthToSpace (DCR by default, or CRD) and SpaceToDepth on [N, C, H, W]: a Reshape to six dims,
// a Permute and a Reshape back, as ONNX defines them.
template <bool ToSpace>
Result<void> depth_space(NodeContext& n) {
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  auto xt = n.type(0);
  if (!xt) return std::move(xt).error();
  const std::int64_t b = n.attr("blocksize", std::int64_t{0});
  if (xt->shape.rank() != 4) return fail(Errc::shape_mismatch, "input ", xt->shape, " is not [N, C, H, W]");
  const Dim& batch = xt->shape[0];
  for (std::size_t i = 1; i < 4; ++i) {
    if (!xt->shape[i].is_concrete()) return NodeContext::unsupported("a symbolic dim ", to_string(xt->shape[i]));
  }
  const std::int64_t c = xt->shape[1].value;
  const std::int64_t h = xt->shape[2].value;
  const std::int64_t w = xt->shape[3].value;
  if (b <= 0 || b > 4096) return fail(Errc::invalid_argument, "blocksize ", b);
  if (c == 0 || h == 0 || w == 0) return NodeContext::unsupported("an empty input ", xt->shape);
  std::vector<Dim> split;
  std::vector<std::int64_t> perm;
  std::vector<Dim> joined;
  if constexpr (ToSpace) {
    if (c % (b * b) != 0) return fail(Errc::shape_mismatch, "channels ", c, " are not a multiple of ", b * b);
    const bool crd = n.attr("mode", std::string("DCR")) == "CRD";
    if (!crd && n.attr("mode", std::string("DCR")) != "DCR") {
      return fail(Errc::invalid_argument, "mode '", n.attr("mode", std::string()), "' (DCR or CRD)");
    }
    split = crd ? std::vector<Dim>{batch, c / (b * b), b, b, h, w} : std::vector<Dim>{batch, b, b, c / (b * b), h, w};
    perm = crd ? std::vector<std::int64_t>{0, 1, 4, 2, 5, 3} : std::vector<std::int64_t>{0, 3, 4, 1, 5, 2};
    joined = {batch, c / (b * b), h * b, w * b};
  } else {
    if (h % b != 0 || w % b != 0) return fail(Errc::shape_mismatch, "H ", h, " and W ", w, " are not multiples of ", b);
    split = {batch, c, h / b, b, w / b, b};
    perm = {0, 3, 5, 1, 2, 4};
    joined = {batch, c * b * b, h / b, w / b};
  }
  GraphBuilder& g = n.builder();
  const Value s = g.add(Reshape{split}, {*x}, n.part_name("split"));
  const Value p = g.add(Permute{perm}, {s}, n.part_name("permute"));
  n.set_output(0, g.add(Reshape{joined}, {p}, n.name()));
  return ok();
}

// Gather of a constant (a shape) at constant indices along axis 0: folded. A run-time Gather is
// an Embedding when the data is a constant matrix and the axis 0.
Result<void> gather(NodeContext& n) {
  const std::int64_t axis = n.attr("axis", std::int64_t{0});
  const Tensor* data = n.constant(0);
  const Tensor* indices = n.constant(1);
  const ShapeValue* shape = n.shape_value(0);
  if (shape != nullptr && indices != nullptr && !shape->scalar && axis == 0 && indices->shape().rank() <= 1) {
    auto at = integers_of(*indices);
    if (!at) return std::move(at).error().context("input 1");
    ShapeValue picked{{}, indices->shape().rank() == 0};
    const auto size = static_cast<std::int64_t>(shape->dims.size());
    for (std::int64_t i : *at) {
      if (i < -size || i >= size) return fail(Errc::out_of_range, "index ", i, " is outside ", size, " dims");
      picked.dims.push_back(shape->dims[static_cast<std::size_t>(i < 0 ? i + size : i)]);
    }
    return n.set_shape_value(0, std::move(picked));
  }
  if (data != nullptr && indices != nullptr && data->shape().rank() == 1 && axis == 0) {
    auto values = integers_of(*data);
    if (!values) return std::move(values).error().context("input 0");
    auto at = integers_of(*indices);
    if (!at) return std::move(at).error().context("input 1");
    std::vector<std::int64_t> out;
    const auto size = static_cast<std::int64_t>(values->size());
    for (std::int64_t i : *at) {
      if (i < -size || i >= size) return fail(Errc::out_of_range, "index ", i, " is outside ", size, " elements");
      out.push_back((*values)[static_cast<std::size_t>(i < 0 ? i + size : i)]);
    }
    auto t = int64_tensor(out, indices->shape());
    if (!t) return std::move(t).error();
    n.set_constant(0, std::move(*t));
    return ok();
  }
  if (data != nullptr && data->shape().rank() == 2 && axis == 0 && indices == nullptr) {
    auto idx = n.value(1);
    if (!idx) return std::move(idx).error();
    auto w = copy_of(*data);
    if (!w) return std::move(w).error();
    const Value y =
        n.builder().add(Embedding{data->shape()[0], data->shape()[1], std::nullopt, data->dtype()}, {*idx}, n.name());
    n.add_weight(n.name(), "weight", std::move(*w));
    n.set_output(0, y);
    return ok();
  }
  if (indices != nullptr && data == nullptr && shape == nullptr) return gather_slices(n, *indices, axis);
  return NodeContext::unsupported("Gather of run-time indices other than a constant matrix's rows (an embedding)");
}

// Slice: starts, ends, axes and steps as attributes before opset 10, as inputs from it; one
// teeny Slice per axis. A rank-1 integer constant (a shape) is sliced at import.
Result<void> slice(NodeContext& n) {
  std::vector<std::int64_t> starts, ends, axes, steps;
  if (n.opset() < 10) {
    starts = n.attr("starts", std::vector<std::int64_t>{});
    ends = n.attr("ends", std::vector<std::int64_t>{});
    axes = n.attr("axes", std::vector<std::int64_t>{});
  } else {
    for (auto [i, out] : {std::pair{1, &starts}, {2, &ends}, {3, &axes}, {4, &steps}}) {
      if (!n.has_input(static_cast<std::size_t>(i))) continue;
      auto v = n.ints(static_cast<std::size_t>(i));
      if (!v) return std::move(v).error();
      *out = std::move(*v);
    }
  }
  auto t = n.type(0);
  if (!t) return std::move(t).error();
  const std::size_t rank = t->shape.rank();
  if (axes.empty()) {
    for (std::size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<std::int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    return fail(Errc::invalid_argument, "starts, ends, axes and steps have ", starts.size(), ", ", ends.size(), ", ",
                axes.size(), " and ", steps.size(), " values");
  }
  for (const std::int64_t step : steps) {
    if (step <= 0) return NodeContext::unsupported("a step of ", step, " (teeny slices with positive steps)");
  }
  if (starts.empty()) return fail(Errc::invalid_argument, "no starts");
  // A vector known at import (a constant shape, or a shape value with symbolic dims): folded.
  const bool known = n.constant(0) != nullptr || (n.shape_value(0) != nullptr && !n.shape_value(0)->scalar);
  if (known && rank == 1 && starts.size() == 1) {
    if (auto axis = normalize_axis(axes[0], 1); !axis) return std::move(axis).error().context("axes");
    auto values = n.dims(0);
    if (!values) return NodeContext::unsupported("slicing a ", t->dtype, " constant at import");
    const auto size = static_cast<std::int64_t>(values->size());
    const auto clamp = [&](std::int64_t i) { return std::clamp<std::int64_t>(i < 0 ? i + size : i, 0, size); };
    ShapeValue out;
    const std::int64_t begin = clamp(starts[0]);
    const std::int64_t end = clamp(ends[0]);
    for (std::int64_t i = begin; i < end; i += steps[0]) {
      out.dims.push_back((*values)[static_cast<std::size_t>(i)]);
      if (steps[0] >= end - i) break;  // the next index is past the end: stop before i + step overflows
    }
    return n.set_shape_value(0, std::move(out));
  }
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  Value y = *x;
  for (std::size_t i = 0; i < starts.size(); ++i) {
    auto axis = normalize_axis(axes[i], rank);
    if (!axis) return std::move(axis).error().context("axes");
    const Slice op{static_cast<std::int64_t>(*axis), starts[i], ends[i], steps[i]};
    y = n.builder().add(op, {y}, i + 1 == starts.size() ? n.name() : n.part_name(cat("axis", *axis)));
  }
  n.set_output(0, y);
  return ok();
}

// Split into the node's outputs: sizes from 'split' (an attribute before opset 13, an input from
// it), else equal pieces (num_outputs from opset 18, else one per output).
Result<void> split(NodeContext& n) {
  if (n.opset() < 2) return NodeContext::unsupported("Split before opset 2");
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  auto t = n.type(0);
  if (!t) return std::move(t).error();
  auto axis = normalize_axis(n.attr("axis", std::int64_t{0}), t->shape.rank());
  if (!axis) return std::move(axis).error().context("axis");
  const Dim& d = t->shape[*axis];
  if (!d.is_concrete()) return NodeContext::unsupported("splitting symbolic dim '", d.symbol, "'");
  std::vector<std::int64_t> sizes;
  if (n.opset() >= 13 && n.has_input(1)) {
    auto v = n.ints(1);
    if (!v) return std::move(v).error();
    sizes = std::move(*v);
  } else if (n.opset() < 13) {
    sizes = n.attr("split", std::vector<std::int64_t>{});
  }
  if (sizes.empty()) {
    const std::int64_t pieces = n.attr("num_outputs", static_cast<std::int64_t>(n.outputs()));
    if (pieces <= 0) return fail(Errc::invalid_argument, "num_outputs is ", pieces);
    const std::int64_t each = (d.value + pieces - 1) / pieces;  // the last piece is smaller
    for (std::int64_t left = d.value; left > 0; left -= each) sizes.push_back(std::min(each, left));
    if (static_cast<std::int64_t>(sizes.size()) != pieces) {
      return fail(Errc::shape_mismatch, "dim ", *axis, " of ", t->shape, " does not split into ", pieces, " pieces");
    }
  }
  if (sizes.size() != n.outputs()) {
    return fail(Errc::invalid_argument, sizes.size(), " split sizes for ", n.outputs(), " outputs");
  }
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const Split op{static_cast<std::int64_t>(*axis), sizes, static_cast<std::int64_t>(i)};
    n.set_output(i, n.builder().add(op, {*x}, sizes.size() == 1 ? n.name() : n.part_name(cat("piece", i))));
  }
  return ok();
}

// Pad: pads [x1_begin, x2_begin, ..., x1_end, x2_end, ...] (an attribute before opset 11, an input
// from it, over `axes` from opset 18); modes constant, reflect and edge (teeny's replicate).
Result<void> pad(NodeContext& n) {
  if (n.opset() < 2) return NodeContext::unsupported("Pad before opset 2 (its 'paddings')");
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  auto t = n.type(0);
  if (!t) return std::move(t).error();
  const std::size_t rank = t->shape.rank();
  std::vector<std::int64_t> pads;
  double value = 0;
  if (n.opset() < 11) {
    pads = n.attr("pads", std::vector<std::int64_t>{});
    value = n.attr("value", 0.0F);
  } else {
    auto p = n.ints(1);
    if (!p) return std::move(p).error();
    pads = std::move(*p);
    if (const Tensor* c = n.constant(2)) {
      if (c->numel() != 1 || (c->dtype() != DType::f32 && c->dtype() != DType::f64)) {
        return NodeContext::unsupported("a constant_value of ", c->dtype(), " ", c->shape());
      }
      value = c->dtype() == DType::f32 ? *reinterpret_cast<const float*>(c->data())
                                       : *reinterpret_cast<const double*>(c->data());
    } else if (n.has_input(2)) {
      return NodeContext::unsupported("a constant_value computed at run time");
    }
  }
  std::vector<std::int64_t> axes;
  if (n.has_input(3)) {
    auto a = n.ints(3);
    if (!a) return std::move(a).error();
    for (const std::int64_t v : *a) {
      auto axis = normalize_axis(v, rank);
      if (!axis) return std::move(axis).error().context("axes");
      axes.push_back(static_cast<std::int64_t>(*axis));
    }
  } else {
    for (std::size_t i = 0; i < rank; ++i) axes.push_back(static_cast<std::int64_t>(i));
  }
  if (pads.size() != 2 * axes.size()) {
    return fail(Errc::invalid_argument, "pads has ", pads.size(), " values for ", axes.size(), " axes");
  }
  // teeny's pads: (before, after) pairs from the last dim, as far as the first padded one.
  std::vector<std::int64_t> begin(rank, 0), end(rank, 0);
  for (std::size_t i = 0; i < axes.size(); ++i) {
    begin[static_cast<std::size_t>(axes[i])] = pads[i];
    end[static_cast<std::size_t>(axes[i])] = pads[i + axes.size()];
  }
  std::size_t first = 0;
  while (first < rank && begin[first] == 0 && end[first] == 0) ++first;
  std::vector<std::int64_t> pairs;
  for (std::size_t i = rank; i-- > first;) {
    pairs.push_back(begin[i]);
    pairs.push_back(end[i]);
  }
  const std::string mode = n.attr("mode", std::string("constant"));
  PadMode m = PadMode::constant;
  if (mode == "reflect")
    m = PadMode::reflect;
  else if (mode == "edge")
    m = PadMode::replicate;
  else if (mode != "constant")
    return NodeContext::unsupported("mode '", mode, "'");
  if (pairs.empty()) {
    n.set_output(0, *x);
    return ok();
  }
  n.set_output(0, n.builder().add(Pad{pairs, m, m == PadMode::constant ? value : 0.0}, {*x}, n.name()));
  return ok();
}

}  // namespace teeny::onnx::convert
