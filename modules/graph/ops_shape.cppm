// teeny.graph:ops_shape — graph inputs, weights used as values, and the ops that move or
// reinterpret data without arithmetic: flatten, reshape, transpose, permute, concat, split, slice,
// pad, upsample, cast.
// Symbolic dims (`batch`) pass through wherever the result is still a single symbolic dim.
//
//   Flatten{}                          f32[batch, 1, 28, 28] -> f32[batch, 784]
//   Reshape{{Dim::sym("batch"), -1}}   f32[batch, 4, 8]      -> f32[batch, 32]
//   Slice{.axis = 1, .start = -3}      f32[2, 10]            -> f32[2, 3]   (PyTorch's x[:, -3:])
export module teeny.graph:ops_shape;
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

/// A graph input: a named value of the given type supplied to forward().
struct Input {
  static constexpr std::string_view kind = "input";
  static constexpr Arity arity{0, 0};
  TensorType type{};

  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const Input&, const Input&) = default;
};
static_assert(GraphOpType<Input>);

/// A tensor of weights used as a value: the parameter "value" [value_shape] broadcast to `shape`
/// (NumPy's rules: value_shape's dims align with shape's last ones and are 1 or equal to them), so
/// a learned token reaches a symbolic batch (ViT's class token, `cls_token.expand(batch, -1, -1)`).
/// An empty `shape` is value_shape itself. Not trained when `trainable` is false (a constant).
struct Weight {
  static constexpr std::string_view kind = "weight";
  static constexpr Arity arity{0, 0};
  DType dtype = DType::f32;
  std::vector<std::int64_t> value_shape{};
  std::vector<Dim> shape{};
  bool trainable = true;

  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::vector<ParamSpec> params(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const Weight&, const Weight&) = default;
};
static_assert(GraphOpWithParams<Weight>);

/// Converts the elements to `dtype`; the shape is unchanged.
struct Cast {
  static constexpr std::string_view kind = "cast";
  static constexpr Arity arity{1, 1};
  DType dtype = DType::f32;

  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const Cast&, const Cast&) = default;
};
static_assert(GraphOpType<Cast>);

/// torch.flatten: merges dims start_dim..end_dim (inclusive, negative from the end) into one.
/// A scalar becomes [1]. The merged dim may hold at most one symbolic factor (784*batch).
struct Flatten {
  static constexpr std::string_view kind = "flatten";
  static constexpr Arity arity{1, 1};
  std::int64_t start_dim = 1;
  std::int64_t end_dim = -1;

  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const Flatten&, const Flatten&) = default;
};
static_assert(GraphOpType<Flatten>);

/// torch.reshape to `shape`: one dim may be -1 (inferred); symbolic dims are allowed, and the
/// element counts must agree symbol by symbol ([batch, 784] has 784*batch elements).
struct Reshape {
  static constexpr std::string_view kind = "reshape";
  static constexpr Arity arity{1, 1};
  std::vector<Dim> shape{};

  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const Reshape&, const Reshape&) = default;
};
static_assert(GraphOpType<Reshape>);

/// torch.transpose: swaps dims dim0 and dim1.
struct Transpose {
  static constexpr std::string_view kind = "transpose";
  static constexpr Arity arity{1, 1};
  std::int64_t dim0 = 0;
  std::int64_t dim1 = 1;

  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const Transpose&, const Transpose&) = default;
};
static_assert(GraphOpType<Transpose>);

/// torch.permute: output dim i is input dim dims[i].
struct Permute {
  static constexpr std::string_view kind = "permute";
  static constexpr Arity arity{1, 1};
  std::vector<std::int64_t> dims{};

  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const Permute&, const Permute&) = default;
};
static_assert(GraphOpType<Permute>);

/// torch.cat along `axis`: one or more inputs of one dtype and rank, equal outside `axis`.
struct Concat {
  static constexpr std::string_view kind = "concat";
  static constexpr Arity arity{1, Arity::variadic};
  std::int64_t axis = 0;

  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const Concat&, const Concat&) = default;
};
static_assert(GraphOpType<Concat>);

/// Piece `index` of torch.split(x, sizes, axis): one node per piece (GraphBuilder::split and
/// chunk create them all). `sizes` must sum to the (concrete) size of `axis`.
struct Split {
  static constexpr std::string_view kind = "split";
  static constexpr Arity arity{1, 1};
  std::int64_t axis = 0;
  std::vector<std::int64_t> sizes{};
  std::int64_t index = 0;

  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const Split&, const Split&) = default;
};
static_assert(GraphOpType<Split>);

