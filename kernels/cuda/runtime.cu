#include <cuda_runtime.h>

#include <cstring>

#include "cuda/runtime.hpp"

namespace teeny::cuda_kernels {

int device_count(int& count) noexcept {
  count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    count = 0;
    (void)cudaGetLastError();  // clear the sticky error so later calls start clean
  }
  return static_cast<int>(e);
}

const char* error_name(int code) noexcept { return cudaGetErrorName(static_cast<cudaError_t>(code)); }
const char* error_string(int code) noexcept { return cudaGetErrorString(static_cast<cudaError_t>(code)); }

int device_properties(int index, char* name, std::size_t name_capacity, int& major, int& minor,
                      std::size_t& total_memory) noexcept {
  cudaDeviceProp prop{};
  const cudaError_t e = cudaGetDeviceProperties(&prop, index);
  if (e != cudaSuccess) return static_cast<int>(e);
  if (name_capacity > 0) {
    std::strncpy(name, prop.name, name_capacity - 1);
    name[name_capacity - 1] = '\0';
  }
  major = prop.major;
  minor = prop.minor;
  total_memory = prop.totalGlobalMem;
  return 0;
}

}  // namespace teeny::cuda_kernels
