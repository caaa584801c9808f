// teeny.onnx:ops_layers — converters of ONNX's ops with weights or windows: Gemm and MatMul,
// Conv and ConvTranspose, the pools, the normalizations, Softmax, the reductions and the losses.
// Weights must be constants (initializers): they become the teeny op's parameters, stored under
// "<node>.<slot>".
export module teeny.onnx:ops_layers;
import teeny.std;
import teeny.core;
import teeny.graph;
import :context;
import :tensors;

namespace teeny::onnx::convert {

// The weight at input i, which must be a constant.
Result<Tensor> weight(NodeContext& n, std::size_t i, std::string_view what) {
  const Tensor* c = n.constant(i);
  if (c == nullptr) {
    return NodeContext::unsupported(what, " (input ", i, ") is computed at run time; teeny takes it only as a ",
                                    "constant (an initializer)");
  }
  return copy_of(*c);
}

// Multiplies a float tensor's elements by `factor`.
Result<void> scale(Tensor& t, double factor) {
  if (factor == 1) return ok();
  const auto n = static_cast<std::size_t>(t.numel());
  if (t.dtype() == DType::f32) {
    auto* p = reinterpret_cast<float*>(t.data());
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<float>(p[i] * factor);
  } else if (t.dtype() == DType::f64) {
    auto* p = reinterpret_cast<double*>(t.data());
    for (std::size_t i = 0; i < n; ++i) p[i] *= factor;
  } else {
    return NodeContext::unsupported("a scale factor on a ", t.dtype(), " weight");
  }
  return ok();
}

// The dims of a type, each of which must be concrete.
Result<std::vector<std::int64_t>> concrete(const TensorType& t, std::string_view what) {
  std::vector<std::int64_t> dims;
  for (const Dim& d : t.shape.dims()) {
    if (!d.is_concrete())
      return NodeContext::unsupported(what, " needs concrete dims, and ", t.shape, " has a symbolic one");
    dims.push_back(d.value);
  }
  return dims;
}

// A convolution's or pool's window over `spatial` dims: kernel, strides, dilations, and the pads
// before and after each dim (ONNX's auto_pad resolved against the input's dims).
struct Window {
  std::vector<std::int64_t> kernel, stride, dilation, begin, end;
  bool symmetric() const { return begin == end; }
};

Result<Window> window_of(NodeContext& n, const TensorType& x, std::vector<std::int64_t> kernel) {
  const std::size_t spatial = kernel.size();
  Window w;
  w.kernel = std::move(kernel);
  w.stride = n.attr("strides", std::vector<std::int64_t>(spatial, 1));
  w.dilation = n.attr("dilations", std::vector<std::int64_t>(spatial, 1));
  const std::vector<std::int64_t> pads = n.attr("pads", std::vector<std::int64_t>(2 * spatial, 0));
  if (w.stride.size() != spatial || w.dilation.size() != spatial || pads.size() != 2 * spatial) {
    return fail(Errc::invalid_argument, "strides, dilations and pads must have ", spatial, ", ", spatial, " and ",
                2 * spatial, " values");
  }
  w.begin.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(spatial));
  w.end.assign(pads.begin() + static_cast<std::ptrdiff_t>(spatial), pads.end());
  const std::string auto_pad = n.attr("auto_pad", std::string("NOTSET"));
  if (auto_pad == "VALID") {
    std::fill(w.begin.begin(), w.begin.end(), 0);
    std::fill(w.end.begin(), w.end.end(), 0);
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    auto dims = concrete(x, "auto_pad SAME");
    if (!dims) return std::move(dims).error();
    for (std::size_t i = 0; i < spatial; ++i) {
      const std::int64_t in = (*dims)[dims->size() - spatial + i];
      const std::int64_t out = (in + w.stride[i] - 1) / w.stride[i];
      const std::int64_t extent = (w.kernel[i] - 1) * w.dilation[i] + 1;
      const std::int64_t total = std::max<std::int64_t>(0, (out - 1) * w.stride[i] + extent - in);
      const std::int64_t small = total / 2;
      w.begin[i] = auto_pad == "SAME_UPPER" ? small : total - small;
      w.end[i] = total - w.begin[i];
    }
  } else if (auto_pad != "NOTSET") {
    return fail(Errc::invalid_argument, "auto_pad is '", auto_pad, "'");
  }
  return w;
}

