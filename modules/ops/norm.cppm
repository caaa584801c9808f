// teeny.ops:norm — normalisation: batch_norm_op (eval mode; BatchNorm1d/2d/3d), layer_norm_op,
// rms_norm_op and group_norm_op, with PyTorch's parameters and buffers (a state_dict loads
// strictly, BatchNorm's i64 num_batches_tracked included). The per-element math is
// kernels/math/norm.hpp.
export module teeny.ops:norm;
import teeny.std;
import teeny.core;
import teeny.graph;
import teeny.model;
import :common;

export namespace teeny {

namespace ops_detail {
// `count` elements of value 1 as bytes: the initial weight of a norm, or running variance.
template <FloatElement T>
std::vector<std::byte> ones(std::int64_t count) {
  std::vector<std::byte> bytes(static_cast<std::size_t>(count) * sizeof(T));
  const T one = T(1);
  for (std::int64_t i = 0; i < count; ++i) std::memcpy(bytes.data() + i * sizeof(T), &one, sizeof(T));
  return bytes;
}
}  // namespace ops_detail

template <FloatElement T>
struct BatchNormArgs {
  TensorView<const T> x;       // [N, C, S]: the spatial dims flattened (S = 1 for [N, C])
  TensorView<const T> weight;  // [C], or empty (affine = false)
  TensorView<const T> bias;    // [C], or empty
  TensorView<T> running_mean;  // [C], or empty (track_running_stats = false: batch statistics)
  TensorView<T> running_var;   // [C], or empty; both updated by a forward in training
  TensorView<T> y;             // as x
  double eps = 1e-5;
  Epilogue epilogue;
  TensorView<std::int64_t> num_batches_tracked;  // [] with running statistics, else empty
  double momentum = 0.1;                         // < 0: none, a cumulative average (PyTorch's None)
  auto fields() const {
    return std::tie(x, weight, bias, running_mean, running_var, y, eps, epilogue, num_batches_tracked, momentum);
  }
};

#if TEENY_TRAINING
/// Backward of batch_norm_op: dz = dy * act'(y) (in dy's buffer), then in training (batch
/// statistics, recomputed from x) dx += w * inv_std * (dz - mean(dz) - x_hat * mean(dz * x_hat)),
/// and with running statistics (eval) dx += w * inv_std * dz; dw += sum(dz * x_hat), db += sum(dz).
template <FloatElement T>
struct BatchNormBackwardArgs {
  BatchNormArgs<T> forward;
  TensorView<T> dy;
  TensorView<T> dx;       // or empty
  TensorView<T> dweight;  // [C], or empty
  TensorView<T> dbias;    // [C], or empty
  auto fields() const { return std::tie(forward, dy, dx, dweight, dbias); }
};
#endif

/// Batch norm: y = act((x - mean) / sqrt(var + eps) * weight + bias) per channel. In eval mode
/// with the running statistics, or, without them, the batch's own (as PyTorch does); in a model
/// running in training mode with the batch's own, updating the running statistics as PyTorch
/// does (momentum, unbiased variance, num_batches_tracked).
template <FloatElement T>
struct batch_norm_op {
  using Args = BatchNormArgs<T>;
  BatchNorm attrs;
  OpOutput out;
  Epilogue epilogue{};

  std::string_view name() const { return attrs.name(); }
  const Shape& output_shape() const { return out.shape; }
  DType output_dtype() const { return dtype_of<T>; }
  KernelInstance kernel() const { return kernel_instance<"batch_norm", "batch_norm_backward", T>(); }
  /// Running statistics and the batch count are buffers, not trained parameters.
  bool param_trainable(std::size_t i) const { return attrs.affine && i < 2; }

