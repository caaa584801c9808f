// teeny.graph:ops_reduce — the reduce family: ops that combine elements along axes: Softmax and
// LogSoftmax (over one axis), Reduce (sum, mean, amax, prod over a set of axes, keepdim or not),
// ArgReduce (argmax, argmin) and NllLoss (the negative log-likelihood of integer targets).
//
//   Softmax{.axis = 1}            f32[batch, 10] -> f32[batch, 10]
//   Reduce{ReduceOp::mean, {1}}   f32[batch, 10, 64] -> f32[batch, 64]         (kind: "mean")
//   Reduce{ReduceOp::sum}         i32[3, 4] -> i64[]                           (as torch.sum)
//   NllLoss{}                     f32[batch, 10], i64[batch] -> f32[]          (as F.nll_loss)
//   ArgReduce{ArgOp::max, 1}      f32[batch, 10] -> i64[batch]                 (kind: "argmax")
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
enum class ReduceOp : std::uint8_t { sum, mean, max, prod, count };
inline constexpr std::size_t reduce_op_count = static_cast<std::size_t>(ReduceOp::count);
constexpr std::string_view name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::mean: return "mean";
    case ReduceOp::max: return "max";
    case ReduceOp::prod: return "prod";
    case ReduceOp::count: break;
  }
  return "reduce";
}

/// Reduces `axes` (all when empty), keeping them as size 1 when keepdim. As in PyTorch, sum and
/// prod of an integer or bool tensor are i64, mean needs floats, max keeps the dtype.
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

/// torch.cumsum along `axis`; ONNX's CumSum adds `exclusive` (each sum leaves its own element
/// out: the first is 0) and `reverse` (sums from the end).
struct CumSum {
  static constexpr std::string_view kind = "cumsum";
  static constexpr Arity arity{1, 1};
  std::int64_t axis = 0;
  bool exclusive = false;
  bool reverse = false;
  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const CumSum&, const CumSum&) = default;
};
static_assert(GraphOpType<CumSum>);

/// ONNX's Hardmax along `axis` (PyTorch has none): 1 where the first maximum of each line is, 0
/// elsewhere; NaN counts as the maximum, as for argmax.
struct Hardmax {
  static constexpr std::string_view kind = "hardmax";
  static constexpr Arity arity{1, 1};
  std::int64_t axis = -1;
  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const Hardmax&, const Hardmax&) = default;
};
static_assert(GraphOpType<Hardmax>);

/// Which extreme an ArgReduce finds. `count` is the number of values, as for ReduceOp.
enum class ArgOp : std::uint8_t { max, min, count };

/// torch.argmax / torch.argmin along `axis`: the i64 index of the first maximum (minimum), or of
/// the last with select_last_index (ONNX's attribute). NaN counts as larger and smaller than any
/// number, as in PyTorch: the first NaN's index (the last's with select_last_index) is chosen.
struct ArgReduce {
  static constexpr std::string_view kind = "arg_reduce";
  static constexpr Arity arity{1, 1};
  ArgOp op = ArgOp::max;
  std::int64_t axis = 0;
  bool keepdim = false;
  bool select_last_index = false;
  std::string_view name() const { return op == ArgOp::min ? "argmin" : "argmax"; }
  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const ArgReduce&, const ArgReduce&) = default;
};
static_assert(GraphOpWithName<ArgReduce>);

/// How a loss combines its per-element terms: PyTorch's `reduction`. `count` is the number of
/// values, as for ReduceOp.
enum class LossReduction : std::uint8_t { none, mean, sum, count };
inline constexpr std::size_t loss_reduction_count = static_cast<std::size_t>(LossReduction::count);
constexpr std::string_view name(LossReduction r) {
  switch (r) {
    case LossReduction::none: return "none";
    case LossReduction::mean: return "mean";
    case LossReduction::sum: return "sum";
    case LossReduction::count: break;
  }
  return "reduction";
}

/// F.nll_loss(input, target, weight): input [N, C, d...] (log-probabilities of C classes),
/// integer target [N, d...], optional class weights [C] as a third input. Each element's term is
/// -weight[t] * input[n, t, d...] for its target t, 0 where t == ignore_index (none: nothing is
/// ignored). reduction none gives the terms [N, d...]; sum their sum; mean their sum divided by
/// the summed weights of the targets not ignored (NaN when every target is ignored, as PyTorch).
/// A target outside [0, C) that is not ignored makes PyTorch raise; a kernel cannot report an
/// error at run time, so its term is NaN (and so is a sum or mean over it): never a wrong number.
/// Backward: to the input and to the weights (which PyTorch gives no gradient; the target gets none).
struct NllLoss {
  static constexpr std::string_view kind = "nll_loss";
  static constexpr Arity arity{2, 3};
  LossReduction reduction = LossReduction::mean;
  std::optional<std::int64_t> ignore_index = -100;  // PyTorch's default

  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const NllLoss&, const NllLoss&) = default;
};
static_assert(GraphOpType<NllLoss>);

}  // namespace teeny
// NOLINTEND(readability-redundant-member-init)

