// Must not compile (training builds): an op that declares BackwardArgs, loaded for training on the
// CPU, whose backward kernel takes other parameters than its BackwardArgs. The mistake is a compile
// error naming the backend and the op, not an op silently without a gradient. (Without training
// there is no backward to check.)
#include <cstddef>
#include <optional>
#include <span>
#include <string_view>
#include <tuple>
#include <vector>

import teeny;

#include "compile_fail/common_op.hpp"

#if TEENY_TRAINING
namespace user {
struct CopyBackwardArgs {
  teeny::TensorView<const float> dy;
  teeny::TensorView<float> dx;
  auto fields() const { return std::tie(dy, dx); }
};

struct trainable_copy_op : copy_op {
  using BackwardArgs = CopyBackwardArgs;
  teeny::Result<BackwardArgs> pack_backward_args(const teeny::BackwardBindings&) const { return BackwardArgs{}; }
  teeny::Dim3 backward_grid(std::span<const teeny::ConcreteShape>, const teeny::ConcreteShape&) const { return {}; }
};

teeny::Result<teeny::NoState> prepare_kernel(const trainable_copy_op&, const CopyArgs&, teeny::CpuContext&) {
  return teeny::NoState{};
}
void run_kernel(const trainable_copy_op&, const CopyArgs&, teeny::NoState&, teeny::CpuContext&) {}
// The mistake: the backward kernel takes the forward's Args, not BackwardArgs.
teeny::Result<teeny::NoState> prepare_backward_kernel(const trainable_copy_op&, const CopyArgs&, teeny::CpuContext&) {
  return teeny::NoState{};
}
void run_backward_kernel(const trainable_copy_op&, const CopyArgs&, teeny::NoState&, teeny::CpuContext&) {}
}  // namespace user

using my_ops = teeny::extend_ops<teeny::standard_ops<float>, user::trainable_copy_op>;

auto load(const teeny::Graph& graph) {
  // expected-note@+1 {{in instantiation of}}
  return teeny::load_cpu_for_training(graph, teeny::standard_lowering<float, my_ops>{}, {});
}
// clang-format off
// expected-error@*:* {{static assertion failed due to requirement 'always_false<user::trainable_copy_op>': an op with BackwardArgs has no backward kernel for this backend, or one with other parameters: declare `Result<State> prepare_backward_kernel(const Op&, const Op::BackwardArgs&, Backend&)` and `void run_backward_kernel(const Op&, const Op::BackwardArgs&, State&, Backend&)` in the op's namespace}}
// expected-note@*:* {{in instantiation of function template specialization 'teeny::check_backward_kernel<teeny::CpuContext, user::trainable_copy_op>' requested here}}
// The rest of the instantiation stack, down to load() above:
// expected-note@*:* 0+ {{in instantiation of}}
// expected-note@*:* 0+ {{skipping}}
// clang-format on
#else
// expected-no-diagnostics
#endif
