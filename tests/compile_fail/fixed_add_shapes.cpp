// Must not compile: a residual add of a [1, 16, 14, 14] and a [1, 8, 14, 14] value (a block
// without its downsample branch). The message names the add and both shapes. Checked with
// `clang -fsyntax-only -Xclang -verify`.
import teeny.fixed;

namespace tf = teeny::fixed;
constexpr tf::Conv2d<"layer2.0.conv1", 8, 16, 3, {.padding = 1, .bias = false}> conv1;
auto x = tf::input<"x", float, 1, 8, 14, 14>();
auto y = tf::relu(tf::add<"layer2.0.add">(conv1(x), x));  // expected-note {{in instantiation of}}

// clang-format off
// expected-note@*:* {{in instantiation of function template specialization 'teeny::fixed::Add<Name<13UL>{"layer2.0.add"}>::operator()}}
// expected-error@*:* {{static assertion failed due to requirement 'operands_match<teeny::fixed::Name<13>{"layer2.0.add"}, teeny::fixed::Dims<1, 16, 14, 14>, teeny::fixed::Dims<1, 8, 14, 14>>': add: the operands' shapes differ (no broadcasting)}}
// clang-format on
