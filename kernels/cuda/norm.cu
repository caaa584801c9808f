// Normalisation kernels: batch norm (in the eval phase its running statistics, or the batch's own
// without them; in the training phase the batch's own, the running ones moved as PyTorch moves
// them), layer norm, RMS norm and group norm, one block a channel, row or group, its statistics
// summed in double over the block as the CPU kernels sum them (two passes: the mean, then squared
// deviations). Instantiated per element type as teeny_<op>_<dtype>; the affine forms are
// kernels/math/norm.hpp's.
//
// Their backward (training), teeny_<op>_backward_<dtype>, is the CPU's: statistics recomputed from
// x as the forward computed them, dx by one block a channel (batch norm), row or (sample, group),
// and each element of dweight and dbias summed by one thread over every row or sample and added
// once: no atomics on the gradients, the same result every run. Batch norm's dweight and dbias
// come from its channel's block; a row norm's from blocks of 32 columns (a warp a row at a time),
// a group norm's from blocks of up to 8 channels of one group, after the blocks that make dx.
#include <cuda_runtime.h>

#include "cuda/device_tensor.cuh"
#include "cuda/registry.hpp"
#include "math/gradient.hpp"
#include "math/norm.hpp"

namespace teeny::cuda_kernels {
namespace {

struct Moments {
  double mean = 0;
  double var = 0;
};

// Mean and biased variance of `runs` runs of `length` elements, `stride` apart, over the block.
template <class T>
__device__ Moments block_moments(const T* x, std::int64_t runs, std::int64_t length, std::int64_t stride) {
  const std::int64_t count = runs * length;
  if (count == 0) return {};
  double sum = 0;
  for (std::int64_t i = threadIdx.x; i < count; i += blockDim.x)
    sum += static_cast<double>(load(x + (i / length) * stride + i % length));
  const double mean = block_sum(sum) / static_cast<double>(count);
  double squares = 0;
  for (std::int64_t i = threadIdx.x; i < count; i += blockDim.x) {
    const double d = static_cast<double>(load(x + (i / length) * stride + i % length)) - mean;
    squares += d * d;
  }
  return {mean, block_sum(squares) / static_cast<double>(count)};
}

template <class T>
__device__ double value_or(const DeviceTensor<const T>& t, std::int64_t i, double otherwise) {
  return t.data != nullptr ? static_cast<double>(load(t.data + i)) : otherwise;
}

// Whether the launch runs in the training phase (the context's phase, in device memory; null: eval).
__device__ inline bool in_training(const DevicePhase* phase) { return phase != nullptr && phase->training != 0; }

// num_batches_tracked + 1, the count this batch makes, as every block of the launch sees it, the
// count itself incremented once. Blocks run in any order, so none may read the count after another
// wrote it: each block takes a ticket by adding 2^40 (the low 40 bits keep the count as it was),
// and the block that takes the last ticket takes all of them back and adds the 1. (The count must
// stay below 2^40, and the grid below 2^23 blocks.)
__device__ inline std::int64_t count_batch(std::int64_t* count) {
  __shared__ std::int64_t batches;
  if (threadIdx.x == 0) {
    constexpr unsigned long long ticket = 1ull << 40;
    auto* p = reinterpret_cast<unsigned long long*>(count);
    const unsigned long long seen = atomicAdd(p, ticket);
    if ((seen >> 40) + 1 == gridDim.x) atomicAdd(p, 1ull - gridDim.x * ticket);  // mod 2^64: the count + 1
    batches = static_cast<std::int64_t>(seen & (ticket - 1)) + 1;
  }
  __syncthreads();
  return batches;
}

template <class T>
__device__ void batch_norm(const DeviceTensor<const T>& x, const DeviceTensor<const T>& weight,
                           const DeviceTensor<const T>& bias, const DeviceTensor<T>& running_mean,
                           const DeviceTensor<T>& running_var, const DeviceTensor<T>& y, double eps,
                           const math::Epilogue& epilogue, const DeviceTensor<std::int64_t>& num_batches_tracked,
                           double momentum, const DevicePhase* phase) {
  using C = compute_t<T>;
  const std::int64_t n = x.shape[0];
  const std::int64_t channels = x.shape[1];
  const std::int64_t s = x.shape[2];
  const bool training = in_training(phase);
  // Training with running statistics moves them as the CPU's batch_norm_train does: the count
  // first, then momentum or (momentum < 0) the cumulative average, with the unbiased variance.
  const bool tracking = training && running_mean.data != nullptr;
  double factor = momentum;
  if (tracking && num_batches_tracked.data != nullptr) {
    const std::int64_t batches = count_batch(num_batches_tracked.data);
    if (momentum < 0) factor = 1.0 / static_cast<double>(batches);
  }
  const double count = static_cast<double>(n * s);
  for (std::int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
    Moments m;
    if (!training && running_mean.data != nullptr) {
      m = {static_cast<double>(load(running_mean.data + c)), static_cast<double>(load(running_var.data + c))};
    } else {
      m = block_moments(x.data + c * s, n, s, channels * s);
    }
    if (tracking && threadIdx.x == 0) {
      const double unbiased = count > 1 ? m.var * count / (count - 1) : m.var;
      const double mean = static_cast<double>(load(running_mean.data + c));
      const double var = static_cast<double>(load(running_var.data + c));
      store(running_mean.data + c, static_cast<C>((1 - factor) * mean + factor * m.mean));
      store(running_var.data + c, static_cast<C>((1 - factor) * var + factor * unbiased));
    }
    const auto affine = math::batch_norm_affine(value_or(weight, c, 1.0), value_or(bias, c, 0.0), m.mean, m.var, eps);
    const auto scale = static_cast<C>(affine.scale);
    const auto shift = static_cast<C>(affine.shift);
    for (std::int64_t i = threadIdx.x; i < n * s; i += blockDim.x) {
      const std::int64_t offset = ((i / s) * channels + c) * s + i % s;
      store(y.data + offset, math::apply_epilogue(epilogue, load(x.data + offset) * scale + shift));
    }
  }
}

template <class T>
__device__ void layer_norm(const DeviceTensor<const T>& x, const DeviceTensor<const T>& weight,
                           const DeviceTensor<const T>& bias, const DeviceTensor<T>& y, double eps) {
  using C = compute_t<T>;
  const std::int64_t rows = x.shape[0];
  const std::int64_t d = x.shape[1];
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const Moments m = block_moments(x.data + r * d, 1, d, d);
    const auto norm = math::normalize_affine(m.mean, m.var, eps);
    for (std::int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      C v = load(x.data + r * d + i) * static_cast<C>(norm.scale) + static_cast<C>(norm.shift);
      if (weight.data != nullptr) v = v * load(weight.data + i) + (bias.data != nullptr ? load(bias.data + i) : C(0));
      store(y.data + r * d + i, v);
    }
  }
}

template <class T>
__device__ void rms_norm(const DeviceTensor<const T>& x, const DeviceTensor<const T>& weight, const DeviceTensor<T>& y,
                         double eps) {
  using C = compute_t<T>;
  const std::int64_t rows = x.shape[0];
  const std::int64_t d = x.shape[1];
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    double squares = 0;
    for (std::int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      const double v = static_cast<double>(load(x.data + r * d + i));
      squares += v * v;
    }
    squares = block_sum(squares);
    const auto scale = static_cast<C>(math::rms_norm_scale(d == 0 ? 0.0 : squares / static_cast<double>(d), eps));
    for (std::int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      C v = load(x.data + r * d + i) * scale;
      if (weight.data != nullptr) v = v * load(weight.data + i);
      store(y.data + r * d + i, v);
    }
  }
}

