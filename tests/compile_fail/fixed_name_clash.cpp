// Must not compile: two Linear layers both named 'fc' with different shapes, whose weights would
// share the keys fc.weight and fc.bias. The message names the first such key. Checked with
// `clang -fsyntax-only -Xclang -verify`.
import teeny.fixed;

namespace tf = teeny::fixed;
constexpr tf::Linear<"fc", 8, 16> first;
constexpr tf::Linear<"fc", 16, 4> second;
using net = tf::Network<decltype(second(first(tf::input<"x", float, 2, 8>())))>;
constexpr auto n_params = net::params.size();  // expected-note {{in instantiation of}}
// expected-note@*:* {{in instantiation of function template specialization}}

// clang-format off
// expected-error@*:* {{static assertion failed due to requirement 'one_shape_per_key<teeny::fixed::Name<10>{"fc.weight"}>': two layers of the model have the same name but parameters of different shapes or dtypes}}
// clang-format on
