// teeny.ops:elementwise — unary functions (activations, exp/log/...), broadcasting binary ops,
// comparisons and where, and dropout. Their per-element math is kernels/math/unary.hpp and
// elementwise.hpp, shared by the CPU and CUDA kernels.
export module teeny.ops:elementwise;
import teeny.std;
import teeny.core;
import teeny.graph;
import teeny.model;
import :common;

export namespace teeny {

template <FloatElement T>
struct UnaryArgs {
  TensorView<const T> x;
  TensorView<T> y;  // same shape as x
  UnaryFn fn;
  UnaryParams params;
  auto fields() const { return std::tie(x, y, fn, params); }
};

/// y = fn(x), elementwise: every activation and unary math function.
template <FloatElement T>
struct unary_op {
  using Args = UnaryArgs<T>;
  UnaryFn fn = UnaryFn::relu;
  UnaryParams params{};
  OpOutput out;

  std::string_view name() const { return "unary"; }
  const Shape& output_shape() const { return out.shape; }
  DType output_dtype() const { return dtype_of<T>; }
  KernelInstance kernel() const { return kernel_instance<"unary", "unary_backward", T>(); }
  std::size_t n_activation_inputs() const { return 1; }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const { return {}; }
  Result<Args> pack_args(const OpBindings& b) const {
    auto x = input_view<const T>(b, 0);
    auto y = output_view<T>(b);
    if (auto e = first_error(x, y)) return *e;
    return Args{*x, *y, fn, params};
  }
  Dim3 block() const { return {256, 1, 1}; }
  Dim3 grid(const ConcreteShape& y) const { return {ceil_div(y.numel(), 256), 1, 1}; }

#if TEENY_TRAINING
  using BackwardArgs = InputGradArgs<Args, T>;  // dx += dy * fn'(x)
  Result<BackwardArgs> pack_backward_args(const BackwardBindings& b) const { return pack_input_grad<T>(*this, b); }
  Dim3 backward_grid(std::span<const ConcreteShape>, const ConcreteShape& y) const { return grid(y); }
#endif
};
static_assert(RuntimeOp<unary_op<float>>);

template <FloatElement T>
struct BinaryArgs {
  TensorView<const T> a;  // broadcast to y's shape (stride 0 on broadcast dims)
  TensorView<const T> b;
  TensorView<T> y;
  BinaryFn fn;
  Epilogue epilogue;
  auto fields() const { return std::tie(a, b, y, fn, epilogue); }
};

#if TEENY_TRAINING
/// Backward of binary_op: dz = dy * act'(y) (in dy's buffer); da += dz * d fn/da and db += dz *
/// d fn/db, each summed over the dims its operand was broadcast along.
template <FloatElement T>
struct BinaryBackwardArgs {
  BinaryArgs<T> forward;  // a and b broadcast to y's shape (stride 0 on broadcast dims)
  TensorView<T> dy;
  TensorView<T> da;  // a's gradient with a's broadcast strides, or empty
  TensorView<T> db;
  auto fields() const { return std::tie(forward, dy, da, db); }
};
#endif

/// y = act(fn(a, b)) with NumPy/PyTorch broadcasting; the activation (a residual block's ReLU
/// after its add) is fused by the lowering. With a constant operand (Binary's `other`) the op has
/// one input and the constant is its parameter "other", not trained: b, or a when `other_first`.
template <FloatElement T>
struct binary_op {
  using Args = BinaryArgs<T>;
  BinaryFn fn = BinaryFn::add;
  OpOutput out;
  Epilogue epilogue{};
  std::optional<ConcreteShape> other{};
  bool other_first = false;

