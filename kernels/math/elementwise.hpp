#pragma once
// Per-element math of teeny's elementwise ops, shared by the CPU backend (clang) and the CUDA
// kernels (nvcc), so that what the CPU tests prove against PyTorch is what the GPU computes.
// Formulas follow PyTorch's definitions (including NaN propagation where PyTorch propagates).
#include <cmath>
#include <cstdint>

#include "math/host_device.hpp"
#include "math/unary.hpp"

namespace teeny::math {

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
enum class BinaryFn : std::uint8_t { add, sub, mul, div, pow, maximum, minimum, fmod };

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
    case BinaryFn::fmod: {
      using std::fmod;
      return fmod(a, b);  // a - trunc(a / b) * b exactly, the sign of a, as torch.fmod
    }
  }
  return a;
}

/// The comparisons (the graph's CompareOp, same order). NaN compares unequal to everything.
enum class CompareFn : std::uint8_t { eq, ne, lt, le, gt, ge };

template <class T>
TEENY_HD inline bool apply_compare(CompareFn fn, T a, T b) {
  switch (fn) {
    case CompareFn::eq: return a == b;
    case CompareFn::ne: return a != b;
    case CompareFn::lt: return a < b;
    case CompareFn::le: return a <= b;
    case CompareFn::gt: return a > b;
    case CompareFn::ge: return a >= b;
  }
  return false;
}

}  // namespace teeny::math
