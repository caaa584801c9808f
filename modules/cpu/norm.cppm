// teeny.cpu:norm — CPU kernels of the normalisation ops. Statistics are accumulated in double over
// two passes (mean, then squared deviations), so f32 results match PyTorch to ~1e-7; each element
// then goes through one multiply-add in its own type. Batch norm folds its running statistics, weight and
// bias into a per-channel scale and shift when it is prepared.
module;
#include "cpu/kernels/memory.hpp"
#include "math/elementwise.hpp"
#include "math/norm.hpp"
export module teeny.cpu:norm;
import teeny.std;
import teeny.core;
import teeny.model;
import teeny.ops;
import :context;
import :elementwise;

export namespace teeny {

template <CpuReal T>
struct BatchNormStateOf {
  cpu::MemoryArray<T> scale;  // per channel; empty when the batch's own statistics are used
  cpu::MemoryArray<T> shift;
};
using BatchNormState = BatchNormStateOf<float>;

/// What a batch_norm_op<T> kernel with running statistics takes from the CPU context's Memory
/// (see KernelMemory): its per-channel scale and shift.
template <CpuReal T>
constexpr KernelMemory batch_norm_memory(std::size_t channels) {
  return {2 * block_piece(channels * sizeof(T)), 0, 0};
}

// Templates over the element type, compiled here for float and double (see the end of the file).
template <CpuReal T>
Result<BatchNormStateOf<T>> prepare_kernel(const batch_norm_op<T>& op, const BatchNormArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_kernel(const batch_norm_op<T>& op, const BatchNormArgs<T>& args, BatchNormStateOf<T>& state, CpuContext& cpu);
#if TEENY_TRAINING
/// After the running statistics or the affine parameters changed: the eval-phase scale and shift
/// recomputed in place.
template <CpuReal T>
Result<void> refresh_kernel(const batch_norm_op<T>& op, const BatchNormArgs<T>& args, BatchNormStateOf<T>& state,
                            CpuContext& cpu);
template <CpuReal T>
Result<NoState> prepare_backward_kernel(const batch_norm_op<T>& op, const BatchNormBackwardArgs<T>& args,
                                        CpuContext& cpu);
template <CpuReal T>
void run_backward_kernel(const batch_norm_op<T>& op, const BatchNormBackwardArgs<T>& args, NoState& state,
                         CpuContext& cpu);
#endif
template <CpuReal T>
Result<NoState> prepare_kernel(const layer_norm_op<T>& op, const RowNormArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_kernel(const layer_norm_op<T>& op, const RowNormArgs<T>& args, NoState& state, CpuContext& cpu);
template <CpuReal T>
Result<NoState> prepare_kernel(const rms_norm_op<T>& op, const RowNormArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_kernel(const rms_norm_op<T>& op, const RowNormArgs<T>& args, NoState& state, CpuContext& cpu);
#if TEENY_TRAINING
template <CpuReal T>
Result<NoState> prepare_backward_kernel(const layer_norm_op<T>& op, const RowNormBackwardArgs<T>& args,
                                        CpuContext& cpu);
template <CpuReal T>
void run_backward_kernel(const layer_norm_op<T>& op, const RowNormBackwardArgs<T>& args, NoState& state,
                         CpuContext& cpu);
template <CpuReal T>
Result<NoState> prepare_backward_kernel(const rms_norm_op<T>& op, const RowNormBackwardArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_backward_kernel(const rms_norm_op<T>& op, const RowNormBackwardArgs<T>& args, NoState& state, CpuContext& cpu);
#endif
template <CpuReal T>
Result<NoState> prepare_kernel(const group_norm_op<T>& op, const GroupNormArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_kernel(const group_norm_op<T>& op, const GroupNormArgs<T>& args, NoState& state, CpuContext& cpu);
#if TEENY_TRAINING
template <CpuReal T>
Result<NoState> prepare_backward_kernel(const group_norm_op<T>& op, const GroupNormBackwardArgs<T>& args,
                                        CpuContext& cpu);
template <CpuReal T>
void run_backward_kernel(const group_norm_op<T>& op, const GroupNormBackwardArgs<T>& args, NoState& state,
                         CpuContext& cpu);
#endif

}  // namespace teeny

namespace teeny {
namespace {

struct Moments {
  double mean = 0;
  double var = 0;  // biased, as the norms use it
};

// Mean and variance of `count` elements in `runs` runs of `length`, `stride` apart.
template <class T>
Moments moments(const T* x, std::int64_t runs, std::int64_t length, std::int64_t stride) {
  const double count = static_cast<double>(runs * length);
  if (count == 0) return {};
  double sum = 0;
  for (std::int64_t r = 0; r < runs; ++r) {
    for (std::int64_t i = 0; i < length; ++i) sum += x[r * stride + i];
  }
  const double mean = sum / count;
  double squares = 0;
  for (std::int64_t r = 0; r < runs; ++r) {
    for (std::int64_t i = 0; i < length; ++i) {
      const double d = x[r * stride + i] - mean;
      squares += d * d;
    }
  }
  return {mean, squares / count};
}

// y = act(x * scale + shift) over n elements.
template <class T>
void affine_run(const T* x, T* y, std::int64_t n, T scale, T shift, const Epilogue& act) {
  if (!act.active) {
    for (std::int64_t i = 0; i < n; ++i) y[i] = x[i] * scale + shift;
  } else if (act.fn == UnaryFn::relu) {
    for (std::int64_t i = 0; i < n; ++i) {
      const T v = x[i] * scale + shift;
      y[i] = v < T(0) ? T(0) : v;  // NaN stays NaN, as in PyTorch
    }
  } else {
    for (std::int64_t i = 0; i < n; ++i) y[i] = math::apply_unary(act.fn, x[i] * scale + shift, act.params);
  }
}

constexpr Epilogue no_activation{};
}  // namespace

template <CpuReal T>
Result<BatchNormStateOf<T>> prepare_kernel(const batch_norm_op<T>&, const BatchNormArgs<T>& args, CpuContext& cpu) {
  BatchNormStateOf<T> state;
  if (args.running_mean.data == nullptr) return state;
  const std::int64_t channels = args.x.shape[1];
  state.scale = cpu::MemoryArray<T>(cpu.memory(), static_cast<std::size_t>(channels));
  state.shift = cpu::MemoryArray<T>(cpu.memory(), static_cast<std::size_t>(channels));
  if (!state.scale.ok() || !state.shift.ok()) {
    return fail(Errc::out_of_memory, "cannot allocate the scale and shift of ", channels, " channels");
  }
  for (std::int64_t c = 0; c < channels; ++c) {
    const double weight = args.weight.data != nullptr ? args.weight.data[c] : 1.0;
    const double bias = args.bias.data != nullptr ? args.bias.data[c] : 0.0;
    const auto affine =
        math::batch_norm_affine(weight, bias, args.running_mean.data[c], args.running_var.data[c], args.eps);
    state.scale[static_cast<std::size_t>(c)] = static_cast<T>(affine.scale);
    state.shift[static_cast<std::size_t>(c)] = static_cast<T>(affine.shift);
  }
  return state;
}

namespace {
// Training phase: each channel normalised by the batch's statistics, which also move the running
// ones as PyTorch moves them (num_batches_tracked first, then momentum or the cumulative average,
// with the unbiased variance).
template <class T>
void batch_norm_train(const BatchNormArgs<T>& args, CpuContext& cpu) {
  const std::int64_t n = args.x.shape[0];
  const std::int64_t channels = args.x.shape[1];
  const std::int64_t s = args.x.shape[2];
  const bool tracking = args.running_mean.data != nullptr;
  double factor = args.momentum;
  if (tracking && args.num_batches_tracked.data != nullptr) {
    const std::int64_t batches = ++*args.num_batches_tracked.data;
    if (args.momentum < 0) factor = 1.0 / static_cast<double>(batches);
  }
  const double count = static_cast<double>(n * s);
  parallel_chunks(cpu, channels, 3 * n * s, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t c = begin; c < end; ++c) {
      const Moments m = moments(args.x.data + c * s, n, s, channels * s);
      if (tracking) {
        const double unbiased = count > 1 ? m.var * count / (count - 1) : m.var;
        args.running_mean.data[c] = static_cast<T>((1 - factor) * args.running_mean.data[c] + factor * m.mean);
        args.running_var.data[c] = static_cast<T>((1 - factor) * args.running_var.data[c] + factor * unbiased);
      }
      const double weight = args.weight.data != nullptr ? args.weight.data[c] : 1.0;
      const double bias = args.bias.data != nullptr ? args.bias.data[c] : 0.0;
      const auto affine = math::batch_norm_affine(weight, bias, m.mean, m.var, args.eps);
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t offset = (i * channels + c) * s;
        affine_run(args.x.data + offset, args.y.data + offset, s, static_cast<T>(affine.scale),
                   static_cast<T>(affine.shift), args.epilogue);
      }
    }
  });
}
}  // namespace

template <CpuReal T>
void run_kernel(const batch_norm_op<T>&, const BatchNormArgs<T>& args, BatchNormStateOf<T>& state, CpuContext& cpu) {
  const std::int64_t n = args.x.shape[0];
  const std::int64_t channels = args.x.shape[1];
  const std::int64_t s = args.x.shape[2];
  if (cpu.phase().training) {
    batch_norm_train(args, cpu);
    return;
  }
  if (!state.scale.empty()) {
    parallel_chunks(cpu, n * channels, s, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t plane = begin; plane < end; ++plane) {
        const auto c = static_cast<std::size_t>(plane % channels);
        affine_run(args.x.data + plane * s, args.y.data + plane * s, s, state.scale[c], state.shift[c], args.epilogue);
      }
    });
    return;
  }
  // No running statistics: each channel is normalised by its own over the batch.
  parallel_chunks(cpu, channels, 3 * n * s, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t c = begin; c < end; ++c) {
      const Moments m = moments(args.x.data + c * s, n, s, channels * s);
      const double weight = args.weight.data != nullptr ? args.weight.data[c] : 1.0;
      const double bias = args.bias.data != nullptr ? args.bias.data[c] : 0.0;
      const auto affine = math::batch_norm_affine(weight, bias, m.mean, m.var, args.eps);
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t offset = (i * channels + c) * s;
        affine_run(args.x.data + offset, args.y.data + offset, s, static_cast<T>(affine.scale),
                   static_cast<T>(affine.shift), args.epilogue);
      }
    }
  });
}

