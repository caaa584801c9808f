// Internals shared by gemm.cpp and the per-ISA translation units (gemm_avx2.cpp, gemm_avx512.cpp).
//
// Each ISA unit is compiled with its own -m flags, so the code-generating templates below have
// internal linkage (an unnamed namespace): the linker can never merge an AVX-512 copy of a function
// into a caller that runs on a CPU without AVX-512. Shared non-template helpers do integer
// arithmetic only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "gemm.hpp"
#include "math/pool.hpp"  // max_pool_update

namespace teeny::cpu::detail {

// A packed operand as the kernels see it; see PackedMatrix for the layout.
struct PackedLayout {
  const float* data = nullptr;
  std::size_t block_k = 0;
  std::size_t panel = 0;
  std::size_t padded = 0;
};

// One GEMM operand, described along its depth k (the GEMM's K) and its width j (M for A, N for
// B). Raw: element (k, j) is data[k * ld + j] or, when k_contiguous, data[j * ld + k]; with
// row_offsets, data[row_offsets[k] + j] (rows given one by one, see RowTable).
struct Operand {
  const float* data = nullptr;
  std::size_t ld = 0;
  bool k_contiguous = false;
  const PackedLayout* packed = nullptr;         // set: read from this packed matrix instead
  const std::ptrdiff_t* row_offsets = nullptr;  // set: row k starts at data + row_offsets[k]
};

// Start of row k of an operand whose rows run along its width (not k_contiguous).
inline const float* row_start(const Operand& op, std::size_t k) {
  return op.row_offsets != nullptr ? op.data + op.row_offsets[k] : op.data + k * op.ld;
}

struct GemmArgs {
  std::size_t m = 0;
  std::size_t n = 0;
  std::size_t k = 0;
  Operand a;
  Operand b;
  float* c = nullptr;
  std::size_t ldc = 0;
  Epilogue epi;
  ColumnOrder order = ColumnOrder::ascending;
};

// Computes the tile C[m_begin:m_end, n_begin:n_end] over all of K, epilogue included. ws holds
// tile_workspace_floats(...) floats, 64-byte aligned.
using TileFn = void (*)(const GemmArgs& g, std::size_t m_begin, std::size_t m_end, std::size_t n_begin,
                        std::size_t n_end, float* ws);
// Packs a whole operand (depth k, width w) into dst, in the layout of block_k / panel.
using PackFn = void (*)(const Operand& src, std::size_t k, std::size_t w, float* dst);
// Applies an activation to an m x n tile of C (row stride ldc) in place.
using ActivateFn = void (*)(float* c, std::size_t ldc, std::size_t m, std::size_t n, Activation act, float slope);
// A 2x2, stride-2 max pool into ho rows of wo from rows `pitch` apart (cpu::max_pool_2x2).
using MaxPoolFn = void (*)(const float* x, std::size_t pitch, float* y, std::size_t ho, std::size_t wo);
// A row of a 3x3, stride-2 max pool (cpu::max_pool_3x3_stride2).
using MaxPool3x3Fn = void (*)(const float* r0, const float* r1, const float* r2, float* out, std::size_t begin,
                              std::size_t end, std::ptrdiff_t offset);
// Short rows with zero margins (cpu::copy_rows).
using CopyRowsFn = void (*)(const RowCopy& copy);
// An implicit convolution's product with output pixels as rows (cpu::pixel_rows).
using PixelRowsFn = void (*)(const PixelRows& p);

struct KernelTable {
  Isa isa;
  std::size_t mr;  // rows of the microkernel = panel width of packed A
  std::size_t nr;  // columns of the microkernel = panel width of packed B
  std::size_t kc;  // depth of a packed block
  std::size_t mc;  // rows of A packed at a time
  std::size_t nc;  // columns of B packed at a time (the block that stays in L2)
  TileFn tile;
  PackFn pack_a;
  PackFn pack_b;
  ActivateFn activate;
  bool rows_in_place;  // the microkernel reads a row-table B in place (T::kernel_rows)
  MaxPoolFn max_pool_2x2;
  MaxPool3x3Fn max_pool_3x3_stride2;  // null where the instruction set has none
  CopyRowsFn copy_rows;
  PixelRowsFn pixel_rows;  // null where the instruction set has none
};

// Output columns [c0, wo) of one row of a 2x2 max pool: top and bottom are its two input rows.
// Each max is math::max_pool_update, PyTorch's (NaN wins), the rule the pool kernels share.
inline void max_pool_2x2_columns(const float* top, const float* bottom, float* out, std::size_t c0, std::size_t wo) {
  using math::max_pool_update;
  for (std::size_t c = c0; c < wo; ++c) {
    out[c] =
        max_pool_update(max_pool_update(top[2 * c], bottom[2 * c]), max_pool_update(top[2 * c + 1], bottom[2 * c + 1]));
  }
}

// Defined by gemm.cpp, gemm_avx2.cpp and gemm_avx512.cpp; the build defines TEENY_CPU_GEMM_AVX2 /
// TEENY_CPU_GEMM_AVX512 for gemm.cpp when it compiles the latter two.
const KernelTable& portable_kernels();
const KernelTable& avx2_kernels();
const KernelTable& avx512_kernels();

constexpr std::size_t round_up(std::size_t x, std::size_t to) { return (x + to - 1) / to * to; }
constexpr std::size_t min_size(std::size_t a, std::size_t b) { return a < b ? a : b; }

// How the vector at columns [c0, c0 + L) of a RowCopy row (L lanes) is made: its first `loaded`
// lanes read from the source row at `offset`, moved up by `shift` lanes where the vector begins
// in the left zeros, its first `stored` lanes written. The lanes not loaded are 0.
struct RowVectorPlan {
  std::size_t offset = 0, loaded = 0, shift = 0, stored = 0;
};
template <std::size_t L>
constexpr RowVectorPlan row_vector_plan(std::size_t c0, std::size_t width, std::size_t lead, std::size_t count) {
  const std::size_t n = min_size(L, width - c0), end = lead + count;
  RowVectorPlan v;
  v.stored = n;
  if (c0 >= lead && c0 < end) {
    v.offset = c0 - lead;
    v.loaded = min_size(n, end - c0);
  } else if (c0 < lead && lead - c0 < n && count > 0) {
    v.shift = lead - c0;
    v.loaded = min_size(n, end - c0) - v.shift;
  }
  return v;
}

inline bool uses_packed_directly(const Operand& op, std::size_t panel, std::size_t block_k) {
  return op.packed != nullptr && op.packed->panel == panel && op.packed->block_k == block_k;
}

// Thin products (GEMV-like: at most kThinMax rows or columns of C in a tile) with both operands raw
// skip packing: each element of the wide operand is used at most kThinMax times, so copying it
// costs more than the multiply-adds. They stream the wide operand once, as dot products along k
// when its rows run along k, as row updates (axpy) when they run along the long dimension.
constexpr std::size_t kThinMax = 8;
// Long-dimension chunk of the axpy path's accumulator (kThinMax x 4096 floats stays in L2).
constexpr std::size_t kAxpyChunk = 4096;

enum class ThinPath : std::uint8_t {
  none,
  dot_rows,   // few rows of C, B stored N x K: C[i][n] = dot(A row i, B row n)
  dot_cols,   // few columns of C, A stored M x K: C[m][j] = dot(A row m, B column j)
  axpy_rows,  // few rows of C, B stored K x N: C[i][:] += A(i, k) * B[k][:]
  axpy_cols,  // few columns of C, A stored K x M: C[:][j] += B(k, j) * A[k][:]
};

// Row stride of the axpy path's accumulator for a wide dimension of `wide`.
constexpr std::size_t axpy_stride(std::size_t wide) { return round_up(min_size(kAxpyChunk, wide), 16); }

inline ThinPath thin_path(const GemmArgs& g, std::size_t tile_m, std::size_t tile_n) {
  if (g.a.packed != nullptr || g.b.packed != nullptr) return ThinPath::none;
  if (g.a.row_offsets != nullptr || g.b.row_offsets != nullptr) return ThinPath::none;
  // A dot product ends in a horizontal sum; over a short k that costs more than packing would.
  constexpr std::size_t dot_min_k = 32;
  if (tile_m <= kThinMax) {
    if (!g.b.k_contiguous) return ThinPath::axpy_rows;
    if (g.k >= dot_min_k) return ThinPath::dot_rows;
  }
  if (tile_n <= kThinMax) {
    if (!g.a.k_contiguous) return ThinPath::axpy_cols;
    if (g.k >= dot_min_k) return ThinPath::dot_cols;
  }
  return ThinPath::none;
}

// Scratch floats for one tile: a packed A block and a packed B block, unless the operand is
// already packed in this kernel's layout. Thin tiles need a k-contiguous copy of the thin operand
// when it is not, and the axpy path its accumulator.
inline std::size_t tile_workspace_floats(const KernelTable& kt, const GemmArgs& g, std::size_t tile_m,
                                         std::size_t tile_n) {
  const ThinPath path = thin_path(g, tile_m, tile_n);
  if (path != ThinPath::none) {
    const bool rows = path == ThinPath::dot_rows || path == ThinPath::axpy_rows;
    const std::size_t thin = rows ? tile_m : tile_n;
    const std::size_t wide = rows ? tile_n : tile_m;
    const bool gather = rows ? !g.a.k_contiguous : !g.b.k_contiguous;
    const bool axpy = path == ThinPath::axpy_rows || path == ThinPath::axpy_cols;
    return round_up(gather ? thin * g.k : 0, 16) + (axpy ? thin * axpy_stride(wide) : 0) + 16;
  }
  return blocked_workspace_floats(GemmBlocking{kt.mr, kt.nr, kt.kc, kt.mc, kt.nc}, tile_m, tile_n, g.k,
                                  uses_packed_directly(g.a, kt.mr, kt.kc), uses_packed_directly(g.b, kt.nr, kt.kc));
}

// Index of element (k, j) in a packed operand whose depth is total_k.
inline std::size_t packed_index(const PackedLayout& p, std::size_t total_k, std::size_t k, std::size_t j) {
  const std::size_t k0 = k / p.block_k * p.block_k;
  const std::size_t kc = min_size(p.block_k, total_k - k0);
  return k0 * p.padded + j / p.panel * kc * p.panel + (k - k0) * p.panel + j % p.panel;
}

namespace {

// ---- Packing ----------------------------------------------------------------------------------

// Writes the panel of width R holding j in [j0, j0 + w) (w <= R) and k in [k0, k0 + kc) to dst as
// dst[kk * R + jj], zero-filling jj >= w, from a packed operand or a k-contiguous one (through the
// ISA's transposing copy Tr::pack_transposed).
template <class Tr, std::size_t R>
void pack_panel(const Operand& src, std::size_t total_k, std::size_t j0, std::size_t w, std::size_t k0, std::size_t kc,
                float* dst) {
  if (src.packed == nullptr) {
    Tr::template pack_transposed<R>(src.data + j0 * src.ld + k0, src.ld, w, kc, dst);
    return;
  }
  for (std::size_t kk = 0; kk < kc; ++kk) {
    for (std::size_t jj = 0; jj < R; ++jj) {
      dst[kk * R + jj] = jj < w ? src.packed->data[packed_index(*src.packed, total_k, k0 + kk, j0 + jj)] : 0.0f;
    }
  }
}

// Packs the block j in [j0, j0 + w), k in [k0, k0 + kc) as consecutive panels of width R (panel p
// at dst + p * kc * R). A source whose rows run along j is copied row by row, so each row segment
// is read once and sequentially (walking a panel down the rows instead touches a new page per k).
template <class Tr, std::size_t R>
void pack_block(const Operand& src, std::size_t total_k, std::size_t j0, std::size_t w, std::size_t k0, std::size_t kc,
                float* dst) {
  if (src.packed != nullptr || src.k_contiguous) {
    for (std::size_t j = 0; j < w; j += R) {
      pack_panel<Tr, R>(src, total_k, j0 + j, min_size(R, w - j), k0, kc, dst + j * kc);
    }
    return;
  }
  // A few rows at a time, panel by panel: each panel's destination is then written in runs of
  // kRows * R consecutive floats. Row by row across all panels, the stores go kc * R floats apart
  // and, for the usual kc and R, land in the same few L1 sets.
  constexpr std::size_t kRows = 8;
  const std::size_t full = w / R;
  const std::size_t rest = w - full * R;
  for (std::size_t r0 = 0; r0 < kc; r0 += kRows) {
    const std::size_t rows = min_size(kRows, kc - r0);
    const float* s[kRows];
    for (std::size_t kk = 0; kk < rows; ++kk) s[kk] = row_start(src, k0 + r0 + kk) + j0;
    // The next rows' same columns are fetched while these are copied: the rows are far apart, and
    // the hardware's prefetchers do not follow many such streams.
    const std::size_t next = r0 + kRows < kc ? min_size(kRows, kc - r0 - kRows) : 0;
    const float* s_next[kRows];
    for (std::size_t kk = 0; kk < next; ++kk) s_next[kk] = row_start(src, k0 + r0 + kRows + kk) + j0;
    float* d = dst + r0 * R;
    for (std::size_t p = 0; p < full; ++p, d += kc * R) {
      for (std::size_t kk = 0; kk < next; ++kk) {
        for (std::size_t line = 0; line < R; line += 16) __builtin_prefetch(s_next[kk] + p * R + line);
      }
      for (std::size_t kk = 0; kk < rows; ++kk) {
        for (std::size_t jj = 0; jj < R; ++jj) d[kk * R + jj] = s[kk][p * R + jj];
      }
    }
    if (rest != 0) {
      for (std::size_t kk = 0; kk < rows; ++kk) {
        for (std::size_t jj = 0; jj < rest; ++jj) d[kk * R + jj] = s[kk][full * R + jj];
        for (std::size_t jj = rest; jj < R; ++jj) d[kk * R + jj] = 0.0f;
      }
    }
  }
}

// Packs a whole operand: K in blocks of T::kc, each block holding round_up(w, R) / R panels.
template <class T, std::size_t R>
void pack_full(const Operand& src, std::size_t k, std::size_t w, float* dst) {
  const std::size_t padded = round_up(w, R);
  for (std::size_t k0 = 0; k0 < k; k0 += T::kc) {
    pack_block<T, R>(src, k, 0, w, k0, min_size(T::kc, k - k0), dst + k0 * padded);
  }
}

// ---- Driver -----------------------------------------------------------------------------------

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

// The blocked loop nest (BLIS order with the operand roles swapped for row-major C): a block of A
// (mc x kc) is packed once and reused across all of N; a block of B (kc x nc) is packed to stay in
// L2; the microkernel keeps one A panel (mr x kc) in L1 and streams B panels (kc x nr) from L2.
template <class T>
void gemm_tile(const GemmArgs& g, std::size_t m_begin, std::size_t m_end, std::size_t n_begin, std::size_t n_end,
               float* ws) {
#if !TEENY_EMBEDDED
  // An embedded build leaves the thin paths out, for size: it runs typed models, whose GEMMs all
  // read a layer's weights packed at load, which the thin paths never take.
  if (const ThinPath path = thin_path(g, m_end - m_begin, n_end - n_begin); path != ThinPath::none) {
    thin_tile<T>(g, path, m_begin, m_end, n_begin, n_end, ws);
    return;
  }
#endif
  constexpr std::size_t mr = T::mr, nr = T::nr, kc_max = T::kc;
  const bool a_direct = uses_packed_directly(g.a, mr, kc_max);
  const bool b_direct = uses_packed_directly(g.b, nr, kc_max);
  // B given row by row is read in place by kernels that can (T::kernel_rows), packed otherwise.
  constexpr bool has_row_kernel = requires { &T::kernel_rows; };
  const bool b_rows = has_row_kernel && g.b.row_offsets != nullptr;
  // So is a single row of A along k (T::kernel_single_row): a batch-1 Linear's input.
  constexpr bool has_single_row = requires { &T::kernel_single_row; };
  const bool a_row = has_single_row && !a_direct && !b_rows && m_end - m_begin == 1 && g.a.k_contiguous &&
                     g.a.packed == nullptr && g.a.row_offsets == nullptr;
  float* ws_a = ws;
  float* ws_b = ws;
  if (!a_direct) {
    ws_b = ws + round_up(round_up(min_size(T::mc, m_end - m_begin), mr) * min_size(kc_max, g.k), 16);
  }
  const Epilogue& e = g.epi;
  // ReLU is applied by the microkernel as it stores the last K block; other activations in a pass
  // over the tile after it.
  const bool relu = e.activation == Activation::relu;
  const bool other_act = e.activation != Activation::none && !relu;

  if constexpr (has_single_row) {
    if (a_row && b_direct) {
      // One row of A against a packed B (a batch-1 layer's weights, from memory on every call):
      // each of C's column panels over all of K, in `order` (see ColumnOrder). Each element's sum
      // runs over the K blocks in the order of the loop nest below: the same result, bit for bit.
      const std::size_t panels = (n_end - n_begin + nr - 1) / nr;
      for (std::size_t p = 0; p < panels; ++p) {
        const std::size_t j = n_begin + (g.order == ColumnOrder::descending ? panels - 1 - p : p) * nr;
        const std::size_t n = min_size(nr, n_end - j);
        float* c = g.c + m_begin * g.ldc + j;
        for (std::size_t k0 = 0; k0 < g.k; k0 += kc_max) {
          const std::size_t kc = min_size(kc_max, g.k - k0);
          const bool last = k0 + kc == g.k;
          const float* bias_col = last && e.bias != nullptr && e.bias_axis == BiasAxis::column ? e.bias + j : nullptr;
          const float* bias_row =
              last && e.bias != nullptr && e.bias_axis == BiasAxis::row ? e.bias + m_begin : nullptr;
          T::kernel_single_row(kc, g.a.data + m_begin * g.a.ld + k0,
                               g.b.packed->data + k0 * g.b.packed->padded + j * kc, c, n, k0 > 0 || e.accumulate,
                               bias_col, bias_row, last && relu);
        }
        if (other_act) T::activate(c, g.ldc, 1, n, e.activation, e.slope);
      }
      return;
    }
  }

  for (std::size_t m0 = m_begin; m0 < m_end; m0 += T::mc) {
    const std::size_t mc = min_size(T::mc, m_end - m0);
    for (std::size_t k0 = 0; k0 < g.k; k0 += kc_max) {
      const std::size_t kc = min_size(kc_max, g.k - k0);
      const bool load_c = k0 > 0 || e.accumulate;
      const bool last = k0 + kc == g.k;
      const float* ap = ws_a;
      if (a_direct) {
        ap = g.a.packed->data + k0 * g.a.packed->padded + m0 * kc;
      } else if (a_row) {
        ap = g.a.data + m0 * g.a.ld + k0;
      } else {
        pack_block<T, mr>(g.a, g.k, m0, mc, k0, kc, ws_a);
      }
      for (std::size_t n0 = n_begin; n0 < n_end; n0 += T::nc) {
        const std::size_t nc = min_size(T::nc, n_end - n0);
        const float* bp = ws_b;
        if (b_direct) {
          bp = g.b.packed->data + k0 * g.b.packed->padded + n0 * kc;
        } else if (!b_rows) {
          pack_block<T, nr>(g.b, g.k, n0, nc, k0, kc, ws_b);
        }
        auto tile = [&](std::size_t i, std::size_t j) {
          const std::size_t m = min_size(mr, mc - i);
          const std::size_t n = min_size(nr, nc - j);
          const float* bias_row = last && e.bias != nullptr && e.bias_axis == BiasAxis::row ? e.bias + m0 + i : nullptr;
          const float* bias_col =
              last && e.bias != nullptr && e.bias_axis == BiasAxis::column ? e.bias + n0 + j : nullptr;
          float* c = g.c + (m0 + i) * g.ldc + n0 + j;
          bool done = false;
          if constexpr (has_single_row) {
            if (a_row) {
              T::kernel_single_row(kc, ap, bp + j * kc, c, n, load_c, bias_col, bias_row, last && relu);
              done = true;
            }
          }
          if constexpr (has_row_kernel) {
            if (b_rows) {
              T::kernel_rows(kc, ap + i * kc, g.b.data + n0 + j, g.b.row_offsets + k0, c, g.ldc, m, n, load_c, bias_col,
                             bias_row, last && relu);
              done = true;
            }
          }
          if (!done) T::kernel(kc, ap + i * kc, bp + j * kc, c, g.ldc, m, n, load_c, bias_col, bias_row, last && relu);
          // The tile is still in L1: activating it here costs little.
          if (last && other_act) T::activate(c, g.ldc, m, n, e.activation, e.slope);
        };
        if (b_direct) {
          // A pre-packed B (a layer's weights) streams from memory: each of its panels is used by
          // all of A's panels while it is in L1, instead of the whole block once per A panel
          // (which would wait on memory for the whole first sweep).
          for (std::size_t j = 0; j < nc; j += nr) {
            for (std::size_t i = 0; i < mc; i += mr) tile(i, j);
          }
        } else {
          for (std::size_t i = 0; i < mc; i += mr) {
            for (std::size_t j = 0; j < nc; j += nr) tile(i, j);
          }
        }
      }
    }
  }
}

template <class T>
void gemm_tile_entry(const GemmArgs& g, std::size_t m_begin, std::size_t m_end, std::size_t n_begin, std::size_t n_end,
                     float* ws) {
  gemm_tile<T>(g, m_begin, m_end, n_begin, n_end, ws);
}

template <class T>
constexpr KernelTable make_kernel_table(Isa isa) {
  constexpr bool rows_in_place = requires { &T::kernel_rows; };
  MaxPool3x3Fn max_pool_3x3 = nullptr;
  if constexpr (requires { &T::max_pool_3x3_stride2; }) max_pool_3x3 = &T::max_pool_3x3_stride2;
  PixelRowsFn pixel_rows = nullptr;
  if constexpr (requires { &T::pixel_rows; }) pixel_rows = &T::pixel_rows;
  return KernelTable{isa,
                     T::mr,
                     T::nr,
                     T::kc,
                     T::mc,
                     T::nc,
                     &gemm_tile_entry<T>,
                     &pack_full<T, T::mr>,
                     &pack_full<T, T::nr>,
                     &T::activate,
                     rows_in_place,
                     &T::max_pool_2x2,
                     max_pool_3x3,
                     &T::copy_rows,
                     pixel_rows};
}

// ---- Activations ------------------------------------------------------------------------------
// Written once over a vector type V (V::reg plus static arithmetic), instantiated by every ISA.
// The formulas follow PyTorch's CPU kernels; erf is Abramowitz-Stegun 7.1.26, as in PyTorch's
// vectorised erf (absolute error below 1.5e-7).

template <class V>
typename V::reg vexp(typename V::reg x) {
  using R = typename V::reg;
  // Cephes expf: exp(x) = 2^n * exp(r), |r| <= ln2/2, clamped so 2^n stays a normal float.
  x = V::min(V::max(x, V::set1(-87.33654f)), V::set1(88.0f));
  const R n = V::round(V::mul(x, V::set1(1.44269504088896341f)));
  R r = V::fnmadd(n, V::set1(0.693359375f), x);
  r = V::fnmadd(n, V::set1(-2.12194440e-4f), r);
  R y = V::set1(1.9875691500e-4f);
  y = V::fmadd(y, r, V::set1(1.3981999507e-3f));
  y = V::fmadd(y, r, V::set1(8.3334519073e-3f));
  y = V::fmadd(y, r, V::set1(4.1665795894e-2f));
  y = V::fmadd(y, r, V::set1(1.6666665459e-1f));
  y = V::fmadd(y, r, V::set1(5.0000001201e-1f));
  y = V::fmadd(y, V::mul(r, r), V::add(r, V::set1(1.0f)));
  return V::mul(y, V::pow2(n));
}

template <class V>
typename V::reg vsigmoid(typename V::reg x) {
  using R = typename V::reg;
  // exp of -|x| never overflows; the negative half uses e / (1 + e) to keep relative accuracy.
  const R e = vexp<V>(V::neg(V::abs(x)));
  const R r = V::div(V::set1(1.0f), V::add(V::set1(1.0f), e));
  return V::select_lt(x, V::zero(), V::mul(e, r), r);
}

template <class V>
typename V::reg vtanh(typename V::reg x) {
  using R = typename V::reg;
  const R ax = V::abs(x);
  // Cephes tanhf: an odd polynomial below 0.625, 1 - 2 / (exp(2|x|) + 1) above.
  const R z = V::mul(x, x);
  R p = V::set1(-5.70498872745e-3f);
  p = V::fmadd(p, z, V::set1(2.06390887954e-2f));
  p = V::fmadd(p, z, V::set1(-5.37397155531e-2f));
  p = V::fmadd(p, z, V::set1(1.33314422036e-1f));
  p = V::fmadd(p, z, V::set1(-3.33332819422e-1f));
  const R small = V::fmadd(V::mul(p, z), x, x);
  const R e = vexp<V>(V::add(ax, ax));
  const R big = V::sub(V::set1(1.0f), V::div(V::set1(2.0f), V::add(e, V::set1(1.0f))));
  return V::select_lt(ax, V::set1(0.625f), small, V::copysign(big, x));
}

template <class V>
typename V::reg verf(typename V::reg x) {
  using R = typename V::reg;
  const R ax = V::abs(x);
  const R t = V::div(V::set1(1.0f), V::fmadd(V::set1(0.3275911f), ax, V::set1(1.0f)));
  R p = V::set1(1.061405429f);
  p = V::fmadd(p, t, V::set1(-1.453152027f));
  p = V::fmadd(p, t, V::set1(1.421413741f));
  p = V::fmadd(p, t, V::set1(-0.284496736f));
  p = V::fmadd(p, t, V::set1(0.254829592f));
  p = V::mul(p, t);
  const R y = V::fnmadd(p, vexp<V>(V::neg(V::mul(ax, ax))), V::set1(1.0f));
  return V::copysign(y, x);
}

template <class V, Activation A>
typename V::reg activate(typename V::reg x, typename V::reg slope) {
  using R = typename V::reg;
  if constexpr (A == Activation::relu) {
    return V::max(V::zero(), x);  // max(0, NaN) is NaN, as in PyTorch
  } else if constexpr (A == Activation::leaky_relu) {
    return V::select_lt(x, V::zero(), V::mul(x, slope), x);
  } else if constexpr (A == Activation::gelu_erf) {
    const R half_x = V::mul(x, V::set1(0.5f));
    return V::fmadd(half_x, verf<V>(V::mul(x, V::set1(0.70710678118654752f))), half_x);
  } else if constexpr (A == Activation::gelu_tanh) {
    const R x3 = V::mul(V::mul(x, x), x);
    const R inner = V::mul(V::set1(0.79788456080286536f), V::fmadd(V::set1(0.044715f), x3, x));
    const R half_x = V::mul(x, V::set1(0.5f));
    return V::fmadd(half_x, vtanh<V>(inner), half_x);
  } else if constexpr (A == Activation::silu) {
    return V::mul(x, vsigmoid<V>(x));
  } else if constexpr (A == Activation::sigmoid) {
    return vsigmoid<V>(x);
  } else if constexpr (A == Activation::tanh) {
    return vtanh<V>(x);
  } else {
    (void)slope;
    return x;
  }
}

// Applies activation A to rows x cols floats of C through V's (masked) loads and stores.
template <class V, Activation A>
void activate_rows(float* c, std::size_t ldc, std::size_t rows, std::size_t cols, float slope) {
  const typename V::reg s = V::set1(slope);
  for (std::size_t i = 0; i < rows; ++i, c += ldc) {
    std::size_t j = 0;
    for (; j + V::width <= cols; j += V::width) V::storeu(c + j, activate<V, A>(V::loadu(c + j), s));
    if (j < cols) V::store_partial(c + j, cols - j, activate<V, A>(V::load_partial(c + j, cols - j), s));
  }
}

template <class V>
void activate_tile(float* c, std::size_t ldc, std::size_t rows, std::size_t cols, Activation act, float slope) {
  switch (act) {
    case Activation::none: break;
    case Activation::relu: activate_rows<V, Activation::relu>(c, ldc, rows, cols, slope); break;
    case Activation::leaky_relu: activate_rows<V, Activation::leaky_relu>(c, ldc, rows, cols, slope); break;
    case Activation::gelu_erf: activate_rows<V, Activation::gelu_erf>(c, ldc, rows, cols, slope); break;
    case Activation::gelu_tanh: activate_rows<V, Activation::gelu_tanh>(c, ldc, rows, cols, slope); break;
    case Activation::silu: activate_rows<V, Activation::silu>(c, ldc, rows, cols, slope); break;
    case Activation::sigmoid: activate_rows<V, Activation::sigmoid>(c, ldc, rows, cols, slope); break;
    case Activation::tanh: activate_rows<V, Activation::tanh>(c, ldc, rows, cols, slope); break;
  }
}

}  // namespace
}  // namespace teeny::cpu::detail
