#pragma once
// The one table of op cases: every executable op of standard_ops (InputOp aside: it has no kernel),
// each with the shapes and attributes that exercise its paths, made per element type by a generic
// lambda. It drives
//   - the CPU checks (tests/ops/test_cases.cpp): f32 against f64, and in training builds the
//     backward against central finite differences in f64;
//   - the CUDA checks (tests/cuda/test_kernels.cpp): forward and backward in f32, f64, f16 and
//     bf16 against the CPU in f64.
// "op cases: every op of standard_ops has a case" fails, naming the op, for an op without one.
// Cases that need more than this shape (a backward's tie rules, a running statistic, casts across
// dtypes, an operand shared by both inputs) stay beside their backend's tests.
#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ops/harness.hpp"

namespace op_harness {

/// A case's op, built once in each element type the checks run (f32, f64, f16, bf16);
/// `operator()<T>()` gives a copy. Its type depends on the op's types only, not on the lambda that
/// built them: every case of one op shares the checks' instantiations (with the lambda's own type,
/// each case instantiated them again, and tests/cuda/test_kernels.cpp took 300 s to compile).
template <class F32, class F64, class F16, class BF16>
struct OpPerType {
  F32 f32;
  F64 f64;
  F16 f16;
  BF16 bf16;
  template <class T>
  auto operator()() const {
    if constexpr (std::is_same_v<T, float>)
      return f32;
    else if constexpr (std::is_same_v<T, double>)
      return f64;
    else if constexpr (std::is_same_v<T, teeny::f16>)
      return f16;
    else {
      static_assert(std::is_same_v<T, teeny::bf16>, "the op cases run in f32, f64, f16 and bf16");
      return bf16;
    }
  }
};
/// `make` (a generic lambda: `[]<class T>() { ... return op; }`) run in each element type.
template <class Make>
auto per_type(const Make& make) {
  return OpPerType<decltype(make.template operator()<float>()), decltype(make.template operator()<double>()),
                   decltype(make.template operator()<teeny::f16>()),
                   decltype(make.template operator()<teeny::bf16>())> {
    make.template operator()<float>(),
    make.template operator()<double>(),
    make.template operator()<teeny::f16>(),
    make.template operator()<teeny::bf16>()
  };
}

/// One case: `make.template operator()<T>()` gives the op in element type T (an OpPerType).
template <class Make>
struct OpCase {
  std::string name;
  Make make;
  Operands operands;
  ConcreteShape out;
  teeny::RunPhase phase{};                     // the forward's (eval unless said)
  teeny::RunPhase backward_phase{true, 7, 3};  // the forward before a backward (training unless said)
  Tolerance tolerance{};
  bool smooth = true;  // false where the inputs sit on a kink (ties): no finite differences there
  // false where the op as built has no backward, which it must then refuse (a fused epilogue
  // whose derivative does not follow from its output)
  bool backward = true;
};

/// Calls `visit(OpCase{...})` for every case of the table.
template <class Visit>
void for_each_op_case(Visit&& visit) {
  using teeny::UnaryFn, teeny::BinaryFn, teeny::ReduceFn;
  const auto case_of = [&visit](std::string name, auto make, Operands operands, ConcreteShape out,
                                teeny::RunPhase phase = {}) {
    const auto ops = per_type(make);
    visit(OpCase<decltype(ops)>{std::move(name), ops, std::move(operands), std::move(out), phase});
  };

  // ---- linear ----
  // The GEMM's fused GELU (forward only: its derivative needs the pre-activation, which the op
  // does not keep) and a fused tanh, whose backward the op has.
  for (const bool bias : {true, false}) {
    Operands operands{{random_tensor({2, 20, 37}, 19)}, {random_tensor({19, 37}, 20)}};
    if (bias) operands.params.push_back(random_tensor({19}, 21));
    const UnaryFn fn = bias ? UnaryFn::gelu_tanh : UnaryFn::tanh;
    auto make = [bias, fn]<class T>() {
      teeny::linear_op<T> op;
      op.attrs.in_features = 37;
      op.attrs.out_features = 19;
      op.attrs.bias = bias;
      op.epilogue = {true, fn, {}};
      op.out = output<T>({2, 20, 19});
      return op;
    };
    const auto ops = per_type(make);
    OpCase<decltype(ops)> c{bias ? "linear, bias, gelu_tanh epilogue, partial tiles" : "linear, no bias, tanh epilogue",
                            ops,
                            std::move(operands),
                            {2, 20, 19}};
    c.backward = !bias;
    visit(c);
  }
  case_of("matmul, broadcast batches",
          []<class T>() {
            teeny::matmul_op<T> op;
            op.out = output<T>({2, 5, 3, 6});
            return op;
          },
          {{random_tensor({2, 1, 3, 4}, 35), random_tensor({5, 4, 6}, 36)}}, {2, 5, 3, 6});
  case_of("matmul, 1-d left operand",
          []<class T>() {
            teeny::matmul_op<T> op;
            op.out = output<T>({6});
            return op;
          },
          {{random_tensor({4}, 37), random_tensor({4, 6}, 38)}}, {6});

  // ---- elementwise: every unary function, every binary one with broadcasting, dropout ----
  const HostTensor act = random_tensor({3, 5, 7}, 1);
  for (std::size_t f = 0; f < teeny::unary_fn_count; ++f) {
    const auto fn = static_cast<UnaryFn>(f);
    const teeny::UnaryParams params = fn == UnaryFn::softplus     ? teeny::UnaryParams{2.0, 1.0}  // both branches
                                      : fn == UnaryFn::leaky_relu ? teeny::UnaryParams{0.1, 0}
                                      : fn == UnaryFn::elu        ? teeny::UnaryParams{1.5, 0}
                                                                  : teeny::UnaryParams{};
    const bool needs_positive = fn == UnaryFn::log || fn == UnaryFn::sqrt;
    const bool inside_unit = fn == UnaryFn::asin || fn == UnaryFn::acos || fn == UnaryFn::atanh || fn == UnaryFn::tan;
    const bool piecewise_constant =
        fn == UnaryFn::floor || fn == UnaryFn::ceil || fn == UnaryFn::round || fn == UnaryFn::sign;
    // hardswish and hardsigmoid over all three pieces; asin, acos, atanh and tan inside (-0.9, 0.9)
    // (their domain, away from the poles); acosh above 1.5; the piecewise-constant functions a
    // quarter away from every step (integers, and halves for round), so that finite differences
    // see their zero derivative; the others on [-2, 2].
    HostTensor x = needs_positive                                           ? positive(act)
                   : fn == UnaryFn::reciprocal                              ? away_from_zero(act)
                   : fn == UnaryFn::hardswish || fn == UnaryFn::hardsigmoid ? scaled(act, 2.5)
                   : inside_unit                                            ? scaled(act, 0.45)
                   : fn == UnaryFn::acosh                                   ? positive(act)
                                                                            : act;
    if (fn == UnaryFn::acosh) {
      for (double& v : x.values) v += 1.0;
    }
    if (piecewise_constant) {
      for (double& v : x.values) v = std::round(v) + (v < std::round(v) ? -0.25 : 0.25);
    }
    case_of("unary fn " + std::to_string(f),
            [fn, params]<class T>() {
              teeny::unary_op<T> op;
              op.fn = fn;
              op.params = params;
              op.out = output<T>({3, 5, 7});
              return op;
            },
            {{x}}, {3, 5, 7});
  }
  for (const BinaryFn fn : {BinaryFn::add, BinaryFn::sub, BinaryFn::mul, BinaryFn::div, BinaryFn::pow,
                            BinaryFn::maximum, BinaryFn::minimum, BinaryFn::fmod}) {
    HostTensor a = random_tensor({2, 1, 4}, 2);
    HostTensor b = random_tensor({3, 1}, 3);
    if (fn == BinaryFn::div || fn == BinaryFn::fmod) b = away_from_zero(b);
    if (fn == BinaryFn::pow) a = positive(a);
    case_of("binary fn " + std::to_string(static_cast<int>(fn)) + ", both operands broadcast",
            [fn]<class T>() {
              teeny::binary_op<T> op;
              op.fn = fn;
              op.out = output<T>({2, 3, 4});
              return op;
            },
            {{a, b}}, {2, 3, 4});
  }
  case_of("binary mul, sigmoid epilogue",
          []<class T>() {
            teeny::binary_op<T> op;
            op.fn = BinaryFn::mul;
            op.epilogue = {true, UnaryFn::sigmoid, {}};
            op.out = output<T>({2, 3, 4});
            return op;
          },
          {{random_tensor({2, 3, 4}, 4), random_tensor({3, 1}, 5)}}, {2, 3, 4});
  // A constant operand (the op's parameter "other", not trained), on either side.
  for (const bool first : {false, true}) {
    case_of(first ? "binary div, constant left operand" : "binary pow, constant right operand",
            [first]<class T>() {
              teeny::binary_op<T> op;
              op.fn = first ? BinaryFn::div : BinaryFn::pow;
              op.other = teeny::ConcreteShape{3, 1};
              op.other_first = first;
              op.out = output<T>({2, 3, 4});
              return op;
            },
            {{first ? away_from_zero(random_tensor({2, 3, 4}, 8)) : positive(random_tensor({2, 3, 4}, 8))},
             {random_tensor({3, 1}, 9)}},
            {2, 3, 4});
  }
  case_of(
      "dropout p=0.3, training phase",
      []<class T>() {
        teeny::dropout_op<T> op;
        op.attrs.p = 0.3;
        op.stream = 11;
        op.out = output<T>({4, 5, 6});
        return op;
      },
      {{random_tensor({4, 5, 6}, 6)}}, {4, 5, 6}, teeny::RunPhase{true, 7, 3});

  // ---- shape ----
  const HostTensor x3 = random_tensor({2, 3, 4}, 7);
  case_of("reshape",
          []<class T>() {
            teeny::reshape_op<T> op;
            op.out = output<T>({6, 4});
            return op;
          },
          {{x3}}, {6, 4});
  // Weights broadcast along a leading dim it lacks and a middle dim of 1, and one copied as is.
  case_of("weight, broadcast",
          []<class T>() {
            teeny::weight_op<T> op;
            op.attrs.value_shape = {3, 1, 4};
            op.out = output<T>({2, 3, 5, 4});
            return op;
          },
          {{}, {random_tensor({3, 1, 4}, 46)}}, {2, 3, 5, 4});
  case_of("weight, as is",
          []<class T>() {
            teeny::weight_op<T> op;
            op.attrs.value_shape = {2, 3};
            op.out = output<T>({2, 3});
            return op;
          },
          {{}, {random_tensor({2, 3}, 47)}}, {2, 3});
  case_of("permute",
          []<class T>() {
            teeny::permute_op<T> op;
            op.dims = {2, 0, 1};
            op.out = output<T>({4, 2, 3});
            return op;
          },
          {{x3}}, {4, 2, 3});
  case_of("slice, stepped",
          []<class T>() {
            teeny::slice_op<T> op;
            op.axis = 2;
            op.start = 1;
            op.step = 2;
            op.out = output<T>({2, 3, 2});
            return op;
          },
          {{x3}}, {2, 3, 2});
  case_of("concat of two",
          []<class T>() {
            teeny::concat_op<T> op;
            op.axis = 1;
            op.inputs = 2;
            op.out = output<T>({2, 5, 4});
            return op;
          },
          {{x3, random_tensor({2, 2, 4}, 8)}}, {2, 5, 4});
  for (const teeny::PadMode mode : {teeny::PadMode::constant, teeny::PadMode::reflect, teeny::PadMode::replicate}) {
    case_of(std::string("pad ") + std::string(teeny::name(mode)) + ", one side cropped",
            [mode]<class T>() {
              teeny::pad_op<T> op;
              op.attrs.pads = {1, 2, 2, -1};  // last dim: 1 before, 2 after; dim 1: 2 before, 1 cropped after
              op.attrs.mode = mode;
              op.attrs.value = 0.5;
              op.out = output<T>({2, 4, 7});
              return op;
            },
            {{x3}}, {2, 4, 7});
  }
  case_of("upsample nearest, scales 2 and 1.5",
          []<class T>() {
            teeny::upsample_op<T> op;
            op.attrs.scale_h = 2;
            op.attrs.scale_w = 1.5;
            op.out = output<T>({1, 2, 6, 6});
            return op;
          },
          {{random_tensor({1, 2, 3, 4}, 9)}}, {1, 2, 6, 6});
  case_of("cast to its own dtype",
          []<class T>() {
            teeny::cast_op<T> op;
            op.dtype = teeny::dtype_of<T>;
            op.out = output<T>({3, 5});
            return op;
          },
          {{random_tensor({3, 5}, 13)}}, {3, 5});

  // ---- conv ----
  case_of("conv2d grouped, strided, dilated, relu epilogue",
          []<class T>() {
            teeny::conv_op<T> op;
            op.attrs = {4, 6, 3, 2, 1, 1, 2, true};  // in, out, kernel, stride, padding, dilation, groups, bias
            op.epilogue = {true, UnaryFn::relu, {}};
            op.out = output<T>({2, 6, 5, 4});
            return op;
          },
          {{random_tensor({2, 4, 9, 8}, 22)}, {random_tensor({6, 2, 3, 3}, 23), random_tensor({6}, 24)}}, {2, 6, 5, 4});
  case_of(
      "conv1d strided, padded",
      []<class T>() {
        auto op = teeny::conv_op<T>::from(
            teeny::Conv1d{.in_channels = 3, .out_channels = 2, .kernel = 3, .stride = 2, .padding = 1, .bias = true},
            output<T>({2, 2, 4}));
        op.epilogue = {true, UnaryFn::tanh, {}};
        return op;
      },
      {{random_tensor({2, 3, 8}, 128)}, {random_tensor({2, 3, 3}, 129), random_tensor({2}, 130)}}, {2, 2, 4});

  // ---- pool ----
  const HostTensor image = random_tensor({2, 3, 8, 7}, 5);
  case_of("max_pool2d strided, padded, dilated",
          []<class T>() {
            teeny::max_pool2d_op<T> op;
            op.attrs.kernel = {3, 3};
            op.attrs.stride = teeny::Size2{2, 2};
            op.attrs.padding = {1, 1};
            op.attrs.dilation = {1, 2};
            op.out = output<T>({2, 3, 4, 3});
            return op;
          },
          {{image}}, {2, 3, 4, 3});
  case_of("avg_pool2d ceil mode, padding not counted",
          []<class T>() {
            teeny::avg_pool2d_op<T> op;
            op.attrs.kernel = {3, 3};
            op.attrs.stride = teeny::Size2{2, 2};
            op.attrs.padding = {1, 1};
            op.attrs.ceil_mode = true;
            op.attrs.count_include_pad = false;
            op.out = output<T>({2, 3, 5, 4});
            return op;
          },
          {{image}}, {2, 3, 5, 4});
  case_of("adaptive_avg_pool2d to 3x2",
          []<class T>() {
            teeny::adaptive_avg_pool2d_op<T> op;
            op.attrs.output_size = {3, 2};
            op.out = output<T>({2, 3, 3, 2});
            return op;
          },
          {{image}}, {2, 3, 3, 2});

  // ---- norm ----
  {
    const HostTensor x = random_tensor({4, 3, 10}, 140);  // [N, C, S]
    const HostTensor var = positive(random_tensor({3}, 144));
    const HostTensor count{{}, {3.0}};  // num_batches_tracked
    for (const bool affine : {true, false}) {
      Operands operands{{x}};
      if (affine) operands.params = {random_tensor({3}, 141), random_tensor({3}, 142)};
      operands.params.insert(operands.params.end(), {random_tensor({3}, 143), var, count});
      case_of(std::string("batch_norm, running statistics, relu epilogue") + (affine ? "" : ", no affine"),
              [affine]<class T>() {
                teeny::batch_norm_op<T> op;
                op.attrs.num_features = 3;
                op.attrs.spatial_dims = 1;
                op.attrs.affine = affine;
                op.epilogue = {true, UnaryFn::relu, {}};
                op.out = output<T>({4, 3, 10});
                return op;
              },
              operands, {4, 3, 10});
    }
  }
  const HostTensor rows = random_tensor({6, 2, 5}, 12);
  case_of("layer_norm over the last two dims",
          []<class T>() {
            teeny::layer_norm_op<T> op;
            op.attrs.normalized_shape = {2, 5};
            op.out = output<T>({6, 2, 5});
            return op;
          },
          {{rows}, {random_tensor({2, 5}, 13), random_tensor({2, 5}, 14)}}, {6, 2, 5});
  case_of("rms_norm",
          []<class T>() {
            teeny::rms_norm_op<T> op;
            op.attrs.normalized_shape = {5};
            op.attrs.eps = 1e-6;
            op.out = output<T>({6, 2, 5});
            return op;
          },
          {{rows}, {random_tensor({5}, 15)}}, {6, 2, 5});
  case_of("group_norm, 2 groups of 2 channels",
          []<class T>() {
            teeny::group_norm_op<T> op;
            op.attrs.num_groups = 2;
            op.attrs.num_channels = 4;
            op.out = output<T>({3, 4, 3, 2});
            return op;
          },
          {{random_tensor({3, 4, 3, 2}, 16)}, {random_tensor({4}, 17), random_tensor({4}, 18)}}, {3, 4, 3, 2});

  // ---- reduce ----
  const HostTensor r = random_tensor({3, 4, 5}, 6);
  for (const bool log : {false, true}) {
    case_of(log ? "log_softmax along dim 1" : "softmax along dim 1",
            [log]<class T>() {
              teeny::softmax_op<T> op;
              op.axis = 1;
              op.log = log;
              op.out = output<T>({3, 4, 5});
              return op;
            },
            {{r}}, {3, 4, 5});
  }
  for (const ReduceFn fn : {ReduceFn::sum, ReduceFn::mean, ReduceFn::max}) {
    case_of("reduce fn " + std::to_string(static_cast<int>(fn)) + " over dims 0 and 2",
            [fn]<class T>() {
              teeny::reduce_op<T> op;
              op.fn = fn;
              op.axes = {0, 2};
              op.out = output<T>({4});
              return op;
            },
            {{r}}, {4});
  }
  {  // prod: forward only, its backward is planned (the op must refuse it)
    auto make = []<class T>() {
      teeny::reduce_op<T> op;
      op.fn = ReduceFn::prod;
      op.axes = {1};
      op.out = output<T>({3, 5});
      return op;
    };
    const auto ops = per_type(make);
    OpCase<decltype(ops)> c{"reduce prod over dim 1", ops, {{r}}, {3, 5}};
    c.backward = false;
    visit(c);
  }
  // compare (with ties: every value of a occurs in b) and where, both operands broadcast.
  {
    const HostTensor a{{2, 1, 3}, {1, -2, 0.5, 3, 0.25, -1}};
    const HostTensor b{{4, 1}, {0.5, 1, -2, 3}};
    for (const teeny::CompareFn fn : {teeny::CompareFn::eq, teeny::CompareFn::ne, teeny::CompareFn::lt,
                                      teeny::CompareFn::le, teeny::CompareFn::gt, teeny::CompareFn::ge}) {
      case_of("compare fn " + std::to_string(static_cast<int>(fn)) + ", both operands broadcast",
              [fn]<class T>() {
                teeny::compare_op<T> op;
                op.fn = fn;
                op.out = output<T>({2, 4, 3});
                return op;
              },
              {{a, b}}, {2, 4, 3});
    }
    const HostTensor condition{{4, 1}, {1, 0, 0, 1}, teeny::DType::boolean};
    case_of("where, every operand broadcast",
            []<class T>() {
              teeny::where_op<T> op;
              op.out = output<T>({2, 4, 3});
              return op;
            },
            {{condition, random_tensor({2, 1, 3}, 44), random_tensor({3}, 45)}}, {2, 4, 3});
  }
  // cumsum every way round along a middle dim; hardmax along the first.
  for (const bool exclusive : {false, true}) {
    for (const bool reverse : {false, true}) {
      case_of(std::string("cumsum along dim 1") + (exclusive ? ", exclusive" : "") + (reverse ? ", reverse" : ""),
              [exclusive, reverse]<class T>() {
                teeny::cumsum_op<T> op;
                op.attrs = {1, exclusive, reverse};
                op.out = output<T>({3, 4, 5});
                return op;
              },
              {{r}}, {3, 4, 5});
    }
  }
  case_of("hardmax along dim 0",
          []<class T>() {
            teeny::hardmax_op<T> op;
            op.attrs.axis = 0;
            op.out = output<T>({3, 4, 5});
            return op;
          },
          {{r}}, {3, 4, 5});
  // argmax / argmin: random values along a middle dim; ties (the first or the last) along the last.
  case_of("argmax along dim 1, keepdim",
          []<class T>() {
            teeny::arg_reduce_op<T> op;
            op.attrs = {teeny::ArgOp::max, 1, true, false};
            op.out = output<T>({3, 1, 5});
            return op;
          },
          {{r}}, {3, 1, 5});
  for (const bool last : {false, true}) {
    case_of(last ? "argmin with ties, the last" : "argmin with ties, the first",
            [last]<class T>() {
              teeny::arg_reduce_op<T> op;
              op.attrs = {teeny::ArgOp::min, -1, false, last};
              op.out = output<T>({2});
              return op;
            },
            {{HostTensor{{2, 4}, {1, 0, 0, 2, 5, -1, 3, -1}}}}, {2});
  }
  // nll_loss: targets with an ignored one (-100, the default) and classes of every weight; mean
  // with weights over [N, C, d], sum without, and none.
  const HostTensor targets{{3, 2}, {2, 0, -100, 3, 1, 2}, teeny::DType::i64};
  const HostTensor class_weights{{4}, {0.5, 1.5, 1.0, 2.0}};
  for (const teeny::LossReduction reduction :
       {teeny::LossReduction::mean, teeny::LossReduction::sum, teeny::LossReduction::none}) {
    Operands operands{{random_tensor({3, 4, 2}, 43), targets}};
    if (reduction == teeny::LossReduction::mean) operands.inputs.push_back(class_weights);
    const ConcreteShape out = reduction == teeny::LossReduction::none ? ConcreteShape{3, 2} : ConcreteShape{};
    case_of(
        "nll_loss, " + std::string(name(reduction)) +
            (reduction == teeny::LossReduction::mean ? ", class weights" : ""),
        [reduction, out]<class T>() {
          teeny::nll_loss_op<T> op;
          op.attrs.reduction = reduction;
          op.weighted = reduction == teeny::LossReduction::mean;
          op.out = output<T>(out);
          return op;
        },
        std::move(operands), out);
  }

  // ---- sequence ----
  case_of("embedding, an index out of range gives zeros",
          []<class T>() {
            teeny::embedding_op<T> op;
            op.attrs.num_embeddings = 5;
            op.attrs.embedding_dim = 3;
            op.out = output<T>({2, 3, 3});
            return op;
          },
          {{HostTensor{{2, 3}, {0, 4, 2, 4, 7, -1}, teeny::DType::i64}}, {random_tensor({5, 3}, 39)}}, {2, 3, 3});
  for (const bool causal : {false, true}) {
    case_of(causal ? "attention, causal, k and v broadcast" : "attention, k and v broadcast",
            [causal]<class T>() {
              teeny::attention_op<T> op;
              op.attrs.causal = causal;
              op.out = output<T>({2, 3, 5, 4});
              return op;
            },
            {{random_tensor({2, 3, 5, 6}, 40), random_tensor({1, 3, 7, 6}, 41), random_tensor({1, 3, 7, 4}, 42)}},
            {2, 3, 5, 4});
  }
}

}  // namespace op_harness
