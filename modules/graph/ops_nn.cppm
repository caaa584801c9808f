// teeny.graph:ops_nn — the layer ops: the ones with weights (Linear, Conv1d/2d, the norms,
// Embedding), matrix products, pooling, dropout and attention. Attributes, defaults, parameter
// names and layouts are PyTorch's, so a state_dict maps onto the graph by key `{node}.{slot}`.
//
//   Linear fc{.in_features = 784, .out_features = 512};
//   fc.infer(std::vector<TensorType>{{DType::f32, {Dim::sym("batch"), 784}}})  // f32[batch, 512]
//   params_of(fc, ...)     // weight f32[512, 784], bias f32[512]
//   Conv2d{.in_channels = 1, .out_channels = 32, .kernel = 5, .padding = 2}   // 28x28 -> 28x28
module;
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>
export module teeny.graph:ops_nn;
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

// ---- products -------------------------------------------------------------------------------------

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

// ---- convolution and pooling ------------------------------------------------------------------

/// torch.nn.Conv1d: [N, C, L] (or unbatched [C, L]) -> [N, out_channels, L_out].
/// Params: weight [out_channels, in_channels / groups, kernel], bias [out_channels].
struct Conv1d {
  static constexpr std::string_view kind = "conv1d";
  static constexpr Arity arity{1, 1};
  std::int64_t in_channels = 0;
  std::int64_t out_channels = 0;
  std::int64_t kernel = 1;
  std::int64_t stride = 1;
  std::int64_t padding = 0;
  std::int64_t dilation = 1;
  std::int64_t groups = 1;
  bool bias = true;

  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::vector<ParamSpec> params(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const Conv1d&, const Conv1d&) = default;
};
static_assert(GraphOpWithParams<Conv1d>);

/// torch.nn.Conv2d: [N, C, H, W] (or unbatched [C, H, W]) -> [N, out_channels, H_out, W_out] with
/// H_out = floor((H + 2*padding - dilation*(kernel-1) - 1) / stride) + 1.
/// Params: weight [out_channels, in_channels / groups, kh, kw], bias [out_channels].
struct Conv2d {
  static constexpr std::string_view kind = "conv2d";
  static constexpr Arity arity{1, 1};
  std::int64_t in_channels = 0;
  std::int64_t out_channels = 0;
  Size2 kernel{1, 1};
  Size2 stride{1, 1};
  Size2 padding{0, 0};
  Size2 dilation{1, 1};
  std::int64_t groups = 1;
  bool bias = true;

  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::vector<ParamSpec> params(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const Conv2d&, const Conv2d&) = default;
};
static_assert(GraphOpWithParams<Conv2d>);

/// torch.nn.MaxPool2d over the last two dims of [N, C, H, W] or [C, H, W]. stride defaults to the
/// kernel; padding may be at most half the kernel; with ceil_mode the output rounds up, but the
/// last window must start inside the input or the left padding.
struct MaxPool2d {
  static constexpr std::string_view kind = "max_pool2d";
  static constexpr Arity arity{1, 1};
  Size2 kernel{1, 1};
  std::optional<Size2> stride{};  // none: the kernel size
  Size2 padding{0, 0};
  Size2 dilation{1, 1};
  bool ceil_mode = false;

  Size2 effective_stride() const { return stride.value_or(kernel); }
  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const MaxPool2d&, const MaxPool2d&) = default;
};
static_assert(GraphOpType<MaxPool2d>);

/// torch.nn.AvgPool2d: shapes as MaxPool2d (no dilation). count_include_pad counts the zero
/// padding in the divisor; divisor_override, when set, replaces the divisor.
struct AvgPool2d {
  static constexpr std::string_view kind = "avg_pool2d";
  static constexpr Arity arity{1, 1};
  Size2 kernel{1, 1};
  std::optional<Size2> stride{};  // none: the kernel size
  Size2 padding{0, 0};
  bool ceil_mode = false;
  bool count_include_pad = true;
  std::optional<std::int64_t> divisor_override{};

