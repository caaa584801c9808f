#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

import teeny.core;

using teeny::bf16;
using teeny::DType;
using teeny::f16;

namespace {
float from_bits(std::uint32_t u) { return std::bit_cast<float>(u); }
std::uint16_t h(float f) { return f16(f).bits; }
std::uint16_t b(float f) { return bf16(f).bits; }
}  // namespace

TEST_CASE("the 13 dtypes: names, sizes, kinds, parsing") {
  CHECK(teeny::all_dtypes.size() == 13);
  CHECK(teeny::name(DType::boolean) == std::string_view("bool"));
  CHECK(teeny::name(DType::bf16) == std::string_view("bf16"));
  CHECK(teeny::safetensors_name(DType::u64) == std::string_view("U64"));
  CHECK(teeny::size_of(DType::i64) == 8);
  CHECK(teeny::size_of(DType::f16) == 2);
  CHECK(teeny::size_of(DType::boolean) == 1);
  CHECK(teeny::is_floating(DType::bf16));
  CHECK_FALSE(teeny::is_floating(DType::i32));
  CHECK(teeny::is_integral(DType::u8));
  CHECK_FALSE(teeny::is_integral(DType::boolean));
  CHECK(teeny::parse_dtype("BF16") == DType::bf16);
  CHECK(teeny::parse_dtype("float32") == DType::f32);
  CHECK(teeny::parse_dtype("i16") == DType::i16);
  CHECK_FALSE(teeny::parse_dtype("F8_E4M3").has_value());
  for (DType d : teeny::all_dtypes) {
    CHECK(teeny::parse_dtype(teeny::name(d)) == d);
    CHECK(teeny::parse_dtype(teeny::safetensors_name(d)) == d);
    // storage_t and dtype_of agree and have the dtype's size
    teeny::visit_dtype(d, [&]<class T>(std::type_identity<T>) {
      CHECK(teeny::dtype_of<T> == d);
      CHECK(sizeof(T) == teeny::size_of(d));
    });
  }
  static_assert(teeny::dtype_of<std::int64_t> == DType::i64);
  static_assert(std::same_as<teeny::storage_t<DType::bf16>, bf16>);
  static_assert(teeny::Element<f16> && teeny::Element<const float> && !teeny::Element<long double>);
  static_assert(teeny::FloatElement<bf16> && !teeny::FloatElement<std::int8_t>);
}

TEST_CASE("f16 from float rounds to nearest even, keeps inf/NaN/subnormals") {
  CHECK(h(1.0f) == 0x3C00);
  CHECK(h(-2.0f) == 0xC000);
  CHECK(h(0.1f) == 0x2E66);
  CHECK(h(-0.0f) == 0x8000);
  CHECK(h(65504.0f) == 0x7BFF);   // largest finite
  CHECK(h(65519.99f) == 0x7BFF);  // just below the halfway point to inf
  CHECK(h(65520.0f) == 0x7C00);   // the tie rounds to even: inf
  CHECK(h(std::numeric_limits<float>::infinity()) == 0x7C00);
  CHECK(h(-std::numeric_limits<float>::infinity()) == 0xFC00);
  CHECK(h(std::numeric_limits<float>::quiet_NaN()) == 0x7E00);
  CHECK((h(from_bits(0x7F800001)) & 0x7E00) == 0x7E00);  // a signalling NaN comes back quiet, still NaN
  CHECK(h(std::ldexp(1.0f, -14)) == 0x0400);             // smallest normal
  CHECK(h(std::ldexp(1.0f, -24)) == 0x0001);             // smallest subnormal
  CHECK(h(std::ldexp(1023.0f, -24)) == 0x03FF);          // largest subnormal
  CHECK(h(std::ldexp(1.0f, -25)) == 0x0000);             // tie between 0 and 2^-24: even is 0
  CHECK(h(std::ldexp(3.0f, -26)) == 0x0001);             // 0.75 * 2^-24 rounds up
  CHECK(h(std::ldexp(3.0f, -25)) == 0x0002);             // 1.5 * 2^-24: tie, rounds to even 2
  CHECK(h(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);      // tie between 1 and 1+2^-10: even
  CHECK(h(1.0f + std::ldexp(3.0f, -11)) == 0x3C02);      // tie between 0x3C01 and 0x3C02: even
  CHECK(h(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)) == 0x3C01);  // just above the tie
}

TEST_CASE("f16 to float is exact") {
  CHECK(static_cast<float>(f16::from_bits(0x3C00)) == 1.0f);
  CHECK(static_cast<float>(f16::from_bits(0x7BFF)) == 65504.0f);
  CHECK(static_cast<float>(f16::from_bits(0x0001)) == std::ldexp(1.0f, -24));
  CHECK(static_cast<float>(f16::from_bits(0x03FF)) == std::ldexp(1023.0f, -24));
  CHECK(static_cast<float>(f16::from_bits(0x3555)) == 0.333251953125f);
  CHECK(std::isinf(static_cast<float>(f16::from_bits(0xFC00))));
  CHECK(std::signbit(static_cast<float>(f16::from_bits(0x8000))));
  CHECK(std::isnan(static_cast<float>(f16::from_bits(0x7E00))));
  // Every finite f16 survives a round trip through float.
  int mismatches = 0;
  for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {
    if ((bits & 0x7C00) == 0x7C00 && (bits & 0x3FF) != 0) continue;  // NaNs
    const auto x = static_cast<std::uint16_t>(bits);
    if (f16(static_cast<float>(f16::from_bits(x))).bits != x) ++mismatches;
  }
  CHECK(mismatches == 0);
}

TEST_CASE("bf16 from float rounds to nearest even, keeps inf/NaN/subnormals") {
  CHECK(b(1.0f) == 0x3F80);
  CHECK(b(0.1f) == 0x3DCD);
  CHECK(b(from_bits(0x3F808000)) == 0x3F80);              // tie: even
  CHECK(b(from_bits(0x3F818000)) == 0x3F82);              // tie: even (up)
  CHECK(b(from_bits(0x3F808001)) == 0x3F81);              // just above the tie
  CHECK(b(std::numeric_limits<float>::max()) == 0x7F80);  // rounds up to inf
  CHECK(b(-std::numeric_limits<float>::infinity()) == 0xFF80);
  CHECK(b(std::numeric_limits<float>::quiet_NaN()) == 0x7FC0);
  CHECK((b(from_bits(0x7F800001)) & 0x7FC0) == 0x7FC0);  // signalling NaN: stays NaN, made quiet
  CHECK(b(from_bits(0x00010000)) == 0x0001);             // subnormals are kept, not flushed
  CHECK(b(from_bits(0x00018000)) == 0x0002);
  CHECK(static_cast<float>(bf16::from_bits(0x4049)) == 3.140625f);
  CHECK(static_cast<float>(bf16::from_bits(0x0001)) == from_bits(0x00010000));
}

TEST_CASE("convert_element between dtypes") {
  CHECK(teeny::convert_element<float>(f16::from_bits(0x3C00)) == 1.0f);
  CHECK(teeny::convert_element<bf16>(2.5).bits == 0x4020);
  CHECK(teeny::convert_element<std::int32_t>(-3.0f) == -3);
  CHECK(teeny::convert_element<bool>(0.5f));
  CHECK(teeny::convert_element<double>(std::int64_t{1} << 40) == 1099511627776.0);
}
