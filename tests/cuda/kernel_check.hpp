#pragma once
// The harness of the CUDA kernel tests: an op made per dtype by a generic lambda, run on the GPU in
// f32, f64, f16 and bf16 and by the CPU backend in f64 on the same (rounded) inputs; forward
// (check_against_cpu) and, in training builds, backward (check_backward_against_cpu). Without a GPU
// a case still packs every launch's arguments in every dtype (and runs the CPU reference), then
// prints why it skips the launch.
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

namespace kernel_check {

using teeny::ConcreteShape;
using teeny::TensorBinding;

struct HostTensor {
  ConcreteShape shape;
  std::vector<double> values;
  std::optional<teeny::DType> dtype{};  // for an input not of the op's element type (indices)
};

inline HostTensor random_tensor(const ConcreteShape& shape, unsigned seed) {
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
inline std::vector<std::byte> stored_as(const HostTensor& t, teeny::DType dtype) {
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
std::vector<double> run_on_cpu(Make& make, const Operands& operands, const ConcreteShape& out_shape,
                               const teeny::RunPhase& phase) {
  auto op = make.template operator()<double>();
  std::vector<std::vector<std::byte>> host;
  const Bound b = bind(op, operands, [&](std::vector<std::byte> bytes) {
    host.push_back(std::move(bytes));
    return static_cast<void*>(host.back().data());
  });
  std::vector<double> y(static_cast<std::size_t>(out_shape.numel()), std::nan(""));
  const teeny::OpBindings bindings{b.inputs, b.params, {y.data(), teeny::DType::f64, out_shape, 0}};
  teeny::CpuContext cpu;
  cpu.set_phase(phase);
  for_each_launch(op, bindings, [&](const auto& args) {
    auto state = prepare_kernel(op, args, cpu);
    REQUIRE(state);
    run_kernel(op, args, *state, cpu);
  });
  // The inputs here are finite, and every output was written (y started as NaN).
  CHECK(std::all_of(y.begin(), y.end(), [](double v) { return std::isfinite(v); }));
  return y;
}

template <class T>
void round_to(HostTensor& t) {
  for (double& v : t.values) v = from_element(to_element<T>(v));
}

// The values as the GPU op in T holds them, for the reference too.
template <class T, class Op>
Operands rounded_for(const Op& op, const Operands& operands) {
  Operands rounded = operands;
  for (HostTensor& t : rounded.inputs) {
    if (!t.dtype) round_to<T>(t);
  }
  for (std::size_t i = 0; i < rounded.params.size(); ++i) {
    if (teeny::param_dtype(op, i) == teeny::dtype_of<T>) round_to<T>(rounded.params[i]);
  }
  return rounded;
}

// The phase as GPU kernels read it: a DevicePhase in device memory (none for the eval phase).
struct GpuPhase {
  std::optional<teeny::cuda::DeviceBuffer> buffer;
  const teeny::cuda_kernels::DevicePhase* pointer() const {
    return buffer ? static_cast<const teeny::cuda_kernels::DevicePhase*>(buffer->data()) : nullptr;
  }
};
inline GpuPhase gpu_phase(const teeny::RunPhase& phase) {
  GpuPhase out;
  if (!phase.training) return out;
  const teeny::cuda_kernels::DevicePhase device{phase.seed, phase.step, 1};
  auto buffer = teeny::cuda::DeviceBuffer::allocate(sizeof device);
  REQUIRE(buffer);
  REQUIRE(buffer->upload(std::as_bytes(std::span(&device, 1))));
  out.buffer = std::move(*buffer);
  return out;
}

// Whether an engine that loaded in `cuda` (cuDNN for convolutions, cuBLASLt for Linear and
// MatMul) can take this launch, by the rules teeny.cuda routes with: then, in f32, it must have.
template <class Op, class Args>
bool engine_can_take(const Op& /*op*/, const Args& /*args*/, teeny::cuda::CudaContext& /*cuda*/) {
  return false;
}
template <class T>
bool engine_can_take(const teeny::conv_op<T>& /*op*/, const teeny::ConvArgs<T>& args, teeny::cuda::CudaContext& cuda) {
  return cuda.conv_engine() == "cuDNN" && teeny::cuda::conv_dnn(args, false).has_value();
}
template <class T>
bool engine_can_take(const teeny::linear_op<T>& /*op*/, const teeny::LinearArgs<T>& args,
                     teeny::cuda::CudaContext& cuda) {
  return cuda.gemm_engine() == "cuBLASLt" && teeny::cuda::linear_gemm(args, false).has_value();
}
template <class T>
bool engine_can_take(const teeny::matmul_op<T>& /*op*/, const teeny::MatMulArgs<T>& args,
                     teeny::cuda::CudaContext& cuda) {
  return cuda.gemm_engine() == "cuBLASLt" && teeny::cuda::matmul_gemm(args, false).has_value();
}

template <class T, class Make>
void check_dtype(Make& make, const Operands& operands, const ConcreteShape& out_shape, bool gpu,
                 const teeny::RunPhase& phase) {
  CAPTURE(teeny::name(teeny::dtype_of<T>));
  auto op = make.template operator()<T>();
  const Operands rounded = rounded_for<T>(op, operands);
  const std::vector<double> want = run_on_cpu(make, rounded, out_shape, phase);
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
  double scale = 1;
  for (double w : want) scale = std::max(scale, std::abs(w));
  const auto compare = [&](const char* path) {
    CAPTURE(path);
    REQUIRE(out->download(std::as_writable_bytes(std::span(y))));
    for (std::size_t i = 0; i < y.size(); ++i) {
      CAPTURE(i);
      const double got = from_element(y[i]);
      CHECK(std::abs(got - want[i]) <= tolerance<T>() * scale);
    }
  };
  const GpuPhase device_phase = gpu_phase(phase);
  auto status = teeny::cuda::launch(op, bindings, "gpu-case", nullptr, device_phase.pointer());
  REQUIRE_MESSAGE(status, (status ? "" : status.error().to_string()));
  REQUIRE(teeny::cuda::synchronize("the GPU case"));
  compare("teeny's kernel, launched directly");

  // The same op as a model runs it, through a CudaContext: where an engine takes it (cuBLASLt for
  // Linear and MatMul, cuDNN for convolutions) the engine's result must agree as well.
  auto cuda = teeny::cuda::CudaContext::create();
  REQUIRE_MESSAGE(cuda, (cuda ? "" : cuda.error().to_string()));
  cuda->set_phase(phase);
  const std::vector<std::byte> zeros(y.size() * sizeof(T));
  REQUIRE(out->upload(zeros));
  std::vector<ConcreteShape> input_shapes;
  for (const TensorBinding& in : b.inputs) input_shapes.push_back(in.shape);
  for (std::size_t i = 0; i < teeny::n_launches(op); ++i) {
    auto args = teeny::pack_args_for_launch(op, i, bindings);
    REQUIRE(args);
    const teeny::LaunchSite site{"gpu-case", i, teeny::grid_for_launch(op, i, input_shapes, out_shape), op.block()};
    auto state = prepare_kernel(op, *args, *cuda, site);
    REQUIRE_MESSAGE(state, (state ? "" : state.error().to_string()));
    if constexpr (requires { state->run.index(); }) {
      // The engine's plan is the variant's second alternative; teeny's kernel, the first.
      if (std::is_same_v<T, float> && engine_can_take(op, *args, *cuda)) CHECK(state->run.index() == 1);
    }
    run_kernel(op, *args, *state, *cuda);
  }
  auto ran = cuda->take_error();
  REQUIRE_MESSAGE(ran, (ran ? "" : ran.error().to_string()));
  REQUIRE(cuda->synchronize());
  const std::string engines =
      "through CudaContext (GEMMs: " + cuda->gemm_engine() + "; convolutions: " + cuda->conv_engine() + ")";
  compare(engines.c_str());
}

// The op `make` builds, on the GPU in every dtype against the CPU in f64, both in `phase` (the
// eval phase unless a case says otherwise).
template <class Make>
void check_against_cpu(Make make, const Operands& operands, const ConcreteShape& out_shape,
                       const teeny::RunPhase& phase = {}) {
  const bool gpu = teeny::cuda::device_count() > 0;
  check_dtype<float>(make, operands, out_shape, gpu, phase);
  check_dtype<double>(make, operands, out_shape, gpu, phase);
  check_dtype<teeny::f16>(make, operands, out_shape, gpu, phase);
  check_dtype<teeny::bf16>(make, operands, out_shape, gpu, phase);
  if (!gpu) std::printf("SKIP (GPU launch): %s\n", teeny::cuda::no_device_reason().c_str());
}

#if TEENY_TRAINING
// A backward case's gradients: dL/dy, and the values the input and parameter gradients start
// from (kernels add to them); a gradient not wanted has no values (null there).
struct Gradients {
  HostTensor dy;
  std::vector<HostTensor> inputs;
  std::vector<HostTensor> params;
};

// Random dL/dy and starting gradients for `op`: one per floating input, one per trained parameter.
template <class Op>
Gradients random_gradients(const Op& op, const Operands& operands, const ConcreteShape& out_shape, unsigned seed) {
  Gradients g{random_tensor(out_shape, seed), {}, {}};
  for (const HostTensor& t : operands.inputs) {
    g.inputs.push_back(t.dtype ? HostTensor{t.shape, {}} : random_tensor(t.shape, ++seed));
  }
  for (std::size_t i = 0; i < operands.params.size(); ++i) {
    const ConcreteShape& shape = operands.params[i].shape;
    g.params.push_back(teeny::param_trainable(op, i) ? random_tensor(shape, ++seed) : HostTensor{shape, {}});
  }
  return g;
}

// Binds each gradient in memory that `place` gives it; null for one not wanted.
template <class Place>
std::vector<TensorBinding> bind_gradients(const std::vector<HostTensor>& grads, teeny::DType dtype, Place&& place) {
  std::vector<TensorBinding> out;
  for (const HostTensor& g : grads) {
    out.push_back({g.values.empty() ? nullptr : place(stored_as(g, dtype)), dtype, g.shape, 0});
  }
  return out;
}

template <class Op, class Run>
void for_each_backward_launch(const Op& op, const teeny::BackwardBindings& bindings, Run&& run) {
  for (std::size_t i = 0; i < teeny::n_backward_launches(op); ++i) {
    auto args = teeny::pack_backward_args_for_launch(op, i, bindings);
    REQUIRE_MESSAGE(args, (args ? "" : args.error().to_string()));
    run(*args);
  }
}

// The op's backward on the CPU in f64 (after its forward, in `phase`): the gradients it leaves.
template <class Make>
Gradients run_backward_on_cpu(Make& make, const Operands& operands, const ConcreteShape& out_shape,
                              const Gradients& start, const teeny::RunPhase& phase) {
  auto op = make.template operator()<double>();
  std::vector<std::vector<std::byte>> host;
  const auto place = [&](std::vector<std::byte> bytes) {
    host.push_back(std::move(bytes));
    return static_cast<void*>(host.back().data());
  };
  const Bound b = bind(op, operands, place);
  std::vector<double> y(static_cast<std::size_t>(out_shape.numel()));
  const TensorBinding output{y.data(), teeny::DType::f64, out_shape, 0};
  teeny::CpuContext cpu;
  cpu.set_phase(phase);
  for_each_launch(op, {b.inputs, b.params, output}, [&](const auto& args) {
    auto state = prepare_kernel(op, args, cpu);
    REQUIRE(state);
    run_kernel(op, args, *state, cpu);
  });
  std::vector<double> dy = start.dy.values;
  const auto grad_inputs = bind_gradients(start.inputs, teeny::DType::f64, place);
  const auto grad_params = bind_gradients(start.params, teeny::DType::f64, place);
  const teeny::BackwardBindings bindings{b.inputs,    b.params,   output, {dy.data(), teeny::DType::f64, out_shape, 0},
                                         grad_inputs, grad_params};
  for_each_backward_launch(op, bindings, [&](const auto& args) {
    auto state = prepare_backward_kernel(op, args, cpu);
    REQUIRE(state);
    run_backward_kernel(op, args, *state, cpu);
  });
  Gradients out = start;
  const auto read = [](std::vector<HostTensor>& grads, const std::vector<TensorBinding>& bound) {
    for (std::size_t i = 0; i < grads.size(); ++i) {
      if (bound[i].data != nullptr)
        std::memcpy(grads[i].values.data(), bound[i].data, grads[i].values.size() * sizeof(double));
    }
  };
  read(out.inputs, grad_inputs);
  read(out.params, grad_params);
  return out;
}

template <class T, class Make>
void check_backward_dtype(Make& make, const Operands& operands, const ConcreteShape& out_shape, bool gpu,
                          const teeny::RunPhase& phase) {
  CAPTURE(teeny::name(teeny::dtype_of<T>));
  auto op = make.template operator()<T>();
  const Operands rounded = rounded_for<T>(op, operands);
  Gradients start = random_gradients(op, operands, out_shape, 1000);
  round_to<T>(start.dy);
  for (HostTensor& g : start.inputs) round_to<T>(g);
  for (HostTensor& g : start.params) round_to<T>(g);
  const Gradients want = run_backward_on_cpu(make, rounded, out_shape, start, phase);
  // The forward's output as the GPU holds it: the reference's own forward, rounded to T.
  HostTensor y{out_shape, run_on_cpu(make, rounded, out_shape, phase)};
  round_to<T>(y);
  const teeny::DType dtype = teeny::dtype_of<T>;

  std::vector<std::vector<std::byte>> host;
  std::vector<teeny::cuda::DeviceBuffer> buffers;
  const auto place = [&](const std::vector<std::byte>& bytes) -> void* {
    if (!gpu) {  // host memory: the arguments still pack, nothing is read
      host.push_back(bytes);
      return host.back().data();
    }
    auto buffer = teeny::cuda::DeviceBuffer::allocate(bytes.size());
    REQUIRE(buffer);
    REQUIRE(buffer->upload(bytes));
    buffers.push_back(std::move(*buffer));
    return buffers.back().data();
  };
  const Bound b = bind(op, rounded, place);
  const TensorBinding output{place(stored_as(y, dtype)), dtype, out_shape, 0};
  const TensorBinding dy{place(stored_as(start.dy, dtype)), dtype, out_shape, 0};
  const auto grad_inputs = bind_gradients(start.inputs, dtype, place);
  std::vector<TensorBinding> grad_params;
  for (std::size_t i = 0; i < start.params.size(); ++i) {
    const teeny::DType pd = teeny::param_dtype(op, i);
    const HostTensor& g = start.params[i];
    grad_params.push_back({g.values.empty() ? nullptr : place(stored_as(g, pd)), pd, g.shape, 0});
  }
  const teeny::BackwardBindings bindings{b.inputs, b.params, output, dy, grad_inputs, grad_params};
  if (!gpu) {
    using List = typename teeny::cuda::KernelParams<decltype(op)>::backward;
    for_each_backward_launch(op, bindings, [](const auto& args) { (void)teeny::cuda::pack_params<List>(args); });
    return;
  }
  const GpuPhase device_phase = gpu_phase(phase);
  auto status = teeny::cuda::launch_backward(op, bindings, "gpu-case", nullptr, device_phase.pointer());
  REQUIRE_MESSAGE(status, (status ? "" : status.error().to_string()));
  REQUIRE(teeny::cuda::synchronize("the GPU case"));
  // Backward sums run over many terms: 4x the forward's tolerance, of each gradient's largest value.
  const auto compare = [&](const std::vector<HostTensor>& expected, const std::vector<TensorBinding>& bound,
                           const char* what) {
    for (std::size_t g = 0; g < expected.size(); ++g) {
      if (bound[g].data == nullptr) continue;
      CAPTURE(what);
      CAPTURE(g);
      std::vector<T> got(expected[g].values.size());
      REQUIRE(teeny::cuda::copy_to_host(std::as_writable_bytes(std::span(got)), bound[g].data));
      double scale = 1;
      for (double w : expected[g].values) scale = std::max(scale, std::abs(w));
      for (std::size_t i = 0; i < got.size(); ++i) {
        CAPTURE(i);
        CHECK(std::abs(from_element(got[i]) - expected[g].values[i]) <= 4 * tolerance<T>() * scale);
      }
    }
  };
  compare(want.inputs, grad_inputs, "input gradient");
  compare(want.params, grad_params, "parameter gradient");
}

// The backward of the op `make` builds, on the GPU in every dtype against the CPU's in f64: the
// gradients of every floating input and trained parameter, from random dL/dy and random starting
// values (backward kernels add). Both run the forward first in `phase` (training by default).
template <class Make>
void check_backward_against_cpu(Make make, const Operands& operands, const ConcreteShape& out_shape,
                                const teeny::RunPhase& phase = {true, 7, 3}) {
  const bool gpu = teeny::cuda::device_count() > 0;
  check_backward_dtype<float>(make, operands, out_shape, gpu, phase);
  check_backward_dtype<double>(make, operands, out_shape, gpu, phase);
  check_backward_dtype<teeny::f16>(make, operands, out_shape, gpu, phase);
  check_backward_dtype<teeny::bf16>(make, operands, out_shape, gpu, phase);
  if (!gpu) std::printf("SKIP (GPU backward launch): %s\n", teeny::cuda::no_device_reason().c_str());
}
#endif

template <class T>
teeny::OpOutput output(const ConcreteShape& shape) {
  return {teeny::Shape(shape), teeny::dtype_of<T>};
}

}  // namespace kernel_check
