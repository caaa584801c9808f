// Shape and dtype inference of the layer ops (teeny.graph:ops_nn), with PyTorch's formulas.
#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

import teeny.graph;

#include "graph/support.hpp"

using namespace graph_test;

TEST_CASE("linear maps the last dim and owns weight [out, in] and bias [out]") {
  const Linear fc{.in_features = 784, .out_features = 512};
  CHECK(*run(fc, {f32({batch, 784})}) == f32({batch, 512}));
  CHECK(*run(fc, {f32({2, 5, 784})}) == f32({2, 5, 512}));
  CHECK(*run(fc, {f32({784})}) == f32({512}));

  const std::vector<TensorType> in{f32({batch, 784})};
  const auto params = params_of(GraphOp{fc}, in);
  REQUIRE(params.size() == 2);
  CHECK(params[0] == ParamSpec{"weight", {512, 784}, DType::f32, true});
  CHECK(params[1] == ParamSpec{"bias", {512}, DType::f32, true});
  CHECK(params_of(Linear{784, 10, false}, in).size() == 1);
  CHECK(describe(fc) == "linear(in_features=784, out_features=512, bias=true)");
  CHECK(kind(GraphOp{fc}) == "linear");

  CHECK(error_of(Linear{512, 10}, {f32({batch, 784})}) ==
        "input f32[batch, 784] has 784 features but in_features is 512");
  const std::string int_input = error_of(fc, {i64({batch, 784})});
  CHECK_CONTAINS(int_input, "i64");
  CHECK_CONTAINS(int_input, "floating-point");
  CHECK_CONTAINS(error_of(fc, {f32({})}), "expects a [..., in_features] input, got f32[]");
  CHECK_CONTAINS(error_of(Linear{784, -1}, {f32({1, 784})}), "out_features must be non-negative, got -1");
}

TEST_CASE("matmul follows torch.matmul: 1-D operands and broadcast batch dims") {
  const MatMul mm;
  CHECK(*run(mm, {f32({3}), f32({3})}) == f32({}));
  CHECK(*run(mm, {f32({2, 3}), f32({3, 4})}) == f32({2, 4}));
  CHECK(*run(mm, {f32({3}), f32({2, 3, 4})}) == f32({2, 4}));
  CHECK(*run(mm, {f32({2, 3, 4}), f32({4})}) == f32({2, 3}));
  CHECK(*run(mm, {f32({5, 1, 2, 3}), f32({4, 3, 6})}) == f32({5, 4, 2, 6}));
  CHECK(*run(mm, {f32({batch, 8, 16}), f32({16, 32})}) == f32({batch, 8, 32}));
  CHECK(*run(mm, {i64({2, 3}), i64({3, 4})}) == i64({2, 4}));

  CHECK(error_of(mm, {f32({2, 3}), f32({4, 5})}) ==
        "cannot multiply f32[2, 3] by f32[4, 5]: 3 (last dim of the first) vs 4 (second-to-last dim of the second)");
  CHECK_CONTAINS(error_of(mm, {f32({2, 3}), f32({4})}), "(the only dim of the second)");
  const std::string batch_error = error_of(mm, {f32({2, 2, 3}), f32({3, 3, 4})});
  CHECK_CONTAINS(batch_error, "the batch dims of f32[2, 2, 3] and f32[3, 3, 4] do not broadcast");
  CHECK_CONTAINS(batch_error, "dim 0 is 2 vs 3");
  CHECK_CONTAINS(error_of(mm, {f32({2, 3}), i64({3, 4})}), "f32[2, 3] and i64[3, 4]");
  CHECK_CONTAINS(error_of(mm, {f32({}), f32({3})}), "at least 1 dim");
  CHECK_CONTAINS(error_of(mm, {f32({3})}), "expects 2 inputs, got 1");
}

