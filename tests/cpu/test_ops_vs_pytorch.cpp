// Every op fixture on the CPU against PyTorch (tests/fixtures/ops, made by tools/make_fixtures.py).
// The fixture manifest (MANIFEST.txt) drives the harness: each fixture has a runner here that
// builds the op with the builder, loads the fixture's parameters by their PyTorch keys (op.weight,
// ...), runs its inputs and compares with PyTorch's output. A fixture without a runner fails a
// test naming it, and so does a runner without a fixture. A fixture the CPU backend cannot run
// carries the reason in its runner: it is listed with that reason, and its load is checked to be
// refused (so a skip cannot outlive the reason for it).
//
// Every fixture runs once per instruction set the GEMM can be forced to on this machine
// (tests/support/isa.hpp): the GEMM (linear, matmul, conv, attention) is the only CPU code that
// chooses its instruction set at run time; the other kernels are compiled for the baseline target.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

import teeny;

#include "support/allocation_counter.hpp"
#include "support/fixtures.hpp"
#include "support/isa.hpp"

namespace {
using teeny::GraphBuilder;
using teeny::Value;
using Build = std::function<Value(GraphBuilder&, std::vector<Value>&)>;
using BuildPieces = std::function<std::vector<Value>(GraphBuilder&, std::vector<Value>&)>;

// The runner of one fixture.
struct OpCase {
  std::string name;                      // the fixture's name in MANIFEST.txt
  std::vector<std::string_view> inputs;  // fixture inputs, in operand order
  Build build;
  BuildPieces pieces = {};     // instead of build for ops with several outputs (out.0, out.1, ...)
  std::string_view skip = {};  // why the CPU backend cannot run it (its load must be refused); empty: it runs
  double rtol = 1e-5;          // f32 outputs: |got - PyTorch| <= atol + rtol * |PyTorch|
  double atol = 1e-6;
};

// 3x3 stride-1 convolutions may run as Winograd F(4x4, 3x3), whose transforms scale values by up
// to 8 on the way in and out: their errors are a few 1e-6 of the sum of |terms| (here up to 3e-6
// absolute on outputs of up to ~1), not of each output (tests/cpu/test_conv.cpp holds every method
// to a double-precision reference, relative to that sum).
constexpr double kWinogradRtol = 5e-5;
constexpr double kWinogradAtol = 1e-5;

// Why the integer fixtures are skipped: the standard lowering computes in one float type.
constexpr std::string_view integer_inputs =
    "integer inputs: the CPU backend computes in f32/f64, only Cast and Embedding read integers";
constexpr std::string_view bool_input = "bool input: the CPU backend computes in f32/f64, only Cast reads bool";

Build unary(Value (GraphBuilder::*method)(Value)) {
  return [method](GraphBuilder& b, std::vector<Value>& in) { return (b.*method)(in[0]); };
}
Build binary(Value (GraphBuilder::*method)(Value, Value)) {
  return [method](GraphBuilder& b, std::vector<Value>& in) { return (b.*method)(in[0], in[1]); };
}

// softmax, reductions, data movement, cast, embedding and attention (f32 results, or exact casts).
void add_remaining_ops(std::vector<OpCase>& list) {
  using teeny::DType;
  using teeny::PadMode;
  const std::pair<std::string_view, std::int64_t> softmaxes[] = {
      {"_axis_neg1", -1}, {"_axis0", 0}, {"_axis1", 1}, {"_axis_neg2", -2}, {"_1d", 0}};
  for (const auto& [suffix, axis] : softmaxes) {
    list.push_back(
        {"softmax" + std::string(suffix), {"x"}, [axis](GraphBuilder& b, auto& in) { return b.softmax(in[0], axis); }});
    list.push_back({"log_softmax" + std::string(suffix), {"x"}, [axis](GraphBuilder& b, auto& in) {
                      return b.log_softmax(in[0], axis);
                    }});
  }
  using Reduce = Value (GraphBuilder::*)(Value, std::vector<std::int64_t>, bool);
  const std::pair<std::string_view, Reduce> reductions[] = {
      {"sum", &GraphBuilder::sum}, {"mean", &GraphBuilder::mean}, {"max", &GraphBuilder::max}};
  for (const auto& [op, method] : reductions) {
    const std::tuple<std::string_view, std::vector<std::int64_t>, bool> shapes[] = {
        {"_axis1", {1}, false},       {"_axis_neg1_keepdim", {-1}, true},
        {"_axes_0_2", {0, 2}, false}, {"_axes_0_2_keepdim", {0, 2}, true},
        {"_all", {}, false},          {"_all_keepdim", {0, 1, 2}, true}};
    for (const auto& [suffix, axes, keepdim] : shapes) {
      list.push_back({std::string(op) + std::string(suffix), {"x"}, [method, axes, keepdim](GraphBuilder& b, auto& in) {
                        return (b.*method)(in[0], axes, keepdim);
                      }});
    }
  }
  const std::vector<OpCase> cases = {
      {"sum_large", {"x"}, [](GraphBuilder& b, auto& in) { return b.sum(in[0], {1}); }},
      {"mean_large", {"x"}, [](GraphBuilder& b, auto& in) { return b.mean(in[0]); }},
      {"flatten_same_dim", {"x"}, [](GraphBuilder& b, auto& in) { return b.flatten(in[0], 2, 2); }},
      {"flatten_scalar", {"x"}, [](GraphBuilder& b, auto& in) { return b.flatten(in[0], 0); }},
      {"transpose", {"x"}, [](GraphBuilder& b, auto& in) { return b.transpose(in[0], 0, 2); }},
      {"transpose_neg", {"x"}, [](GraphBuilder& b, auto& in) { return b.transpose(in[0], -1, -2); }},
      {"permute", {"x"}, [](GraphBuilder& b, auto& in) { return b.permute(in[0], {2, 0, 3, 1}); }},
      {"permute_neg", {"x"}, [](GraphBuilder& b, auto& in) { return b.permute(in[0], {-1, 0, 1}); }},
      {"concat_axis0", {"a", "b", "c"}, [](GraphBuilder& b, auto& in) { return b.concat(in, 0); }},
      {"concat_axis1", {"a", "b", "c"}, [](GraphBuilder& b, auto& in) { return b.concat(in, 1); }},
      {"concat_axis_neg1", {"a", "b", "c"}, [](GraphBuilder& b, auto& in) { return b.concat(in, -1); }},
      {"concat_one", {"a"}, [](GraphBuilder& b, auto& in) { return b.concat(in, 0); }},
      {"split_axis1", {"x"}, {}, [](GraphBuilder& b, auto& in) { return b.split(in[0], {2, 3, 1}, 1); }},
      {"split_axis0", {"x"}, {}, [](GraphBuilder& b, auto& in) { return b.split(in[0], {1, 3}, 0); }},
      {"split_neg_axis_zero_piece", {"x"}, {}, [](GraphBuilder& b, auto& in) { return b.split(in[0], {2, 0, 3}, -1); }},
      {"chunk_even", {"x"}, {}, [](GraphBuilder& b, auto& in) { return b.chunk(in[0], 3, 0); }},
      {"chunk_uneven", {"x"}, {}, [](GraphBuilder& b, auto& in) { return b.chunk(in[0], 4, 1); }},
      {"chunk_fewer", {"x"}, {}, [](GraphBuilder& b, auto& in) { return b.chunk(in[0], 4, -1); }},
      {"slice_neg_start", {"x"}, [](GraphBuilder& b, auto& in) { return b.slice(in[0], 1, -3); }},
      {"slice_step2", {"x"}, [](GraphBuilder& b, auto& in) { return b.slice(in[0], 1, 1, 8, 2); }},
      {"slice_start_step2", {"x"}, [](GraphBuilder& b, auto& in) { return b.slice(in[0], 0, 1, std::nullopt, 2); }},
      {"slice_neg_end", {"x"}, [](GraphBuilder& b, auto& in) { return b.slice(in[0], -1, 1, -1); }},
      {"slice_neg_both_step3", {"x"}, [](GraphBuilder& b, auto& in) { return b.slice(in[0], 1, -8, -1, 3); }},
      {"slice_clamped", {"x"}, [](GraphBuilder& b, auto& in) { return b.slice(in[0], 1, -100, 100, 3); }},
      {"slice_empty", {"x"}, [](GraphBuilder& b, auto& in) { return b.slice(in[0], 1, 5, 2); }},
      {"pad_constant_2d",
       {"x"},
       [](GraphBuilder& b, auto& in) { return b.pad(in[0], {1, 2}, PadMode::constant, 1.5); }},
      {"pad_constant_2d_both",
       {"x"},
       [](GraphBuilder& b, auto& in) { return b.pad(in[0], {1, 2, 2, 0}, PadMode::constant, 1.5); }},
      {"pad_constant_4d",
       {"x"},
       [](GraphBuilder& b, auto& in) { return b.pad(in[0], {1, 2, 0, 1}, PadMode::constant, 1.5); }},
      {"pad_constant_default", {"x"}, [](GraphBuilder& b, auto& in) { return b.pad(in[0], {2, 2, 1, 1}); }},
      {"pad_constant_3dims",
       {"x"},
       [](GraphBuilder& b, auto& in) { return b.pad(in[0], {1, 0, 0, 2, 1, 1}, PadMode::constant, -1.0); }},
      {"pad_constant_negative",
       {"x"},
       [](GraphBuilder& b, auto& in) { return b.pad(in[0], {-1, 2, 1, -2}, PadMode::constant, 1.5); }},
      {"pad_reflect_2d", {"x"}, [](GraphBuilder& b, auto& in) { return b.pad(in[0], {2, 3}, PadMode::reflect); }},
      {"pad_reflect_3d", {"x"}, [](GraphBuilder& b, auto& in) { return b.pad(in[0], {3, 1}, PadMode::reflect); }},
      {"pad_reflect_4d", {"x"}, [](GraphBuilder& b, auto& in) { return b.pad(in[0], {2, 1, 1, 3}, PadMode::reflect); }},
      {"pad_reflect_5d",
       {"x"},
       [](GraphBuilder& b, auto& in) { return b.pad(in[0], {1, 2, 1, 1, 2, 0}, PadMode::reflect); }},
      {"pad_replicate_2d", {"x"}, [](GraphBuilder& b, auto& in) { return b.pad(in[0], {2, 3}, PadMode::replicate); }},
      {"pad_replicate_3d", {"x"}, [](GraphBuilder& b, auto& in) { return b.pad(in[0], {1, 4}, PadMode::replicate); }},
      {"pad_replicate_4d",
       {"x"},
       [](GraphBuilder& b, auto& in) { return b.pad(in[0], {2, 1, 3, 0}, PadMode::replicate); }},
      {"pad_replicate_3d_unbatched_hw",
       {"x"},
       [](GraphBuilder& b, auto& in) { return b.pad(in[0], {1, 2, 2, 1}, PadMode::replicate); }},
      {"pad_replicate_5d",
       {"x"},
       [](GraphBuilder& b, auto& in) { return b.pad(in[0], {1, 2, 1, 1, 2, 0}, PadMode::replicate); }},
      {"upsample_nearest_2", {"x"}, [](GraphBuilder& b, auto& in) { return b.upsample(in[0], 2); }},
      {"upsample_nearest_3", {"x"}, [](GraphBuilder& b, auto& in) { return b.upsample(in[0], 3); }},
      {"upsample_nearest_2x3", {"x"}, [](GraphBuilder& b, auto& in) { return b.upsample(in[0], 2, 3); }},
      {"upsample_nearest_fractional", {"x"}, [](GraphBuilder& b, auto& in) { return b.upsample(in[0], 1.5, 2.5); }},
      {"embedding", {"indices"}, [](GraphBuilder& b, auto& in) { return b.embedding(in[0], 10, 4); }},
      {"embedding_padding_idx",
       {"indices"},
       [](GraphBuilder& b, auto& in) { return b.embedding(in[0], 10, 4, {.padding_idx = 0}); }},
      {"embedding_padding_idx_negative",
       {"indices"},
       [](GraphBuilder& b, auto& in) { return b.embedding(in[0], 10, 3, {.padding_idx = -1}); }},
      {"embedding_i32", {"indices"}, [](GraphBuilder& b, auto& in) { return b.embedding(in[0], 7, 5); }},
      {"embedding_scalar", {"indices"}, [](GraphBuilder& b, auto& in) { return b.embedding(in[0], 6, 3); }},
  };
  list.insert(list.end(), cases.begin(), cases.end());
  const std::pair<std::string_view, DType> casts[] = {
      {"cast_f32_f64", DType::f64},      {"cast_f32_i64", DType::i64},  {"cast_f32_i32", DType::i32},
      {"cast_f32_u8", DType::u8},        {"cast_i64_f32", DType::f32},  {"cast_i32_i64", DType::i64},
      {"cast_i64_i32", DType::i32},      {"cast_f64_f32", DType::f32},  {"cast_f32_f16", DType::f16},
      {"cast_f32_bf16", DType::bf16},    {"cast_f16_f32", DType::f32},  {"cast_bf16_f32", DType::f32},
      {"cast_f32_bool", DType::boolean}, {"cast_bool_f32", DType::f32}, {"cast_i64_f64", DType::f64}};
  for (const auto& [name, dtype] : casts) {
    list.push_back({std::string(name), {"x"}, [dtype](GraphBuilder& b, auto& in) { return b.cast(in[0], dtype); }});
  }
  const std::pair<std::string_view, teeny::AttentionOptions> attentions[] = {
      {"attention", {}},
      {"attention_causal", {.causal = true}},
      {"attention_causal_l_lt_s", {.causal = true}},
      {"attention_causal_l_gt_s", {.causal = true}},
      {"attention_scale", {.scale = 0.3}},
      {"attention_causal_scale", {.causal = true, .scale = 0.3}},
      {"attention_heads", {}},
      {"attention_batch_broadcast", {}},
      {"attention_large_logits", {.scale = 1.0}},
      {"attention_2d", {}}};
  for (const auto& [name, options] : attentions) {
    list.push_back({std::string(name), {"q", "k", "v"}, [options](GraphBuilder& b, auto& in) {
                      return b.attention(in[0], in[1], in[2], options);
                    }});
  }
}

// Ops in f64 (inputs and parameters), run by the f64 CPU model.
void add_f64_ops(std::vector<OpCase>& list) {
  const std::vector<OpCase> cases = {
      {"add_f64", {"a", "b"}, binary(&GraphBuilder::add)},
      {"div_f64", {"a", "b"}, binary(&GraphBuilder::div)},
      {"exp_f64", {"x"}, unary(&GraphBuilder::exp)},
      {"gelu_f64", {"x"}, [](GraphBuilder& b, auto& in) { return b.gelu(in[0]); }},
      {"softmax_f64", {"x"}, [](GraphBuilder& b, auto& in) { return b.softmax(in[0], -1); }},
      {"sum_f64", {"x"}, [](GraphBuilder& b, auto& in) { return b.sum(in[0], {-1}); }},
      {"matmul_f64", {"a", "b"}, binary(&GraphBuilder::matmul)},
      {"linear_f64", {"x"}, [](GraphBuilder& b, auto& in) { return b.linear(in[0], 5); }},
      {"conv2d_f64", {"x"}, [](GraphBuilder& b, auto& in) { return b.conv2d(in[0], 4, 3, {.padding = 1}); }},
      {"layer_norm_f64", {"x"}, [](GraphBuilder& b, auto& in) { return b.layer_norm(in[0], {5}); }},
      {"rms_norm_f64_eps_none", {"x"}, [](GraphBuilder& b, auto& in) { return b.rms_norm(in[0], {5}); }},
      {"embedding_f64",
       {"indices"},
       [](GraphBuilder& b, auto& in) { return b.embedding(in[0], 6, 3, {.dtype = teeny::DType::f64}); }},
  };
  list.insert(list.end(), cases.begin(), cases.end());
}

// convolution, pooling and normalisation (f32), with PyTorch's parameter layouts.
void add_cnn_ops(std::vector<OpCase>& list) {
  using teeny::Size2;
  using C1 = teeny::Conv1dOptions;
  using C2 = teeny::Conv2dOptions;
  using MP = teeny::Pool2dOptions;
  using AP = teeny::AvgPool2dOptions;
  auto conv1d = [](std::int64_t out, std::int64_t k, C1 o = {}) -> Build {
    return [=](GraphBuilder& b, std::vector<Value>& in) { return b.conv1d(in[0], out, k, o); };
  };
  auto conv2d = [](std::int64_t out, Size2 k, C2 o = {}) -> Build {
    return [=](GraphBuilder& b, std::vector<Value>& in) { return b.conv2d(in[0], out, k, o); };
  };
  auto max_pool = [](Size2 k, MP o = {}) -> Build {
    return [=](GraphBuilder& b, std::vector<Value>& in) { return b.max_pool2d(in[0], k, o); };
  };
  auto avg_pool = [](Size2 k, AP o = {}) -> Build {
    return [=](GraphBuilder& b, std::vector<Value>& in) { return b.avg_pool2d(in[0], k, o); };
  };
  auto adaptive = [](Size2 size) -> Build {
    return [=](GraphBuilder& b, std::vector<Value>& in) { return b.adaptive_avg_pool2d(in[0], size); };
  };
  auto bn1d = [](teeny::BatchNormOptions o = {}) -> Build {
    return [=](GraphBuilder& b, std::vector<Value>& in) { return b.batch_norm1d(in[0], o); };
  };
  auto bn2d = [](teeny::BatchNormOptions o = {}) -> Build {
    return [=](GraphBuilder& b, std::vector<Value>& in) { return b.batch_norm2d(in[0], o); };
  };
  auto layer_norm = [](std::vector<std::int64_t> shape, teeny::LayerNormOptions o = {}) -> Build {
    return [=](GraphBuilder& b, std::vector<Value>& in) { return b.layer_norm(in[0], shape, o); };
  };
  auto rms_norm = [](std::vector<std::int64_t> shape, teeny::RMSNormOptions o = {}) -> Build {
    return [=](GraphBuilder& b, std::vector<Value>& in) { return b.rms_norm(in[0], shape, o); };
  };
  auto group_norm = [](std::int64_t groups, teeny::GroupNormOptions o = {}) -> Build {
    return [=](GraphBuilder& b, std::vector<Value>& in) { return b.group_norm(in[0], groups, o); };
  };
  const std::vector<OpCase> cases = {
      {"conv1d", {"x"}, conv1d(4, 3)},
      {"conv1d_stride2_pad1", {"x"}, conv1d(4, 3, {.stride = 2, .padding = 1})},
      {"conv1d_dilation2", {"x"}, conv1d(4, 3, {.padding = 2, .dilation = 2})},
      {"conv1d_groups2", {"x"}, conv1d(6, 3, {.groups = 2})},
      {"conv1d_depthwise", {"x"}, conv1d(4, 5, {.padding = 2, .groups = 4})},
      {"conv1d_no_bias", {"x"}, conv1d(5, 4, {.bias = false})},
      {"conv1d_all", {"x"}, conv1d(6, 3, {.stride = 3, .padding = 2, .dilation = 2, .groups = 2, .bias = false})},
      {"conv1d_unbatched", {"x"}, conv1d(4, 3, {.padding = 1})},
      {"conv2d_3x3_pad1", {"x"}, conv2d(4, 3, {.padding = 1}), {}, {}, kWinogradRtol, kWinogradAtol},
      {"conv2d_stride2", {"x"}, conv2d(4, 3, {.stride = 2})},
      {"conv2d_stride2_pad1_even", {"x"}, conv2d(4, 3, {.stride = 2, .padding = 1})},
      {"conv2d_dilation2", {"x"}, conv2d(4, 3, {.padding = 2, .dilation = 2})},
      {"conv2d_groups2", {"x"}, conv2d(6, 3, {.padding = 1, .groups = 2}), {}, {}, kWinogradRtol, kWinogradAtol},
      {"conv2d_depthwise", {"x"}, conv2d(4, 3, {.padding = 1, .groups = 4})},
      {"conv2d_depthwise_multiplier", {"x"}, conv2d(6, 3, {.groups = 3})},
      {"conv2d_1x1", {"x"}, conv2d(5, 1)},
      {"conv2d_no_bias", {"x"}, conv2d(4, 3, {.bias = false}), {}, {}, kWinogradRtol, kWinogradAtol},
      {"conv2d_nonsquare", {"x"}, conv2d(4, {3, 5}, {.stride = {2, 1}, .padding = {1, 2}})},
      {"conv2d_nonsquare_dilation",
       {"x"},
       conv2d(3, {2, 3}, {.stride = {1, 2}, .padding = {0, 1}, .dilation = {3, 2}})},
      {"conv2d_5x5_pad2", {"x"}, conv2d(8, 5, {.padding = 2})},
      {"conv2d_unbatched", {"x"}, conv2d(4, 3, {.padding = 1}), {}, {}, kWinogradRtol, kWinogradAtol},
      {"max_pool2d_k2", {"x"}, max_pool(2)},
      {"max_pool2d_k3_s2_p1", {"x"}, max_pool(3, {.stride = 2, .padding = 1})},
      {"max_pool2d_k3_s2_p1_negative", {"x"}, max_pool(3, {.stride = 2, .padding = 1})},
      {"max_pool2d_dilation2", {"x"}, max_pool(3, {.stride = 1, .dilation = 2})},
      {"max_pool2d_dilation_pad", {"x"}, max_pool(3, {.stride = 2, .padding = 1, .dilation = {2, 1}})},
      {"max_pool2d_ceil", {"x"}, max_pool(2, {.ceil_mode = true})},
      {"max_pool2d_ceil_k3_s2_p1", {"x"}, max_pool(3, {.stride = 2, .padding = 1, .ceil_mode = true})},
      {"max_pool2d_ceil_drop_last", {"x"}, max_pool(2, {.stride = 2, .padding = 1, .ceil_mode = true})},
      {"max_pool2d_nonsquare", {"x"}, max_pool({2, 3}, {.stride = Size2{1, 2}, .padding = {1, 1}})},
      {"max_pool2d_unbatched", {"x"}, max_pool(2)},
      {"avg_pool2d_k2", {"x"}, avg_pool(2)},
      {"avg_pool2d_k3_s2_p1_include_pad", {"x"}, avg_pool(3, {.stride = 2, .padding = 1, .count_include_pad = true})},
      {"avg_pool2d_k3_s2_p1_exclude_pad", {"x"}, avg_pool(3, {.stride = 2, .padding = 1, .count_include_pad = false})},
      {"avg_pool2d_ceil", {"x"}, avg_pool(2, {.ceil_mode = true})},
      {"avg_pool2d_ceil_pad_include",
       {"x"},
       avg_pool(3, {.stride = 2, .padding = 1, .ceil_mode = true, .count_include_pad = true})},
      {"avg_pool2d_ceil_pad_exclude",
       {"x"},
       avg_pool(3, {.stride = 2, .padding = 1, .ceil_mode = true, .count_include_pad = false})},
      {"avg_pool2d_ceil_drop_last", {"x"}, avg_pool(2, {.stride = 2, .padding = 1, .ceil_mode = true})},
      {"avg_pool2d_divisor_override", {"x"}, avg_pool(3, {.stride = 2, .padding = 1, .divisor_override = 5})},
      {"avg_pool2d_nonsquare",
       {"x"},
       avg_pool({2, 3}, {.stride = Size2{1, 2}, .padding = {1, 1}, .count_include_pad = false})},
      {"avg_pool2d_unbatched", {"x"}, avg_pool(3, {.stride = 3})},
      {"adaptive_avg_pool2d_1x1", {"x"}, adaptive(1)},
      {"adaptive_avg_pool2d_3x2", {"x"}, adaptive({3, 2})},
      {"adaptive_avg_pool2d_upsample", {"x"}, adaptive({5, 7})},
      {"adaptive_avg_pool2d_unbatched", {"x"}, adaptive({4, 4})},
      {"batch_norm1d_nc", {"x"}, bn1d()},
      {"batch_norm1d_ncl", {"x"}, bn1d()},
      {"batch_norm2d", {"x"}, bn2d()},
      {"batch_norm2d_eps", {"x"}, bn2d({.eps = 0.1, .momentum = std::nullopt})},
      {"batch_norm2d_no_affine", {"x"}, bn2d({.affine = false})},
      {"batch_norm2d_no_running_stats", {"x"}, bn2d({.track_running_stats = false})},
      {"batch_norm1d_no_running_stats", {"x"}, bn1d({.affine = false, .track_running_stats = false})},
      {"batch_norm3d",
       {"x"},
       [](GraphBuilder& b, auto& in) {
         return b.add(teeny::BatchNorm{.num_features = 3, .spatial_dims = 3}, {in[0]});
       }},
      {"layer_norm_last", {"x"}, layer_norm({8})},
      {"layer_norm_last2", {"x"}, layer_norm({3, 8})},
      {"layer_norm_no_affine", {"x"}, layer_norm({8}, {.elementwise_affine = false})},
      {"layer_norm_eps", {"x"}, layer_norm({6}, {.eps = 0.001})},
      {"layer_norm_no_bias", {"x"}, layer_norm({8}, {.bias = false})},
      {"rms_norm_last", {"x"}, rms_norm({8}, {.eps = 1e-6})},
      {"rms_norm_eps_none", {"x"}, rms_norm({8})},
      {"rms_norm_last2", {"x"}, rms_norm({3, 8}, {.eps = 1e-5})},
      {"rms_norm_no_affine", {"x"}, rms_norm({6}, {.eps = 1e-6, .elementwise_affine = false})},
      {"rms_norm_eps_small_input", {"x"}, rms_norm({6}, {.eps = 0.001})},
      {"group_norm", {"x"}, group_norm(2)},
      {"group_norm_no_affine", {"x"}, group_norm(3, {.affine = false})},
      {"group_norm_per_channel_eps", {"x"}, group_norm(6, {.eps = 0.001})},
      {"group_norm_one_group", {"x"}, group_norm(1)},
      {"group_norm_2d_input", {"x"}, group_norm(4)},
  };
  list.insert(list.end(), cases.begin(), cases.end());
}

// Fixtures with integer or bool inputs that only Cast and Embedding (run above) could read: the
// CPU backend refuses them (skip), each checked to be refused.
void add_integer_ops(std::vector<OpCase>& list) {
  const std::pair<std::string_view, Value (GraphBuilder::*)(Value, Value)> binaries[] = {
      {"add_i64", &GraphBuilder::add},         {"sub_i64", &GraphBuilder::sub},
      {"mul_i64", &GraphBuilder::mul},         {"mul_i32", &GraphBuilder::mul},
      {"pow_i64", &GraphBuilder::pow},         {"maximum_i64", &GraphBuilder::maximum},
      {"minimum_i64", &GraphBuilder::minimum}, {"matmul_i64", &GraphBuilder::matmul}};
  for (const auto& [name, method] : binaries) {
    list.push_back({std::string(name), {"a", "b"}, binary(method), {}, integer_inputs});
  }
  const std::vector<OpCase> cases = {
      {"abs_i64", {"x"}, unary(&GraphBuilder::abs), {}, integer_inputs},
      {"neg_i64", {"x"}, unary(&GraphBuilder::neg), {}, integer_inputs},
      {"sum_i64", {"x"}, [](GraphBuilder& b, auto& in) { return b.sum(in[0], {1}); }, {}, integer_inputs},
      {"sum_i32_all", {"x"}, [](GraphBuilder& b, auto& in) { return b.sum(in[0]); }, {}, integer_inputs},
      {"sum_bool_all", {"x"}, [](GraphBuilder& b, auto& in) { return b.sum(in[0]); }, {}, bool_input},
      {"max_i64", {"x"}, [](GraphBuilder& b, auto& in) { return b.max(in[0], {0, 2}); }, {}, integer_inputs},
      {"reshape_i64", {"x"}, [](GraphBuilder& b, auto& in) { return b.reshape(in[0], {3, -1}); }, {}, integer_inputs},
      {"concat_i64", {"a", "b"}, [](GraphBuilder& b, auto& in) { return b.concat(in, 1); }, {}, integer_inputs},
  };
  list.insert(list.end(), cases.begin(), cases.end());
}

std::vector<OpCase> cases() {
  std::vector<OpCase> list = {
      {"linear", {"x"}, [](GraphBuilder& b, auto& in) { return b.linear(in[0], 5); }},
      {"linear_no_bias", {"x"}, [](GraphBuilder& b, auto& in) { return b.linear(in[0], 5, false); }},
      {"linear_3d", {"x"}, [](GraphBuilder& b, auto& in) { return b.linear(in[0], 5); }},
      {"linear_1d", {"x"}, [](GraphBuilder& b, auto& in) { return b.linear(in[0], 5); }},
      // parameters stored as F64 / F16 / BF16 convert to f32 on load
      {"linear_params_f64", {"x"}, [](GraphBuilder& b, auto& in) { return b.linear(in[0], 5); }},
      {"linear_params_f16", {"x"}, [](GraphBuilder& b, auto& in) { return b.linear(in[0], 5); }},
      {"linear_params_bf16", {"x"}, [](GraphBuilder& b, auto& in) { return b.linear(in[0], 5); }},
      {"dropout", {"x"}, [](GraphBuilder& b, auto& in) { return b.dropout(in[0], 0.3); }},
      {"dropout_p1", {"x"}, [](GraphBuilder& b, auto& in) { return b.dropout(in[0], 1.0); }},
      {"relu", {"x"}, unary(&GraphBuilder::relu)},
      {"leaky_relu", {"x"}, [](GraphBuilder& b, auto& in) { return b.leaky_relu(in[0]); }},
      {"leaky_relu_0_2", {"x"}, [](GraphBuilder& b, auto& in) { return b.leaky_relu(in[0], 0.2); }},
      {"gelu", {"x"}, [](GraphBuilder& b, auto& in) { return b.gelu(in[0]); }},
      {"gelu_tanh", {"x"}, [](GraphBuilder& b, auto& in) { return b.gelu(in[0], teeny::GeluApproximate::tanh); }},
      {"silu", {"x"}, unary(&GraphBuilder::silu)},
      {"sigmoid", {"x"}, unary(&GraphBuilder::sigmoid)},
      {"tanh", {"x"}, unary(&GraphBuilder::tanh)},
      {"softplus", {"x"}, [](GraphBuilder& b, auto& in) { return b.softplus(in[0]); }},
      {"softplus_beta2_threshold5", {"x"}, [](GraphBuilder& b, auto& in) { return b.softplus(in[0], 2.0, 5.0); }},
      {"elu", {"x"}, [](GraphBuilder& b, auto& in) { return b.elu(in[0]); }},
      {"elu_alpha0_5", {"x"}, [](GraphBuilder& b, auto& in) { return b.elu(in[0], 0.5); }},
      {"hardswish", {"x"}, unary(&GraphBuilder::hardswish)},
      {"hardsigmoid", {"x"}, unary(&GraphBuilder::hardsigmoid)},
      {"threshold", {"x"}, [](GraphBuilder& b, auto& in) { return b.threshold(in[0], 0.5, -2.0); }},
      {"hardshrink", {"x"}, [](GraphBuilder& b, auto& in) { return b.hardshrink(in[0], 0.75); }},
      {"softshrink", {"x"}, [](GraphBuilder& b, auto& in) { return b.softshrink(in[0], 0.75); }},
      {"exp", {"x"}, unary(&GraphBuilder::exp)},
      {"log", {"x"}, unary(&GraphBuilder::log)},
      {"sqrt", {"x"}, unary(&GraphBuilder::sqrt)},
      {"abs", {"x"}, unary(&GraphBuilder::abs)},
      {"neg", {"x"}, unary(&GraphBuilder::neg)},
      {"reciprocal", {"x"}, unary(&GraphBuilder::reciprocal)},
      {"flatten_default", {"x"}, [](GraphBuilder& b, auto& in) { return b.flatten(in[0]); }},
      {"flatten_start0", {"x"}, [](GraphBuilder& b, auto& in) { return b.flatten(in[0], 0); }},
      {"flatten_1_2", {"x"}, [](GraphBuilder& b, auto& in) { return b.flatten(in[0], 1, 2); }},
      {"flatten_neg", {"x"}, [](GraphBuilder& b, auto& in) { return b.flatten(in[0], -3, -2); }},
      {"reshape", {"x"}, [](GraphBuilder& b, auto& in) { return b.reshape(in[0], {4, 6}); }},
      {"reshape_infer", {"x"}, [](GraphBuilder& b, auto& in) { return b.reshape(in[0], {4, -1}); }},
      {"reshape_infer_middle", {"x"}, [](GraphBuilder& b, auto& in) { return b.reshape(in[0], {2, -1, 2}); }},
      {"reshape_flat", {"x"}, [](GraphBuilder& b, auto& in) { return b.reshape(in[0], {-1}); }},
      {"maximum_nan", {"a", "b"}, binary(&GraphBuilder::maximum)},
      {"minimum_nan", {"a", "b"}, binary(&GraphBuilder::minimum)},
      {"fmod", {"a", "b"}, binary(&GraphBuilder::fmod)},
      {"pow_negative_base_integer_exponent", {"a", "b"}, binary(&GraphBuilder::pow)},
      {"pow_square_root", {"a", "b"}, binary(&GraphBuilder::pow)},
  };
  for (std::string_view name :
       {"matmul_1d_1d", "matmul_2d_1d", "matmul_1d_2d", "matmul_2d_2d", "matmul_1d_3d", "matmul_3d_1d", "matmul_3d_2d",
        "matmul_batched_broadcast", "matmul_batched_broadcast_both"}) {
    list.push_back({std::string(name), {"a", "b"}, binary(&GraphBuilder::matmul)});
  }
  const std::pair<std::string_view, Value (GraphBuilder::*)(Value, Value)> binaries[] = {
      {"add", &GraphBuilder::add},         {"sub", &GraphBuilder::sub}, {"mul", &GraphBuilder::mul},
      {"div", &GraphBuilder::div},         {"pow", &GraphBuilder::pow}, {"maximum", &GraphBuilder::maximum},
      {"minimum", &GraphBuilder::minimum},
  };
  for (const auto& [op, method] : binaries) {
    for (std::string_view shape : {"_bcast", "_vec", "_scalar", "_both", "_lhs_bcast"}) {
      list.push_back({std::string(op) + std::string(shape), {"a", "b"}, binary(method)});
    }
  }
  add_remaining_ops(list);
  add_cnn_ops(list);
  add_f64_ops(list);
  add_integer_ops(list);
  return list;
}

// The runners by fixture name, and the names given to more than one runner.
struct Runners {
  std::map<std::string, OpCase, std::less<>> by_name;
  std::vector<std::string> duplicates;
};

const Runners& runners() {
  static const Runners all = [] {
    Runners r;
    for (OpCase& c : cases()) {
      std::string name = c.name;
      if (!r.by_name.emplace(name, std::move(c)).second) r.duplicates.push_back(std::move(name));
    }
    return r;
  }();
  return all;
}

const OpCase* runner(std::string_view name) {
  auto it = runners().by_name.find(name);
  return it == runners().by_name.end() ? nullptr : &it->second;
}

// The fixture names of tests/fixtures/ops/MANIFEST.txt ("<name>\t<torch expression>" a line), in
// its order; empty if it cannot be read.
const std::vector<std::string>& manifest() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    std::ifstream in(fixtures::path("ops/MANIFEST.txt"));
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) out.push_back(line.substr(0, line.find('\t')));
    }
    return out;
  }();
  return names;
}