template <CpuReal T>
Result<NoState> prepare_kernel(const layer_norm_op<T>&, const RowNormArgs<T>&, CpuContext&) {
  return NoState{};
}

template <CpuReal T>
void run_kernel(const layer_norm_op<T>&, const RowNormArgs<T>& args, NoState&, CpuContext& cpu) {
  const std::int64_t d = args.x.shape[1];
  const T* weight = args.weight.data;
  const T* bias = args.bias.data;
  parallel_chunks(cpu, args.x.shape[0], 3 * d, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const T* x = args.x.data + r * d;
      T* y = args.y.data + r * d;
      const Moments m = moments(x, 1, d, d);
      const auto norm = math::normalize_affine(m.mean, m.var, args.eps);
      affine_run(x, y, d, static_cast<T>(norm.scale), static_cast<T>(norm.shift), no_activation);
      if (weight != nullptr) {
        for (std::int64_t i = 0; i < d; ++i) y[i] = y[i] * weight[i] + (bias != nullptr ? bias[i] : T(0));
      }
    }
  });
}

template <CpuReal T>
Result<NoState> prepare_kernel(const rms_norm_op<T>&, const RowNormArgs<T>&, CpuContext&) {
  return NoState{};
}

template <CpuReal T>
void run_kernel(const rms_norm_op<T>&, const RowNormArgs<T>& args, NoState&, CpuContext& cpu) {
  const std::int64_t d = args.x.shape[1];
  const T* weight = args.weight.data;
  parallel_chunks(cpu, args.x.shape[0], 2 * d, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const T* x = args.x.data + r * d;
      T* y = args.y.data + r * d;
      double squares = 0;
      for (std::int64_t i = 0; i < d; ++i) squares += static_cast<double>(x[i]) * x[i];
      const auto scale =
          static_cast<T>(math::rms_norm_scale(d == 0 ? 0.0 : squares / static_cast<double>(d), args.eps));
      if (weight != nullptr) {
        for (std::int64_t i = 0; i < d; ++i) y[i] = x[i] * scale * weight[i];
      } else {
        for (std::int64_t i = 0; i < d; ++i) y[i] = x[i] * scale;
      }
    }
  });
}

