#pragma once
// Per-element math of teeny's elementwise ops, shared by the CPU backend (clang) and the CUDA
// kernels (nvcc), so that what the CPU tests prove against PyTorch is what the GPU computes.
// Formulas follow PyTorch's definitions (including NaN propagation where PyTorch propagates).
#include <cmath>
#include <cstdint>

#include "math/host_device.hpp"

namespace teeny::math {

/// The unary elementwise functions, activations included. The order is stable (it indexes tables).
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
  exp,
  log,
  sqrt,
  abs,
  neg,
  reciprocal,
};

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
    case UnaryFn::exp: return exp(x);
    case UnaryFn::log: return log(x);
    case UnaryFn::sqrt: return sqrt(x);
    case UnaryFn::abs: return abs(x);
    case UnaryFn::neg: return -x;
    case UnaryFn::reciprocal: return one / x;
  }
  return x;
}

/// An activation applied to an op's output in the same pass (a GEMM's bias + ReLU, a residual
/// block's ReLU after its add): `y = active ? fn(v) : v`.
struct Epilogue {
  bool active = false;
  UnaryFn fn = UnaryFn::relu;
  UnaryParams params{};
  friend constexpr bool operator==(const Epilogue&, const Epilogue&) = default;
};

template <class T>
TEENY_HD inline T apply_epilogue(const Epilogue& e, T v) {
  return e.active ? apply_unary(e.fn, v, e.params) : v;
}

/// The binary elementwise functions (broadcasting is the kernels' business).
enum class BinaryFn : std::uint8_t { add, sub, mul, div, pow, maximum, minimum };

template <class T>
TEENY_HD inline T apply_binary(BinaryFn fn, T a, T b) {
  switch (fn) {
    case BinaryFn::add: return a + b;
    case BinaryFn::sub: return a - b;
    case BinaryFn::mul: return a * b;
    case BinaryFn::div: return a / b;
    case BinaryFn::pow: {
      using std::pow;
      return pow(a, b);
    }
    case BinaryFn::maximum: return (a != a || a > b) ? a : b;  // NaN-propagating, as torch.maximum
    case BinaryFn::minimum: return (a != a || a < b) ? a : b;
  }
  return a;
}

}  // namespace teeny::math