// Exact equality, for outputs that are not floating (casts): same dtype, shape and bytes.
void check_exact(const teeny::TensorBinding& actual, const teeny::Tensor& expected) {
  REQUIRE(actual.shape == expected.shape());
  REQUIRE(actual.dtype == expected.dtype());
  const std::size_t size = teeny::size_of(expected.dtype());
  const auto* got = static_cast<const std::byte*>(actual.data);
  std::int64_t bad = 0;
  std::int64_t first_bad = -1;
  for (std::int64_t i = 0; i < expected.numel(); ++i) {
    if (std::memcmp(got + i * size, expected.data() + i * size, size) != 0) {
      if (first_bad < 0) first_bad = i;
      ++bad;
    }
  }
  INFO("first mismatch at element " << first_bad << " (" << bad << " of " << expected.numel() << " differ)");
  CHECK(bad == 0);
}

// Loads the fixture's weights into `model`, runs its inputs and compares every output.
template <class Model>
void run_model(teeny::Result<Model> model, const OpCase& c, const teeny::SafetensorsFile& file, std::size_t n_inputs,
               const std::vector<teeny::Tensor>& input_tensors, const std::vector<std::string>& outputs) {
  REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
  auto report = model->load_weights(file, {.strict = false});  // the file also holds in.* and out
  REQUIRE_MESSAGE(report, (report ? "" : report.error().to_string()));
  CHECK(report->missing.empty());
  CHECK(report->mismatched.empty());

  std::vector<teeny::TensorRef> refs;
  for (std::size_t i = 0; i < n_inputs; ++i) refs.push_back(teeny::TensorRef::of(c.inputs[i], input_tensors[i]));
  auto ran = model->forward(refs);
  REQUIRE_MESSAGE(ran, (ran ? "" : ran.error().to_string()));
  const std::size_t allocations = test_support::allocation_count();
  REQUIRE(model->forward(refs));  // again: the kernels allocate nothing per forward
  CHECK(test_support::allocation_count() == allocations);
  for (const std::string& name : outputs) {
    CAPTURE(name);
    auto expected = file.read(name);
    REQUIRE(expected);
    auto actual = model->output(name);
    REQUIRE(actual);
    if (expected->dtype() == teeny::DType::f32) {
      fixtures::check_close(*actual, *expected, c.rtol, c.atol);
    } else if (expected->dtype() == teeny::DType::f64) {
      fixtures::check_close_f64(*actual, *expected);
    } else {
      check_exact(*actual, *expected);
    }
  }
}