template <CpuReal T>
Result<NoState> prepare_kernel(const group_norm_op<T>&, const GroupNormArgs<T>&, CpuContext&) {
  return NoState{};
}

template <CpuReal T>
void run_kernel(const group_norm_op<T>&, const GroupNormArgs<T>& args, NoState&, CpuContext& cpu) {
  const std::int64_t n = args.x.shape[0];
  const std::int64_t channels = args.x.shape[1];
  const std::int64_t s = args.x.shape[2];
  const std::int64_t per_group = channels / args.groups;
  const std::int64_t span = per_group * s;  // a group's channels are contiguous
  parallel_chunks(cpu, n * args.groups, 3 * span, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t ng = begin; ng < end; ++ng) {
      const T* x = args.x.data + ng * span;
      T* y = args.y.data + ng * span;
      const Moments m = moments(x, 1, span, span);
      const auto norm = math::normalize_affine(m.mean, m.var, args.eps);
      for (std::int64_t j = 0; j < per_group; ++j) {
        const std::int64_t c = (ng % args.groups) * per_group + j;
        const double weight = args.weight.data != nullptr ? args.weight.data[c] : 1.0;
        const double bias = args.bias.data != nullptr ? args.bias.data[c] : 0.0;
        affine_run(x + j * s, y + j * s, s, static_cast<T>(norm.scale * weight),
                   static_cast<T>(norm.shift * weight + bias), no_activation);
      }
    }
  });
}

