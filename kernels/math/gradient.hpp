#pragma once
// Per-element derivatives of the binary elementwise functions and of a cast (training builds),
// shared by the CPU and CUDA backward kernels; the unary functions' are beside their values in
// kernels/math/unary.hpp. Each formula is PyTorch's (tools/autograd/derivatives.yaml and the ATen
// backward kernels), including its choices at the kinks: a tie of maximum/minimum splits the
// gradient in half.
#include <cmath>

#include "math/elementwise.hpp"
#include "math/host_device.hpp"
#include "math/shape.hpp"  // cast_element

namespace teeny::math {

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
    case BinaryFn::fmod: {
      // PyTorch's: da = 1, db = -trunc(a / b).
      using std::trunc;
      return {one, -trunc(a / b)};
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
