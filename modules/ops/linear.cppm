// teeny.ops:linear — matrix products: linear_op (torch.nn.Linear with a fused epilogue) and
// matmul_op (torch.matmul with batch broadcasting).
//
//   linear_op<float> fc{.attrs = {.in_features = 784, .out_features = 512}, .out = {{batch, 512}}};
//   fc.epilogue = {.active = true, .fn = UnaryFn::relu};   // set by the lowering when it fuses a ReLU
export module teeny.ops:linear;
import teeny.std;
import teeny.core;
import teeny.graph;
import teeny.model;
import :common;

export namespace teeny {

template <FloatElement T>
struct LinearArgs {
  TensorView<const T> x;       // [rows, in_features] (leading dims flattened)
  TensorView<const T> weight;  // [out_features, in_features], PyTorch's layout
  TensorView<const T> bias;    // [out_features], or empty
  TensorView<T> y;             // [rows, out_features]
  Epilogue epilogue;
  auto fields() const { return std::tie(x, weight, bias, y, epilogue); }
};

#if TEENY_TRAINING
/// Backward of linear_op: dz = dy * act'(y) (in dy's buffer), dx += dz W, dW += dz^T x, db += sum dz.
template <FloatElement T>
struct LinearBackwardArgs {
  LinearArgs<T> forward;  // as the forward bound it; y is the activated output
  TensorView<T> dy;       // [rows, out_features]
  TensorView<T> dx;       // [rows, in_features], or empty
  TensorView<T> dweight;  // [out_features, in_features], or empty
  TensorView<T> dbias;    // [out_features], or empty
  auto fields() const { return std::tie(forward, dy, dx, dweight, dbias); }
};
#endif

/// y = act(x W^T + b) over the last dim.
template <FloatElement T>
struct linear_op {
  using Args = LinearArgs<T>;
  Linear attrs;
  OpOutput out;
  Epilogue epilogue{};

  std::string_view name() const { return "linear"; }
  const Shape& output_shape() const { return out.shape; }
  DType output_dtype() const { return dtype_of<T>; }
  KernelInstance kernel() const { return kernel_instance<"linear", "linear_backward", T>(); }

  std::size_t n_activation_inputs() const { return 1; }
  std::span<const std::string_view> param_names() const {
    static constexpr std::string_view slots[] = {"weight", "bias"};
    return std::span<const std::string_view>(slots).first(attrs.bias ? 2 : 1);
  }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const {
    if (!attrs.bias) return {{attrs.out_features, attrs.in_features}};
    return {{attrs.out_features, attrs.in_features}, {attrs.out_features}};
  }
  Result<Args> pack_args(const OpBindings& b) const {
    auto x = input_view<const T>(b, 0);
    auto w = param_view<const T>(b, 0);
    auto bias = optional_param_view<const T>(b, 1, attrs.bias);
    auto y = output_view<T>(b);
    if (auto e = first_error(x, w, bias, y)) return *e;
    const std::int64_t rows = x->numel() / attrs.in_features;
    return Args{TensorView<const T>(x->data, {rows, attrs.in_features}), *w, *bias,
                TensorView<T>(y->data, {rows, attrs.out_features}), epilogue};
  }
  /// 16 x 16 output tiles; the rows' tiles stop at CUDA's grid-y limit, the kernel looping over the rest.
  Dim3 block() const { return {16, 16, 1}; }
  Dim3 grid(const ConcreteShape& y) const {
    return {ceil_div(attrs.out_features, 16), std::min(ceil_div(y.numel() / attrs.out_features, 16), 65535u), 1};
  }

#if TEENY_TRAINING
  using BackwardArgs = LinearBackwardArgs<T>;
  Result<BackwardArgs> pack_backward_args(const BackwardBindings& b) const {
    if (auto fused = check_epilogue_backward(epilogue); !fused) return std::move(fused).error();
    auto forward = pack_args(forward_bindings(b));
    if (!forward) return std::move(forward).error();
    BackwardArgs g{*forward, {}, {}, {}, {}};
    if (auto e = first_error(bind_grad_output(b, g.forward.y, g.dy), bind_grad_input(b, 0, g.forward.x, g.dx),
                             bind_grad_param(b, 0, g.forward.weight, g.dweight),
                             bind_grad_param(b, 1, g.forward.bias, g.dbias))) {
      return *e;
    }
    return g;
  }
  /// One block per 16x16 tile of the larger of dx and dW (the rows' tiles stop at CUDA's grid-y
  /// limit, the kernel looping over the rest); blocks of 16 x 16 threads, as the forward's.
  Dim3 backward_grid(std::span<const ConcreteShape>, const ConcreteShape& y) const {
    const std::int64_t rows = y.numel() / attrs.out_features;
    return {ceil_div(attrs.in_features, 16), std::min(ceil_div(std::max(rows, attrs.out_features), 16), 65535u), 1};
  }
  Dim3 backward_block() const { return block(); }
#endif
};
static_assert(RuntimeOp<linear_op<float>> && ExecutableOp<linear_op<double>>);
#if TEENY_TRAINING
static_assert(BackwardOp<linear_op<float>> && BackwardOp<linear_op<double>>);
#endif

template <FloatElement T>
struct MatMulArgs {
  TensorView<const T> a;  // as bound: [..., n, k] (a 1-D operand as [1, k])
  TensorView<const T> b;  // [..., k, m] (a 1-D operand as [k, 1])
  TensorView<T> y;        // [batch..., n, m] flattened to match
  auto fields() const { return std::tie(a, b, y); }
};

#if TEENY_TRAINING
/// Backward of matmul_op, per batch of the output: da += dy b^T, db += a^T dy, each added where
/// its operand was read (so a broadcast operand sums over the batches that shared it).
template <FloatElement T>
struct MatMulBackwardArgs {
  MatMulArgs<T> forward;
  TensorView<T> dy;
  TensorView<T> da;  // like forward.a, or empty
  TensorView<T> db;  // like forward.b, or empty
  auto fields() const { return std::tie(forward, dy, da, db); }
};
#endif

/// torch.matmul. Operands are viewed as (broadcast) batches of matrices; 1-D operands as a row
/// (first) or a column (second), as PyTorch does.
template <FloatElement T>
struct matmul_op {
  using Args = MatMulArgs<T>;
  OpOutput out;