// A fixture's op as a graph, with its file, input tensors and output names.
struct Loaded {
  teeny::SafetensorsFile file;
  teeny::Graph graph;
  std::vector<teeny::Tensor> inputs;
  std::vector<std::string> outputs;
  teeny::DType compute = teeny::DType::f32;  // the float type of the model that runs it
};

teeny::Result<Loaded> build_case(const OpCase& c) {
  auto file = teeny::SafetensorsFile::open(fixtures::path("ops/" + c.name + ".safetensors"));
  if (!file) return std::move(file).error();
  GraphBuilder b;
  std::vector<Value> inputs;
  std::vector<teeny::Tensor> input_tensors;
  for (std::string_view name : c.inputs) {
    auto tensor = file->read("in." + std::string(name));
    if (!tensor) return std::move(tensor).error();
    inputs.push_back(b.input(std::string(name), tensor->dtype(), teeny::Shape(tensor->shape())));
    input_tensors.push_back(std::move(*tensor));
  }
  std::vector<std::string> outputs;
  if (c.pieces) {
    std::vector<Value> pieces = c.pieces(b, inputs);
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      outputs.push_back("out." + std::to_string(i));
      b.output(outputs.back(), pieces[i].named("op." + std::to_string(i)));
    }
  } else {
    outputs.push_back("out");
    b.output("out", c.build(b, inputs).named("op"));
  }
  auto graph = std::move(b).build();
  if (!graph) return std::move(graph).error();
  // The model computes in the dtype of the floating inputs, or else (embedding) of the output.
  teeny::DType compute = teeny::DType::f32;
  bool floating_input = false;
  for (const teeny::Tensor& t : input_tensors) {
    if (teeny::is_floating(t.dtype()) && !floating_input) {
      compute = t.dtype();
      floating_input = true;
    }
  }
  if (!floating_input) {
    auto out = file->read(outputs.front());
    if (!out) return std::move(out).error();
    if (out->dtype() == teeny::DType::f64) compute = teeny::DType::f64;
  }
  return Loaded{std::move(*file), std::move(*graph), std::move(input_tensors), std::move(outputs), compute};
}

