#pragma once
// Per-element rules of the shape family: the index arithmetic of the data-movement ops whose rules
// are PyTorch's (pad modes, nearest upsampling), shared by the CPU backend (clang) and the CUDA
// kernels (nvcc).
#include <cmath>
#include <cstdint>

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

}  // namespace teeny::math