TEST_CASE("conv2d output size follows PyTorch's formula") {
  const Conv2d lenet{.in_channels = 1, .out_channels = 32, .kernel = 5, .padding = 2};
  CHECK(*run(lenet, {f32({batch, 1, 28, 28})}) == f32({batch, 32, 28, 28}));             // 28 + 4 - 5 + 1
  CHECK(*run(Conv2d{3, 64, 3, 2, 1}, {f32({8, 3, 32, 32})}) == f32({8, 64, 16, 16}));    // (32+2-3)/2+1
  CHECK(*run(Conv2d{3, 8, 7, 2, 3}, {f32({1, 3, 224, 224})}) == f32({1, 8, 112, 112}));  // ResNet stem
  CHECK(*run(Conv2d{.in_channels = 1, .out_channels = 1, .kernel = 3, .dilation = 2}, {f32({1, 1, 10, 10})}) ==
        f32({1, 1, 6, 6}));  // (10 - 2*2 - 1) + 1
  CHECK(*run(Conv2d{.in_channels = 1, .out_channels = 4, .kernel = {3, 5}, .padding = {1, 2}}, {f32({1, 1, 10, 20})}) ==
        f32({1, 4, 10, 20}));
  CHECK(*run(Conv2d{3, 16, 3}, {f32({3, 8, 8})}) == f32({16, 6, 6}));  // unbatched
  // A symbolic spatial dim passes through a size-keeping window only.
  const Dim h = Dim::sym("h");
  CHECK(*run(Conv2d{.in_channels = 1, .out_channels = 2, .kernel = 3, .padding = 1}, {f32({1, 1, h, 9})}) ==
        f32({1, 2, h, 9}));
  CHECK_CONTAINS(error_of(Conv2d{1, 2, 3}, {f32({1, 1, h, 9})}), "dim 2 of input f32[1, 1, h, 9] is symbolic");

  const Conv2d grouped{.in_channels = 4, .out_channels = 8, .kernel = 3, .groups = 2};
  const auto params = params_of(grouped, std::vector<TensorType>{f32({1, 4, 5, 5})});
  REQUIRE(params.size() == 2);
  CHECK(params[0].shape == Shape{8, 2, 3, 3});
  CHECK(params[1].shape == Shape{8});
  CHECK(describe(lenet) ==
        "conv2d(in_channels=1, out_channels=32, kernel_size=(5, 5), stride=(1, 1), padding=(2, 2), "
        "dilation=(1, 1), groups=1, bias=true)");
}

TEST_CASE("conv2d rejects bad attributes and shapes, naming them") {
  CHECK(error_of(Conv2d{.in_channels = 4, .out_channels = 8, .kernel = 3, .groups = 3}, {f32({1, 4, 5, 5})}) ==
        "groups 3 must divide in_channels 4");
  CHECK(error_of(Conv2d{.in_channels = 4, .out_channels = 6, .kernel = 3, .groups = 4}, {f32({1, 4, 5, 5})}) ==
        "groups 4 must divide out_channels 6");
  CHECK(error_of(Conv2d{.in_channels = 1, .out_channels = 1, .kernel = 3, .stride = {0, 1}}, {f32({1, 1, 5, 5})}) ==
        "stride must be positive, got (0, 1)");
  CHECK(error_of(Conv2d{1, 1, 3, 1, -1}, {f32({1, 1, 5, 5})}) == "padding must be non-negative, got (-1, -1)");
  CHECK(error_of(Conv2d{1, 32, 5}, {f32({1, 3, 28, 28})}) ==
        "input f32[1, 3, 28, 28] has 3 channels but in_channels is 1");
  CHECK(
      error_of(Conv2d{1, 1, 5}, {f32({1, 1, 3, 3})}) ==
      "dim 2 of input f32[1, 1, 3, 3] is 3 (3 with padding), smaller than the kernel extent 5 (kernel 5, dilation 1)");
  CHECK(error_of(Conv2d{1, 1, 3}, {f32({28, 28})}) == "expects a [N, C, H, W] or [C, H, W] input, got f32[28, 28]");
  CHECK_CONTAINS(error_of(Conv2d{1, 1, 3}, {typed(DType::u8, {1, 1, 8, 8})}), "is u8");
}

