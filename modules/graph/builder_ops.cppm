// teeny.graph:builder_ops — GraphBuilder's methods that add one op each (declared in :builder):
// the sizes PyTorch's modules take as arguments read off the inputs, the rest passed to the op,
// whose infer() checks it.
module teeny.graph:builder_ops;
import teeny.std;
import teeny.core;
import :tensor_type;
import :custom_op;
import :op;
import :graph;
import :builder;

namespace teeny {

// ---- layers

Value GraphBuilder::linear(Value x, std::int64_t out_features, bool bias) {
  std::int64_t in_features = 1;
  if (auto failed = read_dim(x, -1, Linear::kind, "in_features", in_features)) return *failed;
  return add_standard(Linear{in_features, out_features, bias}, {x});
}

Value GraphBuilder::matmul(Value a, Value b) { return add_standard(MatMul{}, {a, b}); }

Value GraphBuilder::conv1d(Value x, std::int64_t out_channels, std::int64_t kernel, Conv1dOptions o) {
  std::int64_t in_channels = 1;
  if (auto failed = read_dim(x, -2, Conv1d::kind, "in_channels", in_channels)) return *failed;
  return add_standard(Conv1d{in_channels, out_channels, kernel, o.stride, o.padding, o.dilation, o.groups, o.bias},
                      {x});
}

Value GraphBuilder::conv2d(Value x, std::int64_t out_channels, Size2 kernel, Conv2dOptions o) {
  std::int64_t in_channels = 1;
  if (auto failed = read_dim(x, -3, Conv2d::kind, "in_channels", in_channels)) return *failed;
  return add_standard(Conv2d{in_channels, out_channels, kernel, o.stride, o.padding, o.dilation, o.groups, o.bias},
                      {x});
}

Value GraphBuilder::max_pool2d(Value x, Size2 kernel, Pool2dOptions o) {
  return add_standard(MaxPool2d{kernel, o.stride, o.padding, o.dilation, o.ceil_mode}, {x});
}

Value GraphBuilder::avg_pool2d(Value x, Size2 kernel, AvgPool2dOptions o) {
  return add_standard(AvgPool2d{kernel, o.stride, o.padding, o.ceil_mode, o.count_include_pad, o.divisor_override},
                      {x});
}

Value GraphBuilder::adaptive_avg_pool2d(Value x, Size2 output_size) {
  return add_standard(AdaptiveAvgPool2d{output_size}, {x});
}

Value GraphBuilder::batch_norm1d(Value x, BatchNormOptions o) {
  std::int64_t features = 1;
  if (auto failed = read_dim(x, 1, "batch_norm1d", "num_features", features)) return *failed;
  return add_standard(BatchNorm{features, o.eps, o.momentum, o.affine, o.track_running_stats, 1}, {x});
}

Value GraphBuilder::batch_norm2d(Value x, BatchNormOptions o) {
  std::int64_t features = 1;
  if (auto failed = read_dim(x, 1, "batch_norm2d", "num_features", features)) return *failed;
  return add_standard(BatchNorm{features, o.eps, o.momentum, o.affine, o.track_running_stats, 2}, {x});
}

Value GraphBuilder::layer_norm(Value x, std::vector<std::int64_t> normalized_shape, LayerNormOptions o) {
  return add_standard(LayerNorm{std::move(normalized_shape), o.eps, o.elementwise_affine, o.bias}, {x});
}

Value GraphBuilder::rms_norm(Value x, std::vector<std::int64_t> normalized_shape, RMSNormOptions o) {
  return add_standard(RMSNorm{std::move(normalized_shape), o.eps, o.elementwise_affine}, {x});
}

Value GraphBuilder::group_norm(Value x, std::int64_t num_groups, GroupNormOptions o) {
  std::int64_t channels = 1;
  if (auto failed = read_dim(x, 1, GroupNorm::kind, "num_channels", channels)) return *failed;
  return add_standard(GroupNorm{num_groups, channels, o.eps, o.affine}, {x});
}

Value GraphBuilder::embedding(Value indices, std::int64_t num_embeddings, std::int64_t embedding_dim,
                              EmbeddingOptions o) {
  return add_standard(Embedding{num_embeddings, embedding_dim, o.padding_idx, o.dtype}, {indices});
}

Value GraphBuilder::dropout(Value x, double p) { return add_standard(Dropout{p}, {x}); }

Value GraphBuilder::attention(Value q, Value k, Value v, AttentionOptions o) {
  return add_standard(Attention{o.causal, o.scale}, {q, k, v});
}

// ---- activations

Value GraphBuilder::relu(Value x) { return add_standard(ReLU{}, {x}); }
Value GraphBuilder::leaky_relu(Value x, double negative_slope) { return add_standard(LeakyReLU{negative_slope}, {x}); }
Value GraphBuilder::threshold(Value x, double threshold, double value) {
  return add_standard(Threshold{threshold, value}, {x});
}
Value GraphBuilder::hardshrink(Value x, double lambd) { return add_standard(Hardshrink{lambd}, {x}); }
Value GraphBuilder::softshrink(Value x, double lambd) { return add_standard(Softshrink{lambd}, {x}); }
Value GraphBuilder::gelu(Value x, GeluApproximate approximate) { return add_standard(GELU{approximate}, {x}); }
Value GraphBuilder::silu(Value x) { return add_standard(SiLU{}, {x}); }
Value GraphBuilder::sigmoid(Value x) { return add_standard(Sigmoid{}, {x}); }
Value GraphBuilder::tanh(Value x) { return add_standard(Tanh{}, {x}); }
Value GraphBuilder::softplus(Value x, double beta, double threshold) {
  return add_standard(Softplus{beta, threshold}, {x});
}
Value GraphBuilder::elu(Value x, double alpha) { return add_standard(ELU{alpha}, {x}); }
Value GraphBuilder::hardswish(Value x) { return add_standard(Hardswish{}, {x}); }
Value GraphBuilder::hardsigmoid(Value x) { return add_standard(Hardsigmoid{}, {x}); }
Value GraphBuilder::softmax(Value x, std::int64_t axis) { return add_standard(Softmax{axis}, {x}); }
Value GraphBuilder::log_softmax(Value x, std::int64_t axis) { return add_standard(LogSoftmax{axis}, {x}); }

// ---- arithmetic and math

Value GraphBuilder::add(Value a, Value b) { return add_standard(Binary{BinaryOp::add}, {a, b}); }
Value GraphBuilder::sub(Value a, Value b) { return add_standard(Binary{BinaryOp::sub}, {a, b}); }
Value GraphBuilder::mul(Value a, Value b) { return add_standard(Binary{BinaryOp::mul}, {a, b}); }
Value GraphBuilder::div(Value a, Value b) { return add_standard(Binary{BinaryOp::div}, {a, b}); }
Value GraphBuilder::pow(Value a, Value b) { return add_standard(Binary{BinaryOp::pow}, {a, b}); }
Value GraphBuilder::maximum(Value a, Value b) { return add_standard(Binary{BinaryOp::maximum}, {a, b}); }
Value GraphBuilder::minimum(Value a, Value b) { return add_standard(Binary{BinaryOp::minimum}, {a, b}); }
Value GraphBuilder::fmod(Value a, Value b) { return add_standard(Binary{BinaryOp::fmod}, {a, b}); }
Value GraphBuilder::compare(Value a, CompareOp op, Value b) { return add_standard(Compare{op}, {a, b}); }
Value GraphBuilder::where(Value condition, Value x, Value y) { return add_standard(Where{}, {condition, x, y}); }
Value GraphBuilder::exp(Value x) { return add_standard(Unary{UnaryOp::exp}, {x}); }
Value GraphBuilder::log(Value x) { return add_standard(Unary{UnaryOp::log}, {x}); }
Value GraphBuilder::sqrt(Value x) { return add_standard(Unary{UnaryOp::sqrt}, {x}); }
Value GraphBuilder::abs(Value x) { return add_standard(Unary{UnaryOp::abs}, {x}); }
Value GraphBuilder::neg(Value x) { return add_standard(Unary{UnaryOp::neg}, {x}); }
Value GraphBuilder::reciprocal(Value x) { return add_standard(Unary{UnaryOp::reciprocal}, {x}); }

Value GraphBuilder::sum(Value x, std::vector<std::int64_t> axes, bool keepdim) {
  return add_standard(Reduce{ReduceOp::sum, std::move(axes), keepdim}, {x});
}
Value GraphBuilder::mean(Value x, std::vector<std::int64_t> axes, bool keepdim) {
  return add_standard(Reduce{ReduceOp::mean, std::move(axes), keepdim}, {x});
}
Value GraphBuilder::max(Value x, std::vector<std::int64_t> axes, bool keepdim) {
  return add_standard(Reduce{ReduceOp::max, std::move(axes), keepdim}, {x});
}
Value GraphBuilder::prod(Value x, std::vector<std::int64_t> axes, bool keepdim) {
  return add_standard(Reduce{ReduceOp::prod, std::move(axes), keepdim}, {x});
}

Value GraphBuilder::argmax(Value x, std::int64_t axis, bool keepdim, bool select_last_index) {
  return add_standard(ArgReduce{ArgOp::max, axis, keepdim, select_last_index}, {x});
}
Value GraphBuilder::argmin(Value x, std::int64_t axis, bool keepdim, bool select_last_index) {
  return add_standard(ArgReduce{ArgOp::min, axis, keepdim, select_last_index}, {x});
}

Value GraphBuilder::cumsum(Value x, std::int64_t axis, bool exclusive, bool reverse) {
  return add_standard(CumSum{axis, exclusive, reverse}, {x});
}
Value GraphBuilder::hardmax(Value x, std::int64_t axis) { return add_standard(Hardmax{axis}, {x}); }

Value GraphBuilder::nll_loss(Value input, Value target, std::optional<Value> weight, LossReduction reduction,
                             std::optional<std::int64_t> ignore_index) {
  std::vector<Value> inputs{input, target};
  if (weight) inputs.push_back(*weight);
  return add_standard(NllLoss{reduction, ignore_index}, std::move(inputs));
}

// ---- shape ops

Value GraphBuilder::flatten(Value x, std::int64_t start_dim, std::int64_t end_dim) {
  return add_standard(Flatten{start_dim, end_dim}, {x});
}
Value GraphBuilder::reshape(Value x, std::vector<Dim> shape) { return add_standard(Reshape{std::move(shape)}, {x}); }
Value GraphBuilder::transpose(Value x, std::int64_t dim0, std::int64_t dim1) {
  return add_standard(Transpose{dim0, dim1}, {x});
}
Value GraphBuilder::permute(Value x, std::vector<std::int64_t> dims) {
  return add_standard(Permute{std::move(dims)}, {x});
}
Value GraphBuilder::concat(std::vector<Value> xs, std::int64_t axis) {
  return add_standard(Concat{axis}, std::move(xs));
}

std::vector<Value> GraphBuilder::split(Value x, const std::vector<std::int64_t>& sizes, std::int64_t axis) {
  const std::size_t count = sizes.empty() ? 1 : sizes.size();
  if (auto bad = unusable(std::span(&x, 1), Split::kind, {})) return std::vector<Value>(count, *bad);
  if (sizes.empty()) {
    return {
        record(fail(Errc::invalid_argument, "split needs at least one size"), default_name(Split::kind), Split::kind)};
  }
  std::vector<Value> pieces;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const Value piece = add_standard(Split{axis, sizes, static_cast<std::int64_t>(i)}, {x});
    if (!piece.valid()) return std::vector<Value>(count, piece);  // the first piece already says why
    pieces.push_back(piece);
  }
  return pieces;
}

