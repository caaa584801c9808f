// Inference of inputs and shape ops (teeny.graph:ops_shape), the GraphOp visitors and the concept.
#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

import teeny.graph;

#include "graph/support.hpp"

using namespace graph_test;

namespace {
// A minimal user op: satisfies GraphOpType with no parameters and no instance name.
struct Scale {
  static constexpr std::string_view kind = "scale";
  static constexpr Arity arity{1, 1};
  double factor = 1;
  Result<TensorType> infer(std::span<const TensorType> in) const { return in[0]; }
  std::string attributes() const { return "factor=" + std::to_string(factor); }
  friend bool operator==(const Scale&, const Scale&) = default;
};
struct NoInfer {
  static constexpr std::string_view kind = "no_infer";
  static constexpr Arity arity{1, 1};
  std::string attributes() const { return {}; }
  friend bool operator==(const NoInfer&, const NoInfer&) = default;
};
}  // namespace

TEST_CASE("GraphOpType and its customization points") {
  static_assert(GraphOpType<Scale>);
  static_assert(!GraphOpWithParams<Scale>);
  static_assert(!GraphOpType<NoInfer>);
  static_assert(!GraphOpType<GraphOp>);
  static_assert(GraphOpWithParams<Linear> && GraphOpWithParams<BatchNorm>);
  static_assert(GraphOpWithName<Binary> && !GraphOpWithName<ReLU>);
  CHECK(Scale{2} == Scale{2});
  CHECK(NoInfer{} == NoInfer{});
  CHECK(params_of(Scale{}, std::vector<TensorType>{f32({1})}).empty());
  CHECK(kind(Scale{}) == "scale");
  CHECK(kind(Binary{BinaryOp::sub}) == "sub");
  CHECK(arity(GraphOp{Concat{}}) == Arity{1, Arity::variadic});
  CHECK(to_string(Arity{1, Arity::variadic}) == "at least 1");
  CHECK(is<Linear>(GraphOp{Linear{}}));
  CHECK_FALSE(is<Input>(GraphOp{Linear{}}));
}

TEST_CASE("arity is checked before an op's own inference") {
  CHECK(error_of(ReLU{}, {}) == "expects 1 input, got 0");
  CHECK(error_of(Concat{}, {}) == "expects at least 1 input, got 0");
  CHECK(error_of(Attention{}, {f32({2, 2})}) == "expects 3 inputs, got 1");
  CHECK(error_of(Input{f32({1})}, {f32({1})}) == "expects 0 inputs, got 1");
}

TEST_CASE("input and cast") {
  CHECK(*run(Input{f32({batch, 784})}, {}) == f32({batch, 784}));
  CHECK(describe(Input{f32({batch, 784})}) == "input(dtype=f32, shape=[batch, 784])");
  CHECK(error_of(Input{f32({2, -1})}, {}) == "shape [2, -1] has a negative dim");
  CHECK(*run(Cast{DType::f16}, {f32({batch, 3})}) == half({batch, 3}));
  CHECK(describe(Cast{DType::bf16}) == "cast(dtype=bf16)");
}

TEST_CASE("weights broadcast to a shape with symbolic dims") {
  const Weight token{DType::f32, {1, 1, 64}, {batch, 1, 64}};
  CHECK(*run(token, {}) == f32({batch, 1, 64}));
  CHECK(*run(Weight{DType::f64, {3, 4}}, {}) == TensorType{DType::f64, Shape{3, 4}});  // no shape: as is
  CHECK(*run(Weight{DType::f32, {4}, {2, batch, 4}}, {}) == f32({2, batch, 4}));       // leading dims added
  CHECK(describe(token) == "weight(dtype=f32, value_shape=[1, 1, 64], shape=[batch, 1, 64], trainable=true)");
  const auto params = params_of(GraphOp{Weight{DType::f64, {2, 1}, {2, 5}, false}}, std::vector<TensorType>{});
  REQUIRE(params.size() == 1);
  CHECK(params[0] == ParamSpec{"value", Shape{2, 1}, DType::f64, false});
  CHECK(error_of(Weight{DType::f32, {2, 64}, {batch, 64}}, {}) ==
        "value_shape [2, 64] does not broadcast to shape [batch, 64] (dim 0)");
  CHECK(error_of(Weight{DType::f32, {1, 2, 3}, {2, 3}}, {}) == "value_shape [1, 2, 3] has more dims than shape [2, 3]");
  CHECK(error_of(Weight{DType::f32, {-2}}, {}).find("value_shape") != std::string::npos);
}