  std::size_t n_activation_inputs() const { return 1; }
  std::span<const std::string_view> param_names() const {
    static constexpr std::string_view slots[] = {"weight", "bias", "running_mean", "running_var",
                                                 "num_batches_tracked"};
    const std::span<const std::string_view> all(slots);
    if (attrs.affine) return all.first(attrs.track_running_stats ? 5 : 2);
    return attrs.track_running_stats ? all.subspan(2) : all.first(0);
  }
  DType param_dtype(std::size_t i) const {
    return attrs.track_running_stats && i + 1 == param_names().size() ? DType::i64 : dtype_of<T>;
  }
  /// PyTorch's initial values: weight and running_var 1; bias, running_mean and the count 0.
  std::optional<std::vector<std::byte>> param_init_data(std::size_t i) const {
    const std::string_view slot = param_names()[i];
    if (slot == "weight" || slot == "running_var") return ops_detail::ones<T>(attrs.num_features);
    return std::nullopt;
  }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const {
    const ConcreteShape c{attrs.num_features};
    std::vector<ConcreteShape> shapes;
    if (attrs.affine) shapes.insert(shapes.end(), {c, c});
    if (attrs.track_running_stats) shapes.insert(shapes.end(), {c, c, ConcreteShape{}});
    return shapes;
  }
  Result<Args> pack_args(const OpBindings& b) const {
    auto x = input_view<const T>(b, 0);
    auto y = output_view<T>(b);
    const std::size_t stats = attrs.affine ? 2 : 0;
    auto weight = optional_param_view<const T>(b, 0, attrs.affine);
    auto bias = optional_param_view<const T>(b, 1, attrs.affine);
    auto mean = optional_param_view<T>(b, stats, attrs.track_running_stats);
    auto var = optional_param_view<T>(b, stats + 1, attrs.track_running_stats);
    auto count = optional_param_view<std::int64_t>(b, stats + 2, attrs.track_running_stats);
    if (auto e = first_error(x, y, weight, bias, mean, var, count)) return *e;
    const std::int64_t n = x->shape[0];
    const std::int64_t c = attrs.num_features;
    const ConcreteShape ncs{n, c, n * c == 0 ? 0 : x->numel() / (n * c)};
    auto x3 = contiguous_as(*x, ncs, "input");
    auto y3 = contiguous_as(*y, ncs, "output");
    if (auto e = first_error(x3, y3)) return *e;
    return Args{*x3, *weight, *bias, *mean, *var, *y3, attrs.eps, epilogue, *count, attrs.momentum.value_or(-1.0)};
  }
  Dim3 block() const { return {256, 1, 1}; }
  /// One block a channel (y is [N, C, ...]).
  Dim3 grid(const ConcreteShape& y) const { return {ceil_div(y.rank() >= 2 ? y[1] : 1, 1), 1, 1}; }

#if TEENY_TRAINING
  using BackwardArgs = BatchNormBackwardArgs<T>;
  Result<BackwardArgs> pack_backward_args(const BackwardBindings& b) const {
    if (auto fused = check_epilogue_backward(epilogue); !fused) return std::move(fused).error();
    auto forward = pack_args(forward_bindings(b));
    if (!forward) return std::move(forward).error();
    // Batch statistics of one value per channel are no statistics (the variance is 0): refused,
    // as PyTorch refuses such a batch in training.
    if (const ConcreteShape& x = forward->x.shape; x[0] * x[2] == 1) {
      return fail(Errc::shape_mismatch,
                  "batch norm in training needs more than one value per channel, got an input of ", b.inputs[0].shape,
                  " (one value per channel): train with a larger batch");
    }
    BackwardArgs g{*forward, {}, {}, {}, {}};
    if (auto e = first_error(bind_grad_output(b, g.forward.y, g.dy), bind_grad_input(b, 0, g.forward.x, g.dx),
                             bind_grad_param(b, 0, g.forward.weight, g.dweight),
                             bind_grad_param(b, 1, g.forward.bias, g.dbias))) {
      return *e;
    }
    return g;
  }
  /// One block per channel (its statistics are a reduction over the batch).
  Dim3 backward_grid(std::span<const ConcreteShape>, const ConcreteShape&) const {
    return {ceil_div(attrs.num_features, 1), 1, 1};
  }
#endif
};
static_assert(RuntimeOp<batch_norm_op<float>>);
#if TEENY_TRAINING
static_assert(BackwardOp<batch_norm_op<float>>);
#endif

template <FloatElement T>
struct RowNormArgs {
  TensorView<const T> x;       // [rows, D]: D = the normalized trailing dims, flattened
  TensorView<const T> weight;  // [D], or empty
  TensorView<const T> bias;    // [D], or empty (always empty for RMS norm)
  TensorView<T> y;             // as x
  double eps = 1e-5;
  auto fields() const { return std::tie(x, weight, bias, y, eps); }
};

#if TEENY_TRAINING
/// Backward of layer_norm_op and rms_norm_op, per row of D: with g = dy * weight,
/// layer norm dx += inv_std * (g - mean(g) - x_hat * mean(g * x_hat)), dw += sum(dy * x_hat),
/// db += sum(dy); RMS norm dx += r * (g - x * r^2 * mean(g * x)), dw += sum(dy * x * r).
template <FloatElement T>
struct RowNormBackwardArgs {
  RowNormArgs<T> forward;
  TensorView<T> dy;       // [rows, D]
  TensorView<T> dx;       // [rows, D], or empty
  TensorView<T> dweight;  // [D], or empty
  TensorView<T> dbias;    // [D], or empty
  auto fields() const { return std::tie(forward, dy, dx, dweight, dbias); }
};

/// Packs a RowNormBackwardArgs for a row norm op.
template <FloatElement T, class Op>
Result<RowNormBackwardArgs<T>> pack_row_norm_backward(const Op& op, const BackwardBindings& b) {
  auto forward = op.pack_args(forward_bindings(b));
  if (!forward) return std::move(forward).error();
  RowNormBackwardArgs<T> g{*forward, {}, {}, {}, {}};
  if (auto e = first_error(bind_grad_output(b, g.forward.y, g.dy), bind_grad_input(b, 0, g.forward.x, g.dx),
                           bind_grad_param(b, 0, g.forward.weight, g.dweight),
                           bind_grad_param(b, 1, g.forward.bias, g.dbias))) {
    return *e;
  }
  return g;
}
#endif

namespace ops_detail {
/// torch.finfo(dtype).eps: the gap between 1 and the next value of T.
template <FloatElement T>
constexpr double machine_epsilon() {
  if constexpr (std::is_same_v<T, f16>) {
    return 0x1p-10;
  } else if constexpr (std::is_same_v<T, bf16>) {
    return 0x1p-7;
  } else {
    return std::numeric_limits<T>::epsilon();
  }
}

inline std::int64_t product(const std::vector<std::int64_t>& dims) {
  std::int64_t n = 1;
  for (std::int64_t d : dims) n *= d;
  return n;
}

// x, weight, bias and y of a norm over the last `d` elements of each row.
template <FloatElement T>
Result<RowNormArgs<T>> row_norm_args(const OpBindings& b, std::int64_t d, bool has_weight, bool has_bias, double eps) {
  auto x = input_view<const T>(b, 0);
  auto y = output_view<T>(b);
  auto weight = optional_param_view<const T>(b, 0, has_weight);
  auto bias = optional_param_view<const T>(b, 1, has_bias);
  if (auto e = first_error(x, y, weight, bias)) return *e;
  const ConcreteShape rows{d == 0 ? 0 : x->numel() / d, d};
  auto x2 = contiguous_as(*x, rows, "input");
  auto y2 = contiguous_as(*y, rows, "output");
  if (auto e = first_error(x2, y2)) return *e;
  // Parameters are contiguous buffers of shape normalized_shape: read them flat.
  const TensorView<const T> w1 = has_weight ? TensorView<const T>(weight->data, {d}) : *weight;
  const TensorView<const T> b1 = has_bias ? TensorView<const T>(bias->data, {d}) : *bias;
  return RowNormArgs<T>{*x2, w1, b1, *y2, eps};
}
}  // namespace ops_detail

/// torch.nn.LayerNorm: y = (x - mean) / sqrt(var + eps) * weight + bias over the trailing dims.
template <FloatElement T>
struct layer_norm_op {
  using Args = RowNormArgs<T>;
  LayerNorm attrs;
  OpOutput out;

