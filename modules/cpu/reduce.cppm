// teeny.cpu:reduce — CPU kernels of softmax_op (softmax / log_softmax along one axis), reduce_op
// (sum, mean, amax, prod over axes), cumsum_op, hardmax_op, arg_reduce_op (argmax, argmin) and
// nll_loss_op. The per-element math is
// kernels/math/reduce.hpp.
module;
#include <cmath>
#include <cstdint>  // INT64_MAX

#include "math/reduce.hpp"
export module teeny.cpu:reduce;
import teeny.std;
import teeny.core;
import teeny.ops;
import :context;

export namespace teeny {

// Templates over the element type, compiled here for float and double (see the end of the file).
template <CpuReal T>
Result<NoState> prepare_kernel(const softmax_op<T>& op, const SoftmaxArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_kernel(const softmax_op<T>& op, const SoftmaxArgs<T>& args, NoState& state, CpuContext& cpu);

#if TEENY_TRAINING
template <CpuReal T>
Result<NoState> prepare_backward_kernel(const softmax_op<T>& op, const InputGradArgs<SoftmaxArgs<T>, T>& args,
                                        CpuContext& cpu);
template <CpuReal T>
void run_backward_kernel(const softmax_op<T>& op, const InputGradArgs<SoftmaxArgs<T>, T>& args, NoState& state,
                         CpuContext& cpu);
template <CpuReal T>
Result<NoState> prepare_backward_kernel(const reduce_op<T>& op, const InputGradArgs<ReduceArgs<T>, T>& args,
                                        CpuContext& cpu);
template <CpuReal T>
void run_backward_kernel(const reduce_op<T>& op, const InputGradArgs<ReduceArgs<T>, T>& args, NoState& state,
                         CpuContext& cpu);
template <CpuReal T>
Result<NoState> prepare_backward_kernel(const cumsum_op<T>& op, const InputGradArgs<AxisLinesArgs<T>, T>& args,
                                        CpuContext& cpu);
template <CpuReal T>
void run_backward_kernel(const cumsum_op<T>& op, const InputGradArgs<AxisLinesArgs<T>, T>& args, NoState& state,
                         CpuContext& cpu);
template <CpuReal T>
Result<NoState> prepare_backward_kernel(const nll_loss_op<T>& op, const NllLossBackwardArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_backward_kernel(const nll_loss_op<T>& op, const NllLossBackwardArgs<T>& args, NoState& state, CpuContext& cpu);
#endif

template <CpuReal T>
Result<NoState> prepare_kernel(const cumsum_op<T>& op, const AxisLinesArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_kernel(const cumsum_op<T>& op, const AxisLinesArgs<T>& args, NoState& state, CpuContext& cpu);
template <CpuReal T>
Result<NoState> prepare_kernel(const hardmax_op<T>& op, const AxisLinesArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_kernel(const hardmax_op<T>& op, const AxisLinesArgs<T>& args, NoState& state, CpuContext& cpu);
template <CpuReal T>
Result<NoState> prepare_kernel(const arg_reduce_op<T>& op, const ArgReduceArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_kernel(const arg_reduce_op<T>& op, const ArgReduceArgs<T>& args, NoState& state, CpuContext& cpu);
template <CpuReal T>
Result<NoState> prepare_kernel(const nll_loss_op<T>& op, const NllLossArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_kernel(const nll_loss_op<T>& op, const NllLossArgs<T>& args, NoState& state, CpuContext& cpu);

/// A reduction's loop nest, worked out once at load: x's dims (size-1 ones dropped) merged into runs
/// that are all kept or all reduced. Each output row is a run of `inner` contiguous outputs.
struct ReducePlan {
  std::int64_t rows = 0;          // output rows
  std::int64_t inner = 1;         // outputs per row: x's innermost run when it is kept, else 1
  std::int64_t inner_stride = 0;  // x's stride along that run
  ConcreteShape row_shape;        // the other kept runs (they address a row), and x's strides
  ConcreteShape row_strides;
  ConcreteShape reduced_shape;  // the reduced runs, and x's strides
  ConcreteShape reduced_strides;
  std::int64_t count = 1;  // elements reduced into each output
};

template <CpuReal T>
Result<ReducePlan> prepare_kernel(const reduce_op<T>& op, const ReduceArgs<T>& args, CpuContext& cpu);
template <CpuReal T>
void run_kernel(const reduce_op<T>& op, const ReduceArgs<T>& args, ReducePlan& plan, CpuContext& cpu);

}  // namespace teeny

namespace teeny {
namespace {
constexpr std::int64_t chunk = 1 << 14;  // elements per task: big enough to amortise a wake-up
constexpr std::int64_t block = 64;       // columns handled together when the reduced axis is not innermost

// Number of tasks for `jobs` jobs of `work` elements each, and jobs per task.
struct Tasks {
  std::int64_t per_task = 1;
  std::size_t count = 0;
};
Tasks split(std::int64_t jobs, std::int64_t work) {
  Tasks t;
  t.per_task = std::max<std::int64_t>(1, chunk / std::max<std::int64_t>(work, 1));
  t.count = static_cast<std::size_t>((jobs + t.per_task - 1) / t.per_task);
  return t;
}

// Softmax of one contiguous row of n elements.
template <class T>
void softmax_row(const T* x, T* y, std::int64_t n, bool log) {
  T max = -INFINITY;
  for (std::int64_t i = 0; i < n; ++i) max = math::softmax_max(max, x[i]);
  double sum = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const T e = math::softmax_exp(x[i], max);
    if (!log) y[i] = e;
    sum += e;
  }
  if (log) {
    const auto log_sum = static_cast<T>(std::log(sum));
    for (std::int64_t i = 0; i < n; ++i) y[i] = math::log_softmax_value(x[i], max, log_sum);
  } else {
    const auto inv = static_cast<T>(1.0 / sum);
    for (std::int64_t i = 0; i < n; ++i) y[i] *= inv;
  }
}

// Softmax over n rows of `inner` floats, for columns [0, w) of the block at x / y (w <= block).
template <class T>
void softmax_columns(const T* x, T* y, std::int64_t n, std::int64_t inner, std::int64_t w, bool log) {
  T max[block];
  double sum[block];
  T scale[block];
  for (std::int64_t j = 0; j < w; ++j) {
    max[j] = -INFINITY;
    sum[j] = 0;
  }
  for (std::int64_t i = 0; i < n; ++i) {
    const T* row = x + i * inner;
    for (std::int64_t j = 0; j < w; ++j) max[j] = math::softmax_max(max[j], row[j]);
  }
  for (std::int64_t i = 0; i < n; ++i) {
    const T* row = x + i * inner;
    T* out = y + i * inner;
    for (std::int64_t j = 0; j < w; ++j) {
      const T e = math::softmax_exp(row[j], max[j]);
      if (!log) out[j] = e;
      sum[j] += e;
    }
  }
  for (std::int64_t j = 0; j < w; ++j) {
    scale[j] = log ? static_cast<T>(std::log(sum[j])) : static_cast<T>(1.0 / sum[j]);
  }
  for (std::int64_t i = 0; i < n; ++i) {
    const T* row = x + i * inner;
    T* out = y + i * inner;
    if (log) {
      for (std::int64_t j = 0; j < w; ++j) out[j] = math::log_softmax_value(row[j], max[j], scale[j]);
    } else {
      for (std::int64_t j = 0; j < w; ++j) out[j] *= scale[j];
    }
  }
}

// Folds every reduced element of the outputs [0, w) at x + base into acc (double accumulators).
template <ReduceFn F, class T>
void reduce_into(const T* x, const ReducePlan& p, std::int64_t base, std::int64_t w, double* acc) {
  for (std::int64_t j = 0; j < w; ++j) acc[j] = math::reduce_identity<F, double>();
  const std::size_t nr = p.reduced_shape.rank();
  if (nr == 0) {  // nothing reduced: a copy
    for (std::int64_t j = 0; j < w; ++j) acc[j] = math::reduce_step<F>(acc[j], double{x[base + j * p.inner_stride]});
    return;
  }
  const std::int64_t n = p.reduced_shape[nr - 1];
  const std::int64_t s = p.reduced_strides[nr - 1];
  if (n == 0) return;
  const std::int64_t outer = p.count / n;
  std::int64_t index[max_rank] = {};
  std::int64_t offset = 0;
  for (std::int64_t o = 0; o < outer; ++o) {
    const T* run = x + base + offset;
    if (w == 1) {
      // Four accumulators: a sum's dependency chain otherwise limits the loop to one add per latency.
      double a[4] = {acc[0], math::reduce_identity<F, double>(), math::reduce_identity<F, double>(),
                     math::reduce_identity<F, double>()};
      std::int64_t r = 0;
      for (; r + 4 <= n; r += 4) {
        for (int u = 0; u < 4; ++u) a[u] = math::reduce_step<F>(a[u], double{run[(r + u) * s]});
      }
      for (; r < n; ++r) a[0] = math::reduce_step<F>(a[0], double{run[r * s]});
      acc[0] = math::reduce_step<F>(math::reduce_step<F>(a[0], a[1]), math::reduce_step<F>(a[2], a[3]));
    } else {
      for (std::int64_t r = 0; r < n; ++r) {
        const T* row = run + r * s;
        for (std::int64_t j = 0; j < w; ++j) acc[j] = math::reduce_step<F>(acc[j], double{row[j * p.inner_stride]});
      }
    }
    for (std::size_t d = nr - 1; d-- > 0;) {  // odometer over the outer reduced runs
      if (++index[d] < p.reduced_shape[d]) {
        offset += p.reduced_strides[d];
        break;
      }
      offset -= (p.reduced_shape[d] - 1) * p.reduced_strides[d];
      index[d] = 0;
    }
  }
}

template <ReduceFn F, class T>
void run_reduce(const ReduceArgs<T>& args, const ReducePlan& p, CpuContext& cpu) {
  const std::int64_t blocks = (p.inner + block - 1) / block;
  const std::int64_t jobs = p.rows * blocks;
  const Tasks tasks = split(jobs, p.count * std::min(p.inner, block));
  cpu.pool().parallel_for(tasks.count, [&](std::size_t task) {
    const std::int64_t first = static_cast<std::int64_t>(task) * tasks.per_task;
    const std::int64_t last = std::min(jobs, first + tasks.per_task);
    double acc[block];
    for (std::int64_t job = first; job < last; ++job) {
      const std::int64_t row = job / blocks;
      const std::int64_t col = (job % blocks) * block;
      const std::int64_t w = std::min(block, p.inner - col);
      std::int64_t rest = row;
      std::int64_t base = col * p.inner_stride;
      for (std::size_t d = p.row_shape.rank(); d-- > 0;) {
        base += (rest % p.row_shape[d]) * p.row_strides[d];
        rest /= p.row_shape[d];
      }
      reduce_into<F>(args.x.data, p, base, w, acc);
      T* out = args.y.data + row * p.inner + col;
      for (std::int64_t j = 0; j < w; ++j) out[j] = static_cast<T>(math::reduce_finish<F>(acc[j], p.count));
    }
  });
}
}  // namespace

template <CpuReal T>
Result<NoState> prepare_kernel(const softmax_op<T>&, const SoftmaxArgs<T>&, CpuContext&) {
  return NoState{};
}

template <CpuReal T>
void run_kernel(const softmax_op<T>&, const SoftmaxArgs<T>& args, NoState&, CpuContext& cpu) {
  const std::int64_t n = args.n;
  const std::int64_t inner = args.inner;
  if (inner == 1) {  // rows are contiguous
    const Tasks tasks = split(args.outer, n);
    cpu.pool().parallel_for(tasks.count, [&](std::size_t task) {
      const std::int64_t first = static_cast<std::int64_t>(task) * tasks.per_task;
      const std::int64_t last = std::min(args.outer, first + tasks.per_task);
      for (std::int64_t r = first; r < last; ++r) softmax_row(args.x.data + r * n, args.y.data + r * n, n, args.log);
    });
    return;
  }
  // The axis is not innermost: blocks of contiguous columns, reduced down the axis together.
  const std::int64_t blocks = (inner + block - 1) / block;
  const std::int64_t jobs = args.outer * blocks;
  const Tasks tasks = split(jobs, n * std::min(inner, block));
  cpu.pool().parallel_for(tasks.count, [&](std::size_t task) {
    const std::int64_t first = static_cast<std::int64_t>(task) * tasks.per_task;
    const std::int64_t last = std::min(jobs, first + tasks.per_task);
    for (std::int64_t job = first; job < last; ++job) {
      const std::int64_t col = (job % blocks) * block;
      const std::int64_t offset = (job / blocks) * n * inner + col;
      softmax_columns(args.x.data + offset, args.y.data + offset, n, inner, std::min(block, inner - col), args.log);
    }
  });
}

template <CpuReal T>
Result<ReducePlan> prepare_kernel(const reduce_op<T>&, const ReduceArgs<T>& args, CpuContext&) {
  // Runs of x's dims: (size, stride, reduced), size-1 dims dropped, neighbours merged when their
  // elements are evenly spaced in memory.
  struct Run {
    std::int64_t size;
    std::int64_t stride;
    bool reduced;
  };
  Run runs[max_rank];
  std::size_t n = 0;
  for (std::size_t d = 0; d < args.x.rank(); ++d) {
    const std::int64_t size = args.x.shape[d];
    const std::int64_t stride = args.x.strides[d];
    const bool reduced = ((args.reduced >> d) & 1u) != 0;
    if (size == 1) continue;
    if (n > 0 && runs[n - 1].reduced == reduced && runs[n - 1].stride == stride * size) {
      runs[n - 1] = {runs[n - 1].size * size, stride, reduced};
    } else {
      runs[n++] = {size, stride, reduced};
    }
  }
  ReducePlan p;
  const bool inner_kept = n > 0 && !runs[n - 1].reduced;
  if (inner_kept) {
    p.inner = runs[n - 1].size;
    p.inner_stride = runs[n - 1].stride;
  }
  for (std::size_t i = 0; i < n - (inner_kept ? 1 : 0); ++i) {
    if (runs[i].reduced) {
      p.reduced_shape.push_back(runs[i].size);
      p.reduced_strides.push_back(runs[i].stride);
      p.count *= runs[i].size;
    } else {
      p.row_shape.push_back(runs[i].size);
      p.row_strides.push_back(runs[i].stride);
    }
  }
  p.rows = p.row_shape.numel();
  if (p.rows * p.inner != args.y.numel()) {
    return fail(Errc::internal, "reduction plan of ", args.x.shape, " gives ", p.rows * p.inner, " outputs, not ",
                args.y.numel());
  }
  return p;
}

template <CpuReal T>
void run_kernel(const reduce_op<T>&, const ReduceArgs<T>& args, ReducePlan& plan, CpuContext& cpu) {
  if (plan.rows * plan.inner == 0) return;
  switch (args.fn) {
    case ReduceFn::sum: return run_reduce<ReduceFn::sum>(args, plan, cpu);
    case ReduceFn::mean: return run_reduce<ReduceFn::mean>(args, plan, cpu);
    case ReduceFn::max: return run_reduce<ReduceFn::max>(args, plan, cpu);
    case ReduceFn::prod: return run_reduce<ReduceFn::prod>(args, plan, cpu);
  }
}

namespace {
// A running sum (in double) along the line at `in`: n elements, stride `inner`, from the end when
// `reverse`, each sum without its own element when `exclusive`; written to `out`, or added to it
// (a backward's dx +=).
template <class T>
void scan_line(const T* in, T* out, std::int64_t n, std::int64_t inner, bool exclusive, bool reverse, bool add) {
  double sum = 0;
  for (std::int64_t k = 0; k < n; ++k) {
    const std::int64_t i = (reverse ? n - 1 - k : k) * inner;
    const double before = sum;
    sum += static_cast<double>(in[i]);
    const auto v = static_cast<T>(exclusive ? before : sum);
    out[i] = add ? out[i] + v : v;
  }
}
}  // namespace

template <CpuReal T>
Result<NoState> prepare_kernel(const cumsum_op<T>&, const AxisLinesArgs<T>&, CpuContext&) {
  return NoState{};
}

template <CpuReal T>
void run_kernel(const cumsum_op<T>&, const AxisLinesArgs<T>& a, NoState&, CpuContext& cpu) {
  parallel_chunks(cpu, a.outer * a.inner, a.n, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t line = begin; line < end; ++line) {
      const std::int64_t base = (line / a.inner) * a.n * a.inner + line % a.inner;
      scan_line(a.x.data + base, a.y.data + base, a.n, a.inner, a.exclusive, a.reverse, false);
    }
  });
}

template <CpuReal T>
Result<NoState> prepare_kernel(const hardmax_op<T>&, const AxisLinesArgs<T>&, CpuContext&) {
  return NoState{};
}

template <CpuReal T>
void run_kernel(const hardmax_op<T>&, const AxisLinesArgs<T>& a, NoState&, CpuContext& cpu) {
  parallel_chunks(cpu, a.outer * a.inner, a.n, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t line = begin; line < end; ++line) {
      const std::int64_t base = (line / a.inner) * a.n * a.inner + line % a.inner;
      const T* x = a.x.data + base;
      std::int64_t best = 0;
      for (std::int64_t i = 1; i < a.n; ++i) {
        if (math::arg_replaces(x[i * a.inner], x[best * a.inner], false, false)) best = i;
      }
      for (std::int64_t i = 0; i < a.n; ++i) a.y.data[base + i * a.inner] = i == best ? T(1) : T(0);
    }
  });
}

template <CpuReal T>
Result<NoState> prepare_kernel(const arg_reduce_op<T>&, const ArgReduceArgs<T>&, CpuContext&) {
  return NoState{};
}

// A line along the axis at a time; the lines split over the threads.
template <CpuReal T>
void run_kernel(const arg_reduce_op<T>&, const ArgReduceArgs<T>& a, NoState&, CpuContext& cpu) {
  parallel_chunks(cpu, a.outer * a.inner, a.n, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t line = begin; line < end; ++line) {
      const T* x = a.x.data + (line / a.inner) * a.n * a.inner + line % a.inner;
      std::int64_t best = 0;
      for (std::int64_t i = 1; i < a.n; ++i) {
        if (math::arg_replaces(x[i * a.inner], x[best * a.inner], a.min, a.last)) best = i;
      }
      a.y.data[line] = best;
    }
  });
}

