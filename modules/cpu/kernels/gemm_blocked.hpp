// The GEMM's blocked loop nest and the per-ISA kernel table made from it (gemm_detail.hpp's
// internals, one concern a file): packed blocks of A and B around the ISA's microkernel, thin tiles
// handed to gemm_thin.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "gemm_detail.hpp"
#include "gemm_thin.hpp"

namespace teeny::cpu::detail {
namespace {  // internal linkage, per ISA unit: see gemm_detail.hpp

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

}  // namespace
}  // namespace teeny::cpu::detail
