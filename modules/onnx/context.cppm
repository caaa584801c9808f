// teeny.onnx:context — what a converter (one ONNX op type → teeny graph ops) sees of the import:
// its node's inputs (graph values or constants known at import), attributes with their defaults,
// the opset, and where its outputs and weights go.
//
//   Result<void> relu(NodeContext& n) {
//     auto x = n.value(0);
//     if (!x) return std::move(x).error();
//     n.set_output(0, n.builder().add(ReLU{}, {*x}, n.name()));
//     return ok();
//   }
module;
#include <memory>  // std::make_shared (modules/std.cppm says why it is not there)
#include "onnx/proto.hpp"
export module teeny.onnx:context;
import teeny.std;
import teeny.core;
import teeny.graph;
import :tensors;

export namespace teeny::onnx {

/// An integer scalar or vector known at import as teeny dims, some of them symbolic: a shape, or
/// a computation on one, taken from a value with symbolic dims (PyTorch's `x.size(0)` of a dynamic
/// batch). Reshape and the other shape computations read it as they read a constant.
struct ShapeValue {
  std::vector<Dim> dims;
  bool scalar = false;  // a 0-d value (one dim), else 1-d
};

/// A value of the ONNX graph during import: computed by the teeny graph at run time (`value`), or
/// known now (`constant`: an initializer, a Constant node, a folded shape computation; `shape`: a
/// shape computation on symbolic dims). A floating constant used where the graph takes a value
/// gets one too: a Weight node holding it (`constant_as_value`), trained when `initializer`.
struct ImportValue {
  Value value;
  std::shared_ptr<const Tensor> constant;
  std::shared_ptr<const ShapeValue> shape;
  bool initializer = false;
};

/// What the whole import shares: the builder, the values by ONNX name, the weights the teeny
/// graph's parameters load from, and the names taken.
struct ImportState {
  GraphBuilder builder;
  std::map<std::string, ImportValue, std::less<>> values;
  std::vector<NamedTensor> weights;
  std::set<std::string, std::less<>> names;  // teeny node names in use
  ExternalData external;
  TensorLimits limits;

  /// `wanted` if no teeny node has it yet, else `wanted_2`, `wanted_3`, ...; reserved either way.
  std::string unique_name(std::string wanted) {
    if (wanted.empty()) wanted = "node";
    std::string name = wanted;
    for (int i = 2; names.contains(name); ++i) name = cat(wanted, "_", i);
    names.insert(name);
    return name;
  }
};

/// The graph value of the constant `v` (ONNX name `name`): a Weight node named after it, holding
/// it as its weight "value", made on first use and shared by every later one. Floating dtypes only:
/// teeny's graph computes in one floating dtype.
Result<Value> constant_as_value(ImportState& state, const std::string& name, ImportValue& v);

/// One ONNX node being converted.
class NodeContext {
 public:
  NodeContext(ImportState& state, const proto::Node& node, std::string name, std::int64_t opset)
      : state_(state), node_(node), name_(std::move(name)), opset_(opset) {}

  GraphBuilder& builder() { return state_.builder; }
  const proto::Node& node() const { return node_; }
  /// The name of the teeny node this ONNX node becomes (its parameters are "<name>.weight", ...).
  const std::string& name() const { return name_; }
  /// A further teeny node's name, for a node that becomes several: "<name>/<part>".
  std::string part_name(std::string_view part) { return state_.unique_name(cat(name_, "/", part)); }
  /// The default domain's opset the model imports.
  std::int64_t opset() const { return opset_; }
  /// The import's limits, which a tensor made at import (a folded constant) must keep to too.
  const TensorLimits& limits() const { return state_.limits; }

