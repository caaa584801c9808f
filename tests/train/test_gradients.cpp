// Gradient checks (training builds): every backward kernel against central finite differences of
// the forward, on small graphs with odd sizes, broadcasting, strides, padding, dilation and groups.
// Each case is a graph whose trained parameters feed the op under test, so that the op's dL/dx is
// checked through the parameters before it and its dL/dw directly. The loss is L = sum(y * R) for
// a fixed random R, so dL/dy = R. One list drives them all, in f64 (exact enough for a tight
// tolerance); a few cases run in f32 too, as a smoke test of the float kernels' backward. A test
// fails when an op of the standard set that has a backward is exercised by none of them.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

import teeny;

namespace {
using teeny::Dim;
using teeny::DType;
using teeny::GraphBuilder;
using teeny::Value;

struct GradCase {
  std::string name;
  std::function<teeny::Result<teeny::Graph>()> build;
};

// The finite-difference step and the tolerance on |analytic - numeric| relative to the gradient's
// scale, max(1, max |numeric|), per element type. The step is small enough that no kink (ReLU,
// abs, max) falls within it in these cases.
struct Precision {
  double epsilon;
  double tolerance;
};
// f64: the central difference errs by ~eps^2 |L'''| (truncation, ~1e-12) plus ~1e-16 |L| / eps
// (rounding of the forward, ~1e-9 for these losses, |L| ~ 10). The worst case seen is 4e-9
// (pad_reflect, the attention cases), so 1e-7 leaves a margin of ~25 while a wrong term of a
// backward (a missing factor or sum) is off by far more.
// f32: rounding of the forward (~1e-6 of the loss) divided by the step is ~1e-3 of the gradient.
template <class T>
constexpr Precision precision = std::same_as<T, double> ? Precision{1e-6, 1e-7} : Precision{1e-3, 2e-2};

teeny::Result<teeny::Graph> finish(GraphBuilder& b, Value y) {
  b.output("y", y);
  return std::move(b).build();
}

// A trained value of `shape` made from an input by a Linear (whose weight is then checked too).
Value trained(GraphBuilder& b, Value x, std::int64_t features, const std::string& name) {
  return b.linear(x, features).named(name);
}

std::vector<GradCase> cases(DType dt) {
  std::vector<GradCase> list;
  auto add = [&](std::string name, std::function<Value(GraphBuilder&)> body) {
    list.push_back({std::move(name), [body] {
                      GraphBuilder b;
                      return finish(b, body(b));
                    }});
  };
  // Linear: bias, no bias, leading dims flattened, a fused ReLU (its derivative from the output).
  add("linear", [dt](GraphBuilder& b) { return b.linear(b.input("x", dt, {3, 5}), 4).named("fc"); });
  add("linear_no_bias_3d",
      [dt](GraphBuilder& b) { return b.linear(b.input("x", dt, {2, 3, 5}), 7, false).named("fc"); });
  add("linear_relu_fused", [dt](GraphBuilder& b) {
    auto h = b.relu(b.linear(b.input("x", dt, {4, 6}), 5).named("fc1"));
    return b.linear(h, 3).named("fc2");
  });
  // Batched matmul with the second operand broadcast over the batch, and a matrix times itself.
  add("matmul_batched_broadcast", [dt](GraphBuilder& b) {
    auto a = trained(b, b.input("x", dt, {2, 3, 4}), 5, "fa");
    auto m = trained(b, b.input("x2", dt, {5, 3}), 6, "fb");
    return b.matmul(a, m);
  });
  add("matmul_self", [dt](GraphBuilder& b) {
    auto a = trained(b, b.input("x", dt, {4, 3}), 4, "fa");
    return b.matmul(a, a);
  });
  // Weights broadcast over the batch and a middle dim (a ViT's class token), concatenated with
  // trained values: their gradient sums dy over the dims they were repeated along.
  add("weight_broadcast", [dt](GraphBuilder& b) {
    auto h = trained(b, b.input("x", dt, {3, 2, 4}), 4, "fc");
    auto token = b.weight(dt, {1, 1, 4}, {3, 2, 4}).named("token");
    return b.concat({b.mul(token, h), h}, 1);
  });
  // Every unary function, on values a Linear makes (log, sqrt, reciprocal on positive ones).
  using Unary = Value (GraphBuilder::*)(Value);
  const std::pair<const char*, Unary> unaries[] = {{"sigmoid", &GraphBuilder::sigmoid},
                                                   {"tanh", &GraphBuilder::tanh},
                                                   {"silu", &GraphBuilder::silu},
                                                   {"hardswish", &GraphBuilder::hardswish},
                                                   {"hardsigmoid", &GraphBuilder::hardsigmoid},
                                                   {"exp", &GraphBuilder::exp},
                                                   {"abs", &GraphBuilder::abs},
                                                   {"neg", &GraphBuilder::neg},
                                                   {"relu", &GraphBuilder::relu}};
  // The thresholds and shrinks, with their parameters (random inputs are away from the kinks).
  add("unary_threshold_shrinks", [dt](GraphBuilder& b) {
    auto h = trained(b, b.input("x", dt, {3, 4}), 5, "fc");
    return b.add(b.softshrink(h, 0.3), b.threshold(b.hardshrink(h, 0.2), 0.1, -1.0));
  });
  for (const auto& [name, fn] : unaries) {
    add(std::string("unary_") + name,
        [fn, dt](GraphBuilder& b) { return (b.*fn)(trained(b, b.input("x", dt, {3, 4}), 5, "fc")); });
  }
  add("unary_gelu_erf", [dt](GraphBuilder& b) { return b.gelu(trained(b, b.input("x", dt, {3, 4}), 5, "fc")); });
  add("unary_gelu_tanh", [dt](GraphBuilder& b) {
    return b.gelu(trained(b, b.input("x", dt, {3, 4}), 5, "fc"), teeny::GeluApproximate::tanh);
  });
  add("unary_leaky_relu",
      [dt](GraphBuilder& b) { return b.leaky_relu(trained(b, b.input("x", dt, {3, 4}), 5, "fc"), 0.2); });
  add("unary_softplus",
      [dt](GraphBuilder& b) { return b.softplus(trained(b, b.input("x", dt, {3, 4}), 5, "fc"), 2.0, 1.0); });
  add("unary_elu", [dt](GraphBuilder& b) { return b.elu(trained(b, b.input("x", dt, {3, 4}), 5, "fc"), 0.7); });
  add("unary_log_sqrt_reciprocal", [dt](GraphBuilder& b) {
    auto positive = b.exp(trained(b, b.input("x", dt, {3, 4}), 5, "fc"));
    return b.add(b.add(b.log(positive), b.sqrt(positive)), b.reciprocal(positive));
  });
  // Binary ops with broadcasting both ways: a [2, 3, 4], b [2, 3, 1] and c [3, 4].
  using Binary = Value (GraphBuilder::*)(Value, Value);
  const std::pair<const char*, Binary> binaries[] = {{"add", &GraphBuilder::add},
                                                     {"sub", &GraphBuilder::sub},
                                                     {"mul", &GraphBuilder::mul},
                                                     {"maximum", &GraphBuilder::maximum},
                                                     {"minimum", &GraphBuilder::minimum}};
  for (const auto& [name, fn] : binaries) {
    add(std::string("binary_") + name + "_broadcast", [fn, dt](GraphBuilder& b) {
      auto x = b.input("x", dt, {2, 3, 4});
      auto a = trained(b, x, 4, "fa");
      auto col = trained(b, x, 1, "fb");
      auto c = trained(b, b.input("x2", dt, {3, 2}), 4, "fc");
      return (b.*fn)((b.*fn)(a, col), c);
    });
  }
  add("binary_div_pow", [dt](GraphBuilder& b) {
    auto x = b.input("x", dt, {2, 3});
    auto a = b.exp(trained(b, x, 4, "fa"));  // positive bases and divisors
    auto e = trained(b, x, 4, "fb");
    auto d = b.exp(trained(b, b.input("x2", dt, {1, 2}), 4, "fc"));
    return b.div(b.pow(a, e), d);
  });
  add("binary_add_relu_fused_and_fan_out", [dt](GraphBuilder& b) {
    auto h = trained(b, b.input("x", dt, {3, 4}), 5, "fa");
    auto s = b.relu(b.add(h, h));  // x + x: both slots of one value
    return b.mul(s, h);            // and h read a third time
  });
  // Shapes: flatten / reshape.
  add("reshape", [dt](GraphBuilder& b) {
    auto h = trained(b, b.input("x", dt, {2, 3, 4}), 6, "fa");
    return b.linear(b.flatten(h), 3).named("fb");
  });
  // Strided copies: transpose / permute, a stepped slice, a split, a concat of three (three
  // backward launches), one operand read twice.
  add("permute_slice_concat", [dt](GraphBuilder& b) {
    auto h = trained(b, b.input("x", dt, {2, 3, 4}), 5, "fa");
    auto p = b.permute(h, {2, 0, 1});            // [5, 2, 3]
    auto s = b.slice(p, 0, 1, std::nullopt, 2);  // rows 1, 3 of dim 0: [2, 2, 3]
    auto k = trained(b, b.input("x2", dt, {2, 3}), 3, "fb");
    auto t = b.transpose(b.reshape(k, {1, 3, 2}), 1, 2);  // [1, 2, 3]
    return b.concat({s, t, s}, 0);                        // [5, 2, 3]
  });
  // Pad, each mode between two convolutions (so dL/dx reaches the first one's weights): constant
  // with a fill, asymmetric pads and a crop; reflect and replicate over two dims; replicate of a
  // Linear's last dim.
  add("pad_constant_asymmetric_crop", [dt](GraphBuilder& b) {
    auto h = b.conv2d(b.input("x", dt, {2, 2, 5, 4}), 3, {2, 2}).named("conv");  // [2, 3, 4, 3]
    auto p = b.pad(h, {2, -1, 1, 0, 0, 1}, teeny::PadMode::constant, 0.5);       // [2, 4, 5, 4]
    return b.conv2d(p, 2, {2, 2}).named("conv2");
  });
  add("pad_reflect", [dt](GraphBuilder& b) {
    auto h = b.conv2d(b.input("x", dt, {2, 2, 5, 4}), 3, {2, 2}).named("conv");  // [2, 3, 4, 3]
    auto p = b.pad(h, {2, 1, 1, 3}, teeny::PadMode::reflect);                    // [2, 3, 8, 6]
    return b.conv2d(p, 2, {3, 2}, {.stride = {2, 1}}).named("conv2");
  });
  add("pad_replicate", [dt](GraphBuilder& b) {
    auto h = b.conv2d(b.input("x", dt, {2, 2, 5, 4}), 3, {2, 2}).named("conv");  // [2, 3, 4, 3]
    auto p = b.pad(h, {1, 3, 2, 0}, teeny::PadMode::replicate);                  // [2, 3, 6, 7]
    return b.conv2d(p, 2, {2, 3}).named("conv2");
  });
  add("pad_replicate_last_dim", [dt](GraphBuilder& b) {
    auto h = trained(b, b.input("x", dt, {2, 3, 4}), 5, "fa");  // [2, 3, 5]
    auto p = b.pad(h, {3, 1}, teeny::PadMode::replicate);       // [2, 3, 9]
    return b.linear(p, 2).named("fb");
  });
  // Nearest upsampling of odd sizes: doubling (an exact shortcut), integer and fractional scales.
  add("upsample_nearest_2", [dt](GraphBuilder& b) {
    auto h = b.conv2d(b.input("x", dt, {2, 2, 4, 4}), 3, {2, 2}).named("conv");  // [2, 3, 3, 3]
    return b.conv2d(b.upsample(h, 2), 2, {2, 2}).named("conv2");
  });
  add("upsample_nearest_3x2", [dt](GraphBuilder& b) {
    auto h = b.conv2d(b.input("x", dt, {1, 2, 4, 6}), 3, {2, 2}).named("conv");  // [1, 3, 3, 5]
    return b.upsample(h, 3, 2);                                                  // [1, 3, 9, 10]
  });
  add("upsample_nearest_fractional", [dt](GraphBuilder& b) {
    auto h = b.conv2d(b.input("x", dt, {2, 1, 4, 6}), 2, {2, 2}).named("conv");  // [2, 2, 3, 5]
    return b.upsample(h, 1.5, 2.5);                                              // [2, 2, 4, 12]
  });
  // Cast to f64 and back: the gradient crosses both casts (in an f64 graph both are to f64 itself:
  // a round trip through f32 would round away the step).
  add("cast_f64_round_trip", [dt](GraphBuilder& b) {
    auto h = trained(b, b.input("x", dt, {3, 4}), 5, "fa");
    auto c = b.cast(b.cast(h, DType::f64), dt);
    return b.linear(c, 3).named("fb");
  });
  // Convolutions: stride, padding, dilation, groups, depthwise, 1-D, no bias, fused ReLU.
  add("conv2d_stride_pad_dilation_groups", [dt](GraphBuilder& b) {
    auto x = b.input("x", dt, {2, 4, 7, 6});
    return b.conv2d(x, 6, {3, 2}, {.stride = {2, 1}, .padding = {1, 2}, .dilation = {1, 2}, .groups = 2}).named("conv");
  });
  add("conv2d_depthwise_no_bias_relu", [dt](GraphBuilder& b) {
    auto x = b.input("x", dt, {1, 3, 5, 5});
    auto h = b.relu(b.conv2d(x, 3, {3, 3}, {.padding = {1, 1}, .groups = 3, .bias = false}).named("dw"));
    return b.conv2d(h, 2, {1, 1}).named("pw");
  });
  add("conv2d_depthwise", [dt](GraphBuilder& b) {
    auto x = b.input("x", dt, {2, 3, 5, 4});
    return b.conv2d(x, 3, {3, 3}, {.stride = {2, 1}, .padding = {1, 1}, .groups = 3}).named("dw");
  });
  add("conv1d", [dt](GraphBuilder& b) {
    return b.conv1d(b.input("x", dt, {2, 3, 9}), 4, 3, {.stride = 2, .padding = 1, .dilation = 2}).named("conv");
  });
  // Pooling, each after a convolution so that dL/dx reaches its weights.
  add("max_pool2d_pad_dilation_ceil", [dt](GraphBuilder& b) {
    auto h = b.conv2d(b.input("x", dt, {2, 2, 7, 8}), 3, {2, 2}).named("conv");
    return b.max_pool2d(h, {3, 2},
                        {.stride = teeny::Size2{2, 2}, .padding = {1, 1}, .dilation = {1, 2}, .ceil_mode = true});
  });
  add("avg_pool2d_ceil", [dt](GraphBuilder& b) {
    auto h = b.conv2d(b.input("x", dt, {2, 2, 7, 6}), 3, {2, 2}).named("conv");
    return b.avg_pool2d(h, {3, 3}, {.stride = teeny::Size2{2, 2}, .padding = {1, 1}, .ceil_mode = true});
  });
  add("avg_pool2d_exclude_pad", [dt](GraphBuilder& b) {
    auto h = b.conv2d(b.input("x", dt, {2, 2, 7, 6}), 3, {2, 2}).named("conv");
    return b.avg_pool2d(h, {2, 3}, {.padding = {1, 1}, .count_include_pad = false});
  });
  add("adaptive_avg_pool2d", [dt](GraphBuilder& b) {
    auto h = b.conv2d(b.input("x", dt, {2, 2, 7, 5}), 3, {2, 2}).named("conv");
    return b.adaptive_avg_pool2d(h, {4, 3});
  });
  // BatchNorm in training: batch statistics, running ones updated, a fused ReLU; 1-D too.
  add("batch_norm2d_train_relu", [dt](GraphBuilder& b) {
    auto h = b.conv2d(b.input("x", dt, {3, 2, 5, 4}), 3, {3, 3}, {.padding = {1, 1}}).named("conv");
    return b.relu(b.batch_norm2d(h).named("bn"));
  });
  add("batch_norm1d_no_affine", [dt](GraphBuilder& b) {
    auto h = trained(b, b.input("x", dt, {5, 3}), 4, "fc");
    return b.batch_norm1d(h, {.affine = false}).named("bn");
  });
  // Layer norm over the last two dims (weight and bias, weight only), RMS norm.
  add("layer_norm", [dt](GraphBuilder& b) {
    auto h = trained(b, b.input("x", dt, {2, 3, 4}), 5, "fc");
    auto n = b.layer_norm(h, {3, 5}).named("norm");
    return b.layer_norm(n, {5}, {.bias = false}).named("norm2");
  });
  add("group_norm", [dt](GraphBuilder& b) {
    auto h = b.conv2d(b.input("x", dt, {2, 2, 4, 3}), 6, {2, 2}).named("conv");
    return b.group_norm(h, 3).named("norm");
  });
  add("rms_norm", [dt](GraphBuilder& b) {
    auto h = trained(b, b.input("x", dt, {3, 4}), 6, "fc");
    return b.rms_norm(h, {6}, {.eps = 1e-6}).named("norm");
  });
  // Softmax along a middle axis, log-softmax along the last.
  add("softmax_middle_axis", [dt](GraphBuilder& b) {
    auto h = trained(b, b.input("x", dt, {2, 3, 4}), 5, "fc");
    return b.softmax(h, 1);
  });
  // Reductions: sum and mean over some axes, keepdim or not; amax over the last.
  add("reduce_sum_mean_max", [dt](GraphBuilder& b) {
    auto h = trained(b, b.input("x", dt, {2, 3, 4}), 5, "fc");       // [2, 3, 5]
    auto s = b.sum(h, {0, 2}, true);                                 // [1, 3, 1]
    auto m = b.mean(h, {1});                                         // [2, 5]
    auto x = b.max(h, {-1});                                         // [2, 3]
    return b.add(b.add(b.flatten(s, 0), b.sum(m)), b.mean(x, {0}));  // [3] + [] + [3]
  });
  // Cumulative sums: inclusive along the last axis, exclusive and reversed along the first.
  add("cumsum", [dt](GraphBuilder& b) {
    auto h = trained(b, b.input("x", dt, {2, 3, 4}), 5, "fc");
    return b.add(b.cumsum(h, -1), b.cumsum(h, 0, true, true));
  });
  add("log_softmax", [dt](GraphBuilder& b) { return b.log_softmax(trained(b, b.input("x", dt, {3, 4}), 6, "fc")); });
  // Attention, q, k and v each made by a Linear: more queries than keys, causal with more and with
  // fewer queries than keys (an explicit scale), k and v broadcast over batch dims, and one value
  // as q, k and v at once (its three gradients add up).
  add("attention_query_len_differs", [dt](GraphBuilder& b) {
    auto q = trained(b, b.input("x", dt, {2, 4, 6}), 5, "fq");  // [2, 4, 5]
    auto x2 = b.input("x2", dt, {2, 3, 6});
    auto k = trained(b, x2, 5, "fk");  // [2, 3, 5]
    auto v = trained(b, x2, 7, "fv");  // [2, 3, 7]
    return b.attention(q, k, v);
  });
  add("attention_causal_more_queries", [dt](GraphBuilder& b) {
    auto q = trained(b, b.input("x", dt, {2, 5, 3}), 4, "fq");  // [2, 5, 4]
    auto x2 = b.input("x2", dt, {2, 3, 3});
    return b.attention(q, trained(b, x2, 4, "fk"), trained(b, x2, 3, "fv"), {.causal = true});
  });
  add("attention_causal_fewer_queries_scaled", [dt](GraphBuilder& b) {
    auto q = trained(b, b.input("x", dt, {3, 4}), 4, "fq");  // [3, 4]
    auto x2 = b.input("x2", dt, {5, 4});
    return b.attention(q, trained(b, x2, 4, "fk"), trained(b, x2, 2, "fv"), {.causal = true, .scale = 0.7});
  });
  add("attention_broadcast_batch", [dt](GraphBuilder& b) {
    auto q = trained(b, b.input("x", dt, {2, 3, 4, 6}), 5, "fq");   // [2, 3, 4, 5]
    auto k = trained(b, b.input("x2", dt, {3, 6}), 5, "fk");        // [3, 5]: every batch entry
    auto v = trained(b, b.input("x3", dt, {2, 1, 3, 6}), 4, "fv");  // [2, 1, 3, 4]: over dim 1
    return b.attention(q, k, v);                                    // [2, 3, 4, 4]
  });
  add("attention_self_causal", [dt](GraphBuilder& b) {
    auto h = trained(b, b.input("x", dt, {2, 4, 3}), 6, "fc");
    return b.attention(h, h, h, {.causal = true});
  });
  return list;
}

template <class T>
std::vector<T> random_values(std::int64_t n, std::mt19937& rng, T scale = 1) {
  std::normal_distribution<T> dist(0, scale);
  std::vector<T> v(static_cast<std::size_t>(n));
  for (T& x : v) x = dist(rng);
  return v;
}

// L = sum(y * r) in double over the model's output "y".
template <class Model, class T>
double loss_of(Model& model, std::span<const teeny::TensorRef> inputs, const std::vector<T>& r) {
  REQUIRE(model.forward(inputs));
  auto y = model.output("y");
  REQUIRE(y);
  const auto* v = static_cast<const T*>(y->data);
  double loss = 0;
  for (std::size_t i = 0; i < r.size(); ++i) loss += static_cast<double>(v[i]) * r[i];
  return loss;
}

std::set<std::size_t> exercised_ops;  // op-set indices whose backward some case ran

// Checks case `c` built in dtype_of<T> on the CPU model computing in T with `threads` threads.
template <class T>
void check_case(const GradCase& c, std::size_t threads = 1) {
  CAPTURE(c.name);
  CAPTURE(teeny::name(teeny::dtype_of<T>));
  CAPTURE(threads);
  auto graph = c.build();
  REQUIRE(graph);
  auto model = teeny::load_cpu_for_training<T>(*graph, {}, {.threads = threads});
  REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
  std::mt19937 rng(1234);
  // Inputs and parameters at random (BatchNorm buffers keep their initial 0 / 1).
  std::vector<std::vector<T>> input_data;
  std::vector<teeny::TensorRef> inputs;
  for (const auto& port : model->inputs()) {
    const auto& op = std::get<teeny::InputOp>(model->dag()[port.node].op);
    auto shape = op.shape.bind({});
    REQUIRE(shape);
    input_data.push_back(random_values<T>(shape->numel(), rng));
    inputs.push_back({port.name, teeny::dtype_of<T>, *shape, std::as_bytes(std::span(input_data.back()))});
  }
  auto params = model->parameter_gradients();
  REQUIRE(!params.empty());
  for (auto& p : params) {
    auto* v = static_cast<T*>(p.value.data);
    const auto init = random_values<T>(p.value.shape.numel(), rng, T(0.7));
    std::memcpy(v, init.data(), init.size() * sizeof(T));
  }
  for (const auto& node : model->dag().nodes()) {
    std::visit(
        [&]<class Op>(const Op& op) {
          if constexpr (!teeny::InputOpType<Op>) {
            if (teeny::has_backward(op)) exercised_ops.insert(node.op.index());
          }
        },
        node.op);
  }

  // Analytic: one forward, dL/dy = r, backward.
  REQUIRE(model->forward(inputs));
  auto y = model->output("y");
  REQUIRE(y);
  const auto r = random_values<T>(y->shape.numel(), rng);
  auto dy = model->output_grad("y");
  REQUIRE(dy);
  std::memcpy(dy->data, r.data(), r.size() * sizeof(T));
  model->zero_grad();
  REQUIRE(model->backward());

  // Numeric, for every parameter element (the cases are small).
  const Precision tol = precision<T>;
  for (auto& p : params) {
    CAPTURE(std::string(p.key));
    auto* v = static_cast<T*>(p.value.data);
    const auto* g = static_cast<const T*>(p.grad.data);
    const std::int64_t n = p.value.shape.numel();
    std::vector<double> numeric(static_cast<std::size_t>(n));
    double scale = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const T saved = v[i];
      v[i] = saved + static_cast<T>(tol.epsilon);
      const double up = loss_of(*model, inputs, r);
      v[i] = saved - static_cast<T>(tol.epsilon);
      const double down = loss_of(*model, inputs, r);
      v[i] = saved;
      numeric[static_cast<std::size_t>(i)] = (up - down) / (2 * tol.epsilon);
      scale = std::max(scale, std::abs(numeric[static_cast<std::size_t>(i)]));
    }
    for (std::int64_t i = 0; i < n; ++i) {
      const double want = numeric[static_cast<std::size_t>(i)];
      CAPTURE(i);
      CAPTURE(want);
      CHECK(std::abs(g[i] - want) <= tol.tolerance * std::max(1.0, scale));
    }
  }
}
}  // namespace

