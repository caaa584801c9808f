// teeny.onnx:ops_elementwise — converters of ONNX's elementwise ops: activations, unary math,
// broadcasting arithmetic, and the ops that pass a value through (Identity, Dropout at inference,
// Cast).
export module teeny.onnx:ops_elementwise;
import teeny.std;
import teeny.core;
import teeny.graph;
import :context;
import :fold;
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
  if (const Tensor* c = n.constant(0)) {
    auto folded = fold_unary(Fn, *c);
    if (!folded) return std::move(folded).error().context("folding its constant input");
    n.set_constant(0, std::move(*folded));
    return ok();
  }
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

// ThresholdedRelu(alpha = 1): x where x > alpha, else 0: torch.nn.Threshold(alpha, 0).
inline Result<void> thresholded_relu(NodeContext& n) {
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  n.set_output(0, n.builder().add(Threshold{n.attr("alpha", 1.0F), 0}, {*x}, n.name()));
  return ok();
}

// Shrink(lambd = 0.5, bias = 0): x + bias below -lambd, x - bias above lambd, else 0. Bias 0 is
// Hardshrink, bias = lambd Softshrink; other biases have no op in teeny.
inline Result<void> shrink(NodeContext& n) {
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  const float lambd = n.attr("lambd", 0.5F);
  const float bias = n.attr("bias", 0.0F);
  if (bias == 0) {
    n.set_output(0, n.builder().add(Hardshrink{lambd}, {*x}, n.name()));
  } else if (bias == lambd) {
    n.set_output(0, n.builder().add(Softshrink{lambd}, {*x}, n.name()));
  } else {
    return NodeContext::unsupported("Shrink with bias ", bias, " other than 0 (Hardshrink) or lambd ", lambd,
                                    " (Softshrink)");
  }
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

// ONNX's HardSigmoid is max(0, min(1, alpha x + beta)), alpha 0.2 by default: teeny's Hardsigmoid
// where alpha and beta are PyTorch's (1/6 and 1/2, what PyTorch exports), else built from
// arithmetic with constants.
inline Result<void> hard_sigmoid(NodeContext& n) {
  const float alpha = n.attr("alpha", 0.2F);
  const float beta = n.attr("beta", 0.5F);
  if (std::abs(alpha - 1.0F / 6) <= 1e-7F && beta == 0.5F) return unary<Hardsigmoid>(n);
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  Result<Value> y = with_scalar(n, BinaryOp::mul, *x, alpha, n.part_name("alpha"));
  if (y) y = with_scalar(n, BinaryOp::add, *y, beta, n.part_name("beta"));
  if (y) y = with_scalar(n, BinaryOp::maximum, *y, 0, n.part_name("max"));
  if (y) y = with_scalar(n, BinaryOp::minimum, *y, 1, n.name());
  if (!y) return std::move(y).error();
  n.set_output(0, *y);
  return ok();
}

// Selu: gamma * elu(x, alpha).
inline Result<void> selu(NodeContext& n) {
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  const float alpha = n.attr("alpha", 1.67326319217681884765625F);
  const float gamma = n.attr("gamma", 1.05070102214813232421875F);
  const Value e = n.builder().add(ELU{alpha}, {*x}, n.part_name("elu"));
  auto y = with_scalar(n, BinaryOp::mul, e, gamma, n.name());
  if (!y) return std::move(y).error();
  n.set_output(0, *y);
  return ok();
}

// Celu: alpha * elu(x / alpha, 1).
inline Result<void> celu(NodeContext& n) {
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  const float alpha = n.attr("alpha", 1.0F);
  if (alpha == 0) return fail(Errc::invalid_argument, "alpha is 0");
  auto scaled = with_scalar(n, BinaryOp::div, *x, alpha, n.part_name("scale"));
  if (!scaled) return std::move(scaled).error();
  const Value e = n.builder().add(ELU{1}, {*scaled}, n.part_name("elu"));
  auto y = with_scalar(n, BinaryOp::mul, e, alpha, n.name());
  if (!y) return std::move(y).error();
  n.set_output(0, *y);
  return ok();
}

// Softsign: x / (1 + |x|).
inline Result<void> softsign(NodeContext& n) {
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  const Value a = n.builder().add(Unary{UnaryOp::abs}, {*x}, n.part_name("abs"));
  auto d = with_scalar(n, BinaryOp::add, a, 1, n.part_name("plus_one"));
  if (!d) return std::move(d).error();
  n.set_output(0, n.builder().add(Binary{BinaryOp::div}, {*x, *d}, n.name()));
  return ok();
}

// PRelu with a constant slope: relu(x) + slope * min(x, 0), the slope broadcast as ONNX's.
inline Result<void> prelu(NodeContext& n) {
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  const Tensor* slope = n.constant(1);
  if (slope == nullptr) return NodeContext::unsupported("a slope computed at run time");
  std::vector<std::int64_t> dims;
  for (std::size_t i = 0; i < slope->shape().rank(); ++i) dims.push_back(slope->shape()[i]);
  // Before opset 7 a slope of C values is per channel (x is [N, C, ...]): [C, 1, ...].
  auto xt = n.type(0);
  if (!xt) return std::move(xt).error();
  if (n.opset() < 7 && dims.size() == 1 && dims[0] != 1 && xt->shape.rank() >= 2) {
    dims.resize(xt->shape.rank() - 1, 1);
  }
  auto weight = reshaped(*slope, dims);
  if (!weight) return std::move(weight).error();
  const Value pos = n.builder().add(ReLU{}, {*x}, n.part_name("relu"));
  auto neg = with_scalar(n, BinaryOp::minimum, *x, 0, n.part_name("negative"));
  if (!neg) return std::move(neg).error();
  const std::string scaled_name = n.part_name("slope");
  const Value scaled = n.builder().add(Binary{BinaryOp::mul, std::move(dims), false}, {*neg}, scaled_name);
  n.add_weight(scaled_name, "other", std::move(*weight));
  n.set_output(0, n.builder().add(Binary{BinaryOp::add}, {pos, scaled}, n.name()));
  return ok();
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

// Binary(A, B) before opset 7 with broadcast = 1 and an axis: B [b0..bk] is read as
// [b0..bk, 1, ...] so that its first dim meets A's dim `axis`.
template <BinaryOp Fn>
Result<void> legacy_broadcast(NodeContext& n) {
  auto at = n.type(0);
  auto bt = n.type(1);
  if (!at) return std::move(at).error();
  if (!bt) return std::move(bt).error();
  const auto rank = static_cast<std::int64_t>(at->shape.rank());
  std::int64_t axis = n.attr("axis", std::int64_t{0});
  if (axis < 0) axis += rank;
  const auto b_rank = static_cast<std::int64_t>(bt->shape.rank());
  if (axis < 0 || axis + b_rank > rank) {
    return fail(Errc::shape_mismatch, "B ", bt->shape, " does not fit A ", at->shape, " at axis ", axis);
  }
  auto a = n.value(0);
  if (!a) return std::move(a).error();
  std::vector<Dim> dims = bt->shape.dims();
  dims.resize(static_cast<std::size_t>(rank - axis), Dim(1));
  if (const Tensor* c = n.constant(1)) {
    std::vector<std::int64_t> sizes;
    for (const Dim& d : dims) sizes.push_back(d.value);
    auto weight = reshaped(*c, sizes);
    if (!weight) return std::move(weight).error();
    n.set_output(0, n.builder().add(Binary{Fn, std::move(sizes), false}, {*a}, n.name()));
    n.add_weight(n.name(), "other", std::move(*weight));
    return ok();
  }
  auto b = n.value(1);
  if (!b) return std::move(b).error();
  const Value aligned = n.builder().add(Reshape{dims}, {*b}, n.part_name("align"));
  n.set_output(0, n.builder().add(Binary{Fn}, {*a, aligned}, n.name()));
  return ok();
}

// Binary ops broadcast as NumPy does in ONNX from opset 7, as teeny's do. Max, Min and Sum take
// one or more inputs (a chain of binary ops over them). One constant operand of two (x * 0.5,
// 1 - x, an initializer's bias) becomes the op's parameter "other".
template <BinaryOp Fn>
Result<void> binary(NodeContext& n) {
  const std::size_t count = n.inputs();
  if (count == 0) return fail(Errc::invalid_argument, "no inputs");
  // Before opset 7, broadcast = 1 aligns B with A's dims from `axis` on (with no axis, with A's
  // trailing dims, as NumPy does): B gets trailing 1s to align as NumPy would.
  if (n.opset() < 7 && n.attr("broadcast", std::int64_t{0}) != 0 && n.has("axis") && count == 2) {
    return legacy_broadcast<Fn>(n);
  }
  bool all_constant = true;
  bool any_shape = false;
  bool all_scalar = true;
  for (std::size_t i = 0; i < count; ++i) {
    all_constant = all_constant && n.constant(i) != nullptr;
    const ShapeValue* sv = n.shape_value(i);
    any_shape = any_shape || sv != nullptr;
    all_scalar = all_scalar && (sv != nullptr ? sv->scalar : n.constant(i) && n.constant(i)->shape().rank() == 0);
  }
  if (any_shape) {  // arithmetic on dims known at import, some symbolic
    auto acc = n.dims(0);
    for (std::size_t i = 1; i < count && acc; ++i) {
      auto next = n.dims(i);
      acc = next ? fold_dims(Fn, *acc, *next) : std::move(next);
    }
    if (!acc) return std::move(acc).error();
    return n.set_shape_value(0, {std::move(*acc), all_scalar});
  }
  if (all_constant) {  // folded at import
    auto acc = copy_of(*n.constant(0));
    for (std::size_t i = 1; i < count && acc; ++i) acc = fold_binary(Fn, *acc, *n.constant(i), n.limits().max_elements);
    if (!acc) return std::move(acc).error().context("folding its constant inputs");
    n.set_constant(0, std::move(*acc));
    return ok();
  }
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

// Mod: with fmod 1, C's fmod (the dividend's sign), teeny's fmod; ONNX requires it for floats.
// With fmod 0 (integers only) the result takes the divisor's sign, which teeny has no op for.
inline Result<void> mod(NodeContext& n) {
  if (n.attr("fmod", std::int64_t{0}) == 0) {
    return NodeContext::unsupported(
        "Mod with fmod 0 (the divisor's sign, for integers; teeny has fmod's, "
        "the dividend's sign)");
  }
  return binary<BinaryOp::fmod>(n);
}

// Mean of one or more inputs: their sum divided by the count.
inline Result<void> mean(NodeContext& n) {
  const std::size_t count = n.inputs();
  if (count == 0) return fail(Errc::invalid_argument, "no inputs");
  auto y = n.value(0);
  if (!y) return std::move(y).error();
  if (count == 1) {
    n.set_output(0, *y);
    return ok();
  }
  Value sum = *y;
  for (std::size_t i = 1; i < count; ++i) {
    auto b = n.value(i);
    if (!b) return std::move(b).error();
    sum = n.builder().add(Binary{BinaryOp::add}, {sum, *b}, n.part_name(cat("sum", i)));
  }
  auto out = with_scalar(n, BinaryOp::div, sum, static_cast<double>(count), n.name());
  if (!out) return std::move(out).error();
  n.set_output(0, *out);
  return ok();
}

// Identity, and Dropout at inference (its mask output is refused: teeny does not compute one).
inline Result<void> identity(NodeContext& n) {
  if (n.wants_output(1)) return NodeContext::unsupported("Dropout's mask output");
  if (n.node().op_type == "Dropout" && n.opset() < 7 && n.attr("is_test", std::int64_t{0}) == 0) {
    return NodeContext::unsupported("Dropout in training mode (is_test 0, before opset 7)");
  }
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
  if (const ShapeValue* sv = n.shape_value(0)) return n.set_shape_value(0, *sv);
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  n.set_output(0, *x);
  return ok();
}

// A constant converted to `to` at import, as ONNX's Cast does (float to integer truncates toward
// zero); a value the integer dtype cannot hold is an error, not a wrapped or undefined one.
inline Result<Tensor> cast_constant(const Tensor& c, DType to) {
  auto out = Tensor::zeros(to, c.shape());
  if (!out) return std::move(out).error();
  const auto count = static_cast<std::size_t>(c.numel());
  Result<void> status = ok();
  visit_dtype(c.dtype(), [&]<class From>(std::type_identity<From>) {
    visit_dtype(to, [&]<class To>(std::type_identity<To>) {
      const From* src = reinterpret_cast<const From*>(c.data());
      To* dst = reinterpret_cast<To*>(out->data());
      for (std::size_t i = 0; i < count; ++i) {
        if constexpr (!std::is_same_v<From, To> && !FloatElement<To> && !std::is_same_v<To, bool> &&
                      !std::is_same_v<From, bool>) {
          const auto v = convert_element<double>(src[i]);
          if (!(v >= static_cast<double>(std::numeric_limits<To>::lowest()) &&
                v < static_cast<double>(std::numeric_limits<To>::max()) + 1.0)) {
            status = fail(Errc::out_of_range, "element ", i, " (", v, ") does not fit ", to);
            return;
          }
        }
        if constexpr (std::is_same_v<From, bool>) {  // a file's bool byte may be any value: nonzero is true
          dst[i] = convert_element<To>(reinterpret_cast<const std::uint8_t*>(src)[i] != 0);
        } else {
          dst[i] = convert_element<To>(src[i]);
        }
      }
    });
  });
  if (!status) return std::move(status).error();
  return out;
}

// Cast to `to` (an attribute; Cast before opset 6 named it by a string, which is refused), and
// CastLike to input 1's dtype. A constant is converted at import.
template <bool Like>
Result<void> cast(NodeContext& n) {
  DType to = DType::f32;
  if constexpr (Like) {
    auto like = n.type(1);
    if (!like) return std::move(like).error();
    to = like->dtype;
  } else {
    if (n.opset() < 6) return NodeContext::unsupported("Cast before opset 6 (its 'to' is a string)");
    auto dtype = dtype_from_onnx(static_cast<std::int32_t>(n.attr("to", std::int64_t{0})));
    if (!dtype) return std::move(dtype).error().context("attribute 'to'");
    to = *dtype;
  }
  if (const ShapeValue* sv = n.shape_value(0)) {  // dims stay dims in any integer dtype
    if (is_floating(to) || to == DType::boolean) return NodeContext::unsupported("casting a shape to ", to);
    return n.set_shape_value(0, *sv);
  }
  if (const Tensor* c = n.constant(0)) {
    auto t = cast_constant(*c, to);
    if (!t) return std::move(t).error().context("input 0");
    n.set_constant(0, std::move(*t));
    return ok();
  }
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  n.set_output(0, n.builder().add(Cast{to}, {*x}, n.name()));
  return ok();
}

// Pow: from opset 12 the exponent may have another dtype than the base, and the result has the
// base's. A float base's integer exponent is cast to the base's dtype (a constant one at import)
// before teeny's pow; everything else is as for the other binary ops (an integer base is refused
// by the lowering, as integer arithmetic is).
inline Result<void> pow(NodeContext& n) {
  auto base = n.type(0);
  auto exponent = n.type(1);
  if (!base) return std::move(base).error();
  if (!exponent) return std::move(exponent).error();
  if (n.inputs() != 2 || base->dtype == exponent->dtype || !is_floating(base->dtype) || n.constant(0) != nullptr ||
      n.shape_value(1) != nullptr) {
    return binary<BinaryOp::pow>(n);
  }
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  GraphBuilder& b = n.builder();
  if (const Tensor* c = n.constant(1)) {
    auto e = cast_constant(*c, base->dtype);
    if (!e) return std::move(e).error().context("input 1");
    std::vector<std::int64_t> dims;
    for (std::size_t i = 0; i < e->shape().rank(); ++i) dims.push_back(e->shape()[i]);
    n.set_output(0, b.add(Binary{BinaryOp::pow, std::move(dims), false}, {*x}, n.name()));
    n.add_weight(n.name(), "other", std::move(*e));
    return ok();
  }
  auto e = n.value(1);
  if (!e) return std::move(e).error();
  const Value cast = b.add(Cast{base->dtype}, {*e}, n.part_name("cast"));
  n.set_output(0, b.add(Binary{BinaryOp::pow}, {*x, cast}, n.name()));
  return ok();
}

// Ones of `dims` in `dtype`: Expand's and Tile's multiplier, refused over the import's element limit
// before it is allocated (the dims come from the file).
inline Result<Tensor> ones_of(NodeContext& n, DType dtype, const std::vector<std::int64_t>& dims) {
  auto shape = ConcreteShape::from(dims);
  if (!shape) return std::move(shape).error();
  if (shape->numel() > n.limits().max_elements) {
    return fail(Errc::out_of_range, "ones of shape ", *shape, " are over the limit of ", n.limits().max_elements,
                " elements");
  }
  auto ones = Tensor::zeros(dtype, *shape);
  if (!ones) return std::move(ones).error();
  visit_dtype(dtype, [&]<class T>(std::type_identity<T>) {
    T* p = reinterpret_cast<T*>(ones->data());
    for (std::int64_t i = 0; i < ones->numel(); ++i) p[i] = convert_element<T>(1.0);
  });
  return ones;
}

// Expand of x to `result`, whose dims x has as 1 grow to the symbolic dims of `grown`; ones_dims:
// the concrete dims it grows to (else 1).
inline Result<void> expand_to_symbolic(NodeContext& n, const TensorType& xt, std::vector<std::int64_t> ones_dims,
                                       std::vector<Dim> result, std::vector<Dim> grown) {
  if (!is_floating(xt.dtype)) {
    return NodeContext::unsupported("expanding a ", xt.dtype, " tensor to the symbolic dims ", Shape(grown));
  }
  if (const Tensor* c = n.constant(0)) {  // a constant: the Weight holds it and broadcasts it
    auto value = copy_of(*c);
    if (!value) return std::move(value).error();
    const Weight w{c->dtype(), std::vector<std::int64_t>(c->shape().begin(), c->shape().end()), std::move(result),
                   n.initializer(0)};
    n.set_output(0, n.builder().add(w, {}, n.name()));
    n.add_weight(n.name(), "value", std::move(*value));
    return ok();
  }
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  auto ones = ones_of(n, xt.dtype, ones_dims);
  if (!ones) return std::move(ones).error();
  for (std::size_t k = 0; k < grown.size(); ++k) {
    if (grown[k].is_concrete()) grown[k] = Dim(ones_dims[k]);
  }
  const std::string node = n.part_name("ones");
  const Value broadcast = n.builder().add(Weight{xt.dtype, std::move(ones_dims), std::move(grown), false}, {}, node);
  n.add_weight(node, "value", std::move(*ones));
  n.set_output(0, n.builder().add(Binary{BinaryOp::mul}, {*x, broadcast}, n.name()));
  return ok();
}

// Expand(x, shape): x broadcast with `shape` (a constant, or a shape value with symbolic dims),
// as x * ones: a constant operand of 1s, exact for every float (-0, NaN and infinities kept),
// whose dims are 1 where x already has the result's dim. A constant x is folded. Where a dim of 1
// grows to a symbolic dim, a constant x becomes a Weight broadcast to the result, and a value
// x is multiplied by a Weight of ones broadcast to the symbolic dims.
inline Result<void> expand(NodeContext& n) {
  auto xt = n.type(0);
  if (!xt) return std::move(xt).error();
  auto target = n.dims(1);
  if (!target) return std::move(target).error();
  const std::vector<Dim>& x = xt->shape.dims();
  const std::size_t rank = std::max(x.size(), target->size());
  if (rank > max_rank) return fail(Errc::out_of_range, "expanding to ", rank, " dims, over ", max_rank);
  std::vector<std::int64_t> ones_dims;  // the constant operand's dims, aligned with the result's
  std::vector<Dim> result;
  std::vector<Dim> grown;  // the symbolic dims x grows to (1 elsewhere)
  for (std::size_t k = 0; k < rank; ++k) {
    const Dim xd = k + x.size() >= rank ? x[k + x.size() - rank] : Dim(1);
    const Dim td = k + target->size() >= rank ? (*target)[k + target->size() - rank] : Dim(1);
    const bool x_one = xd.is_concrete() && xd.value == 1;
    const bool t_one = td.is_concrete() && td.value == 1;
    result.push_back(t_one ? xd : td);
    grown.push_back(Dim(1));
    if (t_one || xd == td) {
      ones_dims.push_back(1);
    } else if (x_one && td.is_concrete()) {
      ones_dims.push_back(td.value);
    } else if (x_one) {
      ones_dims.push_back(1);
      grown.back() = td;
    } else {
      return fail(Errc::shape_mismatch, "cannot expand ", xt->shape, " to ", Shape(*target), " (dim ", k, ")");
    }
  }
  if (std::ranges::any_of(grown, [](const Dim& d) { return d.is_symbolic(); })) {
    return expand_to_symbolic(n, *xt, std::move(ones_dims), std::move(result), std::move(grown));
  }
  auto ones = ones_of(n, xt->dtype, ones_dims);
  if (!ones) return std::move(ones).error().context(cat("expanding ", xt->shape, " to ", Shape(*target)));
  if (const Tensor* c = n.constant(0)) {
    auto folded = fold_binary(BinaryOp::mul, *c, *ones, n.limits().max_elements);
    if (!folded) return std::move(folded).error();
    n.set_constant(0, std::move(*folded));
    return ok();
  }
  if (!is_floating(xt->dtype))
    return NodeContext::unsupported("Expand of a ", xt->dtype, " value computed at run time");
  auto v = n.value(0);
  if (!v) return std::move(v).error();
  if (std::ranges::all_of(ones_dims, [](std::int64_t d) { return d == 1; }) && ones_dims.size() == x.size()) {
    n.set_output(0, *v);  // nothing to broadcast
    return ok();
  }
  n.set_output(0, n.builder().add(Binary{BinaryOp::mul, std::move(ones_dims), false}, {*v}, n.name()));
  n.add_weight(n.name(), "other", std::move(*ones));
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

// Tile(x, repeats): x repeated along each dim, built as Expand is: x reshaped to put a dim of 1
// before each repeated dim, multiplied by ones [r, 1] there (exact for every float), and reshaped
// to [r * d, ...]. repeats must be known at import, and a repeated dim must be concrete.
inline Result<void> tile(NodeContext& n) {
  auto xt = n.type(0);
  if (!xt) return std::move(xt).error();
  auto repeats = n.ints(1);
  if (!repeats) return std::move(repeats).error();
  const std::vector<Dim>& x = xt->shape.dims();
  if (repeats->size() != x.size()) {
    return fail(Errc::shape_mismatch, "repeats has ", repeats->size(), " values for input ", xt->shape);
  }
  if (!is_floating(xt->dtype)) return NodeContext::unsupported("Tile of a ", xt->dtype, " value");
  std::vector<Dim> spread;  // x with a 1 before each repeated dim
  std::vector<std::int64_t> ones_dims;
  std::vector<Dim> tiled;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::int64_t r = (*repeats)[i];
    if (r < 0) return fail(Errc::invalid_argument, "repeats[", i, "] is negative (", r, ")");
    if (r != 1) {
      if (!x[i].is_concrete()) {
        return NodeContext::unsupported("repeating the symbolic dim ", i, " of ", xt->shape);
      }
      spread.emplace_back(1);
      ones_dims.push_back(r);
    }
    spread.push_back(x[i]);
    ones_dims.push_back(1);
    const auto size = checked_mul(r, x[i].value);
    if (r != 1 && (!size || *size > n.limits().max_elements)) {
      return fail(Errc::out_of_range, "repeating dim ", i, " of ", xt->shape, " ", r, " times is over the limit of ",
                  n.limits().max_elements, " elements");
    }
    tiled.push_back(r == 1 ? x[i] : Dim(*size));
  }
  auto v = n.value(0);
  if (!v) return std::move(v).error();
  if (spread.size() == x.size()) {  // every repeat 1
    n.set_output(0, *v);
    return ok();
  }
  if (spread.size() > max_rank) {
    return NodeContext::unsupported("tiling ", xt->shape, " needs ", spread.size(), " dims, over ", max_rank);
  }
  auto ones = ones_of(n, xt->dtype, ones_dims);  // each repeat fits the limit, their product may not
  if (!ones) return std::move(ones).error().context(cat("tiling ", xt->shape));
  GraphBuilder& b = n.builder();
  const Value spread_x = b.add(Reshape{spread}, {*v}, n.part_name("spread"));
  const std::string repeat = n.part_name("repeat");
  const Value repeated = b.add(Binary{BinaryOp::mul, std::move(ones_dims), false}, {spread_x}, repeat);
  n.add_weight(repeat, "other", std::move(*ones));
  n.set_output(0, b.add(Reshape{tiled}, {repeated}, n.name()));
  return ok();
}

}  // namespace teeny::onnx::convert
