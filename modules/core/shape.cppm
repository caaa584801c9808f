// teeny.core:shape — tensor shapes. A graph's shapes may hold named symbolic dims (`batch`) that
// are bound to sizes when a model is loaded; kernels see ConcreteShape, a fixed-capacity value
// type that needs no heap and can be passed to a GPU kernel by value.
//
//   Shape s{Dim::sym("batch"), 1, 28, 28};          // to_string(s) == "[batch, 1, 28, 28]"
//   auto c = s.bind({{"batch", 64}});                // Result<ConcreteShape>: [64, 1, 28, 28]
module;
#include <cstdio>
export module teeny.core:shape;
import teeny.std;
import :error;

export namespace teeny {

/// One dimension: a size, or `multiplier * symbol` (e.g. `batch`, `4*batch`) until bound.
struct Dim {
  std::int64_t value = 0;  // the size; for a symbolic dim, the multiplier of the symbol
  std::string symbol;      // empty for a concrete dim

  Dim() = default;
  Dim(std::int64_t size) : value(size) {}  // NOLINT: implicit so that {1, 28, 28} reads naturally
  static Dim sym(std::string name, std::int64_t multiplier = 1) {
    Dim d(multiplier);
    d.symbol = std::move(name);
    return d;
  }
  bool is_symbolic() const { return !symbol.empty(); }
  bool is_concrete() const { return symbol.empty(); }
  friend bool operator==(const Dim&, const Dim&) = default;
};

inline std::string to_string(const Dim& d) {
  if (d.is_concrete()) return std::to_string(d.value);
  if (d.value == 1) return d.symbol;
  return std::to_string(d.value) + "*" + d.symbol;
}

/// Symbolic dim name -> size, given at load (e.g. {"batch", 64}).
using Bindings = std::map<std::string, std::int64_t, std::less<>>;

/// The most dimensions a tensor may have.
inline constexpr std::size_t max_rank = 8;

/// The most elements one tensor may have (2^56): its size in bytes and every offset into it then
/// fit in int64 with room to spare. Sizes from files and from the user's shapes are checked against
/// it, so that size arithmetic downstream cannot wrap around.
inline constexpr std::int64_t max_numel = std::int64_t{1} << 56;

/// a * b, or nullopt when it overflows int64 (for sizes that come from outside).
constexpr std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}
/// a + b, or nullopt when it overflows int64.
constexpr std::optional<std::int64_t> checked_add(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

/// A shape whose every dim is known. Fixed capacity: trivially copyable, no heap.
class ConcreteShape {
 public:
  constexpr ConcreteShape() = default;
  /// For literal shapes in code; more than max_rank dims is a programming error.
  constexpr ConcreteShape(std::initializer_list<std::int64_t> dims) {
    if (dims.size() > max_rank) too_many(dims.size());
    for (std::int64_t d : dims) dims_[rank_++] = d;
  }
  /// For sizes from outside (files, user input): checks rank, non-negative sizes and at most
  /// max_numel elements.
  static Result<ConcreteShape> from(std::span<const std::int64_t> dims);

  constexpr std::size_t rank() const { return rank_; }
  constexpr std::size_t size() const { return rank_; }
  constexpr bool empty() const { return rank_ == 0; }
  constexpr std::int64_t operator[](std::size_t i) const { return dims_[i]; }
  constexpr std::int64_t& operator[](std::size_t i) { return dims_[i]; }
  constexpr const std::int64_t* begin() const { return dims_.data(); }
  constexpr const std::int64_t* end() const { return dims_.data() + rank_; }
  constexpr std::span<const std::int64_t> dims() const { return {dims_.data(), rank_}; }
  /// The last dim (1 for a scalar): the natural row length.
  constexpr std::int64_t last() const { return rank_ == 0 ? 1 : dims_[rank_ - 1]; }
  constexpr std::int64_t numel() const {
    std::int64_t n = 1;
    for (std::size_t i = 0; i < rank_; ++i) n *= dims_[i];
    return n;
  }
  /// The element count, or nullopt when a dim is negative or the nonzero dims multiply past
  /// max_numel (even when another dim is 0: numel() multiplies in order and must not overflow on
  /// the way). Shapes from outside are checked with it once; numel() is then exact.
  constexpr std::optional<std::int64_t> checked_numel() const {
    std::int64_t n = 1;
    bool empty = false;
    for (std::size_t i = 0; i < rank_; ++i) {
      if (dims_[i] < 0) return std::nullopt;
      if (dims_[i] == 0) {
        empty = true;
        continue;
      }
      auto m = checked_mul(n, dims_[i]);
      if (!m || *m > max_numel) return std::nullopt;
      n = *m;
    }
    return empty ? 0 : n;
  }
  constexpr void push_back(std::int64_t d) {
    if (rank_ == max_rank) too_many(rank_ + 1);
    dims_[rank_++] = d;
  }
  friend constexpr bool operator==(const ConcreteShape& a, const ConcreteShape& b) {
    return std::ranges::equal(a.dims(), b.dims());
  }

 private:
  [[noreturn]] static void too_many(std::size_t n) {
    std::fprintf(stderr, "teeny: ConcreteShape literal with %zu dims (max %zu)\n", n, max_rank);
    std::abort();
  }
  std::array<std::int64_t, max_rank> dims_{};
  std::size_t rank_ = 0;
};

inline std::string to_string(const ConcreteShape& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.rank(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

/// Row-major strides, in elements.
constexpr ConcreteShape contiguous_strides(const ConcreteShape& shape) {
  ConcreteShape strides = shape;
  std::int64_t step = 1;
  for (std::size_t i = shape.rank(); i-- > 0;) {
    strides[i] = step;
    step *= shape[i];
  }
  return strides;
}

/// A shape that may hold symbolic dims.
class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<Dim> dims) : dims_(dims) {}
  explicit Shape(std::vector<Dim> dims) : dims_(std::move(dims)) {}
  Shape(const ConcreteShape& s) : dims_(s.begin(), s.end()) {}  // NOLINT: every concrete shape is a shape

  std::size_t rank() const { return dims_.size(); }
  const Dim& operator[](std::size_t i) const { return dims_[i]; }
  Dim& operator[](std::size_t i) { return dims_[i]; }
  const std::vector<Dim>& dims() const { return dims_; }
  std::vector<Dim>& dims() { return dims_; }
  auto begin() const { return dims_.begin(); }
  auto end() const { return dims_.end(); }
  const Dim& back() const { return dims_.back(); }

  bool is_concrete() const {
    return std::ranges::all_of(dims_, [](const Dim& d) { return d.is_concrete(); });
  }
  /// The element count when every dim is concrete.
  std::optional<std::int64_t> numel() const {
    std::int64_t n = 1;
    for (const Dim& d : dims_) {
      if (d.is_symbolic()) return std::nullopt;
      n *= d.value;
    }
    return n;
  }
  /// Symbolic names used, in order of first appearance.
  std::vector<std::string> symbols() const {
    std::vector<std::string> names;
    for (const Dim& d : dims_) {
      if (d.is_symbolic() && std::ranges::find(names, d.symbol) == names.end()) names.push_back(d.symbol);
    }
    return names;
  }

  /// Replaces every symbolic dim by multiplier * its bound size.
  Result<ConcreteShape> bind(const Bindings& bindings) const;

  friend bool operator==(const Shape&, const Shape&) = default;

 private:
  std::vector<Dim> dims_;
};

inline std::string to_string(const Shape& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.rank(); ++i) out += (i ? ", " : "") + to_string(s[i]);
  return out + "]";
}