/// x[start:end:step] along `axis` with Python's rules: negative indices count from the end,
/// out-of-range bounds clamp, none means the whole range; step must be positive.
struct Slice {
  static constexpr std::string_view kind = "slice";
  static constexpr Arity arity{1, 1};
  std::int64_t axis = 0;
  std::optional<std::int64_t> start{};
  std::optional<std::int64_t> end{};
  std::int64_t step = 1;

  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const Slice&, const Slice&) = default;
};
static_assert(GraphOpType<Slice>);

/// How F.pad fills: `count` is not a mode but how many there are (it stays last, so it cannot go
/// stale; every table indexed by a PadMode checks its size against it).
enum class PadMode : std::uint8_t { constant, reflect, replicate, count };
inline constexpr std::size_t pad_mode_count = static_cast<std::size_t>(PadMode::count);
constexpr std::string_view name(PadMode m) {
  switch (m) {
    case PadMode::constant: return "constant";
    case PadMode::reflect: return "reflect";
    case PadMode::replicate: return "replicate";
    case PadMode::count: break;
  }
  return "pad";
}

/// F.pad: `pads` lists (before, after) pairs starting from the LAST dim: {left, right, top,
/// bottom, ...}. constant mode fills `value` and accepts negative pads (cropping); reflect and
/// replicate pad the last 1-3 dims of a batched or unbatched input, reflect by less than the dim.
struct Pad {
  static constexpr std::string_view kind = "pad";
  static constexpr Arity arity{1, 1};
  std::vector<std::int64_t> pads{};
  PadMode mode = PadMode::constant;
  double value = 0;

  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const Pad&, const Pad&) = default;
};
static_assert(GraphOpType<Pad>);

enum class UpsampleMode : std::uint8_t { nearest };
constexpr std::string_view name(UpsampleMode) { return "nearest"; }

/// torch.nn.Upsample(scale_factor=(scale_h, scale_w)): [N, C, H, W] -> [N, C, floor(H * scale_h),
/// floor(W * scale_w)]. A symbolic H or W needs an integer scale.
struct Upsample {
  static constexpr std::string_view kind = "upsample";
  static constexpr Arity arity{1, 1};
  double scale_h = 1;
  double scale_w = 1;
  UpsampleMode mode = UpsampleMode::nearest;

  Result<TensorType> infer(std::span<const TensorType> inputs) const;
  std::string attributes() const;
  friend bool operator==(const Upsample&, const Upsample&) = default;
};
static_assert(GraphOpType<Upsample>);

inline std::string to_string(PadMode m) { return std::string(name(m)); }
inline std::string to_string(UpsampleMode m) { return std::string(name(m)); }

}  // namespace teeny
// NOLINTEND(readability-redundant-member-init)

// ---- implementation -----------------------------------------------------------------------------