namespace {
// Term i's target (i = n * inner + d) as int64, and whether it names a class; calls
// visit(i, weight, x offset) for each term in order, the x offset valid only when the weight
// came from a class (math::nll_weight's rules).
template <class T, class Visit>
void for_each_nll_term(const NllLossArgs<T>& a, Visit visit) {
  visit_dtype(a.target_dtype, [&]<class I>(std::type_identity<I>) {
    if constexpr (std::is_integral_v<I> && !std::is_same_v<I, bool>) {
      const I* targets = static_cast<const I*>(a.target);
      const std::int64_t terms = a.n * a.inner;
      for (std::int64_t i = 0; i < terms; ++i) {
        const I raw = targets[i];
        // A u64 above int64's range is out of range, not a negative index.
        const bool fits = !std::is_unsigned_v<I> || static_cast<std::uint64_t>(raw) <= std::uint64_t{INT64_MAX};
        const auto t = static_cast<std::int64_t>(raw);
        const bool in_range = fits && t >= 0 && t < a.classes;
        const bool ignored = fits && a.ignoring && t == a.ignore_index;
        const T class_weight = !in_range ? T(0) : a.weight.data != nullptr ? a.weight.data[t] : T(1);
        const T w = math::nll_weight(ignored, in_range, class_weight);
        const std::int64_t offset = ((i / a.inner) * a.classes + (in_range ? t : 0)) * a.inner + i % a.inner;
        visit(i, w, in_range && !ignored, offset);
      }
    }
  });
}
}  // namespace

