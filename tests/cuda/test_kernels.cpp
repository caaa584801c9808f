// The CUDA kernels against the CPU backend's: each op run on the GPU in f32, f64, f16 and bf16 and
// by the CPU kernel in f64 on the same (rounded) inputs. Without a GPU the cases still pack every
// op's arguments in every dtype (and run the CPU reference), then print why they skip the launch.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda/params.hpp"
#include "cuda/runtime.hpp"

import teeny;

namespace {

using teeny::ConcreteShape;
using teeny::TensorBinding;

struct HostTensor {
  ConcreteShape shape;
  std::vector<double> values;
  std::optional<teeny::DType> dtype{};  // for an input not of the op's element type (indices)
};

HostTensor random_tensor(const ConcreteShape& shape, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-2.0, 2.0);
  HostTensor t{shape, std::vector<double>(static_cast<std::size_t>(shape.numel()))};
  for (double& v : t.values) v = dist(rng);
  return t;
}

// Relative tolerance (of the largest output magnitude) per dtype: f16 and bf16 store 11 and 8
// significant bits and compute in f32; f32 and f64 differ from the f64 reference by rounding only.
template <class T>
double tolerance() {
  if constexpr (std::is_same_v<T, double>) return 1e-12;
  if constexpr (std::is_same_v<T, float>) return 1e-5;
  if constexpr (std::is_same_v<T, teeny::f16>) return 2e-3;
  return 1.6e-2;
}