namespace teeny {
using namespace graph_detail;

namespace graph_detail {

// An element count as coefficient * product of symbols (sorted), so that [batch, 784] and
// [batch, 28, 28] compare equal.
struct Numel {
  std::int64_t coefficient = 1;
  std::vector<std::string> symbols;
  bool overflow = false;  // the coefficient does not fit int64
};

Numel numel_of(std::span<const Dim> dims) {
  Numel n;
  for (const Dim& d : dims) {
    if (d.is_concrete() && d.value == -1) continue;  // Reshape's inferred dim
    auto product = checked_mul(n.coefficient, d.value);
    n.overflow = n.overflow || !product;
    n.coefficient = product.value_or(0);
    if (d.is_symbolic()) n.symbols.push_back(d.symbol);
  }
  std::ranges::sort(n.symbols);
  return n;
}

std::string to_string(const Numel& n) {
  std::string out = n.symbols.empty() || n.coefficient != 1 ? std::to_string(n.coefficient) : "";
  for (const std::string& s : n.symbols) out += (out.empty() ? "" : "*") + s;
  return out;
}

}  // namespace graph_detail

// ---- Input, Cast

Result<TensorType> Input::infer(std::span<const TensorType>) const {
  if (type.shape.rank() > max_rank) {
    return fail(Errc::out_of_range, "shape ", type.shape, " has ", type.shape.rank(), " dims; at most ", max_rank,
                " are supported");
  }
  for (const Dim& d : type.shape) {
    if (d.is_concrete() && d.value < 0) {
      return fail(Errc::invalid_argument, "shape ", type.shape, " has a negative dim");
    }
    if (d.is_symbolic() && d.value <= 0) {
      return fail(Errc::invalid_argument, "shape ", type.shape, " has a symbolic dim with a non-positive multiplier");
    }
  }
  return type;
}

std::string Input::attributes() const { return attrs({{"dtype", fmt(type.dtype)}, {"shape", to_string(type.shape)}}); }

Result<TensorType> Weight::infer(std::span<const TensorType>) const {
  auto value = ConcreteShape::from(value_shape);
  if (!value) return std::move(value).error().context("value_shape");
  if (shape.empty()) return TensorType{dtype, Shape(*value)};
  if (shape.size() > max_rank) {
    return fail(Errc::out_of_range, "shape ", fmt(shape), " has ", shape.size(), " dims; at most ", max_rank,
                " are supported");
  }
  if (value_shape.size() > shape.size()) {
    return fail(Errc::shape_mismatch, "value_shape ", fmt(value_shape), " has more dims than shape ", fmt(shape));
  }
  const std::size_t lead = shape.size() - value_shape.size();
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const Dim& d = shape[i];
    if ((d.is_concrete() && d.value < 0) || (d.is_symbolic() && d.value <= 0)) {
      return fail(Errc::invalid_argument, "shape ", fmt(shape), " has an invalid dim ", to_string(d));
    }
    if (i < lead) continue;
    const std::int64_t v = value_shape[i - lead];
    if (v != 1 && !(d.is_concrete() && d.value == v)) {
      return fail(Errc::shape_mismatch, "value_shape ", fmt(value_shape), " does not broadcast to shape ", fmt(shape),
                  " (dim ", i, ")");
    }
  }
  return TensorType{dtype, Shape(shape)};
}

std::vector<ParamSpec> Weight::params(std::span<const TensorType>) const {
  return {{"value", shape_of(value_shape), dtype, trainable}};
}

std::string Weight::attributes() const {
  return attrs(
      {{"dtype", fmt(dtype)}, {"value_shape", fmt(value_shape)}, {"shape", fmt(shape)}, {"trainable", fmt(trainable)}});
}

Result<TensorType> Cast::infer(std::span<const TensorType> inputs) const { return TensorType{dtype, inputs[0].shape}; }

std::string Cast::attributes() const { return attrs({{"dtype", fmt(dtype)}}); }

// ---- Flatten, Reshape

Result<TensorType> Flatten::infer(std::span<const TensorType> inputs) const {
  const TensorType& x = inputs[0];
  const std::size_t rank = x.shape.rank();
  auto start = normalize_axis(start_dim, rank == 0 ? 1 : rank);
  if (!start) return std::move(start).error().context("start_dim");
  auto end = normalize_axis(end_dim, rank == 0 ? 1 : rank);
  if (!end) return std::move(end).error().context("end_dim");
  if (*start > *end) {
    return fail(Errc::invalid_argument, "start_dim ", start_dim, " comes after end_dim ", end_dim, " for input ", x);
  }
  if (rank == 0) return TensorType{x.dtype, Shape{1}};
  Dim merged(1);
  for (std::size_t i = *start; i <= *end; ++i) {
    auto product = mul_dims(merged, x.shape[i]);
    if (!product) {
      return std::move(product).error().context(cat("cannot flatten dims ", *start, "..", *end, " of input ", x));
    }
    merged = std::move(*product);
  }
  std::vector<Dim> dims(x.shape.begin(), x.shape.begin() + static_cast<std::ptrdiff_t>(*start));
  dims.push_back(std::move(merged));
  dims.insert(dims.end(), x.shape.begin() + static_cast<std::ptrdiff_t>(*end) + 1, x.shape.end());
  return TensorType{x.dtype, Shape(std::move(dims))};
}

std::string Flatten::attributes() const { return attrs({{"start_dim", fmt(start_dim)}, {"end_dim", fmt(end_dim)}}); }

