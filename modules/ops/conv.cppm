// teeny.ops:conv — convolution: conv_op runs torch.nn.Conv1d and Conv2d (stride, padding, dilation,
// groups, optional bias, unbatched inputs) with a fused activation epilogue.
//
//   auto conv = conv_op<float>::from(Conv2d{.in_channels = 3, .out_channels = 64, .kernel = 7,
//                                           .stride = 2, .padding = 3, .bias = false}, out);
//   conv.epilogue = {.active = true, .fn = UnaryFn::relu};   // set by the lowering when it fuses a ReLU
//
// A BatchNorm in eval mode right after the convolution may be folded into it (the lowering's
// fold_batch_norm sets `norm`): the op then also takes the BatchNorm's parameters and buffers, as
// slots `norm.weight`, `norm.bias`, `norm.running_mean`, `norm.running_var` and
// `norm.num_batches_tracked`, which load from the BatchNorm's own state_dict keys; the kernel
// scales its weights and shifts its bias once, at load.
//
// A residual connection added right after it (ResNet's `out += identity`) may be folded in too
// (fold_residual_add sets `residual`): the op then reads a second input of the output's shape,
// y = act(conv(x) + residual), the activation applied after the sum.
//
// A max pool right after it (LeNet's `conv -> relu -> max_pool`) may be folded in too
// (fold_max_pool sets `pool`): the op's output is then the pooled one, y = max_pool(act(conv(x))),
// and the unpooled values need not be kept: the kernel pools each image's output while it is still
// in cache.
export module teeny.ops:conv;
import teeny.std;
import teeny.core;
import teeny.graph;
import teeny.model;
import :common;

export namespace teeny {

template <FloatElement T>
struct ConvArgs {
  TensorView<const T> x;       // [N, C, H, W]; a Conv1d's [N, C, L] as [N, C, 1, L], unbatched as N = 1
  TensorView<const T> weight;  // [O, C/groups, kh, kw]; a Conv1d's [O, C/groups, k] with kh = 1
  TensorView<const T> bias;    // [O], or empty
  TensorView<T> y;             // [N, O, Ho, Wo]
  Window2d window;
  std::int64_t groups = 1;
  Epilogue epilogue;
  // A folded BatchNorm: y = (conv - mean) / sqrt(var + eps) * norm_weight + norm_bias, before the
  // epilogue. All [O], or empty: norm_mean empty means no BatchNorm; the other two are empty
  // when it is not affine.
  TensorView<const T> norm_weight;
  TensorView<const T> norm_bias;
  TensorView<const T> norm_mean;
  TensorView<const T> norm_var;
  double norm_eps = 0.0;
  TensorView<const T> residual;  // as y, added before the epilogue's activation; or empty
  // A folded max pool: y is [N, O, Hp, Wp], the max over `pool`'s windows of the activated
  // convolution [N, O, Ho, Wo] (which Ho, Wo then follow from x and `window`).
  bool pooled = false;
  Window2d pool{};
  auto fields() const {
    return std::tie(x, weight, bias, y, window, groups, epilogue, norm_weight, norm_bias, norm_mean, norm_var, norm_eps,
                    residual, pooled, pool);
  }
};

#if TEENY_TRAINING
/// Backward of conv_op: dz = dy * act'(y) (in dy's buffer); dx += conv_transpose(dz, W),
/// dW += dz (x) x per group, db += sum of dz per output channel.
template <FloatElement T>
struct ConvBackwardArgs {
  ConvArgs<T> forward;
  TensorView<T> dy;       // [N, O, Ho, Wo]
  TensorView<T> dx;       // [N, C, H, W], or empty
  TensorView<T> dweight;  // [O, C/groups, kh, kw], or empty
  TensorView<T> dbias;    // [O], or empty
  auto fields() const { return std::tie(forward, dy, dx, dweight, dbias); }
};
#endif

/// y = act(conv(x, W) + b), or act(batch_norm(conv(x, W) + b)) with a folded BatchNorm. One op for
/// both ranks: a Conv1d is a Conv2d whose kernel is one row high; spatial_dims keeps the weight in
/// PyTorch's layout ([O, C/g, k] for a Conv1d).
template <FloatElement T>
struct conv_op {
  using Args = ConvArgs<T>;
  Conv2d attrs;
  std::int64_t spatial_dims = 2;
  OpOutput out;
  Epilogue epilogue{};
  /// The BatchNorm folded into this convolution (eval mode, running statistics), if any.
  std::optional<BatchNorm> norm{};
  /// Whether a residual (input 1, of the output's shape) is added before the activation.
  bool residual = false;
  /// The max pool folded into this convolution, if any: `out` is then its (pooled) output.
  std::optional<MaxPool2d> pool{};

