#pragma once
// The unary elementwise functions (activations and math), each written once for both backends: its
// value (PyTorch's formula, NaN behaviour included), its derivative (PyTorch's, including its
// choices at the kinks: relu'(0) = 0, abs'(0) = 0, elu'(0) = alpha) and, where the derivative
// follows from the output alone, that form too. The CPU kernels (clang) and the CUDA kernels
// (nvcc) call these, so what the CPU tests prove against PyTorch is what the GPU computes. A new
// function is an enumerator before `count` and a case in each switch below; nothing else in the
// backends is per function.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "math/host_device.hpp"

namespace teeny::math {

/// The unary elementwise functions, activations included. `count` is not a function but how many
/// there are (it stays last, so it cannot go stale: the CPU backend dispatches over every value
/// below it, and the GPU test runs each). A new function goes before it.
enum class UnaryFn : std::uint8_t {
  relu,
  leaky_relu,  // alpha = negative slope
  gelu_erf,
  gelu_tanh,
  silu,
  sigmoid,
  tanh,
  softplus,  // alpha = beta, beta = threshold
  elu,       // alpha
  hardswish,
  hardsigmoid,
  threshold,   // alpha = threshold, beta = value
  hardshrink,  // alpha = lambd
  softshrink,  // alpha = lambd
  exp,
  log,
  sqrt,
  abs,
  neg,
  reciprocal,
  erf,
  sin,
  cos,
  tan,
  asin,
  acos,
  atan,
  sinh,
  cosh,
  asinh,
  acosh,
  atanh,
  floor,
  ceil,
  round,  // half to even, as ONNX's Round and torch.round
  sign,
  count,
};
inline constexpr std::size_t unary_fn_count = static_cast<std::size_t>(UnaryFn::count);

/// The function's name, as errors print it (PyTorch's spelling where it has one).
constexpr const char* unary_fn_name(UnaryFn fn) {
  switch (fn) {
    case UnaryFn::relu: return "relu";
    case UnaryFn::leaky_relu: return "leaky_relu";
    case UnaryFn::gelu_erf: return "gelu";
    case UnaryFn::gelu_tanh: return "gelu(approximate='tanh')";
    case UnaryFn::silu: return "silu";
    case UnaryFn::sigmoid: return "sigmoid";
    case UnaryFn::tanh: return "tanh";
    case UnaryFn::softplus: return "softplus";
    case UnaryFn::elu: return "elu";
    case UnaryFn::hardswish: return "hardswish";
    case UnaryFn::hardsigmoid: return "hardsigmoid";
    case UnaryFn::threshold: return "threshold";
    case UnaryFn::hardshrink: return "hardshrink";
    case UnaryFn::softshrink: return "softshrink";
    case UnaryFn::exp: return "exp";
    case UnaryFn::log: return "log";
    case UnaryFn::sqrt: return "sqrt";
    case UnaryFn::abs: return "abs";
    case UnaryFn::neg: return "neg";
    case UnaryFn::reciprocal: return "reciprocal";
    case UnaryFn::erf: return "erf";
    case UnaryFn::sin: return "sin";
    case UnaryFn::cos: return "cos";
    case UnaryFn::tan: return "tan";
    case UnaryFn::asin: return "asin";
    case UnaryFn::acos: return "acos";
    case UnaryFn::atan: return "atan";
    case UnaryFn::sinh: return "sinh";
    case UnaryFn::cosh: return "cosh";
    case UnaryFn::asinh: return "asinh";
    case UnaryFn::acosh: return "acosh";
    case UnaryFn::atanh: return "atanh";
    case UnaryFn::floor: return "floor";
    case UnaryFn::ceil: return "ceil";
    case UnaryFn::round: return "round";
    case UnaryFn::sign: return "sign";
    case UnaryFn::count: break;
  }
  return "?";
}

/// Attributes some unary functions take; see UnaryFn for which. Kept in double, as the graph has
/// them: each element type rounds them once, T(alpha), as PyTorch does.
struct UnaryParams {
  double alpha = 0;
  double beta = 0;
  friend constexpr bool operator==(const UnaryParams&, const UnaryParams&) = default;
};

template <class T>
TEENY_HD inline T apply_unary(UnaryFn fn, T x, UnaryParams p) {
  using std::abs, std::erf, std::exp, std::log, std::log1p, std::expm1, std::sqrt, std::tanh;
  using std::sin, std::cos, std::tan, std::asin, std::acos, std::atan, std::sinh, std::cosh, std::asinh, std::acosh,
      std::atanh, std::floor, std::ceil, std::nearbyint;
  const T zero = T(0);
  const T one = T(1);
  switch (fn) {
    case UnaryFn::relu: return x < zero ? zero : x;  // NaN stays NaN, as in PyTorch
    case UnaryFn::leaky_relu: return x > zero ? x : x * T(p.alpha);
    case UnaryFn::gelu_erf: return T(0.5) * x * (one + erf(x * T(0.70710678118654752440)));
    case UnaryFn::gelu_tanh: {
      const T inner = T(0.79788456080286535588) * (x + T(0.044715) * x * x * x);  // sqrt(2/pi)
      return T(0.5) * x * (one + tanh(inner));
    }
    case UnaryFn::silu: return x / (one + exp(-x));
    case UnaryFn::sigmoid: return one / (one + exp(-x));
    case UnaryFn::tanh: return tanh(x);
    case UnaryFn::softplus: {
      const T scaled = x * T(p.alpha);
      return scaled > T(p.beta) ? x : log1p(exp(scaled)) / T(p.alpha);
    }
    case UnaryFn::elu: return x > zero ? x : T(p.alpha) * expm1(x);
    case UnaryFn::hardswish: {
      const T shifted = x + T(3);
      const T clamped = shifted < zero ? zero : (shifted > T(6) ? T(6) : shifted);
      return x * clamped / T(6);
    }
    case UnaryFn::hardsigmoid: {
      const T shifted = x + T(3);
      return (shifted < zero ? zero : (shifted > T(6) ? T(6) : shifted)) / T(6);  // NaN stays NaN
    }
    // PyTorch's comparisons: NaN stays NaN through threshold and hardshrink, and softshrink maps
    // it to 0 (PyTorch 1.13's CPU kernel, the fixtures' reference).
    case UnaryFn::threshold: return x <= T(p.alpha) ? T(p.beta) : x;
    case UnaryFn::hardshrink: return (x >= T(-p.alpha) && x <= T(p.alpha)) ? zero : x;
    case UnaryFn::softshrink: {
      const T lambd = T(p.alpha);
      return x > lambd ? x - lambd : (x < -lambd ? x + lambd : zero);
    }
    case UnaryFn::exp: return exp(x);
    case UnaryFn::log: return log(x);
    case UnaryFn::sqrt: return sqrt(x);
    case UnaryFn::abs: return abs(x);
    case UnaryFn::neg: return -x;
    case UnaryFn::reciprocal: return one / x;
    case UnaryFn::erf: return erf(x);
    case UnaryFn::sin: return sin(x);
    case UnaryFn::cos: return cos(x);
    case UnaryFn::tan: return tan(x);
    case UnaryFn::asin: return asin(x);
    case UnaryFn::acos: return acos(x);
    case UnaryFn::atan: return atan(x);
    case UnaryFn::sinh: return sinh(x);
    case UnaryFn::cosh: return cosh(x);
    case UnaryFn::asinh: return asinh(x);
    case UnaryFn::acosh: return acosh(x);
    case UnaryFn::atanh: return atanh(x);
    case UnaryFn::floor: return floor(x);
    case UnaryFn::ceil: return ceil(x);
    case UnaryFn::round: return nearbyint(x);  // the default rounding mode: to nearest, ties to even
    case UnaryFn::sign: return x > zero ? one : (x < zero ? -one : x);  // sign(0) = 0, NaN stays NaN
    case UnaryFn::count: break;
  }
  return x;
}

/// dy/dx of y = fn(x) at x (y is fn(x), passed because several derivatives are cheaper from it).
template <class T>
TEENY_HD inline T unary_derivative(UnaryFn fn, T x, T y, UnaryParams p) {
  using std::erf, std::exp, std::tanh, std::sin, std::cos, std::sinh, std::cosh, std::sqrt;
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
    case UnaryFn::hardsigmoid: return (x > T(-3) && x < T(3)) ? one / T(6) : zero;  // 0 at both kinks
    case UnaryFn::threshold: return x <= T(p.alpha) ? zero : one;
    case UnaryFn::hardshrink:
    case UnaryFn::softshrink: return (x >= T(-p.alpha) && x <= T(p.alpha)) ? zero : one;
    case UnaryFn::exp: return y;
    case UnaryFn::log: return one / x;
    case UnaryFn::sqrt: return one / (T(2) * y);
    case UnaryFn::abs: return x > zero ? one : (x < zero ? -one : zero);
    case UnaryFn::neg: return -one;
    case UnaryFn::reciprocal: return -y * y;
    case UnaryFn::erf: return T(1.12837916709551257390) * exp(-x * x);  // 2 / sqrt(pi)
    case UnaryFn::sin: return cos(x);
    case UnaryFn::cos: return -sin(x);
    case UnaryFn::tan: return one + y * y;
    case UnaryFn::asin: return one / sqrt(one - x * x);
    case UnaryFn::acos: return -one / sqrt(one - x * x);
    case UnaryFn::atan: return one / (one + x * x);
    case UnaryFn::sinh: return cosh(x);
    case UnaryFn::cosh: return sinh(x);
    case UnaryFn::asinh: return one / sqrt(x * x + one);
    case UnaryFn::acosh: return one / sqrt(x * x - one);
    case UnaryFn::atanh: return one / (one - x * x);
    case UnaryFn::floor:
    case UnaryFn::ceil:
    case UnaryFn::round:
    case UnaryFn::sign: return zero;  // piecewise constant: PyTorch's gradient is 0
    case UnaryFn::count: break;
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

}  // namespace teeny::math
