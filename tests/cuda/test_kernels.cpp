// The CUDA kernels against the CPU backend's: each op run on the GPU in f32, f64, f16 and bf16 and
// by the CPU kernel in f64 on the same (rounded) inputs. Without a GPU the cases still pack every
// op's arguments in every dtype (and run the CPU reference), then print why they skip the launch.
#include "cuda/kernel_check.hpp"

using namespace kernel_check;  // NOLINT(google-build-using-namespace): the harness, in every case

TEST_CASE("cuda kernels: reshape, permute, slice and concat move the CPU's elements") {
  const HostTensor x = random_tensor({2, 3, 4}, 1);
  check_against_cpu(
      []<class T>() {
        teeny::reshape_op<T> op;
        op.out = output<T>({6, 4});
        return op;
      },
      {{x}}, {6, 4});
  check_against_cpu(
      []<class T>() {
        teeny::permute_op<T> op;
        op.dims = {2, 0, 1};
        op.out = output<T>({4, 2, 3});
        return op;
      },
      {{x}}, {4, 2, 3});
  check_against_cpu(
      []<class T>() {
        teeny::slice_op<T> op;
        op.axis = 2;
        op.start = 1;
        op.step = 2;
        op.out = output<T>({2, 3, 2});
        return op;
      },
      {{x}}, {2, 3, 2});
  check_against_cpu(
      []<class T>() {
        teeny::concat_op<T> op;
        op.axis = 1;
        op.inputs = 2;
        op.out = output<T>({2, 5, 4});
        return op;
      },
      {{x, random_tensor({2, 2, 4}, 2)}}, {2, 5, 4});
}

TEST_CASE("cuda kernels: constant, reflect and replicate padding, and nearest upsampling") {
  const HostTensor x = random_tensor({2, 3, 4}, 3);
  for (const teeny::PadMode mode : {teeny::PadMode::constant, teeny::PadMode::reflect, teeny::PadMode::replicate}) {
    CAPTURE(static_cast<int>(mode));
    check_against_cpu(
        [mode]<class T>() {
          teeny::pad_op<T> op;
          op.attrs.pads = {1, 2, 2, -1};  // last dim: 1 before, 2 after; dim 1: 2 before, 1 cropped after
          op.attrs.mode = mode;
          op.attrs.value = 0.5;
          op.out = output<T>({2, 4, 7});
          return op;
        },
        {{x}}, {2, 4, 7});
  }
  const HostTensor image = random_tensor({1, 2, 3, 4}, 4);
  check_against_cpu(
      []<class T>() {
        teeny::upsample_op<T> op;
        op.attrs.scale_h = 2;
        op.attrs.scale_w = 1.5;
        op.out = output<T>({1, 2, 6, 6});
        return op;
      },
      {{image}}, {1, 2, 6, 6});
}

TEST_CASE("cuda kernels: max, average and adaptive average pooling") {
  const HostTensor x = random_tensor({2, 3, 8, 7}, 5);
  check_against_cpu(
      []<class T>() {
        teeny::max_pool2d_op<T> op;
        op.attrs.kernel = {3, 3};
        op.attrs.stride = teeny::Size2{2, 2};
        op.attrs.padding = {1, 1};
        op.attrs.dilation = {1, 2};
        op.out = output<T>({2, 3, 4, 3});
        return op;
      },
      {{x}}, {2, 3, 4, 3});
  check_against_cpu(
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
      {{x}}, {2, 3, 5, 4});
  check_against_cpu(
      []<class T>() {
        teeny::adaptive_avg_pool2d_op<T> op;
        op.attrs.output_size = {3, 2};
        op.out = output<T>({2, 3, 3, 2});
        return op;
      },
      {{x}}, {2, 3, 3, 2});
}