export namespace teeny {
inline std::string to_string(ReduceOp op) { return std::string(name(op)); }
inline std::string to_string(LossReduction r) { return std::string(name(r)); }
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
  const bool widens = op == ReduceOp::sum || op == ReduceOp::prod;
  const DType dtype = widens && !is_floating(x.dtype) ? DType::i64 : x.dtype;
  return TensorType{dtype, Shape(std::move(dims))};
}

std::string Reduce::attributes() const { return attrs({{"axes", fmt(axes)}, {"keepdim", fmt(keepdim)}}); }

Result<TensorType> CumSum::infer(std::span<const TensorType> inputs) const {
  TEENY_GRAPH_TRY(require_float(inputs[0]));
  TEENY_GRAPH_TRY(normalize_axis(axis, inputs[0].shape.rank()));
  return inputs[0];
}

std::string CumSum::attributes() const {
  return attrs({{"axis", fmt(axis)}, {"exclusive", fmt(exclusive)}, {"reverse", fmt(reverse)}});
}

Result<TensorType> Hardmax::infer(std::span<const TensorType> inputs) const {
  TEENY_GRAPH_TRY(require_float(inputs[0]));
  TEENY_GRAPH_TRY(normalize_axis(axis, inputs[0].shape.rank()));
  return inputs[0];
}

std::string Hardmax::attributes() const { return attrs({{"axis", fmt(axis)}}); }

Result<TensorType> ArgReduce::infer(std::span<const TensorType> inputs) const {
  const TensorType& x = inputs[0];
  TEENY_GRAPH_TRY(require_float(x));
  if (op == ArgOp::count) return fail(Errc::invalid_argument, "op is not one of max, min");
  auto a = normalize_axis(axis, x.shape.rank());
  if (!a) return std::move(a).error();
  if (x.shape[*a].is_concrete() && x.shape[*a].value == 0) {
    return fail(Errc::shape_mismatch, name(), " over the empty dim ", *a, " of ", x, " has no answer");
  }
  std::vector<Dim> dims = x.shape.dims();
  if (keepdim) {
    dims[*a] = Dim(1);
  } else {
    dims.erase(dims.begin() + static_cast<std::ptrdiff_t>(*a));
  }
  return TensorType{DType::i64, Shape(std::move(dims))};
}

std::string ArgReduce::attributes() const {
  return attrs({{"axis", fmt(axis)}, {"keepdim", fmt(keepdim)}, {"select_last_index", fmt(select_last_index)}});
}

Result<TensorType> NllLoss::infer(std::span<const TensorType> inputs) const {
  const TensorType& x = inputs[0];
  const TensorType& target = inputs[1];
  TEENY_GRAPH_TRY(require_float(x));
  TEENY_GRAPH_TRY(require_rank(x, 2, max_rank, "[N, C, d...]"));
  if (!is_integral(target.dtype)) {
    return fail(Errc::dtype_mismatch, "target ", target, " is ", name(target.dtype),
                ", but class indices must be integers");
  }
  // The target is the input without its class dim: [N, d...].
  std::vector<Dim> expected = x.shape.dims();
  expected.erase(expected.begin() + 1);
  if (target.shape != Shape(expected)) {
    return fail(Errc::shape_mismatch, "target ", target, " does not fit input ", x,
                ": expected [N, d...] = ", Shape(expected));
  }
  if (inputs.size() == 3) {
    const TensorType& weight = inputs[2];
    TEENY_GRAPH_TRY(require_same_dtype(x, weight));
    if (weight.shape != Shape{x.shape[1]}) {
      return fail(Errc::shape_mismatch, "weight ", weight, " must hold one weight per class: [", to_string(x.shape[1]),
                  "]");
    }
  }
  if (reduction == LossReduction::count) return fail(Errc::invalid_argument, "reduction is not one of none, mean, sum");
  if (reduction == LossReduction::none) return TensorType{x.dtype, Shape(std::move(expected))};
  return TensorType{x.dtype, Shape()};
}

std::string NllLoss::attributes() const {
  return attrs({{"reduction", std::string(name(reduction))}, {"ignore_index", fmt(ignore_index)}});
}

}  // namespace teeny
