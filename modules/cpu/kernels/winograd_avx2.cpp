// The Winograd transforms with AVX2 (8 tiles per vector); see winograd_detail.hpp.
#include "winograd_detail.hpp"

namespace teeny::cpu::winograd::detail {
const Transforms& avx2_transforms() {
  static constexpr Transforms transforms = transforms_of<Lanes<8>>();
  return transforms;
}
}  // namespace teeny::cpu::winograd::detail