void run_case(const OpCase& c) {
  CAPTURE(c.name);
  auto loaded = build_case(c);
  REQUIRE_MESSAGE(loaded, (loaded ? "" : loaded.error().to_string()));
  const Loaded& l = *loaded;
  if (l.compute == teeny::DType::f64) {
    run_model(teeny::load_cpu<double>(l.graph, {}), c, l.file, l.inputs.size(), l.inputs, l.outputs);
  } else {
    run_model(teeny::load_cpu(l.graph, {}), c, l.file, l.inputs.size(), l.inputs, l.outputs);
  }
}

// A skipped case: both CPU models must refuse its graph (unsupported), or the skip is stale.
void check_refused(const OpCase& c) {
  CAPTURE(c.name);
  auto loaded = build_case(c);
  REQUIRE_MESSAGE(loaded, (loaded ? "" : loaded.error().to_string()));
  auto f32 = teeny::load_cpu(loaded->graph, {});
  auto f64 = teeny::load_cpu<double>(loaded->graph, {});
  if (f32 || f64) {
    FAIL_CHECK(c.name << " is skipped (" << c.skip << ") but the CPU backend loads it now: drop the skip");
    return;
  }
  CHECK(f32.error().code() == teeny::Errc::unsupported);
  CHECK(f64.error().code() == teeny::Errc::unsupported);
}