template <CpuReal T>
Result<NoState> prepare_kernel(const nll_loss_op<T>&, const NllLossArgs<T>&, CpuContext&) {
  return NoState{};
}

// One pass in target order (the loss of a classifier's batch is small work: no threads).
template <CpuReal T>
void run_kernel(const nll_loss_op<T>&, const NllLossArgs<T>& a, NoState&, CpuContext&) {
  double terms = 0;
  double weights = 0;
  for_each_nll_term(a, [&](std::int64_t i, T w, bool read, std::int64_t offset) {
    const double term = -static_cast<double>(w) * (read ? static_cast<double>(a.x.data[offset]) : 0.0);
    if (a.mode == LossMode::none) {
      a.y.data[i] = static_cast<T>(term);
    } else {
      terms += term;
      weights += static_cast<double>(w);
    }
  });
  if (a.mode != LossMode::none) a.y.data[0] = static_cast<T>(math::nll_finish(terms, weights, a.mode));
}

#if TEENY_TRAINING
template <CpuReal T>
Result<NoState> prepare_backward_kernel(const softmax_op<T>&, const InputGradArgs<SoftmaxArgs<T>, T>&, CpuContext&) {
  return NoState{};
}

template <CpuReal T>
void run_backward_kernel(const softmax_op<T>&, const InputGradArgs<SoftmaxArgs<T>, T>& g, NoState&, CpuContext& cpu) {
  if (g.dx.data == nullptr) return;
  const SoftmaxArgs<T>& f = g.forward;
  const std::int64_t n = f.n;
  const std::int64_t inner = f.inner;
  // One (outer, inner) line along the axis at a time: softmax needs sum(dy * y) over it,
  // log_softmax sum(dy); both accumulated in double.
  parallel_chunks(cpu, f.outer * inner, 2 * n, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t line = begin; line < end; ++line) {
      const std::int64_t base = (line / inner) * n * inner + line % inner;
      const T* y = f.y.data + base;
      const T* dy = g.dy.data + base;
      T* dx = g.dx.data + base;
      double sum = 0;
      for (std::int64_t i = 0; i < n; ++i) sum += f.log ? dy[i * inner] : dy[i * inner] * y[i * inner];
      const auto s = static_cast<T>(sum);
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t k = i * inner;
        dx[k] += f.log ? dy[k] - std::exp(y[k]) * s : y[k] * (dy[k] - s);
      }
    }
  });
}