Result<TensorType> Reshape::infer(std::span<const TensorType> inputs) const {
  const TensorType& x = inputs[0];
  std::optional<std::size_t> inferred;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const Dim& d = shape[i];
    if (d.is_symbolic() && d.value <= 0) {
      return fail(Errc::invalid_argument, "target shape ", fmt(shape),
                  " has a symbolic dim with a non-positive multiplier");
    }
    if (d.is_concrete() && d.value < -1) {
      return fail(Errc::invalid_argument, "target shape ", fmt(shape), " has invalid size ", d.value, " in dim ", i);
    }
    if (d.is_concrete() && d.value == -1) {
      if (inferred) return fail(Errc::invalid_argument, "target shape ", fmt(shape), " has more than one -1");
      inferred = i;
    }
  }
  const Numel have = numel_of(x.shape.dims());
  const Numel want = numel_of(shape);
  if (want.overflow) {
    return fail(Errc::out_of_range, "target shape ", fmt(shape), " has more elements than fit in int64");
  }
  auto mismatch = [&] {
    return fail(Errc::shape_mismatch, "cannot reshape input ", x, " (", to_string(have), " elements) into ", fmt(shape),
                " (", inferred ? to_string(want) + "*n" : to_string(want), " elements)");
  };
  std::vector<Dim> dims = shape;
  if (!inferred) {
    const bool same = (have.coefficient == 0 && want.coefficient == 0) ||
                      (have.coefficient == want.coefficient && have.symbols == want.symbols);
    if (!same) return mismatch();
    return TensorType{x.dtype, Shape(std::move(dims))};
  }
  if (want.coefficient == 0) {
    return fail(Errc::invalid_argument, "cannot reshape input ", x, " into ", fmt(shape),
                ": the -1 is ambiguous next to a zero-sized dim");
  }
  if (have.coefficient % want.coefficient != 0 || !std::ranges::includes(have.symbols, want.symbols)) {
    return mismatch();
  }
  std::vector<std::string> left;
  std::ranges::set_difference(have.symbols, want.symbols, std::back_inserter(left));
  const std::int64_t quotient = have.coefficient / want.coefficient;
  if (left.empty() || quotient == 0) {
    dims[*inferred] = quotient;
  } else if (left.size() == 1) {
    dims[*inferred] = Dim::sym(left[0], quotient);
  } else {
    return fail(Errc::shape_mismatch, "cannot reshape input ", x, " into ", fmt(shape), ": the -1 would be ", quotient,
                "*", left[0], "*", left[1], ", a product of symbols");
  }
  return TensorType{x.dtype, Shape(std::move(dims))};
}

std::string Reshape::attributes() const { return attrs({{"shape", fmt(shape)}}); }

// ---- Transpose, Permute

Result<TensorType> Transpose::infer(std::span<const TensorType> inputs) const {
  const TensorType& x = inputs[0];
  const std::size_t rank = x.shape.rank();
  auto a = normalize_axis(dim0, rank == 0 ? 1 : rank);
  if (!a) return std::move(a).error().context("dim0");
  auto b = normalize_axis(dim1, rank == 0 ? 1 : rank);
  if (!b) return std::move(b).error().context("dim1");
  if (rank == 0) return x;
  TensorType out = x;
  std::swap(out.shape[*a], out.shape[*b]);
  return out;
}

std::string Transpose::attributes() const { return attrs({{"dim0", fmt(dim0)}, {"dim1", fmt(dim1)}}); }

Result<TensorType> Permute::infer(std::span<const TensorType> inputs) const {
  const TensorType& x = inputs[0];
  const std::size_t rank = x.shape.rank();
  if (dims.size() != rank) {
    return fail(Errc::shape_mismatch, "dims ", fmt(dims), " has ", dims.size(), " entries, but input ", x, " has ",
                rank, " dims");
  }
  std::vector<bool> used(rank, false);
  std::vector<Dim> out;
  for (std::int64_t d : dims) {
    auto axis = normalize_axis(d, rank);
    if (!axis) return std::move(axis).error();
    if (used[*axis]) return fail(Errc::invalid_argument, "dims ", fmt(dims), " repeats dim ", *axis);
    used[*axis] = true;
    out.push_back(x.shape[*axis]);
  }
  return TensorType{x.dtype, Shape(std::move(out))};
}

std::string Permute::attributes() const { return attrs({{"dims", fmt(dims)}}); }

// ---- Concat, Split, Slice