  static conv_op from(const Conv1d& c, OpOutput out) {
    return {Conv2d{c.in_channels,
                   c.out_channels,
                   {1, c.kernel},
                   {1, c.stride},
                   {0, c.padding},
                   {1, c.dilation},
                   c.groups,
                   c.bias},
            1, std::move(out)};
  }
  static conv_op from(const Conv2d& c, OpOutput out) { return {c, 2, std::move(out)}; }

  std::string_view name() const { return spatial_dims == 1 ? "conv1d" : "conv2d"; }
  const Shape& output_shape() const { return out.shape; }
  DType output_dtype() const { return dtype_of<T>; }
  KernelInstance kernel() const { return kernel_instance<"conv", "conv_backward", T>(); }

  std::size_t n_activation_inputs() const { return residual ? 2 : 1; }
  std::span<const std::string_view> param_names() const {
    // The convolution's slots, then a folded BatchNorm's (its weight and bias when affine).
    static constexpr std::string_view with_bias[] = {"weight",
                                                     "bias",
                                                     "norm.weight",
                                                     "norm.bias",
                                                     "norm.running_mean",
                                                     "norm.running_var",
                                                     "norm.num_batches_tracked"};
    static constexpr std::string_view without_bias[] = {
        "weight", "norm.weight", "norm.bias", "norm.running_mean", "norm.running_var", "norm.num_batches_tracked"};
    static constexpr std::string_view with_bias_stats[] = {"weight", "bias", "norm.running_mean", "norm.running_var",
                                                           "norm.num_batches_tracked"};
    static constexpr std::string_view without_bias_stats[] = {"weight", "norm.running_mean", "norm.running_var",
                                                              "norm.num_batches_tracked"};
    using Slots = std::span<const std::string_view>;
    if (!norm) return Slots(with_bias).first(attrs.bias ? 2 : 1);
    if (norm->affine) return attrs.bias ? Slots(with_bias) : Slots(without_bias);
    return attrs.bias ? Slots(with_bias_stats) : Slots(without_bias_stats);
  }
  /// num_batches_tracked, the last slot of a folded BatchNorm, is an i64 scalar as in PyTorch.
  DType param_dtype(std::size_t i) const { return norm && i + 1 == param_names().size() ? DType::i64 : dtype_of<T>; }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const {
    const std::int64_t per_group = attrs.in_channels / attrs.groups;
    const ConcreteShape channels{attrs.out_channels};
    std::vector<ConcreteShape> shapes{
        spatial_dims == 1 ? ConcreteShape{attrs.out_channels, per_group, attrs.kernel.w}
                          : ConcreteShape{attrs.out_channels, per_group, attrs.kernel.h, attrs.kernel.w}};
    if (attrs.bias) shapes.push_back(channels);
    if (norm) {
      if (norm->affine) shapes.insert(shapes.end(), {channels, channels});
      shapes.insert(shapes.end(), {channels, channels, ConcreteShape{}});
    }
    return shapes;
  }
  Result<Args> pack_args(const OpBindings& b) const {
    auto x = input_view<const T>(b, 0);
    auto w = param_view<const T>(b, 0);
    auto bias = optional_param_view<const T>(b, 1, attrs.bias);
    auto y = output_view<T>(b);
    if (auto e = first_error(x, w, bias, y)) return *e;
    const std::size_t first_norm = attrs.bias ? 2 : 1;
    const bool affine = norm && norm->affine;
    const std::size_t first_stat = first_norm + (affine ? 2 : 0);
    auto norm_weight = optional_param_view<const T>(b, first_norm, affine);
    auto norm_bias = optional_param_view<const T>(b, first_norm + 1, affine);
    auto norm_mean = optional_param_view<const T>(b, first_stat, norm.has_value());
    auto norm_var = optional_param_view<const T>(b, first_stat + 1, norm.has_value());
    if (auto e = first_error(norm_weight, norm_bias, norm_mean, norm_var)) return *e;
    if (residual && pool) {
      return fail(Errc::unsupported,
                  "a convolution with both a folded residual add and a folded max pool (the "
                  "lowering folds a max pool only into a convolution without a residual)");
    }
    TensorView<const T> added{};
    if (residual) {
      auto r = input_view<const T>(b, 1);
      if (!r) return std::move(r).error();
      auto r4 = contiguous_as(*r, as_nchw(y->shape), "residual");
      if (!r4) return std::move(r4).error();
      if (r->shape != y->shape) {
        return fail(Errc::shape_mismatch, "residual ", r->shape, " is not the output's shape ", y->shape);
      }
      added = *r4;
    }
    auto x4 = contiguous_as(*x, as_nchw(x->shape), "input");
    auto w4 = contiguous_as(*w, {attrs.out_channels, attrs.in_channels / attrs.groups, attrs.kernel.h, attrs.kernel.w},
                            "weight");
    auto y4 = contiguous_as(*y, as_nchw(y->shape), "output");
    if (auto e = first_error(x4, w4, y4)) return *e;
    const Window2d window{attrs.kernel.h,  attrs.kernel.w,  attrs.stride.h,   attrs.stride.w,
                          attrs.padding.h, attrs.padding.w, attrs.dilation.h, attrs.dilation.w};
    Args args{*x4,      *w4,          *bias,      *y4,        window,    attrs.groups,
              epilogue, *norm_weight, *norm_bias, *norm_mean, *norm_var, norm ? norm->eps : 0.0,
              added};
    if (pool) {
      const Size2 s = pool->effective_stride();
      args.pooled = true;
      args.pool = Window2d{pool->kernel.h,   pool->kernel.w,  s.h, s.w, pool->padding.h, pool->padding.w,
                           pool->dilation.h, pool->dilation.w};
    }
    return args;
  }
  Dim3 block() const { return {256, 1, 1}; }
  Dim3 grid(const ConcreteShape& y) const { return {ceil_div(y.numel(), 256), 1, 1}; }

#if TEENY_TRAINING
  using BackwardArgs = ConvBackwardArgs<T>;
  Result<BackwardArgs> pack_backward_args(const BackwardBindings& b) const {
    // The training lowering folds nothing into a convolution: a fold has no backward here.
    if (norm || residual || pool) {
      return fail(Errc::unsupported, "a convolution with a folded ",
                  norm       ? "BatchNorm"
                  : residual ? "residual add"
                             : "max pool",
                  " has no backward (lower the graph for training, which does not fold)");
    }
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
  /// One thread per element of dx, dW and db, in blocks of 256.
  Dim3 backward_grid(std::span<const ConcreteShape> in, const ConcreteShape&) const {
    const std::int64_t weights =
        attrs.out_channels * (attrs.in_channels / attrs.groups) * attrs.kernel.h * attrs.kernel.w;
    return {ceil_div((in.empty() ? 0 : in[0].numel()) + weights + attrs.out_channels, 256), 1, 1};
  }
  Dim3 backward_block() const { return {256, 1, 1}; }
#endif

 private:
  // [N, C, H, W] for any of the accepted input/output ranks.
  ConcreteShape as_nchw(const ConcreteShape& s) const {
    const std::size_t rank = s.rank();
    const bool batched = rank == static_cast<std::size_t>(spatial_dims) + 2;
    const std::int64_t n = batched ? s[0] : 1;
    const std::int64_t c = s[rank - static_cast<std::size_t>(spatial_dims) - 1];
    if (spatial_dims == 1) return {n, c, 1, s[rank - 1]};
    return {n, c, s[rank - 2], s[rank - 1]};
  }
};
static_assert(RuntimeOp<conv_op<float>> && ExecutableOp<conv_op<double>>);
#if TEENY_TRAINING
static_assert(BackwardOp<conv_op<float>>);
#endif

}  // namespace teeny