  std::string_view name() const { return "binary"; }
  const Shape& output_shape() const { return out.shape; }
  DType output_dtype() const { return dtype_of<T>; }
  KernelInstance kernel() const { return kernel_instance<"binary", "binary_backward", T>(); }
  std::size_t n_activation_inputs() const { return other ? 1 : 2; }
  std::span<const std::string_view> param_names() const {
    static constexpr std::string_view slots[] = {"other"};
    return std::span<const std::string_view>(slots).first(other ? 1 : 0);
  }
  bool param_trainable(std::size_t) const { return false; }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const {
    if (other) return {*other};
    return {};
  }
  Result<Args> pack_args(const OpBindings& bindings) const {
    auto operands = operand_views(bindings);
    auto y = output_view<T>(bindings);
    if (auto e = first_error(operands, y)) return *e;
    const auto& [a, b] = *operands;
    return Args{broadcast_to(a, y->shape), broadcast_to(b, y->shape), *y, fn, epilogue};
  }
  Dim3 block() const { return {256, 1, 1}; }
  Dim3 grid(const ConcreteShape& y) const { return {ceil_div(y.numel(), 256), 1, 1}; }

#if TEENY_TRAINING
  using BackwardArgs = BinaryBackwardArgs<T>;
  Result<BackwardArgs> pack_backward_args(const BackwardBindings& b) const {
    if (auto fused = check_epilogue_backward(epilogue); !fused) return std::move(fused).error();
    auto forward = pack_args(forward_bindings(b));
    if (!forward) return std::move(forward).error();
    // Each gradient is bound with its operand's own shape, then read broadcast like the operand.
    auto operands = operand_views(forward_bindings(b));
    if (!operands) return std::move(operands).error();
    const auto& [a, bv] = *operands;
    BackwardArgs g{*forward, {}, {}, {}};
    // The inputs' gradients; a constant operand has none.
    const Result<void> da = other && other_first ? ok() : bind_grad_input(b, 0, a, g.da);
    const Result<void> db = !other        ? bind_grad_input(b, 1, bv, g.db)
                            : other_first ? bind_grad_input(b, 0, bv, g.db)
                                          : ok();
    if (auto e = first_error(bind_grad_output(b, g.forward.y, g.dy), da, db)) return *e;
    if (g.da.data != nullptr) g.da = broadcast_to(g.da, g.forward.y.shape);
    if (g.db.data != nullptr) g.db = broadcast_to(g.db, g.forward.y.shape);
    return g;
  }
  Dim3 backward_grid(std::span<const ConcreteShape>, const ConcreteShape& y) const { return grid(y); }
#endif

 private:
  // a and b with their own shapes: the inputs, or the input and the constant.
  Result<std::pair<TensorView<const T>, TensorView<const T>>> operand_views(const OpBindings& bindings) const {
    auto x = input_view<const T>(bindings, 0);
    auto c = other ? param_view<const T>(bindings, 0) : input_view<const T>(bindings, 1);
    if (auto e = first_error(x, c)) return *e;
    if (other && other_first) return std::pair{*c, *x};
    return std::pair{*x, *c};
  }
};
static_assert(RuntimeOp<binary_op<float>>);
#if TEENY_TRAINING
static_assert(BackwardOp<unary_op<float>> && BackwardOp<binary_op<double>>);
#endif

template <FloatElement T>
struct CompareArgs {
  TensorView<const T> a;  // broadcast to y's shape (stride 0 on broadcast dims)
  TensorView<const T> b;
  TensorView<bool> y;  // contiguous
  CompareFn fn = CompareFn::eq;
  auto fields() const { return std::tie(a, b, y, fn); }
};

/// torch.eq / ne / lt / le / gt / ge (graph op Compare): bool output, no backward (a bool has no
/// gradient).
template <FloatElement T>
struct compare_op {
  using Args = CompareArgs<T>;
  CompareFn fn = CompareFn::eq;
  OpOutput out;

  std::string_view name() const { return "compare"; }
  const Shape& output_shape() const { return out.shape; }
  DType output_dtype() const { return DType::boolean; }
  KernelInstance kernel() const { return {kernel_ref<"compare", T>(), std::nullopt}; }
  std::size_t n_activation_inputs() const { return 2; }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const { return {}; }
  Result<Args> pack_args(const OpBindings& b) const {
    auto x = input_view<const T>(b, 0);
    auto other = input_view<const T>(b, 1);
    auto y = output_view<bool>(b);
    if (auto e = first_error(x, other, y)) return *e;
    auto yc = contiguous_as(*y, y->shape, "output");
    if (!yc) return std::move(yc).error();
    return Args{broadcast_to(*x, y->shape), broadcast_to(*other, y->shape), *yc, fn};
  }
  Dim3 block() const { return {256, 1, 1}; }
  Dim3 grid(const ConcreteShape& y) const { return {ceil_div(y.numel(), 256), 1, 1}; }
};
static_assert(RuntimeOp<compare_op<float>>);
static_assert(static_cast<int>(CompareFn::eq) == static_cast<int>(CompareOp::eq) &&
                  static_cast<int>(CompareFn::ne) == static_cast<int>(CompareOp::ne) &&
                  static_cast<int>(CompareFn::lt) == static_cast<int>(CompareOp::lt) &&
                  static_cast<int>(CompareFn::le) == static_cast<int>(CompareOp::le) &&
                  static_cast<int>(CompareFn::gt) == static_cast<int>(CompareOp::gt) &&
                  static_cast<int>(CompareFn::ge) == static_cast<int>(CompareOp::ge) && compare_op_count == 6,
              "kernels/math/elementwise.hpp's CompareFn has the graph's CompareOp values in the same order");

template <FloatElement T>
struct WhereArgs {
  TensorView<const bool> condition;  // broadcast to y's shape (stride 0 on broadcast dims)
  TensorView<const T> x;
  TensorView<const T> other;  // torch.where's y
  TensorView<T> y;            // contiguous
  auto fields() const { return std::tie(condition, x, other, y); }
};

/// torch.where(condition, x, y) (graph op Where). Forward only for now: its backward (dy to x
/// where the condition holds, to y elsewhere, summed over broadcast dims) is planned.
template <FloatElement T>
struct where_op {
  using Args = WhereArgs<T>;
  OpOutput out;