TEST_CASE("conv1d works on [N, C, L] with weight [O, C/groups, k]") {
  const Conv1d conv{.in_channels = 16, .out_channels = 32, .kernel = 3, .stride = 2};
  CHECK(*run(conv, {f32({batch, 16, 100})}) == f32({batch, 32, 49}));  // (100 - 3) / 2 + 1
  CHECK(*run(conv, {f32({16, 100})}) == f32({32, 49}));
  CHECK(*run(Conv1d{.in_channels = 4, .out_channels = 4, .kernel = 3, .padding = 2, .dilation = 2}, {f32({1, 4, 7})}) ==
        f32({1, 4, 7}));
  const auto params = params_of(Conv1d{.in_channels = 16, .out_channels = 32, .kernel = 3, .groups = 4},
                                std::vector<TensorType>{f32({1, 16, 10})});
  CHECK(params[0].shape == Shape{32, 4, 3});
  CHECK(error_of(Conv1d{16, 32, 0}, {f32({1, 16, 10})}) == "kernel_size must be positive, got 0");
  CHECK(error_of(conv, {f32({1, 16, 10, 10})}) == "expects a [N, C, L] or [C, L] input, got f32[1, 16, 10, 10]");
}

TEST_CASE("max_pool2d: stride defaults to the kernel, ceil_mode and its last-window rule") {
  CHECK(*run(MaxPool2d{.kernel = 2}, {f32({batch, 32, 28, 28})}) == f32({batch, 32, 14, 14}));
  CHECK(*run(MaxPool2d{.kernel = 3, .stride = 2, .padding = 1}, {f32({1, 64, 112, 112})}) ==
        f32({1, 64, 56, 56}));  // ResNet
  // 5 wide, kernel 2, stride 2: floor gives 2 windows; ceil gives 3 (the last one partial).
  CHECK(*run(MaxPool2d{.kernel = 2}, {f32({1, 1, 5, 5})}) == f32({1, 1, 2, 2}));
  CHECK(*run(MaxPool2d{.kernel = 2, .ceil_mode = true}, {f32({1, 1, 5, 5})}) == f32({1, 1, 3, 3}));
  // 4 wide, kernel 2, stride 3, padding 1: ceil would give 3 windows, but the third would start at
  // 6 - 1 = 5 >= 4 + 1, outside the input and left padding, so PyTorch drops it: 2.
  CHECK(*run(MaxPool2d{.kernel = 2, .stride = 3, .padding = 1, .ceil_mode = true}, {f32({1, 1, 4, 4})}) ==
        f32({1, 1, 2, 2}));
  // 6 wide, kernel 3, stride 2, ceil: (6 - 3 + 1) / 2 + 1 = 3, and the last window starts at 4 < 6.
  CHECK(*run(MaxPool2d{.kernel = 3, .stride = 2, .ceil_mode = true}, {f32({1, 1, 6, 6})}) == f32({1, 1, 3, 3}));
  CHECK(*run(MaxPool2d{.kernel = 3, .stride = 1, .dilation = 2}, {f32({1, 1, 10, 10})}) == f32({1, 1, 6, 6}));
  CHECK(*run(MaxPool2d{.kernel = {2, 1}}, {f32({4, 6, 6})}) == f32({4, 3, 6}));  // unbatched, stride (2, 1)

  CHECK(error_of(MaxPool2d{.kernel = 3, .padding = 2}, {f32({1, 1, 8, 8})}) ==
        "padding (2, 2) must be at most half the kernel size (3, 3)");
  CHECK_CONTAINS(error_of(MaxPool2d{.kernel = 3}, {f32({1, 1, 2, 2})}), "smaller than the kernel extent 3");
  CHECK_CONTAINS(error_of(MaxPool2d{.kernel = 2}, {i64({1, 1, 4, 4})}), "i64");
  CHECK(describe(MaxPool2d{.kernel = 2}) ==
        "max_pool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0), dilation=(1, 1), ceil_mode=false)");
}

