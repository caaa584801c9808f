// teeny.graph:tensor_type — what flows along a graph edge (a dtype and a possibly symbolic
// shape) and what an op asks of its node: parameter specs, input arity, 2-D window sizes.
//
//   TensorType t{DType::f32, {Dim::sym("batch"), 784}};   // to_string(t) == "f32[batch, 784]"
//   ParamSpec w{"weight", {512, 784}, DType::f32};        // stored under "fc1.weight" in node fc1
//   Arity{1, 1}.accepts(2) == false;   Size2 k = 3;       // k == Size2{3, 3}
export module teeny.graph:tensor_type;
import teeny.std;
import teeny.core;

// `{}` on members keeps designated initialisers that omit them warning-free (see :concepts).
// NOLINTBEGIN(readability-redundant-member-init)
export namespace teeny {

/// The type of a value in a graph: element type and shape (symbolic dims allowed).
struct TensorType {
  DType dtype = DType::f32;
  Shape shape{};
  friend bool operator==(const TensorType&, const TensorType&) = default;
};

/// "f32[batch, 784]".
inline std::string to_string(const TensorType& t) { return std::string(name(t.dtype)) + to_string(t.shape); }

/// A parameter or buffer an op owns, stored under the key `{node name}.{slot}` (PyTorch's
/// state_dict key when nodes are named like PyTorch module paths).
struct ParamSpec {
  std::string slot{};  // "weight", "bias", "running_mean", ...
  Shape shape{};       // always concrete
  DType dtype = DType::f32;
  bool trainable = true;  // false for buffers such as running statistics
  friend bool operator==(const ParamSpec&, const ParamSpec&) = default;
};

/// How many inputs an op takes: min..max inclusive (max = variadic for no upper bound).
struct Arity {
  static constexpr std::size_t variadic = std::numeric_limits<std::size_t>::max();
  std::size_t min = 0;
  std::size_t max = 0;
  constexpr bool accepts(std::size_t n) const { return n >= min && n <= max; }
  friend constexpr bool operator==(const Arity&, const Arity&) = default;
};

/// "2", "1 to 3", "at least 1".
inline std::string to_string(const Arity& a) {
  if (a.min == a.max) return std::to_string(a.min);
  if (a.max == Arity::variadic) return "at least " + std::to_string(a.min);
  return std::to_string(a.min) + " to " + std::to_string(a.max);
}

/// A (height, width) pair for 2-D kernels, strides, paddings and sizes. Like PyTorch, a single
/// number means the same value for both: `Size2 k = 3` is (3, 3).
struct Size2 {
  std::int64_t h = 0;
  std::int64_t w = 0;
  constexpr Size2() = default;
  constexpr Size2(std::int64_t both) : h(both), w(both) {}  // NOLINT: implicit, as in PyTorch's `kernel_size=3`
  constexpr Size2(std::int64_t height, std::int64_t width) : h(height), w(width) {}
  friend constexpr bool operator==(const Size2&, const Size2&) = default;
};

/// "(5, 5)".
inline std::string to_string(const Size2& s) { return "(" + std::to_string(s.h) + ", " + std::to_string(s.w) + ")"; }

}  // namespace teeny
// NOLINTEND(readability-redundant-member-init)
