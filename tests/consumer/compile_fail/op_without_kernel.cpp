// Must not compile: an op set loaded on the CPU whose op has no CPU kernel; the message says what
// to declare and the note under it names the backend and the op.
#include <cstddef>
#include <optional>
#include <span>
#include <string_view>
#include <tuple>
#include <vector>

import teeny;

#include "compile_fail/common_op.hpp"

using my_ops = teeny::extend_ops<teeny::standard_ops<float>, user::copy_op>;  // no prepare_kernel/run_kernel

auto load(const teeny::Graph& graph) {
  // expected-note@+1 {{in instantiation of}}
  return teeny::load_cpu(graph, teeny::standard_lowering<float, my_ops>{}, {});
}
// clang-format off
// expected-error@*:* {{static assertion failed due to requirement 'always_false<user::copy_op>': an op of the op set has no kernel for this backend: declare `Result<State> prepare_kernel(const Op&, const Op::Args&, Backend&)` and `void run_kernel(const Op&, const Op::Args&, State&, Backend&)` in the op's namespace}}
// expected-note@*:* {{in instantiation of function template specialization 'teeny::check_kernel<teeny::CpuContext, user::copy_op>' requested here}}
// The rest of the instantiation stack, down to load() above:
// expected-note@*:* 0+ {{in instantiation of}}
// expected-note@*:* 0+ {{skipping}}
// clang-format on