template <class T>
__device__ void group_norm(const DeviceTensor<const T>& x, const DeviceTensor<const T>& weight,
                           const DeviceTensor<const T>& bias, const DeviceTensor<T>& y, std::int64_t groups,
                           double eps) {
  using C = compute_t<T>;
  const std::int64_t channels = x.shape[1];
  const std::int64_t s = x.shape[2];
  const std::int64_t per_group = channels / groups;
  const std::int64_t span = per_group * s;  // a group's channels are contiguous
  const std::int64_t blocks = x.shape[0] * groups;
  for (std::int64_t ng = blockIdx.x; ng < blocks; ng += gridDim.x) {
    const Moments m = block_moments(x.data + ng * span, 1, span, span);
    const auto norm = math::normalize_affine(m.mean, m.var, eps);
    for (std::int64_t i = threadIdx.x; i < span; i += blockDim.x) {
      const std::int64_t c = (ng % groups) * per_group + i / s;
      const double w = value_or(weight, c, 1.0);
      const C scale = static_cast<C>(norm.scale * w);
      const C shift = static_cast<C>(norm.shift * w + value_or(bias, c, 0.0));
      store(y.data + ng * span + i, load(x.data + ng * span + i) * scale + shift);
    }
  }
}

// dL/d(pre-activation) of one element: dy through the fused activation's derivative, which a fused
// epilogue takes from the output (as the CPU's epilogue_backward).
template <class T>
__device__ compute_t<T> pre_activation_grad(const math::Epilogue& e, const T* dy, const T* y) {
  const compute_t<T> g = load(dy);
  return e.active ? g * math::unary_derivative_from_output(e.fn, load(y), e.params) : g;
}