TEST_CASE("avg_pool2d and adaptive_avg_pool2d") {
  CHECK(*run(AvgPool2d{.kernel = 3, .stride = 2}, {f32({1, 3, 7, 7})}) == f32({1, 3, 3, 3}));
  CHECK(*run(AvgPool2d{.kernel = 2, .ceil_mode = true}, {f32({1, 3, 5, 5})}) == f32({1, 3, 3, 3}));
  CHECK(*run(AvgPool2d{.kernel = 3, .stride = 1, .padding = 1}, {f32({batch, 3, 5, 5})}) == f32({batch, 3, 5, 5}));
  CHECK(error_of(AvgPool2d{.kernel = 2, .divisor_override = 0}, {f32({1, 1, 4, 4})}) ==
        "divisor_override must not be zero");
  CHECK(describe(AvgPool2d{.kernel = 2, .divisor_override = 3}) ==
        "avg_pool2d(kernel_size=(2, 2), stride=(2, 2), padding=(0, 0), ceil_mode=false, count_include_pad=true, "
        "divisor_override=3)");

  CHECK(*run(AdaptiveAvgPool2d{}, {f32({batch, 512, 7, 7})}) == f32({batch, 512, 1, 1}));
  CHECK(*run(AdaptiveAvgPool2d{{2, 3}}, {f32({1, 8, 9, 9})}) == f32({1, 8, 2, 3}));
  CHECK(error_of(AdaptiveAvgPool2d{0}, {f32({1, 8, 9, 9})}) == "output_size must be positive, got (0, 0)");
}

TEST_CASE("batch_norm: 1d and 2d layouts, PyTorch's five state_dict entries") {
  const BatchNorm bn2{.num_features = 16};
  CHECK(*run(bn2, {f32({batch, 16, 8, 8})}) == f32({batch, 16, 8, 8}));
  CHECK(kind(GraphOp{bn2}) == "batch_norm2d");
  CHECK(BatchNorm::kind == "batch_norm");
  const BatchNorm bn1{.num_features = 16, .spatial_dims = 1};
  CHECK(kind(GraphOp{bn1}) == "batch_norm1d");
  CHECK(*run(bn1, {f32({batch, 16})}) == f32({batch, 16}));
  CHECK(*run(bn1, {f32({batch, 16, 50})}) == f32({batch, 16, 50}));

  const auto params = params_of(bn2, std::vector<TensorType>{f32({1, 16, 4, 4})});
  REQUIRE(params.size() == 5);
  CHECK(params[0] == ParamSpec{"weight", {16}, DType::f32, true});
  CHECK(params[1] == ParamSpec{"bias", {16}, DType::f32, true});
  CHECK(params[2] == ParamSpec{"running_mean", {16}, DType::f32, false});
  CHECK(params[3] == ParamSpec{"running_var", {16}, DType::f32, false});
  CHECK(params[4] == ParamSpec{"num_batches_tracked", {}, DType::i64, false});
  CHECK(params_of(BatchNorm{.num_features = 16, .affine = false}, std::vector<TensorType>{}).size() == 3);
  CHECK(params_of(BatchNorm{.num_features = 16, .track_running_stats = false}, std::vector<TensorType>{}).size() == 2);

  CHECK(error_of(BatchNorm{.num_features = 32}, {f32({batch, 16, 8, 8})}) ==
        "input f32[batch, 16, 8, 8] has 16 channels but num_features is 32");
  CHECK(error_of(bn2, {f32({batch, 16})}) == "expects a [N, C, H, W] input, got f32[batch, 16]");
  CHECK(describe(bn2) ==
        "batch_norm2d(num_features=16, eps=1e-05, momentum=0.1, affine=true, track_running_stats=true)");
}

TEST_CASE("layer_norm, rms_norm and group_norm") {
  const LayerNorm ln{.normalized_shape = {64}};
  CHECK(*run(ln, {f32({batch, 10, 64})}) == f32({batch, 10, 64}));
  CHECK(*run(LayerNorm{.normalized_shape = {10, 64}}, {f32({batch, 10, 64})}) == f32({batch, 10, 64}));
  const std::vector<TensorType> in{f32({2, 64})};
  CHECK(params_of(ln, in) ==
        std::vector<ParamSpec>{{"weight", {64}, DType::f32, true}, {"bias", {64}, DType::f32, true}});
  CHECK(params_of(LayerNorm{.normalized_shape = {64}, .bias = false}, in).size() == 1);
  CHECK(params_of(LayerNorm{.normalized_shape = {64}, .elementwise_affine = false}, in).empty());
  CHECK(error_of(LayerNorm{.normalized_shape = {32}}, {f32({batch, 10, 64})}) ==
        "input f32[batch, 10, 64] does not end in normalized_shape [32]");
  CHECK(error_of(LayerNorm{}, {f32({2, 3})}) == "normalized_shape must not be empty");

  const RMSNorm rms{.normalized_shape = {64}};
  CHECK(*run(rms, {half({batch, 64})}) == half({batch, 64}));
  CHECK(params_of(rms, std::vector<TensorType>{half({1, 64})}) ==
        std::vector<ParamSpec>{{"weight", {64}, DType::f16, true}});
  CHECK(describe(rms) == "rms_norm(normalized_shape=[64], eps=none, elementwise_affine=true)");

  const GroupNorm gn{.num_groups = 4, .num_channels = 32};
  CHECK(*run(gn, {f32({2, 32, 8, 8})}) == f32({2, 32, 8, 8}));
  CHECK(params_of(gn, std::vector<TensorType>{f32({2, 32, 8, 8})}).size() == 2);
  CHECK(error_of(GroupNorm{.num_groups = 3, .num_channels = 32}, {f32({2, 32, 8, 8})}) ==
        "num_groups 3 must divide num_channels 32");
  CHECK(error_of(gn, {f32({2, 16, 8, 8})}) == "input f32[2, 16, 8, 8] has 16 channels but num_channels is 32");
}

