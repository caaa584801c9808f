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
#include "ops/harness.hpp"

import teeny;

namespace kernel_check {

using namespace op_harness;  // NOLINT(google-build-using-namespace): the host side, in every check

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
                 const teeny::RunPhase& phase, const Tolerance& tolerance) {
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
    HostOutput y(op.output_dtype(), out_shape);
    const teeny::OpBindings bindings{b.inputs, b.params, {y.data(), y.dtype, out_shape, 0}};
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
  HostOutput y(op.output_dtype(), out_shape);
  auto out = teeny::cuda::DeviceBuffer::allocate(y.bytes.size());
  REQUIRE(out);
  const teeny::OpBindings bindings{b.inputs, b.params, {out->data(), y.dtype, out_shape, 0}};
  double scale = 1;
  for (double w : want) scale = std::max(scale, std::abs(w));
  const auto compare = [&](const char* path) {
    CAPTURE(path);
    REQUIRE(out->download(std::span(y.bytes)));
    const std::vector<double> got = y.values();
    for (std::size_t i = 0; i < got.size(); ++i) {
      CAPTURE(i);
      CHECK(std::abs(got[i] - want[i]) <= tolerance.of<T>() * scale);
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
  const std::vector<std::byte> zeros(y.bytes.size());
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
                       const teeny::RunPhase& phase = {}, const Tolerance& tolerance = {}) {
  const bool gpu = teeny::cuda::device_count() > 0;
  check_dtype<float>(make, operands, out_shape, gpu, phase, tolerance);
  check_dtype<double>(make, operands, out_shape, gpu, phase, tolerance);
  check_dtype<teeny::f16>(make, operands, out_shape, gpu, phase, tolerance);
  check_dtype<teeny::bf16>(make, operands, out_shape, gpu, phase, tolerance);
  if (!gpu) std::printf("SKIP (GPU launch): %s\n", teeny::cuda::no_device_reason().c_str());
}

#if TEENY_TRAINING
template <class T, class Make>
void check_backward_dtype(Make& make, const Operands& operands, const ConcreteShape& out_shape, bool gpu,
                          const teeny::RunPhase& phase, const Tolerance& tolerance) {
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
        CHECK(std::abs(from_element(got[i]) - expected[g].values[i]) <= 4 * tolerance.of<T>() * scale);
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
                                const teeny::RunPhase& phase = {true, 7, 3}, const Tolerance& tolerance = {}) {
  const bool gpu = teeny::cuda::device_count() > 0;
  check_backward_dtype<float>(make, operands, out_shape, gpu, phase, tolerance);
  check_backward_dtype<double>(make, operands, out_shape, gpu, phase, tolerance);
  check_backward_dtype<teeny::f16>(make, operands, out_shape, gpu, phase, tolerance);
  check_backward_dtype<teeny::bf16>(make, operands, out_shape, gpu, phase, tolerance);
  if (!gpu) std::printf("SKIP (GPU backward launch): %s\n", teeny::cuda::no_device_reason().c_str());
}
#endif

}  // namespace kernel_check
