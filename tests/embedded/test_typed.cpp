// The typed path in an embedded build (-Dembedded=true): the MLP and LeNet with their weights,
// input and PyTorch's logits all compiled in (teeny-embed-weights, at build time), no heap in load
// or forward, one GEMM instruction set and no threads.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

import teeny;

#include "cpu/kernels/gemm.hpp"
#include "fixed_models.hpp"
#include "lenet_io.hpp"  // in.x, out.logits of tests/fixtures/models/lenet.safetensors
#include "lenet_weights.hpp"
#include "mlp_io.hpp"
#include "mlp_weights.hpp"
#include "support/allocation_counter.hpp"

namespace {
namespace tf = teeny::fixed;
using mlp3 = tf::Model<decltype(fixed_models::mlp(tf::input<"x", float, 3, 1, 28, 28>()))>;
using lenet3 = tf::Model<decltype(fixed_models::lenet(tf::input<"x", float, 3, 1, 28, 28>()))>;

// The compiled-in f32 tensor `key` of `table`, as floats (empty when there is none).
std::span<const float> floats(std::span<const teeny::TensorRef> table, std::string_view key) {
  for (const teeny::TensorRef& t : table) {
    if (t.name == key && t.dtype == teeny::DType::f32) {
      return {reinterpret_cast<const float*>(t.data.data()), t.data.size() / sizeof(float)};
    }
  }
  return {};
}

// Loads `model` from `weights`, runs it on io's in.x and compares with io's out.logits (PyTorch's),
// counting heap allocations over load and forward.
template <class M>
void check_against_pytorch(M& model, std::span<const teeny::TensorRef> weights, std::span<const teeny::TensorRef> io) {
  const auto x = floats(io, "in.x");
  const auto want = floats(io, "out.logits");
  REQUIRE(x.size() == M::input_size);
  REQUIRE(want.size() == M::output_size);

  // (No doctest macro in the counted window: its first message scope allocates.)
  const std::size_t allocations = test_support::allocation_count();
  auto loaded = model.load(weights);
  const bool ran = loaded && model.forward(x);
  const std::size_t after = test_support::allocation_count();
  REQUIRE_MESSAGE(loaded, (loaded ? "" : loaded.error().to_string()));
  REQUIRE(ran);
  CHECK(after == allocations);

  const auto out = model.output();
  for (std::size_t i = 0; i < M::output_size; ++i) {
    CAPTURE(i);
    CHECK(std::abs(out.data[i] - want[i]) <= 1e-6 + 1e-5 * std::abs(want[i]));
  }
}

mlp3 mlp;  // static storage, as an embedded program has its model
lenet3 lenet;
}  // namespace

TEST_CASE("embedded: the typed MLP on compiled-in weights computes PyTorch's logits, with no heap") {
  check_against_pytorch(mlp, mlp_weights::tensors, mlp_io::tensors);
}

TEST_CASE("embedded: the typed LeNet on compiled-in weights computes PyTorch's logits, with no heap") {
  check_against_pytorch(lenet, lenet_weights::tensors, lenet_io::tensors);
}

TEST_CASE("embedded: one GEMM instruction set, chosen at compile time, and no threads") {
  namespace cpu = teeny::cpu;
  const auto configured = static_cast<cpu::Isa>(TEENY_CPU_ISA_FIXED);
  CHECK(cpu::active_isa() == configured);
  CHECK(cpu::set_isa(cpu::Isa::portable) == configured);
  CHECK(cpu::active_isa() == configured);
  cpu::ThreadPool pool(4);
  CHECK(pool.size() == 1);
}
