// teeny.graph:ops_conv — the conv family: Conv1d and Conv2d (torch.nn.Conv1d / Conv2d: stride,
// padding, dilation, groups, optional bias, unbatched inputs), with PyTorch's weight layout.
//
//   Conv2d{.in_channels = 1, .out_channels = 32, .kernel = 5, .padding = 2}   // 28x28 -> 28x28
//   params_of(conv, ...)   // weight f32[32, 1, 5, 5], bias f32[32]
export module teeny.graph:ops_conv;
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

}  // namespace graph_detail

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

}  // namespace teeny
