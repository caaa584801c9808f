// Winograd F(4x4, 3x3) and F(2x2, 3x3): the filter transforms (in double, once per load), the
// portable input and output transforms (4 tiles per vector, the baseline target's width) and the
// choice of the active instruction set's.
#include "winograd.hpp"

#include <algorithm>

#include "gemm.hpp"
#include "winograd_detail.hpp"

namespace teeny::cpu::winograd {
namespace {

const detail::Transforms& active() {
  static constexpr detail::Transforms portable = detail::transforms_of<detail::Lanes<4>>();
  [[maybe_unused]] const Isa isa = active_isa();
#if defined(TEENY_CPU_GEMM_AVX512)
  if (isa == Isa::avx512) return detail::avx512_transforms();
#endif
#if defined(TEENY_CPU_GEMM_AVX2)
  if (isa == Isa::avx2 || isa == Isa::avx512) return detail::avx2_transforms();
#endif
  return portable;
}

// G ((m + 2) x 3): the filter polynomial evaluated at the interpolation points (each row scaled)
// and infinity. F(4x4, 3x3): 0, 1, -1, 2, -2; F(2x2, 3x3): 0, 1, -1.
constexpr double kG4[6][3] = {
    {1.0 / 4, 0, 0},
    {-1.0 / 6, -1.0 / 6, -1.0 / 6},
    {-1.0 / 6, 1.0 / 6, -1.0 / 6},
    {1.0 / 24, 1.0 / 12, 1.0 / 6},
    {1.0 / 24, -1.0 / 12, 1.0 / 6},
    {0, 0, 1},
};
constexpr double kG2[4][3] = {
    {1, 0, 0},
    {1.0 / 2, 1.0 / 2, 1.0 / 2},
    {1.0 / 2, -1.0 / 2, 1.0 / 2},
    {0, 0, 1},
};

// U = G g G^T for every filter g [o][c][3][3], written as matrix (a, b): u[(a N + b) outs ins + o ins + c].
// Eight input channels at a time, each lane one filter: the loops over lanes vectorise (the
// arithmetic per filter, in its order, is the scalar one's).
template <int N>
void transform_filters_with(const double (&kg)[N][3], const float* w, std::int64_t outs, std::int64_t ins, float* u) {
  constexpr std::int64_t kLanes = 8;
  const std::int64_t matrix = outs * ins;
  for (std::int64_t o = 0; o < outs; ++o) {
    for (std::int64_t c0 = 0; c0 < ins; c0 += kLanes) {
      const std::int64_t n = std::min(kLanes, ins - c0);
      double g[9][kLanes] = {};
      for (std::int64_t l = 0; l < n; ++l) {
        const float* filter = w + (o * ins + c0 + l) * 9;
        for (int k = 0; k < 9; ++k) g[k][l] = filter[k];
      }
      double gg[N][3][kLanes];  // G g
      for (int a = 0; a < N; ++a) {
        for (int j = 0; j < 3; ++j) {
          for (std::int64_t l = 0; l < kLanes; ++l) {
            gg[a][j][l] = kg[a][0] * g[j][l] + kg[a][1] * g[3 + j][l] + kg[a][2] * g[6 + j][l];
          }
        }
      }
      for (int a = 0; a < N; ++a) {
        for (int b = 0; b < N; ++b) {  // (G g) G^T
          float value[kLanes];
          for (std::int64_t l = 0; l < kLanes; ++l) {
            value[l] = static_cast<float>(gg[a][0][l] * kg[b][0] + gg[a][1][l] * kg[b][1] + gg[a][2][l] * kg[b][2]);
          }
          float* out = u + (a * N + b) * matrix + o * ins + c0;
          for (std::int64_t l = 0; l < n; ++l) out[l] = value[l];
        }
      }
    }
  }
}

}  // namespace

void transform_filters(const float* w, std::int64_t outs, std::int64_t ins, std::int64_t m, float* u) {
  if (m == 2) {
    transform_filters_with(kG2, w, outs, ins, u);
  } else {
    transform_filters_with(kG4, w, outs, ins, u);
  }
}

void transform_input(const float* x, std::int64_t channels, const Plane& plane, std::int64_t first, std::int64_t count,
                     const Points& v, float* staging) {
  active().input(x, channels, plane, first, count, v, staging);
}

void transform_output(const Points& m, std::int64_t outs, const Plane& plane, std::int64_t first, std::int64_t count,
                      const OutputEpilogue& epilogue, float* y) {
  active().output(m, outs, plane, first, count, epilogue, y);
}

std::int64_t lanes() { return active().lanes; }

}  // namespace teeny::cpu::winograd