TEST_CASE("flatten merges a dim range, carrying a symbolic factor") {
  CHECK(*run(Flatten{}, {f32({batch, 1, 28, 28})}) == f32({batch, 784}));
  CHECK(*run(Flatten{0}, {f32({batch, 1, 28, 28})}) == f32({Dim::sym("batch", 784)}));
  CHECK(*run(Flatten{2}, {f32({2, 3, 4, 5})}) == f32({2, 3, 20}));
  CHECK(*run(Flatten{0, 1}, {f32({2, 3, 4, 5})}) == f32({6, 4, 5}));
  CHECK(*run(Flatten{1, 1}, {f32({2, 3, 4})}) == f32({2, 3, 4}));
  CHECK(*run(Flatten{0}, {f32({})}) == f32({1}));
  CHECK(error_of(Flatten{2, 1}, {f32({2, 3, 4})}) == "start_dim 2 comes after end_dim 1 for input f32[2, 3, 4]");
  CHECK(error_of(Flatten{0}, {f32({batch, Dim::sym("seq"), 4})}) ==
        "cannot flatten dims 0..2 of input f32[batch, seq, 4]: the product of 'batch' and 'seq' is not a single "
        "symbolic dim");
  CHECK(error_of(Flatten{4}, {f32({2, 3})}) == "start_dim: axis 4 is out of range for rank 2 (valid: -2..1)");
}

TEST_CASE("reshape checks element counts symbol by symbol and infers one -1") {
  CHECK(*run(Reshape{{batch, 28, 28}}, {f32({batch, 784})}) == f32({batch, 28, 28}));
  CHECK(*run(Reshape{{-1, 4}}, {f32({2, 3, 4})}) == f32({6, 4}));
  CHECK(*run(Reshape{{batch, -1}}, {f32({batch, 4, 8})}) == f32({batch, 32}));
  CHECK(*run(Reshape{{-1, 28, 28}}, {f32({batch, 784})}) == f32({batch, 28, 28}));
  CHECK(*run(Reshape{{-1}}, {f32({batch, 16})}) == f32({Dim::sym("batch", 16)}));
  CHECK(*run(Reshape{{0, 5}}, {f32({4, 0})}) == f32({0, 5}));
  CHECK_CONTAINS(error_of(Reshape{{2, 0, -1}}, {f32({4, 0})}), "the -1 is ambiguous");  // as in PyTorch

  CHECK(error_of(Reshape{{7}}, {f32({2, 3})}) == "cannot reshape input f32[2, 3] (6 elements) into [7] (7 elements)");
  CHECK(error_of(Reshape{{batch, 28, 27}}, {f32({batch, 784})}) ==
        "cannot reshape input f32[batch, 784] (784*batch elements) into [batch, 28, 27] (756*batch elements)");
  CHECK_CONTAINS(error_of(Reshape{{4, -1}}, {f32({6})}), "cannot reshape input f32[6]");
  CHECK(error_of(Reshape{{-1, -1}}, {f32({6})}) == "target shape [-1, -1] has more than one -1");
  CHECK_CONTAINS(error_of(Reshape{{-1, 2}}, {f32({3})}), "(2*n elements)");
  CHECK(describe(Reshape{{batch, -1}}) == "reshape(shape=[batch, -1])");
}

TEST_CASE("transpose and permute") {
  CHECK(*run(Transpose{0, 2}, {f32({2, 3, 4})}) == f32({4, 3, 2}));
  CHECK(*run(Transpose{-1, -2}, {f32({batch, 3, 4})}) == f32({batch, 4, 3}));
  CHECK(error_of(Transpose{0, 3}, {f32({2, 3, 4})}) == "dim1: axis 3 is out of range for rank 3 (valid: -3..2)");
  CHECK(*run(Permute{{2, 0, 1}}, {f32({2, 3, 4})}) == f32({4, 2, 3}));
  CHECK(*run(Permute{{0, -1, 1}}, {f32({batch, 3, 4})}) == f32({batch, 4, 3}));
  CHECK(error_of(Permute{{0, 0, 1}}, {f32({2, 3, 4})}) == "dims [0, 0, 1] repeats dim 0");
  CHECK(error_of(Permute{{1, 0}}, {f32({2, 3, 4})}) == "dims [1, 0] has 2 entries, but input f32[2, 3, 4] has 3 dims");
}

TEST_CASE("concat adds sizes along its axis") {
  CHECK(*run(Concat{1}, {f32({2, 3}), f32({2, 5})}) == f32({2, 8}));
  CHECK(*run(Concat{-1}, {f32({2, 3}), f32({2, 5}), f32({2, 1})}) == f32({2, 9}));
  CHECK(*run(Concat{0}, {f32({batch, 3}), f32({batch, 3})}) == f32({Dim::sym("batch", 2), 3}));
  CHECK(*run(Concat{1}, {f32({batch, 3})}) == f32({batch, 3}));
  CHECK(error_of(Concat{1}, {f32({2, 3}), f32({3, 5})}) ==
        "input 1 f32[3, 5] differs from input 0 f32[2, 3] in dim 0 (only dim 1 may differ)");
  CHECK(error_of(Concat{0}, {f32({2}), i64({2})}) == "input 1 i64[2] has dtype i64 but input 0 f32[2] has f32");
  CHECK(error_of(Concat{0}, {f32({batch}), f32({2})}) ==
        "cannot concatenate input 1 f32[2] along dim 0: the sum of 'batch' and '2' is not a single symbolic dim");
}

