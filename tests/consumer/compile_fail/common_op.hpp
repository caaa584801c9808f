#pragma once
// A minimal correct executable op (y = x) that the compile-fail cases break one requirement at a
// time. Include after the std headers it includes and `import teeny;`.
#include <cstddef>
#include <optional>
#include <span>
#include <string_view>
#include <tuple>
#include <vector>

namespace user {

struct CopyArgs {
  teeny::TensorView<const float> x;
  teeny::TensorView<float> y;
  auto fields() const { return std::tie(x, y); }
};

struct copy_op {
  using Args = CopyArgs;
  teeny::OpOutput out;
  std::string_view name() const { return "copy"; }
  const teeny::Shape& output_shape() const { return out.shape; }
  teeny::DType output_dtype() const { return teeny::DType::f32; }
  teeny::KernelInstance kernel() const { return {{"copy", "user_copy", ""}, std::nullopt}; }
  std::size_t n_activation_inputs() const { return 1; }
  std::vector<teeny::ConcreteShape> param_shapes(std::span<const teeny::ConcreteShape>,
                                                 const teeny::ConcreteShape&) const {
    return {};
  }
  teeny::Result<Args> pack_args(const teeny::OpBindings&) const { return Args{}; }
  teeny::Dim3 block() const { return {}; }
  teeny::Dim3 grid(const teeny::ConcreteShape&) const { return {}; }
};

}  // namespace user