std::string isa_names() {
  std::string names;
  for (const teeny::cpu::Isa isa : test_support::available_isas()) {
    names += (names.empty() ? "" : ", ") + std::string(teeny::cpu::isa_name(isa));
  }
  return names;
}

}  // namespace

TEST_CASE("every op fixture in the manifest has a runner, and every runner a fixture") {
  const std::vector<std::string>& names = manifest();
  REQUIRE_MESSAGE(!names.empty(), "cannot read " << fixtures::path("ops/MANIFEST.txt"));
  std::size_t run = 0, skipped = 0;
  for (const std::string& name : names) {
    const OpCase* c = runner(name);
    if (c == nullptr) {
      FAIL_CHECK("fixture " << name << " (tests/fixtures/ops/MANIFEST.txt) has no runner in " << __FILE__);
    } else {
      ++(c->skip.empty() ? run : skipped);
    }
  }
  for (const auto& [name, c] : runners().by_name) {
    if (std::ranges::find(names, name) == names.end()) {
      FAIL_CHECK("runner " << name << " has no fixture in tests/fixtures/ops/MANIFEST.txt");
    }
  }
  for (const std::string& name : runners().duplicates) FAIL_CHECK("two runners for fixture " << name);
  MESSAGE(names.size() << " op fixtures: " << run << " run on each instruction set (" << isa_names() << "), " << skipped
                       << " skipped");
}

