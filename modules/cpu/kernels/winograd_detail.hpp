// The Winograd input and output transforms, written once over the vector width L (tiles per
// vector) and the tile size M (outputs per tile side: 2 or 4) with the compilers' generic vector
// types, and compiled per instruction set (winograd*.cpp), like the GEMM's kernels. See
// winograd.hpp.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "gemm.hpp"  // copy_rows
#include "winograd.hpp"

namespace teeny::cpu::winograd::detail {

// One instruction set's transforms (winograd.cpp picks the active one's).
struct Transforms {
  void (*input)(const float*, std::int64_t, const Plane&, std::int64_t, std::int64_t, const Points&, float*);
  void (*output)(const Points&, std::int64_t, const Plane&, std::int64_t, std::int64_t, const OutputEpilogue&, float*);
  std::int64_t lanes;
};
const Transforms& avx2_transforms();
const Transforms& avx512_transforms();

template <class Lanes>
constexpr Transforms transforms_of() {
  return {&Lanes::input, &Lanes::output, Lanes::kLanes};
}

template <int L>
struct Lanes {
  static_assert(L >= 4 && L % 4 == 0 && L <= kMaxLanes, "whole groups of four tiles, at most kMaxLanes");
  static constexpr std::int64_t kLanes = L;
  using V = float __attribute__((vector_size(L * sizeof(float))));
  using Half = float __attribute__((vector_size(L / 2 * sizeof(float))));

  static V load(const float* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static void store(float* p, V v) { std::memcpy(p, &v, sizeof v); }
  static V splat(float x) {
    V v;
    for (int l = 0; l < L; ++l) v[l] = x;
    return v;
  }

  // Elements J, J + 2, J + 4, ... of the 2L floats in a, b; J, J + 4, ... of the 4L in a0..a3.
  template <int J, std::size_t... I>
  static V every_second(V a, V b, std::index_sequence<I...>) {
    return __builtin_shufflevector(a, b, static_cast<int>(2 * I + J)...);
  }
  template <int J, std::size_t... I>
  static Half every_fourth(V a, V b, std::index_sequence<I...>) {
    return __builtin_shufflevector(a, b, static_cast<int>(4 * I + J)...);
  }
  template <std::size_t... I>
  static V join(Half a, Half b, std::index_sequence<I...>) {
    return __builtin_shufflevector(a, b, static_cast<int>(I)...);
  }
  template <int J>
  static V column(V a0, V a1, V a2, V a3) {
    constexpr auto half = std::make_index_sequence<L / 2>{};
    return join(every_fourth<J>(a0, a1, half), every_fourth<J>(a2, a3, half), std::make_index_sequence<L>{});
  }
  // v shifted down one lane, `last` in the top lane: elements M + j, 2M + j, ... from column j.
  template <std::size_t... I>
  static V next(V v, V last, std::index_sequence<I...>) {
    return __builtin_shufflevector(v, last, static_cast<int>(I + 1)...);
  }

  // The M + 2 patch columns of row `p` (M L + 2 floats): x[j][l] = p[M l + j].
  template <int M>
  static void patch_row(const float* p, V (&x)[M + 2]) {
    constexpr auto lanes = std::make_index_sequence<L>{};
    if constexpr (M == 2) {
      const V a0 = load(p), a1 = load(p + L);
      x[0] = every_second<0>(a0, a1, lanes);
      x[1] = every_second<1>(a0, a1, lanes);
    } else {
      const V a0 = load(p), a1 = load(p + L), a2 = load(p + std::ptrdiff_t{2} * L),
              a3 = load(p + std::ptrdiff_t{3} * L);
      x[0] = column<0>(a0, a1, a2, a3);
      x[1] = column<1>(a0, a1, a2, a3);
      x[2] = column<2>(a0, a1, a2, a3);
      x[3] = column<3>(a0, a1, a2, a3);
    }
    x[M] = next(x[0], splat(p[std::ptrdiff_t{M} * L]), lanes);
    x[M + 1] = next(x[1], splat(p[std::ptrdiff_t{M} * L + 1]), lanes);
  }

  // The interleaving of y0..y(M-1) (element M l + b is y_b[l]) as M vectors.
  template <int Offset, std::size_t... I>
  static V zip2(V a, V b, std::index_sequence<I...>) {  // a[o], b[o], a[o + 1], b[o + 1], ...
    return __builtin_shufflevector(a, b, static_cast<int>((I % 2) * L + Offset + I / 2)...);
  }
  template <int Offset, std::size_t... I>
  static V zip4(V p01, V p23, std::index_sequence<I...>) {  // pairs of p01, p23 from Offset
    return __builtin_shufflevector(p01, p23, static_cast<int>((I % 4 < 2 ? 0 : L) + Offset + 2 * (I / 4) + I % 2)...);
  }
  template <int M>
  static void interleave(const V (&y)[M], V (&out)[M]) {
    constexpr auto lanes = std::make_index_sequence<L>{};
    const V p01_lo = zip2<0>(y[0], y[1], lanes), p01_hi = zip2<L / 2>(y[0], y[1], lanes);
    if constexpr (M == 2) {
      out[0] = p01_lo;
      out[1] = p01_hi;
    } else {
      const V p23_lo = zip2<0>(y[2], y[3], lanes), p23_hi = zip2<L / 2>(y[2], y[3], lanes);
      out[0] = zip4<0>(p01_lo, p23_lo, lanes);
      out[1] = zip4<L / 2>(p01_lo, p23_lo, lanes);
      out[2] = zip4<0>(p01_hi, p23_hi, lanes);
      out[3] = zip4<L / 2>(p01_hi, p23_hi, lanes);
    }
  }

  // The first n (0 < n <= L) floats at p: masked where the instruction set has masked moves (the
  // lanes past n are then neither read nor written), else through a copy of n floats.
  static V load_first(const float* p, std::int64_t n) {
    if (n == L) return load(p);
#if defined(__AVX512F__)
    if constexpr (L == 16) return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1u), p);
#endif
#if defined(__AVX2__)
    if constexpr (L == 8) return _mm256_maskload_ps(p, lanes_below(n));
#endif
    V v{};
    std::memcpy(&v, p, static_cast<std::size_t>(n) * sizeof(float));
    return v;
  }
  static void store_first(float* p, V v, std::int64_t n) {
    if (n == L) return store(p, v);
#if defined(__AVX512F__)
    if constexpr (L == 16) return _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1u), v);
