// Must not compile: a typed model whose Conv2d 'conv2' (in_channels 8) is fed 6 channels. The
// message names the layer, its kind, the shape it expects and the shape it got. Checked with
// `clang -fsyntax-only -Xclang -verify`.
import teeny.fixed;

namespace tf = teeny::fixed;
constexpr tf::Conv2d<"conv1", 1, 6, 5, {.padding = 2}> conv1;
constexpr tf::Conv2d<"conv2", 8, 16, 5> conv2;
auto pooled = tf::MaxPool2d<2>{}(tf::relu(conv1(tf::input<"x", float, 1, 1, 28, 28>())));  // [1, 6, 14, 14]
auto features = conv2(pooled);  // expected-note {{in instantiation of}}

// clang-format off
// expected-error@*:* {{static assertion failed due to requirement 'input_matches<teeny::fixed::Name<6>{"conv2"}, "Conv2d", teeny::fixed::expected<teeny::fixed::Dims<1, 8, 14, 14>>, teeny::fixed::got<teeny::fixed::Dims<1, 6, 14, 14>>>': Conv2d: the input's channel count (dim 1) is not the layer's in_channels}}
// clang-format on
