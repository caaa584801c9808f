// teeny.model:args — typed kernel arguments and the visitors that pack them.
//
// An op declares its kernel's argument list as a struct with a `fields()` member returning a
// tuple of its members (count, order and types are then checked by the compiler). A backend
// visits the fields: the CUDA backend collects their addresses for a launch, a debugger prints
// them, and the CPU backend simply calls the kernel with the struct.
//
//   struct ReluArgs {
//     TensorView<const float> x;  TensorView<float> y;
//     auto fields() const { return std::tie(x, y); }
//   };
//   visit_args(args, [](const auto& field) { ... });   // x, then y
export module teeny.model:args;
import teeny.std;
import teeny.core;

export namespace teeny {

namespace args_detail {
template <class T>
concept TupleLike = requires { std::tuple_size<std::remove_cvref_t<T>>::value; };

template <class Args>
using fields_t = decltype(std::declval<const Args&>().fields());

template <class V, class Tuple, std::size_t... I>
constexpr bool visits_all(std::index_sequence<I...>) {
  return (std::invocable<V&, const std::remove_cvref_t<std::tuple_element_t<I, Tuple>>&> && ...);
}
}  // namespace args_detail

/// A kernel argument struct: trivially copyable (it may be copied to a GPU) and listing its
/// fields, in kernel-parameter order, through `fields()`.
template <class Args>
concept ArgPack = std::is_trivially_copyable_v<Args> && requires(const Args& args) {
  { args.fields() } -> args_detail::TupleLike;
};

/// A visitor that accepts every field of `Args`: `visitor(field)` for each, in order.
template <class Visitor, class Args>
concept ArgVisitor =
    ArgPack<Args> &&
    args_detail::visits_all<Visitor, std::remove_cvref_t<args_detail::fields_t<Args>>>(
        std::make_index_sequence<std::tuple_size_v<std::remove_cvref_t<args_detail::fields_t<Args>>>>{});

/// Calls `visitor(field)` for every field of `args`, in declaration order.
template <ArgPack Args, class Visitor>
  requires ArgVisitor<Visitor, Args>
constexpr void visit_args(const Args& args, Visitor&& visitor) {
  std::apply([&](const auto&... field) { (visitor(field), ...); }, args.fields());
}

/// Number of fields (kernel parameters) of an argument struct.
template <ArgPack Args>
inline constexpr std::size_t arg_count = std::tuple_size_v<std::remove_cvref_t<args_detail::fields_t<Args>>>;

}  // namespace teeny
