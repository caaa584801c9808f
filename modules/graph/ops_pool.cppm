// teeny.graph:ops_pool — the pool family: MaxPool2d, AvgPool2d and AdaptiveAvgPool2d over the last
// two dims of [N, C, H, W] or [C, H, W], with PyTorch's window rules (ceil mode, padding, divisors).
//
//   MaxPool2d{.kernel = 2}                            f32[batch, 32, 28, 28] -> f32[batch, 32, 14, 14]
//   AdaptiveAvgPool2d{.output_size = 1}               f32[batch, 512, 7, 7]  -> f32[batch, 512, 1, 1]
export module teeny.graph:ops_pool;
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

}  // namespace teeny
// NOLINTEND(readability-redundant-member-init)

// ---- implementation -----------------------------------------------------------------------------

namespace teeny {
using namespace graph_detail;

namespace graph_detail {

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

}  // namespace graph_detail

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

}  // namespace teeny
