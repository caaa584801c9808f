// teeny.cuda:launch — the seed's launch path, for real: an op's typed Args, visited field by field
// (an ArgVisitor), packed into its kernel's parameter buffer and launched with the op's own
// geometry (block, grid, n_launches, grid_for_launch) at its per-dtype entry point.
//
//   auto status = teeny::cuda::launch(op, bindings, "relu1");   // bindings hold device pointers
//
// Which kernel parameters an op's Args become is checked by the compiler on both sides: here
// (`PacksInto`), and in kernels/cuda/*.cu against the kernel's declaration (`takes_params`), both
// against the one list in kernels/cuda/params.hpp.
module;
#include "cuda/params.hpp"
#include "cuda/runtime.hpp"
export module teeny.cuda:launch;
import teeny.std;
import teeny.core;
import teeny.model;
import teeny.ops;
import :device;

export namespace teeny::cuda {

static_assert(cuda_kernels::max_rank == static_cast<int>(max_rank), "kernels/cuda/params.hpp's max_rank is teeny's");

/// A TensorView as a kernel parameter: the pointer, then its dims' sizes and strides.
template <class T>
cuda_kernels::DeviceTensor<T> to_device(const TensorView<T>& view) {
  cuda_kernels::DeviceTensor<T> t{view.data, {}, {}, static_cast<std::int32_t>(view.shape.rank())};
  for (std::size_t d = 0; d < view.shape.rank(); ++d) {
    t.shape[d] = view.shape[d];
    t.strides[d] = view.strides[d];
  }
  return t;
}

/// Fields passed to a kernel as they are: numbers, enums, and the plain structs kernels/math
/// defines for both compilers.
template <class F>
concept KernelScalar =
    std::is_arithmetic_v<F> || (std::is_enum_v<F> && !std::same_as<F, DType>) || std::is_pointer_v<F> ||
    std::same_as<F, f16> || std::same_as<F, bf16> || std::same_as<F, math::UnaryParams> ||
    std::same_as<F, math::Epilogue> || std::same_as<F, math::Window2d> ||
    std::same_as<F, std::array<std::int64_t, cuda_kernels::max_rank>>;

template <KernelScalar F>
F to_device(const F& field) {
  return field;
}

/// A dtype chosen at run time (a cast's, an embedding's indices'), as the kernels number them.
inline cuda_kernels::DTypeCode to_device(DType dtype) { return static_cast<cuda_kernels::DTypeCode>(dtype); }
static_assert(
    [] {
      using cuda_kernels::DTypeCode;
      const std::pair<DType, DTypeCode> same[] = {
          {DType::boolean, DTypeCode::boolean}, {DType::i8, DTypeCode::i8},     {DType::i16, DTypeCode::i16},
          {DType::i32, DTypeCode::i32},         {DType::i64, DTypeCode::i64},   {DType::u8, DTypeCode::u8},
          {DType::u16, DTypeCode::u16},         {DType::u32, DTypeCode::u32},   {DType::u64, DTypeCode::u64},
          {DType::f16, DTypeCode::f16},         {DType::bf16, DTypeCode::bf16}, {DType::f32, DTypeCode::f32},
          {DType::f64, DTypeCode::f64}};
      for (const auto& [dtype, code] : same) {
        if (static_cast<int>(dtype) != static_cast<int>(code)) return false;
      }
      return std::size(same) == all_dtypes.size();
    }(),
    "kernels/cuda/params.hpp's DTypeCode numbers every DType as teeny.core does");

/// The kernel parameter an Args field becomes.
template <class F>
using device_param_t = decltype(to_device(std::declval<const F&>()));

namespace launch_detail {
// A field as kernel parameters: itself, or the fields of an argument struct it holds (a backward's
// arguments start with its forward's), flattened in order.
template <class F>
auto flatten_field(const F& field) {
  if constexpr (ArgPack<F>) {
    return std::apply([](const auto&... f) { return std::tuple_cat(flatten_field(f)...); }, field.fields());
  } else {
    return std::tie(field);
  }
}
}  // namespace launch_detail

/// `args`' fields in kernel-parameter order, those of nested argument structs spliced in.
template <ArgPack Args>
auto flat_fields(const Args& args) {
  return launch_detail::flatten_field(args);
}

namespace launch_detail {
template <class Args>
using flat_fields_t = std::remove_cvref_t<decltype(flat_fields(std::declval<const Args&>()))>;

template <class Args, class List, std::size_t... I>
constexpr bool fields_become(std::index_sequence<I...> /*unused*/) {
  return (std::same_as<device_param_t<std::remove_cvref_t<std::tuple_element_t<I, flat_fields_t<Args>>>>,
                       typename List::template type<I>> &&
          ...);
}
}  // namespace launch_detail

/// Parameters of `List` that the op's arguments fill: all, but a trailing phase (the context's).
template <class List>
inline constexpr std::size_t args_params = List::count - (cuda_kernels::reads_phase<List> ? 1 : 0);

/// `Args`' fields (nested argument structs flattened) become exactly the parameters of `List`
/// (kernels/cuda/params.hpp), in order, but the phase a list may end with.
template <class Args, class List>
concept PacksInto = ArgPack<Args> && std::tuple_size_v<launch_detail::flat_fields_t<Args>> == args_params<List> &&
                    launch_detail::fields_become<Args, List>(std::make_index_sequence<args_params<List>>{});

/// A kernel's packed parameter buffer (each parameter at its offset in `List`) and the pointers to
/// each parameter that cudaLaunchKernel takes.
template <class List>
class PackedParams {
  static_assert(List::bytes <= cuda_kernels::max_param_bytes, "a kernel's parameters exceed CUDA's 4 KiB");

