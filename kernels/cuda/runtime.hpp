#pragma once
// Plain C++ view of the nvcc-built CUDA runtime helpers: no CUDA types here, so module code
// compiled by clang can call into them. Every function reports failure as a CUDA error code
// (0 = success) and never throws.
#include <cstddef>

namespace teeny::cuda_kernels {

/// Number of usable CUDA devices in `count`; returns the CUDA error code (0 when fine).
int device_count(int& count) noexcept;

/// The CUDA name and description of an error code ("cudaErrorNoDevice: no CUDA-capable device ...").
const char* error_name(int code) noexcept;
const char* error_string(int code) noexcept;

/// Device name and compute capability of device `index`.
int device_properties(int index, char* name, std::size_t name_capacity, int& major, int& minor,
                      std::size_t& total_memory) noexcept;

}  // namespace teeny::cuda_kernels