Result<TensorType> Concat::infer(std::span<const TensorType> inputs) const {
  const TensorType& first = inputs[0];
  const std::size_t rank = first.shape.rank();
  if (rank == 0) return fail(Errc::shape_mismatch, "cannot concatenate scalars (input 0 is ", first, ")");
  auto ax = normalize_axis(axis, rank);
  if (!ax) return std::move(ax).error();
  TensorType out = first;
  for (std::size_t i = 1; i < inputs.size(); ++i) {
    const TensorType& t = inputs[i];
    if (t.dtype != first.dtype) {
      return fail(Errc::dtype_mismatch, "input ", i, " ", t, " has dtype ", name(t.dtype), " but input 0 ", first,
                  " has ", name(first.dtype));
    }
    if (t.shape.rank() != rank) {
      return fail(Errc::shape_mismatch, "input ", i, " ", t, " has ", t.shape.rank(), " dims but input 0 ", first,
                  " has ", rank);
    }
    for (std::size_t d = 0; d < rank; ++d) {
      if (d != *ax && t.shape[d] != first.shape[d]) {
        return fail(Errc::shape_mismatch, "input ", i, " ", t, " differs from input 0 ", first, " in dim ", d,
                    " (only dim ", *ax, " may differ)");
      }
    }
    auto sum = add_dims(out.shape[*ax], t.shape[*ax]);
    if (!sum) {
      return std::move(sum).error().context(cat("cannot concatenate input ", i, " ", t, " along dim ", *ax));
    }
    out.shape[*ax] = std::move(*sum);
  }
  return out;
}

std::string Concat::attributes() const { return attrs({{"axis", fmt(axis)}}); }

Result<TensorType> Split::infer(std::span<const TensorType> inputs) const {
  const TensorType& x = inputs[0];
  auto ax = normalize_axis(axis, x.shape.rank());
  if (!ax) return std::move(ax).error();
  auto size = concrete_dim(x, *ax, "the split dim");
  if (!size) return std::move(size).error();
  std::int64_t total = 0;
  for (std::int64_t s : sizes) {
    TEENY_GRAPH_TRY(check_non_negative("split size", s));
    auto sum = checked_add(total, s);
    if (!sum) return fail(Errc::out_of_range, "split sizes ", fmt(sizes), " overflow when summed");
    total = *sum;
  }
  if (total != *size) {
    return fail(Errc::shape_mismatch, "split sizes ", fmt(sizes), " sum to ", total, ", but dim ", *ax, " of input ", x,
                " is ", *size);
  }
  if (index < 0 || static_cast<std::size_t>(index) >= sizes.size()) {
    return fail(Errc::out_of_range, "piece ", index, " does not exist: there are ", sizes.size(), " split sizes");
  }
  TensorType out = x;
  out.shape[*ax] = sizes[static_cast<std::size_t>(index)];
  return out;
}

std::string Split::attributes() const {
  return attrs({{"axis", fmt(axis)}, {"sizes", fmt(sizes)}, {"index", fmt(index)}});
}

Result<TensorType> Slice::infer(std::span<const TensorType> inputs) const {
  const TensorType& x = inputs[0];
  auto ax = normalize_axis(axis, x.shape.rank());
  if (!ax) return std::move(ax).error();
  TEENY_GRAPH_TRY(check_positive("step", step));
  const Dim& d = x.shape[*ax];
  TensorType out = x;
  if (d.is_symbolic()) {
    if (start.value_or(0) == 0 && !end && step == 1) return out;  // x[:] keeps the symbolic size
    return fail(Errc::shape_mismatch, "cannot slice dim ", *ax, " of input ", x, ": its size '", to_string(d),
                "' is symbolic");
  }
  const std::int64_t n = d.value;
  auto clamp = [n](std::int64_t i) { return std::clamp(i < 0 ? i + n : i, std::int64_t{0}, n); };
  const std::int64_t first = clamp(start.value_or(0));
  const std::int64_t last = std::max(first, clamp(end.value_or(n)));
  // ceil((last - first) / step) without forming last - first + step - 1, which overflows for a huge step.
  const std::int64_t length = last - first;
  out.shape[*ax] = length / step + (length % step != 0 ? 1 : 0);
  return out;
}

std::string Slice::attributes() const {
  return attrs({{"axis", fmt(axis)}, {"start", fmt(start)}, {"end", fmt(end)}, {"step", fmt(step)}});
}

// ---- Pad, Upsample