#if TEENY_TRAINING
template <CpuReal T>
Result<void> refresh_kernel(const batch_norm_op<T>&, const BatchNormArgs<T>& args, BatchNormStateOf<T>& state,
                            CpuContext&) {
  for (std::size_t c = 0; c < state.scale.size(); ++c) {
    const auto i = static_cast<std::int64_t>(c);
    const double weight = args.weight.data != nullptr ? args.weight.data[i] : 1.0;
    const double bias = args.bias.data != nullptr ? args.bias.data[i] : 0.0;
    const auto affine =
        math::batch_norm_affine(weight, bias, args.running_mean.data[i], args.running_var.data[i], args.eps);
    state.scale[c] = static_cast<T>(affine.scale);
    state.shift[c] = static_cast<T>(affine.shift);
  }
  return ok();
}

template <CpuReal T>
Result<NoState> prepare_backward_kernel(const batch_norm_op<T>&, const BatchNormBackwardArgs<T>&, CpuContext&) {
  return NoState{};
}

template <CpuReal T>
void run_backward_kernel(const batch_norm_op<T>&, const BatchNormBackwardArgs<T>& g, NoState&, CpuContext& cpu) {
  const BatchNormArgs<T>& f = g.forward;
  epilogue_backward(f.epilogue, g.dy, f.y, cpu);  // dy now holds dz, before the activation
  const std::int64_t n = f.x.shape[0];
  const std::int64_t channels = f.x.shape[1];
  const std::int64_t s = f.x.shape[2];
  const double count = static_cast<double>(n * s);
  // The forward normalised by the batch's statistics in training (and without running ones):
  // then the mean and variance depend on x too.
  const bool batch_stats = cpu.phase().training || f.running_mean.data == nullptr;
  parallel_chunks(cpu, channels, 4 * n * s, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t c = begin; c < end; ++c) {
      double mean = 0;
      double var = 0;
      if (batch_stats) {
        const Moments m = moments(f.x.data + c * s, n, s, channels * s);
        mean = m.mean;
        var = m.var;
      } else {
        mean = f.running_mean.data[c];
        var = f.running_var.data[c];
      }
      const double inv_std = 1.0 / std::sqrt(var + f.eps);
      double sum_dz = 0;
      double sum_dz_xhat = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t offset = (i * channels + c) * s;
        for (std::int64_t k = 0; k < s; ++k) {
          const double dz = g.dy.data[offset + k];
          sum_dz += dz;
          sum_dz_xhat += dz * (f.x.data[offset + k] - mean) * inv_std;
        }
      }
      if (g.dweight.data != nullptr) g.dweight.data[c] += static_cast<T>(sum_dz_xhat);
      if (g.dbias.data != nullptr) g.dbias.data[c] += static_cast<T>(sum_dz);
      if (g.dx.data == nullptr) continue;
      const double weight = f.weight.data != nullptr ? f.weight.data[c] : 1.0;
      const double scale = weight * inv_std;
      const double mean_dz = batch_stats ? sum_dz / count : 0.0;
      const double mean_dz_xhat = batch_stats ? sum_dz_xhat / count : 0.0;
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t offset = (i * channels + c) * s;
        for (std::int64_t k = 0; k < s; ++k) {
          const double xhat = (f.x.data[offset + k] - mean) * inv_std;
          g.dx.data[offset + k] += static_cast<T>(scale * (g.dy.data[offset + k] - mean_dz - xhat * mean_dz_xhat));
        }
      }
    }
  });
}
#endif

