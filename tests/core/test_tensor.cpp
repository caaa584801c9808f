#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

import teeny.core;

using teeny::ConcreteShape;
using teeny::DType;
using teeny::Tensor;
using teeny::TensorView;

TEST_CASE("tensors own aligned zeroed storage and give typed views") {
  auto t = Tensor::zeros(DType::f32, {2, 3});
  REQUIRE(t);
  CHECK(t->bytes() == 24);
  CHECK(reinterpret_cast<std::uintptr_t>(t->data()) % 64 == 0);
  auto v = t->view<float>();
  REQUIRE(v);
  CHECK(v->numel() == 6);
  CHECK(v->is_contiguous());
  for (float x : v->span()) CHECK(x == 0.0f);
  (*v)(1, 2) = 5.0f;
  CHECK(v->span()[5] == 5.0f);

  auto wrong = t->view<double>();
  REQUIRE_FALSE(wrong);
  CHECK(wrong.error().code() == teeny::Errc::dtype_mismatch);
  CHECK(wrong.error().message() == "tensor [2, 3] is f32 but was viewed as f64");
}

TEST_CASE("Tensor::from copies values and checks their count") {
  auto t = Tensor::from<std::int64_t>({1, 2, 3, 4, 5, 6}, {3, 2});
  REQUIRE(t);
  CHECK(t->dtype() == DType::i64);
  const Tensor& ct = *t;
  auto v = ct.view<std::int64_t>();
  REQUIRE(v);
  static_assert(std::is_same_v<decltype(v->data), const std::int64_t*>);
  CHECK((*v)(2, 1) == 6);
  CHECK((*v)(1, 0) == 3);

  auto short_by_one = Tensor::from<float>({1, 2, 3}, {2, 2});
  REQUIRE_FALSE(short_by_one);
  CHECK(short_by_one.error().message() == "3 values do not fill shape [2, 2] (4 elements)");
}

TEST_CASE("strided views index through their strides") {
  std::vector<float> data{0, 1, 2, 3, 4, 5};
  TensorView<float> rows(data.data(), {2, 3});
  TensorView<float> transposed(data.data(), {3, 2}, {1, 3});  // a transposed view, no copy
  CHECK_FALSE(transposed.is_contiguous());
  CHECK(transposed(2, 1) == rows(1, 2));
  TensorView<const float> readonly = rows;  // mutable -> const view converts implicitly
  CHECK(readonly(1, 0) == 3.0f);
}

TEST_CASE("empty tensors and huge allocations fail cleanly") {
  auto empty = Tensor::zeros(DType::bf16, {0, 4});
  REQUIRE(empty);
  CHECK(empty->bytes() == 0);
  // 2^52 f64 elements (32 PiB): a count teeny accepts, an allocation the machine refuses.
  auto huge = Tensor::zeros(DType::f64, {1LL << 32, 1LL << 20});
  REQUIRE_FALSE(huge);
  CHECK(huge.error().code() == teeny::Errc::out_of_memory);
  CHECK(huge.error().message().find("tensor f64 [4294967296, 1048576]") != std::string::npos);
  // 2^60 elements: refused before any size is computed in bytes.
  auto too_many = Tensor::zeros(DType::f64, {1LL << 40, 1LL << 20});
  REQUIRE_FALSE(too_many);
  CHECK(too_many.error().code() == teeny::Errc::out_of_range);
  CHECK(too_many.error().message() == "shape [1099511627776, 1048576] has more than 2^56 elements");
}

TEST_CASE("TensorRef borrows typed values, a Tensor or a NamedTensor, and views them back by dtype") {
  const std::vector<float> values = {1, 2, 3, 4, 5, 6};
  const teeny::TensorRef ref = teeny::TensorRef::of<float>("x", values, {2, 3});
  CHECK(ref.name == "x");
  CHECK(ref.dtype == DType::f32);
  CHECK(ref.shape == ConcreteShape{2, 3});
  CHECK(ref.data.data() == static_cast<const void*>(values.data()));  // borrowed, not copied
  CHECK(ref.data.size() == 24);
  auto v = ref.view<float>();
  REQUIRE(v);
  CHECK((*v)(1, 0) == 4.0f);

  auto wrong = ref.view<std::int32_t>();
  REQUIRE_FALSE(wrong);
  CHECK(wrong.error().code() == teeny::Errc::dtype_mismatch);
  CHECK(wrong.error().message() == "tensor 'x' is f32 but was viewed as i32");
  const teeny::TensorRef too_big = teeny::TensorRef::of<float>("y", values, {7});
  auto short_view = too_big.view<float>();
  REQUIRE_FALSE(short_view);
  CHECK(short_view.error().message() == "tensor 'y' (f32 [7]) has 24 bytes, not 7 x 4");

  const teeny::NamedTensor named{"t", *Tensor::from<std::int64_t>({7, 8}, {2})};
  const teeny::TensorRef of_named = teeny::TensorRef::of(named);
  CHECK(of_named.name == "t");
  CHECK(of_named.dtype == DType::i64);
  CHECK(of_named.data.data() == named.tensor.data());
  CHECK(of_named.view<std::int64_t>()->span()[1] == 8);
}
