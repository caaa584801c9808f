// Must not compile: a custom op without `grid` cannot join an op set, and clang's diagnostic
// names the missing requirement. Checked with `clang -fsyntax-only -Xclang -verify`.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

import teeny.core;
import teeny.model;

namespace user {
struct Args {
  teeny::TensorView<const float> x;
  teeny::TensorView<float> y;
  auto fields() const { return std::tie(x, y); }
};
struct gridless_op {
  using Args = user::Args;
  teeny::Shape shape{4};
  std::string_view name() const { return "gridless"; }
  const teeny::Shape& output_shape() const { return shape; }
  teeny::DType output_dtype() const { return teeny::DType::f32; }
  teeny::KernelInstance kernel() const { return {}; }
  std::size_t n_activation_inputs() const { return 1; }
  std::vector<teeny::ConcreteShape> param_shapes(std::span<const teeny::ConcreteShape>,
                                                 const teeny::ConcreteShape&) const {
    return {};
  }
  teeny::Result<Args> pack_args(const teeny::OpBindings&) const { return Args{}; }
  teeny::Dim3 block() const { return {}; }
};
}  // namespace user

using broken_set = teeny::OpSet<teeny::InputOp, user::gridless_op>;  // expected-error {{constraints not satisfied}}
// expected-note@*:* {{because 'user::gridless_op' does not satisfy 'ExecutableOp'}}
// It is not an input placeholder...
// expected-note@*:* {{because 'user::gridless_op' does not satisfy 'InputOpType'}}
// expected-note@*:* {{no member named 'is_input' in 'user::gridless_op'}}
// ...and not a RuntimeOp, because grid is missing:
// expected-note@*:* {{and 'user::gridless_op' does not satisfy 'RuntimeOp'}}
// expected-note@*:* {{because 'op.grid(output_shape)' would be invalid: no member named 'grid' in 'user::gridless_op'}}