Result<TensorType> Pad::infer(std::span<const TensorType> inputs) const {
  const TensorType& x = inputs[0];
  const std::size_t rank = x.shape.rank();
  if (pads.size() % 2 != 0) {
    return fail(Errc::invalid_argument, "pads ", fmt(pads), " must have an even length (before, after pairs)");
  }
  const std::size_t pairs = pads.size() / 2;
  if (pairs > rank) {
    return fail(Errc::invalid_argument, "pads ", fmt(pads), " pad ", pairs, " dims, but input ", x, " has ", rank);
  }
  if (mode != PadMode::constant) {
    if (value != 0) return fail(Errc::invalid_argument, name(mode), " padding takes no fill value, got ", value);
    if (pairs < 1 || pairs > 3 || rank < pairs + 1 || rank > pairs + 2) {
      return fail(Errc::invalid_argument, name(mode), " padding pads the last 1 to 3 dims of an input with 1 or 2 ",
                  "more dims, but pads ", fmt(pads), " pad ", pairs, " dims of input ", x);
    }
  }
  TensorType out = x;
  for (std::size_t i = 0; i < pairs; ++i) {
    const std::size_t axis = rank - 1 - i;
    const std::int64_t before = pads[2 * i];
    const std::int64_t after = pads[2 * i + 1];
    if (before == 0 && after == 0) continue;
    const Dim& d = x.shape[axis];
    if (d.is_symbolic()) {
      return fail(Errc::shape_mismatch, "cannot pad dim ", axis, " of input ", x, ": its size '", to_string(d),
                  "' is symbolic");
    }
    if (mode != PadMode::constant && (before < 0 || after < 0)) {
      return fail(Errc::invalid_argument, name(mode), " padding (", before, ", ", after, ") must be non-negative");
    }
    if (mode == PadMode::reflect && (before >= d.value || after >= d.value)) {
      return fail(Errc::invalid_argument, "reflect padding (", before, ", ", after, ") must be smaller than dim ", axis,
                  " of input ", x, " (", d.value, ")");
    }
    if (mode == PadMode::replicate && d.value == 0) {
      return fail(Errc::invalid_argument, "replicate padding of the empty dim ", axis, " of input ", x);
    }
    const auto partial = checked_add(d.value, before);
    const auto padded = partial ? checked_add(*partial, after) : std::nullopt;
    if (!padded) {
      return fail(Errc::out_of_range, "padding (", before, ", ", after, ") of dim ", axis, " of input ", x,
                  " overflows");
    }
    const std::int64_t size = *padded;
    if (size < 0) {
      return fail(Errc::invalid_argument, "padding (", before, ", ", after, ") makes dim ", axis, " of input ", x,
                  " negative (", size, ")");
    }
    out.shape[axis] = size;
  }
  return out;
}

std::string Pad::attributes() const {
  return attrs({{"pads", fmt(pads)}, {"mode", to_string(mode)}, {"value", fmt(value)}});
}

Result<TensorType> Upsample::infer(std::span<const TensorType> inputs) const {
  const TensorType& x = inputs[0];
  TEENY_GRAPH_TRY(require_float(x));
  TEENY_GRAPH_TRY(require_rank(x, 4, 4, "[N, C, H, W]"));
  TensorType out = x;
  const double scales[2] = {scale_h, scale_w};
  for (std::size_t i = 0; i < 2; ++i) {
    const double scale = scales[i];
    if (!(scale > 0) || !std::isfinite(scale)) {
      return fail(Errc::invalid_argument, i == 0 ? "scale_h" : "scale_w", " must be positive, got ", scale);
    }
    const std::size_t axis = 2 + i;
    const Dim& d = x.shape[axis];
    if (d.is_symbolic()) {
      if (scale != std::floor(scale)) {
        return fail(Errc::shape_mismatch, "dim ", axis, " of input ", x, " is symbolic ('", to_string(d),
                    "'), so its scale must be an integer, got ", scale);
      }
      // Bounded before the conversion: a double beyond int64 does not convert.
      const auto multiplier = scale <= static_cast<double>(max_numel)
                                  ? checked_mul(d.value, static_cast<std::int64_t>(scale))
                                  : std::nullopt;
      if (!multiplier) {
        return fail(Errc::out_of_range, "scale ", scale, " makes dim ", axis, " of input ", x, " too large");
      }
      out.shape[axis] = Dim::sym(d.symbol, *multiplier);
      continue;
    }
    const double scaled = std::floor(static_cast<double>(d.value) * scale);
    if (scaled > static_cast<double>(max_numel)) {
      return fail(Errc::out_of_range, "scale ", scale, " makes dim ", axis, " of input ", x, " too large (", scaled,
                  ")");
    }
    const auto size = static_cast<std::int64_t>(scaled);
    if (size <= 0) {
      return fail(Errc::shape_mismatch, "scale ", scale, " turns dim ", axis, " of input ", x, " into size ", size);
    }
    out.shape[axis] = size;
  }
  return out;
}

std::string Upsample::attributes() const {
  return attrs({{"scale_h", fmt(scale_h)}, {"scale_w", fmt(scale_w)}, {"mode", to_string(mode)}});
}

}  // namespace teeny
