// teeny.graph:ops_elementwise — the elementwise family: activations (PyTorch's torch.nn modules and
// their defaults), broadcasting binary arithmetic and comparisons, where, unary math, and dropout.
//
//   ReLU{}                        f32[batch, 512] -> f32[batch, 512]; i64 input: an error naming i64
//   Binary{BinaryOp::add}         f32[2, 1, 4] + f32[3, 1] -> f32[2, 3, 4]     (kind: "add")
//   Compare{CompareOp::lt}        f32[2, 1, 4] < f32[3, 1] -> bool[2, 3, 4]    (kind: "lt")
//   Where{}                       bool[3, 1], f32[2, 1, 4], f32[4] -> f32[2, 3, 4]
//   Dropout{.p = 0.1}             f32[batch, 512] -> f32[batch, 512]
export module teeny.graph:ops_elementwise;
import teeny.std;
import teeny.core;
import :tensor_type;
import :concepts;
import :rules;

#define TEENY_GRAPH_TRY(...) \
  if (auto teeny_try_result = (__VA_ARGS__); !teeny_try_result) return std::move(teeny_try_result).error()

// `{}` on members keeps designated initialisers that omit them warning-free (see :concepts).
// NOLINTBEGIN(readability-redundant-member-init)
export namespace teeny {

// ---- activations (float-only, shape-preserving) ------------------------------------------------

/// max(x, 0).
struct ReLU {
  static constexpr std::string_view kind = "relu";
  static constexpr Arity arity{1, 1};
  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const { return {}; }
  friend bool operator==(const ReLU&, const ReLU&) = default;
};
static_assert(GraphOpType<ReLU>);

/// x for x >= 0, negative_slope * x otherwise.
struct LeakyReLU {
  static constexpr std::string_view kind = "leaky_relu";
  static constexpr Arity arity{1, 1};
  double negative_slope = 0.01;
  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const LeakyReLU&, const LeakyReLU&) = default;
};
static_assert(GraphOpType<LeakyReLU>);

/// torch.nn.Threshold: y = x where x > threshold, else value.
struct Threshold {
  static constexpr std::string_view kind = "threshold";
  static constexpr Arity arity{1, 1};
  double threshold = 0;
  double value = 0;
  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const Threshold&, const Threshold&) = default;
};
static_assert(GraphOpType<Threshold>);

/// torch.nn.Hardshrink: y = 0 where |x| <= lambd, else x.
struct Hardshrink {
  static constexpr std::string_view kind = "hardshrink";
  static constexpr Arity arity{1, 1};
  double lambd = 0.5;
  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const Hardshrink&, const Hardshrink&) = default;
};
static_assert(GraphOpType<Hardshrink>);

/// torch.nn.Softshrink: x - lambd above lambd, x + lambd below -lambd, 0 between (lambd >= 0).
struct Softshrink {
  static constexpr std::string_view kind = "softshrink";
  static constexpr Arity arity{1, 1};
  double lambd = 0.5;
  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const Softshrink&, const Softshrink&) = default;
};
static_assert(GraphOpType<Softshrink>);

/// How GELU evaluates the Gaussian CDF: exactly (erf) or with PyTorch's tanh approximation.
enum class GeluApproximate : std::uint8_t { none, tanh };
constexpr std::string_view name(GeluApproximate a) { return a == GeluApproximate::tanh ? "tanh" : "none"; }

/// x * Phi(x).
struct GELU {
  static constexpr std::string_view kind = "gelu";
  static constexpr Arity arity{1, 1};
  GeluApproximate approximate = GeluApproximate::none;
  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const GELU&, const GELU&) = default;
};
static_assert(GraphOpType<GELU>);

/// x * sigmoid(x) (a.k.a. swish).
struct SiLU {
  static constexpr std::string_view kind = "silu";
  static constexpr Arity arity{1, 1};
  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const { return {}; }
  friend bool operator==(const SiLU&, const SiLU&) = default;
};
static_assert(GraphOpType<SiLU>);

/// 1 / (1 + exp(-x)).
struct Sigmoid {
  static constexpr std::string_view kind = "sigmoid";
  static constexpr Arity arity{1, 1};
  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const { return {}; }
  friend bool operator==(const Sigmoid&, const Sigmoid&) = default;
};
static_assert(GraphOpType<Sigmoid>);

/// tanh(x).
struct Tanh {
  static constexpr std::string_view kind = "tanh";
  static constexpr Arity arity{1, 1};
  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const { return {}; }
  friend bool operator==(const Tanh&, const Tanh&) = default;
};
static_assert(GraphOpType<Tanh>);