  Size2 effective_stride() const { return stride.value_or(kernel); }
  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const AvgPool2d&, const AvgPool2d&) = default;
};
static_assert(GraphOpType<AvgPool2d>);

/// torch.nn.AdaptiveAvgPool2d: [N, C, H, W] -> [N, C, output_size.h, output_size.w]
/// (output_size 1 is global average pooling).
struct AdaptiveAvgPool2d {
  static constexpr std::string_view kind = "adaptive_avg_pool2d";
  static constexpr Arity arity{1, 1};
  Size2 output_size{1, 1};

  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const AdaptiveAvgPool2d&, const AdaptiveAvgPool2d&) = default;
};
static_assert(GraphOpType<AdaptiveAvgPool2d>);

// ---- normalization --------------------------------------------------------------------------------

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

// ---- lookup, regularization, attention --------------------------------------------------------

/// torch.nn.Embedding: integer indices [...] -> [..., embedding_dim] of `dtype`.
/// Param weight [num_embeddings, embedding_dim] of `dtype`.
struct Embedding {
  static constexpr std::string_view kind = "embedding";
  static constexpr Arity arity{1, 1};
  std::int64_t num_embeddings = 0;
  std::int64_t embedding_dim = 0;
  std::optional<std::int64_t> padding_idx{};
  DType dtype = DType::f32;

  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::vector<ParamSpec> params(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const Embedding&, const Embedding&) = default;
};
static_assert(GraphOpWithParams<Embedding>);

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

/// F.scaled_dot_product_attention(q, k, v): softmax(q k^T * scale [+ causal mask]) v with
/// q [..., L, E], k [..., S, E], v [..., S, Ev] -> [..., L, Ev]; batch dims broadcast.
/// scale none means 1/sqrt(E); causal masks with PyTorch's top-left aligned lower triangle.
struct Attention {
  static constexpr std::string_view kind = "attention";
  static constexpr Arity arity{3, 3};
  bool causal = false;
  std::optional<double> scale{};

  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const Attention&, const Attention&) = default;
};
static_assert(GraphOpType<Attention>);

}  // namespace teeny
// NOLINTEND(readability-redundant-member-init)

// ---- implementation -----------------------------------------------------------------------------

