// AVX-512 kernels (compiled with -mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma -mavx2).
//
// Microkernel: 12 rows x 32 columns of C in 24 zmm accumulators; per k it loads two vectors of a
// packed B panel and broadcasts 12 values of a packed A panel (embedded-broadcast FMAs). A B given
// row by row (an implicit-GEMM convolution's input windows) is read in place, not packed. Zen 4 and
// Skylake-X both sustain it at close to their FMA peak. Edge tiles use the same code instantiated
// for fewer rows / vectors, with a lane mask on the last vector.
#include <immintrin.h>

#include <array>
#include <cstddef>
#include <utility>

#include "gemm_detail.hpp"

namespace teeny::cpu::detail {
namespace {

struct V512 {
  using reg = __m512;
  static constexpr std::size_t width = 16;
  static reg set1(float x) { return _mm512_set1_ps(x); }
  static reg zero() { return _mm512_setzero_ps(); }
  static reg add(reg a, reg b) { return _mm512_add_ps(a, b); }
  static reg sub(reg a, reg b) { return _mm512_sub_ps(a, b); }
  static reg mul(reg a, reg b) { return _mm512_mul_ps(a, b); }
  static reg div(reg a, reg b) { return _mm512_div_ps(a, b); }
  static reg fmadd(reg a, reg b, reg c) { return _mm512_fmadd_ps(a, b, c); }
  static reg fnmadd(reg a, reg b, reg c) { return _mm512_fnmadd_ps(a, b, c); }
  static reg max(reg a, reg b) { return _mm512_max_ps(a, b); }
  static reg min(reg a, reg b) { return _mm512_min_ps(a, b); }
  static reg abs(reg a) { return _mm512_abs_ps(a); }
  static reg neg(reg a) { return _mm512_xor_ps(a, _mm512_set1_ps(-0.0f)); }
  static reg round(reg a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static reg pow2(reg n) {
    const __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
    return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23));
  }
  static reg select_lt(reg a, reg b, reg if_less, reg otherwise) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), otherwise, if_less);
  }
  static reg copysign(reg mag, reg sign) {
    const __m512 sign_bit = _mm512_set1_ps(-0.0f);
    return _mm512_or_ps(_mm512_andnot_ps(sign_bit, mag), _mm512_and_ps(sign_bit, sign));
  }
  static float hsum(reg v) { return _mm512_reduce_add_ps(v); }
  static reg loadu(const float* p) { return _mm512_loadu_ps(p); }
  static void storeu(float* p, reg v) { _mm512_storeu_ps(p, v); }
  static __mmask16 mask(std::size_t n) { return static_cast<__mmask16>((1u << n) - 1u); }
  static reg load_partial(const float* p, std::size_t n) { return _mm512_maskz_loadu_ps(mask(n), p); }
  static void store_partial(float* p, std::size_t n, reg v) { _mm512_mask_storeu_ps(p, mask(n), v); }
};

constexpr int kMr = static_cast<int>(blocking_of(Isa::avx512).mr);
constexpr int kNv = static_cast<int>(blocking_of(Isa::avx512).nr / 16);
constexpr std::size_t kNr = std::size_t{kNv} * 16;
static_assert(kNr == blocking_of(Isa::avx512).nr, "nr is a whole number of vectors");

// Where the microkernel reads B's k-th row of NV vectors: a packed panel (kNr floats per k, zero
// padded), or a row table (row k at base + offsets[k], unpadded: the last vector is masked so that
// nothing past the row's end is read).
struct PanelB {
  const float* b;
  const float* row(std::size_t k) const { return b + k * kNr; }
  static constexpr bool masked = false;
};
struct RowsB {
  const float* base;
  const std::ptrdiff_t* offsets;
  const float* row(std::size_t k) const { return base + offsets[k]; }
  static constexpr bool masked = true;
};