TEST_CASE("CPU ops match PyTorch on every instruction set the GEMM can be forced to (tests/fixtures/ops)") {
  const test_support::IsaGuard restore_isa;
  for (const teeny::cpu::Isa isa : test_support::available_isas()) {
    for (const std::string& name : manifest()) {
      const OpCase* c = runner(name);
      if (c == nullptr || !c->skip.empty()) continue;  // reported by the test cases around this one
      SUBCASE((name + " [" + teeny::cpu::isa_name(isa) + "]").c_str()) {
        REQUIRE(teeny::cpu::set_isa(isa) == isa);
        run_case(*c);
      }
    }
  }
}

TEST_CASE("op fixtures the CPU backend skips are listed with their reasons, and each load is refused") {
  std::string list;
  std::size_t skipped = 0;
  for (const std::string& name : manifest()) {
    const OpCase* c = runner(name);
    if (c == nullptr || c->skip.empty()) continue;
    ++skipped;
    list += "\n  skipped: " + name + " (" + std::string(c->skip) + ")";
    check_refused(*c);
  }
  MESSAGE(skipped << " op fixtures skipped on the CPU backend:" << list);
}

namespace {
// Deterministic pseudo-random floats in [-scale, scale).
std::vector<float> noise(std::size_t n, float scale, std::uint32_t seed) {
  std::vector<float> values(n);
  for (float& v : values) {
    seed = seed * 1664525u + 1013904223u;
    v = scale * (static_cast<float>(seed >> 8) / 8388608.0f - 1.0f);
  }
  return values;
}

}  // namespace