  std::string_view name() const { return "matmul"; }
  const Shape& output_shape() const { return out.shape; }
  DType output_dtype() const { return dtype_of<T>; }
  KernelInstance kernel() const { return kernel_instance<"matmul", "matmul_backward", T>(); }

  std::size_t n_activation_inputs() const { return 2; }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const { return {}; }
  Result<Args> pack_args(const OpBindings& bindings) const {
    auto a = input_view<const T>(bindings, 0);
    auto b = input_view<const T>(bindings, 1);
    auto y = output_view<T>(bindings);
    if (auto e = first_error(a, b, y)) return *e;
    TensorView<const T> av = *a;
    TensorView<const T> bv = *b;
    if (av.rank() == 1) av = TensorView<const T>(av.data, {1, av.shape[0]});
    if (bv.rank() == 1) bv = TensorView<const T>(bv.data, {bv.shape[0], 1});
    return Args{av, bv, *y};
  }
  Dim3 block() const { return {16, 16, 1}; }
  Dim3 grid(const ConcreteShape& y) const { return {ceil_div(y.numel(), 256), 1, 1}; }

#if TEENY_TRAINING
  using BackwardArgs = MatMulBackwardArgs<T>;
  Result<BackwardArgs> pack_backward_args(const BackwardBindings& b) const {
    auto forward = pack_args(forward_bindings(b));
    if (!forward) return std::move(forward).error();
    BackwardArgs g{*forward, {}, {}, {}};
    if (auto e = first_error(bind_grad_output(b, g.forward.y, g.dy), bind_grad_input(b, 0, g.forward.a, g.da),
                             bind_grad_input(b, 1, g.forward.b, g.db))) {
      return *e;
    }
    return g;
  }
  /// One thread per element of da and of db (blocks of 128, the default backward block).
  Dim3 backward_grid(std::span<const ConcreteShape> in, const ConcreteShape& y) const {
    return {ceil_div(in.size() < 2 ? y.numel() : in[0].numel() + in[1].numel(), 128), 1, 1};
  }
#endif
};
static_assert(RuntimeOp<matmul_op<float>>);
#if TEENY_TRAINING
static_assert(BackwardOp<matmul_op<float>>);
#endif

}  // namespace teeny