// x padded explicitly (teeny's Pad lists pairs from the last dim) with `value`.
Value pad_explicitly(NodeContext& n, Value x, const Window& w, double value) {
  std::vector<std::int64_t> pads;
  for (std::size_t i = w.begin.size(); i-- > 0;) {
    pads.push_back(w.begin[i]);
    pads.push_back(w.end[i]);
  }
  return n.builder().add(Pad{pads, PadMode::constant, value}, {x}, n.part_name("pad"));
}

// A rank-3 value [N, C, L] as [N, C, 1, L], and back: 1-d pools run as 2-d ones.
Value to_2d(NodeContext& n, Value x, const TensorType& t) {
  const auto& d = t.shape.dims();
  return n.builder().add(Reshape{{d[0], d[1], 1, d[2]}}, {x}, n.part_name("as_2d"));
}
Value from_2d(NodeContext& n, Value y) {
  const TensorType* t = n.builder().type_of(y);
  if (t == nullptr) return y;
  const auto& d = t->shape.dims();
  return n.builder().add(Reshape{{d[0], d[1], d[3]}}, {y}, n.name());
}

// One output phase's convolution weight for a ConvTranspose of weight w [C_in, C_out / groups, kh,
// kw] (4-d) at strides s: phase (a, b) computes the outputs at rows a mod s_h and columns b mod s_w
// from the taps a + j s_h, b + i s_w of the window. Channels swap within each group and the taps
// reverse, as a correlation computes the transposed convolution's sum. Phase (0, 0) at strides 1 is
// the whole window flipped.
Result<Tensor> phase_weight(const Tensor& w, std::int64_t groups, std::array<std::int64_t, 2> phase,
                            std::array<std::int64_t, 2> stride) {
  const ConcreteShape& s = w.shape();
  const std::int64_t in_g = s[0] / groups;
  const std::int64_t out_g = s[1];
  const std::int64_t kh = s[2];
  const std::int64_t kw = s[3];
  const std::int64_t len_h = (kh - phase[0] + stride[0] - 1) / stride[0];
  const std::int64_t len_w = (kw - phase[1] + stride[1] - 1) / stride[1];
  auto shape = ConcreteShape::from(std::vector<std::int64_t>{out_g * groups, in_g, len_h, len_w});
  if (!shape) return std::move(shape).error();
  auto out = Tensor::zeros(w.dtype(), *shape);
  if (!out) return std::move(out).error();
  const std::size_t size = size_of(w.dtype());
  std::byte* to = out->data();
  for (std::int64_t g = 0; g < groups; ++g) {
    for (std::int64_t j = 0; j < out_g; ++j) {
      for (std::int64_t i = 0; i < in_g; ++i) {
        for (std::int64_t th = 0; th < len_h; ++th) {
          for (std::int64_t tw = 0; tw < len_w; ++tw, to += size) {
            const std::int64_t y = phase[0] + (len_h - 1 - th) * stride[0];
            const std::int64_t x = phase[1] + (len_w - 1 - tw) * stride[1];
            const std::int64_t from = (((g * in_g + i) * out_g + j) * kh + y) * kw + x;
            std::memcpy(to, w.data() + static_cast<std::size_t>(from) * size, size);
          }
        }
      }
    }
  }
  return out;
}