#if TEENY_TRAINING
namespace {
// A row norm's backward: dx row by row in parallel (each row's statistics recomputed as the
// forward computed them), then dw and db summed over the rows on one thread (in row order).
// `row_stats(x)` gives the row's (shift, scale): x_hat = (x - shift) * scale.
template <class T, class RowStats, class Dx>
void row_norm_backward(const RowNormBackwardArgs<T>& g, CpuContext& cpu, RowStats row_stats, Dx dx_row) {
  const RowNormArgs<T>& f = g.forward;
  const std::int64_t rows = f.x.shape[0];
  const std::int64_t d = f.x.shape[1];
  if (g.dx.data != nullptr) {
    parallel_chunks(cpu, rows, 4 * d, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t r = begin; r < end; ++r) {
        const auto [shift, scale] = row_stats(f.x.data + r * d);
        dx_row(f.x.data + r * d, g.dy.data + r * d, g.dx.data + r * d, d, shift, scale);
      }
    });
  }
  if (g.dweight.data == nullptr && g.dbias.data == nullptr) return;
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* x = f.x.data + r * d;
    const T* dy = g.dy.data + r * d;
    const auto [shift, scale] = row_stats(x);
    for (std::int64_t i = 0; i < d; ++i) {
      if (g.dweight.data != nullptr) g.dweight.data[i] += static_cast<T>(dy[i] * ((x[i] - shift) * scale));
      if (g.dbias.data != nullptr) g.dbias.data[i] += dy[i];
    }
  }
}
}  // namespace

template <CpuReal T>
Result<NoState> prepare_backward_kernel(const layer_norm_op<T>&, const RowNormBackwardArgs<T>&, CpuContext&) {
  return NoState{};
}

template <CpuReal T>
void run_backward_kernel(const layer_norm_op<T>&, const RowNormBackwardArgs<T>& g, NoState&, CpuContext& cpu) {
  const std::int64_t d = g.forward.x.shape[1];
  const double eps = g.forward.eps;
  const T* weight = g.forward.weight.data;
  row_norm_backward(
      g, cpu,
      [&](const T* x) {
        const Moments m = moments(x, 1, d, d);
        return std::pair<double, double>{m.mean, 1.0 / std::sqrt(m.var + eps)};
      },
      [&](const T* x, const T* dy, T* dx, std::int64_t n, double mean, double inv_std) {
        double sum_g = 0;
        double sum_g_xhat = 0;
        for (std::int64_t i = 0; i < n; ++i) {
          const double gi = static_cast<double>(dy[i]) * (weight != nullptr ? weight[i] : T(1));
          sum_g += gi;
          sum_g_xhat += gi * (x[i] - mean) * inv_std;
        }
        const double mean_g = sum_g / static_cast<double>(n);
        const double mean_g_xhat = sum_g_xhat / static_cast<double>(n);
        for (std::int64_t i = 0; i < n; ++i) {
          const double gi = static_cast<double>(dy[i]) * (weight != nullptr ? weight[i] : T(1));
          dx[i] += static_cast<T>(inv_std * (gi - mean_g - (x[i] - mean) * inv_std * mean_g_xhat));
        }
      });
}