TEST_CASE("cuda kernels: softmax, log_softmax and sum / mean / amax reductions") {
  const HostTensor x = random_tensor({3, 4, 5}, 6);
  for (const bool log : {false, true}) {
    check_against_cpu(
        [log]<class T>() {
          teeny::softmax_op<T> op;
          op.axis = 1;
          op.log = log;
          op.out = output<T>({3, 4, 5});
          return op;
        },
        {{x}}, {3, 4, 5});
  }
  for (const teeny::ReduceFn fn : {teeny::ReduceFn::sum, teeny::ReduceFn::mean, teeny::ReduceFn::max}) {
    CAPTURE(static_cast<int>(fn));
    check_against_cpu(
        [fn]<class T>() {
          teeny::reduce_op<T> op;
          op.fn = fn;
          op.axes = {0, 2};
          op.out = output<T>({4});
          return op;
        },
        {{x}}, {4});
  }
}

TEST_CASE("cuda kernels: batch norm (running or batch statistics), layer, RMS and group norm") {
  const HostTensor x = random_tensor({4, 3, 10}, 7);  // [N, C, S]
  HostTensor var = random_tensor({3}, 9);
  for (double& v : var.values) v = 0.5 + std::abs(v);
  const HostTensor count{{}, {3.0}};
  for (const bool running : {true, false}) {
    CAPTURE(running);
    Operands operands{{x}, {random_tensor({3}, 10), random_tensor({3}, 11)}};
    if (running) operands.params.insert(operands.params.end(), {random_tensor({3}, 8), var, count});
    check_against_cpu(
        [running]<class T>() {
          teeny::batch_norm_op<T> op;
          op.attrs.num_features = 3;
          op.attrs.spatial_dims = 1;
          op.attrs.track_running_stats = running;
          op.epilogue = {true, teeny::UnaryFn::relu, {}};
          op.out = output<T>({4, 3, 10});
          return op;
        },
        operands, {4, 3, 10});
  }
  const HostTensor rows = random_tensor({6, 2, 5}, 12);
  check_against_cpu(
      []<class T>() {
        teeny::layer_norm_op<T> op;
        op.attrs.normalized_shape = {2, 5};
        op.out = output<T>({6, 2, 5});
        return op;
      },
      {{rows}, {random_tensor({2, 5}, 13), random_tensor({2, 5}, 14)}}, {6, 2, 5});
  check_against_cpu(
      []<class T>() {
        teeny::rms_norm_op<T> op;
        op.attrs.normalized_shape = {5};
        op.attrs.eps = 1e-6;
        op.out = output<T>({6, 2, 5});
        return op;
      },
      {{rows}, {random_tensor({5}, 15)}}, {6, 2, 5});
  check_against_cpu(
      []<class T>() {
        teeny::group_norm_op<T> op;
        op.attrs.num_groups = 2;
        op.attrs.num_channels = 4;
        op.out = output<T>({3, 4, 3, 2});
        return op;
      },
      {{random_tensor({3, 4, 3, 2}, 16)}, {random_tensor({4}, 17), random_tensor({4}, 18)}}, {3, 4, 3, 2});
}

TEST_CASE("an RMS norm without eps takes its dtype's machine epsilon, as PyTorch's torch.finfo(dtype).eps") {
  const auto eps_of = []<class T>() {
    teeny::rms_norm_op<T> op;
    op.attrs.normalized_shape = {4};
    op.out = output<T>({2, 4});
    std::vector<T> x(8);
    std::vector<T> y(8);
    const TensorBinding inputs[] = {{x.data(), teeny::dtype_of<T>, {2, 4}, 0}};
    const TensorBinding params[] = {{x.data(), teeny::dtype_of<T>, {4}, 0}};
    auto args = op.pack_args({inputs, params, {y.data(), teeny::dtype_of<T>, {2, 4}, 0}});
    REQUIRE(args);
    return args->eps;
  };
  CHECK(eps_of.operator()<float>() == 0x1p-23);
  CHECK(eps_of.operator()<double>() == 0x1p-52);
  CHECK(eps_of.operator()<teeny::f16>() == 0x1p-10);
  CHECK(eps_of.operator()<teeny::bf16>() == 0x1p-7);
}

