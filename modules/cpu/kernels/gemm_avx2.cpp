// AVX2 + FMA kernels (compiled with -mavx2 -mfma).
//
// Microkernel: 6 rows x 16 columns of C in 12 ymm accumulators (two B loads and six broadcasts per
// k), the classic Haswell-era shape that leaves 4 of the 16 registers for operands.
#include <immintrin.h>

#include <array>
#include <cstddef>
#include <utility>

#include "gemm_detail.hpp"

namespace teeny::cpu::detail {
namespace {

struct V256 {
  using reg = __m256;
  static constexpr std::size_t width = 8;
  static reg set1(float x) { return _mm256_set1_ps(x); }
  static reg zero() { return _mm256_setzero_ps(); }
  static reg add(reg a, reg b) { return _mm256_add_ps(a, b); }
  static reg sub(reg a, reg b) { return _mm256_sub_ps(a, b); }
  static reg mul(reg a, reg b) { return _mm256_mul_ps(a, b); }
  static reg div(reg a, reg b) { return _mm256_div_ps(a, b); }
  static reg fmadd(reg a, reg b, reg c) { return _mm256_fmadd_ps(a, b, c); }
  static reg fnmadd(reg a, reg b, reg c) { return _mm256_fnmadd_ps(a, b, c); }
  static reg max(reg a, reg b) { return _mm256_max_ps(a, b); }
  static reg min(reg a, reg b) { return _mm256_min_ps(a, b); }
  static reg abs(reg a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
  static reg neg(reg a) { return _mm256_xor_ps(a, _mm256_set1_ps(-0.0f)); }
  static reg round(reg a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static reg pow2(reg n) {
    const __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
  }
  static reg select_lt(reg a, reg b, reg if_less, reg otherwise) {
    return _mm256_blendv_ps(otherwise, if_less, _mm256_cmp_ps(a, b, _CMP_LT_OQ));
  }
  static reg copysign(reg mag, reg sign) {
    const __m256 sign_bit = _mm256_set1_ps(-0.0f);
    return _mm256_or_ps(_mm256_andnot_ps(sign_bit, mag), _mm256_and_ps(sign_bit, sign));
  }
  static float hsum(reg v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
  }
  static reg loadu(const float* p) { return _mm256_loadu_ps(p); }
  static void storeu(float* p, reg v) { _mm256_storeu_ps(p, v); }
  // Lanes [0, n) set, n <= 8.
  static __m256i mask(std::size_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static reg load_partial(const float* p, std::size_t n) { return _mm256_maskload_ps(p, mask(n)); }
  static void store_partial(float* p, std::size_t n, reg v) { _mm256_maskstore_ps(p, mask(n), v); }
};

constexpr int kMr = static_cast<int>(blocking_of(Isa::avx2).mr);
constexpr int kNv = static_cast<int>(blocking_of(Isa::avx2).nr / 8);
constexpr std::size_t kNr = std::size_t{kNv} * 8;
static_assert(kNr == blocking_of(Isa::avx2).nr, "nr is a whole number of vectors");

// C[0:M, 0:8*NV] (+)= A panel x B panel over kc, then bias, then ReLU if asked; the last vector
// has `tail` lanes. A's k steps are AS floats apart: a packed panel's kMr, or 1 for a single row
// of A read in place.
template <int M, int NV, int AS = kMr>
void kernel_mn(std::size_t kc, const float* a, const float* b, float* c, std::size_t ldc, std::size_t tail, bool load_c,
               const float* bias_col, const float* bias_row, bool relu) {
  __m256 acc[M][NV];
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_setzero_ps();
  }
  for (std::size_t k = 0; k < kc; ++k) {
    __m256 bv[NV];
#pragma GCC unroll 4
    for (std::ptrdiff_t v = 0; v < NV; ++v) bv[v] = _mm256_loadu_ps(b + 8 * v);
#pragma GCC unroll 8
    for (int i = 0; i < M; ++i) {
      const __m256 av = _mm256_broadcast_ss(a + i);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm256_fmadd_ps(av, bv[v], acc[i][v]);
    }
    a += AS;
    b += kNr;
  }
  const __m256i full = _mm256_set1_epi32(-1);
  const __m256i last = V256::mask(tail);
#pragma GCC unroll 8
  for (int i = 0; i < M; ++i) {
    float* ci = c + i * ldc;
#pragma GCC unroll 4
    for (std::ptrdiff_t v = 0; v < NV; ++v) {
      const __m256i mk = v == NV - 1 ? last : full;
      __m256 x = acc[i][v];
      if (load_c) x = _mm256_add_ps(x, _mm256_maskload_ps(ci + 8 * v, mk));
      if (bias_col != nullptr) x = _mm256_add_ps(x, _mm256_maskload_ps(bias_col + 8 * v, mk));
      if (bias_row != nullptr) x = _mm256_add_ps(x, _mm256_set1_ps(bias_row[i]));
      if (relu) x = _mm256_max_ps(_mm256_setzero_ps(), x);  // max(0, NaN) is NaN, as in PyTorch
      _mm256_maskstore_ps(ci + 8 * v, mk, x);
    }
  }
}

using KernelFn = void (*)(std::size_t, const float*, const float*, float*, std::size_t, std::size_t, bool, const float*,
                          const float*, bool);

template <std::size_t... I>
constexpr std::array<KernelFn, sizeof...(I)> make_kernels(std::index_sequence<I...>) {
  return {&kernel_mn<static_cast<int>(I) / kNv + 1, static_cast<int>(I) % kNv + 1>...};
}
constexpr auto kKernels = make_kernels(std::make_index_sequence<std::size_t{kMr} * kNv>{});
template <std::size_t... V>
constexpr std::array<KernelFn, sizeof...(V)> make_single_row_kernels(std::index_sequence<V...>) {
  return {&kernel_mn<1, static_cast<int>(V) + 1, 1>...};
}
constexpr auto kSingleRowKernels = make_single_row_kernels(std::make_index_sequence<std::size_t{kNv}>{});

// In-register 8x8 transpose: r[i] lane j becomes r[j] lane i.
inline void transpose8(__m256 r[8]) {
  __m256 t[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  __m256 s[8];
  for (int i = 0; i < 8; i += 4) {
    s[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    s[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
    s[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    s[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
  }
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm256_permute2f128_ps(s[j], s[j + 4], 0x20);
    r[j + 4] = _mm256_permute2f128_ps(s[j], s[j + 4], 0x31);
  }
}

struct Avx2 {
  static constexpr std::size_t mr = kMr;
  static constexpr std::size_t nr = kNr;
  static constexpr std::size_t kc = blocking_of(Isa::avx2).kc;  // A panel 6 x 384 floats = 9 KiB in L1
  static constexpr std::size_t mc = blocking_of(Isa::avx2).mc;  // A block in L3
  static constexpr std::size_t nc = blocking_of(Isa::avx2).nc;  // B block 384 x 480 floats = 720 KiB in L2
  using vec = V256;
  static constexpr std::size_t thin_regs = 8;  // accumulators the thin (GEMV-like) kernels may use

  static void kernel(std::size_t kc_, const float* a, const float* b, float* c, std::size_t ldc, std::size_t m,
                     std::size_t n, bool load_c, const float* bias_col, const float* bias_row, bool relu) {
    const std::size_t nv = (n + 7) / 8;
    kKernels[(m - 1) * kNv + (nv - 1)](kc_, a, b, c, ldc, n - (nv - 1) * 8, load_c, bias_col, bias_row, relu);
  }

  // One row of C from one row of A read in place (k steps 1 float apart): a batch-1 Linear's
  // input needs no panel packed around it.
  static void kernel_single_row(std::size_t kc_, const float* a, const float* b, float* c, std::size_t n, bool load_c,
                                const float* bias_col, const float* bias_row, bool relu) {
    const std::size_t nv = (n + 7) / 8;
    kSingleRowKernels[nv - 1](kc_, a, b, c, 0, n - (nv - 1) * 8, load_c, bias_col, bias_row, relu);
  }

  static void activate(float* c, std::size_t ldc, std::size_t m, std::size_t n, Activation act, float slope) {
    activate_tile<V256>(c, ldc, m, n, act, slope);
  }

  // Vector by vector along the row, as row_vector_plan says: a masked load, a permute where the
  // vector shifts, a masked store.
  static void copy_rows(const RowCopy& copy) {
    const RowCopy cp = copy;  // a local copy: the stores below cannot change it, so it stays in registers
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const auto below = [&](std::size_t n) { return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), iota); };
    for (std::size_t p = 0; p < cp.planes; ++p) {
      for (std::size_t r = 0; r < cp.rows; ++r) {
        const float* s = cp.src + p * cp.src_plane + r * cp.src_pitch;
        float* d = cp.dst + p * cp.dst_plane + r * cp.dst_pitch;
        for (std::size_t c0 = 0; c0 < cp.width; c0 += 8) {
          const RowVectorPlan v = row_vector_plan<8>(c0, cp.width, cp.lead, cp.count);
          __m256 x = v.loaded == 8 ? _mm256_loadu_ps(s + v.offset) : _mm256_maskload_ps(s + v.offset, below(v.loaded));
          if (v.shift != 0) {
            // Lane t < shift takes lane 8 - shift + t, which the load left 0 (it filled fewer lanes).
            x = _mm256_permutevar8x32_ps(x, _mm256_sub_epi32(iota, _mm256_set1_epi32(static_cast<int>(v.shift))));
          }
          if (v.stored == 8) {
            _mm256_storeu_ps(d + c0, x);
          } else {
            _mm256_maskstore_ps(d + c0, below(v.stored), x);
          }
        }
      }
    }
  }

  // 8 outputs at a time: the two rows' maxima over 16 columns, then their even and odd columns'
  // (shuffled within 128-bit lanes, then the 64-bit pieces put in order); the rest one by one.
  static void max_pool_2x2(const float* x, std::size_t pitch, float* y, std::size_t ho, std::size_t wo) {
    // math::max_pool_update lane by lane: max(v, acc) is acc where either is NaN, so a NaN v is put back.
    const auto pool_max = [](__m256 acc, __m256 v) {
      return _mm256_blendv_ps(_mm256_max_ps(v, acc), v, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    };
    const auto in_order = [](__m256 v) {
      return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(v), _MM_SHUFFLE(3, 1, 2, 0)));
    };
    for (std::size_t r = 0; r < ho; ++r) {
      const float* top = x + 2 * r * pitch;
      const float* bottom = top + pitch;
      float* out = y + r * wo;
      std::size_t c = 0;
      for (; c + 8 <= wo; c += 8) {
        const __m256 lo = pool_max(_mm256_loadu_ps(top + 2 * c), _mm256_loadu_ps(bottom + 2 * c));
        const __m256 hi = pool_max(_mm256_loadu_ps(top + 2 * c + 8), _mm256_loadu_ps(bottom + 2 * c + 8));
        const __m256 even = in_order(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)));
        const __m256 odd = in_order(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)));
        _mm256_storeu_ps(out + c, pool_max(even, odd));
      }
      max_pool_2x2_columns(top, bottom, out, c, wo);
    }
  }