  std::string_view name() const { return "layer_norm"; }
  const Shape& output_shape() const { return out.shape; }
  DType output_dtype() const { return dtype_of<T>; }
  KernelInstance kernel() const { return kernel_instance<"layer_norm", "layer_norm_backward", T>(); }
  std::size_t n_activation_inputs() const { return 1; }
  std::span<const std::string_view> param_names() const {
    static constexpr std::string_view slots[] = {"weight", "bias"};
    return std::span<const std::string_view>(slots).first(attrs.elementwise_affine ? (attrs.bias ? 2 : 1) : 0);
  }
  /// PyTorch's initial values: weight 1, bias 0.
  std::optional<std::vector<std::byte>> param_init_data(std::size_t i) const {
    if (i != 0) return std::nullopt;
    return ops_detail::ones<T>(ops_detail::product(attrs.normalized_shape));
  }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const {
    auto shape = ConcreteShape::from(attrs.normalized_shape);
    return std::vector<ConcreteShape>(param_names().size(), shape ? *shape : ConcreteShape{});
  }
  Result<Args> pack_args(const OpBindings& b) const {
    const bool affine = attrs.elementwise_affine;
    return ops_detail::row_norm_args<T>(b, ops_detail::product(attrs.normalized_shape), affine, affine && attrs.bias,
                                        attrs.eps);
  }
  Dim3 block() const { return {256, 1, 1}; }
  /// One block a row of the normalized trailing dims.
  Dim3 grid(const ConcreteShape& y) const {
    const std::int64_t d = ops_detail::product(attrs.normalized_shape);
    return {ceil_div(d == 0 ? 0 : y.numel() / d, 1), 1, 1};
  }

#if TEENY_TRAINING
  using BackwardArgs = RowNormBackwardArgs<T>;
  Result<BackwardArgs> pack_backward_args(const BackwardBindings& b) const {
    return pack_row_norm_backward<T>(*this, b);
  }
  /// One block a row (dx), then one per 32 columns (dweight and dbias), of 256 threads.
  Dim3 backward_grid(std::span<const ConcreteShape>, const ConcreteShape& y) const {
    const std::int64_t d = ops_detail::product(attrs.normalized_shape);
    return {ceil_div((d == 0 ? 0 : y.numel() / d) + (d + 31) / 32, 1), 1, 1};
  }
  Dim3 backward_block() const { return {256, 1, 1}; }
#endif
};
static_assert(RuntimeOp<layer_norm_op<float>>);
#if TEENY_TRAINING
static_assert(BackwardOp<layer_norm_op<float>>);
#endif

/// torch.nn.RMSNorm: y = x / sqrt(mean(x^2) + eps) * weight over the trailing dims; eps none is the
/// dtype's machine epsilon.
template <FloatElement T>
struct rms_norm_op {
  using Args = RowNormArgs<T>;
  RMSNorm attrs;
  OpOutput out;

