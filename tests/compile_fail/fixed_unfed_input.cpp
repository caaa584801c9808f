// Must not compile: a typed model with inputs "image" and "meta" run with only "image" fed. The
// message names the input that is missing. Checked with `clang -fsyntax-only -Xclang -verify`.
#include <span>
#include <vector>

import teeny;

namespace tf = teeny::fixed;
constexpr tf::Linear<"image_fc", 8, 6> image_fc;
constexpr tf::Linear<"meta_fc", 4, 6> meta_fc;
using two = tf::Model<decltype(tf::add(image_fc(tf::input<"image", float, 2, 8>()),
                                       meta_fc(tf::input<"meta", float, 2, 4>())))>;

auto run(two& model, const std::vector<float>& image) {
  return model.forward(tf::feed<"image">(image));  // expected-note {{in instantiation of}}
}

// clang-format off
// expected-error@*:* {{static assertion failed due to requirement 'fed<teeny::fixed::Name<5>{"meta"}>': forward: an input of the model is not fed}}
// expected-note@*:* {{in instantiation of function template specialization 'teeny::fixed::model_detail::check_fed<}}
// clang-format on