 public:
  std::span<const std::byte> bytes() const { return buffer_; }
  /// Pointers to each parameter in the buffer, valid while this object lives where it is.
  std::array<void*, List::count> pointers() {
    std::array<void*, List::count> out{};
    for (std::size_t i = 0; i < List::count; ++i) out[i] = buffer_.data() + List::offsets[i];
    return out;
  }

  template <class L, class Args>
    requires PacksInto<Args, L>
  friend PackedParams<L> pack_params(const Args& args, const cuda_kernels::DevicePhase* phase);
  template <class L, class... P>
  friend PackedParams<L> pack_values(const P&... values);

 private:
  alignas(List::alignment) std::array<std::byte, List::bytes> buffer_{};
};

/// Packs `args` into `List`'s parameter buffer, visiting its fields in order; a list that reads the
/// phase gets `phase` (device memory; null: the eval phase) last.
template <class List, class Args>
  requires PacksInto<Args, List>
PackedParams<List> pack_params(const Args& args, const cuda_kernels::DevicePhase* phase) {
  PackedParams<List> packed;
  std::size_t index = 0;
  const auto put = [&](const auto& param) {
    std::memcpy(packed.buffer_.data() + List::offsets[index], &param, sizeof param);
    ++index;
  };
  // The seed's ArgVisitor, field by field; an argument struct nested in the arguments (a
  // backward's forward arguments) is visited in its place.
  const auto visit = [&](const auto& self, const auto& field) -> void {
    if constexpr (ArgPack<std::remove_cvref_t<decltype(field)>>) {
      visit_args(field, [&](const auto& inner) { self(self, inner); });
    } else {
      put(to_device(field));
    }
  };
  visit_args(args, [&](const auto& field) { visit(visit, field); });
  if constexpr (cuda_kernels::reads_phase<List>) put(phase);
  return packed;
}
template <class List, class Args>
  requires PacksInto<Args, List>
PackedParams<List> pack_params(const Args& args) {
  return pack_params<List>(args, nullptr);
}

/// Packs `values` into `List`'s parameter buffer as they are: one per parameter, each of the
/// list's type for it, in order (a kernel no op names, launched with values teeny computes).
template <class List, class... P>
PackedParams<List> pack_values(const P&... values) {
  static_assert(sizeof...(P) == List::count, "one value per kernel parameter");
  static_assert(
      []<std::size_t... I>(std::index_sequence<I...>) {
        return (std::is_same_v<P, typename List::template type<I>> && ...);
      }(std::make_index_sequence<sizeof...(P)>{}),
      "the values have the kernel's parameter types, in order");
  PackedParams<List> packed;
  std::size_t index = 0;
  ((std::memcpy(packed.buffer_.data() + List::offsets[index++], &values, sizeof values)), ...);
  return packed;
}

/// The CUDA kernel parameter lists of an op, forward (`type`) and backward (`backward`, launched
/// in training builds); specialised for each op that has CUDA kernels. An op without them cannot
/// be launched: `launch` does not compile for it.
template <class Op>
struct KernelParams;
template <FloatElement T>
struct KernelParams<unary_op<T>> {
  using type = cuda_kernels::UnaryParamList<T>;
  using backward = cuda_kernels::UnaryBackwardParamList<T>;
};
template <FloatElement T>
struct KernelParams<binary_op<T>> {
  using type = cuda_kernels::BinaryParamList<T>;
  using backward = cuda_kernels::BinaryBackwardParamList<T>;
};
template <FloatElement T>
struct KernelParams<dropout_op<T>> {
  using type = cuda_kernels::DropoutParamList<T>;
  using backward = cuda_kernels::DropoutBackwardParamList<T>;
};
template <FloatElement T>
struct KernelParams<linear_op<T>> {
  using type = cuda_kernels::LinearParamList<T>;
  using backward = cuda_kernels::LinearBackwardParamList<T>;
};
template <FloatElement T>
struct KernelParams<matmul_op<T>> {
  using type = cuda_kernels::MatMulParamList<T>;
  using backward = cuda_kernels::MatMulBackwardParamList<T>;
};
template <FloatElement T>
struct KernelParams<conv_op<T>> {
  using type = cuda_kernels::ConvParamList<T>;
  using backward = cuda_kernels::ConvBackwardParamList<T>;
};
template <FloatElement T>
struct KernelParams<reshape_op<T>> {
  using type = cuda_kernels::CopyParamList<T>;
  using backward = cuda_kernels::CopyBackwardParamList<T>;
};
template <FloatElement T>
struct KernelParams<weight_op<T>> {
  using type = cuda_kernels::StridedCopyParamList<T>;
  using backward = cuda_kernels::StridedAddParamList<T>;
};
template <FloatElement T>
struct KernelParams<permute_op<T>> {
  using type = cuda_kernels::StridedCopyParamList<T>;
  using backward = cuda_kernels::StridedAddParamList<T>;
};
template <FloatElement T>
struct KernelParams<slice_op<T>> {
  using type = cuda_kernels::StridedCopyParamList<T>;
  using backward = cuda_kernels::StridedAddParamList<T>;
};
template <FloatElement T>
struct KernelParams<concat_op<T>> {
  using type = cuda_kernels::StridedCopyParamList<T>;
  using backward = cuda_kernels::StridedAddParamList<T>;
};
template <FloatElement T>
struct KernelParams<pad_op<T>> {
  using type = cuda_kernels::PadParamList<T>;
  using backward = cuda_kernels::PadBackwardParamList<T>;
};
template <FloatElement T>
struct KernelParams<upsample_op<T>> {
  using type = cuda_kernels::UpsampleParamList<T>;
  using backward = cuda_kernels::UpsampleBackwardParamList<T>;
};
template <FloatElement T>
struct KernelParams<cast_op<T>> {
  using type = cuda_kernels::CastParamList;
  using backward = cuda_kernels::CastBackwardParamList;
};
template <FloatElement T>
struct KernelParams<max_pool2d_op<T>> {
  using type = cuda_kernels::Pool2dParamList<T>;
  using backward = cuda_kernels::Pool2dBackwardParamList<T>;
};
template <FloatElement T>
struct KernelParams<avg_pool2d_op<T>> {
  using type = cuda_kernels::Pool2dParamList<T>;
  using backward = cuda_kernels::Pool2dBackwardParamList<T>;
};
template <FloatElement T>
struct KernelParams<adaptive_avg_pool2d_op<T>> {
  using type = cuda_kernels::Pool2dParamList<T>;
  using backward = cuda_kernels::Pool2dBackwardParamList<T>;
};
template <FloatElement T>
struct KernelParams<batch_norm_op<T>> {
  using type = cuda_kernels::BatchNormParamList<T>;
  using backward = cuda_kernels::BatchNormBackwardParamList<T>;
};
template <FloatElement T>
struct KernelParams<layer_norm_op<T>> {
  using type = cuda_kernels::RowNormParamList<T>;
  using backward = cuda_kernels::RowNormBackwardParamList<T>;
};
template <FloatElement T>
struct KernelParams<rms_norm_op<T>> {
  using type = cuda_kernels::RowNormParamList<T>;
  using backward = cuda_kernels::RowNormBackwardParamList<T>;
};
template <FloatElement T>
struct KernelParams<group_norm_op<T>> {
  using type = cuda_kernels::GroupNormParamList<T>;
  using backward = cuda_kernels::GroupNormBackwardParamList<T>;
};
template <FloatElement T>
struct KernelParams<softmax_op<T>> {
  using type = cuda_kernels::SoftmaxParamList<T>;
  using backward = cuda_kernels::SoftmaxBackwardParamList<T>;
};
template <FloatElement T>
struct KernelParams<reduce_op<T>> {
  using type = cuda_kernels::ReduceParamList<T>;
  using backward = cuda_kernels::ReduceBackwardParamList<T>;
};
template <FloatElement T>
struct KernelParams<compare_op<T>> {
  using type = cuda_kernels::CompareParamList<T>;
};
template <FloatElement T>
struct KernelParams<where_op<T>> {
  using type = cuda_kernels::WhereParamList<T>;
};
template <FloatElement T>
struct KernelParams<cumsum_op<T>> {
  using type = cuda_kernels::AxisLinesParamList<T>;
  using backward = cuda_kernels::AxisLinesBackwardParamList<T>;
};
template <FloatElement T>
struct KernelParams<hardmax_op<T>> {
  using type = cuda_kernels::AxisLinesParamList<T>;
};
template <FloatElement T>
struct KernelParams<arg_reduce_op<T>> {
  using type = cuda_kernels::ArgReduceParamList<T>;
};
template <FloatElement T>
struct KernelParams<nll_loss_op<T>> {
  using type = cuda_kernels::NllLossParamList<T>;
  using backward = cuda_kernels::NllLossBackwardParamList<T>;
};
template <FloatElement T>
struct KernelParams<embedding_op<T>> {
  using type = cuda_kernels::EmbeddingParamList<T>;
  using backward = cuda_kernels::EmbeddingBackwardParamList<T>;
};
template <FloatElement T>
struct KernelParams<attention_op<T>> {
  using type = cuda_kernels::AttentionParamList<T>;
  using backward = cuda_kernels::AttentionBackwardParamList<T>;
};

/// An op the CUDA backend can launch: its Args pack into its kernel's parameters.
template <class Op>
concept CudaOp = RuntimeOp<Op> && ExecutableOp<Op> && requires { typename KernelParams<Op>::type; } &&
                 PacksInto<typename Op::Args, typename KernelParams<Op>::type>;

#if TEENY_TRAINING
/// An op whose backward the CUDA backend can launch: its BackwardArgs pack into its backward kernel's
/// parameters.
template <class Op>
concept CudaBackwardOp = CudaOp<Op> && BackwardOp<Op> && requires { typename KernelParams<Op>::backward; } &&
                         PacksInto<typename Op::BackwardArgs, typename KernelParams<Op>::backward>;
#endif

/// Whether the CUDA backend can launch Op and, in training builds, Op's backward where it has one
/// (the input placeholder launches nothing), with a message saying what is missing; the note
/// under it ("in instantiation of ... check_cuda_kernels<teeny::linear_op<teeny::bf16>>") names
/// the op and its dtype.
template <class Op>
consteval bool check_cuda_kernels() {
  using op_checks_detail::always_false;
  if constexpr (InputOpType<Op>) {
    return true;
  } else if constexpr (!requires { typename KernelParams<Op>::type; }) {
    static_assert(always_false<Op>,
                  "an op has no CUDA kernel: specialize KernelParams<Op> (modules/cuda/launch.cppm) with `using type "
                  "=` its kernel's parameter list (kernels/cuda/params.hpp), and give the kernel an entry point per "
                  "dtype in kernels/cuda/*.cu");
  } else if constexpr (!CudaOp<Op>) {
    static_assert(always_false<Op>,
                  "an op's Args do not pack into its CUDA kernel's parameter list (KernelParams<Op>::type, "
                  "kernels/cuda/params.hpp): the fields of Args must match the list in count, order and type");
#if TEENY_TRAINING
  } else if constexpr (BackwardOp<Op> && !requires { typename KernelParams<Op>::backward; }) {
    static_assert(always_false<Op>,
                  "an op with BackwardArgs has no CUDA backward kernel: add `using backward =` its backward "
                  "kernel's parameter list (kernels/cuda/params.hpp) to KernelParams<Op>, and the kernel's entry "
                  "points in kernels/cuda/*.cu");
  } else if constexpr (BackwardOp<Op> && !CudaBackwardOp<Op>) {
    static_assert(always_false<Op>,
                  "an op's BackwardArgs do not pack into its CUDA backward kernel's parameter list "
                  "(KernelParams<Op>::backward): the fields must match the list in count, order and type");
#endif
  }
  return true;
}

/// Whether the CUDA backend launches every op of the op set Set: check_cuda_kernels folded over it.
template <class Set>
inline constexpr bool cuda_runs_op_set = false;
template <class... Ops>
inline constexpr bool cuda_runs_op_set<std::variant<Ops...>> = (check_cuda_kernels<Ops>() && ...);
static_assert(cuda_runs_op_set<standard_ops<float>> && cuda_runs_op_set<standard_ops<double>> &&
                  cuda_runs_op_set<standard_ops<f16>> && cuda_runs_op_set<standard_ops<bf16>>,
              "every op of the standard op set has CUDA kernels in every dtype");

/// Whether CUDA can launch `grid` blocks of `block` threads: at least one of each, at most 1024
/// threads a block (x, y <= 1024, z <= 64), grid y and z <= 65535 and x < 2^31.
inline Result<void> check_geometry(const Dim3& grid, const Dim3& block) {
  const bool block_fits =
      block.volume() >= 1 && block.volume() <= 1024 && block.x <= 1024 && block.y <= 1024 && block.z <= 64;
  const bool grid_fits = grid.volume() >= 1 && grid.x <= 0x7fffffffu && grid.y <= 65535 && grid.z <= 65535;
  if (block_fits && grid_fits) return ok();
  return fail(Errc::out_of_range, "grid ", to_string(grid), " of blocks ", to_string(block),
              " is outside CUDA's limits (1 to 1024 threads a block, z <= 64; grid x < 2^31, y and z <= 65535)");
}

/// One launch of an op, made ready once: its entry point, geometry (checked against CUDA's
/// limits) and packed parameters, and what to name in an error. run_launch only launches it.
template <class List>
struct PreparedLaunch {
  const void* entry = nullptr;
  Dim3 grid;
  Dim3 block;
  PackedParams<List> params;
  std::string where;  // "launch 0 of kernel teeny_unary_f32 (node 'relu1', op unary, dtype f32)"
};

namespace launch_detail {
template <class List, class Op, class Args>
Result<PreparedLaunch<List>> prepare(const Op& op, std::string_view entry_point, const Args& args,
                                     const LaunchSite& site, const cuda_kernels::DevicePhase* phase) {
  PreparedLaunch<List> prepared;
  prepared.where = cat("launch ", site.launch, " of kernel ", entry_point, " (node '", site.node, "', op ", op.name(),
                       ", dtype ", name(op.output_dtype()), ")");
#if TEENY_HAS_CUDA
  prepared.entry = cuda_kernels::find_kernel(std::string(entry_point).c_str());
  if (prepared.entry == nullptr) return fail(Errc::not_found, "no CUDA kernel is compiled in for ", prepared.where);
  if (auto fits = check_geometry(site.grid, site.block); !fits) return std::move(fits).error().context(prepared.where);
  prepared.grid = site.grid;
  prepared.block = site.block;
  prepared.params = pack_params<List>(args, phase);
  return prepared;
#else
  (void)args;
  (void)phase;
  return not_compiled_in(prepared.where);
#endif
}
}  // namespace launch_detail

/// Prepares launch `site.launch` of `op` with its packed `args` at `site` (node, geometry); a kernel
/// that reads the phase reads it at `phase` (device memory; null: the eval phase).
template <CudaOp Op>
Result<PreparedLaunch<typename KernelParams<Op>::type>> prepare_launch(
    const Op& op, const typename Op::Args& args, const LaunchSite& site,
    const cuda_kernels::DevicePhase* phase = nullptr) {
  return launch_detail::prepare<typename KernelParams<Op>::type>(op, op.kernel().forward.entry_point, args, site,
                                                                 phase);
}

#if TEENY_TRAINING
/// Prepares backward launch `site.launch` of `op` (site: the backward geometry) with `args`.
template <CudaBackwardOp Op>
Result<PreparedLaunch<typename KernelParams<Op>::backward>> prepare_backward_launch(
    const Op& op, const typename Op::BackwardArgs& args, const LaunchSite& site,
    const cuda_kernels::DevicePhase* phase = nullptr) {
  const std::optional<KernelRef> kernel = op.kernel().backward;
  if (!kernel) return fail(Errc::internal, "op ", op.name(), " has a backward but its kernel() names none");
  return launch_detail::prepare<typename KernelParams<Op>::backward>(op, kernel->entry_point, args, site, phase);
}
#endif

/// Launches a prepared launch on `stream` (nullptr: the default stream). A kernel's own failure
/// surfaces at the next synchronize.
template <class List>
Result<void> run_launch(PreparedLaunch<List>& prepared, void* stream) {
#if TEENY_HAS_CUDA
  auto params = prepared.params.pointers();
  const Dim3 grid = prepared.grid;
  const Dim3 block = prepared.block;
  if (const int code = cuda_kernels::launch_kernel(prepared.entry, {grid.x, grid.y, grid.z},
                                                   {block.x, block.y, block.z}, params.data(), 0, stream)) {
    return cuda_error(code, cat(prepared.where, " with grid ", to_string(grid), " and block ", to_string(block)));
  }
  return ok();
#else
  (void)stream;
  return not_compiled_in(prepared.where);
#endif
}

/// A kernel no op names, which teeny launches itself (the device optimizers' and losses'): its
/// entry point, looked up once, and its name for errors.
struct KernelEntry {
  const void* entry = nullptr;
  std::string name;  // "teeny_adam_bf16"
};

/// `family`'s entry point for T ("adam" -> teeny_adam_bf16), or why there is none.
template <class T>
Result<KernelEntry> find_kernel_entry(std::string_view family) {
  KernelEntry kernel{nullptr, cat("teeny_", family, "_", name(dtype_of<T>))};
#if TEENY_HAS_CUDA
  kernel.entry = cuda_kernels::find_kernel(kernel.name.c_str());
  if (kernel.entry == nullptr) return fail(Errc::not_found, "no CUDA kernel ", kernel.name, " is compiled in");
  return kernel;
#else
  return not_compiled_in(cat("finding CUDA kernel ", kernel.name));
#endif
}

/// Threads a block in launch_values.
inline constexpr std::uint32_t value_launch_threads = 256;

/// The blocks of value_launch_threads that cover n elements, at most `cap` (the kernels stride
/// over the rest).
inline std::uint32_t element_blocks(std::int64_t n, std::int64_t cap) {
  constexpr std::int64_t threads = value_launch_threads;
  return static_cast<std::uint32_t>(std::clamp<std::int64_t>((n + threads - 1) / threads, 1, cap));
}

/// Launches `kernel` as `blocks` blocks of value_launch_threads threads with `values` packed as
/// `List` lays them out (pack_values), on `stream`; `what` says what the launch covers, for an
/// error.
template <class List, class... P>
Result<void> launch_values(const KernelEntry& kernel, std::uint32_t blocks, std::string_view what, void* stream,
                           const P&... values) {
  auto packed = pack_values<List>(values...);
#if TEENY_HAS_CUDA
  auto params = packed.pointers();
  if (const int code = cuda_kernels::launch_kernel(kernel.entry, {blocks, 1, 1}, {value_launch_threads, 1, 1},
                                                   params.data(), 0, stream)) {
    return cuda_error(code, cat("launching ", kernel.name, " over ", what));
  }
  return ok();
#else
  (void)packed;
  (void)blocks;
  (void)what;
  (void)stream;
  return not_compiled_in(cat("launching ", kernel.name));
#endif
}

/// Launches `kernel` over n elements, one a thread (nothing for none).
template <class List, class... P>
Result<void> launch_elements(const KernelEntry& kernel, std::int64_t n, void* stream, const P&... values) {
  if (n == 0) return ok();
  return launch_values<List>(kernel, element_blocks(n, 8192), cat(n, " elements"), stream, values...);
}

/// Launches every launch of `op` on `stream` (nullptr: the default stream) with the tensors of
/// `bindings` (device memory), preparing each on the way (a device plan prepares them once, at
/// load: see CudaContext); a kernel that reads the phase reads `phase` (null: eval). Errors name
/// the kernel, the node, the op and the dtype.
template <CudaOp Op>
Result<void> launch(const Op& op, const OpBindings& bindings, std::string_view node, void* stream = nullptr,
                    const cuda_kernels::DevicePhase* phase = nullptr) {
  std::vector<ConcreteShape> input_shapes;
  for (const TensorBinding& input : bindings.inputs) input_shapes.push_back(input.shape);
  const std::size_t launches = n_launches(op);
  for (std::size_t i = 0; i < launches; ++i) {
    const LaunchSite site{node, i, grid_for_launch(op, i, input_shapes, bindings.output.shape), op.block()};
    auto args = pack_args_for_launch(op, i, bindings);
    if (!args) {
      return std::move(args).error().context(
          cat("launch ", i, " of kernel ", op.kernel().forward.entry_point, " (node '", node, "')"));
    }
    auto prepared = prepare_launch(op, *args, site, phase);
    if (!prepared) return std::move(prepared).error();
    if (auto ran = run_launch(*prepared, stream); !ran) return ran;
  }
  return ok();
}

#if TEENY_TRAINING
/// Launches `op`'s backward as `launch` launches its forward: dL/dy and the gradients it adds to
/// are in `bindings` (device memory), with the forward's tensors.
template <CudaBackwardOp Op>
Result<void> launch_backward(const Op& op, const BackwardBindings& bindings, std::string_view node,
                             void* stream = nullptr, const cuda_kernels::DevicePhase* phase = nullptr) {
  std::vector<ConcreteShape> input_shapes;
  for (const TensorBinding& input : bindings.inputs) input_shapes.push_back(input.shape);
  const std::size_t launches = n_backward_launches(op);
  for (std::size_t i = 0; i < launches; ++i) {
    const LaunchSite site{node, i, backward_grid_for_launch(op, i, input_shapes, bindings.output.shape),
                          backward_block(op)};
    auto args = pack_backward_args_for_launch(op, i, bindings);
    if (!args) return std::move(args).error().context(cat("backward launch ", i, " (node '", node, "')"));
    auto prepared = prepare_backward_launch(op, *args, site, phase);
    if (!prepared) return std::move(prepared).error();
    if (auto ran = run_launch(*prepared, stream); !ran) return ran;
  }
  return ok();
}
#endif

}  // namespace teeny::cuda