  std::string_view name() const { return "rms_norm"; }
  const Shape& output_shape() const { return out.shape; }
  DType output_dtype() const { return dtype_of<T>; }
  KernelInstance kernel() const { return kernel_instance<"rms_norm", "rms_norm_backward", T>(); }
  std::size_t n_activation_inputs() const { return 1; }
  std::span<const std::string_view> param_names() const {
    static constexpr std::string_view slots[] = {"weight"};
    return std::span<const std::string_view>(slots).first(attrs.elementwise_affine ? 1 : 0);
  }
  /// PyTorch's initial weight: 1.
  std::optional<std::vector<std::byte>> param_init_data(std::size_t) const {
    return ops_detail::ones<T>(ops_detail::product(attrs.normalized_shape));
  }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const {
    auto shape = ConcreteShape::from(attrs.normalized_shape);
    return std::vector<ConcreteShape>(param_names().size(), shape ? *shape : ConcreteShape{});
  }
  Result<Args> pack_args(const OpBindings& b) const {
    const double eps = attrs.eps.value_or(ops_detail::machine_epsilon<T>());
    return ops_detail::row_norm_args<T>(b, ops_detail::product(attrs.normalized_shape), attrs.elementwise_affine, false,
                                        eps);
  }
  Dim3 block() const { return {256, 1, 1}; }
  /// One block a row of the normalized trailing dims.
  Dim3 grid(const ConcreteShape& y) const {
    const std::int64_t d = ops_detail::product(attrs.normalized_shape);
    return {ceil_div(d == 0 ? 0 : y.numel() / d, 1), 1, 1};
  }

#if TEENY_TRAINING
  using BackwardArgs = RowNormBackwardArgs<T>;
  Result<BackwardArgs> pack_backward_args(const BackwardBindings& b) const {
    return pack_row_norm_backward<T>(*this, b);
  }
  /// One block a row (dx), then one per 32 columns (dweight), of 256 threads.
  Dim3 backward_grid(std::span<const ConcreteShape>, const ConcreteShape& y) const {
    const std::int64_t d = ops_detail::product(attrs.normalized_shape);
    return {ceil_div((d == 0 ? 0 : y.numel() / d) + (d + 31) / 32, 1), 1, 1};
  }
  Dim3 backward_block() const { return {256, 1, 1}; }
#endif
};
static_assert(RuntimeOp<rms_norm_op<float>>);
#if TEENY_TRAINING
static_assert(BackwardOp<rms_norm_op<float>>);
#endif

template <FloatElement T>
struct GroupNormArgs {
  TensorView<const T> x;       // [N, C, S]: the spatial dims flattened
  TensorView<const T> weight;  // [C], or empty
  TensorView<const T> bias;    // [C], or empty
  TensorView<T> y;             // as x
  std::int64_t groups = 1;
  double eps = 1e-5;
  auto fields() const { return std::tie(x, weight, bias, y, groups, eps); }
};

#if TEENY_TRAINING
/// Backward of group_norm_op, per (sample, group) of M elements, with g = dy * weight[c]:
/// dx += inv_std * (g - mean(g) - x_hat * mean(g * x_hat)), dw[c] += sum(dy * x_hat), db[c] += sum(dy).
template <FloatElement T>
struct GroupNormBackwardArgs {
  GroupNormArgs<T> forward;
  TensorView<T> dy;
  TensorView<T> dx;       // or empty
  TensorView<T> dweight;  // [C], or empty
  TensorView<T> dbias;    // [C], or empty
  auto fields() const { return std::tie(forward, dy, dx, dweight, dbias); }
};
#endif

/// torch.nn.GroupNorm: each sample's channels in `num_groups` groups, each normalised by its own
/// mean and variance, then a per-channel weight and bias.
template <FloatElement T>
struct group_norm_op {
  using Args = GroupNormArgs<T>;
  GroupNorm attrs;
  OpOutput out;