/// The element count of a shape from outside, checked: an error names the shape when a dim is
/// negative or the count exceeds max_numel.
inline Result<std::int64_t> checked_numel(const ConcreteShape& s) {
  if (auto n = s.checked_numel()) return *n;
  if (std::ranges::any_of(s.dims(), [](std::int64_t d) { return d < 0; })) {
    return fail(Errc::invalid_argument, "shape ", s, " has a negative dim");
  }
  if (std::ranges::find(s.dims(), std::int64_t{0}) != s.dims().end()) {
    return fail(Errc::out_of_range, "shape ", s, " is empty, but its other dims multiply past 2^56");
  }
  return fail(Errc::out_of_range, "shape ", s, " has more than 2^56 elements");
}

inline Result<ConcreteShape> ConcreteShape::from(std::span<const std::int64_t> dims) {
  if (dims.size() > max_rank) {
    return fail(Errc::out_of_range, "a tensor has at most ", max_rank, " dims, got ", dims.size());
  }
  ConcreteShape s;
  for (std::int64_t d : dims) {
    if (d < 0) return fail(Errc::invalid_argument, "negative dim ", d);
    s.dims_[s.rank_++] = d;
  }
  if (auto numel = teeny::checked_numel(s); !numel) return std::move(numel).error();
  return s;
}