// One block a channel, as the CPU's run_backward_kernel: with batch statistics (training, or no
// running ones) dx += w * inv_std * (dz - mean(dz) - x_hat * mean(dz * x_hat)), with running ones
// dx += w * inv_std * dz; dw += sum(dz * x_hat), db += sum(dz).
template <class T>
__device__ void batch_norm_backward(const DeviceTensor<const T>& x, const DeviceTensor<const T>& weight,
                                    const DeviceTensor<T>& running_mean, const DeviceTensor<T>& running_var,
                                    const DeviceTensor<T>& y, double eps, const math::Epilogue& epilogue,
                                    const DeviceTensor<T>& dy, const DeviceTensor<T>& dx,
                                    const DeviceTensor<T>& dweight, const DeviceTensor<T>& dbias,
                                    const DevicePhase* phase) {
  using C = compute_t<T>;
  const std::int64_t n = x.shape[0];
  const std::int64_t channels = x.shape[1];
  const std::int64_t s = x.shape[2];
  const double count = static_cast<double>(n * s);
  // The forward normalised by the batch's statistics in training (and without running ones):
  // then the mean and variance depend on x too.
  const bool batch_stats = in_training(phase) || running_mean.data == nullptr;
  for (std::int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
    Moments m;
    if (batch_stats) {
      m = block_moments(x.data + c * s, n, s, channels * s);
    } else {
      m = {static_cast<double>(load(running_mean.data + c)), static_cast<double>(load(running_var.data + c))};
    }
    const double inv_std = math::normalize_affine(m.mean, m.var, eps).scale;
    double sum_dz = 0;
    double sum_dz_xhat = 0;
    for (std::int64_t i = threadIdx.x; i < n * s; i += blockDim.x) {
      const std::int64_t offset = ((i / s) * channels + c) * s + i % s;
      const auto dz = static_cast<double>(pre_activation_grad(epilogue, dy.data + offset, y.data + offset));
      sum_dz += dz;
      sum_dz_xhat += dz * (static_cast<double>(load(x.data + offset)) - m.mean) * inv_std;
    }
    sum_dz = block_sum(sum_dz);
    sum_dz_xhat = block_sum(sum_dz_xhat);
    if (threadIdx.x == 0) {
      if (dweight.data != nullptr) store(dweight.data + c, load(dweight.data + c) + static_cast<C>(sum_dz_xhat));
      if (dbias.data != nullptr) store(dbias.data + c, load(dbias.data + c) + static_cast<C>(sum_dz));
    }
    if (dx.data == nullptr) continue;
    const double scale = value_or(weight, c, 1.0) * inv_std;
    const double mean_dz = batch_stats ? sum_dz / count : 0.0;
    const double mean_dz_xhat = batch_stats ? sum_dz_xhat / count : 0.0;
    for (std::int64_t i = threadIdx.x; i < n * s; i += blockDim.x) {
      const std::int64_t offset = ((i / s) * channels + c) * s + i % s;
      const auto dz = static_cast<double>(pre_activation_grad(epilogue, dy.data + offset, y.data + offset));
      const double xhat = (static_cast<double>(load(x.data + offset)) - m.mean) * inv_std;
      store(dx.data + offset, load(dx.data + offset) + static_cast<C>(scale * (dz - mean_dz - xhat * mean_dz_xhat)));
    }
  }
}