namespace teeny {
using namespace graph_detail;

namespace graph_detail {

// Checks the channel dim and computes the spatial dims of a convolution whose attributes are valid.
Result<TensorType> conv_output(const TensorType& x, std::int64_t in_channels, std::int64_t out_channels,
                               std::span<const Window> windows) {
  const std::size_t c = x.shape.rank() - windows.size() - 1;
  if (x.shape[c] != Dim(in_channels)) {
    return fail(Errc::shape_mismatch, "input ", x, " has ", to_string(x.shape[c]), " channels but in_channels is ",
                in_channels);
  }
  TensorType out = x;
  out.shape[c] = out_channels;
  for (std::size_t i = 0; i < windows.size(); ++i) {
    auto d = window_output(x, c + 1 + i, windows[i]);
    if (!d) return std::move(d).error();
    out.shape[c + 1 + i] = std::move(*d);
  }
  return out;
}

Result<void> check_groups(std::int64_t in_channels, std::int64_t out_channels, std::int64_t groups) {
  TEENY_GRAPH_TRY(check_positive("in_channels", in_channels));
  TEENY_GRAPH_TRY(check_positive("out_channels", out_channels));
  TEENY_GRAPH_TRY(check_positive("groups", groups));
  if (in_channels % groups != 0) {
    return fail(Errc::invalid_argument, "groups ", groups, " must divide in_channels ", in_channels);
  }
  if (out_channels % groups != 0) {
    return fail(Errc::invalid_argument, "groups ", groups, " must divide out_channels ", out_channels);
  }
  return ok();
}

// The pooling checks shared by MaxPool2d and AvgPool2d, then the output type.
Result<TensorType> pool2d_output(const TensorType& x, Size2 kernel, Size2 stride, Size2 padding, Size2 dilation,
                                 bool ceil_mode) {
  TEENY_GRAPH_TRY(require_float(x));
  TEENY_GRAPH_TRY(require_rank(x, 3, 4, "[N, C, H, W] or [C, H, W]"));
  TEENY_GRAPH_TRY(check_positive("kernel_size", kernel));
  TEENY_GRAPH_TRY(check_positive("stride", stride));
  TEENY_GRAPH_TRY(check_non_negative("padding", padding));
  TEENY_GRAPH_TRY(check_positive("dilation", dilation));
  if (padding.h > kernel.h / 2 || padding.w > kernel.w / 2) {
    return fail(Errc::invalid_argument, "padding ", padding, " must be at most half the kernel size ", kernel);
  }
  const std::size_t h = x.shape.rank() - 2;
  TensorType out = x;
  auto oh = window_output(x, h, {kernel.h, stride.h, padding.h, dilation.h, ceil_mode});
  if (!oh) return std::move(oh).error();
  auto ow = window_output(x, h + 1, {kernel.w, stride.w, padding.w, dilation.w, ceil_mode});
  if (!ow) return std::move(ow).error();
  out.shape[h] = std::move(*oh);
  out.shape[h + 1] = std::move(*ow);
  return out;
}

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

Shape shape_of(const std::vector<std::int64_t>& dims) {
  std::vector<Dim> out(dims.begin(), dims.end());
  return Shape(std::move(out));
}

// Broadcasts the batch dims (all but the last two) of two operands of a matrix product.
Result<Shape> broadcast_batch(const TensorType& a, const Shape& a_shape, const TensorType& b, const Shape& b_shape) {
  const std::vector<Dim> a_batch(a_shape.begin(), a_shape.end() - 2);
  const std::vector<Dim> b_batch(b_shape.begin(), b_shape.end() - 2);
  auto batch = broadcast_shapes(Shape(a_batch), Shape(b_batch));
  if (!batch) {
    return fail(Errc::shape_mismatch, "the batch dims of ", a, " and ", b,
                " do not broadcast: ", batch.error().message());
  }
  return batch;
}

}  // namespace graph_detail

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

// ---- Conv1d / Conv2d

Result<TensorType> Conv1d::infer(std::span<const TensorType> inputs) const {
  const TensorType& x = inputs[0];
  TEENY_GRAPH_TRY(require_float(x));
  TEENY_GRAPH_TRY(require_rank(x, 2, 3, "[N, C, L] or [C, L]"));
  TEENY_GRAPH_TRY(check_groups(in_channels, out_channels, groups));
  TEENY_GRAPH_TRY(check_positive("kernel_size", kernel));
  TEENY_GRAPH_TRY(check_positive("stride", stride));
  TEENY_GRAPH_TRY(check_non_negative("padding", padding));
  TEENY_GRAPH_TRY(check_positive("dilation", dilation));
  const std::array<Window, 1> windows{{{kernel, stride, padding, dilation, false}}};
  return conv_output(x, in_channels, out_channels, windows);
}

std::vector<ParamSpec> Conv1d::params(std::span<const TensorType> inputs) const {
  const DType dt = inputs.empty() ? DType::f32 : inputs[0].dtype;
  const std::int64_t per_group = groups > 0 ? in_channels / groups : 0;
  std::vector<ParamSpec> out{{"weight", {out_channels, per_group, kernel}, dt}};
  if (bias) out.push_back({"bias", {out_channels}, dt});
  return out;
}

std::string Conv1d::attributes() const {
  return attrs({{"in_channels", fmt(in_channels)},
                {"out_channels", fmt(out_channels)},
                {"kernel_size", fmt(kernel)},
                {"stride", fmt(stride)},
                {"padding", fmt(padding)},
                {"dilation", fmt(dilation)},
                {"groups", fmt(groups)},
                {"bias", fmt(bias)}});
}

Result<TensorType> Conv2d::infer(std::span<const TensorType> inputs) const {
  const TensorType& x = inputs[0];
  TEENY_GRAPH_TRY(require_float(x));
  TEENY_GRAPH_TRY(require_rank(x, 3, 4, "[N, C, H, W] or [C, H, W]"));
  TEENY_GRAPH_TRY(check_groups(in_channels, out_channels, groups));
  TEENY_GRAPH_TRY(check_positive("kernel_size", kernel));
  TEENY_GRAPH_TRY(check_positive("stride", stride));
  TEENY_GRAPH_TRY(check_non_negative("padding", padding));
  TEENY_GRAPH_TRY(check_positive("dilation", dilation));
  const std::array<Window, 2> windows{
      {{kernel.h, stride.h, padding.h, dilation.h, false}, {kernel.w, stride.w, padding.w, dilation.w, false}}};
  return conv_output(x, in_channels, out_channels, windows);
}

std::vector<ParamSpec> Conv2d::params(std::span<const TensorType> inputs) const {
  const DType dt = inputs.empty() ? DType::f32 : inputs[0].dtype;
  const std::int64_t per_group = groups > 0 ? in_channels / groups : 0;
  std::vector<ParamSpec> out{{"weight", {out_channels, per_group, kernel.h, kernel.w}, dt}};
  if (bias) out.push_back({"bias", {out_channels}, dt});
  return out;
}

std::string Conv2d::attributes() const {
  return attrs({{"in_channels", fmt(in_channels)},
                {"out_channels", fmt(out_channels)},
                {"kernel_size", fmt(kernel)},
                {"stride", fmt(stride)},
                {"padding", fmt(padding)},
                {"dilation", fmt(dilation)},
                {"groups", fmt(groups)},
                {"bias", fmt(bias)}});
}

// ---- pooling

Result<TensorType> MaxPool2d::infer(std::span<const TensorType> inputs) const {
  return pool2d_output(inputs[0], kernel, effective_stride(), padding, dilation, ceil_mode);
}

std::string MaxPool2d::attributes() const {
  return attrs({{"kernel_size", fmt(kernel)},
                {"stride", fmt(effective_stride())},
                {"padding", fmt(padding)},
                {"dilation", fmt(dilation)},
                {"ceil_mode", fmt(ceil_mode)}});
}

Result<TensorType> AvgPool2d::infer(std::span<const TensorType> inputs) const {
  if (divisor_override && *divisor_override == 0) {
    return fail(Errc::invalid_argument, "divisor_override must not be zero");
  }
  return pool2d_output(inputs[0], kernel, effective_stride(), padding, Size2{1, 1}, ceil_mode);
}

std::string AvgPool2d::attributes() const {
  return attrs({{"kernel_size", fmt(kernel)},
                {"stride", fmt(effective_stride())},
                {"padding", fmt(padding)},
                {"ceil_mode", fmt(ceil_mode)},
                {"count_include_pad", fmt(count_include_pad)},
                {"divisor_override", fmt(divisor_override)}});
}

Result<TensorType> AdaptiveAvgPool2d::infer(std::span<const TensorType> inputs) const {
  const TensorType& x = inputs[0];
  TEENY_GRAPH_TRY(require_float(x));
  TEENY_GRAPH_TRY(require_rank(x, 3, 4, "[N, C, H, W] or [C, H, W]"));
  TEENY_GRAPH_TRY(check_positive("output_size", output_size));
  TensorType out = x;
  out.shape[x.shape.rank() - 2] = output_size.h;
  out.shape[x.shape.rank() - 1] = output_size.w;
  return out;
}

std::string AdaptiveAvgPool2d::attributes() const { return attrs({{"output_size", fmt(output_size)}}); }

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

// ---- Embedding, Dropout, Attention

Result<TensorType> Embedding::infer(std::span<const TensorType> inputs) const {
  const TensorType& x = inputs[0];
  if (!is_integral(x.dtype)) {
    return fail(Errc::dtype_mismatch, "input ", x, " is ", name(x.dtype), ", but embedding indices must be integers");
  }
  TEENY_GRAPH_TRY(check_non_negative("num_embeddings", num_embeddings));
  TEENY_GRAPH_TRY(check_non_negative("embedding_dim", embedding_dim));
  if (!is_floating(dtype)) {
    return fail(Errc::dtype_mismatch, "dtype ", name(dtype), " of the embedding weight must be floating-point");
  }
  if (padding_idx && (*padding_idx < -num_embeddings || *padding_idx >= num_embeddings)) {
    return fail(Errc::out_of_range, "padding_idx ", *padding_idx, " is out of range for num_embeddings ",
                num_embeddings);
  }
  std::vector<Dim> dims = x.shape.dims();
  dims.emplace_back(embedding_dim);
  return TensorType{dtype, Shape(std::move(dims))};
}

std::vector<ParamSpec> Embedding::params(std::span<const TensorType>) const {
  return {{"weight", {num_embeddings, embedding_dim}, dtype}};
}

std::string Embedding::attributes() const {
  return attrs({{"num_embeddings", fmt(num_embeddings)},
                {"embedding_dim", fmt(embedding_dim)},
                {"padding_idx", fmt(padding_idx)},
                {"dtype", fmt(dtype)}});
}

Result<TensorType> Dropout::infer(std::span<const TensorType> inputs) const {
  TEENY_GRAPH_TRY(require_float(inputs[0]));
  if (!(p >= 0 && p <= 1)) {
    return fail(Errc::invalid_argument, "dropout probability must be between 0 and 1, got ", p);
  }
  return inputs[0];
}

std::string Dropout::attributes() const { return attrs({{"p", fmt(p)}}); }

Result<TensorType> Attention::infer(std::span<const TensorType> inputs) const {
  const TensorType& q = inputs[0];
  const TensorType& k = inputs[1];
  const TensorType& v = inputs[2];
  TEENY_GRAPH_TRY(require_float(q, "query"));
  TEENY_GRAPH_TRY(require_same_dtype(q, k));
  TEENY_GRAPH_TRY(require_same_dtype(q, v));
  for (const TensorType* t : {&q, &k, &v}) TEENY_GRAPH_TRY(require_rank(*t, 2, Arity::variadic, "[..., L, E]"));
  const Dim& e_q = q.shape.back();
  const Dim& e_k = k.shape.back();
  if (e_q != e_k) {
    return fail(Errc::shape_mismatch, "query ", q, " has embedding dim ", to_string(e_q), " but key ", k, " has ",
                to_string(e_k));
  }
  const Dim& s_k = k.shape[k.shape.rank() - 2];
  const Dim& s_v = v.shape[v.shape.rank() - 2];
  if (s_k != s_v) {
    return fail(Errc::shape_mismatch, "key ", k, " has sequence length ", to_string(s_k), " but value ", v, " has ",
                to_string(s_v));
  }
  auto qk = broadcast_batch(q, q.shape, k, k.shape);
  if (!qk) return std::move(qk).error();
  std::vector<Dim> batch_v(v.shape.begin(), v.shape.end() - 2);
  auto batch = broadcast_shapes(*qk, Shape(std::move(batch_v)));
  if (!batch) {
    return fail(Errc::shape_mismatch, "the batch dims of ", q, ", ", k, " and ", v,
                " do not broadcast: ", batch.error().message());
  }
  std::vector<Dim> dims = batch->dims();
  dims.push_back(q.shape[q.shape.rank() - 2]);
  dims.push_back(v.shape.back());
  return TensorType{q.dtype, Shape(std::move(dims))};
}

std::string Attention::attributes() const { return attrs({{"causal", fmt(causal)}, {"scale", fmt(scale)}}); }

}  // namespace teeny
