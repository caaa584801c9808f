// The GEMM epilogue's activations over a vector type (gemm_detail.hpp's internals, one concern a
// file): exp, erf, tanh and the activations made of them, applied to a tile of C in place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "gemm.hpp"

namespace teeny::cpu::detail {
namespace {  // internal linkage, per ISA unit: see gemm_detail.hpp

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
