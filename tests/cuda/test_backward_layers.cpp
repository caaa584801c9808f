// The CUDA backward kernels of the layers (linear, matmul, convolution, the norms, embedding and
// attention) in the cases beyond the op table's (tests/ops/cases.hpp, which
// tests/cuda/test_kernels.cpp runs): more shapes and attributes, the eval phase, large tables and
// rows. Each op's backward runs on the GPU in f32, f64, f16 and bf16
// and by the CPU kernel in f64, from the same (rounded) inputs, dL/dy and starting gradients; and
// batch norm's training forward (batch statistics, running ones moved). Training builds only.
// Without a GPU the cases still pack every op's backward arguments in every dtype (and run the CPU
// reference), then print why they skip the launch.
#include "cuda/kernel_check.hpp"

#if TEENY_TRAINING
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <utility>
#include <vector>

using namespace kernel_check;  // NOLINT(google-build-using-namespace): the harness, in every case

namespace {

// Random values in [0.5, 2.5): a running variance.
HostTensor positive(const ConcreteShape& shape, unsigned seed) {
  HostTensor t = random_tensor(shape, seed);
  for (double& v : t.values) v = 0.5 + std::abs(v);
  return t;
}

}  // namespace

TEST_CASE("cuda backward: linear with and without bias, with a fused activation, over partial tiles") {
  struct Case {
    ConcreteShape x;
    std::int64_t in;
    std::int64_t out;
  };
  // More rows than outputs (tiles of dx past dW's), and fewer (tiles of dW past dx's).
  for (const Case& c : {Case{{2, 21, 37}, 37, 19}, Case{{3, 20}, 20, 35}}) {
    ConcreteShape y_shape = c.x;
    y_shape[y_shape.rank() - 1] = c.out;
    const std::int64_t in = c.in;
    const std::int64_t out = c.out;
    for (const bool bias : {true, false}) {
      for (const teeny::Epilogue epilogue : {teeny::Epilogue{}, teeny::Epilogue{true, teeny::UnaryFn::tanh, {}},
                                             teeny::Epilogue{true, teeny::UnaryFn::leaky_relu, {0.1, 0}}}) {
        CAPTURE(in);
        CAPTURE(bias);
        CAPTURE(static_cast<int>(epilogue.fn));
        Operands operands{{random_tensor(c.x, 100)}, {random_tensor({out, in}, 101)}};
        if (bias) operands.params.push_back(random_tensor({out}, 102));
        check_backward_against_cpu(
            [=]<class T>() {
              teeny::linear_op<T> op;
              op.attrs.in_features = in;
              op.attrs.out_features = out;
              op.attrs.bias = bias;
              op.epilogue = epilogue;
              op.out = output<T>(y_shape);
              return op;
            },
            operands, y_shape);
      }
    }
  }
}

TEST_CASE("cuda backward: matmul with broadcast batches and 1-D operands") {
  struct Case {
    ConcreteShape a;
    ConcreteShape b;
    ConcreteShape y;
  };
  for (const Case& c : {Case{{2, 1, 3, 4}, {5, 4, 6}, {2, 5, 3, 6}},  // each operand shared by some batches
                        Case{{3, 4}, {2, 2, 4, 5}, {2, 2, 3, 5}},     // a shared by all four
                        Case{{4}, {4, 6}, {6}},                       // a 1-D first operand: a row
                        Case{{2, 3, 4}, {4}, {2, 3}}}) {              // a 1-D second one: a column
    CAPTURE(teeny::to_string(c.y));
    const ConcreteShape y_shape = c.y;
    check_backward_against_cpu(
        [=]<class T>() {
          teeny::matmul_op<T> op;
          op.out = output<T>(y_shape);
          return op;
        },
        {{random_tensor(c.a, 110), random_tensor(c.b, 111)}}, y_shape);
  }
}

