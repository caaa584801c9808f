#pragma once
// How each kernel family (one .cu file) lists its entry points for find_kernel (runtime.cu).
// Internal to kernels/cuda: module code sees only runtime.hpp.
#include <cstddef>

namespace teeny::cuda_kernels {

struct KernelEntry {
  const char* name;    // the entry point's symbol, e.g. "teeny_unary_f32"
  const void* kernel;  // its host-side handle, what cudaLaunchKernel takes
};

struct KernelTable {
  const KernelEntry* entries;
  std::size_t count;
};

// A family's table of all its entries.
template <std::size_t N>
constexpr KernelTable table_of(const KernelEntry (&entries)[N]) noexcept {
  return {entries, N};
}

}  // namespace teeny::cuda_kernels

// The entry of the __global__ function `symbol`: its name as find_kernel is asked for it, and its
// handle, written once so that the two cannot differ.
#define TEENY_KERNEL_ENTRY(symbol) \
  ::teeny::cuda_kernels::KernelEntry { #symbol, reinterpret_cast<const void*>(&(symbol)) }

namespace teeny::cuda_kernels {

KernelTable elementwise_kernels() noexcept;
KernelTable shape_kernels() noexcept;
KernelTable pool_kernels() noexcept;
KernelTable reduce_kernels() noexcept;
KernelTable norm_kernels() noexcept;
KernelTable linear_kernels() noexcept;
KernelTable conv_kernels() noexcept;
KernelTable sequence_kernels() noexcept;
KernelTable optimizer_kernels() noexcept;
KernelTable loss_kernels() noexcept;

}  // namespace teeny::cuda_kernels