// The sum of `v` over the warp, returned to every lane (a butterfly: each lane adds the same pairs).
__device__ inline double warp_sum(double v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// dx of row r of a layer norm (Rms false) or RMS norm (true), by the block, as the CPU's:
// layer norm dx += inv_std * (g - mean(g) - x_hat * mean(g * x_hat)), RMS norm dx += r * (g - x *
// r^2 * mean(g * x)), with g = dy * weight.
template <bool Rms, class T>
__device__ void row_norm_dx(const DeviceTensor<const T>& x, const DeviceTensor<const T>& weight,
                            const DeviceTensor<T>& dy, const DeviceTensor<T>& dx, double eps, std::int64_t r) {
  using C = compute_t<T>;
  const std::int64_t d = x.shape[1];
  const T* xr = x.data + r * d;
  const T* dyr = dy.data + r * d;
  T* dxr = dx.data + r * d;
  const auto g = [&](std::int64_t i) { return static_cast<double>(load(dyr + i)) * value_or(weight, i, 1.0); };
  if constexpr (Rms) {
    double squares = 0;
    for (std::int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      const double v = static_cast<double>(load(xr + i));
      squares += v * v;
    }
    squares = block_sum(squares);
    const double scale = math::rms_norm_scale(d == 0 ? 0.0 : squares / static_cast<double>(d), eps);
    double sum_g_x = 0;
    for (std::int64_t i = threadIdx.x; i < d; i += blockDim.x) sum_g_x += g(i) * static_cast<double>(load(xr + i));
    const double coefficient = scale * scale * block_sum(sum_g_x) / static_cast<double>(d);
    for (std::int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      const double v = static_cast<double>(load(xr + i));
      store(dxr + i, load(dxr + i) + static_cast<C>(scale * (g(i) - v * coefficient)));
    }
  } else {
    const Moments m = block_moments(xr, 1, d, d);
    const double inv_std = math::normalize_affine(m.mean, m.var, eps).scale;
    double sum_g = 0;
    double sum_g_xhat = 0;
    for (std::int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      const double gi = g(i);
      sum_g += gi;
      sum_g_xhat += gi * (static_cast<double>(load(xr + i)) - m.mean) * inv_std;
    }
    const double mean_g = block_sum(sum_g) / static_cast<double>(d);
    const double mean_g_xhat = block_sum(sum_g_xhat) / static_cast<double>(d);
    for (std::int64_t i = threadIdx.x; i < d; i += blockDim.x) {
      const double v = static_cast<double>(load(xr + i));
      store(dxr + i, load(dxr + i) + static_cast<C>(inv_std * (g(i) - mean_g - (v - m.mean) * inv_std * mean_g_xhat)));
    }
  }
}

// dweight[i] += sum over rows of dy * x_hat and dbias[i] += sum of dy, for the 32 columns from
// `first`, by the block: warp w takes rows w, w + warps, ..., recomputing each row's statistics
// as the forward computed them (x_hat = (x - mean) * inv_std, or x * r for RMS norm), its lane l
// summing column first + l; the warps' sums are then added in warp order.
template <bool Rms, class T>
__device__ void row_norm_param_grads(const DeviceTensor<const T>& x, const DeviceTensor<T>& dy,
                                     const DeviceTensor<T>& dweight, const DeviceTensor<T>& dbias, double eps,
                                     std::int64_t first) {
  using C = compute_t<T>;
  __shared__ double sums[2][32][32];  // [dweight, dbias][warp][lane]
  const std::int64_t rows = x.shape[0];
  const std::int64_t d = x.shape[1];
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int warp = static_cast<int>(threadIdx.x / 32);
  const int warps = static_cast<int>(blockDim.x / 32);
  const std::int64_t col = first + lane;
  double dw = 0;
  double db = 0;
  for (std::int64_t r = warp; r < rows; r += warps) {
    const T* xr = x.data + r * d;
    double shift = 0;
    double scale = 0;
    if constexpr (Rms) {
      double squares = 0;
      for (std::int64_t i = lane; i < d; i += 32) {
        const double v = static_cast<double>(load(xr + i));
        squares += v * v;
      }
      scale = math::rms_norm_scale(d == 0 ? 0.0 : warp_sum(squares) / static_cast<double>(d), eps);
    } else {
      double sum = 0;
      for (std::int64_t i = lane; i < d; i += 32) sum += static_cast<double>(load(xr + i));
      const double mean = d == 0 ? 0.0 : warp_sum(sum) / static_cast<double>(d);
      double squares = 0;
      for (std::int64_t i = lane; i < d; i += 32) {
        const double v = static_cast<double>(load(xr + i)) - mean;
        squares += v * v;
      }
      const double var = d == 0 ? 0.0 : warp_sum(squares) / static_cast<double>(d);
      shift = mean;
      scale = math::normalize_affine(mean, var, eps).scale;
    }
    if (col < d) {
      const auto g = static_cast<double>(load(dy.data + r * d + col));
      dw += g * ((static_cast<double>(load(xr + col)) - shift) * scale);
      db += g;
    }
  }
  sums[0][warp][lane] = dw;
  sums[1][warp][lane] = db;
  __syncthreads();
  if (warp == 0 && col < d) {
    double total_w = 0;
    double total_b = 0;
    for (int w = 0; w < warps; ++w) {
      total_w += sums[0][w][lane];
      total_b += sums[1][w][lane];
    }
    if (dweight.data != nullptr) store(dweight.data + col, load(dweight.data + col) + static_cast<C>(total_w));
    if (dbias.data != nullptr) store(dbias.data + col, load(dbias.data + col) + static_cast<C>(total_b));
  }
  __syncthreads();  // `sums` is reused by the block's next unit
}

// A row norm's backward: blocks 0 .. rows - 1 make dx a row each, the next ones dweight and dbias
// 32 columns each (grid-stride over both; blockDim a multiple of 32).
template <bool Rms, class T>
__device__ void row_norm_backward(const DeviceTensor<const T>& x, const DeviceTensor<const T>& weight, double eps,
                                  const DeviceTensor<T>& dy, const DeviceTensor<T>& dx, const DeviceTensor<T>& dweight,
                                  const DeviceTensor<T>& dbias) {
  const std::int64_t rows = dx.data != nullptr ? x.shape[0] : 0;
  const std::int64_t column_blocks = dweight.data != nullptr || dbias.data != nullptr ? (x.shape[1] + 31) / 32 : 0;
  for (std::int64_t unit = blockIdx.x; unit < rows + column_blocks; unit += gridDim.x) {
    if (unit < rows) {
      row_norm_dx<Rms>(x, weight, dy, dx, eps, unit);
    } else {
      row_norm_param_grads<Rms>(x, dy, dweight, dbias, eps, (unit - rows) * 32);
    }
  }
}

// Channels of one group whose dweight and dbias one block sums (in registers, unrolled).
constexpr int group_norm_chunk = 8;

// A group norm's backward, as the CPU's: blocks 0 .. N * groups - 1 make dx a (sample, group) each,
// dx += inv_std * (g - mean(g) - x_hat * mean(g * x_hat)) with g = dy * weight[c]; the next ones
// dweight and dbias for up to 8 channels of one group each, every thread summing its share over
// the samples (each sample's statistics recomputed by the block) before one block sum a channel.
template <class T>
__device__ void group_norm_backward(const DeviceTensor<const T>& x, const DeviceTensor<const T>& weight,
                                    std::int64_t groups, double eps, const DeviceTensor<T>& dy,
                                    const DeviceTensor<T>& dx, const DeviceTensor<T>& dweight,
                                    const DeviceTensor<T>& dbias) {
  using C = compute_t<T>;
  const std::int64_t n = x.shape[0];
  const std::int64_t channels = x.shape[1];
  const std::int64_t s = x.shape[2];
  const std::int64_t per_group = channels / groups;
  const std::int64_t span = per_group * s;  // a group's channels are contiguous
  const std::int64_t chunks = (per_group + group_norm_chunk - 1) / group_norm_chunk;
  const std::int64_t dx_units = dx.data != nullptr ? n * groups : 0;
  const std::int64_t param_units = dweight.data != nullptr || dbias.data != nullptr ? groups * chunks : 0;
  for (std::int64_t unit = blockIdx.x; unit < dx_units + param_units; unit += gridDim.x) {
    if (unit < dx_units) {
      const T* xg = x.data + unit * span;
      const T* dyg = dy.data + unit * span;
      T* dxg = dx.data + unit * span;
      const Moments m = block_moments(xg, 1, span, span);
      const double inv_std = math::normalize_affine(m.mean, m.var, eps).scale;
      const std::int64_t first_channel = (unit % groups) * per_group;
      const auto g = [&](std::int64_t i) {
        return static_cast<double>(load(dyg + i)) * value_or(weight, first_channel + i / s, 1.0);
      };
      double sum_g = 0;
      double sum_g_xhat = 0;
      for (std::int64_t i = threadIdx.x; i < span; i += blockDim.x) {
        const double gi = g(i);
        sum_g += gi;
        sum_g_xhat += gi * (static_cast<double>(load(xg + i)) - m.mean) * inv_std;
      }
      const double mean_g = block_sum(sum_g) / static_cast<double>(span);
      const double mean_g_xhat = block_sum(sum_g_xhat) / static_cast<double>(span);
      for (std::int64_t i = threadIdx.x; i < span; i += blockDim.x) {
        const double v = static_cast<double>(load(xg + i));
        store(dxg + i,
              load(dxg + i) + static_cast<C>(inv_std * (g(i) - mean_g - (v - m.mean) * inv_std * mean_g_xhat)));
      }
      continue;
    }
    const std::int64_t p = unit - dx_units;
    const std::int64_t group = p / chunks;
    const std::int64_t first = group * per_group + (p % chunks) * group_norm_chunk;
    const std::int64_t last = (group + 1) * per_group;
    double dw[group_norm_chunk] = {};
    double db[group_norm_chunk] = {};
    for (std::int64_t sample = 0; sample < n; ++sample) {
      const Moments m = block_moments(x.data + (sample * groups + group) * span, 1, span, span);
      const double inv_std = math::normalize_affine(m.mean, m.var, eps).scale;
#pragma unroll
      for (int k = 0; k < group_norm_chunk; ++k) {
        if (first + k >= last) continue;
        const std::int64_t offset = (sample * channels + first + k) * s;
        for (std::int64_t i = threadIdx.x; i < s; i += blockDim.x) {
          const auto g = static_cast<double>(load(dy.data + offset + i));
          dw[k] += g * (static_cast<double>(load(x.data + offset + i)) - m.mean) * inv_std;
          db[k] += g;
        }
      }
    }
#pragma unroll
    for (int k = 0; k < group_norm_chunk; ++k) {
      if (first + k >= last) continue;  // the same for the whole block: its block sums are reached by all
      const double total_w = block_sum(dw[k]);
      const double total_b = block_sum(db[k]);
      if (threadIdx.x == 0) {
        const std::int64_t c = first + k;
        if (dweight.data != nullptr) store(dweight.data + c, load(dweight.data + c) + static_cast<C>(total_w));
        if (dbias.data != nullptr) store(dbias.data + c, load(dbias.data + c) + static_cast<C>(total_b));
      }
    }
  }
}

}  // namespace
}  // namespace teeny::cuda_kernels