std::vector<Value> GraphBuilder::chunk(Value x, std::int64_t chunks, std::int64_t axis) {
  const std::size_t count = chunks > 0 ? static_cast<std::size_t>(std::min(chunks, max_chunks)) : 1;
  if (auto bad = unusable(std::span(&x, 1), Split::kind, {})) return std::vector<Value>(count, *bad);
  auto invalid = [&](Error e) {
    return std::vector<Value>(count, record(std::move(e), default_name("chunk"), "chunk"));
  };
  if (chunks <= 0) return invalid(fail(Errc::invalid_argument, "chunks must be positive, got ", chunks));
  if (chunks > max_chunks) {
    return invalid(fail(Errc::out_of_range, "chunks ", chunks, " is more than the ", max_chunks,
                        " pieces (nodes) one chunk may make"));
  }
  const TensorType& t = nodes_[x.node_].type;
  auto ax = normalize_axis(axis, t.shape.rank());
  if (!ax) return invalid(std::move(ax).error());
  const Dim& d = t.shape[*ax];
  if (d.is_symbolic()) {
    return invalid(fail(Errc::shape_mismatch, "cannot chunk dim ", *ax, " of input ", t, ": its size '", to_string(d),
                        "' is symbolic"));
  }
  // PyTorch's chunk: pieces of ceil(n / chunks); a zero-sized dim still gives `chunks` pieces.
  const std::int64_t n = d.value;
  const std::int64_t piece = (n + chunks - 1) / chunks;
  std::vector<std::int64_t> sizes;
  if (piece == 0) {
    sizes.assign(count, 0);
  } else {
    const std::int64_t pieces = (n + piece - 1) / piece;
    sizes.assign(static_cast<std::size_t>(pieces), piece);
    sizes.back() = n - piece * (pieces - 1);
  }
  return split(x, sizes, axis);
}

Value GraphBuilder::slice(Value x, std::int64_t axis, std::optional<std::int64_t> start,
                          std::optional<std::int64_t> end, std::int64_t step) {
  return add_standard(Slice{axis, start, end, step}, {x});
}

Value GraphBuilder::pad(Value x, std::vector<std::int64_t> pads, PadMode mode, double value) {
  return add_standard(Pad{std::move(pads), mode, value}, {x});
}

Value GraphBuilder::upsample(Value x, double scale) { return upsample(x, scale, scale); }
Value GraphBuilder::upsample(Value x, double scale_h, double scale_w) {
  return add_standard(Upsample{scale_h, scale_w, UpsampleMode::nearest}, {x});
}

Value GraphBuilder::cast(Value x, DType dtype) { return add_standard(Cast{dtype}, {x}); }

Value GraphBuilder::weight(DType dtype, std::vector<std::int64_t> value_shape, std::vector<Dim> shape, bool trainable) {
  return add_standard(Weight{dtype, std::move(value_shape), std::move(shape), trainable}, {});
}

}  // namespace teeny