// The pads of a ConvTranspose's output (before, after per spatial dim): its `pads`, or, with
// output_shape or auto_pad SAME_*, the total the output's size leaves, split as ONNX says (the
// odd one at the end for SAME_UPPER, else at the start); an output larger than the convolution
// makes is extended at the end (a negative end pad).
Result<void> transposed_pads(NodeContext& n, const std::vector<std::int64_t>& in, const Window& w,
                             const std::vector<std::int64_t>& output_padding, std::vector<std::int64_t>& begin,
                             std::vector<std::int64_t>& end) {
  const std::size_t spatial = in.size();
  std::vector<std::int64_t> shape = n.attr("output_shape", std::vector<std::int64_t>{});
  if (shape.size() == spatial + 2) shape.erase(shape.begin(), shape.begin() + 2);
  if (!shape.empty() && shape.size() != spatial) {
    return fail(Errc::invalid_argument, "output_shape has ", shape.size(), " values for ", spatial, " spatial dims");
  }
  const std::string auto_pad = n.attr("auto_pad", std::string("NOTSET"));
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  if (!same && auto_pad != "NOTSET" && auto_pad != "VALID") {
    return fail(Errc::invalid_argument, "auto_pad is '", auto_pad, "'");
  }
  begin = w.begin;
  end = w.end;
  if (auto_pad == "VALID") {
    std::fill(begin.begin(), begin.end(), 0);
    std::fill(end.begin(), end.end(), 0);
  }
  if (shape.empty() && !same) return ok();
  for (std::size_t i = 0; i < spatial; ++i) {
    // full: the output's size with no pads (bounded: every factor is a checked model value)
    const std::int64_t full = w.stride[i] * (in[i] - 1) + output_padding[i] + (w.kernel[i] - 1) * w.dilation[i] + 1;
    const std::int64_t want = shape.empty() ? in[i] * w.stride[i] : shape[i];
    if (want < 1 || want > (std::int64_t{1} << 31)) {
      return fail(Errc::invalid_argument, "output_shape asks for ", want, " elements along spatial dim ", i);
    }
    const std::int64_t total = full - want;
    if (total < 0) {  // a larger output: zeros at the end, as output_padding adds (ONNX's test data)
      begin[i] = 0;
      end[i] = total;
      continue;
    }
    begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    end[i] = total - begin[i];
  }
  return ok();
}

// One MaxPool2d or AvgPool2d over the last two dims of `in`, padded symmetrically.
template <bool Max>
Value add_pool2d(NodeContext& n, Value in, Size2 kernel, Size2 stride, Size2 pad, Size2 dilation, bool ceil_mode,
                 bool count_pad, const std::string& name) {
  if constexpr (Max) {
    return n.builder().add(MaxPool2d{kernel, stride, pad, dilation, ceil_mode}, {in}, name);
  } else {
    return n.builder().add(AvgPool2d{kernel, stride, pad, ceil_mode, count_pad}, {in}, name);
  }
}

// A pool over [N, C, D, H, W] as two 2-d pools, exact because a box window is separable: over
// (H, W) on [N, C * D, H, W], then over D on [N, C, D, H' * W'] with a (kD, 1) window. A max of
// maxes is the max; a mean of means is the mean, as each window's divisor (its size, or its cells
// inside the input) is the product of one count per dim. C, D, H and W must be concrete.
template <bool Max>
Result<void> pool_3d(NodeContext& n, Value x, TensorType xt, const Window& w, bool ceil_mode, bool count_pad) {
  const std::vector<Dim>& d = xt.shape.dims();
  for (std::size_t i = 1; i < 5; ++i) {
    if (!d[i].is_concrete())
      return NodeContext::unsupported("a 3-d pool needs concrete dims after the batch, not ", xt.shape);
  }
  const auto merged = checked_mul(d[1].value, d[2].value);
  if (!merged) return fail(Errc::out_of_range, "input ", xt.shape, " is too large");
  GraphBuilder& b = n.builder();
  const Value planes = b.add(Reshape{{d[0], *merged, d[3], d[4]}}, {x}, n.part_name("planes"));
  const Value hw = add_pool2d<Max>(n, planes, Size2{w.kernel[1], w.kernel[2]}, Size2{w.stride[1], w.stride[2]},
                                   Size2{w.begin[1], w.begin[2]}, Size2{w.dilation[1], w.dilation[2]}, ceil_mode,
                                   count_pad, n.part_name("pool_hw"));
  const TensorType* hwt = b.type_of(hw);
  if (hwt == nullptr) {  // the builder refused the pool; build() reports why
    n.set_output(0, hw);
    return ok();
  }
  const Dim h = hwt->shape.dims()[2];
  const Dim wd = hwt->shape.dims()[3];
  const auto area = checked_mul(h.value, wd.value);
  if (!area) return fail(Errc::out_of_range, "pooled planes of ", hwt->shape, " are too large");
  const Value columns = b.add(Reshape{{d[0], d[1], d[2], *area}}, {hw}, n.part_name("columns"));
  const Value depth = add_pool2d<Max>(n, columns, Size2{w.kernel[0], 1}, Size2{w.stride[0], 1}, Size2{w.begin[0], 0},
                                      Size2{w.dilation[0], 1}, ceil_mode, count_pad, n.part_name("pool_d"));
  const TensorType* dt = b.type_of(depth);
  if (dt == nullptr) {
    n.set_output(0, depth);
    return ok();
  }
  n.set_output(0, b.add(Reshape{{d[0], d[1], dt->shape.dims()[2], h, wd}}, {depth}, n.name()));
  return ok();
}

}  // namespace teeny::onnx::convert

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