#endif
#if defined(__AVX2__)
    if constexpr (L == 8) return _mm256_maskstore_ps(p, lanes_below(n), v);
#endif
    std::memcpy(p, &v, static_cast<std::size_t>(n) * sizeof(float));
  }
#if defined(__AVX2__)
  static __m256i lanes_below(std::int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
#endif

  // B^T applied to the M + 2 values of a patch row or column.
  template <int M>
  static void input_1d(const V (&d)[M + 2], V (&v)[M + 2]) {
    if constexpr (M == 2) {
      v[0] = d[0] - d[2];
      v[1] = d[1] + d[2];
      v[2] = d[2] - d[1];
      v[3] = d[1] - d[3];
    } else {
      const V d4_d2 = d[4] - d[2];
      const V d3_d1 = d[3] - d[1];
      v[0] = 4.0f * d[0] - 5.0f * d[2] + d[4];
      v[1] = d[3] + d[4] - 4.0f * (d[1] + d[2]);
      v[2] = 4.0f * (d[1] - d[2]) + d[4] - d[3];
      v[3] = 2.0f * d3_d1 + d4_d2;
      v[4] = d4_d2 - 2.0f * d3_d1;
      v[5] = 4.0f * d[1] - 5.0f * d[3] + d[5];
    }
  }

  // A^T applied to M + 2 transformed values.
  template <int M>
  static void output_1d(const V (&m)[M + 2], V (&y)[M]) {
    if constexpr (M == 2) {
      y[0] = m[0] + m[1] + m[2];
      y[1] = m[1] - m[2] - m[3];
    } else {
      const V s12 = m[1] + m[2], d12 = m[1] - m[2];
      const V s34 = m[3] + m[4], d34 = m[3] - m[4];
      y[0] = m[0] + s12 + s34;
      y[1] = d12 + 2.0f * d34;
      y[2] = s12 + 4.0f * s34;
      y[3] = d12 + 8.0f * d34 + m[5];
    }
  }

  // V of up to L tiles of a tile row: `patch` is the first one's patch in the staged rows (`width`
  // apart), `out` its first value (point xi at out + xi * point_stride). Parameters by value, so
  // that the stores (which may alias anything) do not make the compiler reload them.
  template <int M>
  static void input_tiles(const float* patch, std::int64_t width, float* out, std::int64_t point_stride) {
    constexpr int N = M + 2;
    V t[N][N];  // the patch rows transformed: (d B) per row
    for (int i = 0; i < N; ++i) {
      V d[N];
      patch_row<M>(patch + i * width, d);
      input_1d<M>(d, t[i]);
    }
    for (int k = 0; k < N; ++k) {
      V col[N];
      for (int i = 0; i < N; ++i) col[i] = t[i][k];
      V res[N];
      input_1d<M>(col, res);
      for (int a = 0; a < N; ++a) store(out + (a * N + k) * point_stride, res[a]);
    }
  }

  template <int M>
  static void input_with(const float* x, std::int64_t channels, const Plane& p, std::int64_t first, std::int64_t count,
                         const Points& v, float* staging) {
    // Each channel's rows the block reads are first copied, zero-padded, into `staging`, whole
    // rows at a time: reading them back as vectors then finds every store long done (a vector
    // load over a just-written narrower store would wait for it). A run of tiles reads M L + 2
    // floats from its first tile's patch whatever its length: past the run, the next rows or,
    // after the last row, zeros, in lanes whose values are overwritten or not used.
    const std::int64_t r0 = first / p.tiles_w;
    const std::int64_t rows = M * ((first + count - 1) / p.tiles_w - r0) + M + 2;
    const std::int64_t width = staged_row_floats(p);
    // Staged row i is input row ih0 + i; rows [top, bottom) are inside the plane, and their
    // columns [lead, end) inside it too. The rows outside are zeros for every channel.
    const std::int64_t ih0 = M * r0 - p.pad_h;
    const std::int64_t top = std::clamp<std::int64_t>(-ih0, 0, rows);
    const std::int64_t bottom = std::clamp<std::int64_t>(p.h - ih0, top, rows);
    const std::int64_t lead = std::clamp<std::int64_t>(p.pad_w, 0, width);
    const std::int64_t end = std::clamp<std::int64_t>(p.w + p.pad_w, lead, width);
    std::fill(staging, staging + top * width, 0.0f);
    std::fill(staging + bottom * width, staging + rows * width + std::int64_t{M} * L, 0.0f);
    const bool wide = width > 32;  // a memcpy per row (copy_rows is for short ones: measured slower)
    if (wide) {
      // The margins, once: the copies below write only columns [lead, end) of each row.
      for (std::int64_t i = top; i < bottom; ++i) {
        std::fill(staging + i * width, staging + i * width + lead, 0.0f);
        std::fill(staging + i * width + end, staging + (i + 1) * width, 0.0f);
      }
    }
    for (std::int64_t c = 0; c < channels; ++c) {
      const float* in = x + c * p.h * p.w;
      if (wide) {
        for (std::int64_t i = top; i < bottom; ++i) {
          std::memcpy(staging + i * width + lead, in + (ih0 + i) * p.w + (lead - p.pad_w),
                      static_cast<std::size_t>(end - lead) * sizeof(float));
        }
      } else if (bottom > top) {
        RowCopy copy;
        copy.src = in + (ih0 + top) * p.w + (lead - p.pad_w);
        copy.src_pitch = static_cast<std::size_t>(p.w);
        copy.dst = staging + top * width;
        copy.dst_pitch = static_cast<std::size_t>(width);
        copy.rows = static_cast<std::size_t>(bottom - top);
        copy.width = static_cast<std::size_t>(width);
        copy.lead = static_cast<std::size_t>(lead);
        copy.count = static_cast<std::size_t>(end - lead);
        copy_rows(copy);
      }
      // Runs of up to L tiles, each within one tile row.
      for (std::int64_t t = first; t < first + count;) {
        const std::int64_t r = t / p.tiles_w;
        const std::int64_t q = t % p.tiles_w;
        input_tiles<M>(staging + M * ((r - r0) * width + q), width, v.data + c * v.row_stride + (t - first),
                       v.point_stride);
        t += std::min<std::int64_t>({L, p.tiles_w - q, first + count - t});
      }
    }
  }

  static void input(const float* x, std::int64_t channels, const Plane& p, std::int64_t first, std::int64_t count,
                    const Points& v, float* staging) {
    if (count <= 0) return;
    if (p.m == 2) return input_with<2>(x, channels, p, first, count, v, staging);
    input_with<4>(x, channels, p, first, count, v, staging);
  }

  // Outputs of up to L tiles of a tile row for one channel: `in` is the first tile's M value
  // (point xi at in + xi * point_stride), `dst` its first output in y (rows `pitch` apart, `rows`
  // and `width` of them inside the output), `residual` the same place in the residual or null.
  template <int M>
  static void output_tiles(const float* in, std::int64_t point_stride, float bias, bool relu, float* dst,
                           const float* residual, std::int64_t pitch, std::int64_t rows, std::int64_t width) {
    constexpr int N = M + 2;
    V s[M][N];  // A^T down each column of the transformed tile
    for (int k = 0; k < N; ++k) {
      V col[N];
      for (int i = 0; i < N; ++i) col[i] = load(in + (i * N + k) * point_stride);
      V res[M];
      output_1d<M>(col, res);
      for (int a = 0; a < M; ++a) s[a][k] = res[a];
    }
    const V b = splat(bias);
    const bool relu_now = relu && residual == nullptr;  // with a residual, after adding it
    for (std::int64_t a = 0; a < rows; ++a) {
      V row[M];
      output_1d<M>(s[a], row);
      for (V& value : row) {
        value += b;
        if (relu_now) value = value < 0.0f ? 0.0f : value;  // NaN stays NaN, as in PyTorch
      }
      V outs[M];  // the row's outputs in order; the first `width` are inside the output
      interleave<M>(row, outs);
      float* out = dst + a * pitch;
      const float* res = residual != nullptr ? residual + a * pitch : nullptr;
      for (std::int64_t i = 0; i < M && i * L < width; ++i) {
        const std::int64_t n = std::min<std::int64_t>(L, width - i * L);
        V value = outs[i];
        if (res != nullptr) {
          value += load_first(res + i * L, n);
          if (relu) value = value < 0.0f ? 0.0f : value;  // std::max(value, 0): NaN stays NaN
        }
        store_first(out + i * L, value, n);
      }
    }
  }

  template <int M>
  static void output_with(const Points& m, std::int64_t outs, const Plane& p, std::int64_t first, std::int64_t count,
                          const OutputEpilogue& e, float* y) {
    for (std::int64_t o = 0; o < outs; ++o) {
      float* out = y + o * p.ho * p.wo;
      const float* residual = e.residual != nullptr ? e.residual + o * p.ho * p.wo : nullptr;
      const float bias = e.bias != nullptr ? e.bias[o] : 0.0f;
      for (std::int64_t t = first; t < first + count;) {
        const std::int64_t r = t / p.tiles_w;
        const std::int64_t q = t % p.tiles_w;
        const std::int64_t n = std::min<std::int64_t>({L, p.tiles_w - q, first + count - t});
        const std::int64_t at = M * (r * p.wo + q);  // the first tile's first output
        output_tiles<M>(m.data + o * m.row_stride + (t - first), m.point_stride, bias, e.relu, out + at,
                        residual != nullptr ? residual + at : nullptr, p.wo, std::min<std::int64_t>(M, p.ho - M * r),
                        std::min(M * n, p.wo - M * q));
        t += n;
      }
    }
  }

  static void output(const Points& m, std::int64_t outs, const Plane& p, std::int64_t first, std::int64_t count,
                     const OutputEpilogue& e, float* y) {
    if (p.m == 2) return output_with<2>(m, outs, p, first, count, e, y);
    output_with<4>(m, outs, p, first, count, e, y);
  }
};

}  // namespace teeny::cpu::winograd::detail