/// log(1 + exp(beta * x)) / beta; the identity where beta * x > threshold.
struct Softplus {
  static constexpr std::string_view kind = "softplus";
  static constexpr Arity arity{1, 1};
  double beta = 1;
  double threshold = 20;
  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const Softplus&, const Softplus&) = default;
};
static_assert(GraphOpType<Softplus>);

/// x for x > 0, alpha * (exp(x) - 1) otherwise.
struct ELU {
  static constexpr std::string_view kind = "elu";
  static constexpr Arity arity{1, 1};
  double alpha = 1;
  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const ELU&, const ELU&) = default;
};
static_assert(GraphOpType<ELU>);

/// x * relu6(x + 3) / 6.
struct Hardswish {
  static constexpr std::string_view kind = "hardswish";
  static constexpr Arity arity{1, 1};
  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const { return {}; }
  friend bool operator==(const Hardswish&, const Hardswish&) = default;
};
static_assert(GraphOpType<Hardswish>);

/// relu6(x + 3) / 6 (PyTorch's nn.Hardsigmoid).
struct Hardsigmoid {
  static constexpr std::string_view kind = "hardsigmoid";
  static constexpr Arity arity{1, 1};
  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const { return {}; }
  friend bool operator==(const Hardsigmoid&, const Hardsigmoid&) = default;
};
static_assert(GraphOpType<Hardsigmoid>);

// ---- arithmetic ------------------------------------------------------------------------------------

/// An element-wise binary op: `count` is not one but how many there are (it stays last, so it
/// cannot go stale; every table indexed by a BinaryOp checks its size against it).
enum class BinaryOp : std::uint8_t { add, sub, mul, div, pow, maximum, minimum, fmod, count };
inline constexpr std::size_t binary_op_count = static_cast<std::size_t>(BinaryOp::count);
constexpr std::string_view name(BinaryOp op) {
  switch (op) {
    case BinaryOp::add: return "add";
    case BinaryOp::sub: return "sub";
    case BinaryOp::mul: return "mul";
    case BinaryOp::div: return "div";
    case BinaryOp::pow: return "pow";
    case BinaryOp::maximum: return "maximum";
    case BinaryOp::minimum: return "minimum";
    case BinaryOp::fmod: return "fmod";
    case BinaryOp::count: break;
  }
  return "binary";
}

/// Element-wise a (op) b with NumPy/PyTorch broadcasting; both inputs have the same dtype (no
/// implicit promotion: cast first). bool is rejected, and div of integers too (PyTorch's true
/// division would silently promote to float).
///
/// One operand may be a constant instead of an input (`x * 0.5`, `1 - x`; ONNX's arithmetic with
/// an initializer): `other` gives its dims, the node then has one input, and the constant is its
/// parameter "other" in the input's dtype, loaded with the weights and not trained. It is the
/// right operand, or the left one when `other_first`.
struct Binary {
  static constexpr std::string_view kind = "binary";
  static constexpr Arity arity{1, 2};
  BinaryOp op = BinaryOp::add;
  std::optional<std::vector<std::int64_t>> other{};
  bool other_first = false;
  std::string_view name() const { return teeny::name(op); }
  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::vector<ParamSpec> params(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const Binary&, const Binary&) = default;
};
static_assert(GraphOpWithName<Binary> && GraphOpWithParams<Binary>);

/// A comparison: `count` is the number of values, as for BinaryOp.
enum class CompareOp : std::uint8_t { eq, ne, lt, le, gt, ge, count };
inline constexpr std::size_t compare_op_count = static_cast<std::size_t>(CompareOp::count);
constexpr std::string_view name(CompareOp op) {
  switch (op) {
    case CompareOp::eq: return "eq";
    case CompareOp::ne: return "ne";
    case CompareOp::lt: return "lt";
    case CompareOp::le: return "le";
    case CompareOp::gt: return "gt";
    case CompareOp::ge: return "ge";
    case CompareOp::count: break;
  }
  return "compare";
}

/// torch.eq, ne, lt, le, gt, ge: a bool tensor of a and b compared element by element,
/// broadcasting as NumPy does. NaN compares unequal to everything (ne is true), as in IEEE.
struct Compare {
  static constexpr std::string_view kind = "compare";
  static constexpr Arity arity{2, 2};
  CompareOp op = CompareOp::eq;
  std::string_view name() const { return teeny::name(op); }
  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const { return {}; }
  friend bool operator==(const Compare&, const Compare&) = default;
};
static_assert(GraphOpWithName<Compare>);

/// torch.where(condition, x, y): x where the bool condition holds, else y; the three broadcast
/// as NumPy does, x and y share a dtype.
struct Where {
  static constexpr std::string_view kind = "where";
  static constexpr Arity arity{3, 3};
  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const { return {}; }
  friend bool operator==(const Where&, const Where&) = default;
};
static_assert(GraphOpType<Where>);

