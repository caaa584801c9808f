// Must not compile: an op whose Args own a std::vector cannot be packed into a kernel launch; the
// message says why and the note under it names the op.
#include <cstddef>
#include <optional>
#include <span>
#include <string_view>
#include <tuple>
#include <vector>

import teeny;

#include "compile_fail/common_op.hpp"

namespace user {
struct OwningArgs {
  teeny::TensorView<const float> x;
  std::vector<float> table;
  auto fields() const { return std::tie(x, table); }
};
struct owning_op : copy_op {
  using Args = OwningArgs;
  teeny::Result<Args> pack_args(const teeny::OpBindings&) const { return Args{}; }
};
}  // namespace user

// expected-note@+1 {{in instantiation of template type alias 'extend_ops' requested here}}
using my_ops = teeny::extend_ops<teeny::standard_ops<float>, user::owning_op>;
// clang-format off
// expected-error@*:* {{static assertion failed due to requirement 'always_false<user::owning_op>': an op's Args cannot be packed: they must be trivially copyable, since a backend copies them into a kernel launch (TensorView and scalar fields; no std::vector, std::string or other owning members)}}
// expected-note@*:* {{in instantiation of function template specialization 'teeny::check_executable_op<user::owning_op>' requested here}}
// expected-note@*:* {{in instantiation of static data member 'teeny::op_checks_detail::extend<}}
// expected-note@*:* {{in instantiation of template class 'teeny::op_checks_detail::extend<}}
// clang-format on
