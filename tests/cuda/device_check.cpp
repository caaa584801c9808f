// CUDA device check: runs on a machine with a GPU, and skips (exit 77, Meson's "skipped") with
// the reason printed where there is none.
#include <cstdio>

#include "cuda/runtime.hpp"

int main() {
  int count = 0;
  const int status = teeny::cuda_kernels::device_count(count);
  if (status != 0 || count == 0) {
    std::printf("SKIP: no CUDA device (%s: %s)\n", teeny::cuda_kernels::error_name(status),
                teeny::cuda_kernels::error_string(status));
    return 77;
  }
  for (int i = 0; i < count; ++i) {
    char name[256];
    int major = 0;
    int minor = 0;
    std::size_t memory = 0;
    if (teeny::cuda_kernels::device_properties(i, name, sizeof name, major, minor, memory) != 0) return 1;
    std::printf("device %d: %s, sm_%d%d, %.1f GiB\n", i, name, major, minor, static_cast<double>(memory) / (1 << 30));
  }
  return 0;
}