template <class T>
T to_element(double v) {
  if constexpr (std::is_same_v<T, teeny::f16> || std::is_same_v<T, teeny::bf16>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}
template <class T>
double from_element(T v) {
  return static_cast<double>(static_cast<std::conditional_t<std::is_same_v<T, double>, double, float>>(v));
}

// `t`'s values stored as `dtype` (a float type, or i64 for a counter such as num_batches_tracked).
std::vector<std::byte> stored_as(const HostTensor& t, teeny::DType dtype) {
  std::vector<std::byte> out(t.values.size() * teeny::size_of(dtype));
  teeny::visit_dtype(dtype, [&]<class E>(std::type_identity<E>) {
    for (std::size_t i = 0; i < t.values.size(); ++i) {
      const E e = to_element<E>(t.values[i]);
      std::memcpy(out.data() + i * sizeof(E), &e, sizeof(E));
    }
  });
  return out;
}

// An op's activations and parameters, as values.
struct Operands {
  std::vector<HostTensor> inputs;
  std::vector<HostTensor> params{};
};

// Tensors bound in memory that `place` gives them (host vectors, or device buffers).
struct Bound {
  std::vector<TensorBinding> inputs;
  std::vector<TensorBinding> params;
};
template <class Op, class Place>
Bound bind(const Op& op, const Operands& operands, Place&& place) {
  Bound b;
  for (const HostTensor& t : operands.inputs) {
    const teeny::DType dtype = t.dtype.value_or(op.output_dtype());
    b.inputs.push_back({place(stored_as(t, dtype)), dtype, t.shape, 0});
  }
  for (std::size_t i = 0; i < operands.params.size(); ++i) {
    const teeny::DType dtype = teeny::param_dtype(op, i);
    b.params.push_back({place(stored_as(operands.params[i], dtype)), dtype, operands.params[i].shape, 0});
  }
  return b;
}

// Runs every launch of `op` through `run`, with its arguments packed from `bindings`.
template <class Op, class Run>
void for_each_launch(const Op& op, const teeny::OpBindings& bindings, Run&& run) {
  for (std::size_t i = 0; i < teeny::n_launches(op); ++i) {
    auto args = teeny::pack_args_for_launch(op, i, bindings);
    REQUIRE_MESSAGE(args, (args ? "" : args.error().to_string()));
    run(*args);
  }
}

// The op made by `make.template operator()<double>()` on the CPU: the reference.
template <class Make>
std::vector<double> run_on_cpu(Make& make, const Operands& operands, const ConcreteShape& out_shape) {
  auto op = make.template operator()<double>();
  std::vector<std::vector<std::byte>> host;
  const Bound b = bind(op, operands, [&](std::vector<std::byte> bytes) {
    host.push_back(std::move(bytes));
    return static_cast<void*>(host.back().data());
  });
  std::vector<double> y(static_cast<std::size_t>(out_shape.numel()), std::nan(""));
  const teeny::OpBindings bindings{b.inputs, b.params, {y.data(), teeny::DType::f64, out_shape, 0}};
  teeny::CpuContext cpu;
  for_each_launch(op, bindings, [&](const auto& args) {
    auto state = prepare_kernel(op, args, cpu);
    REQUIRE(state);
    run_kernel(op, args, *state, cpu);
  });
  // The inputs here are finite, and every output was written (y started as NaN).
  CHECK(std::all_of(y.begin(), y.end(), [](double v) { return std::isfinite(v); }));
  return y;
}

template <class T, class Make>
void check_dtype(Make& make, const Operands& operands, const ConcreteShape& out_shape, bool gpu) {
  CAPTURE(teeny::name(teeny::dtype_of<T>));
  auto op = make.template operator()<T>();
  // The values as the GPU op holds them, for the reference too.
  Operands rounded = operands;
  for (HostTensor& t : rounded.inputs) {
    if (t.dtype) continue;
    for (double& v : t.values) v = from_element(to_element<T>(v));
  }
  for (std::size_t i = 0; i < rounded.params.size(); ++i) {
    if (teeny::param_dtype(op, i) != teeny::dtype_of<T>) continue;
    for (double& v : rounded.params[i].values) v = from_element(to_element<T>(v));
  }
  const std::vector<double> want = run_on_cpu(make, rounded, out_shape);
  if (!gpu) {
    // The arguments still pack for the kernel (host pointers: nothing is read).
    std::vector<std::vector<std::byte>> host;
    const Bound b = bind(op, rounded, [&](std::vector<std::byte> bytes) {
      host.push_back(std::move(bytes));
      return static_cast<void*>(host.back().data());
    });
    std::vector<T> y(static_cast<std::size_t>(out_shape.numel()));
    const teeny::OpBindings bindings{b.inputs, b.params, {y.data(), teeny::dtype_of<T>, out_shape, 0}};
    using List = typename teeny::cuda::KernelParams<decltype(op)>::type;
    for_each_launch(op, bindings, [](const auto& args) { (void)teeny::cuda::pack_params<List>(args); });
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
  std::vector<T> y(static_cast<std::size_t>(out_shape.numel()));
  auto out = teeny::cuda::DeviceBuffer::allocate(y.size() * sizeof(T));
  REQUIRE(out);
  const teeny::OpBindings bindings{b.inputs, b.params, {out->data(), teeny::dtype_of<T>, out_shape, 0}};
  auto status = teeny::cuda::launch(op, bindings, "gpu-case");
  REQUIRE_MESSAGE(status, (status ? "" : status.error().to_string()));
  REQUIRE(teeny::cuda::synchronize("the GPU case"));
  REQUIRE(out->download(std::as_writable_bytes(std::span(y))));
  double scale = 1;
  for (double w : want) scale = std::max(scale, std::abs(w));
  for (std::size_t i = 0; i < y.size(); ++i) {
    CAPTURE(i);
    const double got = from_element(y[i]);
    CHECK(std::abs(got - want[i]) <= tolerance<T>() * scale);
  }
}

// The op `make` builds, on the GPU in every dtype against the CPU in f64.
template <class Make>
void check_against_cpu(Make make, const Operands& operands, const ConcreteShape& out_shape) {
  const bool gpu = teeny::cuda::device_count() > 0;
  check_dtype<float>(make, operands, out_shape, gpu);
  check_dtype<double>(make, operands, out_shape, gpu);
  check_dtype<teeny::f16>(make, operands, out_shape, gpu);
  check_dtype<teeny::bf16>(make, operands, out_shape, gpu);
  if (!gpu) std::printf("SKIP (GPU launch): %s\n", teeny::cuda::no_device_reason().c_str());
}

template <class T>
teeny::OpOutput output(const ConcreteShape& shape) {
  return {teeny::Shape(shape), teeny::dtype_of<T>};
}

}  // namespace

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
