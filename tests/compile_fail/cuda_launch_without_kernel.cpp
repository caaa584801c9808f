// Must not compile: an op with no CUDA kernel (here a user's op, which declares no kernel
// parameter list) cannot be launched on the GPU, and clang's diagnostic says which requirement it
// misses. Checked with `clang -fsyntax-only -Xclang -verify`.
#include <cstddef>
#include <optional>
#include <span>
#include <string_view>
#include <tuple>
#include <vector>

import teeny.core;
import teeny.model;
import teeny.cuda;

namespace user {
struct Args {
  teeny::TensorView<const float> x;
  teeny::TensorView<float> y;
  auto fields() const { return std::tie(x, y); }
};
struct scale_op {
  using Args = user::Args;
  teeny::Shape shape{4};
  std::string_view name() const { return "scale"; }
  const teeny::Shape& output_shape() const { return shape; }
  teeny::DType output_dtype() const { return teeny::DType::f32; }
  teeny::KernelInstance kernel() const { return {{"scale_f32", "user_scale_f32", ""}, std::nullopt}; }
  std::size_t n_activation_inputs() const { return 1; }
  std::vector<teeny::ConcreteShape> param_shapes(std::span<const teeny::ConcreteShape>,
                                                 const teeny::ConcreteShape&) const {
    return {};
  }
  teeny::Result<Args> pack_args(const teeny::OpBindings&) const { return Args{}; }
  teeny::Dim3 block() const { return {256, 1, 1}; }
  teeny::Dim3 grid(const teeny::ConcreteShape&) const { return {1, 1, 1}; }
};
}  // namespace user

teeny::Result<void> run(const user::scale_op& op, const teeny::OpBindings& bindings) {
  return teeny::cuda::launch(op, bindings, "scale1");  // expected-error {{no matching function for call to 'launch'}}
}
// expected-note@*:* {{candidate template ignored: constraints not satisfied [with Op = user::scale_op]}}
// expected-note@*:* {{because 'user::scale_op' does not satisfy 'CudaOp'}}
// The op set's ops have a kernel parameter list (kernels/cuda/params.hpp); this one has none:
// expected-note@*:* {{KernelParams<Op>::type' would be invalid: implicit instantiation of undefined template}}