// acc += one k step: NV vectors of B's row times M broadcasts of the A panel.
template <int M, int NV, class B>
inline void fma_step(__m512 (&acc)[M][NV], const float* a, const float* b, __mmask16 tail) {
  __m512 bv[NV];
#pragma GCC unroll 4
  for (std::ptrdiff_t v = 0; v < NV; ++v) {
    bv[v] = B::masked && v == NV - 1 ? _mm512_maskz_loadu_ps(tail, b + 16 * v) : _mm512_loadu_ps(b + 16 * v);
  }
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) {
    const __m512 av = _mm512_set1_ps(a[i]);
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_fmadd_ps(av, bv[v], acc[i][v]);
  }
}

// How far ahead (floats) the kernels reading a packed A panel fetch it into L2. With one or two
// vectors of B columns, A is the stream (a batch-1 layer's weights, read once from memory at 4-8
// bytes per cycle of FMAs), and the hardware's prefetchers alone left the kernel waiting on it:
// ResNet-18 b1 -3% on Zen 5 (one-vector kernels), -2-3% more on a Xeon (two-vector kernels too;
// see bench/results/2026-12-03-zen5-models-e6413b9.md and 2026-12-03-xeon-models-2a9aa22.md).
// Past a panel's end this reaches the next panel.
constexpr std::ptrdiff_t kPrefetchA = 4096;

// C[0:M, 0:16*NV] (+)= A panel x B over kc, then bias, then ReLU if asked; the last vector is
// masked by `tail`. A's k steps are AS floats apart: a packed panel's kMr, or 1 for a single row
// of A read in place.
template <int M, int NV, class B, int AS = kMr>
void kernel_mn(std::size_t kc, const float* a, B b, float* c, std::size_t ldc, __mmask16 tail, bool load_c,
               const float* bias_col, const float* bias_row, bool relu) {
  // Small tiles have too few accumulators to cover the FMA latency (the M = 1 GEMV-like case);
  // they interleave S independent sets over consecutive k and add them up at the end.
  constexpr int S = M * NV >= 8 ? 1 : M * NV >= 4 ? 2 : 4;
  __m512 acc[S][M][NV];
#pragma GCC unroll 4
  for (int s = 0; s < S; ++s) {
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) {
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[s][i][v] = _mm512_setzero_ps();
    }
  }
  // C's rows are ldc apart: fetching them now, while the k loop runs, hides their misses (most
  // often to L3) that the loads and stores after the loop would otherwise wait for.
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) {
#pragma GCC unroll 4
    for (std::ptrdiff_t v = 0; v < NV; ++v) {
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 16 * v), _MM_HINT_T0);
    }
  }
  std::size_t k = 0;
  if constexpr (S > 1) {
    for (; k + S <= kc; k += S) {
#pragma GCC unroll 4
      for (std::ptrdiff_t s = 0; s < S; ++s) fma_step<M, NV, B>(acc[s], a + s * AS, b.row(k + s), tail);
      a += std::ptrdiff_t{S} * AS;
    }
  }
  // Four k steps per iteration: the loop's own instructions then cost next to nothing.
  for (; k + 4 <= kc; k += 4) {
    if constexpr (AS == kMr) {
      for (int l = 0; l < 4 * AS; l += 16) {
        _mm_prefetch(reinterpret_cast<const char*>(a + kPrefetchA + l), _MM_HINT_T1);
      }
    }
#pragma GCC unroll 4
    for (std::ptrdiff_t u = 0; u < 4; ++u) fma_step<M, NV, B>(acc[0], a + u * AS, b.row(k + u), tail);
    a += std::ptrdiff_t{4} * AS;
  }
  for (; k < kc; ++k) {
    fma_step<M, NV, B>(acc[0], a, b.row(k), tail);
    a += AS;
  }