template <CpuReal T>
Result<NoState> prepare_backward_kernel(const reduce_op<T>&, const InputGradArgs<ReduceArgs<T>, T>& g,
                                        CpuContext& cpu) {
  // amax counts the elements equal to each maximum first: one float per output.
  if (g.forward.fn == ReduceFn::max &&
      !cpu.reserve_scratch(static_cast<std::size_t>(g.forward.y.numel()) * sizeof(T))) {
    return fail(Errc::out_of_memory, "cannot allocate amax's tie counts");
  }
  return NoState{};
}

template <CpuReal T>
void run_backward_kernel(const reduce_op<T>&, const InputGradArgs<ReduceArgs<T>, T>& g, NoState&, CpuContext& cpu) {
  if (g.dx.data == nullptr) return;
  const ReduceArgs<T>& f = g.forward;
  const ConcreteShape& shape = f.x.shape;
  const std::size_t rank = shape.rank();
  const std::int64_t numel = shape.numel();
  // y (and dy) read with x's shape: stride 0 along the reduced dims.
  ConcreteShape y_strides = f.y.strides;
  for (std::size_t d = 0; d < rank; ++d) {
    if ((f.reduced >> d) & 1u) y_strides[d] = 0;
  }
  const std::int64_t count = f.y.numel() == 0 ? 1 : numel / f.y.numel();
  // Walks x in order (odometer), calling visit(x offset, y offset).
  const auto walk = [&](auto visit) {
    std::int64_t index[max_rank] = {};
    std::int64_t ox = 0;
    std::int64_t oy = 0;
    for (std::int64_t i = 0; i < numel; ++i) {
      visit(ox, oy, i);
      for (std::size_t axis = rank; axis-- > 0;) {
        ox += f.x.strides[axis];
        oy += y_strides[axis];
        if (++index[axis] < shape[axis]) break;
        ox -= f.x.strides[axis] * shape[axis];
        oy -= y_strides[axis] * shape[axis];
        index[axis] = 0;
      }
    }
  };
  // dx is bound like x, contiguous in x's order: element i of the walk is dx[i].
  switch (f.fn) {
    case ReduceFn::sum:
      walk([&](std::int64_t, std::int64_t oy, std::int64_t i) { g.dx.data[i] += g.dy.data[oy]; });
      break;
    case ReduceFn::mean: {
      const auto scale = T(1) / static_cast<T>(count);
      walk([&](std::int64_t, std::int64_t oy, std::int64_t i) { g.dx.data[i] += g.dy.data[oy] * scale; });
      break;
    }
    case ReduceFn::max: {
      T* ties = cpu.scratch_as<T>(0);
      for (std::int64_t j = 0; j < f.y.numel(); ++j) ties[j] = 0;
      walk([&](std::int64_t ox, std::int64_t oy, std::int64_t) {
        ties[oy] += f.x.data[ox] == f.y.data[oy] ? T(1) : T(0);
      });
      walk([&](std::int64_t ox, std::int64_t oy, std::int64_t i) {
        if (f.x.data[ox] == f.y.data[oy]) g.dx.data[i] += g.dy.data[oy] / ties[oy];
      });
      break;
    }
    case ReduceFn::prod: break;  // no backward: reduce_op's pack_backward_args refuses it
  }
}

