// Double-precision GEMM: portable C++, cache-blocked, parallel over rows of C. It exists so that f64
// models (exact checks against PyTorch, gradient checks) run the same kernels as f32 ones; the
// packed, vectorised kernels stay single precision.
#include <algorithm>
#include <cstddef>

#include "gemm.hpp"
#include "math/elementwise.hpp"

namespace teeny::cpu {
namespace {

// Blocks of K and N: a kKc x kNc block of op(B) (256 KiB of double) stays in L2 while every row of
// a task runs over it.
constexpr std::size_t kKc = 128;
constexpr std::size_t kNc = 256;

// The unary function of a GEMM activation (leaky_relu is applied by the caller: its slope is T).
constexpr math::UnaryFn unary_of(Activation act) {
  switch (act) {
    case Activation::relu: return math::UnaryFn::relu;
    case Activation::gelu_erf: return math::UnaryFn::gelu_erf;
    case Activation::gelu_tanh: return math::UnaryFn::gelu_tanh;
    case Activation::silu: return math::UnaryFn::silu;
    case Activation::sigmoid: return math::UnaryFn::sigmoid;
    case Activation::tanh: return math::UnaryFn::tanh;
    default: return math::UnaryFn::relu;
  }
}

// Rows [row_begin, row_end) of C, in three steps: C = accumulate ? C : 0; C += op(A) op(B) block by
// block; then bias and activation.
template <class T>
void gemm_rows(const GemmShape& s, const T* a, std::size_t lda, bool trans_a, const T* b, std::size_t ldb, bool trans_b,
               T* c, std::size_t ldc, const GemmEpilogue<T>& e, std::size_t row_begin, std::size_t row_end) {
  // A(i, k) and B(k, j) of op(A), op(B), whichever way each is stored.
  const auto a_at = [&](std::size_t i, std::size_t k) { return trans_a ? a[k * lda + i] : a[i * lda + k]; };
  if (!e.accumulate) {
    for (std::size_t i = row_begin; i < row_end; ++i) std::fill(c + i * ldc, c + i * ldc + s.n, T(0));
  }
  for (std::size_t k0 = 0; k0 < s.k; k0 += kKc) {
    const std::size_t k1 = std::min(s.k, k0 + kKc);
    for (std::size_t j0 = 0; j0 < s.n; j0 += kNc) {
      const std::size_t j1 = std::min(s.n, j0 + kNc);
      for (std::size_t i = row_begin; i < row_end; ++i) {
        T* __restrict ci = c + i * ldc;
        if (trans_b) {  // B is N x K: row j of B is column j of op(B), a dot product per element
          for (std::size_t j = j0; j < j1; ++j) {
            const T* __restrict bj = b + j * ldb;
            T sum = T(0);
            for (std::size_t k = k0; k < k1; ++k) sum += a_at(i, k) * bj[k];
            ci[j] += sum;
          }
        } else {  // rows of op(B) are contiguous: C's row gathers scaled rows of B
          for (std::size_t k = k0; k < k1; ++k) {
            const T aik = a_at(i, k);
            const T* __restrict bk = b + k * ldb;
            for (std::size_t j = j0; j < j1; ++j) ci[j] += aik * bk[j];
          }
        }
      }
    }
  }
  for (std::size_t i = row_begin; i < row_end; ++i) {
    T* ci = c + i * ldc;
    if (e.bias != nullptr) {
      for (std::size_t j = 0; j < s.n; ++j) ci[j] += e.bias_axis == BiasAxis::column ? e.bias[j] : e.bias[i];
    }
    if (e.activation == Activation::none) continue;
    if (e.activation == Activation::leaky_relu) {
      for (std::size_t j = 0; j < s.n; ++j) ci[j] = ci[j] > T(0) ? ci[j] : ci[j] * e.slope;
      continue;
    }
    const math::UnaryFn fn = unary_of(e.activation);
    for (std::size_t j = 0; j < s.n; ++j) ci[j] = math::apply_unary(fn, ci[j], {});
  }
}

template <class T>
void blocked_gemm(const GemmShape& s, const T* a, std::size_t lda, bool trans_a, const T* b, std::size_t ldb,
                  bool trans_b, T* c, std::size_t ldc, const GemmEpilogue<T>& e, ThreadPool& pool) {
  if (s.m == 0 || s.n == 0) return;
  // Tasks of whole rows, at least ~64K multiply-adds each, a few per thread to even them out.
  const std::size_t work = s.n * std::max<std::size_t>(s.k, 1);
  const std::size_t min_rows = std::max<std::size_t>(1, (std::size_t{1} << 16) / work);
  const std::size_t tasks = std::min({s.m / min_rows + 1, 4 * pool.size(), s.m});
  if (tasks <= 1 || pool.size() == 1) {
    gemm_rows(s, a, lda, trans_a, b, ldb, trans_b, c, ldc, e, 0, s.m);
    return;
  }
  pool.parallel_for(tasks, [&](std::size_t t) {
    gemm_rows(s, a, lda, trans_a, b, ldb, trans_b, c, ldc, e, s.m * t / tasks, s.m * (t + 1) / tasks);
  });
}

}  // namespace

void dgemm(const GemmShape& shape, const double* a, std::size_t lda, bool trans_a, const double* b, std::size_t ldb,
           bool trans_b, double* c, std::size_t ldc, const GemmEpilogue<double>& epilogue, ThreadPool& pool) {
  blocked_gemm(shape, a, lda, trans_a, b, ldb, trans_b, c, ldc, epilogue, pool);
}

}  // namespace teeny::cpu
