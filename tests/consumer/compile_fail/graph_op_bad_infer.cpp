// Must not compile: a graph op whose shape inference returns a TensorType instead of a
// Result<TensorType>; GraphBuilder::add says so, and the note under it names the op.
#include <span>
#include <string>
#include <string_view>

import teeny;

namespace user {
struct Twice {
  static constexpr std::string_view kind = "twice";
  static constexpr teeny::Arity arity{1, 1};
  teeny::TensorType infer(std::span<const teeny::TensorType> inputs) const { return inputs[0]; }
  std::string attributes() const { return {}; }
  friend bool operator==(const Twice&, const Twice&) = default;
};
}  // namespace user

void build(teeny::GraphBuilder& b, teeny::Value x) {
  // expected-note@+1 {{in instantiation of function template specialization 'teeny::GraphBuilder::add<user::Twice>'}}
  b.add(user::Twice{}, {x});
}
// clang-format off
// expected-error@*:* {{static assertion failed due to requirement 'always_false<user::Twice>': a graph op's infer(std::span<const TensorType>) must return Result<TensorType> (the output type, or an error saying which input does not fit)}}
// expected-note@*:* {{in instantiation of function template specialization 'teeny::check_graph_op<user::Twice>' requested here}}
// clang-format on
