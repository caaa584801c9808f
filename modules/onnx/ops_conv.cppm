// teeny.onnx:ops_conv — converters of ONNX's windowed ops: Conv, ConvTranspose, MaxPool,
// AveragePool and the global pools, over teeny's 1-d and 2-d convolutions and 2-d pools. Weights
// must be constants (initializers): they become the teeny op's parameters, "<node>.<slot>".
export module teeny.onnx:ops_conv;
import teeny.std;
import teeny.core;
import teeny.graph;
import :context;
import :tensors;
import :ops_inputs;

namespace teeny::onnx::convert {

// A convolution's or pool's window over `spatial` dims: kernel, strides, dilations, and the pads
// before and after each dim (ONNX's auto_pad resolved against the input's dims, unless the caller
// resolves it: a transposed convolution's SAME means another thing).
struct Window {
  std::vector<std::int64_t> kernel, stride, dilation, begin, end;
  bool symmetric() const { return begin == end; }
};

Result<Window> window_of(NodeContext& n, const TensorType& x, std::vector<std::int64_t> kernel,
                         bool resolve_auto_pad = true) {
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
  const std::string auto_pad = resolve_auto_pad ? n.attr("auto_pad", std::string("NOTSET")) : "NOTSET";
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
  auto win = window_of(n, *xt, kernel, false);  // strides, dilations, pads: transposed_pads reads auto_pad
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

}  // namespace teeny::onnx::convert