  std::string_view name() const { return "group_norm"; }
  const Shape& output_shape() const { return out.shape; }
  DType output_dtype() const { return dtype_of<T>; }
  KernelInstance kernel() const { return kernel_instance<"group_norm", "group_norm_backward", T>(); }
  std::size_t n_activation_inputs() const { return 1; }
  std::span<const std::string_view> param_names() const {
    static constexpr std::string_view slots[] = {"weight", "bias"};
    return std::span<const std::string_view>(slots).first(attrs.affine ? 2 : 0);
  }
  /// PyTorch's initial values: weight 1, bias 0.
  std::optional<std::vector<std::byte>> param_init_data(std::size_t i) const {
    if (i != 0) return std::nullopt;
    return ops_detail::ones<T>(attrs.num_channels);
  }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const {
    if (!attrs.affine) return {};
    return {{attrs.num_channels}, {attrs.num_channels}};
  }
  Result<Args> pack_args(const OpBindings& b) const {
    auto x = input_view<const T>(b, 0);
    auto y = output_view<T>(b);
    auto weight = optional_param_view<const T>(b, 0, attrs.affine);
    auto bias = optional_param_view<const T>(b, 1, attrs.affine);
    if (auto e = first_error(x, y, weight, bias)) return *e;
    const std::int64_t n = x->shape[0];
    const std::int64_t c = attrs.num_channels;
    const ConcreteShape ncs{n, c, n * c == 0 ? 0 : x->numel() / (n * c)};
    auto x3 = contiguous_as(*x, ncs, "input");
    auto y3 = contiguous_as(*y, ncs, "output");
    if (auto e = first_error(x3, y3)) return *e;
    return Args{*x3, *weight, *bias, *y3, attrs.num_groups, attrs.eps};
  }
  Dim3 block() const { return {256, 1, 1}; }
  /// One block a (sample, group).
  Dim3 grid(const ConcreteShape& y) const { return {ceil_div(y.empty() ? 1 : y[0] * attrs.num_groups, 1), 1, 1}; }

#if TEENY_TRAINING
  using BackwardArgs = GroupNormBackwardArgs<T>;
  Result<BackwardArgs> pack_backward_args(const BackwardBindings& b) const {
    auto forward = pack_args(forward_bindings(b));
    if (!forward) return std::move(forward).error();
    BackwardArgs g{*forward, {}, {}, {}, {}};
    if (auto e = first_error(bind_grad_output(b, g.forward.y, g.dy), bind_grad_input(b, 0, g.forward.x, g.dx),
                             bind_grad_param(b, 0, g.forward.weight, g.dweight),
                             bind_grad_param(b, 1, g.forward.bias, g.dbias))) {
      return *e;
    }
    return g;
  }
  /// One block a (sample, group) (dx), then one per 8 channels of a group (dweight and dbias).
  Dim3 backward_grid(std::span<const ConcreteShape>, const ConcreteShape& y) const {
    const std::int64_t per_group = attrs.num_groups == 0 ? 0 : attrs.num_channels / attrs.num_groups;
    return {ceil_div((y.empty() ? 1 : y[0]) * attrs.num_groups + attrs.num_groups * ((per_group + 7) / 8), 1), 1, 1};
  }
#endif
};
static_assert(RuntimeOp<group_norm_op<float>>);
#if TEENY_TRAINING
static_assert(BackwardOp<group_norm_op<float>>);
#endif

}  // namespace teeny