TEST_CASE("CPU ops split over threads match a double-precision reference") {
  // Sizes past one task's blocks (64 columns, 64 query rows, 16K elements), so every parallel path runs.
  constexpr std::int64_t A = 3, B = 70, C = 90, L = 150, S = 130, E = 16, EV = 8;
  const std::vector<float> xs = noise(A * B * C, 4.0f, 1);
  const std::vector<float> qs = noise(2 * L * E, 1.0f, 2);
  const std::vector<float> ks = noise(S * E, 1.0f, 3);
  const std::vector<float> vs = noise(2 * S * EV, 1.0f, 4);
  GraphBuilder b;
  auto x = b.input("x", teeny::DType::f32, {A, B, C});
  auto q = b.input("q", teeny::DType::f32, {2, L, E});
  auto k = b.input("k", teeny::DType::f32, {1, S, E});
  auto v = b.input("v", teeny::DType::f32, {2, S, EV});
  b.output("softmax", b.softmax(x, 1));
  b.output("log_softmax", b.log_softmax(x, 2));
  b.output("sum", b.sum(x, {0, 2}));
  b.output("mean", b.mean(x, {1}, true));
  b.output("max", b.max(x));
  b.output("transpose", b.transpose(x, 0, 2));
  b.output("attention", b.attention(q, k, v, {.causal = true}));
  auto graph = std::move(b).build();
  REQUIRE_MESSAGE(graph, (graph ? "" : graph.error().to_string()));
  auto model = teeny::load_cpu(*graph, {}, {.threads = 3});
  REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
  auto tx = teeny::Tensor::from<float>(xs, {A, B, C});
  auto tq = teeny::Tensor::from<float>(qs, {2, L, E});
  auto tk = teeny::Tensor::from<float>(ks, {1, S, E});
  auto tv = teeny::Tensor::from<float>(vs, {2, S, EV});
  REQUIRE((tx && tq && tk && tv));
  const teeny::TensorRef refs[] = {teeny::TensorRef::of("x", *tx), teeny::TensorRef::of("q", *tq),
                                   teeny::TensorRef::of("k", *tk), teeny::TensorRef::of("v", *tv)};
  REQUIRE(model->forward(refs));

  auto at = [&](std::int64_t a, std::int64_t i, std::int64_t c) { return double{xs[(a * B + i) * C + c]}; };
  std::vector<double> softmax(xs.size()), log_softmax(xs.size()), sum(B, 0.0), mean(A * C, 0.0), transpose(xs.size());
  double max = -INFINITY;
  for (std::int64_t a = 0; a < A; ++a) {
    for (std::int64_t c = 0; c < C; ++c) {
      double m = -INFINITY, total = 0;
      for (std::int64_t i = 0; i < B; ++i) m = std::max(m, at(a, i, c));
      for (std::int64_t i = 0; i < B; ++i) total += std::exp(at(a, i, c) - m);
      for (std::int64_t i = 0; i < B; ++i) softmax[(a * B + i) * C + c] = std::exp(at(a, i, c) - m) / total;
    }
    for (std::int64_t i = 0; i < B; ++i) {
      double m = -INFINITY, total = 0;
      for (std::int64_t c = 0; c < C; ++c) m = std::max(m, at(a, i, c));
      for (std::int64_t c = 0; c < C; ++c) total += std::exp(at(a, i, c) - m);
      for (std::int64_t c = 0; c < C; ++c) log_softmax[(a * B + i) * C + c] = at(a, i, c) - m - std::log(total);
      for (std::int64_t c = 0; c < C; ++c) {
        sum[i] += at(a, i, c);
        mean[a * C + c] += at(a, i, c) / B;
        max = std::max(max, at(a, i, c));
        transpose[(c * B + i) * A + a] = at(a, i, c);
      }
    }
  }
  fixtures::check_near(*model->output("softmax"), softmax);
  fixtures::check_near(*model->output("log_softmax"), log_softmax);
  fixtures::check_near(*model->output("sum"), sum);
  fixtures::check_near(*model->output("mean"), mean);
  fixtures::check_near(*model->output("max"), {max});
  fixtures::check_near(*model->output("transpose"), transpose, 0, 0);

  std::vector<double> attention(2 * L * EV, 0.0);
  for (std::int64_t n = 0; n < 2; ++n) {
    for (std::int64_t i = 0; i < L; ++i) {
      const std::int64_t visible = std::min(S, i + 1);  // causal, top-left aligned
      std::vector<double> w(static_cast<std::size_t>(visible));
      double m = -INFINITY, total = 0;
      for (std::int64_t j = 0; j < visible; ++j) {
        double dot = 0;
        for (std::int64_t e = 0; e < E; ++e) dot += double{qs[(n * L + i) * E + e]} * ks[j * E + e];
        w[j] = dot / std::sqrt(double{E});
        m = std::max(m, w[j]);
      }
      for (double& wj : w) total += (wj = std::exp(wj - m));
      for (std::int64_t j = 0; j < visible; ++j) {
        for (std::int64_t e = 0; e < EV; ++e)
          attention[(n * L + i) * EV + e] += w[j] / total * vs[(n * S + j) * EV + e];
      }
    }
  }
  fixtures::check_near(*model->output("attention"), attention, 1e-4, 1e-5);
}

