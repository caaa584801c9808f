// Must not compile: an op without `grid` cannot join an op set; the message says what to write and
// the note under it names the op. Checked with `clang -fsyntax-only -Xclang -verify`.
#include <cstddef>
#include <optional>
#include <span>
#include <string_view>
#include <tuple>
#include <vector>

import teeny;

#include "compile_fail/common_op.hpp"

namespace user {
struct gridless_op : copy_op {
  void grid() = delete;  // hides copy_op::grid(const ConcreteShape&)
};
}  // namespace user

// expected-note@+1 {{in instantiation of template type alias 'extend_ops' requested here}}
using my_ops = teeny::extend_ops<teeny::standard_ops<float>, user::gridless_op>;
// clang-format off
// expected-error@*:* {{static assertion failed due to requirement 'always_false<user::gridless_op>': a runtime op needs `Dim3 grid(const ConcreteShape& output) const`, blocks per grid of its launch}}
// expected-note@*:* {{in instantiation of function template specialization 'teeny::check_executable_op<user::gridless_op>' requested here}}
// expected-note@*:* {{in instantiation of static data member 'teeny::op_checks_detail::extend<}}
// expected-note@*:* {{in instantiation of template class 'teeny::op_checks_detail::extend<}}
// clang-format on
