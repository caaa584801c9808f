// The Winograd transforms with AVX-512 (16 tiles per vector); see winograd_detail.hpp.
#include "winograd_detail.hpp"

namespace teeny::cpu::winograd::detail {
const Transforms& avx512_transforms() {
  static constexpr Transforms transforms = transforms_of<Lanes<16>>();
  return transforms;
}
}  // namespace teeny::cpu::winograd::detail