TEST_CASE("embedding: an index out of range gives a row of zeros, never an out-of-bounds read") {
  auto file = teeny::SafetensorsFile::open(fixtures::path("ops/embedding.safetensors"));  // nn.Embedding(10, 4)
  REQUIRE(file);
  GraphBuilder b;
  b.output("out", b.embedding(b.input("indices", teeny::DType::i64, {4}), 10, 4).named("op"));
  auto graph = std::move(b).build();
  REQUIRE(graph);
  auto model = teeny::load_cpu(*graph, {});
  REQUIRE(model);
  REQUIRE(model->load_weights(*file, {.strict = false}));
  auto indices = teeny::Tensor::from<std::int64_t>({3, -1, 10, 9}, {4});
  REQUIRE(indices);
  const teeny::TensorRef refs[] = {teeny::TensorRef::of("indices", *indices)};
  REQUIRE(model->forward(refs));
  auto weight = file->read("op.weight");
  REQUIRE(weight);
  const float* w = weight->view<float>()->data;
  auto out = model->output("out")->as<const float>();
  REQUIRE(out);
  for (std::int64_t j = 0; j < 4; ++j) {
    CHECK(out->data[0 * 4 + j] == w[3 * 4 + j]);
    CHECK(out->data[1 * 4 + j] == 0.0f);
    CHECK(out->data[2 * 4 + j] == 0.0f);
    CHECK(out->data[3 * 4 + j] == w[9 * 4 + j]);
  }
}

TEST_CASE("the f32 lowering refuses integer arithmetic instead of computing it in f32") {
  GraphBuilder b;
  auto x = b.input("x", teeny::DType::i64, {3});
  b.output("y", b.add(x, x).named("sum"));
  auto graph = std::move(b).build();
  REQUIRE(graph);
  auto model = teeny::load_cpu(*graph, {});
  REQUIRE_FALSE(model);
  CHECK(model.error().code() == teeny::Errc::unsupported);
  CHECK(model.error().message().find("i64") != std::string::npos);
}

TEST_CASE("an f64 model loads f32 weights, converting them, and matches PyTorch's f32 result") {
  auto file = teeny::SafetensorsFile::open(fixtures::path("ops/linear.safetensors"));  // nn.Linear(8, 5), f32
  REQUIRE(file);
  auto x = file->read("in.x", teeny::DType::f64);  // f32 values, exactly widened
  REQUIRE(x);
  GraphBuilder b;
  b.output("out", b.linear(b.input("x", teeny::DType::f64, teeny::Shape(x->shape())), 5).named("op"));
  auto graph = std::move(b).build();
  REQUIRE(graph);
  auto model = teeny::load_cpu<double>(*graph, {});
  REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
  auto report = model->load_weights(*file, {.strict = false});
  REQUIRE_MESSAGE(report, (report ? "" : report.error().to_string()));
  CHECK(report->missing.empty());
  CHECK(report->mismatched.empty());
  const teeny::TensorRef refs[] = {teeny::TensorRef::of("x", *x)};
  REQUIRE(model->forward(refs));
  auto expected = file->read("out", teeny::DType::f64);
  REQUIRE(expected);
  // PyTorch computed in f32: the f64 result differs from it by f32 rounding only.
  fixtures::check_close_f64(*model->output("out"), *expected, 1e-5, 1e-6);
}

TEST_CASE("a model of one float dtype refuses a graph of the other, naming the node, input and dtypes") {
  for (const teeny::DType dtype : {teeny::DType::f64, teeny::DType::f32}) {
    const std::string own(teeny::name(dtype));
    const std::string other = dtype == teeny::DType::f64 ? "f32" : "f64";
    GraphBuilder b;
    auto x = b.input("x", dtype, {2, 3});
    b.output("y", b.linear(x, 4).named("fc"));
    auto graph = std::move(b).build();
    REQUIRE(graph);
    std::string message;
    auto refused = [&](auto model) {
      REQUIRE_FALSE(model);
      CHECK(model.error().code() == teeny::Errc::unsupported);
      message = model.error().to_string();
    };
    if (dtype == teeny::DType::f64) {
      refused(teeny::load_cpu(*graph, {}));
    } else {
      refused(teeny::load_cpu<double>(*graph, {}));
    }
    CAPTURE(message);
    CHECK(message.find("'fc'") != std::string::npos);
    CHECK(message.find("('x') is " + own) != std::string::npos);
    CHECK(message.find("computes in " + other) != std::string::npos);
  }
}

TEST_CASE("max pool 3x3 stride 2 over wide rows matches a direct reference, NaNs propagated") {
  // Rows wide enough for the vectorised column pass (and its scalar tail; AVX-512: 16 outputs
  // from 33 columns, the last read apart), padding 0 and 1, odd and even sizes, the stem's 112, and
  // NaNs that must reach every window holding one (as in PyTorch).
  for (const std::int64_t pad : {0, 1}) {
    for (const std::int64_t width : {37, 64, 112}) {
      CAPTURE(pad);
      CAPTURE(width);
      constexpr std::int64_t C = 3, H = 9;
      std::vector<float> xs = noise(C * H * width, 5.0f, 17);
      xs[width + 10] = NAN;                  // channel 0, row 1, column 10
      xs[2 * H * width + 4 * width] = NAN;   // channel 2, row 4, column 0
      xs[H * width + 3 * width + 33] = NAN;  // channel 1, row 3, column 33: a group's 33rd column
      GraphBuilder b;
      auto x = b.input("x", teeny::DType::f32, {1, C, H, width});
      b.output("y", b.max_pool2d(x, 3, {.stride = teeny::Size2{2, 2}, .padding = {pad, pad}}));
      auto graph = std::move(b).build();
      REQUIRE_MESSAGE(graph, (graph ? "" : graph.error().to_string()));
      auto model = teeny::load_cpu(*graph, {}, {.threads = 2});
      REQUIRE_MESSAGE(model, (model ? "" : model.error().to_string()));
      auto tx = teeny::Tensor::from<float>(xs, {1, C, H, width});
      REQUIRE(tx);
      const teeny::TensorRef refs[] = {teeny::TensorRef::of("x", *tx)};
      REQUIRE(model->forward(refs));
      const std::int64_t ho = (H + 2 * pad - 3) / 2 + 1, wo = (width + 2 * pad - 3) / 2 + 1;
      std::vector<double> expected;
      for (std::int64_t c = 0; c < C; ++c) {
        for (std::int64_t oh = 0; oh < ho; ++oh) {
          for (std::int64_t ow = 0; ow < wo; ++ow) {
            double m = -INFINITY;
            for (std::int64_t i = 0; i < 3; ++i) {
              for (std::int64_t j = 0; j < 3; ++j) {
                const std::int64_t ih = 2 * oh - pad + i, iw = 2 * ow - pad + j;
                if (ih < 0 || ih >= H || iw < 0 || iw >= width) continue;
                const double v = xs[(c * H + ih) * width + iw];
                m = std::isnan(v) || std::isnan(m) ? NAN : std::max(m, v);
              }
            }
            expected.push_back(m);
          }
        }
      }
      auto y = model->output("y");
      REQUIRE(y);
      auto got = y->as<const float>();
      REQUIRE(got);
      REQUIRE(got->numel() == static_cast<std::int64_t>(expected.size()));
      std::int64_t nans = 0, bad = 0;
      for (std::size_t i = 0; i < expected.size(); ++i) {
        if (std::isnan(expected[i])) {
          ++nans;
          bad += std::isnan(got->data[i]) ? 0 : 1;
        } else {
          bad += got->data[i] == static_cast<float>(expected[i]) ? 0 : 1;
        }
      }
      CHECK(nans >= 3);
      CHECK(bad == 0);
    }
  }
}
