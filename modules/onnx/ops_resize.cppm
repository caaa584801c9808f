// teeny.onnx:ops_resize — Resize and Upsample of [N, C, H, W]: nearest neighbour at whole-number
// factors as teeny's Upsample, linear at any scale or size as Linear ops with interpolation
// matrices.
module;
#include "onnx/proto.hpp"
export module teeny.onnx:ops_resize;
import teeny.std;
import teeny.core;
import teeny.graph;
import :context;
import :tensors;

namespace teeny::onnx::convert {

// The matrix [out, in] of linear resizing along one axis, in `dtype`: row o weighs the two inputs
// around o's source coordinate (ONNX's coordinate_transformation_mode), clamped to the axis as
// ONNX's reference and PyTorch do.
Result<Tensor> linear_resize_matrix(std::int64_t in, std::int64_t out, double scale, std::string_view coordinates,
                                    DType dtype) {
  std::vector<double> a(static_cast<std::size_t>(out * in), 0.0);
  for (std::int64_t o = 0; o < out; ++o) {
    double x = 0;
    if (coordinates == "align_corners") {  // the resized length unrounded, as ONNX's reference has it
      const double resized = static_cast<double>(in) * scale;
      x = out == 1 ? 0.0 : static_cast<double>(o) * static_cast<double>(in - 1) / (resized - 1);
    } else if (coordinates == "asymmetric") {
      x = static_cast<double>(o) / scale;
    } else if (coordinates == "pytorch_half_pixel" && out == 1) {
      x = 0;
    } else {  // half_pixel, pytorch_half_pixel
      x = (static_cast<double>(o) + 0.5) / scale - 0.5;
    }
    x = std::clamp(x, 0.0, static_cast<double>(in - 1));
    const auto i0 = static_cast<std::int64_t>(std::floor(x));
    const std::int64_t i1 = std::min(i0 + 1, in - 1);
    const double w1 = x - static_cast<double>(i0);
    a[static_cast<std::size_t>(o * in + i0)] += 1 - w1;
    a[static_cast<std::size_t>(o * in + i1)] += w1;
  }
  auto t = Tensor::zeros(dtype, ConcreteShape{out, in});
  if (!t) return std::move(t).error();
  visit_dtype(dtype, [&]<class T>(std::type_identity<T>) {
    T* p = reinterpret_cast<T*>(t->data());
    for (std::size_t i = 0; i < a.size(); ++i) p[i] = convert_element<T>(a[i]);
  });
  return t;
}

// Linear Resize of [N, C, H, W] along H and W: a Linear over W with linear_resize_matrix as its
// weight, then the same over H between two transposes. Each output is its two neighbours' weighted
// sum, plus zero times the other inputs of its row: exact to rounding, but a non-finite input makes
// its whole row (and column) NaN, not only its neighbours (a native kernel is planned). H and W
// must be concrete.
Result<void> resize_linear(NodeContext& n, Value x, const TensorType& xt, const std::vector<double>& scales,
                           const std::vector<std::int64_t>& sizes, const std::string& coordinates) {
  if (!is_floating(xt.dtype)) return NodeContext::unsupported("linear Resize of a ", xt.dtype, " value");
  if (coordinates != "half_pixel" && coordinates != "pytorch_half_pixel" && coordinates != "align_corners" &&
      coordinates != "asymmetric") {
    return NodeContext::unsupported("linear Resize with coordinate_transformation_mode '", coordinates, "'");
  }
  struct Along {
    std::size_t axis;
    std::int64_t in, out;
    Tensor matrix;
  };
  std::vector<Along> steps;
  for (const std::size_t axis : {std::size_t{3}, std::size_t{2}}) {  // W, then H
    const Dim& d = xt.shape[axis];
    if (!d.is_concrete() || d.value < 1) {
      return NodeContext::unsupported("linear Resize along the dim ", to_string(d), " of ", xt.shape);
    }
    const std::int64_t in = d.value;
    const double scale = sizes.empty() ? scales[axis] : static_cast<double>(sizes[axis]) / static_cast<double>(in);
    const double out_size =
        sizes.empty() ? std::floor(static_cast<double>(in) * scale) : static_cast<double>(sizes[axis]);
    if (!(scale > 0) || !(out_size >= 1) ||
        out_size * static_cast<double>(in) > static_cast<double>(n.limits().max_elements)) {
      return fail(Errc::out_of_range, "resizing dim ", axis, " of ", xt.shape, " at scale ", scale, " needs a ",
                  out_size, " x ", in, " matrix: an empty one, or one over the limit of ", n.limits().max_elements,
                  " elements");
    }
    const auto out = static_cast<std::int64_t>(out_size);
    if (out == in && scale == 1) continue;  // every mode maps o to o
    auto matrix = linear_resize_matrix(in, out, scale, coordinates, xt.dtype);
    if (!matrix) return std::move(matrix).error();
    steps.push_back({axis, in, out, std::move(*matrix)});
  }
  GraphBuilder& b = n.builder();
  Value y = x;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    Along& step = steps[i];
    const bool last = i + 1 == steps.size();
    const bool along_h = step.axis == 2;
    if (along_h) y = b.add(Transpose{2, 3}, {y}, n.part_name("h_last"));
    const std::string name = last && !along_h ? n.name() : n.part_name(along_h ? "along_h" : "along_w");
    y = b.add(Linear{step.in, step.out, false}, {y}, name);
    n.add_weight(name, "weight", std::move(step.matrix));
    if (along_h) y = b.add(Transpose{2, 3}, {y}, last ? n.name() : n.part_name("h_back"));
  }
  n.set_output(0, y);
  return ok();
}

}  // namespace teeny::onnx::convert

