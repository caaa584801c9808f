#pragma once
// Per-element derivatives of teeny's elementwise ops (training builds), shared by the CPU and CUDA
// backward kernels. Each formula is PyTorch's (tools/autograd/derivatives.yaml and the ATen
// backward kernels), including its choices at the kinks: relu'(0) = 0, abs'(0) = 0, elu'(0) = alpha,
// and a tie of maximum/minimum splitting the gradient in half.
#include <cmath>

#include "math/elementwise.hpp"
#include "math/host_device.hpp"
#include "math/shape.hpp"  // cast_element

namespace teeny::math {

/// dy/dx of y = fn(x) at x (y is fn(x), passed because several derivatives are cheaper from it).
template <class T>
TEENY_HD inline T unary_derivative(UnaryFn fn, T x, T y, UnaryParams p) {
  using std::erf, std::exp, std::tanh;
  const T zero = T(0);
  const T one = T(1);
  switch (fn) {
    case UnaryFn::relu: return y > zero ? one : zero;
    case UnaryFn::leaky_relu: return x > zero ? one : T(p.alpha);
    case UnaryFn::gelu_erf: {
      const T cdf = T(0.5) * (one + erf(x * T(0.70710678118654752440)));
      const T pdf = exp(T(-0.5) * x * x) * T(0.39894228040143267794);  // 1 / sqrt(2 pi)
      return cdf + x * pdf;
    }
    case UnaryFn::gelu_tanh: {
      const T k_beta = T(0.79788456080286535588);  // sqrt(2 / pi)
      const T k_kappa = T(0.044715);
      const T t = tanh(k_beta * (x + k_kappa * x * x * x));
      return T(0.5) * (one + t) + T(0.5) * x * (one - t * t) * k_beta * (one + T(3) * k_kappa * x * x);
    }
    case UnaryFn::silu: {
      const T s = one / (one + exp(-x));
      return s * (one + x * (one - s));
    }
    case UnaryFn::sigmoid: return y * (one - y);
    case UnaryFn::tanh: return one - y * y;
    case UnaryFn::softplus: {
      const T z = exp(x * T(p.alpha));
      return x * T(p.alpha) > T(p.beta) ? one : z / (z + one);
    }
    case UnaryFn::elu: return x > zero ? one : T(p.alpha) * exp(x);
    case UnaryFn::hardswish: return x < T(-3) ? zero : (x <= T(3) ? x / T(3) + T(0.5) : one);
    case UnaryFn::exp: return y;
    case UnaryFn::log: return one / x;
    case UnaryFn::sqrt: return one / (T(2) * y);
    case UnaryFn::abs: return x > zero ? one : (x < zero ? -one : zero);
    case UnaryFn::neg: return -one;
    case UnaryFn::reciprocal: return -y * y;
  }
  return one;
}

/// Whether fn's derivative follows from its output alone, so that an op with fn fused as its
/// epilogue (which keeps only the activated output) still has an exact backward.
TEENY_HD inline bool derivative_from_output(UnaryFn fn, UnaryParams p) {
  switch (fn) {
    case UnaryFn::relu:
    case UnaryFn::sigmoid:
    case UnaryFn::tanh: return true;
    case UnaryFn::leaky_relu: return p.alpha > 0;  // then y > 0 exactly when x > 0
    case UnaryFn::elu: return p.alpha > 0;         // y + alpha = alpha * exp(x) for x <= 0
    default: return false;
  }
}

/// dy/dx of y = fn(x) from y alone, for the functions derivative_from_output accepts.
template <class T>
TEENY_HD inline T unary_derivative_from_output(UnaryFn fn, T y, UnaryParams p) {
  const T zero = T(0);
  const T one = T(1);
  switch (fn) {
    case UnaryFn::relu: return y > zero ? one : zero;
    case UnaryFn::leaky_relu: return y > zero ? one : T(p.alpha);
    case UnaryFn::sigmoid: return y * (one - y);
    case UnaryFn::tanh: return one - y * y;
    case UnaryFn::elu: return y > zero ? one : y + T(p.alpha);
    default: return one;
  }
}

/// The partial derivatives of y = fn(a, b).
template <class T>
struct BinaryPartials {
  T da = T(1);
  T db = T(1);
};

template <class T>
TEENY_HD inline BinaryPartials<T> binary_partials(BinaryFn fn, T a, T b, T y) {
  using std::log, std::pow;
  const T zero = T(0);
  const T one = T(1);
  switch (fn) {
    case BinaryFn::add: return {one, one};
    case BinaryFn::sub: return {one, -one};
    case BinaryFn::mul: return {b, a};
    case BinaryFn::div: return {one / b, -a / (b * b)};
    case BinaryFn::pow: {
      // PyTorch masks the exponent's gradient where a == 0 and b >= 0 (0^b has no useful log).
      const T da = b == zero ? zero : b * pow(a, b - one);
      const T db = (a == zero && b >= zero) ? zero : y * log(a);
      return {da, db};
    }
    case BinaryFn::maximum:
    case BinaryFn::minimum: {
      // PyTorch: a tie splits in half; an operand loses its share only where the other wins
      // (so a NaN, which wins nothing, passes the gradient to both).
      if (a == b) return {T(0.5), T(0.5)};
      const bool a_loses = fn == BinaryFn::maximum ? a < b : a > b;
      const bool b_loses = fn == BinaryFn::maximum ? a > b : a < b;
      return {a_loses ? zero : one, b_loses ? zero : one};
    }
  }
  return {one, one};
}

/// dx + dy's share for y = x.to(To) between floating dtypes: dy converted back to x's dtype
/// (PyTorch's grad.to(x.dtype)), added in x's dtype (f16 and bf16 add in float and round back).
template <class From, class To>
TEENY_HD inline From cast_gradient_add(From dx, To dy) {
  const From back = cast_element<From>(dy);
  if constexpr (cast_detail::is_half<From>) {
    return From(static_cast<float>(dx) + static_cast<float>(back));
  } else {
    return dx + back;
  }
}

}  // namespace teeny::math