  // dst[kk * R + jj] = s[jj * ld + kk] for jj < w (zero above), kk < kc, via 8x8 transposes.
  template <std::size_t R>
  static void pack_transposed(const float* s, std::size_t ld, std::size_t w, std::size_t kc_, float* dst) {
    for (std::size_t k0 = 0; k0 < kc_; k0 += 8) {
      const std::size_t kn = min_size(8, kc_ - k0);
      const __m256i kmask = V256::mask(kn);
      for (std::size_t j0 = 0; j0 < R; j0 += 8) {
        __m256 r[8];
        for (std::size_t jj = 0; jj < 8; ++jj) {
          r[jj] = j0 + jj < w ? _mm256_maskload_ps(s + (j0 + jj) * ld + k0, kmask) : _mm256_setzero_ps();
        }
        transpose8(r);
        const std::size_t lanes = min_size(8, R - j0);
        for (std::size_t t = 0; t < kn; ++t) {
          if (lanes == 8) {
            _mm256_storeu_ps(dst + (k0 + t) * R + j0, r[t]);
          } else {
            _mm256_maskstore_ps(dst + (k0 + t) * R + j0, V256::mask(lanes), r[t]);
          }
        }
      }
    }
  }
};

constexpr KernelTable kTable = make_kernel_table<Avx2>(Isa::avx2);

}  // namespace

const KernelTable& avx2_kernels() { return kTable; }

}  // namespace teeny::cpu::detail