TEST_CASE("cuda backward: convolution, grouped, strided, padded and dilated, with bias and activation") {
  // 3x3, stride 2, padding 1, 2 groups, bias, ReLU.
  check_backward_against_cpu(
      []<class T>() {
        teeny::conv_op<T> op;
        op.attrs = {4, 6, 3, 2, 1, 1, 2, true};  // in, out, kernel, stride, padding, dilation, groups, bias
        op.epilogue = {true, teeny::UnaryFn::relu, {}};
        op.out = output<T>({2, 6, 5, 4});
        return op;
      },
      {{random_tensor({2, 4, 9, 8}, 120)}, {random_tensor({6, 2, 3, 3}, 121), random_tensor({6}, 122)}}, {2, 6, 5, 4});
  // Dilation 2, padding 2, no bias, tanh.
  check_backward_against_cpu(
      []<class T>() {
        teeny::conv_op<T> op;
        op.attrs = {3, 4, 3, 1, 2, 2, 1, false};
        op.epilogue = {true, teeny::UnaryFn::tanh, {}};
        op.out = output<T>({1, 4, 7, 6});
        return op;
      },
      {{random_tensor({1, 3, 7, 6}, 123)}, {random_tensor({4, 3, 3, 3}, 124)}}, {1, 4, 7, 6});
  // A 2x3 kernel with a different stride, padding and dilation along each dim, 2 groups, no activation.
  check_backward_against_cpu(
      []<class T>() {
        teeny::conv_op<T> op;
        op.attrs = {.in_channels = 2,
                    .out_channels = 4,
                    .kernel = {2, 3},
                    .stride = {2, 1},
                    .padding = {0, 2},
                    .dilation = {1, 2},
                    .groups = 2,
                    .bias = true};
        op.out = output<T>({3, 4, 3, 5});
        return op;
      },
      {{random_tensor({3, 2, 6, 5}, 125)}, {random_tensor({4, 1, 2, 3}, 126), random_tensor({4}, 127)}}, {3, 4, 3, 5});
  // A Conv1d (one row high), strided and padded.
  check_backward_against_cpu(
      []<class T>() {
        auto op = teeny::conv_op<T>::from(
            teeny::Conv1d{.in_channels = 3, .out_channels = 2, .kernel = 3, .stride = 2, .padding = 1, .bias = true},
            output<T>({2, 2, 4}));
        op.epilogue = {true, teeny::UnaryFn::relu, {}};
        return op;
      },
      {{random_tensor({2, 3, 8}, 128)}, {random_tensor({2, 3, 3}, 129), random_tensor({2}, 130)}}, {2, 2, 4});
}

TEST_CASE("cuda backward: batch norm in training (with and without running statistics) and in eval") {
  const ConcreteShape shape{4, 3, 10};
  const HostTensor x = random_tensor(shape, 140);
  const HostTensor var = positive({3}, 144);
  const HostTensor count{{}, {3.0}};  // num_batches_tracked
  const teeny::RunPhase training{true, 7, 3};
  const teeny::RunPhase eval{};
  for (const bool affine : {true, false}) {
    for (const bool running : {true, false}) {
      CAPTURE(affine);
      CAPTURE(running);
      Operands operands{{x}};
      if (affine) operands.params = {random_tensor({3}, 141), random_tensor({3}, 142)};
      if (running) operands.params.insert(operands.params.end(), {random_tensor({3}, 143), var, count});
      const auto make = [=]<class T>() {
        teeny::batch_norm_op<T> op;
        op.attrs.num_features = 3;
        op.attrs.spatial_dims = 1;
        op.attrs.affine = affine;
        op.attrs.track_running_stats = running;
        op.epilogue = {true, teeny::UnaryFn::relu, {}};
        op.out = output<T>(shape);
        return op;
      };
      // The training forward: the batch's statistics, running ones or not.
      check_against_cpu(make, operands, shape, training);
      check_backward_against_cpu(make, operands, shape, training);
      // Eval: the running statistics' affine backward, or the batch's statistics without them.
      check_backward_against_cpu(make, operands, shape, eval);
    }
  }
}