inline Result<ConcreteShape> Shape::bind(const Bindings& bindings) const {
  if (rank() > max_rank) {
    return fail(Errc::out_of_range, "shape ", *this, " has ", rank(), " dims; at most ", max_rank, " are supported");
  }
  ConcreteShape out;
  for (const Dim& d : dims_) {
    if (d.is_concrete()) {
      out.push_back(d.value);
      continue;
    }
    auto it = bindings.find(d.symbol);
    if (it == bindings.end()) {
      return fail(Errc::not_found, "symbolic dim '", d.symbol, "' of shape ", *this, " is not bound to a size");
    }
    if (it->second < 0) {
      return fail(Errc::invalid_argument, "symbolic dim '", d.symbol, "' bound to negative size ", it->second);
    }
    auto size = checked_mul(d.value, it->second);
    if (!size || *size > max_numel) {
      return fail(Errc::out_of_range, "symbolic dim '", d.symbol, "' = ", it->second, " makes dim ", to_string(d),
                  " of shape ", *this, " overflow");
    }
    out.push_back(*size);
  }
  if (!out.checked_numel()) {
    return fail(Errc::out_of_range, "shape ", *this, " bound to ", out, " has more than 2^56 elements");
  }
  return out;
}

/// Binds the symbols of `pattern` so that it equals `actual` (used to read `batch` off an input).
inline Result<void> match_shape(const Shape& pattern, const ConcreteShape& actual, Bindings& bindings) {
  auto mismatch = [&] { return fail(Errc::shape_mismatch, "expected shape ", pattern, ", got ", actual); };
  if (pattern.rank() != actual.rank()) return mismatch();
  for (std::size_t i = 0; i < pattern.rank(); ++i) {
    const Dim& d = pattern[i];
    if (d.is_concrete()) {
      if (d.value != actual[i]) return mismatch();
      continue;
    }
    if (d.value <= 0 || actual[i] % d.value != 0) return mismatch();
    const std::int64_t size = actual[i] / d.value;
    auto [it, inserted] = bindings.try_emplace(d.symbol, size);
    if (!inserted && it->second != size) {
      return fail(Errc::shape_mismatch, "symbolic dim '", d.symbol, "' is ", it->second, " elsewhere but ", size,
                  " in shape ", actual, " (expected ", pattern, ")");
    }
  }
  return ok();
}

/// Maps a possibly negative axis (PyTorch style, -1 = last) into [0, rank).
inline Result<std::size_t> normalize_axis(std::int64_t axis, std::size_t rank) {
  const auto r = static_cast<std::int64_t>(rank);
  if (axis < -r || axis >= r) {
    return fail(Errc::out_of_range, "axis ", axis, " is out of range for rank ", rank, " (valid: ", -r, "..", r - 1,
                ")");
  }
  return static_cast<std::size_t>(axis < 0 ? axis + r : axis);
}

/// NumPy/PyTorch broadcasting of two shapes. Symbolic dims broadcast with 1 or an equal dim.
inline Result<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  const std::size_t rank = std::max(a.rank(), b.rank());
  std::vector<Dim> out(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    const Dim one(1);
    const Dim& da = i < rank - a.rank() ? one : a[i - (rank - a.rank())];
    const Dim& db = i < rank - b.rank() ? one : b[i - (rank - b.rank())];
    if (da == db || db == one) {
      out[i] = da;
    } else if (da == one) {
      out[i] = db;
    } else {
      return fail(Errc::shape_mismatch, "shapes ", a, " and ", b, " do not broadcast: dim ", i, " is ", to_string(da),
                  " vs ", to_string(db));
    }
  }
  return Shape(std::move(out));
}

}  // namespace teeny
