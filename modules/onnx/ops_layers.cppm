// teeny.onnx:ops_layers — converters of ONNX's ops with weights or over axes: Gemm and MatMul,
// the normalizations, Softmax, the reductions and the losses. Weights must be constants
// (initializers): they become the teeny op's parameters, stored under "<node>.<slot>".
export module teeny.onnx:ops_layers;
import teeny.std;
import teeny.core;
import teeny.graph;
import :context;
import :tensors;
import :ops_inputs;

export namespace teeny::onnx::convert {

// beta C added to y (C broadcasts as ONNX's Gemm says): a constant C as a constant operand.
Result<Value> add_c(NodeContext& n, Value y, float beta) {
  if (n.constant(2) == nullptr) {  // computed at run time
    if (beta != 1) return NodeContext::unsupported("Gemm with a C computed at run time and beta ", beta);
    auto c = n.value(2);
    if (!c) return std::move(c).error();
    return n.builder().add(Binary{BinaryOp::add}, {y, *c}, n.name());
  }
  auto c = weight(n, 2, "C");
  if (!c) return std::move(c).error();
  if (auto s = scale(*c, beta); !s) return std::move(s).error();
  std::vector<std::int64_t> dims;
  for (std::size_t i = 0; i < c->shape().rank(); ++i) dims.push_back(c->shape()[i]);
  const Value out = n.builder().add(Binary{BinaryOp::add, std::move(dims), false}, {y}, n.name());
  n.add_weight(n.name(), "other", std::move(*c));
  return out;
}

// Y = alpha A' B' + beta C. With B constant: a Linear whose weight is B' transposed (scaled by
// alpha) and whose bias is beta C when C is one value per column, else C added after it as a
// constant operand. With B computed at run time: a MatMul, scaled by alpha, and C added after it.
Result<void> gemm(NodeContext& n) {
  auto a = n.value(0);
  if (!a) return std::move(a).error();
  const float alpha = n.attr("alpha", 1.0F);
  const float beta = n.attr("beta", 1.0F);
  const bool trans_a = n.attr("transA", std::int64_t{0}) != 0;
  const bool trans_b = n.attr("transB", std::int64_t{0}) != 0;
  const bool with_c = n.has_input(2) && beta != 0;
  Value x = *a;
  if (trans_a) x = n.builder().add(Permute{{1, 0}}, {x}, n.part_name("transpose_a"));
  if (n.constant(1) == nullptr) {
    auto b = n.value(1);
    if (!b) return std::move(b).error();
    Value bt = trans_b ? n.builder().add(Permute{{1, 0}}, {*b}, n.part_name("transpose_b")) : *b;
    const bool last = alpha == 1 && !with_c;
    Value y = n.builder().add(MatMul{}, {x, bt}, last ? n.name() : n.part_name("matmul"));
    if (alpha != 1) {
      auto factor = Tensor::from<float>({alpha}, ConcreteShape{});
      if (!factor) return std::move(factor).error();
      const std::string node = with_c ? n.part_name("alpha") : n.name();
      y = n.builder().add(Binary{BinaryOp::mul, std::vector<std::int64_t>{}, false}, {y}, node);
      n.add_weight(node, "other", std::move(*factor));
    }
    if (with_c) {
      auto out = add_c(n, y, beta);
      if (!out) return std::move(out).error();
      y = *out;
    }
    n.set_output(0, y);
    return ok();
  }
  auto w = weight(n, 1, "B");
  if (!w) return std::move(w).error();
  if (w->shape().rank() != 2) return fail(Errc::shape_mismatch, "B is ", w->shape(), ", not a matrix");
  if (!trans_b) {  // B [K, N] -> the Linear's weight [N, K]
    auto t = transposed(*w);
    if (!t) return std::move(t).error();
    w = std::move(t);
  }
  if (auto s = scale(*w, alpha); !s) return std::move(s).error();
  const std::int64_t out = w->shape()[0];
  const std::int64_t in = w->shape()[1];
  std::optional<Tensor> bias;
  bool c_after = false;
  if (with_c) {
    auto c = weight(n, 2, "C");
    if (!c) return std::move(c).error();
    const ConcreteShape& cs = c->shape();
    const bool per_column = cs.numel() == out && (cs.rank() == 1 || (cs.rank() == 2 && cs[0] == 1));
    const bool single = cs.numel() == 1;
    if (per_column || single) {
      auto b = Tensor::zeros(c->dtype(), ConcreteShape{out});
      if (!b) return std::move(b).error();
      const std::size_t size = size_of(c->dtype());
      for (std::int64_t j = 0; j < out; ++j) {
        std::memcpy(b->data() + static_cast<std::size_t>(j) * size, c->data() + (single ? 0 : j * size), size);
      }
      if (auto s = scale(*b, beta); !s) return std::move(s).error();
      bias = std::move(*b);
    } else {
      c_after = true;
    }
  }
  const std::string linear = c_after ? n.part_name("linear") : n.name();
  Value y = n.builder().add(Linear{in, out, bias.has_value()}, {x}, linear);
  n.add_weight(linear, "weight", std::move(*w));
  if (bias) n.add_weight(linear, "bias", std::move(*bias));
  if (c_after) {
    auto added = add_c(n, y, beta);
    if (!added) return std::move(added).error();
    y = *added;
  }
  n.set_output(0, y);
  return ok();
}

// MatMul: a Linear without bias when B is a constant matrix, else teeny's MatMul.
Result<void> matmul(NodeContext& n) {
  auto a = n.value(0);
  if (!a) return std::move(a).error();
  if (const Tensor* b = n.constant(1); b != nullptr && b->shape().rank() == 2) {
    auto w = transposed(*b);  // [K, N] -> [N, K]
    if (!w) return std::move(w).error();
    const Value y = n.builder().add(Linear{w->shape()[1], w->shape()[0], false}, {*a}, n.name());
    n.add_weight(n.name(), "weight", std::move(*w));
    n.set_output(0, y);
    return ok();
  }
  auto b = n.value(1);
  if (!b) return std::move(b).error();
  n.set_output(0, n.builder().add(MatMul{}, {*a, *b}, n.name()));
  return ok();
}

// BatchNormalization at inference: its four inputs after X constant.
Result<void> batch_norm(NodeContext& n) {
  const bool test_mode = n.opset() >= 7 || n.attr("is_test", std::int64_t{0}) != 0;  // is_test before 7
  if (!test_mode || n.attr("training_mode", std::int64_t{0}) != 0 || n.wants_output(1) || n.wants_output(2)) {
    return NodeContext::unsupported("BatchNormalization in training mode");
  }
  if (n.attr("spatial", std::int64_t{1}) == 0) {
    return NodeContext::unsupported("BatchNormalization with spatial 0 (statistics per element; before opset 9)");
  }
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  auto xt = n.type(0);
  if (!xt) return std::move(xt).error();
  if (xt->shape.rank() < 2 || !xt->shape[1].is_concrete()) {
    return fail(Errc::shape_mismatch, "input ", xt->shape, " has no concrete channel dim");
  }
  const char* slots[] = {"weight", "bias", "running_mean", "running_var"};
  std::vector<Tensor> params;
  for (std::size_t i = 0; i < 4; ++i) {
    auto p = weight(n, i + 1, slots[i]);
    if (!p) return std::move(p).error();
    params.push_back(std::move(*p));
  }
  const auto spatial = static_cast<std::int64_t>(xt->shape.rank()) - 2;
  BatchNorm op{xt->shape[1].value, n.attr("epsilon", 1e-5F)};
  op.spatial_dims = std::max<std::int64_t>(spatial, 1);
  const Value y = n.builder().add(op, {*x}, n.name());
  for (std::size_t i = 0; i < 4; ++i) n.add_weight(n.name(), slots[i], std::move(params[i]));
  auto count = Tensor::zeros(DType::i64, ConcreteShape{});
  if (!count) return std::move(count).error();
  n.add_weight(n.name(), "num_batches_tracked", std::move(*count));
  n.set_output(0, y);
  return ok();
}

// LayerNormalization's optional outputs Mean and InvStdDev = 1 / sqrt(Var + epsilon), over the
// dims from `axis` on, kept as size 1 (what training exports ask for), built from teeny's ops.
Result<void> layer_norm_statistics(NodeContext& n, Value x, std::size_t axis, std::size_t rank, float epsilon) {
  GraphBuilder& b = n.builder();
  std::vector<std::int64_t> axes;
  for (std::size_t i = axis; i < rank; ++i) axes.push_back(static_cast<std::int64_t>(i));
  const Value mean = b.add(Reduce{ReduceOp::mean, axes, true}, {x}, n.part_name("mean"));
  if (n.wants_output(1)) n.set_output(1, mean);
  if (!n.wants_output(2)) return ok();
  const Value centered = b.add(Binary{BinaryOp::sub}, {x, mean}, n.part_name("centered"));
  const Value square = b.add(Binary{BinaryOp::mul}, {centered, centered}, n.part_name("square"));
  const Value variance = b.add(Reduce{ReduceOp::mean, axes, true}, {square}, n.part_name("variance"));
  auto shifted = with_scalar(n, BinaryOp::add, variance, epsilon, n.part_name("variance_epsilon"));
  if (!shifted) return std::move(shifted).error();
  const Value stddev = b.add(Unary{UnaryOp::sqrt}, {*shifted}, n.part_name("stddev"));
  n.set_output(2, b.add(Unary{UnaryOp::reciprocal}, {stddev}, n.part_name("inv_stddev")));
  return ok();
}

// LayerNormalization (opset 17): over the dims from `axis` on, its scale and bias constant.
Result<void> layer_norm(NodeContext& n) {
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  auto xt = n.type(0);
  if (!xt) return std::move(xt).error();
  auto axis = normalize_axis(n.attr("axis", std::int64_t{-1}), xt->shape.rank());
  if (!axis) return std::move(axis).error().context("attribute 'axis'");
  std::vector<std::int64_t> normalized;
  for (std::size_t i = *axis; i < xt->shape.rank(); ++i) {
    if (!xt->shape[i].is_concrete()) return NodeContext::unsupported("normalizing over a symbolic dim");
    normalized.push_back(xt->shape[i].value);
  }
  auto scale_w = weight(n, 1, "Scale");
  if (!scale_w) return std::move(scale_w).error();
  std::optional<Tensor> bias;
  if (n.has_input(2)) {
    auto b = weight(n, 2, "B");
    if (!b) return std::move(b).error();
    bias = std::move(*b);
  }
  const Value y =
      n.builder().add(LayerNorm{normalized, n.attr("epsilon", 1e-5F), true, bias.has_value()}, {*x}, n.name());
  n.add_weight(n.name(), "weight", std::move(*scale_w));
  if (bias) n.add_weight(n.name(), "bias", std::move(*bias));
  n.set_output(0, y);
  if (n.wants_output(1) || n.wants_output(2)) {
    return layer_norm_statistics(n, *x, *axis, xt->shape.rank(), n.attr("epsilon", 1e-5F));
  }
  return ok();
}

// InstanceNormalization: a GroupNorm with one group per channel.
Result<void> instance_norm(NodeContext& n) {
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  auto xt = n.type(0);
  if (!xt) return std::move(xt).error();
  if (xt->shape.rank() < 3 || !xt->shape[1].is_concrete()) {
    return fail(Errc::shape_mismatch, "input ", xt->shape, " has no concrete channel dim or no spatial dims");
  }
  const std::int64_t channels = xt->shape[1].value;
  auto s = weight(n, 1, "scale");
  if (!s) return std::move(s).error();
  auto b = weight(n, 2, "B");
  if (!b) return std::move(b).error();
  const Value y = n.builder().add(GroupNorm{channels, channels, n.attr("epsilon", 1e-5F), true}, {*x}, n.name());
  n.add_weight(n.name(), "weight", std::move(*s));
  n.add_weight(n.name(), "bias", std::move(*b));
  n.set_output(0, y);
  return ok();
}

// Softmax, LogSoftmax and Hardmax (Op). From opset 13 over one axis (default -1); before, over
// the dims from `axis` (default 1) on, flattened: the same when that is the last dim, else
// reshaped around it.
template <class Op>
Result<void> softmax(NodeContext& n) {
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  auto xt = n.type(0);
  if (!xt) return std::move(xt).error();
  const std::size_t rank = xt->shape.rank();
  if (n.opset() >= 13) {
    n.set_output(0, n.builder().add(Op{n.attr("axis", std::int64_t{-1})}, {*x}, n.name()));
    return ok();
  }
  auto axis = normalize_axis(n.attr("axis", std::int64_t{1}), std::max<std::size_t>(rank, 1));
  if (!axis) return std::move(axis).error().context("attribute 'axis'");
  if (*axis + 1 >= rank) {
    n.set_output(0, n.builder().add(Op{-1}, {*x}, n.name()));
    return ok();
  }
  auto dims = concrete(*xt, cat("a ", n.node().op_type, " over several dims (opset < 13)"));
  if (!dims) return std::move(dims).error();
  std::int64_t outer = 1;
  for (std::size_t i = 0; i < *axis; ++i) outer *= (*dims)[i];
  const Value flat = n.builder().add(Reshape{{outer, -1}}, {*x}, n.part_name("flatten"));
  const Value y = n.builder().add(Op{-1}, {flat}, n.part_name("softmax"));
  std::vector<Dim> back(dims->begin(), dims->end());
  n.set_output(0, n.builder().add(Reshape{back}, {y}, n.name()));
  return ok();
}

// A reduction's axes: an attribute before opset `input_from`, input 1 from it (none: every axis).
Result<std::vector<std::int64_t>> reduce_axes(NodeContext& n, std::int64_t input_from) {
  if (n.opset() < input_from) return n.attr("axes", std::vector<std::int64_t>{});
  if (!n.has_input(1)) return std::vector<std::int64_t>{};
  return n.ints(1);
}

// ReduceSum, ReduceMean, ReduceMax, ReduceProd (and ReduceMin as -max(-x)): axes as an attribute before
// opset 18 (13 for ReduceSum), as input 1 after; keepdims 1 by default; no axes means every axis,
// or none with noop_with_empty_axes.
template <ReduceOp Op, bool Min = false>
Result<void> reduce(NodeContext& n) {
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  auto axes = reduce_axes(n, Op == ReduceOp::sum ? 13 : 18);
  if (!axes) return std::move(axes).error();
  const bool keepdims = n.attr("keepdims", std::int64_t{1}) != 0;
  if (axes->empty() && n.attr("noop_with_empty_axes", std::int64_t{0}) != 0) {
    n.set_output(0, *x);
    return ok();
  }
  Value in = *x;
  if (Min) in = n.builder().add(Unary{UnaryOp::neg}, {in}, n.part_name("negate"));
  Value y = n.builder().add(Reduce{Op, *axes, keepdims}, {in}, Min ? n.part_name("max") : n.name());
  if (Min) y = n.builder().add(Unary{UnaryOp::neg}, {y}, n.name());
  n.set_output(0, y);
  return ok();
}

/// The reductions ONNX defines by formula, built from teeny's ops.
enum class Composed : std::uint8_t { sum_square, l1, l2, log_sum, log_sum_exp };

// ReduceSumSquare sum(x^2), ReduceL1 sum(|x|), ReduceL2 sqrt(sum(x^2)), ReduceLogSum log(sum(x)),
// ReduceLogSumExp log(sum(exp(x))), computed as max + log(sum(exp(x - max))) so that it does not
// overflow. Axes as an attribute before opset 18, as input 1 from it.
template <Composed Kind>
Result<void> reduce_composed(NodeContext& n) {
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  auto axes = reduce_axes(n, 18);
  if (!axes) return std::move(axes).error();
  const bool keepdims = n.attr("keepdims", std::int64_t{1}) != 0;
  if (axes->empty() && n.attr("noop_with_empty_axes", std::int64_t{0}) != 0) {
    return NodeContext::unsupported("noop_with_empty_axes on ", n.node().op_type);
  }
  GraphBuilder& b = n.builder();
  const auto sum = [&](Value v, bool last) {
    return b.add(Reduce{ReduceOp::sum, *axes, keepdims}, {v}, last ? n.name() : n.part_name("sum"));
  };
  switch (Kind) {
    case Composed::sum_square:
      n.set_output(0, sum(b.add(Binary{BinaryOp::mul}, {*x, *x}, n.part_name("square")), true));
      break;
    case Composed::l1: n.set_output(0, sum(b.add(Unary{UnaryOp::abs}, {*x}, n.part_name("abs")), true)); break;
    case Composed::l2: {
      const Value s = sum(b.add(Binary{BinaryOp::mul}, {*x, *x}, n.part_name("square")), false);
      n.set_output(0, b.add(Unary{UnaryOp::sqrt}, {s}, n.name()));
      break;
    }
    case Composed::log_sum: n.set_output(0, b.add(Unary{UnaryOp::log}, {sum(*x, false)}, n.name())); break;
    case Composed::log_sum_exp: {
      const Value kept = b.add(Reduce{ReduceOp::max, *axes, true}, {*x}, n.part_name("max"));
      const Value shifted = b.add(Binary{BinaryOp::sub}, {*x, kept}, n.part_name("shift"));
      const Value s = sum(b.add(Unary{UnaryOp::exp}, {shifted}, n.part_name("exp")), false);
      const Value log = b.add(Unary{UnaryOp::log}, {s}, n.part_name("log"));
      const Value max = keepdims ? kept : b.add(Reduce{ReduceOp::max, *axes, false}, {*x}, n.part_name("max_out"));
      n.set_output(0, b.add(Binary{BinaryOp::add}, {log, max}, n.name()));
      break;
    }
  }
  return ok();
}

// CumSum(x, axis): axis a constant scalar; exclusive and reverse 0 by default.
inline Result<void> cumsum(NodeContext& n) {
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  auto axis = n.ints(1);
  if (!axis) return std::move(axis).error();
  if (axis->size() != 1) return fail(Errc::invalid_argument, "axis has ", axis->size(), " values, not 1");
  const CumSum op{(*axis)[0], n.attr("exclusive", std::int64_t{0}) != 0, n.attr("reverse", std::int64_t{0}) != 0};
  n.set_output(0, n.builder().add(op, {*x}, n.name()));
  return ok();
}

// ArgMax, ArgMin: axis 0 and keepdims 1 by default; select_last_index from opset 12.
template <ArgOp Op>
Result<void> arg_reduce(NodeContext& n) {
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  const ArgReduce op{Op, n.attr("axis", std::int64_t{0}), n.attr("keepdims", std::int64_t{1}) != 0,
                     n.attr("select_last_index", std::int64_t{0}) != 0};
  n.set_output(0, n.builder().add(op, {*x}, n.name()));
  return ok();
}

// A loss's `reduction` attribute ("mean" by default).
Result<LossReduction> loss_reduction(NodeContext& n) {
  const std::string r = n.attr("reduction", std::string("mean"));
  for (const LossReduction known : {LossReduction::none, LossReduction::mean, LossReduction::sum}) {
    if (r == name(known)) return known;
  }
  return fail(Errc::invalid_argument, "reduction '", r, "' is not one of none, mean, sum");
}

// The NllLoss of `log_prob` and the node's target (input 1) and optional weights (input 2).
Result<Value> nll_of(NodeContext& n, Value log_prob, const std::string& node) {
  auto target = n.value(1);
  if (!target) return std::move(target).error();
  std::vector<Value> inputs{log_prob, *target};
  if (n.has_input(2)) {
    auto weight = n.value(2);
    if (!weight) return std::move(weight).error();
    inputs.push_back(*weight);
  }
  auto reduction = loss_reduction(n);
  if (!reduction) return std::move(reduction).error();
  std::optional<std::int64_t> ignore_index;
  if (n.has("ignore_index")) ignore_index = n.attr("ignore_index", std::int64_t{0});
  return n.builder().add(NllLoss{*reduction, ignore_index}, std::move(inputs), node);
}

// NegativeLogLikelihoodLoss (opset 12): input [N, C, d...] of log-probabilities, target [N, d...],
// optional weight [C]; ignore_index only when given.
Result<void> nll_loss(NodeContext& n) {
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  auto y = nll_of(n, *x, n.name());
  if (!y) return std::move(y).error();
  n.set_output(0, *y);
  return ok();
}

// SoftmaxCrossEntropyLoss (opset 12): LogSoftmax over the classes (dim 1), whose result is the
// optional second output, then NegativeLogLikelihoodLoss's rules.
Result<void> softmax_cross_entropy(NodeContext& n) {
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  const Value log_prob = n.builder().add(LogSoftmax{1}, {*x}, n.part_name("log_prob"));
  auto y = nll_of(n, log_prob, n.name());
  if (!y) return std::move(y).error();
  n.set_output(0, *y);
  if (n.wants_output(1)) n.set_output(1, log_prob);
  return ok();
}

}  // namespace teeny::onnx::convert
