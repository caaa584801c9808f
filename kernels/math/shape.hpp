#pragma once
// Per-element rules of the shape family, shared by the CPU backend (clang) and the CUDA kernels
// (nvcc): the index arithmetic of the data-movement ops whose rules are PyTorch's (pad modes,
// nearest upsampling), and element conversion as PyTorch's Tensor.to(dtype) does it (Cast):
// float -> integer truncates toward zero, -> bool is x != 0 (NaN is true), f16/bf16 round to
// nearest even (f64 -> f16/bf16 through f32, as PyTorch does).
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "math/half.hpp"
#include "math/host_device.hpp"

namespace teeny::math {

/// How F.pad fills the border.
enum class PadKind : std::uint8_t { constant, reflect, replicate };

/// The input index that output index `o` reads along a dim of size `n` padded by `before` in front
/// (negative: cropped), or -1 where constant padding writes the fill value. reflect needs pads
/// smaller than n; replicate needs n > 0 (the graph checks both).
TEENY_HD inline std::int64_t pad_source_index(PadKind kind, std::int64_t o, std::int64_t before, std::int64_t n) {
  std::int64_t i = o - before;
  switch (kind) {
    case PadKind::constant: return (i < 0 || i >= n) ? -1 : i;
    case PadKind::reflect:
      if (i < 0) i = -i;
      if (i >= n) i = 2 * (n - 1) - i;
      return i;
    case PadKind::replicate: return i < 0 ? 0 : (i >= n ? n - 1 : i);
  }
  return i;
}

/// The input index nearest upsampling reads for output index `dst`, exactly as PyTorch computes it:
/// floor(dst * inv_scale) in float32, where inv_scale is float(1.0 / scale_factor), clamped to the
/// input; same-size and doubling take exact shortcuts. Fractional scales depend on this rounding.
TEENY_HD inline std::int64_t nearest_source_index(std::int64_t dst, std::int64_t in_size, std::int64_t out_size,
                                                  float inv_scale) {
  using std::floor;
  if (out_size == in_size) return dst;
  if (out_size == 2 * in_size) return dst >> 1;
  const auto src = static_cast<std::int64_t>(floor(static_cast<float>(dst) * inv_scale));
  return src < in_size - 1 ? src : in_size - 1;
}

// ---- Cast: element conversion -------------------------------------------------------------------

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