TEST_CASE("gradient check: every backward kernel against central finite differences (f64)") {
  for (const GradCase& c : cases(DType::f64)) {
    SUBCASE(c.name.c_str()) { check_case<double>(c); }
  }
}

TEST_CASE("gradient check in f32: the float kernels' backward (GEMM, convolution, norms, a cast, attention)") {
  for (const GradCase& c : cases(DType::f32)) {
    const bool smoke = c.name == "linear_relu_fused" || c.name == "conv2d_stride_pad_dilation_groups" ||
                       c.name == "batch_norm2d_train_relu" || c.name == "layer_norm" ||
                       c.name == "cast_f64_round_trip" || c.name == "attention_self_causal";
    if (smoke) {
      SUBCASE(c.name.c_str()) { check_case<float>(c); }
    }
  }
}

TEST_CASE("gradient check on two threads: the convolution backward splits a batch's images over them") {
  // Each thread sums its images' dW and db apart; the sums are then added (conv cases hold 2 images).
  for (const GradCase& c : cases(DType::f64)) {
    if (c.name.starts_with("conv")) {
      SUBCASE(c.name.c_str()) { check_case<double>(c, 2); }
    }
  }
}

TEST_CASE("gradient check: every op with a backward is covered by a case") {
  exercised_ops.clear();
  for (const GradCase& c : cases(DType::f64)) check_case<double>(c);
  using Ops = teeny::standard_ops<double>;
  std::vector<std::string> missing;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (
        [&] {
          using Op = std::variant_alternative_t<I, Ops>;
          if constexpr (!teeny::InputOpType<Op> && teeny::BackwardOp<Op>) {
            // Checked in test_trainable_model instead: dropout draws a new mask every training
            // forward (finite differences cannot see one), so against the forward's mask; an
            // embedding reads integer indices, so against rows added by hand. nll_loss reads
            // integer targets too, which this check's random inputs cannot be: its finite
            // differences are tests/ops/cases.hpp's (tests/ops/test_cases.cpp).
            const std::string name(Op{}.name());
            const bool elsewhere = name == "dropout" || name == "embedding" || name == "nll_loss";
            if (!exercised_ops.contains(I) && !elsewhere) missing.push_back(name);
          }
        }(),
        ...);
  }(std::make_index_sequence<std::variant_size_v<Ops>>{});
  std::string names;
  for (const auto& name : missing) names += name + " ";
  CAPTURE(names);
  CHECK(missing.empty());
}