// Conv over 1 or 2 spatial dims, its weight (and bias) constant. Pads that differ before and
// after a dim become an explicit Pad first.
Result<void> conv(NodeContext& n) {
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  auto xt = n.type(0);
  if (!xt) return std::move(xt).error();
  auto w = weight(n, 1, "the weight");
  if (!w) return std::move(w).error();
  const std::size_t rank = w->shape().rank();
  if (rank != 3 && rank != 4) {
    return NodeContext::unsupported("a convolution over ", rank - 2, " spatial dims (teeny has 1-d and 2-d)");
  }
  std::vector<std::int64_t> kernel(w->shape().begin() + 2, w->shape().end());
  kernel = n.attr("kernel_shape", kernel);
  auto win = window_of(n, *xt, kernel);
  if (!win) return std::move(win).error();
  Value in = *x;
  if (!win->symmetric()) {
    in = pad_explicitly(n, in, *win, 0);
    std::fill(win->begin.begin(), win->begin.end(), 0);
  }
  const std::int64_t groups = n.attr("group", std::int64_t{1});
  const std::int64_t out_channels = w->shape()[0];
  const std::int64_t in_channels = w->shape()[1] * groups;
  std::optional<Tensor> bias;
  if (n.has_input(2)) {
    auto b = weight(n, 2, "the bias");
    if (!b) return std::move(b).error();
    bias = std::move(*b);
  }
  Value y;
  if (rank == 3) {
    y = n.builder().add(Conv1d{in_channels, out_channels, kernel[0], win->stride[0], win->begin[0], win->dilation[0],
                               groups, bias.has_value()},
                        {in}, n.name());
  } else {
    y = n.builder().add(Conv2d{in_channels, out_channels, Size2{kernel[0], kernel[1]},
                               Size2{win->stride[0], win->stride[1]}, Size2{win->begin[0], win->begin[1]},
                               Size2{win->dilation[0], win->dilation[1]}, groups, bias.has_value()},
                        {in}, n.name());
  }
  n.add_weight(n.name(), "weight", std::move(*w));
  if (bias) n.add_weight(n.name(), "bias", std::move(*bias));
  n.set_output(0, y);
  return ok();
}

