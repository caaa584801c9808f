#pragma once
// The GEMM instruction sets a test can run on, and a guard restoring the active one.
#include <vector>

#include "cpu/kernels/gemm.hpp"

namespace test_support {

// The instruction sets both this CPU and this build support (set_isa clamps the others).
inline std::vector<teeny::cpu::Isa> available_isas() {
  using teeny::cpu::Isa;
  const Isa saved = teeny::cpu::active_isa();
  std::vector<Isa> isas;
  for (const Isa isa : {Isa::portable, Isa::avx2, Isa::avx512}) {
    if (teeny::cpu::set_isa(isa) == isa) isas.push_back(isa);
  }
  teeny::cpu::set_isa(saved);
  return isas;
}

// Restores the active instruction set when a test case ends.
struct IsaGuard {
  teeny::cpu::Isa saved = teeny::cpu::active_isa();
  IsaGuard() = default;
  IsaGuard(const IsaGuard&) = delete;
  IsaGuard& operator=(const IsaGuard&) = delete;
  ~IsaGuard() { teeny::cpu::set_isa(saved); }
};

}  // namespace test_support