template <CpuReal T>
Result<NoState> prepare_backward_kernel(const rms_norm_op<T>&, const RowNormBackwardArgs<T>&, CpuContext&) {
  return NoState{};
}

template <CpuReal T>
void run_backward_kernel(const rms_norm_op<T>&, const RowNormBackwardArgs<T>& g, NoState&, CpuContext& cpu) {
  const std::int64_t d = g.forward.x.shape[1];
  const double eps = g.forward.eps;
  const T* weight = g.forward.weight.data;
  row_norm_backward(
      g, cpu,
      [&](const T* x) {
        double squares = 0;
        for (std::int64_t i = 0; i < d; ++i) squares += static_cast<double>(x[i]) * x[i];
        return std::pair<double, double>{0.0,
                                         math::rms_norm_scale(d == 0 ? 0.0 : squares / static_cast<double>(d), eps)};
      },
      [&](const T* x, const T* dy, T* dx, std::int64_t n, double, double r) {
        double sum_g_x = 0;
        for (std::int64_t i = 0; i < n; ++i) {
          sum_g_x += static_cast<double>(dy[i]) * (weight != nullptr ? weight[i] : T(1)) * x[i];
        }
        const double coefficient = r * r * sum_g_x / static_cast<double>(n);
        for (std::int64_t i = 0; i < n; ++i) {
          const double gi = static_cast<double>(dy[i]) * (weight != nullptr ? weight[i] : T(1));
          dx[i] += static_cast<T>(r * (gi - x[i] * coefficient));
        }
      });
}

template <CpuReal T>
Result<NoState> prepare_backward_kernel(const group_norm_op<T>&, const GroupNormBackwardArgs<T>&, CpuContext&) {
  return NoState{};
}

template <CpuReal T>
void run_backward_kernel(const group_norm_op<T>&, const GroupNormBackwardArgs<T>& g, NoState&, CpuContext& cpu) {
  const GroupNormArgs<T>& f = g.forward;
  const std::int64_t n = f.x.shape[0];
  const std::int64_t channels = f.x.shape[1];
  const std::int64_t s = f.x.shape[2];
  const std::int64_t per_group = channels / f.groups;
  const std::int64_t span = per_group * s;  // a group's channels are contiguous
  const auto weight = [&](std::int64_t c) {
    return f.weight.data != nullptr ? static_cast<double>(f.weight.data[c]) : 1.0;
  };
  const auto stats = [&](std::int64_t ng) {
    const Moments m = moments(f.x.data + ng * span, 1, span, span);
    return std::pair<double, double>{m.mean, 1.0 / std::sqrt(m.var + f.eps)};
  };
  if (g.dx.data != nullptr) {
    parallel_chunks(cpu, n * f.groups, 4 * span, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t ng = begin; ng < end; ++ng) {
        const auto [mean, inv_std] = stats(ng);
        const T* x = f.x.data + ng * span;
        const T* dy = g.dy.data + ng * span;
        T* dx = g.dx.data + ng * span;
        const std::int64_t first_channel = (ng % f.groups) * per_group;
        double sum_g = 0;
        double sum_g_xhat = 0;
        for (std::int64_t i = 0; i < span; ++i) {
          const double gi = dy[i] * weight(first_channel + i / s);
          sum_g += gi;
          sum_g_xhat += gi * (x[i] - mean) * inv_std;
        }
        const double mean_g = sum_g / static_cast<double>(span);
        const double mean_g_xhat = sum_g_xhat / static_cast<double>(span);
        for (std::int64_t i = 0; i < span; ++i) {
          const double gi = dy[i] * weight(first_channel + i / s);
          dx[i] += static_cast<T>(inv_std * (gi - mean_g - (x[i] - mean) * inv_std * mean_g_xhat));
        }
      }
    });
  }
  if (g.dweight.data == nullptr && g.dbias.data == nullptr) return;
  for (std::int64_t ng = 0; ng < n * f.groups; ++ng) {  // one thread: each channel sums over the batch
    const auto [mean, inv_std] = stats(ng);
    const std::int64_t first_channel = (ng % f.groups) * per_group;
    for (std::int64_t i = 0; i < span; ++i) {
      const std::int64_t c = first_channel + i / s;
      const T dy = g.dy.data[ng * span + i];
      if (g.dweight.data != nullptr)
        g.dweight.data[c] += static_cast<T>(dy * (f.x.data[ng * span + i] - mean) * inv_std);
      if (g.dbias.data != nullptr) g.dbias.data[c] += dy;
    }
  }
}
#endif