using teeny::cuda_kernels::DeviceTensor;

#define TEENY_NORM_ENTRIES(T, suffix)                                                                                  \
  extern "C" __global__ void teeny_batch_norm_##suffix(                                                                \
      DeviceTensor<const T> x, DeviceTensor<const T> weight, DeviceTensor<const T> bias, DeviceTensor<T> running_mean, \
      DeviceTensor<T> running_var, DeviceTensor<T> y, double eps, teeny::math::Epilogue epilogue,                      \
      DeviceTensor<std::int64_t> num_batches_tracked, double momentum,                                                 \
      const teeny::cuda_kernels::DevicePhase* phase) {                                                                 \
    teeny::cuda_kernels::batch_norm<T>(x, weight, bias, running_mean, running_var, y, eps, epilogue,                   \
                                       num_batches_tracked, momentum, phase);                                          \
  }                                                                                                                    \
  extern "C" __global__ void teeny_layer_norm_##suffix(DeviceTensor<const T> x, DeviceTensor<const T> weight,          \
                                                       DeviceTensor<const T> bias, DeviceTensor<T> y, double eps) {    \
    teeny::cuda_kernels::layer_norm<T>(x, weight, bias, y, eps);                                                       \
  }                                                                                                                    \
  extern "C" __global__ void teeny_rms_norm_##suffix(DeviceTensor<const T> x, DeviceTensor<const T> weight,            \
                                                     DeviceTensor<const T>, DeviceTensor<T> y, double eps) {           \
    teeny::cuda_kernels::rms_norm<T>(x, weight, y, eps);                                                               \
  }                                                                                                                    \
  extern "C" __global__ void teeny_group_norm_##suffix(DeviceTensor<const T> x, DeviceTensor<const T> weight,          \
                                                       DeviceTensor<const T> bias, DeviceTensor<T> y,                  \
                                                       std::int64_t groups, double eps) {                              \
    teeny::cuda_kernels::group_norm<T>(x, weight, bias, y, groups, eps);                                               \
  }                                                                                                                    \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::BatchNormParamList<T>,                          \
                                                  decltype(teeny_batch_norm_##suffix)>);                               \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::RowNormParamList<T>,                            \
                                                  decltype(teeny_layer_norm_##suffix)>);                               \
  static_assert(                                                                                                       \
      teeny::cuda_kernels::takes_params<teeny::cuda_kernels::RowNormParamList<T>, decltype(teeny_rms_norm_##suffix)>); \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::GroupNormParamList<T>,                          \
                                                  decltype(teeny_group_norm_##suffix)>);                               \
  extern "C" __global__ void teeny_batch_norm_backward_##suffix(                                                       \
      DeviceTensor<const T> x, DeviceTensor<const T> weight, DeviceTensor<const T>, DeviceTensor<T> running_mean,      \
      DeviceTensor<T> running_var, DeviceTensor<T> y, double eps, teeny::math::Epilogue epilogue,                      \
      DeviceTensor<std::int64_t>, double, DeviceTensor<T> dy, DeviceTensor<T> dx, DeviceTensor<T> dweight,             \
      DeviceTensor<T> dbias, const teeny::cuda_kernels::DevicePhase* phase) {                                          \
    teeny::cuda_kernels::batch_norm_backward<T>(x, weight, running_mean, running_var, y, eps, epilogue, dy, dx,        \
                                                dweight, dbias, phase);                                                \
  }                                                                                                                    \
  extern "C" __global__ void teeny_layer_norm_backward_##suffix(                                                       \
      DeviceTensor<const T> x, DeviceTensor<const T> weight, DeviceTensor<const T>, DeviceTensor<T>, double eps,       \
      DeviceTensor<T> dy, DeviceTensor<T> dx, DeviceTensor<T> dweight, DeviceTensor<T> dbias) {                        \
    teeny::cuda_kernels::row_norm_backward<false, T>(x, weight, eps, dy, dx, dweight, dbias);                          \
  }                                                                                                                    \
  extern "C" __global__ void teeny_rms_norm_backward_##suffix(                                                         \
      DeviceTensor<const T> x, DeviceTensor<const T> weight, DeviceTensor<const T>, DeviceTensor<T>, double eps,       \
      DeviceTensor<T> dy, DeviceTensor<T> dx, DeviceTensor<T> dweight, DeviceTensor<T> dbias) {                        \
    teeny::cuda_kernels::row_norm_backward<true, T>(x, weight, eps, dy, dx, dweight, dbias);                           \
  }                                                                                                                    \
  extern "C" __global__ void teeny_group_norm_backward_##suffix(                                                       \
      DeviceTensor<const T> x, DeviceTensor<const T> weight, DeviceTensor<const T>, DeviceTensor<T>,                   \
      std::int64_t groups, double eps, DeviceTensor<T> dy, DeviceTensor<T> dx, DeviceTensor<T> dweight,                \
      DeviceTensor<T> dbias) {                                                                                         \
    teeny::cuda_kernels::group_norm_backward<T>(x, weight, groups, eps, dy, dx, dweight, dbias);                       \
  }                                                                                                                    \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::BatchNormBackwardParamList<T>,                  \
                                                  decltype(teeny_batch_norm_backward_##suffix)>);                      \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::RowNormBackwardParamList<T>,                    \
                                                  decltype(teeny_layer_norm_backward_##suffix)>);                      \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::RowNormBackwardParamList<T>,                    \
                                                  decltype(teeny_rms_norm_backward_##suffix)>);                        \
  static_assert(teeny::cuda_kernels::takes_params<teeny::cuda_kernels::GroupNormBackwardParamList<T>,                  \
                                                  decltype(teeny_group_norm_backward_##suffix)>);
TEENY_CUDA_FOR_EACH_FLOAT(TEENY_NORM_ENTRIES)
#undef TEENY_NORM_ENTRIES

namespace teeny::cuda_kernels {

KernelTable norm_kernels() noexcept {
#define TEENY_NORM_ENTRY(T, suffix)                                                                                   \
  TEENY_KERNEL_ENTRY(teeny_batch_norm_##suffix), TEENY_KERNEL_ENTRY(teeny_layer_norm_##suffix),                       \
      TEENY_KERNEL_ENTRY(teeny_rms_norm_##suffix), TEENY_KERNEL_ENTRY(teeny_group_norm_##suffix),                     \
      TEENY_KERNEL_ENTRY(teeny_batch_norm_backward_##suffix), TEENY_KERNEL_ENTRY(teeny_layer_norm_backward_##suffix), \
      TEENY_KERNEL_ENTRY(teeny_rms_norm_backward_##suffix), TEENY_KERNEL_ENTRY(teeny_group_norm_backward_##suffix),
  static const KernelEntry entries[] = {TEENY_CUDA_FOR_EACH_FLOAT(TEENY_NORM_ENTRY)};
#undef TEENY_NORM_ENTRY
  return table_of(entries);
}

}  // namespace teeny::cuda_kernels
