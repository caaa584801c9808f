// Internals shared by gemm.cpp and the per-ISA translation units (gemm_avx2.cpp, gemm_avx512.cpp).
//
// Each ISA unit is compiled with its own -m flags, so the code-generating templates below (and in
// gemm_thin.hpp, gemm_blocked.hpp and gemm_activations.hpp, which this includes) have
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

}  // namespace
}  // namespace teeny::cpu::detail

// The rest of the internals, one concern a file.
#include "gemm_activations.hpp"
#include "gemm_blocked.hpp"
#include "gemm_thin.hpp"
