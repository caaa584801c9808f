#pragma once
// 16-bit floating-point storage types: IEEE binary16 (f16) and bfloat16 (bf16).
// They store bits only; arithmetic happens in float. Conversions from float round to nearest,
// ties to even, and keep infinities, NaNs (quietened) and subnormals.
#include <cstdint>

#include "math/host_device.hpp"

namespace teeny {

namespace half_detail {
TEENY_HD constexpr std::uint32_t float_bits(float f) noexcept { return __builtin_bit_cast(std::uint32_t, f); }
TEENY_HD constexpr float bits_float(std::uint32_t u) noexcept { return __builtin_bit_cast(float, u); }
}  // namespace half_detail

/// Rounds a float to the nearest binary16 bit pattern (ties to even).
TEENY_HD constexpr std::uint16_t f16_bits_from_float(float value) noexcept {
  const std::uint32_t x = half_detail::float_bits(value);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t mag = x & 0x7fffffffu;
  if (mag >= 0x7f800000u) {  // inf or NaN; a NaN keeps its top payload bits and is made quiet
    return static_cast<std::uint16_t>(sign | (mag == 0x7f800000u ? 0x7c00u : 0x7e00u | ((mag >> 13) & 0x3ffu)));
  }
  if (mag >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (mag < 0x38800000u) {                                                    // below 2^-14: an f16 subnormal (or zero)
    if (mag <= 0x33000000u) return sign;  // <= 2^-25: rounds to (signed) zero, the tie included
    const std::uint32_t exponent = mag >> 23;
    const std::uint32_t mantissa = (mag & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126u - exponent;  // 14..24: value = mantissa * 2^(exponent-150)
    std::uint32_t result = mantissa >> shift;
    const std::uint32_t rest = mantissa & ((1u << shift) - 1u);
    const std::uint32_t halfway = 1u << (shift - 1u);
    if (rest > halfway || (rest == halfway && (result & 1u))) ++result;  // may carry into the smallest normal
    return static_cast<std::uint16_t>(sign | result);
  }
  std::uint32_t result = (mag - 0x38000000u) >> 13;  // rebias the exponent 127 -> 15
  const std::uint32_t rest = mag & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (result & 1u))) ++result;  // a carry rounds up the exponent
  return static_cast<std::uint16_t>(sign | result);
}

/// Widens a binary16 bit pattern to float (exact).
TEENY_HD constexpr float float_from_f16_bits(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exponent = (h >> 10) & 0x1fu;
  std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1fu) return half_detail::bits_float(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    if (mantissa == 0) return half_detail::bits_float(sign);
    exponent = 113;  // normalise the subnormal: 2^-14 is float exponent 113
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --exponent;
    }
    return half_detail::bits_float(sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13));
  }
  return half_detail::bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

/// Rounds a float to the nearest bfloat16 bit pattern (ties to even); NaNs stay NaN.
TEENY_HD constexpr std::uint16_t bf16_bits_from_float(float value) noexcept {
  const std::uint32_t x = half_detail::float_bits(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x0040u);
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/// Widens a bfloat16 bit pattern to float (exact).
TEENY_HD constexpr float float_from_bf16_bits(std::uint16_t b) noexcept {
  return half_detail::bits_float(static_cast<std::uint32_t>(b) << 16);
}

/// IEEE binary16 storage. Converts from and to float; compare as floats.
struct f16 {
  std::uint16_t bits = 0;
  constexpr f16() = default;
  TEENY_HD constexpr explicit f16(float value) noexcept : bits(f16_bits_from_float(value)) {}
  TEENY_HD static constexpr f16 from_bits(std::uint16_t b) noexcept {
    f16 h;
    h.bits = b;
    return h;
  }
  TEENY_HD constexpr explicit operator float() const noexcept { return float_from_f16_bits(bits); }
};

/// bfloat16 storage: the top half of a float. Converts from and to float.
struct bf16 {
  std::uint16_t bits = 0;
  constexpr bf16() = default;
  TEENY_HD constexpr explicit bf16(float value) noexcept : bits(bf16_bits_from_float(value)) {}
  TEENY_HD static constexpr bf16 from_bits(std::uint16_t b) noexcept {
    bf16 h;
    h.bits = b;
    return h;
  }
  TEENY_HD constexpr explicit operator float() const noexcept { return float_from_bf16_bits(bits); }
};

static_assert(sizeof(f16) == 2 && sizeof(bf16) == 2);

}  // namespace teeny
