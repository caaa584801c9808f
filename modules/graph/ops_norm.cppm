// teeny.graph:ops_norm — the norm family: BatchNorm (1d, 2d, 3d), LayerNorm, RMSNorm and GroupNorm,
// with PyTorch's parameters and buffers in state_dict order (BatchNorm's i64 num_batches_tracked
// included).
//
//   BatchNorm{.num_features = 64}   f32[batch, 64, 56, 56] -> same; params weight, bias,
//                                   running_mean, running_var f32[64], num_batches_tracked i64[]
//   LayerNorm{.normalized_shape = {768}}   f32[batch, seq, 768] -> same; weight, bias f32[768]
export module teeny.graph:ops_norm;
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

/// torch.nn.BatchNorm1d (spatial_dims 1: [N, C] or [N, C, L]), BatchNorm2d (2: [N, C, H, W]) and
/// BatchNorm3d (3: [N, C, D, H, W]). Params, in state_dict order: weight, bias [C] (when affine);
/// buffers running_mean, running_var [C] and num_batches_tracked i64[] (when track_running_stats).
struct BatchNorm {
  static constexpr std::string_view kind = "batch_norm";
  static constexpr Arity arity{1, 1};
  std::int64_t num_features = 0;
  double eps = 1e-5;
  std::optional<double> momentum = 0.1;  // none: cumulative moving average
  bool affine = true;
  bool track_running_stats = true;
  std::int64_t spatial_dims = 2;

  /// "batch_norm1d", "batch_norm2d" or "batch_norm3d".
  std::string_view name() const;
  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::vector<ParamSpec> params(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const BatchNorm&, const BatchNorm&) = default;
};
static_assert(GraphOpWithParams<BatchNorm> && GraphOpWithName<BatchNorm>);

/// torch.nn.LayerNorm over the trailing dims `normalized_shape`. Params weight, bias
/// [normalized_shape] (when elementwise_affine; bias only when `bias`).
struct LayerNorm {
  static constexpr std::string_view kind = "layer_norm";
  static constexpr Arity arity{1, 1};
  std::vector<std::int64_t> normalized_shape{};
  double eps = 1e-5;
  bool elementwise_affine = true;
  bool bias = true;

  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::vector<ParamSpec> params(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const LayerNorm&, const LayerNorm&) = default;
};
static_assert(GraphOpWithParams<LayerNorm>);

/// torch.nn.RMSNorm over the trailing dims `normalized_shape`; eps none means the dtype's machine
/// epsilon (as PyTorch). Param weight [normalized_shape] when elementwise_affine.
struct RMSNorm {
  static constexpr std::string_view kind = "rms_norm";
  static constexpr Arity arity{1, 1};
  std::vector<std::int64_t> normalized_shape{};
  std::optional<double> eps{};
  bool elementwise_affine = true;

  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::vector<ParamSpec> params(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const RMSNorm&, const RMSNorm&) = default;
};
static_assert(GraphOpWithParams<RMSNorm>);

/// torch.nn.GroupNorm: [N, C, *], C = num_channels split into num_groups groups.
/// Params weight, bias [num_channels] when affine.
struct GroupNorm {
  static constexpr std::string_view kind = "group_norm";
  static constexpr Arity arity{1, 1};
  std::int64_t num_groups = 1;
  std::int64_t num_channels = 0;
  double eps = 1e-5;
  bool affine = true;

  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::vector<ParamSpec> params(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const GroupNorm&, const GroupNorm&) = default;
};
static_assert(GraphOpWithParams<GroupNorm>);

}  // namespace teeny
// NOLINTEND(readability-redundant-member-init)

// ---- implementation -----------------------------------------------------------------------------

