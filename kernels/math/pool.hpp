#pragma once
// Per-element rules of the pool family, shared by the CPU and CUDA kernels: which input positions
// a pooling window reads and what an average divides by (Window2d is the convolution's window
// too). Rules are PyTorch's (aten/src/ATen/native/{DilatedMaxPool2d,AveragePool2d,
// AdaptiveAveragePooling}.cpp).
#include <cstdint>

#include "math/host_device.hpp"

namespace teeny::math {

/// A 2-D window: kernel, stride, padding (each side) and dilation per spatial dim.
struct Window2d {
  std::int64_t kernel_h = 1, kernel_w = 1;
  std::int64_t stride_h = 1, stride_w = 1;
  std::int64_t pad_h = 0, pad_w = 0;
  std::int64_t dilation_h = 1, dilation_w = 1;
};

/// The input positions a max-pool window reads along one dim: first, first + dilation, ... < end.
struct MaxSpan {
  std::int64_t first = 0;
  std::int64_t end = 0;
};

/// Output position `o` of a max pool over `size` inputs; the padding (-inf) is skipped.
TEENY_HD inline MaxSpan max_pool_span(std::int64_t o, std::int64_t kernel, std::int64_t stride, std::int64_t pad,
                                      std::int64_t dilation, std::int64_t size) {
  std::int64_t first = o * stride - pad;
  const std::int64_t last = first + (kernel - 1) * dilation + 1;
  while (first < 0) first += dilation;
  return {first, last < size ? last : size};
}

/// Whether `v` replaces the running maximum `acc` of a max pool: NaN wins, as in PyTorch's max
/// pool (a later NaN replaces an earlier one; an equal value does not replace the first).
template <class T>
TEENY_HD inline bool max_pool_wins(T acc, T v) {
  return v > acc || v != v;
}
template <class T>
TEENY_HD inline T max_pool_update(T acc, T v) {
  return max_pool_wins(acc, v) ? v : acc;
}

/// The input range [begin, end) an average-pool window sums along one dim, and its extent counting
/// the padding (but not what a ceil-mode window hangs past the padding).
struct AvgSpan {
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::int64_t padded = 0;
};

TEENY_HD inline AvgSpan avg_pool_span(std::int64_t o, std::int64_t kernel, std::int64_t stride, std::int64_t pad,
                                      std::int64_t size) {
  std::int64_t begin = o * stride - pad;
  std::int64_t end = begin + kernel < size + pad ? begin + kernel : size + pad;
  const std::int64_t padded = end - begin;
  if (begin < 0) begin = 0;
  if (end > size) end = size;
  return {begin, end, padded};
}

/// What an average pool divides its window's sum by.
TEENY_HD inline std::int64_t avg_pool_divisor(const AvgSpan& h, const AvgSpan& w, bool count_include_pad,
                                              std::int64_t divisor_override) {
  if (divisor_override != 0) return divisor_override;
  if (count_include_pad) return h.padded * w.padded;
  return (h.end - h.begin) * (w.end - w.begin);
}

/// Adaptive pooling of `in` positions into `out`: output `o` averages [floor(o*in/out), ceil((o+1)*in/out)).
TEENY_HD inline std::int64_t adaptive_begin(std::int64_t o, std::int64_t in, std::int64_t out) { return o * in / out; }
TEENY_HD inline std::int64_t adaptive_end(std::int64_t o, std::int64_t in, std::int64_t out) {
  return ((o + 1) * in + out - 1) / out;
}

}  // namespace teeny::math
