// Concept checks: compiling this file is the static test; the test cases check the customization
// points' defaults and overrides at run time.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <variant>
#include <vector>

import teeny.core;
import teeny.model;

#include "static/sample_ops.hpp"

using namespace sample;

// RuntimeOp: accepts the minimal op and the fully customised one; rejects each missing requirement.
static_assert(teeny::RuntimeOp<scale_op>);
static_assert(teeny::RuntimeOp<custom_op>);
static_assert(!teeny::RuntimeOp<no_grid_op>);
static_assert(!teeny::RuntimeOp<no_block_op>);
static_assert(!teeny::RuntimeOp<wrong_pack_op>);
static_assert(!teeny::RuntimeOp<no_args_op>);
static_assert(!teeny::RuntimeOp<int>);

// ExecutableOp: an input placeholder, or a RuntimeOp with a kernel.
static_assert(teeny::ExecutableOp<teeny::InputOp>);
static_assert(teeny::ExecutableOp<scale_op>);
static_assert(!teeny::ExecutableOp<no_kernel_op>);
static_assert(!teeny::ExecutableOp<no_grid_op>);
static_assert(!teeny::RuntimeOp<teeny::InputOp>);

// Op sets are variants of executable ops only.
static_assert(teeny::OpSetType<teeny::OpSet<teeny::InputOp, scale_op, custom_op>>);
static_assert(!teeny::OpSetType<std::variant<teeny::InputOp, no_kernel_op>>);
static_assert(!teeny::OpSetType<std::tuple<teeny::InputOp>>);

// Kernel argument packs and visitors.
static_assert(teeny::ArgPack<ScaleArgs>);
static_assert(!teeny::ArgPack<heap_args>);
static_assert(teeny::arg_count<ScaleArgs> == 3);
namespace {
struct views_only {  // accepts tensor views but not a float scalar
  void operator()(const teeny::TensorView<const float>&) {}
  void operator()(const teeny::TensorView<float>&) {}
};
struct any_field {
  void operator()(const auto&) {}
};
}  // namespace
static_assert(teeny::ArgVisitor<any_field, ScaleArgs>);
static_assert(!teeny::ArgVisitor<views_only, ScaleArgs>);

// Model.
static_assert(teeny::Model<echo_model>);
static_assert(!teeny::Model<unchecked_model>);

#if TEENY_TRAINING
struct ScaleBackwardArgs {
  TensorView<const float> grad_y;
  TensorView<float> grad_x;
  float factor;
  auto fields() const { return std::tie(grad_y, grad_x, factor); }
};
struct scale_with_backward : scale_op {
  using BackwardArgs = ScaleBackwardArgs;
  Result<BackwardArgs> pack_backward_args(const teeny::BackwardBindings& b) const {
    auto gy = b.grad_output.as<const float>();
    if (!gy) return std::move(gy).error();
    auto gx = b.grad_inputs[0].as<float>();
    if (!gx) return std::move(gx).error();
    return BackwardArgs{*gy, *gx, factor};
  }
  Dim3 backward_grid(std::span<const ConcreteShape>, const ConcreteShape& out) const {
    return {teeny::ceil_div(out.numel(), 128)};
  }
};
static_assert(teeny::BackwardOp<scale_with_backward>);
static_assert(!teeny::BackwardOp<scale_op>);

TEST_CASE("training builds: backward customization points and their defaults") {
  const scale_with_backward op;
  CHECK(teeny::has_backward(op));
  CHECK_FALSE(teeny::has_backward(scale_op{}));
  CHECK(teeny::backward_block(op) == Dim3{128, 1, 1});
  CHECK(teeny::n_backward_launches(op) == 1);
  CHECK(teeny::backward_grad_output_row_stride(op, ConcreteShape{2, 5}) == 5);
  const ConcreteShape in[] = {{1000}};
  CHECK(teeny::backward_grid_for_launch(op, 0, in, ConcreteShape{1000}) == Dim3{8, 1, 1});

  std::vector<float> gy(4, 1.0f), gx(4, 0.0f);
  const teeny::TensorBinding grad_in[] = {{gx.data(), teeny::DType::f32, {4}, 0}};
  teeny::BackwardBindings b{{}, {}, {}, {gy.data(), teeny::DType::f32, {4}, 0}, grad_in, {}};
  auto args = teeny::pack_backward_args_for_launch(op, 0, b);
  REQUIRE(args);
  CHECK(args->grad_x.data == gx.data());
  CHECK(args->factor == 2.0f);
}
#endif