/// An element-wise math function: `count` is not one but how many there are (it stays last, so it
/// cannot go stale; every table indexed by a UnaryOp checks its size against it).
enum class UnaryOp : std::uint8_t {
  exp,
  log,
  sqrt,
  abs,
  neg,
  reciprocal,
  erf,
  sin,
  cos,
  tan,
  asin,
  acos,
  atan,
  sinh,
  cosh,
  asinh,
  acosh,
  atanh,
  floor,
  ceil,
  round,  // half to even
  sign,
  count
};
inline constexpr std::size_t unary_op_count = static_cast<std::size_t>(UnaryOp::count);
constexpr std::string_view name(UnaryOp op) {
  switch (op) {
    case UnaryOp::exp: return "exp";
    case UnaryOp::log: return "log";
    case UnaryOp::sqrt: return "sqrt";
    case UnaryOp::abs: return "abs";
    case UnaryOp::neg: return "neg";
    case UnaryOp::reciprocal: return "reciprocal";
    case UnaryOp::erf: return "erf";
    case UnaryOp::sin: return "sin";
    case UnaryOp::cos: return "cos";
    case UnaryOp::tan: return "tan";
    case UnaryOp::asin: return "asin";
    case UnaryOp::acos: return "acos";
    case UnaryOp::atan: return "atan";
    case UnaryOp::sinh: return "sinh";
    case UnaryOp::cosh: return "cosh";
    case UnaryOp::asinh: return "asinh";
    case UnaryOp::acosh: return "acosh";
    case UnaryOp::atanh: return "atanh";
    case UnaryOp::floor: return "floor";
    case UnaryOp::ceil: return "ceil";
    case UnaryOp::round: return "round";
    case UnaryOp::sign: return "sign";
    case UnaryOp::count: break;
  }
  return "unary";
}

/// Element-wise math (PyTorch's functions of the same names; round is half to even): abs and neg
/// take any numeric dtype, the others floats.
struct Unary {
  static constexpr std::string_view kind = "unary";
  static constexpr Arity arity{1, 1};
  UnaryOp op = UnaryOp::exp;
  std::string_view name() const { return teeny::name(op); }
  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const { return {}; }
  friend bool operator==(const Unary&, const Unary&) = default;
};
static_assert(GraphOpWithName<Unary>);

// ---- regularization --------------------------------------------------------------------------------

/// torch.nn.Dropout: zeroes elements with probability p while training; the identity otherwise.
struct Dropout {
  static constexpr std::string_view kind = "dropout";
  static constexpr Arity arity{1, 1};
  double p = 0.5;

  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const Dropout&, const Dropout&) = default;
};
static_assert(GraphOpType<Dropout>);

}  // namespace teeny
// NOLINTEND(readability-redundant-member-init)

export namespace teeny {
inline std::string to_string(GeluApproximate a) { return std::string(name(a)); }
inline std::string to_string(BinaryOp op) { return std::string(name(op)); }
inline std::string to_string(UnaryOp op) { return std::string(name(op)); }
}  // namespace teeny

// ---- implementation -----------------------------------------------------------------------------