template <CpuReal T>
Result<NoState> prepare_backward_kernel(const cumsum_op<T>&, const InputGradArgs<AxisLinesArgs<T>, T>&, CpuContext&) {
  return NoState{};
}

// dx += the scan of dy the other way round (each x_i is in the sums that come after it).
template <CpuReal T>
void run_backward_kernel(const cumsum_op<T>&, const InputGradArgs<AxisLinesArgs<T>, T>& g, NoState&, CpuContext& cpu) {
  if (g.dx.data == nullptr) return;
  const AxisLinesArgs<T>& a = g.forward;
  parallel_chunks(cpu, a.outer * a.inner, a.n, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t line = begin; line < end; ++line) {
      const std::int64_t base = (line / a.inner) * a.n * a.inner + line % a.inner;
      scan_line(g.dy.data + base, g.dx.data + base, a.n, a.inner, a.exclusive, !a.reverse, true);
    }
  });
}

template <CpuReal T>
Result<NoState> prepare_backward_kernel(const nll_loss_op<T>&, const NllLossBackwardArgs<T>&, CpuContext&) {
  return NoState{};
}

template <CpuReal T>
void run_backward_kernel(const nll_loss_op<T>&, const NllLossBackwardArgs<T>& g, NoState&, CpuContext&) {
  const NllLossArgs<T>& a = g.forward;
  double weights = 0;
  if (a.mode == LossMode::mean) for_each_nll_term(a, [&](std::int64_t, T w, bool, std::int64_t) { weights += w; });
  const double scale = a.mode == LossMode::mean ? 1.0 / weights : 1.0;
  const double loss = a.mode == LossMode::mean ? static_cast<double>(a.y.data[0]) : 0.0;
  for_each_nll_term(a, [&](std::int64_t i, T w, bool read, std::int64_t offset) {
    if (!read) return;  // an ignored target's term is constant; an out-of-range one's is NaN already
    const double dy = (a.mode == LossMode::none ? g.dy.data[i] : g.dy.data[0]) * scale;
    if (g.dx.data != nullptr) g.dx.data[offset] += static_cast<T>(-static_cast<double>(w) * dy);
    if (g.dweight.data != nullptr) {
      const std::int64_t t = (offset / a.inner) % a.classes;
      g.dweight.data[t] += static_cast<T>((-static_cast<double>(a.x.data[offset]) - loss) * dy);
    }
  });
}
#endif

