#pragma once
// Minimal user ops for the concept tests: one that satisfies each concept, and variants that each
// miss one requirement. Include after `import teeny.model;` and the std headers below.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace sample {

using teeny::ConcreteShape;
using teeny::Dim3;
using teeny::OpBindings;
using teeny::Result;
using teeny::TensorView;

struct ScaleArgs {
  TensorView<const float> x;
  TensorView<float> y;
  float factor;
  auto fields() const { return std::tie(x, y, factor); }
};

/// y = factor * x: satisfies RuntimeOp and ExecutableOp with only the required members.
struct scale_op {
  using Args = ScaleArgs;
  float factor = 2.0f;
  teeny::Shape shape{teeny::Dim::sym("batch"), 4};

  std::string_view name() const { return "scale"; }
  const teeny::Shape& output_shape() const { return shape; }
  teeny::DType output_dtype() const { return teeny::DType::f32; }
  teeny::KernelInstance kernel() const { return {{"scale_f32", "teeny_scale_f32", ""}, std::nullopt}; }

  std::size_t n_activation_inputs() const { return 1; }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const { return {}; }
  Result<Args> pack_args(const OpBindings& b) const {
    auto x = b.inputs[0].as<const float>();
    if (!x) return std::move(x).error();
    auto y = b.output.as<float>();
    if (!y) return std::move(y).error();
    return Args{*x, *y, factor};
  }
  Dim3 block() const { return {256}; }
  Dim3 grid(const ConcreteShape& out) const { return {teeny::ceil_div(out.numel(), 256)}; }
};

/// Overrides every defaulted customization point (a concat-like op with one launch per input).
struct custom_op : scale_op {
  static constexpr std::string_view slots[] = {"weight", "bias"};
  std::span<const std::string_view> param_names() const { return slots; }
  std::int64_t forward_output_row_stride(const ConcreteShape& out) const { return (out.last() + 3) / 4 * 4; }
  std::optional<std::vector<std::byte>> param_init_data(std::size_t i) const {
    if (i != 1) return std::nullopt;
    return std::vector<std::byte>(4, std::byte{0x3f});
  }
  ConcreteShape compute_concrete_output_shape(std::span<const ConcreteShape> in, const ConcreteShape&) const {
    return in[0];
  }
  std::size_t n_launches() const { return 3; }
  Result<Args> pack_args_for_launch(std::size_t launch, const OpBindings& b) const {
    auto args = pack_args(b);
    if (args) args->factor = static_cast<float>(launch);
    return args;
  }
  Dim3 grid_for_launch(std::size_t launch, std::span<const ConcreteShape>, const ConcreteShape&) const {
    return {static_cast<std::uint32_t>(launch + 10)};
  }
};

// Each of these misses exactly one requirement of RuntimeOp / ExecutableOp.
struct no_grid_op : scale_op {
  void grid() = delete;  // hides scale_op::grid(const ConcreteShape&)
};
struct no_block_op : scale_op {
  void block() = delete;
};
struct wrong_pack_op : scale_op {
  Args pack_args(const OpBindings&) const { return {}; }  // must return Result<Args>
};
struct no_kernel_op : scale_op {
  void kernel() = delete;
};
struct no_args_op {
  std::size_t n_activation_inputs() const { return 1; }
  std::vector<ConcreteShape> param_shapes(std::span<const ConcreteShape>, const ConcreteShape&) const { return {}; }
  Dim3 block() const { return {}; }
  Dim3 grid(const ConcreteShape&) const { return {}; }
};
struct heap_args {
  std::vector<float> values;  // not trivially copyable: cannot be copied to a device
  auto fields() const { return std::tie(values); }
};

/// A model: forward returns a Result.
struct echo_model {
  using Input = int;
  using Output = int;
  Result<int> forward(int x) { return x; }
};
struct unchecked_model {  // forward must return Result<Output>
  using Input = int;
  using Output = int;
  int forward(int x) { return x; }
};

}  // namespace sample