  // ---- inputs
  /// How many inputs the node has, omitted optional ones at the end not counted.
  std::size_t inputs() const {
    std::size_t n = node_.inputs.size();
    while (n > 0 && node_.inputs[n - 1].empty()) --n;
    return n;
  }
  bool has_input(std::size_t i) const { return i < node_.inputs.size() && !node_.inputs[i].empty(); }
  /// Input i as a graph value. A constant input is refused (teeny's graph has no constant op:
  /// its constants are the parameters of the ops that take them).
  Result<Value> value(std::size_t i) const;
  /// Input i's constant, or nullptr when it is computed at run time (or omitted).
  const Tensor* constant(std::size_t i) const;
  /// Whether input i is an initializer (a weight, trained where the graph is), not a folded constant.
  bool initializer(std::size_t i) const;
  /// Input i as integers known at import (shapes, axes, pads): an error when it is not a constant
  /// of an integer dtype.
  Result<std::vector<std::int64_t>> ints(std::size_t i) const;
  /// Input i's type (a constant's and a shape value's too); an error naming it when unknown.
  Result<TensorType> type(std::size_t i) const;
  /// Input i as a shape value with symbolic dims, or nullptr (a constant's integers are not one).
  const ShapeValue* shape_value(std::size_t i) const;
  /// Input i as dims known at import: a constant's integers (any shape, flattened) or a shape
  /// value's dims; an error when it is computed at run time.
  Result<std::vector<Dim>> dims(std::size_t i) const;

  // ---- attributes (the default is ONNX's for the node's opset, which the converter passes)
  bool has(std::string_view attr) const { return find(attr) != nullptr; }
  std::int64_t attr(std::string_view name, std::int64_t fallback);
  float attr(std::string_view name, float fallback);
  std::string attr(std::string_view name, std::string fallback);
  std::vector<std::int64_t> attr(std::string_view name, std::vector<std::int64_t> fallback);
  /// An ONNX tensor (an attribute's) as a teeny Tensor, with the import's limits and external data.
  Result<Tensor> tensor_of(const proto::Tensor& t) { return to_tensor(t, state_.external, state_.limits); }
  /// A TENSOR attribute (Constant's value), or nullptr.
  const proto::Tensor* tensor_attr(std::string_view name);
  /// The first attribute of the wrong type, if any (the attr getters then returned the fallback).
  const std::optional<Error>& attribute_error() const { return attribute_error_; }

  // ---- outputs
  std::size_t outputs() const { return node_.outputs.size(); }
  /// Whether output i is used: named (an omitted optional output has no name).
  bool wants_output(std::size_t i) const { return i < node_.outputs.size() && !node_.outputs[i].empty(); }
  void set_output(std::size_t i, Value v);
  void set_constant(std::size_t i, Tensor t);
  /// Sets output i to dims known at import: an int64 constant when they are all concrete.
  Result<void> set_shape_value(std::size_t i, ShapeValue v);
  /// Stores a weight the teeny node `node` loads as "<node>.<slot>".
  void add_weight(std::string_view node, std::string_view slot, Tensor t);

  /// An error for this node: "unsupported: <parts>".
  template <Printable... Parts>
  static Error unsupported(const Parts&... parts) {
    return fail(Errc::unsupported, parts...);
  }

 private:
  const proto::Attribute* find(std::string_view name) const;
  const proto::Attribute* typed(std::string_view name, proto::AttrType type);

  ImportState& state_;
  const proto::Node& node_;
  std::string name_;
  std::int64_t opset_;
  std::optional<Error> attribute_error_;
};

/// A scalar constant of a float dtype (f32 or f64; others are refused).
Result<Tensor> scalar(DType dtype, double value);
/// x (op) c for a number c: the teeny Binary node `node` with c as its constant operand.
Result<Value> with_scalar(NodeContext& n, BinaryOp op, Value x, double c, const std::string& node);

/// The integers of an integer tensor (shapes, axes), as int64.
Result<std::vector<std::int64_t>> integers_of(const Tensor& t);

/// A copy of `t` (Tensors own their bytes and do not copy implicitly).
Result<Tensor> copy_of(const Tensor& t);
/// A copy of `t` with new dims and the same elements (as many of them).
Result<Tensor> reshaped(const Tensor& t, const std::vector<std::int64_t>& dims);
/// `t`, a matrix [rows, cols], transposed: [cols, rows].
Result<Tensor> transposed(const Tensor& t);
/// `t` with its dims permuted: dim i of the result is dim perm[i] of `t` (numpy.transpose).
Result<Tensor> permuted(const Tensor& t, const std::vector<std::int64_t>& perm);

}  // namespace teeny::onnx