// ConvTranspose over 1 or 2 spatial dims, from convolutions (a native kernel is planned), exact
// in both ways below: every product it sums is one of the transposed convolution's. Spatial dims
// must be concrete; a 1-d one runs as 2-d, [N, C, 1, L].
//  - By phases (strides at most the window, no dilation): the outputs at rows a mod s_h and columns
//    b mod s_w are a stride-1 convolution of the input with that phase's taps (phase_weight); the
//    s_h s_w results interleave (a reshape of their concatenation), and the pads crop.
//  - Otherwise by stuffing: the input with stride - 1 zeros after each element (a reshape to
//    [N, C, H, 1, W, 1], a pad, a reshape back), padded by the window's extent - 1 less the pads (a
//    negative pad crops), convolved at stride 1 with the whole window flipped: stride^2 times the
//    multiplications, and where nothing reaches an output a fast convolution (Winograd) may leave a
//    rounding error instead of its exact 0.
Result<void> conv_transpose(NodeContext& n) {
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  auto xt = n.type(0);
  if (!xt) return std::move(xt).error();
  auto w = weight(n, 1, "the weight");
  if (!w) return std::move(w).error();
  const std::size_t rank = w->shape().rank();
  if (rank != 3 && rank != 4) {
    return NodeContext::unsupported("a transposed convolution over ", rank - 2,
                                    " spatial dims (teeny has 1-d and 2-d)");
  }
  const std::vector<Dim>& xd = xt->shape.dims();
  if (xd.size() != rank) return fail(Errc::shape_mismatch, "weight ", w->shape(), " for an input ", xt->shape);
  const std::size_t spatial = rank - 2;
  const std::int64_t groups = n.attr("group", std::int64_t{1});
  const std::int64_t in_channels = w->shape()[0];
  if (groups < 1 || in_channels % groups != 0) {
    return fail(Errc::invalid_argument, "group ", groups, " does not divide the weight's ", in_channels, " channels");
  }
  if (!xd[1].is_concrete() || xd[1].value != in_channels) {
    return fail(Errc::shape_mismatch, "weight ", w->shape(), " takes ", in_channels, " channels, the input is ",
                xt->shape);
  }
  std::vector<std::int64_t> in;
  for (std::size_t i = 0; i < spatial; ++i) {
    if (!xd[2 + i].is_concrete()) {
      return NodeContext::unsupported("a transposed convolution over the symbolic dims of ", xt->shape);
    }
    in.push_back(xd[2 + i].value);
  }
  const std::vector<std::int64_t> kernel(w->shape().begin() + 2, w->shape().end());
  if (n.attr("kernel_shape", kernel) != kernel) {
    return fail(Errc::shape_mismatch, "kernel_shape differs from the weight's window ", w->shape());
  }
  auto win = window_of(n, *xt, kernel);  // strides, dilations, pads (its auto_pad is overridden below)
  if (!win) return std::move(win).error();
  const std::vector<std::int64_t> output_padding = n.attr("output_padding", std::vector<std::int64_t>(spatial, 0));
  if (output_padding.size() != spatial) {
    return fail(Errc::invalid_argument, "output_padding has ", output_padding.size(), " values for ", spatial,
                " spatial dims");
  }
  for (std::size_t i = 0; i < spatial; ++i) {
    const bool valid = win->stride[i] >= 1 && win->dilation[i] >= 1 && win->begin[i] >= 0 && win->end[i] >= 0 &&
                       output_padding[i] >= 0 && in[i] <= (std::int64_t{1} << 31) && kernel[i] <= (1 << 16) &&
                       win->stride[i] <= (1 << 16) && win->dilation[i] <= (1 << 16) && output_padding[i] <= (1 << 16);
    if (!valid) {
      return fail(Errc::invalid_argument, "spatial dim ", i, ": stride ", win->stride[i], ", dilation ",
                  win->dilation[i], ", pads ", win->begin[i], " and ", win->end[i], ", output_padding ",
                  output_padding[i], " for a size of ", in[i]);
    }
  }
  std::vector<std::int64_t> begin, end;
  if (auto pads = transposed_pads(n, in, *win, output_padding, begin, end); !pads) return std::move(pads).error();

  std::optional<Tensor> bias;
  if (n.has_input(2)) {
    auto t = weight(n, 2, "the bias");
    if (!t) return std::move(t).error();
    bias = std::move(*t);
  }
  // As 2-d: a 1-d one is [N, C, 1, L] with a window of height 1.
  using Pair = std::array<std::int64_t, 2>;
  const auto two = [&](const std::vector<std::int64_t>& v, std::int64_t fill) {
    return spatial == 1 ? Pair{fill, v[0]} : Pair{v[0], v[1]};
  };
  const Pair size = two(in, 1), k = two(kernel, 1), stride = two(win->stride, 1), dilation = two(win->dilation, 1);
  const Pair pad_begin = two(begin, 0), pad_end = two(end, 0), extra = two(output_padding, 0);
  const std::int64_t out_channels = w->shape()[1] * groups;
  const Dim batch = xd[0];
  GraphBuilder& b = n.builder();
  Value v = *x;
  if (spatial == 1) {
    v = b.add(Reshape{{batch, in_channels, 1, in[0]}}, {v}, n.part_name("as_2d"));
    auto w4 = reshaped(*w, {in_channels, w->shape()[1], 1, kernel[0]});
    if (!w4) return std::move(w4).error();
    w = std::move(w4);
  }
  Pair out{};  // the output's spatial size
  for (std::size_t i = 0; i < 2; ++i) {
    out[i] = stride[i] * (size[i] - 1) + (k[i] - 1) * dilation[i] + 1 - pad_begin[i] - pad_end[i] + extra[i];
    if (out[i] < 1) {
      return fail(Errc::shape_mismatch, "the output would have ", out[i], " elements along spatial dim ", i, " (input ",
                  xt->shape, ", weight ", w->shape(), ")");
    }
  }
  const bool phased = dilation == Pair{1, 1} && stride[0] <= k[0] && stride[1] <= k[1] && stride != Pair{1, 1};
  Value y;
  if (phased) {
    // Each phase padded to Q rows and columns: in - 1 + ceil(k / s), the longest phase's.
    const Pair q{size[0] - 1 + (k[0] + stride[0] - 1) / stride[0], size[1] - 1 + (k[1] + stride[1] - 1) / stride[1]};
    std::vector<Value> rows;
    for (std::int64_t ph = 0; ph < stride[0]; ++ph) {
      std::vector<Value> columns;
      for (std::int64_t pw = 0; pw < stride[1]; ++pw) {
        auto pw_weight = phase_weight(*w, groups, Pair{ph, pw}, stride);
        if (!pw_weight) return std::move(pw_weight).error();
        const Pair len{pw_weight->shape()[2], pw_weight->shape()[3]};
        const std::string name = n.part_name(cat("phase_", ph, "_", pw));
        Value p = b.add(Conv2d{in_channels, out_channels, Size2{len[0], len[1]}, Size2{1, 1},
                               Size2{len[0] - 1, len[1] - 1}, Size2{1, 1}, groups, false},
                        {v}, name);
        n.add_weight(name, "weight", std::move(*pw_weight));
        const Pair short_by{q[0] - (size[0] + len[0] - 1), q[1] - (size[1] + len[1] - 1)};
        if (short_by != Pair{0, 0}) {
          p = b.add(Pad{{0, short_by[1], 0, short_by[0]}, PadMode::constant, 0.0}, {p}, n.part_name("phase_pad"));
        }
        columns.push_back(b.add(Reshape{{batch, out_channels, q[0], 1, q[1], 1}}, {p}, n.part_name("phase")));
      }
      rows.push_back(columns.size() == 1 ? columns[0] : b.add(Concat{5}, columns, n.part_name("columns")));
    }
    y = rows.size() == 1 ? rows[0] : b.add(Concat{3}, rows, n.part_name("rows"));
    const Pair full{q[0] * stride[0], q[1] * stride[1]};
    y = b.add(Reshape{{batch, out_channels, full[0], full[1]}}, {y}, n.part_name("interleaved"));
    // out[o] = full[o + pad_begin]: crop the start, and crop or extend (output_padding) the end
    y = b.add(Pad{{-pad_begin[1], out[1] + pad_begin[1] - full[1], -pad_begin[0], out[0] + pad_begin[0] - full[0]},
                  PadMode::constant,
                  0.0},
              {y}, bias || spatial == 1 ? n.part_name("crop") : n.name());
    if (bias) {
      const std::string name = spatial == 1 ? n.part_name("bias") : n.name();
      y = b.add(Binary{BinaryOp::add, std::vector<std::int64_t>{out_channels, 1, 1}, false}, {y}, name);
      auto b3 = reshaped(*bias, {out_channels, 1, 1});
      if (!b3) return std::move(b3).error();
      n.add_weight(name, "other", std::move(*b3));
    }
  } else {
    Pair left{}, right{};
    for (std::size_t i = 0; i < 2; ++i) {
      const std::int64_t extent = (k[i] - 1) * dilation[i] + 1;
      left[i] = extent - 1 - pad_begin[i];
      right[i] = extent - 1 - pad_end[i] + extra[i] - (stride[i] - 1);  // the stuffing leaves stride - 1 zeros
    }
    if (stride != Pair{1, 1}) {
      v = b.add(Reshape{{batch, in_channels, size[0], 1, size[1], 1}}, {v}, n.part_name("spread"));
      v = b.add(Pad{{0, stride[1] - 1, 0, 0, 0, stride[0] - 1}, PadMode::constant, 0.0}, {v}, n.part_name("stuff"));
      v = b.add(Reshape{{batch, in_channels, size[0] * stride[0], size[1] * stride[1]}}, {v}, n.part_name("stuffed"));
    }
    Size2 padding{0, 0};
    if (left == right && left[0] >= 0 && left[1] >= 0) {
      padding = Size2{left[0], left[1]};
    } else {
      v = b.add(Pad{{left[1], right[1], left[0], right[0]}, PadMode::constant, 0.0}, {v}, n.part_name("pad"));
    }
    auto flipped = phase_weight(*w, groups, Pair{0, 0}, Pair{1, 1});
    if (!flipped) return std::move(flipped).error();
    const std::string name = spatial == 1 ? n.part_name("conv_2d") : n.name();
    y = b.add(Conv2d{in_channels, out_channels, Size2{k[0], k[1]}, Size2{1, 1}, padding,
                     Size2{dilation[0], dilation[1]}, groups, bias.has_value()},
              {v}, name);
    n.add_weight(name, "weight", std::move(*flipped));
    if (bias) n.add_weight(name, "bias", std::move(*bias));
  }
  if (spatial == 1) y = b.add(Reshape{{batch, out_channels, out[1]}}, {y}, n.name());
  n.set_output(0, y);
  return ok();
}