  std::string_view name() const { return "where"; }
  const Shape& output_shape() const { return out.shape; }
  DType output_dtype() const { return dtype_of<T>; }
  KernelInstance kernel() const { return {kernel_ref<"where", T>(), std::nullopt}; }
  std::size_t n_activation_inputs() const { return 3; }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const { return {}; }
  Result<Args> pack_args(const OpBindings& b) const {
    auto condition = input_view<const bool>(b, 0);
    auto x = input_view<const T>(b, 1);
    auto other = input_view<const T>(b, 2);
    auto y = output_view<T>(b);
    if (auto e = first_error(condition, x, other, y)) return *e;
    auto yc = contiguous_as(*y, y->shape, "output");
    if (!yc) return std::move(yc).error();
    return Args{broadcast_to(*condition, y->shape), broadcast_to(*x, y->shape), broadcast_to(*other, y->shape), *yc};
  }
  Dim3 block() const { return {256, 1, 1}; }
  Dim3 grid(const ConcreteShape& y) const { return {ceil_div(y.numel(), 256), 1, 1}; }
};
static_assert(RuntimeOp<where_op<float>>);

template <FloatElement T>
struct DropoutArgs {
  TensorView<const T> x;
  TensorView<T> y;  // same shape as x
  double p = 0.5;
  std::uint64_t stream = 0;  // which random stream the mask comes from (see kernels/math/random.hpp)
  auto fields() const { return std::tie(x, y, p, stream); }
};

/// torch.nn.Dropout in a model lowered for training: in the training phase each element is zeroed
/// with probability p and the others scaled by 1 / (1 - p); in the eval phase y = x. The mask is a
/// hash of (phase seed, step, stream, element), so the backward recomputes it rather than store it.
/// (The inference lowering emits no op for a Dropout: it is the identity there.)
template <FloatElement T>
struct dropout_op {
  using Args = DropoutArgs<T>;
  Dropout attrs;
  std::uint64_t stream = 0;  // the lowering gives each dropout its own (its graph node's id)
  OpOutput out;

  std::string_view name() const { return "dropout"; }
  const Shape& output_shape() const { return out.shape; }
  DType output_dtype() const { return dtype_of<T>; }
  KernelInstance kernel() const { return kernel_instance<"dropout", "dropout_backward", T>(); }
  std::size_t n_activation_inputs() const { return 1; }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const { return {}; }
  Result<Args> pack_args(const OpBindings& b) const {
    auto x = input_view<const T>(b, 0);
    auto y = output_view<T>(b);
    if (auto e = first_error(x, y)) return *e;
    return Args{*x, *y, attrs.p, stream};
  }
  Dim3 block() const { return {256, 1, 1}; }
  Dim3 grid(const ConcreteShape& y) const { return {ceil_div(y.numel(), 256), 1, 1}; }

#if TEENY_TRAINING
  using BackwardArgs = InputGradArgs<Args, T>;  // dx += dy * mask / (1 - p), the forward's mask
  Result<BackwardArgs> pack_backward_args(const BackwardBindings& b) const { return pack_input_grad<T>(*this, b); }
  Dim3 backward_grid(std::span<const ConcreteShape>, const ConcreteShape& y) const { return grid(y); }
#endif
};
static_assert(RuntimeOp<dropout_op<float>>);
#if TEENY_TRAINING
static_assert(BackwardOp<dropout_op<float>>);
#endif

}  // namespace teeny