// Every kernel above compiled here, once per element type: importers call these instances.
#define TEENY_CPU_INSTANCES(T)                                                                                        \
  template Result<BatchNormStateOf<T>> prepare_kernel(const batch_norm_op<T>&, const BatchNormArgs<T>&, CpuContext&); \
  template void run_kernel(const batch_norm_op<T>&, const BatchNormArgs<T>&, BatchNormStateOf<T>&, CpuContext&);      \
  template Result<NoState> prepare_kernel(const layer_norm_op<T>&, const RowNormArgs<T>&, CpuContext&);               \
  template void run_kernel(const layer_norm_op<T>&, const RowNormArgs<T>&, NoState&, CpuContext&);                    \
  template Result<NoState> prepare_kernel(const rms_norm_op<T>&, const RowNormArgs<T>&, CpuContext&);                 \
  template void run_kernel(const rms_norm_op<T>&, const RowNormArgs<T>&, NoState&, CpuContext&);                      \
  template Result<NoState> prepare_kernel(const group_norm_op<T>&, const GroupNormArgs<T>&, CpuContext&);             \
  template void run_kernel(const group_norm_op<T>&, const GroupNormArgs<T>&, NoState&, CpuContext&);                  \
  TEENY_CPU_BACKWARD_INSTANCES(T)
#if TEENY_TRAINING
#define TEENY_CPU_BACKWARD_INSTANCES(T)                                                                                \
  template Result<void> refresh_kernel(const batch_norm_op<T>&, const BatchNormArgs<T>&, BatchNormStateOf<T>&,         \
                                       CpuContext&);                                                                   \
  template Result<NoState> prepare_backward_kernel(const batch_norm_op<T>&, const BatchNormBackwardArgs<T>&,           \
                                                   CpuContext&);                                                       \
  template void run_backward_kernel(const batch_norm_op<T>&, const BatchNormBackwardArgs<T>&, NoState&, CpuContext&);  \
  template Result<NoState> prepare_backward_kernel(const layer_norm_op<T>&, const RowNormBackwardArgs<T>&,             \
                                                   CpuContext&);                                                       \
  template void run_backward_kernel(const layer_norm_op<T>&, const RowNormBackwardArgs<T>&, NoState&, CpuContext&);    \
  template Result<NoState> prepare_backward_kernel(const rms_norm_op<T>&, const RowNormBackwardArgs<T>&, CpuContext&); \
  template void run_backward_kernel(const rms_norm_op<T>&, const RowNormBackwardArgs<T>&, NoState&, CpuContext&);      \
  template Result<NoState> prepare_backward_kernel(const group_norm_op<T>&, const GroupNormBackwardArgs<T>&,           \
                                                   CpuContext&);                                                       \
  template void run_backward_kernel(const group_norm_op<T>&, const GroupNormBackwardArgs<T>&, NoState&, CpuContext&);
#else
#define TEENY_CPU_BACKWARD_INSTANCES(T)
#endif
TEENY_CPU_INSTANCES(float)
TEENY_CPU_INSTANCES(double)
#undef TEENY_CPU_INSTANCES
#undef TEENY_CPU_BACKWARD_INSTANCES

}  // namespace teeny