// MaxPool and AveragePool over 1, 2 or 3 spatial dims. ONNX's stride defaults to 1 (PyTorch's to
// the kernel) and its average excludes the padding unless count_include_pad.
template <bool Max>
Result<void> pool(NodeContext& n) {
  if (Max && n.wants_output(1)) return NodeContext::unsupported("MaxPool's Indices output");
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  auto xt = n.type(0);
  if (!xt) return std::move(xt).error();
  std::vector<std::int64_t> kernel = n.attr("kernel_shape", std::vector<std::int64_t>{});
  if (kernel.empty() || kernel.size() > 3) {
    return NodeContext::unsupported("a pool over ", kernel.size(), " spatial dims (teeny has 1-d, 2-d and 3-d)");
  }
  if (xt->shape.rank() != kernel.size() + 2) {
    return fail(Errc::shape_mismatch, "kernel_shape has ", kernel.size(), " dims for an input ", xt->shape);
  }
  auto win = window_of(n, *xt, kernel);
  if (!win) return std::move(win).error();
  const bool ceil_mode = n.attr("ceil_mode", std::int64_t{0}) != 0;
  const bool count_pad = n.attr("count_include_pad", std::int64_t{0}) != 0;
  if (Max && n.attr("storage_order", std::int64_t{0}) != 0) return NodeContext::unsupported("storage_order 1");
  if (!Max &&
      n.attr("dilations", std::vector<std::int64_t>(kernel.size(), 1)) != std::vector<std::int64_t>(kernel.size(), 1)) {
    return NodeContext::unsupported("AveragePool with dilations");
  }
  const bool one_d = kernel.size() == 1;
  Value in = one_d ? to_2d(n, *x, *xt) : *x;
  if (!win->symmetric()) {
    if (!Max && !count_pad) {
      return NodeContext::unsupported("AveragePool with pads that differ before and after a dim, padding not counted");
    }
    Window padded = *win;
    if (one_d) {  // the 2-d view's H dim is not padded
      padded.begin.insert(padded.begin.begin(), 0);
      padded.end.insert(padded.end.begin(), 0);
    }
    in = pad_explicitly(n, in, padded, Max ? -std::numeric_limits<double>::infinity() : 0.0);
    std::fill(win->begin.begin(), win->begin.end(), 0);
  }
  if (kernel.size() == 3) {
    const TensorType* padded = n.builder().type_of(in);
    if (padded == nullptr) {  // the builder refused the pad; build() reports why
      n.set_output(0, in);
      return ok();
    }
    return pool_3d<Max>(n, in, TensorType(*padded), *win, ceil_mode, count_pad);  // a copy: adding ops moves types
  }
  const auto two = [&](const std::vector<std::int64_t>& v, std::int64_t fill) {
    return one_d ? Size2{fill, v[0]} : Size2{v[0], v[1]};
  };
  const Value y = add_pool2d<Max>(n, in, two(kernel, 1), two(win->stride, 1), two(win->begin, 0), two(win->dilation, 1),
                                  ceil_mode, count_pad, one_d ? n.part_name("pool_2d") : n.name());
  n.set_output(0, one_d ? from_2d(n, y) : y);
  return ok();
}

// GlobalAveragePool and GlobalMaxPool: over every spatial dim, kept as 1s.
template <bool Max>
Result<void> global_pool(NodeContext& n) {
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  auto xt = n.type(0);
  if (!xt) return std::move(xt).error();
  const auto rank = static_cast<std::int64_t>(xt->shape.rank());
  if (rank < 3) return fail(Errc::shape_mismatch, "input ", xt->shape, " has no spatial dims");
  std::vector<std::int64_t> axes;
  for (std::int64_t a = 2; a < rank; ++a) axes.push_back(a);
  n.set_output(0, n.builder().add(Reduce{Max ? ReduceOp::max : ReduceOp::mean, axes, true}, {*x}, n.name()));
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
