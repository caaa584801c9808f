// teeny.model:runtime_op — the concept every executable op satisfies, and its customization points.
//
// The seed's RuntimeOp trait had five required methods and many defaulted ones. Here the required
// ones are the concept; each defaulted one is a customization point object (CPO) of the same name
// that calls the op's member when it has one and otherwise gives the seed's default:
//
//   struct scale_op {                                   // a minimal runtime op
//     struct Args { TensorView<const float> x; TensorView<float> y; float factor;
//                   auto fields() const { return std::tie(x, y, factor); } };
//     float factor = 2;
//     std::size_t n_activation_inputs() const { return 1; }
//     std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const { return {};
//     } Result<Args> pack_args(const OpBindings& b) const;     // typed views from the bindings Dim3 block() const {
//     return {256}; } Dim3 grid(const ConcreteShape& out) const { return {ceil_div(out.numel(), 256)}; }
//   };
//   static_assert(RuntimeOp<scale_op>);
//   teeny::n_launches(scale_op{}) == 1;                     // defaulted: no member needed
export module teeny.model:runtime_op;
import teeny.std;
import teeny.core;
import :launch;
import :args;

export namespace teeny {

/// The runtime behaviour of an executable op: how many activations it reads, which parameter
/// buffers it needs, how its typed kernel arguments are packed from the plan's bindings, and its
/// launch geometry. Satisfied by every op of the standard op set and by user ops.
template <class Op>
concept RuntimeOp = std::copy_constructible<Op> && ArgPack<typename Op::Args> &&
                    requires(const Op& op, std::span<const ConcreteShape> input_shapes,
                             const ConcreteShape& output_shape, const OpBindings& bindings) {
                      /// Number of activation tensors taken from predecessor DAG nodes.
                      { op.n_activation_inputs() } -> std::convertible_to<std::size_t>;
                      /// Shapes of the parameter buffers for concrete shapes (allocated once, at load).
                      { op.param_shapes(input_shapes, output_shape) } -> std::same_as<std::vector<ConcreteShape>>;
                      /// The kernel's typed arguments from the bound tensors; a dtype mismatch is an error.
                      { op.pack_args(bindings) } -> std::same_as<Result<typename Op::Args>>;
                      /// Threads per block and blocks per grid (CUDA); the CPU backend may use them as tiling hints.
                      { op.block() } -> std::same_as<Dim3>;
                      { op.grid(output_shape) } -> std::same_as<Dim3>;
                    };

namespace runtime_detail {
// An optional member, when present, must have the documented form; these concepts say which.
template <class Op>
concept HasParamNames = requires(const Op& op) {
  { op.param_names() } -> std::convertible_to<std::span<const std::string_view>>;
};
template <class Op>
concept HasRowStride = requires(const Op& op, const ConcreteShape& s) {
  { op.forward_output_row_stride(s) } -> std::convertible_to<std::int64_t>;
};
template <class Op>
concept HasInitData = requires(const Op& op, std::size_t i) {
  { op.param_init_data(i) } -> std::same_as<std::optional<std::vector<std::byte>>>;
};
template <class Op>
concept HasConcreteOutput = requires(const Op& op, std::span<const ConcreteShape> in, const ConcreteShape& s) {
  { op.compute_concrete_output_shape(in, s) } -> std::same_as<ConcreteShape>;
};
template <class Op>
concept HasLaunches = requires(const Op& op) {
  { op.n_launches() } -> std::convertible_to<std::size_t>;
};
template <class Op>
concept HasPackForLaunch = requires(const Op& op, std::size_t i, const OpBindings& b) {
  { op.pack_args_for_launch(i, b) } -> std::same_as<Result<typename Op::Args>>;
};
template <class Op>
concept HasGridForLaunch =
    requires(const Op& op, std::size_t i, std::span<const ConcreteShape> in, const ConcreteShape& s) {
      { op.grid_for_launch(i, in, s) } -> std::same_as<Dim3>;
    };

template <class Op>
concept HasOutputAliasesInput = requires(const Op& op) {
  { op.output_may_alias_input() } -> std::convertible_to<bool>;
};

template <class Op>
concept HasParamDtype = requires(const Op& op, std::size_t i) {
  { op.param_dtype(i) } -> std::same_as<DType>;
};
template <class Op>
concept HasOutputDtype = requires(const Op& op) {
  { op.output_dtype() } -> std::same_as<DType>;
};

struct param_dtype_fn {
  template <RuntimeOp Op>
  constexpr DType operator()(const Op& op, std::size_t param_index) const {
    if constexpr (HasParamDtype<Op>) {
      return op.param_dtype(param_index);
    } else if constexpr (HasOutputDtype<Op>) {
      return op.output_dtype();
    } else {
      return DType::f32;
    }
  }
};
struct param_names_fn {
  template <RuntimeOp Op>
  constexpr std::span<const std::string_view> operator()(const Op& op) const {
    if constexpr (HasParamNames<Op>) {
      return op.param_names();
    } else {
      return {};
    }
  }
};
struct forward_output_row_stride_fn {
  template <RuntimeOp Op>
  constexpr std::int64_t operator()(const Op& op, const ConcreteShape& output_shape) const {
    if constexpr (HasRowStride<Op>) {
      return op.forward_output_row_stride(output_shape);
    } else {
      return output_shape.last();
    }
  }
};
struct param_init_data_fn {
  template <RuntimeOp Op>
  std::optional<std::vector<std::byte>> operator()(const Op& op, std::size_t param_index) const {
    if constexpr (HasInitData<Op>) {
      return op.param_init_data(param_index);
    } else {
      return std::nullopt;
    }
  }
};
struct compute_concrete_output_shape_fn {
  template <RuntimeOp Op>
  constexpr ConcreteShape operator()(const Op& op, std::span<const ConcreteShape> input_shapes,
                                     const ConcreteShape& resolved) const {
    if constexpr (HasConcreteOutput<Op>) {
      return op.compute_concrete_output_shape(input_shapes, resolved);
    } else {
      return resolved;
    }
  }
};
struct output_may_alias_input_fn {
  template <RuntimeOp Op>
  constexpr bool operator()(const Op& op) const {
    if constexpr (HasOutputAliasesInput<Op>) {
      return op.output_may_alias_input();
    } else {
      return false;
    }
  }
};
struct n_launches_fn {
  template <RuntimeOp Op>
  constexpr std::size_t operator()(const Op& op) const {
    if constexpr (HasLaunches<Op>) {
      return op.n_launches();
    } else {
      return 1;
    }
  }
};
struct pack_args_for_launch_fn {
  template <RuntimeOp Op>
  Result<typename Op::Args> operator()(const Op& op, std::size_t launch, const OpBindings& bindings) const {
    if constexpr (HasPackForLaunch<Op>) {
      return op.pack_args_for_launch(launch, bindings);
    } else {
      return op.pack_args(bindings);
    }
  }
};
struct grid_for_launch_fn {
  template <RuntimeOp Op>
  constexpr Dim3 operator()(const Op& op, std::size_t launch, std::span<const ConcreteShape> input_shapes,
                            const ConcreteShape& output_shape) const {
    if constexpr (HasGridForLaunch<Op>) {
      return op.grid_for_launch(launch, input_shapes, output_shape);
    } else {
      return op.grid(output_shape);
    }
  }
};
}  // namespace runtime_detail

/// Names of the parameter slots, in param_shapes order; the weight key is `{node}.{slot}`.
/// Default: none.
inline constexpr runtime_detail::param_names_fn param_names{};
/// Dtype of parameter slot `i` (a BatchNorm's num_batches_tracked is i64). Not in the seed, whose
/// parameters were all f32. Default: the op's output dtype.
inline constexpr runtime_detail::param_dtype_fn param_dtype{};
/// Row stride (elements) the output buffer must have. Default: the last dim.
inline constexpr runtime_detail::forward_output_row_stride_fn forward_output_row_stride{};
/// Bytes to fill parameter slot `i` with right after allocation. Default: none (zeros / loaded).
inline constexpr runtime_detail::param_init_data_fn param_init_data{};
/// The true concrete output shape from concrete inputs. Default: the bound symbolic shape.
inline constexpr runtime_detail::compute_concrete_output_shape_fn compute_concrete_output_shape{};
/// Whether the output may share its first input's memory (a reshape: the same elements in the
/// same order), where nothing else reads that input; the kernel then finds y.data == x.data.
/// Default: false.
inline constexpr runtime_detail::output_may_alias_input_fn output_may_alias_input{};
/// Sequential launches the op needs (e.g. a concat: one per input). Default: 1.
inline constexpr runtime_detail::n_launches_fn n_launches{};
/// Arguments of launch `i`. Default: pack_args.
inline constexpr runtime_detail::pack_args_for_launch_fn pack_args_for_launch{};
/// Grid of launch `i`. Default: grid(output_shape).
inline constexpr runtime_detail::grid_for_launch_fn grid_for_launch{};

/// Blocks needed to cover `n` items with `per_block` each: at least 1, and at most 2^31 - 1 (CUDA's
/// limit for grid x; past it a kernel's threads loop over the rest, grid-stride).
constexpr std::uint32_t ceil_div(std::int64_t n, std::int64_t per_block) {
  constexpr std::int64_t max_blocks = 0x7fffffff;
  const std::int64_t blocks = n / per_block + (n % per_block != 0 ? 1 : 0);
  return static_cast<std::uint32_t>(blocks < 1 ? 1 : (blocks > max_blocks ? max_blocks : blocks));
}

}  // namespace teeny
