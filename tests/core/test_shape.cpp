#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

import teeny.core;

using teeny::ConcreteShape;
using teeny::Dim;
using teeny::Errc;
using teeny::Shape;

TEST_CASE("shapes with symbolic dims print, bind and count") {
  Shape s{Dim::sym("batch"), 1, 28, 28};
  CHECK(to_string(s) == "[batch, 1, 28, 28]");
  CHECK_FALSE(s.is_concrete());
  CHECK_FALSE(s.numel().has_value());
  CHECK(s.symbols() == std::vector<std::string>{"batch"});

  auto c = s.bind({{"batch", 64}});
  REQUIRE(c);
  CHECK(*c == ConcreteShape{64, 1, 28, 28});
  CHECK(c->numel() == 64 * 28 * 28);
  CHECK(c->last() == 28);

  auto unbound = s.bind({{"seq", 3}});
  REQUIRE_FALSE(unbound);
  CHECK(unbound.error().code() == Errc::not_found);
  CHECK(unbound.error().message() == "symbolic dim 'batch' of shape [batch, 1, 28, 28] is not bound to a size");

  Shape scaled{Dim::sym("batch", 4), 16};
  CHECK(to_string(scaled) == "[4*batch, 16]");
  CHECK(*scaled.bind({{"batch", 3}}) == ConcreteShape{12, 16});
}

TEST_CASE("match_shape reads symbolic sizes off a concrete shape") {
  teeny::Bindings b;
  Shape pattern{Dim::sym("batch"), 784};
  REQUIRE(teeny::match_shape(pattern, ConcreteShape{32, 784}, b));
  CHECK(b.at("batch") == 32);
  auto clash = teeny::match_shape(Shape{Dim::sym("batch"), 10}, ConcreteShape{16, 10}, b);
  REQUIRE_FALSE(clash);
  CHECK(clash.error().message().find("'batch' is 32 elsewhere but 16") != std::string::npos);
  auto wrong = teeny::match_shape(pattern, ConcreteShape{32, 783}, b);
  REQUIRE_FALSE(wrong);
  CHECK(wrong.error().message() == "expected shape [batch, 784], got [32, 783]");
}

TEST_CASE("ConcreteShape: rank limit, strides, checked construction") {
  const std::vector<std::int64_t> nine(9, 1);
  auto too_many = ConcreteShape::from(nine);
  REQUIRE_FALSE(too_many);
  CHECK(too_many.error().code() == Errc::out_of_range);
  const std::vector<std::int64_t> negative{2, -1};
  CHECK_FALSE(ConcreteShape::from(negative));
  CHECK(teeny::contiguous_strides(ConcreteShape{2, 3, 4}) == ConcreteShape{12, 4, 1});
  CHECK(ConcreteShape{}.numel() == 1);
  CHECK(ConcreteShape{}.last() == 1);
  CHECK(to_string(ConcreteShape{}) == "[]");
}

TEST_CASE("sizes from outside are counted with overflow checks, never wrapped around") {
  constexpr std::int64_t two_40 = std::int64_t{1} << 40;
  CHECK(teeny::checked_mul(two_40, two_40) == std::nullopt);  // 2^80
  CHECK(teeny::checked_mul(-two_40, 3) == -3 * two_40);
  CHECK(teeny::checked_add(INT64_MAX, 1) == std::nullopt);
  CHECK(teeny::checked_add(INT64_MAX - 1, 1) == INT64_MAX);

  // 2^56 elements is the limit: one more is refused with the shape named.
  CHECK(ConcreteShape{std::int64_t{1} << 28, std::int64_t{1} << 28}.checked_numel() == std::int64_t{1} << 56);
  CHECK(ConcreteShape{(std::int64_t{1} << 28) + 1, std::int64_t{1} << 28}.checked_numel() == std::nullopt);
  CHECK(ConcreteShape{0, 3, two_40}.checked_numel() == 0);
  // Empty, but numel() would overflow multiplying the dims before the 0.
  CHECK(ConcreteShape{two_40, two_40, 0}.checked_numel() == std::nullopt);
  const std::vector<std::int64_t> huge{two_40, two_40};
  auto from_file = ConcreteShape::from(huge);
  REQUIRE_FALSE(from_file);
  CHECK(from_file.error().code() == Errc::out_of_range);
  CHECK(from_file.error().message() == "shape [1099511627776, 1099511627776] has more than 2^56 elements");
  auto negative = teeny::checked_numel(ConcreteShape{3, -2});
  REQUIRE_FALSE(negative);
  CHECK(negative.error().message() == "shape [3, -2] has a negative dim");

  // A bound symbolic dim whose multiple, or whose shape's count, would overflow.
  auto scaled = Shape{Dim::sym("batch", 1 << 20), 4}.bind({{"batch", std::int64_t{1} << 50}});
  REQUIRE_FALSE(scaled);
  CHECK(scaled.error().code() == Errc::out_of_range);
  CHECK(scaled.error().message() ==
        "symbolic dim 'batch' = 1125899906842624 makes dim 1048576*batch of shape [1048576*batch, 4] overflow");
  auto wide = Shape{Dim::sym("batch"), two_40}.bind({{"batch", two_40}});
  REQUIRE_FALSE(wide);
  CHECK(wide.error().message() ==
        "shape [batch, 1099511627776] bound to [1099511627776, 1099511627776] has more than "
        "2^56 elements");
}

TEST_CASE("axes and broadcasting follow PyTorch") {
  CHECK(*teeny::normalize_axis(-1, 4) == 3);
  CHECK(*teeny::normalize_axis(2, 4) == 2);
  auto bad = teeny::normalize_axis(-5, 4);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message() == "axis -5 is out of range for rank 4 (valid: -4..3)");

  CHECK(*teeny::broadcast_shapes(Shape{8, 1, 6, 1}, Shape{7, 1, 5}) == Shape{8, 7, 6, 5});
  CHECK(*teeny::broadcast_shapes(Shape{Dim::sym("batch"), 10}, Shape{10}) == Shape{Dim::sym("batch"), 10});
  CHECK(*teeny::broadcast_shapes(Shape{Dim::sym("batch"), 1}, Shape{1, 3}) == Shape{Dim::sym("batch"), 3});
  auto clash = teeny::broadcast_shapes(Shape{2, 3}, Shape{4, 3});
  REQUIRE_FALSE(clash);
  CHECK(clash.error().code() == Errc::shape_mismatch);
  CHECK(clash.error().message() == "shapes [2, 3] and [4, 3] do not broadcast: dim 0 is 2 vs 4");
  CHECK_FALSE(teeny::broadcast_shapes(Shape{Dim::sym("batch")}, Shape{Dim::sym("seq")}));
}
