// teeny.onnx:ops_shape — converters of ONNX's ops that move or name elements without computing:
// Constant, Shape, Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat, and Gather on
// constants. A shape computation whose inputs are all known at import is folded there (PyTorch's
// exports compute reshape targets this way), so its result is a constant.
module;
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "onnx/proto.hpp"
export module teeny.onnx:ops_shape;
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

// Shape: input 0's dims as an i64 constant, which they must all be (start and end from opset 15).
Result<void> shape(NodeContext& n) {
  auto dims = dims_of(n);
  if (!dims) return std::move(dims).error();
  const auto rank = static_cast<std::int64_t>(dims->size());
  const auto clamp = [&](std::int64_t i) { return std::clamp<std::int64_t>(i < 0 ? i + rank : i, 0, rank); };
  const std::int64_t start = clamp(n.attr("start", std::int64_t{0}));
  const std::int64_t end = clamp(n.attr("end", rank));
  std::vector<std::int64_t> out;
  for (std::int64_t i = start; i < end; ++i) {
    const Dim& d = (*dims)[static_cast<std::size_t>(i)];
    if (!d.is_concrete()) {
      return NodeContext::unsupported("the Shape of a value with symbolic dim '", d.symbol,
                                      "' (shape computations on symbolic dims are planned)");
    }
    out.push_back(d.value);
  }
  auto t = int64_tensor(out, ConcreteShape{static_cast<std::int64_t>(out.size())});
  if (!t) return std::move(t).error();
  n.set_constant(0, std::move(*t));
  return ok();
}

// Size: the element count of a value whose dims are concrete, as an int64 scalar constant.
Result<void> size(NodeContext& n) {
  auto dims = dims_of(n);
  if (!dims) return std::move(dims).error();
  std::int64_t count = 1;
  for (const Dim& d : *dims) {
    if (!d.is_concrete()) {
      return NodeContext::unsupported("the Size of a value with symbolic dim '", d.symbol,
                                      "' (shape computations on symbolic dims are planned)");
    }
    count *= d.value;  // the value's type was checked when it was built: no overflow
  }
  auto t = int64_tensor({count}, ConcreteShape{});
  if (!t) return std::move(t).error();
  n.set_constant(0, std::move(*t));
  return ok();
}

// Reshape: the target from a constant; 0 copies the input's dim unless allowzero (opset 14).
Result<void> reshape(NodeContext& n) {
  // Before opset 5 the target is the attribute 'shape'.
  auto target =
      n.opset() < 5 ? Result<std::vector<std::int64_t>>(n.attr("shape", std::vector<std::int64_t>{})) : n.ints(1);
  if (!target) return std::move(target).error();
  auto dims = dims_of(n);
  if (!dims) return std::move(dims).error();
  const bool allowzero = n.attr("allowzero", std::int64_t{0}) != 0;
  std::vector<Dim> out;
  for (std::size_t i = 0; i < target->size(); ++i) {
    const std::int64_t t = (*target)[i];
    if (t == 0 && !allowzero) {
      if (i >= dims->size()) return fail(Errc::shape_mismatch, "target dim ", i, " copies a dim the input lacks");
      out.push_back((*dims)[i]);
    } else {
      out.push_back(t);
    }
  }
  if (n.constant(0) != nullptr) {  // fold: -1 resolved from the element count
    std::int64_t known = 1;
    std::optional<std::size_t> unknown;
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (out[i].value == -1)
        unknown = i;
      else
        known *= out[i].value;
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
  return reshape_to(n, out);
}

// Transpose(perm), the dims reversed by default.
Result<void> transpose(NodeContext& n) {
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  auto xt = n.type(0);
  if (!xt) return std::move(xt).error();
  std::vector<std::int64_t> reversed;
  for (std::size_t i = xt->shape.rank(); i-- > 0;) reversed.push_back(static_cast<std::int64_t>(i));
  n.set_output(0, n.builder().add(Permute{n.attr("perm", reversed)}, {*x}, n.name()));
  return ok();
}

// Concat: of values, or folded when every input is a constant of the same dtype.
Result<void> concat(NodeContext& n) {
  const std::int64_t axis = n.attr("axis", std::int64_t{n.opset() < 4 ? 1 : 0});  // 1 by default before opset 4
  bool all_constant = true;
  for (std::size_t i = 0; i < n.inputs(); ++i) all_constant = all_constant && n.constant(i) != nullptr;
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

// Gather of a constant (a shape) at constant indices along axis 0: folded. A run-time Gather is
// an Embedding when the data is a constant matrix and the axis 0.
Result<void> gather(NodeContext& n) {
  const std::int64_t axis = n.attr("axis", std::int64_t{0});
  const Tensor* data = n.constant(0);
  const Tensor* indices = n.constant(1);
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
  return NodeContext::unsupported(
      "Gather other than of a constant matrix's rows (an embedding) or of a constant shape");
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
  if (const Tensor* c = n.constant(0); c != nullptr && rank == 1 && starts.size() == 1) {
    if (auto axis = normalize_axis(axes[0], 1); !axis) return std::move(axis).error().context("axes");
    auto values = integers_of(*c);
    if (!values) return NodeContext::unsupported("slicing a ", c->dtype(), " constant at import");
    const auto size = static_cast<std::int64_t>(values->size());
    const auto clamp = [&](std::int64_t i) { return std::clamp<std::int64_t>(i < 0 ? i + size : i, 0, size); };
    std::vector<std::int64_t> out;
    const std::int64_t begin = clamp(starts[0]);
    const std::int64_t end = clamp(ends[0]);
    for (std::int64_t i = begin; i < end; i += steps[0]) {
      out.push_back((*values)[static_cast<std::size_t>(i)]);
      if (steps[0] >= end - i) break;  // the next index is past the end: stop before i + step overflows
    }
    auto sliced = int64_tensor(out, ConcreteShape{static_cast<std::int64_t>(out.size())});
    if (!sliced) return std::move(sliced).error();
    n.set_constant(0, std::move(*sliced));
    return ok();
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
