// Optimizer kernels, one launch per parameter: Adam / AdamW and SGD steps over its n elements, with
// the per-element updates of kernels/math/optimizer.hpp (the CPU optimizers' own), and the check
// that loss scaling skips a step on. A 16-bit parameter is updated in f32: through its f32 master
// copy when it has one (the copy is updated, the parameter rounded from it), else read, updated and
// rounded back. The step's scalars and the gradients' multiplier are read from device memory the
// host wrote before the launch, so a captured training step replays with each step's values.
// Instantiated per element type as teeny_<kernel>_<dtype>.
#include <cuda_runtime.h>

#include <cmath>

#include "cuda/device_tensor.cuh"
#include "cuda/registry.hpp"

namespace teeny::cuda_kernels {
namespace {

// Whether the step is to be skipped: a loss scale's check found a gradient that is not finite.
__device__ inline bool skipped(const std::uint32_t* found_inf) { return found_inf != nullptr && *found_inf != 0; }

// The gradient's multiplier (a loss scale's inverse), or 1 where there is none.
template <class U>
__device__ inline U multiplier_of(const U* grad_multiplier) {
  return grad_multiplier != nullptr ? *grad_multiplier : U{1};
}

template <class T>
__device__ void adam(T* param, const T* grad, update_t<T>* master, update_t<T>* m, update_t<T>* v, update_t<T>* v_max,
                     const math::AdamStep<update_t<T>>* step, std::int64_t n, const update_t<T>* grad_multiplier,
                     const std::uint32_t* found_inf) {
  using U = update_t<T>;
  if (skipped(found_inf)) return;
  const math::AdamStep<U> s = *step;
  const U multiplier = multiplier_of(grad_multiplier);
  const auto root = [](U x) { return sqrt(x); };
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    U value = master != nullptr ? master[i] : static_cast<U>(load(param + i));
    const U g = static_cast<U>(load(grad + i)) * multiplier;
    math::adam_update(value, g, m[i], v[i], v_max != nullptr ? v_max + i : nullptr, s, root);
    if (master != nullptr) master[i] = value;
    store(param + i, value);
  }
}

template <class T>
__device__ void sgd(T* param, const T* grad, update_t<T>* master, update_t<T>* buffer,
                    const SgdDeviceStep<update_t<T>>* step, std::int64_t n, const update_t<T>* grad_multiplier,
                    const std::uint32_t* found_inf) {
  using U = update_t<T>;
  if (skipped(found_inf)) return;
  const math::SgdStep<U> s = step->scalars;
  const bool has_buffer = step->has_buffer != 0;
  const U multiplier = multiplier_of(grad_multiplier);
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    U value = master != nullptr ? master[i] : static_cast<U>(load(param + i));
    const U g = static_cast<U>(load(grad + i)) * multiplier;
    math::sgd_update(value, g, buffer != nullptr ? buffer + i : nullptr, has_buffer, s);
    if (master != nullptr) master[i] = value;
    store(param + i, value);
  }
}

template <class T>
__device__ void non_finite(const T* grad, std::int64_t n, std::uint32_t* found_inf) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    if (!isfinite(static_cast<double>(load(grad + i)))) *found_inf = 1;  // any writer: all write 1
  }
}

}  // namespace
}  // namespace teeny::cuda_kernels

using teeny::cuda_kernels::update_t;

#define TEENY_OPTIMIZER_ENTRIES(T, suffix)                                                                             \
  extern "C" __global__ void teeny_adam_##suffix(T* param, const T* grad, update_t<T>* master, update_t<T>* m,         \
                                                 update_t<T>* v, update_t<T>* v_max,                                   \
                                                 const teeny::math::AdamStep<update_t<T>>* step, std::int64_t n,       \
                                                 const update_t<T>* grad_multiplier, const std::uint32_t* found_inf) { \
    teeny::cuda_kernels::adam<T>(param, grad, master, m, v, v_max, step, n, grad_multiplier, found_inf);               \
  }                                                                                                                    \
  extern "C" __global__ void teeny_sgd_##suffix(T* param, const T* grad, update_t<T>* master, update_t<T>* buffer,     \
                                                const teeny::cuda_kernels::SgdDeviceStep<update_t<T>>* step,           \
                                                std::int64_t n, const update_t<T>* grad_multiplier,                    \
                                                const std::uint32_t* found_inf) {                                      \
    teeny::cuda_kernels::sgd<T>(param, grad, master, buffer, step, n, grad_multiplier, found_inf);                     \
  }                                                                                                                    \
  extern "C" __global__ void teeny_non_finite_##suffix(const T* grad, std::int64_t n, std::uint32_t* found_inf) {      \
    teeny::cuda_kernels::non_finite<T>(grad, n, found_inf);                                                            \
  }                                                                                                                    \
  static_assert(                                                                                                       \
      teeny::cuda_kernels::takes_params<teeny::cuda_kernels::AdamParamList<T>, decltype(teeny_adam_##suffix)>);        \
  static_assert(                                                                                                       \
      teeny::cuda_kernels::takes_params<teeny::cuda_kernels::SgdParamList<T>, decltype(teeny_sgd_##suffix)>);          \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::NonFiniteParamList<T>,                          \
                                                  decltype(teeny_non_finite_##suffix)>);
TEENY_CUDA_FOR_EACH_FLOAT(TEENY_OPTIMIZER_ENTRIES)
#undef TEENY_OPTIMIZER_ENTRIES

namespace teeny::cuda_kernels {

KernelTable optimizer_kernels() noexcept {
#define TEENY_OPTIMIZER_ENTRY(T, suffix)                                           \
  TEENY_KERNEL_ENTRY(teeny_adam_##suffix), TEENY_KERNEL_ENTRY(teeny_sgd_##suffix), \
      TEENY_KERNEL_ENTRY(teeny_non_finite_##suffix),
  static const KernelEntry entries[] = {TEENY_CUDA_FOR_EACH_FLOAT(TEENY_OPTIMIZER_ENTRY)};
#undef TEENY_OPTIMIZER_ENTRY
  return table_of(entries);
}

}  // namespace teeny::cuda_kernels
