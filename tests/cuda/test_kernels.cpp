// The CUDA kernels against the CPU backend's, over the table of op cases (tests/ops/cases.hpp):
// each case run on the GPU in f32, f64, f16 and bf16 and by the CPU kernel in f64 on the same
// (rounded) inputs, forward and, in training builds, backward. Without a GPU the cases still pack
// every launch's arguments in every dtype (and run the CPU reference), then print why they skip
// the launch. Cases the table's shape cannot hold are in tests/cuda/test_backward_*.cpp.
#include "cuda/kernel_check.hpp"
#include "ops/cases.hpp"

using namespace kernel_check;  // NOLINT(google-build-using-namespace): the harness, in every case

TEST_CASE("cuda kernels: every op case on the GPU in four dtypes, as the CPU computes it in f64") {
  for_each_op_case([](const auto& c) {
    CAPTURE(c.name);
    check_against_cpu(c.make, c.operands, c.out, c.phase, c.tolerance);
  });
}

#if TEENY_TRAINING
TEST_CASE("cuda backward: every op case's backward on the GPU in four dtypes, as the CPU's in f64") {
  for_each_op_case([](const auto& c) {
    using Op = decltype(c.make.template operator()<double>());
    if constexpr (teeny::BackwardOp<Op>) {
      if (!c.backward) return;  // refused on every backend (tests/ops/test_cases.cpp checks it)
      CAPTURE(c.name);
      check_backward_against_cpu(c.make, c.operands, c.out, c.backward_phase, c.tolerance);
    }
  });
}
#endif

TEST_CASE("an RMS norm without eps takes its dtype's machine epsilon, as PyTorch's torch.finfo(dtype).eps") {
  const auto eps_of = []<class T>() {
    teeny::rms_norm_op<T> op;
    op.attrs.normalized_shape = {4};
    op.out = output<T>({2, 4});
    std::vector<T> x(8);
    std::vector<T> y(8);
    const TensorBinding inputs[] = {{x.data(), teeny::dtype_of<T>, {2, 4}, 0}};
    const TensorBinding params[] = {{x.data(), teeny::dtype_of<T>, {4}, 0}};
    auto args = op.pack_args({inputs, params, {y.data(), teeny::dtype_of<T>, {2, 4}, 0}});
    REQUIRE(args);
    return args->eps;
  };
  CHECK(eps_of.operator()<float>() == 0x1p-23);
  CHECK(eps_of.operator()<double>() == 0x1p-52);
  CHECK(eps_of.operator()<teeny::f16>() == 0x1p-10);
  CHECK(eps_of.operator()<teeny::bf16>() == 0x1p-7);
}