export namespace teeny::onnx::convert {

// Resize (opset 10 on) and Upsample (before it) of [N, C, H, W]. Nearest neighbour by whole-number
// factors of H and W is teeny's Upsample, whose source pixel is floor(dst / scale): ONNX's
// coordinate modes agree with it there for 'asymmetric' with nearest_mode 'floor' (what PyTorch
// exports for nn.Upsample), and for 'half_pixel' and 'pytorch_half_pixel' with
// 'round_prefer_floor' or 'round_prefer_ceil' (at a whole-number scale no source position is
// half-way between two pixels). Linear at any scale or size is resize_linear. Other modes and
// cubic are refused.
Result<void> resize(NodeContext& n) {
  auto x = n.value(0);
  if (!x) return std::move(x).error();
  auto xt = n.type(0);
  if (!xt) return std::move(xt).error();
  if (xt->shape.rank() != 4)
    return NodeContext::unsupported("resizing a value of rank ", xt->shape.rank(),
                                    " (teeny's Upsample is [N, C, H, W])");
  const bool legacy = n.node().op_type == "Upsample" || n.opset() < 11;
  std::string mode = n.attr("mode", std::string("nearest"));
  if (mode == "bilinear") mode = "linear";  // Upsample's name for it at opsets 7 and 8
  if (mode != "nearest" && mode != "linear") {
    return NodeContext::unsupported("mode '", mode, "' (teeny resizes by nearest neighbour and linearly; cubic is ",
                                    "planned)");
  }
  const std::string coordinates =
      legacy ? "asymmetric" : n.attr("coordinate_transformation_mode", std::string("half_pixel"));
  const std::string rounding = legacy ? "floor" : n.attr("nearest_mode", std::string("round_prefer_floor"));
  if (n.has("antialias") || n.has("axes") || n.has("keep_aspect_ratio_policy")) {
    return NodeContext::unsupported("Resize's antialias, axes or keep_aspect_ratio_policy");
  }
  // The scales: an attribute (Upsample before opset 9), input 1 (Upsample, Resize at opset 10), or
  // input 2; or sizes, input 3.
  std::vector<double> scales;
  std::vector<std::int64_t> sizes;
  const std::size_t scales_input = n.node().op_type == "Upsample" || n.opset() < 11 ? 1 : 2;
  if (n.node().op_type == "Upsample" && n.opset() < 9) {
    for (const proto::Attribute& a : n.node().attributes) {
      if (a.name == "scales") scales.assign(a.floats.begin(), a.floats.end());
    }
  } else if (const Tensor* c = n.constant(scales_input); c != nullptr && c->numel() > 0) {
    if (c->dtype() != DType::f32) return fail(Errc::dtype_mismatch, "scales are ", c->dtype(), ", not f32");
    for (std::int64_t i = 0; i < c->numel(); ++i) scales.push_back(reinterpret_cast<const float*>(c->data())[i]);
  } else if (n.has_input(3)) {
    auto given = n.ints(3);
    if (!given) return std::move(given).error();
    if (given->size() != 4) return fail(Errc::invalid_argument, "sizes has ", given->size(), " values for rank 4");
    sizes = std::move(*given);
    for (std::size_t i = 0; i < 4; ++i) {
      const Dim& d = xt->shape[i];
      if (!d.is_concrete() || d.value < 1) {
        return NodeContext::unsupported("sizes ", Shape(std::vector<Dim>(sizes.begin(), sizes.end())), " for ",
                                        xt->shape, ", whose dim ", i, " is symbolic or empty");
      }
      scales.push_back(static_cast<double>(sizes[i]) / static_cast<double>(d.value));
    }
  } else if (n.has_input(scales_input)) {
    return NodeContext::unsupported("scales computed at run time");
  }
  if (scales.size() != 4) return fail(Errc::invalid_argument, "expected 4 scales (or sizes), got ", scales.size());
  if (scales[0] != 1 || scales[1] != 1)
    return NodeContext::unsupported("resizing N or C (scales ", scales[0], ", ", scales[1], ")");
  if (mode == "linear") return resize_linear(n, *x, *xt, scales, sizes, coordinates);
  for (std::size_t i = 2; i < 4; ++i) {
    if (!(scales[i] >= 1) || scales[i] != std::floor(scales[i]) || scales[i] > 4096) {
      return NodeContext::unsupported(sizes.empty() ? "the scale " : "the size ratio ", scales[i],
                                      " (teeny resizes by nearest neighbour at whole-number factors)");
    }
  }
  const bool asymmetric_floor = coordinates == "asymmetric" && rounding == "floor";
  const bool centred = (coordinates == "half_pixel" || coordinates == "pytorch_half_pixel") &&
                       (rounding == "round_prefer_floor" || rounding == "round_prefer_ceil");
  if (!asymmetric_floor && !centred) {
    return NodeContext::unsupported("coordinate_transformation_mode '", coordinates, "' with nearest_mode '", rounding,
                                    "'");
  }
  n.set_output(0, n.builder().add(Upsample{scales[2], scales[3], UpsampleMode::nearest}, {*x}, n.name()));
  return ok();
}

}  // namespace teeny::onnx::convert