namespace teeny {
using namespace graph_detail;

namespace graph_detail {

// Checks that `x` ends in `normalized` (LayerNorm, RMSNorm).
Result<void> check_normalized_shape(const TensorType& x, const std::vector<std::int64_t>& normalized) {
  TEENY_GRAPH_TRY(require_float(x));
  if (normalized.empty()) return fail(Errc::invalid_argument, "normalized_shape must not be empty");
  for (std::int64_t d : normalized) TEENY_GRAPH_TRY(check_non_negative("normalized_shape", d));
  bool matches = x.shape.rank() >= normalized.size();
  for (std::size_t i = 0; matches && i < normalized.size(); ++i) {
    matches = x.shape[x.shape.rank() - normalized.size() + i] == Dim(normalized[i]);
  }
  if (!matches) {
    return fail(Errc::shape_mismatch, "input ", x, " does not end in normalized_shape ", fmt(normalized));
  }
  return ok();
}

}  // namespace graph_detail

// ---- BatchNorm

std::string_view BatchNorm::name() const {
  switch (spatial_dims) {
    case 1: return "batch_norm1d";
    case 3: return "batch_norm3d";
    default: return "batch_norm2d";
  }
}

Result<TensorType> BatchNorm::infer(std::span<const TensorType> inputs) const {
  const TensorType& x = inputs[0];
  TEENY_GRAPH_TRY(require_float(x));
  switch (spatial_dims) {
    case 1: TEENY_GRAPH_TRY(require_rank(x, 2, 3, "[N, C] or [N, C, L]")); break;
    case 2: TEENY_GRAPH_TRY(require_rank(x, 4, 4, "[N, C, H, W]")); break;
    case 3: TEENY_GRAPH_TRY(require_rank(x, 5, 5, "[N, C, D, H, W]")); break;
    default: return fail(Errc::invalid_argument, "spatial_dims must be 1, 2 or 3, got ", spatial_dims);
  }
  TEENY_GRAPH_TRY(check_positive("num_features", num_features));
  if (!(eps >= 0)) return fail(Errc::invalid_argument, "eps must be non-negative, got ", eps);
  if (x.shape[1] != Dim(num_features)) {
    return fail(Errc::shape_mismatch, "input ", x, " has ", to_string(x.shape[1]), " channels but num_features is ",
                num_features);
  }
  return x;
}

std::vector<ParamSpec> BatchNorm::params(std::span<const TensorType> inputs) const {
  const DType dt = inputs.empty() ? DType::f32 : inputs[0].dtype;
  std::vector<ParamSpec> out;
  if (affine) {
    out.push_back({"weight", {num_features}, dt});
    out.push_back({"bias", {num_features}, dt});
  }
  if (track_running_stats) {
    out.push_back({"running_mean", {num_features}, dt, false});
    out.push_back({"running_var", {num_features}, dt, false});
    out.push_back({"num_batches_tracked", {}, DType::i64, false});
  }
  return out;
}

std::string BatchNorm::attributes() const {
  return attrs({{"num_features", fmt(num_features)},
                {"eps", fmt(eps)},
                {"momentum", fmt(momentum)},
                {"affine", fmt(affine)},
                {"track_running_stats", fmt(track_running_stats)}});
}

// ---- LayerNorm, RMSNorm, GroupNorm

Result<TensorType> LayerNorm::infer(std::span<const TensorType> inputs) const {
  TEENY_GRAPH_TRY(check_normalized_shape(inputs[0], normalized_shape));
  if (!(eps >= 0)) return fail(Errc::invalid_argument, "eps must be non-negative, got ", eps);
  return inputs[0];
}

std::vector<ParamSpec> LayerNorm::params(std::span<const TensorType> inputs) const {
  const DType dt = inputs.empty() ? DType::f32 : inputs[0].dtype;
  std::vector<ParamSpec> out;
  if (elementwise_affine) {
    out.push_back({"weight", shape_of(normalized_shape), dt});
    if (bias) out.push_back({"bias", shape_of(normalized_shape), dt});
  }
  return out;
}

std::string LayerNorm::attributes() const {
  return attrs({{"normalized_shape", fmt(normalized_shape)},
                {"eps", fmt(eps)},
                {"elementwise_affine", fmt(elementwise_affine)},
                {"bias", fmt(bias)}});
}

Result<TensorType> RMSNorm::infer(std::span<const TensorType> inputs) const {
  TEENY_GRAPH_TRY(check_normalized_shape(inputs[0], normalized_shape));
  if (eps && !(*eps >= 0)) return fail(Errc::invalid_argument, "eps must be non-negative, got ", *eps);
  return inputs[0];
}

std::vector<ParamSpec> RMSNorm::params(std::span<const TensorType> inputs) const {
  const DType dt = inputs.empty() ? DType::f32 : inputs[0].dtype;
  if (!elementwise_affine) return {};
  return {{"weight", shape_of(normalized_shape), dt}};
}

std::string RMSNorm::attributes() const {
  return attrs({{"normalized_shape", fmt(normalized_shape)},
                {"eps", fmt(eps)},
                {"elementwise_affine", fmt(elementwise_affine)}});
}

Result<TensorType> GroupNorm::infer(std::span<const TensorType> inputs) const {
  const TensorType& x = inputs[0];
  TEENY_GRAPH_TRY(require_float(x));
  TEENY_GRAPH_TRY(require_rank(x, 2, Arity::variadic, "[N, C, *]"));
  TEENY_GRAPH_TRY(check_positive("num_groups", num_groups));
  TEENY_GRAPH_TRY(check_positive("num_channels", num_channels));
  if (num_channels % num_groups != 0) {
    return fail(Errc::invalid_argument, "num_groups ", num_groups, " must divide num_channels ", num_channels);
  }
  if (!(eps >= 0)) return fail(Errc::invalid_argument, "eps must be non-negative, got ", eps);
  if (x.shape[1] != Dim(num_channels)) {
    return fail(Errc::shape_mismatch, "input ", x, " has ", to_string(x.shape[1]), " channels but num_channels is ",
                num_channels);
  }
  return x;
}

std::vector<ParamSpec> GroupNorm::params(std::span<const TensorType> inputs) const {
  const DType dt = inputs.empty() ? DType::f32 : inputs[0].dtype;
  if (!affine) return {};
  return {{"weight", {num_channels}, dt}, {"bias", {num_channels}, dt}};
}

std::string GroupNorm::attributes() const {
  return attrs({{"num_groups", fmt(num_groups)},
                {"num_channels", fmt(num_channels)},
                {"eps", fmt(eps)},
                {"affine", fmt(affine)}});
}

}  // namespace teeny