namespace {
// Batch norm's training forward moves the running statistics and the batch count on the GPU as
// the CPU's does (check_against_cpu compares the outputs only). 40 channels: 40 blocks count the
// batch once.
template <class T>
void check_running_statistics(std::optional<double> momentum) {
  CAPTURE(teeny::name(teeny::dtype_of<T>));
  CAPTURE(momentum.value_or(-1.0));
  constexpr std::int64_t channels = 40;
  const ConcreteShape shape{4, channels, 5};
  const auto make = [=]<class U>() {
    teeny::batch_norm_op<U> op;
    op.attrs.num_features = channels;
    op.attrs.spatial_dims = 1;
    op.attrs.momentum = momentum;
    op.out = output<U>(shape);
    return op;
  };
  const Operands operands{{random_tensor(shape, 150)},
                          {random_tensor({channels}, 151), random_tensor({channels}, 152),
                           random_tensor({channels}, 153), positive({channels}, 154), HostTensor{{}, {5.0}}}};
  const teeny::RunPhase phase{true, 7, 3};
  auto op = make.template operator()<T>();
  const Operands rounded = rounded_for<T>(op, operands);

  // The CPU's forward in f64, which updates its copies of the buffers.
  auto cpu_op = make.template operator()<double>();
  std::vector<std::vector<std::byte>> host;
  const Bound cpu_bound = bind(cpu_op, rounded, [&](std::vector<std::byte> bytes) {
    host.push_back(std::move(bytes));
    return static_cast<void*>(host.back().data());
  });
  std::vector<double> y(static_cast<std::size_t>(shape.numel()));
  teeny::CpuContext cpu;
  cpu.set_phase(phase);
  for_each_launch(cpu_op, {cpu_bound.inputs, cpu_bound.params, {y.data(), teeny::DType::f64, shape, 0}},
                  [&](const auto& args) {
                    auto state = prepare_kernel(cpu_op, args, cpu);
                    REQUIRE(state);
                    run_kernel(cpu_op, args, *state, cpu);
                  });
  const auto* want_mean = static_cast<const double*>(cpu_bound.params[2].data);
  const auto* want_var = static_cast<const double*>(cpu_bound.params[3].data);
  const std::int64_t want_count = *static_cast<const std::int64_t*>(cpu_bound.params[4].data);
  CHECK(want_count == 6);
  if (teeny::cuda::device_count() == 0) {
    std::printf("SKIP (GPU launch): %s\n", teeny::cuda::no_device_reason().c_str());
    return;
  }

  std::vector<teeny::cuda::DeviceBuffer> buffers;
  const Bound b = bind(op, rounded, [&](const std::vector<std::byte>& bytes) {
    auto buffer = teeny::cuda::DeviceBuffer::allocate(bytes.size());
    REQUIRE(buffer);
    REQUIRE(buffer->upload(bytes));
    buffers.push_back(std::move(*buffer));
    return buffers.back().data();
  });
  auto out = teeny::cuda::DeviceBuffer::allocate(static_cast<std::size_t>(shape.numel()) * sizeof(T));
  REQUIRE(out);
  const teeny::OpBindings bindings{b.inputs, b.params, {out->data(), teeny::dtype_of<T>, shape, 0}};
  const GpuPhase device_phase = gpu_phase(phase);
  auto status = teeny::cuda::launch(op, bindings, "gpu-case", nullptr, device_phase.pointer());
  REQUIRE_MESSAGE(status, (status ? "" : status.error().to_string()));
  REQUIRE(teeny::cuda::synchronize("the GPU case"));
  std::vector<T> mean(channels);
  std::vector<T> var(channels);
  std::int64_t count = 0;
  REQUIRE(teeny::cuda::copy_to_host(std::as_writable_bytes(std::span(mean)), b.params[2].data));
  REQUIRE(teeny::cuda::copy_to_host(std::as_writable_bytes(std::span(var)), b.params[3].data));
  REQUIRE(teeny::cuda::copy_to_host(std::as_writable_bytes(std::span(&count, 1)), b.params[4].data));
  CHECK(count == want_count);
  for (std::size_t c = 0; c < mean.size(); ++c) {
    CAPTURE(c);
    CHECK(std::abs(from_element(mean[c]) - want_mean[c]) <=
          Tolerance{}.of<T>() * std::max(1.0, std::abs(want_mean[c])));
    CHECK(std::abs(from_element(var[c]) - want_var[c]) <= Tolerance{}.of<T>() * std::max(1.0, std::abs(want_var[c])));
  }
}
}  // namespace

TEST_CASE("cuda kernels: batch norm in training moves the running statistics and the count as the CPU's") {
  for (const std::optional<double> momentum : {std::optional<double>(0.1), std::optional<double>()}) {
    check_running_statistics<float>(momentum);
    check_running_statistics<double>(momentum);
    check_running_statistics<teeny::f16>(momentum);
    check_running_statistics<teeny::bf16>(momentum);
  }
}

TEST_CASE("cuda backward: layer and RMS norm, with and without their affine parameters") {
  // D = 40: the parameters' gradients over two blocks of 32 columns.
  const ConcreteShape shape{6, 2, 20};
  const HostTensor x = random_tensor(shape, 160);
  struct Affine {
    bool weight;
    bool bias;
  };
  for (const Affine affine : {Affine{true, true}, Affine{true, false}, Affine{false, false}}) {
    CAPTURE(affine.weight);
    CAPTURE(affine.bias);
    Operands operands{{x}};
    if (affine.weight) operands.params.push_back(random_tensor({2, 20}, 161));
    if (affine.bias) operands.params.push_back(random_tensor({2, 20}, 162));
    check_backward_against_cpu(
        [=]<class T>() {
          teeny::layer_norm_op<T> op;
          op.attrs.normalized_shape = {2, 20};
          op.attrs.elementwise_affine = affine.weight;
          op.attrs.bias = affine.bias;
          op.out = output<T>(shape);
          return op;
        },
        operands, shape);
  }
  const ConcreteShape rows{9, 37};
  for (const bool weight : {true, false}) {
    CAPTURE(weight);
    Operands operands{{random_tensor(rows, 163)}};
    if (weight) operands.params.push_back(random_tensor({37}, 164));
    check_backward_against_cpu(
        [=]<class T>() {
          teeny::rms_norm_op<T> op;
          op.attrs.normalized_shape = {37};
          op.attrs.eps = 1e-6;  // the same in every dtype (none: the dtype's machine epsilon)
          op.attrs.elementwise_affine = weight;
          op.out = output<T>(rows);
          return op;
        },
        operands, rows);
  }
}