#pragma GCC unroll 4
  for (int s = 1; s < S; ++s) {
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) {
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[0][i][v] = _mm512_add_ps(acc[0][i][v], acc[s][i][v]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) {
    float* ci = c + i * ldc;
#pragma GCC unroll 4
    for (std::ptrdiff_t v = 0; v < NV; ++v) {
      const __mmask16 mk = v == NV - 1 ? tail : static_cast<__mmask16>(0xffff);
      __m512 x = acc[0][i][v];
      if (load_c) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mk, ci + 16 * v));
      if (bias_col != nullptr) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mk, bias_col + 16 * v));
      if (bias_row != nullptr) x = _mm512_add_ps(x, _mm512_set1_ps(bias_row[i]));
      if (relu) x = _mm512_max_ps(_mm512_setzero_ps(), x);  // max(0, NaN) is NaN, as in PyTorch
      _mm512_mask_storeu_ps(ci + 16 * v, mk, x);
    }
  }
}

template <class B>
using KernelFn = void (*)(std::size_t, const float*, B, float*, std::size_t, __mmask16, bool, const float*,
                          const float*, bool);

template <class B, std::size_t... I>
constexpr std::array<KernelFn<B>, sizeof...(I)> make_kernels(std::index_sequence<I...>) {
  return {&kernel_mn<static_cast<int>(I) / kNv + 1, static_cast<int>(I) % kNv + 1, B>...};
}
constexpr auto kKernels = make_kernels<PanelB>(std::make_index_sequence<std::size_t{kMr} * kNv>{});
constexpr auto kRowKernels = make_kernels<RowsB>(std::make_index_sequence<std::size_t{kMr} * kNv>{});
template <std::size_t... V>
constexpr std::array<KernelFn<PanelB>, sizeof...(V)> make_single_row_kernels(std::index_sequence<V...>) {
  return {&kernel_mn<1, static_cast<int>(V) + 1, PanelB, 1>...};
}
constexpr auto kSingleRowKernels = make_single_row_kernels(std::make_index_sequence<std::size_t{kNv}>{});

// In-register 16x16 transpose: r[i] lane j becomes r[j] lane i.
inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xee);
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xee);
  }
  for (int i = 0; i < 16; i += 8) {
    for (int j = 0; j < 4; ++j) {
      t[i + j] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0x88);
      t[i + j + 4] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], 0xdd);
    }
  }
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88);
    r[j + 8] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0xdd);
  }
}

// M consecutive pixels of an output row (M <= 16) against up to 16 output channels
// (cpu::pixel_rows): acc[i] holds pixel i's channels, starting from their bias; per k one vector
// of weights and M broadcasts of the pixels' inputs. Stored transposed, each channel's run of M
// pixels, through a 16 x 16 transpose.
template <int M>
void pixel_tile(const PixelRows& p, const float* x, const float* w, __m512 bias, float* out, std::size_t channels) {
  __m512 acc[M];
#pragma GCC unroll 16
  for (int i = 0; i < M; ++i) acc[i] = bias;
  const std::size_t pitch = pixel_rows_pitch(p.channels);
  for (std::size_t k = 0; k < p.depth; ++k) {
    const __m512 wk = _mm512_loadu_ps(w + k * pitch);
    const float* xk = x + p.offsets[k];
#pragma GCC unroll 16
    for (int i = 0; i < M; ++i) acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(xk[i]), wk, acc[i]);
  }
  __m512 r[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) {
    // max(0, NaN) is NaN, as in PyTorch
    r[i] = i >= M ? _mm512_setzero_ps() : p.relu ? _mm512_max_ps(_mm512_setzero_ps(), acc[i]) : acc[i];
  }
  transpose16(r);
  const __mmask16 pixels = V512::mask(M);
  for (std::size_t o = 0; o < channels; ++o) _mm512_mask_storeu_ps(out + o * p.ldo, pixels, r[o]);
}

using PixelTileFn = void (*)(const PixelRows&, const float*, const float*, __m512, float*, std::size_t);
template <std::size_t... I>
constexpr std::array<PixelTileFn, sizeof...(I)> make_pixel_tiles(std::index_sequence<I...>) {
  return {&pixel_tile<static_cast<int>(I) + 1>...};
}
constexpr auto kPixelTiles = make_pixel_tiles(std::make_index_sequence<16>{});