namespace teeny {
using namespace graph_detail;

namespace graph_detail {
Result<TensorType> same_float(std::span<const TensorType> inputs) {
  TEENY_GRAPH_TRY(require_float(inputs[0]));
  return inputs[0];
}
}  // namespace graph_detail

Result<TensorType> ReLU::infer(std::span<const TensorType> inputs) const { return same_float(inputs); }
Result<TensorType> LeakyReLU::infer(std::span<const TensorType> inputs) const { return same_float(inputs); }
Result<TensorType> Threshold::infer(std::span<const TensorType> inputs) const { return same_float(inputs); }
Result<TensorType> Hardshrink::infer(std::span<const TensorType> inputs) const { return same_float(inputs); }
Result<TensorType> Softshrink::infer(std::span<const TensorType> inputs) const {
  if (!(lambd >= 0)) return fail(Errc::invalid_argument, "lambd must be at least 0, got ", lambd);
  return same_float(inputs);
}
Result<TensorType> GELU::infer(std::span<const TensorType> inputs) const { return same_float(inputs); }
Result<TensorType> SiLU::infer(std::span<const TensorType> inputs) const { return same_float(inputs); }
Result<TensorType> Sigmoid::infer(std::span<const TensorType> inputs) const { return same_float(inputs); }
Result<TensorType> Tanh::infer(std::span<const TensorType> inputs) const { return same_float(inputs); }
Result<TensorType> ELU::infer(std::span<const TensorType> inputs) const { return same_float(inputs); }
Result<TensorType> Hardswish::infer(std::span<const TensorType> inputs) const { return same_float(inputs); }
Result<TensorType> Hardsigmoid::infer(std::span<const TensorType> inputs) const { return same_float(inputs); }

Result<TensorType> Softplus::infer(std::span<const TensorType> inputs) const {
  if (beta == 0) return fail(Errc::invalid_argument, "beta must not be zero");
  return same_float(inputs);
}

std::string LeakyReLU::attributes() const { return attrs({{"negative_slope", fmt(negative_slope)}}); }
std::string Threshold::attributes() const { return attrs({{"threshold", fmt(threshold)}, {"value", fmt(value)}}); }
std::string Hardshrink::attributes() const { return attrs({{"lambd", fmt(lambd)}}); }
std::string Softshrink::attributes() const { return attrs({{"lambd", fmt(lambd)}}); }
std::string GELU::attributes() const { return attrs({{"approximate", to_string(approximate)}}); }
std::string Softplus::attributes() const { return attrs({{"beta", fmt(beta)}, {"threshold", fmt(threshold)}}); }
std::string ELU::attributes() const { return attrs({{"alpha", fmt(alpha)}}); }

Result<TensorType> Binary::infer(std::span<const TensorType> inputs) const {
  const std::size_t expected = other ? 1 : 2;
  if (inputs.size() != expected) {
    return fail(Errc::invalid_argument, "takes ", expected, " input(s) ",
                other ? "with a constant operand" : "without a constant operand", ", not ", inputs.size());
  }
  if (other) TEENY_GRAPH_TRY(check_dims("other", *other));
  const TensorType constant{inputs[0].dtype, other ? shape_of(*other) : Shape{}};
  const TensorType& a = other && other_first ? constant : inputs[0];
  const TensorType& b = !other ? inputs[1] : other_first ? inputs[0] : constant;
  TEENY_GRAPH_TRY(require_same_dtype(a, b));
  TEENY_GRAPH_TRY(require_numeric(a));
  if (op == BinaryOp::div && !is_floating(a.dtype)) {
    return fail(Errc::dtype_mismatch, "div of ", teeny::name(a.dtype),
                " tensors is not supported: PyTorch's true division would promote them to float; cast first");
  }
  auto shape = broadcast_shapes(a.shape, b.shape);
  if (!shape) return std::move(shape).error();
  return TensorType{a.dtype, std::move(*shape)};
}

Result<TensorType> Unary::infer(std::span<const TensorType> inputs) const {
  if (op == UnaryOp::abs || op == UnaryOp::neg) {
    TEENY_GRAPH_TRY(require_numeric(inputs[0]));
  } else {
    TEENY_GRAPH_TRY(require_float(inputs[0]));
  }
  return inputs[0];
}

Result<TensorType> Dropout::infer(std::span<const TensorType> inputs) const {
  TEENY_GRAPH_TRY(require_float(inputs[0]));
  if (!(p >= 0 && p <= 1)) {
    return fail(Errc::invalid_argument, "dropout probability must be between 0 and 1, got ", p);
  }
  return inputs[0];
}

std::vector<ParamSpec> Binary::params(std::span<const TensorType> inputs) const {
  if (!other) return {};
  return {{"other", shape_of(*other), inputs.empty() ? DType::f32 : inputs[0].dtype, false}};
}

std::string Binary::attributes() const {
  if (!other) return {};
  return attrs({{"other", fmt(*other)}, {"other_first", fmt(other_first)}});
}

std::string Dropout::attributes() const { return attrs({{"p", fmt(p)}}); }

Result<TensorType> Compare::infer(std::span<const TensorType> inputs) const {
  if (op == CompareOp::count) return fail(Errc::invalid_argument, "op is not one of eq, ne, lt, le, gt, ge");
  TEENY_GRAPH_TRY(require_same_dtype(inputs[0], inputs[1]));
  TEENY_GRAPH_TRY(require_numeric(inputs[0]));
  auto shape = broadcast_shapes(inputs[0].shape, inputs[1].shape);
  if (!shape) return std::move(shape).error();
  return TensorType{DType::boolean, std::move(*shape)};
}

Result<TensorType> Where::infer(std::span<const TensorType> inputs) const {
  const TensorType& condition = inputs[0];
  if (condition.dtype != DType::boolean) {
    return fail(Errc::dtype_mismatch, "condition ", condition, " is ", teeny::name(condition.dtype),
                ", not bool (compare, or cast it)");
  }
  TEENY_GRAPH_TRY(require_same_dtype(inputs[1], inputs[2]));
  auto xy = broadcast_shapes(inputs[1].shape, inputs[2].shape);
  if (!xy) return std::move(xy).error();
  auto shape = broadcast_shapes(condition.shape, *xy);
  if (!shape) return std::move(shape).error();
  return TensorType{inputs[1].dtype, std::move(*shape)};
}

}  // namespace teeny