// Every kernel above compiled here, once per element type: importers call these instances.
#define TEENY_CPU_INSTANCES(T)                                                                            \
  template Result<NoState> prepare_kernel(const softmax_op<T>&, const SoftmaxArgs<T>&, CpuContext&);      \
  template void run_kernel(const softmax_op<T>&, const SoftmaxArgs<T>&, NoState&, CpuContext&);           \
  template Result<ReducePlan> prepare_kernel(const reduce_op<T>&, const ReduceArgs<T>&, CpuContext&);     \
  template void run_kernel(const reduce_op<T>&, const ReduceArgs<T>&, ReducePlan&, CpuContext&);          \
  template Result<NoState> prepare_kernel(const cumsum_op<T>&, const AxisLinesArgs<T>&, CpuContext&);     \
  template void run_kernel(const cumsum_op<T>&, const AxisLinesArgs<T>&, NoState&, CpuContext&);          \
  template Result<NoState> prepare_kernel(const hardmax_op<T>&, const AxisLinesArgs<T>&, CpuContext&);    \
  template void run_kernel(const hardmax_op<T>&, const AxisLinesArgs<T>&, NoState&, CpuContext&);         \
  template Result<NoState> prepare_kernel(const arg_reduce_op<T>&, const ArgReduceArgs<T>&, CpuContext&); \
  template void run_kernel(const arg_reduce_op<T>&, const ArgReduceArgs<T>&, NoState&, CpuContext&);      \
  template Result<NoState> prepare_kernel(const nll_loss_op<T>&, const NllLossArgs<T>&, CpuContext&);     \
  template void run_kernel(const nll_loss_op<T>&, const NllLossArgs<T>&, NoState&, CpuContext&);          \
  TEENY_CPU_BACKWARD_INSTANCES(T)
