// The GEMM's thin path (gemm_detail.hpp's internals, one concern a file): products with at most
// kThinMax rows or columns of C in a tile and both operands raw, as dot products along k or as row
// updates, without packing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "gemm_detail.hpp"

namespace teeny::cpu::detail {
namespace {  // internal linkage, per ISA unit: see gemm_detail.hpp

// ---- Dot-product path for thin tiles ----------------------------------------------------------

// out(r, c) (+)= dot(x row r, y row c) over k, for R x C outputs, plus bias(r, c).
template <class V, std::size_t R, std::size_t C>
void dot_block(const float* x, std::size_t ldx, const float* y, std::size_t ldy, std::size_t k, float* out,
               std::size_t out_r, std::size_t out_c, bool load_c, const float* bias, std::size_t bias_r,
               std::size_t bias_c) {
  typename V::reg acc[R][C];
  for (std::size_t r = 0; r < R; ++r) {
    for (std::size_t c = 0; c < C; ++c) acc[r][c] = V::zero();
  }
  std::size_t kk = 0;
  for (; kk + V::width <= k; kk += V::width) {
    typename V::reg yv[C];
    for (std::size_t c = 0; c < C; ++c) yv[c] = V::loadu(y + c * ldy + kk);
    for (std::size_t r = 0; r < R; ++r) {
      const typename V::reg xv = V::loadu(x + r * ldx + kk);
      for (std::size_t c = 0; c < C; ++c) acc[r][c] = V::fmadd(xv, yv[c], acc[r][c]);
    }
  }
  if (kk < k) {
    typename V::reg yv[C];
    for (std::size_t c = 0; c < C; ++c) yv[c] = V::load_partial(y + c * ldy + kk, k - kk);
    for (std::size_t r = 0; r < R; ++r) {
      const typename V::reg xv = V::load_partial(x + r * ldx + kk, k - kk);
      for (std::size_t c = 0; c < C; ++c) acc[r][c] = V::fmadd(xv, yv[c], acc[r][c]);
    }
  }
  for (std::size_t r = 0; r < R; ++r) {
    for (std::size_t c = 0; c < C; ++c) {
      float* o = out + r * out_r + c * out_c;
      float v = V::hsum(acc[r][c]);
      if (load_c) v += *o;
      if (bias != nullptr) v += bias[r * bias_r + c * bias_c];
      *o = v;
    }
  }
}

template <class V, std::size_t R, std::size_t C>
void dot_rows(const float* x, std::size_t ldx, const float* y, std::size_t ldy, std::size_t k, std::size_t ny,
              float* out, std::size_t out_r, std::size_t out_c, bool load_c, const float* bias, std::size_t bias_r,
              std::size_t bias_c) {
  std::size_t c = 0;
  for (; c + C <= ny; c += C) {
    dot_block<V, R, C>(x, ldx, y + c * ldy, ldy, k, out + c * out_c, out_r, out_c, load_c,
                       bias != nullptr ? bias + c * bias_c : nullptr, bias_r, bias_c);
  }
  for (; c < ny; ++c) {
    dot_block<V, R, 1>(x, ldx, y + c * ldy, ldy, k, out + c * out_c, out_r, out_c, load_c,
                       bias != nullptr ? bias + c * bias_c : nullptr, bias_r, bias_c);
  }
}

// Calls f(std::integral_constant<std::size_t, n>{}) for a runtime n in [1, kThinMax].
template <std::size_t R = 1, class F>
void with_thin_rows(std::size_t n, F&& f) {
  if constexpr (R < kThinMax) {
    if (n > R) {
      with_thin_rows<R + 1>(n, f);
      return;
    }
  }
  f(std::integral_constant<std::size_t, R>{});
}

// Rows of the wide operand handled together by the thin kernels for R thin rows: as many as the
// ISA's register budget (T::thin_regs accumulators / broadcasts) allows, 1 to 4.
template <class T>
constexpr std::size_t thin_width(std::size_t r) {
  const std::size_t w = T::thin_regs / r;
  return w < 1 ? 1 : w > 4 ? 4 : w;
}

template <class V, std::size_t R, std::size_t U>
void axpy_rows_chunk(const float* x, std::size_t ldx, const float* y, std::size_t ldy, std::size_t k, std::size_t nl,
                     float* o, std::size_t ldo) {
  // o[r][0:nl] += sum over k of x[r][k] * y[k][0:nl], U rows of y per pass over o.
  std::size_t kk = 0;
  for (; kk + U <= k; kk += U) {
    typename V::reg xs[R][U];
    for (std::size_t r = 0; r < R; ++r) {
      for (std::size_t u = 0; u < U; ++u) xs[r][u] = V::set1(x[r * ldx + kk + u]);
    }
    const float* yk = y + kk * ldy;
    std::size_t l = 0;
    for (; l + V::width <= nl; l += V::width) {
      typename V::reg yv[U];
      for (std::size_t u = 0; u < U; ++u) yv[u] = V::loadu(yk + u * ldy + l);
      for (std::size_t r = 0; r < R; ++r) {
        typename V::reg ov = V::loadu(o + r * ldo + l);
        for (std::size_t u = 0; u < U; ++u) ov = V::fmadd(xs[r][u], yv[u], ov);
        V::storeu(o + r * ldo + l, ov);
      }
    }
    if (l < nl) {
      typename V::reg yv[U];
      for (std::size_t u = 0; u < U; ++u) yv[u] = V::load_partial(yk + u * ldy + l, nl - l);
      for (std::size_t r = 0; r < R; ++r) {
        typename V::reg ov = V::load_partial(o + r * ldo + l, nl - l);
        for (std::size_t u = 0; u < U; ++u) ov = V::fmadd(xs[r][u], yv[u], ov);
        V::store_partial(o + r * ldo + l, nl - l, ov);
      }
    }
  }
  if (kk < k) axpy_rows_chunk<V, R, 1>(x + kk, ldx, y + kk * ldy, ldy, k - kk, nl, o, ldo);
}

// A thin tile (thin_path(...) != none). x: the thin operand's rows/columns along k (copied to be
// k-contiguous in ws when they are not); y: the wide operand, read in place, once.
template <class T>
void thin_tile(const GemmArgs& g, ThinPath path, std::size_t m_begin, std::size_t m_end, std::size_t n_begin,
               std::size_t n_end, float* ws) {
  using V = typename T::vec;
  const bool rows = path == ThinPath::dot_rows || path == ThinPath::axpy_rows;
  const Operand& xo = rows ? g.a : g.b;
  const Operand& yo = rows ? g.b : g.a;
  const std::size_t x0 = rows ? m_begin : n_begin;
  const std::size_t nx = rows ? m_end - m_begin : n_end - n_begin;
  const std::size_t y0 = rows ? n_begin : m_begin;
  const std::size_t ny = rows ? n_end - n_begin : m_end - m_begin;
  const float* x = xo.data + x0 * xo.ld;
  std::size_t ldx = xo.ld;
  if (!xo.k_contiguous) {
    for (std::size_t r = 0; r < nx; ++r) {
      for (std::size_t k = 0; k < g.k; ++k) ws[r * g.k + k] = xo.data[k * xo.ld + x0 + r];
    }
    x = ws;
    ldx = g.k;
    ws += round_up(nx * g.k, 16);
  }
  float* out = g.c + m_begin * g.ldc + n_begin;
  // Output (r, l) for thin index r and wide index l.
  const std::size_t out_r = rows ? g.ldc : 1, out_l = rows ? 1 : g.ldc;
  const Epilogue& e = g.epi;
  const float* bias = nullptr;
  std::size_t bias_r = 0, bias_l = 0;
  if (e.bias != nullptr) {
    const bool per_n = e.bias_axis == BiasAxis::column;
    bias = e.bias + (per_n ? n_begin : m_begin);
    // n is the wide index on the rows paths and the thin index on the column paths.
    (per_n == rows ? bias_l : bias_r) = 1;
  }
  const std::size_t rows_c = m_end - m_begin, cols_c = n_end - n_begin;

  if (path == ThinPath::dot_rows || path == ThinPath::dot_cols) {
    const float* y = yo.data + y0 * yo.ld;
    const bool acc = e.accumulate;
    with_thin_rows(nx, [&](auto rows_tag) {
      constexpr std::size_t R = decltype(rows_tag)::value;
      dot_rows<V, R, thin_width<T>(R)>(x, ldx, y, yo.ld, g.k, ny, out, out_r, out_l, acc, bias, bias_r, bias_l);
    });
    if (e.activation != Activation::none) T::activate(out, g.ldc, rows_c, cols_c, e.activation, e.slope);
    return;
  }

  const std::size_t ldo = axpy_stride(ny);
  for (std::size_t l0 = 0; l0 < ny; l0 += kAxpyChunk) {
    const std::size_t nl = min_size(kAxpyChunk, ny - l0);
    for (std::size_t r = 0; r < nx; ++r) {
      for (std::size_t l = 0; l < nl; ++l) ws[r * ldo + l] = 0.0f;
    }
    const float* y = yo.data + y0 + l0;
    with_thin_rows(nx, [&](auto rows_tag) {
      constexpr std::size_t R = decltype(rows_tag)::value;
      axpy_rows_chunk<V, R, thin_width<T>(R)>(x, ldx, y, yo.ld, g.k, nl, ws, ldo);
    });
    for (std::size_t r = 0; r < nx; ++r) {
      for (std::size_t l = 0; l < nl; ++l) {
        float* o = out + r * out_r + (l0 + l) * out_l;
        float v = ws[r * ldo + l];
        if (e.accumulate) v += *o;
        if (bias != nullptr) v += bias[r * bias_r + (l0 + l) * bias_l];
        *o = v;
      }
    }
    if (e.activation != Activation::none) {
      float* c = out + l0 * out_l;
      T::activate(c, g.ldc, rows ? rows_c : nl, rows ? nl : cols_c, e.activation, e.slope);
    }
  }
}

}  // namespace
}  // namespace teeny::cpu::detail