TEST_CASE("split pieces and slices") {
  CHECK(*run(Split{1, {2, 4}, 1}, {f32({4, 6})}) == f32({4, 4}));
  CHECK(*run(Split{-1, {2, 4}, 0}, {f32({batch, 6})}) == f32({batch, 2}));
  CHECK(error_of(Split{1, {2, 3}, 0}, {f32({4, 6})}) ==
        "split sizes [2, 3] sum to 5, but dim 1 of input f32[4, 6] is 6");
  CHECK(error_of(Split{0, {2, 3}, 0}, {f32({batch, 6})}) ==
        "the split dim (dim 0 of input f32[batch, 6]) must be a concrete size, not 'batch'");
  CHECK(error_of(Split{0, {4}, 1}, {f32({4})}) == "piece 1 does not exist: there are 1 split sizes");

  CHECK(*run(Slice{.axis = 1, .start = -3}, {f32({2, 10})}) == f32({2, 3}));                      // x[:, -3:]
  CHECK(*run(Slice{.axis = 1, .start = 2, .end = 8, .step = 3}, {f32({2, 10})}) == f32({2, 2}));  // 2, 5
  CHECK(*run(Slice{.axis = 1, .start = 2, .end = 100}, {f32({2, 10})}) == f32({2, 8}));           // clamped
  CHECK(*run(Slice{.axis = 0, .start = 5, .end = 2}, {f32({10})}) == f32({0}));
  CHECK(*run(Slice{.axis = -1, .end = -1}, {f32({10})}) == f32({9}));
  CHECK(*run(Slice{.axis = 0}, {f32({batch, 3})}) == f32({batch, 3}));  // x[:] keeps a symbolic dim
  CHECK(error_of(Slice{.axis = 0, .start = 1}, {f32({batch, 3})}) ==
        "cannot slice dim 0 of input f32[batch, 3]: its size 'batch' is symbolic");
  CHECK(error_of(Slice{.axis = 0, .step = 0}, {f32({3})}) == "step must be positive, got 0");
  CHECK(describe(Slice{.axis = 1, .start = -3}) == "slice(axis=1, start=-3, end=none, step=1)");
}

TEST_CASE("pad uses F.pad's last-dim-first order") {
  CHECK(*run(Pad{{1, 1, 2, 2}}, {f32({1, 3, 4, 5})}) == f32({1, 3, 8, 7}));
  CHECK(*run(Pad{{-1, -1}}, {f32({batch, 5})}) == f32({batch, 3}));  // negative: cropping
  CHECK(error_of(Pad{{2, 2}, PadMode::reflect}, {f32({1, 3, 4, 5})}) ==
        "reflect padding pads the last 1 to 3 dims of an input with 1 or 2 more dims, but pads [2, 2] pad 1 dims "
        "of input f32[1, 3, 4, 5]");
  CHECK(*run(Pad{{2, 2}, PadMode::reflect}, {f32({3, 4, 5})}) == f32({3, 4, 9}));
  CHECK(*run(Pad{{1, 1, 1, 1}, PadMode::replicate}, {f32({batch, 3, 4, 5})}) == f32({batch, 3, 6, 7}));
  CHECK(error_of(Pad{{5, 0}, PadMode::reflect}, {f32({3, 4, 5})}) ==
        "reflect padding (5, 0) must be smaller than dim 2 of input f32[3, 4, 5] (5)");
  CHECK(error_of(Pad{{1, 1, 1}}, {f32({3, 4})}) == "pads [1, 1, 1] must have an even length (before, after pairs)");
  CHECK(error_of(Pad{{1, 1, 1, 1, 1, 1}}, {f32({3, 4})}) ==
        "pads [1, 1, 1, 1, 1, 1] pad 3 dims, but input f32[3, 4] has 2");
  CHECK(error_of(Pad{{-3, -3}}, {f32({5})}) == "padding (-3, -3) makes dim 0 of input f32[5] negative (-1)");
  CHECK_CONTAINS(error_of(Pad{{0, 0, 1, 1}}, {f32({batch, 5})}), "cannot pad dim 0 of input f32[batch, 5]");
  CHECK(describe(Pad{{1, 1}}) == "pad(pads=[1, 1], mode=constant, value=0)");
}

TEST_CASE("upsample scales H and W by floor(size * scale)") {
  CHECK(*run(Upsample{2, 2}, {f32({batch, 3, 4, 5})}) == f32({batch, 3, 8, 10}));
  CHECK(*run(Upsample{1.5, 1.5}, {f32({1, 3, 5, 5})}) == f32({1, 3, 7, 7}));
  CHECK(*run(Upsample{2, 1}, {f32({1, 3, Dim::sym("h"), 5})}) == f32({1, 3, Dim::sym("h", 2), 5}));
  CHECK_CONTAINS(error_of(Upsample{1.5, 1}, {f32({1, 3, Dim::sym("h"), 5})}), "its scale must be an integer, got 1.5");
  CHECK(error_of(Upsample{0, 1}, {f32({1, 3, 4, 4})}) == "scale_h must be positive, got 0");
  CHECK(error_of(Upsample{}, {f32({3, 4, 4})}) == "expects a [N, C, H, W] input, got f32[3, 4, 4]");
}