struct Avx512 {
  static constexpr std::size_t mr = kMr;
  static constexpr std::size_t nr = kNr;
  static constexpr std::size_t kc = blocking_of(Isa::avx512).kc;  // A panel 12 x 384 floats = 18 KiB stays in L1
  static constexpr std::size_t mc =
      blocking_of(Isa::avx512).mc;  // A block (3.4 MiB) lives in L3, packed once per K block
  static constexpr std::size_t nc = blocking_of(Isa::avx512).nc;  // B block 384 x 480 floats = 720 KiB stays in L2
  using vec = V512;
  static constexpr std::size_t thin_regs = 16;  // accumulators the thin (GEMV-like) kernels may use

  static void kernel(std::size_t kc_, const float* a, const float* b, float* c, std::size_t ldc, std::size_t m,
                     std::size_t n, bool load_c, const float* bias_col, const float* bias_row, bool relu) {
    const std::size_t nv = (n + 15) / 16;
    const __mmask16 tail = V512::mask(n - (nv - 1) * 16);
    kKernels[(m - 1) * kNv + (nv - 1)](kc_, a, PanelB{b}, c, ldc, tail, load_c, bias_col, bias_row, relu);
  }

  // One row of C from one row of A read in place (k steps 1 float apart): a batch-1 Linear's
  // input needs no 12-row panel packed around it.
  static void kernel_single_row(std::size_t kc_, const float* a, const float* b, float* c, std::size_t n, bool load_c,
                                const float* bias_col, const float* bias_row, bool relu) {
    const std::size_t nv = (n + 15) / 16;
    const __mmask16 tail = V512::mask(n - (nv - 1) * 16);
    kSingleRowKernels[nv - 1](kc_, a, PanelB{b}, c, 0, tail, load_c, bias_col, bias_row, relu);
  }

  // Same with B's rows read in place (Operand::row_offsets): row k at b + rows[k], n floats.
  static void kernel_rows(std::size_t kc_, const float* a, const float* b, const std::ptrdiff_t* rows, float* c,
                          std::size_t ldc, std::size_t m, std::size_t n, bool load_c, const float* bias_col,
                          const float* bias_row, bool relu) {
    const std::size_t nv = (n + 15) / 16;
    const __mmask16 tail = V512::mask(n - (nv - 1) * 16);
    kRowKernels[(m - 1) * kNv + (nv - 1)](kc_, a, RowsB{b, rows}, c, ldc, tail, load_c, bias_col, bias_row, relu);
  }

  static void activate(float* c, std::size_t ldc, std::size_t m, std::size_t n, Activation act, float slope) {
    activate_tile<V512>(c, ldc, m, n, act, slope);
  }

