#pragma once
// Element conversion as PyTorch's Tensor.to(dtype) does it, shared by the CPU backend (clang) and
// the CUDA kernels (nvcc): float -> integer truncates toward zero, -> bool is x != 0 (NaN is
// true), f16/bf16 round to nearest even (f64 -> f16/bf16 through f32, as PyTorch does).
#include <cstdint>
#include <type_traits>

#include "math/half.hpp"
#include "math/host_device.hpp"

namespace teeny::math {

namespace cast_detail {
template <class T>
inline constexpr bool is_half = std::is_same_v<T, f16> || std::is_same_v<T, bf16>;

// C++ leaves NaN and out-of-range float -> integer conversions undefined. Here they give the x86
// "integer indefinite" value INT64_MIN before narrowing (what PyTorch's CPU build gives for i64),
// and narrowing wraps: u8 goes through i64 as in PyTorch, so -1.5 -> 255. In range: truncation.
template <class To, class From>
TEENY_HD constexpr To float_to_integer(From x) {
  constexpr From lo = From(-9223372036854775808.0);
  constexpr From hi = From(9223372036854775808.0);
  if constexpr (std::is_same_v<To, std::uint64_t>) {
    if (x >= hi && x < hi * From(2)) return static_cast<std::uint64_t>(x);
  }
  if (!(x >= lo && x < hi)) return static_cast<To>(INT64_MIN);
  return static_cast<To>(static_cast<std::int64_t>(x));
}
}  // namespace cast_detail

/// `x` converted to `To`; both are storage types of teeny's dtypes (bool, ints, f16, bf16, f32, f64).
template <class To, class From>
TEENY_HD constexpr To cast_element(From x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;
  } else if constexpr (cast_detail::is_half<From>) {
    return cast_element<To>(static_cast<float>(x));
  } else if constexpr (std::is_same_v<To, bool>) {
    return x != From(0);
  } else if constexpr (cast_detail::is_half<To>) {
    return To(static_cast<float>(x));
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    return cast_detail::float_to_integer<To>(x);
  } else {
    return static_cast<To>(x);  // int -> int wraps (defined in C++20), int -> float rounds to nearest
  }
}

}  // namespace teeny::math
