// Must not compile: SwiGLU (in_features 8) as a layer of a typed model, fed a 5-wide value. The
// message names the layer, the op's kind, the op's own reason (its infer_shape) and the shape it
// got.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

import teeny;

#include "ffn_ops.hpp"

namespace tf = teeny::fixed;
constexpr tf::Custom<"ffn", ffn::SwiGLU{.in_features = 8, .hidden = 12}> swiglu;
auto y = swiglu(tf::input<"x", float, 4, 5>());  // expected-note {{in instantiation of}}

// clang-format off
// expected-error@*:* {{static assertion failed due to requirement 'custom_op_accepts<teeny::fixed::Name<4>{"ffn"}, teeny::fixed::Name<7>{"swiglu"}, teeny::fixed::Name<28>{"last dim is not in_features"}, teeny::fixed::got<teeny::fixed::Dims<4, 5>>>': custom layer: its op's infer_shape refused the inputs}}
// expected-note@*:* {{in instantiation of function template specialization 'teeny::fixed::custom_detail::check_accepts<}}
// clang-format on