#if TEENY_TRAINING
#define TEENY_CPU_BACKWARD_INSTANCES(T)                                                                                \
  template Result<NoState> prepare_backward_kernel(const softmax_op<T>&, const InputGradArgs<SoftmaxArgs<T>, T>&,      \
                                                   CpuContext&);                                                       \
  template void run_backward_kernel(const softmax_op<T>&, const InputGradArgs<SoftmaxArgs<T>, T>&, NoState&,           \
                                    CpuContext&);                                                                      \
  template Result<NoState> prepare_backward_kernel(const reduce_op<T>&, const InputGradArgs<ReduceArgs<T>, T>&,        \
                                                   CpuContext&);                                                       \
  template void run_backward_kernel(const reduce_op<T>&, const InputGradArgs<ReduceArgs<T>, T>&, NoState&,             \
                                    CpuContext&);                                                                      \
  template Result<NoState> prepare_backward_kernel(const cumsum_op<T>&, const InputGradArgs<AxisLinesArgs<T>, T>&,     \
                                                   CpuContext&);                                                       \
  template void run_backward_kernel(const cumsum_op<T>&, const InputGradArgs<AxisLinesArgs<T>, T>&, NoState&,          \
                                    CpuContext&);                                                                      \
  template Result<NoState> prepare_backward_kernel(const nll_loss_op<T>&, const NllLossBackwardArgs<T>&, CpuContext&); \
  template void run_backward_kernel(const nll_loss_op<T>&, const NllLossBackwardArgs<T>&, NoState&, CpuContext&);
#else
#define TEENY_CPU_BACKWARD_INSTANCES(T)
#endif
TEENY_CPU_INSTANCES(float)
TEENY_CPU_INSTANCES(double)
#undef TEENY_CPU_INSTANCES
#undef TEENY_CPU_BACKWARD_INSTANCES

}  // namespace teeny
