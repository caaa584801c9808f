// teeny.graph:ops_reduce — the reduce family: ops that combine elements along axes: Softmax and
// LogSoftmax (over one axis) and Reduce (sum, mean, amax over a set of axes, keepdim or not).
//
//   Softmax{.axis = 1}            f32[batch, 10] -> f32[batch, 10]
//   Reduce{ReduceOp::mean, {1}}   f32[batch, 10, 64] -> f32[batch, 64]         (kind: "mean")
//   Reduce{ReduceOp::sum}         i32[3, 4] -> i64[]                           (as torch.sum)
export module teeny.graph:ops_reduce;
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

/// exp(x) / sum(exp(x)) along `axis` (negative counts from the end).
struct Softmax {
  static constexpr std::string_view kind = "softmax";
  static constexpr Arity arity{1, 1};
  std::int64_t axis = -1;
  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const Softmax&, const Softmax&) = default;
};
static_assert(GraphOpType<Softmax>);

/// log(softmax(x)) along `axis`, computed stably.
struct LogSoftmax {
  static constexpr std::string_view kind = "log_softmax";
  static constexpr Arity arity{1, 1};
  std::int64_t axis = -1;
  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const LogSoftmax&, const LogSoftmax&) = default;
};
static_assert(GraphOpType<LogSoftmax>);

/// A reduction: `count` is not one but how many there are (it stays last, so it cannot go stale;
/// every table indexed by a ReduceOp checks its size against it).
enum class ReduceOp : std::uint8_t { sum, mean, max, count };
inline constexpr std::size_t reduce_op_count = static_cast<std::size_t>(ReduceOp::count);
constexpr std::string_view name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::mean: return "mean";
    case ReduceOp::max: return "max";
    case ReduceOp::count: break;
  }
  return "reduce";
}

/// Reduces `axes` (all when empty), keeping them as size 1 when keepdim. As in PyTorch, sum of
/// an integer or bool tensor is i64, mean needs floats, max keeps the dtype.
struct Reduce {
  static constexpr std::string_view kind = "reduce";
  static constexpr Arity arity{1, 1};
  ReduceOp op = ReduceOp::sum;
  std::vector<std::int64_t> axes{};  // empty: every axis
  bool keepdim = false;
  std::string_view name() const { return teeny::name(op); }
  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const Reduce&, const Reduce&) = default;
};
static_assert(GraphOpWithName<Reduce>);

}  // namespace teeny
// NOLINTEND(readability-redundant-member-init)

export namespace teeny {
inline std::string to_string(ReduceOp op) { return std::string(name(op)); }
}  // namespace teeny

// ---- implementation -----------------------------------------------------------------------------

namespace teeny {
using namespace graph_detail;

namespace graph_detail {

// Like normalize_axis, but a scalar accepts axis 0 and -1 (as PyTorch's softmax does).
Result<std::size_t> activation_axis(std::int64_t axis, std::size_t rank) {
  return normalize_axis(axis, rank == 0 ? 1 : rank);
}

}  // namespace graph_detail

Result<TensorType> Softmax::infer(std::span<const TensorType> inputs) const {
  TEENY_GRAPH_TRY(require_float(inputs[0]));
  TEENY_GRAPH_TRY(activation_axis(axis, inputs[0].shape.rank()));
  return inputs[0];
}

Result<TensorType> LogSoftmax::infer(std::span<const TensorType> inputs) const {
  TEENY_GRAPH_TRY(require_float(inputs[0]));
  TEENY_GRAPH_TRY(activation_axis(axis, inputs[0].shape.rank()));
  return inputs[0];
}

std::string Softmax::attributes() const { return attrs({{"axis", fmt(axis)}}); }
std::string LogSoftmax::attributes() const { return attrs({{"axis", fmt(axis)}}); }

Result<TensorType> Reduce::infer(std::span<const TensorType> inputs) const {
  const TensorType& x = inputs[0];
  const std::size_t rank = x.shape.rank();
  if (op == ReduceOp::mean) TEENY_GRAPH_TRY(require_float(x));
  std::vector<bool> reduced(rank, axes.empty());
  for (std::int64_t a : axes) {
    auto axis = normalize_axis(a, rank);
    if (!axis) return std::move(axis).error();
    if (reduced[*axis]) return fail(Errc::invalid_argument, "axis ", *axis, " appears twice in axes ", fmt(axes));
    reduced[*axis] = true;
  }
  std::vector<Dim> dims;
  for (std::size_t i = 0; i < rank; ++i) {
    if (!reduced[i]) {
      dims.push_back(x.shape[i]);
    } else if (keepdim) {
      dims.emplace_back(1);
    }
  }
  const DType dtype = op == ReduceOp::sum && !is_floating(x.dtype) ? DType::i64 : x.dtype;
  return TensorType{dtype, Shape(std::move(dims))};
}

std::string Reduce::attributes() const { return attrs({{"axes", fmt(axes)}, {"keepdim", fmt(keepdim)}}); }

}  // namespace teeny