namespace teeny::onnx {

/// Whether a node's or opset's domain is ONNX's default one ("" or "ai.onnx"). Not exported: the
/// import's own units share it.
bool is_default_domain(std::string_view domain) { return domain.empty() || domain == "ai.onnx"; }

Result<Tensor> scalar(DType dtype, double value) {
  if (dtype == DType::f64) return Tensor::from<double>({value}, ConcreteShape{});
  if (dtype == DType::f32) return Tensor::from<float>({static_cast<float>(value)}, ConcreteShape{});
  return NodeContext::unsupported("a ", dtype, " input (f32 and f64 only here)");
}

Result<Value> with_scalar(NodeContext& n, BinaryOp op, Value x, double c, const std::string& node) {
  const TensorType* t = n.builder().type_of(x);
  if (t == nullptr) return fail(Errc::invalid_argument, "a value without a type");
  auto constant = scalar(t->dtype, c);
  if (!constant) return std::move(constant).error();
  const Value y = n.builder().add(Binary{op, std::vector<std::int64_t>{}, false}, {x}, node);
  n.add_weight(node, "other", std::move(*constant));
  return y;
}

Result<std::vector<std::int64_t>> integers_of(const Tensor& t) {
  const auto n = static_cast<std::size_t>(t.numel());
  std::vector<std::int64_t> out(n);
  const auto read = [&]<class T>() {
    const T* p = reinterpret_cast<const T*>(t.data());
    for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::int64_t>(p[i]);
  };
  switch (t.dtype()) {
    case DType::i64: read.operator()<std::int64_t>(); break;
    case DType::i32: read.operator()<std::int32_t>(); break;
    case DType::i16: read.operator()<std::int16_t>(); break;
    case DType::i8: read.operator()<std::int8_t>(); break;
    case DType::u8: read.operator()<std::uint8_t>(); break;
    case DType::u16: read.operator()<std::uint16_t>(); break;
    case DType::u32: read.operator()<std::uint32_t>(); break;
    default: return fail(Errc::dtype_mismatch, "a ", t.dtype(), " tensor where integers were expected");
  }
  return out;
}

Result<Tensor> copy_of(const Tensor& t) {
  auto copy = Tensor::zeros(t.dtype(), t.shape());
  if (copy && t.bytes() != 0) std::memcpy(copy->data(), t.data(), t.bytes());
  return copy;
}

Result<Tensor> reshaped(const Tensor& t, const std::vector<std::int64_t>& dims) {
  auto shape = ConcreteShape::from(dims);
  if (!shape) return std::move(shape).error();
  if (shape->numel() != t.numel()) return fail(Errc::shape_mismatch, "cannot reshape ", t.shape(), " to ", *shape);
  auto out = Tensor::zeros(t.dtype(), *shape);
  if (out && t.bytes() != 0) std::memcpy(out->data(), t.data(), t.bytes());
  return out;
}

Result<Tensor> transposed(const Tensor& t) {
  if (t.shape().rank() != 2) return fail(Errc::shape_mismatch, "a matrix was expected, not ", t.shape());
  return permuted(t, {1, 0});
}

Result<Tensor> permuted(const Tensor& t, const std::vector<std::int64_t>& perm) {
  const std::size_t rank = t.shape().rank();
  std::vector<bool> seen(rank, false);
  bool valid = perm.size() == rank;
  for (std::size_t i = 0; valid && i < rank; ++i) {
    valid = perm[i] >= 0 && perm[i] < static_cast<std::int64_t>(rank) && !seen[static_cast<std::size_t>(perm[i])];
    if (valid) seen[static_cast<std::size_t>(perm[i])] = true;
  }
  if (!valid) {
    std::string listed;
    for (const std::int64_t p : perm) listed += cat(listed.empty() ? "" : ", ", p);
    return fail(Errc::invalid_argument, "perm [", listed, "] is not a permutation of the dims of ", t.shape());
  }
  ConcreteShape dims = t.shape();
  std::vector<std::int64_t> strides(rank, 1);  // the source's, in the result's dim order
  std::vector<std::int64_t> source(rank, 1);
  for (std::size_t d = rank; d-- > 1;) source[d - 1] = source[d] * t.shape()[d];
  for (std::size_t i = 0; i < rank; ++i) {
    dims[i] = t.shape()[static_cast<std::size_t>(perm[i])];
    strides[i] = source[static_cast<std::size_t>(perm[i])];
  }
  auto out = Tensor::zeros(t.dtype(), dims);
  if (!out) return std::move(out).error();
  const std::size_t size = size_of(t.dtype());
  std::vector<std::int64_t> index(rank, 0);
  std::int64_t from = 0;
  for (std::int64_t i = 0; i < dims.numel(); ++i) {
    std::memcpy(out->data() + static_cast<std::size_t>(i) * size, t.data() + static_cast<std::size_t>(from) * size,
                size);
    for (std::size_t d = rank; d-- > 0;) {  // odometer over the result's dims
      from += strides[d];
      if (++index[d] < dims[d]) break;
      from -= strides[d] * dims[d];
      index[d] = 0;
    }
  }
  return out;
}

Result<Value> NodeContext::value(std::size_t i) const {
  if (!has_input(i)) return fail(Errc::invalid_argument, "input ", i, " is missing");
  const auto it = state_.values.find(node_.inputs[i]);
  if (it == state_.values.end()) return fail(Errc::not_found, "input ", i, " '", node_.inputs[i], "' is not defined");
  if (it->second.shape != nullptr) {
    return unsupported("input ", i, " '", node_.inputs[i], "' is a shape computed from symbolic dims (",
                       Shape(it->second.shape->dims),
                       "), used here as a tensor: teeny folds shape computations into the ops that take shapes");
  }
  if (it->second.value.valid()) return it->second.value;
  auto v = constant_as_value(state_, it->first, it->second);
  if (!v) return std::move(v).error().context(cat("input ", i, " '", node_.inputs[i], "'"));
  return v;
}

Result<Value> constant_as_value(ImportState& state, const std::string& name, ImportValue& v) {
  if (v.value.valid()) return v.value;
  if (v.constant == nullptr) return fail(Errc::invalid_argument, "'", name, "' is neither a value nor a constant");
  const Tensor& c = *v.constant;
  if (!is_floating(c.dtype())) {
    return NodeContext::unsupported("a constant of dtype ", c.dtype(), " used as a tensor (teeny's graph holds ",
                                    "floating constants as weights; integer ones only as shapes, axes and indices)");
  }
  std::vector<std::int64_t> dims(c.shape().begin(), c.shape().end());
  const std::string node = state.unique_name(name);
  auto weight = copy_of(c);
  if (!weight) return std::move(weight).error();
  v.value = state.builder.add(Weight{c.dtype(), std::move(dims), {}, v.initializer}, {}, node);
  state.weights.push_back({cat(node, ".value"), std::move(*weight)});
  return v.value;
}

const Tensor* NodeContext::constant(std::size_t i) const {
  if (!has_input(i)) return nullptr;
  const auto it = state_.values.find(node_.inputs[i]);
  return it == state_.values.end() ? nullptr : it->second.constant.get();
}

bool NodeContext::initializer(std::size_t i) const {
  if (!has_input(i)) return false;
  const auto it = state_.values.find(node_.inputs[i]);
  return it != state_.values.end() && it->second.initializer;
}

Result<std::vector<std::int64_t>> NodeContext::ints(std::size_t i) const {
  const Tensor* c = constant(i);
  if (c == nullptr) {
    return unsupported("input ", i, " '", has_input(i) ? node_.inputs[i] : std::string(),
                       "' must be known at import (a constant or a shape computation teeny folds)");
  }
  auto values = integers_of(*c);
  if (!values) return std::move(values).error().context(cat("input ", i, " '", node_.inputs[i], "'"));
  return values;
}

const ShapeValue* NodeContext::shape_value(std::size_t i) const {
  if (!has_input(i)) return nullptr;
  const auto it = state_.values.find(node_.inputs[i]);
  return it == state_.values.end() ? nullptr : it->second.shape.get();
}

Result<std::vector<Dim>> NodeContext::dims(std::size_t i) const {
  if (const ShapeValue* s = shape_value(i)) return s->dims;
  auto values = ints(i);
  if (!values) return std::move(values).error();
  return std::vector<Dim>(values->begin(), values->end());
}

Result<TensorType> NodeContext::type(std::size_t i) const {
  if (const Tensor* c = constant(i)) return TensorType{c->dtype(), Shape(c->shape())};
  if (const ShapeValue* s = shape_value(i)) {
    return TensorType{DType::i64, s->scalar ? Shape{} : Shape{static_cast<std::int64_t>(s->dims.size())}};
  }
  auto v = value(i);
  if (!v) return std::move(v).error();
  const TensorType* t = state_.builder.type_of(*v);
  if (t == nullptr) return fail(Errc::invalid_argument, "input ", i, " '", node_.inputs[i], "' has no type");
  return *t;
}

const proto::Attribute* NodeContext::find(std::string_view name) const {
  for (const proto::Attribute& a : node_.attributes) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

const proto::Attribute* NodeContext::typed(std::string_view name, proto::AttrType type) {
  const proto::Attribute* a = find(name);
  if (a == nullptr) return nullptr;
  if (a->type != type && !attribute_error_) {
    attribute_error_ = fail(Errc::invalid_argument, "attribute '", name, "' has type ", static_cast<int>(a->type),
                            ", not the ", static_cast<int>(type), " ONNX defines for it");
    return nullptr;
  }
  return a->type == type ? a : nullptr;
}

std::int64_t NodeContext::attr(std::string_view name, std::int64_t fallback) {
  const proto::Attribute* a = typed(name, proto::AttrType::i);
  return a != nullptr ? a->i : fallback;
}
float NodeContext::attr(std::string_view name, float fallback) {
  const proto::Attribute* a = typed(name, proto::AttrType::f);
  return a != nullptr ? a->f : fallback;
}
std::string NodeContext::attr(std::string_view name, std::string fallback) {
  const proto::Attribute* a = typed(name, proto::AttrType::s);
  return a != nullptr ? a->s : std::move(fallback);
}
std::vector<std::int64_t> NodeContext::attr(std::string_view name, std::vector<std::int64_t> fallback) {
  const proto::Attribute* a = typed(name, proto::AttrType::ints);
  return a != nullptr ? a->ints : std::move(fallback);
}
const proto::Tensor* NodeContext::tensor_attr(std::string_view name) {
  const proto::Attribute* a = typed(name, proto::AttrType::t);
  return a != nullptr && !a->tensors.empty() ? &a->tensors.front() : nullptr;
}

void NodeContext::set_output(std::size_t i, Value v) {
  if (wants_output(i)) state_.values[node_.outputs[i]] = ImportValue{v, nullptr, nullptr};
}
void NodeContext::set_constant(std::size_t i, Tensor t) {
  if (wants_output(i)) {
    state_.values[node_.outputs[i]] = ImportValue{{}, std::make_shared<const Tensor>(std::move(t)), nullptr};
  }
}
Result<void> NodeContext::set_shape_value(std::size_t i, ShapeValue v) {
  if (v.scalar && v.dims.size() != 1)
    return fail(Errc::internal, "a scalar shape value holds ", v.dims.size(), " dims");
  if (std::ranges::all_of(v.dims, [](const Dim& d) { return d.is_concrete(); })) {
    std::vector<std::int64_t> values;
    for (const Dim& d : v.dims) values.push_back(d.value);
    auto t = v.scalar ? Tensor::from<std::int64_t>({values.front()}, ConcreteShape{})
                      : Tensor::from<std::int64_t>(std::span<const std::int64_t>(values),
                                                   ConcreteShape{static_cast<std::int64_t>(values.size())});
    if (!t) return std::move(t).error();
    set_constant(i, std::move(*t));
    return ok();
  }
  if (wants_output(i)) {
    state_.values[node_.outputs[i]] = ImportValue{{}, nullptr, std::make_shared<const ShapeValue>(std::move(v))};
  }
  return ok();
}

void NodeContext::add_weight(std::string_view node, std::string_view slot, Tensor t) {
  state_.weights.push_back({cat(node, ".", slot), std::move(t)});
}

}  // namespace teeny::onnx
