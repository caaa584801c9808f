#pragma once
// Marks functions that are compiled both by clang (CPU backend) and by nvcc (CUDA kernels), so
// that the per-element math the CPU tests prove is the very code the GPU runs.
#if defined(__CUDACC__)
#define TEENY_HD __host__ __device__
#else
#define TEENY_HD
#endif
