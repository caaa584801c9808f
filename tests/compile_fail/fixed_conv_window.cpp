// Must not compile: a 5x5 convolution on a 4x4 input without padding (no output pixel). Checked
// with `clang -fsyntax-only -Xclang -verify`.
import teeny.fixed;

namespace tf = teeny::fixed;
constexpr tf::Conv2d<"conv", 3, 8, 5> conv;
auto y = conv(tf::input<"x", float, 1, 3, 4, 4>());  // expected-note {{in instantiation of}}

// clang-format off
// expected-error@*:* {{static assertion failed due to requirement 'window_fits<teeny::fixed::Name<5>{"conv"}, "Conv2d", teeny::fixed::got<teeny::fixed::Dims<1, 3, 4, 4>>, teeny::fixed::window<5, 0>>': Conv2d: the kernel (dilated) is larger than the padded input}}
// clang-format on