TEST_CASE("embedding maps integer indices to vectors of its dtype") {
  const Embedding emb{.num_embeddings = 1000, .embedding_dim = 128};
  CHECK(*run(emb, {i64({batch, 16})}) == f32({batch, 16, 128}));
  CHECK(*run(emb, {typed(DType::i32, {7})}) == f32({7, 128}));
  CHECK(*run(Embedding{.num_embeddings = 10, .embedding_dim = 4, .dtype = DType::f16}, {i64({3})}) == half({3, 4}));
  CHECK(params_of(emb, std::vector<TensorType>{i64({1})}) ==
        std::vector<ParamSpec>{{"weight", {1000, 128}, DType::f32, true}});
  CHECK(error_of(emb, {f32({batch, 16})}) == "input f32[batch, 16] is f32, but embedding indices must be integers");
  CHECK(error_of(Embedding{.num_embeddings = 10, .embedding_dim = 4, .padding_idx = 10}, {i64({3})}) ==
        "padding_idx 10 is out of range for num_embeddings 10");
  CHECK(*run(Embedding{.num_embeddings = 10, .embedding_dim = 4, .padding_idx = -1}, {i64({3})}) == f32({3, 4}));
}

TEST_CASE("dropout is the identity with p in [0, 1]") {
  CHECK(*run(Dropout{}, {f32({batch, 10})}) == f32({batch, 10}));
  CHECK(describe(Dropout{}) == "dropout(p=0.5)");
  CHECK(error_of(Dropout{1.5}, {f32({2})}) == "dropout probability must be between 0 and 1, got 1.5");
}

TEST_CASE("attention: q [..., L, E], k [..., S, E], v [..., S, Ev] -> [..., L, Ev]") {
  const Attention sdpa;
  CHECK(*run(sdpa, {f32({batch, 8, 10, 64}), f32({batch, 8, 20, 64}), f32({batch, 8, 20, 32})}) ==
        f32({batch, 8, 10, 32}));
  CHECK(*run(sdpa, {f32({2, 1, 10, 64}), f32({1, 4, 20, 64}), f32({20, 32})}) == f32({2, 4, 10, 32}));
  CHECK(*run(Attention{.causal = true}, {f32({5, 8}), f32({5, 8}), f32({5, 8})}) == f32({5, 8}));
  CHECK(error_of(sdpa, {f32({10, 64}), f32({20, 32}), f32({20, 32})}) ==
        "query f32[10, 64] has embedding dim 64 but key f32[20, 32] has 32");
  CHECK(error_of(sdpa, {f32({10, 64}), f32({20, 64}), f32({21, 32})}) ==
        "key f32[20, 64] has sequence length 20 but value f32[21, 32] has 21");
  CHECK_CONTAINS(error_of(sdpa, {f32({2, 10, 8}), f32({3, 20, 8}), f32({20, 8})}), "do not broadcast");
  CHECK_CONTAINS(error_of(sdpa, {f32({10, 8}), half({20, 8}), f32({20, 8})}), "f32[10, 8] and f16[20, 8]");
  CHECK(describe(Attention{.scale = 0.125}) == "attention(causal=false, scale=0.125)");
}
