// teeny.onnx:ops_elementwise — converters of ONNX's elementwise ops: activations, unary math,
// broadcasting arithmetic, and the ops that pass a value through (Identity, Dropout at inference,
// Cast).
module;
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>
export module teeny.onnx:ops_elementwise;
import teeny.core;
import teeny.graph;
import :context;
import :tensors;

export namespace teeny::onnx::convert {

// One graph op over input 0, with no attributes ONNX sets differently from teeny.
template <class Op>
Result<void> unary(NodeContext& n) {
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  n.set_output(0, n.builder().add(Op{}, {*x}, n.name()));
  return ok();
}

template <UnaryOp Fn>
Result<void> unary_math(NodeContext& n) {
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  n.set_output(0, n.builder().add(Unary{Fn}, {*x}, n.name()));
  return ok();
}

inline Result<void> leaky_relu(NodeContext& n) {
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  n.set_output(0, n.builder().add(LeakyReLU{n.attr("alpha", 0.01F)}, {*x}, n.name()));
  return ok();
}

inline Result<void> elu(NodeContext& n) {
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  n.set_output(0, n.builder().add(ELU{n.attr("alpha", 1.0F)}, {*x}, n.name()));
  return ok();
}

// ONNX's Softplus is log(1 + e^x) exactly; teeny's (PyTorch's) returns x above its threshold 20,
// where the two differ by under e^-20 of x.
inline Result<void> softplus(NodeContext& n) {
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  n.set_output(0, n.builder().add(Softplus{1, 20}, {*x}, n.name()));
  return ok();
}

// ONNX's HardSigmoid is max(0, min(1, alpha x + beta)), alpha 0.2 by default; teeny's is
// PyTorch's, alpha 1/6 and beta 1/2 (what HardSwish uses, and what PyTorch exports).
inline Result<void> hard_sigmoid(NodeContext& n) {
  const float alpha = n.attr("alpha", 0.2F);
  const float beta = n.attr("beta", 0.5F);
  if (std::abs(alpha - 1.0F / 6) > 1e-6F || beta != 0.5F) {
    return NodeContext::unsupported("HardSigmoid with alpha ", alpha, " and beta ", beta,
                                    " (teeny has PyTorch's: alpha 1/6, beta 0.5)");
  }
  return unary<Hardsigmoid>(n);
}

inline Result<void> gelu(NodeContext& n) {
  const std::string approximate = n.attr("approximate", std::string("none"));
  if (approximate != "none" && approximate != "tanh") {
    return fail(Errc::invalid_argument, "approximate is '", approximate, "', not 'none' or 'tanh'");
  }
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  const GeluApproximate a = approximate == "tanh" ? GeluApproximate::tanh : GeluApproximate::none;
  n.set_output(0, n.builder().add(GELU{a}, {*x}, n.name()));
  return ok();
}

// Binary ops broadcast as NumPy does in ONNX from opset 7, as teeny's do. Max, Min and Sum take
// one or more inputs (a chain of binary ops over them). One constant operand of two (x * 0.5,
// 1 - x, an initializer's bias) becomes the op's parameter "other".
template <BinaryOp Fn>
Result<void> binary(NodeContext& n) {
  const std::size_t count = n.inputs();
  if (count == 0) return fail(Errc::invalid_argument, "no inputs");
  if (count == 2 && (n.constant(0) != nullptr) != (n.constant(1) != nullptr)) {
    const bool first = n.constant(0) != nullptr;
    const Tensor& c = *n.constant(first ? 0 : 1);
    auto x = n.value(first ? 1 : 0);
    if (!x) return std::move(x).error();
    auto xt = n.type(first ? 1 : 0);
    if (!xt) return std::move(xt).error();
    if (c.dtype() != xt->dtype) {
      return fail(Errc::dtype_mismatch, "the constant input ", first ? 0 : 1, " is ", c.dtype(), " and the other ",
                  xt->dtype, " (ONNX's ", name(Fn), " takes one dtype)");
    }
    std::vector<std::int64_t> dims;
    for (std::size_t i = 0; i < c.shape().rank(); ++i) dims.push_back(c.shape()[i]);
    auto weight = copy_of(c);
    if (!weight) return std::move(weight).error();
    n.set_output(0, n.builder().add(Binary{Fn, std::move(dims), first}, {*x}, n.name()));
    n.add_weight(n.name(), "other", std::move(*weight));
    return ok();
  }
  auto acc = n.value(0);
  if (!acc) return std::move(acc).error();
  if (count == 1) {
    n.set_output(0, *acc);
    return ok();
  }
  Value y = *acc;
  for (std::size_t i = 1; i < count; ++i) {
    auto b = n.value(i);
    if (!b) return std::move(b).error();
    y = n.builder().add(Binary{Fn}, {y, *b}, i + 1 == count ? n.name() : n.part_name(cat("input", i)));
  }
  n.set_output(0, y);
  return ok();
}

// Identity, and Dropout at inference (its mask output is refused: teeny does not compute one).
inline Result<void> identity(NodeContext& n) {
  if (n.wants_output(1)) return NodeContext::unsupported("Dropout's mask output");
  if (n.has_input(2)) {  // training_mode (opset 12)
    auto training = n.ints(2);
    if (!training) return std::move(training).error();
    if (!training->empty() && training->front() != 0) return NodeContext::unsupported("Dropout in training mode");
  }
  if (const Tensor* c = n.constant(0)) {
    auto copy = copy_of(*c);
    if (!copy) return std::move(copy).error();
    n.set_constant(0, std::move(*copy));
    return ok();
  }
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  n.set_output(0, *x);
  return ok();
}

inline Result<void> cast(NodeContext& n) {
  auto to = dtype_from_onnx(static_cast<std::int32_t>(n.attr("to", std::int64_t{0})));
  if (!to) return std::move(to).error().context("attribute 'to'");
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  n.set_output(0, n.builder().add(Cast{*to}, {*x}, n.name()));
  return ok();
}


// Clip(x, min, max): max(x, min) then min(.., max), each bound a constant operand (attributes
// before opset 11, optional inputs from it); an absent bound is no bound.
inline Result<void> clip(NodeContext& n) {
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  auto t = n.type(0);
  if (!t) return std::move(t).error();
  std::optional<Tensor> bounds[2];
  if (n.opset() < 11) {
    constexpr float inf = std::numeric_limits<float>::infinity();
    const float lo = n.attr("min", -inf);
    const float hi = n.attr("max", inf);
    for (const auto& [i, v] : {std::pair{0, lo}, {1, hi}}) {
      if (std::isinf(v)) continue;
      auto b = Tensor::from<float>({v}, ConcreteShape{});
      if (!b) return std::move(b).error();
      bounds[i] = std::move(*b);
    }
  } else {
    for (std::size_t i = 0; i < 2; ++i) {
      if (!n.has_input(i + 1)) continue;
      const Tensor* c = n.constant(i + 1);
      if (c == nullptr) return NodeContext::unsupported(i == 0 ? "min" : "max", " computed at run time");
      auto b = copy_of(*c);
      if (!b) return std::move(b).error();
      bounds[i] = std::move(*b);
    }
  }
  Value y = *x;
  for (std::size_t i = 0; i < 2; ++i) {
    if (!bounds[i]) continue;
    if (bounds[i]->dtype() != t->dtype || bounds[i]->numel() != 1) {
      return fail(Errc::dtype_mismatch, i == 0 ? "min" : "max", " is ", bounds[i]->dtype(), " ", bounds[i]->shape(),
                  ", not a ", t->dtype, " scalar");
    }
    const bool last = i == 1 || !bounds[1];
    const Binary op{i == 0 ? BinaryOp::maximum : BinaryOp::minimum, std::vector<std::int64_t>{}, false};
    const std::string node = last ? n.name() : n.part_name(i == 0 ? "min" : "max");
    y = n.builder().add(op, {y}, node);
    n.add_weight(node, "other", std::move(*bounds[i]));
  }
  n.set_output(0, y);
  return ok();
}

}  // namespace teeny::onnx::convert