namespace {
std::vector<float> x_values{1, 2, 3, 4, 5, 6, 7, 8};
std::vector<float> y_values(8);
const teeny::TensorBinding inputs[] = {{x_values.data(), teeny::DType::f32, {2, 4}, 0}};
const OpBindings bindings{inputs, {}, {y_values.data(), teeny::DType::f32, {2, 4}, 0}};
}  // namespace

TEST_CASE("RuntimeOp customization points give the seed's defaults") {
  const scale_op op;
  const ConcreteShape out{2, 4};
  const ConcreteShape in_shapes[] = {{2, 4}};
  CHECK(teeny::param_names(op).empty());
  CHECK(teeny::param_dtype(op, 0) == teeny::DType::f32);  // the output dtype
  CHECK(teeny::forward_output_row_stride(op, out) == 4);
  CHECK_FALSE(teeny::param_init_data(op, 0).has_value());
  CHECK(teeny::compute_concrete_output_shape(op, in_shapes, ConcreteShape{7, 4}) == ConcreteShape{7, 4});
  CHECK(teeny::n_launches(op) == 1);
  CHECK(teeny::grid_for_launch(op, 0, in_shapes, ConcreteShape{1000}) == Dim3{4, 1, 1});
  auto args = teeny::pack_args_for_launch(op, 0, bindings);
  REQUIRE(args);
  CHECK(args->x(1, 2) == 7.0f);
  CHECK(args->factor == 2.0f);
  CHECK_FALSE(teeny::is_input(op));
  CHECK(teeny::is_input(teeny::InputOp{"x", {1}, teeny::DType::f32}));
  CHECK_FALSE(teeny::backward_kernel(op).has_value());
}

TEST_CASE("RuntimeOp customization points call the op's own members when present") {
  const custom_op op;
  const ConcreteShape in_shapes[] = {{3, 5}};
  REQUIRE(teeny::param_names(op).size() == 2);
  CHECK(teeny::param_names(op)[1] == "bias");
  CHECK(teeny::forward_output_row_stride(op, ConcreteShape{2, 5}) == 8);
  CHECK(teeny::param_init_data(op, 1)->size() == 4);
  CHECK(teeny::compute_concrete_output_shape(op, in_shapes, ConcreteShape{1, 1}) == ConcreteShape{3, 5});
  CHECK(teeny::n_launches(op) == 3);
  CHECK(teeny::grid_for_launch(op, 2, in_shapes, ConcreteShape{1}) == Dim3{12, 1, 1});
  CHECK(teeny::pack_args_for_launch(op, 2, bindings)->factor == 2.0f);
  CHECK(teeny::pack_args_for_launch(op, 1, bindings)->factor == 1.0f);
}

TEST_CASE("visit_args visits fields in kernel-parameter order") {
  auto args = scale_op{}.pack_args(bindings);
  REQUIRE(args);
  std::vector<std::string> seen;
  teeny::visit_args(*args, [&](const auto& field) {
    if constexpr (std::is_same_v<std::decay_t<decltype(field)>, float>) {
      seen.push_back("scalar");
    } else {
      seen.push_back(std::string(teeny::name(teeny::dtype_of<std::remove_pointer_t<decltype(field.data)>>)) +
                     (std::is_const_v<std::remove_pointer_t<decltype(field.data)>> ? " in" : " out"));
    }
  });
  CHECK(seen == std::vector<std::string>{"f32 in", "f32 out", "scalar"});
}

TEST_CASE("bindings are checked against the kernel's dtypes, and honour row strides") {
  std::vector<double> wide(8);
  const teeny::TensorBinding f64_input[] = {{wide.data(), teeny::DType::f64, {2, 4}, 0}};
  auto args = scale_op{}.pack_args(OpBindings{f64_input, {}, bindings.output});
  REQUIRE_FALSE(args);
  CHECK(args.error().code() == teeny::Errc::dtype_mismatch);
  CHECK(args.error().message() == "tensor [2, 4] is bound as f64 but the kernel reads f32");

  std::vector<float> padded(2 * 8);
  const teeny::TensorBinding rows{padded.data(), teeny::DType::f32, {2, 5}, 8};
  auto view = rows.as<float>();
  REQUIRE(view);
  CHECK(view->strides == ConcreteShape{8, 1});
  (*view)(1, 4) = 1.0f;
  CHECK(padded[12] == 1.0f);
}
