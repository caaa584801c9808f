// teeny.model:executable_op — an op lowered to something a backend can run, and op sets.
//
// A DAG node holds an op set: a std::variant of concrete op types, so an op outside the set cannot
// be represented and `std::visit` over an overload set makes a forgotten op a compile error.
//
//   using my_ops = OpSet<InputOp, relu_op, my_custom_op>;   // each checked against ExecutableOp
//   Dag<my_ops> dag;
export module teeny.model:executable_op;
import teeny.std;
import teeny.core;
import :runtime_op;

export namespace teeny {

/// Where the code of a kernel lives: a precompiled entry (CUDA: an nvcc-built launcher per dtype;
/// CPU: a function template instance), or `source` to compile at run time (NVRTC) for ops defined
/// at run time.
struct KernelRef {
  std::string_view name;         // human-readable, e.g. "linear_f32"
  std::string_view entry_point;  // symbol of the kernel entry
  std::string_view source;       // empty for precompiled kernels
  friend constexpr bool operator==(const KernelRef&, const KernelRef&) = default;
};

/// The seed's KernelInstance: the forward kernel and, when the op declares one, its backward.
struct KernelInstance {
  KernelRef forward;
  std::optional<KernelRef> backward;
};

/// A kernel family's name as a template argument ("unary"); per-dtype kernel names are made from it.
template <std::size_t N>
struct KernelFamily {
  char chars[N]{};
  constexpr KernelFamily(const char (&text)[N]) {  // NOLINT: implicit, so that kernel_ref<"unary", T> reads plainly
    for (std::size_t i = 0; i < N; ++i) chars[i] = text[i];
  }
  constexpr std::string_view view() const { return {chars, N - 1}; }
};

namespace kernel_detail {
// "teeny_<family>_<dtype>", with static storage (a KernelRef holds string_views).
template <KernelFamily Family, Element T>
inline constexpr auto entry_point = [] {
  constexpr std::string_view prefix = "teeny_";
  constexpr std::string_view family = Family.view();
  constexpr std::string_view dtype = name(dtype_of<T>);
  std::array<char, prefix.size() + family.size() + 1 + dtype.size() + 1> out{};
  std::size_t n = 0;
  for (char c : prefix) out[n++] = c;
  for (char c : family) out[n++] = c;
  out[n++] = '_';
  for (char c : dtype) out[n++] = c;
  return out;  // the last char stays '\0'
}();
}  // namespace kernel_detail

/// The precompiled kernel of `Family` for element type T: name "unary_f32", entry point
/// "teeny_unary_f32" (the symbol the CUDA backend launches).
template <KernelFamily Family, Element T>
constexpr KernelRef kernel_ref() {
  constexpr std::string_view entry(kernel_detail::entry_point<Family, T>.data(),
                                   kernel_detail::entry_point<Family, T>.size() - 1);
  return {entry.substr(std::string_view("teeny_").size()), entry, ""};
}

/// A graph input placeholder: carries no kernel; the plan binds a user tensor to it by name.
template <class Op>
concept InputOpType = requires {
  requires std::same_as<std::remove_cv_t<decltype(Op::is_input)>, bool>;
  requires Op::is_input;
};

/// An op in a lowered DAG: named, with its output's symbolic shape and dtype; either an input
/// placeholder or a RuntimeOp with a kernel.
template <class Op>
concept ExecutableOp = std::copy_constructible<Op> && requires(const Op& op) {
  { op.name() } -> std::convertible_to<std::string_view>;
  { op.output_shape() } -> std::convertible_to<const Shape&>;
  { op.output_dtype() } -> std::same_as<DType>;
} && (InputOpType<Op> || (RuntimeOp<Op> && requires(const Op& op) {
                         { op.kernel() } -> std::same_as<KernelInstance>;
                       }));

namespace executable_detail {
struct is_input_fn {
  template <ExecutableOp Op>
  constexpr bool operator()(const Op&) const {
    return InputOpType<Op>;
  }
};
struct backward_kernel_fn {
  template <ExecutableOp Op>
  std::optional<KernelRef> operator()(const Op& op) const {
    if constexpr (InputOpType<Op>) {
      return std::nullopt;
    } else {
      return op.kernel().backward;
    }
  }
};

template <class V>
struct variant_of_executable_ops : std::false_type {};
template <class... Ops>
struct variant_of_executable_ops<std::variant<Ops...>> : std::bool_constant<(ExecutableOp<Ops> && ...)> {};
}  // namespace executable_detail

/// True for input placeholders (no kernel). Default: false; an op says so with
/// `static constexpr bool is_input = true`.
inline constexpr executable_detail::is_input_fn is_input{};
/// The backward kernel, if the op has one. Default: none.
inline constexpr executable_detail::backward_kernel_fn backward_kernel{};

/// A std::variant whose every alternative is an ExecutableOp: what a DAG node holds.
template <class V>
concept OpSetType = executable_detail::variant_of_executable_ops<V>::value;

/// Spells an op set; each op is checked against ExecutableOp where the set is named.
template <ExecutableOp... Ops>
using OpSet = std::variant<Ops...>;

/// The standard input placeholder.
struct InputOp {
  static constexpr bool is_input = true;
  std::string input_name;
  Shape shape;
  DType dtype = DType::f32;

  std::string_view name() const { return input_name; }
  const Shape& output_shape() const { return shape; }
  DType output_dtype() const { return dtype; }
};
static_assert(ExecutableOp<InputOp>);

/// Visits the op held by an op-set value.
template <OpSetType V, class F>
constexpr decltype(auto) visit_op(const V& op, F&& fn) {
  return std::visit(std::forward<F>(fn), op);
}

/// Name, output shape and dtype of whichever op an op-set value holds.
template <OpSetType V>
std::string_view name_of(const V& op) {
  return std::visit([](const auto& o) -> std::string_view { return o.name(); }, op);
}
template <OpSetType V>
const Shape& output_shape_of(const V& op) {
  return std::visit([](const auto& o) -> const Shape& { return o.output_shape(); }, op);
}
template <OpSetType V>
DType output_dtype_of(const V& op) {
  return std::visit([](const auto& o) { return o.output_dtype(); }, op);
}

}  // namespace teeny