TEST_CASE("cuda backward: group norm, with and without its affine parameters") {
  struct Case {
    ConcreteShape x;
    std::int64_t groups;
    bool affine;
  };
  // 12 channels in one group: their weight's gradient in two blocks of up to 8 channels.
  for (const Case& c : {Case{{3, 4, 3, 2}, 2, true}, Case{{3, 4, 3, 2}, 2, false}, Case{{2, 12, 5}, 1, true}}) {
    CAPTURE(teeny::to_string(c.x));
    CAPTURE(c.affine);
    const ConcreteShape shape = c.x;
    const std::int64_t groups = c.groups;
    const bool affine = c.affine;
    Operands operands{{random_tensor(shape, 170)}};
    if (affine) operands.params = {random_tensor({shape[1]}, 171), random_tensor({shape[1]}, 172)};
    check_backward_against_cpu(
        [=]<class T>() {
          teeny::group_norm_op<T> op;
          op.attrs.num_groups = groups;
          op.attrs.num_channels = shape[1];
          op.attrs.affine = affine;
          op.out = output<T>(shape);
          return op;
        },
        operands, shape);
  }
}

TEST_CASE("cuda backward: embedding adds repeated indices, none for padding_idx or indices out of range") {
  // Index 4 three times, padding_idx 1 (its row gets nothing), 7 and -1 out of range.
  check_backward_against_cpu(
      []<class T>() {
        teeny::embedding_op<T> op;
        op.attrs.num_embeddings = 5;
        op.attrs.embedding_dim = 3;
        op.attrs.padding_idx = 1;
        op.out = output<T>({2, 4, 3});
        return op;
      },
      {{HostTensor{{2, 4}, {0, 4, 2, 4, 7, -1, 1, 4}, teeny::DType::i64}}, {random_tensor({5, 3}, 180)}}, {2, 4, 3});
  // A table larger than the backward's 2^16 threads: rows in buckets (49 and 3 share one), i32
  // indices, padding_idx -3 (row 47).
  check_backward_against_cpu(
      []<class T>() {
        teeny::embedding_op<T> op;
        op.attrs.num_embeddings = 50;
        op.attrs.embedding_dim = 1400;
        op.attrs.padding_idx = -3;
        op.out = output<T>({8, 1400});
        return op;
      },
      {{HostTensor{{8}, {49, 3, 49, 0, 47, 3, 50, -2}, teeny::DType::i32}}, {random_tensor({50, 1400}, 181)}},
      {8, 1400});
}

TEST_CASE("cuda backward: attention, causal or not, with broadcast batch dims") {
  struct Case {
    ConcreteShape q;
    ConcreteShape k;
    ConcreteShape v;
    ConcreteShape y;
    bool causal;
    std::optional<double> scale;
  };
  const Case cases[] = {
      // k and v shared alike by the first batch dim.
      {{2, 3, 5, 6}, {1, 3, 7, 6}, {1, 3, 7, 4}, {2, 3, 5, 4}, false, {}},
      {{2, 3, 5, 6}, {1, 3, 7, 6}, {1, 3, 7, 4}, {2, 3, 5, 4}, true, {}},
      // q, k and v each shared differently (q over dim 0, v over dim 1, k not), a given scale.
      {{1, 3, 5, 6}, {2, 3, 7, 6}, {2, 1, 7, 4}, {2, 3, 5, 4}, true, 0.3},
      // No batch dims, more queries than keys, causal.
      {{9, 6}, {4, 6}, {4, 5}, {9, 5}, true, {}},
      // More keys than a block has threads, and a slice of them at a time.
      {{1, 4, 3}, {1, 300, 3}, {1, 300, 2}, {1, 4, 2}, false, {}},
      // Rows wider than the block and than the shared memory's slice of dk and dv.
      {{1, 2, 4000}, {1, 3, 4000}, {1, 3, 4000}, {1, 2, 4000}, false, {}},
  };
  unsigned seed = 190;
  for (const Case& c : cases) {
    CAPTURE(teeny::to_string(c.y));
    CAPTURE(c.causal);
    const ConcreteShape y_shape = c.y;
    const bool causal = c.causal;
    const std::optional<double> scale = c.scale;
    check_backward_against_cpu(
        [=]<class T>() {
          teeny::attention_op<T> op;
          op.attrs.causal = causal;
          op.attrs.scale = scale;
          op.out = output<T>(y_shape);
          return op;
        },
        {{random_tensor(c.q, seed), random_tensor(c.k, seed + 1), random_tensor(c.v, seed + 2)}}, y_shape);
    seed += 3;
  }
}
#endif
