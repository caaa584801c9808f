// teeny.model:op_checks — an op set extended with the user's own ops, each checked where it is
// named, with a message per requirement it misses.
//
// The concepts (ExecutableOp, RuntimeOp, BackwardOp) decide; check_executable_op walks their
// requirements one at a time and stops at the first the op misses with a static_assert that says
// what to write, because a raw concept failure lists every alternative it tried:
//
//   using my_ops = extend_ops<standard_ops<float>, swiglu_op<float>>;   // standard ops + SwiGLU
//   // without grid(): "static assertion failed due to requirement 'always_false<swiglu_op<float>>':
//   //   a runtime op needs `Dim3 grid(const ConcreteShape& output) const`, blocks per grid of its
//   //   launch", note: "in instantiation of ... 'teeny::check_executable_op<swiglu_op<float>>'"
export module teeny.model:op_checks;
import teeny.std;
import teeny.core;
import :launch;
import :args;
import :runtime_op;
import :executable_op;
#if TEENY_TRAINING
import :backward_op;
#endif

export namespace teeny {

namespace op_checks_detail {
template <class>
inline constexpr bool always_false = false;

template <class Op>
concept HasArgs = requires { typename Op::Args; };
template <class Op>
concept PacksArgs = requires(const Op& op, const OpBindings& bindings) {
  { op.pack_args(bindings) } -> std::same_as<Result<typename Op::Args>>;
};
template <class Args>
concept ListsFields = requires(const Args& args) { args.fields(); };

#if TEENY_TRAINING
// The backward half, checked when the op declares BackwardArgs (an op without them has no
// backward, which a training load reports where a gradient would need one).
template <class Op>
consteval bool check_backward_op() {
  if constexpr (!requires { typename Op::BackwardArgs; }) {
    return true;
  } else if constexpr (!std::is_trivially_copyable_v<typename Op::BackwardArgs>) {
    static_assert(always_false<Op>,
                  "an op's BackwardArgs cannot be packed: they must be trivially copyable (TensorView and scalar "
                  "fields; no std::vector, std::string or other owning members)");
  } else if constexpr (!ListsFields<typename Op::BackwardArgs>) {
    static_assert(always_false<Op>,
                  "an op's BackwardArgs cannot be packed: they need `auto fields() const { return std::tie(...); }` "
                  "listing every field in kernel-parameter order");
  } else if constexpr (!requires(const Op& op, const BackwardBindings& b) {
                         { op.pack_backward_args(b) } -> std::same_as<Result<typename Op::BackwardArgs>>;
                       }) {
    static_assert(always_false<Op>,
                  "an op with BackwardArgs needs `Result<BackwardArgs> pack_backward_args(const BackwardBindings&) "
                  "const`, its backward kernel's arguments");
  } else if constexpr (!requires(const Op& op, std::span<const ConcreteShape> in, const ConcreteShape& out) {
                         { op.backward_grid(in, out) } -> std::same_as<Dim3>;
                       }) {
    static_assert(always_false<Op>,
                  "an op with BackwardArgs needs `Dim3 backward_grid(std::span<const ConcreteShape> inputs, const "
                  "ConcreteShape& output) const`, its backward launch geometry");
  } else {
    static_assert(BackwardOp<Op>);
  }
  return true;
}
#endif
}  // namespace op_checks_detail

/// Checks `Op` against ExecutableOp (and, in training builds, BackwardOp when it declares
/// BackwardArgs) one requirement at a time; stops at the first it misses with a static_assert
/// saying what to write. The note under it ("in instantiation of ... check_executable_op<X>")
/// names the op. True when Op is an executable op.
template <class Op>
consteval bool check_executable_op() {
  using namespace op_checks_detail;
  if constexpr (!requires(const Op& op) {
                  { op.name() } -> std::convertible_to<std::string_view>;
                }) {
    static_assert(always_false<Op>, "an executable op needs `std::string_view name() const`, its name in the DAG");
  } else if constexpr (!requires(const Op& op) {
                         { op.output_shape() } -> std::convertible_to<const Shape&>;
                         { op.output_dtype() } -> std::same_as<DType>;
                       }) {
    static_assert(always_false<Op>,
                  "an executable op needs `const Shape& output_shape() const` and `DType output_dtype() const`");
  } else if constexpr (InputOpType<Op>) {
    static_assert(ExecutableOp<Op>);
  } else if constexpr (!HasArgs<Op>) {
    static_assert(always_false<Op>,
                  "an executable op needs `using Args = ...;`, the struct of its kernel's typed arguments");
  } else if constexpr (!std::is_trivially_copyable_v<typename Op::Args>) {
    static_assert(always_false<Op>,
                  "an op's Args cannot be packed: they must be trivially copyable, since a backend copies them into "
                  "a kernel launch (TensorView and scalar fields; no std::vector, std::string or other owning "
                  "members)");
  } else if constexpr (!ListsFields<typename Op::Args>) {
    static_assert(always_false<Op>,
                  "an op's Args cannot be packed: they need `auto fields() const { return std::tie(...); }` listing "
                  "every field in kernel-parameter order");
  } else if constexpr (!ArgPack<typename Op::Args>) {
    static_assert(always_false<Op>, "an op's Args::fields() must return a tuple (std::tie of the fields)");
  } else if constexpr (!requires(const Op& op) {
                         { op.n_activation_inputs() } -> std::convertible_to<std::size_t>;
                       }) {
    static_assert(always_false<Op>,
                  "a runtime op needs `std::size_t n_activation_inputs() const`, how many DAG inputs it reads");
  } else if constexpr (!requires(const Op& op, std::span<const ConcreteShape> in, const ConcreteShape& out) {
                         { op.param_shapes(in, out) } -> std::same_as<std::vector<ConcreteShape>>;
                       }) {
    static_assert(always_false<Op>,
                  "a runtime op needs `std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape> "
                  "inputs, const ConcreteShape& output) const` (empty for no parameters)");
  } else if constexpr (!PacksArgs<Op>) {
    static_assert(always_false<Op>,
                  "a runtime op needs `Result<Args> pack_args(const OpBindings&) const`, its kernel's arguments from "
                  "the bound tensors");
  } else if constexpr (!requires(const Op& op) {
                         { op.block() } -> std::same_as<Dim3>;
                       }) {
    static_assert(always_false<Op>, "a runtime op needs `Dim3 block() const`, threads per block of its launch");
  } else if constexpr (!requires(const Op& op, const ConcreteShape& out) {
                         { op.grid(out) } -> std::same_as<Dim3>;
                       }) {
    static_assert(always_false<Op>,
                  "a runtime op needs `Dim3 grid(const ConcreteShape& output) const`, blocks per grid of its launch");
  } else if constexpr (!requires(const Op& op) {
                         { op.kernel() } -> std::same_as<KernelInstance>;
                       }) {
    static_assert(always_false<Op>,
                  "an executable op needs `KernelInstance kernel() const`, the names of its forward (and backward) "
                  "kernels");
  } else if constexpr (requires { &Op::param_names; } && !runtime_detail::HasParamNames<Op>) {
    static_assert(always_false<Op>,
                  "an op's param_names must be `std::span<const std::string_view> param_names() const`, one slot "
                  "name per param_shapes entry");
  } else {
    static_assert(ExecutableOp<Op> && RuntimeOp<Op>);
#if TEENY_TRAINING
    static_assert(check_backward_op<Op>());
#endif
  }
  return ExecutableOp<Op>;
}

/// A backend `B` prepares op `Op`'s kernel told where it will run (prepare_kernel(op, args,
/// backend, site), site a LaunchSite), rather than from the arguments alone.
template <class B, class Op>
concept PreparesAtSite = requires(B& backend, const Op& op, const typename Op::Args& args, const LaunchSite& site) {
  prepare_kernel(op, args, backend, site);
};

/// Prepares `op`'s kernel on `backend`, in whichever of the two forms the backend declares.
template <class B, class Op>
  requires PreparesAtSite<B, Op> ||
           requires(B& backend, const Op& op, const typename Op::Args& args) { prepare_kernel(op, args, backend); }
auto prepare_kernel_at(const Op& op, const typename Op::Args& args, B& backend, const LaunchSite& site) {
  if constexpr (PreparesAtSite<B, Op>) {
    return prepare_kernel(op, args, backend, site);
  } else {
    return prepare_kernel(op, args, backend);
  }
}

/// A backend `B` runs op `Op`: prepare_kernel(op, args, backend) -> Result<State> once per plan
/// (after weights change too), or prepare_kernel(op, args, backend, site) with the LaunchSite,
/// then run_kernel(op, args, state, backend) per forward.
template <class B, class Op>
concept KernelFor =
    RuntimeOp<Op> && requires(B& backend, const Op& op, const typename Op::Args& args, const LaunchSite& site) {
      requires is_result_v<std::remove_cvref_t<decltype(prepare_kernel_at(op, args, backend, site))>>;
      requires requires(
          typename std::remove_cvref_t<decltype(prepare_kernel_at(op, args, backend, site))>::value_type& state) {
        run_kernel(op, args, state, backend);
      };
    };

/// Whether backend B runs Op (an input op needs no kernel), with a message saying what is
/// missing when it does not; the note under it ("in instantiation of ...
/// check_kernel<teeny::CpuContext, user::swiglu_op<float>>") names the backend and the op.
template <class B, class Op>
consteval bool check_kernel() {
  using op_checks_detail::always_false;
  if constexpr (!InputOpType<Op> && !KernelFor<B, Op>) {
    static_assert(always_false<Op>,
                  "an op of the op set has no kernel for this backend: declare `Result<State> prepare_kernel(const "
                  "Op&, const Op::Args&, Backend&)` and `void run_kernel(const Op&, const Op::Args&, State&, "
                  "Backend&)` in the op's namespace");
  }
  return true;
}

#if TEENY_TRAINING
/// Prepares `op`'s backward kernel on `backend`: prepare_backward_kernel(op, args, backend, site)
/// where the backend wants the LaunchSite (node, backward geometry), else without it.
template <class B, class Op>
  requires requires(B& backend, const Op& op, const typename Op::BackwardArgs& args, const LaunchSite& site) {
    prepare_backward_kernel(op, args, backend, site);
  } || requires(B& backend, const Op& op, const typename Op::BackwardArgs& args) {
    prepare_backward_kernel(op, args, backend);
  }
auto prepare_backward_kernel_at(const Op& op, const typename Op::BackwardArgs& args, B& backend,
                                const LaunchSite& site) {
  if constexpr (requires { prepare_backward_kernel(op, args, backend, site); }) {
    return prepare_backward_kernel(op, args, backend, site);
  } else {
    return prepare_backward_kernel(op, args, backend);
  }
}

/// A backend `B` runs op `Op`'s backward: prepare_backward_kernel(op, args, backend[, site]) ->
/// Result<State> once per plan, then run_backward_kernel(op, args, state, backend) per backward.
template <class B, class Op>
concept BackwardKernelFor = BackwardOp<Op> && requires(B& backend, const Op& op, const typename Op::BackwardArgs& args,
                                                       const LaunchSite& site) {
  requires is_result_v<std::remove_cvref_t<decltype(prepare_backward_kernel_at(op, args, backend, site))>>;
  requires requires(
      typename std::remove_cvref_t<decltype(prepare_backward_kernel_at(op, args, backend, site))>::value_type& state) {
    run_backward_kernel(op, args, state, backend);
  };
};

/// Whether backend B runs the backward of Op where Op has one (declares BackwardArgs), with a
/// message when it does not. A backward kernel missing, or declared with other parameters, is this
/// error, not an op without a gradient; the note under it ("in instantiation of ...
/// check_backward_kernel<teeny::CpuContext, user::swiglu_op<float>>") names the backend and the op.
template <class B, class Op>
consteval bool check_backward_kernel() {
  using op_checks_detail::always_false;
  if constexpr (BackwardOp<Op> && !BackwardKernelFor<B, Op>) {
    static_assert(always_false<Op>,
                  "an op with BackwardArgs has no backward kernel for this backend, or one with other parameters: "
                  "declare `Result<State> prepare_backward_kernel(const Op&, const Op::BackwardArgs&, Backend&)` and "
                  "`void run_backward_kernel(const Op&, const Op::BackwardArgs&, State&, Backend&)` in the op's "
                  "namespace");
  }
  return true;
}
#endif

namespace op_checks_detail {
template <class B, class... Ops>
consteval bool check_op_set(std::type_identity<std::variant<Ops...>>) {
  bool ok = (check_kernel<B, Ops>() && ...);
#if TEENY_TRAINING
  // A backend with a backward kernel for any op trains: it needs the backward of every op that
  // has one. (A backend with none, e.g. one for inference only, is not asked for them.)
  if constexpr ((BackwardKernelFor<B, Ops> || ...)) ok = ok && (check_backward_kernel<B, Ops>() && ...);
#endif
  return ok;
}
}  // namespace op_checks_detail

/// Whether backend B runs every op of the op set Set and, in training builds where B runs any
/// backward, the backward of every op that has one: check_kernel and check_backward_kernel folded
/// over the set, so a miss names its op.
template <class B, class Set>
inline constexpr bool runs_op_set = op_checks_detail::check_op_set<B>(std::type_identity<Set>{});

namespace op_checks_detail {
template <class Op, class Set>
inline constexpr bool in_set = false;
template <class Op, class... Ops>
inline constexpr bool in_set<Op, std::variant<Ops...>> = (std::same_as<Op, Ops> || ...);

template <class Base, class... Extra>
struct extend;
template <class... Ops, class... Extra>
struct extend<std::variant<Ops...>, Extra...> {
  // Every op is checked (each failure is one static_assert in check_executable_op); on failure
  // the set stays the base one, so that no error follows from the broken op's alternative.
  static constexpr bool valid = (check_executable_op<Extra>() && ...);
  static_assert((!in_set<Extra, std::variant<Ops...>> && ...), "extend_ops: an op is already in the op set");
  using type = std::conditional_t<valid, std::variant<Ops..., Extra...>, std::variant<Ops...>>;
};
}  // namespace op_checks_detail

/// The op set `Base` with the ops `Extra...` after its own (each checked: check_executable_op):
/// extend_ops<standard_ops<float>, swiglu_op<float>>. A lowering for it can be the standard one
/// with a middleware for the new ops (see standard_lowering).
template <OpSetType Base, class... Extra>
using extend_ops = typename op_checks_detail::extend<Base, Extra...>::type;

/// Whether every op of `Sub` is in `Set` (a lowering for `Sub` can emit into `Set`).
template <class Set, class Sub>
inline constexpr bool contains_ops = false;
template <class Set, class... Ops>
inline constexpr bool contains_ops<Set, std::variant<Ops...>> = (op_checks_detail::in_set<Ops, Set> && ...);

}  // namespace teeny