  // One vector of a padded row (row_vector_plan's) with its lane counts as masks: a masked load,
  // a permute where it shifts, a masked store.
  struct RowVector {
    std::size_t offset = 0;
    __mmask16 load = 0, store = 0;
    unsigned shift = 0;
  };
  static RowVector row_vector(std::size_t c0, std::size_t width, std::size_t lead, std::size_t count) {
    const RowVectorPlan p = row_vector_plan<16>(c0, width, lead, count);
    return {p.offset, V512::mask(p.loaded), V512::mask(p.stored), static_cast<unsigned>(p.shift)};
  }
  static void put_row_vector(const RowVector& v, const float* s, float* d) {
    __m512 x = _mm512_maskz_loadu_ps(v.load, s + v.offset);
    if (v.shift != 0) {
      const __m512i idx = _mm512_sub_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32(static_cast<int>(v.shift)));
      // Lane t < shift takes lane 16 - shift + t, which the load left 0 (it filled fewer lanes).
      x = _mm512_permutexvar_ps(idx, x);
    }
    _mm512_mask_storeu_ps(d, v.store, x);
  }
  // Rows of one or two vectors (LeNet's) keep their masks in registers across the rows.
  template <std::size_t NV>
  static void copy_short_rows(const RowCopy& copy) {
    const RowCopy cp = copy;  // a local copy: the stores below cannot change it, so it stays in registers
    RowVector v[NV];
    for (std::size_t i = 0; i < NV; ++i) v[i] = row_vector(16 * i, cp.width, cp.lead, cp.count);
    for (std::size_t p = 0; p < cp.planes; ++p) {
      const float* s = cp.src + p * cp.src_plane;
      float* d = cp.dst + p * cp.dst_plane;
      for (std::size_t r = 0; r < cp.rows; ++r) {
        for (std::size_t i = 0; i < NV; ++i) put_row_vector(v[i], s + r * cp.src_pitch, d + r * cp.dst_pitch + 16 * i);
      }
    }
  }
  static void copy_rows(const RowCopy& copy) {
    const RowCopy cp = copy;
    if (cp.width <= 16) return copy_short_rows<1>(cp);
    if (cp.width <= 32) return copy_short_rows<2>(cp);
    for (std::size_t p = 0; p < cp.planes; ++p) {
      for (std::size_t r = 0; r < cp.rows; ++r) {
        for (std::size_t c0 = 0; c0 < cp.width; c0 += 16) {
          put_row_vector(row_vector(c0, cp.width, cp.lead, cp.count), cp.src + p * cp.src_plane + r * cp.src_pitch,
                         cp.dst + p * cp.dst_plane + r * cp.dst_pitch + c0);
        }
      }
    }
  }

  // Channels 16 at a time; each output row in runs of at most 16 pixels, as even as they go (a
  // 28-pixel row: two of 14).
  static void pixel_rows(const PixelRows& p) {
    const std::size_t runs = (p.width + 15) / 16;
    for (std::size_t c0 = 0; c0 < p.channels; c0 += 16) {
      const std::size_t channels = min_size(16, p.channels - c0);
      const __m512 bias =
          p.bias != nullptr ? _mm512_maskz_loadu_ps(V512::mask(channels), p.bias + c0) : _mm512_setzero_ps();
      for (std::size_t r = 0; r < p.rows; ++r) {
        for (std::size_t run = 0; run < runs; ++run) {
          const std::size_t i0 = p.width * run / runs, i1 = p.width * (run + 1) / runs;
          kPixelTiles[i1 - i0 - 1](p, p.x + r * p.x_pitch + i0, p.weights + c0, bias,
                                   p.out + c0 * p.ldo + r * p.out_pitch + i0, channels);
        }
      }
    }
  }

  // 16 outputs at a time: the two rows' maxima over 32 columns, then their even and odd columns'.
  static void max_pool_2x2(const float* x, std::size_t pitch, float* y, std::size_t ho, std::size_t wo) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    // math::max_pool_update lane by lane: max(v, acc) is acc where either is NaN, so a NaN v is put back.
    const auto pool_max = [](__m512 acc, __m512 v) {
      return _mm512_mask_mov_ps(_mm512_max_ps(v, acc), _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), v);
    };
    // 16 outputs from 32 columns of each row; the last group masked to what is left.
    const auto pool16 = [&](const float* top, const float* bottom, float* out, __mmask16 lo_mask, __mmask16 hi_mask,
                            __mmask16 out_mask) {
      const __m512 lo = pool_max(_mm512_maskz_loadu_ps(lo_mask, top), _mm512_maskz_loadu_ps(lo_mask, bottom));
      const __m512 hi = pool_max(_mm512_maskz_loadu_ps(hi_mask, top + 16), _mm512_maskz_loadu_ps(hi_mask, bottom + 16));
      const __m512 pooled = pool_max(_mm512_permutex2var_ps(lo, even, hi), _mm512_permutex2var_ps(lo, odd, hi));
      _mm512_mask_storeu_ps(out, out_mask, pooled);
    };
    const std::size_t full = wo / 16 * 16, n = wo - full;
    const __mmask16 all = V512::mask(16);
    const __mmask16 lo_tail = V512::mask(min_size(16, 2 * n)), hi_tail = V512::mask(2 * n > 16 ? 2 * n - 16 : 0);
    for (std::size_t r = 0; r < ho; ++r) {
      const float* top = x + 2 * r * pitch;
      const float* bottom = top + pitch;
      float* out = y + r * wo;
      for (std::size_t c = 0; c < full; c += 16) pool16(top + 2 * c, bottom + 2 * c, out + c, all, all, all);
      if (n != 0) pool16(top + 2 * full, bottom + 2 * full, out + full, lo_tail, hi_tail, V512::mask(n));
    }
  }

  // 16 outputs at a time: the three rows' maxima over the 33 columns they read, then the max of
  // each output's even, odd and next even column.
  static void max_pool_3x3_stride2(const float* r0, const float* r1, const float* r2, float* out, std::size_t begin,
                                   std::size_t end, std::ptrdiff_t offset) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    const __m512i next = _mm512_add_epi32(even, _mm512_set1_epi32(2));  // lane 15's (32) is set apart
    const auto pool_max = [](__m512 acc, __m512 v) {                    // as in max_pool_2x2
      return _mm512_mask_mov_ps(_mm512_max_ps(v, acc), _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), v);
    };
    const auto column_max = [&](std::ptrdiff_t c, __mmask16 m) {
      return pool_max(pool_max(_mm512_maskz_loadu_ps(m, r0 + c), _mm512_maskz_loadu_ps(m, r1 + c)),
                      _mm512_maskz_loadu_ps(m, r2 + c));
    };
    for (std::size_t o = begin; o < end; o += 16) {
      const std::size_t n = min_size(16, end - o);
      const std::size_t columns = 2 * n + 1;  // read from column c
      const std::ptrdiff_t c = 2 * static_cast<std::ptrdiff_t>(o) + offset;
      const __m512 lo = column_max(c, V512::mask(min_size(16, columns)));
      const __m512 hi = column_max(c + 16, V512::mask(columns > 16 ? min_size(16, columns - 16) : 0));
      __m512 third = _mm512_permutex2var_ps(lo, next, hi);
      if (columns > 32) {
        const float last = math::max_pool_update(math::max_pool_update(r0[c + 32], r1[c + 32]), r2[c + 32]);
        third = _mm512_mask_mov_ps(third, static_cast<__mmask16>(0x8000), _mm512_set1_ps(last));
      }
      const __m512 pooled =
          pool_max(pool_max(_mm512_permutex2var_ps(lo, even, hi), _mm512_permutex2var_ps(lo, odd, hi)), third);
      _mm512_mask_storeu_ps(out + o, V512::mask(n), pooled);
    }
  }

  // dst[kk * R + jj] = s[jj * ld + kk] for jj < w (zero above), kk < kc, via 16x16 transposes.
  template <std::size_t R>
  static void pack_transposed(const float* s, std::size_t ld, std::size_t w, std::size_t kc_, float* dst) {
    for (std::size_t k0 = 0; k0 < kc_; k0 += 16) {
      const std::size_t kn = min_size(16, kc_ - k0);
      const __mmask16 kmask = V512::mask(kn);
      for (std::size_t j0 = 0; j0 < R; j0 += 16) {
        __m512 r[16];
        for (std::size_t jj = 0; jj < 16; ++jj) {
          r[jj] = j0 + jj < w ? _mm512_maskz_loadu_ps(kmask, s + (j0 + jj) * ld + k0) : _mm512_setzero_ps();
        }
        transpose16(r);
        const std::size_t lanes = min_size(16, R - j0);
        for (std::size_t t = 0; t < kn; ++t) {
          if (lanes == 16) {
            _mm512_storeu_ps(dst + (k0 + t) * R + j0, r[t]);
          } else {
            _mm512_mask_storeu_ps(dst + (k0 + t) * R + j0, V512::mask(lanes), r[t]);
          }
        }
      }
    }
  }
};

constexpr KernelTable kTable = make_kernel_table<Avx512>(Isa::avx512);

}  // namespace

const KernelTable& avx512_kernels() { return kTable; }

}  // namespace teeny::cpu::detail
