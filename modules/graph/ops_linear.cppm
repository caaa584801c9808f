// teeny.graph:ops_linear — the linear family: Linear (torch.nn.Linear) and MatMul (torch.matmul).
// Attributes, defaults and parameter names are PyTorch's, so a state_dict maps onto the graph by
// key `{node}.{slot}`.
//
//   Linear fc{.in_features = 784, .out_features = 512};
//   fc.infer(std::vector<TensorType>{{DType::f32, {Dim::sym("batch"), 784}}})  // f32[batch, 512]
//   params_of(fc, ...)     // weight f32[512, 784], bias f32[512]
//   MatMul{}               // f32[j, 1, n, m] @ f32[k, m, p] -> f32[j, k, n, p]
export module teeny.graph:ops_linear;
import teeny.std;
import teeny.core;
import :tensor_type;
import :concepts;
import :rules;

// Returns the error of a failed Result<void>/Result<T> expression from the enclosing function.
#define TEENY_GRAPH_TRY(...) \
  if (auto teeny_try_result = (__VA_ARGS__); !teeny_try_result) return std::move(teeny_try_result).error()

// `{}` on members keeps designated initialisers that omit them warning-free (see :concepts).
// NOLINTBEGIN(readability-redundant-member-init)
export namespace teeny {

/// y = x W^T + b over the last dim (torch.nn.Linear): [..., in_features] -> [..., out_features].
/// Params: weight [out_features, in_features], bias [out_features].
struct Linear {
  static constexpr std::string_view kind = "linear";
  static constexpr Arity arity{1, 1};
  std::int64_t in_features = 0;
  std::int64_t out_features = 0;
  bool bias = true;

  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::vector<ParamSpec> params(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const Linear&, const Linear&) = default;
};
static_assert(GraphOpWithParams<Linear>);

/// torch.matmul: 1-D x 1-D is a dot product ([]), a 1-D operand gets a dim prepended (first) or
/// appended (second) that is removed afterwards, and the batch dims (all but the last two) broadcast:
/// [j, 1, n, m] @ [k, m, p] -> [j, k, n, p].
struct MatMul {
  static constexpr std::string_view kind = "matmul";
  static constexpr Arity arity{2, 2};

  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const { return {}; }
  friend bool operator==(const MatMul&, const MatMul&) = default;
};
static_assert(GraphOpType<MatMul>);

}  // namespace teeny
// NOLINTEND(readability-redundant-member-init)

// ---- implementation -----------------------------------------------------------------------------

namespace teeny {
using namespace graph_detail;

// ---- Linear

Result<TensorType> Linear::infer(std::span<const TensorType> inputs) const {
  const TensorType& x = inputs[0];
  TEENY_GRAPH_TRY(require_float(x));
  TEENY_GRAPH_TRY(require_rank(x, 1, Arity::variadic, "[..., in_features]"));
  TEENY_GRAPH_TRY(check_non_negative("in_features", in_features));
  TEENY_GRAPH_TRY(check_non_negative("out_features", out_features));
  if (x.shape.back() != Dim(in_features)) {
    return fail(Errc::shape_mismatch, "input ", x, " has ", to_string(x.shape.back()), " features but in_features is ",
                in_features);
  }
  TensorType out = x;
  out.shape[out.shape.rank() - 1] = out_features;
  return out;
}

std::vector<ParamSpec> Linear::params(std::span<const TensorType> inputs) const {
  const DType dt = inputs.empty() ? DType::f32 : inputs[0].dtype;
  std::vector<ParamSpec> out{{"weight", {out_features, in_features}, dt}};
  if (bias) out.push_back({"bias", {out_features}, dt});
  return out;
}

std::string Linear::attributes() const {
  return attrs({{"in_features", fmt(in_features)}, {"out_features", fmt(out_features)}, {"bias", fmt(bias)}});
}

// ---- MatMul

Result<TensorType> MatMul::infer(std::span<const TensorType> inputs) const {
  const TensorType& a = inputs[0];
  const TensorType& b = inputs[1];
  TEENY_GRAPH_TRY(require_numeric(a, "first input"));
  TEENY_GRAPH_TRY(require_numeric(b, "second input"));
  TEENY_GRAPH_TRY(require_same_dtype(a, b));
  if (a.shape.rank() == 0 || b.shape.rank() == 0) {
    return fail(Errc::shape_mismatch, "both inputs need at least 1 dim, got ", a, " and ", b);
  }
  // Promote 1-D operands to matrices, remembering to drop the added dims again.
  const bool a_vector = a.shape.rank() == 1;
  const bool b_vector = b.shape.rank() == 1;
  Shape as = a_vector ? Shape{1, a.shape[0]} : a.shape;
  Shape bs = b_vector ? Shape{b.shape[0], 1} : b.shape;
  const Dim& k_a = as[as.rank() - 1];
  const Dim& k_b = bs[bs.rank() - 2];
  if (k_a != k_b) {
    return fail(Errc::shape_mismatch, "cannot multiply ", a, " by ", b, ": ", to_string(k_a),
                " (last dim of the first) vs ", to_string(k_b),
                b_vector ? " (the only dim of the second)" : " (second-to-last dim of the second)");
  }
  auto batch = broadcast_batch(a, as, b, bs);
  if (!batch) return std::move(batch).error();
  std::vector<Dim> dims = batch->dims();
  if (!a_vector) dims.push_back(as[as.rank() - 2]);
  if (!b_vector) dims.push_back(bs[bs.rank() - 1]);
  return TensorType{a.dtype, Shape(std::move(dims))};
}

}  // namespace teeny