TEST_CASE("cuda kernels: linear with bias and a fused activation, over partial tiles") {
  for (const bool bias : {true, false}) {
    CAPTURE(bias);
    Operands operands{{random_tensor({2, 20, 37}, 19)}, {random_tensor({19, 37}, 20)}};
    if (bias) operands.params.push_back(random_tensor({19}, 21));
    check_against_cpu(
        [bias]<class T>() {
          teeny::linear_op<T> op;
          op.attrs.in_features = 37;
          op.attrs.out_features = 19;
          op.attrs.bias = bias;
          op.epilogue = {true, teeny::UnaryFn::gelu_tanh, {}};
          op.out = output<T>({2, 20, 19});
          return op;
        },
        operands, {2, 20, 19});
  }
}

TEST_CASE("cuda kernels: convolution, grouped and strided, and with a folded BatchNorm, residual or max pool") {
  check_against_cpu(
      []<class T>() {
        teeny::conv_op<T> op;
        op.attrs = {4, 6, 3, 2, 1, 1, 2, true};  // in, out, kernel, stride, padding, dilation, groups, bias
        op.epilogue = {true, teeny::UnaryFn::relu, {}};
        op.out = output<T>({2, 6, 5, 4});
        return op;
      },
      {{random_tensor({2, 4, 9, 8}, 22)}, {random_tensor({6, 2, 3, 3}, 23), random_tensor({6}, 24)}}, {2, 6, 5, 4});

  HostTensor var = random_tensor({4}, 29);
  for (double& v : var.values) v = 0.5 + std::abs(v);
  check_against_cpu(
      []<class T>() {
        teeny::conv_op<T> op;
        op.attrs = {3, 4, 3, 1, 1, 1, 1, false};
        op.norm = teeny::BatchNorm{.num_features = 4};
        op.residual = true;
        op.epilogue = {true, teeny::UnaryFn::relu, {}};
        op.out = output<T>({1, 4, 6, 6});
        return op;
      },
      {{random_tensor({1, 3, 6, 6}, 25), random_tensor({1, 4, 6, 6}, 26)},
       {random_tensor({4, 3, 3, 3}, 27), random_tensor({4}, 28), random_tensor({4}, 30), random_tensor({4}, 31), var}},
      {1, 4, 6, 6});

  check_against_cpu(
      []<class T>() {
        teeny::conv_op<T> op;
        op.attrs = {3, 2, 3, 1, 1, 1, 1, true};
        op.pool = teeny::MaxPool2d{.kernel = 2};
        op.epilogue = {true, teeny::UnaryFn::relu, {}};
        op.out = output<T>({1, 2, 4, 4});
        return op;
      },
      {{random_tensor({1, 3, 8, 8}, 32)}, {random_tensor({2, 3, 3, 3}, 33), random_tensor({2}, 34)}}, {1, 2, 4, 4});
}

TEST_CASE("cuda kernels: matmul with broadcast batches and a 1-D operand") {
  check_against_cpu(
      []<class T>() {
        teeny::matmul_op<T> op;
        op.out = output<T>({2, 5, 3, 6});
        return op;
      },
      {{random_tensor({2, 1, 3, 4}, 35), random_tensor({5, 4, 6}, 36)}}, {2, 5, 3, 6});
  check_against_cpu(
      []<class T>() {
        teeny::matmul_op<T> op;
        op.out = output<T>({6});
        return op;
      },
      {{random_tensor({4}, 37), random_tensor({4, 6}, 38)}}, {6});
}

TEST_CASE("cuda kernels: embedding rows (an index out of range gives zeros) and attention, causal or not") {
  const HostTensor indices{{2, 3}, {0, 4, 2, 4, 7, -1}, teeny::DType::i64};
  check_against_cpu(
      []<class T>() {
        teeny::embedding_op<T> op;
        op.attrs.num_embeddings = 5;
        op.attrs.embedding_dim = 3;
        op.out = output<T>({2, 3, 3});
        return op;
      },
      {{indices}, {random_tensor({5, 3}, 39)}}, {2, 3, 3});
  for (const bool causal : {false, true}) {
    CAPTURE(causal);
    check_against_cpu(
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
