// Must not compile: a typed model whose Linear 'fc2' (in_features 512) is fed a 256-wide value.
// The message names the layer, its kind, the shape it expects and the shape it got. Checked with
// `clang -fsyntax-only -Xclang -verify`.
import teeny.fixed;

namespace tf = teeny::fixed;
constexpr tf::Linear<"fc1", 784, 256> fc1;
constexpr tf::Linear<"fc2", 512, 10> fc2;
auto hidden = tf::relu(fc1(tf::flatten(tf::input<"x", float, 64, 1, 28, 28>())));  // [64, 256]
auto logits = fc2(hidden);  // expected-note {{in instantiation of}}

// clang-format off
// expected-error@*:* {{static assertion failed due to requirement 'input_matches<teeny::fixed::Name<4>{"fc2"}, "Linear", teeny::fixed::expected<teeny::fixed::Dims<64, 512>>, teeny::fixed::got<teeny::fixed::Dims<64, 256>>>': Linear: the input's last dim is not the layer's in_features}}
// clang-format on
