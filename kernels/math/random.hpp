#pragma once
// Counter-based random numbers for dropout, shared by the CPU and CUDA kernels: a draw is a hash
// of (seed, step, stream, index), so any element's draw is computed independently, in any order
// and on any thread, and a backward pass recomputes the forward's mask instead of storing it.
#include <cstdint>

#include "math/host_device.hpp"

namespace teeny::math {

/// SplitMix64's finaliser: a bijective 64-bit mix whose outputs pass BigCrush as a counter hash.
TEENY_HD inline std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// A uniform draw in [0, 1) (53 bits) for element `index` of random stream `stream` (e.g. a DAG
/// node) at training step `step`.
TEENY_HD inline double uniform01(std::uint64_t seed, std::uint64_t step, std::uint64_t stream, std::uint64_t index) {
  const std::uint64_t key = mix64(mix64(seed ^ (stream * 0x9e3779b97f4a7c15ULL)) + step);
  return static_cast<double>(mix64(key + index * 0x9e3779b97f4a7c15ULL) >> 11) * 0x1.0p-53;
}

/// Whether dropout with probability `p` keeps the element (PyTorch keeps with probability 1 - p).
TEENY_HD inline bool dropout_keeps(double p, std::uint64_t seed, std::uint64_t step, std::uint64_t stream,
                                   std::uint64_t index) {
  return uniform01(seed, step, stream, index) >= p;
}

}  // namespace teeny::math
